"""State kept where the loop does not see it (issue 12, the held-out corpus's "state"
family): the facts the shared floor keeps about it, and what the rules make of them on
shapes the fixtures (run under torch) do not spell: a library's LightningModule, manual
optimisation, a reset the class inherits, a state handed to a helper between two calls."""

from __future__ import annotations

import ast
import textwrap

from gradguard.analysis.facts import class_facts, framework_loop
from gradguard.engine import check_source


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _classes(text: str):
    tree = ast.parse(src(text))
    return {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}


def _codes(text: str):
    return sorted((f.code, f.range.start.line + 1) for f in check_source(src(text)).findings)


def test_kept_state_of_a_method_other_than_forward():
    classes = _classes("""
        import torch, torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(2, 4)
                self.h = None
            def features(self, x):
                out, self.h = self.lstm(x, self.h)
                return out
            def forget(self):
                self.h = None
            def reset(self):
                self.forget()
            def head(self, x):
                return x.sum()
    """)
    cf = class_facts(classes["Model"])
    assert cf.kept == (("features", ("self.h",)),)
    assert cf.kept_by("features") == ("self.h",) and cf.kept_by("head") == ()
    # a method assigning the state, or calling one that does, may reset it
    assert cf.kept_resets == frozenset({"forget", "reset"})


def test_detached_state_is_not_kept():
    classes = _classes("""
        import torch, torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(2, 4)
                self.h = None
            def features(self, x):
                out, (h, c) = self.lstm(x, self.h)
                self.h = (h.detach(), c.detach())
                return out
    """)
    assert class_facts(classes["Model"]).kept == ()


def test_resets_that_refill_in_place_and_those_that_cut():
    classes = _classes("""
        import torch, torch.nn as nn
        class Zeroing(nn.Module):
            def is_ready(self):
                return all(b.shape != (0,) for b in self.buffers())
            def reset_states(self):
                if self.is_ready():
                    for buffer in self.buffers():
                        buffer.zero_()
        class Cutting(nn.Module):
            def reset_states(self):
                for buffer in self.buffers():
                    buffer.zero_().detach_()
        class Fresh(nn.Module):
            def reset_states(self):
                self.v = torch.zeros(3)
        class Net(nn.Module):
            def reset_states(self):
                for m in self.modules():
                    if isinstance(m, Zeroing):
                        m.reset_states()
    """)
    assert class_facts(classes["Zeroing"]).inplace_resets == frozenset({"reset_states"})
    assert class_facts(classes["Cutting"]).inplace_resets == frozenset()
    assert class_facts(classes["Fresh"]).inplace_resets == frozenset()
    net = class_facts(classes["Net"])
    assert net.dispatch_resets == frozenset({"reset_states"}) and net.inplace_resets == frozenset()


def test_framework_loop_by_the_base_class_name_and_manual_optimisation():
    classes = _classes("""
        import pytorch_lightning as pl
        class Auto(pl.LightningModule):
            def training_step(self, batch, i):
                return batch.sum()
        class Manual(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False
            def training_step(self, batch, i):
                pass
        class Plain:
            def training_step(self, batch, i):
                return batch.sum()
    """)
    assert framework_loop(classes["Auto"], "training_step", {}) == "auto"
    assert framework_loop(classes["Auto"], "validation_step", {}) is None
    assert framework_loop(classes["Manual"], "training_step", {}) == "manual"
    assert framework_loop(classes["Plain"], "training_step", {}) is None


_LIGHTNING = """
    import torch, torch.nn as nn
    import pytorch_lightning as pl
    class Enhancer(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = nn.Linear(4, 4)
            self.saved = None
        def training_step(self, batch, batch_idx):
            target = self.model(batch)
            loss = None
            if self.saved is not None:
                loss = ((self.model(batch) - self.saved) ** 2).mean()
            self.saved = {stored}  # 目标
            return loss
"""


def test_lightning_training_step_keeping_a_graph_for_the_next_step():
    assert _codes(_LIGHTNING.format(stored="target")) == [("GG101", 13)]
    f = check_source(src(_LIGHTNING.format(stored="target"))).findings[0]
    assert "training_step" in f.message["en"] and "training_step" in f.message["zh"]
    assert not f.fixes  # detaching changes what the first steps learn: no edit offered
    assert _codes(_LIGHTNING.format(stored="target.detach()")) == []


def test_lightning_manual_optimisation_is_not_back_propagated_by_the_framework():
    text = _LIGHTNING.format(stored="target").replace(
        "            self.saved = None\n",
        "            self.saved = None\n            self.automatic_optimization = False\n")
    assert _codes(text) == []


_TWO_CALLS = """
    import torch, torch.nn as nn
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.Linear(6, 3)
            self.h = torch.zeros(2, 3)
        def encode(self, x):
            self.h = torch.tanh(self.cell(torch.cat([x, self.h], 1)))
            return self.h
    class Agent:
        def __init__(self):
            self.model = Model()
        def learn(self, x):
            self.model.encode(x).sum().backward()
            {between}
            self.model.encode(x).sum().backward()
"""


def test_second_call_of_a_state_keeping_method_after_a_backward():
    assert _codes(_TWO_CALLS.format(between="pass")) == [("GG103", 16)]
    f = check_source(src(_TWO_CALLS.format(between="pass"))).findings[0]
    assert "self.model.h" in f.message["en"] and "self.model.h" in f.message["zh"]


def test_second_call_after_the_state_is_reset_or_handed_away():
    for between in ("self.model.h = torch.zeros(2, 3)", "self.model.h = self.model.h.detach()",
                    "self.model.h.detach_()", "reset_model(self.model)", "self.model.forget_all()"):
        assert _codes(_TWO_CALLS.format(between=between)) == [], between
