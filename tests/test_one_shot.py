"""One-shot analysis (check_source, the CLI) skips the by-name facts of
top-level functions nothing in the file mentions; the result must be exactly
what the incremental engine, which computes every fact, gives."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gradguard.engine import check_source
from gradguard.engine.document import Document, may_backprop
from gradguard.engine.parallel import check_source_parallel
from gradguard.rules.catalog import INPLACE_EDIT_TEXT
from gradguard.analysis.summary import summarize, unreferenced_defs
from gradguard.engine.document import fact_sources
from seed_programs import CATALOGUE_PATH, fixture_catalogue, fresh_check

FIXTURES = Path(__file__).parent / "fixtures"

TRAIN = '''\
import torch

def train_step(model, opt, x):  # 训练一步
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()

def run_once():
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        train_step(model, opt, torch.rand(4, 3))
'''


def test_unreferenced_defs_counts_every_mention():
    tree = ast.parse(TRAIN)
    # train_step is called by run_once; run_once is mentioned nowhere else
    assert unreferenced_defs(TRAIN, tree.body) == {"run_once"}
    commented = TRAIN + "# run_once is the entry point\n"
    assert unreferenced_defs(commented, ast.parse(commented).body) == frozenset()
    # a word inside a longer identifier is not a mention
    longer = TRAIN + "run_once_more = 1\n"
    assert unreferenced_defs(longer, ast.parse(longer).body) == {"run_once"}


def test_unreferenced_defs_folds_identifiers_like_python():
    # Python reads ｆｏｏ (fullwidth) as foo: the call below is a reference
    text = "def foo(x):\n    return x\n\ny = ｆｏｏ(1)  # 调用\n"
    tree = ast.parse(text)
    assert tree.body[1].value.func.id == "foo"
    assert unreferenced_defs(text, tree.body) == frozenset()
    text2 = "def ｂａｒ(x):\n    return x\n"
    assert unreferenced_defs(text2, ast.parse(text2).body) == {"bar"}


def test_unreferenced_defs_looks_names_up_as_the_word_count_counts_them():
    """Each def's name is looked for in the text instead of counting every word: the
    same answer as the count (``word_counts``) on every fixture and on the edges of a
    word (a name inside a longer one, at the text's ends, beside non-ASCII letters)."""
    from gradguard.analysis.summary import word_counts

    texts = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.py"))]
    texts += [
        "def f():\n    pass\nf",  # the mention is the text's last word
        "def ff():\n    pass\nfff = ff_ + _ff + ffé + éff\n",  # inside longer words only
        "def g():\n    pass\nx = 中g + g中\n",  # CJK letters are word characters
        "def h():\n    pass\nx = (h)  # h\n",
        "def aa():\n    pass\naaa = 1\nb = aa\n",  # overlapping occurrences
        "def ｆoo():\n    pass\nfｏo()\n",  # folded like Python
    ]
    checked = 0
    for text in texts:
        try:
            body = ast.parse(text).body
        except SyntaxError:
            continue
        want = unreferenced_defs(text, body, word_counts(text))
        assert unreferenced_defs(text, body) == want, text[:200]
        checked += 1
    assert checked > 100
    assert unreferenced_defs(texts[-5], ast.parse(texts[-5]).body) == {"ff"}
    assert unreferenced_defs(texts[-1], ast.parse(texts[-1]).body) == frozenset()


def test_unreferenced_functions_lose_only_their_by_name_facts():
    tree = ast.parse(TRAIN)
    run_once = tree.body[-1]
    full = dict(summarize(run_once, True, fact_sources()))
    lean = dict(summarize(run_once, False, fact_sources()))
    assert "fn:run_once" in full and "fn:run_once" not in lean
    assert set(lean) <= set(full)
    assert all(lean[k] == full[k] for k in lean)
    assert not any(k.startswith(("fn:", "gg102:bw:", "gg102:bwloop:")) for k in lean)


def _eager(text: str, name: str):
    doc = Document(text, name)  # incremental documents compute every fact
    return doc.result()


def test_one_shot_equals_full_facts_on_every_fixture_and_the_catalogue():
    for p in sorted(FIXTURES.glob("*.py")):
        text = p.read_text(encoding="utf-8")
        a, b = fresh_check(text, p.name), _eager(text, p.name)
        assert a.findings == b.findings, p.name
    catalogue = fixture_catalogue()
    a, b = fresh_check(catalogue, CATALOGUE_PATH), _eager(catalogue, CATALOGUE_PATH)  # (a: the session's one run)
    assert a.findings == b.findings and len(a.findings) > 50


def test_an_update_leaves_one_shot_mode():
    doc = Document(TRAIN, "t.py", one_shot=True)
    doc.result()
    edited = TRAIN + "\nrun_once()\n"
    assert doc.update(edited).findings == Document(edited, "t.py").result().findings
    assert doc._unreferenced == frozenset()


# ---------------------------------------------------------------------------
# files in which nothing can back-propagate are parsed, not analysed

def _without_backprop(text: str) -> str:
    """The program with every backward spelling renamed (still valid Python), and the
    methods a framework back-propagates the result of (Lightning's ``training_step``)."""
    return re.sub(r"\b(manual_backward|backward|grad|training_step)\b", lambda m: m.group(1) + "_off", text)


def test_may_backprop_reads_words_as_python_does():
    assert may_backprop("loss.backward()\n")
    assert may_backprop("self.manual_backward(loss)\n")
    assert may_backprop("from torch.autograd import grad as g\ng(out, x)\n")  # the alias's import line
    assert may_backprop("print(w.grad)\n")  # a gradient read errs on the side of analysing
    assert may_backprop("损失.backward()  # 反向传播\n")
    assert may_backprop("class M(pl.LightningModule):\n    def training_step(self, b, i):\n        return b\n")
    assert may_backprop("loss.ｂａｃｋｗａｒｄ()\n")  # fullwidth: Python calls backward()
    assert not may_backprop("import torch.autograd\nclip_grad_norm = 1.0\nbackwards = []\n")
    assert not may_backprop("梯度grad = 1\n")  # one identifier, not the word grad
    assert not may_backprop("x = model(x)  # forward only\n")


def _eval_called(text: str) -> bool:
    """Does the text call ``.eval()``? There GG201 alone runs without a backward (an
    inference script: ``Rule.also_without_backprop``)."""
    return re.search(r"\.eval\(\s*\)", text) is not None


def _allowed_without_backprop(text: str) -> set:
    """The rules that run where nothing back-propagates: GG201 where the text calls
    ``.eval()``, GG104 where it spells an in-place edit (a model in a file of its own whose
    forward edits what one of its layers saved breaks whatever file trains it)."""
    return ({"GG201"} if _eval_called(text) else set()) | ({"GG104"} if INPLACE_EDIT_TEXT.search(text) else set())


def test_a_file_without_backprop_gets_the_full_analysis_result_from_a_parse():
    """Every fixture program with its backward calls renamed: the full analysis
    (an incremental document) finds nothing -- but GG201's findings where the text
    calls ``.eval()`` (an inference script) -- and the gated one-shot result is the
    same, syntax error included."""
    programs = {p.name: p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.py"))}
    programs["catalogue.py"] = fixture_catalogue()
    for name, text in programs.items():
        assert may_backprop(text) or name.startswith(("gg201_inference_script", "ok_inference")), name
        off = _without_backprop(text)
        assert not may_backprop(off), name
        full = Document(off, name).result()
        assert full.internal_errors == (), name
        assert {f.code for f in full.findings} <= _allowed_without_backprop(off), name
        assert check_source(off, name) == full, name
    broken = _without_backprop(programs["catalogue.py"]).replace("def ", "def (", 1)
    gated = check_source(broken, "broken.py")
    assert gated.syntax_error is not None and gated == Document(broken, "broken.py").result()


def test_parallel_path_gates_the_same_way():
    off = _without_backprop(fixture_catalogue())
    res = check_source_parallel(off, "all.py", jobs=2, min_lines=10)
    assert res == check_source(off, "all.py") and {f.code for f in res.findings} <= _allowed_without_backprop(off)
    assert _eval_called(off)  # (the catalogue's evaluation loops: GG201 alone runs)


def test_an_edit_that_adds_or_removes_the_only_backward_regates_the_document():
    """The document remembers per chunk whether its text can back-propagate; an
    edit makes new chunks, so adding the one backward (in the last chunk) brings
    the findings, and taking it out again takes them away."""
    text = fixture_catalogue()
    off = _without_backprop(text)
    doc = Document(off, CATALOGUE_PATH)
    # (only GG201 and GG104 run where nothing back-propagates: the catalogue calls .eval() and edits in place)
    assert {f.code for f in doc.result().findings} <= _allowed_without_backprop(off)
    on = off + "\n\nloss = model(x).sum()\nloss.backward()\n"
    for version in (text, off, on, off, text):  # (each text's fresh run made once per session)
        assert doc.update(version) == fresh_check(version, CATALOGUE_PATH)
    assert doc.update(text).findings
