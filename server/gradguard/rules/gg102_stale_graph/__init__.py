"""GG102 stale-graph: a tensor whose graph is built before the loop is back-propagated in every iteration.

How it works (one unit at a time):

1. Where a graph alive before a loop is back-propagated again in every iteration
   is the shared interpreter's trace (``rules.common.unit_trace``, one run per
   unit that GG101 and GG103 read too): the graph tokens each name holds at a
   loop's entry (``GraphFlow.loop_entries``) and those each backward event in the
   loop reaches (``BackwardEvent.loss``, ``.retain``); a call of a function whose
   own loop back-propagates what it is passed (``GraphFlow.callee_loops``) or a
   global it reads (``FnFacts.loop_backward_globals``); a method's loop reusing
   what ``__init__`` left on ``self`` (:func:`.facts.class_attr_loops`, a run of
   the interpreter over that method). A name counts where the loop (or the call)
   reads it.
2. Where the stale value's graph starts (its sources: data, parameter or module,
   by name, where, and the edit that drops ``requires_grad``) is the trace's too:
   each leaf token names where the leaf was made (``("L", node)``) and
   ``GraphFlow.leaf_of`` says which leaves met where a graph began; a graph a
   module call began names that module (``interpreter.graph_sources``). The
   note at a ``y.requires_grad_(False)`` that raises on the stale non-leaf is
   the trace's (``GraphFlow.not_a_leaf``); a view of a parameter (silent) is
   ``ast_util.assigns_a_view``.
3. Which statements built the stale value (the finding's line; what a fix
   moves, detaches or wraps in ``no_grad``) and whether an operation that built
   it saves tensors for backward (tri-state: an error when a saving operation
   makes the second iteration's crash certain, a warning otherwise, naming the
   operation it cannot tell) are the interpreter's too: a run of its own over a
   unit this rule reports on (``rules.common.unit_build_trace``,
   ``GraphFlow.built_by`` / ``saving_of``), read at the loop's entry, the call
   (``CalleeLoop.entry``, ``GraphFlow.call_entries``) or the unit's end
   (``exit_env``: what ``__init__`` leaves on ``self``; a method ``__init__``
   calls is run seeded with the leaves ``__init__`` made), carried on each hit.
4. Which names are reported is the trace's too: a name holding a graph at a
   loop's entry (or at the call, or on ``self`` when ``__init__`` ends) as GG102
   reads a value reused (``GraphFlow.carried_graphs``: without what an untyped
   call made, ``fn_made``, nor what the trace only assumed, ``opaque``), less
   what is no graph the unit built by a reading of its own (:meth:`_Report._walk_kind`):
   a container of leaves only (``TensorDataset(X)``), a comprehension over a list
   of graphs whose element reads nothing else holding one, a dict last filled
   through a list it holds (``episode["prob"].append(prob)``), the result of a
   call of a local bound to no module (``norm = registry[0]``), of ``self.<a>`` no
   class sets to a module, or of an unbound name with no arguments. The named
   tensors a container holds (``DataLoader(TensorDataset(feats, y))`` reports
   ``feats``) are ``interpreter.held_names``. A name every graph of which a method
   of the user's (not a module's forward) made through the modules its object
   holds (``GraphFlow.kept_by_method``: ``policy.act(obs)``'s log-probs kept in a
   storage object; :meth:`_Report._trace_graph`) is taken where it is no list or
   dict and its sources can be named, and at a call by the attributes of an
   argument the callee's loop back-propagates (``memory.logprobs``); such a hit
   offers no fix. The loop's loss having no other source (what the other names
   the loop reads hold at its entry: no leaf, no trainable module), a graph that
   came in a list another method fills (``GraphFlow.sibling_filled``) and the
   statement maps the fixes edit (:func:`.syntax.statement_maps`) are the
   trace's or syntax's. (Until the tenth pass a second walk of the unit, with
   a value lattice of its own, decided these; every hit was compared with it
   before it went: equal on the fixtures, report fixtures, examples, projects
   and the programs of ``test_gg102*.py``.) The pre-filter above skips a unit
   whose only reused graph is an object a graph only may reach
   (``GraphFlow.tensor_graphs``) or one an untyped call made (``fn_made``).

The torch facts (which calls cut graphs, which operations save tensors, which
modules have no parameters) come from :mod:`gradguard.analysis.knowledge`.

The rule is a package: this module is the reporter and its hits (``_Hit``)
turned into findings (``_Report``). Its module facts (the
``gg102`` fact source) and the class question in :mod:`.facts`; the words of every message, note and fix title, in English and
Chinese, are in :mod:`.messages`; the text edits of the fixes in :mod:`.fixes`;
the syntax questions they all ask in :mod:`.syntax`.
"""

from __future__ import annotations

import ast

from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.analysis import ast_util as A
from gradguard.analysis import interpreter as interp
from gradguard.analysis import knowledge as K
from gradguard.analysis import summary as _summary
from gradguard.analysis import values as V
from gradguard.analysis.values import Source as Src
from gradguard.analysis.context import unit_text, unit_words
from gradguard.model.findings import Finding, Position, Range, Related, Severity
from gradguard.model.record import record
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.common import unit_build_trace, unit_entry, unit_trace
from gradguard.rules.gg102_stale_graph import messages as M
from gradguard.rules.gg102_stale_graph import syntax as S
from gradguard.rules.gg102_stale_graph.facts import (GG102_FACTS, class_attr_loops, class_backprops, grad_read_names,
                                                     init_calls, is_module_class, mentions_backprop, mentions_bwloop)
from gradguard.rules.gg102_stale_graph.fixes import Fixes

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, List, Optional, Set, Tuple

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)


# ---------------------------------------------------------------------------
# the rule


class StaleGraph(Rule):
    code = "GG102"
    name = "stale-graph"
    default_severity = Severity.ERROR
    needs_backprop = True
    fact_sources = (GRAPH_FACTS, GG102_FACTS)
    trigger = Trigger(not_other_framework=True)  # mxnet/paddle/...: not a torch program
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        # Exceptions are isolated per rule and unit by the engine.
        if not _may_report(unit, ctx):
            return []
        if not _builds_for_init(unit) and not _trace_may_report(unit, ctx):
            return []  # the trace reuses no graph here: the reporter is not needed
        return _Report(unit, ctx).run()


def _builds_for_init(unit) -> bool:
    """``__init__`` of a module-level class that back-propagates, or a method it
    calls: what it leaves on ``self`` may be reused by another method's loop (the
    reporter reads whether it leaves a graph there from the trace)."""
    cls, node = unit.class_node, unit.node
    return cls is not None and node is not None and unit.parents == (cls,) and class_backprops(cls) and (
        node.name == "__init__" or node.name in init_calls(cls))


def _trace_may_report(unit, ctx) -> bool:
    """Does the shared trace show a graph alive at a loop's entry that a backward in
    that loop frees, or a call handing one to a function whose own loop
    back-propagates it? (A superset of what the findings need: the reporter then
    narrows to the names the loop reads, one finding per graph.)"""
    node = unit.node
    if node is not None and A.is_no_grad_function(node, ctx):
        return False
    if unit.trace is None:  # (not yet run for another rule: run it only where a backward may happen)
        text = unit_text(unit, ctx.index.lines)
        if "backward" not in text and "grad" not in text and not _summary.query(
                ctx.summary, mentions_backprop, unit_words(unit, ctx.index.lines)):
            return False
    flow = unit_trace(unit, ctx)
    if flow is None:
        return False
    if flow.callee_loops:
        return True
    if unit.kind == "module" and _summary.query(ctx.summary, mentions_bwloop, unit_words(unit, ctx.index.lines)):
        return True  # a call of a function whose loop back-propagates a global (FnFacts.loop_backward_globals)
    reached: set = set()
    for ev in flow.events:
        if ev.in_loop and not ev.retain:
            reached.update(t for t in ev.loss.taints if t[0] == "G")
    if not reached:
        return False
    # a tensor carrying one of those graphs, not an object the trace only assumes may hold one
    # (``GraphFlow.tensor_graphs``: what a callable it cannot see into returned) nor one a
    # call it cannot type made of nothing its arguments brought (``GraphFlow.carried_graphs``)
    skip = flow.opaque | flow.fn_made if flow.fn_made else flow.opaque
    for entry in flow.loop_entries.values():
        for v in entry.values():
            if v.taints and not reached.isdisjoint(v.taints):
                if not skip or any(id(t[1]) not in skip for t in reached.intersection(v.taints)):
                    return True
    return False


def _may_report(unit, ctx) -> bool:
    """Cheap pre-filter on the unit's text. A finding needs one of: a loop
    statement (``_check_loop``), a call of a same-file function whose loop
    back-propagates (``_check_call``, by that name), or ``__init__`` (or a
    method it calls) of a class that back-propagates (``_check_init_attrs``). Keywords and names are looked
    up among the unit's words (comments and strings included: they only err on
    the side of analysing)."""
    if not unit.body:
        return False
    words = unit_words(unit, ctx.index.lines)
    if "for" in words or "while" in words:  # keywords as words: "forward" is no loop
        return True
    if _builds_for_init(unit):
        return True
    return _summary.query(ctx.summary, mentions_bwloop, words)


@record(frozen=False)
class _Hit:
    var: str
    loop: Optional[ast.stmt]  # the loop; or the statement calling a function whose loop back-propagates
    backward: Optional[ast.Call]  # (both None for a hit of a backward in another method: remote)
    via: Optional[str] = None  # the called function that runs backward(), if not a backward call itself
    remote: Optional[Range] = None  # the backward() in another method (loop is then None): self.attr hits
    remote_body: Optional[Position] = None  # start of the first statement of that method's loop body
    # the trace's: the statements that built the value (GraphFlow.built_by), whether one of
    # its operations saves tensors and the one it cannot tell (GraphFlow.saving_of)
    stmts: Tuple[ast.stmt, ...] = ()
    saving: Optional[bool] = False
    unknown: Optional[str] = None
    traced: bool = False  # a graph the trace alone holds (_trace_graph): no fix is offered
    sibling: bool = False  # its graph came in a list another method fills (GraphFlow.sibling_filled)
    srcs: Optional[Tuple[Src, ...]] = None  # where its graph starts, when the hit knows (__init__'s graphs on self)
    fallback: Tuple[Src, ...] = ()  # ... where the trace at hand cannot say (a graph the trace alone holds)


class _Report:
    """GG102 on one unit: its hits, from the shared interpreter's trace, and their findings."""

    def __init__(self, unit, ctx):
        self.unit = unit
        self.ctx = ctx
        self.nograd = 0
        self.hits: List[_Hit] = []
        self.reported: Set[Tuple[str, int]] = set()
        self.self_name = None
        # a method of a class that is no module (a PPO agent, a trainer, an environment): its
        # ``self.<a>`` is a module only where the class's facts type the constructor
        # (``self.rewardnet = nn.Sequential(...)``), not by the name's case alone
        self.plain_self: Optional[str] = None
        node = unit.node
        if unit.class_node is not None and node is not None and is_module_class(unit.class_node.name, ctx):
            args = list(node.args.posonlyargs) + list(node.args.args)
            if args and not any(getattr(d, "id", "") == "staticmethod" for d in node.decorator_list):
                self.self_name = args[0].arg
        elif unit.class_node is not None and unit.parents == (unit.class_node,) \
                and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and ctx.summary.get("class:" + unit.class_node.name) is not None:
            args = list(node.args.posonlyargs) + list(node.args.args)
            if args and not any(getattr(d, "id", "") in ("staticmethod", "classmethod") for d in node.decorator_list):
                self.self_name = args[0].arg
                self.plain_self = unit.class_node.name
        # _check_call looks for calls of functions whose loop back-propagates: only
        # where the unit names one
        self.calls_bwloop = bool(unit.body) and _summary.query(ctx.summary, mentions_bwloop,
                                                                unit_words(unit, ctx.index.lines))
        self.grad_read = _summary.query(ctx.summary, grad_read_names) if unit.kind == "module" else frozenset()
        self.trained_attrs: Set[str] = set()
        self._module_evidence: Optional[Set[str]] = None
        self._attr_loops: object = False  # class_attr_loops of the unit's class, once asked
        self._grad_used: Optional[Set[str]] = None
        self._bflow: object = False  # the unit's run recording how values were built, once asked
        self._maps: Optional[Tuple[Dict[int, Tuple[list, int]], Dict[int, ast.stmt]]] = None
        self._bound: Optional[Set[str]] = None
        self._defined: Optional[Set[str]] = None
        self.traced: Dict[str, Tuple[Src, ...]] = {}  # the names whose candidate graph is the trace's alone (_trace_graph)
        self.call_traced: Dict[str, Tuple[Src, ...]] = {}  # ... at a call of a function whose loop back-propagates

    # -- unit-wide facts --------------------------------------------------
    # Syntax questions about the whole unit (:func:`.syntax.module_names`,
    # :func:`.syntax.grad_used_names`), asked only where they can matter (a name
    # called that the unit binds to nothing else; a stale graph that reaches a
    # freeing backward, and its finding). Most units of a training file report
    # nothing and never need them.
    @property
    def module_evidence(self) -> Set[str]:
        got = self._module_evidence
        if got is None:
            got = self._module_evidence = S.module_names(self.unit)
        return got

    @property
    def grad_used(self) -> Set[str]:
        got = self._grad_used
        if got is None:
            got = self._grad_used = S.grad_used_names(self.unit, self.ctx, self.grad_read)
        return got

    @property
    def parent(self) -> Dict[int, Tuple[list, int]]:
        """id(stmt) -> (block, index) over the unit's statements (:func:`.syntax.statement_maps`,
        what the fixes edit), made when a finding or an element filter asks."""
        if self._maps is None:
            self._maps = S.statement_maps(self.unit.body)
        return self._maps[0]

    @property
    def owner(self) -> Dict[int, ast.stmt]:
        """id(block) -> the compound statement owning it (:func:`.syntax.statement_maps`)."""
        if self._maps is None:
            self._maps = S.statement_maps(self.unit.body)
        return self._maps[1]

    # -- driver -------------------------------------------------------------
    def run(self) -> List[Finding]:
        node = self.unit.node
        if node is not None and A.is_no_grad_function(node, self.ctx):
            return []
        self._statements(self.unit.body)
        self._check_init_attrs()
        return [f for f in (self._finding(h) for h in self.hits) if f is not None]

    def _statements(self, stmts: list):
        """The unit's statements in order, not entering nested defs and classes: each
        loop (:meth:`_check_loop`) and each simple statement that may call a function
        whose loop back-propagates (:meth:`_check_call`), outside ``no_grad`` blocks."""
        for s in stmts:
            k = s.__class__
            if k in _LOOPS:
                if not self.nograd:
                    self._check_loop(s)
                self._statements(s.body)
                self._statements(s.orelse)
            elif k in _SIMPLE:
                if self.calls_bwloop and not self.nograd:
                    self._check_call(s)
            elif k in (ast.With, ast.AsyncWith):
                ng = A.is_no_grad_with(s, self.ctx)
                self.nograd += ng
                self._statements(s.body)
                self.nograd -= ng
            elif k is ast.If:
                self._statements(s.body)
                self._statements(s.orelse)
            elif k is ast.Try or k.__name__ == "TryStar":
                self._statements(s.body)
                for h in s.handlers:
                    self._statements(h.body)
                self._statements(s.orelse)
                self._statements(s.finalbody)
            elif k.__name__ == "Match":
                for c in s.cases:
                    self._statements(c.body)

    def _init_unit(self) -> Optional[str]:
        """The instance name when this unit is ``__init__`` of a module-level class or
        a method ``__init__`` calls (a ``self.m(...)`` statement): the units that build
        what another method's loop may reuse (:func:`class_attr_loops`)."""
        node, cls = self.unit.node, self.unit.class_node
        if node is None or cls is None or self.unit.parents != (cls,):
            return None
        me = S.self_arg(node)
        if me is None or (node.name != "__init__" and node.name not in init_calls(cls)):
            return None
        return me

    def _init_fact(self):
        """:func:`class_attr_loops` of this unit's class, asked once."""
        got = self._attr_loops
        if got is False:
            got = self._attr_loops = class_attr_loops(self.unit.class_node, self.ctx)
        return got

    def _check_init_attrs(self):
        """In ``__init__`` of a module-level class (or a method it calls): the
        ``self.<attr>`` graphs it leaves behind that another method's
        back-propagating loop reuses (:func:`class_attr_loops`, from the same class,
        hence the same top-level chunk). Reported here, where the stale graph is
        built; the method with the loop reports nothing about them (it never sees
        the graph). What the unit leaves is the trace's (the building run's
        ``exit_env``; for a method ``__init__`` calls, a run seeded with the leaves
        ``__init__`` made), and so are the graphs' sources."""
        me = self._init_unit()
        if me is None:
            return
        helper = self.unit.node.name != "__init__"
        if helper:
            flow, exit_env = self._helper_exit()
        else:
            flow = self._build_flow()
            exit_env = flow.exit_env if flow is not None else None
        if flow is None or not exit_env:
            return
        prefix = me + "."
        if not any(k.startswith(prefix) and self._walk_kind(flow, k, v, exit_env) == "graph"
                   for k, v in exit_env.items()):
            return  # it leaves no graph on the instance
        fact = self._init_fact()
        if fact is None:
            return
        cls = self.unit.class_node
        loops, grad_attrs, _calls, init_assigned, _leaves, _methods, trained_attrs = fact
        self.trained_attrs = {f"{me}.{a}" for a in trained_attrs}
        self.grad_used.update(f"{me}.{a}" for a in grad_attrs)
        index = self.ctx.index
        for attr, method, line, col, end_line, end_col, loop_self, body_line, body_col in loops:
            if helper and attr in init_assigned:
                continue  # __init__ may replace what the helper built
            var = f"{me}.{attr}"
            if self._walk_kind(flow, var, exit_env.get(var), exit_env) != "graph":
                continue
            for name in interp.held_names(flow, var, exit_env, self.ctx.qualify, self.ctx.summary) or (var,):
                gv = exit_env.get(name)
                built = self._built(name, exit_env)
                if self._walk_kind(flow, name, gv, exit_env) != "graph" or built is None:
                    continue
                if built[1] is not True and name in self.grad_used:
                    continue
                key = (name, id(built[0][0]))
                if key in self.reported:
                    continue
                a, b = cls.lineno + line, cls.lineno + end_line
                if not (1 <= a <= b <= len(index.lines)):
                    continue
                rng = Range(self.ctx.pos(a, col), self.ctx.pos(b, end_col))
                self.reported.add(key)
                at = None
                if name == var and loop_self == me and body_line >= 0 \
                        and 1 <= cls.lineno + body_line <= len(index.lines):
                    at = self.ctx.pos(cls.lineno + body_line, body_col)
                srcs = self._exit_sources(flow, gv, exit_env)
                self.hits.append(_Hit(name, None, None, via=method, remote=rng, remote_body=at,
                                      stmts=built[0], saving=built[1], unknown=built[2],
                                      srcs=tuple(srcs) if srcs is not None else None,
                                      sibling=self._sibling_any(flow, gv)))

    def _exit_sources(self, flow, v, env) -> Optional[List[Src]]:
        """Where a graph the unit leaves on ``self`` starts (``interpreter.graph_sources``
        over what it leaves); a leaf ``__init__`` made that a helper started from is named
        ``self.<attr>``, of the kind ``__init__`` made it."""
        seeds = getattr(flow, "init_seeds", None) or {}
        if not seeds:
            return interp.graph_sources(flow, v, env, self.unit.body, self.ctx.qualify)
        out: List[Src] = []
        for t in sorted(v.graph_tokens(), key=lambda t: (getattr(t[1], "lineno", 0), getattr(t[1], "col_offset", 0))):
            leaves = flow.leaf_of.get(id(t[1])) or frozenset()
            seeded = [seeds[id(x[1])] for x in leaves if id(x[1]) in seeds]
            rest = interp.graph_sources(flow, V.plain({t}), env, self.unit.body, self.ctx.qualify) \
                if len(seeded) < len(leaves) or not leaves else []
            if rest is None:
                return None
            for src in seeded + list(rest):
                if src not in out:
                    out.append(src)
        return out

    # -- findings ---------------------------------------------------------------
    def _finding(self, h: _Hit) -> Optional[Finding]:
        ctx, var = self.ctx, h.var
        origin = next((s for s in h.stmts if var in S.stmt_binds(s)), h.stmts[0])
        traced = list(h.srcs) if h.srcs is not None else self._traced_sources(h)
        srcs = traced if traced is not None else list(h.fallback)
        if not srcs:
            return None
        primary = next((s for s in srcs if s.name), srcs[0])
        if h.saving is False and all(s.kind in ("param", "module") for s in srcs) \
                and all(A.assigns_a_view(s) for s in h.stmts):
            # a view of a parameter (a tied projection `emb.weight.t()`, `w.T`, `w.view(...)`,
            # `w[0]`): it shares the parameter's storage, so the optimizer's in-place updates show
            # through it and the gradient it carries is the one wanted; nothing to report
            return None
        trained = any(s.kind in ("param", "module") or (s.name in self.grad_used) for s in srcs)
        certain = h.saving is True
        # X = torch.rand(..., requires_grad=True); X = X.reshape(...): the source is the replaced leaf
        shown = primary if primary.name != var else Src(None, primary.kind)
        before = M.built_where(h.via, self.unit.node.name if h.remote is not None else None)
        msg = M.stale(var, before, M.describe(shown.kind, shown.name), M.into(shown.kind, shown.name), h.saving,
                      h.unknown, primary.name if trained else None)
        related: List[Related] = []
        for src in srcs[:3]:
            node = src.stmt or src.node
            if node is None:
                continue
            rng = ctx.line_range(node) if isinstance(node, ast.stmt) else ctx.range(node)
            related.append(Related(rng, M.origin(src.kind, src.name, isinstance(src.node, ast.arg))))
        bmsg = M.backward_note(var, h.via, h.remote is not None, certain)
        related.append(Related(h.remote if h.remote is not None else ctx.range(h.backward), bmsg))
        flow = unit_trace(self.unit, ctx)
        rg = flow.not_a_leaf.get(var) if flow is not None else None  # Y.requires_grad_(False) on a non-leaf
        if rg is not None:
            related.append(Related(ctx.line_range(rg), M.not_a_leaf(var)))
        if not trained and self._only_grad_source_of_loop(h, srcs):
            # the loop's loss needs these leaves' graph (`x_out = t @ (x + y)` with nothing
            # else requiring grad): removing requires_grad would leave it nothing to
            # back-propagate; computing the value again in the loop keeps every gradient
            trained = True
        fixes = () if h.traced else Fixes(ctx, self.unit, self.parent, self.owner).choose(
            h, srcs, trained, self.grad_used, self.trained_attrs)
        if h.sibling:
            # the graph came in a list another method fills (PPO's self.logprobs): computing
            # the value again here reads the same list; the cut belongs where that method
            # appends, which is another unit's text: no fix
            fixes = ()
        return Finding(
            code="GG102",
            range=ctx.line_range(origin),
            message=msg,
            severity=Severity.ERROR if certain else Severity.WARNING,
            related=tuple(related),
            fixes=fixes,
            data={"variable": var, "source": primary.name, "certain": certain},
        )

    @staticmethod
    def _built(name: str, entry) -> Optional[Tuple[Tuple[ast.stmt, ...], Optional[bool], Optional[str]]]:
        """What the shared trace says built ``name``'s value in ``entry`` (the names'
        values where a loop, or the call of a function whose loop back-propagates,
        starts; or those a method leaves): its building statements in order
        (``GraphFlow.built_by``) and whether one of its operations saves tensors, with
        the one it cannot tell (``GraphFlow.saving_of``). None when it holds no graph
        there or no statement of the unit built it."""
        v = entry.get(name) if entry else None
        if v is None or not v.graph_tokens():
            return None
        stmts = tuple(interp.GraphFlow.built_by(v))
        if not stmts:
            return None
        saving, unknown = interp.GraphFlow.saving_of(v)
        return stmts, saving, unknown

    def _build_flow(self):
        """The unit's run that records which statements built each value and whether
        they save tensors (``rules.common.unit_build_trace``), made once a hit asks."""
        got = self._bflow
        if got is False:
            got = self._bflow = unit_build_trace(self.unit, self.ctx)
        return got

    def _helper_exit(self):
        """What a method ``__init__`` calls leaves when it ends, starting from the
        requires-grad leaves ``__init__`` made (``class_attr_loops``'s ``init_leaves``),
        which the shared trace of the method alone does not know: a run of the
        interpreter over the method, asked only for a finding about what it builds."""
        me, fact = self._init_unit(), self._init_fact()
        if me is None or fact is None:
            return None, None
        env, self_obj = unit_entry(self.unit)
        mine = S.assigned_in(self.unit.body)
        seeds: Dict[int, Src] = {}
        for attr, kind in fact[4]:
            d = f"{me}.{attr}"
            if d not in mine:
                seed = ast.Name(id=d)  # (stands for the leaf __init__ made: where the helper's graphs start)
                seeds[id(seed)] = Src(d, kind, None, None, None)
                env[d] = V.plain({("L", seed)})
        run = interp.BuildFlow(interp.Resolver(self.ctx), self_obj=self_obj, find_carries=False)
        run.module_evidence = lambda: A.module_names(self.unit)
        run.init_seeds = seeds  # type: ignore[attr-defined]
        try:
            return run, run.run(self.unit.body, env)
        except RecursionError:
            return None, None

    def _traced_sources(self, h: _Hit) -> Optional[List[Src]]:
        """Where the stale value's graph starts, from the shared trace: the leaf tokens
        (``("L", node)``) that met where each of its graphs began
        (``GraphFlow.leaf_of``) and the module calls that began the others. None for a
        hit whose graph the trace does not hold at hand (built in ``__init__``, reused
        by another method's loop)."""
        flow = unit_trace(self.unit, self.ctx)
        if flow is None or h.remote is not None:
            return None
        entry = None
        if isinstance(h.loop, _LOOPS):
            entry = flow.loop_entries.get(id(h.loop))
        else:
            entry = next((cl.entry for cl in flow.callee_loops if cl.call is h.backward), None)
            if entry is None and h.backward is not None:
                # a module-level call of a function whose loop back-propagates a global it
                # reads (FnFacts.loop_backward_globals): the names at that call, in the run
                # that records them (GraphFlow.call_entries), where the leaves met too
                bflow = self._build_flow()
                entry = bflow.call_entries.get(id(h.backward)) if bflow is not None else None
                flow = bflow if entry is not None else flow
        v = entry.get(h.var) if entry else None
        if v is None or entry is None:
            return None
        return interp.graph_sources(flow, v, entry, self.unit.body, self.ctx.qualify)

    def _only_grad_source_of_loop(self, h: _Hit, srcs: List[Src]) -> bool:
        """Do the stale value's leaves feed the loop's computation directly, with no
        trainable module or other leaf that requires grad read in the loop (by what
        each name holds at the loop's entry in the shared trace)?"""
        loop = h.loop
        if not isinstance(loop, _LOOPS):
            return False
        names = {s.name for s in srcs if s.name}
        read = {n.id for st in loop.body for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if not names & read:
            return False
        node = getattr(self.unit, "node", None)
        params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)} if node is not None else set()
        flow = unit_trace(self.unit, self.ctx)
        entry = (flow.loop_entries.get(id(loop)) if flow is not None else None) or {}
        for name in read - names - {h.var}:
            if name in params:
                return False  # a tensor or model we cannot see
            v = entry.get(name)
            if v is not None and (_a_leaf(v) or self._trainable_module(v)):
                return False  # another tensor or model the loss may learn through
        return True

    def _trainable_module(self, v) -> bool:
        """Does ``v`` hold a module with parameters that require grad?"""
        return not v.frozen and _module_with_parameters(v.obj or "", lambda: interp.Resolver(self.ctx))

    # -- loops ------------------------------------------------------------------
    def _check_loop(self, loop: ast.stmt):
        """The names a backward of ``loop`` frees the graph of, that the loop reads and
        never rebinds, from the shared trace: the graphs each name holds at the loop's
        entry (``GraphFlow.loop_entries``, as GG102 reads a value reused by a loop:
        ``carried_graphs``) that a freeing backward in it reaches (:meth:`_trace_backs`)."""
        if any(isinstance(x, (ast.Break, ast.Return, ast.Raise)) for x in loop.body):  # type: ignore[attr-defined]
            return  # the body runs at most once: nothing is back-propagated a second time
        flow0 = unit_trace(self.unit, self.ctx)
        entry0 = flow0.loop_entries.get(id(loop)) if flow0 is not None else None
        if not entry0 or flow0 is None:
            return
        assigned = S.assigned_in(loop.body)  # type: ignore[attr-defined]
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            assigned |= set(S.bound_names(loop.target))
        cands: Dict[str, object] = {}
        for n, v in entry0.items():
            if n in assigned or not flow0.carried_graphs(v) or self._holds_leaves_only(flow0, v) \
                    or self._items_of_graphs(flow0, v, entry0) or self._untyped_calls_only(flow0, v, entry0) \
                    or self._dict_filled_inside(n, v) or _made_holding_only(flow0, v):
                continue
            if self._kept_only(flow0, v, entry0):
                # every graph it holds a method of the user's made through its object's
                # modules (``act()``'s log-probs kept in a storage object)
                if self._trace_graph(flow0, n, v, entry0) is None:
                    continue
            cands[n] = v
        if not cands:
            return
        backs = self._trace_backs(loop, cands)
        if not backs:
            return
        flow = self._build_flow()
        entry = flow.loop_entries.get(id(loop)) if flow is not None else None
        built = {n: self._built(n, entry) for n in backs}
        first = {n: b[0] if b is not None else () for n, b in built.items()}  # the building statements
        for cand in sorted(backs, key=lambda n: (first[n][0].lineno if first[n] else 0, n)):
            reaching = backs[cand]
            stmts = first[cand]
            if _own_elements_only(loop, cand, stmts) \
                    or self._independent_elements(loop, cand, entry0[cand], stmts, flow0) \
                    or self._elements_apart(loop, cand, stmts) or self._handed_back_after_backward(loop, cand):
                continue
            freeing = [c for c, keep in reaching if not keep]
            if not freeing:
                continue  # every backward through it retains the graph: legal
            freeing.sort(key=lambda c: (c.lineno, c.col_offset))
            # a container or an object made of named tensors (``DataLoader(TensorDataset(feats,
            # y))``): the finding is about the tensors it holds, by the trace (held_names)
            held = interp.held_names(flow0, cand, entry0, self.ctx.qualify, self.ctx.summary) \
                if cand not in self.traced else ()
            for var in held or (cand,):
                hv = entry0.get(var)
                b = built.get(var) if var in built else self._built(var, entry)
                if hv is None or not flow0.carried_graphs(hv) or b is None:
                    continue
                if b[1] is not True and var in self.grad_used:
                    # differentiated against on purpose (autograd.grad(u, x), x.grad, x.retain_grad()):
                    # without a certain crash, the reuse is what the program asks for
                    continue
                key = (var, id(b[0][0]))
                if key in self.reported:
                    continue
                self.reported.add(key)
                if var in self.traced:
                    self.hits.append(self._traced_hit(var, self.traced[var], loop, freeing[0], b, entry0))
                    continue
                self.hits.append(_Hit(var, loop, freeing[0], stmts=b[0], saving=b[1], unknown=b[2],
                                      sibling=self._sibling_any(flow0, hv)))

    def _kept_only(self, flow, v, entry) -> bool:
        """Is every graph ``v`` holds one a method of the user's (not a module's forward)
        made through the modules its object holds (``GraphFlow.kept_by_method``:
        ``policy.act(obs)``), none the trace only assumed?"""
        toks = flow.carried_graphs(v)
        kept, opaque = flow.kept_by_method, flow.opaque
        return bool(toks) and all(id(t[1]) in kept and id(t[1]) not in opaque and self._method_call(flow, t[1], entry)
                                  for t in toks)

    def _method_call(self, flow, node, entry) -> bool:
        """Is ``node`` a call of a method of an object (``policy.act(obs)``), not of a
        module (``enc(x)``, ``self.fc(x)``, ``m.forward(x)``)?"""
        func = node.func if isinstance(node, ast.Call) else None
        if not isinstance(func, ast.Attribute) or func.attr in ("forward", "__call__"):
            return False
        base = A.dotted(func.value)
        if base is None:
            return True
        r = interp.Resolver(self.ctx)
        if base == "self" and flow.self_obj:
            obj = flow.self_obj
        else:
            held = entry.get(base)
            obj = held.obj if held is not None else None
            if obj is None and "." not in base:
                obj = r.global_obj(base)
        if obj is None:
            return True
        return r.method_facts(obj, func.attr) is not None

    def _items_of_graphs(self, flow, v, entry) -> bool:
        """``losses = [((out - y) ** 2).mean() for out in outputs]``: a comprehension over
        a container holding graphs (not a module's ``parameters()``) whose element reads
        nothing else holding one: which elements a backward reaches is not followed (the
        loop reads them one by one, ``losses[k]``), so the list is no candidate."""
        site = v.site
        if not (isinstance(site, ast.Assign) and len(site.targets) == 1 and isinstance(site.targets[0], ast.Name)
                and isinstance(site.value, (ast.ListComp, ast.GeneratorExp, ast.SetComp))):
            return False
        comp = site.value
        bound: Set[str] = set()
        for gen in comp.generators:
            it = gen.iter
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                    and it.func.attr in ("parameters", "named_parameters"):
                return False
            bound.update(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
        held_by_iter = False
        for gen in comp.generators:
            for n in ast.walk(gen.iter):
                if isinstance(n, ast.Name) and n.id not in bound:
                    iv = entry.get(n.id)
                    held_by_iter = held_by_iter or (iv is not None and bool(flow.carried_graphs(iv)))
        if not held_by_iter:
            return False
        for node in [comp.elt] + [c for gen in comp.generators for c in gen.ifs]:
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and n.id not in bound:
                    nv = entry.get(n.id)
                    if nv is not None and nv.has_grad():
                        return False
                elif isinstance(n, ast.Call):
                    root = n.func
                    while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                        root = root.func if isinstance(root, ast.Call) else root.value
                    if not ((self.ctx.qualify(n.func) or "").startswith("torch.")
                            or (isinstance(n.func, ast.Attribute) and (not isinstance(root, ast.Name) or root.id in bound))
                            or (isinstance(n.func, ast.Name) and _parameterless(entry.get(n.func.id)))):
                        return False
        return True

    def _untyped_calls_only(self, flow, v, entry) -> bool:
        """Is every graph ``v`` holds one a call began that is no module's the unit can
        name: a local bound to something else than a module (``norm = registry[0]``,
        ``params = get_params()``), or ``self.<a>`` that no class of the file sets to a
        module or a parameter (``self.clip_range = schedule``)? Such a callable may be any
        function, its result no graph the unit built."""
        toks = flow.carried_graphs(v)
        if not toks:
            return False
        mine = self._bound_here()
        r = None
        for t in toks:
            node = t[1]
            if not isinstance(node, ast.Call) or id(node) in flow.leaf_of:
                return False
            func = node.func
            if isinstance(func, ast.Name):
                if func.id not in mine:
                    if func.id in self.module_evidence or node.args or node.keywords:
                        return False  # a module, or what a function makes of its arguments' graphs
                    continue
                fv = entry.get(func.id)
                obj = (fv.obj or "") if fv is not None else ""
                if r is None:
                    r = interp.Resolver(self.ctx)
                if obj.startswith("inst:torch.nn.") or (obj.startswith("user:") and r.is_module_class(obj[5:])):
                    return False
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                    and self.self_name == "self" and self.plain_self is None:
                summ = self.ctx.summary
                if summ.get(f"gg102:modattr:{func.attr}") or summ.get(f"gg102:paramattr:{func.attr}"):
                    return False
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id == self.self_name and self.plain_self is not None:
                if r is None:
                    r = interp.Resolver(self.ctx)
                if self._plain_attr_trains(func.attr, r):
                    return False
            else:
                return False
        return True

    def _plain_attr_trains(self, attr: str, r) -> bool:
        """Does the plain class of the unit set ``self.<attr>`` to a parameter or a module
        with parameters (``self.rewardnet = nn.Linear(4, 2)``)? A parameterless module
        (``nn.Softmax(dim=-1)``) or anything else begins no graph of its own when called."""
        cf = self.ctx.summary.get("class:" + (self.plain_self or ""))
        raw = cf.attr(attr) if isinstance(cf, V.ClassFacts) else None
        if not raw:
            return False
        if r.qualify_raw(raw) in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return True
        return _module_with_parameters(r.ctor_obj(raw) or "", lambda: r)

    def _bound_here(self) -> Set[str]:
        """The names a statement of the unit binds (not a comprehension's own)."""
        got = self._bound
        if got is None:
            got = set()
            for st in A.iter_statements(self.unit.body):
                if isinstance(st, ast.Assign):
                    targets = list(st.targets)
                elif isinstance(st, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
                    targets = [st.target]
                elif isinstance(st, (ast.With, ast.AsyncWith)):
                    targets = [i.optional_vars for i in st.items if i.optional_vars is not None]
                else:
                    continue
                for t in targets:
                    got.update(S.bound_names(t))
            self._bound = got
        return got

    def _dict_filled_inside(self, name: str, v) -> bool:
        """A dict last filled by a call on a list it holds (MARL's
        ``episode["prob"].append(prob)``), never by ``name[k] = ...``: which of its
        elements a backward reads is not followed."""
        site = v.site
        if v.kind != "dict" or not isinstance(site, ast.Expr):
            return False
        for st in A.iter_statements(self.unit.body):
            targets = st.targets if isinstance(st, ast.Assign) else (
                [st.target] if isinstance(st, (ast.AugAssign, ast.AnnAssign)) else [])
            for t in targets:
                if isinstance(t, ast.Subscript) and A.dotted(t.value) == name:
                    return False
        return True

    def _holds_leaves_only(self, flow, v) -> bool:
        """A container of leaves only (``TensorDataset(X)``, ``DataLoader(...)`` of it):
        every graph it holds a ``torch.utils`` call or a builtin container began on leaves.
        Reusing it is reusing leaves, which is fine."""
        toks = flow.carried_graphs(v)
        for t in toks:
            node = t[1]
            if not isinstance(node, ast.Call) or id(node) not in flow.leaf_of:
                return False
            q = self.ctx.qualify(node.func) or ""
            if not (q.startswith("torch.utils.") or (isinstance(node.func, ast.Name) and node.func.id in (
                    "list", "tuple", "zip", "reversed", "sorted", "enumerate", "iter", "next"))):
                return False
        return bool(toks)

    @staticmethod
    def _sibling_tokens(flow) -> Set[int]:
        return {id(t[1]) for sv in flow.sibling_filled.values() for t in sv.graph_tokens()}

    def _sibling_any(self, flow, v) -> bool:
        """Did ``v``'s graph come in a list another method of the object fills
        (``GraphFlow.sibling_filled``: PPO's ``self.logprobs``)?"""
        if not flow.sibling_filled:
            return False
        sib = self._sibling_tokens(flow)
        return any(id(t[1]) in sib for t in v.graph_tokens())

    def _traced_hit(self, var: str, srcs: Tuple[Src, ...], at: ast.stmt, backward: ast.Call, built, entry, via=None) -> _Hit:
        """A hit on a graph the trace alone holds (:meth:`_trace_graph`): whether it saves
        is what the summaries say of the calls that made it (a method whose graph module
        calls on ``self`` built saves, ``GraphFlow.saved_weights``; another cannot be
        told), where the building run's own marks say nothing more. No fix: the value is
        a method's result, often an object holding it (a storage, a dict), and what to cut
        is that method's text or the program's design (re-evaluating the policy)."""
        saving, unknown = built[1], built[2]
        if saving is False:
            flow = unit_trace(self.unit, self.ctx)
            v = entry.get(var) if entry else None
            toks = sorted(v.graph_tokens() if v is not None else (),
                          key=lambda t: (t[1].lineno, t[1].col_offset))
            weights = flow.saved_weights if flow is not None else ()
            kept = flow.saving_calls if flow is not None else ()
            if any(id(t[1]) in weights or id(t[1]) in kept for t in toks):
                saving = True
            elif toks and isinstance(toks[0][1], ast.Call):
                saving, unknown = None, f"`{ast.unparse(toks[0][1].func)}()`"
        return _Hit(var, at, backward, via=via, stmts=built[0], saving=saving, unknown=unknown, traced=True,
                    fallback=srcs)

    def _made_at(self, var: str, entry):
        """For a graph the trace alone holds whose building run bound no statement of the
        unit on its way (a list a method of another object filled: ``act(state, memory)``
        appending to ``memory.logprobs``): the unit's statement whose call made its first
        graph, as :meth:`_built` words it."""
        v = entry.get(var) if entry else None
        toks = sorted(v.graph_tokens() if v is not None else (), key=lambda t: (t[1].lineno, t[1].col_offset))
        if not toks:
            return None
        node = toks[0][1]
        for st in A.iter_statements(self.unit.body):
            if st.__class__ in _SIMPLE and _inside(node, st):
                return (st,), False, None
        return None

    def _trace_graph(self, flow, name: str, v, entry, container_ok: bool = False) -> Optional[Tuple[Src, ...]]:
        """``name``'s graph by the shared trace alone, where every graph it holds is one a
        method of the user's made through the modules its object holds, by its summary
        (``GraphFlow.kept_by_method``: ``act()``'s ``dist.log_prob(action)`` of its actor's
        output, or what ``act(state, memory)`` appended) and the trace can say where it
        starts (``interpreter.graph_sources``). A graph the trace only assumes, or one a
        function derives from its arguments (a loader, a model, an image a helper returns:
        their graphs are the trace's assumptions about its arguments), is no candidate."""
        toks = v.graph_tokens()
        if not toks or name in self.module_evidence:
            return None
        if not container_ok and (v.kind in ("list", "dict") or v.elems is not None):
            # a list or dict the file fills (``episode["prob"].append(prob)``): which of its
            # elements the loop's backward reads the trace does not say
            return None
        kept, opaque = flow.kept_by_method, flow.opaque
        if any(id(t[1]) not in kept or id(t[1]) in opaque for t in toks):
            return None
        srcs = interp.graph_sources(flow, v, entry, self.unit.body, self.ctx.qualify)
        if not srcs:
            return None
        got = self.traced[name] = tuple(srcs)
        return got

    def _independent_elements(self, loop: ast.stmt, name: str, v, stmts: Tuple[ast.stmt, ...], flow) -> bool:
        """``for loss in losses: loss.backward()`` over a list built before the loop, one
        element per iteration of a comprehension or of a loop that appended it, each from
        graphs that building step made itself (``[m(x).mean() for m in models]``): each
        iteration back-propagates another element, whose graph no earlier backward
        reached. Not when the elements share a graph built outside that step (two heads
        over one ``h = backbone(x)``: the second backward runs into the part the first freed)."""
        if not (isinstance(loop, (ast.For, ast.AsyncFor)) and not loop.orelse and stmts):
            return False
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "zip") \
                and not it.keywords:
            # enumerate(losses), zip(log_probs, returns): one element of each per iteration
            its = [a for a in it.args if isinstance(a, ast.Name) and a.id == name]
            it = its[0] if its and (it.func.id == "zip" or len(it.args) == 1) else it
        if not (isinstance(it, ast.Name) and it.id == name):
            return False
        if any(isinstance(n, ast.Name) and n.id == name for n in A.block_nodes(loop.body)):
            return False  # read again by the body: not only its own element
        bound = set(S.bound_names(loop.target))
        for n in A.block_nodes(loop.body):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step":
                recv = n.func.value
                if not (isinstance(recv, ast.Subscript) and isinstance(recv.slice, ast.Name) and recv.slice.id in bound):
                    # opt.step() between two elements' backward calls: the next element's graph may
                    # have saved weights this step changes in place (a model's losses on several
                    # batches); only an optimizer of the element's own (opts[i].step()) is clear
                    return False
        sib = self._sibling_tokens(flow) if flow.sibling_filled else ()
        toks = v.graph_tokens()
        if sib and toks and all(id(t[1]) in sib for t in toks) and all(
                isinstance(st, ast.Assign) and isinstance(st.value, ast.Attribute) for st in stmts):
            return True  # log_probs = self.saved_log_probs: one element per call of the method filling it
        made = stmts[0]
        region: Optional[ast.AST] = None
        if isinstance(made, ast.Assign) and isinstance(made.value, (ast.ListComp, ast.GeneratorExp)):
            region = made.value
        elif isinstance(made, ast.Expr) and id(made) in self.parent:
            block = self.parent[id(made)][0]
            owner = self.owner.get(id(block))
            if isinstance(owner, (ast.For, ast.AsyncFor)) and block is owner.body:
                region = owner  # appended once per iteration of the loop that built it
        if region is None or any(st is not made and not _inside(st, region) for st in stmts):
            return False
        flow = unit_trace(self.unit, self.ctx)
        held = (flow.loop_entries.get(id(loop)) or {}).get(name) if flow is not None else None
        if held is None:
            return False
        return all(_inside(t[1], region) for t in held.graph_tokens() if t[0] == "G")

    def _elements_apart(self, loop: ast.stmt, name: str, stmts: Tuple[ast.stmt, ...]) -> bool:
        """``outputs = []; for m in models: outputs.append(m(x))`` before the loop, which
        reads it only element by element (``outputs[i]``, ``for j, peer in
        enumerate(outputs)``): every element is a graph of its own, built by its own
        iteration of the loop that appended it (no graph made outside that iteration is
        shared). A backward then frees the elements its loss read; whether a later
        iteration reaches one of those again is GG103's question (a freed graph reached),
        not one graph built before the loop and back-propagated by every iteration."""
        if not stmts:
            return False
        made = stmts[0]
        if not (isinstance(made, ast.Expr) and isinstance(made.value, ast.Call)
                and isinstance(made.value.func, ast.Attribute) and made.value.func.attr == "append"
                and isinstance(made.value.func.value, ast.Name) and made.value.func.value.id == name
                and id(made) in self.parent):
            return False
        block = self.parent[id(made)][0]
        owner = self.owner.get(id(block))
        if not (isinstance(owner, (ast.For, ast.AsyncFor)) and block is owner.body) \
                or any(not _inside(st, owner) for st in stmts):
            return False
        flow = unit_trace(self.unit, self.ctx)
        held = (flow.loop_entries.get(id(loop)) or {}).get(name) if flow is not None else None
        if held is None or not all(_inside(t[1], owner) for t in held.graph_tokens()):
            return False
        return _read_by_element(loop, name)

    def _handed_back_after_backward(self, loop: ast.stmt, name: str) -> bool:
        """``advantages = self.train_critic(obs)`` before the loop, where the called
        function back-propagated (and stepped) what it hands back: every graph the name
        holds was made by a call at which the trace records a backward (the callee's own).
        The loop's first backward already runs through a graph a backward ran through
        (after a step changed its weights: GG103's question), not one built before the
        loop that only the loop's iterations reuse."""
        flow = unit_trace(self.unit, self.ctx)
        if flow is None:
            return False
        held = (flow.loop_entries.get(id(loop)) or {}).get(name)
        toks = held.graph_tokens() if held is not None else ()
        if not toks:
            return False
        ran = {id(ev.call) for ev in flow.events if not _inside(ev.call, loop)}
        return all(id(t[1]) in ran for t in toks)

    def _trace_backs(self, loop: ast.stmt, cands: Dict[str, object]) -> Dict[str, List[Tuple[ast.Call, bool]]]:
        """Which backward calls of ``loop`` reach each candidate (a graph alive at loop
        entry that the loop never rebinds), with whether each keeps its graph: the
        shared interpreter's trace (``unit_trace``) has, at the loop's entry, the graph
        tokens each name holds and, at each backward event, those its loss reaches.
        A candidate counts only where the loop reads it (an upstream value of what it
        reads shares its graph but is not reused by name; it is reported, if ever, as
        the value read). ``backward(inputs=...)`` and ``autograd.grad(outputs,
        inputs)`` run only the part of the graph leading to those inputs: they count
        for a candidate whose sources are named among the inputs."""
        flow = unit_trace(self.unit, self.ctx)
        entry = flow.loop_entries.get(id(loop)) if flow is not None else None
        if flow is None or not entry:
            return {}
        nodes = A.block_nodes(loop.body)  # type: ignore[attr-defined]
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            nodes = list(A.iter_nodes(loop.iter)) + nodes
        inside = set()
        read: set = set()
        Name, Attribute, Call, Load = ast.Name, ast.Attribute, ast.Call, ast.Load
        module = self.unit.kind == "module"
        for n in nodes:
            k = n.__class__
            if k is Call:
                inside.add(id(n))
                if module and n.func.__class__ is Name:  # type: ignore[attr-defined]
                    # train_step(model, opt) reading the module's ``features``: the loop
                    # reads them through the call (FnFacts.backward_globals, loop_calls)
                    facts = self._fn_facts(n.func.id)  # type: ignore[attr-defined]
                    if facts is not None and not facts.no_grad:
                        read |= V.globals_freed_by_call(self._fn_facts, facts)
            elif k is Name:
                if n.ctx.__class__ is Load:  # type: ignore[attr-defined]
                    read.add(n.id)  # type: ignore[attr-defined]
            elif k is Attribute and n.value.__class__ is Name and n.ctx.__class__ is Load:  # type: ignore[attr-defined]
                read.add(f"{n.value.id}.{n.attr}")  # type: ignore[attr-defined]
        if not read.intersection(cands):
            return {}
        events: Dict[int, Tuple[ast.Call, bool, frozenset, Optional[Set[str]], frozenset]] = {}
        for ev in flow.events:  # (a loop body is walked twice: an event per walk)
            c = ev.call
            if id(c) not in inside:
                continue
            prev = events.get(id(c))
            if prev is not None:
                events[id(c)] = (c, prev[1], prev[2] | ev.loss.taints, prev[3], prev[4] | (ev.inputs or frozenset()))
                continue
            inputs: Optional[Set[str]] = None
            in_toks = ev.inputs or frozenset()  # (the trace's tokens of autograd.grad's inputs)
            if A.is_backward_call(c, self.ctx):
                if S.kw(c, "inputs") is not None:
                    continue
                if self.ctx.qualify(c.func) == "torch.autograd.grad":
                    given = c.args[1] if len(c.args) > 1 else (S.kw(c, "inputs").value if S.kw(c, "inputs") else None)  # type: ignore[union-attr]
                    inputs = {n.id for n in S.walk_no_scopes(given) if isinstance(n, ast.Name)} if given is not None \
                        else set()
            events[id(c)] = (c, ev.retain, ev.loss.taints, inputs, in_toks)
        out: Dict[str, List[Tuple[ast.Call, bool]]] = {}
        for name in cands:
            if name not in read:
                continue
            v = entry.get(name)
            toks = v.graph_tokens() if v is not None else frozenset()
            if not toks:
                continue
            # autograd.grad(outputs, x) runs the part between the outputs and x: the candidate's
            # graph when it was built from x (its tokens hold x's), or from a source named there
            got = [(c, keep) for c, keep, t, inputs, in_toks in events.values()
                   if toks & t and (inputs is None or (v is not None and flow.built_from(v, in_toks))
                                    or not self._source_names(flow, v, entry).isdisjoint(inputs))]
            if got:
                out[name] = got
        return out

    def _source_names(self, flow, v, entry) -> Set[Optional[str]]:
        """The names of where ``v``'s graph starts, as a finding about it names them
        (``interpreter.graph_sources``; none where the trace cannot name them, which no
        program of the fixtures or tests reaches): what ``autograd.grad(inputs=...)``
        is compared with."""
        srcs = interp.graph_sources(flow, v, entry, self.unit.body, self.ctx.qualify)
        return {s.name for s in srcs} if srcs is not None else set()

    def _fn_facts(self, name: str) -> Optional[V.FnFacts]:
        """A same-module function's summary (``fn:<name>``), or None."""
        got = self.ctx.summary.get("fn:" + name)
        return got if isinstance(got, V.FnFacts) else None

    def _check_call(self, s: ast.stmt):
        """``train(model, X, Y)`` where ``train`` loops and back-propagates through
        its ``Y`` (or, called from module level, a global it reads): the stale graph
        is reused inside the callee's loop. Which arguments reach that loop's backward
        is the shared interpreter's (``GraphFlow.callee_loops``, from the callee's
        ``FnFacts.loop_backward``/``loop_delegates``); which globals, the callee's
        ``FnFacts.loop_backward_globals``; what each name holds, the trace's at the call."""
        if self.nograd:
            return
        for c in S.walk_no_scopes(s):
            if not isinstance(c, ast.Call):
                continue
            if isinstance(c.func, ast.Attribute):
                # flow.fit(latent): a method of an object of a class of the user's whose
                # own loop back-propagates what it is passed; the trace typed the object
                # and composed the method's facts (a CalleeLoop at this call), or did not
                via = A.dotted(c.func)
                if via is None:
                    continue
                cands = set(self._trace_call_reach(c))
                facts = None
            elif not isinstance(c.func, ast.Name) or c.func.id in self._bound_or_defined():
                continue
            else:
                via = c.func.id
                facts = self.ctx.summary.get(f"fn:{c.func.id}")
                if not isinstance(facts, V.FnFacts) or facts.no_grad or not (
                        facts.loop_backward or facts.loop_backward_globals or facts.loop_delegates or facts.loop_calls):
                    continue
                cands = set(self._trace_call_reach(c))
            entry = self._call_entry(c)
            bflow = self._build_flow()
            if facts is not None and self.unit.kind == "module":
                cands.update(n for n in V.loop_globals_of(self._fn_facts, facts)
                             if entry and self._walk_kind(bflow, n, entry.get(n), entry) == "graph")
            reached: List[str] = []
            for cand in sorted(cands):
                if cand in self.call_traced:
                    names: Tuple[str, ...] = (cand,)
                else:
                    names = interp.held_names(bflow, cand, entry, self.ctx.qualify, self.ctx.summary) \
                        if entry and bflow is not None else ()
                for var in names or (cand,):
                    if var not in reached:
                        reached.append(var)
            for var in reached:
                traced = var in self.call_traced
                if traced:
                    g = self.call_traced[var]
                elif entry is None or self._walk_kind(bflow, var, entry.get(var), entry) != "graph":
                    continue
                b = self._built(var, entry)
                if b is None and traced:
                    b = self._made_at(var, entry)
                if b is None:
                    continue
                key = (var, id(b[0][0]))
                if key in self.reported:
                    continue
                self.reported.add(key)
                if traced:
                    self.hits.append(self._traced_hit(var, g, s, c, b, entry, via=via))
                    continue
                self.hits.append(_Hit(var, s, c, via=via, stmts=b[0], saving=b[1], unknown=b[2],
                                      sibling=self._sibling_any(bflow, entry[var])))

    def _bound_or_defined(self) -> Set[str]:
        """The names a statement of the unit binds or a def or class of it defines."""
        got = self._defined
        if got is None:
            got = self._defined = set(self._bound_here()) | {
                st.name for st in A.iter_statements(self.unit.body)
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        return got

    def _walk_kind(self, flow, name: str, v, entry) -> str:
        """What ``name`` holds as GG102 reads a value handed on: "graph" (a tensor or a
        container carrying a graph the unit built), "other" (a leaf, a module) or "none"."""
        if v is None or flow is None:
            return "none"
        if flow.carried_graphs(v):
            if self._holds_leaves_only(flow, v) or self._items_of_graphs(flow, v, entry) \
                    or self._untyped_calls_only(flow, v, entry) or self._dict_filled_inside(name, v) \
                    or self._kept_only(flow, v, entry) or _made_holding_only(flow, v):
                return "none"
            return "graph"
        if _a_leaf(v) or self._trainable_module(v):
            return "other"
        return "none"

    def _call_entry(self, c: ast.Call):
        """The names' values at ``c``, a call of a function whose loop back-propagates
        what it is passed (``CalleeLoop.entry``) or globals it reads
        (``GraphFlow.call_entries``), in the run that records how values were built."""
        flow = self._build_flow()
        if flow is None:
            return None
        entry = next((cl.entry for cl in flow.callee_loops if cl.call is c), None)
        return entry if entry is not None else flow.call_entries.get(id(c))

    def _trace_call_reach(self, c: ast.Call) -> List[str]:
        """The names ``c`` reads (a call of a function whose own loop back-propagates
        what it is passed) that hold a graph the unit built (:meth:`_walk_kind`, at the
        call) that, by the shared interpreter's trace (``GraphFlow.callee_loops``), its
        arguments bring into that loop's backward. Where they hold none, a graph the trace
        alone holds (:meth:`_trace_graph`) counts only as precisely as the callee's
        summary says it is read: an argument whose attributes the callee's loop
        back-propagates (``FnFacts.containers``: ``update(memory)`` stacking
        ``memory.logprobs``) by those attributes, never as the whole object (a batch
        whose ``logp`` the loop does not read)."""
        flow = unit_trace(self.unit, self.ctx)
        loss: frozenset = frozenset()
        entry = None
        for cl in flow.callee_loops if flow is not None else ():
            if cl.call is c:
                loss |= cl.loss.taints
                if entry is None:
                    entry = cl.entry
        if entry is None:
            return []
        out = []
        names: List[str] = []
        exact: Set[str] = set()  # attributes of an argument the callee's loop back-propagates
        read_by_attr: Set[str] = set()  # arguments the callee reads by attribute
        paths = None
        for n in S.walk_no_scopes(c):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                names.append(n.id)
                if self._walk_kind(flow, n.id, entry.get(n.id), entry) == "none" and n in c.args:
                    if paths is None:
                        paths = self._callee_paths(c, entry)
                    mine = paths.get(c.args.index(n), ())
                    if mine:
                        read_by_attr.add(n.id)
                    for attr in mine:
                        key = f"{n.id}.{attr}"
                        if key in entry:
                            names.append(key)
                            exact.add(key)
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                names.append(f"{n.value.id}.{n.attr}")
        for name in names:
            v = entry.get(name)
            if v is None or name in out or not v.graph_tokens() & loss:
                continue
            kind = self._walk_kind(flow, name, v, entry)
            if kind == "graph":
                out.append(name)
            elif kind == "none" and flow is not None and name not in read_by_attr:
                g = self._trace_graph(flow, name, v, entry, container_ok=name in exact)
                if g is not None:
                    self.call_traced[name] = g
                    out.append(name)
        return out

    def _callee_paths(self, c: ast.Call, entry) -> Dict[int, Tuple[str, ...]]:
        """Argument position -> the attributes of it that the called function's loop
        back-propagates (``FnFacts.containers``, ``#<i>.<attr>``), for a function of the
        file or a method of an object the trace typed."""
        func = c.func
        facts = None
        if isinstance(func, ast.Name):
            facts = self._fn_facts(func.id)
        elif isinstance(func, ast.Attribute):
            base = A.dotted(func.value)
            recv = entry.get(base) if base else None
            obj = recv.obj if recv is not None else None
            if obj is None and base and "." not in base:
                obj = interp.Resolver(self.ctx).global_obj(base)
            if obj:
                facts = interp.Resolver(self.ctx).method_facts(obj, func.attr)
        out: Dict[int, Tuple[str, ...]] = {}
        for eff in (facts.containers if facts is not None else ()):
            head, _, rest = eff.path[1:].partition(".")
            if eff.backprops and head.isdigit() and rest and "." not in rest:
                out[int(head)] = out.get(int(head), ()) + (rest,)
        return out

def _module_with_parameters(obj: str, resolver) -> bool:
    """Is ``obj`` (``inst:torch.nn.Linear``, ``user:Net``) a module with parameters: torch's
    not parameterless, or a module class of the user's (``resolver()`` asked only then)?"""
    if obj.startswith("inst:torch.nn."):
        return obj.rsplit(".", 1)[1] not in K.PARAMETERLESS_MODULES
    return obj.startswith("user:") and resolver().is_module_class(obj[5:])


def _made_holding_only(flow, v) -> bool:
    """Is every graph ``v`` holds one an object of the user's holds since its construction
    (``head = CLIPTextHead(clip, texts)``, whose ``__init__`` kept what the text tower it was
    handed computed: ``GraphFlow.made_holding``)? GG103 reports the loop's backward through it;
    GG102 would say the same of the same line."""
    toks = flow.carried_graphs(v)
    return bool(toks) and all(isinstance(t[1], ast.Call) and id(t[1]) in flow.made_holding for t in toks)


def _a_leaf(v) -> bool:
    """Does ``v`` hold a tensor that requires grad and no graph (a leaf)?"""
    return any(t[0] == "L" for t in v.taints) and not v.graph_tokens()


def _parameterless(v) -> bool:
    """Does ``v`` hold a torch module without parameters (``criterion = nn.L1Loss()``)?"""
    obj = (v.obj or "") if v is not None else ""
    return obj.startswith("inst:torch.nn.") and obj.rsplit(".", 1)[1] in K.PARAMETERLESS_MODULES


def _inside(node: object, region: ast.AST) -> bool:
    """Does ``node`` (a statement or expression) lie within ``region``'s text?"""
    if not isinstance(node, ast.AST) or not hasattr(node, "lineno"):
        return False
    start = (region.lineno, region.col_offset)  # type: ignore[attr-defined]
    end = (region.end_lineno, region.end_col_offset)  # type: ignore[attr-defined]
    return start <= (node.lineno, node.col_offset) and (node.end_lineno, node.end_col_offset) <= end  # type: ignore[attr-defined]


def _read_by_element(loop: ast.stmt, name: str) -> bool:
    """Does ``loop`` read ``name`` only one element at a time: ``name[k]``, or as what
    a ``for`` or a comprehension of its body iterates (``for j, peer in enumerate(name)``,
    ``zip(name, ...)``),
    or its size (``len(name)``)?"""
    element: Set[int] = set()
    reads: List[ast.Name] = []
    for node in A.block_nodes(loop.body):  # type: ignore[attr-defined]
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            element.add(id(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                and len(node.args) == 1 and not node.keywords:
            element.add(id(node.args[0]))  # range(len(outputs)): its size, no graph
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            it = node.iter
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "zip") \
                    and not it.keywords:
                element.update(id(a) for a in it.args if isinstance(a, ast.Name) and a.id == name)
            elif isinstance(it, ast.Name) and it.id == name:
                element.add(id(it))
        elif isinstance(node, ast.Name) and node.id == name:
            reads.append(node)
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        it = loop.iter
        for node in A.iter_nodes(it):
            if isinstance(node, ast.Name) and node.id == name:
                reads.append(node)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "zip") \
                and not it.keywords:
            element.update(id(a) for a in it.args if isinstance(a, ast.Name) and a.id == name)
        elif isinstance(it, ast.Name) and it.id == name:
            element.add(id(it))
    return bool(reads) and all(id(n) in element for n in reads)


def _own_elements_only(loop: ast.stmt, name: str, stmts: Tuple[ast.stmt, ...]) -> bool:
    """A list built before the loop (``outputs = [m(x) for m in models]``) that
    ``for i in range(n):`` reads only as ``outputs[i]``: each iteration reads another
    element, whose graph no earlier backward reached (deep mutual learning's peers,
    read by another index, are GG103's)."""
    if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and isinstance(loop.iter, ast.Call)
            and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "range" and not loop.orelse):
        return False
    made = stmts[0] if stmts else None
    if not (isinstance(made, ast.Assign) and len(made.targets) == 1 and isinstance(made.targets[0], ast.Name)
            and made.targets[0].id == name and isinstance(made.value, (ast.ListComp, ast.List))):
        return False
    i = loop.target.id
    own: Set[int] = set()
    reads: List[ast.Name] = []
    for node in A.iter_nodes(loop.body):
        if isinstance(node, ast.Name) and node.id == i and not isinstance(node.ctx, ast.Load):
            return False  # i rebound in the body
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name \
                and isinstance(node.slice, ast.Name) and node.slice.id == i:
            own.add(id(node.value))
        elif isinstance(node, ast.Name) and node.id == name:
            reads.append(node)
    return bool(own) and all(id(n) in own for n in reads)
