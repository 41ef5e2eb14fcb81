"""GG201: the kept-graph shapes of the blind quiet corpus (docs/quiet-rules-scan.md) --
a loop over ``range`` on a fixed batch, an accumulator returned from ``train()``, a
meter whose method keeps its argument on its object, losses kept after their backward,
an inference script's ``model.eval()`` loop without ``no_grad``. Each with the correct
forms that must stay silent."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from gradguard.engine import check_source
from gradguard.engine.document import rules_to_run
from gradguard.model.text import apply_text_edits
from gradguard.rules import all_rules

HEAD = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x0, y0 = torch.randn(2, 4), torch.randn(2, 1)
data = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(3)]
"""


def gg201(src: str, path: str = "t.py"):
    return [f for f in check_source(textwrap.dedent(src), path).findings if f.code == "GG201"]


def fixed(src: str) -> str:
    src = textwrap.dedent(src)
    fs = gg201(src)
    return apply_text_edits(src, [e for f in fs for e in f.preferred_fix.edits])


def lines(fs):
    return sorted(f.range.start.line + 1 for f in fs)


# ---------------------------------------------------------------------------
# a range loop on a fixed batch (the PyTorch FAQ's own example)
RANGE = HEAD + """\
total_loss = 0
for i in range(5):
    opt.zero_grad()
    loss = ((model(x0) - y0) ** 2).mean()
    loss.backward()
    opt.step()
    total_loss += loss
print(float(total_loss) / 5)
"""


def test_range_loop_on_a_fixed_batch_is_reported_with_an_item_fix():
    [f] = gg201(RANGE)
    assert f.range.start.line + 1 == 14 and f.severity.value == "warning"
    out = fixed(RANGE)
    assert "    total_loss += loss.item()\n" in out and not gg201(out)


@pytest.mark.parametrize("line", ["total_loss += loss.item()", "total_loss += loss.detach()",
                                  "total_loss += float(loss)"])
def test_range_loop_cut_forms_are_silent(line):
    assert not gg201(RANGE.replace("total_loss += loss", line))


def test_range_loop_accumulation_back_propagated_or_never_back_propagated_is_silent():
    # the sum is the loss (gradient accumulation on purpose), a retained graph, modules built in
    # a range loop, a best score: nothing a backward of the loop freed is kept
    src = HEAD + textwrap.dedent("""\
    total = 0
    for i in range(3):
        total = total + ((model(x0) - y0) ** 2).mean()
    total.backward()
    layers = []
    for i in range(3):
        layers.append(nn.Linear(4, 4))
    best = 0
    for i in range(3):
        score = model(x0).mean()
        best = max(score, best)
    """)
    assert not gg201(src)


def test_running_average_started_from_none_is_an_accumulation():
    src = HEAD + textwrap.dedent("""\
    running = None
    for x, y in data:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        running = loss if running is None else 0.9 * running + 0.1 * loss
    print(float(running))
    """)
    [f] = gg201(src)
    out = fixed(src)
    assert "running = loss.detach() if running is None else 0.9 * running + 0.1 * loss.detach()" in out
    assert not gg201(out)
    assert not gg201(src.replace("running = loss if", "running = loss.item() if").replace(
        "0.1 * loss\n", "0.1 * loss.item()\n"))


def test_losses_appended_after_their_backward_in_a_range_loop():
    src = HEAD + textwrap.dedent("""\
    d_losses = []
    for i in range(4):
        opt.zero_grad()
        d_loss = model(torch.randn(2, 4)).mean()
        d_loss.backward()
        opt.step()
        d_losses.append(d_loss)
    """)
    [f] = gg201(src)
    assert "d_losses.append(d_loss.detach())" in fixed(src)
    # a list made anew each step, summed and back-propagated: silent
    per_step = HEAD + textwrap.dedent("""\
    for i in range(4):
        parts = []
        for x, y in data:
            parts.append(((model(x) - y) ** 2).mean())
        opt.zero_grad()
        torch.stack(parts).sum().backward()
        opt.step()
    """)
    assert not gg201(per_step)


# ---------------------------------------------------------------------------
# an accumulator returned from train()
TRAIN = HEAD + """\
def train(model, loader, optimizer):
    loss_sum = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        loss_sum += loss
    return loss_sum / len(loader)


print(train(model, data, opt).item())
"""


def test_returned_accumulator_of_back_propagated_losses_is_reported_with_detach():
    [f] = gg201(TRAIN)
    assert f.range.start.line + 1 == 15
    out = fixed(TRAIN)
    # not .item(): the caller reads a tensor (``train(...).item()``)
    assert "        loss_sum += loss.detach()\n" in out and not gg201(out)


def test_returned_accumulators_a_caller_may_back_propagate_are_silent():
    # nothing back-propagated inside: the caller's backward decides (gradient accumulation)
    assert not gg201(TRAIN.replace("        loss.backward()\n", ""))
    # the graph is retained: the caller may back-propagate the sum once more
    assert not gg201(TRAIN.replace("loss.backward()", "loss.backward(retain_graph=True)"))
    assert not gg201(TRAIN.replace("loss_sum += loss\n", "loss_sum += loss.item()\n"))


def test_relaxed_accumulations_in_a_test_suite_are_silent():
    # chunks kept to compare with a whole pass: the graph dies with the test
    src = HEAD + textwrap.dedent("""\
    def test_chunks_match():
        chunks = []
        for start in range(0, 2):
            out = model(x0[start:start + 1])
            chunks.append(out)
            out.sum().backward()
        assert torch.cat(chunks).shape == (2, 1)
    """)
    assert not gg201(src)
    assert len(gg201(src.replace("def test_chunks_match", "def chunks_match"))) == 1
    assert not gg201(src.replace("def test_chunks_match", "def chunks_match"), "tests/test_chunks.py")


# ---------------------------------------------------------------------------
# meters
METER = HEAD + """\
class AverageMeter:
    def __init__(self):
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n


meter = AverageMeter()
for x, y in data:
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    meter.update(loss, x.size(0))  # 中文注释
print(float(meter.sum / meter.count))
"""


def test_the_facts_say_a_meter_method_keeps_its_argument_on_its_object():
    from gradguard.engine.document import Document, merge_facts

    d = Document(textwrap.dedent(METER), "t.py", None, None, one_shot=True)
    merged = merge_facts(None, (c.get_facts(d._unreferenced) for c in d.chunks))
    update = dict(merged["class:AverageMeter"].methods)["update"]
    effects = {e.path: e.appends_params for e in update.containers}
    assert effects == {"#self.sum": frozenset({0, 1}), "#self.count": frozenset({1})}


def test_meter_handed_the_loss_is_reported_and_the_fix_detaches_only_the_graph():
    [f] = gg201(METER)
    assert f.range.start.line + 1 == 24 and "meter.sum" in f.message_in("en") and "meter.sum" in f.message_in("zh")
    line = textwrap.dedent(METER).splitlines()[23]
    assert f.range.start.character == line.index("meter")
    out = fixed(METER)
    assert "    meter.update(loss.detach(), x.size(0))  # 中文注释\n" in out and not gg201(out)


@pytest.mark.parametrize("call", ["meter.update(loss.item(), x.size(0))", "meter.update(float(loss))",
                                  "meter.update(loss.detach(), x.size(0))"])
def test_meter_handed_a_number_or_a_detached_tensor_is_silent(call):
    assert not gg201(METER.replace("meter.update(loss, x.size(0))", call))


def test_meter_made_each_iteration_or_back_propagated_is_silent():
    each = METER.replace("meter = AverageMeter()\n", "").replace(
        "    opt.zero_grad()\n", "    meter = AverageMeter()\n    opt.zero_grad()\n", 1)
    assert not gg201(each)
    summed = HEAD + textwrap.dedent("""\
    class Accumulator:
        def __init__(self):
            self.total = 0

        def add(self, val):
            self.total += val


    acc = Accumulator()
    for x, y in data:
        acc.add(((model(x) - y) ** 2).mean())
    acc.total.backward()
    """)
    assert not gg201(summed)


def test_meter_of_another_class_method_kind_is_not_a_meter():
    # a method setting (not adding to) its attribute keeps only the last value
    src = METER.replace("self.sum += val * n", "self.sum = val * n")
    assert not gg201(src)


# ---------------------------------------------------------------------------
# inference scripts: nothing back-propagates in the file
SCRIPT = """\
import torch
import torch.nn as nn

model = nn.Linear(6, 4)
model.eval()
results = []
for batch in [torch.randn(3, 6) for _ in range(4)]:
    results.append(model(batch))
print(torch.cat(results).argmax(1))
"""


def test_inference_script_is_analysed_by_gg201_alone():
    codes = [r.code for r in rules_to_run([SCRIPT], None, all_rules())]
    assert codes == ["GG201"]
    assert rules_to_run([SCRIPT.replace("model.eval()", "pass")], None, all_rules()) == []
    with_backward = SCRIPT + "model(torch.randn(1, 6)).sum().backward()\n"
    assert len(rules_to_run([with_backward], None, all_rules())) == len(all_rules())


def test_inference_script_keeping_outputs_is_reported_and_fixed_with_no_grad():
    [f] = gg201(SCRIPT)
    assert f.range.start.line + 1 == 8 and f.severity.value == "warning"
    out = fixed(SCRIPT)
    assert "with torch.no_grad():\n    for batch in" in out and not gg201(out)
    ast.parse(out)


def test_inference_script_keeping_numbers_gets_the_hint():
    src = SCRIPT.replace("results.append(model(batch))", "results.append(model(batch).detach().numpy())")
    [f] = gg201(src)
    assert f.severity.value == "hint" and f.range.start.line + 1 == 7


@pytest.mark.parametrize("change", [
    ("for batch in", "with torch.no_grad():\n  for batch in"),
    ("for batch in", "with torch.inference_mode():\n  for batch in"),
    ("model.eval()\n", ""),   # no .eval(): nothing says it evaluates (a data script)
])
def test_inference_scripts_under_no_grad_or_without_eval_are_silent(change):
    src = SCRIPT.replace(*change)
    ast.parse(src)
    assert not gg201(src)


def test_inference_function_needs_its_own_eval_call_where_nothing_back_propagates():
    # named like an evaluation, but no .eval() in it: in a file that never back-propagates,
    # a name alone does not say it evaluates
    src = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    model = nn.Linear(6, 4)
    model.eval()


    def predict(net, batches):
        outs = []
        for b in batches:
            outs.append(net(b))
        return len(outs)


    def test(net, batches):
        net.eval()
        outs = []
        for b in batches:
            outs.append(net(b))
        return len(outs)
    """)
    assert lines(gg201(src)) == [19]


# ---------------------------------------------------------------------------
# a list kept on an object
TRAINER = HEAD + """\
class Trainer:
    def __init__(self):
        self.history = []

    def run(self):
        for x, y in data:
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            self.history.append(loss)
"""


def test_list_on_self_of_back_propagated_losses_is_reported():
    [f] = gg201(TRAINER)
    assert f.range.start.line + 1 == 18 and "self.history" in f.message_in("en")
    out = fixed(TRAINER)
    assert "            self.history.append(loss.detach())\n" in out and not gg201(out)
    assert not gg201(TRAINER.replace("self.history.append(loss)", "self.history.append(loss.item())"))


def test_list_on_self_another_method_back_propagates_is_silent():
    # REINFORCE: log-probs kept on the agent by one method, back-propagated by another
    src = HEAD + textwrap.dedent("""\
    class Agent:
        def __init__(self):
            self.saved = []

        def collect(self):
            for x, y in data:
                self.saved.append(((model(x) - y) ** 2).mean())

        def learn(self):
            torch.stack(self.saved).sum().backward()
            self.saved = []
    """)
    assert not gg201(src)


def test_list_of_back_propagated_losses_handed_to_a_method_is_reported_without_a_dict_detach():
    src = HEAD + textwrap.dedent("""\
    class Trainer:
        def train(self, loader):
            outputs = []
            for x, y in loader:
                opt.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
                outputs.append({"loss": loss})
            return self.epoch_end(outputs)

        def epoch_end(self, outputs):
            return sum(o["loss"].item() for o in outputs)
    """)
    [f] = gg201(src)
    assert f.range.start.line + 1 == 16 and f.preferred_fix is None  # no `{...}.detach()`
    # losses handed on without a backward in the loop: the callee may back-propagate them
    assert not gg201(src.replace("            loss.backward()\n", "").replace(
        'return sum(o["loss"].item() for o in outputs)', 'torch.stack([o["loss"] for o in outputs]).sum().backward()'))


# ---------------------------------------------------------------------------
# an evaluation function returning its total
VALIDATE = HEAD + """\
class Trainer:
    def validate(self, batches):
        model.eval()
        total_loss = 0
        for x, y in batches:
            loss = ((model(x) - y) ** 2).sum()
            total_loss = total_loss + loss
        model.train()
        return total_loss / len(batches)


print(float(Trainer().validate(data)))
"""


def test_evaluation_function_returning_its_total_is_reported_with_no_grad():
    [f] = gg201(VALIDATE)
    assert f.range.start.line + 1 == 14 and "model.eval()" in f.message_in("en")
    out = fixed(VALIDATE)
    assert "        with torch.no_grad():\n            for x, y in batches:\n" in out and not gg201(out)


@pytest.mark.parametrize("change", [
    ("        model.eval()\n", ""),                       # no .eval(): the caller may back-propagate it
    ("def validate(", "def chunk_loss("),               # not named for evaluation
    ("print(float(Trainer().validate(data)))",          # called with graph recording off
     "with torch.no_grad():\n    print(float(Trainer().validate(data)))"),
])
def test_evaluation_totals_that_may_be_meant_or_hold_no_graph_are_silent(change):
    assert not gg201(VALIDATE.replace(*change))
    # a total of numbers: nothing kept, only the hint that each batch builds a graph for nothing
    [f] = gg201(VALIDATE.replace("total_loss = total_loss + loss", "total_loss = total_loss + loss.item()"))
    assert f.severity.value == "hint"


# ---------------------------------------------------------------------------
# a method keeping what it builds on its object, called in a training loop
STEP = HEAD + """\
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.outputs = []

    def training_step(self, x, y):
        pred = self.net(x)
        loss = ((pred - y) ** 2).mean()
        self.outputs.append(pred)
        return loss


m = Model()
for x, y in data:
    loss = m.training_step(x, y)
    loss.backward()
"""


def test_method_keeping_its_output_on_its_object_is_reported_without_a_fix():
    [f] = gg201(STEP)
    assert f.range.start.line + 1 == 23 and "m.outputs" in f.message_in("en") and f.preferred_fix is None
    assert "m.outputs" in f.message_in("zh")


@pytest.mark.parametrize("change", [
    ("self.outputs.append(pred)", "self.outputs.append(pred.detach())"),
    ("self.outputs.append(pred)", "self.outputs.append(pred.item() if pred.numel() == 1 else pred.tolist())"),
    ("    loss.backward()\n", "    loss.backward()\n    m.outputs.clear()\n"),                # cleared each step
    ("    loss.backward()\n", "    torch.stack(m.outputs).sum().backward()\n    m.outputs = []\n"),
])
def test_method_keeping_detached_or_cleared_outputs_is_silent(change):
    assert not gg201(STEP.replace(*change))


# ---------------------------------------------------------------------------
# a dict of totals, one per loss term
DICT = HEAD + """\
def train_one_epoch(loader):
    epoch_loss = {"mse": 0, "l1": 0}
    for x, y in loader:
        out = model(x)
        loss = {"mse": ((out - y) ** 2).mean(), "l1": (out - y).abs().mean()}
        opt.zero_grad()
        (loss["mse"] + loss["l1"]).backward()
        opt.step()
        for key in loss:
            epoch_loss[key] += loss[key]
    return {k: v / len(loader) for k, v in epoch_loss.items()}
"""


def test_dict_of_totals_of_back_propagated_losses_is_reported():
    [f] = gg201(DICT)
    assert f.range.start.line + 1 == 17 and "epoch_loss" in f.message_in("en")
    out = fixed(DICT)
    assert "            epoch_loss[key] += loss[key].detach()\n" in out and not gg201(out)


@pytest.mark.parametrize("change", [
    ("epoch_loss[key] += loss[key]", "epoch_loss[key] += loss[key].item()"),
    ('        (loss["mse"] + loss["l1"]).backward()\n', ""),     # the caller may back-propagate them
])
def test_dict_of_numbers_or_of_losses_not_yet_back_propagated_is_silent(change):
    src = DICT.replace(*change)
    assert src != DICT and not gg201(src)


# ---------------------------------------------------------------------------
# the fourth quiet corpus's shapes: a training step's returned loss summed, a replay buffer's push()
# ---------------------------------------------------------------------------
STEP_RETURNS = HEAD + """\
def train_step(batch):
    x, y = batch
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    return loss


total = torch.zeros(())
for it in range(3):
    total += train_step((torch.randn(2, 4), torch.randn(2, 1)))
    opt.step()
    opt.zero_grad()
"""


def test_a_loss_returned_by_a_backpropagating_step_and_summed_is_kept():
    [f] = gg201(STEP_RETURNS)
    assert f.range.start.line + 1 == 17 and f.data["variable"] == "total"
    assert "train_step(...).detach()" in fixed(STEP_RETURNS).replace("((torch.randn(2, 4), torch.randn(2, 1)))", "(...)")


@pytest.mark.parametrize("old,new", [
    ("    return loss\n", "    return loss.detach()\n"),
    ("    return loss\n", "    return loss.item()\n"),
    # the step keeps its graph for another backward: the caller's may be that one
    ("    loss.backward()\n", "    loss.backward(retain_graph=True)\n"),
    # no backward in the step: the caller's total is its loss (and is back-propagated below)
    ("    loss.backward()\n", ""),
])
def test_a_step_returning_numbers_or_a_loss_still_to_backpropagate_is_silent(old, new):
    assert old in STEP_RETURNS
    src = STEP_RETURNS.replace(old, new)
    if not new:
        src += "    total.backward()\n"
    assert not gg201(src)


BUFFER = HEAD + """\
class Buffer:
    def __init__(self):
        self.items = []

    def push(self, x, logp):
        self.items.append((x, logp))

    def sample(self):
        return self.items[-2:]


buffer = Buffer()
for it in range(3):
    x = torch.randn(2, 4)
    buffer.push(x, model(x).sum())
    xs = torch.cat([e[0] for e in buffer.sample()])
    loss = model(xs).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_replay_buffer_push_of_a_graph_is_kept():
    [f] = gg201(BUFFER)
    assert f.range.start.line + 1 == 22 and f.data["variable"] == "buffer.items"
    assert "buffer.push(x, model(x).sum().detach())" in fixed(BUFFER)


@pytest.mark.parametrize("old,new", [
    ("    buffer.push(x, model(x).sum())\n", "    buffer.push(x, model(x).sum().detach())\n"),
    # a module, or an agent whose own method back-propagates what it stored (REINFORCE)
    ("class Buffer:\n", "class Buffer(nn.Module):\n"),
    ("        self.items.append((x, logp))\n",
     "        self.items.append((x, logp))\n\n    def update(self):\n        torch.stack([l for _, l in self.items]).sum().backward()\n"),
])
def test_a_buffer_push_detached_or_a_buffer_that_backpropagates_is_silent(old, new):
    assert old in BUFFER
    assert not gg201(BUFFER.replace(old, new))


def test_a_buffer_push_in_a_test_file_is_silent():
    assert not gg201(BUFFER, "test_buffer.py")


STEP_METHOD = HEAD + """\
class Trainer:
    def __init__(self):
        self.net = nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.log = {"loss": []}

    def step(self, x, y):
        loss = ((self.net(x) - y) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.log["loss"].append(loss)


trainer = Trainer()
for x, y in data:
    trainer.step(x, y)
"""


def test_a_step_method_logging_its_backpropagated_loss_on_its_object_is_kept():
    [f] = gg201(STEP_METHOD)
    assert f.range.start.line + 1 == 19 and f.data["variable"] == 'self.log["loss"]'
    assert [r.range.start.line + 1 for r in f.related] == [14]
    assert "每次调用" in f.message_in("zh") and "every call of this method" in f.message_in("en")
    assert 'self.log["loss"].append(loss.detach())' in fixed(STEP_METHOD)


@pytest.mark.parametrize("old,new", [
    ('        self.log["loss"].append(loss)\n', '        self.log["loss"].append(loss.item())\n'),
    # never back-propagated in the method
    ("        loss.backward()\n", ""),
    # not called in a loop of the file
    ("for x, y in data:\n    trainer.step(x, y)\n", "trainer.step(x0, y0)\n"),
    # a local list, not the object's
    ('        self.log["loss"].append(loss)\n', '        log = []\n        log.append(loss)\n'),
])
def test_a_step_method_logging_numbers_or_not_called_in_a_loop_is_silent(old, new):
    assert old in STEP_METHOD
    assert not gg201(STEP_METHOD.replace(old, new))


def test_a_step_method_retaining_its_graph_is_left_to_the_call_site():
    # kept for a later backward: not a record the method itself freed (the loop's call of it
    # keeps what the method builds, reported there as before)
    found = gg201(STEP_METHOD.replace("        loss.backward()\n", "        loss.backward(retain_graph=True)\n"))
    assert [f.range.start.line + 1 for f in found] == [24]


def test_a_step_returning_timings_summed_by_the_caller_is_silent():
    # spikingjelly's benchmarks: run_training_step() back-propagates and returns a dict of
    # timings; the caller sums them (numbers, whatever the step's facts say of its return)
    src = STEP_RETURNS.replace("    return loss\n", '    t = time.perf_counter()\n    return {"ms": t}\n').replace(
        "    total += train_step((torch.randn(2, 4), torch.randn(2, 1)))\n",
        '    metrics = train_step((torch.randn(2, 4), torch.randn(2, 1)))\n    total += metrics["ms"]\n')
    assert "import torch\n" in src and 'total += metrics["ms"]' in src
    assert not gg201("import time\n" + src)


ROLLOUTS = HEAD + """\
experience = []
h = torch.zeros(2, 1)
for update in range(3):
    outs = []
    for t in range(2):
        h = model(torch.randn(2, 4)) + h
        experience.append(h)
        outs.append(h)
    loss = torch.stack(outs).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    h = h.detach()
"""


def test_a_list_outliving_the_update_loop_keeps_each_rollouts_backpropagated_graph():
    # metta#1139: appended per step of an inner rollout loop, back-propagated by the update after it
    [f] = gg201(ROLLOUTS)
    assert f.range.start.line + 1 == 14 and f.data["variable"] == "experience"


@pytest.mark.parametrize("old,new", [
    ("        experience.append(h)\n", "        experience.append(h.detach())\n"),
    # a list made anew per update (its graphs die with the update), or cleared in it
    ("experience = []\nh = torch.zeros(2, 1)\nfor update in range(3):\n",
     "h = torch.zeros(2, 1)\nfor update in range(3):\n    experience = []\n"),
    ("    h = h.detach()\n", "    h = h.detach()\n    experience.clear()\n"),
])
def test_a_list_detached_renewed_or_cleared_per_update_is_silent(old, new):
    assert old in ROLLOUTS
    assert not gg201(ROLLOUTS.replace(old, new))


# ---------------------------------------------------------------------------
# a same-file detach_tree() helper as the cut (verl pull request 7874; the sixth blind quiet
# corpus's flagged twin): a helper that returns for every tensor and container it may be handed,
# and hands anything else back unchanged, returns no graph

_TREE_FIXTURES = Path(__file__).resolve().parent / "fixtures"
_TREE_OK = _TREE_FIXTURES / "ok_gg201_micro_batch_outputs_kept_through_detach_tree.py"


def line_of(text: str, needle: str) -> int:
    return next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)


def test_a_detach_tree_helper_is_a_cut():
    assert not gg201(_TREE_OK.read_text(encoding="utf-8"))


@pytest.mark.parametrize("old, new", [
    # the else of an if/elif chain, torch.is_tensor, an unconditional detach
    ("    if isinstance(obj, dict):\n", "    elif isinstance(obj, dict):\n"),
    ("    if isinstance(obj, torch.Tensor):\n", "    if torch.is_tensor(obj):\n"),
    ("obj.detach() if obj.requires_grad else obj", "obj.detach()"),
    ("    return obj\n\n", "    else:\n        return obj\n\n"),
])
def test_detach_tree_spellings_are_cuts(old, new):
    text = _TREE_OK.read_text(encoding="utf-8")
    assert old in text
    assert not gg201(text.replace(old, new, 1))


@pytest.mark.parametrize("old, new", [
    # the tensor branch keeps the graph (moved, not detached)
    ("obj.detach() if obj.requires_grad else obj", "obj.cpu()"),
    ("obj.detach() if obj.requires_grad else obj", "obj if obj.requires_grad else obj.detach()"),
    # no container branch: a dict comes back as it is, graphs and all
    ("    if isinstance(obj, dict):\n        return {k: detach_tree(v) for k, v in obj.items()}\n"
     "    if isinstance(obj, (list, tuple)):\n        return type(obj)(detach_tree(v) for v in obj)\n", ""),
    # no tensor branch
    ("    if isinstance(obj, torch.Tensor):\n        return obj.detach() if obj.requires_grad else obj\n", ""),
    # the name rebound before it is handed back
    ("    return obj\n\n", "    obj = obj[0]\n    return obj\n\n"),
    # a return under another test first
    ("    if isinstance(obj, torch.Tensor):\n", "    if obj is None:\n        return obj\n    if isinstance(obj, torch.Tensor):\n"),
])
def test_helpers_that_keep_a_graph_are_no_cut(old, new):
    text = _TREE_OK.read_text(encoding="utf-8")
    assert old in text
    [f] = gg201(text.replace(old, new, 1))
    assert f.range.start.line + 1 == line_of(text.replace(old, new, 1), "forward_data_store.append(")


@pytest.mark.needs_torch
def test_the_detach_tree_twin_keeps_no_graph_under_torch():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch_harness as th
    got = th.run_program(str(_TREE_OK), holds=("forward_data_store",))
    assert got.status == "train" and got.holds == {"forward_data_store": False}


def test_a_helper_rebinding_its_argument_under_another_test_is_no_cut():
    text = _TREE_OK.read_text(encoding="utf-8")
    old = "    return obj\n\n"
    new = "    if hasattr(obj, 'tensors'):\n        obj = obj.tensors\n    return obj\n\n"
    assert len(gg201(text.replace(old, new, 1))) == 1


# ---------------------------------------------------------------------------
# meters whose update() keeps what it is handed in other spellings (the sixth blind quiet
# corpus): a tensor grown by torch.cat, a total under a key of a dict, an average reading its
# old value deeper in the arithmetic, a meter reached under a constant key of a dict of meters

_METER_LOOP = HEAD + """\
SETUP
for x, y in data:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    CALL  # 记录
"""

_METERS = {
    "cat": ("""\
class Meter:
    def __init__(self):
        self.values = torch.zeros(0)

    def update(self, val):
        self.values = torch.cat([self.values, val.reshape(1)])
""", "meter = Meter()", "meter.update(ARG)", "`meter.values`"),
    "dict": ("""\
class Meter:
    def __init__(self):
        self.totals = {}

    def update(self, name, val):
        self.totals[name] = self.totals.get(name, 0) + val
""", "meter = Meter()", "meter.update('loss', ARG)", "`meter.totals`"),
    "dict_aug": ("""\
class Meter:
    def __init__(self):
        self.totals = {'loss': 0.0}

    def update(self, name, val):
        self.totals[name] += val
""", "meter = Meter()", "meter.update('loss', ARG)", "`meter.totals`"),
    "ema": ("""\
class Meter:
    def __init__(self, beta=0.9):
        self.beta = beta
        self.avg = 0.0

    def update(self, val):
        self.avg = self.beta * self.avg + (1 - self.beta) * val
""", "meter = Meter()", "meter.update(ARG)", "`meter.avg`"),
    "keyed": ("""\
class AverageMeter:
    def __init__(self):
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
""", "stats = {'loss': AverageMeter(), 'acc': AverageMeter()}", "stats['loss'].update(ARG)", "`stats['loss'].sum`"),
}


def _meter(kind: str, arg: str = "loss", cls: str = "") -> str:
    klass, setup, call, _ = _METERS[kind]
    return (cls or klass) + "\n\n" + _METER_LOOP.replace("SETUP", setup).replace("CALL", call.replace("ARG", arg))


@pytest.mark.parametrize("kind", sorted(_METERS))
def test_a_meter_keeping_what_update_gets_is_reported(kind):
    text = _meter(kind)
    [f] = gg201(text)
    assert f.range.start.line + 1 == next(i for i, t in enumerate(text.splitlines(), 1) if "# 记录" in t)
    assert _METERS[kind][3] in f.message_in("en")
    out = fixed(text)
    assert "loss.detach()" in out and not gg201(out)


@pytest.mark.parametrize("kind", sorted(_METERS))
@pytest.mark.parametrize("arg", ["loss.item()", "loss.detach()", "float(loss)"])
def test_a_meter_handed_numbers_is_silent(kind, arg):
    assert not gg201(_meter(kind, arg))


@pytest.mark.parametrize("kind, old, new", [
    ("cat", "torch.cat([self.values, val.reshape(1)])", "torch.cat([self.values, val.detach().reshape(1)])"),
    ("dict", "self.totals.get(name, 0) + val", "self.totals.get(name, 0) + float(val)"),
    ("ema", "(1 - self.beta) * val", "(1 - self.beta) * val.item()"),
    # not an accumulation: the last value only, or a constant added
    ("ema", "self.beta * self.avg + (1 - self.beta) * val", "(1 - self.beta) * val"),
    ("dict_aug", "self.totals[name] += val", "self.totals[name] += 1"),
])
def test_a_meter_keeping_numbers_or_the_last_value_is_silent(kind, old, new):
    klass = _METERS[kind][0]
    assert old in klass
    assert not gg201(_meter(kind, cls=klass.replace(old, new)))


# ---------------------------------------------------------------------------
# the seventh blind quiet corpus's kept graphs (docs/quiet-rules-scan.md): meters in a dict
# (a defaultdict of a meter class, a dict display, under a key the loop iterates over), a
# meter filling two attributes, the loss parts a training step returns after its backward, a
# module's loss method, a helper handing a model's loss dict to a meter

_METER_CLASS = """\
from collections import defaultdict


class AverageMeter:
    def __init__(self):
        self.sum = 0.0
        self.sq_sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        CUT
        self.sum += val * n
        self.sq_sum += val ** 2 * n
        self.count += n

"""


@pytest.mark.parametrize("setup", ["stats = defaultdict(AverageMeter)",
                                   "stats = {'loss': AverageMeter(), 'aux': AverageMeter()}"])
@pytest.mark.parametrize("call, fixed_arg", [
    ("stats['loss'].update(ARG)", "loss.detach()"),
    ("for k, v in {'loss': ARG, 'aux': ARG * 2}.items():\n        stats[k].update(v)", "v.detach()"),
])
def test_a_dict_of_meters_filled_by_key_is_reported(setup, call, fixed_arg):
    text = _METER_CLASS.replace("CUT", "pass") + _METER_LOOP.replace("SETUP", setup).replace(
        "CALL", call.replace("ARG", "loss"))
    [f] = gg201(text)
    assert f.range.start.line + 1 == next(i for i, t in enumerate(text.splitlines(), 1) if "# 记录" in t)
    out = fixed(text)
    assert fixed_arg in out and not gg201(out)


@pytest.mark.parametrize("cut, arg", [
    ("pass", "loss.item()"),
    ("if torch.is_tensor(val):\n            val = val.detach()", "loss"),
    ("val = val.item() if torch.is_tensor(val) else val", "loss"),
    ("val = float(val)", "loss"),
])
def test_a_dict_of_meters_keeping_numbers_is_silent(cut, arg):
    call = "for k, v in {'loss': ARG}.items():\n        stats[k].update(v)".replace("ARG", arg)
    text = _METER_CLASS.replace("CUT", cut) + _METER_LOOP.replace(
        "SETUP", "stats = defaultdict(AverageMeter)").replace("CALL", call)
    assert not gg201(text)


_STEP = HEAD + """\
from collections import defaultdict


def criterion(out, y):
    mse = ((out - y) ** 2).mean()
    l1 = (out - y).abs().mean()
    return mse + l1, {"mse": mse, "l1": l1}


def train_step(x, y):
    opt.zero_grad()
    BODY
    opt.step()
    return RET


totals = defaultdict(float)
for x, y in data:
    for name, value in train_step(x, y).items():
        totals[name] += value  # 记录
print({k: float(v) for k, v in totals.items()})
"""


@pytest.mark.parametrize("body, ret", [
    ("loss, parts = criterion(model(x), y)\n    loss.backward()", "parts"),
    ("info = {'loss': criterion(model(x), y)[0]}\n    loss = info['loss']\n    loss.backward()", "info"),
])
def test_loss_parts_a_training_step_returns_after_its_backward_are_reported(body, ret):
    text = _STEP.replace("BODY", body).replace("RET", ret)
    [f] = gg201(text)
    assert f.range.start.line + 1 == next(i for i, t in enumerate(text.splitlines(), 1) if "# 记录" in t)


@pytest.mark.parametrize("body, ret", [
    # numbers returned
    ("loss, parts = criterion(model(x), y)\n    loss.backward()", "{k: v.item() for k, v in parts.items()}"),
    # the parts came with a loss the step never back-propagates (a caller may)
    ("loss, parts = criterion(model(x), y)\n    other = loss * 1\n    other.backward(retain_graph=True)", "parts"),
])
def test_loss_parts_returned_as_numbers_or_not_back_propagated_are_silent(body, ret):
    assert not gg201(_STEP.replace("BODY", body).replace("RET", ret))


_AGENT = """\
import torch
import torch.nn as nn


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = nn.Linear(4, 1)

    def loss(self, batch):
        return (self.policy(batch) ** 2).mean()


agent = Agent()
opt = torch.optim.SGD(agent.parameters(), lr=0.1)
data = [torch.randn(2, 4) for _ in range(3)]
LOOP
"""


def test_a_module_loss_method_summed_after_its_backward_is_reported():
    text = _AGENT.replace("LOOP", """\
total_loss = 0
for mb in data:
    loss = agent.loss(mb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total_loss += loss
print(float(total_loss))""")
    [f] = gg201(text)
    assert f.range.start.line + 1 == len(text.splitlines()) - 1
    assert "total_loss += loss.item()" in fixed(text)


@pytest.mark.parametrize("loop", [
    # numbers summed
    "total = 0\nfor mb in data:\n    loss = agent.loss(mb)\n    opt.zero_grad()\n    loss.backward()\n"
    "    opt.step()\n    total += float(loss)\nprint(total)",
    # the sum is the loss: back-propagated once after the loop
    "total = 0\nfor mb in data:\n    total = total + agent.loss(mb)\nopt.zero_grad()\ntotal.backward()\nopt.step()",
])
def test_a_module_loss_method_summed_as_numbers_or_as_the_loss_is_silent(loop):
    assert not gg201(_AGENT.replace("LOOP", loop))


_HELPER = HEAD + """\
from collections import defaultdict


class Smoothed:
    def __init__(self):
        self.total = 0.0

    def update(self, value):
        self.total += value


class Meter:
    def __init__(self):
        self.meters = defaultdict(Smoothed)

    def update(self, update_dict):
        for k, v in update_dict.items():
            self.meters[k].update(v)


def update_meter(report, meter):
    update_dict = {}
    FILL
    meter.update(update_dict)


meter = Meter()
for x, y in data:
    report = {"losses": {"mse": ((model(x) - y) ** 2).mean()}}
    opt.zero_grad()
    report["losses"]["mse"].backward()
    opt.step()
    update_meter(report, meter)  # 记录
"""


def test_a_helper_handing_the_loss_dict_to_a_meter_is_reported_without_a_fix():
    text = _HELPER.replace("FILL", 'update_dict.update(report["losses"])')
    [f] = gg201(text)
    assert f.range.start.line + 1 == next(i for i, t in enumerate(text.splitlines(), 1) if "# 记录" in t)
    assert "`meter.meters`" in f.message_in("en") and f.preferred_fix is None


@pytest.mark.parametrize("fill", [
    'for k, v in report["losses"].items():\n        update_dict[k] = v.item()',
    'update_dict.update({k: v.detach() for k, v in report["losses"].items()})',
    'update_dict["n"] = 1',
])
def test_a_helper_handing_numbers_to_a_meter_is_silent(fill):
    assert not gg201(_HELPER.replace("FILL", fill))


def test_a_rollout_memory_read_back_and_cleared_is_silent():
    # the rescan's ICM worker (philtabor/Youtube-Code-Repository): remember() appends to two
    # lists of the memory, sample_memory() hands them back for the loss every T_MAX steps
    text = """\
import torch
import torch.nn as nn


class Memory:
    def __init__(self):
        self.values = []
        self.log_probs = []

    def remember(self, value, log_p):
        self.values.append(value)
        self.log_probs.append(log_p)

    def clear_memory(self):
        self.values = []
        self.log_probs = []

    def sample_memory(self):
        return self.values, self.log_probs


def worker(agent, optimizer, steps):
    memory = Memory()
    t = 0
    while t < steps:
        state = torch.randn(1, 4)
        out = agent(state)
        memory.remember(out[:, 0], out[:, 1])
        t += 1
        if t % 5 == 0:
            values, log_probs = memory.sample_memory()
            loss = torch.cat(values).sum() + torch.cat(log_probs).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            memory.clear_memory()


agent = nn.Linear(4, 2)
worker(agent, torch.optim.SGD(agent.parameters(), lr=0.1), 10)
"""
    assert not gg201(text)
