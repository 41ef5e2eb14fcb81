"""The summary facts behind the held-out "flow" shapes: two values of one helper
sharing a part of its graph, a container an object keeps and hands back from a
later call (a scheduler's model outputs), a method of a module-level object called
by a helper, ``x.requires_grad = True``, and a cache filled under an ``if``. The
programs that crash and their silent twins are fixtures (tests/fixtures); these
tests hold the facts each one rests on."""

from __future__ import annotations

import ast
import textwrap

from gradguard.analysis import facts
from gradguard.engine import check_source


def _class(src: str, name: str):
    tree = ast.parse(textwrap.dedent(src))
    return facts.class_facts(next(s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == name))


def _codes(src: str):
    return [(f.code, f.range.start.line + 1) for f in check_source(textwrap.dedent(src), "prog.py").findings]


CRITICS = """
import torch
import torch.nn as nn
class Critics:
    def __init__(self):
        self.actor = nn.Linear(3, 2); self.c1 = nn.Linear(5, 1); self.c2 = nn.Linear(5, 1)
    def shared(self, obs):
        act = torch.tanh(self.actor(obs))
        return self.c1(torch.cat([obs, act], -1)), self.c2(torch.cat([obs, act], -1))
    def detached(self, obs):
        act = torch.tanh(self.actor(obs)).detach()
        return self.c1(torch.cat([obs, act], -1)), self.c2(torch.cat([obs, act], -1))
    def apart(self, obs):
        return self.c1(obs), self.c2(obs)
    def one_graph(self, obs):
        return self.c1(obs), obs.shape
"""


def test_returned_values_sharing_a_saving_part_say_so():
    cf = _class(CRITICS, "Critics")
    assert cf.method("shared").returns_share
    assert not cf.method("detached").returns_share  # no saving graph in common
    assert not cf.method("apart").returns_share  # two graphs, nothing shared
    assert not cf.method("one_graph").returns_share  # one position only carries a graph


SCHED = """
class Scheduler:
    def __init__(self):
        self.ets = []
    def step(self, out, sample):
        self.ets.append(out)
        return sample - 0.1 * sum(self.ets)
    def step_detached(self, out, sample):
        self.ets.append(out.detach())
        return sample - 0.1 * out
    def set_timesteps(self, n):
        self.ets = []
"""


def test_a_method_returning_what_its_object_keeps_reads_that_container():
    cf = _class(SCHED, "Scheduler")
    assert cf.method("step").ret.reads == frozenset({"#self.ets"})
    assert cf.method("step_detached").ret.reads == frozenset()
    # a method that sets the container anew empties it (ContainerEffect.clears)
    assert [e.clears for e in cf.method("set_timesteps").containers] == [True]


HELPER = SCHED + """
import torch
import torch.nn as nn
class Pipe:
    def __init__(self):
        self.scheduler = Scheduler()
model = Pipe()
unet = nn.Linear(4, 4)
def prev_step(out, sample):
    return model.scheduler.step(out, sample)
emb = torch.zeros(1, 4)
emb.requires_grad = True
opt = torch.optim.Adam([emb])
for j in range(3):
    rec = prev_step(unet(emb), torch.randn(1, 4))
    loss = rec.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_helper_stepping_a_module_level_objects_scheduler_carries_its_outputs():
    assert _codes(HELPER) == [("GG101", 27)]  # rec = prev_step(...)
    # stepped fresh each iteration (the scheduler emptied first): nothing carried
    fresh = HELPER.replace("for j in range(3):\n", "for j in range(3):\n    model.scheduler.set_timesteps(3)\n")
    assert _codes(fresh) == []
    # the object's own step keeps detached outputs: nothing carried
    assert _codes(HELPER.replace("model.scheduler.step(", "model.scheduler.step_detached(")) == []


CACHE = """
import torch
import torch.nn as nn
class GCNConv(nn.Module):
    def __init__(self, cached=False):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.cached = cached
        self._cached_adj = None
    def forward(self, x, adj):
        if self.cached and self._cached_adj is not None:
            norm = self._cached_adj
        else:
            norm = adj / adj.sum(1, keepdim=True)
            if self.cached:
                self._cached_adj = norm
        return norm @ self.lin(x)
class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self._c = None
    def forward(self, x, adj):
        if self._c is None:
            self._c = adj / adj.sum(1, keepdim=True)
        return self._c @ self.lin(x)
"""


def test_a_cache_filled_under_an_if_is_a_cache():
    gcn = _class(CACHE, "GCNConv")
    assert [(c[0], c[2], c[3]) for c in gcn.cached] == [("self._cached_adj", (("cached", "cached", 0, False),), True)]
    conv = _class(CACHE, "Conv")
    assert [(c[0], c[2]) for c in conv.cached] == [("self._c", ())]


GLOBALS = """
import torch
import torch.nn as nn
actor = nn.Linear(3, 2); c1 = nn.Linear(5, 1); c2 = nn.Linear(5, 1)
def prep(obs):
    return obs * 2
def shared(obs):
    act = torch.tanh(actor(obs))
    return c1(torch.cat([obs, act], -1)), c2(torch.cat([obs, act], -1))
def through_a_function(obs):
    act = prep(obs)
    return c1(torch.cat([obs, act], -1)), c2(torch.cat([obs, act], -1))
"""


def test_a_function_returning_values_of_one_global_modules_call_names_it():
    tree = ast.parse(textwrap.dedent(GLOBALS))
    got = {k[3:]: v for st in tree.body for k, v in facts.summarize_graph_facts(st) if k.startswith("fn:")}
    assert (got["shared"].returns_share, got["shared"].returns_share_via) == (False, ("actor",))
    # where it is called, prep is a function, not a module: nothing saved is shared
    assert got["through_a_function"].returns_share_via == ("prep",)
    loop = ("\nfor step in range(2):\n    q1, q2 = {f}(torch.randn(4, 3))\n"
            "    q1.mean().backward()\n    q2.mean().backward()\n")
    assert [c for c, _ in _codes(GLOBALS + loop.format(f="shared"))] == ["GG103"]
    assert _codes(GLOBALS + loop.format(f="through_a_function")) == []
