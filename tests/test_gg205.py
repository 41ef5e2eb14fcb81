"""GG205 unzeroed-grads: a training loop that never zeroes its gradients."""

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

HEAD = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 1)
scaler = torch.cuda.amp.GradScaler(enabled=False)
data = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(3)]
"""


def gg205(src: str, config=None):
    return [f for f in check_source(textwrap.dedent(src), "t.py", config).findings if f.code == "GG205"]


def fixed(src: str) -> str:
    return apply_text_edits(src, [e for f in gg205(src) for e in f.preferred_fix.edits])


LOOP = HEAD + """\
for x, y in data:
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
"""


def test_missing_zero_grad_is_reported_at_the_step_and_fixed_at_the_top():
    [f] = gg205(LOOP)
    assert f.range.start.line + 1 == 12 and f.severity.value == "warning"
    assert "opt.zero_grad()" in f.message_in("en") and "累加" in f.message_in("zh")
    out = fixed(LOOP)
    assert "for x, y in data:\n    opt.zero_grad()\n    loss = " in out
    assert not gg205(out)


@pytest.mark.parametrize("body", [
    "    opt.zero_grad()\n    ((model(x) - y) ** 2).mean().backward()\n    opt.step()\n",
    "    ((model(x) - y) ** 2).mean().backward()\n    opt.step()\n    opt.zero_grad(set_to_none=True)\n",
    "    ((model(x) - y) ** 2).mean().backward()\n    opt.step()\n    model.zero_grad()\n",
    "    ((model(x) - y) ** 2).mean().backward()\n    opt.step()\n    for p in model.parameters():\n        p.grad = None\n",
    "    ((model(x) - y) ** 2).mean().backward()\n    if x.sum() > 0:\n        opt.step()\n        opt.zero_grad()\n",
    "    ((model(x) - y) ** 2).mean().backward()\n    sched.step()\n",       # a scheduler is no optimizer
    "    ((model(x) - y) ** 2).mean().backward()\n",                          # accumulation: step after the loop
    "    g = torch.autograd.grad(((model(x) - y) ** 2).mean(), list(model.parameters()))\n    opt.step()\n",
    "    reset()\n    ((model(x) - y) ** 2).mean().backward()\n    opt.step()\n",  # a helper of this file zeroes
])
def test_zeroing_anywhere_in_the_iteration_and_other_loops_are_silent(body):
    src = HEAD + "\n\ndef reset():\n    opt.zero_grad()\n\n\nfor x, y in data:\n" + body + "opt.step()\nopt.zero_grad()\n"
    assert not gg205(src)


def test_zeroing_only_per_epoch_and_a_scaler_step_are_reported():
    src = HEAD + textwrap.dedent("""\
    for epoch in range(2):
        opt.zero_grad()
        for x, y in data:
            scaler.scale(((model(x) - y) ** 2).mean()).backward()
            scaler.step(opt)
            scaler.update()
    """)
    [f] = gg205(src)
    assert f.range.start.line + 1 == 13 and "`opt`" in f.message_in("en")
    assert "    for x, y in data:\n        opt.zero_grad()\n        scaler.scale(" in fixed(src)


def test_manual_update_gets_grad_none_lines_and_chinese_names():
    src = textwrap.dedent("""\
    import torch
    权重 = torch.zeros(3, 1, requires_grad=True)
    偏置 = torch.zeros(1, requires_grad=True)
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    for 步 in range(3):
        损失 = ((x @ 权重 + 偏置 - y) ** 2).mean()  # 均方误差
        损失.backward()
        with torch.no_grad():
            权重 -= 0.1 * 权重.grad
            偏置.sub_(0.1 * 偏置.grad)
    """)
    [f] = gg205(src)
    line = src.splitlines()[f.range.start.line]
    assert f.range.start.character == line.index("权重 -=")
    out = fixed(src)
    assert "for 步 in range(3):\n    权重.grad = None\n    偏置.grad = None\n    损失 =" in out
    assert not gg205(out)


def test_an_optimizer_named_anything_is_found_by_its_construction():
    src = textwrap.dedent("""\
    import torch
    from torch import optim
    model = torch.nn.Linear(4, 1)
    trainer_state = optim.Adam(model.parameters())
    stepper = optim.lr_scheduler.StepLR(trainer_state, 1)
    for x in torch.randn(3, 2, 4):
        model(x).sum().backward()
        stepper.step()
        trainer_state.step()
    """)
    [f] = gg205(src)
    assert "trainer_state.zero_grad()" in f.message_in("en")


def test_user_controls():
    assert not gg205(LOOP, config_from_mapping({"ignore": ["GG205"]}))
    assert not gg205(LOOP, config_from_mapping({"select": ["GG201", "GG202"]}))
    [f] = gg205(LOOP, config_from_mapping({"severity": {"GG205": "info"}}))
    assert f.severity.value == "info"
    assert not gg205(LOOP, config_from_mapping({"per-file-ignores": {"*.py": ["GG205"]}}))
    assert not gg205(LOOP.replace("    opt.step()\n", "    opt.step()  # noqa: GG205\n"))


def test_explanation_sections_and_docs_page():
    from rule_pages import assert_docs_page_is_the_explanation, assert_sections

    rule = get_rule("GG205")
    assert rule.name == "unzeroed-grads" and rule.default_severity.value == "warning"
    assert_sections("GG205")
    for text in (rule.explain("en"), rule.explain("zh")):
        assert "optimizer.zero_grad()" in text and "torch.autograd.grad" in text and "p.grad = None" in text
    assert_docs_page_is_the_explanation("GG205")


def test_accumulation_without_dividing_the_loss_is_a_hint_without_a_fix():
    src = HEAD + textwrap.dedent("""\
    accum_steps = 4
    for i, (x, y) in enumerate(data):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        if (i + 1) % accum_steps == 0:
            opt.step()
            opt.zero_grad()
    """)
    [f] = gg205(src)
    assert f.severity.value == "hint" and f.range.start.line + 1 == 12 and not f.fixes
    assert "accum_steps" in f.message_in("en") and "累积" in f.message_in("zh")
    for divided in ("loss = ((model(x) - y) ** 2).mean() / accum_steps",):
        assert not gg205(src.replace("loss = ((model(x) - y) ** 2).mean()", divided))
    assert not gg205(src.replace("    loss.backward()", "    loss /= accum_steps\n    loss.backward()"))
    assert not gg205(src.replace("    loss.backward()", "    (loss / accum_steps).backward()"))
    assert not gg205(src.replace("opt.step()", "accelerator.step()"))


def test_distributed_autograd_and_other_frameworks_are_silent():
    rpc = HEAD + textwrap.dedent("""\
    import torch.distributed.autograd as dist_autograd
    for x, y in data:
        with dist_autograd.context() as cid:
            dist_autograd.backward(cid, [((model(x) - y) ** 2).mean()])
            opt.step(cid)
    """)
    assert not gg205(rpc)
    paddle = "import paddle\n" + LOOP.replace("import torch\nimport torch.nn as nn\n", "").replace("torch.", "paddle.")
    assert not gg205(paddle)


TRAINER = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Trainer:
        def __init__(self):
            self.model = nn.Linear(4, 1)
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def backward(self, x, y):
            loss = (self.model(x) - y).pow(2).mean()
            loss.backward()

        def train_step(self, x, y):
            self.backward(x, y)
            self.optimizer.step()
    {extra}

    trainer = Trainer()
    for x, y in [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(3)]:
    {loop}
""")


def trainer_findings(loop: str, extra: str = ""):
    return gg205(TRAINER.format(loop=textwrap.indent(loop, "    "), extra=textwrap.indent(extra, "    ")))


def test_a_step_method_called_in_a_loop_that_never_zeroes():
    found = trainer_findings("trainer.train_step(x, y)")
    assert [f.range.start.line + 1 for f in found] == [16]
    assert "train_step()" in found[0].message["en"] and "self.optimizer.zero_grad()" in found[0].message["en"]
    fixed = apply_text_edits(TRAINER.format(loop="    trainer.train_step(x, y)", extra=""), list(found[0].fixes[0].edits))
    assert "    def train_step(self, x, y):\n        self.optimizer.zero_grad()\n        self.backward(x, y)" in fixed
    assert gg205(fixed) == []


def test_a_step_method_stays_silent_when_the_loop_zeroes():
    assert trainer_findings("trainer.optimizer.zero_grad()\ntrainer.train_step(x, y)") == []


def test_a_step_method_stays_silent_when_a_method_zeroes():
    # the loop may call it: a def that zeroes anywhere in the file is no proof of the opposite
    extra = "\ndef reset(self):\n    self.optimizer.zero_grad()\n"
    assert trainer_findings("trainer.train_step(x, y)", extra) == []


def test_a_step_method_not_called_in_a_loop_is_silent():
    src = TRAINER.format(loop="    pass", extra="").replace("    pass\n", "    pass\ntrainer.train_step(x, y)\n")
    assert gg205(src) == []


COUNTED = HEAD + textwrap.dedent("""\
    accum, n = 3, 0
    for x, y in data:
        loss = (model(x) - y).pow(2).mean(){div}
        loss.backward()
        n += 1
        if n >= accum:
            opt.step()
            opt.zero_grad()
            n = 0
""")


def test_counter_gated_accumulation_without_division_is_a_hint():
    found = gg205(COUNTED.format(div=""))
    assert [(f.range.start.line + 1, f.severity.name) for f in found] == [(12, "HINT")]
    assert found[0].data["accumulation"] == "accum"


def test_counter_gated_accumulation_divided_is_silent():
    assert gg205(COUNTED.format(div=" / accum")) == []


def test_a_counter_never_reset_is_not_accumulation():
    # steps on every iteration once n reaches 3: a warm-up, not accumulation
    assert gg205(COUNTED.format(div="").replace("        n = 0\n", "")) == []


GAN_CLASS = """\
import torch
import torch.nn as nn


class GAN:
    def __init__(self):
        self.generator = nn.Linear(3, 5)
        self.discriminator = nn.Linear(5, 1)
        self.optimizerG = torch.optim.Adam(self.generator.parameters())
        self.optimizerD = torch.optim.Adam(self.discriminator.parameters())

    def step(self, real):
        fake = self.generator(torch.randn(4, 3))
{zero_d}        loss_d = self.discriminator(real).mean() - self.discriminator(fake.detach()).mean()
        loss_d.backward()
        self.optimizerD.step()
{zero_g}        loss_g = self.discriminator(fake).mean()
        loss_g.backward()
        self.optimizerG.step()


gan = GAN()
for i in range(3):
    gan.step(torch.randn(4, 5))
"""


def test_a_gan_class_step_zeroing_one_network_only_is_reported_at_the_others_step():
    # code-soup#69: the generator zeroed through the module, the discriminator never
    src = GAN_CLASS.format(zero_d="", zero_g="        self.generator.zero_grad()\n")
    [f] = gg205(src)
    assert f.range.start.line + 1 == 16 and "self.optimizerD" in f.message_in("en") \
        and "self.generator" in f.message_in("en") and "清零了" in f.message_in("zh")
    out = apply_text_edits(src, list(f.preferred_fix.edits))
    assert "        self.optimizerD.zero_grad()\n        fake = " in out and not gg205(out)


@pytest.mark.parametrize("zero_d, zero_g", [
    ("        self.discriminator.zero_grad()\n", "        self.generator.zero_grad()\n"),
    ("        self.optimizerD.zero_grad()\n", "        self.optimizerG.zero_grad()\n"),
    # a zeroing that may reach any parameter (every gradient of the object set to None)
    ("", "        for p in self.generator.parameters():\n            p.grad = None\n"),
])
def test_a_gan_class_step_zeroing_both_or_anything_is_silent(zero_d, zero_g):
    assert not gg205(GAN_CLASS.format(zero_d=zero_d, zero_g=zero_g))


def test_a_zeroed_module_holding_the_other_network_is_silent():
    # the generator holds the discriminator: zeroing it zeroes both
    src = GAN_CLASS.format(zero_d="", zero_g="        self.generator.zero_grad()\n").replace(
        "self.generator = nn.Linear(3, 5)\n", "self.generator = nn.Linear(3, 5)\n        self.generator.d = None\n").replace(
        "self.optimizerD = torch.optim.Adam(self.discriminator.parameters())",
        "self.optimizerD = torch.optim.Adam(self.generator.d.parameters())")
    assert not gg205(src)


GAN_ZEROED_AFTER = """\
import torch
import torch.nn as nn

G = nn.Linear(2, 3)
D = nn.Linear(3, 1)
opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
for real in [torch.randn(2, 3) for _ in range(3)]:
    z = torch.randn(2, 2)
    d_loss = D(real).mean() - D(G(z).detach()).mean()
    d_loss.backward()
    opt_d.step()
    opt_d.zero_grad()
    g_loss = D(G(z)).mean()
    g_loss.backward()
    opt_g.step()
    opt_g.zero_grad()
"""


def test_a_gan_zeroing_each_optimizer_after_its_step_leaks_the_generator_loss_into_d():
    # Lightning#591's template: g_loss.backward() after opt_d.zero_grad() runs through D
    [f] = gg205(GAN_ZEROED_AFTER)
    assert f.range.start.line + 1 == 15 and f.severity.value == "warning"
    assert "`D`" in f.message_in("en") and "`opt_d`" in f.message_in("en") and "清零" in f.message_in("zh")
    assert [r.range.start.line + 1 for r in f.related] == [13, 12]
    out = fixed(GAN_ZEROED_AFTER)
    assert "    opt_d.zero_grad()\n    z = torch.randn(2, 2)\n" in out and not gg205(out)


@pytest.mark.parametrize("old,new", [
    # the generator's loss cut from D, or D zeroed before its own backward
    ("    g_loss = D(G(z)).mean()\n", "    g_loss = G(z).pow(2).mean()\n"),
    ("    g_loss = D(G(z)).mean()\n", "    g_loss = D(G(z)).detach().mean() + G(z).mean()\n"),
    ("    d_loss.backward()\n    opt_d.step()\n    opt_d.zero_grad()\n",
     "    opt_d.zero_grad()\n    d_loss.backward()\n    opt_d.step()\n"),
    # zeroed again at the end of the iteration (the report's fix)
    ("    opt_g.zero_grad()\n", "    opt_g.zero_grad()\n    opt_d.zero_grad()\n"),
    # a zeroing the rule cannot place, or the update inside a branch
    ("    opt_g.zero_grad()\n", "    opt_g.zero_grad()\n    for p in D.parameters():\n        p.grad = None\n"),
    ("    g_loss.backward()\n", "    if True:\n        g_loss.backward()\n"),
])
def test_a_gan_whose_d_sees_no_generator_gradient_at_its_step_is_silent(old, new):
    assert old in GAN_ZEROED_AFTER
    assert not gg205(GAN_ZEROED_AFTER.replace(old, new))


HELPER_COUNTED = """\
import torch
import torch.nn as nn


class Counter:
    def __init__(self, every=2):
        self.every = every
        self.n = 0

    def ready(self):
        self.n {inc}
        if self.n < self.every:
            return False
        {reset}
        return True


model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
counter = Counter()
for i in range(6):
    loss = model(torch.randn(2, 3)).pow(2).mean()
    {backward}
    if counter.ready():
        opt.step()
        opt.zero_grad()
"""


def helper_counted(inc="+= 1", reset="self.n = 0", backward="loss.backward()  # 累积"):
    return HELPER_COUNTED.format(inc=inc, reset=reset, backward=backward)


def test_accumulation_gated_by_a_counting_helper_without_dividing_gets_a_hint():
    src = helper_counted()
    [f] = [f for f in check_source(src, "t.py").findings if f.code == "GG205"]
    assert f.severity.value == "hint" and src.splitlines()[f.range.start.line] == "    loss.backward()  # 累积"
    assert "`counter.every` backward passes" in f.message_in("en") and "counter.every" in f.message_in("zh")
    [f] = [f for f in check_source(helper_counted(inc="+= 2"), "t.py").findings if f.code == "GG205"]
    assert "samples" in f.message_in("en")


@pytest.mark.parametrize("src", [
    helper_counted(backward="(loss / counter.every).backward()"),  # divided
    helper_counted(reset="pass"),  # never reset: not an accumulation count
    helper_counted(backward="opt.zero_grad()\n    loss.backward()"),  # zeroed every iteration: nothing accumulates
])
def test_a_counting_helper_with_a_divided_loss_or_no_accumulation_is_silent(src):
    assert not [f for f in check_source(src, "t.py").findings if f.code == "GG205"]


FLAG_GATED = HEAD + """\
k = 2
for i, (x, y) in enumerate(data):
    is_grad_step = (i + 1) % k == 0
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if is_grad_step:
        opt.step()
        opt.zero_grad()
"""


def test_a_step_gated_by_a_modulo_flag_without_dividing_the_loss_is_a_hint():
    (f,) = gg205(FLAG_GATED)
    assert f.severity.name == "HINT"
    assert f.range.start.line + 1 == FLAG_GATED.splitlines().index("    loss.backward()") + 1
    assert "`k`" in f.message["en"]


@pytest.mark.parametrize("edit", [
    ("    loss.backward()\n", "    (loss / k).backward()\n"),  # divided
    ("    is_grad_step = (i + 1) % k == 0\n", "    is_grad_step = i > 0\n"),  # no modulo: no count to name
    ("    loss.backward()\n", "    loss.backward()\n    is_grad_step = True\n"),  # set twice
])
def test_flag_gated_steps_that_divide_or_are_no_modulo_test_are_silent(edit):
    src = FLAG_GATED.replace(*edit)
    assert src != FLAG_GATED
    assert gg205(src) == []
