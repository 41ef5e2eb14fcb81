"""GG201 growing-history: a graph accumulated across iterations, never back-propagated."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gradguard.engine import check_source
from gradguard.engine.config import config_from_mapping
from gradguard.model.text import apply_text_edits
from gradguard.rules import get_rule

HEAD = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(3)]
"""

LOOP = HEAD + """\
total = 0
for x, y in data:
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    total += loss
print(total.item())
"""


def gg201(src: str, config=None):
    return [f for f in check_source(textwrap.dedent(src), "t.py", config).findings if f.code == "GG201"]


def fixed(src: str) -> str:
    src = textwrap.dedent(src)
    fs = gg201(src)
    return apply_text_edits(src, [e for f in fs for e in f.preferred_fix.edits])


def test_total_loss_is_reported_and_item_fix_rewrites_the_later_item_call():
    [f] = gg201(LOOP)
    assert f.range.start.line + 1 == 13 and f.severity.value == "warning"
    assert "total" in f.message_in("en") and "计算图" in f.message_in("zh")
    out = fixed(LOOP)
    assert "    total += loss.item()\n" in out and "print(total)\n" in out
    assert not gg201(out)


@pytest.mark.parametrize("line, fixed_line", [
    ("total += loss.item()", None),
    ("total += float(loss)", None),
    ("total += loss.detach()", None),
    ("total = total + loss.detach()", None),
    ("total = 0.9 * total + 0.1 * loss", "total = 0.9 * total + 0.1 * loss.item()"),
    ("total = total + loss", "total = total + loss.item()"),
])
def test_cut_accumulation_is_silent_and_graph_accumulation_is_fixed(line, fixed_line):
    src = LOOP.replace("total += loss", line).replace("print(total.item())", "print(float(total))")
    if fixed_line is None:
        assert not gg201(src)
    else:
        assert len(gg201(src)) == 1 and fixed_line in fixed(src)


@pytest.mark.parametrize("tail", [
    "total.backward()",                       # back-propagated once after the loop
    "(total / len(data)).backward()",
])
def test_accumulation_back_propagated_after_the_loop_is_silent(tail):
    src = HEAD + textwrap.dedent("""\
    for epoch in range(2):
        total = 0
        for x, y in data:
            total = total + ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        TAIL
        opt.step()
    """).replace("TAIL", tail)
    assert not gg201(src)


def test_returned_or_stored_on_an_object_is_silent():
    src = HEAD + textwrap.dedent("""\
    def chunk_loss(xs, ys):
        total = 0
        for x, y in zip(xs, ys):
            total += ((model(x) - y) ** 2).mean()
        return total


    class Trainer:
        def run(self):
            for x, y in data:
                self.saved.append(((model(x) - y) ** 2).mean())

        def learn(self):
            torch.stack(self.saved).sum().backward()
    """)
    assert not gg201(src)
    # (a list on the object of losses already back-propagated in the loop is no longer silent:
    # test_gg201_kept.py::test_list_on_self_of_back_propagated_losses_is_reported)


def test_list_append_in_a_loop_is_reported_with_a_detach_fix():
    src = HEAD + textwrap.dedent("""\
    losses = []
    for x, y in data:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        losses.append(loss)
    """)
    [f] = gg201(src)
    assert "losses.append(loss.detach())" in fixed(src)
    # a list made anew in each iteration does not outlive it
    assert not gg201(src.replace("    loss = ((model", "    losses = []\n    loss = ((model"))


def test_evaluation_loop_gets_no_grad_and_one_finding():
    src = HEAD + textwrap.dedent("""\
    for x, y in data:
        ((model(x) - y) ** 2).mean().backward()
    model.eval()
    val, outs = 0, []
    for x, y in data:
        out = model(x)
        outs.append(out)
        val += ((out - y) ** 2).mean()
    print(val.item())
    """)
    [f] = gg201(src)
    assert "`outs` and `val`" in f.message_in("en") and "model.eval()" in f.message_in("en")
    out = fixed(src)
    assert "with torch.no_grad():\n    for x, y in data:\n        out = model(x)\n" in out
    assert not gg201(out)
    # under no_grad / inference_mode already: silent
    for ctx_mgr in ("torch.no_grad()", "torch.inference_mode()"):
        wrapped = out.replace("torch.no_grad()", ctx_mgr)
        assert not gg201(wrapped)


def test_evaluation_helper_called_under_no_grad_is_silent():
    src = HEAD + textwrap.dedent("""\
    def evaluate():
        model.eval()
        total = 0
        for x, y in data:
            total += ((model(x) - y) ** 2).mean()
        return float(total)


    for x, y in data:
        ((model(x) - y) ** 2).mean().backward()
    print(evaluate())
    """)
    assert len(gg201(src)) == 1
    assert not gg201(src.replace("print(evaluate())", "with torch.no_grad():\n    print(evaluate())"))


def test_recurrent_state_detached_each_step_and_decoders_are_silent():
    src = HEAD + textwrap.dedent("""\
    cell = nn.GRUCell(4, 4)
    h = torch.zeros(1, 4)
    for x, y in data:
        h = cell(x[:1], h)
        loss = h.pow(2).mean()
        loss.backward()
        h = h.detach()
    outs = []
    s = torch.zeros(1, 4)
    for t in range(3):
        s = cell(data[0][0][:1], s)
        outs.append(s)
    torch.stack(outs).sum().backward()
    """)
    assert not gg201(src)


def test_chinese_names_columns_are_characters():
    src = HEAD + textwrap.dedent("""\
    总损失 = 0.0  # 中文注释
    for x, y in data:
        损失 = ((model(x) - y) ** 2).mean()
        损失.backward()
        总损失 = 总损失 + 损失
    """)
    [f] = gg201(src)
    line = src.splitlines()[f.range.start.line]
    assert f.range.start.character == line.index("总损失") and f.data["variable"] == "总损失"
    assert "总损失 = 总损失 + 损失.item()" in fixed(src)


def test_select_ignore_severity_per_file_and_noqa():
    assert gg201(LOOP)
    assert not gg201(LOOP, config_from_mapping({"ignore": ["GG201"]}))
    assert not gg201(LOOP, config_from_mapping({"select": ["GG1"]}))
    assert gg201(LOOP, config_from_mapping({"select": ["GG2"]}))
    [f] = gg201(LOOP, config_from_mapping({"severity": {"GG201": "error"}}))
    assert f.severity.value == "error"
    assert not gg201(LOOP, config_from_mapping({"per-file-ignores": {"t.py": ["GG201"]}}))
    assert not gg201(LOOP.replace("    total += loss\n", "    total += loss  # noqa: GG201\n"))
    assert gg201(LOOP.replace("    total += loss\n", "    total += loss  # noqa: GG101\n"))


def test_explanation_sections_docs_page_and_cli():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    from rule_pages import assert_docs_page_is_the_explanation, assert_sections

    rule = get_rule("GG201")
    assert rule.name == "growing-history" and rule.default_severity.value == "warning"
    assert_sections("GG201")
    for text in (rule.explain("en"), rule.explain("zh")):
        assert "total_loss += loss" in text and "torch.no_grad()" in text and ".item()" in text
    assert_docs_page_is_the_explanation("GG201")
    out = subprocess.run([sys.executable, "-m", "gradguard", "rule", "GG201", "--lang", "zh"],
                         capture_output=True, text=True, encoding="utf-8")
    assert out.returncode == 0 and "累积历史" in out.stdout and "GG201" in out.stdout


def test_hover_shows_the_message_and_the_explanation_in_both_languages():
    from gradguard.lsp.hover import finding_markdown

    [f] = gg201(LOOP)
    for lang, needle in (("en", "PyTorch's own FAQ"), ("zh", "PyTorch 官方 FAQ")):  # from the "why" section
        md = finding_markdown([f], lang)
        assert md.startswith("### GG201 growing-history") and f.message_in(lang) in md and needle in md
        assert "docs/rules/GG201.md" in md


def test_values_not_built_from_the_loop_data_and_threaded_states_in_training_are_silent():
    """pytorch/examples: modules made in a loop (`layers.append(block(...))`), a best score
    (`best = max(acc, best)`), a recurrent state detached in place through an index."""
    src = HEAD + textwrap.dedent("""\
    class Net(nn.Module):
        def make(self, block, n):
            layers = []
            for _ in range(n):
                layers.append(block(self.width, groups=self.groups))
            return nn.Sequential(*layers)


    def validate():
        return model(data[0][0]).mean()


    best = 0
    hidden = (torch.zeros(1, 4), torch.zeros(1, 4))
    for epoch in range(2):
        for x, y in data:
            hidden[0].detach_()
            out, hidden = model(x, hidden)
            backend.backward(ctx, [out.sum()])
        acc = validate()
        best = max(acc, best)
    """)
    assert not gg201(src)


def test_metadata_other_frameworks_and_loops_that_do_not_evaluate_are_silent():
    """Real-code false alarms of earlier versions (docs/quiet-rules-scan.md)."""
    sizes = HEAD + textwrap.dedent("""\
    seen, total = 0, 0.0
    for x, y in data:
        out = model(x)
        loss = ((out - y) ** 2).mean()
        loss.backward()
        seen += out.size(0) + y.shape[0]
        total += loss.detach() * y.shape[0]
    """)
    assert not gg201(sizes)
    mxnet = "from mxnet import autograd, nd\n" + sizes.replace("import torch\n", "").replace("torch.", "nd.")
    assert not gg201(mxnet)
    builds = HEAD + textwrap.dedent("""\
    for x, y in data:
        ((model(x) - y) ** 2).mean().backward()
    examples = []
    for x, y in data:
        examples.append(model(x))
    """)
    assert not gg201(builds)  # no backward in the loop, but nothing says it evaluates
    assert len(gg201(builds.replace("for x, y in data:\n    examples", "for x, y in val_data:\n    examples")
                     .replace("data = [", "val_data = data = ["))) == 1
    evaluated = builds.replace("examples = []", "model.eval()\nexamples = []")
    assert len(gg201(evaluated)) == 1
    suite = "import pytest\n" + evaluated
    assert not [f for f in check_source(suite, "tests/test_model.py").findings if f.code == "GG201"]
    # a script named like a test suite that holds no test (SlowFast's tools/test_net.py runs the
    # test set): its evaluation is reported as anywhere else
    assert len([f for f in check_source(evaluated, "tools/test_model.py").findings if f.code == "GG201"]) == 1
    assert len([f for f in check_source(evaluated, "iresnet_test.py").findings if f.code == "GG201"]) == 1


def test_an_evaluation_loop_that_keeps_nothing_gets_a_hint_and_no_grad():
    src = HEAD + textwrap.dedent("""\
    for x, y in data:
        ((model(x) - y) ** 2).mean().backward()
    model.eval()
    correct = 0
    for x, y in data:
        correct += int((model(x) > y).sum())
    """)
    [f] = gg201(src)
    assert f.severity.value == "hint" and f.range.start.line + 1 == 11
    out = fixed(src)
    assert "with torch.no_grad():\n    for x, y in data:\n        correct +=" in out and not gg201(out)
    # no module called, a backward in it, a unit test, or no sign of evaluation: silent
    assert not gg201(src.replace("int((model(x) > y).sum())", "int((x > y).sum())"))
    assert not gg201(src.replace("model.eval()\n", ""))
    wrapped = "class TestModel:\n    def test_forward(self):\n" + textwrap.indent(src, "        ")
    assert not gg201(wrapped)


ENV_LOOP = """\
import torch
import torch.nn as nn

actor = nn.Linear(3, 2)
opt = torch.optim.SGD(actor.parameters(), lr=0.1)
{make}
rewards = []
for episode in range(3):
    state = torch.zeros(3)
    action = actor(state)
    next_state, reward, done, _ = {recv}.step(action)
    opt.zero_grad()
    action.sum().backward()
    opt.step()
    rewards.append(reward)
"""


@pytest.mark.parametrize("make, recv", [
    ("env = REGISTRY['toy']()", "env"),
    ("envs = REGISTRY['toy']()", "envs"),
    ("eval_env = REGISTRY['toy']()", "eval_env"),
    ("class Wrap(gym.Wrapper):\n    pass\nenv = Wrap(REGISTRY['toy']())", "env"),
])
def test_what_an_environment_step_returns_carries_no_graph_of_the_action(make, recv):
    # the reward of env.step(action) is the environment's number, not the action's graph
    assert not gg201(ENV_LOOP.format(make="import gym\n" + make, recv=recv))


@pytest.mark.parametrize("make, recv", [
    # not named as an environment: an unknown object's step may hand back what it is given
    ("sim = REGISTRY['toy']()", "sim"),
    # an environment class of the file whose step returns the action's graph: its facts decide
    ("class Env:\n    def step(self, a):\n        return a, a * 2, False, {}\nenv = Env()", "env"),
])
def test_a_step_that_may_return_the_actions_graph_is_still_read_as_keeping_it(make, recv):
    [f] = gg201(ENV_LOOP.format(make=make, recv=recv))
    assert f.range.start.line + 1 == ENV_LOOP.format(make=make, recv=recv).splitlines().index("    rewards.append(reward)") + 1


EVAL_ONCE = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))


{fn}


for epoch in range(3):
    model.train()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(evaluate(model, x, y))
"""


def test_a_loopless_evaluation_function_without_no_grad_gets_a_hint_and_a_decorator():
    src = EVAL_ONCE.format(fn="def evaluate(model, x, y):\n    model.eval()\n    logits = model(x)\n"
                              "    return (logits.argmax(1) == y).float().mean().item()")
    [f] = gg201(src)
    assert f.severity.value == "hint" and f.range.start.line + 1 == 11
    assert "evaluate()" in f.message_in("en") and "torch.no_grad()" in f.message_in("zh")
    out = fixed(src)
    assert "@torch.no_grad()\ndef evaluate(" in out and not gg201(out)


@pytest.mark.parametrize("fn", [
    # under no_grad already
    "def evaluate(model, x, y):\n    model.eval()\n    with torch.no_grad():\n        logits = model(x)\n"
    "    return (logits.argmax(1) == y).float().mean().item()",
    # the logits are returned: the caller decides
    "def evaluate(model, x, y):\n    model.eval()\n    return model(x)",
    # test-time adaptation: it back-propagates
    "def evaluate(model, x, y):\n    model.eval()\n    model(x).sum().backward()\n    return 0.0",
    # no eval() said
    "def evaluate(model, x, y):\n    logits = model(x)\n    return (logits.argmax(1) == y).float().mean().item()",
    # not named for evaluation
    "def accuracy(model, x, y):\n    model.eval()\n    logits = model(x)\n"
    "    return (logits.argmax(1) == y).float().mean().item()\nevaluate = accuracy",
])
def test_a_loopless_evaluation_that_records_nothing_or_hands_its_graph_on_is_silent(fn):
    assert not gg201(EVAL_ONCE.format(fn=fn))


# ---------------------------------------------------------------------------
# evaluation reached through a helper or a method (quietheld5's misses)
STEP_TRAINER = """\
import torch
import torch.nn as nn

torch.manual_seed(0)


class Trainer:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
        self.total = 0.0

    def _train_step(self, x, y):
        loss = ((self.net(x) - y) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

{step}

{epoch}

    def run(self, data, held_out):
        for i, (x, y) in enumerate(data):
            self._train_step(x, y)
            if i % 2 == 1:
                {call}


trainer = Trainer(nn.Linear(4, 1))
data = [(torch.randn(3, 4), torch.randn(3, 1)) for _ in range(4)]
trainer.run(data, data[:2])
"""
EVAL_STEP = """\
    def _eval_step(self, x, y):
        out = self.net(x)
        self.total += ((out - y) ** 2).mean().item()"""
EVAL_EPOCH = """\
    def _eval_epoch(self, held_out):
        self.net.eval()
        for x, y in held_out:
            self._eval_step(x, y)
        self.net.train()"""


def step_trainer(step=EVAL_STEP, epoch=EVAL_EPOCH, call="self._eval_epoch(held_out)"):
    return STEP_TRAINER.format(step=step, epoch=epoch, call=call)


def test_an_eval_step_run_per_batch_by_an_evaluation_loop_gets_a_hint_and_a_decorator():
    src = step_trainer()
    [f] = gg201(src)
    assert f.severity.value == "hint" and src.splitlines()[f.range.start.line] == "        out = self.net(x)"
    assert "_eval_step()" in f.message_in("en") and "_eval_epoch()" in f.message_in("en")
    assert "_eval_epoch()" in f.message_in("zh")
    out = fixed(src)
    assert "    @torch.no_grad()\n    def _eval_step(" in out and not gg201(out)
    # (a Chinese comment on the line changes nothing)
    assert len(gg201(src.replace("out = self.net(x)", "out = self.net(x)  # 前向"))) == 1


@pytest.mark.parametrize("step, epoch, call", [
    # decorated (the report's fix)
    ("    @torch.no_grad()\n" + EVAL_STEP, EVAL_EPOCH, "self._eval_epoch(held_out)"),
    # called inside a no_grad block of the evaluation loop
    (EVAL_STEP, EVAL_EPOCH.replace("            self._eval_step(x, y)",
                                   "            with torch.no_grad():\n                self._eval_step(x, y)"),
     "self._eval_epoch(held_out)"),
    # the evaluation loop's def is decorated
    (EVAL_STEP, "    @torch.inference_mode()\n" + EVAL_EPOCH, "self._eval_epoch(held_out)"),
    # the evaluation loop's def runs under no_grad at its call site
    (EVAL_STEP, EVAL_EPOCH, "with torch.no_grad():\n                    self._eval_epoch(held_out)"),
    # no eval() before the loop: nothing says it evaluates
    (EVAL_STEP, EVAL_EPOCH.replace("        self.net.eval()\n", ""), "self._eval_epoch(held_out)"),
    # the step's output is returned: the caller decides
    (EVAL_STEP.replace("        self.total += ((out - y) ** 2).mean().item()", "        return out"),
     EVAL_EPOCH, "self._eval_epoch(held_out)"),
    # a helper not named for evaluation
    (EVAL_STEP.replace("_eval_step", "_score_step"), EVAL_EPOCH.replace("_eval_step", "_score_step"),
     "self._eval_epoch(held_out)"),
    # a loop that back-propagates (test-time adaptation)
    (EVAL_STEP, EVAL_EPOCH.replace("            self._eval_step(x, y)",
                                   "            self._eval_step(x, y)\n            self.net(x).sum().backward()"),
     "self._eval_epoch(held_out)"),
])
def test_an_eval_step_under_no_grad_or_not_in_an_evaluation_loop_is_silent(step, epoch, call):
    assert not gg201(step_trainer(step, epoch, call))


PREDICT_SCRIPT = """\
import torch
import torch.nn as nn


class Wrapper:
    def __init__(self):
        self.network = nn.Sequential(nn.Linear(4, 3))

    def predict(self, x):
        self.network.eval()
        score = self.network(x)
        return torch.softmax(score, dim=1).argmax(1).tolist()


def run_all(model, batches):
    out = []
    for x in batches:
        out.extend(model.predict(x))
    return out


model = Wrapper()
batches = [torch.randn(2, 4) for _ in range(3)]
{tail}
"""


def test_a_predict_method_run_per_batch_by_an_inference_script_gets_a_hint():
    src = PREDICT_SCRIPT.format(tail="print(run_all(model, batches))")
    [f] = gg201(src)
    assert src.splitlines()[f.range.start.line] == "        score = self.network(x)"
    out = fixed(src)
    assert "    @torch.no_grad()\n    def predict(" in out and not gg201(out)


@pytest.mark.parametrize("tail", [
    "with torch.no_grad():\n    print(run_all(model, batches))",  # the report's fix
    "print(model.predict(batches[0]))\nrun_all = None",  # called once, by no loop: an inference script's one batch
])
def test_a_predict_method_under_no_grad_or_called_once_in_an_inference_script_is_silent(tail):
    src = PREDICT_SCRIPT.format(tail=tail)
    if "run_all = None" in tail:
        src = src.replace("        out.extend(model.predict(x))", "        out.append(x)")
    assert not gg201(src)


MODEL_METHOD = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def infer(self, x):
        return self.head(torch.relu(self.body(x)))

    def width(self):
        return self.body.out_features

    def forward(self, x):
        return self.infer(x)


def evaluate(model, loader):
    model.eval()
    total = 0.0
    for x, y in loader:
{body}
    return total


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(3)]
for epoch in range(2):
    model.train()
    for x, y in loader:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    print(evaluate(model, loader))
"""


def test_an_evaluation_loop_through_a_model_method_gets_a_hint():
    src = MODEL_METHOD.format(body="        total += ((model.infer(x) - y) ** 2).mean().item()")
    [f] = gg201(src)
    assert f.severity.value == "hint" and src.splitlines()[f.range.start.line] == "    for x, y in loader:"
    assert not gg201(fixed(src))


@pytest.mark.parametrize("body", [
    "        with torch.no_grad():\n            total += ((model.infer(x) - y) ** 2).mean().item()",
    "        total += model.width() * y.mean().item()",  # a method that runs no layer
])
def test_an_evaluation_loop_through_a_model_method_under_no_grad_or_without_a_forward_is_silent(body):
    assert not gg201(MODEL_METHOD.format(body=body))


COLLECTOR = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
stats = {"loss": [], "step": []}
for step in range(3):
    x, y = torch.randn(2, 4), torch.randn(2, 1)
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    stats["step"].append(step)
    stats["loss"].append(LOSS)
"""


def test_a_list_kept_under_a_key_of_a_statistics_dict_is_reported_with_a_detach_fix():
    src = COLLECTOR.replace("LOSS", "loss")
    [f] = gg201(src)
    assert src.splitlines()[f.range.start.line] == '    stats["loss"].append(loss)'
    assert 'stats["loss"].append(loss.detach())' in fixed(src) and not gg201(fixed(src))


@pytest.mark.parametrize("value, tail", [
    ("loss.item()", ""),
    ("loss.detach()", ""),
    # an unrolled objective: every step's loss summed and back-propagated after the loop
    ("loss", "total = torch.stack(stats['loss']).sum()\ntotal.backward()\n"),
])
def test_a_statistics_dict_of_numbers_or_of_a_later_loss_is_silent(value, tail):
    src = COLLECTOR.replace("LOSS", value) + tail
    if tail:
        src = src.replace("    loss.backward()\n", "")
    assert not gg201(src)


PREDICTOR = """\
import torch
import torch.nn as nn


class Predictor:
    def __init__(self, model):
        self.model = model

    def {name}(self, data):
{eval}        out = []
        for batch in torch.split(data, 2):
            out.append(torch.softmax(self.model(batch), dim=-1))
        return torch.cat(out)


model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(2, 4)).sum()
loss.backward()
opt.step()
print(Predictor(model).{name}(torch.randn(6, 4)).shape)
"""


def test_a_batch_predict_method_returning_what_it_collects_after_eval_is_reported():
    [f] = gg201(PREDICTOR.format(name="batch_predict", eval="        self.model.eval()\n"))
    assert f.data["evaluation"]


@pytest.mark.parametrize("name, said", [
    ("collect_outputs", "        self.model.eval()\n"),  # not named for prediction: the caller may back-propagate it
    ("batch_predict", ""),  # no eval(): nothing says it evaluates
])
def test_a_collecting_method_not_named_for_prediction_or_without_eval_is_silent(name, said):
    assert not gg201(PREDICTOR.format(name=name, eval=said))


REPORTER = """\
import torch
import torch.nn as nn


class Reporter:
    def __init__(self):
        self.observations = []

    def report(self, name, value):
        if isinstance(value, torch.Tensor):
            value = value.{cut}()
        self.observations.append((name, value))


model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
reporter = Reporter()
for it in range(3):
    loss = model(torch.randn(2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    reporter.report("main/loss", loss)
"""


def test_a_reporter_that_detaches_the_tensors_it_keeps_is_silent_and_one_that_clones_them_is_not():
    # (on the path where ``isinstance(value, torch.Tensor)`` is false, value is no tensor)
    assert not gg201(REPORTER.format(cut="detach"))
    assert not gg201(REPORTER.format(cut="item"))
    [f] = gg201(REPORTER.format(cut="clone"))
    assert REPORTER.format(cut="clone").splitlines()[f.range.start.line] == '    reporter.report("main/loss", loss)'


def test_a_state_helper_whose_other_branch_keeps_the_tuple_still_hands_on_its_graph():
    # (the narrowing of isinstance(h, torch.Tensor) needs the branch to cut h itself)
    from gradguard.engine import check_source as cs
    src = """\
import torch
import torch.nn as nn


def repackage(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return h


lstm = nn.LSTM(3, 4)
opt = torch.optim.SGD(lstm.parameters(), lr=0.1)
state = None
for step in range(3):
    out, state = lstm(torch.randn(2, 1, 3), state)
    state = repackage(state)
    loss = out.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    assert [f.code for f in cs(src, "t.py").findings if f.code == "GG101"] == ["GG101"]


# --- a train-or-evaluate def run for evaluation; an evaluation step's outputs kept ---

RUN_EPOCH = HEAD + """\
def run_epoch(loader, net, optimizer=None):
    total = 0.0
    for x, y in loader:
        out = net(x)
        loss = ((out - y) ** 2).mean()
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss.item()
    return total


for epoch in range(2):
    model.train()
    run_epoch(data, model, opt)
    model.eval()
    run_epoch(data, model)
"""


def test_a_train_or_evaluate_def_called_without_its_optimizer_after_eval_is_a_hint_at_its_forward():
    (f,) = gg201(RUN_EPOCH)
    assert f.severity.name == "HINT"
    assert f.range.start.line + 1 == RUN_EPOCH.splitlines().index("        out = net(x)") + 1
    assert "optimizer is not None" in f.message["en"]
    out = fixed(RUN_EPOCH)
    assert "        with torch.set_grad_enabled(optimizer is not None):\n            out = net(x)\n" in out
    assert gg201(out) == []


@pytest.mark.parametrize("edit", [
    # the evaluation call hands the optimizer too (it trains)
    ("    run_epoch(data, model)\n", "    run_epoch(data, model, opt)\n"),
    # the evaluation call runs under no_grad
    ("    run_epoch(data, model)\n", "    with torch.no_grad():\n        run_epoch(data, model)\n"),
    # no .eval() before the call, and none in the def: not said to evaluate
    ("    model.eval()\n", ""),
    # the def sets the grad mode itself
    ("        out = net(x)\n", "        with torch.set_grad_enabled(optimizer is not None):\n            out = net(x)\n"),
    # a backward in every iteration too
    ("        total += loss.item()\n", "        total += loss.item()\n        loss.backward()\n"),
    # the guard's default is not falsy: left out, it trains
    ("def run_epoch(loader, net, optimizer=None)", "def run_epoch(loader, net, optimizer=opt)"),
])
def test_train_or_evaluate_defs_that_train_or_do_not_record_are_silent(edit):
    src = RUN_EPOCH.replace(*edit)
    assert src != RUN_EPOCH
    assert gg201(src) == []


def test_a_flag_handed_false_to_a_def_that_switches_to_eval_itself_is_reported():
    src = HEAD + """\
def train_and_valid(net, loader, is_train=True):
    if is_train:
        net.train()
    else:
        net.eval()
    for x, y in loader:
        pred = net(x)
        loss = ((pred - y) ** 2).mean()
        if is_train:
            opt.zero_grad()
            loss.backward()
            opt.step()


for epoch in range(2):
    train_and_valid(model, data, is_train=True)
    train_and_valid(model, data, is_train=False)
"""
    (f,) = gg201(src)
    assert f.range.start.line + 1 == src.splitlines().index("        pred = net(x)") + 1
    assert gg201(src.replace("is_train=False)", "is_train=True)")) == []


VALIDATION_STEP = HEAD + """\
class Wrapper:
    def __init__(self, module):
        self.module_ = module

    def validation_step(self, x):
        self.module_.eval()
        return {"y_pred": self.module_(x)}

    def fit(self, valid_batches):
        y_preds = []
        for x, _ in valid_batches:
            out = self.validation_step(x)
            y_preds.append(out["y_pred"])
        return torch.cat(y_preds).shape


for x, y in data:
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    opt.step()
print(Wrapper(model).fit(data))
"""


def test_the_outputs_of_an_evaluation_step_method_kept_in_a_list_are_reported():
    (f,) = gg201(VALIDATION_STEP)
    assert f.range.start.line + 1 == VALIDATION_STEP.splitlines().index('            y_preds.append(out["y_pred"])') + 1


@pytest.mark.parametrize("edit", [
    ('        return {"y_pred": self.module_(x)}', '        with torch.no_grad():\n            return {"y_pred": self.module_(x)}'),
    ('            y_preds.append(out["y_pred"])', '            y_preds.append(out["y_pred"].detach())'),
    ("validation_step", "forward_step"),  # not named for evaluation: a helper's value of unknown kind
])
def test_evaluation_step_outputs_without_a_graph_or_from_other_helpers_are_silent(edit):
    src = VALIDATION_STEP.replace(*edit)
    assert src != VALIDATION_STEP
    assert gg201(src) == []
