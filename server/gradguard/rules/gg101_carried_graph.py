"""GG101 carried-graph: recurrent state carried across backward() calls without detach."""

from __future__ import annotations

from gradguard.core.model import Severity
from gradguard.rules.base import Rule


class CarriedGraph(Rule):
    code = "GG101"
    name = "carried-graph"
    default_severity = Severity.ERROR
    title = {
        "en": "A value with an autograd graph is carried into the next iteration's backward()",
        "zh": "带计算图的值被带入下一轮迭代的 backward()",
    }
    explanation = {"en": "", "zh": ""}

    def check(self, unit, ctx):
        return ()
