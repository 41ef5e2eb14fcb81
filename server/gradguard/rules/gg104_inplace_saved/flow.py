"""GG104's walk of one function: which tensors autograd has saved for backward,
and which statements then edit one of them in place.

A small abstract interpreter of its own (the graph interpreter answers "which
graph does this value carry", this one "which storage is this value, and has
an operation saved it"):

- a value is a set of *storages* (``out = x`` and ``x[0]``, ``x.view(...)``,
  ``x.t()``, ``x.detach()`` share ``x``'s, as they share its version counter)
  plus two flags: it requires grad (built from a layer with weights, a
  parameter, or an operation on such a value), it is surely a tensor;
- an operation marks the storage it saves (:mod:`gradguard.analysis.knowledge`:
  the output of ``relu``/``sigmoid``/``tanh``/``softmax``..., the input of a
  layer with weights, each operand of a product whose other operand requires
  grad), only where a graph is recorded (not under ``torch.no_grad()``);
- an in-place edit of a marked storage (``x += r``, ``x[i] = v``,
  ``x.add_(...)``, ``F.relu(x, inplace=True)``, a layer built with
  ``inplace=True``) is a *hit*;
- a backward clears the marks (the saved tensors have been used).

Precision first: a value the walk cannot follow gets a fresh storage, so that
it can never be the one an edit reaches; branches keep only the marks every
path sets; a loop body is walked twice (the second time sees what the first
iteration saved) and its marks are dropped after the loop.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Set, Tuple

    # what a call of a custom autograd.Function saves: the positions of the arguments it keeps,
    # whether it keeps its result, and the names of the called function's parameters (for keywords)
    Saves = Tuple[Tuple[int, ...], bool, Tuple[str, ...]]


class Store:
    """One tensor storage (and its version counter)."""

    __slots__ = ("names",)

    def __init__(self, name: str = "") -> None:
        self.names = name


class Val:
    __slots__ = ("stores", "grad", "tensor", "items", "layer")

    def __init__(self, stores: "FrozenSet[Store]" = frozenset(), grad: bool = False, tensor: bool = False,
                 items: "Optional[Tuple[Val, ...]]" = None, layer: "Optional[Layer]" = None) -> None:
        self.stores = stores
        self.grad = grad
        self.tensor = tensor
        self.items = items
        self.layer = layer


def fresh(grad: bool = False, tensor: bool = False) -> Val:
    return Val(frozenset({Store()}), grad, tensor)


class Layer:
    """A module object the walk knows: a torch.nn class (``kind``: its class
    name), a same-file nn.Module class (``kind`` "user", ``out_saved``: its
    forward returns a saved output), or a Sequential of layers."""

    __slots__ = ("kind", "inplace", "node", "inplace_node", "out_saved", "items", "weighted", "name", "edits",
                 "in_saved")

    def __init__(self, kind: str, node: "Optional[ast.Call]" = None, inplace: bool = False,
                 inplace_node: "Optional[ast.expr]" = None, out_saved: "Optional[tuple]" = None,
                 items: "Optional[List[Layer]]" = None, weighted: bool = False) -> None:
        self.kind = kind
        self.node = node
        self.inplace = inplace
        self.inplace_node = inplace_node
        self.out_saved = out_saved
        self.items = items
        self.weighted = weighted
        self.name = ""
        # what calling it edits in place (``gg104:edits:`` of a same-file class, :func:`.facts.callee_edits`)
        self.edits: "Optional[tuple]" = None
        # (a same-file class) its forward saves its input for backward whatever the input
        # (``gg104:takes:``: a LayerNorm or Linear of its own reads it first)
        self.in_saved = False


class Hit:
    """An in-place edit of a storage an operation saved."""

    __slots__ = ("stmt", "node", "target", "saver", "saved_what", "how", "layer", "aliases", "escaped", "stores",
                 "via", "inside", "inside_copy")

    def __init__(self, stmt, node, target, saver, saved_what, how, layer=None):
        self.stmt = stmt          # the statement that edits
        self.node = node          # the editing expression (AugAssign, Subscript target, Call)
        self.target = target      # the edited expression
        self.saver = saver        # the saving expression (a Call/BinOp node)
        self.saved_what = saved_what  # "output" | "input"
        self.how = how            # "augassign" | "index" | "method" | "inplace-arg" | "inplace-layer"
        self.layer = layer        # the Layer built with inplace=True (for "inplace-layer")
        self.aliases: "Set[str]" = set()  # the other names bound to the edited storage
        # the storage (a view of it) is also put in a list, a dict or an attribute in the unit (set after the walk)
        self.escaped = False
        self.stores: "FrozenSet[Store]" = frozenset()
        self.via: "Optional[ast.AST]" = None  # the Sequential call whose element saved it
        # for an edit made by a called function or module ("callee", "callee-inner"): the editing
        # expression inside it, as a Spot
        self.inside: "Optional[Spot]" = None
        # the callee's local name a copy of which, made before that edit, is the fix ("" for none)
        self.inside_copy = ""


class Spot:
    """A place in the file known by its position only (a fact holds no AST node): the
    edit and the saving operation inside a called function, for the finding's words and
    related locations."""

    __slots__ = ("lineno", "col_offset", "end_lineno", "end_col_offset")

    def __init__(self, pos: "Tuple[int, int, int, int]") -> None:
        self.lineno, self.col_offset, self.end_lineno, self.end_col_offset = pos


def where_edited(stmt: "Optional[ast.stmt]", node: ast.AST) -> ast.AST:
    """What an edit's finding quotes: its simple statement (``pred[neg] = pred[neg] / s``), else
    the editing expression."""
    return stmt if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)) else node


def spot(node) -> "Tuple[int, int, int, int]":
    """The position of ``node`` (a statement, expression or Spot), for a fact."""
    return (node.lineno, node.col_offset, getattr(node, "end_lineno", None) or node.lineno,
            getattr(node, "end_col_offset", None) or node.col_offset)


def _last(name: "Optional[str]") -> str:
    return (name or "").rsplit(".", 1)[-1]


def _torch_name(q: "Optional[str]") -> bool:
    return bool(q) and (q.startswith("torch.") or q.startswith("nn.") or q.startswith("F."))  # type: ignore[union-attr]


def _const_true(e: "Optional[ast.expr]") -> bool:
    return isinstance(e, ast.Constant) and e.value is True


def inplace_switch(call: ast.Call, kind: str) -> "Optional[ast.expr]":
    """The expression that turns ``inplace`` on in a torch.nn constructor call, or None."""
    for kw in call.keywords:
        if kw.arg == "inplace":
            return kw.value if _const_true(kw.value) else None
    pos = K.INPLACE_POSITION.get(kind)
    if pos is not None and len(call.args) > pos and _const_true(call.args[pos]):
        return call.args[pos]
    return None


def resolve_edits(fact: tuple, call: ast.Call, defaults: "Optional[Mapping[str, object]]") -> "Optional[tuple]":
    """The edits of ``fact`` (:func:`.facts.callee_edits`) an object built by ``call`` makes: an
    edit on the path of ``if self.<setting>:`` is kept when the call sets it true (a literal, or
    the default), else dropped; a setting spelled with a name of the enclosing constructor
    (``activate=(start_with_relu if i == 0 else True)``) is read from that name's default
    (``defaults``), as the enclosing block is built by default."""
    edits, inner = fact
    kept = []
    for pos, where, conds in edits:
        ok = True
        for name, ppos, default, want in conds:
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and ppos < len(call.args):
                arg = call.args[ppos]
            value = default if arg is None else _setting(arg, defaults or {})
            if value is _UNKNOWN or bool(value) != want:
                ok = False
                break
        if ok:
            kept.append((pos, where, ()))
    if not kept and not inner:
        return None
    return (tuple(kept), inner)


def _setting(e: ast.expr, defaults: "Mapping[str, object]") -> object:
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.Name) and e.id in defaults:
        return defaults[e.id]
    if isinstance(e, ast.IfExp):
        a, b = _setting(e.body, defaults), _setting(e.orelse, defaults)
        if a is not _UNKNOWN and b is not _UNKNOWN and bool(a) == bool(b):
            return a
    return _UNKNOWN


def layer_of_constructor(call: ast.expr, qualify, user_layers: "Mapping[str, Layer]",
                         known: "Optional[Mapping[str, Layer]]" = None,
                         defaults: "Optional[Mapping[str, object]]" = None) -> "Optional[Layer]":
    """The Layer a constructor call builds (``nn.ReLU(inplace=True)``,
    ``nn.Sequential(...)``, ``Block(...)`` of a same-file module class); the
    elements of a Sequential may be layers already built (``known``:
    ``self.conv_layer``)."""
    if known and isinstance(call, (ast.Name, ast.Attribute)):
        key = A.dotted(call)
        return known.get(key) if key is not None else None
    if not isinstance(call, ast.Call):
        return None
    q = qualify(call.func) or ""
    kind = _last(q)
    if isinstance(call.func, ast.Name) and call.func.id in user_layers:
        base = user_layers[call.func.id]
        out_saved = base.out_saved
        if out_saved and out_saved[0] == "if":
            out_saved = configured(out_saved, call, defaults)  # ``Conv2d_batchnorm(..., activation="None")``
        layer = Layer("user", call, out_saved=out_saved, weighted=True)
        layer.edits = resolve_edits(base.edits, call, defaults) if base.edits is not None else None
        layer.in_saved = base.in_saved
        return layer
    if not (q.startswith("torch.nn.") or kind in K.INPLACE_SWITCH_MODULES or kind in K.SAVES_OUTPUT_MODULES
            or kind in K.SAVES_INPUT_WEIGHTED_MODULES or kind == "Sequential"):
        return None
    if not q.startswith("torch.nn.") and "." in q:
        return None  # another library's ReLU
    if q.startswith("torch.nn.functional.") or q.startswith("torch.nn.init."):
        return None  # a tensor (``self.queue = F.normalize(self.queue, dim=0)``), not a module
    if kind == "Sequential":
        items = []
        for a in call.args:
            sub = layer_of_constructor(a, qualify, user_layers, known)
            if sub is None:
                sub = Layer("unknown", a if isinstance(a, ast.Call) else None, weighted=True)
            items.append(sub)
        return Layer("Sequential", call, items=items, weighted=any(i.weighted for i in items))
    if kind == "ModuleList" and len(call.args) == 1:
        # ``nn.ModuleList([Block(...) for i in range(n)])``: elements of one kind, known by that kind
        a = call.args[0]
        elts = [a.elt] if isinstance(a, ast.ListComp) else a.elts if isinstance(a, (ast.List, ast.Tuple)) else []
        subs = [layer_of_constructor(x, qualify, user_layers, known) for x in elts]
        first = subs[0] if subs else None
        if first is not None and all(x is not None and _same_layer(x, first) for x in subs):
            return Layer("ModuleList", call, items=[first], weighted=True)
    sw = inplace_switch(call, kind) if kind in K.INPLACE_SWITCH_MODULES else None
    if sw is not None and "Dropout" in kind and _zero_probability(call):
        sw = None  # ``nn.Dropout(0.0, inplace=True)`` changes nothing
    weighted = kind in K.SAVES_INPUT_WEIGHTED_MODULES or (
        kind not in K.PARAMETERLESS_MODULES and kind not in K.SAVES_OUTPUT_MODULES
        and kind not in K.INPLACE_SWITCH_MODULES)
    return Layer(kind, call, inplace=sw is not None, inplace_node=sw, weighted=weighted)


def configured(shape: tuple, call: ast.Call, defaults: "Optional[Mapping[str, object]]" = None) \
        -> "Optional[Tuple[bool, ...]]":
    """The shape a class with a configured forward (:func:`.facts._configured_shape`) returns when
    built by ``call``: the setting read from the call's literal argument or the default. For a
    test ``is not None`` (op "set"), a dict given (``act_cfg=dict(type='ReLU')``) is a setting
    too, and a name of the enclosing constructor is read from ``defaults`` (what that class is
    built with, else its default)."""
    _, name, pos, default, op, value, then, other = shape
    arg = next((k.value for k in call.keywords if k.arg == name), None)
    if arg is None and pos < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        arg = call.args[pos]
    if arg is None and (pos < len(call.args) or call.keywords and any(k.arg is None for k in call.keywords)):
        return None
    if op == "set":
        if arg is None:
            setting = default
        elif isinstance(arg, ast.Constant):
            setting = arg.value
        elif isinstance(arg, ast.Dict) or (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name)
                                           and arg.func.id == "dict"):
            setting = SET
        elif isinstance(arg, ast.Name) and defaults is not None and arg.id in defaults:
            setting = defaults[arg.id]
        else:
            return None
        return then if setting is not None else other
    setting = arg.value if isinstance(arg, ast.Constant) else default if arg is None else _UNKNOWN
    if setting is _UNKNOWN or (arg is None and default is None and op != "truth"):
        return None
    hit = setting == value if op == "==" else setting != value if op == "!=" else bool(setting)
    return then if hit else other


_UNKNOWN = object()
# a setting given as a dict (``act_cfg=dict(type='ReLU')``): not None, nothing more known
SET = "<set>"


def _same_layer(a: Layer, b: Layer) -> bool:
    return a.kind == b.kind and a.out_saved == b.out_saved and a.inplace == b.inplace and a.items is None \
        and b.items is None


def _zero_probability(call: ast.Call) -> bool:
    p = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "p"), None)
    return isinstance(p, ast.Constant) and p.value == 0


def _basic_index(e: ast.expr, ints: "Set[str]") -> bool:
    """Basic indexing (a view of the indexed tensor): integers, slices, the
    variables of ``for i in range(...)`` loops and arithmetic on them. A slice is
    a view whatever its bounds are (``x[:, :int(w / 2)]``: a bound is an index,
    never a mask)."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, int) or e.value is None or e.value is Ellipsis
    if isinstance(e, ast.Slice):
        return True
    if isinstance(e, ast.Name):
        return e.id in ints
    if isinstance(e, ast.UnaryOp):
        return _basic_index(e.operand, ints)
    if isinstance(e, ast.BinOp):
        return _basic_index(e.left, ints) and _basic_index(e.right, ints)
    if isinstance(e, ast.Tuple):
        return all(_basic_index(x, ints) for x in e.elts)
    return False


_VIEWS = K.VIEW_METHODS - {"expand", "expand_as"} | {"detach", "view_as", "unbind"}
_VIEW_ATTRS = frozenset({"T", "mT"})
_CONTAINER_ADDS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "put", "put_nowait"})
_TUPLE_LAYERS = frozenset({"LSTM", "GRU", "RNN", "LSTMCell"})


def _no_layer(name: str) -> "Optional[Layer]":
    return None


def _shares(v: Val, stores: "FrozenSet[Store]") -> bool:
    return bool(v.stores & stores) or any(_shares(i, stores) for i in v.items or ())


def _weight_text(node: ast.expr) -> bool:
    while True:
        if isinstance(node, ast.Attribute) and node.attr in _VIEW_ATTRS:
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "t" \
                and not node.args:
            node = node.func.value
        else:
            break
    if isinstance(node, ast.Subscript):
        sl = node.slice
        if isinstance(sl, ast.Constant) and isinstance(sl.value, str) and "weight" in sl.value.lower():
            return True
        if isinstance(sl, ast.JoinedStr) and any(isinstance(p, ast.Constant) and "weight" in str(p.value).lower()
                                                 for p in sl.values):
            return True
        node = node.value
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "weight" in name.lower()


class Flow:
    """The walk of one unit. ``layers``: module objects by name (``self.relu``
    as "self.relu", a module-level ``model`` as "model"); ``params``: names of
    parameters (``self.weight``) that require grad."""

    def __init__(self, qualify, layers: "Dict[str, Layer]", params: "Set[str]", is_backward) -> None:
        self.qualify = qualify
        self.layers = layers
        self.params = params
        self.is_backward = is_backward
        # a module-level layer, by name (functions only)
        self.global_layer: "Callable[[str], Optional[Layer]]" = _no_layer
        # the return value of a method of the walked class (``self._block(x)``), by the method's
        # name: one bool per returned tensor, True for an output its operation saved (None: unknown)
        self.self_name = ""
        self.method_shape: "Callable[[str], Optional[tuple]]" = _no_layer  # type: ignore[assignment]
        # custom autograd.Functions and the names calling their ``apply``: what each call saves,
        # ``(positions of the arguments saved, output saved)`` (:func:`.facts._function_fact`)
        self.functions: "Mapping[str, Saves]" = {}
        self.env: "Dict[str, Val]" = {}
        self.saved: "Dict[Store, Tuple[ast.AST, str]]" = {}
        self.no_grad = 0
        self.ints: "Set[str]" = set()
        self.hits: "Dict[Tuple[int, int], Hit]" = {}
        self.returns: "List[Val]" = []
        self.stmt: "Optional[ast.stmt]" = None
        self.layer_calls: "List[Tuple[Layer, ast.Call, ast.stmt]]" = []
        # the hits a backward of the unit follows (an edit in an evaluation loop that never
        # back-propagates breaks nothing)
        self.confirmed: "Set[Tuple[int, int]]" = set()
        # storages also kept elsewhere than under a name (``outputs.append(h[-1])``, ``self.h = h``)
        self.escaped: "Set[Store]" = set()
        # where each storage escaped: the statements (an element rebound out of place is seen by
        # what keeps it only from then on, :func:`escaped_before`)
        self.escaped_at: "Dict[Store, List[Optional[ast.stmt]]]" = {}
        # ``inter_outs[i]``, a list's element at an index the walk cannot read: the element it may
        # be (every element's storage), by the Subscript's id -- kept only for what keeps it
        # (:meth:`escape_expr`); the read itself stays a value not followed
        self.any_element: "Dict[int, Val]" = {}
        # a name bound on alternative paths to different values: the storages it may be
        # (``sc = self.shortcut(x)`` / ``sc = x``), for the names an edit may also change
        self.may_alias: "Dict[str, FrozenSet[Store]]" = {}
        # the call of a Sequential whose element saved a storage (the element's constructor is the saver)
        self.via: "Optional[ast.AST]" = None
        self.saved_via: "Dict[Store, ast.AST]" = {}
        # same-file functions that edit in place, by name (``gg104:edits:``, :func:`.facts.callee_edits`)
        self.callees: "Mapping[str, tuple]" = {}
        # while a callee's own fact is computed: its parameters' storages (-> position), and the
        # first in-place edit of each position
        self.param_stores: "Dict[Store, int]" = {}
        self.param_edits: "Dict[int, Tuple[ast.AST, Optional[ast.stmt]]]" = {}
        # the walked class's buffers ("self.queue"), and the methods that edit some in place, by name:
        # ``((buffer, edited expression, editing statement), ...)`` (:func:`.facts.buffer_edits`)
        self.buffers: "FrozenSet[str]" = frozenset()
        self.self_edits: "Mapping[str, tuple]" = {}

    def escape(self, v: Val) -> None:
        self.escaped |= v.stores
        for st in v.stores:
            self.escaped_at.setdefault(st, []).append(self.stmt)
        for i in v.items or ():
            self.escape(i)

    def escape_expr(self, e: ast.expr) -> None:
        """What ``e`` hands a container may be kept there beyond the value the walk follows:
        ``inter_outs[i]`` any element of the list, ``[x, y]`` each of its elements (read again)."""
        got = self.any_element.get(id(e))
        if got is not None:
            self.escape(got)
        elif isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            for x in e.elts:
                self.escape_expr(x.value if isinstance(x, ast.Starred) else x)

    # -- marks --------------------------------------------------------------
    def mark(self, v: Val, saver: ast.AST, what: str) -> None:
        if self.no_grad:
            return
        for s in v.stores:
            if s not in self.saved and self.via is not None:
                self.saved_via[s] = self.via
            self.saved.setdefault(s, (saver, what))

    def edit(self, v: Val, node: ast.AST, target: ast.AST, how: str, layer: "Optional[Layer]" = None) -> None:
        if self.param_stores:
            for s in v.stores:
                i = self.param_stores.get(s)
                if i is not None:
                    self.param_edits.setdefault(i, (where_edited(self.stmt, node), self.stmt))
        for s in v.stores:
            info = self.saved.get(s)
            key = (id(node), id(layer))  # two in-place layers of one Sequential: two edits
            if info is not None and key not in self.hits:
                hit = self.hits[key] = Hit(self.stmt, node, target, info[0], info[1], how, layer)
                hit.aliases = {n for n, o in self.env.items() if _shares(o, v.stores)}
                hit.aliases.update(n for n, st in self.may_alias.items() if st & v.stores)
                hit.stores = v.stores
                hit.via = self.saved_via.get(s)
                if isinstance(target, ast.Name):
                    hit.aliases.discard(target.id)
                elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and how == "augassign":
                    hit.aliases.discard(target.value.id)  # the list whose element the fix rebinds
        for s in v.stores:
            self.saved.pop(s, None)

    # -- statements ---------------------------------------------------------
    def enter(self, fn: "Optional[ast.AST]") -> None:
        """Bind the parameters of the function walked, before its first branch
        (a parameter read first on two paths is one value, not one per path)."""
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = fn.args
            for p in a.posonlyargs + a.args + a.kwonlyargs:
                self.e_Name(ast.Name(p.arg, ast.Load()))

    def run(self, body: "List[ast.stmt]") -> None:
        for s in body:
            self.statement(s)

    def statement(self, s: ast.stmt) -> None:
        self.stmt = s
        if isinstance(s, ast.Assign):
            v = self.eval(s.value)
            for t in s.targets:
                self.bind(t, v, s)
                if isinstance(s.value, (ast.List, ast.Tuple, ast.Set)) and not isinstance(t, (ast.Tuple, ast.List)):
                    # ``kept = [x]``: a list literal keeps its elements under a name of its own
                    self.escape(v)
                    self.escape_expr(s.value)
                elif isinstance(t, (ast.Subscript, ast.Attribute)):
                    self.escape_expr(s.value)  # ``self.last = inter_outs[i]``
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.bind(s.target, self.eval(s.value), s)
        elif isinstance(s, ast.AugAssign):
            self.augassign(s)
        elif isinstance(s, ast.Expr):
            self.eval(s.value)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.returns.append(self.eval(s.value))
        elif isinstance(s, ast.If):
            self.eval(s.test)
            self.branches([s.body, s.orelse])
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            it_layer = self.eval(s.iter).layer
            it = s.iter
            if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                    and isinstance(s.target, ast.Name)):
                self.ints.add(s.target.id)
            else:
                for n in A.target_names(s.target):
                    self.env[n] = fresh()
                if it_layer is not None and it_layer.kind == "ModuleList" and it_layer.items \
                        and isinstance(s.target, ast.Name):
                    self.env[s.target.id] = Val(layer=it_layer.items[0])  # ``for conv in self.convs:``
            self.loop(s.body)
            self.branches([s.orelse, []])
        elif isinstance(s, ast.While):
            self.eval(s.test)
            self.loop(s.body)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            nograd = any(A.is_no_grad_context(i.context_expr) for i in s.items)
            for i in s.items:
                self.eval(i.context_expr)
                if i.optional_vars is not None:
                    for n in A.target_names(i.optional_vars):
                        self.env[n] = fresh()
            self.no_grad += nograd
            self.run(s.body)
            self.no_grad -= nograd
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self.run(s.body)  # type: ignore[attr-defined]
            self.branches([s.orelse, []])  # type: ignore[attr-defined]
            self.run(s.finalbody)  # type: ignore[attr-defined]
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.env[s.name] = Val()
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                for n in A.target_names(t):
                    self.env.pop(n, None)

    def branches(self, blocks: "List[List[ast.stmt]]") -> None:
        """Walk alternative blocks from the same state; keep the bindings and
        the marks they agree on."""
        env0, saved0 = dict(self.env), dict(self.saved)
        outs = []
        for b in blocks:
            self.env, self.saved = dict(env0), dict(saved0)
            self.run(b)
            outs.append((self.env, self.saved))
        env: "Dict[str, Val]" = {}
        first = outs[0][0]
        for name, v in first.items():
            if all(o[0].get(name) is v for o in outs[1:]):
                env[name] = v
            else:
                # ``if h is None: h = torch.zeros(...)``: a tensor on one path says what it is on the others
                env[name] = fresh(grad=any(o[0].get(name, v).grad for o in outs),
                                  tensor=any(o[0].get(name, v).tensor for o in outs))
                may = frozenset().union(*(o[0][name].stores for o in outs if name in o[0]))
                if may:
                    self.may_alias[name] = may
        # a mark set on one path only counts too (``if downsample: sc = self.shortcut(x)`` saves
        # ``x`` on the path that runs it; a later edit of ``x`` fails there), unless another
        # path edited that storage (its mark was used up there)
        saved: "Dict[Store, Tuple[ast.AST, str]]" = {}
        for o in outs:
            for s, info in o[1].items():
                if s not in saved and all(s in p[1] or s not in saved0 for p in outs):
                    saved[s] = info
        self.env, self.saved = env, saved

    def loop(self, body: "List[ast.stmt]") -> None:
        env0, saved0 = dict(self.env), dict(self.saved)
        self.run(body)
        self.run(body)
        # zero iterations are possible: keep what the walk before the loop agrees with
        after_env, after_saved = self.env, self.saved
        self.env = {n: (v if env0.get(n) is v else fresh(grad=v.grad, tensor=v.tensor)) for n, v in after_env.items()}
        self.saved = {s: i for s, i in after_saved.items() if saved0.get(s) == i}

    def bind(self, t: ast.expr, v: Val, s: ast.stmt) -> None:
        if isinstance(t, ast.Name):
            self.env[t.id] = v
            self.ints.discard(t.id)
            if self.may_alias:
                self.may_alias.pop(t.id, None)
        elif isinstance(t, (ast.Tuple, ast.List)):
            items = v.items if v.items is not None and len(v.items) == len(t.elts) else None
            for i, e in enumerate(t.elts):
                self.bind(e, items[i] if items is not None else fresh(grad=v.grad), s)
        elif isinstance(t, ast.Subscript):
            base = self.eval(t.value)
            self.eval(t.slice)
            if base.tensor or self._saved_any(base):
                self.edit(base, t, t.value, "index")
            else:
                self.escape(v)  # ``d[k] = x``: kept in a container
        elif isinstance(t, ast.Attribute):
            self.escape(v)
            key = A.dotted(t)
            if key is not None:
                self.env[key] = v
        elif isinstance(t, ast.Starred):
            self.bind(t.value, fresh(), s)

    def _saved_any(self, v: Val) -> bool:
        return any(s in self.saved for s in v.stores)

    def augassign(self, s: ast.AugAssign) -> None:
        rhs = self.eval(s.value)
        t = s.target
        if isinstance(t, ast.Subscript):
            base = self.eval(t.value)
            self.eval(t.slice)
            if base.items is not None and not base.stores:
                # ``laterals[i - 1] += up`` on a list: the element itself is edited in place; an
                # index the walk cannot read edits one of them, a hit when every one is saved
                if isinstance(t.slice, ast.Constant):
                    elem = self.e_Subscript(t)
                elif base.items and all(i.stores and all(x in self.saved for x in i.stores) for i in base.items):
                    elem = Val(frozenset().union(*(i.stores for i in base.items)), True, True)
                else:
                    return
                if elem.tensor or self._saved_any(elem):
                    self.edit(elem, s, t, "augassign")
                return
            self.edit(base, s, t.value, "index")
            return
        if not isinstance(t, ast.Name):
            return  # ``self.total += ...``: an attribute is not followed
        cur = self.eval(t)
        if cur.tensor or self._saved_any(cur):
            self.edit(cur, s, t, "augassign")
            if type(s.op).__name__ in ("Mult", "Div") and rhs.grad:
                self.mark(cur, s, "input")
            self.env[t.id] = Val(cur.stores, cur.grad or rhs.grad, True)
        else:
            # a number rebinds (``n += 1``); a value not known to be a tensor is not followed
            self.env[t.id] = fresh(cur.grad or rhs.grad, rhs.tensor)

    # -- expressions --------------------------------------------------------
    def eval(self, e: "Optional[ast.expr]") -> Val:
        if e is None:
            return Val()
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is not None:
            return m(e)
        for c in ast.iter_child_nodes(e):
            if isinstance(c, ast.expr):
                self.eval(c)
        return fresh()

    def e_Constant(self, e):
        return Val()

    def e_Name(self, e: ast.Name) -> Val:
        v = self.env.get(e.id)
        if v is None:
            if e.id in self.layers:
                return Val(layer=self.layers[e.id])
            g = self.global_layer(e.id)
            if g is not None:
                v = self.env[e.id] = Val(layer=g)
                return v
            v = self.env[e.id] = fresh()
        return v

    def e_Attribute(self, e: ast.Attribute) -> Val:
        key = A.dotted(e)
        if key is not None:
            if key in self.layers:
                return Val(layer=self.layers[key])
            if key in self.env:
                return self.env[key]
            if key in self.params:
                v = self.env[key] = Val(frozenset({Store(key)}), True, True)
                return v
            if key in self.buffers:
                v = self.env[key] = Val(frozenset({Store(key)}), False, True)
                return v
        base = self.eval(e.value)
        if e.attr in _VIEW_ATTRS:
            return Val(base.stores, base.grad, True)
        if e.attr in K.NON_GRAPH_ATTRS or e.attr == "data":
            return fresh(tensor=e.attr == "data")
        if e.attr in ("weight", "bias") and base.layer is not None:
            return Val(frozenset({Store()}), True, True)
        return fresh()

    def e_Subscript(self, e: ast.Subscript) -> Val:
        base = self.eval(e.value)
        self.eval(e.slice)
        if base.layer is not None and base.layer.kind == "ModuleList" and base.layer.items:
            return Val(layer=base.layer.items[0])  # ``self.convs[i]``
        if base.items is not None and isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, int):
            try:
                return base.items[e.slice.value]
            except IndexError:
                return fresh()
        if base.tensor and _basic_index(e.slice, self.ints):
            return Val(base.stores, base.grad, True)
        if base.items and not base.stores and not isinstance(e.slice, ast.Slice):
            self.any_element[id(e)] = Val(frozenset().union(*(i.stores for i in base.items)), base.grad, True)
        return fresh(base.grad, base.tensor)

    def e_Tuple(self, e) -> Val:
        items = tuple(self.eval(x) for x in e.elts)
        return Val(items=items, grad=any(i.grad for i in items))

    e_List = e_Tuple

    def e_IfExp(self, e: ast.IfExp) -> Val:
        self.eval(e.test)
        a, b = self.eval(e.body), self.eval(e.orelse)
        return Val(a.stores | b.stores, a.grad or b.grad, a.tensor and b.tensor)

    def e_BinOp(self, e: ast.BinOp) -> Val:
        a, b = self.eval(e.left), self.eval(e.right)
        op = type(e.op).__name__
        tensor = a.tensor or b.tensor
        if op == "MatMult":
            self.product(self.weightlike(a, e.left), self.weightlike(b, e.right), e, both_tensors=True)
        elif op == "Mult":
            self.product(a, b, e, both_tensors=False)
        elif op == "Div":
            if a.grad and b.tensor:
                self.mark(b, e, "input")
            if b.grad:
                if a.tensor:
                    self.mark(a, e, "input")
                self.mark(b, e, "input")
        elif op == "Pow":
            if a.grad and a.tensor:
                self.mark(a, e, "input")
        return fresh(a.grad or b.grad, tensor)

    def weightlike(self, v: Val, node: ast.expr) -> Val:
        """A matrix product's operand the walk does not know, spelled as a weight
        (``W.T``, ``params["weight_hh_l0"]``, ``weight_ih[layer]``): a parameter."""
        if v.grad or not _weight_text(node):
            return v
        return Val(v.stores, True, True)

    def product(self, a: Val, b: Val, node, both_tensors: bool) -> None:
        if b.grad and (both_tensors or a.tensor):
            self.mark(a, node, "input")
        if a.grad and (both_tensors or b.tensor):
            self.mark(b, node, "input")

    def e_UnaryOp(self, e):
        v = self.eval(e.operand)
        return fresh(v.grad, v.tensor)

    def e_Lambda(self, e):
        return Val()

    def e_ListComp(self, e):
        """``[conv(inputs[i]) for i, conv in enumerate(self.lateral_convs)]`` over a ModuleList of
        one kind of block: a list whose every element is that block's output (one element
        stands for them all); any other comprehension, a value not followed."""
        if len(e.generators) == 1 and not e.generators[0].ifs and not e.generators[0].is_async:
            gen = e.generators[0]
            it, target = gen.iter, gen.target
            index = None
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" \
                    and len(it.args) == 1 and not it.keywords and isinstance(target, ast.Tuple) \
                    and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name):
                index, it, target = target.elts[0].id, it.args[0], target.elts[1]
            if isinstance(target, ast.Name) and isinstance(it, (ast.Attribute, ast.Name)):
                seq = self.eval(it)
                layer = seq.layer
                if layer is not None and layer.kind == "ModuleList" and layer.items:
                    saved_env = dict(self.env)
                    ints = set(self.ints)
                    self.env[target.id] = Val(layer=layer.items[0])
                    if index is not None:
                        self.env.pop(index, None)
                        self.ints.add(index)
                    try:
                        v = self.eval(e.elt)
                    finally:
                        self.env, self.ints = saved_env, ints
                    return Val(items=(v,), grad=v.grad)
            if isinstance(target, ast.Name) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
                    and it.func.id == "range" and isinstance(e.elt, ast.Call) \
                    and isinstance(e.elt.func, ast.Subscript):
                # ``[self.fpn_convs[i](laterals[i]) for i in range(n)]`` (mmdet's PAFPN): a ModuleList
                # of one kind of block indexed by the counter, a list of that block's outputs
                layer = self.eval(e.elt.func.value).layer
                if layer is not None and layer.kind == "ModuleList" and layer.items:
                    saved_env = dict(self.env)
                    ints = set(self.ints)
                    self.env.pop(target.id, None)
                    self.ints.add(target.id)
                    try:
                        v = self.eval(e.elt)
                    finally:
                        self.env, self.ints = saved_env, ints
                    return Val(items=(v,), grad=v.grad)
        return fresh()

    def e_SetComp(self, e):
        return fresh()

    e_DictComp = e_GeneratorExp = e_SetComp

    def e_Call(self, e: ast.Call) -> Val:
        if self.is_backward(e):
            for a in e.args:
                self.eval(a)
            self.saved.clear()
            self.confirmed.update(self.hits)  # a backward follows these edits
            return Val()
        func = e.func
        fv = None
        if self.functions:
            saves = self.functions.get(A.dotted(func) or "")
            if saves is not None:
                return self.call_saving_function(saves, e)
        if isinstance(func, ast.Attribute):
            key = A.dotted(func)
            q = self.qualify(func) if key is not None else None
            if key is not None and key in self.layers:
                return self.call_layer(self.layers[key], e)
            if self.self_name and isinstance(func.value, ast.Name) and func.value.id == self.self_name \
                    and key not in self.env:
                if self.self_edits and func.attr in self.self_edits:
                    self.call_self_editing(self.self_edits[func.attr], e)
                shape = self.method_shape(func.attr)
                if shape and any(shape):
                    args = self._args(e)
                    for k in e.keywords:
                        self.eval(k.value)
                    return self.apply(Layer("user", out_saved=shape), args[0] if args else Val(), e)
            if q and _torch_name(q) and not (key and key.split(".", 1)[0] in self.env):
                return self.call_function(q, e)
            recv = self.eval(func.value)
            if recv.layer is not None and func.attr == "forward":
                return self.call_layer(recv.layer, e)
            return self.call_method(recv, func.attr, e)
        if isinstance(func, ast.Name):
            if self.callees and func.id in self.callees and func.id not in self.env:
                args = self._args(e)
                for k in e.keywords:
                    self.eval(k.value)
                self.call_editing(self.callees[func.id], args, e)
                return fresh(any(a.grad for a in args), True)
            if func.id in self.env and self.env[func.id].layer is not None:
                fv = self.env[func.id]
            elif func.id in self.layers:
                return self.call_layer(self.layers[func.id], e)
            q = self.qualify(func)
            if fv is None and q and _torch_name(q) and func.id not in self.env:
                return self.call_function(q, e)
        if fv is None:
            fv = self.eval(func)
        if fv.layer is not None:
            return self.call_layer(fv.layer, e)
        args = [self.eval(a) for a in e.args] + [self.eval(k.value) for k in e.keywords]
        # an unknown callable: its result may carry a graph, but nothing about it is known
        return fresh(grad=any(a.grad for a in args))

    def _args(self, e: ast.Call) -> "List[Val]":
        return [self.eval(a) for a in e.args]

    def _kw(self, e: ast.Call, name: str) -> "Optional[ast.expr]":
        for k in e.keywords:
            if k.arg == name:
                return k.value
        return None

    def call_function(self, q: str, e: ast.Call) -> Val:
        name = _last(q)
        args = self._args(e)
        kws = {k.arg: self.eval(k.value) for k in e.keywords if k.arg}
        x = args[0] if args else (kws.get("input") or Val())
        if name.endswith("_") and not name.endswith("__"):
            base = name[:-1]
            if base in K.INPLACE_SWITCH_FUNCTIONS or base in K.INPLACE_SAVES_RESULT:
                self.edit(x, e, e.args[0] if e.args else e, "inplace-fn")
                if base in K.INPLACE_SAVES_RESULT and x.grad:
                    self.mark(x, e, "output")
                return Val(x.stores, x.grad, True)
            return fresh(x.grad, True)
        if name in K.INPLACE_SWITCH_FUNCTIONS and _const_true(self._kw(e, "inplace")):
            self.edit(x, e, e.args[0] if e.args else e, "inplace-arg")
            if name in K.INPLACE_SAVES_RESULT and x.grad:
                self.mark(x, e, "output")
            return Val(x.stores, x.grad, True)
        grad = any(a.grad for a in args) or any(v.grad for v in kws.values())
        if name == "einsum" and len(args) >= 2:
            # ``einsum('nc,ck->nk', [q, queue])`` (or the operands as arguments): a product of two
            ops = args[1].items if len(args) == 2 and args[1].items is not None else args[1:]
            if len(ops) == 2:
                self.product(ops[0], ops[1], e, both_tensors=True)
            return fresh(grad or any(o.grad for o in ops), True)
        if name == "Parameter" or _const_true(self._kw(e, "requires_grad")):
            return fresh(True, True)  # a leaf that requires grad
        if name in K.SAVES_OUTPUT_FUNCTIONS:
            out = fresh(grad, True)
            if x.grad:
                self.mark(out, e, "output")
            return out
        if name in K.SAVES_INPUT_WEIGHTED_FUNCTIONS and len(args) >= 2:
            args[1] = self.weightlike(args[1], e.args[1])
            if args[1].grad:
                self.mark(x, e, "input")
            if x.grad:
                self.mark(args[1], e, "input")
            return fresh(grad, True)
        if name in K.PRODUCT_FUNCTIONS and len(args) >= 2:
            if name not in ("mul", "multiply"):
                args = [self.weightlike(args[0], e.args[0]), self.weightlike(args[1], e.args[1])]
            self.product(args[0], args[1], e, both_tensors=name != "mul" and name != "multiply")
            return fresh(grad, True)
        if name in K.SAVES_INPUT_FUNCTIONS:
            if x.grad and x.tensor:
                self.mark(x, e, "input")
            return fresh(grad, True)
        return fresh(grad, q.startswith("torch."))

    def call_saving_function(self, saves: "Saves", e: ast.Call) -> Val:
        """A custom autograd.Function's ``apply`` (or a function calling it): its
        ``ctx.save_for_backward`` keeps the arguments at ``saves[0]`` (and the result when
        ``saves[1]``), checked in its backward, which runs when some argument requires grad."""
        if any(isinstance(a, ast.Starred) for a in e.args):
            return self.eval_args_fresh(e)
        args = self._args(e)
        names = saves[2]
        for k in e.keywords:
            v = self.eval(k.value)
            if k.arg in names:
                i = names.index(k.arg)
                args.extend(Val() for _ in range(i + 1 - len(args)))
                args[i] = v
        grad = any(a.grad for a in args)
        if grad:
            for i in saves[0]:
                if i < len(args):
                    self.mark(args[i], e, "input")
        out = fresh(grad, True)
        if grad and saves[1]:
            self.mark(out, e, "output")
        return out

    def eval_args_fresh(self, e: ast.Call) -> Val:
        args = [self.eval(a) for a in e.args] + [self.eval(k.value) for k in e.keywords]
        return fresh(grad=any(a.grad for a in args))

    def call_method(self, recv: Val, meth: str, e: ast.Call) -> Val:
        args = self._args(e)
        for k in e.keywords:
            self.eval(k.value)
        if meth in K.INPLACE_TENSOR_METHODS:
            if recv.tensor or self._saved_any(recv):
                self.edit(recv, e, e.func.value, "method")  # type: ignore[attr-defined]
                if meth[:-1] in K.INPLACE_SAVES_RESULT and recv.grad:
                    self.mark(recv, e, "output")
                if meth in ("mul_", "div_") and args and args[0].grad:
                    self.mark(recv, e, "input")
            return Val(recv.stores, recv.grad or any(a.grad for a in args), recv.tensor)
        grad = recv.grad or any(a.grad for a in args)
        if not recv.tensor and meth in _CONTAINER_ADDS:
            for a in args:
                self.escape(a)
            for x in e.args:
                self.escape_expr(x)  # ``kept.append(inter_outs[i])``: any element
        if meth == "clone" or meth == "contiguous":
            return fresh(recv.grad, True)
        if meth in _VIEWS:
            return Val(recv.stores, recv.grad and meth != "detach", True)
        if not recv.tensor and not recv.grad:
            return fresh(grad)
        if meth in K.SAVES_OUTPUT_FUNCTIONS:
            out = fresh(grad, True)
            if recv.grad:
                self.mark(out, e, "output")
            return out
        if meth in K.PRODUCT_FUNCTIONS and args:
            self.product(recv, args[0], e, both_tensors=meth not in ("mul", "multiply"))
            return fresh(grad, True)
        if meth in K.SAVES_INPUT_FUNCTIONS:
            if recv.grad:
                self.mark(recv, e, "input")
            return fresh(grad, True)
        if meth in K.NON_TENSOR_METHODS or meth in ("item", "tolist", "numpy"):
            return Val()
        return fresh(grad, recv.tensor)

    def call_layer(self, layer: Layer, e: ast.Call) -> Val:
        args = self._args(e)
        for k in e.keywords:
            self.eval(k.value)
        x = args[0] if args else Val()
        self.layer_calls.append((layer, e, self.stmt))  # type: ignore[arg-type]
        if layer.edits is not None:
            self.call_editing(layer.edits, args, e)
        return self.apply(layer, x, e)

    def call_editing(self, fact: tuple, args: "List[Val]", e: ast.Call, targets: "Optional[list]" = None) -> None:
        """A call of a function (or module) of the file that edits in place (``fact``:
        :func:`.facts.callee_edits`): an argument it edits that an operation here saved, or,
        with an argument that requires grad, a saved tensor of its own it then edits.
        ``targets``: the expressions handed, when not ``e``'s arguments (an element of a
        Sequential gets what the element before it returned)."""
        edits, inner = fact
        key = (id(e), id(None))
        if targets is None:
            targets = e.args
        for pos, where, conds in edits:
            if conds:
                continue  # on a path a constructor setting chooses, not resolved for this object
            if pos < len(args) and pos < len(targets) and not isinstance(targets[pos], ast.Starred):
                self.edit(args[pos], e, targets[pos], "callee")
                hit = self.hits.get(key)
                if hit is not None and hit.inside is None:
                    hit.inside = Spot(where)
        if inner and not self.no_grad and key not in self.hits:
            for where, saver, what, local, needs in inner:
                if any(i < len(args) and args[i].grad for i in needs):
                    hit = self.hits[key] = Hit(self.stmt, e, e, Spot(saver), what, "callee-inner")
                    hit.inside = Spot(where)
                    hit.inside_copy = local
                    break

    def call_self_editing(self, edits: tuple, e: ast.Call) -> None:
        """A method of the walked class that edits some of its buffers in place
        (``self._dequeue_and_enqueue(k)`` writing into ``self.queue``): an edit of each."""
        key = (id(e), id(None))
        for name, node, stmt in edits:
            v = self.env.get(name)
            if v is None:
                v = self.env[name] = Val(frozenset({Store(name)}), False, True)
            self.edit(v, e, node, "callee")
            hit = self.hits.get(key)
            if hit is not None and hit.inside is None:
                hit.inside = Spot(spot(where_edited(stmt, node)))

    def apply(self, layer: Layer, x: Val, e: ast.AST, saver: "Optional[ast.AST]" = None) -> Val:
        """``layer(x)`` called at ``e``; what it saves is marked as saved by
        ``saver`` (the element's constructor inside a Sequential, else the call)."""
        kind = layer.kind
        where = saver if saver is not None else e
        if kind == "Sequential":
            v = x
            outer = self.via
            if outer is None:
                self.via = e
            for i, sub in enumerate(layer.items or ()):
                if sub.edits is not None and isinstance(e, ast.Call):
                    # an element that edits its input in place (a block whose forward starts with an
                    # in-place ReLU on it): the Sequential's argument for the first
                    self.call_editing(sub.edits, [v], e, e.args[:1] if i == 0 else [e])
                v = self.apply(sub, v, e, sub.node if sub.node is not None else e)
            self.via = outer
            return v
        if kind == "user":
            if layer.in_saved:
                self.mark(Val(x.stores, x.grad, True), where, "input")
            shape = layer.out_saved
            if shape is None or (shape and shape[0] == "if"):
                return fresh(True)
            vals = []
            for o in shape:
                v = fresh(True, True)
                if o:
                    self.mark(v, where, "output")
                vals.append(v)
            if len(vals) == 1:
                return vals[0]
            return Val(items=tuple(vals), grad=True)
        if kind == "unknown":
            return fresh(True)
        if layer.inplace:
            self.edit(x, e, e.args[0] if isinstance(e, ast.Call) and e.args else e, "inplace-layer", layer)
            if kind in K.INPLACE_SAVES_RESULT and x.grad:
                self.mark(x, where, "output")
            return Val(x.stores, x.grad, True)
        if kind in K.SAVES_INPUT_WEIGHTED_MODULES:
            self.mark(Val(x.stores, x.grad, True), where, "input")
            return fresh(True, kind not in _TUPLE_LAYERS)
        if kind in K.SAVES_OUTPUT_MODULES:
            out = fresh(x.grad, True)
            if x.grad:
                self.mark(out, where, "output")
            return out
        if kind in K.SAVES_INPUT_MODULES:
            if x.grad:
                self.mark(x, where, "input")
            return fresh(x.grad, True)
        if kind in K.SAVES_NOTHING_MODULES or kind in K.PARAMETERLESS_MODULES:
            return fresh(x.grad, True)
        return fresh(True, False)


def escaped_before(flow: "Flow", stores, stmt: ast.stmt, body: "List[ast.stmt]") -> bool:
    """Did one of ``stores`` escape (kept by a list or an attribute) at a statement that may run
    before ``stmt`` -- one not after it, or one inside a loop of ``body`` that holds ``stmt``
    (its next iteration comes back)? An escape after it, outside those loops, keeps the value
    ``stmt`` left (``outs.append(inter_outs[0])`` after the loop that rebinds the elements)."""
    loops = [n for n in A.block_nodes(body) if isinstance(n, A.LOOPS) and A.within(stmt, n)]
    end = (getattr(stmt, "end_lineno", None) or stmt.lineno, getattr(stmt, "end_col_offset", 0) or 0)
    for st in stores:
        for at in flow.escaped_at.get(st, ()):
            if at is None or (at.lineno, at.col_offset) < end or any(A.within(at, lp) for lp in loops):
                return True
    return False

