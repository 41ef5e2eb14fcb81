"""The contract every rule implements."""

from __future__ import annotations

from gradguard.model.findings import Finding, Severity
from gradguard.model.i18n import pick

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import ClassVar, Iterable, List, Mapping, Optional, Pattern, Tuple, Union

    from gradguard.analysis.context import ModuleContext, Unit
    from gradguard.analysis.summary import FactSource


class Trigger:
    """What a unit must show before a rule can find anything in it, declared
    (``Rule.trigger``) instead of tested at the top of ``check``. The engine
    answers each condition once per unit, whichever rules declare it, and calls
    ``check`` only on the units that meet every condition of the rule's trigger
    (``engine.document.unit_meets``). A unit without statements meets none.

    - ``torch``: the unit's imports (the module's, and a function's own) name
      torch or a part of it (the GG2xx rules judge values by torch's semantics;
      in a file of another framework they stay silent);
    - ``not_other_framework``: weaker, the unit's imports are not another
      framework's alone (MXNet, Paddle, ...: ``knowledge.other_framework_only``);
      a file that imports nothing meets it (GG101, GG103: a training step written
      in a helper module that never imports torch itself);
    - ``text``: each entry occurs in the unit's source text
      (``analysis.context.unit_text``: nested defs, comments and strings
      included); an entry that is a tuple is met by any one of its strings;
    - ``words``: the same for whole words of that text
      (``analysis.context.unit_words``, NFKC-folded as Python folds names);
    - ``words_or_name``: as ``words``, or a part of the function's own name between
      underscores (``_eval_step`` says ``eval`` though its body may not).

    Cheap by design (a look at the import table and the text, no walk): it
    only says where the rule need not run, so it may err towards running."""

    __slots__ = ("conditions",)

    def __init__(self, *, torch: bool = False, not_other_framework: bool = False,
                 text: "Iterable[Union[str, Tuple[str, ...]]]" = (),
                 words: "Iterable[Union[str, Tuple[str, ...]]]" = (),
                 words_or_name: "Iterable[Union[str, Tuple[str, ...]]]" = ()) -> None:
        conditions: "List[Tuple[str, ...]]" = [("torch",)] if torch else []
        if not_other_framework:
            conditions.append(("not-other-framework",))
        conditions.extend(("text",) + _alternatives(e) for e in text)
        conditions.extend(("words",) + _alternatives(e) for e in words)
        conditions.extend(("words-or-name",) + _alternatives(e) for e in words_or_name)
        # each ("torch",) | ("not-other-framework",) | ("text", s, ...) | ("words", w, ...) |
        # ("words-or-name", w, ...):
        # the key its answer is shared under
        self.conditions: Tuple[Tuple[str, ...], ...] = tuple(conditions)

    def __repr__(self) -> str:
        return f"Trigger{self.conditions!r}"


def _alternatives(entry: "Union[str, Tuple[str, ...]]") -> "Tuple[str, ...]":
    return (entry,) if isinstance(entry, str) else tuple(entry)


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
    # ... except in a text this pattern finds (searched in the text as written): then the
    # rule alone runs there (GG201: an inference script's ``model.eval()``, whose loop
    # runs the model with graph recording on)
    also_without_backprop: ClassVar[Optional[Pattern[str]]] = None
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
    # What a unit must show before this rule can report in it (:class:`Trigger`):
    # the engine tests it once per unit, sharing the answers among the rules, and
    # does not call ``check`` where it fails. None: ``check`` runs on every unit.
    trigger: ClassVar[Optional[Trigger]] = None

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
