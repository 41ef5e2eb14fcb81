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
  (a wrapper whose parameters an optimizer may own), a loop over ``X`` that gathers its
  items' ``.parameters()``;
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
  (``model.fc1, model.fc2 = new_fc1, new_fc2``, ``setattr(model, name, layer)``);
* ``gg208:made:<Class>:<last>`` -- the class the binding sits in (``""`` outside a class):
  ``X = Class(...)`` binds an instance of a capitalised name to ``X`` (``<last>`` its last
  part: ``model = MyNet(3)`` -> ``model``, ``self.net = MyNet(3)`` in ``Agent`` -> ``net``,
  ``Agent``), so that a class can ask whether an optimizer owns one of its instances; also
  an instance made inside ``nn.Sequential(...)`` / ``nn.ModuleList(...)`` bound to ``X``, and
  in a script's own statements a lower-case class (``n = net(4)``);
* ``gg208:fed:<Class>:<slot>`` -- ``Class(...)`` is given a list or tuple of layers with
  parameters in that argument (``"0"`` for the first positional one, or the keyword).
"""

from __future__ import annotations

import ast
import builtins

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
MADE = "gg208:made:"
FED = "gg208:fed:"

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BUILTINS = frozenset(dir(builtins))
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Module"})
_PARAM_METHODS = frozenset({"parameters", "named_parameters"})
_ADDERS = frozenset({"append", "extend", "add_module", "register_module", "insert", "update", "__setitem__"})


# Without a ctx (the summarizer's case) a name is qualified through A.DEFAULT_ALIASES
# alone, which map a name to a module (``optim`` -> ``torch.optim``): a call of a bare
# name then never qualifies to ``torch.optim.<Class>`` nor ``torch.nn.<Class>``, so
# only ``<...>.<Upper>(...)`` is qualified (tests/test_gg208.py
# asserts it of every alias).


def is_optimizer_call(call: ast.AST, ctx=None) -> bool:
    """``torch.optim.Adam(...)``, ``optim.SGD(...)`` (not a scheduler)."""
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    if f.__class__ is ast.Attribute:
        if not f.attr[:1].isupper():
            return False  # (the qualified name ends with the attribute: not a class; cheap, most calls)
    elif ctx is None:
        return False  # (a bare name qualifies to itself or to a module: see above)
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
    if f.__class__ is ast.Attribute:
        if not f.attr[:1].isupper():
            return False  # (as in is_optimizer_call)
    elif ctx is None:
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
        nodes = list(A.walk_all(e))
        funcs = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        # filter(lambda p: p.requires_grad, m.parameters()): the predicate hands over nothing
        inner.update(id(n) for lam in nodes if isinstance(lam, ast.Lambda) for n in A.walk_all(lam.body))
        for n in nodes:
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


def _owner_facts(stmt: ast.stmt, optimizers: "List[ast.Call]", out: "Dict[str, object]") -> None:
    """The owners of the optimizers built in ``stmt`` (``optimizers``: those calls,
    found by the statement's one scan): in a class, those its methods build."""
    scopes: "List[Tuple[ast.AST, Optional[str], List[ast.Call]]]" = []  # (def or statement, class name, its optimizers)
    if isinstance(stmt, ast.ClassDef):
        for s in stmt.body:
            if isinstance(s, _DEFS):
                mine = [c for c in optimizers if A.within(c, s)]
                if mine:
                    scopes.append((s, stmt.name, mine))
    else:
        scopes = [(stmt, None, optimizers)]
    for scope, cls, calls in scopes:
        local = _LazyFills(scope)
        for n in calls:
            args = list(n.args[:1]) + [k.value for k in n.keywords if k.arg == "params"]
            for a in args:
                owners, opaque = parameter_owners(a, local)  # type: ignore[arg-type]
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


class _Scan:
    """The nodes of one top-level statement that the facts below read, sorted by
    class from one pass over its breadth-first node list (``A.walk_all_list``, the
    list the graph facts made of the same statement just before): each fact reads
    its own short list instead of testing every node again. ``optimizers``: the
    calls that build an optimizer (:func:`is_optimizer_call`, each call asked once)."""

    __slots__ = ("calls", "fors", "assigns", "optimizers")

    def __init__(self, stmt: ast.stmt) -> None:
        calls: "List[ast.Call]" = []
        fors: "List[ast.For]" = []
        assigns: "List[ast.Assign]" = []
        Call, For, Assign = ast.Call, ast.For, ast.Assign
        for n in A.walk_all_list(stmt):
            cls = n.__class__  # (a parsed tree's nodes are of these exact classes)
            if cls is Call:
                calls.append(n)  # type: ignore[arg-type]
            elif cls is Assign:
                assigns.append(n)  # type: ignore[arg-type]
            elif cls is For:
                fors.append(n)  # type: ignore[arg-type]
        self.calls, self.fors, self.assigns = calls, fors, assigns
        self.optimizers = [c for c in calls if is_optimizer_call(c)]


def _alone_facts(scan: _Scan, out: "Dict[str, object]") -> None:
    for loop in scan.fors:
        owner = A.frozen_by_loop(loop)
        if owner is not None:
            out[ALONE + _last(owner)] = True
            continue
        it = loop.iter
        if it.__class__ is ast.Attribute and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _PARAM_METHODS
                for n in A.walk_all(loop)):
            # ``for layer in model.blocks: params += list(layer.parameters())``: the parameters of
            # what ``blocks`` holds are gathered by hand
            d = A.dotted(it)
            if d is not None:
                out[ALONE + _last(d)] = True
            continue
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _PARAM_METHODS
                and A.dotted(it.func.value) is not None
                and any(isinstance(m, ast.Attribute) and m.attr in ("grad", "requires_grad")
                        for m in A.walk_all(loop))):
            out[ALONE + _last(A.dotted(it.func.value) or "")] = True  # a hand-written update, or a freeze
    optimizers = {id(c) for c in scan.optimizers}
    for n in scan.calls:
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
            d = A.dotted(f.value)
            if d is not None:
                out[ALONE + _last(d)] = True
            continue
        if not n.args and not n.keywords:
            continue  # (nothing named below)
        args = list(n.args) + [k.value for k in n.keywords]
        flat: "List[ast.AST]" = []
        for a in args:
            a = a.value if isinstance(a, ast.Starred) else a
            flat.extend(a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])
        named = [d for d in (A.dotted(a) for a in flat if a.__class__ is ast.Attribute) if d is not None]
        if not named:
            continue
        callee = A.dotted(f) or ""
        last = _last(callee)
        wraps = (last[:1].isupper() and id(n) not in optimizers) or (
            isinstance(f, ast.Attribute) and f.attr in _ADDERS)
        if wraps or _freezes(n):
            for d in named:
                out[ALONE + _last(d)] = True
    for asg in scan.assigns:
        if isinstance(asg.value, ast.Attribute):
            # ``self.encoder = model.encoder``: a module shared with another owner
            d = A.dotted(asg.value)
            if d is not None and "." in d:
                for t in asg.targets:
                    td = A.dotted(t)
                    if td is not None:
                        out[ALONE + _last(td)] = True


def _class_facts(node: ast.ClassDef, scan: _Scan) -> "Tuple[bool, bool, bool, bool]":
    is_module = any((A.dotted(b) or "").endswith("Module") for b in node.bases)
    steps = any(isinstance(n.func, ast.Attribute) and n.func.attr == "step" for n in scan.calls)
    has_params = any(layer_with_parameters(n) for n in scan.calls)
    own_opt = False
    for n in scan.optimizers:
        args = list(n.args[:1]) + [k.value for k in n.keywords if k.arg == "params"]
        if any(owner == "self" for a in args for owner in parameter_owners(a, {})[0]):
            own_opt = True
    return is_module, has_params, own_opt, steps


def class_facts(node: ast.ClassDef) -> "Tuple[bool, bool, bool, bool]":
    """``(is_module, has_parameters, own_optimizer, steps)`` of a class (the
    ``gg208:class:`` fact)."""
    return _class_facts(node, _Scan(node))


def _stepped_facts(scan: _Scan, out: "Dict[str, object]") -> None:
    for n in scan.calls:
        if isinstance(n.func, ast.Attribute) and n.func.attr == "step":
            d = A.dotted(n.func.value)
            for part in (d or "").split(".")[:-1]:
                if part != "self":
                    out[STEPPED + part] = True


def _replaced_params(fn: "ast.FunctionDef | ast.AsyncFunctionDef", scan: _Scan) -> "Tuple[int, ...]":
    args = fn.args
    params = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    if not params:
        return ()
    # (cheap first: an assignment to an attribute, or a setattr() call, must be there)
    Attribute = ast.Attribute
    if not any(t.__class__ is Attribute or (t.__class__ is ast.Tuple and any(e.__class__ is Attribute for e in t.elts))
               for n in scan.assigns for t in n.targets) and not any(
            n.func.__class__ is ast.Name and n.func.id == "setattr" for n in scan.calls):
        return ()
    made: "Set[str]" = set()  # local names bound to a layer with parameters
    for asg in scan.assigns:
        if layer_with_parameters(asg.value):
            for t in asg.targets:
                made.update(A.target_names(t))
    hit: "Set[int]" = set()

    def layer(v: ast.AST) -> bool:
        return layer_with_parameters(v) or (isinstance(v, ast.Name) and v.id in made)

    for asg in scan.assigns:
        for tgt, val in A.assigned_pairs(asg):
            if isinstance(tgt, ast.Attribute) and layer(val):
                head = (A.dotted(tgt) or "").split(".")[0]
                if head in params:
                    hit.add(params.index(head))
    for n in scan.calls:
        if (isinstance(n.func, ast.Name) and n.func.id == "setattr"
                and len(n.args) == 3 and isinstance(n.args[0], ast.Name) and layer(n.args[2])):
            if n.args[0].id in params:
                hit.add(params.index(n.args[0].id))
    return tuple(sorted(hit))


def _submodules(node: ast.ClassDef, scan: _Scan) -> "Tuple[str, ...]":
    methods = {s.name: s for s in node.body if isinstance(s, _DEFS)}
    init, fwd = methods.get("__init__"), methods.get("forward")
    if init is None or fwd is None:
        return ()
    bound: "Dict[str, List[ast.AST]]" = {}
    for n in scan.assigns:
        for t in n.targets:
            for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(e, ast.Attribute):
                    d = A.dotted(e) or ""
                    # self.x = ..., and self.x.weight = ... (a tied weight: left out)
                    head = d.split(".")
                    if len(head) >= 2 and head[0] == "self":
                        bound.setdefault(head[1], []).append(n.value if len(head) == 2 else n)
    if not bound:
        return ()
    called: "Set[Optional[str]]" = set()
    read: "Set[str]" = set()
    for x in A.walk_all(fwd):
        if x.__class__ is ast.Call:
            f = x.func
            if f.__class__ is ast.Attribute:
                called.add(A.dotted(f.value))
            called.add(A.dotted(f))
        elif x.__class__ is ast.Attribute and x.value.__class__ is ast.Name and x.value.id == "self":
            read.add(x.attr)
    out = [a for a, vs in bound.items()
           if len(vs) == 1 and ((layer_with_parameters(vs[0]) and "self." + a in called)
                                or (a in read and _trained_parameter(vs[0])))]
    return tuple(sorted(out))


def _trained_parameter(v: ast.AST) -> bool:
    """``nn.Parameter(torch.randn(n, m))``: a weight held directly on the module (read by its
    ``forward``), not one made with ``requires_grad=False``."""
    return (isinstance(v, ast.Call) and (A.dotted(v.func) or "").rsplit(".", 1)[-1] == "Parameter"
            and not any(k.arg == "requires_grad" for k in v.keywords) and len(v.args) <= 1)


class _LazyFills:
    """:func:`_local_fills` of a def, made on the first name looked up (most
    returned values name their parameters at once and look nothing up)."""

    __slots__ = ("_owner", "_fills")

    def __init__(self, owner: ast.AST) -> None:
        self._owner = owner
        self._fills: "Optional[Dict[str, List[ast.AST]]]" = None

    def _get(self) -> "Dict[str, List[ast.AST]]":
        if self._fills is None:
            self._fills = _local_fills(self._owner)
        return self._fills

    def __contains__(self, name: object) -> bool:
        return name in self._get()

    def __getitem__(self, name: str) -> "List[ast.AST]":
        return self._get()[name]


def _groups(node: ast.ClassDef, out: "Dict[str, object]") -> None:
    for m in node.body:
        if not isinstance(m, _DEFS):
            continue
        rets = [n.value for n in A.walk_all(m) if isinstance(n, ast.Return) and n.value is not None]
        if not rets:
            continue
        local = _LazyFills(m)
        attrs: "Set[str]" = set()
        ok = True
        for r in rets:
            owners, opaque = parameter_owners(r, local)  # type: ignore[arg-type]
            parts = [o.split(".") for o in owners]
            if opaque or not owners or any(len(p) != 2 or p[0] != "self" for p in parts):
                ok = False
                break
            attrs.update(p[1] for p in parts)
        if ok:
            out[GROUPS + node.name + "." + m.name] = tuple(sorted(attrs))


def _made_facts(stmt: ast.stmt, scan: _Scan, out: "Dict[str, object]") -> None:
    where = stmt.name if isinstance(stmt, ast.ClassDef) else ""
    # a script's own statement may make an instance of a lower-case class (``n = net(4)``,
    # pytorch#666); in a def or class only a capitalised name is read as one
    script = not isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    for asg in scan.assigns:
        v = asg.value
        if not isinstance(v, ast.Call):
            continue
        made = [v]
        if isinstance(v.func, ast.Attribute) and v.func.attr in ("Sequential", "ModuleList"):
            # ``nn.Sequential(MergeLayer([...]), nn.ReLU(), ...)``: the model holds an instance
            made = [a for a in v.args if isinstance(a, ast.Call) and isinstance(a.func, ast.Name)
                    and a.func.id[:1].isupper()]
        for m in made:
            if not isinstance(m.func, ast.Name):
                continue
            cls = m.func.id
            if not (cls[:1].isupper() or (script and cls[:1].islower() and m is v and cls not in _BUILTINS)):
                continue
            for t in asg.targets:
                d = A.dotted(t)
                if d is not None:
                    out[MADE + cls + ":" + _last(d)] = where if d.startswith("self.") else ""


def _fed_facts(scan: _Scan, out: "Dict[str, object]") -> None:
    """``Merge([nn.Linear(8, 4), nn.Linear(8, 4)], ...)``: the argument slots of a same-file
    class's construction that receive a list or tuple of layers with parameters."""
    for c in scan.calls:
        f = c.func
        if not (isinstance(f, ast.Name) and f.id[:1].isupper()):
            continue
        slots = [(str(i), a) for i, a in enumerate(c.args)] + [(k.arg, k.value) for k in c.keywords if k.arg]
        for slot, a in slots:
            if (isinstance(a, (ast.List, ast.Tuple)) and a.elts
                    and all(layer_with_parameters(e) for e in a.elts)):
                out[FED + f.id + ":" + slot] = True


def summarize_owner_facts(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    out: "Dict[str, object]" = {}
    scan = _Scan(stmt)
    if scan.optimizers:  # (the owners are read from the optimizers' constructions alone)
        _owner_facts(stmt, scan.optimizers, out)
    _alone_facts(scan, out)
    _stepped_facts(scan, out)
    _made_facts(stmt, scan, out)
    _fed_facts(scan, out)
    if isinstance(stmt, ast.ClassDef):
        out[CLASS + stmt.name] = _class_facts(stmt, scan)
        subs = _submodules(stmt, scan)
        if subs:
            out[SUBMODULES + stmt.name] = subs
            _groups(stmt, out)
    elif isinstance(stmt, _DEFS):
        rep = _replaced_params(stmt, scan)
        if rep:
            out[REPLACES + stmt.name] = rep
    return sorted(out.items())


OWNER_FACTS = FactSource("gg208", summarize_owner_facts)
