"""GG207 zeroed-before-step: zero_grad() between backward() and step()."""

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

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", enabled=False)
data = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(3)]
"""


def gg207(src: str):
    return [f for f in check_source(textwrap.dedent(src), "t.py").findings if f.code == "GG207"]


def fixed(src: str) -> str:
    return apply_text_edits(src, [e for f in gg207(src) for e in f.preferred_fix.edits])


LOOP = HEAD + """\
for x, y in data:
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.zero_grad()  # 太晚了
    opt.step()
"""


def test_reported_at_the_zeroing_and_moved_after_the_step():
    [f] = gg207(LOOP)
    assert f.range.start.line + 1 == 11 and f.severity.value == "warning"
    assert "line 10" in f.message_in("en") and "line 12" in f.message_in("en") and "抹掉" in f.message_in("zh")
    out = fixed(LOOP)
    assert out.endswith("    loss.backward()\n    opt.step()\n    opt.zero_grad()  # 太晚了\n")
    assert not gg207(out) and not [g for g in check_source(out, "t.py").findings if g.code == "GG205"]


def test_the_step_ending_the_file_without_a_newline():
    src = LOOP.rstrip("\n")
    out = fixed(src)
    assert out.endswith("    opt.step()\n    opt.zero_grad()  # 太晚了") and not gg207(out)


@pytest.mark.parametrize("body", [
    "    scaler.scale(loss).backward()\n    opt.zero_grad(set_to_none=True)\n    scaler.step(opt)\n    scaler.update()\n",
    "    loss.backward()\n    opt.zero_grad()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
    "    print(loss.item())\n    opt.step()\n",
])
def test_other_spellings_are_reported(body):
    src = HEAD + "for x, y in data:\n    loss = ((model(x) - y) ** 2).mean()\n" + body
    assert len(gg207(src)) == 1


@pytest.mark.parametrize("body", [
    # the usual places
    "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n",
    "    loss.backward()\n    opt.step()\n    opt.zero_grad()\n",
    # a second backward after the zeroing
    "    loss.backward()\n    opt.zero_grad()\n    ((model(x) - y) ** 2).sum().backward()\n    opt.step()\n",
    # gradients written back after the zeroing
    "    loss.backward()\n    g = [p.grad.clone() for p in model.parameters()]\n    opt.zero_grad()\n"
    "    for p, q in zip(model.parameters(), g):\n        p.grad = q\n    opt.step()\n",
    # code the rule cannot read between the zeroing and the step
    "    loss.backward()\n    opt.zero_grad()\n    apply_my_gradients(model)\n    opt.step()\n",
    # another optimizer zeroed
    "    loss.backward()\n    other.zero_grad()\n    opt.step()\n",
    # a step of its own gradients
    "    loss.backward()\n    opt.zero_grad()\n    opt.step(closure)\n",
    # torch.autograd.grad fills no .grad
    "    g = torch.autograd.grad(loss, list(model.parameters()))\n    opt.zero_grad()\n    opt.step()\n",
    # the step already came
    "    loss.backward()\n    opt.step()\n    opt.zero_grad()\n    opt.step()\n",
])
def test_right_forms_are_silent(body):
    src = HEAD + "for x, y in data:\n    loss = ((model(x) - y) ** 2).mean()\n" + body
    assert not gg207(src)


def test_docs():
    assert_sections("GG207")
    assert_docs_page_is_the_explanation("GG207")


MICRO = HEAD + """\
for x, y in data:
    for micro in range({k}):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean() / 2
        loss.backward()
{inner}    opt.step()
"""


def test_zeroing_inside_the_accumulation_loop():
    src = MICRO.format(k=2, inner="")
    found = gg207(src)
    assert [f.range.start.line + 1 for f in found] == [10]
    assert "last iteration" in found[0].message["en"]
    fixed = apply_text_edits(src, list(found[0].fixes[0].edits))
    assert "for x, y in data:\n    opt.zero_grad()\n    for micro in range(2):\n        loss =" in fixed
    assert gg207(fixed) == []


@pytest.mark.parametrize("k, inner", [
    (1, ""),  # one micro-batch: nothing to erase
    (2, "        opt.step()\n"),  # a step per micro-batch
    (2, "        if loss.item() > 9:\n            break\n"),  # (still zeroes first: reported)
])
def test_accumulation_loop_variants(k, inner):
    found = gg207(MICRO.format(k=k, inner=inner))
    assert len(found) == (1 if "break" in inner else 0)


EVERY_K = HEAD + """\
k = 2
for i, (x, y) in enumerate(data):
{body}
"""


@pytest.mark.parametrize("body, line", [
    # zero at the top, step every k batches (accelerate's demo)
    ("    opt.zero_grad()\n    loss = model(x).sum() / k\n    loss.backward()\n"
     "    if (i + 1) % k == 0:\n        opt.step()", 10),
    # zero between the forward and the backward, a virtual step otherwise (Opacus)
    ("    loss = model(x).sum()\n    opt.zero_grad()\n    loss.backward()\n"
     "    if (i + 1) % k == 0 or i + 1 == len(data):\n        opt.step()\n    else:\n        pass", 11),
    # zero at the bottom, inside a with block
    ("    with torch.autocast('cpu', enabled=False):\n        loss = model(x).sum()\n"
     "        loss.backward()\n    if i % k == 0:\n        scaler.step(opt)\n    opt.zero_grad()", 15),
    # a sample counter the step resets (openWakeWord)
    ("    opt.zero_grad()\n    model(x).sum().backward()\n    seen += x.shape[0]\n"
     "    if seen >= 4:\n        opt.step()\n        seen = 0", 10),
])
def test_zeroing_every_iteration_while_stepping_every_k_is_reported(body, line):
    src = EVERY_K.format(body=body).replace("k = 2\n", "k = 2\nseen = 0\n")
    [f] = gg207(src)
    assert f.range.start.line + 1 == line + 1
    assert "every iteration" in f.message_in("en") and "每一轮" in f.message_in("zh")
    out = fixed(src)
    assert not gg207(out)
    if "scaler" not in body:
        assert "opt.step()\n        opt.zero_grad()\n" in out


@pytest.mark.parametrize("body", [
    # the zeroing follows the step inside the branch (the fix)
    "    model(x).sum().backward()\n    if (i + 1) % k == 0:\n        opt.step()\n        opt.zero_grad()",
    # a step every iteration; the scheduler every k
    "    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n    if (i + 1) % k == 0:\n        sched.step()",
    # a step skipped on a non-finite loss: the gradient is dropped on purpose
    "    opt.zero_grad()\n    loss = model(x).sum()\n    loss.backward()\n    if torch.isfinite(loss):\n        opt.step()",
    # a warm-up counter the step never resets: no accumulation
    "    opt.zero_grad()\n    model(x).sum().backward()\n    seen += 1\n    if seen >= 2:\n        opt.step()",
    # the backward under the same condition as the step
    "    opt.zero_grad()\n    if (i + 1) % k == 0:\n        model(x).sum().backward()\n        opt.step()",
    # another optimizer's step every k
    "    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n    other.zero_grad()\n"
    "    if (i + 1) % k == 0:\n        other.step()",
])
def test_zeroing_every_iteration_twins_stay_silent(body):
    src = EVERY_K.format(body=body).replace(
        "k = 2\n", "k = 2\nseen = 0\nsched = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
                   "other = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)\n")
    assert not gg207(src)


SAME_CONDITION = HEAD + """\
k = 2
for i, (x, y) in enumerate(data):
    if i % k == 0:
        opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean() / k
    loss.backward()
    if i % k == 0:
        opt.step()
"""


def test_zeroing_under_the_steps_own_condition_before_the_backward_is_reported_and_moved():
    # ignite#583's first FAQ entry: the stepping iteration erases what the others accumulated
    [f] = gg207(SAME_CONDITION)
    assert f.range.start.line + 1 == 11
    assert "`i % k == 0`" in f.message_in("en") and "(line 15)" in f.message_in("en") and "清零" in f.message_in("zh")
    assert [r.range.start.line + 1 for r in f.related] == [13, 15]
    out = fixed(SAME_CONDITION)
    assert "    if i % k == 0:\n        opt.step()\n        opt.zero_grad()\n" in out
    assert out.count("zero_grad") == 1 and not gg207(out)


@pytest.mark.parametrize("old,new", [
    # the window's start zeroed, its end stepped: the right order
    ("    if i % k == 0:\n        opt.step()\n", "    if (i + 1) % k == 0:\n        opt.step()\n"),
    # a condition that is no modulo
    ("    if i % k == 0:\n        opt.zero_grad()\n", "    if i == 0:\n        opt.zero_grad()\n"),
    # no backward between them
    ("    loss.backward()\n", ""),
    # a zeroing of another optimizer
    ("        opt.zero_grad()\n", "        other.zero_grad()\n"),
])
def test_zeroing_and_step_under_different_conditions_or_optimizers_are_silent(old, new):
    assert old in SAME_CONDITION
    assert not gg207(SAME_CONDITION.replace(old, new))


# ---------------------------------------------------------------------------
# the zeroing under `count % k == 0` with `count += 1` between it and the step's same test
# (the sixth blind quiet corpus's flagged twin; DualTalk issue 9's accumulation with a counter)

_FIXTURES = Path(__file__).resolve().parent / "fixtures"
_COUNT_OK = _FIXTURES / "ok_gg207_zeroed_under_the_count_before_it_is_incremented.py"


def test_the_count_incremented_between_the_two_tests_is_silent_and_moving_it_is_reported():
    text = _COUNT_OK.read_text(encoding="utf-8")
    assert not gg207(text)
    # the increment after the step's test: both tests read the same count again
    moved = text.replace("    count += 1\n", "").rstrip("\n") + "\n    count += 1\n"
    [f] = gg207(moved)
    assert "count % accumulation_steps == 0" in f.message_in("en")
    # another name rebound between the tests changes nothing
    other = text.replace("    count += 1\n", "    seen = count + 1\n").rstrip("\n") + "\n    count += 1\n"
    assert len(gg207(other)) == 1


@pytest.mark.needs_torch
def test_the_count_incremented_between_the_two_tests_erases_nothing_under_torch():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch_harness as th
    got = th.run_program(str(_COUNT_OK))
    assert got.status == "train" and got.steps == 3 and got.empty_steps == 0 and got.discarded == 0


HELPER = HEAD + """\
accum = 3


def train_step(x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean() / accum
    loss.backward()
    return loss.item()


for i, (x, y) in enumerate(data * 2):
    value = train_step(x, y)  # 每个批次
    if (i + 1) % accum == 0:
        opt.step()
"""


def test_a_helper_zeroing_before_its_backward_each_iteration_is_reported_at_its_call():
    [f] = gg207(HELPER)
    assert f.range.start.line + 1 == 19 and f.data["shape"] == "helper"
    en = f.message_in("en")
    assert "`train_step()`" in en and "(i + 1) % accum == 0" in en and "line 21" in en and "清零" in f.message_in("zh")
    assert f.preferred_fix is None


TRAINER = HEAD + """\


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def forward_backward(self, x, y):
        self.optimizer.zero_grad()
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()

    def optim_step(self):
        self.optimizer.step()


trainer = Trainer(model)
for _ in range(2):
    for x, y in data:
        trainer.forward_backward(x, y)
    trainer.optim_step()
"""


def test_a_method_zeroing_per_micro_batch_and_a_step_method_after_the_loop_are_reported():
    [f] = gg207(TRAINER)
    assert f.range.start.line + 1 == 27 and "once, after the loop" in f.message_in("en")
    assert "`trainer.optim_step()`" in f.message_in("en")


@pytest.mark.parametrize("src", [
    # the step in every iteration, or after a loop that runs once
    HELPER.replace("    if (i + 1) % accum == 0:\n        opt.step()\n", "    opt.step()\n"),
    TRAINER.replace("    for x, y in data:\n", "    for x, y in data[:1]:\n").replace("data[:1]", "range(1)").replace(
        "trainer.forward_backward(x, y)", "trainer.forward_backward(*data[0])"),
    # the helper zeroes after its own step, or only when told, or never before its backward
    HELPER.replace("    return loss.item()\n", "    opt.step()\n    return loss.item()\n"),
    HELPER.replace("    opt.zero_grad()\n    loss = ", "    if i % accum == 0:\n        opt.zero_grad()\n    loss = "),
    TRAINER.replace("        self.optimizer.zero_grad()\n", "").replace(
        "        self.optimizer.step()\n", "        self.optimizer.step()\n        self.optimizer.zero_grad()\n"),
    # the step is under a condition that is not accumulation, or steps another optimizer
    HELPER.replace("if (i + 1) % accum == 0:", "if torch.isfinite(torch.tensor(value)):"),
    HELPER.replace("        opt.step()\n", "        other.step()\n"),
    # the loop zeroes by itself too (the other shapes' business), or skips the helper
    HELPER.replace("    value = train_step(x, y)  # 每个批次\n",
                   "    if i == 0:\n        continue\n    value = train_step(x, y)  # 每个批次\n"),
])
def test_helpers_that_leave_accumulation_alone_are_silent(src):
    assert not [f for f in gg207(src) if f.data.get("shape") == "helper"]


# --- the def is the iteration (training_step), and a comprehension of a zeroing helper ---

TRAINING_STEP = HEAD + """\
class Module:
    def __init__(self, k=2):
        self.k = k

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = ((model(x) - y) ** 2).mean() / self.k
        opt.zero_grad()
        loss.backward()
        if (batch_idx + 1) % self.k == 0:
            opt.step()


m = Module()
for i, batch in enumerate(data):
    m.training_step(batch, i)
"""


def test_a_def_zeroing_every_call_and_stepping_every_kth_call_of_its_parameter_is_reported():
    (f,) = gg207(TRAINING_STEP)
    assert f.range.start.line + 1 == TRAINING_STEP.splitlines().index("        opt.zero_grad()") + 1
    assert "every call of `training_step()`" in f.message["en"]
    out = fixed(TRAINING_STEP)
    assert "            opt.step()\n            opt.zero_grad()\n" in out
    assert gg207(out) == []


@pytest.mark.parametrize("edit", [
    ("        if (batch_idx + 1) % self.k == 0:\n", "        if (self.k + 1) % 2 == 0:\n"),  # no parameter
    ("        opt.zero_grad()\n        loss.backward()\n", "        loss.backward()\n"),  # never zeroed here
    ("        if (batch_idx + 1) % self.k == 0:\n            opt.step()\n", "        opt.step()\n"),  # every call
    # its own backward only under the step's test; the backward after it is another loss's (clustergan)
    ("        loss.backward()\n        if (batch_idx + 1) % self.k == 0:\n            opt.step()\n",
     "        if (batch_idx + 1) % self.k == 0:\n            loss.backward()\n            opt.step()\n"
     "        (loss * 0).backward()\n"),
])
def test_defs_that_step_every_call_or_not_by_their_parameter_are_silent(edit):
    src = TRAINING_STEP.replace(*edit)
    assert src != TRAINING_STEP
    assert gg207(src) == []


COMPREHENSION = HEAD + """\
class Trainer:
    def fwd_bwd(self, mb):
        opt.zero_grad()
        loss = ((model(mb[0]) - mb[1]) ** 2).mean() / len(data)
        loss.backward()
        return loss.item()

    def optim_step(self):
        opt.step()


trainer = Trainer()
for step in range(2):
    losses = [trainer.fwd_bwd(mb) for mb in data]
    trainer.optim_step()
"""


def test_a_zeroing_helper_run_by_a_comprehension_before_one_step_is_reported_at_it():
    (f,) = gg207(COMPREHENSION)
    assert f.range.start.line + 1 == COMPREHENSION.splitlines().index(
        "    losses = [trainer.fwd_bwd(mb) for mb in data]") + 1
    assert f.preferred_fix is None


@pytest.mark.parametrize("edit", [
    ("        opt.zero_grad()\n        loss =", "        loss ="),  # the helper does not zero
    ("    trainer.optim_step()\n", ""),  # no step after it
    ("for mb in data]", "for mb in data if mb]"),  # a filtered comprehension: not read
])
def test_comprehensions_that_do_not_erase_what_a_step_needs_are_silent(edit):
    src = COMPREHENSION.replace(*edit)
    assert src != COMPREHENSION
    assert gg207(src) == []
