"""GG102 stale-graph: a tensor whose graph is built before the loop is back-propagated in every iteration."""

from __future__ import annotations

from gradguard.core.model import Severity
from gradguard.rules.base import Rule


class StaleGraph(Rule):
    code = "GG102"
    name = "stale-graph"
    default_severity = Severity.ERROR
    title = {
        "en": "A tensor whose graph was built before the loop is back-propagated in every iteration",
        "zh": "循环前构建计算图的张量在每轮迭代中被反向传播",
    }
    explanation = {"en": "", "zh": ""}

    def check(self, unit, ctx):
        return ()
