"""GG104's fact source: what a same-file nn.Module class hands back.

Key written, one per top-level class deriving from an nn.Module base:

* ``gg104:class:<Class>`` -- a tuple with one bool per returned tensor (one
  element for a single tensor): True when ``forward`` returns the output of an
  operation that saved it for backward (``self.block(x)`` ending in
  ``nn.ReLU()``, ``torch.sigmoid(...)``), so a caller's in-place edit of it
  (``x = self.conv2(x); x += res``) fails the backward; ``()`` when nothing is
  known of the return value. Computed with the walk of :mod:`.flow` over
  ``forward``, its parameters taken as not requiring grad (only a layer with
  weights inside makes the output saved).
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.summary import FactSource
from gradguard.rules.gg104_inplace_saved import flow as W

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Mapping, Optional, Set, Tuple

CLASS = "gg104:class:"
GLOBAL = "gg104:global:"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MODULE_BASE_NAMES = frozenset(q.rsplit(".", 1)[-1] for q in K.MODULE_BASES)


def is_module_class(cls: ast.ClassDef) -> bool:
    return any((A.dotted(b) or "").rsplit(".", 1)[-1] in _MODULE_BASE_NAMES for b in cls.bases)


def class_layers(cls: ast.ClassDef, qualify, user: "Mapping[str, W.Layer]") -> "Tuple[Dict[str, W.Layer], Set[str]]":
    """The layers a class keeps on ``self`` (``self.relu = nn.ReLU(inplace=True)``)
    and its parameters (``self.w = nn.Parameter(...)``), by "self.<attr>"; an
    attribute assigned two different layers is left out."""
    layers: "Dict[str, W.Layer]" = {}
    params: "Set[str]" = set()
    dropped: "Set[str]" = set()
    for d in cls.body:
        if not isinstance(d, _DEFS) or not d.args.args:
            continue
        me = d.args.args[0].arg
        for n in A.body_nodes(d):
            if not isinstance(n, ast.Assign):
                continue
            for t in n.targets:
                if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me):
                    continue
                key = "self." + t.attr
                if isinstance(n.value, ast.Call) and (qualify(n.value.func) or "").rsplit(".", 1)[-1] == "Parameter":
                    params.add(key)
                    continue
                layer = W.layer_of_constructor(n.value, qualify, user, layers) if isinstance(n.value, ast.Call) \
                    else None
                if layer is None:
                    continue
                if key in layers or key in dropped:
                    layers.pop(key, None)
                    dropped.add(key)
                    continue
                layer.name = key
                layers[key] = layer
    return layers, params


def forward_of(cls: ast.ClassDef) -> "Optional[ast.FunctionDef]":
    for d in cls.body:
        if isinstance(d, ast.FunctionDef) and d.name == "forward" and d.args.args:
            return d
    return None


def summarize_class_facts(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        # a module-level layer (``model = Net()``, ``lin = nn.Linear(3, 3)``), for the functions that call it
        call = stmt.value
        if isinstance(call, ast.Call):
            q = A.qualify(call.func, None) or ""
            if isinstance(call.func, ast.Name) and not q.startswith("torch."):
                return [(GLOBAL + stmt.targets[0].id, "user:" + call.func.id)]
            layer = W.layer_of_constructor(call, lambda e: A.qualify(e, None), {})
            if layer is not None and not layer.inplace:
                return [(GLOBAL + stmt.targets[0].id, layer.kind)]
        return []
    if not isinstance(stmt, ast.ClassDef) or not is_module_class(stmt):
        return []
    fwd = forward_of(stmt)
    if fwd is None:
        return [(CLASS + stmt.name, ())]
    qualify = lambda e: A.qualify(e, None)  # noqa: E731
    layers, params = class_layers(stmt, qualify, {})
    flow = W.Flow(qualify, layers, params, lambda c: A.is_backward_call(c, None))
    try:
        flow.enter(fwd)
        flow.run(fwd.body)
    except RecursionError:
        return [(CLASS + stmt.name, ())]
    outs = flow.returns
    if not outs:
        return [(CLASS + stmt.name, ())]
    shape = _shape(outs[0], flow)
    if shape is None or any(_shape(o, flow) != shape for o in outs[1:]):
        return [(CLASS + stmt.name, ())]
    return [(CLASS + stmt.name, shape)]


def _shape(v: W.Val, flow: W.Flow) -> "Optional[Tuple[bool, ...]]":
    if v.items is not None:
        return tuple(bool(i.stores) and all(s in flow.saved for s in i.stores) for i in v.items)
    if not v.stores:
        return None
    return (all(s in flow.saved for s in v.stores),)


CLASS_FACTS = FactSource("gg104", summarize_class_facts)
