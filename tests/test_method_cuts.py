"""A method of the user's class that returns a detached state (``model.repackage_hidden(h)``,
recursive over a tuple through ``self``/``cls``, a ``@staticmethod`` called through the
class) cuts the graph as a module-level ``repackage_hidden`` helper does; and GG201's
evaluation hint sees a model call under ``torch.no_grad()`` when the loop's only other
module call is a loss on its graph-free output. The programs (and their bug twins) are
fixtures; these tests hold the facts and the findings each rests on."""

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


CUTS = """
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4)
    def forward(self, x, h):
        return self.rnn(x, h)
    def repackage(self, h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(self.repackage(v) for v in h)
    def keeps(self, h):
        if isinstance(h, torch.Tensor):
            return h
        return tuple(self.keeps(v) for v in h)
    @staticmethod
    def cut(h):
        return h.detach()
    @classmethod
    def cut_all(cls, hs):
        if isinstance(hs, torch.Tensor):
            return cls.cut(hs)
        return [cls.cut_all(h) for h in hs]
    def deep(self, x, n):
        if n == 0:
            return x
        return self.deep(x, n - 1) + 1
"""


def test_a_recursive_method_returning_detached_state_detaches():
    cf = _class(CUTS, "Net")
    assert cf.method("repackage").detaches  # the recursion through self is assumed, as a helper's is
    assert not cf.method("keeps").detaches and 0 in cf.method("keeps").ret.params
    assert cf.method("cut").detaches and cf.method("cut_all").detaches  # cls.cut, cls.cut_all
    assert cf.unbound == frozenset({"cut", "cut_all"})
    assert 0 in cf.method("deep").ret.params  # the base case hands its parameter back


LOOP = """
import torch
import torch.nn as nn
torch.manual_seed(0)
{cls}
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
h = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
for x in torch.randn(4, 3, 2, 3):
    h = {call}
    out, h = model(x, h)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _loop(call: str) -> str:
    cls = textwrap.dedent(CUTS).split("import torch.nn as nn\n", 1)[1]
    return LOOP.format(cls=cls, call=call)


def test_a_state_cut_by_an_own_method_is_not_carried():
    for call in ("model.repackage(h)", "Net.cut_all(h)", "model.cut_all(h)", "tuple(Net.cut(v) for v in h)"):
        assert _codes(_loop(call)) == [], call


def test_a_state_handed_back_by_an_own_method_is_still_carried():
    for call in ("model.keeps(h)", "h"):
        got = _codes(_loop(call))
        assert [c for c, _ in got] == ["GG101"], (call, got)


VALIDATE = """
import torch
import torch.nn as nn
def validate(loader, model, criterion):
    model.eval()
    total = 0.0
    for x, y in loader:  # <loop>
        {body}
        total += loss.item()
    return total
model = nn.Linear(3, 2)
{criterion}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 3), torch.randint(0, 2, (4,)))]
for epoch in range(2):
    model.train()  # (validate() leaves it in evaluation mode: GG206 without this)
    for x, y in loader:
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    validate(loader, model, criterion)
"""

_UNDER = "with torch.no_grad():\n            out = model(x)\n        loss = criterion(out, y)"
_OUTSIDE = "out = model(x)\n        loss = criterion(out, y)"


def test_evaluation_hint_sees_the_model_call_under_no_grad():
    for crit in ("criterion = nn.CrossEntropyLoss()", "criterion = nn.NLLLoss()"):
        assert _codes(VALIDATE.format(body=_UNDER, criterion=crit)) == []
        # the bug twin: the model call records a graph (the hint stays)
        assert _codes(VALIDATE.format(body=_OUTSIDE, criterion=crit)) == [("GG201", 7)]


def test_evaluation_hint_stays_for_a_module_with_parameters_after_the_no_grad_block():
    # a layer with weights called outside no_grad records a graph, even on graph-free input
    crit = "head = nn.Linear(2, 2)\ncriterion = lambda out, y: nn.functional.cross_entropy(out, y)"
    body = "with torch.no_grad():\n            out = model(x)\n        loss = nn.functional.cross_entropy(head(out), y)"
    assert _codes(VALIDATE.format(body=body, criterion=crit)) == [("GG201", 7)]


UNSEEN = """
import torch
import torch.nn as nn
loss_func = nn.MSELoss()
try:
    encoder, decoder = torch.load("autoencoder.pkl")
except Exception:
    encoder, decoder = nn.Linear(4, 2), nn.Linear(2, 4)
test_loader = [torch.randn(3, 4)]
for image in test_loader:
    loss_func(decoder(encoder(image)), image).backward()
for image in test_loader:  # <loop>
    output = encoder(image)
    output = decoder(output)
    loss = loss_func(output, image)
    print(loss.item())
"""


def test_a_loss_call_still_counts_when_nothing_runs_under_no_grad():
    # the models cannot be typed here (loaded), the loss is all the hint sees: with no
    # no_grad block in the loop, what the author meant to run without a graph is not shown
    assert _codes(UNSEEN) == [("GG201", 12)]
