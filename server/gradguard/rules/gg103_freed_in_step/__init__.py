"""GG103 freed-in-step: a backward() runs through part of a graph that an
earlier backward() of the same step already freed.

The third shape of "Trying to backward through the graph a second time", the
one that needs no loop at all: two losses share a piece of graph (a GAN's
``fake = G(z)`` feeding both the discriminator's and the generator's loss, an
encoder output feeding two heads), the first ``backward()`` frees that piece's
saved tensors, and the second runs into them.

The analysis reuses the graph interpreter (``analysis/interpreter.py``): each
backward event carries the graph tokens its loss reaches. In one statement list
(a loop body, a function body, the module), a backward that runs
unconditionally frees the tokens it reaches; a later backward of the same list
(or of a block nested after it) whose loss reaches one of them — built in that
list before the first backward, by an operation that saves tensors — fails.
Graphs built before the list (before the loop) are GG102's; graphs carried from
one iteration to the next are GG101's.
"""

from __future__ import annotations

import ast
import re
from _thread import _local  # threading.local itself, without importing threading (start-up)

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.facts import ENCODE_AGAIN, GRAPH_FACTS, forwards_freeing_returned
from gradguard.analysis import values as V
from gradguard.analysis import steps as S
from gradguard.analysis.interpreter import returned_freers
from gradguard.analysis.context import unit_text, unit_words
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Fix, Range, Related, Severity, TextEdit
from gradguard.model.record import replace
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.common import framework_loop_of, unit_trace
from gradguard.rules.gg103_freed_in_step import messages as M

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

# backward( / manual_backward( / autograd.grad( — not zero_grad(
_BACKWARD_SPELLING = re.compile(r"backward\s*\(|(?<!\w)grad\s*\(")


class FreedInStep(Rule):
    code = "GG103"
    name = "freed-in-step"
    default_severity = Severity.ERROR
    needs_backprop = True
    names_lines = True  # "which `lossD.backward()` on line 33 already freed"
    fact_sources = (GRAPH_FACTS,)  # the interpreter reads fn:/class: facts of same-file definitions
    trigger = Trigger(not_other_framework=True)  # mxnet/paddle/...: not a torch program
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        text = unit_text(unit, ctx.index.lines)
        # a retained backward in a loop that steps an optimizer: one backward call in the
        # text runs once per iteration (_check_stepped_loops)
        retained_loop = "retain_graph" in text and ".step(" in text and _LOOP_WORD.search(text) is not None
        backwards = len(_BACKWARD_SPELLING.findall(text)) + _own_backward_calls(unit, ctx, text) \
            + _helper_backward_calls(unit, ctx, text)
        if backwards == 1 and query(ctx.summary, forwards_freeing_returned):
            backwards = 2  # a model of the file whose forward back-propagates the loss it returns
        if backwards == 1 and any(f".{m}(" in text for m in query(ctx.summary, returned_freers)):
            backwards = 2  # a method of the file that back-propagates the loss it returns (criterion.forward_reg)
        if backwards == 1 and framework_loop_of(unit, ctx) == "auto":
            backwards = 2  # Lightning's training_step: the framework back-propagates what it returns
        if backwards < 2 and \
                unit_words(unit, ctx.index.lines).isdisjoint(query(ctx.summary, _container_freers)) and \
                not _may_read_peers(text) and not retained_loop and not (backwards and _LOOP_WORD.search(text)):
            return ()  # one backward cannot free a graph for another (unless a helper called twice frees one,
            # or one backward in a loop frees every element of a list its next iteration reads, or a graph
            # built before the loop that the next iteration reads again)
        if unit.kind == "function" and A.is_no_grad_function(unit.node, ctx):
            return ()
        flow = unit_trace(unit, ctx)  # GG101's run of the unit, if it asked first
        if flow is None:
            return ()
        events: Dict[int, V.BackwardEvent] = {}
        for ev in flow.events:
            events.setdefault(id(ev.call), ev)  # a loop body is walked more than once: its first walk
        if len(events) < 2 and not any(ev.peers or ev.stale for ev in events.values()) and not (
                retained_loop and any(ev.retain for ev in events.values())) and not flow.shared_elems:
            return ()
        out: List[Finding] = []
        reported: Set[int] = set()
        _WALKS.memo = {}  # this unit's statements, each walked once (see _calls_in)
        try:
            out.extend(_check_peers(self, events, reported, ctx))
            # a helper's backward through a container kept outside it first: the block check
            # below would read it as a helper back-propagating its arguments
            out.extend(_check_stale(self, unit.body, events, reported, ctx, kept_only=True, flow=flow, unit=unit))
            saving = flow.saving_calls | flow.saving_helpers if flow.saving_helpers else flow.saving_calls
            for block in _blocks(unit.body):
                for f in _check_block(self, block, events, saving, reported, ctx, (flow, unit)):
                    out.append(f)
            for block in _blocks(unit.body):
                kept = (flow.modules_by_attr, _deep_modules(unit.class_node)) if flow.modules_by_attr else None
                for f in _check_stepped(self, block, events, flow.saving_calls, reported, ctx, flow.entry_graphs,
                                        kept, unit, flow.data_layers):
                    out.append(f)
            for f in _check_stale(self, unit.body, events, reported, ctx, flow=flow, unit=unit):
                out.append(f)
            out.extend(_check_stepped_loops(self, unit.body, events, flow, reported, ctx))
            if flow.shared_elems:
                out.extend(_check_shared_elements(self, unit.body, events, flow, reported, ctx))
            out.extend(_check_stepped_inside(self, events, reported, ctx))
        finally:
            _WALKS.memo = None
        return out


_FOR_WORD = re.compile(r"\bfor\b")
_LOOP_WORD = re.compile(r"\b(?:for|while)\b")


def _may_read_peers(text: str) -> bool:
    """Cheap pre-filter (text) for one backward in a loop over a list that another loop
    inside reads element by element (``for i ...: for j ...: outputs[j]``)."""
    return "backward" in text and "[" in text and len(_FOR_WORD.findall(text)) >= 2


def _check_peers(rule, events, reported, ctx) -> Iterator[Finding]:
    """Deep mutual learning (``BackwardEvent.peers``): each iteration of ``for i`` reads
    every element of a list built before the loop (``outputs[j]`` for each ``j``, beside
    ``outputs[i]``) into a loss it back-propagates without retain_graph: the first
    iteration frees every element's graph, the second runs into one of them."""
    for ev in sorted(events.values(), key=lambda e: _pos(e.call)):
        if ev.peers and id(ev.call) not in reported:
            reported.add(id(ev.call))
            yield _peer_finding(rule, ev, ctx)


def _peer_finding(rule, ev, ctx) -> Finding:
    reads: List[ast.AST] = []
    for read, _, _, _ in ev.peers:
        if read not in reads:
            reads.append(read)
    read, node, loop, container = ev.peers[0]
    b = ev.call
    own = f"{container}[{_loop_index_name(loop)}]"
    shown = ast.unparse(read)
    msg = M.peers(_short(b), loop.lineno, container, _short(node), node.lineno, shown, read.lineno, own)
    related = (
        Related(ctx.range(node), M.elements_built_here()),
        Related(ctx.range(read), M.every_element_read(container)),
    )
    edits = [_detach_edit(r, ctx) for r in reads]
    preferred = _steps_own_model(loop, b)
    fix = Fix(M.fix_detach_peers(shown, preferred),
              tuple(edits), preferred=preferred)
    return Finding(rule.code, ctx.range(b), msg, rule.default_severity, related, (fix,),
                   {"variable": container, "first_backward_line": b.lineno})


def _check_shared_elements(rule, body, events, flow, reported, ctx) -> Iterator[Finding]:
    """``for step in range(len(losses)): losses[step].backward()`` (or ``for l in losses:
    l.backward()``), no graph kept, where every element of ``losses`` holds part of one
    graph built before the loop by a call whose summary says its list's elements share it
    (``RetPos.elems_share``, ``GraphFlow.shared_elems``): SRFBN's feedback steps, each
    step's loss back-propagated on its own."""
    loops = [s for s in A.iter_statements(body) if isinstance(s, ast.For)]
    for ev in sorted(events.values(), key=lambda e: _pos(e.call)):
        b = ev.call
        if id(b) in reported or ev.retain or not isinstance(b, ast.Call) or A.has_retain_graph(b) \
                or _legacy_retain(b) or not isinstance(b.func, ast.Attribute) or b.func.attr != "backward":
            continue
        loop = next((s for s in reversed(loops) if A.within(b, s)), None)
        if loop is None or not isinstance(loop.target, ast.Name):
            continue
        container = _per_element(b.func.value, loop)
        if container is None or any(isinstance(n, ast.Name) and n.id == container and isinstance(n.ctx, ast.Store)
                                    for n in A.iter_nodes(loop.body)):
            continue
        shared = [t[1] for t in ev.loss.taints if t[0] == "G" and id(t[1]) in flow.shared_elems
                  and id(t[1]) in flow.saving_calls and not A.within(t[1], loop)]
        if not shared:
            continue
        node = min(shared, key=_pos)
        reported.add(id(b))
        msg = M.shared_elements(_short(b), loop.lineno, container, _short(node), node.lineno)
        related = (Related(ctx.range(node), M.shared_graph_built_here()),)
        edit = _retain_edit(b, ctx)
        fixes = (Fix(M.fix_retain_each_element(), (edit,), preferred=True),) if edit is not None else ()
        yield Finding(rule.code, ctx.range(b), msg, rule.default_severity, related, fixes,
                      {"variable": container, "first_backward_line": b.lineno})


def _per_element(recv: ast.AST, loop: ast.For) -> Optional[str]:
    """The list a loop back-propagates element by element: ``losses`` of ``losses[i]`` in
    ``for i in range(len(losses))``, or of ``l`` in ``for l in losses``."""
    i = loop.target.id  # type: ignore[attr-defined]
    it = loop.iter
    if isinstance(recv, ast.Name) and recv.id == i and isinstance(it, ast.Name):
        return it.id
    if isinstance(recv, ast.Subscript) and isinstance(recv.value, ast.Name) and isinstance(recv.slice, ast.Name) \
            and recv.slice.id == i and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
            and it.func.id == "range" and len(it.args) == 1 and isinstance(it.args[0], ast.Call) \
            and isinstance(it.args[0].func, ast.Name) and it.args[0].func.id == "len" and len(it.args[0].args) == 1 \
            and isinstance(it.args[0].args[0], ast.Name) and it.args[0].args[0].id == recv.value.id:
        return recv.value.id
    return None


def _loop_index_name(loop: ast.For) -> Optional[str]:
    """``i`` of ``for i in range(n)`` or of ``for i, out in enumerate(outputs)``."""
    t = loop.target
    if isinstance(t, ast.Tuple) and t.elts:
        t = t.elts[0]
    return t.id if isinstance(t, ast.Name) else None


def _steps_own_model(loop: ast.For, b: ast.Call) -> bool:
    """Does each iteration zero, before the backward, and step, after it, the optimizer
    of its own index (``optimizers[i].zero_grad()`` ... ``optimizers[i].step()``)? Then
    what the loss sends into the other elements' models is zeroed before any step uses
    it, and detaching them changes no update."""
    i = _loop_index_name(loop)
    stmts = A.with_bodies_inline(loop.body)
    at = next((k for k, s in enumerate(stmts) if A.within(b, s)), None)
    if i is None or at is None:
        return False

    def owner(s: ast.stmt, method: str) -> Optional[str]:
        c = s.value if isinstance(s, ast.Expr) else None
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == method \
                and isinstance(c.func.value, ast.Subscript) and isinstance(c.func.value.slice, ast.Name) \
                and c.func.value.slice.id == i:
            return ast.dump(c.func.value.value)
        return None

    zeroed = {owner(s, "zero_grad") for s in stmts[:at]} - {None}
    stepped = {owner(s, "step") for s in stmts[at + 1:]} - {None}
    return bool(zeroed & stepped)


def _container_freers(summary) -> FrozenSet[str]:
    """Same-file functions that surely back-propagate what a container kept outside
    them holds (``finish_episode()``): called twice, one call is the second backward.
    A summary query."""
    return frozenset(k[3:].rpartition(".")[2] for k, v in summary.items()
                     if k.startswith("fn:") and isinstance(v, V.FnFacts) and any(e.frees for e in v.containers))


def _own_backward_calls(unit, ctx, text: str) -> int:
    """How many times a method calls, on ``self``, its class's methods that
    back-propagate (``self.backward_D()``): the interpreter runs them in place."""
    if unit.class_node is None or "self." not in text:
        return 0
    cf = ctx.summary.get("class:" + unit.class_node.name)
    if not isinstance(cf, V.ClassFacts):
        return 0
    defs = {s.name: s for s in unit.class_node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    lines = ctx.index.lines
    n = 0
    for name, facts in cf.methods:
        if not facts.calls_backward:
            continue
        calls = len(re.findall(r"\bself\s*\.\s*" + re.escape(name) + r"\s*\(", text))
        fn = defs.get(name) if calls else None
        if fn is not None and fn.body and fn.body[0].lineno > fn.lineno:
            # a method that back-propagates twice (``loss.backward()`` then its adversarial
            # loop's): one call may run into what its first backward freed
            inner = "\n".join(lines[fn.body[0].lineno - 1:fn.end_lineno])
            calls *= max(1, min(2, len(_BACKWARD_SPELLING.findall(inner))))
        n += calls
    return n


def _backward_helpers(summary) -> FrozenSet[str]:
    """Module-level functions of the file that back-propagate (``update_params(optim,
    network, loss)``): a call of one is a backward. A summary query."""
    return frozenset(k[3:] for k, v in summary.items()
                     if k.startswith("fn:") and "." not in k and isinstance(v, V.FnFacts) and v.calls_backward)


def _helper_backward_calls(unit, ctx, text: str) -> int:
    """How many calls of the file's back-propagating module-level functions the unit makes."""
    names = query(ctx.summary, _backward_helpers)
    if not names:
        return 0
    words = unit_words(unit, ctx.index.lines)
    return sum(len(re.findall(r"(?<![\w.])" + re.escape(n) + r"\s*\(", text)) for n in names if n in words)


# ---------------------------------------------------------------------------
def _blocks(body: Sequence[ast.stmt]) -> Iterator[Sequence[ast.stmt]]:
    """Every statement list of the unit (nested defs and classes are units of their own)."""
    yield body
    for s in A.iter_statements(body):
        for block in A.child_blocks(s):
            yield block


# Runs of one statement list. The fixes and proofs below read the statements
# between two points of a list again and again: after the first backward and
# before the statement of the second, from the statement that binds a value to
# the first backward, everything before the second backward. One walk, _span,
# reads them all; where each reader starts and stops is a parameter, written
# where it is called. (A fix that gives up where a run holds a nested def,
# class or lambda asks _opens_scope: that is the fix's condition, not the run's
# end.)


def _index_holding(stmts: Sequence[ast.stmt], node: ast.AST, lo: int = 0) -> Optional[int]:
    """The index, from ``lo`` on, of the statement of ``stmts`` that is or holds
    ``node`` (by identity, nested blocks and defs included), or None. A statement
    of the list is found by identity alone: two statements of one list (``with``
    bodies inlined) never hold one another."""
    memo = getattr(_WALKS, "memo", None)
    if memo is not None:  # within a check(): the list's index, made once (see _holding_index)
        own, held = _holding_index(stmts, memo)
        if isinstance(node, ast.stmt):
            k = _first_from(own, id(node), lo)
            if k is not None:
                return k
        return _first_from(held, id(node), lo)
    if isinstance(node, ast.stmt):
        for k in range(lo, len(stmts)):
            if stmts[k] is node:
                return k
    for k in range(lo, len(stmts)):
        if any(n is node for n in A.walk_all(stmts[k])):
            return k
    return None


def _holding_index(stmts: Sequence[ast.stmt], memo: dict) -> Tuple[dict, dict]:
    """For :func:`_index_holding` within one check(): the indexes of ``stmts`` that
    are (``own``) and that hold (``held``) each node, by the node's id, in order;
    made by one walk of the list instead of one walk per question (GG103 asks where
    each graph token of a loss sits, in lists as long as a module). The list itself
    is kept with its index (its id stays its own while the memo lives) and the
    length it had then (no check changes a tree; a list of another length is indexed
    again)."""
    got = memo.get(("holding", id(stmts)))
    if got is not None and got[0] is stmts and got[1] == len(stmts):
        return got[2]
    own: Dict[int, list] = {}
    held: Dict[int, list] = {}
    for k, s in enumerate(stmts):
        own.setdefault(id(s), []).append(k)
        for n in A.walk_all(s):
            held.setdefault(id(n), []).append(k)
    memo[("holding", id(stmts))] = (stmts, len(stmts), (own, held))
    return own, held


def _inline(block: Sequence[ast.stmt]) -> List[ast.stmt]:
    """``A.with_bodies_inline(block)``, within one check() the same list for the same
    block (so that :func:`_index_holding` indexes it once). Read only."""
    memo = getattr(_WALKS, "memo", None)
    if memo is None:
        return A.with_bodies_inline(block)
    got = memo.get(("inline", id(block)))
    if got is None or got[0] is not block:
        got = memo[("inline", id(block))] = (block, A.with_bodies_inline(block))
    return got[1]


def _first_from(index: dict, key: int, lo: int) -> Optional[int]:
    for k in index.get(key, ()):
        if k >= lo:
            return k
    return None


def _span(stmts: Sequence[ast.stmt], start: Optional[ast.stmt], stop: Optional[ast.AST], *,
          with_start: bool = False, with_stop: bool = False) -> range:
    """The indexes of a run of ``stmts``: from the statement after ``start`` (``start``
    itself too with ``with_start``; the first statement when ``start`` is None; an
    empty run when ``start`` is not a statement of the list) up to the first
    statement of the run that is or holds ``stop`` (a node such as the second
    backward call, or a statement of the list), that statement excluded unless
    ``with_stop``; to the end of the list when none holds it."""
    lo = 0
    if start is not None:
        k = next((k for k, s in enumerate(stmts) if s is start), None)
        if k is None:
            return range(0)
        lo = k if with_start else k + 1
    hi = len(stmts)
    if stop is not None:
        k = _index_holding(stmts, stop, lo)
        if k is not None:
            hi = k + 1 if with_stop else k
    return range(lo, hi)


def _stretch(stmts: Sequence[ast.stmt], start: Optional[ast.stmt], stop: Optional[ast.AST], *,
             with_start: bool = False, with_stop: bool = False) -> Sequence[ast.stmt]:
    """The statements of :func:`_span`'s run."""
    run = _span(stmts, start, stop, with_start=with_start, with_stop=with_stop)
    return stmts[run.start:run.stop]


def _opens_scope(s: ast.stmt) -> bool:
    """Does ``s`` hold a nested def, class or lambda? A use of a name in there is
    not the statement's to rewrite."""
    return any(isinstance(n, _NESTED) for n in A.walk_all(s))


def _direct_backward(stmt: ast.stmt, ctx, events) -> Optional[ast.Call]:
    """``loss.backward(...)`` / ``grads = torch.autograd.grad(...)`` / ``d_loss =
    train_discriminator(real, fake)`` (a helper of the user's that back-propagates)
    as the statement itself."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call) and id(value.value) in events:
        value = value.value  # loss = model(x, y)[0] of a forward that back-propagates what it returns
    if isinstance(value, ast.Call) and (A.is_backward_call(value, ctx) or id(value) in events):
        return value
    return None


def _backward_calls(stmt: ast.stmt, ctx, events) -> List[ast.Call]:
    """Backward calls (and calls of helpers that back-propagate) anywhere in a
    statement, nested blocks included, nested defs not; in source order."""
    def backward(node: ast.AST) -> Optional[ast.Call]:
        if isinstance(node, ast.Call) and (A.is_backward_call(node, ctx) or id(node) in events):
            return node
        return None

    return _calls_in(stmt, "backward", backward, True)


def _unreported(stmt: ast.stmt, ctx, events, reported) -> Iterator[Tuple[ast.Call, V.BackwardEvent]]:
    """(call, its backward event) for each backward call of ``stmt`` (:func:`_backward_calls`)
    the interpreter saw and no finding reports yet (asked as each is reached: a
    finding on one is reported before the next is looked at)."""
    for b2 in _backward_calls(stmt, ctx, events):
        if id(b2) in reported:
            continue
        ev2 = events.get(id(b2))
        if ev2 is not None:
            yield b2, ev2


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

# Within one check(): what _calls_in found in each statement, by (kind, id). Every
# statement list of the unit is examined (_blocks), each statement with everything
# nested in it: without this a statement was walked once per enclosing block.
_WALKS = _local()


def _calls_in(stmt: ast.stmt, kind: str, match: Callable, source_order: bool) -> list:
    """``match(node)`` for every node of ``stmt`` (nested blocks included, nested
    defs not) where it is not None: depth first, children in source order or
    (``source_order=False``) last child first. During a check() each statement's
    answer is remembered, and a statement inside another reuses it (a depth-first
    walk visits a subtree's nodes in one stretch, so the order is the same)."""
    memo = getattr(_WALKS, "memo", None)
    if memo is not None:
        got = memo.get((kind, id(stmt)))
        if got is not None:
            return got
    nodes = A.stmt_nodes(stmt)  # the statement's stretch of its def's one walk, if there is one
    if nodes is not None:
        found = [m for m in map(match, nodes) if m is not None]  # (source order, depth first)
        if not source_order and len(found) > 1:
            # last child first: of two nodes neither inside the other, the later comes first
            found = found[::-1] if not _nested(found) else _calls_walked(stmt, match, memo, kind, source_order)
        if memo is not None:
            memo[(kind, id(stmt))] = found
        return found
    return _calls_walked(stmt, match, memo, kind, source_order)


def _calls_walked(stmt: ast.stmt, match: Callable, memo, kind: str, source_order: bool) -> list:
    out: list = []
    stack: List[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if memo is not None and node is not stmt and isinstance(node, ast.stmt):
            out.extend(_calls_in(node, kind, match, source_order))
            continue
        m = match(node)
        if m is not None:
            out.append(m)
        children = A.child_nodes(node)
        if source_order:
            children.reverse()
        stack.extend(children)
    if memo is not None:
        memo[(kind, id(stmt))] = out
    return out


def _pos(node: ast.AST) -> Tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _legacy_retain(call: ast.Call) -> bool:
    """``retain_variables=True``: retain_graph's name before PyTorch 0.4 (tutorials still show it)."""
    return any(kw.arg == "retain_variables" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
               for kw in call.keywords)


def _check_block(rule, block, events, saving, reported, ctx, where=None) -> Iterator[Finding]:
    stmts = _inline(block)
    start = _pos(block[0])
    for i, s in enumerate(stmts):
        b1 = _direct_backward(s, ctx, events)
        if b1 is None or A.has_retain_graph(b1) or _legacy_retain(b1):  # (create_graph= counts there too)
            continue
        ev1 = events.get(id(b1))
        if ev1 is None or ev1.retain:  # a helper that keeps its graph
            continue
        end = _pos(s)
        # what this backward frees: saving parts of the graph built in this list, before it
        frees = ev1.loss.graph_tokens() if ev1.sure is None else ev1.sure  # an own method run in place: what it surely frees
        # (or by the call itself: a module whose forward back-propagates the loss it returns)
        # (a method's call whose returned graph went through modules of its object saved their weights:
        # edge_model.process(...) handing back the edge generator's output, GraphFlow.saved_weights)
        flow0 = where[0] if where is not None else None
        weights = flow0.saved_weights if flow0 is not None else ()
        # (the call itself, or its name: the positions of its result it freed, FnFacts.frees_positions)
        freed = {t for t in frees if start <= _pos(t[1]) and (_pos(t[1]) < end or (
                     (t[1] is b1 or t[1] is getattr(b1, "func", None)) and ev1.sure is None))
                 and (id(t[1]) in saving or id(t[1]) in weights)}
        if not freed:
            continue
        for later in stmts[i + 1:]:
            for b2, ev2 in _unreported(later, ctx, events, reported):
                shared = freed & ev2.loss.graph_tokens()
                if shared and flow0 is not None:
                    shared = {t for t in shared if id(t[1]) in saving
                              or _module_shared(t[1], stmts, b1, b2, flow0.returned_modules)}
                if shared:
                    shared = {t for t in shared if not _separate_positions(t[1], stmts, b1, b2, where, ctx)
                              and not _separate_keys(t[1], stmts, b1, b2, ctx)}
                if shared:
                    reported.add(id(b2))
                    yield _finding(rule, stmts, s, b1, b2, shared, ctx, where)


def _module_shared(node: ast.AST, stmts, b1, b2, returned_modules) -> bool:
    """A method's call whose returned positions saved the weights of modules of its object
    (``GraphFlow.returned_modules``): do the positions the two losses read hold a module in
    common (``e_outputs`` and ``e_gen_loss`` of edge-connect's ``process()`` both through its
    generator, not ``q1`` and ``q2`` of two critics)?"""
    mods = returned_modules.get(id(node))
    if not mods:
        return False
    if len(mods) == 1:
        return bool(mods[0])
    read = _positions_read(stmts, node, b1, b2, len(mods))
    if read is None:
        return False
    first, second = read
    a: Set[str] = set().union(*(mods[p] for p in first))
    return not a.isdisjoint(set().union(*(mods[p] for p in second)))


def _returned_sites(call: ast.AST, unit, ctx):
    """``FnFacts.returns_sites`` of what a call runs: a same-file function or own method,
    or the ``forward`` of the user module it calls (``actor_critic(obs, acts)``, with
    ``actor_critic = ActorCritic()`` in the file). () when unknown."""
    if not isinstance(call, ast.Call):
        return ()
    facts = _helper_facts(call, unit, ctx)
    if facts is None:
        name = A.dotted(call.func)
        if name is None:
            return ()
        if name.endswith(".forward"):
            name = name[:-8]
        for made in _instances(name, ctx):
            cls = (A.dotted(made.func) or "").rsplit(".", 1)[-1] if isinstance(made, ast.Call) else ""
            cf = ctx.summary.get("class:" + cls) if cls else None
            got = _called_method(cf) if isinstance(cf, V.ClassFacts) else None
            if got is None or (facts is not None and got.returns_sites != facts.returns_sites):
                return ()  # not one class's module, or two of them
            facts = got
    return facts.returns_sites if facts is not None else ()


def _instances(name: str, ctx, depth: int = 2) -> List[Optional[ast.expr]]:
    """The expressions each assignment to ``name`` makes it from (``actor = DiMPActor(net)``),
    through a name it is handed (``self.actor = actor`` in a trainer's ``__init__``, then
    the module-level ``actor``), ``depth`` deep; None for one that cannot be read."""
    out: List[Optional[ast.expr]] = []
    for value in _constructions(name, ctx.index.lines):
        try:
            made: Optional[ast.expr] = ast.parse(value, mode="eval").body
        except SyntaxError:
            made = None
        alias = A.dotted(made) if isinstance(made, (ast.Name, ast.Attribute)) else None
        if alias and alias != name and depth > 0:
            out.extend(_instances(alias, ctx, depth - 1) or [None])
        else:
            out.append(made)
    return out


def _called_method(cf: V.ClassFacts) -> Optional[V.FnFacts]:
    """What a call of an instance runs: its ``forward`` (a module), else the ``__call__``
    of a plain class (a tracker's ``actor(data)`` returning the tracking loss and the
    discriminator's). None when the class defines neither (or both: which one a call
    runs depends on a base we do not see)."""
    got = [m for n, m in cf.methods if n in ("forward", "__call__")]
    return got[0] if len(got) == 1 else None


def _positions(holder: Optional[ast.stmt], call: ast.AST, names: Set[str], arity: int) -> Optional[Set[int]]:
    """The positions of ``a, b, c = call(...)`` (the holder) whose names are in ``names``;
    None when the holder does not unpack the call's result into plain names."""
    if not (isinstance(holder, ast.Assign) and holder.value is call and len(holder.targets) == 1
            and isinstance(holder.targets[0], (ast.Tuple, ast.List))):
        return None
    elts = holder.targets[0].elts
    if len(elts) != arity or not all(isinstance(e, ast.Name) for e in elts):
        return None
    return {p for p, e in enumerate(elts) if e.id in names}  # type: ignore[attr-defined]


def _other_positions_stepped(node: ast.AST, stmts, b2, opt: str, unit, ctx) -> bool:
    """Does the step train only sub-modules of the called module (``Adam(actor_critic.
    policy.parameters())``) that the positions of its result the second loss reads were
    not built through (``q = self.q(cat(x, a))`` in ``ActorCritic.forward``)? Read off
    ``FnFacts.returns_sites``: every call there building those positions is torch's or
    a module of ``self``; any other keeps the answer no."""
    sites = _returned_sites(node, unit, ctx)
    k = _index_holding(stmts, node) if sites else None
    if k is None:
        return False
    read = _positions(stmts[k], node, _inputs_of(stmts, b2), len(sites))
    if not read:
        return False
    base = A.dotted(node.func) or ""  # type: ignore[attr-defined]
    base = base[:-8] if base.endswith(".forward") else base
    base = base[5:] if base.startswith("self.") else base
    reached: Set[str] = set()
    for p in read:
        for _, _, callee in sites[p]:
            head = callee.split(".", 1)[0]
            if callee.startswith("self.") and callee.count(".") >= 1:
                reached.add(base + "." + callee.split(".")[1])
            elif callee and head != "torch" and not (ctx.imports.get(head) or "").startswith("torch"):
                return False  # a call we cannot place (a helper, a layer from a loop)
    paths = _owner_paths(opt, ctx)
    if not paths or not base or not all(p.startswith(base + ".") for p in paths):
        return False
    return not any(p == r or r.startswith(p + ".") or p.startswith(r + ".") for p in paths for r in reached)


def _object_stepped(node: ast.AST, stmts, b2, opt: str, events, ev2, unit, ctx) -> Optional[str]:
    """Did the positions of an object's call (``loss, loss_D, stats = actor(data)``, with
    ``actor = DiMPActor(net)`` and ``self.net = net`` in its ``__init__``) that the second
    loss reads go through a module the object was handed, of which the step trains all
    or a part (``Adam(net.feat_D2.parameters())``, ``feat_D2`` called by ``net``'s
    ``forward``)? Read off ``FnFacts.returns_sites`` of the class's ``__call__`` /
    ``forward``, its ``__init__``'s parameters and the construction's arguments. A part
    counts unless a backward keeping no graph already ran through the same positions
    (then the program went on, and that part was not on their graph). The module the
    step trains (``net.feat_D2``), or None."""
    sites = _returned_sites(node, unit, ctx)
    k = _index_holding(stmts, node) if sites else None
    if k is None or _helper_facts(node, unit, ctx) is not None:
        return None
    read = _positions(stmts[k], node, _inputs_of(stmts, b2), len(sites))
    paths = _owner_paths(opt, ctx) if read else None
    name = A.dotted(node.func) if read and paths else None  # type: ignore[attr-defined]
    made = _instances(name, ctx) if name else []
    if len(made) != 1:
        return None
    ctor = made[0]
    cf = ctx.summary.get("class:" + (A.dotted(ctor.func) or "").rsplit(".", 1)[-1]) \
        if isinstance(ctor, ast.Call) else None
    init = next((m for n, m in cf.methods if n == "__init__"), None) if isinstance(cf, V.ClassFacts) else None
    if init is None:
        return None
    kw = {x.arg: x.value for x in ctor.keywords if x.arg}  # type: ignore[union-attr]
    reached: Set[str] = set()
    for p in read:  # type: ignore[union-attr]
        for line, _, callee in sites[p]:
            bits = callee.split(".")
            if not line or len(bits) < 2 or bits[0] != "self":  # (line 0: an attribute read, not a call)
                continue
            held = _constructions("self." + bits[1], ctx.index.lines)
            if len(held) != 1 or held[0] not in init.params:
                continue  # not (only) what __init__ was handed
            arg = init.argument(init.params.index(held[0]), ctor.args, kw)  # type: ignore[union-attr]
            got = A.dotted(arg) if isinstance(arg, ast.AST) else None
            if got:
                rest = [b for b in bits[2:] if b != "forward"]
                reached.add(".".join([got[5:] if got.startswith("self.") else got] + rest))
    for r in sorted(reached):
        for path in sorted(paths):  # type: ignore[arg-type]
            if path == r or r.startswith(path + "."):
                return path
            if path.startswith(r + ".") and _calls_part(r, path[len(r) + 1:].split(".")[0], ctx) \
                    and not _positions_through(node, k, read, sites, b2, ev2, events, stmts, unit, ctx):
                return path
    return None


def _held_stepped(node, stmts, b2, opt, events, ev2, unit, ctx, held: Dict[int, str]) -> bool:
    """:func:`_object_stepped`, the module kept in ``held`` by the call's id (the message names it)."""
    got = _object_stepped(node, stmts, b2, opt, events, ev2, unit, ctx)
    if got is not None:
        held[id(node)] = got
    return got is not None


def _calls_part(module: str, part: str, ctx) -> bool:
    """Does ``module`` (made once in the file by a class of it) call its ``self.<part>``
    in its ``forward``, on the way to something it returns?"""
    made = _constructions(module, ctx.index.lines)
    if len(made) != 1:
        return False
    try:
        ctor = ast.parse(made[0], mode="eval").body
    except SyntaxError:
        return False
    cf = ctx.summary.get("class:" + (A.dotted(ctor.func) or "").rsplit(".", 1)[-1]) \
        if isinstance(ctor, ast.Call) else None
    fwd = next((m for n, m in cf.methods if n == "forward"), None) if isinstance(cf, V.ClassFacts) else None
    if fwd is None:
        return False
    own = "self." + part
    if fwd.returns_sites:
        return any(c == own or c.startswith(own + ".") for pos in fwd.returns_sites for _, _, c in pos)
    return part in fwd.ret.modules


def _positions_through(node, k, read, sites, b2, ev2, events, stmts, unit, ctx) -> bool:
    """:func:`_already_through` for the positions ``read`` of the call's result: a backward
    keeping no graph, after the call and before ``b2``, whose loss read a position sharing
    a site with them."""
    lo = _pos(stmts[k])
    mine = set().union(*(sites[p] for p in read))
    for ev in events.values():
        if ev is ev2 or not (lo < _pos(ev.call) < _pos(b2)) or ev.retain and _retained_by_call(ev.call, unit, ctx):
            continue
        if not any(t[1] is node for t in ev.loss.graph_tokens()):
            continue
        theirs = _positions(stmts[k], node, _inputs_of(stmts, ev.call), len(sites))
        if theirs is None or any(mine.intersection(sites[p]) for p in theirs):
            return True
    return False


def _separate_in_body(body, node, b1, b2, unit, ctx) -> bool:
    """:func:`_separate_positions` in the statement list of ``body`` holding the call,
    the first backward and the second."""
    if not isinstance(node, ast.Call) or not isinstance(b1, ast.Call):
        return False
    inner = None
    for block in _blocks(body):  # the innermost list holding all three
        stmts = _inline(block)
        if all(_index_holding(stmts, n) is not None for n in (node, b1, b2)):
            inner = stmts
    return inner is not None and (_separate_positions(node, inner, b1, b2, (None, unit), ctx)
                                  or _separate_keys(node, inner, b1, b2, ctx))


def _positions_read(stmts, node: ast.AST, b1, b2, n: int):
    """The positions of one call's ``n``-element result (the statement of ``stmts``
    holding ``node``) that the first and the second loss read, or None where that
    statement is not found or either loss reads none of them."""
    k = _index_holding(stmts, node)
    if k is None:
        return None
    first = _positions(stmts[k], node, _inputs_of(stmts, b1), n)
    second = _positions(stmts[k], node, _inputs_of(stmts, b2), n)
    if not first or not second:
        return None
    return first, second


def _separate_positions(node: ast.AST, stmts, b1, b2, where, ctx) -> bool:
    """Do the two losses read positions of one call's result (``_, q, q_pi =
    actor_critic(obs, acts)``: ``pi_loss`` from ``q_pi``, ``q_loss`` from ``q``) whose
    graphs, built inside it, share nothing (``FnFacts.returns_sites``)? Then the first
    backward frees nothing the second needs."""
    unit = where[1] if where else None
    sites = _returned_sites(node, unit, ctx)
    read = _positions_read(stmts, node, b1, b2, len(sites)) if sites else None
    if read is None:
        return False
    first, second = read
    a = set().union(*(sites[p] for p in first))
    b = set().union(*(sites[p] for p in second))
    return not a & b  # (a position with no site holds nothing built in the call: a detached output)


def _separate_keys(node: ast.AST, stmts, b1, b2, ctx) -> bool:
    """``losses, out = trainer(x, ...)`` whose module's ``forward`` fills a dict by constant
    keys (``losses = {}``, ``losses["wgan_d"] = ...`` from ``x2.detach()``, ``losses["wgan_g"]
    = ...`` from ``x2``) and returns it, the two losses reading keys of it (``losses["g"] =
    losses["l1"] + losses["wgan_g"]``, ``losses["d"] = losses["wgan_d"]``) built inside from
    no operation in common, and no step between the two backward calls training a module
    the second loss's keys were computed with: the first backward frees nothing the second
    needs (generative-inpainting's trainer, G updated first). False when any of it cannot
    be read."""
    if not isinstance(node, ast.Call):
        return False
    k = _index_holding(stmts, node)
    if k is None:
        return False
    holder = stmts[k]
    if not (isinstance(holder, ast.Assign) and holder.value is node and len(holder.targets) == 1):
        return False
    target = holder.targets[0]
    elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
    if not all(isinstance(e, ast.Name) for e in elts):
        return False
    j1, j2 = _index_holding(stmts, b1), _index_holding(stmts, b2)
    if j1 is None or j2 is None:
        return False
    for p, e in enumerate(elts):
        name = e.id  # type: ignore[attr-defined]
        keys1 = _dict_keys_read(stmts, k, j1, b1, name, ctx)
        keys2 = _dict_keys_read(stmts, k, j2, b2, name, ctx)
        if keys1 is None or keys2 is None:
            return False
        if not keys1 and not keys2:
            continue  # another position
        if not keys1 or not keys2 or keys1 & keys2:
            return False
        got = _forward_dict_sites(node, p if len(elts) > 1 else None, ctx)
        if got is None:
            return False
        sites, modules = got
        if any(key not in sites for key in keys1 | keys2):
            return False
        a = set().union(*(sites[key] for key in keys1))
        b = set().union(*(sites[key] for key in keys2))
        if a & b:
            return False
        reached = set().union(*(modules[key] for key in keys2))
        for s in stmts[j1:j2 + 1]:
            for call, opt in _step_calls(s):
                if not _pos(b1) < _pos(call) < _pos(b2):
                    continue
                paths = _owner_paths(opt, ctx)
                if paths is None and "." in opt:
                    paths = _owner_paths("self." + opt.split(".", 1)[1], ctx)  # trainer.optimizer_g
                if paths is None or {p_.split(".")[0] for p_ in paths} & reached:
                    return False
        return True
    return False


def _dict_keys_read(stmts, k: int, j: int, b, name: str, ctx) -> Optional[Set[str]]:
    """The constant keys of the dict ``name`` (bound by statement ``k``) the loss of the
    backward ``b`` (in statement ``j``) reads, through the statements between that assign
    names or keys of it (``losses["g"] = losses["l1"] * 1.2``); None when it reads the
    dict otherwise (``sum(losses.values())``)."""
    tgt = A.backward_target(b, ctx) if isinstance(b, ast.Call) else None
    if tgt is None:
        return None
    between = stmts[k + 1:j]
    out: Set[str] = set()
    todo: List[Tuple[ast.AST, int]] = [(tgt, len(between))]
    seen: Set[Tuple[str, int]] = set()
    while todo:
        e, upto = todo.pop()
        for n in A.walk_all(e):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name:
                sl = n.slice
                if not (isinstance(sl, ast.Constant) and isinstance(sl.value, str)):
                    return None
                got = _last_binding(between[:upto], lambda t, key=sl.value: isinstance(t, ast.Subscript) and isinstance(
                    t.value, ast.Name) and t.value.id == name and isinstance(t.slice, ast.Constant)
                    and t.slice.value == key)
                if got is None:
                    out.add(sl.value)
                elif (sl.value, got[0]) not in seen:
                    seen.add((sl.value, got[0]))
                    todo.append((got[1], got[0]))
            elif isinstance(n, ast.Name) and n.id == name:
                if not any(n is sub.value for sub in A.walk_all(e) if isinstance(sub, ast.Subscript)):
                    return None  # the dict itself: every key
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                got = _last_binding(between[:upto], lambda t, i=n.id: isinstance(t, ast.Name) and t.id == i)
                if got is not None and (n.id, got[0]) not in seen:
                    seen.add((n.id, got[0]))
                    todo.append((got[1], got[0]))
    return out


def _last_binding(stmts, is_target) -> Optional[Tuple[int, ast.AST]]:
    """(index, value) of the last plain assignment of ``stmts`` one of whose targets
    ``is_target`` accepts; a binding in any other statement: (index, the statement)."""
    for i in range(len(stmts) - 1, -1, -1):
        s = stmts[i]
        if isinstance(s, ast.Assign) and any(is_target(t) for t in s.targets):
            return i, s.value
        if not isinstance(s, ast.Assign) and any(is_target(t) for t in A.walk_all(s)
                                                 if isinstance(getattr(t, "ctx", None), (ast.Store, ast.Del))):
            return i, s
    return None


# The file's text parsed again, for the last file asked about (by the identity of its
# lines, as _constructions): a module whose losses share a forward's dict asks once per pair.
_TREE_MEMO = _local()


def _file_tree(lines) -> Optional[ast.Module]:
    """The tree of ``lines`` (a fresh parse of the file, read only), or None where it does not parse."""
    memo = getattr(_TREE_MEMO, "memo", None)
    if memo is None or memo[0] is not lines:
        try:
            tree: Optional[ast.Module] = ast.parse("\n".join(lines))
        except SyntaxError:
            tree = None
        memo = _TREE_MEMO.memo = (lines, tree)
    return memo[1]


def _forward_dict_sites(node: ast.Call, p: Optional[int], ctx):
    """For the module call ``node`` (an instance of a class of the file whose ``forward``
    returns, at position ``p``, a dict it makes empty and fills by constant keys): per key,
    the operations inside that build its value (followed through the names it reads, in
    order, ``x.detach()`` cutting) and the attributes of ``self`` they call or hand on
    (``self.localD``). None when the forward is written otherwise."""
    name = A.dotted(node.func)
    if name is None:
        return None
    classes = set()
    for made in _instances(name, ctx):
        if not isinstance(made, ast.Call):
            return None
        classes.add((A.dotted(made.func) or "").rsplit(".", 1)[-1])
    if len(classes) != 1:
        return None
    cls_name = classes.pop()
    if not isinstance(ctx.summary.get("class:" + cls_name), V.ClassFacts):
        return None
    tree = _file_tree(ctx.index.lines)
    if tree is None:
        return None
    cls = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == cls_name), None)
    fwd = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "forward"), None) if cls else None
    if fwd is None:
        return None
    rets = [n for n in ast.walk(fwd) if isinstance(n, ast.Return)]
    if not rets:
        return None
    holder = None
    for r in rets:
        v = r.value
        e = v if p is None else (v.elts[p] if isinstance(v, ast.Tuple) and p < len(v.elts) else None)
        if not isinstance(e, ast.Name) or (holder is not None and e.id != holder):
            return None
        holder = e.id
    sites: Dict[str, Set] = {}
    modules: Dict[str, Set[str]] = {}
    env: Dict[str, Tuple[frozenset, frozenset]] = {}
    made_it = [False]

    def read(e: ast.AST) -> Tuple[Set, Set[str]]:
        out: Set = set()
        mods: Set[str] = set()
        stack = [e]
        while stack:
            m = stack.pop()
            if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr == "detach" and not m.args:
                continue
            if isinstance(m, ast.Attribute) and m.attr == "data":
                continue
            if isinstance(m, ast.Attribute) and isinstance(m.value, ast.Name) and m.value.id == "self":
                mods.add(m.attr)
                continue
            if isinstance(m, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Compare)):
                out.add((m.lineno, m.col_offset))
            if isinstance(m, ast.Name):
                if m.id == holder:
                    return {("?",)}, mods  # the dict read inside: not followed
                got = env.get(m.id)
                if got is not None:
                    out |= got[0]
                    mods |= got[1]
            stack.extend(ast.iter_child_nodes(m))
        return out, mods

    def run(body) -> bool:
        for s in body:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue
            if isinstance(s, (ast.Return, ast.Pass)):
                continue
            if isinstance(s, ast.If):
                before = dict(env)
                if not run(s.body):
                    return False
                after = dict(env)
                env.clear()
                env.update(before)
                if not run(s.orelse):
                    return False
                for key, v in after.items():
                    old = env.get(key, (frozenset(), frozenset()))
                    env[key] = (old[0] | v[0], old[1] | v[1])
                continue
            if not isinstance(s, ast.Assign) or len(s.targets) != 1:
                return False
            t = s.targets[0]
            if isinstance(t, ast.Name) and t.id == holder:
                if made_it[0] or not (isinstance(s.value, ast.Dict) and not s.value.keys):
                    return False
                made_it[0] = True
                continue
            got, mods = read(s.value)
            if ("?",) in got:
                return False
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == holder:
                if not (isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str)) or t.slice.value in sites:
                    return False
                sites[t.slice.value] = got
                modules[t.slice.value] = mods
                continue
            names = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
            for n in names:
                if isinstance(n, ast.Name):
                    env[n.id] = (frozenset(got), frozenset(mods))
                elif not (isinstance(n, ast.Attribute) or isinstance(n, ast.Starred)):
                    return False
        return True

    if not run(fwd.body) or not made_it[0]:
        return None
    return sites, modules


def _check_stale(rule, body, events, reported, ctx, kept_only: bool = False, flow=None,
                 unit=None) -> Iterator[Finding]:
    """The interpreter's proof beyond one statement list (``BackwardEvent.stale``): a
    value whose graph a backward surely freed on every path reaches a later one --
    the last ``fake_batch`` of an inner loop whose own backward freed it, scored
    after that loop; REINFORCE's log-probs kept in ``policy.saved_log_probs`` that
    a first ``finish_episode()`` back-propagated, back-propagated again by a second."""
    for ev in sorted(events.values(), key=lambda e: _pos(e.call)):
        if not ev.stale or id(ev.call) in reported:
            continue
        b2 = ev.call
        stale = [t for t in ev.stale if not _separate_in_body(body, t[1][1], t[2], b2, unit, ctx)]
        if not stale:
            continue
        tok = min(stale, key=lambda t: _pos(t[1][1]))
        node, b1 = tok[1][1], tok[2]
        if kept_only and (A.is_backward_call(b1, ctx) or not _kept_in(b1, ctx)):
            continue
        if b1 is b2 and (flow is None or not ({_own_call(node), _own_call(b2)} & set(flow.methods)
                                               or id(node) in flow.made_holding)):
            continue  # a graph built before the loop and freed in it, both in this unit's text: GG102's
            # (but for an object whose constructor kept a graph: ``head = CLIPTextHead(clip_model, texts)``)
        reported.add(id(b2))
        if flow is not None and b2 is flow.framework_call:
            yield _framework_finding(rule, body, node, b1, b2, ctx)
            continue
        if b1 is b2 and flow is not None:
            # freed by this same backward in the loop's previous iteration (GraphFlow._freed_for_next)
            got = _next_iteration_finding(rule, body, node, b2, ctx, flow, unit)
            if got is not None:
                yield got
                continue
        state = flow.state_built.get(id(node)) if flow is not None else None
        yield _stale_finding(rule, body, node, b1, b2, ctx, state, _method_def(unit, b2, b1))


def _next_iteration_finding(rule, body, node, b, ctx, flow, unit) -> Optional[Finding]:
    """``b`` back-propagates, in each iteration of its loop, through a graph built once
    before the loop (``node``): the first iteration's backward frees it, the second's
    runs into it. pix2pix/DeblurGAN-style critic iterations: ``self.forward()`` leaves
    ``self.fake_B`` before ``for _ in range(critic_iters): self.backward_D()``."""
    loop = next((s for s in reversed(list(A.iter_statements(body)))
                 if isinstance(s, A.LOOPS) and A.within(b, s) and not A.within(node, s)), None)
    if loop is None:
        return None
    kept = flow.sets_by_call.get(id(node), ()) if isinstance(node, ast.Call) else ()
    holder = next((s for s in A.iter_statements(body) if isinstance(s, (ast.Assign, ast.AnnAssign))
                   and A.within(node, s)), None)
    name = _single_name(holder) if holder is not None else None
    if kept:
        what = " / ".join(f"`{k}`" for k in kept)
    else:
        what = f"`{name}`" if name else f"`{_short(node)}`"
    related = [Related(ctx.range(node), M.graph_of_built_here(what))]
    entry = flow.loop_entries.get(id(loop)) or {}
    for k in kept:
        site = getattr(entry.get(k), "site", None)
        if isinstance(site, ast.stmt) and not A.within(node, site) and site.lineno != node.lineno:
            related.append(Related(ctx.range(site), M.attr_set_here(k)))  # self.fake_B = self.netG(...) in forward()
    related.append(Related(ctx.range(b), M.frees_it_each_iteration(A.is_backward_call(b, ctx), _callee(b))))
    fixes: List[Fix] = []
    advice = M.advice_recompute_each_iteration()
    stmts = _block_of_stmt(body, loop)
    m1 = _own_call(b)
    if kept and m1 and stmts is not None:
        got = _detach_in_method(stmts, None, b, b, node, kept, flow, unit, ctx, loop=loop)
        if got is not None:
            edits, zeroed = got
            advice = M.advice_detach_where_method_reads(m1, what, zeroed)
            fixes.append(Fix(M.fix_detach_in_method(m1, what, zeroed), tuple(edits), preferred=True))
    if not fixes and id(node) in flow.made_holding:
        got = _encode_in_forward(node, ctx)
        if got is not None:
            edits, attr, param = got
            advice = M.advice_encode_in_forward(attr, param)
            fixes.append(Fix(M.fix_encode_in_forward(attr, param), tuple(edits), preferred=True))
    msg = M.freed_next_iteration(_short(b), what, node.lineno, loop.lineno, advice)
    return Finding(rule.code, ctx.range(b), msg, rule.default_severity, tuple(related), tuple(fixes),
                   {"variable": kept[0] if kept else (name or ""), "first_backward_line": b.lineno})


def _encode_in_forward(node: ast.AST, ctx) -> Optional[Tuple[List[TextEdit], str, str]]:
    """The construction ``node`` (``CLIPTextHead(model, texts)``) of a class of the file whose
    ``__init__`` keeps ``self.<a> = <p>.<method>(...)`` of the module ``<p>`` it is handed (CITE's
    ``self.weights = model.encode_text(self.texts)``): keep the module instead (``self.<p> =
    <p>``) and compute ``self.<a>`` again at the top of ``forward``, from the same arguments
    (the class's ``encodeinit:`` fact, :func:`facts.encode_again`, says where). The first
    iteration reads the same values through the same weights (same gradients); every other
    iteration gets a graph of its own. (Edits, ``<a>``, ``<p>``.)"""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return None
    fact = ctx.summary.get(ENCODE_AGAIN + node.func.id)
    if not isinstance(fact, tuple) or len(fact) != 5:
        return None
    attr, p, (l0, c0, l1, c1), (line, col), text = fact
    lines = ctx.index.lines
    if not (0 < line <= len(lines) and 0 < l1 <= len(lines)):
        return None
    indent = lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace")
    if indent.strip() or not lines[l0 - 1].encode("utf-8")[c0:].decode("utf-8", "replace").startswith(
            ("self." + attr, text.partition(".")[0] + "." + attr)):
        return None  # (the fact of a class of another file: its lines are not this file's)
    keep = TextEdit(Range(ctx.pos(l0, c0), ctx.pos(l1, c1)), f"self.{p} = {p}")
    at = ctx.pos(line, 0)
    return [keep, TextEdit(Range(at, at), f"{indent}{text}\n")], attr, p


def _block_of_stmt(body, target) -> Optional[List[ast.stmt]]:
    """The statement list (``with`` bodies inline) holding ``target`` itself."""
    for block in _blocks(body):
        stmts = A.with_bodies_inline(block)
        if any(st is target for st in stmts):
            return stmts
    return None


def _framework_finding(rule, body, node, b1, b2, ctx) -> Finding:
    """A Lightning ``training_step`` that back-propagates its own loss (``b1``) and returns
    it: the framework's backward of what it returns (``b2``, a call of no file, placed on
    the returned value) runs into the freed graph. Preferred fix, the maintainers' answer:
    ``retain_graph=True`` on the method's own backward, where no step runs between it and
    the return (the framework steps only after its own backward)."""
    holder = next((s for s in A.iter_statements(body) if isinstance(s, (ast.Assign, ast.AnnAssign))
                   and A.within(node, s)), None)
    name = _single_name(holder) if holder is not None else None
    shown = f"`{name}`" if name else f"`{_short(node)}`"
    direct = A.is_backward_call(b1, ctx)
    keep = _retain_edit(b1, ctx) if direct and not _steps_in(body, ctx) else None
    fixes = (Fix(M.fix_retain(b1.lineno), (keep,), preferred=True),) if keep is not None else ()
    msg = M.framework_backward(shown, node.lineno, _short(b1), b1.lineno, keep is not None)
    related = (
        Related(ctx.range(node), M.graph_built_here()),
        Related(ctx.range(b1), M.frees_it(direct, _callee(b1))),
    )
    return Finding(rule.code, ctx.range(b2.func.value), msg, rule.default_severity, related, fixes,
                   {"variable": name or "", "first_backward_line": b1.lineno})


def _steps_in(body, ctx) -> bool:
    """Does any statement of ``body`` step an optimizer (``opt.step()``)?"""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
               for s in body for n in ast.walk(s))


def _method_def(unit, call: ast.AST, b1: ast.AST) -> Optional[ast.FunctionDef]:
    """The method of the unit's class holding ``b1``, when ``call`` runs an own method
    (``self.update_G()``, which runs ``self.backward_G()`` in place)."""
    cls = getattr(unit, "class_node", None) if _own_call(call) else None
    if cls is None:
        return None
    line = getattr(b1, "lineno", -1)
    return next((d for d in cls.body if isinstance(d, ast.FunctionDef)
                 and d.lineno <= line <= (d.end_lineno or d.lineno)), None)


def _retain_inside(method: Optional[ast.FunctionDef], b1: ast.AST, ctx) -> Optional[TextEdit]:
    """AGIS-Net's ``backward_G()``: two losses of one graph the driver built before the call,
    back-propagated one after the other in the method's own body, nothing else run there.
    ``retain_graph=True`` on the first (``b1``) when the method's body holds exactly two
    backward calls, both run whenever it runs, and nothing after the first that may change
    a weight (an optimizer's step, an in-place method, a call of the object's own methods or
    of the file's functions): the same gradients, the graph freed by the second."""
    if method is None or not isinstance(b1, ast.Call) or not A.is_backward_call(b1, ctx):
        return None
    calls = [n for n in ast.walk(method) if isinstance(n, ast.Call)]
    backwards = [n for n in calls if A.is_backward_call(n, ctx)]
    if len(backwards) != 2 or backwards[0] is not b1 and backwards[1] is not b1:
        return None
    top = [n for s in method.body if not A.child_blocks(s) for n in ast.walk(s)]
    if not all(any(b is n for n in top) for b in backwards):
        return None
    if _pos(b1) > min(_pos(b) for b in backwards):
        return None
    for n in calls:
        if _pos(n) <= _pos(b1) or n in backwards:
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and (f.attr == "step" or f.attr.endswith("_") or (
                isinstance(f.value, ast.Name) and f.value.id == "self")):
            return None  # a step, an in-place method, a method (or module) of the object
        if isinstance(f, ast.Name) and ctx.summary.get("fn:" + f.id) is not None:
            return None  # a function of the file
    return _retain_edit(b1, ctx)


def _stale_finding(rule, body, node, b1, b2, ctx, state: Optional[str] = None,
                   method: Optional[ast.FunctionDef] = None) -> Finding:
    holder = next((s for s in A.iter_statements(body) if isinstance(s, (ast.Assign, ast.AnnAssign))
                   and A.within(node, s)), None)
    name = _single_name(holder) if holder is not None else None
    kept = _kept_in(b1, ctx, node) if not A.is_backward_call(b1, ctx) else []
    if state is not None:
        # the graph reaches the second loss through the state the call keeps on its module
        # (a method of ClassFacts.kept): computing it again reads that state again
        holder = name = None
        kept = []
        what = M.stale_state(state, _short(node), node.lineno)
    elif kept:
        shown = ", ".join(f"`{k}`" for k in kept)
        what = M.stale_kept(shown, _short(node), node.lineno)
    else:
        shown = f"`{name}`" if name else f"`{_short(node)}`"
        what = M.stale_value(shown, node.lineno)
    loop = _enclosing_loop(body, b1, b2)
    first, second = _short(b1), _short(b2)
    if loop is not None:
        how = M.in_loop(loop.lineno)
    else:
        how = M.nothing()
    fixes: List[Fix] = []
    edits = _detach_after(body, holder, name, b1, b2, ctx) if (name and holder is not None and not kept) else None
    if state is not None:
        advice = M.stale_advice_state(state)
    elif edits:
        advice = M.stale_advice_detach(shown)
        fixes.append(Fix(M.fix_stale_detach(name),
                         tuple(edits), preferred=True))
    elif kept:
        advice = M.stale_advice_clear(shown, kept[0])
    else:
        keep = _retain_inside(method, b1, ctx)
        if keep is not None:
            advice = M.advice_retain()
            fixes.append(Fix(M.fix_retain(b1.lineno), (keep,), preferred=True))
        else:
            advice = M.stale_advice_recompute()
    direct = A.is_backward_call(b1, ctx)
    msg = M.stale(second, what, first, b1.lineno, how, bool(kept), advice)
    related = (
        Related(ctx.range(node), M.graph_built_here()),
        Related(ctx.range(b1), M.frees_it(direct, _callee(b1))),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, tuple(fixes),
                   {"variable": state or name or (kept[0] if kept else ""), "first_backward_line": b1.lineno})


def _facts_of(call: ast.AST, ctx) -> Optional[V.FnFacts]:
    name = A.dotted(call.func) if isinstance(call, ast.Call) else None
    facts = ctx.summary.get("fn:" + name) if name else None
    return facts if isinstance(facts, V.FnFacts) else None


def _kept_in(call: ast.Call, ctx, filler: Optional[ast.AST] = None) -> List[str]:
    """The outside containers a helper surely back-propagates (its facts' container
    effects); with ``filler`` (the call that put the graph there), those it fills."""
    facts = _facts_of(call, ctx)
    if facts is None:
        return []
    kept = [e.path for e in facts.containers if e.frees and not e.path.startswith("#")]
    fills = _facts_of(filler, ctx) if filler is not None else None
    if fills is not None:
        filled = {e.path for e in fills.containers if e.appends}
        for d in fills.delegates:  # play(): a loop of select_action() calls
            inner = ctx.summary.get("fn:" + d[0])
            if isinstance(inner, V.FnFacts):
                filled |= {e.path for e in inner.containers if e.appends}
        kept = [k for k in kept if k in filled] or kept
    return kept


def _innermost(body, node) -> Optional[Tuple[List[ast.stmt], int]]:
    """The innermost statement list holding ``node`` (``with`` bodies inline) and the
    index there of the statement that holds it."""
    stmts = A.with_bodies_inline(body)
    while True:
        j = next((k for k, s in enumerate(stmts) if A.within(node, s)), None)
        if j is None:
            return None
        inner = next((b for b in A.child_blocks(stmts[j]) if any(A.within(node, t) for t in b)), None)
        if inner is None:
            return stmts, j
        stmts = A.with_bodies_inline(inner)


def _enclosing_loop(body, b1, b2) -> Optional[ast.stmt]:
    """The innermost loop holding ``b1`` but not ``b2``."""
    best = None
    for s in A.iter_statements(body):
        if isinstance(s, A.LOOPS) and A.within(b1, s) and not A.within(b2, s):
            if best is None or _pos(s) > _pos(best):
                best = s
    return best


def _detach_after(body, holder, name, b1, b2, ctx) -> Optional[List[TextEdit]]:
    """``name`` -> ``name.detach()`` in the statements after the one that freed it (the
    loop holding ``b1``) that build the second loss, in the statement list of ``b2``.
    None when that list does not also hold the freeing statement, or ``name`` is
    bound again in between (then what is read is not the freed value)."""
    found = _innermost(body, b2)
    if found is not None:
        stmts, j = found
        i = next((k for k, s in enumerate(stmts[:j]) if A.within(b1, s)), None)
        if i is None:
            return None
        need = _inputs_of(stmts, b2)
        edits: List[TextEdit] = []
        for s in stmts[i + 1:j + 1]:
            if name in _assigned(s) or _opens_scope(s):
                return None
            if s is not stmts[j] and not (_assigned(s) & need):
                continue
            edits.extend(_detach_edit(n, ctx) for n in _uncut_uses(s, name) if isinstance(n.ctx, ast.Load))
        return edits or None
    return None


def _own_call(call: ast.AST) -> Optional[str]:
    """``self.backward_D()`` → ``backward_D``: a method of the unit's own object."""
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == "self":
        return call.func.attr
    return None


def _finding(rule, stmts, s1, b1, b2, shared, ctx, where) -> Finding:
    f = _finding_at(rule, stmts, s1, b1, b2, shared, ctx, where)
    flow, unit = where if where is not None else (None, None)
    node = min((t[1] for t in shared), key=_pos)
    kept = flow.sets_by_call.get(id(node), ()) if flow is not None else ()
    cls = unit.class_node if unit is not None else None
    if not kept or cls is None:
        return f
    # a driver's own methods (pix2pix-style ``self.forward()``, ``self.backward_G()``,
    # ``self.backward_D_basic(...)``): where inside them the attribute is set, freed and
    # reached again, beside the driver's calls
    extra = list(_inside_methods(cls, node, b1, b2, kept, ctx))
    if not extra:
        return f
    return replace(f, related=tuple(f.related) + tuple(extra))


def _inside_methods(cls: ast.ClassDef, node, b1, b2, kept, ctx) -> Iterator[Related]:
    defs = {d.name: d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    fn = defs.get(_own_call(node) or "")
    if fn is not None:
        for n in A.body_nodes(fn):
            hit = next((d for d in map(A.dotted, n.targets) if d in kept), None) if isinstance(n, ast.Assign) else None
            if hit is not None:
                yield Related(ctx.range(n), M.attr_set_here(hit))
                break
    for b, first in ((b1, True), (b2, False)):
        m = _own_call(b)
        fn = defs.get(m or "")
        if fn is None:
            continue
        inner = _backward_in(fn, defs, ctx)
        if inner is not None:
            yield Related(ctx.range(inner), M.backward_inside(m, first))


def _backward_in(fn, defs, ctx, depth: int = 2) -> Optional[ast.Call]:
    """The first backward call inside an own method, or inside an own method it calls
    (``backward_D_A()`` calling ``self.backward_D_basic(...)``), ``depth`` deep."""
    calls = []
    for n in A.body_nodes(fn):
        if isinstance(n, ast.Call):
            if A.is_backward_call(n, ctx):
                return n
            calls.append(n)
    if depth > 1:
        for n in calls:
            sub = defs.get(_own_call(n) or "")
            if sub is not None and sub is not fn:
                got = _backward_in(sub, defs, ctx, depth - 1)
                if got is not None:
                    return got
    return None


def _finding_at(rule, stmts, s1, b1, b2, shared, ctx, where) -> Finding:
    node = min((t[1] for t in shared), key=_pos)
    holder = _holder(stmts, s1, node)
    name = _single_name(holder) if holder is not None else None
    what = f"`{name}`" if name else f"`{_short(node)}`"
    flow, unit = where if where is not None else (None, None)
    kept = flow.sets_by_call.get(id(node), ()) if flow is not None else ()
    if not name and kept:
        # self.forward() left it on the object: self.fake_B
        what = " / ".join(f"`{k}`" for k in kept)
    line1, line0 = b1.lineno, node.lineno
    first, second = _short(b1), _short(b2)
    # (a wrapper's ``optimizer.backward(loss)`` is a helper: nothing added to the call keeps its graph)
    direct = A.is_backward_call(b1, ctx) and (flow is None or id(b1) not in flow.wrapper_backwards)
    keep: Optional[TextEdit] = None
    cut: List[TextEdit] = []
    edited = _edited_in_between(stmts, s1, b2, unit, ctx) if direct else None
    if not direct and _own_call(b1) and kept:
        # a driver's own methods (pix2pix's backward_D() then backward_G()): the edit
        # belongs in the method that builds the first loss, which the message names
        m1 = _own_call(b1)
        shown = " / ".join(f"`{k}`" for k in kept)
        advice = M.advice_detach_in_method(m1, shown)
        got = _detach_in_method(stmts, s1, b1, b2, node, kept, flow, unit, ctx) if flow is not None else None
        if got is not None:
            edits, zeroed = got
            advice = M.advice_detach_where_method_reads(m1, shown, zeroed)
            fix = Fix(M.fix_detach_in_method(m1, shown, zeroed),
                      tuple(edits), preferred=True)
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         advice, [fix], name, ctx)
    elif not direct and flow is not None and any(
            ev.call is b1 and ("G", b1) in ev.loss.taints for ev in flow.events):
        # a model whose forward back-propagates the loss it returns (FnFacts.frees_returned):
        # the second backward of that loss is one too many; no edit here is sure to be the fix
        advice = M.advice_backward_once(_callee(b1))
        drop = _drop_second_backward(stmts, s1, b1, b2, ctx) if id(b1) in flow.saving_helpers else None
        if drop is not None:
            # (a helper's, not a model's forward: criterion.forward_reg handing back the loss it
            # back-propagated) the second backward of exactly what it returned adds nothing: drop it
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         advice, [Fix(M.fix_backward_once(drop[1], _callee(b1)), (drop[0],), preferred=True)],
                         name, ctx)
    elif not direct:
        # the first backward is inside a helper: no edit here keeps its graph, and a
        # detach alone changes what the input learns; the message says what to do
        advice = M.advice_retain_in_helper(_callee(b1), what)
    elif (_stepped_in_between(stmts, s1, b2, shared, ctx) or edited is not None) and \
            _reset_accumulator(stmts, s1, b1, b2, ctx) is not None:
        # the second pass keeps adding to the variable the first loss was summed in (SAM's
        # second forward with ``loss += loss_t`` again): the weights changed in between, so the
        # first loss's graph is no part of the second; start the sum again where it is refilled
        reset, acc, init = _reset_accumulator(stmts, s1, b1, b2, ctx)  # type: ignore[misc]
        return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                     M.advice_reset_accumulator(acc), [Fix(M.fix_reset_accumulator(acc, init), (reset,),
                                                           preferred=True)], name, ctx)
    elif _stepped_in_between(stmts, s1, b2, shared, ctx):
        # DCGAN's errG from the D step's ``output = netD(fake.detach())``: the second loss
        # reaches no graph but the shared one, so its detach would leave nothing to
        # back-propagate, and computing the same statements again keeps the detach its
        # statement holds
        alone = _only_through_shared(flow, b2, shared, ctx)
        second_cut = _detach_in_second(stmts, holder, s1, b1, b2, name, shared, ctx) \
            if name and holder is not None and not alone else None
        if second_cut:
            # the optimizer stepped after the second backward does not train what produced the
            # shared value: cutting it out of the second loss changes none of its gradients
            cut2, opt2 = second_cut
            advice = M.advice_detach_in_second(what, opt2)
            fix2 = Fix(M.fix_detach_in_second(name, opt2),
                       tuple(cut2), preferred=True)
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         advice, [fix2], name, ctx)
        redo = _recompute_after_step(stmts, s1, b2, shared, ctx)
        if redo is not None and alone and holder is not None and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "detach"
                for n in A.walk_all(holder)):
            # the forward the second loss needs (``netD(fake)``) is the user's to write; a
            # detach in the first loss would leave that one nothing either: no fix
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         M.advice_may_update(what), [], name, ctx)
        if redo is not None:
            # the forward again after the step that updated it (the second loss then sees the
            # updated weights, as a second step of SAM or a GAN trained in turn does)
            edits, kind, names, opt = redo
            shown = ", ".join(f"`{n}`" for n in names)
            advice = M.advice_recompute_after_step(shown, opt)
            fix3 = Fix(M.fix_recompute_after_step(shown, opt), tuple(edits), preferred=True)
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         advice, [fix3], name, ctx)
        # no fix then: a detach changes what the shared part learns, so it cannot be
        # the fix `--fix` and Fix All apply; the message says what to do
        advice = M.advice_may_update(what)
    elif edited is not None:
        # a helper of the file edits parameters in place in between (a weight perturbation,
        # SAM's first step written as a function): keeping the graph is no fix either
        advice = M.advice_edited_in_between(what, _short(edited))
    else:
        keep = _retain_edit(b1, ctx)
        advice = M.advice_retain()
    if direct and name and holder is not None:
        cut = _detach_uses(stmts, holder, s1, b2, name, ctx)
    if cut:
        advice = M.or_detach_in_first(advice, what)
    fixes: List[Fix] = []
    if keep is not None:
        fixes.append(Fix(M.fix_retain(line1),
                         (keep,), preferred=True))
    zeroed = _producer_zeroed(stmts, s1, b2, shared, ctx) if cut and keep is not None else None
    if zeroed and keep is not None:
        # what the first loss gives the shared value's producer is zeroed before any step uses
        # it: the detach changes no update, keeps no graph alive, and is what tutorials write
        advice = M.advice_detach_in_first_zeroed(what, zeroed)
        fixes = [Fix(M.fix_detach_in_first_zeroed(name, zeroed),
                     tuple(cut), preferred=True),
                 Fix(M.fix_retain_more_memory(line1),
                     (keep,))]
    elif cut and keep is not None:
        fixes.append(Fix(M.fix_detach_in_first(name),
                         tuple(cut)))
    return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                 advice, fixes, name, ctx)


def _reset_accumulator(stmts, s1, b1, b2, ctx) -> Optional[Tuple[TextEdit, str, str]]:
    """``loss = 0`` again before the second pass refills ``loss``: both backward calls
    back-propagate the same name ``loss``, first bound in this list to a number (``loss =
    0``), and after the first backward it is only added to in place (``loss += loss_t``,
    in a loop or not) before the second. (The edit, the name, the number's text; or None.)"""
    t1, t2 = A.backward_target(b1, ctx), A.backward_target(b2, ctx)
    if not (isinstance(t1, ast.Name) and isinstance(t2, ast.Name) and t1.id == t2.id):
        return None
    n = t1.id
    i = next((k for k, s in enumerate(stmts) if s is s1), None)
    if i is None:
        return None
    init = None
    for s in stmts[:i]:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and s.targets[0].id == n:
            v = s.value
            init = ast.unparse(v) if isinstance(v, ast.Constant) and type(v.value) in (int, float) else None
    if init is None:
        return None
    first = None
    for s in stmts[i + 1:]:
        holds_b2 = any(m is b2 for m in A.walk_all(s))
        added = set()
        for m in A.walk_all(s):
            if isinstance(m, ast.AugAssign) and isinstance(m.target, ast.Name) and m.target.id == n:
                added.add(id(m.target))
                if first is None:
                    first = s
        for m in A.walk_all(s):
            if isinstance(m, ast.Name) and m.id == n and isinstance(m.ctx, ast.Store) and id(m) not in added:
                return None  # rebound (or the second backward's own statement binds it)
        if holds_b2:
            break
    if first is None or any(m is b2 for m in A.walk_all(first)):
        return None
    indent = ctx.index.line(first.lineno - 1)[:first.col_offset]
    if indent.strip():
        return None
    at = ctx.pos(first.lineno, 0)
    return TextEdit(Range(at, at), f"{indent}{n} = {init}\n"), n, init


def _drop_second_backward(stmts, s1, b1, b2, ctx) -> Optional[Tuple[TextEdit, str]]:
    """``pass`` in place of the statement ``b2`` (``optimizer.backward(loss)``), when ``b1``'s
    statement ``s1`` binds ``loss`` to what the helper returned (alone, or as an element of a
    tuple it unpacks), nothing rebinds it before ``b2``, and ``b2`` back-propagates exactly that
    name: the helper's own backward already gave every gradient ``b2`` would add. (The edit
    and the name, or None.)"""
    target = A.backward_target(b2, ctx)
    bind = next((m for m in A.walk_all(s1) if isinstance(m, ast.Assign) and m.value is b1), None)
    if not isinstance(target, ast.Name) or bind is None or len(bind.targets) != 1 or not (
            bind is s1 or (isinstance(s1, ast.With) and s1.body == [bind])):
        return None  # (in a `with` block of its own: `with record_function("forward"): loss, ... = ...`)
    n = target.id
    t = bind.targets[0]
    if not (isinstance(t, ast.Name) and t.id == n) and not (
            isinstance(t, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == n for e in t.elts)):
        return None
    i = next((k for k, s in enumerate(stmts) if s is s1), None)
    if i is None:
        return None
    for s in stmts[i + 1:]:
        for m in A.walk_all(s):
            if isinstance(m, ast.Expr) and m.value is b2:
                if m.end_lineno is None or m.end_col_offset is None:
                    return None
                edit = TextEdit(Range(ctx.pos(m.lineno, m.col_offset), ctx.pos(m.end_lineno, m.end_col_offset)), "pass")
                return edit, n
            if isinstance(m, (ast.Assign, ast.AnnAssign, ast.For, ast.withitem, ast.NamedExpr)) and any(
                    isinstance(x, ast.Name) and x.id == n and isinstance(x.ctx, ast.Store) for x in A.walk_all(m)):
                return None
    return None


def _detach_in_method(stmts, s1, b1, b2, node, kept, flow, unit, ctx, loop=None):
    """A driver's first backward runs in its own method ``m1`` (pix2pix's
    ``backward_D()``), reading attributes another own method left with a graph
    (``self.fake_B``). ``self.fake_B`` → ``self.fake_B.detach()`` where ``m1`` reads it
    changes no update when: the driver discards what that loss gives the producer
    before any step can use it (``optimizer_G.zero_grad()``, an optimizer built
    from every module that built it, and no step in between of one that may hold
    them), ``m1`` is called from this driver only, and nothing in ``m1`` needs the
    attribute's graph (an ``autograd.grad`` against what is built from it, here or
    in a helper whose summary says so, or a call we cannot see). ([edits], the
    zero_grad call) or None."""
    m1 = _own_call(b1)
    cls = unit.class_node if unit is not None else None
    producers = flow.modules_by_call.get(id(node), frozenset())
    if not m1 or cls is None or not producers:
        return None
    fn = next((d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == m1), None)
    if fn is None or fn.decorator_list:
        return None
    text = "\n".join(ctx.index.lines)
    if len(re.findall(r"\.\s*" + re.escape(m1) + r"\s*\(", text)) != 1:
        return None  # called elsewhere too: the detach would change what those calls learn
    zeroed = None
    if loop is not None:
        # the same call freed it in the loop's previous iteration (critic iterations over
        # self.fake_B): no step in the loop may use the producer's gradients, and they are
        # discarded after the loop, before any step that may
        for st in loop.body:
            for call, opt in _step_calls(st):
                owned = _owned(opt, ctx)
                if not owned or producers & owned:
                    return None
        scan = _stretch(stmts, loop, None)
    else:
        scan = _stretch(stmts, s1, b2)  # between the two backward calls
    for s in scan:
        for call, opt in _step_calls(s):
            owned = _owned(opt, ctx)
            if not owned or producers & owned:
                return None  # a step that may use the producer's gradients from that loss
        zeroing = S.zeroing_statement(s)
        if zeroing is not None:
            who = S.zeroed(zeroing)
            if who and (producers <= _owned(who, ctx) or who.split(".")[-1] in producers and len(producers) == 1):
                zeroed = f"{who}.zero_grad()"
                break
    if zeroed is None:
        return None
    attrs = {k[5:] for k in kept}
    reads: List[ast.Attribute] = []
    cut = set()
    for n in A.walk_all(fn):
        if isinstance(n, ast.Attribute) and n.attr in ("detach", "data") and isinstance(n.value, ast.Attribute):
            cut.add(id(n.value))
    for n in A.walk_all(fn):
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
            return None
        if isinstance(n, ast.Attribute) and n.attr in attrs and isinstance(n.value, ast.Name) and n.value.id == "self":
            if not isinstance(n.ctx, ast.Load):
                return None  # m1 sets it again
            if id(n) not in cut:
                reads.append(n)
    own = {d.name for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not reads or not _graph_not_needed(fn, attrs, own, ctx):
        return None
    return [_detach_edit(n, ctx) for n in reads], zeroed


def _graph_not_needed(fn, attrs, own, ctx) -> bool:
    """Nothing in ``fn`` needs the graph of ``self.<attr>`` or of what it builds from
    it: no ``autograd.grad`` against them, and every call handed them is a module of
    ``self``, a tensor method, torch's own, or a summarised function of this file that
    does not differentiate against that argument as given (``FnFacts.grad_params``)."""
    derived: Set[str] = set()
    live = set(attrs)  # self.<attr> holding it, or built from it

    def touches(node) -> bool:
        for n in A.walk_all(node):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                    and n.attr in live:
                return True
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in derived:
                return True
        return False

    for s in A.iter_statements(fn.body):
        if A.child_blocks(s) and not isinstance(s, (ast.With, ast.AsyncWith)):
            if touches(s):
                return False  # under a branch or a loop: not followed
            continue
        for n in A.walk_all(s):
            if not isinstance(n, ast.Call):
                continue
            args = list(n.args) + [k.value for k in n.keywords]
            hit = [i for i, a in enumerate(args) if touches(a)]
            if not hit:
                continue
            q = A.qualify(n.func, ctx) or ""
            if q.endswith("autograd.grad") or q.endswith("autograd.backward"):
                return False
            if isinstance(n.func, ast.Attribute):
                base = n.func.value
                if isinstance(base, ast.Name) and base.id == "self":
                    if n.func.attr in own:
                        return False  # an own method handed it: not followed here
                    continue  # self.netD(x): a module of self
                if q.startswith("torch."):
                    continue
                if not touches(base) and not isinstance(base, ast.Name):
                    return False
                if touches(base) or base.id in derived:  # type: ignore[attr-defined]
                    continue  # x.mean(), fake_AB.view(...): a tensor method
                return False
            if isinstance(n.func, ast.Name):
                if q.startswith("torch."):
                    continue
                facts = ctx.summary.get("fn:" + n.func.id)
                if not isinstance(facts, V.FnFacts) or any(i in facts.grad_params for i in hit):
                    return False
                continue
            return False
        if touches(s) and isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(e, ast.Name):
                        derived.add(e.id)
                    elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        live.add(e.attr)
                    elif not isinstance(e, (ast.Attribute, ast.Subscript, ast.Starred)):
                        return False
    return True


def _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct, advice,
          fixes, name, ctx) -> Finding:
    msg = M.freed(second, what, line0, first, line1, advice)
    related = (
        Related(ctx.range(node), M.graph_of_built_here(what)),
        Related(ctx.range(b1), M.frees_it(direct, _callee(b1))),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, tuple(fixes),
                   {"variable": name or "", "first_backward_line": line1})


def _stepped_in_between(stmts, s1, b2, shared, ctx) -> bool:
    """Does an optimizer step between the two backward calls possibly update the
    parameters of the shared part? Then a retained graph holds weights that the
    step changed in place, and the second backward fails on that instead ("one of
    the variables needed for gradient computation has been modified by an inplace
    operation"): retain_graph=True is no fix. An optimizer whose construction does
    not name the shared part's module (a GAN's ``optD = Adam(D.parameters())``
    while the shared part is ``G(z)``) is safe; one we cannot find is not."""
    steppers: List[str] = []
    # the second backward's own statement too, up to the call (``if ...: opt.step();
    # lossG.backward()``): a step written before it there runs before it
    for s in _stretch(stmts, s1, b2, with_stop=True):
        for n in A.walk_all(s):
            if n is b2:
                return _any_may_update(steppers, shared, ctx)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and S.is_step_name(n.func.attr, True):
                steppers.append(S.stepped(n, two_step=True) or "?")
    return _any_may_update(steppers, shared, ctx)


def _edited_in_between(stmts, s1, b2, unit, ctx) -> Optional[ast.Call]:
    """A call, between the two backward calls, of a same-file function or own method that
    edits parameters in place outside an optimizer (``FnFacts.param_edits``: ``perturb(model)``
    running ``p.add_(e)`` over ``model.parameters()``), or None."""
    for s in _stretch(stmts, s1, b2, with_stop=True):
        for n in A.walk_all(s):
            if n is b2:
                return None
            if n.__class__ is ast.Call:
                facts = _helper_facts(n, unit, ctx)
                if facts is not None and facts.param_edits:
                    return n
    return None


def _any_may_update(steppers: List[str], shared, ctx) -> bool:
    if not steppers:
        return False
    parts: Set[str] = set()
    held: Set[str] = set()
    lines = ctx.index.lines
    for t in shared:
        node = t[1]
        name = A.dotted(node.func) if isinstance(node, ast.Call) else None
        if name is None:
            return True  # a part we cannot name: assume the step reaches it
        bits = name.split(".")
        parts.update(b for b in bits if b != "self")
        held |= _held_modules(name, lines)
    for opt in steppers:
        if opt == "?":
            return True
        made = _constructions(opt, lines)
        if not made:
            return True  # an optimizer we cannot see: it may hold anything
        seen = {opt}
        while made:
            value = made.pop()
            if re.fullmatch(r"[\w.]+", value) and value not in seen:
                # an alias (`g_optim = self.optim_g`): what the aliased optimizer was built from
                seen.add(value)
                more = _constructions(value, lines)
                if not more:
                    return True
                made.extend(more)
                continue
            words = set(re.findall(r"\w+", value))
            if words & parts:
                return True
            if held:
                if held & _parameter_owners(value):
                    return True
                if held & _parameter_paths(value):
                    # ``Adam(net.feat_D2.parameters())`` trains a part of ``net``, which the
                    # shared object holds (``actor = Actor(net)``)
                    return True
    return False


def _parameter_paths(value: str) -> Set[str]:
    """Every part of the dotted receivers of ``.parameters()`` / ``.named_parameters()``
    calls in an optimizer's construction: ``Adam(net.feat_D2.parameters())`` → {net, feat_D2}."""
    try:
        tree = ast.parse(value, mode="eval")
    except SyntaxError:
        return set()
    out: Set[str] = set()
    for n in A.walk_all(tree):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("parameters", "named_parameters")):
            got = A.dotted(n.func.value)
            if got is not None:
                out.update(b for b in got.split(".") if b != "self")
    return out


def _held_modules(name: str, lines: List[str], depth: int = 2) -> Set[str]:
    """What an object was built from, by name: ``loss_fn = TD3Loss(actor, qvalue)``
    → {actor, qvalue} (and, ``depth`` deep, what those were built from). A call of
    ``loss_fn`` may run them: a loss module holding the actor and the critic
    (torchrl's), a wrapper around a backbone. Names of the arguments only (the last
    part of a dotted one); the caller compares them with what an optimizer trains."""
    out: Set[str] = set()
    if depth <= 0:
        return out
    bare = name[5:] if name.startswith("self.") else name
    for key in {name, bare}:
        for value in _constructions(key, lines):
            try:
                tree = ast.parse(value, mode="eval").body
            except SyntaxError:
                continue
            if not isinstance(tree, ast.Call):
                continue
            for arg in [*tree.args, *(k.value for k in tree.keywords)]:
                got = A.dotted(arg)
                if got is None or got == "self":
                    continue
                last = got.rsplit(".", 1)[-1]
                if last not in out:
                    out.add(last)
                    out |= _held_modules(got, lines, depth - 1)
    return out


def _parameter_owners(value: str) -> Set[str]:
    """The modules an optimizer's construction may train: those whose parameters it
    is handed (``Adam(actor.parameters())`` → {actor}; ``self.net.encoder.parameters()``
    → {encoder}), and the plain names it reads otherwise (``Adam(params, ...)``: a list
    built elsewhere, ``params``), not those only read through an attribute
    (``lr=args.lr``: a setting). Unreadable: everything it names."""
    try:
        tree = ast.parse(value, mode="eval")
    except SyntaxError:
        return set(re.findall(r"\w+", value))
    out: Set[str] = set()
    skip: Set[int] = set()  # names read as an object (``args.lr``) or called (``Adam``)
    for n in A.walk_all(tree):
        if isinstance(n, ast.Attribute):
            skip.add(id(n.value))
        elif isinstance(n, ast.Call):
            skip.add(id(n.func))
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in ("parameters", "named_parameters"):
                got = A.dotted(f.value)
                if got is None:  # get_model().parameters(): whatever it names
                    out |= {m.id for m in A.walk_all(f.value) if isinstance(m, ast.Name)}
                else:
                    out.add(got.rsplit(".", 1)[-1])
    out |= {n.id for n in A.walk_all(tree) if isinstance(n, ast.Name) and id(n) not in skip}
    return out


def _constructions(name: str, lines: List[str]) -> List[str]:
    """The source of each value assigned to ``name`` (``opt = Adam(D.parameters())``,
    ``optD, optG = Adam(D...), Adam(G...)``: that element), found textually: a
    line whose text up to its first ``=`` (not ``==``) holds only names, dots,
    commas, brackets and spaces, one of its dotted names being ``name``.

    Remembered per file text and thread (the lines that start an assignment are
    indexed by the names before their ``=`` once; every unit asks about its
    optimizers again)."""
    memo = getattr(_CONSTRUCTIONS_MEMO, "memo", None)
    if memo is None or memo[0] is not lines:
        found: Dict[str, List[str]] = {}
        memo = (lines, _assignment_heads(lines), found)
        _CONSTRUCTIONS_MEMO.memo = memo
    found = memo[2]
    got = found.get(name)
    if got is None:
        got = found[name] = _constructions_at(name, lines, memo[1].get(name, ()))
    return list(got)  # (callers consume the list)


_CONSTRUCTIONS_MEMO = _local()
_HEAD = re.compile(r"[\w.,\s()\[\]]*")
_DOTTED_RUN = re.compile(r"[\w.]+")


def _assignment_heads(lines: List[str]) -> Dict[str, List[int]]:
    """Each dotted name (a whole run of word characters and dots) written before
    the ``=`` of a line that starts an assignment → those lines' indexes, in order."""
    heads: Dict[str, List[int]] = {}
    match = _HEAD.match
    for i, line in enumerate(lines):
        if "=" not in line:
            continue
        k = match(line).end()  # type: ignore[union-attr]  # (a * pattern always matches)
        if line[k:k + 1] != "=" or line[k + 1:k + 2] == "=":
            continue
        for run in set(_DOTTED_RUN.findall(line, 0, k)):
            heads.setdefault(run, []).append(i)
    return heads


def _constructions_at(name: str, lines: List[str], starts) -> List[str]:
    out: List[str] = []
    for i in starts:
        line = lines[i]
        text = line
        for more in lines[i + 1:i + 20]:  # the statement, over its lines
            if text.count("(") + text.count("[") <= text.count(")") + text.count("]"):
                break
            text += "\n" + more
        try:
            stmt = ast.parse(text.strip()).body[0]
        except (SyntaxError, IndexError, ValueError):
            continue
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            value = _value_for(target, stmt.value, name)
            if value is not None:
                out.append(ast.unparse(value))
    return out


def _value_for(target: ast.expr, value: ast.expr, name: str) -> Optional[ast.expr]:
    if A.dotted(target) == name:
        return value
    if isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts):
                found = _value_for(t, v, name)
                if found is not None:
                    return found
            return None
        if any(A.dotted(t) == name for t in target.elts):
            return value  # unpacked from one call: all of it may be this one
    return None


def _short(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    if len(text) <= limit:
        return text
    if isinstance(node, ast.Call):
        func = ast.unparse(node.func)
        if len(func) <= limit:
            return func + "(...)"
    return text[: limit - 1] + "…"


def _holder(stmts, s1, node) -> Optional[ast.stmt]:
    """The statement of the list, before the first backward, that holds ``node``."""
    return _holder_of(_stretch(stmts, None, s1), node)


def _single_name(stmt: ast.stmt) -> Optional[str]:
    """``fake = G(z)`` → ``fake``: the one name a simple assignment binds."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return stmt.target.id
    return None


def _retain_edit(call: ast.Call, ctx) -> Optional[TextEdit]:
    """``retain_graph=True`` added as the call's last argument."""
    if any(kw.arg in ("retain_graph", "create_graph") or kw.arg is None for kw in call.keywords):
        return None  # retain_graph=False spelled out, or **kwargs: leave it to the user
    end_line, end_col = call.end_lineno, call.end_col_offset
    if end_line is None or end_col is None:
        return None
    line_bytes = ctx.index.line(end_line - 1).encode("utf-8")
    if end_col < 1 or line_bytes[end_col - 1:end_col] != b")":
        return None
    args = list(call.args) + [kw.value for kw in call.keywords]
    if not args:
        at = ctx.pos(end_line, end_col - 1)
        return TextEdit(Range(at, at), "retain_graph=True")
    last = max(args, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
    if last.end_lineno is None or last.end_col_offset is None:
        return None
    between = _text_between(ctx, last.end_lineno, last.end_col_offset, end_line, end_col - 1)
    if between is None:
        return None
    comma = between.find(",")
    if comma >= 0 and not between[:comma].strip() and "\n" not in between[:comma]:
        # `f(a, )`: after the comma already there
        at = ctx.pos(last.end_lineno, last.end_col_offset + len(between[:comma + 1].encode("utf-8")))
        return TextEdit(Range(at, at), " retain_graph=True")
    at = ctx.pos(last.end_lineno, last.end_col_offset)  # right after the last argument
    return TextEdit(Range(at, at), ", retain_graph=True")


def _text_between(ctx, l0, c0, l1, c1) -> Optional[str]:
    if l0 is None or c0 is None:
        return None
    if l0 == l1:
        return ctx.index.line(l0 - 1).encode("utf-8")[c0:c1].decode("utf-8", "replace")
    parts = [ctx.index.line(l0 - 1).encode("utf-8")[c0:].decode("utf-8", "replace")]
    for ln in range(l0 + 1, l1):
        parts.append(ctx.index.line(ln - 1))
    parts.append(ctx.index.line(l1 - 1).encode("utf-8")[:c1].decode("utf-8", "replace"))
    return "\n".join(parts)


def _detach_uses(stmts, holder, s1, b2, name, ctx) -> List[TextEdit]:
    """``name`` → ``name.detach()`` where the statements between its assignment and
    the first backward read it (the first loss is built there) — only when none of
    those statements also feeds the second loss: detaching ``value`` in an
    actor-critic's ``advantage = reward - value`` would starve the critic's loss
    built from the same ``advantage``."""
    second = _inputs_of(stmts, b2)
    edits: List[TextEdit] = []
    rewritten: Set[str] = set()
    run = _stretch(stmts, holder, s1)  # where the first loss is built
    if any(_opens_scope(s) for s in run):
        return []  # a use inside a nested scope: not ours to rewrite
    for s in run:
        if any(isinstance(n, ast.Name) and n.id == name for n in A.walk_all(s)) and _assigned(s) & second:
            return []
        for n in _uncut_uses(s, name):
            if not isinstance(n.ctx, ast.Load):
                return []  # reassigned before the backward: the fix would not reach it
            edits.append(_detach_edit(n, ctx))
            rewritten |= _assigned(s)
    if rewritten and _differentiated_inputs(stmts, holder, s1) & rewritten:
        return []  # a gradient penalty differentiates with respect to it: it must keep its graph
    if edits and not _other_graph_source(run, s1, name, ctx):
        return []  # loss = mse(out, y): with out detached the first loss holds no graph at all
    return edits


def _other_graph_source(run, s1, name: str, ctx) -> bool:
    """Does the first loss, built in ``run`` and back-propagated by ``s1``, call something
    besides ``name`` that may hold parameters (a module of the file or of torch that is not
    parameterless, an attribute of ``self``, a callable it cannot tell)? Torch functions and
    tensor methods are not: a loss computed from ``name`` alone by them has no graph once
    ``name`` is detached."""
    need = {n.id for n in A.walk_all(s1) if isinstance(n, ast.Name)} - {name}
    for s in reversed(list(run) + [s1]):
        if s is not s1 and not (_assigned(s) & need):
            continue
        need |= _names_read(s) - {name}
        for n in A.walk_all(s):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if A.is_backward_call(n, ctx):
                continue
            if isinstance(f, ast.Attribute):
                recv = A.dotted(f.value)
                if recv is None or "." in recv and not recv.startswith("self."):
                    continue
                if recv.startswith("self."):
                    return True
                raw = ctx.summary.get("var:" + recv)
                if isinstance(raw, str) and _may_hold_parameters(raw, ctx):
                    return True
                continue  # a tensor's method (out.mean())
            q = ctx.qualify(f) or ""
            if q.startswith("torch.") and not q.startswith("torch.nn.") or q.startswith("torch.nn.functional."):
                continue
            if isinstance(f, ast.Name):
                if f.id in ("sum", "abs", "max", "min", "float", "len"):
                    continue
                raw = ctx.summary.get("var:" + f.id)
                if isinstance(raw, str) and not _may_hold_parameters(raw, ctx):
                    continue
            return True
    return False


def _may_hold_parameters(raw: str, ctx) -> bool:
    """Is the (raw dotted) constructor ``raw`` anything but a parameterless torch module
    (``nn.MSELoss()``, ``nn.ReLU()``)?"""
    q = ctx.qualify(ast.parse(raw, mode="eval").body) if raw.replace(".", "").replace("_", "").isalnum() else None
    last = (q or raw).rsplit(".", 1)[-1]
    return not ((q or "").startswith("torch.nn.") and (last in K.PARAMETERLESS_MODULES or last.endswith("Loss")))


def _assigned(stmt: ast.stmt) -> Set[str]:
    out: Set[str] = set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for t in targets:
        if t is not None:
            out.update(n.id for n in A.walk_all(t) if isinstance(n, ast.Name))
    return out


def _inputs_of(stmts, b2: ast.Call, deep: bool = False, through: Sequence[ast.stmt] = ()) -> Set[str]:
    """The names the second backward's loss is computed from, followed back through
    the assignments of the statement list before it (a name-level def-use closure).
    ``deep``: through the statement holding it too (it may build its loss), and
    through assignments inside the list's compound statements (``if wass_metric:
    d_loss = ... else: d_loss = ...``). ``through``: statements whose inputs are not
    followed (the ones that built the shared value: what they read is theirs)."""
    need = {n.id for n in A.walk_all(b2) if isinstance(n, ast.Name)}
    memo = getattr(_WALKS, "memo", None)
    for s in reversed(_stretch(stmts, None, b2, with_stop=deep)):
        if memo is not None:  # within a check(): each statement's names read once (a module's
            # statement list is read back from each backward)
            got = memo.get(("names", id(s)))
            if got is None:
                got = memo[("names", id(s))] = (s, _stored(s), frozenset(_assigned(s)), frozenset(_names_read(s)))
            if got[1 if deep else 2] & need and not any(s is t for t in through):
                need |= got[3]
            continue
        bound = _stored(s) if deep else _assigned(s)
        if bound & need and not any(s is t for t in through):
            need |= _names_read(s)
    return need


def _building(stmts, b: ast.Call) -> Set[int]:
    """The ids of the statements of the list before the one holding backward ``b`` that
    its loss is computed from: a def-use closure that a plain assignment ends (the
    ``pred_fake = netD(cat(real_A, fake_B))`` of the G step is not what the D step's
    ``pred_fake`` of the same name, assigned again before it, is). A compound
    statement or an augmented assignment ends nothing: it may keep the value."""
    need = {n.id for n in A.walk_all(b) if isinstance(n, ast.Name)}
    out: Set[int] = set()
    for s in reversed(_stretch(stmts, None, b)):
        bound = _assigned(s)
        if not bound & need:
            continue
        out.add(id(s))
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            need -= bound
        need |= _names_read(s)
    return out


def _built_from(stmts, b: ast.Call) -> Set[int]:
    """:func:`_building`, reading what a compound statement binds inside it too
    (``if wass_metric: d_loss = ... else: d_loss = ...``), which ends nothing."""
    need = {n.id for n in A.walk_all(b) if isinstance(n, ast.Name)}
    out: Set[int] = set()
    for s in reversed(_stretch(stmts, None, b)):
        plain = isinstance(s, (ast.Assign, ast.AnnAssign))
        bound = _assigned(s) if plain else set(_stored(s))
        if not bound & need:
            continue
        out.add(id(s))
        if plain:
            need -= bound
        need |= _names_read(s)
    return out


def _stored(s: ast.stmt) -> FrozenSet[str]:
    """The names ``s`` stores to anywhere in it (nested blocks and defs included)."""
    return frozenset(n.id for n in A.walk_all(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


def _callee(call: ast.Call) -> str:
    return A.dotted(call.func) or _short(call.func)


# ---------------------------------------------------------------------------
# retain-then-step


def _nested(found: list) -> bool:
    """Is one of the matched nodes (a node, or a tuple starting with one) inside another?"""
    calls = [m[0] if isinstance(m, tuple) else m for m in found]
    return any(d is not c and any(n is d for n in A.iter_nodes(c)) for c in calls for d in calls)


def _step_calls(stmt: ast.stmt) -> List[Tuple[ast.Call, str]]:
    """``opt.step()`` calls anywhere in a statement (nested blocks, not nested defs),
    last first."""
    return _calls_in(stmt, "step", _step_call, False)


def _step_call(n: ast.AST) -> Optional[Tuple[ast.Call, str]]:
    """A step (SAM's ``first_step()`` too) of the optimizer its receiver names: GG103
    asks what the receiver was built from (a scaler's construction trains nothing)."""
    name = S.stepped(n, two_step=True)
    return (n, name) if name else None  # type: ignore[return-value]


_OWNED_MEMO = _local()


def _owned(opt: str, ctx, depth: int = 2) -> Set[str]:
    """The names of what ``opt`` was built from (``Adam(D.parameters())`` → D,
    parameters, ...), through a name the construction reads (``ge_chain =
    ichain(generator.parameters(), ...)``); empty when it cannot be read.

    Remembered per file text (the same ``lines`` object) and thread: the answer
    is read off the whole file, and every unit of a file with many steps and
    backward calls asks it again (a 7,000-line file took minutes without it)."""
    lines = ctx.index.lines
    memo = getattr(_OWNED_MEMO, "memo", None)
    if memo is None or memo[0] is not lines:
        table: Dict[Tuple[str, int], FrozenSet[str]] = {}
        memo = (lines, table)
        _OWNED_MEMO.memo = memo
    table = memo[1]
    key = (opt, depth)
    got = table.get(key)
    if got is None:
        got = table[key] = frozenset(_owned_uncached(opt, ctx, depth))
    return set(got)


def _owned_uncached(opt: str, ctx, depth: int) -> Set[str]:
    out: Set[str] = set()
    made = _constructions(opt, ctx.index.lines)
    if not made and "." in opt:
        # an optimizer kept by the module it trains (``agent.actor.optimizer``, made in
        # ActorNetwork.__init__ as ``self.optimizer = Adam(self.parameters())``): that module
        holder, attr = opt.rsplit(".", 1)
        own = _constructions("self." + attr, ctx.index.lines)
        if own and all(_of_own_parameters(v) for v in own):
            return {holder.rsplit(".", 1)[-1]}
    for value in made:
        try:
            tree = ast.parse(value, mode="eval")
        except SyntaxError:
            continue
        for n in A.walk_all(tree):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
        if depth > 0 and isinstance(tree.body, ast.Call):
            # a list of parameters built beforehand: Adam(ge_chain, ...), Adam(a + b)
            for arg in tree.body.args[:1]:
                receivers = _receivers(arg)
                for n in A.walk_all(arg):
                    if isinstance(n, ast.Name) and n.id != opt and id(n) not in receivers:
                        out |= _owned(n.id, ctx, depth - 1)
    return out


def _of_own_parameters(value: str) -> bool:
    """``Adam(self.parameters(), lr=...)``: an optimizer of the object's own parameters."""
    try:
        tree = ast.parse(value, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(tree, ast.Call) and bool(tree.args) and isinstance(tree.args[0], ast.Call) \
        and A.dotted(tree.args[0].func) == "self.parameters"


def _receivers(root: ast.AST) -> Set[int]:
    """``D`` in ``D.parameters()`` (ids): read as an object, not as a list of parameters."""
    out: Set[int] = set()
    for n in A.walk_all(root):
        if isinstance(n, ast.Attribute):
            out.add(id(n.value))
        elif isinstance(n, ast.Call):
            out.add(id(n.func))
    return out


def _module_name(node: ast.AST) -> Optional[str]:
    """``D(x)`` → D, ``self.netD(x)`` → netD: the module a graph token calls."""
    if isinstance(node, ast.Call):
        name = A.dotted(node.func)
        if name and name.endswith(".forward") and name.count(".") >= 1:
            name = name[:-8]  # agent.actor.forward(state): the module agent.actor
        if name:
            return name.split(".")[-1]
    return None


def _holders(stmts, nodes) -> List[ast.stmt]:
    """The statements of ``stmts`` that hold one of ``nodes``."""
    return [s for s in stmts if any(any(n is h for n in A.walk_all(s)) for h in nodes)]


def _held_before(stmts, i: int, node) -> bool:
    """``_holder_of(stmts[:i], node) is not None``, without a new list to index."""
    k = _index_holding(stmts, node)
    return k is not None and k < i


def _holder_of(stmts, node) -> Optional[ast.stmt]:
    """The statement of ``stmts`` that holds ``node``, or None."""
    k = _index_holding(stmts, node)
    return None if k is None else stmts[k]


def _innermost_stmt(stmt: ast.stmt, node: ast.AST) -> ast.stmt:
    """The innermost statement inside ``stmt`` that holds ``node``."""
    best = stmt
    for n in A.walk_all(stmt):
        if isinstance(n, ast.stmt) and any(m is node for m in A.walk_all(n)):
            if (n.lineno, n.col_offset) >= (best.lineno, best.col_offset) and n is not best:
                best = n
    return best


def _check_stepped(rule, block, events, saving, reported, ctx, entry=None, kept=None, unit=None,
                   data_layers=None) -> Iterator[Finding]:
    stmts = _inline(block)
    if not stmts:
        return
    start = _pos(block[0])
    steps: List[Tuple[int, ast.stmt, ast.Call, str]] = []
    helper_steps: List[Tuple[int, ast.stmt, ast.Call, str]] = []  # in a helper: update_params(opt, ...)
    for i, s in enumerate(stmts):
        for call, opt in _step_calls(s):
            steps.append((i, s, call, opt))
        for call, opt in _helper_step_calls(s, unit, ctx):
            helper_steps.append((i, s, call, opt))
    if not steps and not helper_steps:
        return
    all_steps, all_helper_steps = steps, helper_steps
    for j, s in enumerate(stmts):
        for b2, ev2 in _unreported(s, ctx, events, reported):
            # a step under a test that clashes with the backward's (``if train_dis:`` ...
            # ``if not train_dis:``) never runs before it in the same pass
            steps = [st for st in all_steps if st[0] > j or not A.never_both_run(stmts, st[0], st[2], j, b2)]
            helper_steps = [st for st in all_helper_steps
                            if st[0] > j or not A.never_both_run(stmts, st[0], st[2], j, b2)]
            if not A.is_backward_call(b2, ctx):
                if kept and ev2.sure is not None:  # an own method run in place (GraphFlow._inline)
                    f = _kept_stepped(rule, stmts, j, b2, ev2, steps, start, kept, ctx)
                    if f is not None:
                        reported.add(id(b2))
                        yield f
                        continue
                if ev2.sure is None and _helper_facts(b2, unit, ctx) is not None:
                    # a helper that back-propagates (update_params(optim, net, loss))
                    f = _helper_stepped(rule, stmts, j, b2, ev2, steps + helper_steps, saving, start, events,
                                        unit, ctx)
                    if f is not None:
                        reported.add(id(b2))
                        yield f
                continue
            for i, s_step, step, opt in steps:
                if not (i < j or (i == j and _pos(step) < _pos(b2) and not _exclusive(s, step, b2))):
                    continue
                # the graphs the second loss holds that could make a finding, before
                # the optimizer is read (reading it parses its construction)
                tokens = ev2.loss.graph_tokens()
                built = [t[1] for t in tokens if id(t[1]) in saving and start <= _pos(t[1]) < _pos(step)]
                if not built and not (entry and any(id(t[1]) in entry for t in tokens)):
                    continue
                owned = _owned(opt, ctx)
                if not owned:
                    continue  # an optimizer we cannot read: no proof
                if entry:
                    # a parameter whose callers pass what another method of this object
                    # built through a module the step updates: built before the method ran
                    passed = [(entry[id(t[1])], t[1]) for t in tokens
                              if id(t[1]) in entry and entry[id(t[1])][2] & owned]
                    if passed:
                        reported.add(id(b2))
                        yield _passed_finding(rule, step, opt, b2, passed[0], owned, ctx)
                        break
                held: Dict[int, str] = {}  # an object's call: the module it was handed that the step trains
                hit = [n for n in built if _held_before(stmts, i, n) and (
                    _module_name(n) in owned and not _other_positions_stepped(n, stmts, b2, opt, unit, ctx)
                    and not _named_subset(opt, _module_name(n), ctx, steps)
                    # one nn.Linear on graph-free input saved that input, not its weight
                    and not (data_layers and data_layers.get(id(n)))
                    or _held_stepped(n, stmts, b2, opt, events, ev2, unit, ctx, held))]
                if not hit or _rebound_after_step(stmts[:i], s_step, step, hit):
                    continue
                reported.add(id(b2))
                yield _stepped_finding(rule, stmts, i, s_step, step, opt, j, b2, hit, ctx,
                                       module=held.get(id(min(hit, key=_pos))))
                break
            else:
                if steps or helper_steps:
                    f = _helper_stepped(rule, stmts, j, b2, ev2, steps + helper_steps, saving, start, events,
                                        unit, ctx)
                    if f is not None:
                        reported.add(id(b2))
                        yield f


_WHOLE = frozenset({"parameters", "named_parameters"})


def _named_subset(opt: str, module: Optional[str], ctx, steps) -> bool:
    """Does every construction of ``opt`` hand it only named lists of ``module``'s
    parameters (``Adam(self.network.actor_params)``), never ``module.parameters()``
    itself nor a sub-module's ``.parameters()``, and
    no part that another optimizer stepped in the block names too (``actor_params +
    phi_params`` beside ``critic_params + phi_params``: a body both losses may go
    through)? Its step then changes only its own part: which of those weights another
    loss's graph through ``module`` saved is not known (an actor's and a critic's
    parameter lists share none)."""
    parts = _named_parts(opt, module, ctx)
    if not parts:
        return False
    for _, _, _, other in steps:
        if other != opt and (_named_parts(other, module, ctx) or set()) & parts:
            return False
    return True


_WHOLE = frozenset({"parameters", "named_parameters"})


def _named_parts(opt: str, module: Optional[str], ctx) -> Optional[Set[str]]:
    """The attributes of ``module`` (``actor_params``) the constructions of
    ``opt`` read its parameters through; None when one hands it ``module.parameters()``,
    the module itself, or does not name it."""
    made = _constructions(opt, ctx.index.lines)
    if not made or module is None:
        return None
    out: Set[str] = set()
    for value in made:
        try:
            tree = ast.parse(value, mode="eval")
        except SyntaxError:
            return None
        parts = 0
        # net.q.parameters(): a sub-module, which the other loss may well go through
        # (q_pi = Q(x, pi(x))): only a named list of parameters is a part
        modules = {id(n.value) for n in A.walk_all(tree) if isinstance(n, ast.Attribute) and n.attr in _WHOLE}
        for n in A.walk_all(tree):
            if not isinstance(n, ast.Attribute):
                continue
            v = n.value
            if (isinstance(v, ast.Name) and v.id == module) or (isinstance(v, ast.Attribute) and v.attr == module):
                if n.attr in _WHOLE or id(n) in modules:
                    return None
                parts += 1
                out.add(n.attr)
        mentions = sum(1 for n in A.walk_all(tree) if (isinstance(n, ast.Name) and n.id == module)
                       or (isinstance(n, ast.Attribute) and n.attr == module))
        if not parts or parts != mentions:
            return None  # the module itself handed over (get_params(net)), or not named here
    return out


def _exclusive(stmt: ast.stmt, a: ast.AST, b: ast.AST) -> bool:
    """Do ``a`` and ``b`` (inside ``stmt``) sit on the two branches of one ``if`` that
    no loop inside ``stmt`` runs again (``if shared: opt.step() else: loss.backward()``)?
    One run of ``stmt`` then runs at most one of them."""
    node: ast.AST = stmt
    while True:
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return False  # both branches may run, one iteration each
        if isinstance(node, ast.If):
            in_body = [any(n is x for s in node.body for n in A.walk_all(s)) for x in (a, b)]
            in_else = [any(n is x for s in node.orelse for n in A.walk_all(s)) for x in (a, b)]
            if (in_body[0] and in_else[1]) or (in_body[1] and in_else[0]):
                return True
        inner = next((c for block in A.child_blocks(node) for c in block
                      if any(n is a for n in A.walk_all(c)) and any(n is b for n in A.walk_all(c))), None) \
            if isinstance(node, ast.stmt) else None
        if inner is None:
            return False
        node = inner


def _helper_facts(call: ast.AST, unit, ctx) -> Optional[V.FnFacts]:
    """The facts of the same-file function (``update_params(...)``) or own method
    (``self.calc_policy_loss(...)``, ``unit`` being a method of that class) a call runs."""
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Name):
        got = ctx.summary.get("fn:" + f.id)
        return got if isinstance(got, V.FnFacts) else None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
            and unit is not None and unit.class_node is not None:
        cf = ctx.summary.get("class:" + unit.class_node.name)
        if isinstance(cf, V.ClassFacts):
            return next((m for name, m in cf.methods if name == f.attr), None)
    return None


def _helper_step_calls(stmt: ast.stmt, unit, ctx) -> List[Tuple[ast.Call, str]]:
    """Calls in ``stmt`` of same-file functions or own methods that surely step an
    optimizer (``FnFacts.steps``): (the call, the optimizer as the caller names it:
    the argument handed for the stepped parameter, or ``self.<attr>`` of an own method)."""
    out: List[Tuple[ast.Call, str]] = []
    for n in A.walk_all(stmt):
        if not isinstance(n, ast.Call):
            continue
        facts = _helper_facts(n, unit, ctx)
        if facts is None or not facts.steps:
            continue
        for name, sure in facts.steps:
            if not sure:
                continue
            if name in facts.params:
                arg = facts.argument(facts.params.index(name), n.args, {k.arg: k.value for k in n.keywords if k.arg})
                got = A.dotted(arg) if arg is not None else None
            else:
                got = name if name.startswith("self.") and isinstance(n.func, ast.Attribute) else None
            if got:
                out.append((n, got))
    return out


def _reached_modules(node: ast.Call, holder: ast.stmt, need: Set[str], unit, ctx) -> Optional[Tuple[Set[str], str]]:
    """What the value a same-file function or own method returned (``node``) was built
    through, reading the returned positions the second loss uses (``q1_loss, q2_loss =
    self.calc_critic_loss(batch)``: only ``q2_loss``'s): the modules held on ``self``
    (``RetPos.modules``) or the module-level modules (``FnFacts.returns_modules_via``)
    whose calls saved their weights, or the module-level callables it called
    (``RetPos.assumed_via``: ``netD`` of ``d_fake_g = netD(pred)``). (names, "self." or ""),
    or None."""
    facts = _helper_facts(node, unit, ctx)
    if facts is None or facts.no_grad:
        return None
    method = isinstance(node.func, ast.Attribute)
    positions: Optional[List[int]] = None
    if facts.returns is not None and isinstance(holder, ast.Assign) and holder.value is node \
            and len(holder.targets) == 1 and isinstance(holder.targets[0], (ast.Tuple, ast.List)):
        elts = holder.targets[0].elts
        if len(elts) == len(facts.returns) and all(isinstance(e, ast.Name) for e in elts):
            positions = [p for p, e in enumerate(elts) if e.id in need]  # type: ignore[attr-defined]
    out: Set[str] = set()
    if method:
        cf = ctx.summary.get("class:" + unit.class_node.name) if unit is not None and unit.class_node else None
        attrs = cf.attrs if isinstance(cf, V.ClassFacts) else ()
        poss = facts.returns if facts.returns is not None else (facts.ret,)
        for p, rp in enumerate(poss):
            if positions is None or p in positions:
                out |= rp.modules
                for k, _ in rp.via:  # a call of a module of a class of this file: the attributes made by it
                    cls = facts.calls[k][0].rsplit(".", 1)[-1] if k < len(facts.calls) else None
                    out |= {a for a, ctor in attrs if cls and ctor.rsplit(".", 1)[-1] == cls}
        return (out, "self.") if out else None
    # a module-level function: the module-level callables its graph came from (which the
    # summary cannot see into: RetPos.assumed_via), the modules among them named by the
    # optimizers' constructions (the caller compares)
    poss = facts.returns if facts.returns is not None else (facts.ret,)
    kws = {k.arg: k.value for k in node.keywords if k.arg}
    for p, rp in enumerate(poss):
        if positions is None or p in positions:
            out |= rp.assumed_via
            for i in rp.called:  # losses(d, g, x): the module handed for a parameter called on a graph
                arg = facts.argument(i, node.args, kws)
                got = A.dotted(arg) if isinstance(arg, ast.expr) else None
                if got and not got.startswith("self."):
                    out.add(got)
    return (out, "") if out else None


def _owner_paths(opt: str, ctx, depth: int = 2) -> Optional[Set[str]]:
    """The modules an optimizer trains, as paths (``Adam(self.critic.Q1.parameters())``
    → ``critic.Q1``; ``self.`` dropped), through an alias (``g_optim = self.optim_g``);
    None when a construction hands it anything else (a list built elsewhere) or none is
    found: no proof."""
    made = _constructions(opt, ctx.index.lines)
    if not made:
        return None
    out: Set[str] = set()
    for value in made:
        try:
            tree = ast.parse(value, mode="eval").body
        except SyntaxError:
            return None
        if re.fullmatch(r"[\w.]+", value) and depth > 0:
            more = _owner_paths(value, ctx, depth - 1)
            if more is None:
                return None
            out |= more
            continue
        if not isinstance(tree, ast.Call) or not tree.args:
            return None
        found = False
        for n in A.walk_all(tree.args[0]):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in ("parameters", "named_parameters"):
                got = A.dotted(n.func.value)
                if got is None or got == "self":
                    return None
                out.add(got[5:] if got.startswith("self.") else got)
                found = True
        if not found:
            return None
    return out


def _already_through(node: ast.AST, k: int, b2: ast.Call, ev2, events, stmts, unit, ctx) -> bool:
    """Did a backward that keeps no graph, between the statement building ``node`` and
    ``b2``, run through ``node``'s graph already (``update_params(self.q1_optim, ...,
    q1_loss)`` before ``q2_loss``'s, both from ``self.calc_critic_loss(batch)``)? The
    program went on: what that backward freed is not what ``b2`` needs, and an
    optimizer trained only on a part of the module (``critic.Q1``) updated what it
    reached, not the rest."""
    lo = _pos(stmts[k])
    for ev in events.values():
        if ev is ev2 or not (lo < _pos(ev.call) < _pos(b2)) or ev.retain and _retained_by_call(ev.call, unit, ctx):
            continue
        if any(t[1] is node for t in ev.loss.graph_tokens()):
            return True
    return False


def _own_method(call: ast.AST, unit):
    """The def of the own method a call ``self.m(...)`` runs (``unit`` a method of its class)."""
    cls = unit.class_node if unit is not None else None
    f = call.func if isinstance(call, ast.Call) else None
    if cls is None or not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"):
        return None
    return next((d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == f.attr),
                None)


def _returned_before_own_step(call: ast.AST, unit) -> bool:
    """Does the own method (``self.train_critic_sequential(...)``) return, by name, values
    bound before the optimizer step it makes as a statement of its body (``advantages =
    target - v`` ... ``self.critic_optimiser.step()`` ... ``return advantages``)? Then what
    it returns holds a graph whose saved weights its own step changed."""
    fn = _own_method(call, unit)
    if fn is None:
        return False
    step_line = next((s.lineno for s in fn.body if isinstance(s, ast.Expr) and S.stepped(s.value, scaler=True)), None)
    rets = [n for n in A.body_nodes(fn) if isinstance(n, ast.Return)]
    if step_line is None or not rets:
        return False
    for r in rets:
        names = r.value.elts if isinstance(r.value, (ast.Tuple, ast.List)) else [r.value]
        for v in names:
            if not isinstance(v, ast.Name) or r.lineno < step_line:
                return False
            bound = [s.lineno for s in A.iter_statements(fn.body) if isinstance(s, (ast.Assign, ast.AugAssign))
                     and any(isinstance(t, ast.Name) and t.id == v.id for t in
                             (s.targets if isinstance(s, ast.Assign) else [s.target]))]
            if not bound or max(bound) > step_line:
                return False
    return True


def _module_call_in_method(call: ast.Call, attr: str, unit) -> Optional[ast.Call]:
    """In the own method ``call`` runs (``self.calc_policy_loss(batch)``), its first call of
    ``self.<attr>`` (``self.critic(states, actions)``): where the graph through that module
    is built, shown beside the call."""
    cls = unit.class_node if unit is not None else None
    name = call.func.attr if isinstance(call.func, ast.Attribute) else None
    fn = next((d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == name),
              None) if cls is not None and name else None
    if fn is None:
        return None
    for n in A.body_nodes(fn):
        if isinstance(n, ast.Call) and A.dotted(n.func) in ("self." + attr, "self." + attr + ".forward"):
            return n
    return None


def _retained_by_call(call: ast.AST, unit, ctx) -> bool:
    """Does a retaining backward event keep its graph as called? A helper whose backward
    takes ``retain_graph`` from a parameter defaulting to no (``FnFacts.retain_param``)
    keeps it only when the call hands that parameter something not false."""
    facts = _helper_facts(call, unit, ctx) if not A.is_backward_call(call, ctx) else None
    if facts is None or facts.retain_param is None:
        return True
    arg = facts.argument(facts.retain_param, call.args, {k.arg: k.value for k in call.keywords if k.arg})  # type: ignore[attr-defined]
    return arg is not None and not (isinstance(arg, ast.Constant) and arg.value in (False, None))


def _helper_stepped(rule, stmts, j, b2, ev2, steps, saving, start, events, unit, ctx) -> Optional[Finding]:
    """The step-then-backward shape where a same-file function or method stands between:
    the second loss (or its backward: ``update_params(optim, net, loss)``) holds what a
    helper returned (``policy_loss = self.calc_policy_loss(batch)``), built through a module
    (``self.critic``) an optimizer step between them updates (``optim.step()`` inside the
    helper that updated the critic). The module is read off the helper's facts, for the
    returned positions the loss uses; a step of an optimizer trained on only a part of that
    module (``critic.Q1``) counts unless a backward keeping no graph already ran through
    the value (then that part was its own)."""
    before = [st for st in steps if st[0] < j or (st[0] == j and _pos(st[2]) < _pos(b2))]
    if not before:
        return None
    need = _inputs_of(stmts, b2)
    for t in sorted(ev2.loss.graph_tokens(), key=lambda t: _pos(t[1])):
        node = t[1]
        if not isinstance(node, ast.Call) or _pos(node) < start:
            continue
        k = _index_holding(stmts, node)
        if k is None:
            continue
        got = _reached_modules(node, stmts[k], need, unit, ctx)
        if got is None:
            continue
        reach, prefix = got
        for i, s_step, step, opt in reversed(before):  # the last step: a recompute goes after it
            inside = step is node and _returned_before_own_step(node, unit)  # the helper steps after building it
            if i <= k and not inside:
                continue
            paths = _owner_paths(opt, ctx)
            if not paths:
                continue
            full = sorted(m for m in reach for p in paths if p == m or m.startswith(p + "."))
            part = sorted(m for m in reach for p in paths if p.startswith(m + "."))
            if not full and not (part and not _already_through(node, k, b2, ev2, events, stmts, unit, ctx)):
                continue
            if _rebound_after_step(stmts[:i], s_step, step, [node]):
                continue
            attr = (full or part)[0]
            module = prefix + attr
            if inside:  # name the step inside the method, where it runs
                fn = _own_method(node, unit)
                step = next((st.value for st in getattr(fn, "body", ()) if isinstance(st, ast.Expr)
                             and S.stepped(st.value, scaler=True)), step)
            return _stepped_finding(rule, stmts, i, s_step, step, opt, j, b2, [node], ctx, module=module,
                                    built_at=_module_call_in_method(node, attr, unit) if prefix else None,
                                    fixable=not inside)
    return None


def _check_stepped_inside(rule, events, reported, ctx) -> Iterator[Finding]:
    """A backward through what a module of the file returned (``G_loss = criterion(imgs,
    masks, fake, gt)``) whose ``forward`` built it through ``self.<module>`` and then
    stepped an optimizer that trains that module (``RetPos.stepped_after``: EraseNet's loss
    module stepping its discriminator inside ``forward``): the graph handed back saved
    weights that step changed, so any backward through it fails. No fix: where the
    discriminator should step is the user's choice."""
    for ev in list(events.values()):
        b2 = ev.call
        if id(b2) in reported or not A.is_backward_call(b2, ctx):
            continue
        for t in sorted(ev.loss.graph_tokens(), key=lambda t: _pos(t[1])):
            node = t[1]
            got = _stale_from_module(node, ctx)
            if got is None:
                continue
            module, opt, built, stepped_at = got
            reported.add(id(b2))
            step = _line_node(ctx, stepped_at, opt + ".step")
            made = _line_node(ctx, built, "self." + module)
            if step is None or made is None:
                break
            msg = M.stepped(_short(b2), _short(node), node.lineno, "self." + module, opt, stepped_at,
                            M.stepped_inside(_short(node.func)))
            related = (Related(ctx.range(made), M.graph_through_built_here("self." + module)),
                       Related(ctx.range(step), M.step_updates("self." + module)))
            yield Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, (),
                          {"variable": "self." + module, "step_line": stepped_at})
            break


def _stale_from_module(node: ast.AST, ctx) -> Optional[Tuple[str, str, int, int]]:
    """(module, optimizer, line of its call, line of the step) when ``node`` calls a
    module-level instance of a class of the file whose ``forward`` returns a graph through
    ``self.<module>`` built before a step of an optimizer made on that module's parameters."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return None
    raw = ctx.summary.get("var:" + node.func.id)
    cf = ctx.summary.get("class:" + raw) if isinstance(raw, str) else None
    if not isinstance(cf, V.ClassFacts):
        return None
    fwd = cf.method("forward")
    if fwd is None or fwd.no_grad or fwd.returns is not None or not fwd.ret.stepped_after:
        return None
    for module, opt, built, stepped_at in sorted(fwd.ret.stepped_after):
        paths = _owner_paths(opt, ctx)
        if not paths or not any(p == module or module.startswith(p + ".") for p in paths):
            continue
        ctor = cf.attr(module)
        held = ctx.summary.get("class:" + ctor) if ctor else None
        if isinstance(held, V.ClassFacts):
            inner = held.method("forward")
            if inner is None or not (inner.ret.modules or inner.returns_share):
                continue  # a module of the file whose forward is not known to save its weights
        return module, opt, built, stepped_at
    return None


def _line_node(ctx, line: int, text: str) -> Optional[ast.AST]:
    """A node standing for ``text`` where it is written on ``line`` (a fact carries lines)."""
    if line < 1 or line > len(ctx.index.lines):
        return None
    src = ctx.index.line(line - 1)
    col = src.find(text)
    if col < 0:
        return None
    start = len(src[:col].encode("utf-8"))
    n = ast.Name(text, ast.Load())
    n.lineno, n.col_offset, n.end_lineno, n.end_col_offset = line, start, line, start + len(text.encode("utf-8"))
    return n


def _kept_stepped(rule, stmts, j, b2, ev2, steps, start, kept, ctx) -> Optional[Finding]:
    """A driver's own method run in place (``self.backward_G()``) back-propagates what an
    earlier one left on the object (``self.backward_D()`` keeping ``self.pred_fake`` with
    ``retain_graph=True``), whose graph saved the weights of a module an optimizer step
    between them updates (``self.optimizer_D.step()``): torch's "modified by an inplace
    operation". Only where every attribute that method left with a graph was built
    through such a module (which of them the later method reads is not known). No fix:
    the value comes from another method."""
    by_call, deep = kept
    tokens = ev2.loss.graph_tokens()
    for i, s_step, step, opt in steps:
        if not (i < j or (i == j and _pos(step) < _pos(b2))):
            continue
        for t in tokens:
            node = t[1]
            left = by_call.get(id(node))
            if not left or not (start <= _pos(node) < _pos(step)):
                continue
            owned = _owned(opt, ctx)
            # every attribute built through a module the step updates, whose backward needs
            # that module's weights: a graph reaches it from before the module (its input),
            # or the module holds layers after one another (``nn.Sequential(Linear, ReLU,
            # Linear)``). A single layer on data needs only its input to back-propagate
            if not owned or not all(mods & owned and (before or mods & owned <= deep) for _, mods, before in left):
                continue
            if not _held_before(stmts, i, node):
                continue
            module = "self." + sorted(set().union(*(mods & owned for _, mods, _ in left)))[0]
            attrs = ", ".join(f"`{a}`" for a, _, _ in left)
            msg = M.kept_stepped(_short(b2), _short(node), node.lineno, attrs, module, opt, step.lineno)
            related = (
                Related(ctx.range(node), M.kept_here(attrs, module)),
                Related(ctx.range(step), M.step_updates(module)),
            )
            return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, (),
                           {"variable": left[0][0], "step_line": step.lineno})
    return None


def _deep_modules(cls: Optional[ast.ClassDef]) -> FrozenSet[str]:
    """The attributes of ``cls`` its methods set to an ``nn.Sequential`` of two or more
    layers with parameters (a graph through it saved the weights of all but the first)."""
    out: Set[str] = set()
    if cls is None:
        return frozenset()
    for n in A.walk_all(cls):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.value, ast.Call)):
            continue
        t = n.targets[0]
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
            continue
        if (A.dotted(n.value.func) or "").rsplit(".", 1)[-1] != "Sequential":
            continue
        layers = [a for a in n.value.args if isinstance(a, ast.Call)
                  and (A.dotted(a.func) or "").rsplit(".", 1)[-1] not in K.PARAMETERLESS_MODULES]
        if len(layers) >= 2:
            out.add(t.attr)
    return frozenset(out)


def _check_stepped_loops(rule, body, events, flow, reported, ctx) -> Iterator[Finding]:
    """The retain-then-step shape across a loop's iterations (SinGAN's generator steps):
    a graph built before the loop through a module, back-propagated with
    ``retain_graph=True`` in every iteration, while an optimizer step of the loop's own
    body updates that module: the second iteration's backward meets weights the first
    iteration's step changed in place. Only a step that runs on every iteration (a
    statement of the body itself) and a loop that runs on (no ``break``/``return`` in its
    body); a backward that frees the graph is GG102's (the graph is gone instead)."""
    for loop in A.iter_statements(body):
        if not isinstance(loop, (ast.For, ast.While)) or _jumps_out(loop.body):
            continue
        steps = [(call, opt) for s in loop.body if isinstance(s, ast.Expr) for call, opt in _step_calls(s)
                 if call is s.value]
        if not steps:
            continue
        entry = flow.loop_entries.get(id(loop)) or {}
        start = _pos(loop)
        before = {t for v in entry.values() for t in v.graph_tokens()
                  if _pos(t[1]) < start and _saves_own_weights(t[1], flow, ctx)}
        if not before:
            continue
        inside = [ev for ev in events.values() if A.within(ev.call, loop)]
        for ev in sorted(inside, key=lambda e: _pos(e.call)):
            b2 = ev.call
            if id(b2) in reported or not A.is_backward_call(b2, ctx) or not ev.retain:
                continue
            shared = before & ev.loss.graph_tokens()
            if not shared or any(not e.retain and shared & e.loss.graph_tokens() for e in inside):
                continue  # a backward of the loop frees it: the graph is gone (GG102 says so)
            hit = None
            for step, opt in steps:
                owned = _owned(opt, ctx)
                node = next((t[1] for t in sorted(shared, key=lambda t: _pos(t[1])) if _module_name(t[1]) in owned), None)
                if node is not None:
                    hit = (step, opt, node)
                    break
            if hit is None:
                continue
            step, opt, node = hit
            module = A.dotted(node.func) or _short(node.func)
            module = module[:-8] if module.endswith(".forward") else module
            reported.add(id(b2))
            msg = M.stepped_loop(_short(b2), _short(node), node.lineno, module, opt, step.lineno)
            related = (Related(ctx.range(node), M.built_before_loop(module)),
                       Related(ctx.range(step), M.step_updates(module)))
            yield Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, (),
                          {"variable": module, "step_line": step.lineno})


def _saves_own_weights(node: ast.AST, flow, ctx) -> bool:
    """Did the call ``node`` (a module's forward) save that module's weights for its
    backward? A layer applied to data alone saves its input, not its weight (the weight's
    gradient needs only the input), so one ``nn.Linear`` on a batch does not; a layer
    after another one (its input then requires grad) does. Known: a user's module whose
    forward calls its own layers (``FnFacts`` modules, ``GraphFlow.saved_weights``), or
    an ``nn.Sequential`` built of two layers with parameters or more."""
    if id(node) in flow.saved_weights:
        return True
    if id(node) not in flow.saving_calls or not isinstance(node, ast.Call):
        return False
    name = A.dotted(node.func)
    if name is None:
        return False
    if name.endswith(".forward") and _forward_saves_weights(name[:-8], ctx):
        return True
    return any(map(_sequential_of_layers, _constructions(name, ctx.index.lines)))


_SEQUENTIALS: Dict[str, bool] = {}


def _sequential_of_layers(value: str) -> bool:
    """Is the constructor text ``value`` an ``nn.Sequential`` of two layers with
    parameters or more? (Remembered by text: a module's forward is asked about once
    per graph token that reaches a loop, each time parsing the same constructions.)"""
    got = _SEQUENTIALS.get(value)
    if got is None:
        if len(_SEQUENTIALS) > 4096:
            _SEQUENTIALS.clear()
        got = _SEQUENTIALS[value] = _parses_to_sequential(value)
    return got


def _parses_to_sequential(value: str) -> bool:
    try:
        made = ast.parse(value, mode="eval").body
    except SyntaxError:
        return False
    if not (isinstance(made, ast.Call) and (A.dotted(made.func) or "").rsplit(".", 1)[-1] == "Sequential"):
        return False
    layers = [a for a in made.args if isinstance(a, ast.Call)
              and (A.dotted(a.func) or "").rsplit(".", 1)[-1] not in K.PARAMETERLESS_MODULES]
    return len(layers) >= 2


def _forward_saves_weights(name: str, ctx) -> bool:
    """Is ``name`` (``agent.actor``, called as ``agent.actor.forward(x)``) made, as
    ``self.actor = ActorNetwork()`` somewhere in the file, by one class of the file whose
    ``forward`` runs two or more of its own layers on the way to its result (the later
    ones save their weights)?"""
    made = _constructions(name, ctx.index.lines) or _constructions("self." + name.rsplit(".", 1)[-1],
                                                                   ctx.index.lines)
    classes = set()
    for value in made:
        try:
            tree = ast.parse(value, mode="eval").body
        except SyntaxError:
            return False
        if not isinstance(tree, ast.Call):
            return False
        classes.add((A.dotted(tree.func) or "").rsplit(".", 1)[-1])
    if len(classes) != 1:
        return False
    cf = ctx.summary.get("class:" + classes.pop())
    fwd = next((m for n, m in cf.methods if n == "forward"), None) if isinstance(cf, V.ClassFacts) else None
    return fwd is not None and len(fwd.ret.modules) >= 2


def _jumps_out(stmts) -> bool:
    """A ``break`` or ``return`` (or ``raise``) among a loop body's own statements, nested
    blocks included but not nested loops' bodies nor scopes: the body may run once."""
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Return, ast.Raise)):
            return True
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if isinstance(s, (ast.For, ast.AsyncFor, ast.While)) and any(
                    isinstance(x, (ast.Return, ast.Raise)) for x in A.iter_statements(s.body)):
                return True
            continue
        for block in A.child_blocks(s):
            if _jumps_out(block):
                return True
    return False


def _passed_finding(rule, step, opt, b2, passed, owned, ctx) -> Finding:
    """The retain-then-step shape across methods (edge-connect's ``backward(gen_loss,
    dis_loss)``): the graph came in as an argument, so no edit here recomputes it;
    the message says what to do and no fix is offered."""
    (param, src, modules), arg = passed
    module = "self." + sorted(modules & owned)[0]
    second = _short(b2)
    msg = M.passed(second, param, src, module, opt, step.lineno)
    related = (
        Related(ctx.range(arg), M.comes_from(param, src, module)),
        Related(ctx.range(step), M.step_updates(module)),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, (),
                   {"variable": param, "step_line": step.lineno})


def _graph_reads(s: ast.AST) -> Set[str]:
    """The names ``s`` reads but those it reads for their shape only (``torch.rand_like(z)``,
    ``z.size(0)``, ``z.shape``, ``z.device``): what the values it computes depend on."""
    skip: Set[int] = set()
    for n in A.walk_all(s):
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) and (
                (A.dotted(n.func) or "").endswith("_like")):
            skip.add(id(n.args[0]))
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.attr in _SHAPE_ATTRS:
            skip.add(id(n.value))
    return {n.id for n in A.walk_all(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip}


_SHAPE_ATTRS = frozenset({"shape", "size", "dtype", "device", "ndim", "dim"})


def _names_read(s: ast.AST) -> Set[str]:
    return {n.id for n in A.walk_all(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_RANDOM = re.compile(r"(^|\.)(randn|rand|randint|randperm|normal|bernoulli|multinomial|randn_like|rand_like|"
                     r"randint_like|uniform|choice|shuffle|sample)$")


def _simple(s: ast.stmt) -> bool:
    if any(isinstance(n, ast.Call) and _RANDOM.search(A.dotted(n.func) or "") for n in A.walk_all(s)):
        return False  # drawn again, it would not be the same value
    return (isinstance(s, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in s.targets)
            and not any(isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield)) for n in A.walk_all(s))
            and not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr in ("backward", "step", "zero_grad", "append", "extend")
                        for n in A.walk_all(s)))


def _stepped_finding(rule, stmts, i, s_step, step, opt, j, b2, hit, ctx, module=None, built_at=None,
                     fixable=True) -> Finding:
    node = min(hit, key=_pos)
    if module is None:
        module = A.dotted(node.func) or _short(node.func)
    second = _short(b2)
    fix = _recompute_fix(stmts, i, s_step, step, j, b2, hit, ctx) if fixable else None
    how = M.nothing()
    fixes: List[Fix] = []
    if fix is not None:
        edits, kind, names = fix
        shown = ", ".join(f"`{n}`" for n in names)
        if kind == "detach":
            how = M.stepped_how_detached(shown, module)
            title = M.fix_recompute_detached(shown, opt)
        else:
            how = M.stepped_how_recompute(shown)
            title = M.fix_recompute_updated(shown, opt, module)
        if kind == "detach-read":
            how = M.stepped_how_detach_read(shown, module)
            title = M.fix_detach_read(shown, opt)
        fixes.append(Fix(title, tuple(edits), preferred=True))
    msg = M.stepped(second, _short(node), node.lineno, module, opt, step.lineno, how)
    related = (
        Related(ctx.range(built_at if built_at is not None else node), M.graph_through_built_here(module)),
        Related(ctx.range(step), M.step_updates(module)),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, tuple(fixes),
                   {"variable": module, "step_line": step.lineno})


def _recompute_fix(stmts, i, s_step, step, j, b2, hit, ctx):
    """Statements to run again right after the step. Whether the next update
    needs gradients *through* the stepped module decides how: a generator's
    loss through the critic the step just updated needs the critic called again
    ("recompute"); a critic's loss whose input came from the stepped generator
    only needs that input cut ("detach")."""
    second_names = _inputs_of(stmts, b2, deep=True)
    before = stmts[:i]  # statements before the one holding the step
    holders = _holders(before, hit)
    if not holders:
        return None
    bound: Set[str] = set()
    for h in holders:
        bound |= _assigned(h)
    # the optimizer stepped after the second backward: what the second loss trains
    nxt = _stepped_after(stmts, b2)
    trains = _owned(nxt, ctx) if nxt else set()
    # does something the second loss trains consume the stepped module's output (and
    # not the stepped module itself, whose gradient it then needs)?
    derived = set(bound)
    downstream = False
    producers = {_module_name(h) for h in hit}
    if producers & trains:
        derived = set()  # it trains what the step updated: run that forward again
    first = min(stmts.index(h) for h in holders)
    for s in stmts[first:j + 1]:
        if s in holders:
            continue
        reads = _names_read(s)
        if reads & derived:
            for n in A.walk_all(s):
                if isinstance(n, ast.Call) and _module_name(n) in trains and _names_read(n) & derived:
                    downstream = True
            derived |= _assigned(s)
    redo: List[ast.stmt] = []
    if downstream:
        # cut: the statements that read the stepped output, again, from its detached value,
        # and those that build the second loss from what they bind (the loss itself was
        # built before the step: recomputing only its input would leave it on the old graph);
        # not those that only feed the statements that built the shared value (``z_l =
        # cat(z, labels)`` before ``generated = G(z_l)``): that value is cut anyway
        feeding = _inputs_of(stmts, b2, deep=True, through=holders)
        # what the second loss is built from, each name from its last binding before it:
        # a statement before the step whose names are bound again after it is not (GenB's
        # discriminator loss on ``discriminator(pred_g)`` written again after the G step)
        building = _built_from(stmts, b2)
        made: Set[str] = set()
        for s in before[first:]:
            if s in holders:
                continue
            if _graph_reads(s) & (bound | made) and _assigned(s) & feeding and id(s) in building:
                redo.append(s)
                made |= _assigned(s)
        kind = "detach"
        # ... and one after the step that reads the stepped output itself: detach it there,
        # where the value is read (a recompute after the step would come too early to matter)
        late = _late_reads(stmts, i, j, bound, building)
        if late:
            if redo:
                return None  # (both: not a plain shape)
            return [_detach_edit(n, ctx) for n in late], "detach-read", sorted({n.id for n in late})
    else:
        have: Set[str] = set()
        for s in before[first:]:
            if (s in holders or _names_read(s) & have) and _assigned(s) & second_names:
                redo.append(s)
                have |= _assigned(s)
        kind = "recompute"
    if not redo or not all(_simple(s) for s in redo):
        return None
    # nothing each reads is rebound between it and the step (MolGAN's ``reward_r``, bound
    # between the first statement run again and ``loss_V``, which read it then as it will)
    kept_between: Set[str] = set()  # names the statements run again read as they were
    for s in redo:
        written_after: Set[str] = set()
        for t in stmts[stmts.index(s) + 1:i]:
            if t not in redo:
                written_after |= _assigned(t)
        if _names_read(s) & written_after:
            return None
        for t in stmts[stmts.index(redo[0]) + 1:stmts.index(s)]:
            if t not in redo:
                kept_between |= _assigned(t) & _names_read(s)
    # ... unless another step follows before the second backward (a SAC agent's second
    # critic: ``current_q_sa_b``, read as it was, holds the graph that step changes)
    if kept_between and _steps_what_kept_reads(stmts, i, j, b2, kept_between, ctx):
        return None
    return _recompute_edit(stmts, i, s_step, step, j, b2, redo, kind, bound, second_names, ctx)


def _late_reads(stmts, i, j, bound: Set[str], building: Set[int]) -> List[ast.Name]:
    """The reads of the stepped output (``bound``) by the plain statements after the step
    (``stmts[i]``) that the second loss is built from, not cut where they are read (a
    compound one, ``if wass_metric: ... calc_gradient_penalty(D, real, gen_imgs)``, is
    left as it was: which of its reads run is not plain)."""
    out: List[ast.Name] = []
    rebound: Set[str] = set()
    for t in stmts[i + 1:j]:
        if id(t) in building and _simple(t):
            out.extend(n for name in sorted(bound - rebound) for n in _uncut_uses(t, name)
                       if isinstance(n.ctx, ast.Load))
        rebound |= _assigned(t) & bound
    return out


def _recompute_edit(stmts, i, s_step, step, j, b2, redo, kind, bound, second_names, ctx):
    texts = []
    for s in redo:
        if kind == "detach":
            s2 = _DetachNames(bound).visit(ast.parse(ast.unparse(s)).body[0])
            texts.append(ast.unparse(s2))
        else:
            texts.append(ast.unparse(s))
    inner = _innermost_stmt(s_step, step)
    end = inner.end_lineno or inner.lineno
    line_text = ctx.index.line(inner.lineno - 1)
    indent = line_text[: len(line_text) - len(line_text.lstrip())]
    new = "".join(f"{indent}{t}\n" for t in texts)
    at = ctx.pos(end + 1, 0)
    later = _late_recompute(stmts, i, j, b2, redo, ctx) if kind == "recompute" and inner is s_step else None
    if later is not None:
        at = ctx.pos(later.lineno, 0)
    shown: List[str] = []
    for s in redo:
        for bound_name in sorted(_assigned(s)):
            if bound_name in second_names and bound_name not in shown:
                shown.append(bound_name)
    return [TextEdit(Range(at, at), new)], kind, shown


def _steps_what_kept_reads(stmts, i, j, b2, kept: Set[str], ctx) -> bool:
    """Does a step between the step ``stmts[i]`` and the second backward ``b2`` train
    (or may it train: what it was built from unknown) a module the values in ``kept``
    were computed with (the statements before the step that bind them, and those
    their inputs come from)? A CAAE's Dz step between the E/G step and the Dimg loss
    leaves the Dimg loss on real images as it was."""
    steps = [opt for t in stmts[i + 1:j + 1] for c, opt in _step_calls(t) if _pos(c) < _pos(b2)]
    if not steps:
        return False
    need = set(kept)
    modules: Set[str] = set()
    for s in reversed(stmts[:i]):
        if _assigned(s) & need:
            need |= _names_read(s)
            modules |= _called_modules(s)
    # (a module used otherwise than called, ``W.weight @ x``; never ``self`` or an import)
    modules |= {n for n in need if n not in ctx.imports and n != "self"}
    for opt in steps:
        owned = _owned(opt, ctx)
        if not owned or (owned - {"self", "parameters", "named_parameters"}) & modules:
            return True
    return False


def _called_modules(s: ast.AST) -> Set[str]:
    """The modules the calls in ``s`` call (``_module_name`` of each call that names one)."""
    return {m for m in (_module_name(n) for n in A.walk_all(s) if isinstance(n, ast.Call)) if m}


def _late_recompute(stmts, i, j, b2, redo, ctx) -> Optional[ast.stmt]:
    """The statement before which the statements ``redo`` are best run again: the
    first one after the step (``stmts[i]``) that reads what they bind and builds the
    second loss (the confusion loss of a domain-unlearning step,
    ``domain_classifier(features)``), when a statement before it reads what they
    bind too. The statements in between then read what they read in the
    program as written (a domain step on ``features.detach()`` sees the features of
    before the step, as it did), so every step the program reached keeps its
    gradients. None (right after the step) when something in between binds a name
    the statements run again read or bind, or steps an optimizer that trains (or
    may train) a module they call."""
    made: Set[str] = set()
    reads: Set[str] = set()
    modules: Set[str] = set()
    for s in redo:
        made |= _assigned(s)
        reads |= _names_read(s)
        modules |= _called_modules(s)
    building = _building(stmts, b2)
    read_between = False  # (else right after the step, as always: it changes nothing read)
    for k in range(i + 1, min(j, len(stmts) - 1) + 1):
        t = stmts[k]
        if _names_read(t) & made and (id(t) in building or k == j):
            return t if read_between else None
        read_between = read_between or bool(_names_read(t) & made)
        stored = {n.id for n in A.walk_all(t) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        if stored & (made | reads) or _opens_scope(t) or any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
                and not n.func.attr.endswith("__") and _names_read(n.func.value) & (made | reads)
                for n in A.walk_all(t)):
            return None  # (rebinds or edits in place what they read: they would read it changed)
        for _, opt in _step_calls(t):
            owned = _owned(opt, ctx)
            if not owned or owned & modules:
                return None
    return None


class _DetachNames(ast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.names:
            return ast.Call(ast.Attribute(ast.Name(node.id, ast.Load()), "detach", ast.Load()), [], [])
        return node


def _only_through_shared(flow, b2, shared, ctx) -> bool:
    """Does the second backward's loss reach no graph (nor leaf requiring grad) but the
    shared one (as the interpreter's run saw it)? False when that is not known."""
    if flow is None:
        return False
    ev = next((e for e in flow.events if e.call is b2), None)
    if ev is None:
        return False
    own = set(shared)
    graph = [t for t in ev.loss.taints if t[0] in ("G", "L", "U", "P") and t not in own]
    return bool(own & ev.loss.taints) and all(_parameterless_call(t[1], ctx) for t in graph)


def _parameterless_call(node, ctx) -> bool:
    """``criterion(output, label)`` with ``criterion = nn.BCELoss()``: a call of a torch
    module that has no parameters (its graph token brings nothing to train)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return False
    raw = ctx.summary.get("var:" + node.func.id)
    return isinstance(raw, str) and raw.rsplit(".", 1)[-1] in K.PARAMETERLESS_MODULES


def _detach_in_second(stmts, holder, s1, b1, b2, name, shared, ctx):
    """``name`` → ``name.detach()`` in the statements that build only the second
    loss, when the optimizer stepped after the second backward does not train the
    module that produced ``name`` (a discriminator step after the generator's):
    ([edits], optimizer) or None."""
    nxt = _stepped_after(stmts, b2)
    if nxt is None:
        return None
    trains = _owned(nxt, ctx)
    producers = {_module_name(t[1]) for t in shared}
    if not trains or None in producers or producers & trains:
        return None
    first_in = _building(stmts, b1)
    second_in = _building(stmts, b2)
    edits: List[TextEdit] = []
    for s in _stretch(stmts, holder, b2):  # from the shared value to the second loss
        reads = _uncut_uses(s, name)
        if not reads:
            continue
        if id(s) not in second_in:
            continue
        if id(s) in first_in or s is s1:
            return None  # it builds the first loss too
        if _opens_scope(s):  # (asked of the statements it rewrites only)
            return None
        for n in reads:
            if not isinstance(n.ctx, ast.Load):
                return None
            edits.append(_detach_edit(n, ctx))
    return (edits, nxt) if edits else None


def _stepped_after(stmts, b2: ast.Call) -> Optional[str]:
    """The optimizer stepped first after the second backward ``b2``, in the statement
    of the list that holds it (the last step there after it) or a later one: what
    the second loss trains."""
    j = _index_holding(stmts, b2)
    for s in stmts[j:] if j is not None else ():
        for call, opt in _step_calls(s):
            if _pos(call) > _pos(b2):
                return opt
    return None


def _producer_zeroed(stmts, s1, b2, shared, ctx) -> Optional[str]:
    """``optG.zero_grad()`` (an optimizer built from the shared value's producer) or
    ``G.zero_grad()`` between the two backward calls: the producer's gradients from
    the first loss are discarded before any step could use them. The call, or None."""
    producers = {_module_name(t[1]) for t in shared}
    if None in producers:
        return None
    for s in _stretch(stmts, s1, b2):  # between the two backward calls
        call = S.zeroing_statement(s)  # an unconditional statement of its own, nothing nested
        who = S.zeroed(call) if call is not None else None
        if not who:
            continue
        if who.split(".")[-1] in producers or producers <= _owned(who, ctx):
            return f"{who}.zero_grad()"
    return None


def _recompute_after_step(stmts, s1, b2, shared, ctx):
    """The statements that build the shared value and the second loss from it, run again
    right after the step between the two backward calls: (edits, kind, names, optimizer)."""
    j = _index_holding(stmts, b2)
    if j is None:
        return None
    for i in _span(stmts, s1, b2):  # between the two backward calls
        steps = list(_step_calls(stmts[i]))
        if not steps:
            continue
        step, opt = steps[0]
        hit = [t[1] for t in shared]
        fix = _recompute_fix(stmts, i, stmts[i], step, j, b2, hit, ctx)
        if fix is None or fix[1] != "recompute":
            return None
        return fix[0], fix[1], fix[2], opt
    return None


def _rebound_after_step(before, s_step: ast.stmt, step: ast.Call, hit) -> bool:
    """A step inside a branch (``if i % n_skip == 0: ...; opt.step()``) followed, in
    that branch, by statements that compute again what the hit parts flow into: the
    branch that steps recomputes them, the one that does not keeps a graph no step
    changed."""
    holders = _holders(before, hit)
    flows: Set[str] = set()
    for h in holders:
        flows |= _assigned(h)
    for s in before:
        if s not in holders and _names_read(s) & flows:
            flows |= _assigned(s)
    return bool(_assigned_after(s_step, step) & flows)


def _assigned_after(stmt: ast.stmt, step: ast.Call) -> Set[str]:
    """Names assigned after ``step`` in the innermost statement list inside ``stmt`` holding it."""
    for block in A.child_blocks(stmt):
        for k, st in enumerate(block):
            if any(n is step for n in A.walk_all(st)):
                inner = _assigned_after(st, step)
                if inner or A.child_blocks(st):
                    return inner
                later: Set[str] = set()
                for t in block[k + 1:]:
                    later |= _assigned(t)
                return later
    return set()


def _detach_edit(node: ast.AST, ctx) -> TextEdit:
    """``.detach()`` written right after ``node``."""
    at = ctx.pos(getattr(node, "end_lineno", 0), getattr(node, "end_col_offset", 0))
    return TextEdit(Range(at, at), ".detach()")


def _uncut_uses(s: ast.stmt, name: str) -> List[ast.Name]:
    """The uses of the name ``name`` in ``s`` (stores too: the caller decides), but
    those already cut where they are read (``fake.detach()``), in walk order."""
    cut = _detached_names(s)
    return [n for n in A.walk_all(s) if isinstance(n, ast.Name) and n.id == name and id(n) not in cut]


def _detached_names(stmt: ast.AST) -> Set[int]:
    """Names already cut where they are read: ``fake`` in ``D(fake.detach())``."""
    return {id(n.value) for n in A.walk_all(stmt)
            if isinstance(n, ast.Attribute) and n.attr in ("detach", "data") and isinstance(n.value, ast.Name)}


def _differentiated_inputs(stmts, holder, s1) -> Set[str]:
    """Names passed as ``inputs`` to ``torch.autograd.grad`` between ``holder`` and ``s1``
    (a gradient penalty's interpolates): detached, they would not require grad."""
    out: Set[str] = set()
    for s in _stretch(stmts, holder, s1, with_start=True):
        for n in A.walk_all(s):
            if isinstance(n, ast.Call) and (A.dotted(n.func) or "").endswith("autograd.grad"):
                arg = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords if k.arg == "inputs"), None)
                if arg is not None:
                    out |= {m.id for m in A.walk_all(arg) if isinstance(m, ast.Name)}
    return out
