"""GG104's fact source: what a same-file nn.Module class hands back.

Key written, one per top-level class deriving from an nn.Module base:

* ``gg104:class:<Class>`` -- a tuple with one bool per returned tensor (one
  element for a single tensor): True when ``forward`` returns the output of an
  operation that saved it for backward (``self.block(x)`` ending in
  ``nn.ReLU()``, ``torch.sigmoid(...)``), so a caller's in-place edit of it
  (``x = self.conv2(x); x += res``) fails the backward; ``()`` when nothing is
  known of the return value. Computed with the walk of :mod:`.flow` over
  ``forward``, its parameters taken as not requiring grad (only a layer with
  weights inside makes the output saved). A forward whose return depends on a
  constructor setting (``if self.activation == "relu": return F.relu(x)``)
  gives ``("if", ...)`` instead (:func:`_configured_shape`), resolved where
  the block is built.
* ``gg104:takes:<Class>`` -- True when ``forward`` saves its first input for backward
  whatever that input is (a LayerNorm, Linear or Conv of its own reads it unchanged
  first): a caller's in-place edit of what it handed the block fails.
* ``gg104:made:<Class>:<line>`` -- what a module-level construction of a class gives its
  ``__init__`` (literal constants, ``flow.SET`` for a dict such as ``act_cfg=dict(type='ReLU')``,
  ``UNREAD`` else): the settings every construction agrees on stand for the defaults the class's
  layers are read with (:func:`made_with`).
* ``gg104:fn:<name>`` -- a custom ``torch.autograd.Function`` (``("fn",
  positions, output)``: the ``forward`` parameters it saves unchanged, and
  whether it saves its result), a module-level alias of its ``apply``
  (``("alias", Class)``) or a function handing its own parameters to some
  ``apply`` (``("wrap", ((Class, positions), ...), params)``).
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.summary import FactSource
from gradguard.rules.gg104_inplace_saved import flow as W

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, FrozenSet, List, Mapping, Optional, Set, Tuple

CLASS = "gg104:class:"
GLOBAL = "gg104:global:"
# a custom autograd.Function (``gg104:fn:<Class>``) or a module-level name calling its ``apply``
# (``def softsplat(a, b): return _Fn.apply(a, b)``, ``softsplat = _Fn.apply``): see :func:`_function_fact`
FN = "gg104:fn:"
# ``gg104:ctor:<Class>:<line>`` -- the module-level names a module-level construction of a class
# hands to it, ``((positional name or None, ...), ((keyword, name), ...))``
CTOR = "gg104:ctor:"
# ``gg104:edits:<name>`` -- what calling a module-level function (or a module class of the file)
# edits in place: ``(edits, inner)`` (:func:`callee_edits`)
EDITS = "gg104:edits:"
# ``gg104:takes:<Class>`` -- True: the class's ``forward`` saves its (first) input for backward
# whatever that input is (a LayerNorm, Linear or Conv of its own reads it unchanged first), so a
# caller's in-place edit of what it handed the block fails (``h += self.ff1(h)``)
TAKES = "gg104:takes:"
# ``gg104:made:<Class>:<line>`` -- what a module-level construction of a class gives its
# parameters: ``((position or -1, keyword or "", value), ...)``, the value a literal constant,
# :data:`.flow.SET` for a dict (``act_cfg=dict(type='ReLU')``), :data:`UNREAD` for anything else
MADE = "gg104:made:"
UNREAD = "<?>"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MODULE_BASE_NAMES = frozenset(q.rsplit(".", 1)[-1] for q in K.MODULE_BASES)


def is_module_class(cls: ast.ClassDef) -> bool:
    return any((A.dotted(b) or "").rsplit(".", 1)[-1] in _MODULE_BASE_NAMES for b in cls.bases)


def class_layers(cls: ast.ClassDef, qualify, user: "Mapping[str, W.Layer]",
                 made: "Optional[Mapping[str, object]]" = None) -> "Tuple[Dict[str, W.Layer], Set[str]]":
    """The layers a class keeps on ``self`` (``self.relu = nn.ReLU(inplace=True)``)
    and its parameters (``self.w = nn.Parameter(...)``), by "self.<attr>"; an
    attribute assigned two different layers is left out. ``made``: what the file's
    constructions of the class give its parameters (:func:`made_with`), over the defaults."""
    layers: "Dict[str, W.Layer]" = {}
    params: "Set[str]" = set()
    dropped: "Set[str]" = set()
    defaults = _init_defaults(cls)
    for name, v in (made or {}).items():
        if v == UNREAD:
            defaults.pop(name, None)
        else:
            defaults[name] = v
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
                if key in layers and isinstance(n.value, ast.Call) and n.value.args \
                        and (A.dotted(n.value.func) or "").rsplit(".", 1)[-1] in _SAME_MODULE_WRAPPERS \
                        and _wraps(ast.Call(n.value.func, n.value.args[:1], []), t):
                    continue  # ``self.conv = weight_norm(self.conv, ...)`` hands back the same module
                layer = W.layer_of_constructor(n.value, qualify, user, layers, defaults) \
                    if isinstance(n.value, ast.Call) else None
                if layer is None and d.name == "__init__" and isinstance(n.value, ast.Call) \
                        and isinstance(n.value.func, ast.Name) and n.value.func.id in _param_names(d):
                    # ``self.encoder_q = base_encoder(num_classes=dim)``: a model class handed to the
                    # constructor (MoCo), a module with weights nothing more is known of
                    layer = W.Layer("unknown", n.value, weighted=True)
                if layer is None:
                    continue
                if key in layers and layer.kind == "Sequential" and isinstance(n.value, ast.Call) and _wraps(n.value, t):
                    # ``self.pos_conv = nn.Sequential(self.pos_conv, SamePad(k), nn.GELU())``: the
                    # Sequential holds the layer it replaces (BEATs), so the later binding is the layer
                    layer.name = key
                    layers[key] = layer
                    continue
                if key in layers or key in dropped:
                    layers.pop(key, None)
                    dropped.add(key)
                    continue
                layer.name = key
                layers[key] = layer
    _added_modules(cls, qualify, user, layers, defaults)
    return layers, params


# ``torch.nn.utils`` calls returning the module they are handed (its weight reparametrized)
_SAME_MODULE_WRAPPERS = frozenset({"weight_norm", "spectral_norm"})


def _wraps(call: ast.Call, target: ast.Attribute) -> bool:
    """Is the attribute assigned (``self.pos_conv``) an element of the Sequential assigned to it?"""
    return any(isinstance(a, ast.Attribute) and a.attr == target.attr and isinstance(a.value, ast.Name)
               and isinstance(target.value, ast.Name) and a.value.id == target.value.id for a in call.args)


def _param_names(fn: "ast.FunctionDef | ast.AsyncFunctionDef") -> "Set[str]":
    a = fn.args
    return {p.arg for p in a.posonlyargs + a.args[1:] + a.kwonlyargs}


def _init_defaults(cls: ast.ClassDef) -> "Dict[str, object]":
    """The literal defaults of the class's ``__init__`` parameters, by name."""
    init = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"), None)
    if init is None:
        return {}
    a = init.args
    pos = a.posonlyargs + a.args
    out: "Dict[str, object]" = {}
    for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
        if isinstance(d, ast.Constant):
            out[p.arg] = d.value
    for p, kd in zip(a.kwonlyargs, a.kw_defaults):
        if isinstance(kd, ast.Constant):
            out[p.arg] = kd.value
    return out


def _added_modules(cls: ast.ClassDef, qualify, user, layers: "Dict[str, W.Layer]", defaults) -> None:
    """``self.body = nn.Sequential()`` then ``self.body.add_module("block1", Block(...))`` (in a
    loop, or one by one): the elements, in the order the constructor adds them."""
    seqs = {k for k, v in layers.items() if v.kind == "Sequential"}
    lists = {k for k, v in layers.items() if v.kind == "ModuleList" and v.items is None
             and isinstance(v.node, ast.Call) and not v.node.args and not v.node.keywords}
    if not seqs and not lists:
        return
    init = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"), None)
    if init is None or not init.args.args:
        return
    me = init.args.args[0].arg
    if lists:
        _appended_modules(init, me, lists, qualify, user, layers, defaults)
    if not seqs:
        return
    for n in A.body_nodes(init):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr == "add_module" and len(n.args) == 2:
            owner = f.value
            key = "self." + owner.attr if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) \
                and owner.value.id == me else None
            if key in seqs:
                item = n.args[1]
                sub = W.layer_of_constructor(item, qualify, user, layers, defaults)
                if sub is None:
                    sub = W.Layer("unknown", item if isinstance(item, ast.Call) else None, weighted=True)
                seq = layers[key]
                seq.items = (seq.items or []) + [sub]
                seq.weighted = seq.weighted or sub.weighted


def _appended_modules(init, me: str, lists, qualify, user, layers: "Dict[str, W.Layer]", defaults) -> None:
    """``self.lateral_convs = nn.ModuleList()`` then ``self.lateral_convs.append(l_conv)`` in
    ``__init__`` (``l_conv = ConvModule(...)`` bound once before it): a ModuleList of one kind
    of block, known by that kind when every block appended is built the same way."""
    built: "Dict[str, List[ast.expr]]" = {}
    for n in A.body_nodes(init):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            built.setdefault(n.targets[0].id, []).append(n.value)
    found: "Dict[str, List[Optional[W.Layer]]]" = {}
    for n in A.body_nodes(init):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append"
                and len(n.args) == 1 and not n.keywords):
            continue
        owner = n.func.value
        key = "self." + owner.attr if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) \
            and owner.value.id == me else None
        if key not in lists:
            continue
        item: "Optional[ast.expr]" = n.args[0]
        if isinstance(item, ast.Name):
            made = built.get(item.id, [])
            item = made[0] if len(made) == 1 else None
        sub = W.layer_of_constructor(item, qualify, user, layers, defaults) if item is not None else None
        found.setdefault(str(key), []).append(sub)
    for key, subs in found.items():
        first = subs[0]
        if first is not None and all(x is not None and W._same_layer(x, first) for x in subs):
            layers[key].items = [first]


def forward_of(cls: ast.ClassDef) -> "Optional[ast.FunctionDef]":
    for d in cls.body:
        if isinstance(d, ast.FunctionDef) and d.name == "forward" and d.args.args:
            return d
    return None


def summarize_class_facts(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Tuple) \
            and isinstance(stmt.value, ast.Tuple) and len(stmt.targets[0].elts) == len(stmt.value.elts):
        # ``actor, critic = Actor(), Critic()``: each pair as its own assignment
        out: "List[Tuple[str, object]]" = []
        for t, v in zip(stmt.targets[0].elts, stmt.value.elts):
            if isinstance(t, ast.Name) and isinstance(v, ast.Call):
                out.extend(summarize_class_facts(ast.Assign([t], v, lineno=stmt.lineno)))
        return out
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        # a module-level layer (``model = Net()``, ``lin = nn.Linear(3, 3)``), for the functions that call it
        call = stmt.value
        if isinstance(call, ast.Call):
            q = A.qualify(call.func, None) or ""
            if isinstance(call.func, ast.Name) and not q.startswith("torch."):
                facts: "List[Tuple[str, object]]" = [(GLOBAL + stmt.targets[0].id, "user:" + call.func.id)]
                args = tuple(a.id if isinstance(a, ast.Name) else None for a in call.args)
                kws = tuple((k.arg, k.value.id if isinstance(k.value, ast.Name) else None)
                            for k in call.keywords if k.arg)
                if call.args or call.keywords:
                    # what an object of a plain class is built with (``policy = DDPGPolicy(actor, ...)``)
                    facts.append((f"{CTOR}{call.func.id}:{stmt.lineno}", (args, kws)))
                # (every construction, one without arguments too: the settings all of them agree on)
                given = tuple((i, "", _given(a)) for i, a in enumerate(call.args)) + tuple(
                    (-1, k.arg or "", _given(k.value)) for k in call.keywords)
                facts.append((f"{MADE}{call.func.id}:{stmt.lineno}", given))
                return facts
            layer = W.layer_of_constructor(call, lambda e: A.qualify(e, None), {})
            if layer is not None and not layer.inplace:
                return [(GLOBAL + stmt.targets[0].id, layer.kind)]
            return []
        if isinstance(call, ast.Attribute) and call.attr == "apply" and isinstance(call.value, ast.Name):
            return [(FN + stmt.targets[0].id, ("alias", call.value.id))]  # ``softsplat = _FunctionSoftsplat.apply``
        return []
    if isinstance(stmt, ast.FunctionDef):
        out = _apply_wrapper(stmt)
        if referenced and _edits_in_place(stmt):
            edits = callee_edits(stmt, 0, lambda e: A.qualify(e, None), {}, set(), None, None)
            if edits is not None:
                out.append((EDITS + stmt.name, edits))
        return out
    if not isinstance(stmt, ast.ClassDef):
        return []
    if not is_module_class(stmt):
        return _function_fact(stmt)
    fwd = forward_of(stmt)
    if fwd is None:
        return [(CLASS + stmt.name, ())]
    qualify = lambda e: A.qualify(e, None)  # noqa: E731
    layers, params = class_layers(stmt, qualify, {})
    backward = lambda c: A.is_backward_call(c, None)  # noqa: E731
    flow = W.Flow(qualify, layers, params, backward)
    flow.self_name = fwd.args.args[0].arg
    flow.method_shape = MethodShapes(stmt, qualify, layers, params, {}, backward)
    try:
        flow.enter(fwd)
        first = fwd.args.args[1].arg if len(fwd.args.args) > 1 else None
        handed = flow.env.get(first) if first is not None else None
        flow.run(fwd.body)
    except RecursionError:
        return [(CLASS + stmt.name, ())]
    shape = return_shape(flow)
    if shape is None and len(flow.returns) > 1:
        shape = _configured_shape(stmt, fwd, lambda: W.Flow(qualify, layers, params, backward))
    elif shape is not None and not all(shape) and any(isinstance(st, ast.If) for st in fwd.body):
        shape = _configured_step(stmt, fwd, lambda: W.Flow(qualify, layers, params, backward)) or shape
    out = [(CLASS + stmt.name, shape or ())]
    if handed is not None and handed.stores and any(s in flow.saved for s in handed.stores):
        out.append((TAKES + stmt.name, True))
    if _edits_in_place(fwd) or any(layer.inplace for layer in layers.values()):
        edits = callee_edits(fwd, 1, qualify, layers, params, flow.method_shape, {_at(h) for h in flow.hits.values()},
                             stmt)
        if edits is not None:
            out.append((EDITS + stmt.name, edits))
            if first is not None and not any(k == TAKES + stmt.name for k, _ in out) and any(
                    pos == 0 and not conds for pos, _, conds in edits[0]):
                # a forward that edits its input in place, then saves it (ViTDecoder's ``x = token;
                # x += self.de_pos_embedding`` before its LayerNorm): walked again with that input
                # a tensor, what it saves is the caller's tensor itself (a second decoder's edit of
                # it fails the first's backward)
                again = W.Flow(qualify, layers, params, backward)
                again.self_name = flow.self_name
                again.method_shape = flow.method_shape
                try:
                    again.enter(fwd)
                    mine = again.env[first] = W.Val(frozenset({W.Store(first)}), False, True)
                    again.run(fwd.body)
                except RecursionError:
                    return out
                if any(s in again.saved for s in mine.stores):
                    out.append((TAKES + stmt.name, True))
    return out


def _given(e: ast.expr) -> object:
    """An argument of a construction, as :data:`MADE` keeps it."""
    if isinstance(e, ast.Constant) and (e.value is None or isinstance(e.value, (bool, int, float, str))):
        return e.value
    if isinstance(e, ast.Dict) or (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "dict"):
        return W.SET
    return UNREAD


def made_with(cls: ast.ClassDef, made: "Tuple[tuple, ...]") -> "Dict[str, object]":
    """The settings every module-level construction of ``cls`` (:data:`MADE`) gives a parameter
    of its ``__init__`` alike, by name (:data:`UNREAD` where they differ or cannot be read)."""
    init = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"), None)
    if init is None or not made:
        return {}
    names = [a.arg for a in init.args.args[1:]]
    out: "Dict[str, object]" = {}
    for n, given in enumerate(made):
        this = {}
        for i, kw, v in given:
            name = kw if i < 0 else names[i] if i < len(names) else ""
            if not name:
                return {}  # ``**kwargs`` or more arguments than it names: unknown
            this[name] = v
        for name in set(out) | set(this):
            if n and out.get(name, _ABSENT) != this.get(name, _ABSENT):
                out[name] = UNREAD
            elif not n:
                out[name] = this[name]
    return out


_ABSENT = object()


def _edits_in_place(fn: ast.FunctionDef) -> bool:
    """Does the function's text spell an in-place edit (``x -= m``, ``x[i] = v``, ``x.add_(...)``,
    ``inplace=True``)? A cheap test before :func:`callee_edits` walks it."""
    inplace = K.INPLACE_TENSOR_METHODS
    for n in A.body_nodes(fn):
        if isinstance(n, ast.AugAssign):
            return True
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Subscript) for t in n.targets):
            return True
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Attribute) and f.attr in inplace) or any(k.arg == "inplace" for k in n.keywords):
                return True
    return False


def callee_edits(fn: ast.FunctionDef, skip: int, qualify, layers, params, method_shape,
                 own: "Optional[Set[Tuple[int, int]]]", cls: "Optional[ast.ClassDef]" = None) -> "Optional[tuple]":
    """What a call of ``fn`` edits in place, found by walking it with each positional parameter
    (after the first ``skip``: ``self``) a tensor of its own, once per parameter with that one
    requiring grad:

    * ``edits``: ``((position, where, conditions), ...)``, the parameters it edits in place
      (``batch -= mean`` in ``def subtract_mean(batch)``): an argument an operation of the caller
      saved fails the caller's backward; ``conditions``: for a module's ``forward``, the
      constructor settings the edit's path needs (``if self.activate: x = self.activ(x)``),
      ``((param, position, default, wanted truth), ...)`` (:func:`_conditions`);
    * ``inner``: ``((where, saver, saved_what, local, positions), ...)``, a tensor an operation of
      ``fn`` saves and ``fn`` then edits, only because the parameters at ``positions`` require
      grad (``pred = score.sigmoid(); pred[neg] = ...``): a call with such an argument that
      requires grad fails (``local``: :func:`_copied_local`).

    ``own``: the edits of the walk with parameters that do not require grad, reported in ``fn``
    itself (its position), left out of both; None for a function (walked here). Positions are
    ``(line, col, end_line, end_col)``; None when it edits nothing of these."""
    args = fn.args
    names = [a.arg for a in args.args[skip:]]
    if args.vararg is not None or not names:
        return None

    def walk(grad: int) -> "Optional[W.Flow]":
        flow = W.Flow(qualify, layers, params, lambda c: A.is_backward_call(c, None))
        if skip:
            flow.self_name = args.args[0].arg
            flow.method_shape = method_shape
        for i, name in enumerate(names):
            st = W.Store(name)
            flow.param_stores[st] = i
            flow.env[name] = W.Val(frozenset({st}), grad == -2 or i == grad, True)
        try:
            flow.enter(fn)
            flow.run(fn.body)
        except RecursionError:
            return None
        return flow

    every = walk(-2)  # every parameter requires grad: all it may edit (one walk in the common case)
    if every is None or (not every.hits and not every.param_edits):
        return None
    if own is None:
        base = walk(-1)  # no parameter requires grad: the edits the function's own walk finds
        if base is None:
            return None
        own = {_at(h) for h in base.hits.values()}
    edits = sorted((j, W.spot(n), _conditions(cls, fn, st) if cls is not None and st is not None else ())
                   for j, (n, st) in every.param_edits.items()
                   if (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)) not in own)
    inner: "Dict[Tuple[int, int], list]" = {}
    for i in range(len(names)) if any(_at(h) not in own for h in every.hits.values()) else ():
        flow = walk(i)
        if flow is None:
            return None
        for h in flow.hits.values():
            at = _at(h)
            if at in own:
                continue
            if at not in inner:
                inner[at] = [W.spot(W.where_edited(h.stmt, h.node)), W.spot(h.saver), h.saved_what,
                             _copied_local(h, flow), ()]
            inner[at][4] += (i,)
    if not edits and not inner:
        return None
    return (tuple(edits), tuple(tuple(v) for _, v in sorted(inner.items())))


def _at(hit: W.Hit) -> "Tuple[int, int]":
    n = W.where_edited(hit.stmt, hit.node)
    return (n.lineno, n.col_offset)  # type: ignore[attr-defined]


def _conditions(cls: ast.ClassDef, fn: ast.FunctionDef, stmt: ast.stmt) -> tuple:
    """The constructor settings on the path to ``stmt`` in ``fn``: each enclosing ``if
    self.<attr>:`` (or ``if not self.<attr>:``) whose attribute is an ``__init__`` parameter,
    as ``(param, position, default, wanted truth)``; other tests are not conditions (an edit on
    one path counts, as in the walk)."""
    me = fn.args.args[0].arg
    out = []

    def find(body, path) -> bool:
        for s in body:
            if s is stmt:
                out.extend(path)
                return True
            if isinstance(s, ast.If):
                if find(s.body, path + [(s.test, True)]) or find(s.orelse, path + [(s.test, False)]):
                    return True
            else:
                for block in A.child_blocks(s):
                    if find(block, path):
                        return True
        return False

    find(fn.body, [])
    find = None  # type: ignore[assignment]  # (a closure that calls itself is a reference cycle holding ``stmt``)
    conds = []
    for test, want in out:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, want = test.operand, not want
        if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == me:
            param = _init_param(cls, test.attr)
            if param is not None:
                conds.append(param + (want,))
    return tuple(conds)


def _copied_local(hit: W.Hit, flow: W.Flow) -> str:
    """The local name an index write inside a callee writes into (``pred`` of ``pred[neg] =
    ...``), when a copy of it made on the line before is the fix: no parameter, no other name of
    that storage, kept nowhere else, saved on an earlier line. "" otherwise."""
    stmt, node = hit.stmt, hit.node
    if isinstance(node, ast.AugAssign):
        node = node.target  # ``pred[neg] /= s``
    if hit.how != "index" or not isinstance(stmt, (ast.Assign, ast.AugAssign)) or not isinstance(node, ast.Subscript):
        return ""
    base = node.value
    if not isinstance(base, ast.Name) or hit.aliases or hit.stores & flow.escaped \
            or any(s in flow.param_stores for s in hit.stores) or hit.saver.lineno >= stmt.lineno:
        return ""
    return base.id


def _configured_shape(cls: ast.ClassDef, fwd: ast.FunctionDef, new_flow) -> "Optional[tuple]":
    """A forward whose return depends on a setting of the constructor::

        def __init__(self, ..., activation="relu"):
            self.activation = activation
        def forward(self, x):
            ...
            if self.activation == "relu":
                return F.relu(x)
            return x

    gives ``("if", param, position, default, op, value, shape_then, shape_else)``: the
    ``__init__`` parameter (its name, its position after ``self``, its literal default or
    None), the test on it (``op`` "==", "!=" or "truth", ``value`` the literal compared) and
    the shape returned either way (:func:`.flow.configured`). None when the forward is not so."""
    me = fwd.args.args[0].arg
    body = fwd.body
    k = next((i for i, st in enumerate(body) if isinstance(st, ast.If)
              and st.body and isinstance(st.body[-1], ast.Return)), None)
    if k is None:
        return None
    test = body[k].test  # type: ignore[attr-defined]
    op, value, attr_node = "truth", None, test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)) \
            and isinstance(test.comparators[0], ast.Constant):
        op = "==" if isinstance(test.ops[0], ast.Eq) else "!="
        value, attr_node = test.comparators[0].value, test.left
    if not (isinstance(attr_node, ast.Attribute) and isinstance(attr_node.value, ast.Name)
            and attr_node.value.id == me):
        return None
    param = _init_param(cls, attr_node.attr)
    if param is None:
        return None
    shapes = _two_shapes(fwd, (body[:k] + body[k].body,  # type: ignore[attr-defined]
                               body[:k] + body[k].orelse + body[k + 1:]), new_flow)  # type: ignore[attr-defined]
    if shapes is None:
        return None
    return ("if",) + param + (op, value) + shapes


def _configured_step(cls: ast.ClassDef, fwd: ast.FunctionDef, new_flow) -> "Optional[tuple]":
    """mmcv's ConvModule: ``self.with_activation = act_cfg is not None`` in ``__init__``, and a
    forward whose one ``if self.with_activation: x = self.activate(x)`` (no ``else``, no
    ``return`` inside) decides what the final ``return`` hands back: ``("if", param, position,
    default, "set", None, shape_then, shape_else)`` (:func:`.flow.configured`)."""
    me = fwd.args.args[0].arg
    body = fwd.body
    ifs = [i for i, st in enumerate(body) if isinstance(st, ast.If)]
    if len(ifs) != 1 or not body or not isinstance(body[-1], ast.Return):
        return None
    k = ifs[0]
    st = body[k]
    if st.orelse or any(isinstance(n, (ast.Return, ast.If)) for n in A.body_nodes(st)):  # type: ignore[attr-defined]
        return None
    test = st.test  # type: ignore[attr-defined]
    if not (isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == me):
        return None
    param = _init_param(cls, test.attr, not_none=True)
    if param is None:
        return None
    shapes = _two_shapes(fwd, (body[:k] + st.body + body[k + 1:], body[:k] + body[k + 1:]),  # type: ignore[attr-defined]
                         new_flow)
    if shapes is None:
        return None
    return ("if",) + param + ("set", None) + shapes


def _two_shapes(fwd: ast.FunctionDef, parts, new_flow) -> "Optional[Tuple[object, object]]":
    """What ``fwd`` hands back run along each of the two statement lists ``parts`` (a
    branch taken, the other), or None unless both are known and differ."""
    shapes = []
    for part in parts:
        flow = new_flow()
        flow.enter(fwd)
        flow.run(part)
        shapes.append(return_shape(flow))
    if shapes[0] is None or shapes[1] is None or shapes[0] == shapes[1]:
        return None
    return shapes[0], shapes[1]


def _init_param(cls: ast.ClassDef, attr: str, not_none: bool = False) -> "Optional[Tuple[str, int, object]]":
    """``self.<attr> = <param>`` in ``__init__``, the attribute assigned nowhere else: the
    parameter's name, position after ``self`` and literal default (None without one)."""
    init = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"), None)
    if init is None or not init.args.args:
        return None
    me = init.args.args[0].arg
    found = None
    for d in cls.body:
        if not isinstance(d, _DEFS):
            continue
        for n in A.body_nodes(d):
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name):
                        value = n.value if isinstance(n, ast.Assign) else None
                        if not_none and isinstance(value, ast.Compare) and len(value.ops) == 1 \
                                and isinstance(value.ops[0], ast.IsNot) and isinstance(value.left, ast.Name) \
                                and isinstance(value.comparators[0], ast.Constant) \
                                and value.comparators[0].value is None:
                            value = value.left  # ``self.with_activation = act_cfg is not None``
                        elif not_none:
                            return None
                        if found is not None or d is not init or t.value.id != me \
                                or not isinstance(value, ast.Name):
                            return None
                        found = value.id
    if found is None:
        return None
    args = init.args.args[1:]
    names = [a.arg for a in args]
    if found not in names:
        return None
    i = names.index(found)
    defaults = init.args.defaults
    j = i - (len(args) - len(defaults))
    dflt = defaults[j] if j >= 0 else None
    default = dflt.value if isinstance(dflt, ast.Constant) else None
    if not_none and (isinstance(dflt, ast.Dict) or (isinstance(dflt, ast.Call) and isinstance(dflt.func, ast.Name)
                                                    and dflt.func.id == "dict")):
        default = W.SET  # ``act_cfg=dict(type='ReLU')``
    return (found, i, default)




class MethodShapes:
    """What each method of the class hands back (``self._block(x)``): one bool per returned
    tensor, True for an output its operation saved; None when unknown. Walked on demand, once.
    (A class, not a closure calling itself: that would be a reference cycle keeping the tree.)"""

    def __init__(self, cls: ast.ClassDef, qualify, layers, params, functions, is_backward) -> None:
        self.methods = {d.name: d for d in cls.body if isinstance(d, ast.FunctionDef) and d.args.args
                        and d.name != "forward" and not d.decorator_list}
        self.args = (qualify, layers, params, is_backward)
        self.functions = functions
        self.shapes: "Dict[str, Optional[Tuple[bool, ...]]]" = {}

    def __call__(self, name: str) -> "Optional[Tuple[bool, ...]]":
        shapes = self.shapes
        if name in shapes:
            return shapes[name]
        d = self.methods.get(name)
        shapes[name] = None  # (a method calling itself)
        if d is None:
            return None
        flow = W.Flow(*self.args)
        flow.functions = self.functions
        flow.self_name = d.args.args[0].arg
        flow.method_shape = self
        try:
            flow.enter(d)
            flow.run(d.body)
        except RecursionError:
            return None
        shapes[name] = return_shape(flow)
        return shapes[name]


def return_shape(flow: W.Flow) -> "Optional[Tuple[bool, ...]]":
    """One bool per tensor the walked function returns (True: an output its operation saved),
    when every ``return`` agrees; else None."""
    outs = flow.returns
    if not outs:
        return None
    shape = _shape(outs[0], flow)
    if shape is None or any(_shape(o, flow) != shape for o in outs[1:]):
        return None
    return shape


def _shape(v: W.Val, flow: W.Flow) -> "Optional[Tuple[bool, ...]]":
    if v.items is not None:
        return tuple(bool(i.stores) and all(s in flow.saved for s in i.stores) for i in v.items)
    if not v.stores:
        return None
    return (all(s in flow.saved for s in v.stores),)


CLASS_FACTS = FactSource("gg104", summarize_class_facts, positional=(EDITS, CTOR, MADE))


def _is_autograd_function(cls: ast.ClassDef) -> bool:
    for b in cls.bases:
        name = A.dotted(b) or ""
        if name in ("Function", "autograd.Function", "torch.autograd.Function", "InplaceFunction"):
            return True
    return False


def _function_fact(cls: ast.ClassDef) -> "List[Tuple[str, object]]":
    """``gg104:fn:<Class>`` of a custom ``torch.autograd.Function``: ``(indices, out)``, the
    positions (after ``ctx``) of the ``forward`` parameters it hands to ``ctx.save_for_backward``
    unchanged, and whether it saves the tensor it returns; nothing when it saves neither (a
    ``save_for_backward(x.clone())`` keeps a copy no caller can edit)."""
    if not _is_autograd_function(cls):
        return []
    fwd = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "forward"), None)
    if fwd is None or len(fwd.args.args) < 2 or fwd.args.vararg is not None:
        return []
    ctx_name = fwd.args.args[0].arg
    params = [a.arg for a in fwd.args.args[1:]]
    stored: "Set[str]" = set()
    saved: "List[str]" = []
    returned: "Set[str]" = set()
    for n in A.body_nodes(fwd):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                stored.update(A.target_names(t))
        elif isinstance(n, ast.Return) and isinstance(n.value, ast.Name):
            returned.add(n.value.id)
        elif (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
              and n.value.func.attr == "save_for_backward" and isinstance(n.value.func.value, ast.Name)
              and n.value.func.value.id == ctx_name):
            saved.extend(a.id for a in n.value.args if isinstance(a, ast.Name))
    indices = tuple(i for i, p in enumerate(params) if p in saved and p not in stored)
    out = any(r in saved and r not in params for r in returned)
    if not indices and not out:
        return []
    return [(FN + cls.name, ("fn", indices, out))]


def _apply_wrapper(fn: ast.FunctionDef) -> "List[Tuple[str, object]]":
    """A module-level function calling a custom Function's ``apply`` with some of its own
    parameters unchanged (``def softsplat(tenIn, tenFlow, ...): ... return _Fn.apply(tenIn,
    tenFlow)``): ``gg104:fn:softsplat`` -> ``("wrap", ((cls, positions), ...), params)``, for each
    call the wrapper's parameter handed as each argument (-1: something else), and the names of
    the wrapper's parameters (for a call by keywords)."""
    if not fn.args.args:
        return []
    params = [a.arg for a in fn.args.args]
    calls = []
    stored: "Set[str]" = set()
    for n in A.body_nodes(fn):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                stored.update(A.target_names(t))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "apply" \
                and isinstance(n.func.value, ast.Name):
            calls.append(n)
    out = []
    for call in calls:
        pos = tuple(params.index(a.id) if isinstance(a, ast.Name) and a.id in params and a.id not in stored else -1
                    for a in call.args)
        if any(p >= 0 for p in pos):
            out.append((call.func.value.id, pos))  # type: ignore[attr-defined]
    return [(FN + fn.name, ("wrap", tuple(out), tuple(params)))] if out else []


def buffer_edits(cls: ast.ClassDef) -> "Tuple[FrozenSet[str], Dict[str, Tuple[Tuple[str, ast.AST, ast.AST], ...]]]":
    """The buffers a module class registers in ``__init__`` (``self.register_buffer("queue",
    ...)``, as "self.queue") and, by method name, the ones each other method edits in place
    itself (MoCo's ``self.queue[:, ptr:ptr + n] = keys.T`` in ``_dequeue_and_enqueue``):
    ``(buffer, the edited expression, the editing statement)``. An edit under ``torch.no_grad()``
    still changes the tensor a product saved earlier in the forward."""
    init = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"), None)
    if init is None or not init.args.args or "register_buffer" not in _names_called(init):
        return frozenset(), {}
    me = init.args.args[0].arg
    buffers = set()
    for n in A.body_nodes(init):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "register_buffer" \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == me and n.args \
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            buffers.add(n.args[0].value)
    edits: "Dict[str, Tuple[Tuple[str, ast.AST, ast.AST], ...]]" = {}
    if not buffers:
        return frozenset(), edits
    for d in cls.body:
        if not isinstance(d, ast.FunctionDef) or d.name in ("__init__", "forward") or not d.args.args:
            continue
        me = d.args.args[0].arg
        own = lambda e, me=me: _own_buffer(e, me, buffers)  # noqa: E731
        found: "List[Tuple[str, ast.AST, ast.AST]]" = []
        for s in A.iter_statements(d.body):
            hit: "Optional[ast.Attribute]" = None
            if isinstance(s, ast.Assign):
                hit = next((a for t in s.targets if isinstance(t, ast.Subscript) for a in [own(t)] if a), None)
            elif isinstance(s, ast.AugAssign):
                hit = own(s.target)
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute) \
                    and s.value.func.attr in K.INPLACE_TENSOR_METHODS:
                hit = own(s.value.func.value)
            if hit is not None and all(f[0] != "self." + hit.attr for f in found):
                found.append(("self." + hit.attr, hit, s))
        if found:
            edits[d.name] = tuple(found)
    return frozenset("self." + b for b in buffers), edits


def _own_buffer(e: ast.expr, me: str, buffers: "Set[str]") -> "Optional[ast.Attribute]":
    """``self.queue`` in ``self.queue[...]`` or as it is, for a buffer of ``buffers``."""
    if isinstance(e, ast.Subscript):
        e = e.value
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == me and e.attr in buffers:
        return e
    return None


def _names_called(fn: ast.FunctionDef) -> "Set[str]":
    return {n.func.attr for n in A.body_nodes(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
