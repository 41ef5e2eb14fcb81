"""Graphs that travel through objects and sequential phases (issue 12, items 3, 6
and 7; the second held-out corpus's misses): a method of a user's object whose own
loop back-propagates what it is handed, ``self.<a>`` of a class that is no module,
lists filled by ``append``/``insert``, a graph built before a loop whose steps
update its weights, a replay memory whose detach would crash. Each shape with the
silent twins real code writes; the fixtures (run under torch) are in
tests/fixtures/reports (torchflows, torchopt, SinGAN) and tests/fixtures."""

from __future__ import annotations

import textwrap

from gradguard.engine import check_source


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _findings(text: str):
    return check_source(src(text)).findings


def _codes(text: str):
    return sorted((f.code, f.range.start.line + 1) for f in _findings(text))


# ---------------------------------------------------------------------------
# a method of an object whose own loop back-propagates its argument

_FLOW = """
    import torch, torch.nn as nn

    class Flow(nn.Module):
        def __init__(self):
            super().__init__()
            self.shift = nn.Parameter(torch.zeros(2))

        def fit(self, x_train, n_epochs=3):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            for epoch in range(n_epochs):
                opt.zero_grad()
                loss = ((x_train - self.shift) ** 2).mean()  # 损失
                loss.{backward}
                opt.step()

    encoder = nn.Linear(3, 2)
    data = torch.randn(4, 3)
    latent = {latent}
    flow = Flow()
    flow.fit({arg})
"""


def test_method_loop_back_propagating_its_argument():
    fs = _findings(_FLOW.format(backward="backward()", latent="encoder(data)", arg="latent"))
    assert [(f.code, f.range.start.line + 1) for f in fs] == [("GG102", 18)]
    assert "flow.fit()" in fs[0].message["en"] and "flow.fit()" in fs[0].message["zh"]
    assert fs[0].preferred_fix is not None and "latent = latent.detach()" in fs[0].preferred_fix.edits[0].new_text


def test_method_loop_silent_twins():
    # fitted on the detached latent, on one made under no_grad, or a loop that keeps the graph
    assert _codes(_FLOW.format(backward="backward()", latent="encoder(data)", arg="latent.detach()")) == []
    assert _codes(_FLOW.format(backward="backward()", latent="encoder(data).detach()", arg="latent")) == []
    assert _codes(_FLOW.format(backward="backward(retain_graph=True)", latent="encoder(data)", arg="latent")) == []
    assert _codes(_FLOW.format(backward="backward()", latent="data * 2", arg="latent")) == []


# ---------------------------------------------------------------------------
# self.<a> of a class that is no module; a list filled by append/insert

_AGENT = """
    import torch, torch.nn as nn

    class Tokenizer:
        def __call__(self, x):
            return x * 2

    class PPO:
        def __init__(self):
            self.rewardnet = {net}
            self.policy = nn.Linear(4, 1)
            self.tok = Tokenizer()
            self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=1e-3)

        def update(self, states):
            rewards = []
            for state in states:
                r = self.{attr}(state).sum()
                rewards.insert(0, r)
            rewards = torch.stack(rewards)
            for _ in range(3):
                loss = ((self.policy(torch.stack(states)).squeeze(-1) - rewards) ** 2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
"""


def test_agent_rewards_from_a_learned_net_listed_then_reused_by_every_epoch():
    assert _codes(_AGENT.format(net="nn.Sequential(nn.Linear(4, 2), nn.Softmax(dim=-1))", attr="rewardnet")) == \
        [("GG102", 18)]


def test_agent_attributes_that_are_no_module_with_parameters_stay_silent():
    # a parameterless module, an object of a class that is no module: no graph to reuse
    assert _codes(_AGENT.format(net="nn.Softmax(dim=-1)", attr="rewardnet")) == []
    assert _codes(_AGENT.format(net="nn.Linear(4, 2)", attr="tok")) == []


def test_list_elements_each_back_propagated_once():
    # an ensemble's per-model losses: each element its own graph (flagged before)
    assert _codes("""
import torch, torch.nn as nn
models = [nn.Linear(4, 1) for _ in range(3)]
opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
x = torch.randn(5, 4)
losses = [m(x).pow(2).mean() for m in models]
for loss in losses:
    loss.backward()
for o in opts:
    o.step()
appended = []
for m in models:
    appended.append(m(x).sum())
for i, loss in enumerate(appended):
    loss.backward()
""") == []
    # heads over one backbone output: they share h's graph, the second backward fails
    assert _codes("""
import torch, torch.nn as nn
backbone = nn.Linear(4, 4)
heads = [nn.Linear(4, 1) for _ in range(3)]
h = backbone(torch.randn(5, 4))
losses = [head(h).sum() for head in heads]
for loss in losses:
    loss.backward()
""") == [("GG102", 5)]
    # one model's losses on several batches, stepped between them: the second element's graph
    # saved weights the first step changed in place (torch: "modified by an inplace operation")
    assert _codes("""
import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
losses = [model(b).pow(2).mean() for b in [torch.randn(3, 4) for _ in range(3)]]
for loss in losses:
    opt.zero_grad()
    loss.backward()
    opt.step()
""") == [("GG102", 4)]


# ---------------------------------------------------------------------------
# a graph built before a loop, retained, while the loop's step updates its weights

_SINGAN = """
    import torch, torch.nn as nn
    netD = nn.Linear(3, 1)
    netG = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))
    optD = torch.optim.Adam(netD.parameters())
    optG = torch.optim.Adam({g_params})
    fake = netG(torch.randn(2, 3))
    for j in range(3):
        netG.zero_grad()
        errG = -netD(fake).mean()
        errG.backward({keep})
{step}
"""


def test_retained_graph_whose_weights_the_loop_steps():
    fs = _findings(_SINGAN.format(g_params="netG.parameters()", keep="retain_graph=True", step="        optG.step()"))
    assert [(f.code, f.range.start.line + 1) for f in fs] == [("GG103", 10)]
    assert "modified by an inplace operation" in fs[0].message["en"] and "原地" in fs[0].message["zh"]
    assert [r.range.start.line + 1 for r in fs[0].related] == [6, 11]
    assert fs[0].preferred_fix is None  # recompute or detach: what the loss should train decides
    # an optimizer built from both models updates netG too
    assert _codes(_SINGAN.format(g_params="list(netG.parameters()) + list(netD.parameters())",
                                 keep="retain_graph=True", step="        optG.step()")) == [("GG103", 10)]


def test_retained_graph_silent_twins():
    # one layer on data saves its input, not its weight: torch trains it
    one = _SINGAN.format(g_params="netG.parameters()", keep="retain_graph=True", step="        optG.step()")
    assert _codes(one.replace("nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))", "nn.Linear(3, 3)")) == []
    # the step updates only netD (a WGAN critic loop over one fake); a step on some
    # iterations only; a loop that stops after its first iteration
    assert _codes(_SINGAN.format(g_params="netG.parameters()", keep="retain_graph=True", step="        optD.step()")) == []
    assert _codes(_SINGAN.format(g_params="netG.parameters()", keep="retain_graph=True",
                                 step="        if j == 2:\n            optG.step()")) == []
    assert _codes(_SINGAN.format(g_params="netG.parameters()", keep="retain_graph=True",
                                 step="        optG.step()\n        break")) == []
    # the fake made again in every step (SinGAN's answer)
    text = _SINGAN.format(g_params="netG.parameters()", keep="retain_graph=True", step="        optG.step()")
    text = text.replace("        netG.zero_grad()\n", "        netG.zero_grad()\n        fake = netG(torch.randn(2, 3))\n")
    assert _codes(text) == []
    # a backward that frees the graph is GG102's (the graph is gone, not the weights)
    assert _codes(_SINGAN.format(g_params="netG.parameters()", keep="", step="        optG.step()")) == [("GG102", 6)]


# ---------------------------------------------------------------------------
# a replay memory: no list-detach fix that calls .detach() on a tuple

_A2C = """
    import random
    import torch, torch.nn as nn

    class Agent:
        def __init__(self):
            self.net = nn.Linear(4, 2)
            self.opt = torch.optim.Adam(self.net.parameters())
            self.memory = []

        def act(self, s):
            return torch.log_softmax(self.net(s), -1)[0]

        def remember(self, s, log_prob, r):
            self.memory.append({item})

        def learn(self):
            if len(self.memory) < 2:
                return
            self.opt.zero_grad()
            total = 0
            for entry in random.sample(self.memory, 2):
                total = total + {use}
            total.backward()
            self.opt.step()

    agent = Agent()
    for t in range(4):
        s = torch.randn(4)
        log_prob = agent.act(s)
        agent.remember(s, log_prob, 1.0)
        agent.learn()
"""


def test_replay_memory_of_tuples_gets_no_detach_fix():
    fs = _findings(_A2C.format(item="(s, log_prob, r)", use="-entry[1] * entry[2]"))
    assert [(f.code, f.range.start.line + 1) for f in fs] == [("GG101", 30)]
    assert fs[0].fixes == ()  # [s.detach() for s in agent.memory] would call .detach() on a tuple


def test_history_list_appended_in_the_loop_keeps_its_detach_fix():
    fs = _findings("""
import torch, torch.nn as nn
rnn = nn.GRUCell(2, 2)
h = torch.zeros(1, 2)
history = []
for t in range(3):
    h = rnn(torch.randn(1, 2), history[-1] if history else h)
    history.append(h)
    sum(x.sum() for x in history).backward()
""")
    fixes = [f.preferred_fix for f in fs if f.code == "GG101" and f.preferred_fix is not None]
    assert fixes and any("[s.detach() for s in history]" in e.new_text for fx in fixes for e in fx.edits)


# ---------------------------------------------------------------------------
# a neuron keeping its state inside nn.Sequential: where torch raises is named


def test_container_neuron_finding_names_the_backward():
    fs = _findings("""
import torch, torch.nn as nn

class LIF(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = 0.

    def forward(self, x):
        self.v = self.v * 0.5 + x
        return torch.sigmoid(self.v)

net = nn.Sequential(nn.Linear(3, 4), LIF())
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for i in range(3):
    loss = net(torch.randn(2, 3)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
""")
    assert [(f.code, f.range.start.line + 1) for f in fs] == [("GG101", 15)]
    assert [r.range.start.line + 1 for r in fs[0].related] == [17]


# ---------------------------------------------------------------------------
# a list another method of the object fills with graphs (PPO's old log-probs)

_PPO = """
import torch
import torch.nn as nn
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def act(self, state):
        dist = Categorical(torch.softmax(self.fc(state), -1))
        action = dist.sample()
        return action, dist.log_prob(action)


class Agent:
    def __init__(self):
        self.policy = Policy()
        self.opt = torch.optim.Adam(self.policy.parameters())
        self.actions, self.logprobs = [], []

    def select_action(self, state):
{select}

    def update(self):
{update}
        self.actions, self.logprobs = [], []
"""

_SELECT = """\
        action, logprob = self.policy.act(state)
        self.actions.append(action)
        self.logprobs.append(logprob)"""

_UPDATE = """\
        old_logprobs = torch.stack(self.logprobs)  # 旧的
        for _ in range(3):
            loss = self.policy.fc(torch.ones(4)).sum() - (old_logprobs * 2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()"""


def test_old_log_probs_kept_attached_by_another_method():
    fs = _findings(_PPO.format(select=_SELECT, update=_UPDATE))
    # old_actions is not reported: dist.sample() has no graph (Categorical known while summarising)
    assert [(f.code, f.range.start.line + 1) for f in fs] == [("GG102", 29)]
    assert fs[0].fixes == ()  # the cut belongs in select_action(), another unit
    assert _codes(_PPO.format(select=_SELECT, update=_UPDATE.replace(
        "old_logprobs = torch.stack(self.logprobs)  # 旧的",
        "old_logprobs = torch.stack(self.logprobs)\n        old_actions = torch.stack(self.actions)").replace(
        "(old_logprobs * 2)", "(old_logprobs * old_actions)"))) == [("GG102", 29)]


def test_old_log_probs_silent_twins():
    # kept detached, or computed under no_grad (the post's fix)
    assert _codes(_PPO.format(select=_SELECT.replace("append(logprob)", "append(logprob.detach())"),
                              update=_UPDATE)) == []
    nograd = "        with torch.no_grad():\n            action, logprob = self.policy.act(state)\n" + \
        "\n".join(_SELECT.splitlines()[1:])
    assert _codes(_PPO.format(select=nograd, update=_UPDATE)) == []
    # REINFORCE: each kept log-prob back-propagated once, one per iteration
    each = ("        for log_prob, a in zip(self.logprobs, self.actions):\n"
            "            self.opt.zero_grad()\n            (-log_prob).backward()\n            self.opt.step()")
    assert _codes(_PPO.format(select=_SELECT, update=each)) == []
    listed = ("        saved = self.logprobs\n        for i, log_prob in enumerate(saved):\n"
              "            (-log_prob).backward()")
    assert _codes(_PPO.format(select=_SELECT, update=listed)) == []
    # one backward of the summed log-probs after the loop that builds the loss
    once = ("        loss = 0\n        for log_prob in self.logprobs:\n            loss = loss - log_prob\n"
            "        self.opt.zero_grad()\n        loss.backward()\n        self.opt.step()")
    assert _codes(_PPO.format(select=_SELECT, update=once)) == []


def test_container_neuron_fix_cuts_between_batches_not_between_time_steps():
    text = src("""
import torch, torch.nn as nn

class LIF(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = 0.

    def forward(self, x):
        self.v = self.v * 0.5 + x
        return torch.sigmoid(self.v)

net = nn.Sequential(nn.Linear(3, 4), LIF())
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for epoch in range(2):
    for i in range(3):
        out = 0.
        for t in range(4):
            out += net(torch.randn(2, 3))
        opt.zero_grad()
        out.sum().backward()
        opt.step()
""")
    fs = check_source(text).findings
    assert [(f.code, f.range.start.line + 1) for f in fs] == [("GG101", 18)]
    (edit,) = fs[0].preferred_fix.edits
    # before `for t in range(4):` (line 17, an iteration of the batch loop starts there), not
    # before line 18 inside it: a cut between time steps would change the first step's gradients
    assert edit.range.start.line + 1 == 17 and edit.new_text.startswith("        for ")
