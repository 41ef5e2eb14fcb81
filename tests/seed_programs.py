"""The seed programs, verbatim, shared by the test modules that use them as input.

REGRESSION_SEED is the linear-regression program of seed note 003: the input X
requires grad and the label Y is computed from it before the loop (GG102).
The runnable, labelled version lives in tests/fixtures/gg102_seed_linear_regression.py.
"""

REGRESSION_SEED = """\
import torch
from torch import nn
X = torch.rand(size = (2,5),requires_grad = True)
true_w = torch.tensor([1,2,3,4,5.]).reshape((X.shape[1],-1))
true_b = torch.zeros(X.shape[0]).reshape((-1,1))
Y = torch.matmul(X,true_w) + true_b
Y += torch.rand(size=(Y.shape))
linear1 = nn.Linear(5,1)
lr = 0.01
for i in range(10):
    Y_hat = linear1(X)
    l = (Y_hat-Y)**2
    print(l)
    linear1.zero_grad()
    l.sum().backward()
    linear1.weight.data[:] -= lr*linear1.weight.grad
    if(i + 1) % 2 == 0:
        print(f"epoch{i+1},loss{l.sum():.3f}")
"""


def fixture_catalogue() -> str:
    """Every runnable fixture program, one after another (a ``from __future__``
    line may only open a file, so those are dropped): a long realistic file with
    many models, helpers, training loops, module-level scripts and Chinese
    identifiers, full of real bugs. Used where a test needs a large input."""
    from pathlib import Path

    fixtures = sorted((Path(__file__).parent / "fixtures").glob("*.py"))
    return "\n\n".join(p.read_text(encoding="utf-8").replace("from __future__ import annotations\n", "")
                       for p in fixtures)


CATALOGUE_PATH = "catalogue.py"
_FRESH: dict = {}


def fresh_check(text: str, path: str = CATALOGUE_PATH):
    """``check_source(text, path)`` with the registered rules, run once per test
    session for each (text, path): the serial engine's answer that several tests
    hold another path to (the parallel engine, an edited or eager Document) on the
    fixture catalogue, which takes the serial engine seconds to analyse, and on each
    fixture. Only for a test that changes no rule (a result is shared with every
    later caller); the cached ``CheckResult`` is immutable (tuples)."""
    key = (text, path)
    got = _FRESH.get(key)
    if got is None:
        from gradguard.engine import check_source

        got = _FRESH[key] = check_source(text, path)
    return got
