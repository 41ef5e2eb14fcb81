"""AST predicates shared by the analysis and the rules: pure, never imports torch,
and never descends into nested ``def`` / ``class`` / ``lambda`` bodies (those are
units of their own).

* walking:        :func:`iter_nodes`, :func:`iter_statements`, :func:`child_blocks`
* where:          :func:`within` (is a node inside a loop, a statement, a def)
* names:          :func:`dotted`, :func:`qualify`, :func:`target_names`
* backward:       :func:`is_backward_call`, :func:`backward_target`, :func:`has_retain_graph`, :func:`keeps_graph`,
                  :func:`has_create_graph`
* no_grad:        :func:`is_no_grad_context`, :func:`is_no_grad_with`, :func:`is_no_grad_function`
* graph cuts:     :func:`is_graph_cut`, :func:`inplace_cut_target`
* views:          :func:`assigns_a_view`, :func:`is_view_chain`
* loops:          :func:`loop_backprops`, :func:`backprop_loops`

``ctx`` arguments are optional :class:`gradguard.analysis.context.ModuleContext`
objects; without one, names are qualified through :data:`DEFAULT_ALIASES`
(``nn`` → ``torch.nn``, ``F`` → ``torch.nn.functional``), which is what the
module summarizers use (they do not see the import table).
"""

from __future__ import annotations

import ast
from _weakref import ref as _weakref  # weakref.ref itself, without importing weakref (start-up)

from gradguard.analysis import knowledge as K
from gradguard.analysis.context import dotted  # noqa: F401  (re-exported: part of this module's API)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple


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
    stack: List[ast.AST] = list(reversed(nodes)) if isinstance(nodes, (list, tuple)) else [nodes]  # type: ignore[list-item]
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


def body_nodes(owner: ast.AST) -> List[ast.AST]:
    """``list(iter_nodes(owner.body))`` for a def (or any node with a body),
    walked once and kept on the node: the fact sources and the rules that each
    read every node of a definition share one walk. The list is shared: read it,
    never change it. Each statement list inside it (a loop's body, a branch) is
    a stretch of it: :func:`block_nodes`."""
    got = owner.__dict__.get("_gg_nodes")
    if got is None:
        got = _Nodes()
        try:
            _fill(owner.body, got.nodes, _weakref(got))  # type: ignore[attr-defined]
        except RecursionError:  # blocks nested by the hundred: one plain walk, no stretches
            got.nodes = list(iter_nodes(owner.body))  # type: ignore[attr-defined]
        owner._gg_nodes = got  # type: ignore[attr-defined]
    return got.nodes


def block_nodes(stmts: Sequence[ast.stmt]) -> List[ast.AST]:
    """``list(iter_nodes(stmts))`` for a statement list of a def (``loop.body``):
    the stretch of the def's :func:`body_nodes` once that list exists, else a walk."""
    if stmts:
        a = stmts[0].__dict__.get("_gg_at")
        if a is not None and a[3] == id(stmts):
            b = stmts[-1].__dict__.get("_gg_at")
            got = a[0]()
            if got is not None and b is not None and b[0] is a[0] and b[3] == id(stmts):
                return got.nodes[a[1]:b[2]]
    return list(iter_nodes(list(stmts)))


def stmt_nodes(stmt: ast.stmt) -> Optional[List[ast.AST]]:
    """``list(iter_nodes(stmt))`` for a statement of a def whose :func:`body_nodes`
    exists (its stretch of that list), else None."""
    at = stmt.__dict__.get("_gg_at")
    if at is not None:
        got = at[0]()
        if got is not None:
            return got.nodes[at[1]:at[2]]
    return None


class _Nodes:
    """A def's node list (held by the def; its statements refer to it weakly,
    so that no reference cycle keeps a tree alive)."""

    __slots__ = ("nodes", "__weakref__")

    def __init__(self) -> None:
        self.nodes: List[ast.AST] = []


def _fill(stmts: List[ast.stmt], out: List[ast.AST], ref) -> None:
    """:func:`iter_nodes` over ``stmts`` into ``out`` (the same order), marking
    each statement with where it and what is nested in it lie in ``out`` and the
    list it belongs to (a statement list's nodes are one stretch of a depth-first walk)."""
    AST, stmt = ast.AST, ast.stmt
    fields_of = _CHILD_FIELDS
    for s in stmts:
        start = len(out)
        out.append(s)
        cls = s.__class__
        if not issubclass(cls, _NESTED):  # a nested def/class: yielded, not entered
            fields = fields_of.get(cls)
            if fields is None:
                fields = fields_of[cls] = _child_fields(cls)
            for name in fields:
                v = getattr(s, name, None)
                if v.__class__ is list:
                    if v and isinstance(v[0], stmt):
                        _fill(v, out, ref)
                    else:
                        for x in v:
                            if isinstance(x, AST):
                                _walk_into(x, out)
                elif isinstance(v, AST):
                    _walk_into(v, out)
        s._gg_at = (ref, start, len(out), id(stmts))  # type: ignore[attr-defined]


def _walk_into(node: ast.AST, out: List[ast.AST]) -> None:
    """``out.extend(iter_nodes(node))``, without a generator (the same walk)."""
    stack = [node]
    AST = ast.AST
    fields_of = _WALK_FIELDS
    pop, push, append = stack.pop, stack.append, out.append
    while stack:
        n = pop()
        append(n)
        cls = n.__class__
        fields = fields_of.get(cls)
        if fields is None:
            fields = fields_of[cls] = () if issubclass(cls, _NESTED) else tuple(reversed(_child_fields(cls)))
        for name in fields:
            v = getattr(n, name, None)
            if v.__class__ is list:
                for x in reversed(v):
                    if isinstance(x, AST):
                        push(x)
            elif isinstance(v, AST):
                push(v)


_MODULE_ATTRS = frozenset(("parameters", "named_parameters", "zero_grad"))


def module_names(unit) -> Set[str]:
    """Names the unit uses as modules: ``x.parameters()``, ``x.zero_grad()`` (what a
    call of such a name the interpreter cannot type is taken for: a module's, which saves)."""
    return {n.value.id for n in unit_nodes(unit)
            if n.__class__ is ast.Attribute and n.attr in _MODULE_ATTRS and n.value.__class__ is ast.Name}


def unit_nodes(unit) -> List[ast.AST]:
    """:func:`iter_nodes` over a unit's body (a function's: :func:`body_nodes`
    of its def; the module unit's: kept on the unit), as one shared list."""
    if unit.node is not None and unit.body is unit.node.body:
        return body_nodes(unit.node)
    if unit.nodes is None:
        unit.nodes = list(iter_nodes(list(unit.body)))
    return unit.nodes


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
    AST = ast.AST
    fields_of = _CHILD_FIELDS
    append = todo.append
    for n in todo:  # (a list grown while it is read: breadth first, each node once)
        cls = n.__class__
        fields = fields_of.get(cls)
        if fields is None:
            fields = fields_of[cls] = _child_fields(cls)
        for name in fields:  # (child_nodes, inlined: a hot path)
            v = getattr(n, name, None)
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, AST):
                        append(x)
            elif isinstance(v, AST):
                append(v)
        yield n


_LAST_WALK: Tuple[Optional[ast.AST], List[ast.AST]] = (None, [])


def walk_all_list(node: ast.AST) -> List[ast.AST]:
    """:func:`walk_all` as a list, remembered for the last node asked: the summarizers
    of several fact sources each walk the same top-level statement, one after the
    other, and walking costs more than scanning the list (the list must not be changed)."""
    global _LAST_WALK
    last = _LAST_WALK
    if last[0] is node:
        return last[1]
    nodes = list(walk_all(node))
    _LAST_WALK = (node, nodes)
    return nodes


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
    cls = stmt.__class__
    if cls in _SIMPLE_STATEMENTS or issubclass(cls, _NESTED):
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


# Statements that hold no statement list (most of them): child_blocks answers at once.
_SIMPLE_STATEMENTS = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Pass,
                                ast.Break, ast.Continue, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal,
                                ast.Delete, ast.Raise, ast.Assert})


def with_bodies_inline(block: Sequence[ast.stmt]) -> List[ast.stmt]:
    """The statements that run, in order, whenever ``block`` runs: the bodies of its
    ``with`` statements (nested ones too) in place of the ``with`` itself."""
    out: List[ast.stmt] = []
    for s in block:
        if isinstance(s, (ast.With, ast.AsyncWith)):
            out.extend(with_bodies_inline(s.body))
        else:
            out.append(s)
    return out


_DECORATED = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})


def within(node: object, region: ast.AST) -> bool:
    """Is ``node`` ``region`` itself or a node inside it (a loop, a statement, a def)?

    For nodes of one parsed tree, answered by position instead of a walk of ``region``:
    ``node`` starts (line, then column) between ``region``'s start (its first decorator's,
    for a decorated def or class) and its end. Two statements on one line (``a = f(); b.backward()``)
    are told apart by their columns. A node that starts where ``region`` starts and ends after it
    is one of its ancestors (the call whose ``func`` is ``region``); no caller asks that. A node
    without a position (``arguments``, ``comprehension``, a token that is no node) is inside nothing.
    """
    line = getattr(node, "lineno", None)
    if line is None:
        return False
    first = region
    if region.__class__ in _DECORATED and region.decorator_list:  # type: ignore[attr-defined]
        first = region.decorator_list[0]  # type: ignore[attr-defined]
    at = (line, node.col_offset)  # type: ignore[attr-defined]
    return (first.lineno, first.col_offset) <= at <= (  # type: ignore[attr-defined]
        region.end_lineno or region.lineno, region.end_col_offset or 0)  # type: ignore[attr-defined]


def iter_statements(stmts: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a block and of the compound statements inside it, in
    source order, not entering nested defs/classes (the def itself is yielded)."""
    simple = _SIMPLE_STATEMENTS
    stack = [iter(stmts)]
    while stack:
        for s in stack[-1]:
            yield s
            if s.__class__ not in simple:
                blocks = child_blocks(s)
                if blocks:  # its statements next, then its siblings
                    stack.append(iter([x for block in blocks for x in block]))
                    break
        else:
            stack.pop()


# ---------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------
# ``dotted`` lives with ModuleContext.qualify, which is built on it; re-exported here.


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
    func = call.func
    if func.__class__ is ast.Attribute:
        if func.attr in K.BACKWARD_METHODS:
            return True
        if func.attr not in _BACKWARD_FUNCTION_NAMES:
            return False  # qualifying only renames the head of a dotted name, never its last part
    elif func.__class__ is ast.Name:
        # a bare name is a backward function only as an import's alias (`from
        # torch.autograd import grad`): qualify would give the import, or the
        # name itself (never dotted), or a default alias (a module, never a function)
        imports = getattr(ctx, "imports", None) if ctx is not None else None
        return bool(imports) and imports.get(func.id) in K.BACKWARD_FUNCTIONS  # type: ignore[union-attr]
    else:
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
            recv = call.func.value  # type: ignore[attr-defined]
            if m == "manual_backward" or not _looks_like_tensor_receiver(recv):
                return call.args[0]
        recv = call.func.value  # type: ignore[attr-defined]
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


def surely_frees(call: ast.Call, ctx=None) -> bool:
    """A backward call that frees the graph it runs through, whatever the program's
    values: no ``retain_graph``/``create_graph`` (nor ``retain_variables``, the name
    before PyTorch 0.4) other than a literal False or None, no ``**kwargs`` or
    ``*args`` that could pass one, and no positional argument in retain_graph's place
    (``loss.backward(g, True)``, ``torch.autograd.grad(y, x, None, True)``)."""
    for kw in call.keywords:
        if kw.arg is None:
            return False
        if kw.arg in ("retain_graph", "create_graph", "retain_variables"):
            v = kw.value
            if not (isinstance(v, ast.Constant) and v.value in (False, None)):
                return False
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False
    q = qualify(call.func, ctx)
    limit = 3 if q == "torch.autograd.grad" else 2 if q == "torch.autograd.backward" else 1
    return len(call.args) <= limit


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


def keeps_graph(call: ast.Call) -> bool:
    """Does this backward keep the graph it runs through? ``retain_graph``
    (None: not given) defaults to ``create_graph``; an explicit
    ``retain_graph=False`` frees the graph even with ``create_graph=True``
    (checked with torch). Without ``create_graph`` this answers as
    :func:`has_retain_graph`, which counts ``create_graph=True`` as keeping
    whatever ``retain_graph`` says (what GG103 asks)."""
    retain = create = None
    for kw in call.keywords:
        if kw.arg == "retain_graph":
            retain = kw.value
        elif kw.arg == "create_graph":
            create = kw.value
    if retain is not None and not (isinstance(retain, ast.Constant) and retain.value is None):
        return not _false_constant(retain)
    return create is not None and not _false_constant(create)


def _false_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, None, 0)


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
        return e.attr == "detach"
    if e.__class__ is ast.Lambda and len(e.args.args) == 1:
        body, p = e.body, e.args.args[0].arg
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


# the kinds a type test names (``isinstance(x, (list, tuple))``): a tensor, or a container
_TENSOR_TYPES = frozenset({"Tensor", "Parameter"})
_CONTAINER_TYPES = frozenset({"dict", "list", "tuple", "Mapping", "Sequence", "MutableMapping", "MutableSequence",
                              "OrderedDict", "defaultdict"})


def _type_test(test: ast.AST) -> "Optional[Tuple[str, Set[str]]]":
    """``isinstance(x, T)`` / ``torch.is_tensor(x)``: (the name tested, the kinds ruled
    in: ``"tensor"`` and/or ``"container"``), else None."""
    if not isinstance(test, ast.Call) or not test.args or not isinstance(test.args[0], ast.Name):
        return None
    name = test.args[0].id
    f = dotted(test.func) or ""
    if f in ("torch.is_tensor", "is_tensor") and len(test.args) == 1:
        return name, {"tensor"}
    if f != "isinstance" or len(test.args) != 2:
        return None
    t = test.args[1]
    kinds = set()
    for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
        last = (dotted(e) or "").rpartition(".")[2]
        if last in _TENSOR_TYPES:
            kinds.add("tensor")
        elif last in _CONTAINER_TYPES:
            kinds.add("container")
    return name, kinds


def _always_returns(body: "Sequence[ast.stmt]") -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def untensored_returns(fn: ast.AST) -> "Set[int]":
    """The ``return x`` statements of a def (ids) that hand back a name only after the
    def has returned for every tensor and some container it could be: a
    ``detach_tree(x)``-style helper (``if isinstance(x, torch.Tensor): return x.detach()``,
    ``if isinstance(x, dict): return {k: detach_tree(v) ...}``, ..., ``return x``) hands
    back unchanged only what is neither, which holds no graph. Read on the def's own
    statement list and its ``if``/``elif``/``else`` chains; a rebinding of the name ends it."""
    out: "Set[int]" = set()
    ruled: "Dict[str, Set[str]]" = {}

    def walk(stmts: "Sequence[ast.stmt]") -> bool:
        """(True: the walk ends here, at a return or at a statement it cannot read past)"""
        for st in stmts:
            if isinstance(st, ast.Return):
                v = st.value
                if isinstance(v, ast.Name) and ruled.get(v.id, set()) >= {"tensor", "container"}:
                    out.add(id(st))
                return True
            if isinstance(st, ast.If):
                got = _type_test(st.test)
                if got is None or not _always_returns(st.body):
                    if any(isinstance(n, ast.Return) for n in iter_nodes(st)):
                        return True  # a return under some other test: not the plain shape
                else:
                    ruled.setdefault(got[0], set()).update(got[1])
                    if walk(st.orelse):
                        return True
                    continue
            for n in iter_nodes(st):  # what the statement rebinds is no longer what was tested
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    ruled.pop(n.id, None)
        return False

    body = getattr(fn, "body", ())
    if any(isinstance(st, ast.If) for st in body):
        walk(body)
    walk = None  # type: ignore[assignment]  # (a closure that calls itself is a reference cycle: freed by counting only without it)
    return out


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
        if m in K.PASSTHROUGH_METHODS and is_graph_cut(expr.func.value):  # type: ignore[attr-defined]
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
    truncated-BPTT line) → ``"state"``; so does ``for h in self._all: if h is not None:
    h.detach_()`` (OpenNMT's ``DecoderState.detach()``) → ``"self._all"``."""
    if stmt.__class__ is ast.For:
        target = stmt.target
        if (target.__class__ is ast.Name and stmt.body and not stmt.orelse
                and all(inplace_cut_target(b) == target.id or _none_guarded_cut(b, target.id) for b in stmt.body)):
            return dotted(stmt.iter)
        return None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        m = _method(call)
        if m in K.INPLACE_CUT_METHODS:
            if m == "requires_grad_" and not (
                call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value is False
            ):
                return None
            return dotted(call.func.value)  # type: ignore[attr-defined]
    return None


def _none_guarded_cut(stmt: ast.stmt, name: str) -> bool:
    """``if h is not None: h.detach_()``: ``h`` cut in place where it is a tensor."""
    if stmt.__class__ is not ast.If or stmt.orelse or not stmt.body:
        return False
    test = stmt.test
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == name
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
            and all(inplace_cut_target(b) == name for b in stmt.body))


# ---------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------
def _contains_backward(stmts: Sequence[ast.stmt], ctx, extra: Optional[Callable[[ast.Call], bool]]) -> bool:
    stack: List[ast.AST] = list(stmts)
    AST = ast.AST
    fields_of = _CHILD_FIELDS
    With, AsyncWith, Call = ast.With, ast.AsyncWith, ast.Call
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls is Call:
            if is_backward_call(node, ctx) or (extra is not None and extra(node)):  # type: ignore[arg-type]
                return True
        elif cls is With or cls is AsyncWith:
            if is_no_grad_with(node, ctx):
                continue
        elif isinstance(node, _NESTED):
            continue
        fields = fields_of.get(cls)
        if fields is None:  # (child_nodes' table: the fields that can hold nodes, ctx left out)
            fields = fields_of[cls] = _child_fields(cls)
        for name in fields:
            v = getattr(node, name, None)
            if v.__class__ is list:
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
    out: List[ast.stmt] = []
    for s in iter_statements(stmts):
        if isinstance(s, LOOPS) and loop_backprops(s, ctx, extra):
            out.append(s)
    return out


def parameters(fn: ast.AST, method: bool) -> "Tuple[List[ast.arg], Dict[str, ast.expr]]":
    """A def's named parameters in order (positional, then keyword-only; ``self``
    dropped for a method) and the default each one has: what a flow starts from
    (``rules.common.unit_entry``) and what a summary's call sites bind
    (``facts._params``)."""
    a: ast.arguments = fn.args  # type: ignore[attr-defined]
    positional = list(a.posonlyargs) + list(a.args)
    defaults: Dict[str, ast.expr] = {}
    for arg, d in zip(reversed(positional), reversed(a.defaults)):
        defaults[arg.arg] = d
    for arg, kd in zip(a.kwonlyargs, a.kw_defaults):
        if kd is not None:
            defaults[arg.arg] = kd
    named = positional + list(a.kwonlyargs)
    if method and named:
        named = named[1:]
    return named, defaults


def assigns_a_view(stmt: ast.stmt) -> bool:
    """``out_proj = emb.weight.t()``: an assignment of a chain of view operations
    (``knowledge.VIEW_METHODS``, ``VIEW_ATTRS``) on a name or attribute (a
    parameter), with basic indexing (numbers and slices) only: the value shares the
    storage of what it is read from and saves nothing for backward."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
    return value is not None and is_view_chain(value)


def is_view_chain(e: ast.AST) -> bool:
    """See :func:`assigns_a_view`: the expression."""
    while True:
        if isinstance(e, ast.Name):
            return True
        if isinstance(e, ast.Attribute):
            if e.attr not in K.VIEW_ATTRS and not isinstance(e.value, ast.Name):
                return False
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in K.VIEW_METHODS:
            if any(not isinstance(a, (ast.Constant, ast.UnaryOp, ast.Tuple, ast.Name)) for a in e.args) or e.keywords:
                return False
            e = e.func.value
        elif isinstance(e, ast.Subscript):
            idx = e.slice
            parts = idx.elts if isinstance(idx, ast.Tuple) else [idx]
            if not all(isinstance(p, (ast.Constant, ast.Slice, ast.UnaryOp)) for p in parts):
                return False  # advanced indexing copies
            e = e.value
        else:
            return False


def frozen_by_loop(loop: ast.AST) -> Optional[str]:
    """``for p in enc.parameters(): p.requires_grad = False`` (or ``p.requires_grad_(False)``):
    the module whose parameters the loop freezes, dotted (``enc``, ``self.enc``), or None.
    Only a statement every iteration runs counts (one under an ``if`` may freeze some
    parameters and leave the others trainable), and only ``False``, ``None`` or ``0``."""
    it = getattr(loop, "iter", None)
    target = getattr(loop, "target", None)
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "parameters"
            and isinstance(target, ast.Name)):
        return None
    owner = dotted(it.func.value)
    if owner is None:
        return None
    p = target.id
    for s in loop.body:  # type: ignore[attr-defined]
        if isinstance(s, ast.Assign) and _false_constant(s.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Name)
                and t.value.id == p for t in s.targets):
            return owner
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            c = s.value
            if (isinstance(c.func, ast.Attribute) and c.func.attr == "requires_grad_" and isinstance(c.func.value, ast.Name)
                    and c.func.value.id == p and c.args and _false_constant(c.args[0])):
                return owner
    return None


def assigned_pairs(s: ast.Assign) -> "List[Tuple[ast.AST, ast.AST]]":
    """(target, value) of each name an assignment binds, pairing the elements of
    ``a, b = x, y`` one by one (same length); any other target gets the whole value."""
    pairs: "List[Tuple[ast.AST, ast.AST]]" = []
    v = s.value
    for t in s.targets:
        if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts):
            pairs.extend(zip(t.elts, v.elts))
        else:
            pairs.append((t, v))
    return pairs


# -- branches one pass never takes both of ---------------------------------------
# ``if train_dec and train_dis: ... opt.step()`` then ``if train_dec and not train_dis:
# loss.backward()``: whatever the flags, one pass over the block runs at most one of them.
# A condition is read as a conjunction of atoms on plain names (``x``, ``not x``,
# ``x == True``, ``x is False``, ``x == 3``, ``x != "a"``); conjuncts of any other
# form are left out (each atom kept is still implied by the test).

def _condition_atom(e: ast.AST) -> "Optional[Tuple[str, Any]]":
    """``(name, True)`` for a truthy ``name``, ``(name, False)`` for a falsy one,
    ``(name, ("==", v))`` / ``(name, ("!=", v))`` for a comparison with a constant."""
    if isinstance(e, ast.Name):
        return (e.id, True)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        inner = _condition_atom(e.operand)
        return _negated_atom(inner) if inner is not None else None
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.left, ast.Name) \
            and isinstance(e.comparators[0], ast.Constant):
        op, v = e.ops[0], e.comparators[0].value
        name = e.left.id
        if isinstance(v, bool) and isinstance(op, (ast.Eq, ast.Is)):
            return (name, v)
        if isinstance(v, bool) and isinstance(op, (ast.NotEq, ast.IsNot)):
            return (name, not v)
        if isinstance(v, (int, float, str)) and isinstance(op, ast.Eq):
            return (name, ("==", v))
        if isinstance(v, (int, float, str)) and isinstance(op, ast.NotEq):
            return (name, ("!=", v))
    return None


def _negated_atom(atom: "Tuple[str, Any]") -> "Tuple[str, Any]":
    name, what = atom
    if isinstance(what, bool):
        return (name, not what)
    op, v = what
    return (name, ("!=" if op == "==" else "==", v))


def _condition_atoms(test: ast.AST, negate: bool) -> "List[Tuple[str, Any]]":
    """Atoms every run that finds ``test`` true (``negate``: false) satisfies."""
    if not negate:
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return [a for v in test.values for a in _condition_atoms(v, False)]
        atom = _condition_atom(test)
        return [atom] if atom is not None else []
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return [a for v in test.values for a in _condition_atoms(v, True)]
    atom = _condition_atom(test)
    return [_negated_atom(atom)] if atom is not None else []


def _atoms_clash(a: "Any", b: "Any") -> bool:
    if isinstance(a, bool) and isinstance(b, bool):
        return a != b
    if isinstance(a, bool):
        a, b = b, a
    if isinstance(b, bool):  # (a is a comparison) x truthy vs x == 0; x falsy vs x == 3
        op, v = a
        return op == "==" and bool(v) != b
    (op1, v1), (op2, v2) = a, b
    if type(v1) is not type(v2):
        return False
    if op1 == op2 == "==":
        return v1 != v2
    return op1 != op2 and v1 == v2


def branch_atoms(stmt: ast.stmt, node: ast.AST) -> "List[Tuple[str, Any]]":
    """The atoms of the ``if`` tests (``elif``/``else`` branches included) that hold
    wherever ``node``, inside ``stmt``, runs: one per test on the way down."""
    out: List[Tuple[str, Any]] = []
    cur: ast.AST = stmt
    while cur is not node and isinstance(cur, ast.stmt):
        nxt: Optional[ast.AST] = None
        if isinstance(cur, ast.If):
            for negate, block in ((False, cur.body), (True, cur.orelse)):
                hit = next((s for s in block if within(node, s)), None)
                if hit is not None:
                    out.extend(_condition_atoms(cur.test, negate))
                    nxt = hit
                    break
        else:
            nxt = next((s for block in child_blocks(cur) for s in block if within(node, s)), None)
        if nxt is None:
            break
        cur = nxt
    return out


def _bound_names(stmts: "Sequence[ast.stmt]") -> "Set[str]":
    out: Set[str] = set()
    for s in stmts:
        for n in walk_all(s):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                out.update(n.names)
    return out


def never_both_run(stmts: "Sequence[ast.stmt]", i: int, a: ast.AST, j: int, b: ast.AST) -> bool:
    """Within one pass over ``stmts`` (``i <= j``), can ``a`` (inside ``stmts[i]``) and
    ``b`` (inside ``stmts[j]``) not both run: they sit under ``if`` tests on a name
    that clash (``x`` and ``not x``; ``x == 1`` and ``x == 2``), and nothing from
    ``stmts[i]`` to ``stmts[j]`` binds that name (the two tests read one value)?
    The two branches of one ``if`` and two ``if`` statements one after the other alike."""
    atoms_a = branch_atoms(stmts[i], a)
    if not atoms_a:
        return False
    atoms_b = branch_atoms(stmts[j], b)
    if not atoms_b:
        return False
    clashing = {x for x, what in atoms_a for y, other in atoms_b if x == y and _atoms_clash(what, other)}
    return bool(clashing - _bound_names(stmts[i:j + 1]))
