"""The contract every rule implements."""

from __future__ import annotations

from gradguard.model.findings import Finding, Severity
from gradguard.model.i18n import pick

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import ClassVar, Iterable, Mapping, Tuple

    from gradguard.analysis.context import ModuleContext, Unit
    from gradguard.analysis.summary import FactSource


class Rule:
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""  # kebab-case, e.g. "carried-graph"
    default_severity: ClassVar[Severity] = Severity.ERROR
    # One line, both languages: {"en": ..., "zh": ...}
    title: ClassVar[Mapping[str, str]] = {}
    # Markdown, ruff-style sections: what it does / why / example / fix / FAQ.
    # The same text serves `gradguard rule CODE`, hovers and docs/rules/*.md.
    explanation: ClassVar[Mapping[str, str]] = {}
    # True when the rule can only report where something back-propagates (a
    # graph freed by backward() and then reused). When every enabled rule says
    # so, a one-shot check of a file in which nothing can back-propagate
    # (``engine.may_backprop``) only parses it.
    needs_backprop: ClassVar[bool] = False
    # Its messages, fix titles or data name line numbers ("freed on line 26"): a cached
    # finding moved by an edit above it would name the old lines, so the engine
    # analyses the unit again instead of shifting the finding.
    names_lines: ClassVar[bool] = False
    # The module facts this rule reads (``ctx.summary``), declared, never
    # registered as a side effect of an import: the registry collects them
    # (:func:`gradguard.rules.fact_sources`) and the engine summarises every
    # file with them. A source's ``backprop_prefixes`` tell the engine which of
    # its fact tables only describe code that back-propagates.
    fact_sources: ClassVar[Tuple[FactSource, ...]] = ()

    def check(self, unit: "Unit", ctx: "ModuleContext") -> Iterable[Finding]:
        """Findings for one unit of analysis (a function body, or the
        module-level statements). Must not descend into nested function or
        class bodies: those are units of their own."""
        raise NotImplementedError

    def explain(self, lang: str = "en") -> str:
        return pick(self.explanation, lang)

    def docs_url(self) -> str:
        from gradguard import DOCS_BASE

        return f"{DOCS_BASE}/{self.code}.md"
