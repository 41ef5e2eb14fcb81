"""GG102's loop-body taint: which names alive at a loop's entry reach which
``backward()`` inside it (and whether that backward keeps the graph). A pass
over a block's statements that follows names, not values, run twice over a
loop body for what one iteration carries into the next. The analysis runs it
at every back-propagating loop; GG102's fact summarizers run it over a whole
function (``gg102:bw:``) and over each loop of a method (``gg102:attrloop:``)."""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.rules.gg102_stale_graph import lattice as L
from gradguard.rules.gg102_stale_graph import syntax as S

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Optional, Set


class LoopTaint:
    """The taint pass over ``unit`` (a Unit) of the module ``ctx``; ``env``: what
    the analysis knows of each name so far (empty while summarising): a name it
    binds is no call of a module-level function, and ``autograd.grad``'s inputs
    are matched against its values' sources."""

    def __init__(self, unit, ctx):
        self._bw_calls: dict = {}  # _backward_calls: id(node) -> its calls
        self.unit = unit
        self.ctx = ctx
        self.env: Dict[str, object] = {}

    def _taint_block(self, stmts, taint, backs, nograd):
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(s, (ast.With, ast.AsyncWith)):
                ng = any(A.is_no_grad_context(it.context_expr, self.ctx) for it in s.items)
                self._taint_block(s.body, taint, backs, nograd + (1 if ng else 0))
                continue
            if isinstance(s, (ast.For, ast.AsyncFor)):
                t = self._taint(s.iter, taint) if not nograd else set()
                for n in S.bound_names(s.target):
                    taint[n] = set(t)
                self._backwards_in(s.iter, taint, backs)
                self._taint_block(s.body, taint, backs, nograd)
                self._taint_block(s.orelse, taint, backs, nograd)
                continue
            if isinstance(s, (ast.While, ast.If)):
                self._backwards_in(s.test, taint, backs)
                self._taint_block(s.body, taint, backs, nograd)
                self._taint_block(s.orelse, taint, backs, nograd)
                continue
            if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
                self._taint_block(s.body, taint, backs, nograd)
                for h in s.handlers:
                    self._taint_block(h.body, taint, backs, nograd)
                self._taint_block(s.orelse, taint, backs, nograd)
                self._taint_block(s.finalbody, taint, backs, nograd)
                continue
            if type(s).__name__ == "Match":
                for c in s.cases:
                    self._taint_block(c.body, taint, backs, nograd)
                continue
            self._backwards_in(s, taint, backs)
            if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                if s.value is None:
                    continue
                t = set() if nograd else self._taint(s.value, taint)
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for tg in targets:
                    names = S.bound_names(tg)
                    for n in names:
                        if isinstance(s, ast.AugAssign):
                            taint.setdefault(n, set()).update(t)
                        else:
                            taint[n] = set(t)
                    d = S.attr_name(tg)
                    if d:  # self.total = loss
                        if isinstance(s, ast.AugAssign):
                            taint.setdefault(d, set()).update(t)
                        else:
                            taint[d] = set(t)
                    elif not names:  # buf[i] = loss: the container now holds it
                        base = tg
                        while isinstance(base, (ast.Attribute, ast.Subscript)):
                            base = base.value
                        if isinstance(base, ast.Name) and t:
                            taint.setdefault(base.id, set()).update(t)
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                c = s.value
                # losses.append(loss): the list now carries the graph
                if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name) and c.func.attr in (
                        "append", "extend", "add", "insert", "add_", "copy_"):
                    t = set()
                    for a in c.args:
                        t |= self._taint(a, taint)
                    if t and not nograd:
                        taint.setdefault(c.func.value.id, set()).update(t)

    def _backward_calls(self, node: ast.AST):
        """The calls under ``node`` that :meth:`_backwards_in` may act on, in walk
        order: ``(call, target, qualified callee)`` with ``target`` None for a call
        of a plain name (a ``bw`` fact decides, later: it depends on ``self.env``)
        and ``False`` for one that is not a backward call after all. Only the
        syntax and the (fixed) import table decide this, so it is computed once
        per node and analysis: the taint passes revisit the same statements."""
        cache = self._bw_calls
        out = cache.get(id(node))
        if out is None:
            out = []
            ctx = self.ctx
            for c in S.walk_no_scopes(node):
                if not isinstance(c, ast.Call):
                    continue
                named = isinstance(c.func, ast.Name)
                if not A.is_backward_call(c, ctx) or S.kw(c, "inputs") is not None:
                    # backward(inputs=...) only runs the nodes leading to those inputs
                    if named:
                        out.append((c, False, None))
                    continue
                target = A.backward_target(c, ctx)
                if target is None:
                    if named:
                        out.append((c, False, None))
                    continue
                out.append((c, target, ctx.qualify(c.func)))
            cache[id(node)] = out = tuple(out)
        return out

    def _backwards_in(self, node: ast.AST, taint, backs):
        for c, target, q in self._backward_calls(node):
            if target is False:
                continue
            t = self._taint(target, taint)
            if q == "torch.autograd.grad":
                # grad(outputs, inputs) runs only the part of the graph leading to `inputs`
                inputs = c.args[1] if len(c.args) > 1 else (S.kw(c, "inputs").value if S.kw(c, "inputs") else None)  # type: ignore[union-attr]
                names = {n.id for n in S.walk_no_scopes(inputs) if isinstance(n, ast.Name)} if inputs is not None else set()
                t = {v for v in t if self._sources_named(v, names)}
            keep = A.keeps_graph(c)
            prev = backs.get(id(c))
            backs[id(c)] = (c, keep, (prev[2] if prev else set()) | t)

    def _sources_named(self, var: str, names: Set[str]) -> bool:
        g = self.env.get(var)
        return isinstance(g, L.Graph) and any(s.name in names for s in g.sources)

    def _taint(self, e: Optional[ast.AST], taint) -> Set[str]:
        out: Set[str] = set()
        if e is None:
            return out
        stack = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    out |= taint.get(n.id, set())
                continue
            if isinstance(n, S.SCOPES) or isinstance(n, (ast.Compare, ast.Constant)):
                continue
            if isinstance(n, ast.Attribute):
                if n.attr in S.CUT_ATTRS:
                    continue
                d = S.attr_name(n)
                if d and isinstance(n.ctx, ast.Load):
                    out |= taint.get(d, set())
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and (f.attr in K.GRAPH_CUT_METHODS or f.attr in S.NON_TENSOR_METHODS):
                    continue
                if A.applies_cut(n):
                    continue
                if isinstance(f, ast.Name) and f.id in S.CUT_BUILTINS and f.id not in taint:
                    continue
                q = self.ctx.qualify(f)
                if q in S.GRAPHLESS_FUNCTIONS:
                    continue
            stack.extend(A.child_nodes(n))
        return out
