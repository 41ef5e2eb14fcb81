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


# --- an evaluation helper called now and then before the iteration's training; hooks ---

VALIDATE_IN_LOOP = HEAD + """\
class Trainer:
    def __init__(self):
        self.model = model
        self.step = 0

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            print(float(self.model(data[0][0]).sum()))

    def train_epoch(self):
        self.model.train()
        for x, y in data:
            self.step += 1
            if self.step % 2 == 0:
                self.validate()
            loss = nn.functional.cross_entropy(self.model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def test_an_evaluation_helper_called_under_an_if_before_the_training_step_is_reported():
    (f,) = gg206(VALIDATE_IN_LOOP)
    assert f.range.start.line + 1 == VALIDATE_IN_LOOP.splitlines().index("                self.validate()") + 1
    assert "right after" in f.message["en"]
    out = fixed(VALIDATE_IN_LOOP)
    assert "                self.validate()\n                self.model.train()\n" in out
    assert gg206(out) == []


@pytest.mark.parametrize("edit", [
    # called in every iteration before training: a deliberate mode (frozen batch norm), as a direct .eval()
    ("            if self.step % 2 == 0:\n                self.validate()\n", "            self.validate()\n"),
    # a helper not named for evaluation (freeze_bn), under an if
    ("def validate(self)", "def freeze(self)"),
    # the helper switches the model back
    ("            print(float(self.model(data[0][0]).sum()))\n",
     "            print(float(self.model(data[0][0]).sum()))\n        self.model.train()\n"),
])
def test_evaluation_helpers_before_training_that_are_deliberate_or_restore_are_silent(edit):
    src = VALIDATE_IN_LOOP.replace(*edit)
    if edit[1] == "def freeze(self)":
        src = src.replace("self.validate()", "self.freeze()")
    assert src != VALIDATE_IN_LOOP
    assert gg206(src) == []


HOOKS = HEAD + """\
def run_test(net, loader):
    net.eval()
    with torch.no_grad():
        return [net(x) for x, _ in loader]


class EvalHook:
    def after_train_iter(self, runner):
        run_test(runner.model, data[:1])


class Runner:
    def __init__(self, hooks):
        self.model = model
        self.hooks = hooks

    def call_hook(self, fn_name):
        for hook in self.hooks:
            getattr(hook, fn_name)(self)

    def train(self):
        self.model.train()
        for x, y in data:
            loss = nn.functional.cross_entropy(self.model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            self.call_hook("after_train_iter")


Runner([EvalHook()]).train()
"""


def test_a_hook_run_by_name_that_leaves_the_runners_model_in_eval_is_reported():
    (f,) = gg206(HOOKS)
    assert f.range.start.line + 1 == HOOKS.splitlines().index('            self.call_hook("after_train_iter")') + 1
    assert "after_train_iter" in f.message["en"] and "self.model" in f.message["en"]
    assert gg206(fixed(HOOKS)) == []


@pytest.mark.parametrize("edit", [
    ("        run_test(runner.model, data[:1])\n", "        run_test(runner.model, data[:1])\n        runner.model.train()\n"),
    ('self.call_hook("after_train_iter")', 'self.call_hook("before_train_iter")'),  # no such hook
    ("        run_test(runner.model, data[:1])\n", "        run_test(runner.other, data[:1])\n"),
    ("def after_train_iter(self, runner)", "def log_iter(self, runner)"),  # not a hook's name: not read
])
def test_hooks_that_restore_or_touch_another_module_are_silent(edit):
    src = HOOKS.replace(*edit)
    if edit[1] == "def log_iter(self, runner)":
        src = src.replace('"after_train_iter"', '"log_iter"')
    assert src != HOOKS
    assert gg206(src) == []
