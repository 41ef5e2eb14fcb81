"""Shared AST helpers for the graph-lifetime rules (GG101, GG102).

Everything here is pure, never imports torch, and never descends into nested
``def`` / ``class`` / ``lambda`` bodies (those are units of their own).

Stable API (other rules import these; keep signatures):

* walking:        :func:`iter_nodes`, :func:`iter_statements`, :func:`child_blocks`
* names:          :func:`dotted`, :func:`qualify`, :func:`target_names`, :func:`loaded_names`
* backward:       :func:`is_backward_call`, :func:`backward_target`, :func:`has_retain_graph`
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
from typing import Callable, Iterator, List, Mapping, Optional, Sequence

from gradguard.core import knowledge as K

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
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _NESTED):
            continue
        children = list(ast.iter_child_nodes(node))
        children.reverse()
        stack.extend(children)


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
def dotted(expr: ast.AST) -> Optional[str]:
    """``a.b.c`` → ``"a.b.c"``; anything that is not a Name/Attribute chain → None."""
    parts: List[str] = []
    cur = expr
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    parts.append(cur.id)
    return ".".join(reversed(parts))


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
    if not isinstance(call, ast.Call):
        return False
    m = _method(call)
    if m in K.BACKWARD_METHODS:
        return True
    q = qualify(call.func, ctx)
    return q in K.BACKWARD_FUNCTIONS


def backward_target(call: ast.Call, ctx=None) -> Optional[ast.expr]:
    """The expression whose graph a backward call traverses:
    ``loss`` in ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``accelerator.backward(loss)``, ``torch.autograd.grad(loss, params)``."""
    m = _method(call)
    if m in K.BACKWARD_METHODS:
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
        if m in K.GRAPH_CUT_METHODS:
            return True
        # .detach().to(device), .detach().clone(): a cut followed by a passthrough
        if m in K.PASSTHROUGH_METHODS and is_graph_cut(expr.func.value):  # type: ignore[union-attr]
            return True
        if isinstance(expr.func, ast.Name) and expr.func.id in ("tuple", "list") and len(expr.args) == 1:
            return is_graph_cut(expr.args[0])
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(is_graph_cut(e) for e in expr.elts)
    if isinstance(expr, (ast.GeneratorExp, ast.ListComp)):
        return is_graph_cut(expr.elt)
    if isinstance(expr, ast.IfExp):
        return is_graph_cut(expr.body) and is_graph_cut(expr.orelse)
    return False


def inplace_cut_target(stmt: ast.stmt) -> Optional[str]:
    """``h.detach_()`` / ``h.requires_grad_(False)`` as a statement → ``"h"``."""
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
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)) and is_no_grad_with(node, ctx):
            continue
        if isinstance(node, ast.Call) and (is_backward_call(node, ctx) or (extra is not None and extra(node))):
            return True
        stack.extend(ast.iter_child_nodes(node))
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
