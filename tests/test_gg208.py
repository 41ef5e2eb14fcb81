"""GG208 unoptimized-params: gradients flow into parameters no optimizer updates."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from gradguard.engine import check_source
from gradguard.model.text import apply_text_edits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rule_pages import assert_docs_page_is_the_explanation, assert_sections  # noqa: E402


def gg208(src: str):
    return [f for f in check_source(textwrap.dedent(src), "t.py").findings if f.code == "GG208"]


def fixed(src: str) -> str:
    src = textwrap.dedent(src)
    return apply_text_edits(src, [e for f in gg208(src) for e in f.preferred_fix.edits])


AGENT = """\
import torch
import torch.nn as nn


class Qnet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


class Agent:
    def __init__(self):
        self.q_net = Qnet()
        self.target_net = Qnet(){init}
        self.optimizer = torch.optim.Adam({params}, lr=1e-3)

    def update(self, s, a, r, s2):
        q = self.q_net(s).gather(1, a)
{target}
        loss = ((q - (r + 0.9 * q_next)) ** 2).mean()  # 目标
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""
PLAIN = "        q_next = self.target_net(s2).max(1)[0].unsqueeze(1)"


def agent(target: str = PLAIN, init: str = "", params: str = "self.q_net.parameters()") -> str:
    return AGENT.format(target=target, init=init, params=params)


def test_target_network_reported_at_its_call_and_detached():
    [f] = gg208(agent())
    assert f.range.start.line + 1 == 22 and f.severity.value == "warning"
    assert "self.target_net" in f.message_in("en") and "line 25" in f.message_in("en")
    assert "优化器" in f.message_in("zh")
    out = fixed(agent())
    assert "self.target_net(s2).detach().max(1)[0]" in out and not gg208(out)


@pytest.mark.parametrize("target", [
    "        q_next = self.target_net.forward(s2).max(1)[0].unsqueeze(1)",
    "        nxt = self.target_net(s2)\n        q_next = nxt.gather(1, nxt.argmax(1, keepdim=True))",
    "        best = self.q_net(s2).max(1)[1].unsqueeze(1)\n        q_next = self.target_net(s2).gather(1, best)",
])
def test_other_spellings_are_reported(target):
    assert len(gg208(agent(target))) == 1


@pytest.mark.parametrize("kw", [
    # graph recording off, or the value cut
    {"target": "        with torch.no_grad():\n            q_next = self.target_net(s2).max(1)[0].unsqueeze(1)"},
    {"target": "        q_next = self.target_net(s2).detach().max(1)[0].unsqueeze(1)"},
    {"target": "        q_next = self.target_net(s2).max(1)[0].unsqueeze(1).detach()"},
    # only the indices of its output reach the loss
    {"target": "        a2 = self.target_net(s2).max(1)[1].unsqueeze(1)\n        q_next = self.q_net(s2).gather(1, a2)"},
    # frozen on purpose, or updated by hand
    {"init": "\n        self.target_net.requires_grad_(False)"},
    {"init": "\n        for p in self.target_net.parameters():\n            p.requires_grad = False"},
    {"init": "\n        freeze(self.target_net)"},
    # wrapped into a module an optimizer may own
    {"init": "\n        self.both = nn.ModuleList([self.q_net, self.target_net])"},
    # an optimizer owns it, or one whose parameters cannot be followed may
    {"params": "list(self.q_net.parameters()) + list(self.target_net.parameters())"},
    {"params": "params"},
    {"params": "self.get_groups()"},
])
def test_right_forms_are_silent(kw):
    assert not gg208(agent(**kw))


def test_a_no_grad_method_and_a_network_fed_by_another_module_are_silent():
    src = agent().replace("    def update(self", "    @torch.no_grad()\n    def update(self")
    assert not gg208(src)
    # its input carries the trained network's graph: a gradient may flow through it on purpose
    assert not gg208(agent("        q_next = self.target_net(self.q_net(s2)).max(1)[0].unsqueeze(1)"))


def test_a_module_agent_whose_optimizer_takes_everything_is_silent():
    src = agent(params="self.parameters()").replace("class Agent:", "class Agent(nn.Module):").replace(
        "    def __init__(self):\n        self.q_net", "    def __init__(self):\n        super().__init__()\n        self.q_net")
    assert not gg208(src)


def test_an_own_optimizer_counts_once_something_steps_it():
    own = agent().replace("        self.fc = nn.Linear(4, 2)\n",
                          "        self.fc = nn.Linear(4, 2)\n        self.opt = torch.optim.SGD(self.parameters(), lr=0.1)\n")
    assert len(gg208(own)) == 1  # the target's own optimizer is never stepped
    stepped = own.replace("        self.optimizer.step()\n", "        self.optimizer.step()\n        self.target_net.opt.step()\n")
    assert not gg208(stepped)


REPLACED = """\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
model.fc = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
{between}
model.fc = {new}
for step in range(3):
    x = torch.randn(4, 8)
    optimizer.zero_grad()
    model.fc(model(x)).sum().backward()
    optimizer.step()
"""


def test_layer_replaced_after_the_optimizer_is_reported_and_rebuilt():
    src = REPLACED.format(between="", new="nn.Linear(8, 3)  # 新的分类头")
    [f] = gg208(src)
    assert f.range.start.line + 1 == 8 and "line 6" in f.message_in("en") and "第 6 行" in f.message_in("zh")
    out = fixed(src)
    assert "model.fc = nn.Linear(8, 3)  # 新的分类头\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n" in out
    assert not gg208(out)


@pytest.mark.parametrize("new", ["nn.Identity()", "model.fc"])
def test_replacements_that_add_no_parameter_are_silent(new):
    assert not gg208(REPLACED.format(between="", new=new))


def test_only_the_replacement_after_the_last_rebuild_is_reported():
    src = REPLACED.format(between="model.fc = nn.Linear(8, 3)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
                          new="nn.Linear(8, 4)")
    assert [f.range.start.line + 1 for f in gg208(src)] == [9]


def test_rebuilt_or_extended_after_the_replacement_is_silent():
    base = REPLACED.format(between="", new="nn.Linear(8, 3)")
    assert not gg208(base.replace("for step", "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nfor step"))
    assert not gg208(base.replace("for step", "optimizer.add_param_group({'params': model.fc.parameters()})\nfor step"))
    assert not gg208(base.replace("for step", "model.fc.requires_grad_(False)\nfor step"))


def test_no_fix_when_a_scheduler_holds_the_old_optimizer():
    src = REPLACED.format(between="sched = torch.optim.lr_scheduler.StepLR(optimizer, 1)", new="nn.Linear(8, 3)")
    [f] = gg208(src)
    assert not f.fixes


def test_left_out_of_the_groups_and_the_full_groups():
    src = textwrap.dedent("""\
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.neck = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)

            def forward(self, x):
                return self.head(self.neck(self.body(x)))


        net = Net()
        opt = torch.optim.SGD([{"params": net.body.parameters()}, {"params": net.head.parameters(), "lr": 0.1}], lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            net(torch.randn(2, 4)).sum().backward()
            opt.step()
        """)
    [f] = gg208(src)
    assert f.range.start.line + 1 == 17 and "`net.neck`" in f.message_in("en") and not f.fixes
    assert not gg208(src.replace('{"params": net.head.parameters(), "lr": 0.1}',
                                 '{"params": net.head.parameters(), "lr": 0.1}, {"params": net.neck.parameters()}'))
    assert not gg208(src.replace("net = Net()\n", "net = Net()\nnet.neck.requires_grad_(False)\n"))


def test_docs():
    assert_sections("GG208")
    assert_docs_page_is_the_explanation("GG208")


def test_one_part_per_optimizer_is_not_a_left_out_group():
    """A GAN's generator and encoder optimizers built from one model's parts, the
    discriminator's elsewhere: no optimizer is meant to cover the whole model."""
    src = textwrap.dedent("""\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(8, 4)
                self.generator = nn.Linear(4, 8)
                self.discriminator = nn.Linear(8, 1)

            def forward(self, z):
                return self.discriminator(self.generator(z)).mean() + self.encoder(self.generator(z)).pow(2).mean()


        model = Model()
        g_optim = torch.optim.Adam(model.generator.parameters(), lr=1e-3)
        e_optim = torch.optim.Adam(model.encoder.parameters(), lr=1e-3)
        for _ in range(3):
            g_optim.zero_grad()
            e_optim.zero_grad()
            model(torch.randn(2, 4)).backward()
            g_optim.step()
            e_optim.step()
        """)
    assert not gg208(src)


GROUPS_FILLED = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.neck = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.neck(self.body(x)))


net = Net()
{groups}
opt = torch.optim.SGD(groups, lr=0.01)
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(2, 4)).sum().backward()
    opt.step()
"""


@pytest.mark.parametrize("groups", [
    # one table of what fills a name (facts.fills_of) for the rule as for the facts: += of lists ...
    'groups = []\ngroups += [{"params": filter(lambda p: p.requires_grad, net.body.parameters())}]\n'
    'groups += [{"params": net.head.parameters(), "lr": 0.1}]',
    # ... items assigned ...
    'groups = [None, None]\ngroups[0] = {"params": net.body.parameters()}\ngroups[1] = {"params": net.head.parameters()}',
    # ... and appends to an empty list (which hands over nothing itself)
    'groups = []\ngroups.append({"params": net.body.parameters()})\ngroups.extend([{"params": net.head.parameters()}])',
])
def test_groups_filled_piece_by_piece_that_leave_a_layer_out_are_reported(groups):
    src = GROUPS_FILLED.format(groups=groups)
    [f] = gg208(src)
    assert "`net.neck`" in f.message_in("en") and f.range.start.line + 1 == src.splitlines().index(
        "opt = torch.optim.SGD(groups, lr=0.01)") + 1
    whole = groups + '\ngroups += [{"params": net.neck.parameters()}]'
    assert not gg208(GROUPS_FILLED.format(groups=whole))


def test_groups_filled_from_something_unreadable_stay_silent():
    # groups[0] filled from a call whose parameters cannot be told: nothing is known to be left out
    src = GROUPS_FILLED.format(groups='groups = [{"params": net.body.parameters()}, {"params": net.head.parameters()}]\n'
                                      'groups[0] = make_group(net)')
    assert not gg208(src)


def test_a_bare_name_never_qualifies_to_a_torch_class_without_imports():
    """The fact source asks is_optimizer_call / layer_with_parameters without the file's
    imports and answers a call of a bare name False before qualifying it: sound only
    while every default alias names a module, never a class of torch.optim or torch.nn."""
    import ast

    from gradguard.analysis import ast_util as A
    from gradguard.rules.gg208_unoptimized_params.facts import is_optimizer_call, layer_with_parameters

    for alias in A.DEFAULT_ALIASES:
        q = A.qualify(ast.Name(id=alias)) or ""
        last = q.rsplit(".", 1)[-1]
        assert not (q.startswith(("torch.optim.", "torch.nn.")) and last[:1].isupper()), q
        call = ast.parse(f"{alias}(x)").body[0].value  # type: ignore[attr-defined]
        assert not is_optimizer_call(call) and not layer_with_parameters(call)
    # with the imports, a bare name is qualified as before
    from gradguard.analysis.context import ModuleContext

    ctx = ModuleContext(None, None, {}, {"Adam": "torch.optim.Adam", "Linear": "torch.nn.Linear"})
    assert is_optimizer_call(ast.parse("Adam(p)").body[0].value, ctx)  # type: ignore[attr-defined]
    assert layer_with_parameters(ast.parse("Linear(2, 3)").body[0].value, ctx)  # type: ignore[attr-defined]


@pytest.mark.parametrize("optimizer", [
    # the groups in the options dict unpacked into the optimizer (mace#525), in either spelling
    'options = dict(params=[{"params": net.body.parameters()}, {"params": net.head.parameters()}], lr=0.01)\n'
    'opt = torch.optim.SGD(**options)',
    'options = {"params": [{"params": net.body.parameters()}, {"params": net.head.parameters()}], "lr": 0.01}\n'
    'opt = torch.optim.SGD(**options)',
    # or passed by keyword
    'opt = torch.optim.SGD(params=[{"params": net.body.parameters()}, {"params": net.head.parameters()}], lr=0.01)',
])
def test_groups_unpacked_from_options_or_given_by_keyword_that_leave_a_layer_out_are_reported(optimizer):
    src = GROUPS_FILLED.format(groups="").replace("opt = torch.optim.SGD(groups, lr=0.01)", optimizer)
    [f] = gg208(src)
    assert "`net.neck`" in f.message_in("en")
    whole = src.replace('{"params": net.head.parameters()}', '{"params": net.head.parameters()}, {"params": net.neck.parameters()}')
    assert not gg208(whole)


@pytest.mark.parametrize("optimizer", [
    # options bound twice, or built by a call: what the optimizer gets cannot be told
    'options = dict(params=[{"params": net.body.parameters()}, {"params": net.head.parameters()}])\n'
    'options = make_options(net)\nopt = torch.optim.SGD(**options)',
    'options = make_options(net)\nopt = torch.optim.SGD(**options)',
    'opt = torch.optim.SGD(**options, **more)',
])
def test_options_that_cannot_be_read_stay_silent(optimizer):
    src = GROUPS_FILLED.format(groups="").replace("opt = torch.optim.SGD(groups, lr=0.01)", optimizer)
    assert not gg208(src)


TARGET_ARGUMENT = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def train(q, q_target, opt):
    for _ in range(2):
        s, s2 = torch.randn(4, 3), torch.randn(4, 3)
        target = 1.0 + 0.9 * q_target(s2).max(1)[0]
        loss = (q(s).max(1)[0] - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


q = Net()
q_target = Net()
q_target.load_state_dict(q.state_dict())
opt = torch.optim.SGD(q.parameters(), lr=0.1)
for _ in range(3):
    train(q, q_target, opt)
"""


def test_a_target_network_handed_to_the_training_function_is_reported_at_its_call():
    # minimalRL#41: train(q, q_target, optimizer), the TD target not detached
    [f] = gg208(TARGET_ARGUMENT)
    assert f.range.start.line + 1 == 17 and f.data["module"] == "q_target"
    assert "`q_target`" in f.message_in("en") and "`self." not in f.message_in("en") and "q_target" in f.message_in("zh")
    assert f.preferred_fix.edits[0].new_text == "q_target(s2).detach()"


@pytest.mark.parametrize("old,new", [
    ("        target = 1.0 + 0.9 * q_target(s2).max(1)[0]\n",
     "        with torch.no_grad():\n            target = 1.0 + 0.9 * q_target(s2).max(1)[0]\n"),
    ("        loss = (q(s).max(1)[0] - target).pow(2).mean()\n",
     "        loss = (q(s).max(1)[0] - target.detach()).pow(2).mean()\n"),
    # an optimizer owns it, or it is frozen, or it is no synced copy (a second model trained elsewhere)
    ("opt = torch.optim.SGD(q.parameters(), lr=0.1)\n",
     "opt = torch.optim.SGD(list(q.parameters()) + list(q_target.parameters()), lr=0.1)\n"),
    ("q_target.load_state_dict(q.state_dict())\n", "q_target.requires_grad_(False)\nq_target.load_state_dict(q.state_dict())\n"),
    ("q_target.load_state_dict(q.state_dict())\n", ""),
    # call sites that disagree
    ("    train(q, q_target, opt)\n", "    train(q, q_target, opt)\n    train(q_target, q, opt)\n"),
])
def test_a_target_argument_cut_owned_frozen_or_not_a_synced_copy_is_silent(old, new):
    assert old in TARGET_ARGUMENT
    assert not gg208(TARGET_ARGUMENT.replace(old, new))


# ---------------------------------------------------------------------------
# the model made again after the optimizer, trained by a module-level function
REMADE = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(x, y):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


model = nn.Linear(4, 1)  # 又建了一次
{between}for step in range(3):
    print(train(torch.randn(2, 4), torch.randn(2, 1)))
"""


def test_a_model_made_again_before_a_training_function_runs_is_reported_and_fixed():
    src = REMADE.format(between="")
    [f] = gg208(src)
    assert src.splitlines()[f.range.start.line] == "model = nn.Linear(4, 1)  # 又建了一次"
    out = fixed(src)
    assert "model = nn.Linear(4, 1)  # 又建了一次\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n" in out
    assert not gg208(out)


@pytest.mark.parametrize("src", [
    # the optimizer built again after the model
    REMADE.format(between="optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"),
    # the training function takes the model as a parameter (it trains what it is handed)
    REMADE.format(between="").replace("def train(x, y):", "def train(model, x, y):")
    .replace("print(train(torch.randn", "print(train(nn.Linear(4, 1), torch.randn"),
    # the training function builds its own optimizer
    REMADE.format(between="").replace("    optimizer.zero_grad()\n",
                                      "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                                      "    optimizer.zero_grad()\n"),
    # a function that steps the optimizer but never runs the model
    REMADE.format(between="").replace("loss = ((model(x) - y) ** 2).mean()", "loss = (x.sum() - y.sum()) ** 2"),
])
def test_a_training_function_that_trains_the_model_it_sees_is_silent(src):
    assert not gg208(src)


# ---------------------------------------------------------------------------
# a script's own loop: a head left out of the optimizer, a teacher run with autograd on
SCRIPT = """\
import torch
import torch.nn as nn

body = nn.Linear(4, 4)
{second} = nn.Linear(4, 2)
{setup}optimizer = torch.optim.SGD({params}, lr=0.1)
for step in range(3):
    x, y = torch.randn(2, 4), torch.randn(2, 2)
{forward}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
HEAD_FWD = "    loss = nn.functional.mse_loss(head(body(x)), y)"
TEACHER_FWD = "    loss = ((body(x)[:, :2] - teacher(x)) ** 2).mean()"


def script(second="head", setup="", params="body.parameters()", forward=HEAD_FWD):
    return SCRIPT.format(second=second, setup=setup, params=params, forward=forward)


def test_a_head_run_on_the_models_output_and_left_out_of_the_optimizer_is_reported_at_the_optimizer():
    src = script()
    [f] = gg208(src)
    assert src.splitlines()[f.range.start.line].startswith("optimizer = torch.optim.SGD(")
    assert "`head`" in f.message_in("en") and "`head`" in f.message_in("zh")
    out = fixed(src)
    assert "torch.optim.SGD(list(body.parameters()) + list(head.parameters()), lr=0.1)" in out and not gg208(out)


def test_a_teacher_run_on_the_data_with_autograd_on_is_reported_at_its_call_with_detach():
    src = script("teacher", forward=TEACHER_FWD)
    [f] = gg208(src)
    assert src.splitlines()[f.range.start.line] == TEACHER_FWD
    assert "teacher(x).detach()" in fixed(src) and not gg208(fixed(src))


@pytest.mark.parametrize("src", [
    script(params="list(body.parameters()) + list(head.parameters())"),  # the fix
    script(setup="head_opt = torch.optim.SGD(head.parameters(), lr=0.1)\n",
           forward=HEAD_FWD + "\n    head_opt.step()"),  # an optimizer of its own
    script(setup="head.requires_grad_(False)\n"),  # frozen on purpose
    script(forward=HEAD_FWD.replace("head(body(x))", "head(body(x)).detach() + body(x)[:, :2]")),  # cut
    # a reward model (or critic) whose output the loss maximises: not a head trained against labels
    script("reward_model", forward="    loss = -reward_model(body(x)).mean()"),
    # a module on the data that does not say it stays as it is (an encoder maybe meant to train)
    script("encoder", forward=TEACHER_FWD.replace("teacher", "encoder")),
    # the teacher's targets made once before the loop: GG102's stale graph, not this shape
    script("teacher", setup="targets = teacher(torch.randn(2, 4))\n",
           forward="    loss = ((body(x)[:, :2] - targets) ** 2).mean()"),
    script("teacher", forward=TEACHER_FWD.replace("teacher(x)", "teacher(x).detach()")),
    script("teacher", forward="    with torch.no_grad():\n        t = teacher(x)\n"
                              "    loss = ((body(x)[:, :2] - t) ** 2).mean()"),
    script("teacher", setup="teacher.load_state_dict(teacher.state_dict())\n", forward=TEACHER_FWD),  # loaded
    script("teacher", setup="teacher.eval()\n", forward=TEACHER_FWD),  # used as it is
    # the optimizer's parameters cannot be read: it may own anything
    script(setup="params = [p for m in (body, head) for p in m.parameters()]\n", params="params"),
])
def test_a_script_module_owned_frozen_cut_or_used_as_it_is_is_silent(src):
    assert not gg208(src)


WEIGHTS = """\
import torch
import torch.nn as nn


class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(3, 3))
        self.b = nn.Parameter(torch.randn(3, 3))
        self.c = {c}

    def forward(self, x):
        return torch.tanh(x @ self.a) @ self.b{use}


cell = Cell()
{build}
for step in range(3):
    loss = cell(torch.randn(2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def weights(c="nn.Parameter(torch.randn(3, 3))", use=" + x @ self.c", build="params = [cell.a, cell.b]  # 少一个\n"
            "opt = torch.optim.SGD(params, lr=0.1)"):
    return WEIGHTS.format(c=c, use=use, build=build)


def test_a_weight_the_forward_uses_missing_from_the_optimizers_list_is_reported_where_the_list_is_written():
    src = weights()
    [f] = gg208(src)
    assert src.splitlines()[f.range.start.line] == "params = [cell.a, cell.b]  # 少一个"
    assert "`cell.c`" in f.message_in("en") and "`cell.c`" in f.message_in("zh")
    out = fixed(src)
    assert "params = [cell.a, cell.b, cell.c]  # 少一个" in out and not gg208(out)
    # written in the call: reported (and fixed) there
    inline = weights(build="opt = torch.optim.SGD([cell.a, cell.b], lr=0.1)")
    [f] = gg208(inline)
    assert "torch.optim.SGD([cell.a, cell.b, cell.c], lr=0.1)" in fixed(inline)


@pytest.mark.parametrize("src", [
    weights(build="opt = torch.optim.SGD([cell.a, cell.b, cell.c], lr=0.1)"),
    weights(c="nn.Parameter(torch.randn(3, 3), requires_grad=False)"),  # frozen on purpose
    weights(use=""),  # never read by forward
    weights(build="opt = torch.optim.SGD(cell.parameters(), lr=0.1)"),
    weights(build="opt = torch.optim.SGD([cell.a], lr=0.1)"),  # one weight picked on purpose
])
def test_a_weight_list_covering_the_forward_or_picking_on_purpose_is_silent(src):
    assert not gg208(src)


PLAIN = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.hidden = [nn.Linear(8, 8) for _ in range(n)]  # 隐藏层
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        h = self.inp(x)
        for layer in self.hidden:
            h = torch.relu(layer(h))
        return self.out(h)


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(3):
    loss = net(torch.randn(2, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_layers_in_a_plain_list_are_reported_where_the_list_is_bound_and_wrapped():
    [f] = gg208(PLAIN)
    assert f.range.start.line + 1 == 9 and f.data["shape"] == "plain-list"
    assert "`self.hidden`" in f.message_in("en") and "nn.ModuleList" in f.message_in("en")
    assert "普通列表" in f.message_in("zh")
    out = fixed(PLAIN)
    assert "self.hidden = nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])  # 隐藏层" in out and not gg208(out)


@pytest.mark.parametrize("old,new", [
    # appended in __init__, a dict of layers, a list of weights, a same-file module class
    ("self.hidden = [nn.Linear(8, 8) for _ in range(n)]  # 隐藏层",
     "self.hidden = []\n        for _ in range(n):\n            self.hidden.append(nn.Linear(8, 8))"),
    ("self.hidden = [nn.Linear(8, 8) for _ in range(n)]  # 隐藏层",
     "self.hidden = [nn.Linear(8, 8), nn.Linear(8, 8)]"),
])
def test_other_plain_lists_are_reported(old, new):
    src = PLAIN.replace(old, new)
    [f] = gg208(src)
    assert f.range.start.line + 1 == 9
    out = fixed(src)
    assert "nn.ModuleList(" in out and not gg208(out)


def test_a_plain_dict_and_a_plain_list_of_weights_are_reported_with_their_containers():
    src = PLAIN.replace("self.hidden = [nn.Linear(8, 8) for _ in range(n)]  # 隐藏层",
                        'self.hidden = {"a": nn.Linear(8, 8), "b": nn.Linear(8, 8)}').replace(
        "for layer in self.hidden:", "for layer in self.hidden.values():")
    [f] = gg208(src)
    assert 'nn.ModuleDict({"a"' in fixed(src)
    src = PLAIN.replace("self.hidden = [nn.Linear(8, 8) for _ in range(n)]  # 隐藏层",
                        "self.hidden = [nn.Parameter(torch.eye(8)) for _ in range(n)]").replace(
        "h = torch.relu(layer(h))", "h = torch.relu(h @ layer)")
    [f] = gg208(src)
    assert "weights" in f.message_in("en") and "nn.ParameterList([" in fixed(src)


@pytest.mark.parametrize("old,new", [
    # the right containers
    ("[nn.Linear(8, 8) for _ in range(n)]", "nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])"),
    # registered by hand, or wrapped later
    ("self.out = nn.Linear(8, 1)",
     "self.out = nn.Linear(8, 1)\n        for i, m in enumerate(self.hidden):\n            self.add_module(f'h{i}', m)"),
    ("self.out = nn.Linear(8, 1)", "self.out = nn.Linear(8, 1)\n        self.body = nn.Sequential(*self.hidden)"),
    ("self.out = nn.Linear(8, 1)", "self.out = nn.Linear(8, 1)\n        self.hidden = nn.ModuleList(self.hidden)"),
    # one module hidden from .parameters() on purpose (a perceptual loss's network), a frozen one
    ("[nn.Linear(8, 8) for _ in range(n)]", "[nn.Linear(8, 8)]"),
    ("self.out = nn.Linear(8, 1)",
     "self.out = nn.Linear(8, 1)\n        for m in self.hidden:\n            m.requires_grad_(False)"),
    # the forward does not use it
    ("for layer in self.hidden:", "for layer in []:"),
    # the optimizer gathers the list's parameters itself, or cannot be read
    ("opt = torch.optim.Adam(net.parameters(), lr=1e-3)",
     "params = list(net.parameters())\nfor m in net.hidden:\n    params += list(m.parameters())\n"
     "opt = torch.optim.Adam(params, lr=1e-3)"),
    ("opt = torch.optim.Adam(net.parameters(), lr=1e-3)", "opt = torch.optim.Adam(get_params(net), lr=1e-3)"),
    # no optimizer trains a Net
    ("opt = torch.optim.Adam(net.parameters(), lr=1e-3)",
     "other = nn.Linear(4, 1)\nopt = torch.optim.Adam(other.parameters(), lr=1e-3)"),
    # not a module: a plain object's list
    ("class Net(nn.Module):", "class Net(object):"),
])
def test_registered_frozen_unused_or_untrained_plain_lists_are_silent(old, new):
    src = PLAIN.replace(old, new)
    assert src != PLAIN
    assert not gg208(src)


def test_a_plain_list_in_a_module_owned_through_an_attribute_or_self_parameters_is_reported():
    src = PLAIN.replace("net = Net()\nopt = torch.optim.Adam(net.parameters(), lr=1e-3)",
                        "class Agent:\n    def __init__(self):\n        self.policy = Net()\n"
                        "        self.opt = torch.optim.Adam(self.policy.parameters())\n\n\n"
                        "agent = Agent()\nnet, opt = agent.policy, agent.opt")
    assert [f.range.start.line + 1 for f in gg208(src)] == [9]
    src = PLAIN.replace("        return self.out(h)\n",
                        "        return self.out(h)\n\n    def configure_optimizers(self):\n"
                        "        return torch.optim.Adam(self.parameters())\n").replace(
        "opt = torch.optim.Adam(net.parameters(), lr=1e-3)", "opt = net.configure_optimizers()")
    assert "net.parameters()" not in src
    assert [f.range.start.line + 1 for f in gg208(src)] == [9]


CENTER = """\
import torch
import torch.nn as nn


class CenterLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(3, 2))

    def forward(self, x, labels):
        return ((x - self.centers[labels]) ** 2).sum(1).mean()


model = nn.Linear(8, 2)
criterion = CenterLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    loss = criterion(model(x), y)  # 中心损失
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_loss_with_weights_of_its_own_left_out_of_the_optimizer_is_reported_at_the_optimizer():
    [f] = gg208(CENTER)
    assert f.range.start.line + 1 == 16 and "`criterion`" in f.message_in("en")
    out = fixed(CENTER)
    assert "list(criterion.parameters())" in out and not gg208(out)


@pytest.mark.parametrize("old,new", [
    # its own optimizer, frozen, a loss comparing two networks' outputs, a class not named a loss
    ("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
     "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nopt_c = torch.optim.SGD(criterion.parameters(), lr=0.5)\n"),
    ("criterion = CenterLoss()\n", "criterion = CenterLoss()\ncriterion.requires_grad_(False)\n"),
    ("loss = criterion(model(x), y)", "loss = criterion(model(x), model(x) * 2)"),
    ("class CenterLoss(nn.Module):", "class Centers(nn.Module):"),
])
def test_a_loss_with_weights_owned_frozen_or_not_against_labels_is_silent(old, new):
    src = CENTER.replace(old, new)
    if "Centers(" in new:
        src = src.replace("CenterLoss()", "Centers()")
    assert src != CENTER and not gg208(src)


# --------------------------------------------------------------------------
# eleventh pass: pairs, a lower-case class, layers handed in, a dropped group, a copy
# --------------------------------------------------------------------------

PAIRS = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hids = []
        for _ in range(2):
            self.hids.append([nn.Linear(4, 4), {act}])

    def forward(self, x):
        for lin, act in self.hids:
            x = act(lin(x))
        return x


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(2, 4)).sum().backward()
    opt.step()
"""


def test_linear_activation_pairs_in_a_plain_list_wrap_the_pairs_too():
    [f] = gg208(PAIRS.format(act="nn.ReLU()"))
    assert f.range.start.line + 1 == 8
    out = fixed(PAIRS.format(act="nn.ReLU()"))
    assert "self.hids = nn.ModuleList()" in out and "nn.ModuleList([nn.Linear(4, 4), nn.ReLU()])" in out
    assert not gg208(out)


def test_a_pair_whose_other_item_may_be_a_function_is_reported_without_a_fix():
    [f] = gg208(PAIRS.format(act="get_act()"))  # (may return F.relu: nn.ModuleList would refuse it)
    assert f.preferred_fix is None


def test_pairs_of_layers_registered_elsewhere_are_silent():
    src = PAIRS.format(act="nn.ReLU()").replace("[nn.Linear(4, 4), nn.ReLU()]", "[self.lins[0], nn.ReLU()]")
    src = src.replace("        self.hids = []\n", "        self.lins = nn.ModuleList([nn.Linear(4, 4)])\n        self.hids = []\n")
    assert not gg208(src)


LOWER = """\
import torch
import torch.nn as nn


class net(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = [nn.Linear(1, 1) for _ in range(n)]

    def forward(self, x):
        for l in self.layers:
            x = l(x)
        return x


{make}
opt = torch.optim.SGD(n.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    n(torch.randn(2, 1)).sum().backward()
    opt.step()
"""


def test_a_lower_case_module_class_made_by_the_script_is_an_instance():
    [f] = gg208(LOWER.format(make="n = net(3)"))
    assert f.range.start.line + 1 == 8
    # a builtin's name is never taken for a class of the file
    assert not gg208(LOWER.replace("class net(", "class Net(").format(make="n = list(3)"))


MERGE = """\
import torch
import torch.nn as nn


class Merge(nn.Module):
    def __init__(self, layers=None):
        super().__init__()
        self._layers = None
        if layers is not None:
            self._layers = []
            for layer in layers:
                self._layers.append(layer)

    def forward(self, x):
        return torch.cat([layer(x) for layer in self._layers], 1)


model = nn.Sequential(Merge({given}), nn.Linear(4, 2))
opt = torch.optim.Adam(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
"""


@pytest.mark.parametrize("given,reported", [
    ("[nn.Linear(4, 2), nn.Linear(4, 2)]", True),
    ("layers=[nn.Linear(4, 2), nn.Linear(4, 2)]", True),
    ("[nn.Tanh(), nn.Sigmoid()]", False),   # no parameters in the plain list
    ("branches", False),                     # what the list holds is not known here
])
def test_layers_handed_to_the_constructor_and_copied_into_a_plain_list(given, reported):
    found = gg208(MERGE.format(given=given))
    assert [f.range.start.line + 1 for f in found] == ([10] if reported else [])


GROUPS = """\
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model):
        self.model = model

    def build(self):
        groups = []
        group = {{"lr": 0.1}}
        group["params"] = []
        for name, p in self.model.named_parameters():
            if name.startswith("0"):
                group["params"].append(p)
        groups.append(group)
        group = {{"lr": 0.01}}
        group["params"] = []
        for name, p in self.model.named_parameters():
            if name.startswith("1"):
                group["params"].append(p)
{tail}

    def train(self, x):
        self.build()
        self.opt.zero_grad()
        self.model(x).sum().backward()
        self.opt.step()
"""


@pytest.mark.parametrize("tail,reported", [
    ("        self.opt = torch.optim.SGD(groups)", True),
    ("        groups.append(group)\n        self.opt = torch.optim.SGD(groups)", False),
    ("        self.opt = torch.optim.SGD(groups)\n        self.opt.add_param_group(group)", False),
    ("        self.opt = torch.optim.SGD(groups)\n        self.head_opt = torch.optim.SGD([group])", False),
])
def test_a_parameter_group_filled_and_never_added(tail, reported):
    src = GROUPS.format(tail=tail)
    found = gg208(src)
    assert [f.range.start.line + 1 for f in found] == ([22] if reported else [])
    if reported:
        assert "line 17" in found[0].message_in("en")
        out = fixed(src)
        assert "        groups.append(group)\n        self.opt = torch.optim.SGD(groups)" in out and not gg208(out)


CLONE = """\
import copy
import torch


class Wrapper:
    def __init__(self, model, optimizer):
        self._model = model
        self._optimizer = optimizer

    def fit(self, x):
        self._optimizer.zero_grad()
        self._model(x).sum().backward()
        self._optimizer.step()

    def clone(self):
        model = copy.deepcopy(self._model)
{body}
"""


@pytest.mark.parametrize("body,reported", [
    ("        return type(self)(model, self._optimizer)", True),
    ("        return Wrapper(model, optimizer=self._optimizer)", True),
    ("        opt = torch.optim.SGD(model.parameters(), lr=0.1)\n        return type(self)(model, opt)", False),
    ("        return type(self)(model, type(self._optimizer)(model.parameters(), **self._optimizer.defaults))", False),
    ("        return type(self)(model, None)", False),
    ("        return Other(model, self._optimizer)", False),
])
def test_a_deep_copy_handed_on_with_the_original_optimizer(body, reported):
    found = gg208(CLONE.format(body=body))
    assert [f.range.start.line + 1 for f in found] == ([17] if reported else [])
