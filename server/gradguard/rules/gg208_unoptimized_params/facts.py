"""GG208's fact source: which modules the file's optimizers own, which it leaves
alone on purpose, which classes are modules with parameters, which functions
replace a submodule of an object they are handed.

Keys written (each top-level statement on its own; every key a fact of the
whole file, so that a method can ask about an optimizer built elsewhere):

* ``gg208:owned:<last>`` -- an optimizer is built from ``X.parameters()`` (or
  ``X.named_parameters()``, in a list, a group dict, a comprehension, a local
  name filled from them) with ``X`` dotted and ``<last>`` its last part
  (``self.q_net`` -> ``q_net``): every module of that name counts as owned;
* ``gg208:owned-bare:<name>`` -- the same with a bare name (``model.parameters()``):
  it may hold any module the rule asks about;
* ``gg208:owned-class:<Class>`` -- ``self.parameters()`` in a method of ``Class``:
  every instance owns its parameters;
* ``gg208:owned-opaque`` -- an optimizer built from something the summary cannot
  reduce to ``.parameters()`` calls (``optim.Adam(params)`` of an unknown
  ``params``, ``model.get_groups()``): anything may be owned;
* ``gg208:alone:<last>`` -- a module left out of training on purpose, or updated
  by other means: ``X.requires_grad_(False)``, ``for p in X.parameters():
  p.requires_grad = False``, a call named for freezing or ``requires_grad`` with
  ``X`` among its arguments, a loop over ``X.parameters()`` that reads ``.grad``
  (a hand-written update), ``X`` handed to a constructor or added to a container
  (a wrapper whose parameters an optimizer may own);
* ``gg208:stepped:<part>`` -- a ``.step()`` call's receiver goes through an attribute of
  that name (``self.q_eval.optimizer.step()``: ``q_eval``): an optimizer a network
  builds for itself is stepped through it;
* ``gg208:class:<Class>`` -- ``(is_module, has_parameters, own_optimizer, steps)`` of a
  top-level class (``steps``: a method of it calls some ``.step()``);
* ``gg208:submodules:<Class>`` -- the attributes ``__init__`` binds once to a torch layer
  with parameters and ``forward`` calls (``self.pooler = nn.Linear(...)``, ``self.pooler(h)``);
* ``gg208:groups:<Class>.<method>`` -- the attributes whose ``.parameters()`` a method
  returns (``[{"params": self.model.parameters()}, ...]``), when every returned
  value reduces to such calls;
* ``gg208:replaces:<function>`` -- ``(param_index, ...)``: the top-level function
  assigns a module with parameters to an attribute of those parameters
  (``model.fc1, model.fc2 = new_fc1, new_fc2``, ``setattr(model, name, layer)``).
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.summary import FactSource

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, Iterable, List, Optional, Set, Tuple

OWNED = "gg208:owned:"
OWNED_BARE = "gg208:owned-bare:"
OWNED_CLASS = "gg208:owned-class:"
OWNED_OPAQUE = "gg208:owned-opaque"
ALONE = "gg208:alone:"
CLASS = "gg208:class:"
REPLACES = "gg208:replaces:"
STEPPED = "gg208:stepped:"
SUBMODULES = "gg208:submodules:"
GROUPS = "gg208:groups:"

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Module"})
_PARAM_METHODS = frozenset({"parameters", "named_parameters"})
_ADDERS = frozenset({"append", "extend", "add_module", "register_module", "insert", "update", "__setitem__"})


def is_optimizer_call(call: ast.AST, ctx=None) -> bool:
    """``torch.optim.Adam(...)``, ``optim.SGD(...)`` (not a scheduler)."""
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    if f.__class__ is ast.Attribute and not f.attr[:1].isupper():
        return False  # (the qualified name ends with the attribute: not a class; cheap, most calls)
    q = A.qualify(f, ctx) or ""
    if not q.startswith(K.OPTIMIZER_PREFIXES) or ".lr_scheduler" in q or ".swa_utils" in q:
        return False
    last = q.rsplit(".", 1)[-1]
    return last[:1].isupper() and last != "Optimizer"


def layer_with_parameters(call: ast.AST, ctx=None) -> bool:
    """``nn.Linear(...)``, ``torch.nn.Conv2d(...)``, ``nn.Parameter(...)``: a torch module
    (or parameter) that owns parameters; ``nn.Sequential(...)`` when one of its arguments is."""
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    if f.__class__ is ast.Attribute and not f.attr[:1].isupper():
        return False  # (as in is_optimizer_call)
    q = A.qualify(f, ctx) or ""
    if not q.startswith("torch.nn.") or q.startswith("torch.nn.functional."):
        return False
    last = q.rsplit(".", 1)[-1]
    if not last[:1].isupper() or last in K.PARAMETERLESS_MODULES or last.endswith("Loss"):
        return False
    if last in _CONTAINERS:
        return any(layer_with_parameters(a, ctx) for a in call.args)
    return True


def parameter_owners(expr: ast.AST, local: "Dict[str, List[ast.AST]]") -> "Tuple[Set[str], bool]":
    """The dotted receivers of ``.parameters()`` calls in ``expr`` (following bare
    names through ``local``: what the function assigns or appends to them), and
    whether something in it could not be reduced to such calls."""
    owners: "Set[str]" = set()
    opaque = False
    seen: "Set[str]" = set()
    todo = [expr]
    while todo:
        e = todo.pop()
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)) and all(isinstance(x, ast.Constant) for x in e.elts) \
                or (isinstance(e, ast.Dict) and not e.keys):
            continue  # groups = [] or [None] * k: filled below (what fills it is followed too)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and isinstance(e.left, ast.List) \
                and all(isinstance(x, ast.Constant) for x in e.left.elts):
            continue
        found = False
        names: "List[str]" = []
        funcs = {id(n.func) for n in A.walk_all(e) if isinstance(n, ast.Call)}
        inner = {id(n.value) for n in A.walk_all(e) if isinstance(n, ast.Attribute)}
        # filter(lambda p: p.requires_grad, m.parameters()): the predicate hands over nothing
        inner.update(id(n) for lam in A.walk_all(e) if isinstance(lam, ast.Lambda) for n in A.walk_all(lam.body))
        for n in A.walk_all(e):
            if isinstance(n, ast.Attribute) and id(n) not in funcs and id(n) not in inner:
                d = A.dotted(n)
                if d is not None:  # ``[self.log_alpha]``: a tensor handed over directly
                    owners.add(d)
                    found = True
                    continue
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in _PARAM_METHODS):
                d = A.dotted(n.func.value)
                if d is None:
                    opaque = True
                else:
                    owners.add(d)
                found = True
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                names.append(n.id)
        if found:
            continue
        # no .parameters() in it: a name filled elsewhere in the function, or something opaque
        resolved = False
        for name in names:
            if name in seen or name not in local:
                continue
            seen.add(name)
            todo.extend(local[name])
            resolved = True
        if not resolved:
            opaque = True
    return owners, opaque


def _local_fills(body_owner: ast.AST) -> "Dict[str, List[ast.AST]]":
    """name -> the expressions a def (or the module) assigns, appends or adds to it."""
    return fills_of(A.walk_all(body_owner))


def fills_of(nodes: "Iterable[ast.AST]") -> "Dict[str, List[ast.AST]]":
    """name -> the expressions the nodes (a def's, a statement's, a unit's) assign to it, to an
    item of it (``groups[i] = ...``), add to it (``groups += [...]``) or append, extend or
    update it with: GG208's one table of what fills a name, for the facts and the rule."""
    out: "Dict[str, List[ast.AST]]" = {}
    for n in nodes:
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(n.value)
                elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    out.setdefault(t.value.id, []).append(n.value)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.setdefault(n.target.id, []).append(n.value)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr in ("append", "extend", "update") and isinstance(n.func.value, ast.Name)):
            out.setdefault(n.func.value.id, []).extend(n.args)
    return out


def _last(d: str) -> str:
    return d.rsplit(".", 1)[-1]


def _owner_facts(stmt: ast.stmt, out: "Dict[str, object]") -> None:
    scopes: "List[Tuple[ast.AST, Optional[str]]]" = []  # (def or statement, class name)
    if isinstance(stmt, ast.ClassDef):
        scopes = [(s, stmt.name) for s in stmt.body if isinstance(s, _DEFS)]
    else:
        scopes = [(stmt, None)]
    for scope, cls in scopes:
        local = None
        for n in (A.walk_all_list(scope) if cls is None else A.walk_all(scope)):
            if not isinstance(n, ast.Call) or not is_optimizer_call(n):
                continue
            args = list(n.args[:1]) + [k.value for k in n.keywords if k.arg == "params"]
            if local is None:
                local = _local_fills(scope)
            for a in args:
                owners, opaque = parameter_owners(a, local)
                if opaque:
                    out[OWNED_OPAQUE] = True
                for d in owners:
                    if d == "self" and cls is not None:
                        out[OWNED_CLASS + cls] = True
                    elif "." in d:
                        out[OWNED + _last(d)] = True
                    else:
                        out[OWNED_BARE + d] = True
            if not args:
                out[OWNED_OPAQUE] = True


def _freezes(call: ast.Call) -> bool:
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    low = name.lower()
    return "freeze" in low or "requires_grad" in low or "frozen" in low


def _alone_facts(stmt: ast.stmt, out: "Dict[str, object]") -> None:
    for n in A.walk_all_list(stmt):
        if isinstance(n, ast.For):
            owner = A.frozen_by_loop(n)
            if owner is not None:
                out[ALONE + _last(owner)] = True
                continue
            it = n.iter
            if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _PARAM_METHODS
                    and A.dotted(it.func.value) is not None
                    and any(isinstance(m, ast.Attribute) and m.attr in ("grad", "requires_grad")
                            for m in A.walk_all(n))):
                out[ALONE + _last(A.dotted(it.func.value) or "")] = True  # a hand-written update, or a freeze
        elif isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
                d = A.dotted(f.value)
                if d is not None:
                    out[ALONE + _last(d)] = True
                continue
            args = list(n.args) + [k.value for k in n.keywords]
            flat: "List[ast.AST]" = []
            for a in args:
                a = a.value if isinstance(a, ast.Starred) else a
                flat.extend(a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])
            named = [d for d in (A.dotted(a) for a in flat) if d is not None and "." in d]
            if not named:
                continue
            callee = A.dotted(f) or ""
            last = _last(callee)
            wraps = (last[:1].isupper() and not is_optimizer_call(n)) or (
                isinstance(f, ast.Attribute) and f.attr in _ADDERS)
            if wraps or _freezes(n):
                for d in named:
                    out[ALONE + _last(d)] = True
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute):
            # ``self.encoder = model.encoder``: a module shared with another owner
            d = A.dotted(n.value)
            if d is not None and "." in d:
                for t in n.targets:
                    td = A.dotted(t)
                    if td is not None:
                        out[ALONE + _last(td)] = True


def class_facts(node: ast.ClassDef) -> "Tuple[bool, bool, bool, bool]":
    is_module = any((A.dotted(b) or "").endswith("Module") for b in node.bases)
    has_params = False
    own_opt = steps = False
    for n in A.walk_all_list(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step":
            steps = True
        if layer_with_parameters(n):
            has_params = True
        if isinstance(n, ast.Call) and is_optimizer_call(n):
            args = list(n.args[:1]) + [k.value for k in n.keywords if k.arg == "params"]
            if any(owner == "self" for a in args for owner in parameter_owners(a, {})[0]):
                own_opt = True
    return is_module, has_params, own_opt, steps


def _stepped_facts(stmt: ast.stmt, out: "Dict[str, object]") -> None:
    for n in A.walk_all_list(stmt):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step":
            d = A.dotted(n.func.value)
            for part in (d or "").split(".")[:-1]:
                if part != "self":
                    out[STEPPED + part] = True


def _replaced_params(fn: "ast.FunctionDef | ast.AsyncFunctionDef") -> "Tuple[int, ...]":
    args = fn.args
    params = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    made: "Set[str]" = set()  # local names bound to a layer with parameters
    for n in A.walk_all_list(fn):
        if isinstance(n, ast.Assign) and layer_with_parameters(n.value):
            for t in n.targets:
                made.update(A.target_names(t))
    hit: "Set[int]" = set()

    def layer(v: ast.AST) -> bool:
        return layer_with_parameters(v) or (isinstance(v, ast.Name) and v.id in made)

    for n in A.walk_all_list(fn):
        if isinstance(n, ast.Assign):
            for tgt, val in A.assigned_pairs(n):
                if isinstance(tgt, ast.Attribute) and layer(val):
                    head = (A.dotted(tgt) or "").split(".")[0]
                    if head in params:
                        hit.add(params.index(head))
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"
              and len(n.args) == 3 and isinstance(n.args[0], ast.Name) and layer(n.args[2])):
            if n.args[0].id in params:
                hit.add(params.index(n.args[0].id))
    return tuple(sorted(hit))


def _submodules(node: ast.ClassDef) -> "Tuple[str, ...]":
    methods = {s.name: s for s in node.body if isinstance(s, _DEFS)}
    init, fwd = methods.get("__init__"), methods.get("forward")
    if init is None or fwd is None:
        return ()
    bound: "Dict[str, List[ast.AST]]" = {}
    for n in A.walk_all(node):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(e, ast.Attribute):
                        d = A.dotted(e) or ""
                        # self.x = ..., and self.x.weight = ... (a tied weight: left out)
                        head = d.split(".")
                        if len(head) >= 2 and head[0] == "self":
                            bound.setdefault(head[1], []).append(n.value if len(head) == 2 else n)
    called = {A.dotted(n.func.value) for n in A.walk_all(fwd)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    called |= {A.dotted(n.func) for n in A.walk_all(fwd) if isinstance(n, ast.Call)}
    out = [a for a, vs in bound.items()
           if len(vs) == 1 and layer_with_parameters(vs[0]) and "self." + a in called]
    return tuple(sorted(out))


def _groups(node: ast.ClassDef, out: "Dict[str, object]") -> None:
    for m in node.body:
        if not isinstance(m, _DEFS):
            continue
        rets = [n.value for n in A.walk_all(m) if isinstance(n, ast.Return) and n.value is not None]
        if not rets:
            continue
        local = _local_fills(m)
        attrs: "Set[str]" = set()
        ok = True
        for r in rets:
            owners, opaque = parameter_owners(r, local)
            parts = [o.split(".") for o in owners]
            if opaque or not owners or any(len(p) != 2 or p[0] != "self" for p in parts):
                ok = False
                break
            attrs.update(p[1] for p in parts)
        if ok:
            out[GROUPS + node.name + "." + m.name] = tuple(sorted(attrs))


def summarize_owner_facts(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    out: "Dict[str, object]" = {}
    _owner_facts(stmt, out)
    _alone_facts(stmt, out)
    _stepped_facts(stmt, out)
    if isinstance(stmt, ast.ClassDef):
        out[CLASS + stmt.name] = class_facts(stmt)
        subs = _submodules(stmt)
        if subs:
            out[SUBMODULES + stmt.name] = subs
            _groups(stmt, out)
    elif isinstance(stmt, _DEFS):
        rep = _replaced_params(stmt)
        if rep:
            out[REPLACES + stmt.name] = rep
    return sorted(out.items())


OWNER_FACTS = FactSource("gg208", summarize_owner_facts)
