"""GG101 carried-graph, statically: snippet → findings / silence / fixes.

Markers in the snippets (comments) name the lines the assertions talk about:
``# <carry>`` the statement that carries the graph (the finding's line),
``# <bw>`` the backward() that fails, ``# <build>`` where the graph is built
when that is not the carry line itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradguard.engine import Document, check_source
from gradguard.model.text import apply_text_edits
from gradguard.rules import get_rule

REPO = Path(__file__).resolve().parent.parent


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def gg101(text: str):
    r = check_source(text, "snippet.py")
    assert r.syntax_error is None, r.syntax_error
    return [f for f in r.findings if f.code == "GG101"]


def line(text: str, marker: str) -> int:
    hits = [i for i, ln in enumerate(text.splitlines()) if marker in ln]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    return hits[0]


def apply_preferred(text: str) -> str:
    """Apply every GG101 finding's preferred fix (one finding at a time, re-checking
    in between, the way an editor's fix-all converges)."""
    for _ in range(10):
        fs = gg101(text)
        if not fs:
            return text
        text = apply_text_edits(text, fs[0].preferred_fix.edits)
    raise AssertionError("fixes did not converge")


def assert_single(text: str, variable: str):
    fs = gg101(text)
    assert len(fs) == 1, [(f.range, f.message_in("en")) for f in fs]
    f = fs[0]
    assert f.range.start.line == line(text, "# <carry>")
    assert f.data["variable"] == variable
    assert f"`{variable}`" in f.message_in("en") and f"`{variable}`" in f.message_in("zh")
    bw_lines = {r.range.start.line for r in f.related}
    if "# <bw>" in text:
        assert line(text, "# <bw>") in bw_lines, "the failing backward() is a related location"
    if "# <build>" in text:
        assert line(text, "# <build>") in bw_lines, "where the graph is built is a related location"
    else:
        assert f.range.start.line in bw_lines, "the graph is built on the carry line"
    assert f.severity.value == "error"
    return f


def assert_single_line(text: str):
    fs = gg101(text)
    assert len(fs) == 1, [(f.range, f.message_in("en")) for f in fs]
    assert fs[0].range.start.line == line(text, "# <carry>")
    return fs[0]


def assert_fixed_cleanly(text: str):
    fixed = apply_preferred(text)
    assert fixed != text
    assert gg101(fixed) == [], fixed
    compile(fixed, "fixed.py", "exec")
    # a second application finds nothing to do
    assert apply_preferred(fixed) == fixed
    return fixed


# ---------------------------------------------------------------------------
# flagged programs
# ---------------------------------------------------------------------------
SEED_GRU = src(
    """
    import torch
    from torch import nn

    # 序列模型:隐状态跨批次传递
    gru = nn.GRU(input_size=4, hidden_size=8, batch_first=True)
    head = nn.Linear(8, 1)
    opt = torch.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.1)
    hidden = torch.zeros(1, 2, 8)
    for step in range(3):
        x = torch.randn(2, 5, 4)
        y = torch.randn(2, 5, 1)
        out, hidden = gru(x, hidden)  # <carry>
        loss = ((head(out) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()  # <bw>
        opt.step()
    """
)

MODEL_CLASS_GRU = src(
    """
    import torch
    import torch.nn as nn


    class Encoder(nn.Module):
        def __init__(self, vocab, dim):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.rnn = nn.GRU(dim, dim, batch_first=True)
            self.out = nn.Linear(dim, vocab)

        def forward(self, tokens, h=None):
            y, h = self.rnn(self.emb(tokens), h)
            return self.out(y), h


    def train(loader, epochs=2):
        model = Encoder(100, 32)
        opt = torch.optim.Adam(model.parameters())
        crit = nn.CrossEntropyLoss()
        state = None
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                logits, state = model(x, state)  # <carry>
                loss = crit(logits.view(-1, 100), y.view(-1))
                opt.zero_grad()
                loss.backward()  # <bw>
                opt.step()
    """
)

FROM_TORCH_NN_IMPORT = src(
    """
    import torch
    from torch.nn import GRU, Linear

    rnn = GRU(3, 5)
    fc = Linear(5, 1)
    opt = torch.optim.SGD(list(rnn.parameters()) + list(fc.parameters()), lr=0.01)
    h = torch.zeros(1, 1, 5)
    i = 0
    while i < 100:
        out, h = rnn(stream[i], h)  # <carry>
        loss = (fc(out[-1]) - target[i]).pow(2).sum()
        opt.zero_grad()
        loss.backward()  # <bw>
        opt.step()
        i += 1
    """
)

INIT_HIDDEN_PARAM_MODEL = src(
    """
    import torch


    def fit(model, batches, optimizer, criterion):
        hidden = model.init_hidden(16)
        for inputs, targets in batches:
            optimizer.zero_grad()
            output, hidden = model(inputs, hidden)  # <carry>
            loss = criterion(output, targets)
            loss.backward()  # <bw>
            optimizer.step()
    """
)

TRAINER_METHOD = src(
    """
    import torch
    from torch import nn


    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 8)
            self.dec = nn.Linear(8, 8)

        def forward(self, x, hc):
            y, hc = self.lstm(x, hc)
            return self.dec(y), hc


    class Trainer:
        def __init__(self, model, opt, accelerator):
            self.model = model
            self.opt = opt
            self.accelerator = accelerator

        def run(self, loader):
            hc = None
            for x, y in loader:
                pred, hc = self.model(x, hc)  # <carry>
                loss = torch.nn.functional.mse_loss(pred, y)
                self.accelerator.backward(loss)  # <bw>
                self.opt.step()
                self.opt.zero_grad()
    """
)

HELPER_BACKWARD_INSIDE = src(
    """
    import torch
    from torch import nn

    cell = nn.GRUCell(4, 8)
    opt = torch.optim.SGD(cell.parameters(), lr=0.1)


    def train_step(x, h):
        h = cell(x, h)
        loss = h.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), h


    def main(loader):
        h = torch.zeros(2, 8)
        for x in loader:
            loss, h = train_step(x, h)  # <carry>
    """
)

HELPER_RETURNS_GRAPH = src(
    """
    import torch
    import torch.nn as nn

    lstm = nn.LSTM(4, 4)


    def step(x, state):
        y, state = lstm(x, state)
        return y.sum(), state


    def main(data, scaler, opt):
        state = None
        for x in data:
            loss, state = step(x, state)  # <carry>
            scaler.scale(loss).backward()  # <bw>
            scaler.step(opt)
            scaler.update()
    """
)

LSTM_ONLY_H = src(
    """
    import torch
    import torch.nn as nn

    lstm = nn.LSTM(10, 20, num_layers=2)
    opt = torch.optim.Adam(lstm.parameters())
    hidden = (torch.zeros(2, 3, 20), torch.zeros(2, 3, 20))
    for x, y in loader:
        hidden = (hidden[0].detach(), hidden[1])
        out, hidden = lstm(x, hidden)  # <carry>
        loss = (out - y).abs().mean()
        opt.zero_grad()
        loss.backward()  # <bw>
        opt.step()
    """
)

LSTM_UNPACKED = src(
    """
    import torch
    import torch.nn as nn

    lstm = nn.LSTM(10, 20)
    opt = torch.optim.Adam(lstm.parameters())
    h, c = torch.zeros(1, 3, 20), torch.zeros(1, 3, 20)
    for x, y in loader:
        out, (h, c) = lstm(x, (h, c))  # <carry>
        loss = (out - y).abs().mean()
        opt.zero_grad()
        loss.backward()  # <bw>
        opt.step()
    """
)

LSTMCELL = src(
    """
    import torch
    from torch import nn

    cell = nn.LSTMCell(5, 7)
    opt = torch.optim.SGD(cell.parameters(), lr=0.1)
    hx = torch.zeros(3, 7)
    cx = torch.zeros(3, 7)
    for x in chunks:
        hx, cx = cell(x, (hx, cx))  # <carry>
        loss = hx.pow(2).mean()
        opt.zero_grad()
        loss.backward()  # <bw>
        opt.step()
    """
)

RNNCELL_INNER_UNROLL = src(
    """
    import torch
    import torch.nn as nn

    cell = nn.RNNCell(4, 6)
    head = nn.Linear(6, 2)
    opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.1)
    h = torch.zeros(3, 6)
    for chunk, label in zip(chunks, labels):
        for t in range(chunk.size(0)):
            h = cell(chunk[t], h)  # <carry>
        loss = nn.functional.cross_entropy(head(h), label)
        opt.zero_grad()
        loss.backward()  # <bw>
        opt.step()
    """
)

RETAIN_GRAPH = src(
    """
    import torch
    import torch.nn as nn

    gru = nn.GRU(4, 4)
    opt = torch.optim.SGD(gru.parameters(), lr=0.1)
    h = torch.zeros(1, 1, 4)
    for x in xs:
        out, h = gru(x, h)  # <carry>
        loss = out.sum()
        opt.zero_grad()
        loss.backward(retain_graph=True)  # <bw>
        opt.step()
    """
)

AUTOGRAD_BACKWARD = src(
    """
    import torch
    import torch.nn as nn

    rnn = nn.RNN(2, 3)
    h = torch.zeros(1, 1, 3)
    for x in xs:
        out, h = rnn(x, h)  # <carry>
        torch.autograd.backward(out.sum())  # <bw>
    """
)

MANUAL_BACKWARD = src(
    """
    import torch
    from torch import nn
    import lightning as L


    class TBPTT(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            self.rnn = nn.GRU(4, 4, batch_first=True)

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            hiddens = None
            for split in batch.split(10, dim=1):
                out, hiddens = self.rnn(split, hiddens)  # <carry>
                loss = out.pow(2).mean()
                opt.zero_grad()
                self.manual_backward(loss)  # <bw>
                opt.step()
    """
)

ACCUMULATED_LOSS_BACKWARD = src(
    """
    import torch

    def train(model, loader, opt):
        running = 0
        for x, y in loader:
            loss = ((model(x) - y) ** 2).mean()  # <build>
            running = running + loss  # <carry>
            opt.zero_grad()
            running.backward()  # <bw>
            opt.step()
    """
)

FLAGGED = {
    "seed_gru": (SEED_GRU, "hidden"),
    "model_class_gru_nested": (MODEL_CLASS_GRU, "state"),
    "from_torch_nn_import_while": (FROM_TORCH_NN_IMPORT, "h"),
    "init_hidden_param_model": (INIT_HIDDEN_PARAM_MODEL, "hidden"),
    "trainer_method_accelerator": (TRAINER_METHOD, "hc"),
    "helper_backward_inside": (HELPER_BACKWARD_INSIDE, "h"),
    "helper_returns_graph_scaler": (HELPER_RETURNS_GRAPH, "state"),
    "lstm_only_h": (LSTM_ONLY_H, "hidden"),
    "lstm_unpacked": (LSTM_UNPACKED, "h"),
    "lstmcell": (LSTMCELL, "hx"),
    "rnncell_inner_unroll": (RNNCELL_INNER_UNROLL, "h"),
    "retain_graph": (RETAIN_GRAPH, "h"),
    "autograd_backward": (AUTOGRAD_BACKWARD, "h"),
    "manual_backward": (MANUAL_BACKWARD, "hiddens"),
    "accumulated_loss": (ACCUMULATED_LOSS_BACKWARD, "running"),
}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(name):
    text, var = FLAGGED[name]
    assert_single(text, var)


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_preferred_fix_is_silent_and_idempotent(name):
    text, _ = FLAGGED[name]
    assert_fixed_cleanly(text)


def test_reinit_per_epoch_does_not_hide_the_carry_across_batches():
    text = MODEL_CLASS_GRU.replace(
        "        for i, (x, y) in enumerate(loader):\n",
        "        state = None  # re-initialised every epoch\n        for i, (x, y) in enumerate(loader):\n",
    )
    assert text != MODEL_CLASS_GRU
    f = assert_single(text, "state")
    # the fix goes into the batch loop, not the epoch loop
    edit = f.preferred_fix.edits[-1]
    assert edit.range.start.line == line(text, "# <carry>")
    assert edit.new_text.startswith(" " * 12 + "if state is not None:")
    assert_fixed_cleanly(text)


def test_seed_positions_message_and_related():
    f = assert_single(SEED_GRU, "hidden")
    carry = line(SEED_GRU, "# <carry>")
    assert (f.range.start.character, f.range.end.character) == (4, len("    out, hidden = gru(x, hidden)"))
    build = [r for r in f.related if r.range.start.line == carry][0]
    assert SEED_GRU.splitlines()[carry][build.range.start.character:build.range.end.character] == "gru(x, hidden)"
    assert "loss.backward()" in f.message_in("en")
    assert "Trying to backward through the graph a second time" in f.message_in("en")
    assert "计算图" in f.message_in("zh") and "下一轮" in f.message_in("zh")
    for r in f.related:
        assert r.message_in("en") and r.message_in("zh") != r.message_in("en")


def test_seed_preferred_fix_text():
    f = gg101(SEED_GRU)[0]
    fix = f.preferred_fix
    assert fix.preferred and len([x for x in f.fixes if x.preferred]) == 1
    (edit,) = fix.edits
    first_body_line = line(SEED_GRU, "x = torch.randn(2, 5, 4)")
    assert edit.range.start.line == edit.range.end.line == first_body_line
    assert edit.range.start.character == 0
    # the loop starts from zeros (no None, no grad): a plain detach at the top of the body
    assert edit.new_text == "    hidden = hidden.detach()\n"
    assert "detach" in fix.title_in("en").lower() and "detach" in fix.title_in("zh")


def test_fix_guards_a_state_that_starts_as_none():
    text = SEED_GRU.replace("hidden = torch.zeros(1, 2, 8)", "hidden = None")
    f = gg101(text)[0]
    assert f.preferred_fix.edits[0].new_text == "    if hidden is not None:\n        hidden = hidden.detach()\n"
    assert_fixed_cleanly(text)


def test_fix_for_lstm_is_tuple_aware():
    f = gg101(LSTM_ONLY_H)[0]
    assert f.preferred_fix.edits[-1].new_text == "    hidden = tuple(s.detach() for s in hidden)\n"
    f = gg101(LSTM_UNPACKED)[0]
    assert f.data["variables"] == ["h", "c"]
    assert "`h`" in f.message_in("en") and "`c`" in f.message_in("en")
    assert f.preferred_fix.edits[-1].new_text == "    h, c = h.detach(), c.detach()\n"


def test_lstm_partial_detach_names_the_missing_element():
    f = gg101(LSTM_ONLY_H)[0]
    en, zh = f.message_in("en"), f.message_in("zh")
    assert "`hidden[1]`" in en and "cell state" in en and "`hidden[0]`" not in en
    assert "`hidden[1]`" in zh and "细胞状态" in zh
    assert f.data["attached_elements"] == [1]


def test_fix_for_unknown_model_state_uses_the_container_keeping_helper():
    # the model is a parameter: its state may be a tensor (GRU), a tuple (LSTM), a
    # dict or a list of pairs; no one-line guess, a helper that keeps every container
    f = gg101(INIT_HIDDEN_PARAM_MODEL)[0]
    helper, call = f.preferred_fix.edits
    assert call.new_text == "        hidden = _detach_state(hidden)\n"
    assert call.range.start.line == line(INIT_HIDDEN_PARAM_MODEL, "for inputs") + 1  # the top of the body
    # defined once, at module level, before the function that uses it (two blank lines after it)
    assert helper.range.start.line == line(INIT_HIDDEN_PARAM_MODEL, "def fit(")
    assert helper.new_text.startswith("def _detach_state(s):\n") and helper.new_text.endswith("        return s\n\n\n")
    fixed = assert_fixed_cleanly(INIT_HIDDEN_PARAM_MODEL)
    ns: dict = {}
    exec(compile(fixed.split("def fit(")[0], "helper.py", "exec"), ns)
    import collections

    import torch

    detach = ns["_detach_state"]
    pair = collections.namedtuple("Pair", "h c")
    x = torch.ones(2, requires_grad=True) * 2
    state = {"enc": (x, x), "dec": [pair(x, x), {"m": x}], "step": 3}
    out = detach(state)
    assert isinstance(out, dict) and isinstance(out["enc"], tuple) and isinstance(out["dec"], list)
    assert isinstance(out["dec"][0], pair) and out["dec"][0].h.grad_fn is None and out["step"] == 3
    assert out["dec"][1]["m"].grad_fn is None and state["enc"][0].grad_fn is not None  # the input is untouched
    assert detach(x).grad_fn is None and detach(None) is None


def test_known_state_shapes_keep_their_one_line_fix():
    # one tensor: a clone, a torch function, a tensor method, an nn.Linear's output
    for built, expect in (("h = (lin(x) + h).clone()", "h = h.detach()"), ("h = torch.tanh(lin(h))", "h = h.detach()"),
                          ("h = lin(h).sigmoid()", "h = h.detach()"), ("h = 0.5 * h + lin(x)", "h = h.detach()"),
                          ("h = lin(h)", "h = h.detach()")):
        text = src(
            f"""
            import torch
            import torch.nn as nn

            lin = nn.Linear(3, 3)
            opt = torch.optim.SGD(lin.parameters(), lr=0.1)
            h = torch.zeros(1, 3)
            for step in range(3):
                x = torch.randn(1, 3)
                {built}  # <carry>
                loss = h.sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
            """
        )
        (f,) = gg101(text)
        assert [e.new_text.strip() for e in f.preferred_fix.edits] == [expect], built


UNKNOWN_IN_TWO_FUNCTIONS = src(
    """
    import torch


    def fit(model, batches, optimizer):
        hidden = model.init_hidden(16)
        for inputs in batches:
            optimizer.zero_grad()
            output, hidden = model(inputs, hidden)  # <carry1>
            output.sum().backward()
            optimizer.step()


    @torch.enable_grad()
    def fit_again(model, batches, optimizer):
        state = model.init_hidden(16)
        for inputs in batches:
            optimizer.zero_grad()
            output, state = model(inputs, state)  # <carry2>
            output.sum().backward()
            optimizer.step()
    """
)


def test_helper_is_defined_once_per_file():
    from gradguard.engine.fixing import preferred_edits

    fs = gg101(UNKNOWN_IN_TWO_FUNCTIONS)
    assert len(fs) == 2
    helpers = [f.preferred_fix.edits[0] for f in fs]
    assert helpers[0].new_text == helpers[1].new_text
    assert helpers[1].range.start.line == line(UNKNOWN_IN_TWO_FUNCTIONS, "@torch.enable_grad()")  # decorators first
    # both fixes at once (fix-all, --fix): the definition goes in once, at the earlier point
    for order in (fs, fs[::-1]):
        edits = preferred_edits(order)
        assert len(edits) == 3
        fixed = apply_text_edits(UNKNOWN_IN_TWO_FUNCTIONS, edits)
        assert fixed.count("def _detach_state(s):") == 1
        assert fixed.index("def _detach_state(s):") < fixed.index("def fit(")
    # and one at a time: the second fix calls the helper the first one defined
    fixed = assert_fixed_cleanly(UNKNOWN_IN_TWO_FUNCTIONS)
    assert fixed.count("def _detach_state(s):") == 1
    assert "hidden = _detach_state(hidden)" in fixed and "state = _detach_state(state)" in fixed


def test_helper_never_shadows_a_user_name():
    text = "_detach_state = print  # the user's own\n" + UNKNOWN_IN_TWO_FUNCTIONS
    fixed = assert_fixed_cleanly(text)
    assert fixed.count("def _detach_state2(s):") == 1 and "hidden = _detach_state2(hidden)" in fixed
    assert fixed.startswith("_detach_state = print")


def test_helper_at_module_level_is_reused_only_when_defined_before_the_loop():
    loop = src(
        """
        for inputs in batches:
            optimizer.zero_grad()
            output, hidden = model(inputs, hidden)  # <carry>
            output.sum().backward()
            optimizer.step()
        """
    )
    head = src(
        """
        import torch
        from models import Model

        model = Model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = [torch.randn(2, 3) for _ in range(3)]
        hidden = None
        """
    )
    # a first fix made the helper: the next one reuses it
    once = apply_preferred(head + loop)
    assert once.count("def _detach_state(s):") == 1
    twice = once + "\n" + loop.replace("hidden", "memory").replace("# <carry>", "")
    twice = twice.replace("hidden = None", "hidden = memory = None")
    fixed = apply_preferred(twice)
    assert fixed.count("def _detach_state(s):") == 1 and "memory = _detach_state(memory)" in fixed
    # defined after the loop at module level: not there yet when the loop runs, another name
    late = head + loop + "\n\n" + once[once.index("def _detach_state(s):"):once.index("for inputs")]
    fixed = apply_preferred(late)
    assert "hidden = _detach_state2(hidden)" in fixed
    assert fixed.index("def _detach_state2(s):") < fixed.index("for inputs")


def test_fix_for_a_number_accumulator_keeps_the_first_iteration_working():
    f = gg101(ACCUMULATED_LOSS_BACKWARD)[0]
    assert f.preferred_fix.edits[-1].new_text == '        running = running.detach() if hasattr(running, "detach") else running\n'


def test_history_list_is_flagged_at_the_append_and_fixed_as_a_list():
    text = src(
        """
        import torch
        import torch.nn as nn

        net = nn.Linear(3, 2)
        opt = torch.optim.Adam(net.parameters())
        history = []
        for step in range(4):
            action = net(torch.randn(1, 3))
            history.append(action)  # <carry>
            loss = torch.stack(history).pow(2).sum()
            opt.zero_grad()
            loss.backward()  # <bw>
            opt.step()
        """
    )
    f = assert_single_line(text)
    assert f.data["variable"] == "history"
    assert f.preferred_fix.edits[-1].new_text == "    history = [s.detach() for s in history]\n"
    assert_fixed_cleanly(text)


def test_fix_when_the_loop_first_binds_the_state():
    text = src(
        """
        import torch
        from torch import nn

        gru = nn.GRU(4, 4)
        opt = torch.optim.SGD(gru.parameters(), lr=0.1)
        for i, x in enumerate(xs):
            if i == 0:
                h = torch.zeros(1, 1, 4)
            out, h = gru(x, h)  # <carry>
            loss = out.sum()
            opt.zero_grad()
            loss.backward()  # <bw>
            opt.step()
        """
    )
    f = assert_single(text, "h")
    edits = sorted(f.preferred_fix.edits, key=lambda e: e.range.start)
    assert edits[0].new_text == "h = None\n" and edits[0].range.start.line == line(text, "for i, x")
    assert edits[1].new_text.startswith("    if h is not None:\n")
    assert_fixed_cleanly(text)


def test_fix_keeps_tabs_and_nested_indentation():
    text = SEED_GRU.replace("    ", "\t")
    f = gg101(text)[0]
    assert f.preferred_fix.edits[0].new_text == "\thidden = hidden.detach()\n"
    nested = gg101(MODEL_CLASS_GRU)[0].preferred_fix.edits[-1].new_text
    # the model's forward hands back its GRU's state: one tensor, known through the summary
    assert nested == " " * 12 + "if state is not None:\n" + " " * 16 + "state = state.detach()\n"
    # the helper (a model given as a parameter: shape unknown) is indented the file's way too
    helper, call = gg101(INIT_HIDDEN_PARAM_MODEL.replace("    ", "\t"))[0].preferred_fix.edits
    assert "\n\tif hasattr(s, \"detach\"):\n\t\treturn s.detach()\n" in helper.new_text
    assert call.new_text == "\t\thidden = _detach_state(hidden)\n"
    assert_fixed_cleanly(text)


def test_look_ahead_state_is_flagged_without_a_risky_fix():
    # the next step's output is computed after backward(): the graph it carries
    # already links to the freed one; no single detach is certain to keep gradients
    text = src(
        """
        import torch
        from torch import nn

        gru = nn.GRU(4, 4)
        opt = torch.optim.SGD(gru.parameters(), lr=0.1)
        h = torch.zeros(1, 1, 4)
        out, h = gru(xs[0], h)
        for x in xs[1:]:
            loss = out.sum()
            opt.zero_grad()
            loss.backward()  # <bw>
            opt.step()
            out, h = gru(x, h)  # <carry>
        """
    )
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].range.start.line == line(text, "# <carry>")
    assert fs[0].fixes == ()


def test_fix_at_the_top_when_the_state_is_post_processed_after_backward():
    text = src(
        """
        import torch
        from torch import nn

        cell = nn.GRUCell(4, 4)
        opt = torch.optim.SGD(cell.parameters(), lr=0.1)
        h = torch.zeros(1, 4)
        for x in xs:
            h = cell(x, h)
            loss = h.sum()
            opt.zero_grad()
            loss.backward()  # <bw>
            opt.step()
            h = 0.5 * h + 0.5 * torch.tanh(h)  # <carry>
        """
    )
    f = assert_single_line(text)
    edit = f.preferred_fix.edits[-1]
    assert edit.range.start.line == line(text, "h = cell(x, h)")
    assert edit.new_text == "    h = h.detach()\n"
    assert_fixed_cleanly(text)


def test_alternative_fix_resets_and_says_it_loses_state():
    text = SEED_GRU.replace("hidden = torch.zeros(1, 2, 8)", "hidden = None")
    f = gg101(text)[0]
    alts = [x for x in f.fixes if not x.preferred]
    assert alts, "a reset-per-iteration alternative is offered for a torch GRU"
    alt = alts[0]
    assert "None" in alt.title_in("en") and "loses" in alt.title_in("en") and "丢失" in alt.title_in("zh")
    assert alt.edits[0].new_text == "    hidden = None\n"
    assert gg101(apply_text_edits(text, alt.edits)) == []


def test_helper_that_back_propagates_is_named_in_the_related_location():
    f = gg101(HELPER_BACKWARD_INSIDE)[0]
    carry = line(HELPER_BACKWARD_INSIDE, "# <carry>")
    (rel,) = [r for r in f.related if "train_step" in r.message_in("en")]
    assert rel.range.start.line == carry and "backward()" in rel.message_in("en")
    assert "train_step" in rel.message_in("zh")
    assert "`train_step(x, h)`" in f.message_in("en")


def test_retain_graph_is_still_flagged_and_explained():
    f = gg101(RETAIN_GRAPH)[0]
    assert f.data.get("retain_graph") is True
    assert "retain_graph=True" in f.message_in("en") and "retain_graph=True" in f.message_in("zh")


def test_stateful_module_forward_is_flagged_and_fixed_in_forward():
    text = src(
        """
        import torch
        import torch.nn as nn


        class Stateful(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(3, 5, batch_first=True)
                self.fc = nn.Linear(5, 1)
                self.hidden = None

            def reset(self):
                self.hidden = None

            def forward(self, x):
                out, self.hidden = self.lstm(x, self.hidden)  # <carry>
                return self.fc(out[:, -1])


        model = Stateful()
        opt = torch.optim.Adam(model.parameters())
        model.reset()
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    )
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].range.start.line == line(text, "# <carry>")
    assert fs[0].data["variable"] == "self.hidden"
    fix = fs[0].preferred_fix.edits[0]
    assert fix.range.start.line == line(text, "# <carry>")
    assert fix.new_text == (
        "        if self.hidden is not None:\n            self.hidden = tuple(s.detach() for s in self.hidden)\n"
    )
    assert_fixed_cleanly(text)
    # resetting the state every iteration is correct usage: silent
    per_batch = text.replace("for x, y in loader:\n", "for x, y in loader:\n    model.reset()\n")
    assert gg101(per_batch) == []


GLOBAL_STEP = src(
    """
    import torch
    import torch.nn as nn

    rnn = nn.GRU(3, 5, batch_first=True)
    head = nn.Linear(5, 1)
    optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.05)
    hidden = torch.zeros(1, 2, 5)
    total = 0


    def train_step(x, y):
        \"\"\"One step; the state lives in a global between calls.\"\"\"
        global hidden, total
        out, hidden = rnn(x, hidden)  # <carry>
        loss = nn.functional.mse_loss(head(out), y)
        total = total + loss
        optimizer.zero_grad()
        loss.backward()  # <bw>
        optimizer.step()
        return loss.item()


    for x, y in batches:
        train_step(x, y)
    """
)


def test_global_state_between_calls_is_flagged_and_fixed_after_the_global_statement():
    f = assert_single(GLOBAL_STEP, "hidden")  # `total` never reaches a backward: not reported
    assert "train_step" in f.message_in("en") and "train_step" in f.message_in("zh")
    edit = f.preferred_fix.edits[0]
    assert edit.range.start.line == line(GLOBAL_STEP, "# <carry>")  # after the docstring and `global`
    assert edit.new_text == "    if hidden is not None:\n        hidden = hidden.detach()\n"
    assert_fixed_cleanly(GLOBAL_STEP)


def test_trainer_keeping_state_on_self_between_steps():
    text = src(
        """
        import torch
        from torch import nn


        class Trainer:
            def __init__(self):
                self.rnn = nn.LSTM(4, 4)
                self.opt = torch.optim.SGD(self.rnn.parameters(), lr=0.1)
                self.state = None

            def step(self, x):
                out, self.state = self.rnn(x, self.state)  # <carry>
                loss = out.pow(2).mean()
                self.opt.zero_grad()
                loss.backward()  # <bw>
                self.opt.step()
        """
    )
    f = assert_single(text, "self.state")
    assert f.preferred_fix.edits[0].new_text == (
        "        if self.state is not None:\n            self.state = tuple(s.detach() for s in self.state)\n"
    )
    assert_fixed_cleanly(text)


def test_chinese_identifiers_and_comments_on_the_flagged_line():
    text = src(
        """
        import torch
        from torch import nn

        循环网络 = nn.GRU(4, 8)
        优化器 = torch.optim.SGD(循环网络.parameters(), lr=0.1)
        隐状态 = torch.zeros(1, 2, 8)
        for 批次 in 数据:
            输出, 隐状态 = 循环网络(批次, 隐状态)  # <carry> 这里没有 detach
            损失 = 输出.pow(2).mean()
            优化器.zero_grad()
            损失.backward()  # <bw>
            优化器.step()
        """
    )
    f = assert_single(text, "隐状态")
    ln = text.splitlines()[f.range.start.line]
    assert ln[f.range.start.character:f.range.end.character] == "输出, 隐状态 = 循环网络(批次, 隐状态)"
    build = [r for r in f.related if r.range.start.line == f.range.start.line][0]
    assert ln[build.range.start.character:build.range.end.character] == "循环网络(批次, 隐状态)"
    fixed = assert_fixed_cleanly(text)
    assert "    隐状态 = 隐状态.detach()\n" in fixed


def test_incremental_document_agrees():
    doc = Document(SEED_GRU, "a.py")
    assert [f.code for f in doc.result().findings] == ["GG101"]
    fixed = apply_preferred(SEED_GRU)
    assert [f for f in doc.update(fixed).findings if f.code == "GG101"] == []
    assert [f.code for f in doc.update(SEED_GRU).findings] == ["GG101"]


# ---------------------------------------------------------------------------
# silent idioms
# ---------------------------------------------------------------------------
def _seed_with(body_line: str, at: str = "after") -> str:
    """SEED_GRU with one line added inside the loop (after the backward, or at the top)."""
    lines = SEED_GRU.splitlines(keepends=True)
    idx = line(SEED_GRU, "opt.step()") + 1 if at == "after" else line(SEED_GRU, "x = torch.randn(2, 5, 4)")
    return "".join(lines[:idx] + ["    " + body_line + "\n"] + lines[idx:])


SILENT = {
    "detach": _seed_with("hidden = hidden.detach()"),
    "detach_top": _seed_with("hidden = hidden.detach()", at="top"),
    "detach_inplace": _seed_with("hidden.detach_()"),
    "tuple_genexp": _seed_with("hidden = tuple(s.detach() for s in hidden)"),
    "data_attr": _seed_with("hidden = hidden.data"),
    "reset_none": _seed_with("hidden = None", at="top"),
    "fresh_zeros": _seed_with("hidden = torch.zeros(1, 2, 8)", at="top"),
    "guarded_detach": _seed_with("if hidden is not None: hidden = hidden.detach()", at="top"),
    "lstm_pair": LSTM_UNPACKED.replace("    out, (h, c) =", "    h, c = h.detach(), c.detach()\n    out, (h, c) ="),
    "lstm_tuple_pair": LSTM_ONLY_H.replace("(hidden[0].detach(), hidden[1])", "(hidden[0].detach(), hidden[1].detach())"),
    "repackage_any_name": src(
        """
        import torch
        import torch.nn as nn


        def cut_history(h):
            if isinstance(h, torch.Tensor):
                return h.detach()
            else:
                return tuple(cut_history(v) for v in h)


        def train(model, loader, opt, bsz):
            hidden = model.init_hidden(bsz)
            for x, y in loader:
                hidden = cut_history(hidden)
                output, hidden = model(x, hidden)
                loss = nn.functional.nll_loss(output, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    ),
    "imported_repackage": src(
        """
        import torch
        from utils import repackage_hidden


        def train(model, loader, opt, bsz):
            hidden = model.init_hidden(bsz)
            for x, y in loader:
                hidden = repackage_hidden(hidden)
                output, hidden = model(x, hidden)
                loss = output.sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    ),
    "init_hidden_each_batch": INIT_HIDDEN_PARAM_MODEL.replace(
        "        optimizer.zero_grad()\n", "        hidden = model.init_hidden(16)\n        optimizer.zero_grad()\n"
    ),
    "epoch_reinit_batch_detach": MODEL_CLASS_GRU.replace(
        "            logits, state = model(x, state)  # <carry>\n",
        "            if state is not None:\n                state = state.detach()\n"
        "            logits, state = model(x, state)\n",
    ),
    "eval_no_grad": src(
        """
        import torch


        def evaluate(model, loader, crit):
            hidden = model.init_hidden(8)
            total = 0.0
            with torch.no_grad():
                for x, y in loader:
                    out, hidden = model(x, hidden)
                    total += crit(out, y).item()
            return total
        """
    ),
    "eval_inference_mode": src(
        """
        import torch
        from torch import nn

        gru = nn.GRU(4, 4)
        h = None
        with torch.inference_mode():
            for x in xs:
                out, h = gru(x, h)
                out.sum().backward()
        """
    ),
    "eval_decorated": src(
        """
        import torch


        @torch.no_grad()
        def evaluate(model, loader):
            hidden = None
            for x in loader:
                out, hidden = model(x, hidden)
                out.sum().backward()
        """
    ),
    "backward_after_loop": src(
        """
        import torch
        from torch import nn

        gru = nn.GRU(4, 4)
        h = torch.zeros(1, 1, 4)
        outs = []
        for x in xs:
            out, h = gru(x, h)
            outs.append(out)
        loss = torch.cat(outs).sum()
        loss.backward()
        """
    ),
    "detach_in_forward_attr": src(
        """
        import torch
        import torch.nn as nn


        class Stateful(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(3, 5, batch_first=True)
                self.hidden = None

            def forward(self, x):
                if self.hidden is not None:
                    self.hidden = self.hidden.detach()
                out, self.hidden = self.gru(x, self.hidden)
                return out[:, -1].sum(-1)


        model = Stateful()
        opt = torch.optim.Adam(model.parameters())
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    ),
    "forward_returns_detached": src(
        """
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(3, 5)

            def forward(self, x, h):
                y, h = self.rnn(x, h)
                return y, h.detach()


        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        h = torch.zeros(1, 1, 5)
        for x in xs:
            y, h = net(x, h)
            loss = y.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    ),
    "item_accumulation": _seed_with("total = total + loss.item()").replace(
        "for step in range(3):", "total = 0.0\nfor step in range(3):"
    ).replace("out, hidden = gru(x, hidden)  # <carry>", "out, _ = gru(x)"),
    "tensor_accumulation_never_backpropagated": src(
        """
        import torch

        def train(model, loader, opt):
            total = 0
            for x, y in loader:
                loss = ((model(x) - y) ** 2).mean()
                total += loss
                opt.zero_grad()
                loss.backward()
                opt.step()
            return total
        """
    ),
    "retain_graph_two_losses_same_iteration": src(
        """
        import torch
        from torch import nn

        enc = nn.GRU(4, 4)
        head_a, head_b = nn.Linear(4, 1), nn.Linear(4, 1)
        opt = torch.optim.SGD(enc.parameters(), lr=0.1)
        for x in xs:
            out, h = enc(x)
            loss_a = head_a(out).sum()
            loss_b = head_b(h).sum()
            opt.zero_grad()
            loss_a.backward(retain_graph=True)
            loss_b.backward()
            opt.step()
        """
    ),
    "frozen_encoder_requires_grad_": src(
        """
        import torch
        from torch import nn

        encoder = nn.LSTM(4, 6, batch_first=True)
        encoder.requires_grad_(False)
        probe = nn.Linear(6, 2)
        opt = torch.optim.Adam(probe.parameters())
        state = None
        for x, y in batches:
            feats, state = encoder(x, state)
            loss = nn.functional.cross_entropy(probe(feats[:, -1]), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    ),
    "frozen_encoder_parameter_loop": src(
        """
        import torch
        from torch import nn


        def main(batches):
            encoder = nn.GRU(4, 6, batch_first=True)
            for p in encoder.parameters():
                p.requires_grad = False
            probe = nn.Linear(6, 2)
            opt = torch.optim.Adam(probe.parameters())
            state = None
            for x, y in batches:
                feats, state = encoder(x, state)
                loss = nn.functional.cross_entropy(probe(feats[:, -1]), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    ),
    "maml_inner_loop_create_graph": src(
        """
        import torch


        def adapt(model_fn, params, x, y, steps=3, lr=0.1):
            fast = list(params)
            for _ in range(steps):
                loss = ((model_fn(x, fast) - y) ** 2).mean()
                grads = torch.autograd.grad(loss, fast, create_graph=True)
                fast = [w - lr * g for w, g in zip(fast, grads)]
            return fast


        def meta_train(model_fn, params, tasks, meta_opt):
            for x, y, xq, yq in tasks:
                fast = adapt(model_fn, params, x, y)
                meta_loss = ((model_fn(xq, fast) - yq) ** 2).mean()
                meta_opt.zero_grad()
                meta_loss.backward()
                meta_opt.step()
        """
    ),
    "module_statistic_not_feeding_the_output": src(
        """
        import torch
        import torch.nn as nn


        class Tracker(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.ema = torch.zeros(4)

            def forward(self, x):
                h = self.fc(x)
                self.ema = 0.9 * self.ema + 0.1 * h.mean(0)
                return h


        model = Tracker()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in xs:
            loss = model(x).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    ),
    "integer_feedback": src(
        """
        import torch
        import torch.nn as nn

        net = nn.Linear(4, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        prev = torch.zeros(2, dtype=torch.long)
        bucket = torch.zeros(2, 1)
        for x in xs:
            logits = net(torch.cat([x, prev.unsqueeze(1).float(), bucket], dim=1))
            loss = logits.logsumexp(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            prev = torch.multinomial(logits.softmax(-1), 1).squeeze(1)
            bucket = (logits[:, :1] * 3).to(torch.long).float()
        """
    ),
    "graph_built_before_the_loop_is_not_gg101": src(
        """
        import torch
        from torch import nn
        X = torch.rand(2, 5, requires_grad=True)
        Y = X @ torch.ones(5, 1)
        lin = nn.Linear(5, 1)
        for i in range(10):
            l = ((lin(X) - Y) ** 2).sum()
            lin.zero_grad()
            l.backward()
        """
    ),
}

# Programs in the style of the canonical PyTorch examples (written here, not copied).
EXAMPLES_STYLE = {
    "word_language_model": src(
        """
        import math
        import torch
        import torch.nn as nn


        class RNNModel(nn.Module):
            def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5):
                super().__init__()
                self.drop = nn.Dropout(dropout)
                self.encoder = nn.Embedding(ntoken, ninp)
                if rnn_type in ['LSTM', 'GRU']:
                    self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
                else:
                    self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity='tanh', dropout=dropout)
                self.decoder = nn.Linear(nhid, ntoken)
                self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

            def forward(self, input, hidden):
                emb = self.drop(self.encoder(input))
                output, hidden = self.rnn(emb, hidden)
                output = self.drop(output)
                decoded = self.decoder(output).view(-1, self.decoder.out_features)
                return nn.functional.log_softmax(decoded, dim=1), hidden

            def init_hidden(self, bsz):
                weight = next(self.parameters())
                if self.rnn_type == 'LSTM':
                    return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                            weight.new_zeros(self.nlayers, bsz, self.nhid))
                return weight.new_zeros(self.nlayers, bsz, self.nhid)


        def repackage_hidden(h):
            if isinstance(h, torch.Tensor):
                return h.detach()
            return tuple(repackage_hidden(v) for v in h)


        model = RNNModel('LSTM', 1000, 32, 32, 2)
        criterion = nn.NLLLoss()


        def evaluate(data_source, bptt=35):
            model.eval()
            total_loss = 0.
            hidden = model.init_hidden(10)
            with torch.no_grad():
                for i in range(0, data_source.size(0) - 1, bptt):
                    data, targets = get_batch(data_source, i)
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                    total_loss += len(data) * criterion(output, targets).item()
            return total_loss / (len(data_source) - 1)


        def train(lr, epoch, bptt=35):
            model.train()
            total_loss = 0.
            hidden = model.init_hidden(20)
            for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
                data, targets = get_batch(train_data, i)
                model.zero_grad()
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
                loss = criterion(output, targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
                total_loss += loss.item()
                if batch % 200 == 0 and batch > 0:
                    print(math.exp(total_loss / 200))
                    total_loss = 0


        for epoch in range(1, 4):
            train(20, epoch)
            val_loss = evaluate(val_data)
        """
    ),
    "time_sequence_prediction": src(
        """
        import torch
        import torch.nn as nn
        import torch.optim as optim


        class Sequence(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm1 = nn.LSTMCell(1, 51)
                self.lstm2 = nn.LSTMCell(51, 51)
                self.linear = nn.Linear(51, 1)

            def forward(self, input, future=0):
                outputs = []
                h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
                c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
                h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
                c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
                for input_t in input.split(1, dim=1):
                    h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                    h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                    output = self.linear(h_t2)
                    outputs += [output]
                for i in range(future):
                    h_t, c_t = self.lstm1(output, (h_t, c_t))
                    h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                    output = self.linear(h_t2)
                    outputs += [output]
                return torch.cat(outputs, dim=1)


        if __name__ == '__main__':
            seq = Sequence().double()
            criterion = nn.MSELoss()
            optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
            for i in range(15):
                def closure():
                    optimizer.zero_grad()
                    out = seq(input)
                    loss = criterion(out, target)
                    loss.backward()
                    return loss
                optimizer.step(closure)
                with torch.no_grad():
                    pred = seq(test_input, future=1000)
                    y = pred.detach().numpy()
        """
    ),
    "dcgan": src(
        """
        import torch
        import torch.nn as nn

        netG, netD = Generator(), Discriminator()
        criterion = nn.BCELoss()
        optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4)
        optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4)
        for epoch in range(5):
            for i, data in enumerate(dataloader, 0):
                netD.zero_grad()
                real = data[0]
                label = torch.full((real.size(0),), 1.0)
                output = netD(real)
                errD_real = criterion(output, label)
                errD_real.backward()
                noise = torch.randn(real.size(0), 100, 1, 1)
                fake = netG(noise)
                label.fill_(0.0)
                output = netD(fake.detach())
                errD_fake = criterion(output, label)
                errD_fake.backward()
                optimizerD.step()
                netG.zero_grad()
                label.fill_(1.0)
                output = netD(fake)
                errG = criterion(output, label)
                errG.backward()
                optimizerG.step()
        """
    ),
    "mnist": src(
        """
        import torch
        import torch.nn.functional as F


        def train(model, device, train_loader, optimizer, epoch):
            model.train()
            for batch_idx, (data, target) in enumerate(train_loader):
                data, target = data.to(device), target.to(device)
                optimizer.zero_grad()
                output = model(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                optimizer.step()
                if batch_idx % 10 == 0:
                    print(epoch, loss.item())


        def test(model, device, test_loader):
            model.eval()
            test_loss = 0
            with torch.no_grad():
                for data, target in test_loader:
                    output = model(data)
                    test_loss += F.nll_loss(output, target, reduction='sum').item()
            return test_loss
        """
    ),
    "reinforce": src(
        """
        from itertools import count
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.distributions import Categorical


        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.affine1 = nn.Linear(4, 128)
                self.affine2 = nn.Linear(128, 2)
                self.saved_log_probs = []
                self.rewards = []

            def forward(self, x):
                return F.softmax(self.affine2(F.relu(self.affine1(x))), dim=1)


        policy = Policy()
        optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)


        def select_action(state):
            state = torch.from_numpy(state).float().unsqueeze(0)
            probs = policy(state)
            m = Categorical(probs)
            action = m.sample()
            policy.saved_log_probs.append(m.log_prob(action))
            return action.item()


        def finish_episode():
            R = 0
            policy_loss = []
            returns = []
            for r in policy.rewards[::-1]:
                R = r + 0.99 * R
                returns.insert(0, R)
            returns = torch.tensor(returns)
            for log_prob, R in zip(policy.saved_log_probs, returns):
                policy_loss.append(-log_prob * R)
            optimizer.zero_grad()
            policy_loss = torch.cat(policy_loss).sum()
            policy_loss.backward()
            optimizer.step()
            del policy.rewards[:]
            del policy.saved_log_probs[:]


        def main():
            running_reward = 10
            for i_episode in count(1):
                state, _ = env.reset()
                ep_reward = 0
                for t in range(1, 10000):
                    action = select_action(state)
                    state, reward, done, _, _ = env.step(action)
                    policy.rewards.append(reward)
                    ep_reward += reward
                    if done:
                        break
                running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
                finish_episode()
        """
    ),
    "actor_critic": src(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.affine1 = nn.Linear(4, 128)
                self.action_head = nn.Linear(128, 2)
                self.value_head = nn.Linear(128, 1)
                self.saved_actions = []
                self.rewards = []

            def forward(self, x):
                x = F.relu(self.affine1(x))
                return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


        model = Policy()
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)


        def finish_episode():
            R = 0
            policy_losses, value_losses, returns = [], [], []
            for r in model.rewards[::-1]:
                R = r + 0.99 * R
                returns.insert(0, R)
            returns = torch.tensor(returns)
            for (log_prob, value), R in zip(model.saved_actions, returns):
                advantage = R - value.item()
                policy_losses.append(-log_prob * advantage)
                value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
            optimizer.zero_grad()
            loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
            loss.backward()
            optimizer.step()
            del model.rewards[:]
            del model.saved_actions[:]


        def main():
            running_reward = 10
            for i_episode in range(1000):
                state, _ = env.reset()
                ep_reward = 0
                for t in range(1, 10000):
                    action = select_action(state)
                    state, reward, done, _, _ = env.step(action)
                    model.rewards.append(reward)
                    ep_reward += reward
                    if done:
                        break
                running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
                finish_episode()
        """
    ),
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent_idioms(name):
    text = SILENT[name]
    assert gg101(text) == [], [f.message_in("en") for f in gg101(text)]


@pytest.mark.parametrize("name", sorted(EXAMPLES_STYLE))
def test_canonical_programs_are_silent(name):
    assert gg101(EXAMPLES_STYLE[name]) == []


def test_silent_idioms_really_differ_from_the_bug():
    # guard against a vacuous silence: removing the cut brings the finding back
    assert gg101(SILENT["detach"].replace("    hidden = hidden.detach()\n", "")) != []
    broken = EXAMPLES_STYLE["word_language_model"].replace(
        "    model.zero_grad()\n        hidden = repackage_hidden(hidden)\n", "    model.zero_grad()\n"
    )
    assert broken != EXAMPLES_STYLE["word_language_model"]
    assert [f.data["variable"] for f in gg101(broken)] == ["hidden"]


# ---------------------------------------------------------------------------
# robustness, explanation, docs
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "for x in y: out, h = gru(x, h); loss.backward()\n",
        "while True:\n    h = f(h)\n    h.backward()\n",
        "def f():\n    for x in xs:\n        h, = g(x, h)\n        (h * 2).backward()\n",
        "async def f():\n    async for x in xs:\n        out, h = await m(x, h)\n        out.backward()\n",
        "for x in xs:\n    match x:\n        case 1:\n            out, h = m(x, h)\n    out.backward()\n",
        "class A:\n    def f(self):\n        for x in xs:\n            out, self.h = self.m(x, self.h)\n            out.backward()\n",
    ],
)
def test_odd_shapes_never_crash(text):
    r = check_source(text)
    for f in r.findings:
        if f.preferred_fix:
            apply_text_edits(text, f.preferred_fix.edits)


def test_one_line_loop_body_gets_no_broken_fix():
    text = "import torch\nfrom torch import nn\ngru = nn.GRU(2, 2)\nh = None\nfor x in xs: out, h = gru(x, h); out.sum().backward()\n"
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].fixes == ()


def test_explanation_sections_both_languages():
    rule = get_rule("GG101")
    from rule_pages import assert_sections

    assert_sections("GG101")
    en, zh = rule.explain("en"), rule.explain("zh")
    for topic in ("None", ".data", "(h, c)", "truncated", "retain_graph=True"):
        assert topic in en, topic
    for topic in ("None", ".data", "(h, c)", "截断", "retain_graph=True"):
        assert topic in zh, topic


def test_docs_page_is_generated_from_the_explanation():
    from rule_pages import assert_docs_page_is_the_explanation

    assert_docs_page_is_the_explanation("GG101")


# ---------------------------------------------------------------------------
# analysis/ast_util helpers shared by the rules
# ---------------------------------------------------------------------------
def _expr(code: str):
    import ast

    return ast.parse(code, mode="eval").body


@pytest.mark.parametrize(
    "code, target",
    [
        ("loss.backward()", "loss"),
        ("loss.backward(gradient=g)", "loss"),
        ("(a + b).backward(g)", "a + b"),
        ("scaler.scale(loss).backward()", "loss"),
        ("accelerator.backward(loss)", "loss"),
        ("self.manual_backward(loss)", "loss"),
        ("torch.autograd.backward(out.sum())", "out.sum()"),
        ("torch.autograd.grad(loss, params, create_graph=True)", "loss"),
    ],
)
def test_backward_target(code, target):
    import ast

    from gradguard.analysis import ast_util as flow

    call = _expr(code)
    assert flow.is_backward_call(call)
    assert ast.unparse(flow.backward_target(call)) == target


@pytest.mark.parametrize(
    "code, cut",
    [
        ("h.detach()", True),
        ("h.detach().to(dev)", True),
        ("tuple(s.detach() for s in h)", True),
        ("(h.detach(), c.detach())", True),
        ("(h[0].detach(), h[1])", False),
        ("h.data", True),
        ("loss.item()", True),
        ("None", True),
        ("h.clone()", False),
        ("h", False),
    ],
)
def test_is_graph_cut(code, cut):
    from gradguard.analysis import ast_util as flow

    assert flow.is_graph_cut(_expr(code)) is cut


def test_no_grad_recognition_through_aliases():
    import ast

    from gradguard.analysis import ast_util as flow

    tree = ast.parse(
        "import torch as th\n"
        "with th.no_grad():\n    pass\n"
        "with torch.set_grad_enabled(False):\n    pass\n"
        "with torch.set_grad_enabled(True):\n    pass\n"
        "with torch.inference_mode(False):\n    pass\n"
    )
    withs = [s for s in tree.body if isinstance(s, ast.With)]
    assert [flow.is_no_grad_with(w) for w in withs] == [True, True, False, False]


DRIVEN_TWICE = '''\
import torch
from torch import nn


class StatefulGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 6, batch_first=True)
        self.state = None

    def forward(self, x):
        out, self.state = self.gru(x, self.state)
        return out[:, -1]


def fit(criterion, model, head, loader, opt):
    for x, y in loader:
        loss = criterion(head(model(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
'''


def test_stateful_message_names_the_same_loop_call_in_every_process():
    """The loop-call facts are sets, iterated in a per-process hash order: the
    message must not depend on it (it named `criterion`, `head` or `model` at random)."""
    code = ("import sys; from gradguard.engine import check_source; "
            "print([f.message['en'] for f in check_source(sys.stdin.read(), 'd.py').findings])")
    outs = set()
    for seed in ("1", "2", "3", "4"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", code], input=DRIVEN_TWICE, capture_output=True, text=True,
                           env=env, check=True)
        outs.add(r.stdout)
    assert len(outs) == 1
    assert "through `model(...)`" in outs.pop()


def test_an_in_place_detach_of_every_element_is_a_cut():
    import ast as _ast

    from gradguard.analysis.ast_util import inplace_cut_target

    def target(src):
        return inplace_cut_target(_ast.parse(src).body[0])

    assert target("for s in state:\n    s.detach_()\n") == "state"
    assert target("for s in self.hidden:\n    s.requires_grad_(False)\n") == "self.hidden"
    assert target("for s in state:\n    s.detach_()\n    print(s)\n") is None  # does more than cut
    assert target("for s in state:\n    other.detach_()\n") is None  # cuts something else
    assert target("for s in (h, c):\n    s.detach_()\n") is None  # no name to cut
    assert target("for s in state:\n    s.detach_()\nelse:\n    pass\n") is None


def test_a_helper_that_retains_the_graph_is_reported_as_retaining():
    """The helper's backward(retain_graph=True) reaches the finding like a direct one."""
    from gradguard.engine import check_source

    direct = ("import torch\nlin = torch.nn.Linear(3, 3)\nh = torch.rand(1, 3)\n"
              "for i in range(4):\n    h = lin(h)\n    h.sum().backward(retain_graph=True)\n")
    helper = ("import torch\nlin = torch.nn.Linear(3, 3)\n\n\ndef show(out):\n"
              "    out.sum().backward(retain_graph=True)\n\n\nh = torch.rand(1, 3)\n"
              "for i in range(4):\n    h = lin(h)\n    show(h)\n")
    for src in (direct, helper, helper.replace("retain_graph=True", "")):
        (f,) = check_source(src, "t.py").findings
        assert f.code == "GG101"
        assert f.data.get("retain_graph", False) == ("retain_graph=True" in src), src


# -- fix safety: a state's containers survive the fix (issue 16) ----------------
NESTED_STATE = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    cell = nn.GRUCell(3, 4)
    opt = torch.optim.SGD(cell.parameters(), lr=0.1)
    _detach_state = "a name the program already uses"
    {init}
    for step in range(4):
        x = torch.randn(2, 3)
        {read}
        h = cell(x, h)
        h.pow(2).mean().backward()
        opt.step()
        {write}  # <carry>
''')


@pytest.mark.parametrize("init,read,write,kind", [
    ("states = {}", "h = states.get(step % 2, torch.zeros(2, 4))", "states[step % 2] = h", dict),
    ("mems = [(torch.zeros(2, 4),) for _ in range(2)]", "h = mems[step % 2][0]", "mems[step % 2] = (h,)", list),
    ("state = {'dec': {'h': torch.zeros(2, 4)}}", "h = state['dec']['h']", "state = {'dec': {'h': h}}", dict),
])
def test_a_dict_or_a_list_of_tuples_keeps_its_containers_when_fixed(init, read, write, kind):
    """A dict of states must not become a tuple, nor a list of per-chunk tuples a
    list of tensors (`.detach()` on a tuple): the preferred fix detaches through a
    helper that keeps every container, named apart from what the program uses."""
    text = NESTED_STATE.format(init=init, read=read, write=write)
    (f,) = gg101(text)
    assert f.range.start.line == line(text, "# <carry>")
    fixed = apply_preferred(text)
    assert "def _detach_state2(s):" in fixed and "tuple(s.detach() for s in" not in fixed
    var = write.split("[")[0].split(" =")[0]
    assert f"    {var} = _detach_state2({var})\n" in fixed
    ns: dict = {}
    exec(compile(fixed, "fixed.py", "exec"), ns)  # trains: no second backward through a freed graph
    assert isinstance(ns[var], kind)


@pytest.mark.parametrize("framework", ["from mxnet import autograd, np", "import paddle", "import tensorflow as tf"])
def test_a_file_of_another_framework_is_not_a_torch_program(framework):
    """d2l ships the same RNN trainer for mxnet and paddle beside torch's; their
    detach() and backward() live by other rules, and no torch error can be proven
    there. With torch imported too, the same loop is reported."""
    body = textwrap.dedent("""\
        state = net.begin_state(batch_size=2)
        for X, Y in train_iter:
            y_hat, state = net(X, state)
            l = loss(y_hat, Y).mean()
            l.backward()
            updater(batch_size=1)
    """)
    assert gg101(framework + "\n" + body) == []
    assert len(gg101(framework + "\nimport torch\n" + body)) == 1


SNN = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    {imports}

    net = nn.Sequential(nn.Linear(4, 8), {neuron}, nn.Linear(8, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for data, targets in loader:
        {reset}
        out = net(data)  # <carry>
        loss = nn.functional.cross_entropy(out, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
''')


@pytest.mark.parametrize("imports,neuron,reset,reported", [
    ("import snntorch as snn\nfrom snntorch import utils", "snn.Leaky(beta=0.9, init_hidden=True)", "pass", True),
    ("import snntorch as snn\nfrom snntorch import utils", "snn.Leaky(beta=0.9, init_hidden=True)", "utils.reset(net)", False),
    ("import snntorch as snn", "snn.Synaptic(alpha=0.9, beta=0.8, init_hidden=True)", "pass", True),
    ("import snntorch as snn", "snn.Leaky(beta=0.9)", "pass", False),  # takes and returns mem: not kept inside
    ("from spikingjelly.activation_based import neuron, functional", "neuron.LIFNode(tau=2.0)", "pass", True),
    ("from spikingjelly.activation_based import neuron, functional", "neuron.LIFNode(tau=2.0)",
     "functional.reset_net(net)", False),
    ("from spikingjelly.clock_driven import neuron, functional", "neuron.IFNode()", "pass", True),
])
def test_library_neurons_that_keep_state_inside_a_sequential(imports, neuron, reset, reported):
    """snntorch's neurons with init_hidden=True and spikingjelly's neurons keep
    their state on the module (the knowledge table says which, and which calls
    reset it): called through an nn.Sequential in a loop that never resets them,
    the next backward runs into the freed graph. The libraries are not test
    dependencies: this checks the shape statically (a stand-in written the same
    way is proven under torch by gg101_stateful_neuron_in_sequential.py)."""
    text = SNN.format(imports=imports, neuron=neuron, reset=reset)
    fs = gg101(text)
    if not reported:
        assert fs == []
        return
    (f,) = fs
    assert f.range.start.line == line(text, "# <carry>")
    assert "reset" in f.message_in("en") and "重置" in f.message_in("zh")


CACHE = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    class TextEncoder(nn.Module):
        def __init__(self, cache_feature=True):
            super().__init__()
            self.proj = nn.Linear(8, 8)
            self.cache_feature = cache_feature
            self.cache = None

        def clear_cache(self):
            self.cache = None

        def forward(self, text):
            if {guard} and self.cache is not None:
                return self.cache
            x = self.proj(text)
            if self.cache_feature:
                self.cache = x
            return x

    {body}
''')

CACHE_LOOP = textwrap.dedent('''\
    t = torch.randn(4, 8)
    enc = {ctor}
    head = nn.Linear(8, 8)
    opt = torch.optim.SGD(list(enc.parameters()) + list(head.parameters()), lr=0.1)
    {before}
    for it in range(3):
        {inloop}
        feats = {call}  # <carry>
        loss = (head(torch.randn(2, 8)) @ feats.t()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
''')


@pytest.mark.parametrize("guard,ctor,before,inloop,call,reported", [
    ("self.cache_feature", "TextEncoder()", "", "pass", "enc(t)", True),
    ("self.cache_feature", "TextEncoder(cache_feature=True)", "", "pass", "enc(t)", True),
    ("self.cache_feature", "TextEncoder(True).to('cpu')", "", "pass", "enc(t)", True),
    ("self.cache_feature", "TextEncoder()", "", "pass", "enc.forward(t)", True),
    ("self.cache_feature", "TextEncoder(cache_feature=False)", "", "pass", "enc(t)", False),
    ("self.cache_feature", "TextEncoder(False)", "", "pass", "enc(t)", False),
    ("self.cache_feature", "TextEncoder(cache_feature=flag)", "", "pass", "enc(t)", False),  # unknown
    ("self.cache_feature", "TextEncoder(**cfg)", "", "pass", "enc(t)", False),  # unknown
    ("self.cache_feature", "TextEncoder()", "enc.cache_feature = False", "pass", "enc(t)", False),
    ("self.cache_feature", "TextEncoder()", "enc.requires_grad_(False)", "pass", "enc(t)", False),
    ("self.cache_feature", "TextEncoder()", "for p in enc.parameters():\n    p.requires_grad = False", "pass",
     "enc(t)", False),
    ("self.cache_feature", "TextEncoder()", "with torch.no_grad():\n    enc(t)", "pass", "enc(t)", False),  # warm
    ("self.cache_feature", "TextEncoder()", "", "enc.cache = None", "enc(t)", False),
    ("self.cache_feature", "TextEncoder()", "", "enc.clear_cache()", "enc(t)", False),
    ("self.cache_feature", "TextEncoder()", "", "pass", "enc(t).detach()", False),
    ("not self.training", "TextEncoder()", "", "pass", "enc(t)", False),  # eval-only cache: unknown here
])
def test_a_cache_kept_on_the_module(guard, ctor, before, inloop, call, reported):
    """A module whose forward keeps its result on itself and hands it back on later
    calls (issue 12, shape 1): with a graph in it, the next iteration's backward
    runs into the freed graph. Silent where the cache holds no graph (frozen, warmed
    under no_grad), is emptied each iteration, is off (a constructor flag seen to be
    false), or where whether it is on cannot be seen."""
    text = CACHE.format(guard=guard, body=CACHE_LOOP.format(ctor=ctor, before=before, inloop=inloop, call=call))
    fs = gg101(text)
    if not reported:
        assert fs == [], [f.message_in("en") for f in fs]
        return
    (f,) = fs
    assert f.range.start.line == line(text, "# <carry>")
    assert f.data["variable"] == "enc.cache"
    assert "TextEncoder.forward" in f.message_in("en") and "缓存" in f.message_in("zh")
    fixed = apply_preferred(text)
    assert "        enc.cache = enc.cache.detach()\n" in fixed
    assert [fx.edits[0].new_text.strip() for fx in f.fixes][1] == "enc.cache = None"


def test_a_cache_filled_once_inside_a_function():
    """``if self.cache is None: self.cache = ...; return self.cache``, the encoder
    made and driven inside ``def train()``: the same carried cache."""
    text = src('''
        import torch
        import torch.nn as nn

        class Prompt(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.cache = None

            def forward(self, x):
                if self.cache is None:
                    self.cache = self.proj(x)
                return self.cache

        def train(data):
            prompt = Prompt()
            opt = torch.optim.SGD(prompt.parameters(), lr=0.1)
            for x in data:
                p = prompt(x)  # <carry>
                loss = p.pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
    ''')
    (f,) = gg101(text)
    assert f.range.start.line == line(text, "# <carry>")
    assert f.data["variable"] == "prompt.cache"
    assert not gg101(text.replace("prompt = Prompt()", "prompt = Prompt().requires_grad_(False)"))


SNN_CLASS = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    {imports}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.lif1 = {neuron}
            self.head = nn.Sequential(nn.Linear(8, 2), {neuron})

        def forward(self, x):
            {inside}
            spk = self.lif1(self.fc1(x))
            return self.head(spk)

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for data, targets in loader:
        {reset}
        spk_rec = []
        for step in range(num_steps):
            spk_rec.append(net(data))  # <carry>
        loss = nn.functional.cross_entropy(torch.stack(spk_rec).sum(0), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
''')
SNN_IMPORTS = "import snntorch as snn\nfrom snntorch import utils"
SJ_IMPORTS = "from spikingjelly.activation_based import neuron, functional"


@pytest.mark.parametrize("imports,neuron,inside,reset,reported", [
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "pass", "pass", True),
    (SNN_IMPORTS, "snn.Synaptic(alpha=0.9, beta=0.8, init_hidden=True)", "pass", "pass", True),
    ("from snntorch import Leaky", "Leaky(beta=0.9, init_hidden=True)", "pass", "pass", True),
    (SJ_IMPORTS, "neuron.LIFNode(tau=2.0)", "pass", "pass", True),
    ("from spikingjelly.clock_driven import neuron, functional", "neuron.IFNode()", "pass", "pass", True),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "pass", "utils.reset(net)", False),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "pass",
     "for m in net.modules():\n        if hasattr(m, 'reset_mem'):\n            m.reset_mem()", False),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "utils.reset(self)", "pass", False),
    # forward resets what one member holds: that member keeps nothing, the other still does
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "utils.reset(self.head); utils.reset(self.lif1)", "pass",
     False),
    (SJ_IMPORTS, "neuron.LIFNode(tau=2.0)", "functional.reset_net(net=self.head); self.lif1.reset()", "pass", False),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "utils.reset(self.head)", "pass", "lif1"),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "print(self.head)", "pass", True),  # not a reset
    (SJ_IMPORTS, "neuron.LIFNode(tau=2.0)", "pass", "functional.reset_net(net)", False),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9)", "pass", "pass", False),  # takes and returns mem: nothing kept inside
    ("import mylib as snn", "snn.Leaky(beta=0.9, init_hidden=True)", "pass", "pass", False),  # not the library
])
def test_library_neurons_kept_on_a_module_of_the_user(imports, neuron, inside, reset, reported):
    """snntorch's neurons with init_hidden=True and spikingjelly's neurons kept on a
    network's attributes (``self.lif1``, inside ``self.head = nn.Sequential(...)``)
    and called by its forward: a loop that calls ``net(data)`` per time step and never
    resets them carries the last batch's graph (the knowledge table says which
    classes keep state and which calls reset it; the class summary says which of
    them the module holds and calls). The libraries are not test dependencies: the
    runtime half is gg101_stateful_neurons_on_the_module.py's stand-in."""
    text = SNN_CLASS.format(imports=imports, neuron=neuron, inside=inside, reset=reset)
    fs = gg101(text)
    if not reported:
        assert fs == [], [f.message_in("en") for f in fs]
        return
    (f,) = fs
    assert f.range.start.line == line(text, "# <carry>")
    if reported == "lif1":  # the head's neuron reset by forward, lif1's not
        assert [v.split(".")[1] for v in f.data["variables"]] == ["lif1"]
    else:
        assert f.data["variables"][0].startswith("net.head.1.") and f.data["variables"][1].startswith("net.lif1.")
    assert "reset" in f.message_in("en") and "重置" in f.message_in("zh")
    assert f.fixes == ()  # a library's neurons: the message names its reset


SNN_DEEPER = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    {imports}

    class Block(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.fc = nn.Linear(n_in, n_out)
            self.lif = {neuron}

        def forward(self, x):
            {inside}
            return self.lif(self.fc(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block(4, 8)  # 神经元在子模块的子模块里
            self.head = nn.Sequential(nn.Linear(8, 8), Block(8, 2))

        def forward(self, x):
            return self.head(self.block(x))

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for data, targets in loader:
        {reset}
        spk_rec = []
        for step in range(num_steps):
            spk_rec.append(net(data))  # <carry>
        loss = nn.functional.cross_entropy(torch.stack(spk_rec).sum(0), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
''')


@pytest.mark.parametrize("imports,neuron,inside,reset,reported", [
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "pass", "pass", True),
    (SJ_IMPORTS, "neuron.LIFNode(tau=2.0)", "pass", "pass", True),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "pass", "utils.reset(net)", False),
    (SJ_IMPORTS, "neuron.LIFNode(tau=2.0)", "pass", "functional.reset_net(net)", False),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "pass",
     "for m in net.modules():\n        if hasattr(m, 'reset_mem'):\n            m.reset_mem()", False),
    (SNN_IMPORTS, "snn.Leaky(beta=0.9, init_hidden=True)", "utils.reset(self)", "pass", False),  # each block resets
    (SNN_IMPORTS, "snn.Leaky(beta=0.9)", "pass", "pass", False),  # takes and returns mem: nothing kept inside
])
def test_library_neurons_one_module_deeper(imports, neuron, inside, reset, reported):
    """The neurons held by a block the network holds (``self.block``, and inside
    ``self.head = nn.Sequential(...)``): the network's facts say it calls its blocks,
    each block's that it calls its neuron (``ClassFacts.members``, followed one module
    deeper each: ``Resolver.member_states``). The runtime half is
    gg101_stateful_neurons_one_module_deeper.py's stand-in."""
    text = SNN_DEEPER.format(imports=imports, neuron=neuron, inside=inside, reset=reset)
    fs = gg101(text)
    if not reported:
        assert fs == [], [f.message_in("en") for f in fs]
        return
    (f,) = fs
    assert f.range.start.line == line(text, "# <carry>")
    assert [v.rsplit(".", 1)[0] for v in f.data["variables"]] == ["net.block.lif", "net.head.1.lif"]
    assert "`net.block.lif`" in f.message_in("en") and "`net.head.1.lif`" in f.message_in("en")
    assert f.fixes == ()  # a library's neurons: the message names its reset


@pytest.mark.parametrize("reset,reported", [
    ("net.reset_()", False),  # a method of the class that resets its neurons
    ("net.clear()", False),  # a method the class's facts do not show (inherited): unknown
    ("log_spikes(net)", False),  # the object handed to a function not of torch's: unknown
    ("functional.detach_net(net)", False),
    ("net.describe()", True),  # a method of the class that resets nothing
])
def test_what_resets_neurons_kept_on_a_module(reset, reported):
    """spikingjelly's examples reset through a method of the network
    (``def reset_(self): functional.reset_net(self)``, called after the step):
    a method whose body resets, one that cannot be seen, or a function the object
    is handed to may reset the neurons, so nothing is proven there."""
    text = SNN_CLASS.format(imports=SJ_IMPORTS, neuron="neuron.LIFNode(tau=2.0)", inside="pass", reset=reset)
    text = text.replace("    def forward(self, x):", "    def reset_(self):\n        functional.reset_net(self)\n\n"
                        "    def describe(self):\n        return 'snn'\n\n    def forward(self, x):")
    fs = gg101(text)
    assert len(fs) == (1 if reported else 0), [f.message_in("en") for f in fs]


def test_state_kept_between_calls_with_unknown_shape_uses_the_helper():
    # `global state` rebuilt by a model of unseen code: detached at the top of the
    # function with the helper, defined before the function (after the docstring and the global)
    text = src(
        '''
        import torch
        from models import Model

        model = Model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        state = None


        def step(x):
            """One batch."""
            global state
            out, state = model(x, state)  # <carry>
            loss = out.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        '''
    )
    (f,) = gg101(text)
    helper, call = f.preferred_fix.edits
    assert helper.range.start.line == line(text, "def step(") and helper.new_text.startswith("def _detach_state(s):")
    assert call.range.start.line == line(text, "# <carry>")
    assert call.new_text == "    if state is not None:\n        state = _detach_state(state)\n"
    fixed = assert_fixed_cleanly(text)
    assert fixed.count("def _detach_state(s):") == 1


def test_a_same_file_models_recurrent_state_is_a_known_shape():
    # the model's forward hands back its GRU's h (one tensor) / its LSTM's (h, c): one-line
    # fixes; the same loop over a forward returning a dict of states gets the helper
    def program(layer: str, ret: str) -> str:
        return src(
            f"""
            import torch
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rnn = nn.{layer}(3, 4)

                def forward(self, x, h=None):
                    out, h = self.rnn(x, h)
                    return out.sum(), {ret}


            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            state = None
            for step in range(3):
                loss, state = net(torch.randn(5, 2, 3), state)  # <carry>
                opt.zero_grad()
                loss.backward()
                opt.step()
            """
        )

    for layer, ret, expect in (("GRU", "h", "state = state.detach()"),
                               ("LSTM", "h", "state = tuple(s.detach() for s in state)"),
                               ("GRU", '{"h": h}', "state = _detach_state(state)")):
        text = program(layer, ret)
        (f,) = gg101(text)
        assert f.range.start.line == line(text, "# <carry>")
        assert f.preferred_fix.edits[-1].new_text.strip().splitlines()[-1].strip() == expect, (layer, ret)
        assert_fixed_cleanly(text)


GUARDED = src(
    '''
    import torch
    import torch.nn as nn

    rnn = nn.GRUCell(3, 4)
    head = nn.Linear(4, 1)
    opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)
    h = torch.zeros(2, 4)
    for i in range(6):
        h = rnn(torch.randn(2, 3), h)  # <carry>
        if (i + 1) % 2 == 0:
            loss = head(h).pow(2).mean()
            opt.zero_grad()
            loss.backward()  # <backward>
            opt.step()
        # <after>
    '''
)


def test_a_state_carried_past_a_guarded_backward_is_cut_where_the_backward_ran():
    """The backward runs every other iteration: the iteration that skips it hands
    its live graph to the next one, whose backward goes through both (truncated
    back-propagation every two steps). A detach at the top of every iteration would
    cut that live graph and change the first step's gradients; the detach goes
    right after the backward, inside its block (fixture
    gg101_backward_from_second_pass_on proves the shape under torch)."""
    (f,) = gg101(GUARDED)
    assert f.range.start.line == line(GUARDED, "# <carry>")
    (fix,) = f.fixes
    assert fix.preferred and fix.title_in("en") == (
        "Detach `h` after this iteration's backward() (keeps the state, cuts the graph)")
    (edit,) = fix.edits
    assert edit.range.start.line == line(GUARDED, "# <backward>") + 1
    assert edit.new_text == "        h = h.detach()\n"
    assert_fixed_cleanly(GUARDED)


@pytest.mark.parametrize("after,fix", [
    # rebound after the guarded block from something else: no one place is right
    ("h = h * 0.5", None),
    # a plain copy after the block: its source is cut where the backward ran
    ("prev = h", "Detach `h` after this iteration's backward(), before it becomes `prev`"),
    # ... unless something between reads the source (it would read the detached value)
    ("if h.sum() > 0:\n        pass\n    prev = h", None),
])
def test_a_state_rebound_after_the_guarded_backward(after, fix):
    text = GUARDED.replace("h = rnn(torch.randn(2, 3), h)  # <carry>", "h = rnn(torch.randn(2, 3), prev)" if
                           "prev = h" in after else "h = rnn(torch.randn(2, 3), h)  # <carry>")
    text = text.replace("h = torch.zeros(2, 4)", "h = prev = torch.zeros(2, 4)").replace("# <after>", after)
    fs = gg101(text)
    assert fs, text
    f = fs[-1]
    if fix is None:
        assert f.fixes == ()
        assert "detach" in f.message_in("en")  # the message still says what to do
        return
    assert f.preferred_fix is not None and f.preferred_fix.title_in("en").startswith(fix)
    fixed = apply_preferred(text)
    assert "            h = h.detach()\n" not in fixed and "        h = h.detach()\n" in fixed


def test_no_detach_where_the_guarded_block_has_just_reset_the_state():
    """`if every k-th: acc.backward(); acc = 0.0 else: acc += loss`: a detach after
    the backward lands where `acc` is 0.0 and cuts nothing (the finding stays, and
    the fix loop once wrote it again each round); the graph reaching the backward is
    the one summed on the other iterations, which it is meant to go through, so no
    fix is offered."""
    text = src(
        """
        import torch
        from torch import nn

        def fit(net, opt, data):
            acc = 0
            for i, (x, y) in enumerate(data):
                h = net(x)
                main = (h - y).pow(2).mean()
                opt.zero_grad()
                main.backward()
                opt.step()
                if acc > 0 and (i + 1) % 2 == 0:
                    acc.backward()
                    acc = 0.0
                else:
                    acc += h.sum()
        """
    )
    found = gg101(text)
    assert len(found) == 1 and found[0].fixes == ()
    for reset in ("torch.zeros(())", "-0.0", "None"):
        assert gg101(text.replace("acc = 0.0", f"acc = {reset}"))[0].fixes == ()


# -- a list of losses back-propagated by index (the forum's ensemble kept in lists) --------------
_ENSEMBLE = src("""
    import torch
    import torch.nn as nn

    models = []
    for _ in range(3):
        models.append(nn.Linear(4, 2))
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    LOSSES_BEFORE
    for epoch in range(2):
        for j in range(3):
            LOSSES_PER_BATCH
            x = torch.randn(5, 4)
            for i in range(3):
                loss = models[i](x).pow(2).mean()
                PUT
                opts[i].zero_grad()
                losses[i].backward()  # <bw>
                opts[i].step()
""")


def _ensemble(before: str, per_batch: str, put: str) -> str:
    return _ENSEMBLE.replace("LOSSES_BEFORE", before).replace("LOSSES_PER_BATCH", per_batch).replace("PUT", put)


def test_a_list_of_losses_never_emptied_and_read_by_index_is_carried():
    # models[i](x): an element of a list of modules built by append is a module; the list of
    # losses made once keeps the first batch's loss of model 0 at index 0
    text = _ensemble("losses = []", "pass", "losses.append(loss)  # <carry>")
    found = gg101(text)
    assert [(f.range.start.line, f.data["variable"]) for f in found] == [(line(text, "# <carry>"), "losses")]
    f = found[0]
    assert "back-propagates an element an earlier iteration put in it" in f.message_in("en")
    assert "之前某轮放进去的元素" in f.message_in("zh")
    assert not f.fixes  # a detached list leaves the backward nothing to run from


@pytest.mark.parametrize("before, per_batch, put", [
    ("pass", "losses = []", "losses.append(loss)"),  # emptied for each batch: losses[i] is this one
    ("losses = []", "losses.clear()", "losses.append(loss)"),
    ("losses = [None] * 3", "pass", "losses[i] = loss"),  # one slot per model, overwritten first
])
def test_the_element_this_iteration_put_in_is_not_carried(before, per_batch, put):
    text = _ensemble(before, per_batch, put)
    assert gg101(text) == []
    r = check_source(text, "snippet.py")
    assert not [f for f in r.findings if f.code == "GG201"]  # the list is read by the backward


@pytest.mark.parametrize("before, per_batch, put", [
    ("pass", "losses = []", "if i:\n                losses.append(loss)"),  # not in every iteration
    ("losses = [None] * 3", "pass", "losses[i - 1] = loss"),  # another slot than the one read
    ("pass", "losses = [loss0]", "losses.append(loss)"),  # not empty where the loop starts
])
def test_an_element_not_proven_this_iterations_is_still_carried(before, per_batch, put):
    text = _ensemble(before, per_batch, put).replace("x = torch.randn(5, 4)",
                                                     "x = torch.randn(5, 4)\n        loss0 = models[0](x).sum()")
    assert "losses" in [f.data["variable"] for f in gg101(text)]


A3C_PLAYER = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(3, 4)
            self.head = nn.Linear(4, 1)

        def forward(self, x, hx, cx):
            hx, cx = self.cell(x, (hx, cx))
            return self.head(hx), (hx, cx)


    class Agent(object):
        def __init__(self, model):
            self.model = model
            self.hx = torch.zeros(1, 4)
            self.cx = torch.zeros(1, 4)
            self.values, self.rewards = [], []

        def action_train(self):
    {rewrap}
            value, (self.hx, self.cx) = self.model(torch.randn(1, 3), self.hx, self.cx)
            self.values.append(value)
            self.rewards.append(1.0)

        def clear_actions(self):
            self.values, self.rewards = [], []


    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    player = Agent(model)
    for update in range(3):
        for step in range(4):
            player.action_train()
        loss = sum(v.pow(2).sum() for v in player.values)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        player.clear_actions()
""")


def test_an_agent_emptying_its_lists_in_one_tuple_assignment_keeps_no_graph():
    # the player's state re-wrapped from .data each step, the lists emptied by a tuple display
    src = A3C_PLAYER.format(rewrap="        self.hx, self.cx = self.hx.data, self.cx.data")
    assert not [f for f in check_source(src).findings if f.code == "GG101"]


def test_an_agent_keeping_its_lstm_state_across_updates_is_reported_without_a_fix():
    src = A3C_PLAYER.format(rewrap="        pass")
    got = [f for f in check_source(src).findings if f.code == "GG101"]
    assert len(got) == 1
    f = got[0]
    assert src.splitlines()[f.range.start.line].strip().startswith("value, (self.hx, self.cx) = self.model(")
    assert f.data["variable"] in ("self.hx", "self.cx")
    # four calls per backward: a detach at the top of action_train would change the update
    assert not f.fixes


# ---------------------------------------------------------------------------
# running statistics read only in eval mode (a custom batch norm, pytorch issue 20275)

EVAL_READ_BN = src('''
    import torch
    import torch.nn as nn

    torch.manual_seed(0)


    class Norm(nn.Module):
        def __init__(self, n, momentum=0.1):
            super().__init__()
            self.momentum = momentum
            self.weight = nn.Parameter(torch.ones(n))
            self.running_mean = torch.zeros(n)

        def forward(self, x):
    FORWARD
            return (x - mean) * self.weight


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 5)
            self.norm = Norm(5)
            self.out = nn.Linear(5, 1)

        def forward(self, x):
            return self.out(self.norm(self.fc(x)))


    def validate(m):
        m.eval()
        with torch.no_grad():
            return m(torch.randn(6, 4)).mean().item()


    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        EPOCH_TOP
        for step in range(3):
            loss = model(torch.randn(6, 4)).pow(2).mean()  # forward here
            opt.zero_grad()
            loss.backward()
            opt.step()
            AFTER_STEP
        AFTER_EPOCH
''')

_UPDATE_IN_TRAINING = """\
        if self.training:
            mean = x.mean(0)
            self.running_mean = self.momentum * mean + (1 - self.momentum) * self.running_mean
        else:
            mean = self.running_mean"""


def _bn(forward=_UPDATE_IN_TRAINING, epoch_top="model.train()", after_step="pass", after_epoch="pass"):
    return EVAL_READ_BN.replace("FORWARD", forward).replace("EPOCH_TOP", epoch_top) \
        .replace("AFTER_STEP", after_step).replace("AFTER_EPOCH", after_epoch)


@pytest.mark.parametrize("epoch_top,after_epoch", [
    ("model.train()", "pass"),  # train() each epoch
    ("pass", "pass"),  # never leaves training mode (modules start in it)
    ("model.train()", "print(validate(model))"),  # validated after the batches, train() again each epoch
])
def test_running_statistic_read_only_in_eval_is_no_crash_in_training_mode(epoch_top, after_epoch):
    assert gg101(_bn(epoch_top=epoch_top, after_epoch=after_epoch)) == []


def test_mode_unknown_keeps_the_reading():
    # a helper of the file called before the forward may switch the mode: unknown, so the
    # statistic still counts as read (the claim stays what it was without the mode)
    text = _bn(epoch_top="print(validate(model))\n    model.train()", after_step="print(validate(model))")
    from gradguard.analysis import interpreter as interp
    assert interp._no_mode_switch(text.splitlines(), 1, len(text.splitlines()), frozenset({"validate"})) is False
    assert interp._no_mode_switch(["    model.train()", "    loss = model(x)"], 1, 2, frozenset({"validate"}))
    assert not interp._no_mode_switch(["    net.train(False)"], 1, 1, frozenset())
    assert not interp._no_mode_switch(["    net.training = False"], 1, 1, frozenset())
    assert interp._no_mode_switch(["    if net.training == True: pass", "    net.train(True)"], 1, 2, frozenset())


def test_running_statistic_in_a_conditional_expression_read_only_in_eval():
    fwd = """\
        mean = x.mean(0) if self.training else self.running_mean
        if self.training:
            self.running_mean = self.momentum * x.mean(0) + (1 - self.momentum) * self.running_mean"""
    assert gg101(_bn(forward=fwd)) == []


def _status_under_torch(text: str, tmp_path: Path) -> str:
    """What torch does with ``text`` run as a program (the fixture harness)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch_harness as th
    prog = tmp_path / "prog.py"
    prog.write_text(text, encoding="utf-8")
    return th.run_program(str(prog)).status


@pytest.mark.needs_torch
@pytest.mark.parametrize("case", ["read_in_training", "eval_mode_from_epoch_two"])
def test_running_statistic_the_training_loop_reads_is_still_carried(case, tmp_path):
    # the crashing near twins, each proved under torch: the statistic read in training
    # mode; the loop switched to eval mode (no train() of its own before the forward)
    if case == "read_in_training":
        text = _bn(forward=_UPDATE_IN_TRAINING.replace("mean = x.mean(0)\n", "mean = 0.5 * (x.mean(0) + self.running_mean)\n"))
    else:
        text = _bn(epoch_top="model.train() if epoch == 0 else model.eval()")
    assert _status_under_torch(text, tmp_path) == "crash"
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].range.start.line == line(text, "# forward here")


# ---------------------------------------------------------------------------
# a state object's own detach() method (OpenNMT-py issue 403; the silent fixture
# is reports/report_opennmt_decoder_state_detach_method_rebinds_train.py)

_ONMT = (Path(__file__).resolve().parent / "fixtures" / "reports"
         / "report_opennmt_decoder_state_detach_method_rebinds_train.py")
_REBINDS = """\
    def detach(self):
        self.hidden = tuple(t.detach() for t in self.hidden)
        self.input_feed = self.input_feed.detach()
"""
_DROPS = """\
    def detach(self):
        for t in self.hidden + (self.input_feed,):
            t.detach()
"""


def _onmt(method: str, extra: str = "") -> str:
    text = _ONMT.read_text(encoding="utf-8")
    assert _REBINDS in text
    return text.replace(_REBINDS, method).replace("\n\nclass 译码器", extra + "\n\nclass 译码器")


def test_a_state_objects_detach_method_that_rebinds_its_tensors_cuts_the_graph():
    # the model hands the state object back in a tuple: its value has no class, and the
    # only class of the file with a detach() cuts both tensors in it
    assert gg101(_onmt(_REBINDS)) == []


@pytest.mark.needs_torch
def test_a_state_objects_detach_method_that_drops_the_results_is_still_carried(tmp_path):
    text = _onmt(_DROPS)
    assert _status_under_torch(text, tmp_path) == "crash"
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].range.start.line == line(text, "logits, state = decoder(")


def test_a_detach_method_the_files_other_class_defines_without_cutting_proves_nothing():
    # two classes define detach(), one cuts and one does not: a value of no known class
    # may be either, so the state stays carried
    other = """

class Logger:
    def __init__(self):
        self.items = []

    def detach(self):
        self.items.clear()
"""
    text = _onmt(_REBINDS, other)
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].range.start.line == line(text, "logits, state = decoder(")


def test_a_tensors_detach_as_a_statement_is_still_a_no_op():
    # no class of the file defines detach(): `state.detach()` on the carried value is the
    # tensor method, whose result is dropped
    text = _onmt(_REBINDS).replace("    def detach(self):", "    def cut(self):")
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].range.start.line == line(text, "logits, state = decoder(")


# ---------------------------------------------------------------------------
# a state object of the user's threaded through the model's call, and a detach()
# that cuts it in place and returns nothing (OpenNMT-py v0.1, issue 1148: the
# report fixtures report_opennmt_v01_decoder_state_*; the trainer-built state:
# gg101_decoder_state_object_built_by_the_trainer.py and its ok_ twins)

_FIXTURES = Path(__file__).resolve().parent / "fixtures"
_BUILT = _FIXTURES / "gg101_decoder_state_object_built_by_the_trainer.py"
_V01 = _FIXTURES / "reports" / "report_opennmt_v01_decoder_state_never_detached.py"


def test_a_state_object_handed_to_the_models_call_and_taken_back_is_carried():
    # `logits, dec_state = model(memory, chunk, dec_state)` with dec_state = DecoderState(...):
    # a module's call threads the object, it does not wrap training objects (as
    # `model, opt = accelerator.prepare(model, opt)` does)
    text = _BUILT.read_text(encoding="utf-8")
    fs = gg101(text)
    assert len(fs) == 1 and fs[0].range.start.line == line(text, "logits, dec_state = model(")
    # the object handed to a function that is no module, and taken back: still a rewrap
    wrapped = text.replace("logits, dec_state = model(memory, chunk, dec_state)",
                           "logits, dec_state = prepare(memory, dec_state)")
    assert gg101(wrapped) == []


def test_a_state_whose_detach_cuts_in_place_is_fixed_by_calling_it():
    for path, guard in ((_BUILT, False), (_V01, True)):
        text = path.read_text(encoding="utf-8")
        (f,) = gg101(text)
        new = "".join(e.new_text for e in f.preferred_fix.edits)
        # never `dec_state = dec_state.detach()` (nor the helper's): the method returns None
        assert "dec_state =" not in new and "_detach_state" not in new, new
        assert new.strip().endswith("dec_state.detach()")
        assert ("if dec_state is not None:" in new) == guard, new
        assert gg101(apply_text_edits(text, f.preferred_fix.edits)) == []


@pytest.mark.needs_torch
def test_binding_what_an_in_place_detach_returns_loses_the_state(tmp_path):
    # the fix that fails: `dec_state = dec_state.detach()` binds None, and the next
    # chunk's forward reads state.hidden of None
    text = _BUILT.read_text(encoding="utf-8")
    (f,) = gg101(text)
    fixed = apply_text_edits(text, f.preferred_fix.edits)
    rebinding = fixed.replace("        dec_state.detach()\n", "        dec_state = dec_state.detach()\n")
    assert rebinding != fixed
    assert _status_under_torch(fixed, tmp_path) == "train"
    assert _status_under_torch(rebinding, tmp_path) != "train"


def test_a_state_whose_detach_returns_a_new_state_keeps_the_rebinding_fix():
    text = _BUILT.read_text(encoding="utf-8").replace(
        """        self.hidden = tuple(h.detach() for h in self.hidden)
        self.input_feed = self.input_feed.detach()
""", """        return DecoderState(tuple(h.detach() for h in self.hidden), self.input_feed.detach())
""")
    (f,) = gg101(text)
    new = "".join(e.new_text for e in f.preferred_fix.edits)
    assert "dec_state = " in new, new
    assert gg101(apply_text_edits(text, f.preferred_fix.edits)) == []


def test_a_detach_of_each_tensor_guarded_against_none_cuts_in_place():
    # OpenNMT v0.1's DecoderState.detach(): for h in self._all: if h is not None: h.detach_()
    text = (_FIXTURES / "reports" / "report_opennmt_v01_decoder_state_detached_in_place_train.py").read_text(
        encoding="utf-8")
    assert gg101(text) == []
    # a guard that is not `is not None` proves nothing
    guarded = text.replace("            if h is not None:\n", "            if h.requires_grad:\n")
    assert guarded != text
    fs = gg101(guarded)
    assert len(fs) == 1 and fs[0].range.start.line == line(guarded, "outputs, attns, dec_state = self.model(")


# ---------------------------------------------------------------------------
# an LSTM's (h, c) kept in a dict on the module (gg101_lstm_state_dict_on_the_module.py
# and its ok_lstm_state_dict_* twins)

_DICT_STATE = _FIXTURES / "gg101_lstm_state_dict_on_the_module.py"


def test_a_state_dict_on_the_module_is_fixed_as_a_dict():
    # `self.state = tuple(s.detach() for s in self.state)` would detach the dict's keys
    text = _DICT_STATE.read_text(encoding="utf-8")
    (f,) = gg101(text)
    assert f.range.start.line == line(text, "# 状态存在字典里")
    new = "".join(e.new_text for e in f.preferred_fix.edits)
    assert "self.state = _detach_state(self.state)" in new and "tuple(" not in new, new
    assert gg101(apply_text_edits(text, f.preferred_fix.edits)) == []


def test_a_reset_method_called_once_before_the_loop_does_not_cut_the_state():
    text = _DICT_STATE.read_text(encoding="utf-8").replace("model = Tagger()\n", "model = Tagger()\nmodel.reset_state()\n")
    (f,) = gg101(text)
    assert f.range.start.line == line(text, "# 状态存在字典里")


def test_a_reset_method_rebinding_a_dict_of_what_is_not_fresh_resets_nothing():
    text = (_FIXTURES / "ok_lstm_state_dict_reset_each_batch.py").read_text(encoding="utf-8")
    assert gg101(text) == []
    kept = text.replace('''    def reset_state(self):
        self.state = {"h": None, "c": None}''', '''    def reset_state(self):
        self.state = {"h": self.state["h"], "c": self.state["c"]}''')
    assert kept != text
    assert len(gg101(kept)) == 1


def test_a_tensor_state_keeps_its_detach_beside_a_class_that_detaches_in_place():
    # a class of the file cuts in its detach() and returns nothing, but the loop's state
    # is a recurrent module's hidden tensor: `h.detach()` as a statement would be a no-op
    text = textwrap.dedent('''\
        import torch
        import torch.nn as nn

        class Memory:
            def __init__(self, h):
                self.h = h

            def detach(self):
                self.h = self.h.detach()

        rnn = nn.GRU(4, 4)
        opt = torch.optim.SGD(rnn.parameters(), lr=0.1)
        h = torch.zeros(1, 2, 4)
        for step in range(3):
            x = torch.randn(5, 2, 4)
            out, h = rnn(x, h)
            loss = out.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        ''')
    (f,) = gg101(text)
    new = "".join(e.new_text for e in f.preferred_fix.edits)
    assert "h = h.detach()" in new, new
