"""The quiet shapes added to existing rules with the mode rules: GG205's optimizer
never zeroed while another one is (a GAN) and its nanoGPT micro-step accumulation
without dividing; GG204's training-step function fed a ``requires_grad`` input."""

from __future__ import annotations

import textwrap

import pytest

from gradguard.engine import check_source
from gradguard.model.text import apply_text_edits

GAN = """\
import torch
import torch.nn as nn

G = nn.Linear(4, 8)
D = nn.Linear(8, 1)
opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
for real in [torch.randn(2, 8) for _ in range(3)]:
    z = torch.randn(2, 4)
    opt_d.zero_grad()
    (D(G(z).detach()).mean() - D(real).mean()).backward()
    opt_d.step()
    (-D(G(z)).mean()).backward()
    opt_g.step()
"""


def gg205(src: str):
    return [f for f in check_source(textwrap.dedent(src), "t.py").findings if f.code == "GG205"]


def test_the_optimizer_never_zeroed_is_reported_at_its_step_and_zeroed_at_the_top():
    [f] = gg205(GAN)
    assert f.range.start.line + 1 == 14 and f.severity.value == "warning"
    assert "`opt_d`" in f.message_in("en") and "`opt_g.zero_grad()`" in f.message_in("en")
    assert "`opt_g`" in f.message_in("zh")
    out = apply_text_edits(GAN, list(f.preferred_fix.edits))
    assert "in range(3)]:\n    opt_g.zero_grad()\n    z = " in out
    assert not gg205(out)


@pytest.mark.parametrize("old,new", [
    ("    opt_d.zero_grad()\n", "    opt_d.zero_grad()\n    G.zero_grad()\n"),  # the module: any parameters
    ("    opt_d.zero_grad()\n", "    D.zero_grad()\n"),  # the module of the other: may reach both
    ("    opt_d.zero_grad()\n", "    opt_d.zero_grad()\n    for p in G.parameters():\n        p.grad = None\n"),
    ("    opt_g.step()\n", "    opt_g.step()\n    opt_g.zero_grad()\n"),
    ("opt_g = torch.optim.Adam(G.parameters())\n", "opt_g = make_optimizer(G)\n"),  # not known to be distinct
])
def test_every_optimizer_zeroed_or_unknown_is_silent(old, new):
    assert old in GAN
    assert not gg205(GAN.replace(old, new))


NANOGPT = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
optimizer = torch.optim.AdamW(model.parameters())
gradient_accumulation_steps = 4
for it in range(3):
    for micro_step in range(gradient_accumulation_steps):
        loss = model(torch.randn(2, 4)).pow(2).mean()
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
"""


def test_micro_step_accumulation_without_dividing_is_a_hint_at_the_backward():
    [f] = gg205(NANOGPT)
    assert f.range.start.line + 1 == 10 and f.severity.value == "hint" and not f.fixes
    assert "`gradient_accumulation_steps`" in f.message_in("en")
    assert [r.range.start.line + 1 for r in f.related] == [8]


@pytest.mark.parametrize("old,new", [
    # divided (nanoGPT's own form), or by a count with another name for the same thing
    ("        loss.backward()\n", "        loss = loss / gradient_accumulation_steps\n        loss.backward()\n"),
    ("        loss.backward()\n", "        (loss / cfg.grad_accum).backward()\n"),
    ("        loss.backward()\n", "        loss /= gradient_accumulation_steps\n        loss.backward()\n"),
    # an inner loop not named for accumulation: summing over tasks is often meant
    ("    for micro_step in range(gradient_accumulation_steps):\n", "    for task in range(n_tasks):\n"),
    # a fixed count written as a literal
    ("    for micro_step in range(gradient_accumulation_steps):\n", "    for micro_step in range(1):\n"),
    # stepping inside the inner loop: nothing accumulates
    ("        loss.backward()\n", "        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n"),
])
def test_divided_or_not_accumulation_is_silent(old, new):
    assert old in NANOGPT
    assert not gg205(NANOGPT.replace(old, new))


ITER_SIZE = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
iter_size = 2
lr = 0.1 / batch_size
for it in range(3):
    optimizer.zero_grad()
    for inner_iter in range(iter_size):
        loss = model(torch.randn(2, 4)).pow(2).mean()
        loss.backward()
    optimizer.step()
"""


def test_iter_size_accumulation_without_dividing_is_a_hint_at_the_backward():
    # Caffe's and Detectron's name for the accumulation count (wetectron#70)
    [f] = gg205(ITER_SIZE)
    assert f.range.start.line + 1 == 12 and f.severity.value == "hint" and not f.fixes
    assert "`iter_size`" in f.message_in("en")


@pytest.mark.parametrize("old,new", [
    ("        loss.backward()\n", "        (loss / iter_size).backward()\n"),
    # the learning rate scaled down by the count instead (pcl.pytorch#48): the same SGD update
    ("lr = 0.1 / batch_size\n", "lr = 0.1 / (batch_size * iter_size)\n"),
    ("for inner_iter in range(iter_size)", "for inner_iter in range(n_views)"),
])
def test_iter_size_accumulation_divided_or_rescaled_is_silent(old, new):
    assert old in ITER_SIZE
    assert not gg205(ITER_SIZE.replace(old, new))


STEP_FUNCTION = """\
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

model = nn.Linear(6, 2)
opt = torch.optim.Adam(model.parameters())


def train_step(batch):
    opt.zero_grad()
    inputs = Variable(torch.from_numpy(batch), requires_grad=True)
    loss = model(inputs).pow(2).mean()
    loss.backward()
    opt.step()
    return loss.item()
"""


def gg204(src: str):
    return [f for f in check_source(textwrap.dedent(src), "t.py").findings if f.code == "GG204"]


def test_gg204_reads_a_training_step_function_as_one_iteration():
    [f] = gg204(STEP_FUNCTION)
    assert f.range.start.line + 1 == 12 and f.severity.value == "hint"
    out = apply_text_edits(STEP_FUNCTION, list(f.preferred_fix.edits))
    assert "inputs = Variable(torch.from_numpy(batch))\n" in out and not gg204(out)


@pytest.mark.parametrize("old,new", [
    ("    return loss.item()\n", "    return inputs.grad\n"),  # the gradient is wanted
    ("    return loss.item()\n", "    return inputs\n"),  # handed on
    # does not step: not a training step (a function measuring a backward pass may want
    # the input's gradient computed: spikingjelly's operation-counter test)
    ("    opt.step()\n", "    print(inputs.shape)\n"),
    ("    loss.backward()\n    opt.step()\n", "    return loss\n"),  # does not back-propagate
])
def test_gg204_step_functions_that_need_or_hand_on_the_input_are_silent(old, new):
    assert old in STEP_FUNCTION
    src = STEP_FUNCTION.replace(old, new)
    assert not gg204(src)


MODULE_STATE = """\
import torch
import torch.nn as nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(4, 4, batch_first=True)
        self.h = torch.zeros(1, 2, 4)

    def forward(self, x):
        out, h = self.rnn(x, self.h)
        self.h = h.detach()
        return out

    def reset(self):
        self.h.zero_()


model = LM()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(2, 12, 4)
for epoch in range(3):
    for i in range(0, 12, 4):
        opt.zero_grad()
        out = model(data[:, i:i + 4])
        out.pow(2).mean().backward()
        opt.step()
"""


def gg203(src: str):
    return [f for f in check_source(textwrap.dedent(src), "t.py").findings if f.code == "GG203"]


def test_gg203_a_state_kept_on_the_module_is_reset_by_its_own_method():
    [f] = gg203(MODULE_STATE)
    assert f.range.start.line + 1 == 26 and f.severity.value == "hint"
    assert "`self.h`" in f.message_in("en") and "`model.reset()`" in f.message_in("zh")
    out = apply_text_edits(MODULE_STATE, list(f.preferred_fix.edits))
    assert "for epoch in range(3):\n    model.reset()\n    for i in" in out and not gg203(out)


@pytest.mark.parametrize("old,new", [
    ("    for i in range(0, 12, 4):\n", "    model.reset()\n    for i in range(0, 12, 4):\n"),
    ("    for i in range(0, 12, 4):\n", "    model = LM()\n    for i in range(0, 12, 4):\n"),
    ("    for i in range(0, 12, 4):\n", "    callbacks.on_epoch_begin(model)\n    for i in range(0, 12, 4):\n"),
    ("    for i in range(0, 12, 4):\n", "    model.h = torch.zeros(1, 2, 4)\n    for i in range(0, 12, 4):\n"),
    # no reset method: the class does not say the state is to be reset
    ("    def reset(self):\n        self.h.zero_()\n", ""),
    # the state is not detached in forward: GG101's question, not this one
    ("        self.h = h.detach()\n", "        self.h = h\n"),
])
def test_gg203_module_states_reset_rebuilt_or_not_meant_to_be_are_silent(old, new):
    assert old in MODULE_STATE
    assert not gg203(MODULE_STATE.replace(old, new))
