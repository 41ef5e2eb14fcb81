"""GG206 stuck-in-eval: a loop switches the model it trains to evaluation mode
and never back before the next iteration trains it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from gradguard.engine import check_source
from gradguard.model.text import apply_text_edits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rule_pages import assert_docs_page_is_the_explanation, assert_sections  # noqa: E402

HEAD = """\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(2, 4), torch.randint(0, 2, (2,))) for _ in range(3)]
"""


def gg206(src: str):
    return [f for f in check_source(textwrap.dedent(src), "t.py").findings if f.code == "GG206"]


def fixed(src: str) -> str:
    return apply_text_edits(src, [e for f in gg206(src) for e in f.preferred_fix.edits])


EPOCHS = HEAD + """\
model.train()
for epoch in range(3):
    for x, y in data:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        print(model(data[0][0]).sum().item())
"""


def test_eval_at_the_end_of_the_epoch_is_reported_there_and_fixed_at_the_top():
    [f] = gg206(EPOCHS)
    assert f.range.start.line + 1 == 13 and f.severity.value == "warning"
    assert "model.train()" in f.message_in("en") and "line 11" in f.message_in("en")
    assert "评估模式" in f.message_in("zh")
    assert [r.range.start.line + 1 for r in f.related] == [11, 8]
    out = fixed(EPOCHS)
    assert "for epoch in range(3):\n    model.train()\n    for x, y in data:" in out
    assert not gg206(out)


@pytest.mark.parametrize("switch", ["model.eval()", "model.train(False)", "model.train(mode=False)",
                                    "model.to('cpu').eval()"])
def test_every_spelling_of_the_switch(switch):
    assert len(gg206(EPOCHS.replace("model.eval()", switch))) == 1


HELPERS = HEAD + """\
def train_epoch(net, loader):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()


def validate(net, loader):
    net.eval()
    with torch.no_grad():
        return sum(net(x).sum().item() for x, _ in loader)


for epoch in range(3):
    train_epoch(model, data)
    print(validate(model, data))
"""


def test_a_same_file_validate_helper_is_read_through_its_arguments():
    [f] = gg206(HELPERS)
    assert f.range.start.line + 1 == 22
    assert "`validate(...)`" in f.message_in("en") and "`validate(...)`" in f.message_in("zh")
    out = fixed(HELPERS)
    assert "for epoch in range(3):\n    model.train()\n    train_epoch(model, data)" in out
    assert not gg206(out)


METHODS = """\
import torch
import torch.nn as nn


class Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def evaluate(self, loader):
        self.model.eval()
        with torch.no_grad():
            return [self.model(x) for x, _ in loader]

    def fit(self, loader):
        for epoch in range(3):
            for x, y in loader:
                self.opt.zero_grad()
                nn.functional.cross_entropy(self.model(x), y).backward()
                self.opt.step()
            self.evaluate(loader)
"""


def test_methods_on_self():
    [f] = gg206(METHODS)
    assert f.range.start.line + 1 == 21 and "`self.model`" in f.message_in("en")
    assert "self.model.train()" in fixed(METHODS)


def test_a_method_the_file_does_not_define_on_the_owner_may_switch_back():
    src = METHODS.replace("            self.evaluate(loader)\n", "            self.evaluate(loader)\n"
                          "            self.on_epoch_end()\n")
    assert src != METHODS and not gg206(src)


@pytest.mark.parametrize("change", [
    # switched back at the top of the epoch, or in the training helper
    ("for epoch in range(3):\n", "for epoch in range(3):\n    model.train()\n"),
    ("def train_epoch(net, loader):\n", "def train_epoch(net, loader):\n    net.train()\n"),
    # after validation
    ("    print(validate(model, data))\n", "    print(validate(model, data))\n    model.train()\n"),
    # a flag the analysis cannot read
    ("    print(validate(model, data))\n", "    print(validate(model, data))\n    model.train(epoch < 9)\n"),
    # handed to code the file does not define, which may switch it back
    ("    print(validate(model, data))\n", "    print(validate(model, data))\n    engine.prepare(model)\n"),
    # the evaluated module is an averaged copy, not the one trained
    ("    print(validate(model, data))\n", "    print(validate(model_ema, data))\n"),
    # evaluation mode before the loop: the whole training runs in it on purpose
    ("for epoch in range(3):\n", "model.eval()\nfor epoch in range(3):\n"),
])
def test_switched_back_or_deliberate_is_silent(change):
    old, new = change
    assert old in HELPERS
    assert not gg206(HELPERS.replace(old, new, 1))


def test_a_switch_before_the_training_step_of_the_same_iteration_is_deliberate():
    src = HEAD + """\
for x, y in data:
    model.eval()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
"""
    assert not gg206(src)


def test_modules_the_loop_does_not_train_are_silent():
    src = HEAD + """\
teacher = nn.Linear(4, 2)
for x, y in data:
    with torch.no_grad():
        soft = teacher(x)
    opt.zero_grad()
    (nn.functional.cross_entropy(model(x), y) + (model(x) - soft).pow(2).mean()).backward()
    opt.step()
    teacher.eval()
"""
    assert not gg206(src)


def test_a_trainer_with_its_own_eval_method_is_not_a_module():
    src = """\
import torch
import torch.nn as nn


class Runner:
    def __init__(self):
        self.net = nn.Linear(4, 2)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def eval(self):
        return 0

    def train(self, loader):
        for x in loader:
            self.net.train()
            self.opt.zero_grad()
            self.net(x).sum().backward()
            self.opt.step()
            self.eval()
"""
    assert not gg206(src)


def test_a_final_evaluation_that_leaves_the_loop_is_silent():
    src = EPOCHS.replace("    model.eval()\n", "    if epoch == 2:\n        model.eval()\n        break\n")
    assert src != EPOCHS and not gg206(src)
    assert len(gg206(EPOCHS.replace("    model.eval()\n", "    if epoch == 2:\n        model.eval()\n"))) == 1


def test_a_loop_that_does_not_train_is_silent():
    src = HEAD + """\
for x, y in data:
    print(model(x))
    model.eval()
"""
    assert not gg206(src)


def test_chinese_identifiers_and_columns():
    src = """\
import torch
import torch.nn as nn

模型 = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
优化器 = torch.optim.SGD(模型.parameters(), lr=0.1)
数据 = [(torch.randn(2, 4), torch.randint(0, 2, (2,))) for _ in range(3)]
for 轮 in range(2):
    for x, y in 数据:
        优化器.zero_grad()
        nn.functional.cross_entropy(模型(x), y).backward()
        优化器.step()
    模型.eval()  # 验证
"""
    [f] = gg206(src)
    assert f.range.start.line + 1 == 12 and f.range.start.character == 4 and f.range.end.character == 13
    assert "`模型.train()`" in f.message_in("zh")
    assert "    模型.train()\n    for x, y in 数据:" in fixed(src)


def test_docs():
    assert_sections("GG206")
    assert_docs_page_is_the_explanation("GG206")


TRAINER = """\
import torch
import torch.nn as nn
from lib import Base


class Trainer(Base):
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def fit(self, batches):
        self.model.train()
        for i, x in enumerate(batches):
            loss = self.model(x).sum()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if i % 2 == 0:
                {call}

    def evaluate(self):
        self.model.eval()
"""


def test_a_trainer_method_that_leaves_its_model_in_eval_is_seen_through_the_models_own_call():
    # self.model(x) runs the trainer's own module: it switches no mode (it used to hide the method's eval())
    [f] = gg206(TRAINER.format(call="self.evaluate()"))
    assert f.range.start.line + 1 == 19 and "self.model" in f.message_in("en")


@pytest.mark.parametrize("call", [
    "self.evaluate(); self.model.train()",
    # a method the class inherits from a library: it may switch the modes back
    "self.evaluate(); self.on_validation_end()",
])
def test_a_trainer_method_followed_by_a_restore_or_unknown_code_stays_silent(call):
    assert not gg206(TRAINER.format(call=call))


WRAPPER = """\
import torch
import torch.nn as nn


class Wrapper:
    def __init__(self):
        self.enc = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
        self.opt = torch.optim.SGD(self.enc.parameters(), lr=0.1)

    def val_start(self):
        self.enc.eval()

    def train_start(self):
        self.enc.train()

    def step(self, x):
        self.opt.zero_grad()
        self.enc(x).sum().backward()
        self.opt.step()


def validate(model):
    model.{method}()
    with torch.no_grad():
        return model.enc(torch.randn(2, 4)).sum().item()


model = Wrapper()
model.train_start()
for i in range(4):
    model.step(torch.randn(2, 4))
    if i % 2 == 0:
        validate(model){after}
"""


def test_a_helper_calling_a_wrappers_evaluation_method_on_its_argument_is_reported():
    src = WRAPPER.format(method="val_start", after="")
    [f] = gg206(src)
    assert f.range.start.line + 1 == 33 and "`validate(...)`" in f.message_in("en") and "`model.enc`" in f.message_in("en")
    out = apply_text_edits(src, list(f.preferred_fix.edits))
    assert "    model.enc.train()\n    model.step(" in out and not gg206(out)


@pytest.mark.parametrize("method, after", [
    ("train_start", ""),  # the helper restores
    ("sync", ""),  # a method the file does not define: it may switch anything
    ("val_start", "\n        model.train_start()"),  # restored after the helper
])
def test_a_helper_calling_a_restoring_or_unknown_method_is_silent(method, after):
    assert not gg206(WRAPPER.format(method=method, after=after))
