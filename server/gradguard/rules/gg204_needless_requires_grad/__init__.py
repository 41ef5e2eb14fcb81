"""GG204 needless-requires-grad: a data tensor created with
``requires_grad=True`` (or given ``requires_grad_()``) that nothing ever asks
the gradient of.

Autograd then records every operation on it and computes its gradient in each
``backward()``: wasted time and memory, and the first step towards the seed
note's crash (a label computed from it before the loop, GG102). A hint: the code
is legal, and the flag is sometimes meant.

Detection is on the unit's statements, with the AST predicates of
:mod:`gradguard.analysis.interpreter`: a name bound to a tensor factory called with
``requires_grad=True`` (also one element of a tuple assignment, ``inputs, labels =
Variable(inputs, requires_grad=True), Variable(labels)``), or flagged by
``x.requires_grad_()`` / ``x.requires_grad = True``, whose every later use is as
input of a computation inside a loop that back-propagates (a module call, an operation), or a read of its shape. Any other
use keeps it silent: ``x.grad`` read (adversarial examples, saliency maps, deep
dream), ``x`` handed to an optimizer or to ``torch.autograd.grad`` (input
optimisation, style transfer, PINNs), put in a list, returned, stored, passed to
a call the analysis does not know, or used before the loop (then a graph built
from it before the loop is GG102's question). A module-level tensor is also kept
silent when any function of the file reads its gradient or hands it on.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.model.findings import Finding, Fix, Position, Range, Severity, TextEdit
from gradguard.analysis.quiet_facts import KEEP, QUIET_FACTS, asks_gradient_of
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.gg204_needless_requires_grad import messages as M

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Optional, Set, Tuple

_META_ATTRS = frozenset({"shape", "size", "dtype", "device", "ndim", "dim", "numel", "is_cuda", "T"})


def _kept_names(body) -> Set[str]:
    """Names whose gradient the unit asks for (see :func:`quiet_facts.asks_gradient_of`)."""
    out: Set[str] = set()
    for n in A.block_nodes(body):
        asks_gradient_of(n, out)
    return out


class NeedlessRequiresGrad(Rule):
    code = "GG204"
    name = "needless-requires-grad"
    default_severity = Severity.HINT
    needs_backprop = True
    fact_sources = (QUIET_FACTS,)  # the names other defs of the file ask the gradient of
    trigger = Trigger(torch=True, text=("requires_grad", "backward"))
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        out = []
        flagged = _flagged(unit.body, ctx)
        kept = _kept_names(unit.body) if flagged else set()
        scan = _BodyScan(unit.body, ctx)  # (read lazily, once for all the flagged names)
        for name, site, edit in flagged:
            if name in kept or (unit.kind == "module" and (KEEP + name) in ctx.summary):
                continue
            if not _only_training_input(unit.body, name, site, ctx, unit.kind == "function", scan):
                continue
            out.append(_finding(self, name, site, edit, ctx))
        return out


def _flagged(body, ctx) -> List[Tuple[str, ast.stmt, Optional[TextEdit]]]:
    """(name, statement, edit dropping the flag) for each tensor given requires_grad."""
    out: List[Tuple[str, ast.stmt, Optional[TextEdit]]] = []
    for s in A.iter_statements(body):
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t, v = s.targets[0], s.value
            # ``inputs, labels = Variable(inputs, requires_grad=True), Variable(labels)``: each pair
            pairs = list(zip(t.elts, v.elts)) if (isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple)
                                                  and len(t.elts) == len(v.elts)) else [(t, v)]
            for target, call in pairs:
                if not isinstance(target, ast.Name):
                    continue
                if isinstance(call, ast.Call) and (A.qualify(call.func, ctx) in K.TENSOR_FACTORIES
                                                   or A.qualify(call.func, ctx) in K.VARIABLE_CONSTRUCTORS):
                    for kw in call.keywords:
                        if kw.arg == "requires_grad" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                            out.append((target.id, s, _drop_keyword(call, kw, ctx)))
            if (isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Name)
                    and isinstance(v, ast.Constant) and v.value is True):
                out.append((t.value.id, s, _delete_line(s, ctx)))  # ``x.requires_grad = True``
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            c = s.value
            if (isinstance(c.func, ast.Attribute) and c.func.attr == "requires_grad_" and isinstance(c.func.value, ast.Name)
                    and (not c.args or isinstance(c.args[0], ast.Constant) and c.args[0].value is True)):
                out.append((c.func.value.id, s, _delete_line(s, ctx)))
    return out


class _BodyScan:
    """What :func:`_only_training_input` reads of a body whatever the name asked
    about, made on the first question and kept for the others (a module-level
    script flagging several tensors asked a module's worth of walks per tensor)."""

    __slots__ = ("body", "ctx", "_loops", "_parents")

    def __init__(self, body, ctx) -> None:
        self.body, self.ctx = body, ctx
        self._loops: Optional[list] = None
        self._parents: Optional[Dict[int, ast.AST]] = None

    def loops(self) -> list:
        # loops that train parameters (an optimizer steps or gradients are zeroed): the
        # loss then has a graph through the parameters whatever the inputs, so dropping
        # the flag cannot leave backward() without a graph
        if self._loops is None:
            self._loops = [s for s in A.iter_statements(self.body) if isinstance(s, A.LOOPS)
                           and A.loop_backprops(s, self.ctx) and _trains_parameters(s)]
        return self._loops

    def parents(self) -> Dict[int, ast.AST]:
        if self._parents is None:
            parents: Dict[int, ast.AST] = {}
            for n in A.block_nodes(self.body):
                for c in A.child_nodes(n):
                    parents[id(c)] = n
            self._parents = parents
        return self._parents


def _only_training_input(body, name: str, site: ast.stmt, ctx, function: bool = False,
                         scan: Optional[_BodyScan] = None) -> bool:
    """Every use of ``name`` after ``site`` is an input of a computation inside
    a loop that back-propagates, or a read of its shape. A function whose own body
    back-propagates and trains parameters (a training step called once per batch)
    counts as one iteration of such a loop. ``scan``: the body's, shared by the
    names asked about."""
    if scan is None or scan.body is not body or scan.ctx is not ctx:
        scan = _BodyScan(body, ctx)
    loops: list = scan.loops()
    if not loops and function and body and _step_function(body, ctx):
        loops = [_Span(site.lineno, body[-1].end_lineno or body[-1].lineno)]
    if not loops:
        return False
    parents = scan.parents()
    moved = _moves(body, name)
    used = False
    for n in A.block_nodes(body):
        if not (isinstance(n, ast.Name) and n.id == name):
            continue
        if n.lineno <= (site.end_lineno or site.lineno):
            continue  # the creation, the flagging, and what came before them
        if id(n) in moved:
            continue  # ``inputs = inputs.to(device)``: the same tensor, moved
        if not isinstance(n.ctx, ast.Load):
            return False  # rebound: another value
        p = parents.get(id(n))
        if isinstance(p, ast.Attribute):
            if p.attr in _META_ATTRS:
                continue
            pp = parents.get(id(p))
            if p.attr == "data" and isinstance(pp, ast.Attribute) and pp.attr in _META_ATTRS:
                continue  # ``x.data.shape[0]``: its shape
            return False
        in_loop = any(lp.lineno <= n.lineno <= (lp.end_lineno or lp.lineno) for lp in loops)
        if not in_loop:
            return False  # used before (or after) the loop: a graph made from it is GG102's question
        if isinstance(p, (ast.BinOp, ast.Compare, ast.UnaryOp)):
            used = True
            continue
        if isinstance(p, ast.Subscript) and p.value is n:
            used = True
            continue
        if isinstance(p, ast.Call) and n in p.args:
            q = A.dotted(p.func) or ""
            if isinstance(p.func, ast.Attribute) and q.rsplit(".", 1)[-1] in ("append", "extend", "insert"):
                return False
            used = True
            continue
        return False
    return used


_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "type"})


def _moves(body, name: str) -> Set[int]:
    """The name's nodes (target and receiver) of each statement rebinding it to itself
    moved to a device or a dtype (``x = x.to(device)``; ``x, y = x.to(d), y.to(d)``)."""
    out: Set[int] = set()
    for s in A.iter_statements(body):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            continue
        t, v = s.targets[0], s.value
        pairs = list(zip(t.elts, v.elts)) if (isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple)
                                              and len(t.elts) == len(v.elts)) else [(t, v)]
        for target, val in pairs:
            if (isinstance(target, ast.Name) and target.id == name and isinstance(val, ast.Call)
                    and isinstance(val.func, ast.Attribute) and val.func.attr in _MOVES
                    and isinstance(val.func.value, ast.Name) and val.func.value.id == name):
                out.update((id(target), id(val.func.value)))
    return out


class _Span:
    """A stretch of lines read as one iteration (a training-step function's body after the flag)."""

    def __init__(self, lineno: int, end_lineno: int) -> None:
        self.lineno = lineno
        self.end_lineno = end_lineno


def _step_function(body, ctx) -> bool:
    """Does the function body itself (not a loop in it) back-propagate and step an optimizer?
    (Zeroing alone is not enough here: a function that only measures a backward pass, as
    an operation counter's test does, may want the input's gradient computed.)"""
    top = [s for s in body if not isinstance(s, A.LOOPS)]
    nodes = A.block_nodes(top)
    return any(isinstance(n, ast.Call) and A.is_backward_call(n, ctx) for n in nodes) and _trains_parameters(
        _Span(0, 0), nodes, steps_only=True)


def _trains_parameters(loop, nodes=None, steps_only: bool = False) -> bool:
    for n in (A.block_nodes(loop.body) if nodes is None else nodes):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr == "zero_grad" and not steps_only:
                return True
            if n.func.attr == "step":
                recv = (A.dotted(n.func.value) or "").rsplit(".", 1)[-1].lower()
                if "opt" in recv and "sched" not in recv:
                    return True
    return False


def _drop_keyword(call: ast.Call, kw: ast.keyword, ctx) -> Optional[TextEdit]:
    """Remove ``, requires_grad=True`` (with the comma before it, or after it
    when it comes first)."""
    items = [(a.lineno, a.col_offset, a.end_lineno, a.end_col_offset) for a in call.args] + [
        (k.lineno, k.col_offset, k.end_lineno, k.end_col_offset) for k in call.keywords]
    items.sort()
    me = (kw.lineno, kw.col_offset, kw.end_lineno, kw.end_col_offset)
    i = items.index(me)
    if i > 0:
        prev = items[i - 1]
        start = ctx.pos(prev[2], prev[3])
        end = ctx.pos(me[2], me[3])
    elif len(items) > 1:
        nxt = items[1]
        start = ctx.pos(me[0], me[1])
        end = ctx.pos(nxt[0], nxt[1])
    else:
        start, end = ctx.pos(me[0], me[1]), ctx.pos(me[2], me[3])
    return TextEdit(Range(start, end), "")


def _delete_line(s: ast.stmt, ctx) -> Optional[TextEdit]:
    """Delete ``x.requires_grad_()`` when it is alone on its line (a comment may follow)."""
    if (s.end_lineno or s.lineno) != s.lineno:
        return None
    line = ctx.index.line(s.lineno - 1)
    a = ctx.pos(s.lineno, s.col_offset).character
    b = ctx.pos(s.lineno, s.end_col_offset).character
    rest = line[b:].strip()
    if line[:a].strip() or (rest and not rest.startswith("#")):
        return None
    return TextEdit(Range(Position(s.lineno - 1, 0), Position(s.lineno, 0)), "")


def _finding(rule, name: str, site: ast.stmt, edit: Optional[TextEdit], ctx) -> Finding:
    msg = M.needless_requires_grad(name)
    fixes: Tuple[Fix, ...] = ()
    if edit is not None:
        fixes = (Fix(M.fix_drop_requires_grad(name),
                     (edit,), preferred=True),)
    return Finding(rule.code, ctx.line_range(site), msg, rule.default_severity, (), fixes, {"variable": name})
