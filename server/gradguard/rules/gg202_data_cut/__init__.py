"""GG202 data-cut: ``.data`` used to take a value with a graph out of the
graph (``hidden = hidden.data``, ``Variable(h.data)``, ``x = y.data``).

``.data`` and ``.detach()`` give the same values without a graph; ``.data``
also hides the result from autograd's version counter, so an in-place change of
it that corrupts a gradient goes unreported. The fix is ``.detach()``.

Detection runs the graph interpreter of :mod:`gradguard.analysis.interpreter` over the unit
and looks at the places where ``.data`` is *kept* as a tensor: the right-hand
side of an assignment, a ``return``, the argument of ``Variable(...)``, alone
or through a passthrough (``.clone()``, ``.to(device)``) or a tuple of such.
It reports the ones whose base carries a graph (it was built by a module call or
an operation on parameters), and a helper that returns the ``.data`` of its
parameter (the old ``repackage_hidden``). Parameter updates and
initialisation (``p.data.add_(...)``, ``p.data.copy_(...)``,
``w.data.normal_()``, ``p.data = ...``) and reads that leave torch
(``.numpy()``, ``.tolist()``, ``.item()``) are not kept graph values and are
never looked at.
"""

from __future__ import annotations

import ast

from gradguard.analysis import interpreter as interp
from gradguard.analysis import knowledge as K
from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.model.findings import Finding, Fix, Severity, TextEdit
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.common import run_own_flow
from gradguard.rules.gg202_data_cut import messages as M

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Tuple

_PASS = K.PASSTHROUGH_METHODS - {"sum", "mean"}


def _data_nodes(expr: ast.expr) -> List[ast.Attribute]:
    """The ``X.data`` nodes an expression keeps as a tensor: itself, through
    passthrough calls, ``Variable(...)``, tuples/lists and generators of them."""
    e = expr
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PASS:
        e = e.func.value
    if isinstance(e, ast.Attribute) and e.attr == "data":
        return [e]
    if isinstance(e, ast.Call) and isinstance(e.func, (ast.Name, ast.Attribute)) and len(e.args) == 1:
        name = e.func.id if isinstance(e.func, ast.Name) else e.func.attr
        if name in ("Variable", "tuple", "list"):
            return _data_nodes(e.args[0])
    if isinstance(e, (ast.Tuple, ast.List)):
        return [d for x in e.elts for d in _data_nodes(x)]
    if isinstance(e, (ast.GeneratorExp, ast.ListComp)):
        return _data_nodes(e.elt)
    if isinstance(e, ast.IfExp):
        return _data_nodes(e.body) + _data_nodes(e.orelse)
    return []


def _plain_target(t: ast.expr) -> bool:
    if isinstance(t, (ast.Tuple, ast.List)):
        return all(_plain_target(e) for e in t.elts)
    return isinstance(t, (ast.Name, ast.Attribute))


class _DataFlow(interp.GraphFlow):
    """GraphFlow that records, at each statement keeping a ``.data``, whether
    its base carries a graph (or is a parameter of the unit)."""

    def __init__(self, resolver, self_obj=None):
        super().__init__(resolver, self_obj=self_obj, find_carries=False)
        self.hits: Dict[int, Tuple[ast.Attribute, ast.stmt, str]] = {}

    def stmt(self, s, env):
        value = None
        if isinstance(s, ast.Return):
            value = s.value
        elif isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            # kept under a name (an alias of the original storage); not copied into a
            # buffer (``buf[i] = x.data``) nor combined (``total += x.data``)
            if all(_plain_target(t) for t in targets):
                value = s.value
        if value is not None and not self.no_grad:
            for node in _data_nodes(value):
                if id(node) in self.hits:
                    continue
                base = node.value
                v = self.eval(base, dict(env))
                if v.graph_tokens():
                    self.hits[id(node)] = (node, s, "graph")
                elif isinstance(s, ast.Return) and isinstance(base, ast.Name) and (
                        v.param or self._over_a_parameter(value, base.id, env)):
                    self.hits[id(node)] = (node, s, "param")
        return super().stmt(s, env)

    def _over_a_parameter(self, value: ast.expr, name: str, env) -> bool:
        """``return [Variable(state.data) for state in states]``: is ``name`` the variable of a
        comprehension of ``value`` that runs over a parameter of the unit?"""
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and len(value.args) == 1:
            value = value.args[0]  # tuple(... for s in states)
        if not isinstance(value, (ast.GeneratorExp, ast.ListComp)):
            return False
        return any(isinstance(g.target, ast.Name) and g.target.id == name and isinstance(g.iter, ast.Name)
                   and self.eval(g.iter, dict(env)).param for g in value.generators)


class DataCut(Rule):
    code = "GG202"
    name = "data-cut"
    default_severity = Severity.WARNING
    needs_backprop = True
    fact_sources = (GRAPH_FACTS,)  # the interpreter reads fn:/class: facts of same-file definitions
    trigger = Trigger(torch=True, text=(".data",))
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        flow = run_own_flow(_DataFlow, unit, ctx)
        if flow is None:
            return ()
        out = []
        for node, s, why in sorted(flow.hits.values(), key=lambda h: (h[0].lineno, h[0].col_offset)):
            if why == "param" and not _helper_returns_state(unit):
                continue
            out.append(_finding(self, node, ctx))
        return out


def _helper_returns_state(unit) -> bool:
    """A def of one parameter that returns its ``.data`` (maybe per element):
    the old ``repackage_hidden`` helper."""
    node = unit.node
    if unit.kind != "function" or node is None:
        return False
    args = node.args.posonlyargs + node.args.args
    if unit.class_node is not None:
        args = args[1:]
    return len(args) == 1


def _finding(rule, node: ast.Attribute, ctx) -> Finding:
    base = _text(node.value, ctx)
    start = ctx.range(node.value).end
    end = ctx.range(node).end
    from gradguard.model.findings import Range

    edit = TextEdit(Range(start, end), ".detach()")
    msg = M.data_cut(base)
    fix = Fix(M.fix_detach(base), (edit,), preferred=True)
    return Finding(rule.code, ctx.range(node), msg, rule.default_severity, (), (fix,), {"variable": base})


def _text(node, ctx) -> str:
    r = ctx.range(node)
    if r.start.line != r.end.line:
        return ast.unparse(node)
    return ctx.index.line(r.start.line)[r.start.character:r.end.character]
