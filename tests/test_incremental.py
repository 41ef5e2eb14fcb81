"""Incremental analysis must equal a fresh analysis, after any edit sequence.

``Document.update`` re-parses only the chunks an edit touches and reuses the
findings of the others (shifted by the line delta). This test drives it with
1,000 random edit sequences over realistic training programs — character
inserts/deletes, new lines, deleted/duplicated lines, ``def``/``class``/
``else:`` lines, unbalanced brackets and triple quotes (syntax errors and their
recovery), Chinese text — and after every edit compares the result with a
fresh ``check_source`` of the same text.

Two rule sets are checked: the real rules, and a *probe* rule that reports
every call (range, related location, fix, message that depends on a module
summary fact) so the engine's shifting / reuse / fingerprint machinery is
exercised even on programs where the real rules stay silent.
"""

from __future__ import annotations

import ast
import random
import textwrap
from pathlib import Path
from typing import List

import pytest

from gradguard.engine import Document, check_source
from gradguard.analysis.summary import FactSource
from gradguard.model.findings import Finding, Fix, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule
from seed_programs import CATALOGUE_PATH, REGRESSION_SEED, fixture_catalogue, fresh_check

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------
# Realistic sources (the two seed bugs, the canonical idiom, a larger program)
# --------------------------------------------------------------------------

GRU_LOOP = '''\
import torch
import torch.nn as nn

# GRU 跨批次复用 hidden，没有 detach
gru = nn.GRU(input_size=8, hidden_size=16, batch_first=True)
head = nn.Linear(16, 1)
opt = torch.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.1)
hidden = torch.zeros(1, 4, 16)

for step in range(3):
    x = torch.randn(4, 5, 8)
    y = torch.randn(4, 1)
    out, hidden = gru(x, hidden)
    loss = ((head(out[:, -1]) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.3f}")
'''

LINEAR_STALE = REGRESSION_SEED

WORD_LM = '''\
"""A small word-level language model (训练脚本)."""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim


class RNNModel(nn.Module):
    """Encoder → LSTM → decoder."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid = nhid
        self.nlayers = nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        return F.log_softmax(decoded, dim=-1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=35):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def train(model, train_data, criterion, optimizer, ntokens, bsz, bptt=35, clip=0.25):
    model.train()
    total_loss = 0.0
    start_time = time.time()
    hidden = model.init_hidden(bsz)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i, bptt)
        # 每个 batch 开始前截断计算图
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, ntokens), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        total_loss += loss.item()
        if batch % 200 == 0 and batch > 0:
            cur_loss = total_loss / 200
            print("| batch {:5d} | loss {:5.2f} | ppl {:8.2f}".format(batch, cur_loss, math.exp(cur_loss)))
            total_loss = 0.0
    return time.time() - start_time


def evaluate(model, data_source, criterion, ntokens, bsz=10, bptt=35):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(bsz)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            total_loss += len(data) * criterion(output.view(-1, ntokens), targets).item()
            hidden = repackage_hidden(hidden)
    return total_loss / (len(data_source) - 1)


def train_buggy(model, data, optimizer, ntokens, bsz):
    hidden = model.init_hidden(bsz)
    for i in range(0, data.size(0) - 1, 35):
        x, y = get_batch(data, i)
        output, hidden = model(x, hidden)   # 没有截断：第二轮 backward 报错
        loss = F.nll_loss(output.view(-1, ntokens), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    parser = argparse.ArgumentParser(description="word LM")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=20)
    args = parser.parse_args()
    ntokens = 100
    corpus = torch.randint(0, ntokens, (2000,))
    train_data = batchify(corpus, 20)
    model = RNNModel(ntokens, 32, 32, 2)
    criterion = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        elapsed = train(model, train_data, criterion, optimizer, ntokens, 20)
        val_loss = evaluate(model, train_data, criterion, ntokens, 20)
        print(f"epoch {epoch} | time {elapsed:.1f}s | val ppl {math.exp(val_loss):.2f}")


if __name__ == "__main__":
    main()
'''


def _sources() -> List[str]:
    out = [GRU_LOOP, LINEAR_STALE, WORD_LM]
    fixtures = HERE / "fixtures"
    if fixtures.is_dir():
        for p in sorted(fixtures.rglob("*.py")):
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if 0 < len(text) < 40_000:
                out.append(text)
    return out


# --------------------------------------------------------------------------
# Random edits
# --------------------------------------------------------------------------

_CHARS = "abcxyz_019 .,:()[]{}=+-*#'\"\\\t"
_CHINESE = ["隐状态", "训练", "计算图", "梯度", "# 注释：截断", "损失"]
_LINES = [
    "def f():", "def helper(x):", "class M(nn.Module):", "else:", "elif x:", "try:", "except Exception:",
    "    pass", "return x", "hidden = hidden.detach()", "loss.backward()", "for i in range(3):",
    "if True:", "@torch.no_grad()", "with torch.no_grad():", "out, hidden = gru(x, hidden)",
    "x = repackage_hidden(x)", "    # 注释", "", "import torch", "from torch import nn",
]
_OPENERS = ["(", "[", "{", '"""', "'''", ")", "]", "}", "\\"]


def _edit(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    n = len(lines)
    li = rng.randrange(n)
    line = lines[li]
    col = rng.randint(0, len(line))
    kind = rng.random()
    if kind < 0.22:  # insert a character
        ch = rng.choice(_CHARS) if rng.random() < 0.85 else rng.choice("隐状态训练")
        lines[li] = line[:col] + ch + line[col:]
    elif kind < 0.36:  # delete a character / a short span
        if line:
            a = rng.randrange(len(line))
            lines[li] = line[:a] + line[a + rng.randint(1, 3):]
    elif kind < 0.46:  # break the line (line shift)
        indent = line[: len(line) - len(line.lstrip())] if rng.random() < 0.5 else ""
        lines[li : li + 1] = [line[:col], indent + line[col:]]
    elif kind < 0.53:  # join with the next line
        if li + 1 < n:
            lines[li : li + 2] = [line + lines[li + 1]]
    elif kind < 0.62:  # delete whole lines
        k = rng.randint(1, 3)
        del lines[li : li + k]
        if not lines:
            lines = [""]
    elif kind < 0.69:  # duplicate lines
        k = rng.randint(1, 4)
        lines[li:li] = lines[li : li + k]
    elif kind < 0.82:  # insert a def/class/else/... line at some indentation
        indent = rng.choice(["", "    ", "        ", line[: len(line) - len(line.lstrip())]])
        lines.insert(li, indent + rng.choice(_LINES))
    elif kind < 0.93:  # unbalanced bracket / triple quote
        lines[li] = line[:col] + rng.choice(_OPENERS) + line[col:]
    else:  # Chinese text
        s = rng.choice(_CHINESE)
        if s.startswith("#") or rng.random() < 0.5:
            lines[li] = line + "  " + (s if s.startswith("#") else "# " + s)
        else:
            lines[li] = line[:col] + s + line[col:]
    return "\n".join(lines)


def _norm(f: Finding):
    return (f.code, f.range, tuple(sorted(f.message.items())), f.severity, f.related, f.fixes,
            repr(sorted(f.data.items(), key=repr)) if f.data else "")


def _assert_same(doc_result, text: str, history: List[str], external=None):
    fresh = check_source(text, "prog.py", external_facts=external)
    got = [_norm(f) for f in doc_result.findings]
    want = [_norm(f) for f in fresh.findings]
    if got != want or (doc_result.syntax_error is None) != (fresh.syntax_error is None):
        raise AssertionError(
            "incremental != fresh after %d edits\n--- previous text ---\n%s\n--- text ---\n%s\n"
            "--- incremental ---\n%r\n--- fresh ---\n%r\n(syntax: %s / %s)"
            % (len(history), history[-1] if history else "", text, got, want,
               doc_result.syntax_error, fresh.syntax_error)
        )
    assert doc_result.syntax_error == fresh.syntax_error


# --------------------------------------------------------------------------
# A probe rule: reports every call, using a module-summary fact in its message
# --------------------------------------------------------------------------

def _probe_summary(stmt: ast.stmt, referenced: bool = True):
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        yield f"probe:fn:{stmt.name}", len(stmt.args.args)
    elif isinstance(stmt, ast.ClassDef):
        yield f"probe:class:{stmt.name}", tuple(sorted(n.name for n in stmt.body if isinstance(n, ast.FunctionDef)))


def _own_nodes(body):
    """Calls that are the value of a statement, in the unit's own statements
    (compound statements entered, nested defs/classes not)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call):
            yield value
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(getattr(node, field_name, ()) or ())


class _ProbeRule(Rule):
    code = "GG999"
    name = "probe"
    default_severity = Severity.WARNING
    # the engine alone: only the probe's summarizer (the real ones are covered by
    # the real-rules test, and cost far more than the engine itself)
    fact_sources = (FactSource("probe", _probe_summary),)
    title = {"en": "probe", "zh": "探针"}

    def check(self, unit, ctx):
        out = []
        for node in _own_nodes(unit.body):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            if isinstance(fn, ast.Name):
                name = fn.id
            elif isinstance(fn, ast.Attribute) and fn.attr in ("backward", "detach", "GRU", "LSTM"):
                name = fn.attr
            else:
                continue
            fact = ctx.summary.get(f"probe:fn:{name}", ctx.summary.get(f"probe:class:{name}"))
            qual = ctx.qualify(fn) or "?"
            r = ctx.range(node)
            line_r = ctx.line_range(node)
            fix = Fix({"en": f"mark {name}", "zh": f"标记 {name}"},
                      (TextEdit(Range(line_r.end, line_r.end), f"  # {name}"),), preferred=True)
            rel = Related(ctx.range(unit.node) if unit.node is not None else r, {"en": unit.qualname, "zh": unit.qualname})
            out.append(Finding("GG999", r, {"en": f"{qual} {fact!r}", "zh": f"调用 {qual} {fact!r}"},
                               Severity.WARNING, (rel,), (fix,), {"unit": unit.qualname}))
        return out


@pytest.fixture
def probe_rule(monkeypatch):
    import gradguard.rules as rules_pkg

    reg = {"GG999": _ProbeRule()}  # the engine alone, whatever state the real rules are in
    monkeypatch.setattr(rules_pkg, "_REGISTRY", reg)
    yield


def _run_sequences(n_sequences: int, seed: int, edits_per_sequence=(1, 6)):
    rng = random.Random(seed)
    sources = _sources()
    total_edits = 0
    for _ in range(n_sequences):
        text = rng.choice(sources)
        doc = Document(text, "prog.py")
        history = [text]
        _assert_same(doc.result(), text, [])
        for _ in range(rng.randint(*edits_per_sequence)):
            if len(history) > 1 and rng.random() < 0.12:
                text = rng.choice(history[:-1])  # undo: back to an earlier state (recovery)
            else:
                text = _edit(text, rng)
            res = doc.update(text)
            history.append(text)
            _assert_same(res, text, history[:-1])
            total_edits += 1
    return total_edits


def test_random_edit_sequences_real_rules():
    # fewer sequences: the real rules cost far more per analysis than the engine
    assert _run_sequences(200, seed=20261129, edits_per_sequence=(1, 4)) > 350


def test_moved_class_whose_facts_name_its_lines():
    """GG104's fact of what a module's forward edits in place names the edit's line: a
    line typed above the class moves it, and the finding at the caller (which names that
    line and points at it) must be the fresh one, not the line the class stood at."""
    text = (HERE / "fixtures" / "reports" / "report_imgclsmob_xception_unit_inplace_relu.py").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    first_class = next(i for i, line in enumerate(lines) if line.startswith("class "))
    doc = Document(text, "prog.py")
    before = doc.result().findings
    assert [f.code for f in before] == ["GG104"]
    moved = "".join(lines[:first_class]) + "# 在类的上面加一行注释\n" + "".join(lines[first_class:])
    res = doc.update(moved)
    _assert_same(res, moved, [text])
    # the related location inside the called block moved with it
    inside = [r.range.start.line for r in res.findings[0].related]
    assert inside == [r.range.start.line + 1 for r in before[0].related]


def test_moved_method_whose_graph_facts_name_its_lines():
    """A def's graph facts may hold lines of its body (``RetPos.stepped_after``: where a loss
    module's ``forward`` called its discriminator and stepped its optimizer; GG103 finds
    that step again by its line). A line typed above the class moves it: the caller's
    finding must be the fresh one, not lost because the old lines no longer hold that text."""
    text = (HERE / "fixtures" / "reports" / "report_erasenet_loss_module_steps_discriminator.py").read_text(
        encoding="utf-8")
    lines = text.splitlines(keepends=True)
    first_class = next(i for i, line in enumerate(lines) if line.startswith("class "))
    doc = Document(text, "prog.py")
    before = doc.result().findings
    assert [f.code for f in before] == ["GG103"]
    for moved in ("".join(lines[:first_class]) + "# 判别器的优化器在损失模块里\n" + "".join(lines[first_class:]),
                  # a broken line at the top: the text is read again from there, the chunks moved
                  "".join(lines[:first_class - 1]) + "def helper(x):\n" + "".join(lines[first_class - 1:])):
        res = doc.update(moved)
        _assert_same(res, moved, [text])
        assert [f.code for f in res.findings] == ["GG103"]
        assert res.findings[0].range.start.line == before[0].range.start.line + 1
        doc = Document(text, "prog.py")
        doc.result()


def test_random_edit_sequences_probe_rule(probe_rule):
    # the probe rule is live: the sources produce findings
    assert check_source(WORD_LM, "prog.py").findings
    assert _run_sequences(800, seed=1129, edits_per_sequence=(1, 5)) > 1800


def test_probe_rule_sees_summary_changes(probe_rule):
    """Editing a def elsewhere changes the facts an unchanged unit depends on."""
    src = "def helper(a):\n    return a\n\n\ndef user():\n    return helper(1)\n"
    doc = Document(src, "prog.py")
    before = [f.message_in("en") for f in doc.result().findings]
    assert before == ["helper 1"]
    src2 = src.replace("helper(a)", "helper(a, b)")
    after = [f.message_in("en") for f in doc.update(src2).findings]
    assert after == ["helper 2"] == [f.message_in("en") for f in check_source(src2, "prog.py").findings]


def test_external_facts_equivalence(probe_rule):
    src = "from utils import helper\n\n\ndef user():\n    return helper(1)\n"
    ext = {"probe:fn:helper": 3}
    doc = Document(src, "prog.py", external_facts=ext)
    assert [f.message_in("en") for f in doc.result().findings] == ["utils.helper 3"]
    rng = random.Random(7)
    text = src
    for _ in range(200):
        text = _edit(text, rng)
        _assert_same(doc.update(text), text, [src], external=ext)
    res = doc.set_external_facts({})
    _assert_same(res, text, [src], external={})


def test_syntax_error_then_recovery_matches_fresh(probe_rule):
    doc = Document(WORD_LM, "prog.py")
    broken = WORD_LM.replace("def batchify(data, bsz):", 'def batchify(data, bsz):\n    s = """')
    res = doc.update(broken)
    assert res.syntax_error is not None
    _assert_same(res, broken, [WORD_LM])
    assert res.findings  # the chunks above the broken region are still analysed
    res = doc.update(WORD_LM)
    assert res.syntax_error is None
    _assert_same(res, WORD_LM, [broken])


# --------------------------------------------------------------------------
# What an edit costs: only the units that read what changed are re-analysed
# --------------------------------------------------------------------------

@pytest.fixture
def counted_units(monkeypatch):
    from gradguard.rules import all_rules

    seen: List[str] = []
    for rule in all_rules():
        def check(unit, ctx, _orig=rule.check, _code=rule.code):
            seen.append(f"{_code}:{unit.qualname}")
            return _orig(unit, ctx)

        monkeypatch.setattr(rule, "check", check)
    return seen


def test_typing_a_syntax_error_into_one_function_reanalyses_little(counted_units):
    text = fixture_catalogue()
    lines = text.split("\n")
    # a function in the middle of the file that back-propagates: its interface facts
    # vanish while it does not parse, so its callers are re-analysed, nothing else
    # (a name defined once in the catalogue: many programs define their own main(),
    # and the facts of a name defined again further down are the later one's. An
    # ASCII name: breaking the Chinese-named 训练() re-analyses 339 of 774 units,
    # before and after the fixtures that moved the middle of the file onto it)
    target = next(i for i in range(len(lines) // 2, len(lines))
                  if lines[i].startswith("def ") and lines[i].isascii()
                  and "loss.backward()" in "\n".join(lines[i:i + 25])
                  and text.count("\n" + lines[i].split("(")[0] + "(") == 1)
    body_line = target + 2
    doc = Document(text, "big.py")
    first = doc.result()
    n_first = len(counted_units)
    assert n_first > 200

    counted_units.clear()
    broken_lines = list(lines)
    broken_lines[body_line] = broken_lines[body_line] + " ("  # an unclosed bracket, as typed
    broken = "\n".join(broken_lines)
    got = doc.update(broken)
    n_broken = len(counted_units)
    assert got.syntax_error is not None
    assert got.findings == check_source(broken, "big.py").findings
    assert 0 < n_broken < n_first // 10, counted_units[:n_broken]

    counted_units.clear()
    back = doc.update(text)
    n_back = len(counted_units)
    assert back.findings == first.findings and back.syntax_error is None
    assert 0 < n_back < n_first // 10, counted_units


@pytest.fixture
def parsed_lines(monkeypatch):
    """How many lines of real text each parse the engine makes reads (the
    leading newlines that place a region at its line are not text)."""
    from gradguard.engine import document as engine

    seen: List[int] = []
    orig = engine._parse

    def counting(text):
        seen.append(text.lstrip("\n").count("\n") + 1)
        return orig(text)

    monkeypatch.setattr(engine, "_parse", counting)
    return seen


def test_an_unclosed_bracket_parses_from_its_chunk_on_and_closing_it_parses_the_chunk(parsed_lines):
    """While a bracket typed into the middle of a large file is open, no parse
    reads the text above the function it is in; closing it parses that
    function's region only. Each result equals a fresh run's, syntax error included."""
    text = fixture_catalogue()
    lines = text.split("\n")
    n = len(lines)
    target = next(i for i in range(n // 2, n) if lines[i].startswith("def "))
    doc = Document(text, CATALOGUE_PATH)
    doc.result()
    states = []
    typed = ""
    for ch in "(x, 训练":  # open the bracket, then keep typing inside it
        typed += ch
        broken_lines = list(lines)
        broken_lines[target + 1] = broken_lines[target + 1] + " " + typed
        states.append("\n".join(broken_lines))
    for state in states:
        parsed_lines.clear()
        got = doc.update(state)
        read = list(parsed_lines)
        assert read and max(read) <= n - target, (max(read), n - target)
        assert got.syntax_error is not None
        fresh = check_source(state, CATALOGUE_PATH)
        assert got.syntax_error == fresh.syntax_error
        assert got.findings == fresh.findings
    parsed_lines.clear()
    back = doc.update(text)
    read = list(parsed_lines)
    assert read and max(read) < 200, read
    assert back.syntax_error is None
    assert back.findings == fresh_check(text, CATALOGUE_PATH).findings  # (the session's one serial run)


_BACKSLASH_LINES = (
    "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.gru = nn.GRU(2, 4)\n{A}\n    def forward(self, x, h):\n"
    "        return self.gru(x, h)\n\n\ndef helper(net, x, h):\n    return net(x, h)\n{B}\n"
    "def main():\n    net = Net()\n    h = None\n    for x in torch.randn(3, 4, 2, 2):\n"
    "        out, h = helper(net, x, h)\n        out.sum().backward()\n"
)


@pytest.mark.parametrize("a,b", [("\\", ""), ("", "\\"), ("\\\n", "\n\\\n"), ("    # C:\\", "# D:\\")])
def test_backslash_lines_above_an_error_read_as_a_fresh_run_reads_them(a, b, probe_rule):
    """A line that is only a backslash joins the next line to what came before
    (a class body goes on past it); a statement after it is not a place to cut.
    Breaking, typing into and mending the last function must read as fresh
    (the probe rule reports every call, so a unit lost or kept shows)."""
    text = _BACKSLASH_LINES.replace("{A}", a).replace("{B}", b)
    doc = Document(text, "prog.py")
    _assert_same(doc.result(), text, [])
    assert doc.result().findings
    history = [text]
    for broken in ("        out.sum().backward(", "        out.sum().backward(x", "        if True:\n        out",
                   "        out.sum().backward()"):
        now = text.replace("        out.sum().backward()", broken)
        _assert_same(doc.update(now), now, history)
        history.append(now)


def test_an_interface_change_reanalyses_the_callers():
    helper = "def step(model, x):\n    return model(x)\n"
    caller = ("import torch\n\ndef train(model, opt, data):\n    h = None\n    for x in data:\n"
              "        out = step(model, x)\n        loss = out.sum()\n        opt.zero_grad()\n"
              "        loss.backward()\n        opt.step()\n")
    text = helper + "\n\n" + caller
    doc = Document(text, "t.py")
    doc.result()
    # the helper now threads a hidden state: the caller's result may change and must
    # match a fresh analysis
    new_helper = "def step(model, x, h=None):\n    out, h = model(x, h)\n    return out, h\n"
    new_caller = caller.replace("out = step(model, x)", "out, h = step(model, x, h)")
    for version in (new_helper + "\n\n" + caller, new_helper + "\n\n" + new_caller, text):
        assert doc.update(version).findings == check_source(version, "t.py").findings


def test_an_edit_of_a_module_level_call_reanalyses_the_function_it_calls():
    """The trace of a function reads what its module-level callers pass it (the
    ``flag:`` and ``rg:arg:``/``var:`` facts): editing only the call (a constant
    flag, the object handed in) must change the function's findings as a fresh
    analysis does."""
    fixtures = HERE / "fixtures"
    flagged = (fixtures / "gg101_state_reset_only_under_a_flag_the_caller_turns_off.py").read_text(encoding="utf-8")
    neurons = (fixtures / "gg101_stateful_neurons_model_passed_to_epoch_function.py").read_text(encoding="utf-8")
    edits = [
        (flagged, "fit(data, False, 2, 0.1)", "fit(data, True, 2, 0.1)"),
        (neurons, "    run_epoch(model, optimizer, data)", "    run_epoch(nn.Linear(5, 2), optimizer, data)"),
    ]
    for text, old, new in edits:
        assert old in text
        doc = Document(text, "t.py")
        before = doc.result().findings
        assert [f.code for f in before] == ["GG101"]
        edited = text.replace(old, new)
        after = doc.update(edited).findings
        assert after == check_source(edited, "t.py").findings
        assert not after
        assert doc.update(text).findings == check_source(text, "t.py").findings == before


def test_a_document_in_which_nothing_back_propagates_computes_no_facts():
    """A model or data module open in the editor costs a parse per edit; the
    first backward typed into it brings the full analysis, equal to a fresh run."""
    model = ("import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n"
             "    def __init__(self):\n        super().__init__()\n        self.rnn = nn.GRU(3, 4)\n\n"
             "    def forward(self, x, h):\n        return self.rnn(x, h)  # 前向\n")
    doc = Document(model, "net.py")
    assert doc.result().findings == ()
    assert all(c.facts is None for c in doc.chunks)
    loop = ("\n\nnet = Net()\nh = torch.zeros(1, 2, 4)\nfor x in torch.rand(5, 7, 2, 3):\n"
            "    out, h = net(x, h)\n    out.sum().backward()\n")
    got = doc.update(model + loop)
    assert [f.code for f in got.findings] == ["GG101"]
    assert got == check_source(model + loop, "net.py")
    assert doc.update(model).findings == () and doc.update(model + loop) == got


@pytest.mark.parametrize("ch", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_characters_splitlines_breaks_at_are_not_line_ends_incrementally(ch, probe_rule):
    """Python and LSP end lines at \\n, \\r\\n, \\r only: a form feed (a page
    break), a vertical tab, \\x1c-\\x1e, U+0085, U+2028 or U+2029 in a comment
    above an edited line leaves every line number where it is, in the
    incremental engine as in a fresh run."""
    lines = GRU_LOOP.split("\n")
    text = "\n".join([f"# 第一页 😀{ch}第二页"] + (["\x0c"] if ch == "\x0c" else []) + lines)
    doc = Document(text, "prog.py")
    history = [text]
    for edited in (
        text.replace("第二页", "第二页\n# 新的一行 🚀"),
        text.replace("第二页", "第二页 又一页").replace("import torch.nn as nn", "import torch.nn as nn\n\n"),
    ):
        res = doc.update(edited)
        _assert_same(res, edited, history)
        history.append(edited)
        n_lines = len(edited.split("\n"))
        assert all(0 <= f.range.start.line < n_lines for f in res.findings)


def test_a_finding_that_names_lines_is_not_shifted_stale():
    """GG103 names lines in its message, fix titles and data ("freed on line 26"): a
    line added above the class that holds it must not leave the cached finding
    naming the old lines (Finding.shifted moves ranges, not words)."""
    text = (Path(__file__).parent / "fixtures" / "gg103_optimizer_alias_between_backwards.py").read_text(encoding="utf-8")
    doc = Document(text, "prog.py")
    before = [f for f in doc.result().findings if f.code == "GG103"]
    assert before
    moved = text.replace("import torch\n", "import torch\nimport math\n", 1)
    got = doc.update(moved)
    fresh = check_source(moved, "prog.py")
    assert [(f.range, f.message, f.data, [x.title for x in f.fixes]) for f in got.findings] == \
        [(f.range, f.message, f.data, [x.title for x in f.fixes]) for f in fresh.findings]
    assert got.findings[0].message != before[0].message  # the lines it names moved by one


@pytest.mark.parametrize("above", ["LR = 0.1", "def f(): pass"])
def test_a_fix_that_puts_a_helper_before_the_definition_reads_the_line_above_it(above):
    """GG101's state-detaching helper goes right before the top-level statement
    holding the loop, with the blank lines PEP 8 wants only where the line above is
    not blank already: a blank line there written over (by a statement or a
    definition: another chunk, no line moves) changes the fix of an unchanged
    definition, or of the module's loop, which must not stay cached."""
    in_class = textwrap.dedent("""\
        import torch
        from models import Model


        class Trainer:
            def fit(self, loader, model: Model):
                state = None
                for x, y in loader:
                    out, state = model(x, state)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
        """)
    at_module = textwrap.dedent("""\
        import torch
        from models import Model

        model = Model()
        state = None

        for x, y in loader:
            out, state = model(x, state)
            loss = (out - y).pow(2).mean()
            loss.backward()
        """)
    for text, anchor in ((in_class, "class Trainer:"), (at_module, "for x, y in loader:")):
        doc = Document(text, "prog.py")
        assert any(f.preferred_fix is not None and len(f.preferred_fix.edits) == 2 for f in doc.result().findings)
        typed = text.replace("\n\n" + anchor, "\n" + above + "\n" + anchor, 1)
        assert typed != text and len(typed.splitlines()) == len(text.splitlines())
        got = doc.update(typed)
        fresh = check_source(typed, "prog.py")
        assert [_norm(f) for f in got.findings] == [_norm(f) for f in fresh.findings], (above, anchor)
