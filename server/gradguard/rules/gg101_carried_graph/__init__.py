"""GG101 carried-graph: a value with an autograd graph is carried from one
iteration of a back-propagating loop into the next one's backward().

Detection runs the graph interpreter of :mod:`gradguard.analysis.interpreter` over the
unit: a back-propagating loop body is walked once to learn which values an
iteration leaves behind still attached to a graph that iteration's backward
traversed (and so freed), then once more with those values marked as carried;
a carried mark reaching a backward (directly, or through a same-file helper
that back-propagates its argument) is the bug.

Assumptions about code it cannot see (chosen so that the common bug is caught
and the common correct idioms stay silent):

* a callable held in a variable or parameter (``model(x)``) is a module: its
  result has a graph; a same-file ``nn.Module`` class is read instead (its
  ``forward`` may detach, its submodules may be frozen);
* ``out, h = f(x, h)`` / ``h = obj(x, h)`` through anything unseen threads a
  recurrent state, with a graph;
* ``h = helper(h)`` with a helper it cannot see (imported) is a repackaging
  helper (a cut) — the usual reason to write that line; a same-file helper is
  judged by its body instead, whatever its name;
* ``create_graph=True`` steps keep graphs on purpose (MAML-style unrolling).

State kept between *calls* (``global h`` in a step function, ``self.h`` in a
module's ``forward`` driven by a training loop) is the same bug one level up.
"""

from __future__ import annotations

import ast
import re

from gradguard.analysis import facts as _facts
from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis import values as V
from gradguard.analysis import interpreter as interp
from gradguard.analysis.context import unit_text, unit_words
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.common import framework_loop_of, unit_trace
from gradguard.rules.gg101_carried_graph import messages as M

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple


class CarriedGraph(Rule):
    code = "GG101"
    name = "carried-graph"
    default_severity = Severity.ERROR
    needs_backprop = True
    fact_sources = (_facts.GRAPH_FACTS,)
    trigger = Trigger(not_other_framework=True)  # mxnet/paddle/...: not a torch program
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        if not _worth_running(unit, ctx) and not _maybe_stateful(unit, ctx) and not framework_loop_of(unit, ctx):
            return ()
        if unit.kind == "function" and A.is_no_grad_function(unit.node, ctx):
            return ()
        flow = unit_trace(unit, ctx)
        if flow is None:
            return ()
        self_obj = flow.self_obj
        stateful = unit.kind == "function" and unit.node is not None
        out = []
        for carry in flow.carries:
            f = _finding(self, carry, flow, ctx, unit)
            if f is not None:
                out.append(f)
        if stateful:
            done = set()
            for f in _call_state_findings(self, unit, flow, ctx):
                done.add(f.data["variable"])
                out.append(f)
            if self_obj is not None:
                out.extend(f for f in _stateful_findings(self, unit, flow, ctx) if f.data["variable"] not in done)
        out.extend(_imported_state_findings(self, unit, ctx))
        out.extend(_container_state_findings(self, unit, ctx))
        if ctx.unverified:
            out.extend(_unverified_note(self, u, ctx) for u in flow.unverified)
        return out


# ---------------------------------------------------------------------------
# pre-filter: one cheap walk; most units have no loop or no backward at all
# ---------------------------------------------------------------------------
def _worth_running(unit, ctx) -> bool:
    """Cheap pre-filter on the unit's TEXT: a loop keyword and something that
    back-propagates (a backward/grad call, or a same-file helper that does)."""
    if not unit.body:
        return False
    text = unit_text(unit, ctx.index.lines)
    words = unit_words(unit, ctx.index.lines)
    if "for" not in words and "while" not in words:  # keywords as words: "forward" is no loop
        # no loop: only state kept between calls (global h / self.h) can be carried
        if unit.kind != "function" or ("global" not in text and unit.class_node is None):
            return False
    if "backward" in text or "grad(" in text:
        return True
    # names of same-file helpers that back-propagate: a word lookup per name
    # (substring scans for every helper name made large files quadratic)
    return query(ctx.summary, _mentions_backprop_helper, words)


def _mentions_backprop_helper(summary, words: frozenset) -> bool:
    """Does a unit with these words name a same-file function or method that
    back-propagates? (A summary query: the incremental engine re-asks it.)"""
    _, bw_methods, bw_functions = _summary_index(summary)
    if not bw_functions and len(bw_methods) <= 1:
        return False
    # (the words it shares with the method names: a set intersection over the smaller
    # of the two, not a test of every back-propagating method of a large file per unit)
    return not words.isdisjoint(bw_functions) or any(n != "grad" for n in words & bw_methods)


def _maybe_stateful(unit, ctx) -> bool:
    """A method of a class some back-propagating loop in this file drives."""
    if unit.class_node is None or unit.node is None:
        return False
    return bool(_driving_loops(unit, ctx))


_INDEX_CACHE: list = [None, None]  # [summary object, index]: the engine builds one summary per analysis


def _summary_index(summary):
    """Per-summary index (built once, not once per unit): loop-call entries and the
    names of same-file methods that back-propagate."""
    if _INDEX_CACHE[0] is summary:
        return _INDEX_CACHE[1]
    loopcalls: Dict[str, list] = {}  # class short name ("" = untyped) → entries
    bw_methods = {"grad"}
    bw_functions = set()
    delegating: list = []  # (the set its name joins if it back-propagates, name, facts)
    for key, value in summary.items():
        if key.startswith("loopcalls:") and isinstance(value, frozenset):
            for entry in value:
                callee, ctor = entry[0], entry[1]
                if not ctor:
                    raw = summary.get("var:" + callee)
                    ctor = raw if isinstance(raw, str) else ""
                    if not ctor and ("." in callee or "fn:" + callee in summary or "class:" + callee in summary
                                     or "import:" + callee in summary):
                        continue  # a function, a class, an import: not an instance we could not type
                loopcalls.setdefault(ctor.rsplit(".", 1)[-1], []).append(entry)
                if ctor and entry[2] <= _CALL_ONLY and all(a.endswith(".") for a in entry[3]):
                    # ``model(x)`` of a module holding modules its forward calls: a call of
                    # each (``model.recurrent``), whose state the loop keeps as well, unless
                    # the loop touches it (``model.recurrent.reinitialize_weight()``)
                    for path, member in _facts.held_modules(summary, ctor):
                        if path.split(".", 1)[0] + "." not in entry[3]:
                            loopcalls.setdefault(member.rsplit(".", 1)[-1], []).append(
                                (f"{callee}.{path}", member, entry[2], _HELD))
        elif isinstance(value, V.ClassFacts):
            bw_methods.update(name for name, m in value.methods if m.calls_backward)
            delegating.extend((bw_methods, name, m) for name, m in value.methods
                              if m.delegates and not m.calls_backward and not m.no_grad)
        elif isinstance(value, V.FnFacts) and key.startswith("fn:"):
            if value.calls_backward:
                bw_functions.add(key[3:])
            elif value.delegates and not value.no_grad:
                delegating.append((bw_functions, key[3:], value))
    # back-propagating through the module-level functions they call (FnFacts.delegates)
    grew = True
    while grew and delegating:
        grew = False
        for entry in list(delegating):
            joins, name, facts = entry
            if any(d[0] in bw_functions for d in facts.delegates):
                joins.add(name)
                delegating.remove(entry)
                grew = True
    index = (loopcalls, frozenset(bw_methods), frozenset(bw_functions))
    _INDEX_CACHE[0], _INDEX_CACHE[1] = summary, index
    return index


_CALL_ONLY = frozenset({"__call__", "forward"})  # (a loop calling more on a holder may reset what it holds)
_HELD = frozenset({"<held>"})  # the attrs of an entry for a module held by the one the loop calls

_MODEL_WORDS = ("model", "net", "rnn", "lstm", "gru", "encoder", "decoder", "cell", "lm")


def _driving_loops(unit, ctx) -> Iterable[Tuple[str, frozenset, frozenset]]:
    """(callee, methods called on it, attributes assigned on it) for every object
    of this method's class called in a back-propagating loop of the file."""
    own = frozenset(s.name for s in unit.class_node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return query(ctx.summary, _driving_entries, unit.class_node.name, unit.node.name, own)


def _driving_entries(summary, cls: str, meth: str, own: frozenset) -> Iterable[Tuple[str, frozenset, frozenset]]:
    """The entries of the class's own and of untyped callees that call ``meth``,
    most likely driver first: typed entries first; then the objects on which the
    loop calls more of this class's own methods (``model.reset()``); then names
    that read like a model rather than a loss (``model``/``net``/``rnn`` before
    ``criterion``); then by name (the facts are sets, whose order changes from
    process to process); ties in index order, the class's entries first.

    Not quadratic in the file: the untyped entries are ordered once per analysis
    (:func:`_untyped_order`) and their answer for a method name made once; an
    entry sharing none of this class's method names keeps that order, so a class
    without typed entries or sharing ones gets that answer as it is, and
    otherwise only those few are placed one by one. (Sorting every untyped
    entry for every method of every class cost a 5 MB generated file 20 s.)"""
    index = _summary_index(summary)[0]

    def matches(methods) -> bool:
        return meth in methods or (meth == "forward" and "__call__" in methods)

    def likeness(entry):
        callee, ctor, methods, _ = entry
        low = callee.lower()
        return (not ctor, -len(methods & own), not any(w in low for w in _MODEL_WORDS), callee)

    order, by_name, ranked, shared = _untyped_order(summary, index)
    got = ranked.get(meth)
    if got is None:  # the untyped entries calling ``meth``, in order: once per method name
        pos_ = set(by_name.get(meth, ()))
        if meth == "forward":
            pos_.update(by_name.get("__call__", ()))
        base = sorted(pos_)
        got = ranked[meth] = (base, [_public(order[p]) for p in base])
    base, answer = got
    # untyped entries that call one of the class's own methods move ahead, by how
    # many they call: once per (those of its names some loop calls, method), for
    # every class that has them
    called = frozenset(name for name in own if name in by_name)  # not own & by_name: that walks the dict
    moving = shared.get((called, meth))
    if moving is None:
        sharing = sorted({pos for name in called for pos in by_name[name]})
        ahead = sorted((order[pos] for pos in sharing if matches(order[pos][2])), key=likeness)
        moving = shared[(called, meth)] = (frozenset(sharing), [(likeness(e), e) for e in ahead])
    moved, ahead_keyed = moving
    typed = [e for e in index.get(cls, []) if matches(e[2])]
    if not typed and not moved:
        return answer  # shared by every class in this position (read only)
    if typed:  # the class's entries before untyped ones of the same rank
        ahead_keyed = sorted([(likeness(e), e) for e in typed] + ahead_keyed, key=lambda ke: ke[0])
    return _Merged(ahead_keyed, base, moved, order, likeness)


class _Merged:
    """The answer of :func:`_driving_entries` when some entries move ahead of the
    shared order: ``special`` (few, sorted) merged into the untyped entries at
    ``base`` (less those ``moved``), as (callee, methods, attrs), each special
    one before the first entry that does not rank above it. Made as it is read:
    a reader that stops at the first live loop does not pay for the rest."""

    __slots__ = ("_special", "_base", "_moved", "_order", "_key")

    def __init__(self, special, base, moved, order, key):
        self._special, self._base, self._moved, self._order, self._key = special, base, moved, order, key

    def __iter__(self):
        special, moved, order, key = self._special, self._moved, self._order, self._key
        i, n = 0, len(special)
        for pos in self._base:
            if pos in moved:
                continue
            e = order[pos]
            if i < n:
                k = key(e)
                while i < n and special[i][0] <= k:
                    yield _public(special[i][1])
                    i += 1
            yield _public(e)
        while i < n:
            yield _public(special[i][1])
            i += 1

    def __bool__(self) -> bool:
        return bool(self._special) or any(pos not in self._moved for pos in self._base)

    def __eq__(self, other) -> bool:  # FactTable.still_answers compares answers
        if isinstance(other, (list, _Merged)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _public(entry) -> Tuple[str, frozenset, frozenset]:
    callee, _, methods, attrs = entry
    return (callee, methods, attrs)


_UNTYPED_CACHE: list = [None, None]  # [summary object, what _untyped_order returns for it]


def _untyped_order(summary, index):
    """The untyped entries in the order they rank for a class none of whose
    method names they call (stable: index order among equals), each entry's
    positions by method name, and two memos filled as methods are asked about:
    per method name, the positions (and answer) of the entries calling it; per
    (method names, method), the entries that move ahead."""
    if _UNTYPED_CACHE[0] is summary:
        return _UNTYPED_CACHE[1]
    entries = index.get("", [])
    order = sorted(entries, key=lambda e: (not e[1], 0, not any(w in e[0].lower() for w in _MODEL_WORDS), e[0]))
    by_name: Dict[str, List[int]] = {}
    for pos, e in enumerate(order):
        for name in e[2]:
            by_name.setdefault(name, []).append(pos)
    cached: tuple = (order, by_name, {}, {})
    _UNTYPED_CACHE[0], _UNTYPED_CACHE[1] = summary, cached
    return cached


def _stateful_findings(rule, unit, flow: interp.GraphFlow, ctx) -> List[Finding]:
    """``out, self.hidden = self.rnn(x, self.hidden)`` in a module's forward, with
    the module called by a training loop that never resets or detaches the state."""
    states = flow.self_states()
    if not states:
        return []
    loops = _driving_loops(unit, ctx)
    if not loops:
        return []
    cf = ctx.summary.get("class:" + unit.class_node.name)
    out = []
    for key, v in states:
        attr = key.split(".", 1)[1]
        cutting = cf.methods_cutting(key) if isinstance(cf, V.ClassFacts) else frozenset()
        cutting = cutting - {unit.node.name}
        # the first loop that neither resets nor detaches it (lazily: the loops may be many)
        live, held = next(((c, attrs is _HELD) for c, methods, attrs in loops
                           if not (methods & cutting) and attr not in attrs), (None, False))
        if live is None or v.site is None:
            continue
        built = interp._built_by(v)
        # no backward event: a probe for the state's shape, which _structure reads without one
        carry = V.Carry(unit.node, (key,), v.site, built, None, (), len(v.elems) if v.elems else None, {}, {})  # type: ignore[arg-type]
        shape = _structure(carry, flow, ctx, unit)
        if isinstance(cf, V.ClassFacts) and any(k == key and sh == "list" for k, sh, _ in cf.carried):
            shape = "list"  # self.states = [...] and self.states[i] = ...: it must stay a list
        elif _one_of_a_pair(v.site, key):
            shape = "tensor"  # self.h, self.c = self.cell(obs, (self.h, self.c)): each one is a tensor
        elif _stores_items_of(v.site, key):
            # self.state["h"], self.state["c"] = h, c: a dict (or list) of the pair, which must
            # stay one (`tuple(s.detach() for s in self.state)` would detach its keys)
            shape = "nested"
        via = live if unit.node.name == "forward" else f"{live}.{unit.node.name}"
        msg = M.module_state(key, via, unit.node.name)
        related = []
        if built is not None:
            related.append(Related(ctx.range(built), M.state_built_here(key)))
        # reached through a module holding this one (``model.recurrent``): how often the
        # loop calls it per backward is not known, and a detach at each call would cut
        # the graph between calls of one iteration (changing its gradients): no fix
        # the step method of an object that is no module (an A3C player's ``action_train()``,
        # its state handed back through ``self.log_probs``): a rollout calls it several
        # times per backward, and a detach at its top would cut the rollout's own graph
        # (changing the update's gradients): no fix
        agent = unit.node.name != "forward" and isinstance(cf, V.ClassFacts) and cf.bases in ((), ("object",))
        fixes = () if held or agent else _method_top_fix(unit, key, shape, ctx)
        out.append(Finding(rule.code, ctx.line_range(v.site), msg, rule.default_severity, tuple(related), fixes,
                           {"variable": key, "variables": [key], "stateful": True}))
    return out


def _imported_state_findings(rule, unit, ctx) -> List[Finding]:
    """``out = net(x)`` in a training loop, ``net`` an instance of a class
    imported from another file whose forward keeps its recurrent state on the
    module (``ClassFacts.carried``), and the loop neither resets that state nor
    calls a method that cuts it. A class of this file is reported in its own
    forward (:func:`_stateful_findings`); one from another file is reported
    here, where the loop is, with the detach put before the call."""
    summary = ctx.summary
    imported = query(summary, _imported_stateful_classes)
    if not imported:
        return []
    ctors, loops = _facts.backprop_loops(unit.body)
    if not loops:
        return []
    # instances of the imported classes, whatever their names look like (`fMRI_LSTM(...)`)
    for node in A.iter_statements(unit.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            made = _facts.instance_of(node.value)
            if made is not None and made in imported:
                ctors[node.targets[0].id] = made
    out = []
    for loop in loops:
        for callee, (call, methods, attrs) in _facts.loop_call_sites(loop, {}).items():
            if call is None or "." in callee or not ({"__call__", "forward"} & methods):
                continue
            ctor = ctors.get(callee) or summary.get("var:" + callee) or summary.get("inst:" + callee)
            if not isinstance(ctor, str) or ctor not in imported:
                continue
            cf = summary.get("class:" + ctor)
            if not isinstance(cf, V.ClassFacts):
                continue
            for key, shape, maybe_none in cf.carried:
                attr = key.split(".", 1)[1]
                if attr in attrs or methods & cf.methods_cutting(key):
                    continue  # the loop resets it, or calls a method of the class that cuts it
                out.append(_imported_state_finding(rule, unit, ctx, loop, call, callee, ctor, attr, shape, maybe_none))
    return out


def _container_state_findings(rule, unit, ctx) -> List[Finding]:
    """``net = nn.Sequential(nn.Linear(3, 4), Leaky(beta, init_hidden=True), ...)``
    and a back-propagating loop calling ``net(x)`` without resetting it (issue 12,
    shape 1): the neuron keeps its membrane potential on itself, computed from the
    layer before it, so the next iteration's backward runs into this one's freed
    graph. The neuron is a library one of the knowledge table
    (``STATEFUL_LIBRARY_MODULES``) or a class of this file whose forward rebuilds
    state on ``self`` from its input and its last value (``ClassFacts.keeps_input``).
    A loop that calls anything named like a reset (``utils.reset(net)``,
    ``functional.reset_net(net)``, ``reset_mem()``, ``detach_hidden()``) says nothing."""
    if unit.kind != "module" or "Sequential" not in unit_text(unit, ctx.index.lines) and "ModuleList" not in unit_text(unit, ctx.index.lines):
        return []
    resolver = interp.Resolver(ctx)
    nets: Dict[str, Tuple[str, Tuple[str, ...], ast.Call]] = {}
    for node in A.iter_statements(unit.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found = _stateful_member(node.value, resolver, ctx)
            if found is not None:
                nets[node.targets[0].id] = found
    if not nets:
        return []
    _, loops = _facts.backprop_loops(unit.body)
    out = []
    for loop in loops:
        sites = _facts.loop_call_sites(loop, {})
        if any(name.rsplit(".", 1)[-1] in K.STATE_RESET_CALLS for name in sites if "__call__" in sites[name][1]):
            continue
        for name, (cls, attrs, _made) in nets.items():
            call = sites.get(name, [None])[0]
            if call is None or "__call__" not in sites[name][1]:
                continue
            if attrs and _detaches_attr(loop, attrs):
                continue  # for m in net.modules(): m.mem = m.mem.detach()
            out.append(_container_state_finding(rule, ctx, loop, call, name, cls, attrs,
                                                _state_related(ctx, loop, name, cls)))
    return out


def _state_related(ctx, loop: ast.stmt, net: str, cls: str) -> Tuple[Related, ...]:
    """The loop's backward that runs into the graph the neuron kept (where torch raises)."""
    out: List[Related] = []
    bw = next((n for n in A.block_nodes(loop.body) if isinstance(n, ast.Call) and A.is_backward_call(n, ctx)), None)  # type: ignore[attr-defined]
    if bw is not None:
        out.append(Related(ctx.range(bw), M.reaches_freed((f"{net}.{cls}",))))
    return tuple(out)


def _stores_items_of(site, key: str) -> bool:
    """Does ``site`` store into items of ``key`` (``self.state["h"], self.state["c"] = h, c``)?"""
    if not isinstance(site, ast.Assign):
        return False
    for t in site.targets:
        for node in ast.walk(t):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and A.dotted(node.value) == key:
                return True
    return False


def _one_of_a_pair(site, key: str) -> bool:
    """``self.h, self.c = ...``: ``key`` is one of a tuple of the object's own
    attributes (an LSTMCell's pair unpacked), not a state tuple of its own."""
    if not isinstance(site, ast.Assign) or len(site.targets) != 1 or not isinstance(site.targets[0], ast.Tuple):
        return False
    names = [A.dotted(e) for e in site.targets[0].elts]
    return key in names and len(names) >= 2 and all(n is not None and n.startswith("self.") for n in names)


def _detaches_attr(loop: ast.stmt, attrs: Tuple[str, ...]) -> bool:
    """Does the loop body assign ``<x>.<attr> = ...detach()`` for one of ``attrs``?"""
    for node in A.block_nodes(loop.body):  # type: ignore[attr-defined]
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr in attrs for t in node.targets):
            if A.is_graph_cut(node.value):
                return True
    return False


def _stateful_member(value: ast.expr, resolver, ctx) -> Optional[Tuple[str, Tuple[str, ...], ast.Call]]:
    """(class, state attributes, its call) of the stateful neuron inside an
    ``nn.Sequential(...)`` / ``nn.ModuleList([...])`` that also holds a module
    with parameters before or after it (its input or output has a graph)."""
    if not isinstance(value, ast.Call):
        return None
    q = resolver.qualify(value.func) or ""
    if q.rsplit(".", 1)[-1] not in ("Sequential", "ModuleList") or not q.startswith("torch.nn"):
        return None
    items: List[ast.expr] = list(value.args)
    if len(items) == 1 and isinstance(items[0], (ast.List, ast.Tuple)):
        items = list(items[0].elts)
    found = None
    others = 0
    for it in items:
        if not isinstance(it, ast.Call):
            continue
        iq = resolver.qualify(it.func) or ""
        lib = K.STATEFUL_LIBRARY_MODULES.get(iq, False)
        if lib is not False and (lib is None or any(k.arg == lib and isinstance(k.value, ast.Constant)
                                                    and k.value.value is True for k in it.keywords)):
            found = found or (iq.rsplit(".", 1)[-1], (), it)
            continue
        name = A.dotted(it.func)
        cf = resolver.cls(name) if name else None
        if cf is not None and cf.keeps_input and not cf.carried:
            found = found or (name, tuple(k[5:] for k in cf.keeps_input), it)
            continue
        if iq.startswith("torch.nn.") and iq.rsplit(".", 1)[-1] not in K.PARAMETERLESS_MODULES:
            others += 1
    return found if found is not None and others else None


def _container_state_finding(rule, ctx, loop, call, net, cls, attrs, related: Tuple[Related, ...] = ()) -> Finding:
    msg = M.container_state(net, cls)
    fixes: Tuple[Fix, ...] = ()
    stmt = _iteration_start(loop.body, call, ctx)
    if attrs and stmt is not None:
        line = ctx.index.line(stmt.lineno - 1)
        indent = line[: len(line) - len(line.lstrip())]
        if len(indent) == ctx.index.char_col(stmt.lineno, stmt.col_offset):
            step = _indent_step(ctx.indent_of(loop.body[0].lineno), ctx.indent_of(loop.lineno))  # one step of the file
            m = _fresh("_m", (net,))
            body = "".join(f"{indent}{step}{step}{m}.{a} = {m}.{a}.detach()\n" for a in attrs)
            cond = " and ".join([f"isinstance({m}, {cls})"] + [f'hasattr({m}.{a}, "detach")' for a in attrs])
            text = f"{indent}for {m} in {net}.modules():\n{indent}{step}if {cond}:\n{body}"
            pos = Position(stmt.lineno - 1, 0)
            fixes = (Fix(M.fix_detach_container_state(net, cls),
                         (TextEdit(Range(pos, pos), text),), preferred=True),)
    state = f"{net}.{cls}"
    return Finding(rule.code, ctx.range(call), msg, rule.default_severity, related, fixes,
                   {"variable": state, "variables": [state], "stateful": True})


def _imported_stateful_classes(summary) -> frozenset:
    """Classes imported from other modules of the project whose forward keeps
    state on the module (a summary query: one scan per table, not per unit)."""
    return frozenset(k[6:] for k, v in summary.items()
                     if k.startswith("class:") and isinstance(v, V.ClassFacts) and v.carried
                     and ("." in k or "import:" + k[6:] in summary))  # dotted: from `import m`


def _imported_state_finding(rule, unit, ctx, loop, call, callee, ctor, attr, shape, maybe_none) -> Finding:
    state = f"{callee}.{attr}"
    msg = M.imported_state(callee, ctor, state)
    stmt = _statement_holding(loop.body, call)
    helper: Optional[str] = None
    edits: List[TextEdit] = []
    if stmt is not None and not _one_line_shape(shape):
        helper, edits = _helper_edits(unit, loop, ctx, _indent_step(ctx.indent_of(loop.body[0].lineno), ctx.indent_of(loop.lineno)))
    edit = _detach_before(stmt, state, shape, ctx, guard=maybe_none, helper=helper) if stmt is not None else None
    fixes: Tuple[Fix, ...] = ()
    if edit is not None:
        fixes = (Fix(M.fix_detach_before_call(state, callee),
                     tuple(edits) + (edit,), preferred=True),)
    return Finding(rule.code, ctx.range(call), msg, rule.default_severity, (), fixes,
                   {"variable": state, "variables": [state], "stateful": True})


def _iteration_start(body, node, ctx) -> Optional[ast.stmt]:
    """The statement before which a detach cuts what one iteration of the back-propagating
    loop hands the next, and nothing inside an iteration: the statement of ``body`` holding
    ``node``, entered while it also holds a backward (an inner loop that back-propagates),
    never one that only repeats the call (``for t in range(T): out += net(x)``: a detach
    there would cut the graph between time steps and change the first step's gradients)."""
    for s in body:
        if s.lineno <= node.lineno <= (s.end_lineno or s.lineno):
            if any(isinstance(n, ast.Call) and A.is_backward_call(n, ctx) for n in A.walk_all(s)):
                for block in A.child_blocks(s):
                    inner = _iteration_start(block, node, ctx)
                    if inner is not None:
                        return inner
            return s
    return None


def _statement_holding(body, node) -> Optional[ast.stmt]:
    """The innermost statement of ``body`` (nested blocks entered) that holds ``node``."""
    for s in body:
        if s.lineno <= node.lineno <= (s.end_lineno or s.lineno):
            for block in A.child_blocks(s):
                inner = _statement_holding(block, node)
                if inner is not None:
                    return inner
            return s
    return None


def _call_state_findings(rule, unit, flow: interp.GraphFlow, ctx) -> List[Finding]:
    """``global hidden`` (or ``self.hidden``) rebuilt from its previous value in a
    function that back-propagates it: the next call runs into the freed graph."""
    out = []
    for key, v, ev in flow.call_carried_states():
        if v.site is None:
            continue
        built = interp._built_by(v)
        carry = V.Carry(unit.node, (key,), v.site, built, ev, (), len(v.elems) if v.elems else None, {}, {})
        shape = _structure(carry, flow, ctx, unit)
        fname = unit.node.name
        bw = _code(ev.call)
        msg = M.call_state(key, fname, bw)
        related = []
        if built is not None:
            related.append(Related(ctx.range(built), M.state_built_here(key)))
        related.append(Related(ctx.range(ev.call), M.next_call_reaches(key)))
        out.append(Finding(rule.code, ctx.line_range(v.site), msg, rule.default_severity, tuple(related),
                           _method_top_fix(unit, key, shape, ctx),
                           {"variable": key, "variables": [key], "stateful": True}))
    return out


def _method_top_fix(unit, key: str, shape: str, ctx) -> Tuple[Fix, ...]:
    body = unit.node.body
    i = 0
    if (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        i = 1  # keep the docstring first
    while i < len(body) and isinstance(body[i], (ast.Global, ast.Nonlocal)):
        i += 1  # a `global h` must stay before any use of h
    if i >= len(body):
        return ()
    first = body[i]
    if first.lineno == unit.node.lineno:
        return ()
    head = ctx.indent_of(unit.node.lineno)
    helper: Optional[str] = None
    edits: List[TextEdit] = []
    if not _one_line_shape(shape):
        helper, edits = _helper_edits(unit, first, ctx, _indent_step(ctx.indent_of(first.lineno), head))
    edit = _detach_before(first, key, shape, ctx, guard=True, head=head, helper=helper)
    if edit is None:
        return ()
    return (
        Fix(
            M.fix_detach_at_method_top(key, unit.node.name),
            tuple(edits) + (edit,),
            preferred=True,
        ),
    )


def _detach_before(stmt: ast.stmt, name: str, shape: str, ctx, guard: bool, head: Optional[str] = None,
                   helper: Optional[str] = None):
    """A TextEdit putting the detach of ``name`` on its own line before ``stmt``,
    at its indentation (under ``if name is not None:`` when ``guard``, indented
    one step further: the step ``stmt`` has over ``head``, else four spaces);
    None when ``stmt`` does not start its line. ``helper``: the state's shape is
    not known, the detach calls that helper (see :func:`_helper_edits`)."""
    line = ctx.index.line(stmt.lineno - 1)
    indent = line[: len(line) - len(line.lstrip())]
    if len(indent) != ctx.index.char_col(stmt.lineno, stmt.col_offset):
        return None
    detach = f"{name} = {helper}({name})" if helper is not None else _detach_line((name,), shape)
    if guard:
        step = indent[len(head):] if head is not None and indent.startswith(head) and len(indent) > len(head) else "    "
        text = f"{indent}if {name} is not None:\n{indent}{step}{detach}\n"
    else:
        text = f"{indent}{detach}\n"
    pos = Position(stmt.lineno - 1, 0)
    return TextEdit(Range(pos, pos), text)


# ---------------------------------------------------------------------------
# notes on paths that cannot be verified (``unverified-notes``, off by default)
# ---------------------------------------------------------------------------
def _unverified_note(rule, u, ctx) -> Finding:
    """An information-level note where GG101 stays silent because one link of
    the path is unknown: which value, which backward, and which link."""
    name, bw, why = u.name, _code(u.event.call), _code(u.why)
    msg = M.unverified(u.kind, name, bw, why)
    related = (
        Related(ctx.range(u.why), M.unknown_link()),
        Related(ctx.range(u.event.call), M.may_reach(name)),
    )
    return Finding(rule.code, ctx.line_range(u.site), msg, Severity.INFO, related, (),
                   {"variable": name, "variables": [name], "unverified": u.kind})


# ---------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------
def _code(node: ast.AST, limit: int = 48) -> str:
    try:
        s = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of a valid tree does not fail
        return "backward()"
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _message(carry: V.Carry, ctx=None) -> Dict[str, str]:
    bw = _code(carry.event.call)
    if carry.missing and carry.arity == 2:
        return M.partly_detached(carry.names[0], carry.missing, bw, carry.event.retain)
    if len(carry.names) == 1 and _backpropagates_an_element(carry.event.call, carry.names, None):
        return M.carried_element(carry.names[0], bw, carry.event.retain)
    if ctx is not None and _list_freed_by_helper(carry, ctx):
        return M.carried_list_kept(carry.names[0], bw, carry.event.retain)
    return M.carried(carry.names, bw, carry.event.retain)


def _related(carry: V.Carry, ctx) -> Tuple[Related, ...]:
    out: List[Related] = []
    if carry.built_by is not None and hasattr(carry.built_by, "lineno"):
        out.append(Related(ctx.range(carry.built_by), M.built_here(carry.names)))
    call = carry.event.call
    if A.is_backward_call(call, ctx):
        msg = M.reaches_freed(carry.names)
    else:  # a same-file helper that back-propagates its argument
        msg = M.helper_reaches_freed(_code(call.func, 32), carry.names)
    out.append(Related(ctx.range(call), msg))
    return tuple(out)


# ---------------------------------------------------------------------------
# fixes
# ---------------------------------------------------------------------------
# Where the detach goes. The preferred place is the FIRST statement of the
# loop body: at that point the value is either what the loop started with
# (iteration 1) or what the previous iteration left behind, and nothing of
# the current iteration has used it yet — so the detach cuts exactly the
# edge between iterations and leaves every gradient computed inside an
# iteration unchanged, whatever comes later in the body (a reassignment after
# backward(), a `continue`, several backward calls, a state used by the loss
# itself). "Right after backward()" is not always correct: a state reassigned
# after the backward, or a `continue` before it, would still be carried.
# Two adjustments keep the first-statement placement exact:
#   * the state may be None (or unbound) before the first iteration → guard
#     with `if h is not None:` (and bind it to None before the loop when the
#     loop is what first assigns it);
#   * the value the loop starts with may itself need gradients (a learned
#     initial state): detaching it at the top would change iteration 1, so
#     then the detach goes after the last body statement that back-propagates
#     or assigns the state.


def _body_indent(loop: ast.stmt, ctx) -> Optional[str]:
    first = loop.body[0]  # type: ignore[attr-defined]
    if first.lineno == loop.lineno:
        return None  # `for x in y: stmt` on one line: no place for a new line
    line = ctx.index.line(first.lineno - 1)
    indent = line[: len(line) - len(line.lstrip())]
    col = ctx.index.char_col(first.lineno, first.col_offset)
    if len(indent) != col:
        return None  # first statement after a `;` or similar: give up on a fix
    return indent


def _indent_step(inner: str, head: str) -> str:
    """One indentation step of the file, as a block's statements indented ``inner``
    show it under the line that opens it, indented ``head`` (else a tab where the
    file indents with tabs, four spaces otherwise)."""
    if inner.startswith(head) and len(inner) > len(head):
        return inner[len(head):]
    return "\t" if "\t" in inner else "    "


def _fresh(name: str, avoid: Sequence[str]) -> str:
    for cand in ("s", "t", "state", "_s"):
        if cand not in avoid and cand != name:
            return cand
    return "_gg_s"


def _structure(carry: V.Carry, flow: interp.GraphFlow, ctx, unit=None) -> str:
    """'tuple' | 'tensor' | 'unknown': the shape of the carried state."""
    if carry.arity and carry.arity >= 2:
        return "tuple"
    end_v = carry.end.get(carry.names[0]) if len(carry.names) == 1 else None
    if end_v is not None and end_v.kind == "tensor":
        return "tensor"  # a torch recurrent module's state, here or through the model's forward
    node = carry.built_by
    if isinstance(node, ast.Call):
        kind = _callee_kind(node, carry, ctx, unit)
        if kind == "unknown":
            kind = _recurrent_state_shape(carry, node, ctx, unit)
        if kind == "unknown":
            kind = _site_shape(carry, ctx, unit)
        return kind
    return "tensor" if node is not None else "unknown"


def _recurrent_state_shape(carry: V.Carry, call: ast.Call, ctx, unit=None) -> str:
    """The state of a torch recurrent module reached through an attribute of a
    model (``seq, hx = model.rnn(x, hx)``, ``h = model.cell(x, h)``), when the
    statement binds exactly that state: a cell's result, a layer's second one."""
    site = carry.site
    if len(carry.names) != 1 or not isinstance(site, ast.Assign) or site.value is not call or len(site.targets) != 1:
        return "unknown"
    tc = _module_class(call, ctx, unit)
    if not tc or not K.is_recurrent(tc):
        return "unknown"
    target = site.targets[0]
    cell = tc.rsplit(".", 1)[-1].endswith("Cell")
    if cell and isinstance(target, ast.Name) and target.id == carry.names[0]:
        return V.state_shape(tc)
    if not cell and isinstance(target, ast.Tuple) and len(target.elts) == 2 and (
            isinstance(target.elts[1], ast.Name) and target.elts[1].id == carry.names[0]):
        return V.state_shape(tc)
    return "unknown"


def _site_shape(carry: V.Carry, ctx, unit=None) -> str:
    """'tensor' when the statement that leaves the state behind assigns it one
    tensor (``h = h.clone()``, ``p = torch.bernoulli(...)``, ``feat = enc(x)`` with
    ``enc`` a one-output torch module), else 'unknown'."""
    site = carry.site
    if len(carry.names) != 1 or not isinstance(site, ast.Assign) or len(site.targets) != 1:
        return "unknown"
    if A.dotted(site.targets[0]) != carry.names[0]:
        return "unknown"
    return _expr_shape(site.value, ctx, unit)


def _expr_shape(expr: ast.expr, ctx, unit, depth: int = 0) -> str:
    """'tensor' when ``expr`` is known to give one tensor, else 'unknown'."""
    if depth > 8:
        return "unknown"
    if isinstance(expr, ast.Call):
        func = expr.func
        q = interp.Resolver(ctx).qualify(func)
        if q in K.ONE_TENSOR_FUNCTIONS:
            return "tensor"
        if isinstance(func, ast.Attribute) and func.attr in K.ONE_TENSOR_METHODS and not (
                q and q.startswith("torch.") and q not in K.ONE_TENSOR_FUNCTIONS):
            return "tensor"  # x.clone(), logits.softmax(-1); not torch.<module>.<fn>
        tc = _module_class(expr, ctx, unit)
        if tc and not K.is_recurrent(tc) and tc not in K.MULTI_OUTPUT_MODULES and (
                tc.rsplit(".", 1)[-1] not in K.CONTAINER_MODULES):
            return "tensor"  # feat = enc(x), enc an nn.Linear
        return "unknown"
    if isinstance(expr, ast.BinOp):
        sides = (expr.left, expr.right)
        if any(isinstance(x, (ast.List, ast.Tuple, ast.ListComp, ast.Dict, ast.Set, ast.JoinedStr)) or (
                isinstance(x, ast.Constant) and not isinstance(x.value, (int, float))) for x in sides):
            return "unknown"  # [loss] + new_mems: a list
        return "tensor" if any(_expr_shape(x, ctx, unit, depth + 1) == "tensor" for x in sides) else "unknown"
    if isinstance(expr, ast.UnaryOp) and not isinstance(expr.op, ast.Not):
        return _expr_shape(expr.operand, ctx, unit, depth + 1)
    if isinstance(expr, ast.IfExp):
        both = {_expr_shape(expr.body, ctx, unit, depth + 1), _expr_shape(expr.orelse, ctx, unit, depth + 1)}
        return "tensor" if both == {"tensor"} else "unknown"
    return "unknown"


def _module_class(call: ast.Call, ctx, unit=None) -> Optional[str]:
    """The torch.nn class of the module ``call`` calls, when it is known: a
    variable or ``self.<attr>`` built by a torch constructor, or ``<var>.<attr>``
    of a same-file model instance (``model.rnn(x, h)``)."""
    r = interp.Resolver(ctx)
    name = A.dotted(call.func)
    if not name:
        return None
    head, _, attr = name.partition(".")
    raw = None
    if not attr:
        raw = ctx.summary.get("var:" + head)
    elif "." not in attr:
        if head == "self" and unit is not None and unit.class_node is not None:
            cf = r.cls(unit.class_node.name)
        else:
            obj = _local_ctor(unit, head) if unit is not None and unit.kind == "function" else None
            obj = obj or r.global_obj(head)
            cf = r.cls(obj[5:]) if obj and obj.startswith("user:") else None
        raw = cf.attr(attr) if cf is not None else None
    return r.torch_class(r.qualify_raw(raw)) if isinstance(raw, str) else None


def _local_ctor(unit, name: str) -> Optional[str]:
    """``user:<Class>`` when the function binds ``name`` once, to an instance of
    a class (``net = CharLSTM()``), else None."""
    made = [n.value for n in A.iter_statements(unit.body) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            and name in [x for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) for x in A.target_names(t)]]
    if len(made) != 1 or not isinstance(made[0], ast.Call) or not isinstance(made[0].func, ast.Name):
        return None
    return "user:" + made[0].func.id


def _callee_kind(call: ast.Call, carry: Optional[V.Carry], ctx, unit=None) -> str:
    r = interp.Resolver(ctx)
    func = call.func
    q = None
    name = A.dotted(func)
    if name and name.startswith("self.") and name.count(".") == 1 and unit is not None and unit.class_node is not None:
        cf = r.cls(unit.class_node.name)
        raw = cf.attr(name[5:]) if cf is not None else None
        if raw:
            q = r.qualify_raw(raw)
    elif isinstance(func, ast.Name):
        obj = r.global_obj(func.id)
        raw = ctx.summary.get("var:" + func.id)
        if isinstance(raw, str):
            q = r.qualify_raw(raw)
        elif obj and obj.startswith("fn:"):
            return "unknown"
    return V.state_shape(r.torch_class(q) if q else None)


def _appends_displays(site: ast.AST, name: str, ctx) -> bool:
    """Does ``site`` (where a carried list gets this iteration's graph) put a tuple, list,
    dict or set display into ``name``: ``name.append((s, lp))`` in the loop's own text, or a
    call of a function or method whose summary says it appends one to that list
    (``ContainerEffect.displays``: ``agent.remember(s, lp, r)`` filling ``agent.memory``)?"""
    if not (isinstance(site, ast.Expr) and isinstance(site.value, ast.Call)):
        return False
    call = site.value
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in ("append", "insert") and A.dotted(f.value) == name:
        return bool(call.args) and isinstance(call.args[-1], (ast.Tuple, ast.List, ast.Dict, ast.Set))
    r = interp.Resolver(ctx)
    facts = None
    if isinstance(f, ast.Name):
        facts = r.fn(f.id)
    elif isinstance(f, ast.Attribute):
        recv = A.dotted(f.value)
        facts = r.method_facts(r.global_obj(recv), f.attr) if recv is not None and "." not in recv else None
    if facts is None:
        return False
    return any(eff.displays and interp.GraphFlow._container_key(call, facts, eff.path) == name
               for eff in facts.containers)


def _detach_line(names: Tuple[str, ...], shape: str) -> str:
    if len(names) > 1:
        return f"{', '.join(names)} = {', '.join(n + '.detach()' for n in names)}"
    n = names[0]
    s = _fresh(n, names)
    if shape == "tensor":
        return f"{n} = {n}.detach()"
    if shape == "list":
        return f"{n} = [{s}.detach() for {s} in {n}]"
    if shape == "maybe-number":
        return f'{n} = {n}.detach() if hasattr({n}, "detach") else {n}'
    if shape == "tuple":
        return f"{n} = tuple({s}.detach() for {s} in {n})"
    raise ValueError(f"no one-line detach for a state of shape {shape!r}: use the helper")


def _fixes(carry: V.Carry, flow: interp.GraphFlow, ctx, unit=None) -> Tuple[Fix, ...]:
    loop = carry.loop
    indent = _body_indent(loop, ctx)
    if indent is None:
        return ()
    bw = carry.event.call
    built_line = getattr(carry.built_by, "lineno", None) or carry.site.lineno
    if built_line > getattr(bw, "end_lineno", bw.lineno) and loop.lineno < bw.lineno:
        # The graph is rebuilt AFTER this iteration's backward (a look-ahead step,
        # `out, h = rnn(x_next, h)` at the end of the body): the next backward uses a
        # value computed before its iteration started, so no single detach at the top
        # or after backward() is certain to keep the gradients. No automatic fix.
        return ()
    unit_ = _indent_step(indent, ctx.indent_of(loop.lineno))
    names = carry.names
    kept = _kept_list_freed_by(carry, ctx)
    if kept is not None:
        return kept
    if _backpropagates_an_element(bw, names, ctx):
        # list_of_loss[i].backward(): what the backward runs from is an element of the carried
        # list itself; detached, it has no graph to back-propagate (torch raises). No fix.
        return ()
    shape = _structure(carry, flow, ctx, unit)
    first = loop.body[0]  # type: ignore[attr-defined]
    entry = [carry.entry.get(n) for n in names]
    unbound_names = [n for n, v in zip(names, entry) if v is None or v.undef]
    unbound = bool(unbound_names) and bool(set(unbound_names) - _kept_outside(unbound_names, unit))
    maybe_none = unbound or any(v is not None and (v.none or v.param) for v in entry)
    grad_entry = any(v is not None and v.has_grad() for v in entry)
    end_v = carry.end.get(names[0])
    helper = None
    edits: List[TextEdit] = []
    if len(names) == 1 and _nested_state(entry + [end_v]):
        # states[wid] = new_state, mems[i] = (h, c), {"enc": (h, c), "dec": {...}}:
        # a dict must stay a dict and each (h, c) a tuple; a helper detaches every
        # tensor inside and keeps the containers (repackage_hidden, generalised)
        shape = "nested"
    elif len(names) == 1 and (any(v is not None and v.kind == "list" for v in entry)
                              or (end_v is not None and end_v.kind == "list")):
        shape = "list"  # history = []; history.append(out): stays a list
        if _appends_displays(carry.site, names[0], ctx):
            # memory.append((s, log_prob)), or agent.remember(state, log_prob, ...) whose
            # summary says it appends such a tuple to agent.memory: `[s.detach() for s in
            # memory]` would call .detach() on a tuple (AttributeError): no fix
            return ()
    elif any(v is not None and v.const for v in entry) and len(names) == 1:
        shape = "maybe-number"  # running = 0 before the loop: an int has no .detach()
    elif len(names) > 1:
        # out, (h, c) = lstm(x, (h, c)): each one tensor; out, (a, b) = model(x, (a, b)):
        # what a and b are is not known
        shape = "tensor" if _elements_are_tensors(carry, ctx, unit) else "unknown"
    if len(names) == 1 and _detaches_in_place(carry, ctx, shape):
        # dec_state = DecoderState(...), or the state object the model hands back: its
        # class's own detach() cuts the tensors it holds in place and returns nothing, so
        # `state = state.detach()` (the helper's too) would bind None: call it as a statement
        shape = "in-place"
    elif not _one_line_shape(shape):
        # a state of unknown shape (a model of the project or unseen code returns it:
        # a tensor, an (h, c) pair, a dict or a list of pairs): the helper detaches
        # every tensor in it and keeps its containers; no guess of one shape
        helper, edits = _helper_edits(unit, loop, ctx, unit_)
    if shape == "in-place":
        line = f"{names[0]}.detach()"
    elif helper is None:
        line = _detach_line(names, shape)
    else:
        line = f"{', '.join(names)} = {', '.join(f'{helper}({n})' for n in names)}"
    head = names[0]
    guarded = _guarded_backward(loop, bw)
    if guarded is not None:
        # the backward runs on some iterations only (`if prev is not None:`, every k-th
        # batch): an iteration that skips it hands the next one a live graph, which the
        # next backward goes through as before; cut it only where the backward ran
        got = _after_guarded_backward(loop, guarded, names)
        if got is None:
            return ()  # rebound after that block from something else: no one place is right
        block_stmt, cut = got
        b_indent = ctx.indent_of(block_stmt.lineno)
        if len(b_indent) != ctx.index.char_col(block_stmt.lineno, block_stmt.col_offset):
            return ()
        if cut != names and shape == "in-place":
            # the values the state is rebuilt from, not the state object: of no known
            # class, the helper detaches them
            helper, edits = _helper_edits(unit, loop, ctx, unit_)
        if cut != names:
            line = (_detach_line(cut, shape) if helper is None
                    else f"{', '.join(cut)} = {', '.join(f'{helper}({n})' for n in cut)}")
        if maybe_none and helper is None and (cut == names or len(cut) == 1):
            text = f"{b_indent}if {cut[0]} is not None:\n{b_indent}{unit_}{line}\n"
        else:
            text = f"{b_indent}{line}\n"
        at = getattr(block_stmt, "end_lineno", None) or block_stmt.lineno
        edits.append(TextEdit(Range(Position(at, 0), Position(at, 0)), text))
        title = (M.fix_detach_after_backward(names) if cut == names
                 else M.fix_detach_source_after_backward(cut, names))
        return (Fix(title, tuple(edits), preferred=True),)
    if grad_entry:
        # after the last body statement that back-propagates or assigns the state
        at = _after_statement(loop, carry, names)
        pos = Position(at, 0)
    else:
        pos = Position(first.lineno - 1, 0)
    if maybe_none and len(names) == 1:
        text = f"{indent}if {head} is not None:\n{indent}{unit_}{line}\n"
    elif maybe_none:
        text = f"{indent}if {head} is not None:\n{indent}{unit_}{line}\n"
    else:
        text = f"{indent}{line}\n"
    if unbound:
        loop_indent = ctx.indent_of(loop.lineno)
        init = " = ".join(names) + " = None"
        edits.append(TextEdit(Range(Position(loop.lineno - 1, 0), Position(loop.lineno - 1, 0)), f"{loop_indent}{init}\n"))
    edits.append(TextEdit(Range(pos, pos), text))
    fixes = [
        Fix(
            M.fix_detach_at_top(names) if not grad_entry else M.fix_detach_after_backward(names),
            tuple(edits),
            preferred=True,
        )
    ]
    # Alternative: start every iteration from a fresh (None) state. Offered only
    # when None is known to be accepted: a torch recurrent module takes
    # hx=None, and a loop that already starts from None handles it.
    if len(names) == 1 and not grad_entry and (shape in ("tensor", "tuple") and _direct_torch(carry, ctx, unit) or _starts_none(entry)):
        top = Position(first.lineno - 1, 0)
        fixes.append(
            Fix(
                M.fix_reset_to_none(names),
                (TextEdit(Range(top, top), f"{indent}{head} = None\n"),),
                preferred=False,
            )
        )
    return tuple(fixes)


def _detaches_in_place(carry: V.Carry, ctx, shape: str) -> bool:
    """Is the carried value an object of a class of the user's whose ``detach()``
    cuts its state in place and returns nothing (``self.hidden = tuple(h.detach() for
    h in self.hidden)``, no ``return``)? Its class where the trace knows it (the loop's
    first binding, ``dec_state = DecoderState(...)``); a value of no known class (the
    state in the model's returned tuple) and of no known shape (a tensor, a tuple, a
    list or a dict is none) where every class of the file defining ``detach()`` is
    such a class, as the trace reads ``state.detach()`` then."""
    if "detach" not in query(ctx.summary, _in_place_cuts):
        return False
    name = carry.names[0]
    objs = {v.obj for v in (carry.entry.get(name), carry.end.get(name)) if v is not None and v.obj}
    if not objs:
        return shape == "unknown"
    if len(objs) > 1:
        return False
    obj = objs.pop()
    cf = interp.Resolver(ctx).cls(obj[5:]) if obj.startswith("user:") else None
    return cf is not None and any(m == "detach" for m, _ in cf.methods)


def _in_place_cuts(summary) -> frozenset:
    """The names of methods that every class of the file defining one cuts state in
    (``ClassFacts.cuts``) and returns nothing from, ``forward``, ``__init__`` and
    ``__call__`` aside. (A summary query.)"""
    good: set = set()
    other: set = set()
    for value in summary.values():
        if isinstance(value, V.ClassFacts):
            cuts = {m for m, attrs in value.cuts if attrs}
            for m, ff in value.methods:
                if m not in ("forward", "__init__", "__call__"):
                    (good if m in cuts and not ff.returns_value else other).add(m)
    return frozenset(good - other)


def _list_freed_by_helper(carry: V.Carry, ctx) -> bool:
    """REINFORCE's ``policy.saved_log_probs``: a list kept on an object, filled with
    graphs in each iteration (by ``select_action()``), whose backward is a same-file
    helper that back-propagates the whole list and frees it (``finish_episode()``,
    ``FnFacts.containers``) but never empties it. The next call back-propagates the
    old log-probs again. Where the helper empties the object's other lists (``del
    policy.rewards[:]``), detaching the log-probs would keep entries it pairs with
    this episode's rewards (torch then raises: nothing in the loss requires grad), so
    the fix is to empty the list after each such call."""
    if len(carry.names) != 1 or "." not in carry.names[0]:
        return False
    call = carry.event.call
    if not isinstance(call, ast.Call) or A.is_backward_call(call, ctx):
        return False
    name = A.dotted(call.func)
    facts = ctx.summary.get("fn:" + name) if name else None
    if not isinstance(facts, V.FnFacts):
        return False
    path = carry.names[0]
    owner = path.rsplit(".", 1)[0] + "."
    freed = sibling_cleared = False
    for eff in facts.containers:
        p = eff.path
        if p.startswith("#"):
            i, _, rest = p[1:].partition(".")
            arg = call.args[int(i)] if i.isdigit() and int(i) < len(call.args) else None
            p = f"{A.dotted(arg)}.{rest}" if arg is not None and A.dotted(arg) and rest else ""
        if p == path:
            if eff.clears or not eff.frees:
                return False
            freed = True
        elif eff.clears and p.startswith(owner) and "." not in p[len(owner):]:
            sibling_cleared = True  # del policy.rewards[:]: the helper empties the lists it pairs
    return freed and sibling_cleared


def _kept_list_freed_by(carry: V.Carry, ctx) -> Optional[Tuple[Fix, ...]]:
    """The fix for :func:`_list_freed_by_helper`: ``del policy.saved_log_probs[:]``
    right after the statement that calls the helper (what pytorch/examples' REINFORCE
    does at the end of ``finish_episode()``); the first update is unchanged. None when
    the shape is another one."""
    if not _list_freed_by_helper(carry, ctx):
        return None
    call = carry.event.call
    stmt = next((s for s in A.iter_statements(carry.loop.body)  # type: ignore[attr-defined]
                 if isinstance(s, ast.Expr) and s.value is call), None)
    if stmt is None:
        return ()
    indent = ctx.indent_of(stmt.lineno)
    if len(indent) != ctx.index.char_col(stmt.lineno, stmt.col_offset):
        return ()
    at = Position(getattr(stmt, "end_lineno", None) or stmt.lineno, 0)
    name = carry.names[0]
    return (Fix(M.fix_clear_after(name, _code(call.func, 32)),
                (TextEdit(Range(at, at), f"{indent}del {name}[:]\n"),), preferred=True),)


def _backpropagates_an_element(bw: ast.AST, names: Tuple[str, ...], ctx) -> bool:
    """``losses[i].backward()``: the backward's loss is an element of the carried list."""
    if not isinstance(bw, ast.Call) or not A.is_backward_call(bw, ctx):
        return False
    tgt = A.backward_target(bw, ctx)
    if not isinstance(tgt, ast.Subscript):
        return False
    while isinstance(tgt, ast.Subscript):
        tgt = tgt.value
    return A.dotted(tgt) in names


def _kept_outside(names, unit) -> Set[str]:
    """The dotted names among ``names`` that the unit reads but never assigns
    (``policy.saved_log_probs``, filled by a helper): an attribute its object
    already has, so there is nothing to initialise, and setting it to None would
    lose it."""
    dotted_names = {n for n in names if "." in n}
    if not dotted_names or unit is None:
        return set()
    stored = {A.dotted(n) for n in A.unit_nodes(unit)
              if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)}
    return dotted_names - stored


def _nested_state(vals) -> bool:
    """Is the carried state a dict, or a list whose elements are containers
    themselves (a list of per-chunk ``(h, c)`` pairs)?"""
    for v in vals:
        if v is None:
            continue
        if v.kind == "dict":
            return True
        if v.kind == "list":
            if v.elems is not None and any(e.elems is not None or e.kind in ("list", "dict") for e in v.elems):
                return True
            site = v.site
            value = getattr(site, "value", None)
            if isinstance(value, ast.ListComp) and isinstance(value.elt, (ast.Tuple, ast.List, ast.Dict, ast.ListComp)):
                return True
            if isinstance(value, ast.BinOp) and isinstance(value.left, ast.List) and value.left.elts and isinstance(
                    value.left.elts[0], (ast.Tuple, ast.List, ast.Dict)):
                return True  # [(h0, c0)] * n
    return False


_HELPER = "_detach_state"
_HELPER_DOC = '"""Detach every tensor of a state, keeping its dicts, lists and tuples."""'


def _one_line_shape(shape: str) -> bool:
    """Is the state's shape known well enough for a one-line detach?"""
    return shape in ("tensor", "tuple", "list", "maybe-number")


def _elements_are_tensors(carry: V.Carry, ctx, unit) -> bool:
    """``h, c = ...`` unpacked from a torch recurrent module's state (or each
    bound to one tensor): each name is one tensor."""
    ends = [carry.end.get(n) for n in carry.names]
    if all(v is not None and v.kind == "tensor" for v in ends):
        return True
    node = carry.built_by
    if isinstance(node, ast.Call):
        if _callee_kind(node, carry, ctx, unit) in ("tensor", "tuple"):
            return True
        tc = _module_class(node, ctx, unit)
        if tc and K.is_recurrent(tc):
            return True
    site = carry.site
    if isinstance(site, ast.Assign) and len(site.targets) == 1 and isinstance(site.targets[0], ast.Tuple) and (
            isinstance(site.value, ast.Tuple) and len(site.value.elts) == len(site.targets[0].elts)):
        return all(_expr_shape(e, ctx, unit) == "tensor" for e in site.value.elts)
    return False


_JOINED: tuple = (None, "")  # (the lines last joined, their text); a file's lines are never changed once split


def _joined(lines: Sequence[str]) -> str:
    """The file's lines as one text (remembered for the last list: every finding of
    a file asks), where one substring test tells whether any line names a helper."""
    global _JOINED
    last = _JOINED  # (one read, one rebinding below: safe on several threads)
    if last[0] is lines:
        return last[1]
    text = "\n".join(lines)
    _JOINED = (lines, text)
    return text


def _helper_edits(unit, anchor: ast.stmt, ctx, step: str) -> Tuple[str, List[TextEdit]]:
    """The name of the state-detaching helper a fix calls, and the edit that
    defines it (none when the file already defines it).

    The helper is defined once for the file, in the module's scope: right
    before the outermost definition holding the unit (its decorators first), or
    for a loop at module level before the top-level statement holding it. Two
    fixes in the file define it with the same text, which the fix loop applies
    once (``engine.fixing``). A file that already defines it (a previous fix) is
    reused, if the definition comes first; a name the file uses otherwise is
    never taken: ``_detach_state2``, ``_detach_state3``... instead."""
    if unit.kind == "function":
        top = unit.parents[0] if unit.parents else unit.node
        line = min([d.lineno for d in getattr(top, "decorator_list", ())] + [top.lineno])
    else:
        top = next((s for s in unit.body if s.lineno <= anchor.lineno <= (s.end_lineno or s.lineno)), anchor)
        line = top.lineno
    indent = ctx.indent_of(line)
    lines = ctx.index.lines
    name, n = _HELPER, 1
    while True:
        # (the lines naming it first, by a substring test: a definition's line names it,
        # and a large file's findings each ask)
        naming = [i for i, ln in enumerate(lines) if name in ln] if name in _joined(lines) else []
        head = f"{indent}def {name}(s):"
        defined = [i for i in naming if lines[i].rstrip() == head
                   and i + 1 < len(lines) and lines[i + 1].strip() == _HELPER_DOC]
        if defined and (unit.kind == "function" or defined[0] + 1 < line):
            return name, []  # the file's own copy, defined before the loop runs
        if not defined and not naming:
            break
        n += 1
        name = f"{_HELPER}{n}"
    pos = Position(line - 1, 0)
    text = _helper_text(name, indent, step)
    if not indent:  # a module-level def: two blank lines around it (PEP 8)
        before = ctx.index.line(line - 2).strip() if line >= 2 else ""
        text = ("\n\n" if before else "") + text + "\n"
    return name, [TextEdit(Range(pos, pos), text)]


def _helper_text(name: str, indent: str, unit: str) -> str:
    """A repackage_hidden-style helper put before the loop: detaches every tensor
    of a (nested) state and keeps its dicts, lists, tuples and namedtuples."""
    body = [
        f"def {name}(s):",
        f"{unit}{_HELPER_DOC}",
        f'{unit}if hasattr(s, "detach"):',
        f"{unit}{unit}return s.detach()",
        f"{unit}elif isinstance(s, dict):",
        f"{unit}{unit}s = s.copy()",
        f"{unit}{unit}for k in s:",
        f"{unit}{unit}{unit}s[k] = {name}(s[k])",
        f"{unit}{unit}return s",
        f"{unit}elif isinstance(s, (list, tuple)):",
        f"{unit}{unit}parts = [{name}(v) for v in s]",
        f'{unit}{unit}return type(s)(*parts) if hasattr(s, "_fields") else type(s)(parts)',
        f"{unit}else:",
        f"{unit}{unit}return s",
        "",
    ]
    return "".join(f"{indent}{ln}\n" if ln else "\n" for ln in body)


def _starts_none(entry) -> bool:
    return all(v is not None and v.none and not v.taints for v in entry)


def _direct_torch(carry: V.Carry, ctx, unit=None) -> bool:
    node = carry.built_by
    if not isinstance(node, ast.Call):
        return False
    return _callee_kind(node, carry, ctx, unit) in ("tensor", "tuple")


def _guarded_backward(loop: ast.stmt, bw: ast.AST) -> Optional[Tuple[List[ast.stmt], int]]:
    """(the statement list holding the backward's statement, its index there) when the
    backward runs on some iterations only: inside an ``if`` of the loop body (``with``
    and ``try`` blocks run it every time). None when every iteration that gets that far
    runs it, or when it is inside an inner loop (that loop's fixes are its own)."""
    block: List[ast.stmt] = loop.body  # type: ignore[attr-defined]
    guarded = False
    while True:
        holder = next((i for i, s in enumerate(block)
                       if s.lineno <= bw.lineno <= (getattr(s, "end_lineno", None) or s.lineno)), None)  # type: ignore[attr-defined]
        if holder is None:
            return None
        stmt = block[holder]
        inner = [b for b in A.child_blocks(stmt)
                 if any(x.lineno <= bw.lineno <= (getattr(x, "end_lineno", None) or x.lineno) for x in b)]  # type: ignore[attr-defined]
        if not inner or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return (block, holder) if guarded else None
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            return None
        if isinstance(stmt, (ast.If, ast.Match)):
            guarded = True
        block = inner[0]


def _after_guarded_backward(loop: ast.stmt, guarded: Tuple[List[ast.stmt], int], names: Tuple[str, ...]
                            ) -> Optional[Tuple[ast.stmt, Tuple[str, ...]]]:
    """Where a detach cuts the carried state only on iterations whose backward ran:
    (the statement of the backward's block to put it after, the names to detach).
    After the backward (and after any later statement of that block binding the
    state) when nothing after the block binds the state again in the iteration;
    when one plain copy does (``prev_out = out`` after the ``if`` holding the backward),
    the copied names (``out``) instead, if nothing else between reads or binds them.
    None otherwise."""
    block, i = guarded
    wanted = set(names)
    last = block[i]
    for s in block[i + 1:]:
        if _binds(s, wanted):
            last = s
    if last is not block[i] and isinstance(last, ast.Assign) and _graphless(last.value):
        # `acc.backward(); acc = 0.0`: the block already starts the state afresh, a detach there
        # cuts nothing; the graph reaching the next backward is the one accumulated on the
        # iterations that skip it, which that backward is meant to go through (freed by another
        # backward in between): no detach keeps its gradients
        return None
    top = next(s for s in loop.body if s.lineno <= block[i].lineno <= (s.end_lineno or s.lineno))  # type: ignore[attr-defined]
    after = [s for s in A.iter_statements(loop.body) if s.lineno > (top.end_lineno or top.lineno)]  # type: ignore[attr-defined]
    rebinding = [s for s in after if _binds(s, wanted)]
    if not rebinding:
        return last, names
    copy = rebinding[0]
    if len(rebinding) != 1 or copy not in loop.body or not isinstance(copy, ast.Assign) or len(copy.targets) != 1:  # type: ignore[attr-defined]
        return None
    target, value = copy.targets[0], copy.value
    t_names = A.target_names(target)
    if isinstance(target, ast.Name) and isinstance(value, ast.Name):
        sources = (value.id,)
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) and \
            all(isinstance(e, ast.Name) for e in target.elts + value.elts):
        sources = tuple(e.id for e in value.elts)  # type: ignore[attr-defined]
    else:
        return None
    if set(t_names) != wanted or set(sources) & wanted:
        return None
    # nothing from the backward to the copy reads or binds the sources but the copy
    between = [s for s in A.iter_statements(loop.body)  # type: ignore[attr-defined]
               if block[i].lineno < s.lineno < copy.lineno and s is not copy]
    for s in between:
        # a compound statement's own parts (its test, what it iterates); its statements are in `between` too
        parts = [s] if not A.child_blocks(s) else [getattr(s, f) for f in ("test", "iter", "target", "subject")
                                                  if getattr(s, f, None) is not None] + \
            [it.context_expr for it in getattr(s, "items", ())]
        if any(isinstance(n, ast.Name) and n.id in sources for p in parts for n in A.walk_all(p)):
            return None
    if any(isinstance(n, ast.Name) and n.id in sources and not isinstance(n.ctx, ast.Load) for n in A.walk_all(block[i])):
        return None
    return block[i], sources


_FRESH_TENSORS = frozenset({"zeros", "ones", "tensor", "zeros_like", "ones_like", "empty", "full", "scalar_tensor"})


def _graphless(expr: ast.expr) -> bool:
    """Is ``expr`` a value that cannot hold an autograd graph: a literal (``0``,
    ``0.0``, ``None``, ``-1``, a tuple of them) or a fresh tensor of a torch factory
    (``torch.zeros(1)``) that does not ask for ``requires_grad``?"""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.UnaryOp):
        return _graphless(expr.operand)
    if isinstance(expr, ast.Tuple):
        return all(_graphless(e) for e in expr.elts)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _FRESH_TENSORS \
            and isinstance(expr.func.value, ast.Name) and expr.func.value.id == "torch":
        return not any(k.arg == "requires_grad" for k in expr.keywords)  # `zeros_like(x)` has none either
    return False


def _binds(s: ast.stmt, names: Set[str]) -> bool:
    """Does ``s`` (or a statement inside it) assign one of ``names``?"""
    for node in A.iter_statements([s]):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(n in names for t in tgts for n in A.target_names(t)):
                return True
        elif isinstance(node, (ast.For, ast.AsyncFor)) and any(n in names for n in A.target_names(node.target)):
            return True
    return False


def _after_statement(loop: ast.stmt, carry: V.Carry, names) -> int:
    """0-based line after the last loop-body statement that contains the failing
    backward or assigns one of ``names``."""
    last = None
    bw_line = carry.event.call.lineno
    for s in loop.body:  # type: ignore[attr-defined]
        end = getattr(s, "end_lineno", s.lineno)
        if s.lineno <= bw_line <= end:
            last = s
            continue
        for node in A.iter_statements([s]):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(n in names for t in tgts for n in A.target_names(t)):
                    last = s
                    break
    if last is None:
        last = loop.body[-1]  # type: ignore[attr-defined]
    return getattr(last, "end_lineno", last.lineno)


def _framework_finding(rule: Rule, carry: V.Carry, flow: interp.GraphFlow, ctx, unit) -> Finding:
    """State a method the framework runs in a loop (Lightning's ``training_step``:
    ``flow.framework_node``) keeps on ``self`` for its next call. No edit: detaching
    where it is stored changes what the first steps learn (the stored graph trains the
    model until the step that changes its weights), and computing it afresh is the
    user's choice; the message says both."""
    ret = flow.framework_call.func.value  # type: ignore[union-attr]  # (the returned expression)
    shown = _code(ret, 32)
    method = getattr(unit.node, "name", "training_step") if unit is not None else "training_step"
    msg = M.framework_state(" / ".join(carry.names), method, shown)
    related: List[Related] = []
    if carry.built_by is not None and hasattr(carry.built_by, "lineno"):
        related.append(Related(ctx.range(carry.built_by), M.built_here(carry.names)))
    for node in _weights_saved_in(carry.built_by, unit, ctx):
        related.append(Related(ctx.range(node), M.saved_weights_here(_code(node.func, 32))))
    related.append(Related(ctx.range(ret), M.framework_backward(shown)))
    data: Dict[str, object] = {"variable": carry.names[0], "variables": list(carry.names), "stateful": True}
    return Finding(rule.code, ctx.line_range(carry.site), msg, rule.default_severity, tuple(related), (), data)


def _weights_saved_in(built: Optional[ast.AST], unit, ctx) -> List[ast.Call]:
    """``self.generate_pseudo_gt(batch)``: the calls ``self.<module>(...)`` in that method of
    the unit's class whose weights its result's graph saved (``RetPos.modules``)."""
    if not (isinstance(built, ast.Call) and isinstance(built.func, ast.Attribute)
            and isinstance(built.func.value, ast.Name) and built.func.value.id == "self"
            and unit is not None and unit.class_node is not None):
        return []
    cf = ctx.summary.get("class:" + unit.class_node.name)
    facts = cf.method(built.func.attr) if isinstance(cf, V.ClassFacts) else None
    if facts is None:
        return []
    modules = set(facts.ret.modules)
    for rp in facts.returns or ():
        modules |= rp.modules
    r = interp.Resolver(ctx)
    for attr, raw in cf.attrs:  # (modules of a class the method's summary could not see into)
        fwd = r.method_facts(r.ctor_obj(raw), "forward")
        if fwd is not None and (fwd.ret.graph or any(p.graph for p in fwd.returns or ())):
            modules.add(attr)
    fn = next((s for s in unit.class_node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
               and s.name == built.func.attr), None)
    if fn is None or not modules:
        return []
    return [n for n in A.body_nodes(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" and n.func.attr in modules][:1]


def _kept_cache(carry: V.Carry, ctx) -> Optional[Tuple[str, str, str, bool, str]]:
    """(object, attribute, class, is it None before the first call, shape) when the
    carried value is a cache a module of the user's keeps on itself
    (``ClassFacts.cached``, followed by the interpreter as ``<object>.<attribute>``)."""
    if len(carry.names) != 1 or "." not in carry.names[0]:
        return None
    base, _, attr = carry.names[0].rpartition(".")
    v = carry.entry.get(base) or carry.end.get(base)
    obj = (v.obj if v is not None else None) or ""
    if not obj.startswith("user:"):
        return None
    cf = interp.Resolver(ctx).cls(obj[5:])
    if cf is None:
        return None
    for key, _, _, init_none, shape in cf.cached:
        if key == "self." + attr:
            return base, attr, obj[5:], init_none, shape
    return None


def _cache_finding(rule: Rule, carry: V.Carry, ctx, cache: Tuple[str, str, str, bool, str]) -> Finding:
    """The cache's own words, and two fixes put before the call that hands it back:
    detach it (preferred: it keeps the cached value, so every later step computes
    what it computed, without the freed graph) or, where the cache starts empty,
    empty it (the encoder computes it afresh and is trained every step)."""
    base, attr, cls, init_none, shape = cache
    name = f"{base}.{attr}"
    bw = _code(carry.event.call)
    msg = M.kept_cache(base, name, cls, bw)
    fixes: List[Fix] = []
    site = carry.site
    first = carry.loop.body[0]  # type: ignore[attr-defined]
    if site.lineno > carry.loop.lineno and _body_indent(carry.loop, ctx) is not None:
        # at the top of the iteration: it cuts exactly the edge between iterations
        edit = _detach_before(first, name, shape, ctx, guard=init_none, head=ctx.indent_of(carry.loop.lineno))
        if edit is not None:
            fixes.append(Fix(M.fix_detach_cache(name),
                             (edit,), preferred=True))
            if init_none:
                pos = edit.range.start
                indent = ctx.indent_of(first.lineno)
                fixes.append(Fix(M.fix_empty_cache(name, base),
                                 (TextEdit(Range(pos, pos), f"{indent}{name} = None\n"),)))
    data: Dict[str, object] = {"variable": name, "variables": [name], "stateful": True}
    return Finding(rule.code, ctx.line_range(site), msg, rule.default_severity, _related(carry, ctx), tuple(fixes), data)


def unit_words_of(node: ast.AST, ctx) -> frozenset:
    """The identifiers written in ``node``'s lines (names a fix must not take)."""
    end = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    text = "\n".join(ctx.index.line(i) for i in range(node.lineno - 1, end))  # type: ignore[attr-defined]
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _member_states(carry: V.Carry, ctx) -> Optional[Tuple[str, List[Tuple[str, str, Tuple[str, ...], bool]]]]:
    """(object, [(member, class, state attributes, a library's?)]) when every carried
    name is the state of a module kept on an object of the user's
    (``ClassFacts.members``, followed by the interpreter as ``net.lif1.mem``)."""
    first = carry.names[0]
    base = first.split(".", 1)[0]
    v = carry.entry.get(base) or carry.end.get(base)
    obj = (v.obj if v is not None else None) or ""
    if not obj.startswith("user:"):
        return None
    r = interp.Resolver(ctx)
    cf = r.cls(obj[5:])
    if cf is None or not cf.members:
        return None
    found = []
    names = set(carry.names)
    for attr, raw, kws, _, _ in cf.members:
        by_holder: Dict[Tuple[str, str], List[str]] = {}  # (member path, its class) -> its state attributes
        for path, _, _, holder in r.member_states(raw, kws):
            if f"{base}.{attr}.{path}" in names:
                names.discard(f"{base}.{attr}.{path}")
                head, _, nm = f"{attr}.{path}".rpartition(".")
                by_holder.setdefault((head, holder), []).append(nm)
        for (head, holder), hit in by_holder.items():
            found.append((head, holder, tuple(hit), r.qualify_raw(holder) in K.STATEFUL_LIBRARY_MODULES))
    return (base, found) if found and not names else None


def _parametrize_finding(rule: Rule, carry: V.Carry, ctx) -> Finding:
    """A training loop inside ``with parametrize.cached():`` (``knowledge.PARAMETRIZE_CACHED``):
    the parametrized weight its first module call computed is handed to every later one.
    No fix: the block must move inside the iteration (or around evaluation only), an
    edit of the loop's structure."""
    start = carry.entry.get(K.PARAMETRIZE_CACHE_KEY)
    block = start.site if start is not None else None
    built = carry.built_by
    module = _code(built.func, 32) if isinstance(built, ast.Call) else "the module"
    line = getattr(block, "lineno", carry.loop.lineno)
    msg = M.parametrize_cached(module, line, _code(carry.event.call))
    related = []
    if block is not None and hasattr(block, "lineno"):
        related.append(Related(ctx.line_range(block), M.parametrize_block()))
    if built is not None and hasattr(built, "lineno"):
        related.append(Related(ctx.range(built), M.parametrize_computed()))
    related.append(Related(ctx.range(carry.event.call), M.parametrize_reached()))
    data: Dict[str, object] = {"variable": K.PARAMETRIZE_CACHE_KEY, "variables": [K.PARAMETRIZE_CACHE_KEY]}
    return Finding(rule.code, ctx.line_range(carry.site), msg, rule.default_severity, tuple(related), (), data)


def _caches_of(r, raw: str) -> set:
    """The attributes in which a class of the user's keeps a cache (``ClassFacts.cached``)."""
    cf = r.cls(raw)
    return {key[5:] for key, _, _, _, _ in cf.cached} if cf is not None else set()


def _member_state_finding(rule: Rule, carry: V.Carry, ctx, net: str, members) -> Finding:
    """Neurons kept on a user's module, called through it in a loop that never resets
    them. Preferred fix where every one is a class of the user's (its state attributes
    known): detach their state before the call, for every such module in ``net``
    (keeps the state, cuts the graph). A library's neurons: the message names the
    library's reset; no edit (it would need an import the file may not have)."""
    r = interp.Resolver(ctx)
    caches = all(_caches_of(r, raw) >= set(states) for _, raw, states, lib in members if not lib) \
        and not any(lib for _, _, _, lib in members)
    shown = [(attr, raw.rsplit(".", 1)[-1]) for attr, raw, _, _ in members]
    msg = M.member_caches(net, shown) if caches else M.member_states(net, shown)
    fixes: Tuple[Fix, ...] = ()
    site = carry.site
    by_cls: Dict[str, set] = {}
    for _, raw, states, lib in members:
        if lib:
            by_cls = {}
            break
        by_cls.setdefault(raw, set()).update(states)
    indent = _body_indent(carry.loop, ctx)
    if by_cls and site.lineno > carry.loop.lineno and indent is not None:
        # at the top of the iteration, not before the call: a call inside an inner loop
        # of time steps must keep its graph from step to step within the iteration
        first = carry.loop.body[0]  # type: ignore[attr-defined]
        step = _indent_step(indent, ctx.indent_of(carry.loop.lineno))
        words = unit_words_of(carry.loop, ctx)
        m = next(n for n in ("_m", "_mod", "_gg_m", "_gg_module") if n not in words)
        text = f"{indent}for {m} in {net}.modules():\n"
        for cls, attrs in sorted(by_cls.items()):
            if caches:  # a cache may not be there before the first call fills it
                cond = " and ".join([f"isinstance({m}, {cls})"]
                                    + [f'hasattr(getattr({m}, "{a}", None), "detach")' for a in sorted(attrs)])
            else:
                cond = " and ".join([f"isinstance({m}, {cls})"] + [f'hasattr({m}.{a}, "detach")' for a in sorted(attrs)])
            body = "".join(f"{indent}{step}{step}{m}.{a} = {m}.{a}.detach()\n" for a in sorted(attrs))
            text += f"{indent}{step}if {cond}:\n{body}"
        pos = Position(first.lineno - 1, 0)
        fixes = (Fix(M.fix_detach_member_states(net),
                     (TextEdit(Range(pos, pos), text),), preferred=True),)
    data: Dict[str, object] = {"variable": carry.names[0], "variables": list(carry.names), "stateful": True}
    return Finding(rule.code, ctx.line_range(site), msg, rule.default_severity, _related(carry, ctx), fixes, data)


def _finding(rule: Rule, carry: V.Carry, flow: interp.GraphFlow, ctx, unit=None) -> Optional[Finding]:
    site = carry.site
    if not hasattr(site, "lineno"):
        return None
    if carry.loop is flow.framework_node and flow.framework_call is not None:
        return _framework_finding(rule, carry, flow, ctx, unit)
    if carry.names == (K.PARAMETRIZE_CACHE_KEY,):
        return _parametrize_finding(rule, carry, ctx)
    cache = _kept_cache(carry, ctx)
    if cache is not None:
        return _cache_finding(rule, carry, ctx, cache)
    members = _member_states(carry, ctx)
    if members is not None:
        return _member_state_finding(rule, carry, ctx, *members)
    data: Dict[str, object] = {"variable": carry.names[0], "variables": list(carry.names)}
    if carry.missing:
        data["attached_elements"] = list(carry.missing)
    if carry.event.retain:
        data["retain_graph"] = True
    return Finding(
        code=rule.code,
        range=ctx.line_range(site),
        message=_message(carry, ctx),
        severity=rule.default_severity,
        related=_related(carry, ctx),
        fixes=_fixes(carry, flow, ctx, unit),
        data=data,
    )
