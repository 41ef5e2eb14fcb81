"""A graph kept on ``self`` (or on a module another module holds), built once, read by a
later step (issue 12, the second held-out corpus's misses): the facts and trace of the
shared floor that follow it, and what GG101/GG103 make of them, with the silent twins.
The fixtures in ``tests/fixtures/reports`` (``report_shiftnet_*``, ``report_evolvegcn_*``,
``report_position_embedding_*``) prove the crashes and the twins under torch."""

from __future__ import annotations

import ast
import textwrap

from gradguard.analysis import facts as F
from gradguard.analysis.facts import class_facts
from gradguard.engine import check_source


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _found(text: str):
    return sorted((f.code, f.range.start.line + 1) for f in check_source(src(text)).findings)


def _classes(text: str):
    tree = ast.parse(src(text))
    return {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}


# ---------------------------------------------------------------------------
# a driver's method leaves on the object a graph its own backward freed


_DRIVER = """
    import torch
    import torch.nn as nn

    class Pix2Pix:
        def __init__(self):
            self.netG = nn.Linear(4, 4)
            self.netD = nn.Linear(4, 1)
            self.opt_G = torch.optim.SGD(self.netG.parameters(), lr=0.1)
            self.opt_D = torch.optim.SGD(self.netD.parameters(), lr=0.1)

        def backward_D(self):
            self.pred_fake = self.netD(self.fake.detach())
            self.pred_real = self.netD(self.real)  # 判别器对真实样本的输出
            self.loss_D = (self.pred_real - self.pred_fake).mean()
            self.loss_D.backward()

        def backward_G(self):
            pred_fake = self.netD(self.fake)
            self.loss_G = (READ - pred_fake).mean()
            self.loss_G.backward()

        def optimize(self, a, b):
            self.real = b
            self.fake = self.netG(a)
            self.opt_D.zero_grad()
            self.backward_D()
            self.opt_D.step()
            self.opt_G.zero_grad()
            self.backward_G()
            self.opt_G.step()
"""


def test_a_graph_a_method_left_freed_on_self_is_read_by_the_next_method():
    found = _found(_DRIVER.replace("READ", "self.pred_real"))
    assert found == [("GG103", 29)]  # self.backward_G()
    f = check_source(src(_DRIVER.replace("READ", "self.pred_real"))).findings[0]
    assert sorted(r.range.start.line + 1 for r in f.related) == [13, 15]  # built; freed by loss_D.backward()
    assert not f.fixes  # the graph comes from another method: nothing here recomputes it
    assert "self.loss_D.backward()" in f.message_in("en") and f.message_in("zh")


def test_twins_of_the_freed_graph_on_self_stay_silent():
    for read in ("self.pred_real.detach()", "self.netD(self.real)", "self.pred_fake.detach()"):
        assert _found(_DRIVER.replace("READ", read)) == [], read
    # backward_D keeps its graph: nothing is freed (what the step changes is another rule's question)
    kept = _DRIVER.replace("READ", "self.pred_real").replace("self.loss_D.backward()",
                                                             "self.loss_D.backward(retain_graph=True)")
    assert _found(kept.replace("            self.opt_D.step()\n", "")) == []
    # a backward only on some paths proves nothing
    cond = _DRIVER.replace("READ", "self.pred_real").replace(
        "            self.loss_D.backward()",
        "            if self.loss_D.item() > 0:\n                self.loss_D.backward()")
    assert _found(cond) == []
    # the attribute computed again after the backward holds a fresh graph
    fresh = _DRIVER.replace("READ", "self.pred_real").replace(
        "            self.loss_D.backward()\n",
        "            self.loss_D.backward()\n            self.pred_real = self.netD(self.real)\n")
    assert _found(fresh) == []


# ---------------------------------------------------------------------------
# state kept by a module another module holds


_HELD = """
    import torch
    import torch.nn as nn

    class Evolving(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = None
            self.w0 = nn.Parameter(torch.randn(1, d, d))
            self.gru = nn.GRU(d, d)

        def reinitialize_weight(self):
            self.weight = None

        def forward(self, x):
            if self.weight is None:
                _, self.weight = self.gru(self.w0, self.w0)
            else:
                _, self.weight = self.gru(self.weight, self.weight)
            return x @ self.weight.squeeze(0)

    class Holder(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.recurrent = Evolving(d)
            self.head = nn.Linear(d, 1)

        def forward(self, x):
            return self.head(self.recurrent(x))

    model = Holder(4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        RESET
        loss = model(torch.randn(5, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_held_modules_of_a_class():
    text = src(_HELD.replace("RESET", "pass"))
    summary = {}
    tree = ast.parse(text)
    for s in tree.body:
        if isinstance(s, ast.ClassDef):
            summary["class:" + s.name] = class_facts(s)
    assert F.held_modules(summary, "Holder") == (("recurrent", "Evolving"),)
    assert F.held_modules(summary, "Evolving") == ()
    assert F.held_modules(summary, "Missing") == ()


def test_state_of_a_held_module_is_reported_in_its_forward_without_a_fix():
    result = check_source(src(_HELD.replace("RESET", "pass")))
    assert [(f.code, f.range.start.line + 1) for f in result.findings] == [("GG101", 16)]
    f = result.findings[0]
    assert "model.recurrent(...)" in f.message_in("en") and not f.fixes


def test_held_module_state_reset_by_the_loop_or_the_holder_stays_silent():
    assert _found(_HELD.replace("RESET", "model.recurrent.reinitialize_weight()")) == []
    assert _found(_HELD.replace("RESET", "model.recurrent.weight = None")) == []
    with_reset = _HELD.replace("RESET", "model.reset()").replace(
        "            return self.head(self.recurrent(x))\n",
        "            return self.head(self.recurrent(x))\n\n        def reset(self):\n"
        "            self.recurrent.reinitialize_weight()\n")
    assert _found(with_reset) == []
    detached = _HELD.replace("RESET", "pass").replace("self.gru(self.weight, self.weight)",
                                                      "self.gru(self.weight.detach(), self.weight.detach())")
    assert _found(detached) == []


# ---------------------------------------------------------------------------
# a cache a held module fills once, by a method its forward calls


_LAZY = """
    import torch
    import torch.nn as nn

    class PositionEncoder(nn.Module):
        def __init__(self, n, d):
            super().__init__()
            self.embedding = nn.Embedding(n, d)
            self.n = n
            self.built = False

        def build(self):
            self.encoded = self.embedding(torch.arange(self.n))
            self.built = True

        def forward(self, x):
            GUARD
            return x + self.encoded

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(5, 6)
            self.pos = PositionEncoder(4, 6)

        def forward(self, x):
            return self.pos(self.proj(x)).mean()

    model = ViT()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        STEP
        loss = model(torch.randn(2, 4, 5))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

_BUILT_ONCE = "if not self.built:\n                self.build()"


def test_a_cache_filled_by_a_method_forward_calls_is_a_cache_fact():
    cf = class_facts(_classes(_LAZY.replace("GUARD", _BUILT_ONCE).replace("STEP", "pass"))["PositionEncoder"])
    assert [(k, stored.graph, needs) for k, stored, needs, _, _ in cf.cached] == [("self.encoded", True, ())]
    every = class_facts(_classes(_LAZY.replace("GUARD", "self.build()").replace("STEP", "pass"))["PositionEncoder"])
    assert every.cached == ()  # built in every call: no cache
    other = _LAZY.replace("GUARD", "if not self.training:\n                self.build()").replace("STEP", "pass")
    assert class_facts(_classes(other)["PositionEncoder"]).cached == ()  # a condition not about the cache


def test_a_held_modules_cache_is_carried_by_the_loop():
    result = check_source(src(_LAZY.replace("GUARD", _BUILT_ONCE).replace("STEP", "pass")))
    assert [(f.code, f.range.start.line + 1) for f in result.findings] == [("GG101", 33)]
    f = result.findings[0]
    assert "first call" in f.message_in("en") and "第一次调用" in f.message_in("zh")
    fix = next(x for x in f.fixes if x.preferred)
    assert 'getattr(_m, "encoded", None)' in fix.edits[0].new_text  # not there before the first call


def test_twins_of_the_held_cache_stay_silent():
    assert _found(_LAZY.replace("GUARD", "self.build()").replace("STEP", "pass")) == []
    detached = _LAZY.replace("GUARD", _BUILT_ONCE).replace("STEP", "pass").replace(
        "self.embedding(torch.arange(self.n))", "self.embedding(torch.arange(self.n)).detach()")
    assert _found(detached) == []
    assert _found(_LAZY.replace("GUARD", _BUILT_ONCE).replace("STEP", "model.pos.built = False")) == []
    no_grad = _LAZY.replace("GUARD", _BUILT_ONCE).replace("STEP", "pass").replace(
        "        def build(self):\n", "        @torch.no_grad()\n        def build(self):\n")
    assert _found(no_grad) == []


# ---------------------------------------------------------------------------
# a training loop inside ``with parametrize.cached():``


_CACHED = """
    import torch
    import torch.nn as nn
    from torch.nn.utils import parametrize, parametrizations

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            REGISTER

        def forward(self, x):
            return self.lin(x).sum()

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    LOOP
"""

_AROUND = """with parametrize.cached():
        for step in range(3):
            loss = model(torch.randn(2, 4))
            opt.zero_grad()
            loss.backward()
            opt.step()"""

_INSIDE = """for step in range(3):
        with parametrize.cached():
            loss = model(torch.randn(2, 4))
            opt.zero_grad()
            loss.backward()
        opt.step()"""


def test_a_training_loop_inside_parametrize_cached():
    for register in ("parametrizations.orthogonal(self.lin)",
                     'parametrize.register_parametrization(self.lin, "weight", nn.Identity())'):
        result = check_source(src(_CACHED.replace("REGISTER", register).replace("LOOP", _AROUND)))
        assert [(f.code, f.range.start.line + 1) for f in result.findings] == [("GG101", 18)], register
        f = result.findings[0]
        assert not f.fixes and "parametrize.cached()" in f.message_in("en") and "参数化" in f.message_in("zh")
        assert sorted(r.range.start.line + 1 for r in f.related) == [16, 18, 20]


def test_parametrize_cached_twins_stay_silent():
    reg = "parametrizations.orthogonal(self.lin)"
    assert _found(_CACHED.replace("REGISTER", reg).replace("LOOP", _INSIDE)) == []
    assert _found(_CACHED.replace("REGISTER", "pass").replace("LOOP", _AROUND)) == []  # nothing parametrized
    frozen = _CACHED.replace("REGISTER", reg).replace("LOOP", _AROUND.replace(
        "with parametrize.cached():", "with parametrize.cached(), torch.no_grad():")).replace(
        "            loss.backward()\n", "")
    assert [c for c, _ in _found(frozen) if c.startswith("GG1")] == []


# ---------------------------------------------------------------------------
# a graph a driver's method keeps with retain_graph=True, then a step of its module


_DEEP_D = "nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))"


def test_a_retained_graph_left_on_self_then_its_module_stepped():
    kept = _DRIVER.replace("READ", "self.pred_real").replace("self.loss_D.backward()",
                                                             "self.loss_D.backward(retain_graph=True)")
    # one layer on data: its backward needs only its input, which the step does not change
    assert _found(kept) == []
    kept = kept.replace("self.netD = nn.Linear(4, 1)", "self.netD = " + _DEEP_D)
    result = check_source(src(kept))
    assert [(f.code, f.range.start.line + 1) for f in result.findings] == [("GG103", 29)]
    f = result.findings[0]
    assert "self.opt_D.step()" in f.message_in("en") and "inplace" in f.message_in("en") and f.message_in("zh")
    assert sorted(r.range.start.line + 1 for r in f.related) == [26, 27] and not f.fixes
    # the step of the other module, or the step after the second backward: nothing changed in between
    assert _found(kept.replace("self.opt_D.step()", "self.opt_G.step()")) == []
    moved = kept.replace("            self.opt_D.step()\n", "").replace(
        "            self.opt_G.step()\n", "            self.opt_G.step()\n            self.opt_D.step()\n")
    assert _found(moved) == []
    # the later method reads only what another module built
    assert _found(kept.replace("(self.pred_real - pred_fake)", "(self.fake - pred_fake)")) == []
