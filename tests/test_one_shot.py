"""One-shot analysis (check_source, the CLI) skips the by-name facts of
top-level functions nothing in the file mentions; the result must be exactly
what the incremental engine, which computes every fact, gives."""

from __future__ import annotations

import ast
from pathlib import Path

from gradguard.core import check_source
from gradguard.core.engine import Document
from gradguard.core.summary import summarize, unreferenced_defs
from seed_programs import fixture_catalogue

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


def test_unreferenced_functions_lose_only_their_by_name_facts():
    tree = ast.parse(TRAIN)
    run_once = tree.body[-1]
    full = dict(summarize(run_once, True))
    lean = dict(summarize(run_once, False))
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
        a, b = check_source(text, p.name), _eager(text, p.name)
        assert a.findings == b.findings, p.name
    catalogue = fixture_catalogue()
    a, b = check_source(catalogue, "all.py"), _eager(catalogue, "all.py")
    assert a.findings == b.findings and len(a.findings) > 50


def test_an_update_leaves_one_shot_mode():
    doc = Document(TRAIN, "t.py", one_shot=True)
    doc.result()
    edited = TRAIN + "\nrun_once()\n"
    assert doc.update(edited).findings == Document(edited, "t.py").result().findings
    assert doc._unreferenced == frozenset()
