"""Module summaries: the cross-unit facts a rule may use.

Every top-level statement is summarised on its own (and the result cached with
its chunk), into hashable ``(key, fact)`` pairs; the engine merges them into
``ModuleContext.summary`` and fingerprints the merge, so a unit is re-analysed
when a fact it could depend on changes.

Keys are namespaced: ``"import:<alias>"`` (qualified name), and whatever
rules register via :func:`register` (e.g. ``"fn:<name>"``, ``"class:<name>"``,
``"global:<name>"``). Facts must be hashable (frozen records, tuples,
strings) and must not hold AST nodes.
"""

from __future__ import annotations

import ast
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Callable, Iterable, List, Tuple

    Fact = Tuple[str, object]
    Summarizer = Callable[[ast.stmt], Iterable[Fact]]
else:
    Fact = Summarizer = object  # annotation names only

_SUMMARIZERS: List[Summarizer] = []


def register(fn: Summarizer) -> Summarizer:
    """Decorator: add a per-top-level-statement summarizer."""
    _SUMMARIZERS.append(fn)
    return fn


def _import_facts(stmt: ast.stmt) -> Iterable[Fact]:
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            if a.asname:
                yield f"import:{a.asname}", a.name
            else:
                top = a.name.split(".")[0]
                yield f"import:{top}", top
    elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
        for a in stmt.names:
            if a.name == "*":
                continue
            yield f"import:{a.asname or a.name}", f"{stmt.module}.{a.name}"
    elif isinstance(stmt, (ast.If, ast.Try)) or type(stmt).__name__ == "TryStar":
        for field_name in ("body", "orelse", "finalbody"):
            for child in getattr(stmt, field_name, ()):
                yield from _import_facts(child)
        for h in getattr(stmt, "handlers", ()):
            for child in h.body:
                yield from _import_facts(child)


_rules_loaded = False


def summarize(stmt: ast.stmt) -> Tuple[Fact, ...]:
    global _rules_loaded
    if not _rules_loaded:  # rules register their summarizers when imported
        import gradguard.rules

        gradguard.rules.all_rules()
        _rules_loaded = True
    facts: List[Fact] = list(_import_facts(stmt))
    for fn in _SUMMARIZERS:
        facts.extend(fn(stmt))
    return tuple(facts)


def local_imports(body: Iterable[ast.stmt]) -> List[Fact]:
    """Imports inside a function body (``import torch.nn as nn`` in ``main``)."""
    out: List[Fact] = []
    for s in body:
        out.extend(_import_facts(s))
    return out
