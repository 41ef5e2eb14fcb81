"""GG202 data-cut: `.data` used to take a graph-carrying value out of its graph."""

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

RNN = """\
import torch
import torch.nn as nn
from torch.autograd import Variable

gru = nn.GRU(3, 4)
opt = torch.optim.SGD(gru.parameters(), lr=0.1)
h = torch.zeros(1, 2, 4)
for x in torch.randn(3, 5, 2, 3):
    out, h = gru(x, h)
    out.pow(2).mean().backward()
    opt.step()
    LINE
"""


def gg202(src: str, config=None):
    return [f for f in check_source(textwrap.dedent(src), "t.py", config).findings if f.code == "GG202"]


def fixed(src: str) -> str:
    return apply_text_edits(src, [e for f in gg202(src) for e in f.preferred_fix.edits])


@pytest.mark.parametrize("line, after", [
    ("h = h.data", "h = h.detach()"),
    ("h = Variable(h.data)", "h = Variable(h.detach())"),
    ("h = h.data.clone()", "h = h.detach().clone()"),
    ("h, kept = h.data, out.data", "h, kept = h.detach(), out.detach()"),
    ("h = (h.data if h is not None else None)", "h = (h.detach() if h is not None else None)"),
])
def test_kept_data_of_a_graph_value_is_reported_and_fixed(line, after):
    src = RNN.replace("LINE", line)
    fs = gg202(src)
    assert fs and all(f.severity.value == "warning" for f in fs)
    out = fixed(src)
    assert after in out and not gg202(out)


@pytest.mark.parametrize("line", [
    "h = h.detach()",
    "print(out.data.item(), out.data.cpu().numpy().shape)",
    "pred = out.data.max(2)[1]",
    "buf = torch.zeros(2, 4); buf[0] += out.data[0, 0]",
    "for p in gru.parameters(): p.data.add_(p.grad.data, alpha=-0.1)",
    "w = gru.weight_hh_l0.data",                         # a parameter: a leaf, no graph to cut
    "gru.weight_hh_l0.data = gru.weight_hh_l0.data * 0.9",
    "total = 0; total += out.data.sum()",
])
def test_parameter_idioms_logging_and_copies_are_silent(line):
    assert not gg202(RNN.replace("LINE", line))


def test_repackage_helper_returning_data_is_reported_but_other_helpers_are_not():
    src = textwrap.dedent("""\
    import torch
    from torch.autograd import Variable

    def repackage(h):
        return Variable(h.data) if isinstance(h, torch.Tensor) else tuple(repackage(v) for v in h)

    def grab(model, x):
        return model(x).data

    def weights(layer):
        return layer.weight.data

    loss = torch.zeros(1, requires_grad=True).sum()
    loss.backward()
    """)
    fs = gg202(src)
    assert [f.range.start.line + 1 for f in fs] == [5, 8]


def test_chinese_names_and_user_controls():
    src = RNN.replace("h", "隐").replace("LINE", "隐 = 隐.data  # 截断").replace("torc隐", "torch")
    [f] = gg202(src)
    line = src.splitlines()[f.range.start.line]
    assert f.range.start.character == line.index("隐.data")
    assert "隐.detach()" in f.message_in("en") and "数值相同" in f.message_in("zh")
    assert not gg202(src, config_from_mapping({"ignore": ["GG202"]}))
    assert not gg202(src, config_from_mapping({"per-file-ignores": {"t.py": ["GG2"]}}))
    [g] = gg202(src, config_from_mapping({"severity": {"GG202": "hint"}}))
    assert g.severity.value == "hint"
    assert not gg202(src.replace("# 截断", "# noqa: GG202"))


def test_explanation_sections_and_docs_page():
    from rule_pages import assert_docs_page_is_the_explanation, assert_sections

    rule = get_rule("GG202")
    assert rule.name == "data-cut" and rule.default_severity.value == "warning"
    assert_sections("GG202")
    for text in (rule.explain("en"), rule.explain("zh")):
        assert "hidden = hidden.data" in text and ".detach()" in text and "p.data.add_" in text
    assert_docs_page_is_the_explanation("GG202")


def test_a_helper_returning_the_data_of_each_state_of_its_parameter_is_reported():
    # the truncated-BPTT detach helper of the language-model tutorial: one .data per element
    src = textwrap.dedent("""\
    import torch
    from torch.autograd import Variable

    def detach(states):
        return [Variable(state.data) for state in states]

    def detach_all(states):
        return tuple(s.data for s in states)

    def detached(states):
        return [state.detach() for state in states]

    def weights(layers):
        return [layer.weight.data for layer in layers]

    def grads(model):
        return [p.data for p in model.parameters()]

    def two(states, other):
        return [s.data for s in states]

    loss = torch.zeros(1, requires_grad=True).sum()
    loss.backward()
    """)
    fs = gg202(src)
    assert [f.range.start.line + 1 for f in fs] == [5, 8]
    out = apply_text_edits(src, [e for f in fs for e in f.preferred_fix.edits])
    assert "[Variable(state.detach()) for state in states]" in out and not gg202(out)
