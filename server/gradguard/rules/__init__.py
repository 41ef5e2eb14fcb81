"""Rule registry. A rule is one module in this package that defines a
:class:`gradguard.rules.base.Rule` subclass and is listed in ``_RULE_MODULES``.

Floor 3. The rule modules build on ``rules/base.py`` and ``rules/common.py``
and never import this registry nor each other; the engine (and the front ends
above it) ask it which rules and which fact sources exist."""

from __future__ import annotations

import importlib

from gradguard.rules.base import Rule

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, List, Optional, Tuple

    from gradguard.analysis.summary import FactSource

_RULE_MODULES = (
    "gradguard.rules.gg101_carried_graph",
    "gradguard.rules.gg102_stale_graph",
    "gradguard.rules.gg103_freed_in_step",
    "gradguard.rules.gg104_inplace_saved",
    "gradguard.rules.gg201_growing_history",
    "gradguard.rules.gg202_data_cut",
    "gradguard.rules.gg203_stale_epoch_state",
    "gradguard.rules.gg204_needless_requires_grad",
    "gradguard.rules.gg205_unzeroed_grads",
    "gradguard.rules.gg206_stuck_in_eval",
    "gradguard.rules.gg207_zeroed_before_step",
    "gradguard.rules.gg208_unoptimized_params",
)

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
