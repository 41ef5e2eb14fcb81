"""The one recognition of optimizer steps and zeroing (analysis/steps.py): each
rule picks its readings, and each reading says what it claims."""

import ast

import pytest

from gradguard.analysis import steps as S


def call(src: str) -> ast.AST:
    return ast.parse(src, mode="eval").body


@pytest.mark.parametrize("src, kw, want", [
    ("opt.step()", {}, "opt"),
    ("self.optim_g.step()", {}, "self.optim_g"),
    ("agent.actor.optimizer.step()", {}, "agent.actor.optimizer"),
    # a GradScaler steps the optimizer it is handed, for the rules that read it so
    ("scaler.step(opt)", {"scaler": True}, "opt"),
    ("self.grad_scaler.step(self.opt)", {"scaler": True}, "self.opt"),
    ("scaler.step(opt)", {}, "scaler"),
    # a step with a closure computes its own gradients
    ("opt.step(closure)", {}, "opt"),
    ("opt.step(closure)", {"closure": False}, None),
    ("scaler.step(opt, closure)", {"scaler": True, "closure": False}, None),
    ("scaler.step(opt, closure)", {"scaler": True}, "opt"),
    # SAM's two in-place updates, only when asked for
    ("sam.first_step(zero_grad=True)", {"two_step": True}, "sam"),
    ("sam.first_step(zero_grad=True)", {}, None),
    ("optimizers[i].step()", {}, None),  # not a dotted receiver
    ("opt.zero_grad()", {}, None),
    ("step()", {}, None),
])
def test_stepped(src, kw, want):
    assert S.stepped(call(src), **kw) == want


def test_step_of_says_how():
    assert S.step_of(call("scaler.step(opt)"), scaler=True) == ("opt", "scaler")
    assert S.step_of(call("opt.step()"), scaler=True) == ("opt", "step")


def test_zeroing():
    assert S.zeroed(call("opt.zero_grad(set_to_none=True)")) == "opt"
    assert S.zeroed(call("model.netG.zero_grad()")) == "model.netG"
    assert S.zeroed(call("opts[0].zero_grad()")) is None
    assert S.zeroing_call(call("opts[0].zero_grad()"))
    assert S.zeroed(call("opt.step()")) is None
    st = ast.parse("opt.zero_grad()\nx = opt.zero_grad()").body
    assert S.zeroing_statement(st[0]) is st[0].value
    assert S.zeroing_statement(st[1]) is None


@pytest.mark.parametrize("body, want", [
    ("for p in model.parameters():\n        p.add_(e)", ("model",)),
    ("for p in self.net.parameters():\n        p.data.mul_(0.5)", ("self.net",)),
    ("for name, p in model.named_parameters():\n        if 'bias' in name:\n            p.zero_()", ("model",)),
    # not the weights: their gradients, the flag, or a read
    ("for p in model.parameters():\n        p.grad.zero_()", ()),
    ("for p in model.parameters():\n        p.requires_grad_(False)", ()),
    ("for p in model.parameters():\n        print(p.norm())", ()),
    ("for p in model.parameters():\n        q = p.clone()\n        q.add_(1)", ()),
])
def test_parameter_edits(body, want):
    fn = ast.parse(f"def f(model):\n    {body}\n").body[0]
    assert S.def_parameter_edits(fn) == want
    assert S.def_step_facts(fn)[1] == want
