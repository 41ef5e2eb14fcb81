"""GG204 needless-requires-grad: data that requires grad and whose gradient nobody reads."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from gradguard.engine import check_source
from gradguard.engine.config import config_from_mapping
from gradguard.model.text import apply_text_edits
from gradguard.rules import get_rule

sys.path.insert(0, str(Path(__file__).resolve().parent))

SRC = """\
import torch
import torch.nn as nn

X = torch.randn(4, 3, requires_grad=True)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    opt.zero_grad()
    model(X).pow(2).mean().backward()
    opt.step()
EXTRA
"""


def gg204(src: str, config=None):
    return [f for f in check_source(textwrap.dedent(src), "t.py", config).findings if f.code == "GG204"]


def test_data_requiring_grad_is_a_hint_and_the_fix_drops_the_flag():
    src = SRC.replace("EXTRA", "")
    [f] = gg204(src)
    assert f.severity.value == "hint" and f.range.start.line + 1 == 4
    out = apply_text_edits(src, f.preferred_fix.edits)
    assert "X = torch.randn(4, 3)\n" in out and not gg204(out)
    first = src.replace("torch.randn(4, 3, requires_grad=True)", "torch.zeros(requires_grad=True, size=(4, 3))")
    [g] = gg204(first)
    assert "torch.zeros(size=(4, 3))" in apply_text_edits(first, g.preferred_fix.edits)


@pytest.mark.parametrize("extra", [
    "print(X.grad)",                                   # the gradient is read
    "adv = X + 0.1 * X.grad.sign()",
    "inp_opt = torch.optim.Adam([X])",                 # input optimisation
    "g = torch.autograd.grad(model(X).sum(), X)",      # PINN-style derivative w.r.t. inputs
    "Y = X * 2",                                       # used outside the loop: GG102's question
    "keep = [X]",
    "X.register_hook(print)",
])
def test_inputs_whose_gradient_is_wanted_or_used_elsewhere_are_silent(extra):
    assert not gg204(SRC.replace("EXTRA", extra))


def test_a_function_of_the_file_that_reads_the_gradient_keeps_a_global_silent():
    src = SRC.replace("EXTRA", "\n\ndef attack():\n    return X.grad.sign()\n")
    assert not gg204(src)


def test_no_loop_that_back_propagates_means_no_hint():
    src = "import torch\nX = torch.randn(2, requires_grad=True)\nfor i in range(2):\n    y = X * 2\nloss = y.sum()\nloss.backward()\n"
    assert not gg204(src)


def test_chinese_in_place_flag_is_deleted_and_user_controls():
    src = SRC.replace("X = torch.randn(4, 3, requires_grad=True)", "特征 = torch.randn(4, 3)\n特征.requires_grad_()  # 标记")
    src = src.replace("model(X)", "model(特征)").replace("EXTRA", "")
    [f] = gg204(src)
    assert f.data["variable"] == "特征" and "特征" in f.message_in("zh")
    out = apply_text_edits(src, f.preferred_fix.edits)
    assert "requires_grad_" not in out and not gg204(out)
    assert not gg204(src, config_from_mapping({"ignore": ["GG204"]}))
    [g] = gg204(src, config_from_mapping({"severity": {"GG204": "warning"}}))
    assert g.severity.value == "warning"
    assert not gg204(src.replace("# 标记", "# noqa: GG204"))


def test_explanation_sections_and_docs_page():
    from rule_pages import assert_docs_page_is_the_explanation, assert_sections

    rule = get_rule("GG204")
    assert rule.name == "needless-requires-grad" and rule.default_severity.value == "hint"
    assert_sections("GG204")
    for text in (rule.explain("en"), rule.explain("zh")):
        assert "requires_grad=True" in text and "GG102" in text and "torch.autograd.grad" in text
    assert_docs_page_is_the_explanation("GG204")


def test_a_loop_that_trains_no_parameters_needs_the_flag():
    """norse's threshold tests: backward() of a function of x alone needs x to require grad."""
    src = textwrap.dedent("""\
    import torch
    for method in ("super", "tanh"):
        x = torch.full((10,), 0.1, requires_grad=True)
        out = torch.sigmoid(x * 3)
        out.backward(torch.ones(10))
    """)
    assert not gg204(src)


_MOVED = """\
import torch
import torch.nn as nn

device = torch.device("cpu")
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [{"image": torch.randn(4, 3), "gt": torch.randn(4, 1)} for _ in range(3)]
for batch in batches:
    inputs, gts = batch["image"], batch["gt"]
    inputs.requires_grad_()
    MOVE
    loss = ((model(inputs) - gts) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    AFTER
"""


@pytest.mark.parametrize("move", ["inputs, gts = inputs.to(device), gts.to(device)",
                                  "inputs = inputs.to(device)", "inputs = inputs.float()"])
def test_a_flagged_input_moved_to_a_device_is_still_only_data(move):
    # quietheld7 rg01 (OSVOS-PyTorch#22): requires_grad_() on a batch's image, then .to(device)
    src = _MOVED.replace("MOVE", move).replace("AFTER", "pass")
    [f] = gg204(src)
    assert f.range.start.line + 1 == 10
    out = apply_text_edits(src, list(f.preferred_fix.edits))
    assert "requires_grad_" not in out and not gg204(out)


@pytest.mark.parametrize("move, after", [
    ("inputs = inputs.to(device)", "print(inputs.grad)"),  # its gradient is read
    ("inputs = inputs * 2", "pass"),  # another value
    ("inputs = other.to(device)", "pass"),  # another tensor moved
])
def test_a_flagged_input_moved_and_read_or_rebound_is_silent(move, after):
    src = _MOVED.replace("MOVE", move).replace("AFTER", after).replace(
        "device = torch.device", "other = torch.zeros(4, 3)\ndevice = torch.device")
    assert not gg204(src)
