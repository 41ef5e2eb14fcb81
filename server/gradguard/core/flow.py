"""Shared AST helpers for the graph-lifetime rules (GG101, GG102).

Everything here is pure, never imports torch, and never descends into nested
``def`` / ``class`` / ``lambda`` bodies (those are units of their own).

Stable API (other rules import these; keep signatures):

* walking:        :func:`iter_nodes`, :func:`iter_statements`, :func:`child_blocks`
* names:          :func:`dotted`, :func:`qualify`, :func:`target_names`, :func:`loaded_names`
* backward:       :func:`is_backward_call`, :func:`backward_target`, :func:`has_retain_graph`,
                  :func:`has_create_graph`
* no_grad:        :func:`is_no_grad_context`, :func:`is_no_grad_with`, :func:`is_no_grad_function`
* graph cuts:     :func:`is_graph_cut`, :func:`inplace_cut_target`
* loops:          :func:`is_loop`, :func:`loop_backprops`, :func:`backprop_loops`

``ctx`` arguments are optional :class:`gradguard.core.context.ModuleContext`
objects; without one, names are qualified through :data:`DEFAULT_ALIASES`
(``nn`` → ``torch.nn``, ``F`` → ``torch.nn.functional``), which is what the
module summarizers use (they do not see the import table).
"""

from __future__ import annotations

import ast
import re

from gradguard.core import knowledge as K

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Any, Dict, FrozenSet, Iterable, Optional as _Opt, Tuple

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
LOOPS = (ast.For, ast.AsyncFor, ast.While)

# Conventional aliases, used when no import table is available.
DEFAULT_ALIASES: Mapping[str, str] = {
    "torch": "torch",
    "th": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "optim": "torch.optim",
    "autograd": "torch.autograd",
}


# ---------------------------------------------------------------------------
# walking
# ---------------------------------------------------------------------------
def iter_nodes(nodes: Sequence[ast.AST] | ast.AST) -> Iterator[ast.AST]:
    """Every node in ``nodes`` (a statement list or one node), depth first,
    without entering nested def/class/lambda bodies (the def/lambda node
    itself is yielded, its decorators and defaults are not walked)."""
    stack: List[ast.AST] = list(reversed(nodes)) if isinstance(nodes, (list, tuple)) else [nodes]
    AST = ast.AST
    fields_of = _WALK_FIELDS
    pop = stack.pop
    push = stack.append
    while stack:
        node = pop()
        yield node
        cls = node.__class__
        fields = fields_of.get(cls)
        if fields is None:
            # nested scopes: not entered; others: child fields last-first, so that
            # the first child ends on top of the stack (depth first, source order)
            fields = fields_of[cls] = () if issubclass(cls, _NESTED) else tuple(reversed(_child_fields(cls)))
        for name in fields:  # inlined ast.iter_child_nodes (hot path)
            v = getattr(node, name, None)
            if v.__class__ is list:
                for x in reversed(v):
                    if isinstance(x, AST):
                        push(x)
            elif isinstance(v, AST):
                push(v)


# Per node class, for iter_nodes: its child fields in reverse order, () for nested scopes.
_WALK_FIELDS: dict = {}


def child_nodes(node: ast.AST) -> List[ast.AST]:
    """The direct child nodes of ``node`` in field order, like
    ``ast.iter_child_nodes`` but without the ``ctx`` singletons (Load/Store/Del)
    and without looking at fields that never hold nodes (names, constants)."""
    cls = type(node)
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = _CHILD_FIELDS[cls] = _child_fields(cls)
    children: List[ast.AST] = []
    AST = ast.AST
    for name in fields:
        v = getattr(node, name, None)
        if v.__class__ is list:
            for x in v:
                if isinstance(x, AST):
                    children.append(x)
        elif isinstance(v, AST):
            children.append(v)
    return children


def walk_all(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node``, nested scopes included, in ``ast.walk``'s
    (breadth-first) order, without the ``ctx`` singletons."""
    todo = [node]
    i = 0
    while i < len(todo):
        n = todo[i]
        i += 1
        todo.extend(child_nodes(n))
        yield n


# Per node class: the fields that can hold child nodes. ``ctx`` (Load/Store/Del
# singletons) is left out: nobody needs those nodes and every Name has one.
_CHILD_FIELDS: dict = {}
_LEAF_FIELDS = frozenset({"ctx", "id", "attr", "arg", "name", "module", "level", "value_str",
                          "lineno", "col_offset", "end_lineno", "end_col_offset", "type_comment",
                          "kind", "conversion", "is_async", "simple", "asname", "n", "s"})


def _child_fields(cls) -> tuple:
    out = []
    for f in cls._fields:
        if f in _LEAF_FIELDS:
            continue
        if cls is ast.Constant and f == "value":
            continue
        out.append(f)
    return tuple(out)


def child_blocks(stmt: ast.stmt) -> List[List[ast.stmt]]:
    """The statement lists directly inside a compound statement
    (body/orelse/finalbody/handlers' bodies/match cases), nested defs excluded."""
    if isinstance(stmt, _NESTED):
        return []
    out: List[List[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, name, None)
        if block:
            out.append(block)
    for h in getattr(stmt, "handlers", ()) or ():
        out.append(h.body)
    for c in getattr(stmt, "cases", ()) or ():
        out.append(c.body)
    return out


def iter_statements(stmts: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a block and of the compound statements inside it, in
    source order, not entering nested defs/classes (the def itself is yielded)."""
    for s in stmts:
        yield s
        for block in child_blocks(s):
            yield from iter_statements(block)


# ---------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------
# ``dotted`` lives with ModuleContext.qualify, which is built on it; re-exported here.
from gradguard.core.context import dotted  # noqa: E402,F401


def qualify(expr: ast.AST, ctx=None, local_aliases: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Dotted name through import aliases (``ctx.imports``, then ``local_aliases``,
    then :data:`DEFAULT_ALIASES`). ``nn.GRU`` → ``torch.nn.GRU``."""
    name = dotted(expr)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    full = None
    if ctx is not None and head in ctx.imports:
        full = ctx.imports[head]
    elif local_aliases and head in local_aliases:
        full = local_aliases[head]
    elif head in DEFAULT_ALIASES and (ctx is None or head not in getattr(ctx, "imports", {})):
        full = DEFAULT_ALIASES[head]
    if full is None:
        return name
    return f"{full}.{rest}" if rest else full


def target_names(target: ast.AST) -> List[str]:
    """Names bound by an assignment target (tuples/lists/starred flattened;
    ``self.x`` as ``"self.x"``; subscripts ignored)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        out: List[str] = []
        for e in target.elts:
            out.extend(target_names(e))
        return out
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    d = dotted(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
    return [d] if d else []


def loaded_names(expr: ast.AST) -> List[str]:
    """Names (and ``self.x`` chains) read by an expression, outermost chain only."""
    out: List[str] = []
    for n in iter_nodes(expr):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.append(n.id)
    return out


# ---------------------------------------------------------------------------
# backward
# ---------------------------------------------------------------------------
def _method(call: ast.AST) -> Optional[str]:
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def is_backward_call(call: ast.AST, ctx=None) -> bool:
    """``x.backward()``, ``scaler.scale(l).backward()``, ``accelerator.backward(l)``,
    ``self.manual_backward(l)``, ``torch.autograd.backward(l)``, ``torch.autograd.grad(l, ps)``."""
    if call.__class__ is not ast.Call:
        return False
    func = call.func  # type: ignore[attr-defined]
    if func.__class__ is ast.Attribute:
        if func.attr in K.BACKWARD_METHODS:
            return True
        if func.attr not in _BACKWARD_FUNCTION_NAMES:
            return False  # qualifying only renames the head of a dotted name, never its last part
    elif func.__class__ is not ast.Name:
        return False
    return qualify(func, ctx) in K.BACKWARD_FUNCTIONS


# last parts of the backward functions' names ("grad" for torch.autograd.grad); a call
# spelled ``x.<other>(...)`` can never qualify to one of them (a hot test: every call)
_BACKWARD_FUNCTION_NAMES = frozenset(q.rsplit(".", 1)[-1] for q in K.BACKWARD_FUNCTIONS)


def backward_target(call: ast.Call, ctx=None) -> Optional[ast.expr]:
    """The expression whose graph a backward call traverses:
    ``loss`` in ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``accelerator.backward(loss)``, ``torch.autograd.grad(loss, params)``."""
    m = _method(call)
    if m in K.BACKWARD_METHODS and qualify(call.func, ctx) not in K.BACKWARD_FUNCTIONS:
        if call.args:
            # accelerator.backward(loss) / self.manual_backward(loss) / fabric.backward(loss)
            recv = call.func.value  # type: ignore[union-attr]
            if m == "manual_backward" or not _looks_like_tensor_receiver(recv):
                return call.args[0]
        recv = call.func.value  # type: ignore[union-attr]
        # scaler.scale(loss).backward() → loss
        if isinstance(recv, ast.Call) and _method(recv) == "scale" and recv.args:
            return recv.args[0]
        return recv
    if call.args:
        return call.args[0]
    for kw in call.keywords:
        if kw.arg in ("tensors", "outputs"):
            return kw.value
    return None


def _looks_like_tensor_receiver(recv: ast.AST) -> bool:
    """``loss.backward(gradient)`` passes a gradient, ``accelerator.backward(loss)``
    passes the loss: tell them apart by the receiver's name."""
    name = dotted(recv)
    if name is None:
        return True  # (a + b).backward(g), scaler.scale(l).backward()
    last = name.rsplit(".", 1)[-1].lower()
    return last not in K.BACKWARD_OWNERS


def has_create_graph(call: ast.Call) -> bool:
    """``create_graph=True``: a higher-order step (MAML-style unrolling) that keeps
    the graph on purpose; values carried through it are meant to be."""
    for kw in call.keywords:
        if kw.arg == "create_graph":
            v = kw.value
            return not (isinstance(v, ast.Constant) and v.value in (False, None))
    return False


def has_retain_graph(call: ast.Call) -> bool:
    """``retain_graph=True`` (or any non-False/None value) on a backward call."""
    for kw in call.keywords:
        if kw.arg in ("retain_graph", "create_graph"):
            v = kw.value
            if isinstance(v, ast.Constant) and v.value in (False, None):
                continue
            return True
    return False


# ---------------------------------------------------------------------------
# no_grad
# ---------------------------------------------------------------------------
def is_no_grad_context(expr: ast.AST, ctx=None) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``
    (also the un-called decorator forms ``@torch.no_grad``)."""
    func = expr.func if isinstance(expr, ast.Call) else expr
    q = qualify(func, ctx)
    if q is None or q not in K.NO_GRAD_CONTEXTS:
        return False
    if q.endswith("set_grad_enabled"):
        if not isinstance(expr, ast.Call) or not expr.args:
            return False
        a = expr.args[0]
        return isinstance(a, ast.Constant) and a.value is False
    if q.endswith("inference_mode") and isinstance(expr, ast.Call) and expr.args:
        a = expr.args[0]
        return not (isinstance(a, ast.Constant) and a.value is False)
    return True


def is_no_grad_with(node: ast.AST, ctx=None) -> bool:
    """A ``with`` statement one of whose items disables graph recording."""
    if not isinstance(node, (ast.With, ast.AsyncWith)):
        return False
    return any(is_no_grad_context(item.context_expr, ctx) for item in node.items)


def is_no_grad_function(fn: ast.AST, ctx=None) -> bool:
    """A def decorated with ``@torch.no_grad()`` / ``@torch.inference_mode()``."""
    return any(is_no_grad_context(d, ctx) for d in getattr(fn, "decorator_list", ()) or ())


# ---------------------------------------------------------------------------
# graph cuts
# ---------------------------------------------------------------------------
def is_cut_function(e: ast.AST) -> bool:
    """A graph cut handed over as a function: ``torch.Tensor.detach``,
    ``Tensor.detach``, ``lambda t: t.detach()``, ``lambda t: t.detach() if
    torch.is_tensor(t) else t``."""
    if e.__class__ is ast.Attribute:
        return e.attr == "detach"  # type: ignore[attr-defined]
    if e.__class__ is ast.Lambda and len(e.args.args) == 1:  # type: ignore[attr-defined]
        body, p = e.body, e.args.args[0].arg  # type: ignore[attr-defined]
        if isinstance(body, ast.IfExp):  # the non-tensor branch hands its input back
            branches = (body.body, body.orelse)
            return any(is_graph_cut(b) for b in branches) and all(
                is_graph_cut(b) or (isinstance(b, ast.Name) and b.id == p) for b in branches)
        return is_graph_cut(body)
    return False


def applies_cut(call: ast.Call) -> bool:
    """A call given a graph cut as a function — ``apply_to_tensor(h,
    torch.Tensor.detach)``, ``tree_map(lambda t: t.detach(), h)``,
    ``map(torch.Tensor.detach, h)``: what comes back is detached."""
    for a in call.args:
        if is_cut_function(a):
            return True
    for k in call.keywords:
        if is_cut_function(k.value):
            return True
    return False


def is_graph_cut(expr: ast.AST) -> bool:
    """True when the expression's value certainly has no autograd graph:
    ``None`` / constants, ``x.detach()``, ``x.item()``, ``x.tolist()``, ``x.data``,
    ``tuple(s.detach() for s in h)``, ``(h.detach(), c.detach())``,
    ``[s.detach() for s in h]``, ``a.detach() if c else None``."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Attribute) and expr.attr in K.GRAPH_CUT_ATTRS:
        return True
    if isinstance(expr, ast.Call):
        m = _method(expr)
        if m in K.GRAPH_CUT_METHODS or m in K.INTEGER_METHODS:
            return True
        # .detach().to(device), .detach().clone(): a cut followed by a passthrough
        if m in K.PASSTHROUGH_METHODS and is_graph_cut(expr.func.value):  # type: ignore[union-attr]
            return True
        if isinstance(expr.func, ast.Name) and expr.func.id in ("tuple", "list") and len(expr.args) == 1:
            return is_graph_cut(expr.args[0])
        if applies_cut(expr):
            return True
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(is_graph_cut(e) for e in expr.elts)
    if isinstance(expr, (ast.GeneratorExp, ast.ListComp)):
        return is_graph_cut(expr.elt)
    if isinstance(expr, ast.IfExp):
        return is_graph_cut(expr.body) and is_graph_cut(expr.orelse)
    return False


def inplace_cut_target(stmt: ast.stmt) -> Optional[str]:
    """``h.detach_()`` / ``h.requires_grad_(False)`` as a statement → ``"h"``;
    ``for s in state: s.detach_()`` (every element cut in place, the textbook
    truncated-BPTT line) → ``"state"``."""
    if stmt.__class__ is ast.For:
        target = stmt.target  # type: ignore[attr-defined]
        if (target.__class__ is ast.Name and stmt.body and not stmt.orelse  # type: ignore[attr-defined]
                and all(inplace_cut_target(b) == target.id for b in stmt.body)):  # type: ignore[attr-defined]
            return dotted(stmt.iter)  # type: ignore[attr-defined]
        return None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        m = _method(call)
        if m in K.INPLACE_CUT_METHODS:
            if m == "requires_grad_" and not (
                call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value is False
            ):
                return None
            return dotted(call.func.value)  # type: ignore[union-attr]
    return None


# ---------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------
def is_loop(node: ast.AST) -> bool:
    return isinstance(node, LOOPS)


def _contains_backward(stmts: Sequence[ast.stmt], ctx, extra: Optional[Callable[[ast.Call], bool]]) -> bool:
    stack: List[ast.AST] = list(stmts)
    AST = ast.AST
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)) and is_no_grad_with(node, ctx):
            continue
        if isinstance(node, ast.Call) and (is_backward_call(node, ctx) or (extra is not None and extra(node))):
            return True
        for name in node._fields:
            v = getattr(node, name, None)
            if isinstance(v, list):
                stack.extend(x for x in v if isinstance(x, AST))
            elif isinstance(v, AST):
                stack.append(v)
    return False


def loop_backprops(loop: ast.AST, ctx=None, extra: Optional[Callable[[ast.Call], bool]] = None) -> bool:
    """Does the loop body (nested loops included, nested defs and no_grad
    blocks excluded) call backward? ``extra(call)`` may recognise more
    (e.g. a call of a same-file helper that calls backward)."""
    return _contains_backward(list(loop.body), ctx, extra)  # type: ignore[attr-defined]


def backprop_loops(stmts: Sequence[ast.stmt], ctx=None, extra: Optional[Callable[[ast.Call], bool]] = None) -> List[ast.stmt]:
    """Loops (outermost first, nested ones too) in a unit that back-propagate."""
    out = []
    for s in iter_statements(stmts):
        if isinstance(s, LOOPS) and loop_backprops(s, ctx, extra):
            out.append(s)
    return out


# ---------------------------------------------------------------------------
# Graph taint interpreter
# ---------------------------------------------------------------------------
# A small abstract interpreter over one unit. Each value is a :class:`Val`: a
# set of *tokens* saying where its autograd graph comes from, plus its tuple
# structure (LSTM ``(h, c)``) and, for objects, what it is (a module, a
# function). Tokens:
#
#   ("G", node)                 graph built by ``node`` (a module call, an op on a leaf) in this unit
#   ("L",)                      a leaf that requires grad (nn.Parameter, requires_grad=True)
#   ("P", i)                    flows from parameter ``i`` (function summaries)
#   ("C", name, loop, idx)      carried into ``loop``'s next iteration by ``name``
#                               (element ``idx`` of a tuple state, or -1)
#
# It is linear in the unit's size except that a back-propagating loop body is
# walked twice (once to learn what an iteration leaves behind, once with those
# values carried in), so nested loops cost 2^depth walks of the inner body.

from gradguard.core.record import Factory, record  # noqa: E402
from gradguard.core.summary import query  # noqa: E402

EMPTY: FrozenSet = frozenset()


@record(frozen=False, eq=False)  # immutable by convention: never assigned after creation (hot: a plain init)
class Val:
    """Abstract value. ``taints`` of a tuple is the union of its elements'."""

    taints: FrozenSet = EMPTY
    elems: _Opt[Tuple["Val", ...]] = None
    obj: _Opt[str] = None  # "inst:torch.nn.GRU", "user:Model", "ucls:Model", "cls:torch.nn.GRU", "fn:name"
    none: bool = False  # may be None
    undef: bool = False  # may be unbound
    param: bool = False  # comes from a function parameter (unknown caller value)
    site: _Opt[ast.stmt] = None  # statement that assigned it (for reporting)
    const: bool = False  # may be a plain Python number/str constant (not a tensor)
    frozen: bool = False  # a module whose parameters were all set requires_grad=False
    kind: _Opt[str] = None  # "list" for a Python list (fixes keep it a list)

    def graph_tokens(self) -> FrozenSet:
        return frozenset(t for t in self.taints if t[0] == "G")

    def has_grad(self) -> bool:
        return any(t[0] in ("G", "L") for t in self.taints)


CLEAN = Val()
NONE = Val(none=True)
CONST = Val(const=True)


def tup(elems: Sequence[Val]) -> Val:
    taints: FrozenSet = frozenset().union(*(e.taints for e in elems)) if elems else EMPTY
    return Val(taints, tuple(elems))


def plain(taints: Iterable) -> Val:
    t = frozenset(taints)
    return Val(t) if t else CLEAN


def join(a: _Opt[Val], b: _Opt[Val]) -> Val:
    if a is None and b is None:
        return Val(undef=True)
    if a is None:
        return _with(b, undef=True)
    if b is None:
        return _with(a, undef=True)
    if a is b:
        return a
    elems = None
    if a.elems is not None and b.elems is not None and len(a.elems) == len(b.elems):
        elems = tuple(join(x, y) for x, y in zip(a.elems, b.elems))
    elif a.elems is not None and b.none and not b.taints:
        elems = a.elems
    elif b.elems is not None and a.none and not a.taints:
        elems = b.elems
    site = a.site
    if b.site is not None and (site is None or (b.graph_tokens() and not a.graph_tokens())):
        site = b.site
    return Val(
        a.taints | b.taints,
        elems,
        a.obj if a.obj == b.obj else (a.obj or b.obj),
        a.none or b.none,
        a.undef or b.undef,
        a.param or b.param,
        site,
        a.const or b.const,
        a.frozen and b.frozen,
        a.kind if a.kind == b.kind else None,
    )


def _with(v: Val, **kw) -> Val:
    d = dict(taints=v.taints, elems=v.elems, obj=v.obj, none=v.none, undef=v.undef, param=v.param, site=v.site,
             const=v.const, frozen=v.frozen, kind=v.kind)
    d.update(kw)
    return Val(**d)


def join_env(a: Dict[str, Val], b: Dict[str, Val]) -> Dict[str, Val]:
    out: Dict[str, Val] = {}
    for k in a.keys() | b.keys():
        va, vb = a.get(k), b.get(k)
        out[k] = va if va is vb else join(va, vb)
    return out


@record
class RetPos:
    """One returned position of a function: does it carry a graph built inside,
    which parameters flow into it, and its tuple arity when known (LSTM state: 2)."""

    graph: bool = False
    params: FrozenSet[int] = EMPTY
    arity: _Opt[int] = None
    # parameters it is computed from by an operation (not merely handed back): an
    # argument that requires grad or has a graph makes a new graph in the call
    derived: FrozenSet[int] = EMPTY


@record
class FnFacts:
    """Coarse, hashable facts about a same-file function or method.

    ``params`` excludes ``self``/``cls`` for methods. ``returns`` is the per-position
    summary when every ``return`` returns a tuple of the same length, else None;
    ``ret`` is the whole returned value. ``backward_params``: parameters whose value
    reaches a backward() inside. ``detaches``: takes arguments and returns none of
    their graphs nor a new one (a ``repackage_hidden``-style helper, by its body)."""

    params: Tuple[str, ...] = ()
    ret: RetPos = RetPos()
    returns: _Opt[Tuple[RetPos, ...]] = None
    calls_backward: bool = False
    backward_params: FrozenSet[int] = EMPTY
    backward_retains: bool = False  # every backward() it makes passes retain_graph=True
    detaches: bool = False
    no_grad: bool = False
    returns_value: bool = False
    # Calls of module-level functions the summary could not see into (facts are
    # per definition): ``(name, parameters flowing into each positional argument,
    # ((keyword, parameters), ...))``. Where the function is called, the callee's
    # own facts are looked up and composed (``GraphFlow._apply_delegates``), so
    # a loop calling ``train_epoch(...)`` that calls ``train_step(...)`` that
    # calls ``loss.backward()`` sees that backward.
    delegates: Tuple[Tuple[str, Tuple[FrozenSet[int], ...], Tuple[Tuple[str, FrozenSet[int]], ...]], ...] = ()

    def argument(self, i: int, positional: Sequence, keywords: Mapping, default: Any = None) -> Any:
        """What a call passes for parameter ``i``: its i-th positional argument,
        else the keyword argument of that parameter's name, else ``default``."""
        if i < len(positional):
            return positional[i]
        if i < len(self.params) and self.params[i] in keywords:
            return keywords[self.params[i]]
        return default


@record
class ClassFacts:
    """Facts about a same-file class: raw dotted base names, ``self.<attr> = Ctor(...)``
    constructors (raw dotted names), method facts, and a few derived flags."""

    bases: Tuple[str, ...] = ()
    attrs: Tuple[Tuple[str, str], ...] = ()
    methods: Tuple[Tuple[str, FnFacts], ...] = ()
    has_forward: bool = False
    has_init_hidden: bool = False
    forward_detaches_hidden: bool = False
    # (method, attrs it resets or detaches: self.x = None / zeros / self.x.detach())
    cuts: Tuple[Tuple[str, FrozenSet[str]], ...] = ()
    # state forward keeps on the module from one call into the next, still on the
    # call's graph (``out, self.hidden = self.lstm(x, self.hidden)``):
    # (``"self.hidden"``, shape: "tuple" | "tensor" | "unknown", may it be None)
    carried: Tuple[Tuple[str, str, bool], ...] = ()

    def methods_cutting(self, attr: str) -> FrozenSet[str]:
        return frozenset(m for m, attrs in self.cuts if attr in attrs)

    def attr(self, name: str) -> _Opt[str]:
        for k, v in self.attrs:
            if k == name:
                return v
        return None

    def method(self, name: str) -> _Opt[FnFacts]:
        for k, v in self.methods:
            if k == name:
                return v
        return None


_RECURRENT_SHORT = {q.rsplit(".", 1)[-1] for q in K.RECURRENT_MODULES | K.RECURRENT_CELLS}


class Resolver:
    """What names mean. The base class knows torch (through ``ctx`` import aliases
    or the default ones); :class:`gradguard.rules` subclass it to add same-file facts."""

    def __init__(self, ctx=None, summary: _Opt[Mapping[str, Any]] = None, local_aliases=None):
        self.ctx = ctx
        self.summary = summary if summary is not None else (getattr(ctx, "summary", None) or {})
        self.local_aliases = local_aliases or {}
        self._module_names: _Opt[FrozenSet[str]] = None

    def qualify(self, expr: ast.AST) -> _Opt[str]:
        return qualify(expr, self.ctx, self.local_aliases)

    def qualify_raw(self, raw: str) -> str:
        head, _, rest = raw.partition(".")
        imports = getattr(self.ctx, "imports", None) or {}
        full = imports.get(head) or self.local_aliases.get(head) or (DEFAULT_ALIASES.get(head) if head not in imports else None)
        if full is None:
            return raw
        return f"{full}.{rest}" if rest else full

    @staticmethod
    def torch_class(q: _Opt[str]) -> _Opt[str]:
        """Normalise a qualified class name to a torch.nn class, with a bare-name
        fallback for the recurrent ones (``GRU`` from an unseen import)."""
        if not q:
            return None
        if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper():
            return q
        if "." not in q and q in _RECURRENT_SHORT:
            return "torch.nn." + q
        return None

    def imported_module_names(self) -> FrozenSet[str]:
        """The last parts of the dotted ``fn:``/``class:`` names the summary holds
        (``repackage_hidden`` of ``fn:utils.repackage_hidden``): a cheap test before
        a method call is looked up as a module's function. A summary query."""
        names = self._module_names
        if names is None:
            names = self._module_names = query(self.summary, _dotted_def_names)
        return names

    def rebound(self, name: str) -> bool:
        return rebound(self.summary, name)

    # -- same-file facts ------------------------------------------------
    def fn(self, name: str) -> _Opt[FnFacts]:
        v = self.summary.get("fn:" + name)
        return v if isinstance(v, FnFacts) else None

    def cls(self, name: str) -> _Opt[ClassFacts]:
        v = self.summary.get("class:" + name)
        return v if isinstance(v, ClassFacts) else None

    def global_obj(self, name: str) -> _Opt[str]:
        """Object descriptor for a module-level name seen from a unit."""
        if self.cls(name) is not None:
            return "ucls:" + name
        if self.fn(name) is not None:
            return "fn:" + name
        raw = self.summary.get("var:" + name)
        if isinstance(raw, str):
            return self.ctor_obj(raw)
        return None

    def ctor_obj(self, raw: str) -> _Opt[str]:
        """What calling the (raw dotted) constructor ``raw`` gives."""
        q = self.qualify_raw(raw)
        tc = self.torch_class(q)
        if tc:
            return "inst:" + tc
        if self.cls(raw) is not None:  # a dotted name only when resolved from `import m`
            return "user:" + raw
        return None

    def is_module_class(self, name: str, _depth: int = 0) -> bool:
        cf = self.cls(name)
        if cf is None or _depth > 5:
            return False
        if cf.has_forward:
            return True
        for b in cf.bases:
            q = self.qualify_raw(b)
            if q in K.MODULE_BASES or (q.startswith("torch.nn.") and q[9:10].isupper()):
                return True
            if "." not in b and self.is_module_class(b, _depth + 1):
                return True
        return False

    def attr_obj(self, obj: _Opt[str], attr: str) -> _Opt[str]:
        if obj and obj.startswith("user:"):
            cf = self.cls(obj[5:])
            if cf is not None:
                raw = cf.attr(attr)
                if raw:
                    return self.ctor_obj(raw)
        return None

    def method_facts(self, obj: _Opt[str], name: str) -> _Opt[FnFacts]:
        if obj and obj.startswith("user:"):
            cf = self.cls(obj[5:])
            if cf is not None:
                return cf.method(name)
        return None


def rebound(summary: Mapping[str, Any], name: str) -> bool:
    """Is the module-level ``name`` an object made by a call (``model =
    model.RNNModel(...)``), not the module it was imported as?"""
    return ("var:" + name) in summary or ("inst:" + name) in summary


def _dotted_def_names(summary) -> FrozenSet[str]:
    return frozenset(k.rpartition(".")[2] for k in summary
                     if "." in k and k.startswith(("fn:", "class:")))


@record(frozen=False)
class BackwardEvent:
    call: ast.Call  # the backward() (or the call of a helper that back-propagates)
    loss: Val
    retain: bool
    in_loop: bool = False  # inside a loop of the unit (then the loop analysis owns it)


@record(frozen=False)
class LoopFrame:
    loop: ast.stmt
    second: bool = False  # pass 2: carried values seeded
    backprop: bool = False
    reached: set = Factory(set)  # G tokens some backward traversed (pass 1)
    hits: Dict[Tuple, BackwardEvent] = Factory(dict)  # C token → first event


@record(frozen=False)
class Carry:
    """A value carried into the next iteration of ``loop`` that reaches a backward."""

    loop: ast.stmt
    names: Tuple[str, ...]  # variables (several when a tuple is unpacked: h, c)
    site: ast.stmt  # the assignment that leaves it with a graph
    built_by: _Opt[ast.AST]  # where that graph is built
    event: BackwardEvent  # the backward that fails
    missing: Tuple[int, ...]  # tuple state: the elements still attached (() = whole value)
    arity: _Opt[int]  # tuple arity of the carried state, if known
    entry: Dict[str, Val]  # values before the loop (for fixes)
    end: Dict[str, Val]  # values at the end of an iteration


def state_shape(torch_class: _Opt[str]) -> str:
    """"tuple" | "tensor" | "unknown": the state a torch module of this class
    returns beside its output (an LSTM's ``(h, c)``, a GRU's ``h``)."""
    if torch_class in K.LSTM_LIKE:
        return "tuple"
    return "tensor" if torch_class and K.is_recurrent(torch_class) else "unknown"


# How deep summaries are composed through chains of helpers (FnFacts.delegates,
# GG102's bwcalls): train_epoch -> train_step -> backward is depth 2.
DELEGATION_DEPTH = 4


def _non_graph_library(name: _Opt[str]) -> bool:
    """A (qualified or conventionally aliased) name in a library that never
    returns a tensor with a graph (``numpy.roll``, ``np.roll``)."""
    if not name:
        return False
    root = name.split(".", 1)[0]
    return root in K.NON_GRAPH_LIBRARIES or root in K.NON_GRAPH_ALIASES


def _param_set(v: Val) -> FrozenSet[int]:
    """The parameters (``("P", i)`` tokens) a value carries, while summarising a def."""
    return frozenset(t[1] for t in v.taints if t[0] == "P")


_CLEAN_BUILTINS = frozenset(
    {"len", "range", "print", "isinstance", "issubclass", "int", "float", "bool", "str", "repr", "hasattr",
     "callable", "id", "type", "format", "open", "round", "hash", "divmod", "ord", "chr", "input", "super"}
)
_BUILTIN_NAMES = frozenset(dir(__import__("builtins")))
# the legacy typed tensor constructors: torch.FloatTensor, torch.cuda.LongTensor, torch.Tensor
_LEGACY_TENSOR_TYPE = re.compile(
    r"torch\.(?:cuda\.)?(?:Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool)?Tensor")
_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel",
                       "torch.nn.parallel.DataParallel", "torch.compile", "torch.jit.script"})
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "state_dict", "modules", "children", "buffers",
                             "zero_grad", "load_state_dict", "apply", "register_buffer", "flatten_parameters",
                             "named_modules", "register_forward_hook"})
_SELF_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half", "bfloat16",
                           "requires_grad_", "share_memory", "type"})


class GraphFlow:
    """Run the taint interpreter over one unit.

    After :meth:`run`, ``carries`` lists GG101 candidates, ``events`` the backward
    events (outside loops too) and ``returns`` the returned values (for summaries)."""

    def __init__(self, resolver: Resolver, no_grad: bool = False, self_obj: _Opt[str] = None,
                 track_self_state: bool = False, find_carries: bool = True):
        self.r = resolver
        # summaries only need returns and backward events: one walk per loop body
        self.find_carries = find_carries
        # mark ``self.x`` read before any assignment with ("A", "self.x"): a value
        # the object kept from a previous call (stateful modules)
        self.track_self_state = track_self_state
        self.no_grad = 1 if no_grad else 0
        self.self_obj = self_obj
        self.frames: List[LoopFrame] = []
        self.carries: List[Carry] = []
        self._carried_keys: set = set()
        self.events: List[BackwardEvent] = []
        # ids of the calls whose graph node surely saves tensors for backward: module
        # forwards and the torch functions that save (GG103 needs certainty, not "may")
        self.saving_calls: set = set()
        self.returns: List[Val] = []
        # while summarising a def: calls of module-level functions (FnFacts.delegates)
        self.delegates: List[tuple] = []
        self._targets: Tuple[str, ...] = ()  # names assigned by the statement being evaluated
        self._dotted_bases: set = set()
        self._stmt: _Opt[ast.stmt] = None
        # the branches last taken on each simple condition (see _recall_branches)
        self._branches: Dict[tuple, list] = {}
        self._cond_keys: Dict[ast.expr, _Opt[tuple]] = {}  # per test node (loop bodies run more than once)

    # -- entry points ----------------------------------------------------
    def run(self, body: Sequence[ast.stmt], env: _Opt[Dict[str, Val]] = None) -> Dict[str, Val]:
        env = dict(env or {})
        if self.self_obj:
            env.setdefault("self", Val(obj=self.self_obj))
        if self.track_self_state:
            for s in iter_statements(body):
                if isinstance(s, ast.Global):
                    for n in s.names:
                        env[n] = Val(frozenset({("A", n)}))
        self.final = self.block(body, env)
        return self.final

    def call_carried_states(self) -> List[Tuple[str, Val, BackwardEvent]]:
        """After :meth:`run`: state kept between CALLS of this unit (``global h`` or
        ``self.h``, entered with an ("A", name) token) that is rebuilt here from its
        previous value with a graph, fed into this unit's own backward (which frees
        that graph), and kept for the next call: the next call's backward crashes."""
        out = []
        for key, v in (getattr(self, "final", None) or {}).items():
            tok = ("A", key)
            if tok not in v.taints:
                continue
            g = v.graph_tokens()
            if not g:
                continue
            for ev in self.events:
                if tok in ev.loss.taints and g & ev.loss.graph_tokens() and not ev.in_loop:
                    out.append((key, v, ev))
                    break
        return sorted(out, key=lambda kv: kv[0])

    def self_states(self) -> List[Tuple[str, Val]]:
        """After :meth:`run` with ``track_self_state``: attributes ``self.x`` that the
        unit reassigns from a graph built on their own previous value — state the
        object carries from one call into the next — when that graph also reaches
        what the unit returns (so the caller's backward frees it)."""
        out = []
        returned: set = set()
        for r in self.returns:
            returned |= r.taints
        for key, v in (getattr(self, "final", None) or {}).items():
            if not key.startswith("self.") or ("A", key) not in v.taints:
                continue
            g = v.graph_tokens()
            # the output depends on the previous call's state (so the caller's next
            # backward walks into it) and shares this call's graph (so this call's
            # backward frees it)
            if g and g & returned and ("A", key) in returned:
                out.append((key, v))
        return sorted(out, key=lambda kv: kv[0])

    # -- statements ------------------------------------------------------
    def block(self, stmts: Sequence[ast.stmt], env: Dict[str, Val]) -> Dict[str, Val]:
        for s in stmts:
            env = self.stmt(s, env)
        return env

    def stmt(self, s: ast.stmt, env: Dict[str, Val]) -> Dict[str, Val]:
        self._stmt = s
        if isinstance(s, ast.Assign):
            self._targets = tuple(n for t in s.targets for n in target_names(t))
            v = self.eval(s.value, env)
            self._targets = ()
            for t in s.targets:
                self.bind(t, v, env, s)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self._targets = tuple(target_names(s.target))
                v = self.eval(s.value, env)
                self._targets = ()
                self.bind(s.target, v, env, s)
        elif isinstance(s, ast.AugAssign):
            cur = self.eval(s.target, env)
            v = self.eval(s.value, env)
            res = plain(cur.taints | v.taints)
            if not self.no_grad and "L" in {t[0] for t in res.taints}:
                res = plain(res.taints | {("G", s)})
            self.bind(s.target, res, env, s)
        elif isinstance(s, ast.Expr):
            name = inplace_cut_target(s)
            if name is not None:
                old = env.get(name)
                if old is not None and old.obj and old.obj.startswith(("inst:", "user:")):
                    env[name] = _with(old, frozen=True)  # encoder.requires_grad_(False)
                else:
                    env[name] = _with(old or CLEAN, taints=EMPTY, elems=None, site=s)
            else:
                self.eval(s.value, env)
        elif isinstance(s, ast.If):
            self.eval(s.test, env)
            e1, e2 = dict(env), dict(env)
            self._narrow(s.test, e1, e2)
            key = self._cond_keys.get(s.test, _NO_KEY)
            if key is _NO_KEY:
                key = self._cond_keys[s.test] = _condition_key(s.test)
            if key is not None:
                self._recall_branches(key, env, e1, e2)
            before = env
            e1 = self.block(s.body, e1)
            e2 = self.block(s.orelse, e2)
            env = join_env(e1, e2)
            if key is not None:
                self._remember_branches(key, s.test, before, e1, e2, env)
        elif isinstance(s, LOOPS):
            name = inplace_cut_target(s)
            if name is not None:  # for s in state: s.detach_()
                env[name] = _with(env.get(name) or CLEAN, taints=EMPTY, elems=None, site=s)
            else:
                env = self.loop(s, env)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            ng = is_no_grad_with(s, self.r.ctx)
            for item in s.items:
                v = self.eval(item.context_expr, env)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, v, env, s)
            if ng:
                self.no_grad += 1
            env = self.block(s.body, env)
            if ng:
                self.no_grad -= 1
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            env = self.block(s.body, env)
            out = env
            for h in s.handlers:
                out = join_env(out, self.block(h.body, dict(env)))
            out = self.block(s.orelse, out)
            env = self.block(s.finalbody, out)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.returns.append(self.eval(s.value, env))
            else:
                self.returns.append(NONE)
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                for n in target_names(t):
                    env.pop(n, None)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env[s.name] = Val(obj="local")
        elif type(s).__name__ == "Match":
            self.eval(s.subject, env)  # type: ignore[attr-defined]
            out = None
            for c in s.cases:  # type: ignore[attr-defined]
                e = self.block(c.body, dict(env))
                out = e if out is None else join_env(out, e)
            env = join_env(env, out) if out is not None else env
        elif isinstance(s, (ast.Raise, ast.Assert)):
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.eval(child, env)
        return env

    # ``if use_reg: penal = ...`` … ``if use_reg: loss = loss + penal``: the second
    # test takes the branch the first took, as long as nothing it reads changed in
    # between, so a value the first branch set is not also "last iteration's".
    def _remember_branches(self, key: tuple, test: ast.expr, before, e1, e2, merged) -> None:
        names = _condition_names(test)
        watched = {n: merged.get(n) for n in names}
        watched.update((n.split(".")[0], merged.get(n.split(".")[0])) for n in names)
        yes = {n: v for n, v in e1.items() if before.get(n) is not v}
        no = {n: v for n, v in e2.items() if before.get(n) is not v}
        kept = {n: merged.get(n) for n in set(yes) | set(no)}
        memos = self._branches.setdefault(key, [])
        memos.append((watched, yes, no, kept))
        del memos[:-8]  # the same test in both arms of another if leaves one each

    def _recall_branches(self, key: tuple, env, yes_env, no_env) -> None:
        best, hits = None, 0
        for memo in reversed(self._branches.get(key, ())):
            watched, _, _, kept = memo
            if any(env.get(n) is not v for n, v in watched.items()):
                continue  # what the test reads has changed since
            n_hits = sum(1 for n, v in kept.items() if env.get(n) is v)
            if n_hits > hits:
                best, hits = memo, n_hits
        if best is None:
            return
        _, yes, no, kept = best
        for side, values in ((yes_env, yes), (no_env, no)):
            for n, v in values.items():
                if env.get(n) is kept.get(n):  # untouched since that branch
                    side[n] = v

    @staticmethod
    def _narrow(test: ast.expr, yes: Dict[str, Val], no: Dict[str, Val]) -> None:
        """``if h is not None:`` → on the other path h is None (carries nothing);
        ``if hasattr(h, "detach"):`` → on the other path h is not a tensor."""
        if (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "hasattr"
            and len(test.args) == 2
            and isinstance(test.args[1], ast.Constant)
            and test.args[1].value == "detach"
        ):
            name = dotted(test.args[0])
            if name is not None:
                no[name] = CONST
            return
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            name = dotted(test.left)
            if name is None:
                return
            if isinstance(test.ops[0], ast.IsNot):
                no[name] = NONE
            elif isinstance(test.ops[0], ast.Is):
                yes[name] = NONE

    def bind(self, target: ast.AST, v: Val, env: Dict[str, Val], s: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            starred = any(isinstance(e, ast.Starred) for e in elts)
            if v.elems is not None and len(v.elems) == len(elts) and not starred:
                for e, ev in zip(elts, v.elems):
                    self.bind(e, ev, env, s)
            else:
                part = plain(v.taints)
                for e in elts:
                    if isinstance(e, ast.Subscript):
                        # out, opt[0] = f(...) with f's outputs unknown: do not smear
                        # the whole result's graph over a container element
                        self.eval(e.slice, env)
                        continue
                    self.bind(e, part, env, s)
            return
        if isinstance(target, ast.Starred):
            self.bind(target.value, plain(v.taints), env, s)
            return
        name = dotted(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
        if name is not None:
            env[name] = _with(v, site=s, undef=False, param=False)
            if "." in name:
                self._dotted_bases.add(name.split(".", 1)[0])
            elif name in self._dotted_bases:
                # rebinding x invalidates x.attr entries (only scanned for names
                # that ever had one: keeps long straight-line code linear)
                prefix = name + "."
                for k in [k for k in env if k.startswith(prefix)]:
                    del env[k]
        elif isinstance(target, ast.Subscript):
            # x[i] = y: x now also holds y's graph
            base = dotted(target.value)
            self.eval(target.slice, env)
            if base is not None and base in env:
                old = env[base]
                env[base] = _with(old, taints=old.taints | v.taints, elems=None)

    # -- loops -----------------------------------------------------------
    def _bind_loop_target(self, loop: ast.stmt, env: Dict[str, Val]) -> None:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            it = self.eval(loop.iter, env)
            self.bind(loop.target, plain(it.taints), env, loop)
        else:
            self.eval(loop.test, env)  # type: ignore[attr-defined]

    @staticmethod
    def _freeze_loop(loop: ast.stmt, env: Dict[str, Val]) -> None:
        """``for p in enc.parameters(): p.requires_grad = False`` freezes ``enc``."""
        it = loop.iter  # type: ignore[attr-defined]
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "parameters"
                and isinstance(loop.target, ast.Name)):  # type: ignore[attr-defined]
            return
        owner = dotted(it.func.value)
        var = loop.target.id  # type: ignore[attr-defined]
        if owner is None or owner not in env:
            return
        for s in loop.body:  # type: ignore[attr-defined]
            if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Attribute)
                    and s.targets[0].attr == "requires_grad" and dotted(s.targets[0].value) == var
                    and isinstance(s.value, ast.Constant) and s.value.value is False):
                env[owner] = _with(env[owner], frozen=True)

    def loop(self, loop: ast.stmt, env: Dict[str, Val]) -> Dict[str, Val]:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            self._freeze_loop(loop, env)
        entry = dict(env)
        frame = LoopFrame(loop)
        self.frames.append(frame)
        e1 = dict(entry)
        self._bind_loop_target(loop, e1)
        e1 = self.block(loop.body, e1)  # type: ignore[attr-defined]
        self.frames.pop()
        out = join_env(entry, e1)
        if frame.backprop and not self.no_grad and self.find_carries:
            seeds: Dict[str, Val] = {}
            lo, hi = loop.lineno, getattr(loop, "end_lineno", None) or loop.lineno
            for name, v in e1.items():
                if v is entry.get(name):
                    continue  # not reassigned by the loop (a graph built before it is GG102's business)
                g = v.graph_tokens()
                # built in this loop's body, and attached to a graph some backward of
                # the iteration traversed (and so freed)
                if g & frame.reached and any(lo <= getattr(t[1], "lineno", 0) <= hi for t in g):
                    seeds[name] = v
            if seeds:
                e2 = dict(out)
                for name, v in seeds.items():
                    e2[name] = self._seed(name, loop, e2[name], v)
                frame2 = LoopFrame(loop, second=True)
                self.frames.append(frame2)
                self._bind_loop_target(loop, e2)
                e2 = self.block(loop.body, e2)  # type: ignore[attr-defined]
                self.frames.pop()
                self._report(frame2, seeds, entry, e1)
                out = join_env(out, self._strip(e2, loop))
        # a loop's else: runs once after it
        orelse = getattr(loop, "orelse", None)
        if orelse:
            out = self.block(orelse, out)
        return out

    @staticmethod
    def _seed(name: str, loop: ast.stmt, cur: Val, end: Val) -> Val:
        if end.elems is not None:
            elems = tuple(
                _with(ce, taints=ce.taints | {("C", name, loop, i)})
                for i, ce in enumerate(cur.elems if cur.elems is not None and len(cur.elems) == len(end.elems) else end.elems)
            )
            return _with(cur, taints=frozenset().union(*(e.taints for e in elems)), elems=elems)
        return _with(cur, taints=cur.taints | {("C", name, loop, -1)})

    @staticmethod
    def _strip(env: Dict[str, Val], loop: ast.stmt) -> Dict[str, Val]:
        out = {}
        for k, v in env.items():
            if any(t[0] == "C" and t[2] is loop for t in v.taints):
                v = _with(v, taints=frozenset(t for t in v.taints if not (t[0] == "C" and t[2] is loop)), elems=None)
            out[k] = v
        return out

    def _report(self, frame: LoopFrame, seeds: Dict[str, Val], entry: Dict[str, Val], end: Dict[str, Val]) -> None:
        by_site: Dict[int, Dict[str, Any]] = {}
        for tok, ev in frame.hits.items():
            _, name, _, idx = tok
            v = seeds[name]
            site = v.site
            if site is None:
                continue
            key = (id(site), name)
            if key in self._carried_keys:
                continue
            g = by_site.setdefault(id(site), {"site": site, "names": [], "idx": {}, "event": ev, "val": v})
            if name not in g["names"]:
                g["names"].append(name)
            g["idx"].setdefault(name, set()).add(idx)
        for g in sorted(by_site.values(), key=lambda g: (g["site"].lineno, g["site"].col_offset)):
            order = {n: i for i, n in enumerate(_assigned_names(g["site"]))}
            names = tuple(sorted(g["names"], key=lambda n: (order.get(n, len(order)), n)))
            v = g["val"]
            missing: Tuple[int, ...] = ()
            arity = len(v.elems) if v.elems is not None else None
            if len(names) == 1 and arity:
                idx = sorted(i for i in g["idx"][names[0]] if i >= 0)
                if idx and len(idx) < arity:
                    missing = tuple(idx)
            for n in names:
                self._carried_keys.add((id(g["site"]), n))
            self.carries.append(
                Carry(frame.loop, names, g["site"], _built_by(v, frame.loop), g["event"], missing, arity, entry, end)
            )

    # -- backward events ---------------------------------------------------
    def _event(self, call: ast.Call, loss: Val, retain: bool, freed: Iterable = ()) -> None:
        ev = BackwardEvent(call, loss, retain, bool(self.frames))
        self.events.append(ev)
        if self.no_grad:
            pass  # backward under no_grad still runs; graph-less values simply carry no tokens
        for fr in self.frames:
            fr.backprop = True
            if fr.second:
                for t in loss.taints:
                    if t[0] == "C" and t[2] is fr.loop and t not in fr.hits:
                        fr.hits[t] = ev
            else:
                fr.reached.update(t for t in loss.taints if t[0] == "G")
                fr.reached.update(freed)

    # -- expressions -----------------------------------------------------
    def eval(self, e: ast.AST, env: Dict[str, Val]) -> Val:
        if isinstance(e, ast.Constant):
            return NONE if e.value is None else CONST
        if isinstance(e, ast.Name):
            v = env.get(e.id)
            if v is not None:
                return v
            obj = self.r.global_obj(e.id)
            return Val(obj=obj) if obj else CLEAN
        if isinstance(e, ast.Attribute):
            key = dotted(e)
            if key is not None and key in env:
                return env[key]
            if e.attr.endswith("Tensor"):
                q = self.r.qualify(e)
                if q is not None and _LEGACY_TENSOR_TYPE.fullmatch(q):
                    # `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`:
                    # a tensor type; calling it makes data, not a module's output
                    return Val(obj="tfac:" + q)
            if e.attr in K.GRAPH_CUT_ATTRS:
                self.eval(e.value, env)
                return CLEAN
            base = self.eval(e.value, env)
            obj = self.r.attr_obj(base.obj, e.attr)
            if obj is None and base.obj and base.obj.startswith("user:"):
                # self.fc, model.encoder: an unknown attribute of a module is a submodule or a parameter
                if self.track_self_state and key is not None and key.count(".") == 1 and key.startswith("self."):
                    return Val(frozenset({("A", key)}), obj="inst:?")
                return Val(obj="inst:?")
            if obj is not None:
                return Val(obj=obj)
            return plain(base.taints) if base.taints else CLEAN
        if isinstance(e, ast.Subscript):
            base = self.eval(e.value, env)
            self.eval(e.slice, env)
            if base.elems is not None:
                idx = e.slice
                if isinstance(idx, ast.Constant) and isinstance(idx.value, int) and -len(base.elems) <= idx.value < len(base.elems):
                    return base.elems[idx.value]
            return plain(base.taints)
        if isinstance(e, ast.Tuple):
            return tup([self.eval(x, env) for x in e.elts])
        if isinstance(e, ast.List):
            return _with(tup([self.eval(x, env) for x in e.elts]), kind="list")
        if isinstance(e, ast.Starred):
            return self.eval(e.value, env)
        if isinstance(e, ast.BinOp):
            a = self.eval(e.left, env)
            b = self.eval(e.right, env)
            return self._op(e, a.taints | b.taints)
        if isinstance(e, ast.UnaryOp):
            return self._op(e, self.eval(e.operand, env).taints)
        if isinstance(e, ast.BoolOp):
            v = CLEAN
            for x in e.values:
                v = join(v, self.eval(x, env))
            return _with(v, site=None)
        if isinstance(e, ast.Compare):
            self.eval(e.left, env)
            for c in e.comparators:
                self.eval(c, env)
            return CLEAN
        if isinstance(e, ast.IfExp):
            self.eval(e.test, env)
            yes, no = dict(env), dict(env)
            self._narrow(e.test, yes, no)
            return join(self.eval(e.body, yes), self.eval(e.orelse, no))
        if isinstance(e, ast.Call):
            return self.call(e, env)
        if isinstance(e, ast.ListComp):
            return _with(plain(self._comp(e, [e.elt], env)), kind="list")
        if isinstance(e, (ast.GeneratorExp, ast.SetComp)):
            return plain(self._comp(e, [e.elt], env))
        if isinstance(e, ast.DictComp):
            return plain(self._comp(e, [e.key, e.value], env))
        if isinstance(e, ast.Dict):
            t: set = set()
            for x in list(e.keys) + list(e.values):
                if x is not None:
                    t |= self.eval(x, env).taints
            return plain(t)
        if isinstance(e, ast.Set):
            t = set()
            for x in e.elts:
                t |= self.eval(x, env).taints
            return plain(t)
        if isinstance(e, ast.NamedExpr):
            v = self.eval(e.value, env)
            self.bind(e.target, v, env, self._stmt)  # type: ignore[arg-type]
            return v
        if isinstance(e, (ast.Await, ast.YieldFrom)):
            return self.eval(e.value, env)
        if isinstance(e, ast.Yield):
            if e.value is not None:
                self.returns.append(self.eval(e.value, env))
            return CLEAN
        if isinstance(e, ast.JoinedStr):
            for x in e.values:
                self.eval(x, env)
            return CLEAN
        if isinstance(e, ast.FormattedValue):
            self.eval(e.value, env)
            return CLEAN
        if isinstance(e, ast.Slice):
            for x in (e.lower, e.upper, e.step):
                if x is not None:
                    self.eval(x, env)
            return CLEAN
        return CLEAN  # Lambda and anything exotic

    def _op(self, node: ast.AST, taints: FrozenSet) -> Val:
        if self.no_grad:
            return CLEAN
        if any(t[0] == "L" for t in taints):
            taints = frozenset(t for t in taints if t[0] != "L") | {("G", node)}
        if self.r.ctx is None:
            # summarising a def: an op computed this from parameter i (("Q", i)), so
            # a caller passing a tensor that requires grad gets a new graph back
            derived = [("Q", t[1]) for t in taints if t[0] == "P"]
            if derived:
                taints = taints | frozenset(derived)
        return plain(taints)

    def _comp(self, e, elts, env) -> FrozenSet:
        inner = dict(env)
        for gen in e.generators:
            it = self.eval(gen.iter, inner)
            part = plain(it.taints)
            if it.elems is not None:
                v = CLEAN
                for x in it.elems:
                    v = join(v, x)
                part = plain(v.taints)
            self.bind(gen.target, part, inner, self._stmt)  # type: ignore[arg-type]
            for cond in gen.ifs:
                self.eval(cond, inner)
        t: FrozenSet = EMPTY
        for x in elts:
            t = t | self.eval(x, inner).taints
        return t

    # -- calls -------------------------------------------------------------
    def _args(self, call: ast.Call, env) -> Tuple[List[Val], Dict[str, Val]]:
        pos = [self.eval(a, env) for a in call.args]
        kws = {}
        for kw in call.keywords:
            v = self.eval(kw.value, env)
            kws[kw.arg or "**"] = v
        return pos, kws

    def call(self, call: ast.Call, env: Dict[str, Val]) -> Val:
        func = call.func
        ctx = self.r.ctx
        # backward() and friends
        if is_backward_call(call, ctx):
            tgt = backward_target(call, ctx)
            if isinstance(func, ast.Attribute):
                self.eval(func.value, env)
            pos, kws = self._args(call, env)
            loss = self.eval(tgt, env) if tgt is not None else CLEAN
            if is_backward_call(call, ctx) and qualify(func, ctx) in K.BACKWARD_FUNCTIONS:
                # torch.autograd.grad(outputs, inputs): only the outputs are back-propagated
                pass
            if not has_create_graph(call):
                self._event(call, loss, has_retain_graph(call))
            return CLEAN
        if (call.args or call.keywords) and applies_cut(call):
            self._args(call, env)
            return CLEAN
        if self._rewraps(call, env):
            self.eval(func, env)
            self._args(call, env)
            return CLEAN
        if isinstance(func, ast.Attribute):
            return self._method_call(call, func, env)
        callee = self.eval(func, env)
        pos, kws = self._args(call, env)
        args_taints = frozenset().union(*(v.taints for v in pos), *(v.taints for v in kws.values())) if (pos or kws) else EMPTY
        q = self.r.qualify(func) if isinstance(func, ast.Name) else None
        if isinstance(func, ast.Name) and func.id in env and callee.obj is None:
            q = None  # a local callable shadows any import
        return self._apply(call, callee, q, pos, kws, args_taints, env)

    def _method_call(self, call: ast.Call, func: ast.Attribute, env) -> Val:
        m = func.attr
        ctx = self.r.ctx
        q = None
        key = dotted(func.value)
        base_known = key is not None and (key in env or key.split(".")[0] in env)
        if not base_known:
            q = self.r.qualify(func)
            if key is not None and m in self.r.imported_module_names() and not self.r.rebound(key):
                # `utils.repackage_hidden(h)`, `models.Seq2Seq(...)`: a function or class of
                # a module of the project imported whole, known by its dotted name
                obj = self.r.global_obj(f"{key}.{m}")
                if obj is not None:
                    pos, kws = self._args(call, env)
                    return self._apply(call, Val(obj=obj), None, pos, kws, _union(pos, kws), env)
        if q and (q.startswith("torch.") or q in _WRAPPERS):
            pos, kws = self._args(call, env)
            t = frozenset().union(*(v.taints for v in pos), *(v.taints for v in kws.values())) if (pos or kws) else EMPTY
            return self._torch_call(call, q, pos, kws, t)
        if not base_known and _non_graph_library(q or key):
            self._args(call, env)
            return CLEAN  # np.roll(img, 1, -1), scipy.ndimage.zoom(x, 2): arrays, no graph
        recv = self.eval(func.value, env)
        if m in K.GRAPH_CUT_METHODS or m in K.FACTORY_METHODS or m in K.INTEGER_METHODS or (
            m in ("to", "type") and any(qualify(a, ctx) in K.INTEGER_DTYPES
                                        for a in list(call.args) + [k.value for k in call.keywords])
        ):
            self._args(call, env)
            if m == "detach_" and key is not None:
                env[key] = _with(env.get(key, CLEAN), taints=EMPTY, elems=None)
            return CLEAN
        pos, kws = self._args(call, env)
        if m == "requires_grad_":
            if call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value is False:
                if key is not None:
                    if recv.obj and recv.obj.startswith(("inst:", "user:")):
                        env[key] = _with(recv, frozen=True)  # encoder.requires_grad_(False)
                        return env[key]
                    env[key] = _with(env.get(key, CLEAN), taints=EMPTY, elems=None)
                return CLEAN
            if key is not None:
                env[key] = _with(env.get(key, CLEAN), taints=env.get(key, CLEAN).taints | {("L",)})
            return plain(recv.taints | {("L",)})
        if recv.obj and recv.obj.startswith(("user:", "inst:")):
            if m in _SELF_METHODS:
                return recv
            facts = self.r.method_facts(recv.obj, m)
            if facts is not None:
                return self._apply_facts(call, facts, pos, kws, env, m)
            if m == "forward":
                return self._apply(call, recv, None, pos, kws, _union(pos, kws), env)
            sub = self.r.attr_obj(recv.obj, m)
            if sub is None and recv.obj.startswith("user:") and m not in _MODULE_METHODS:
                sub = "inst:?"  # self.fc(x): an attribute we cannot see is a submodule
            if sub is not None:
                return self._apply(call, Val(obj=sub), None, pos, kws, _union(pos, kws), env)
            return CLEAN if m in _MODULE_METHODS else plain(_union(pos, kws))
        t = recv.taints | _union(pos, kws)
        if not self.no_grad and self._threads_state(call, recv, unknown_ok=True):
            # out, h = obj.step(x, h) / h = model.cell(x, h) on an object we cannot see
            return plain(t | {("G", call)})
        if m in ("append", "extend", "insert", "add", "update") and key is not None and key in env:
            # list.append(x): the list now holds x's graph
            old = env[key]
            added = _union(pos, kws)
            env[key] = _with(old, taints=old.taints | added, elems=None,
                             site=self._stmt if added else old.site)
            return NONE
        if m in ("copy_",) and key is not None and key in env:
            old = env[key]
            env[key] = _with(old, taints=old.taints | _union(pos, kws), elems=None)
            return env[key]
        return self._op(call, t) if t else CLEAN

    def _apply(self, call, callee: Val, q: _Opt[str], pos, kws, args_taints, env) -> Val:
        obj = callee.obj
        if q is not None and obj is None:
            if q in _CLEAN_BUILTINS or ("." in q and _non_graph_library(q)):
                return CLEAN
            if q.startswith("torch.") or q in _WRAPPERS:
                return self._torch_call(call, q, pos, kws, args_taints)
            tc = Resolver.torch_class(q)
            if tc:
                return Val(obj="cls:" + tc)
            if q in _BUILTIN_NAMES and isinstance(call.func, ast.Name) and self.r.global_obj(q) is None:
                # min(max(k, 0), 1), abs(x), sum(losses): a builtin hands back (a combination
                # of) its arguments and builds no graph of its own, so it steps no state
                return plain(args_taints)
        if obj is not None:
            if obj.startswith("tfac:"):
                return CLEAN  # Tensor(n, 1): a new tensor, no graph
            if obj.startswith("cls:"):
                return self._construct(obj[4:], pos)
            if obj.startswith("ucls:"):
                return Val(obj="user:" + obj[5:])
            if obj.startswith("fn:"):
                facts = self.r.fn(obj[3:])
                if facts is not None:
                    return self._apply_facts(call, facts, pos, kws, env, obj[3:])
            if obj.startswith("inst:"):
                tq = obj[5:]
                if self.no_grad:
                    return CLEAN
                return self._module_result(call, tq, args_taints, graph=not callee.frozen)
            if obj.startswith("user:"):
                if self.no_grad:
                    return CLEAN
                if callee.frozen:
                    return plain(args_taints)
                self.saving_calls.add(id(call))
                facts = self.r.method_facts(obj, "forward")
                if facts is not None:
                    return self._apply_facts(call, facts, pos, kws, env, "forward", graph_node=call)
                return plain(args_taints | {("G", call)})
        # unknown callable
        if self.no_grad:
            return CLEAN
        name = func_name = call.func.id if isinstance(call.func, ast.Name) else None
        targets = self._targets
        argnames = [dotted(a) for a in call.args]
        if self._threads_state(call, callee, unknown_ok=True):
            return plain(args_taints | {("G", call)})
        if (
            name is not None
            and len(call.args) == 1
            and not call.keywords
            and len(targets) == 1
            and argnames[0] == targets[0]
            and (callee.obj is None or callee.obj == "local")
            and not callee.param
        ):
            # h = repackage(h) with a helper we cannot see: a state-cutting helper by shape.
            return CLEAN
        if name is not None and (name in env or (self.r.ctx is None and name not in _BUILTIN_NAMES)) and (
            callee.obj in (None, "local") or callee.param
        ) and name not in ("tuple", "list"):
            # model(x) where `model` is a parameter / a local we cannot type (or, while
            # summarising a def, a module-level name we cannot see): assume a module
            if name not in env and self.r.ctx is None:
                # a module-level function, maybe: its facts are composed where this def is called
                k = len(self.delegates)
                self.delegates.append((name, tuple(_param_set(v) for v in pos),
                                       tuple((kw, _param_set(v)) for kw, v in kws.items() if kw != "**")))
                return plain(args_taints | {("G", call), ("D", k)})
            return plain(args_taints | {("G", call)})
        if func_name in ("tuple", "list", "sorted", "reversed", "zip", "enumerate", "iter", "next", "dict", "set"):
            if func_name in ("tuple", "list") and len(pos) == 1:
                v = pos[0]
                return v if v.elems is not None else plain(v.taints)
            return plain(args_taints)
        return self._op(call, args_taints) if args_taints else CLEAN

    def _apply_delegates(self, call, node, facts: FnFacts, argval, seen: set, depth: int) -> None:
        """The backward calls a function makes through the module-level functions
        it calls (``FnFacts.delegates``), each composed from the callee's own
        facts, as if it were in the body: an event at ``call`` back-propagating
        the arguments that reach the callee's backward; the graphs it returns
        were built inside and are freed by it."""
        for name, argsets, kwsets in facts.delegates:
            if name in seen or depth >= DELEGATION_DEPTH:
                continue
            inner = self.r.fn(name)
            if inner is None or inner.no_grad:
                continue
            vals = [plain(frozenset().union(*(argval(i).taints for i in ps))) for ps in argsets]
            named = {kw: plain(frozenset().union(*(argval(i).taints for i in ps))) for kw, ps in kwsets}

            def inner_arg(j: int, _vals=vals, _named=named, _inner=inner) -> Val:
                return _inner.argument(j, _vals, _named, CLEAN)

            if inner.calls_backward:
                loss_t: set = set()
                for j in inner.backward_params:
                    loss_t |= inner_arg(j).taints
                self._event(call, plain(loss_t), inner.backward_retains, {("G", node)})
            if inner.delegates:
                self._apply_delegates(call, node, inner, inner_arg, seen | {name}, depth + 1)

    def _threads_state(self, call: ast.Call, callee: Val, unknown_ok: bool) -> bool:
        """The shape of a recurrent step through a callable we cannot see:
        ``out, h = f(x, h)`` / ``out, (h, c) = f(x, (h, c))`` (the result unpacked
        into a name that is also an argument), or ``h = f(x, h)`` with two or more
        arguments when ``f`` is an object (a parameter, an attribute, a module).
        Assuming a graph there is the unsafe-for-silence choice only when the
        callee detaches internally, which a same-file model's facts would show."""
        targets = self._targets
        if not targets:
            return False
        argnames = _arg_names(call)
        if len(targets) >= 2 and argnames & set(targets):
            return True
        if len(targets) == 1 and len(call.args) >= 2 and targets[0] in argnames:
            return unknown_ok or callee.param or (callee.obj or "").startswith(("inst:", "user:"))
        return False

    def _rewraps(self, call: ast.Call, env: Dict[str, Val]) -> bool:
        """``model, optimizer, loader = engine.make_private(module=model, ...)``,
        ``model, opt = accelerator.prepare(model, opt)``: a statement handing a
        module or an optimizer it holds to a call and taking the result back in
        its place wraps the training objects; it steps no state, whatever a
        summary of the callee (a library's own code, say) makes of its insides."""
        s = self._stmt
        if len(self._targets) < 2 or not isinstance(s, ast.Assign) or s.value is not call:
            return False
        for n in _arg_names(call) & set(self._targets):
            obj = (env.get(n) or CLEAN).obj
            if obj and obj.startswith(("user:", "inst:")):
                q = self.r.qualify(call.func)
                return not (q and (q.startswith("torch.") or q in _WRAPPERS))  # torch's wrappers keep what they wrap
        return False

    def _torch_call(self, call, q: str, pos, kws, args_taints) -> Val:
        if q in _WRAPPERS:
            return pos[0] if pos else CLEAN
        tc = Resolver.torch_class(q)
        if tc:
            if tc in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                return plain({("L",)})
            return self._construct(tc, pos)
        if q in K.NONDIFF_FUNCTIONS:
            return CLEAN
        if q in K.TENSOR_FACTORIES:
            for kw in call.keywords:
                if kw.arg == "requires_grad" and not (isinstance(kw.value, ast.Constant) and not kw.value.value):
                    return plain({("L",)})
            return CLEAN
        if self.no_grad:
            return CLEAN
        if q in K.SAVING_FUNCTIONS:
            self.saving_calls.add(id(call))
        return self._op(call, args_taints)

    def _construct(self, tq: str, pos) -> Val:
        if tq in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return plain({("L",)})
        return Val(obj="inst:" + tq)

    def _module_result(self, call: ast.Call, tq: str, args_taints, graph: bool = True) -> Val:
        if graph:
            self.saving_calls.add(id(call))
        g = args_taints | {("G", call)} if graph else args_taints
        if tq in K.RECURRENT_MODULES:
            state = tup([plain(g), plain(g)]) if tq in K.LSTM_LIKE else plain(g)
            return tup([plain(g), state])
        if tq in K.RECURRENT_CELLS and tq in K.LSTM_LIKE:
            return tup([plain(g), plain(g)])
        return plain(g)

    def _apply_facts(self, call, facts: FnFacts, pos, kws, env, fname, graph_node=None) -> Val:
        node = graph_node or call

        def argval(i: int) -> Val:
            return facts.argument(i, pos, kws, CLEAN)

        def posval(rp: RetPos) -> Val:
            t: set = set()
            if rp.graph and not facts.no_grad and not self.no_grad:
                t.add(("G", node))
            elif rp.derived and not facts.no_grad and not self.no_grad and any(
                    tok[0] in ("G", "L") for i in rp.derived for tok in argval(i).taints):
                t.add(("G", node))  # h = cell(x, h, params) written out by hand: W @ h builds a graph
            for i in rp.params:
                t |= argval(i).taints
            v = plain(t)
            if rp.arity:
                v = tup([plain(t)] * rp.arity)
            return v

        freed = set()
        if facts.calls_backward:
            loss_t: set = set()
            for i in facts.backward_params:
                loss_t |= argval(i).taints
            # graphs it returns were built (and back-propagated) inside
            freed.add(("G", node))
            self._event(call, plain(loss_t), facts.backward_retains, freed)
        if facts.delegates and not facts.no_grad:
            self._apply_delegates(call, node, facts, argval, {fname}, 0)
        if facts.returns is not None:
            return tup([posval(rp) for rp in facts.returns])
        return posval(facts.ret) if facts.returns_value else CLEAN


def _union(pos, kws) -> FrozenSet:
    if not pos and not kws:
        return EMPTY
    return frozenset().union(*(v.taints for v in pos), *(v.taints for v in kws.values()))


def _assigned_names(stmt: ast.AST) -> List[str]:
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in target_names(t)]
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return target_names(stmt.target)
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return target_names(stmt.target)
    return []


_NO_KEY = object()


def _condition_key(test: ast.expr) -> _Opt[tuple]:
    """A key for a test simple enough that evaluating it twice in a row gives
    the same answer while the names it reads keep their values: names and
    attributes, constants, ``not``/``and``/``or``, comparisons, ``bool(...)``
    (the same text gives the same key). None for anything else."""
    key: list = []
    for node in ast.walk(test):
        if isinstance(node, ast.Name):
            key.append(node.id)
        elif isinstance(node, ast.Attribute):
            key.append("." + node.attr)
        elif isinstance(node, ast.Constant):
            key.append((type(node.value).__name__, repr(node.value)))
        elif isinstance(node, ast.BoolOp):
            key.append((type(node.op).__name__, len(node.values)))
        elif isinstance(node, ast.Compare):
            key.append(("cmp",) + tuple(type(o).__name__ for o in node.ops))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            key.append("not")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool" \
                and len(node.args) == 1 and not node.keywords:
            key.append("bool()")
        elif not isinstance(node, (ast.expr_context, ast.boolop, ast.cmpop, ast.unaryop)):
            return None
    return tuple(key)


def _condition_names(test: ast.expr) -> set:
    names = set()
    for node in ast.walk(test):
        if isinstance(node, (ast.Name, ast.Attribute)):
            n = dotted(node)
            if n:
                names.add(n)
    return names


def _arg_names(call: ast.Call) -> set:
    """The dotted names a call is given (inside a tuple or list argument too)."""
    names = set()
    for a in list(call.args) + [k.value for k in call.keywords]:
        for e in (a.elts if isinstance(a, (ast.Tuple, ast.List)) else (a,)):
            n = dotted(e)
            if n:
                names.add(n)
    return names


def _built_by(v: Val, loop: _Opt[ast.AST] = None) -> _Opt[ast.AST]:
    """Where the carried value's graph is built: a graph-building node on the
    assigning statement if any, else the first one inside the loop, else any."""
    nodes = [t[1] for t in v.taints if t[0] == "G" and hasattr(t[1], "lineno")]
    if not nodes:
        return None
    site = v.site
    if site is not None:
        lo, hi = site.lineno, getattr(site, "end_lineno", site.lineno) or site.lineno
        on_site = [n for n in nodes if lo <= n.lineno <= hi]
        if on_site:
            nodes = on_site
    if loop is not None and site is None:
        lo, hi = loop.lineno, getattr(loop, "end_lineno", loop.lineno) or loop.lineno
        inside = [n for n in nodes if lo <= n.lineno <= hi]
        nodes = inside or nodes
    return min(nodes, key=lambda n: (not isinstance(n, ast.Call), n.lineno, n.col_offset))
