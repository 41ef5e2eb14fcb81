"""GG203's fact source: modules that keep a recurrent state on themselves.

Key written (one per top-level class that has such a state):

* ``gg203:state:<Class>`` -- ``((attr, (reset, ...)), ...)``: an attribute that
  ``__init__`` sets to a fresh tensor (``self.h = torch.zeros(...)``) and that
  ``forward`` sets to a detached value each call (``self.h = h.detach()``), with
  the other methods that reset it (``self.h.zero_()``, ``self.h = ...``). Written
  only for an attribute with at least one reset method: the class then says the
  state is meant to be reset, and a loop that never calls one carries it over.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis.summary import FactSource

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Set, Tuple

STATE = "gg203:state:"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FRESH = frozenset({"zeros", "ones", "randn", "rand", "empty", "full", "zeros_like", "ones_like", "tensor"})
_RESETS = frozenset({"zero_", "fill_", "normal_", "uniform_"})


def _self_attr(t: ast.AST, selfname: str) -> "str | None":
    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == selfname:
        return t.attr
    return None


def _assigned(d: ast.AST, selfname: str) -> "List[Tuple[str, ast.expr]]":
    out = []
    for n in A.body_nodes(d):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                a = _self_attr(t, selfname)
                if a is not None:
                    out.append((a, n.value))
    return out


def summarize_state_facts(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    if not isinstance(stmt, ast.ClassDef):
        return []
    methods = {s.name: s for s in stmt.body if isinstance(s, _DEFS) and s.args.args}
    init, forward = methods.get("__init__"), methods.get("forward")
    if init is None or forward is None:
        return []
    fresh: "Set[str]" = set()
    for attr, v in _assigned(init, init.args.args[0].arg):
        if isinstance(v, ast.Call) and (A.dotted(v.func) or "").rsplit(".", 1)[-1] in _FRESH:
            fresh.add(attr)
    if not fresh:
        return []
    carried = {attr for attr, v in _assigned(forward, forward.args.args[0].arg) if attr in fresh and A.is_graph_cut(v)}
    if not carried:
        return []
    resets: "Dict[str, List[str]]" = {}
    for name, d in methods.items():
        if name in ("__init__", "forward"):
            continue
        me = d.args.args[0].arg
        hit = {a for a, _ in _assigned(d, me)}
        for n in A.body_nodes(d):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _RESETS:
                a = _self_attr(n.func.value, me)
                if a is not None:
                    hit.add(a)
        for a in hit & carried:
            resets.setdefault(a, []).append(name)
    if not resets:
        return []
    return [(STATE + stmt.name, tuple((a, tuple(sorted(r))) for a, r in sorted(resets.items())))]


STATE_FACTS = FactSource("gg203", summarize_state_facts)
