"""The fifth held-out corpus's "graph freed, then reached" shapes, taught in the shared
facts and interpreter (the report fixtures in tests/fixtures/reports prove each under
torch; here: the facts themselves, and what changes a finding into silence)."""

from __future__ import annotations

import ast
import textwrap

from gradguard.analysis.facts import summarize_graph_facts
from gradguard.engine import check_source


def _facts(src: str) -> dict:
    return {k: v for s in ast.parse(textwrap.dedent(src)).body for k, v in summarize_graph_facts(s)}


def _found(src: str):
    return sorted((f.code, f.range.start.line + 1) for f in check_source(textwrap.dedent(src), "t.py").findings)


GAN_HELPER = """\
    import torch
    import torch.nn as nn

    def losses(disc, gen, real):
        fake = gen(torch.randn(4, 3))
        p = torch.sigmoid(disc(fake))
        return -torch.log(1 - p).mean() - torch.log(torch.sigmoid(disc(real))).mean(), -torch.log(p).mean()

    gen = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
    disc = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
    for it in range(3):
        d_loss, g_loss = losses(disc, gen, torch.randn(4, 4))
        opt_d.zero_grad()
        d_loss.backward(retain_graph=True)
        opt_d.step()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
"""


def test_a_helper_says_which_parameter_it_called_on_a_graph_it_built():
    got = _facts(GAN_HELPER)["fn:losses"]
    # both positions hold disc(fake), fake = gen(...) a graph built inside: parameter 0 (disc)
    assert all(0 in rp.called for rp in got.returns)
    # gen is called on fresh noise only (no graph inside reaches its call): not named
    assert all(1 not in rp.called for rp in got.returns)


def test_a_step_of_the_called_module_between_the_helpers_two_losses_is_reported():
    assert _found(GAN_HELPER) == [("GG103", 19)]


def test_the_helpers_losses_back_propagated_before_the_step_are_silent():
    src = GAN_HELPER.replace("        opt_d.step()\n        opt_g.zero_grad()\n        g_loss.backward()\n",
                             "        opt_g.zero_grad()\n        g_loss.backward()\n        opt_d.step()\n")
    assert _found(src) == []


FORWARD_BACKWARD = """\
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x, y):
            logits = self.fc(x)
            loss = nn.functional.cross_entropy(logits, y)
            loss.backward()
            return loss, logits

    class Trainer:
        def __init__(self, model):
            self.model = model

        def fit(self, batches):
            model = self.model
            for x, y in batches:
                self.training_step(model, x, y)

        def training_step(self, model, x, y):
            loss = model(x, y)[0]
            loss.backward()

    net = Net()
    Trainer(net).fit([(torch.randn(2, 4), torch.tensor([0, 1]))] * 3)
"""


def test_a_forward_that_back_propagates_what_it_returns_is_a_fact():
    fwd = _facts(FORWARD_BACKWARD)["class:Net"].method("forward")
    assert fwd.frees_returned
    retained = _facts(FORWARD_BACKWARD.replace("loss.backward()\n            return", "loss.backward(retain_graph=True)\n            return"))
    assert not retained["class:Net"].method("forward").frees_returned
    conditional = _facts(FORWARD_BACKWARD.replace("            loss.backward()\n            return",
                                                  "            if y is not None:\n                loss.backward()\n            return"))
    assert not conditional["class:Net"].method("forward").frees_returned  # not on every path


def test_the_trainers_second_backward_through_a_parameter_bound_to_self_model_is_reported():
    got = check_source(textwrap.dedent(FORWARD_BACKWARD), "t.py").findings
    assert [(f.code, f.range.start.line + 1) for f in got] == [("GG103", 26)]
    assert "already back-propagates the loss it returns" in got[0].message["en"]
    assert not got[0].fixes


def test_the_trainer_reading_only_the_value_is_silent():
    assert _found(FORWARD_BACKWARD.replace("            loss.backward()\n\n    net", "            loss.item()\n\n    net")) == []


LOSS_MODULE = """\
    import torch
    import torch.nn as nn

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, x):
            return self.net(x)

    class GANLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = Critic()
            self.opt = torch.optim.SGD(self.critic.parameters(), lr=0.1)

        def forward(self, fake, real):
            d_fake = self.critic(fake)
            d_loss = d_fake.mean() - self.critic(real).mean()
            self.opt.zero_grad()
            d_loss.backward(retain_graph=True)
            self.opt.step()
            return -d_fake.mean()

    gen = nn.Linear(3, 4)
    criterion = GANLoss()
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
    for it in range(3):
        g_loss = criterion(gen(torch.randn(2, 3)), torch.randn(2, 4))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
"""


def test_a_loss_module_stepping_its_critic_after_building_what_it_returns_is_reported():
    fwd = _facts(LOSS_MODULE)["class:GANLoss"].method("forward")
    assert {(m, o) for m, o, _, _ in fwd.ret.stepped_after} == {("critic", "self.opt")}
    assert _found(LOSS_MODULE) == [("GG103", 32)]


def test_a_loss_module_scoring_with_a_fresh_critic_forward_after_its_step_is_silent():
    src = LOSS_MODULE.replace("            return -d_fake.mean()", "            return -self.critic(fake).mean()")
    assert _fact_free(src)
    assert _found(src) == []


def _fact_free(src: str) -> bool:
    return not _facts(src)["class:GANLoss"].method("forward").ret.stepped_after


SPIKING = """\
    import torch
    import torch.nn as nn

    class Neuron(nn.Module):
        def __init__(self):
            super().__init__()
            self.v = 0.0

        def forward(self, x):
            self.v = self.v + x  # 膜电位
            return torch.sigmoid(self.v)

    def reset_net(net):
        for m in net.modules():
            m.v = 0.0

    net = nn.Sequential(nn.Linear(4, 3), Neuron())
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for it in range(3):
        opt.zero_grad()
        a = net(torch.randn(2, 4))
        b = net(torch.randn(2, 4))
        a.sum().backward()
        b.sum().backward()
        opt.step()
        reset_net(net)
"""


def test_two_forwards_of_a_stateful_sequence_before_one_reset_share_a_graph():
    assert _found(SPIKING) == [("GG103", 24)]


def test_a_reset_between_the_two_forwards_is_silent():
    src = SPIKING.replace("        b = net(torch.randn(2, 4))\n        a.sum().backward()\n",
                          "        a.sum().backward()\n        reset_net(net)\n        b = net(torch.randn(2, 4))\n")
    assert _found(src) == []
