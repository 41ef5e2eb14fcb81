"""Rule registry. A rule is one module in this package that defines a
:class:`gradguard.rules.base.Rule` subclass and is listed in :data:`gradguard.rules.catalog.RULES`.

Floor 3. The rule modules build on ``rules/base.py`` and ``rules/common.py``
and never import this registry nor each other; the engine (and the front ends
above it) ask it which rules and which fact sources exist."""

from __future__ import annotations

import importlib

from gradguard.rules.base import Rule
from gradguard.rules.catalog import RULES, Declared

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, List, Optional, Tuple, Union

    from gradguard.analysis.summary import FactSource

_RULE_MODULES = tuple(d.module for d in RULES)

_REGISTRY: Optional[Dict[str, Rule]] = None


def _load() -> Dict[str, Rule]:
    global _REGISTRY
    if _REGISTRY is None:
        reg: Dict[str, Rule] = {}
        for mod_name in _RULE_MODULES:
            mod = importlib.import_module(mod_name)
            for obj in vars(mod).values():
                if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and getattr(obj, "code", None):
                    reg[obj.code] = obj()
        _REGISTRY = dict(sorted(reg.items()))
    return _REGISTRY


def all_rules() -> List[Rule]:
    return list(_load().values())


def declared() -> "List[Union[Rule, Declared]]":
    """Every rule, as the registry holds it once loaded, else as the catalog
    declares it (:mod:`gradguard.rules.catalog`: code, ``needs_backprop``,
    ``also_without_backprop``): what deciding that a file needs no rule to run
    reads, without importing the rules."""
    if _REGISTRY is None:
        return list(RULES)
    return list(_REGISTRY.values())


def get_rule(code: str) -> Optional[Rule]:
    return _load().get(str(code).upper())


# (the registry they were collected from, the sources): asked once per chunk summarised
_SOURCES: "Tuple[Optional[Dict[str, Rule]], Tuple[FactSource, ...]]" = (None, ())


def fact_sources() -> Tuple[FactSource, ...]:
    """Every registered rule's fact sources, each once, in rule-code order: the
    summarizers every file is summarised with (all rules', enabled or not, so
    that which facts exist never depends on the configuration). Collected once
    per registry (deduplicating records by equality is thousands of comparisons
    when asked for every chunk)."""
    global _SOURCES
    registry = _load()
    if _SOURCES[0] is registry:
        return _SOURCES[1]
    out: List[FactSource] = []
    for rule in registry.values():
        for src in rule.fact_sources:
            if src not in out:
                out.append(src)
    _SOURCES = (registry, tuple(out))
    return _SOURCES[1]
