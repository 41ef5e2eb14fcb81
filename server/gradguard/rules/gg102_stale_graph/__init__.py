"""GG102 stale-graph: a tensor whose graph is built before the loop is back-propagated in every iteration.

How it works (one unit at a time, two linear walks):

1. An abstract interpretation of the unit's statements, in order, tracks what
   each local name holds: a *leaf* that requires grad (a factory called with
   ``requires_grad=True``, an ``nn.Parameter``), a *module*, or a *graph*
   value (a non-leaf tensor) together with where its graph comes from, whether
   one of the operations that built it saves tensors for backward (tri-state:
   yes / no / cannot tell) and which statements built it.
2. At every loop that calls ``backward()``, the graph values alive at loop
   entry and never re-bound inside the loop are followed forward through the
   loop body (a simple taint pass, run twice for loop-carried names) into the
   losses that are back-propagated. A reached value is a finding: an error
   when a saving operation makes the second iteration's crash certain, a
   warning otherwise.

The torch facts (which calls cut graphs, which operations save tensors, which
modules have no parameters) come from :mod:`gradguard.analysis.knowledge`.

The rule is a package: this module is the analysis and its hits (``_Hit``)
turned into findings; the words of every message, note and fix title, in
English and Chinese, are in :mod:`.messages`; the text edits of the fixes in
:mod:`.fixes`; the syntax questions both ask in :mod:`.syntax`.
"""

from __future__ import annotations

import ast
import builtins

from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.analysis import ast_util as A
from gradguard.analysis import interpreter as interp
from gradguard.analysis import knowledge as K
from gradguard.analysis import summary as _summary
from gradguard.analysis.context import unit_words
from gradguard.model.findings import Finding, Position, Range, Related, Severity
from gradguard.model.record import record
from gradguard.rules.base import Rule
from gradguard.rules.gg102_stale_graph import messages as M
from gradguard.rules.gg102_stale_graph import syntax as S
from gradguard.rules.gg102_stale_graph.fixes import Fixes

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_BUILTIN_NAMES = frozenset(dir(builtins))


# ---------------------------------------------------------------------------
# abstract values


@record(compare=("name", "kind"))
class Src:
    """Where a graph originates."""

    name: Optional[str]  # "X", "w", "encoder"; None for an inline factory call
    kind: str  # "data" (requires_grad=True factory), "param" (nn.Parameter), "module"
    stmt: Optional[ast.stmt] = None  # defining statement
    node: Optional[ast.AST] = None  # related location
    # How to drop requires_grad from a data leaf: ("kw", keyword node, call node)
    # or ("method", call node) for a `.requires_grad_()` suffix; None if not removable.
    removal: Optional[tuple] = None
    order: int = 0


@record
class Leaf:
    src: Src


@record
class Mod:
    src: Src
    trainable: bool  # has parameters that require grad
    saving: Optional[bool]  # for parameter-free modules: does its op save tensors?


@record
class Graph:
    sources: FrozenSet[Src]
    saving: Optional[bool]  # True: certainly saves tensors; False: certainly not; None: unknown
    stmts: Tuple[ast.stmt, ...] = ()  # statements that built it, in order
    unknown_op: Optional[str] = None  # an operation whose saving is unknown (for the message)
    # A container or opaque object holding stale tensors (DataLoader(TensorDataset(feats, y)), (a, b)):
    # the names of those tensors, which are what a finding is about.
    carried: Tuple[str, ...] = ()
    # A container of leaves only ((w, b), TensorDataset(X)): reusing it is reusing leaves, which is fine;
    # a tensor op on it (torch.cat([X, X])) builds a real non-leaf.
    holder: bool = False


def _sv(a: Optional[bool], b: Optional[bool]) -> Optional[bool]:
    """Combine saving flags: True wins, then unknown, then False."""
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _as_graph(v) -> Optional[Graph]:
    if isinstance(v, Graph):
        return v
    if isinstance(v, Leaf):
        return Graph(frozenset({v.src}), False, ())
    if isinstance(v, Mod) and v.trainable and v.src.kind == "param":  # scaler.gain used as a tensor
        return Graph(frozenset({v.src}), False, ())
    return None


def _merge(values: Iterable, saving: Optional[bool] = False, op: Optional[str] = None) -> Optional[Graph]:
    """A non-leaf computed from ``values`` by an op with the given saving flag."""
    gs = [g for g in (_as_graph(v) for v in values) if g is not None]
    if not gs:
        return None
    sources: Set[Src] = set()
    stmts: List[ast.stmt] = []
    sv = saving
    unknown = op if saving is None else None
    for g in gs:
        sources |= g.sources
        for s in g.stmts:
            if s not in stmts:
                stmts.append(s)
        sv = _sv(sv, g.saving)
        if unknown is None and g.unknown_op:
            unknown = g.unknown_op
    return Graph(frozenset(sources), sv, tuple(stmts), unknown if sv is None else None)


def _carrier(g: Optional[Graph], nodes: Sequence[ast.AST], env, values: Sequence = (),
             container: bool = False) -> Optional[Graph]:
    """``g`` built by an opaque call or a display from ``nodes`` (evaluated to
    ``values``): remember which named stale tensors it holds. A pure
    ``container`` of leaves (``TensorDataset(X)``, ``(w, b)``) holds no graph."""
    if g is None:
        return None
    if container and not any(isinstance(v, Graph) and not v.holder for v in values):
        return Graph(g.sources, g.saving, g.stmts, g.unknown_op, (), True)
    names: List[str] = []
    for v in values:
        if isinstance(v, Graph):
            for c in v.carried:
                if c not in names:
                    names.append(c)
    for n in nodes:
        if isinstance(n, ast.Starred):
            n = n.value
        key = n.id if isinstance(n, ast.Name) else S.attr_name(n)  # feats, self.feats
        if key:
            v = env.get(key)
            if isinstance(v, Graph) and not v.holder:
                for c in (v.carried or (key,)):
                    if c not in names:
                        names.append(c)
    if not names:
        return g
    return Graph(g.sources, g.saving, g.stmts, g.unknown_op, tuple(names))


def _with_stmt(g: Optional[Graph], stmt: ast.stmt) -> Optional[Graph]:
    if g is None or stmt in g.stmts:
        return g
    return Graph(g.sources, g.saving, g.stmts + (stmt,), g.unknown_op, g.carried, g.holder)


# ---------------------------------------------------------------------------
# module summary facts: user classes deriving from nn.Module, and `.grad` reads


def _gg102_facts(stmt: ast.stmt, referenced: bool = True):
    """Cross-unit facts, in one walk of the top-level statement:

    - ``class:<C>``: base classes of a module-level class (is it an nn.Module?);
      ``paramattr:<a>`` / ``modattr:<a>``: ``self.a = nn.Parameter(...)`` / ``self.a = SomeModule(...)``;
    - ``gradread:<x>``: ``x.grad`` is read (a data tensor whose gradient is inspected keeps requires_grad);
    - ``rgglobal:<x>``: module-level ``x`` is made to require grad; ``returns_rg:<f>``: ``f`` returns such a
      tensor; ``rgarg:<f>:<i|name>``: some call passes ``f`` a requires-grad tensor (``"rg"``) or a name/call
      to resolve later (``"name:x"``, ``"call:g"``);
    - ``bw:<f>`` / ``bwloop:<f>``: see :func:`_backprop_facts`;
    - ``attrloop:<C>``: see :func:`_class_attr_loops`.
    """
    is_fn = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    is_cls = isinstance(stmt, ast.ClassDef)
    out: List[Tuple[str, object]] = []
    if is_cls:
        bases = []
        for b in stmt.bases:  # type: ignore[attr-defined]
            parts = []
            cur = b
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                parts.append(cur.id)
                bases.append(".".join(reversed(parts)))
        out.append((f"gg102:class:{stmt.name}", tuple(bases)))  # type: ignore[attr-defined]
    grad_names: Set[str] = set()
    rg_names: Set[str] = set()
    returns: List[ast.Return] = []
    calls: List[ast.Call] = []
    has_bw = False
    saves_cls = False
    for n in A.walk_all(stmt):  # ast.walk's order, without ctx nodes
        if isinstance(n, ast.Attribute):
            if n.attr == "grad" and isinstance(n.value, ast.Name):
                grad_names.add(n.value.id)
        elif isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name) and n.func.id not in _BUILTIN_NAMES and (n.args or n.keywords):
                calls.append(n)
            elif isinstance(n.func, ast.Attribute) and n.func.attr in K.BACKWARD_METHODS:
                has_bw = True
        elif isinstance(n, ast.Assign):
            if _is_rg_expr(n.value):
                for t in n.targets:
                    rg_names.update(S.bound_names(t))
            if is_cls and isinstance(n.value, ast.Call):
                callee = n.value.func
                last = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                for t in n.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        if last == "Parameter":
                            out.append((f"gg102:paramattr:{t.attr}", True))
                        elif last[:1].isupper():
                            out.append((f"gg102:modattr:{t.attr}", True))
                            if last not in K.NONSAVING_MODULES and not last.startswith("Parameter"):
                                saves_cls = True
        elif isinstance(n, ast.Return) and is_fn:
            returns.append(n)
    if saves_cls:
        # it holds a layer (self.fc = nn.Linear(...)): calling it saves tensors for backward
        out.append((f"gg102:classsaves:{stmt.name}", True))  # type: ignore[attr-defined]
    for name in sorted(grad_names):
        out.append((f"gg102:gradread:{name}", True))
    if isinstance(stmt, ast.Assign) and _is_rg_expr(stmt.value):
        for t in stmt.targets:
            for name in S.bound_names(t):
                out.append((f"gg102:rgglobal:{name}", True))
    if any(_is_rg_expr(r.value) or (isinstance(r.value, ast.Name) and r.value.id in rg_names) for r in returns):
        out.append((f"gg102:returns_rg:{stmt.name}", True))  # type: ignore[attr-defined]
    for c in calls:
        pairs = [(str(i), a) for i, a in enumerate(c.args) if not isinstance(a, ast.Starred)]
        pairs += [(k.arg, k.value) for k in c.keywords if k.arg]
        for key, a in pairs:
            val = None
            if _is_rg_expr(a) or (isinstance(a, ast.Name) and a.id in rg_names):
                val = "rg"
            elif isinstance(a, ast.Name) and not (is_fn or is_cls):
                val = f"name:{a.id}"  # a module-level name: resolved through rgglobal
            elif isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and not a.func.id[:1].isupper() \
                    and a.func.id not in _BUILTIN_NAMES:
                val = f"call:{a.func.id}"
            if val is not None:
                out.append((f"gg102:rgarg:{c.func.id}:{key}", val))  # type: ignore[attr-defined]
    if is_fn and referenced and (has_bw or _delegating_calls(calls, stmt.name)):  # type: ignore[attr-defined]
        # ``bw:<f>``/``bwloop:<f>``/``bwcalls:<f>`` are read at calls of <f> only
        out.extend(_backprop_facts(stmt))
    if is_cls and has_bw:
        out.extend(_class_attr_loops(stmt))  # type: ignore[arg-type]
    return out


def _is_rg_expr(e: Optional[ast.AST]) -> bool:
    """Syntactically a tensor made to require grad: ``f(..., requires_grad=True)``
    or ``....requires_grad_()``."""
    if not isinstance(e, ast.Call):
        return False
    if any(k.arg == "requires_grad" and S.const_true(k.value) for k in e.keywords):
        return True
    if isinstance(e.func, ast.Attribute) and e.func.attr == "requires_grad_":
        return not e.args or S.const_true(e.args[0])
    return False


def _delegating_calls(calls, own: str) -> bool:
    """Does the function call a plain name that may be a module-level function
    (not itself, not a class by the usual capitalisation)?"""
    return any(c.func.id != own and not c.func.id[:1].isupper() for c in calls)


def _backprop_facts(fn):
    """For a module-level function: which of its parameters (index and name)
    and which globals reach a backward() (``gg102:bw:<name>``), and which reach
    one inside a loop while never re-bound in the function (``gg102:bwloop:<name>``).
    Computed without import information (``torch.no_grad`` spelled out).

    ``gg102:bwcalls:<name>``: the module-level functions it calls, with what
    reaches each argument, over the whole body and inside its loops — facts are
    per definition, so whether those callees back-propagate is looked up where
    ``<name>`` is called (:func:`_composed_fact`)."""
    from gradguard.analysis.context import ModuleContext, Unit
    from gradguard.model.text import LineIndex

    ctx = ModuleContext(None, LineIndex(""), {}, {})
    an = _Analysis(Unit("function", fn.body, fn, fn.name), ctx, unit_facts=False)
    an.delegations = {}  # call → per-argument names reaching it, recorded by _backwards_in
    a = fn.args
    params = [x.arg for x in list(a.posonlyargs) + list(a.args)]
    assigned, loaded = S.assigned_and_loaded(fn.body)
    an.delegation_locals = assigned | set(params) | {x.arg for x in a.kwonlyargs}  # not module-level callees
    globs = {g for g in loaded - assigned - set(params) - {x.arg for x in a.kwonlyargs} if g not in _BUILTIN_NAMES}
    names = params + sorted(globs) + [x.arg for x in a.kwonlyargs]

    def reach(stmts, start):
        taint = {n: {n} for n in start}
        backs: dict = {}
        for _ in range(2):
            an._taint_block(stmts, taint, backs, 0)
        out: Set[str] = set()
        for _c, keep, t in backs.values():
            if not keep:
                out |= t
        return out

    def encode(found):
        idx = tuple(sorted({i for i, p in enumerate(params) if p in found} | {p for p in names if p in found},
                           key=str))
        return idx, tuple(sorted(g for g in globs if g in found))

    def delegated():
        calls = []
        for c, (args, kws) in an.delegations.items():  # type: ignore[union-attr]
            if c.func.id == fn.name:
                continue  # recursion: its own facts already say it
            enc_args = tuple(encode(t) for t in args)
            enc_kws = tuple(sorted((k, encode(t)) for k, t in kws.items()))
            if any(e != ((), ()) for e in enc_args) or any(e != ((), ()) for _, e in enc_kws):
                calls.append((c.func.id, enc_args, enc_kws))
        an.delegations = {}
        return tuple(sorted(set(calls), key=repr))  # parameters are ints and names: order by text

    any_reach = reach(fn.body, names)
    any_calls = delegated()
    if any_reach:
        yield f"gg102:bw:{fn.name}", encode(any_reach)
    unchanged = [n for n in names if n not in assigned]
    loop_reach: Set[str] = set()
    loop_calls: set = set()
    for st in _outer_loops(fn.body):
        # an inner loop's reach is contained in its outer loop's: the names in
        # ``unchanged`` are never re-bound, so walking the outer body reaches the
        # inner one with at least the taint the inner walk starts from
        loop_reach |= reach(st.body, unchanged)
        loop_calls.update(delegated())
    if loop_reach:
        yield f"gg102:bwloop:{fn.name}", encode(loop_reach)
    if any_calls or loop_calls:
        yield f"gg102:bwcalls:{fn.name}", (any_calls, tuple(sorted(loop_calls, key=repr)))


def _fold_bwcalls(name: str, facts: dict, lookup) -> dict:
    """``bw``/``bwloop`` of an imported function with its callees (``bwcalls``)
    composed where they are defined, for the importing file."""
    if "gg102:bwcalls" not in facts:
        return facts
    mini: Dict[str, object] = {}
    todo, seen = [(name, facts)], {name}
    for _ in range(interp.DELEGATION_DEPTH + 1):
        nxt = []
        for n, fs in todo:
            for prefix in ("gg102:bw", "gg102:bwloop", "gg102:bwcalls"):
                if prefix in fs:
                    mini[f"{prefix}:{n}"] = fs[prefix]
            calls = fs.get("gg102:bwcalls") or ((), ())
            for callee, _args, _kws in tuple(calls[0]) + tuple(calls[1]):
                if callee not in seen:
                    seen.add(callee)
                    nxt.append((callee, lookup(callee)))
        todo = nxt
    out = {p: v for p, v in facts.items() if p not in ("gg102:bw", "gg102:bwloop", "gg102:bwcalls")}
    for kind in ("bw", "bwloop"):
        v = _composed_fact(mini, kind, name)
        if v:
            out[f"gg102:{kind}"] = v
    return out


def _composed_fact(summary, kind: str, name: str, depth: int = 0, seen: frozenset = frozenset()):
    """``gg102:<kind>:<name>`` (``bw`` or ``bwloop``) with what ``name`` back-propagates
    through the module-level functions it calls (``gg102:bwcalls:``): a callee's
    parameters mapped back to what reaches its arguments. A callee called inside
    one of ``name``'s loops that back-propagates at all makes a ``bwloop``; one
    that loops itself, wherever it is called, too. (A summary query: memoised per
    module summary, and recorded by the incremental engine as one answer.)"""
    own = summary.get(f"gg102:{kind}:{name}")
    calls = summary.get(f"gg102:bwcalls:{name}")
    if not calls or depth >= interp.DELEGATION_DEPTH:
        return own
    idx: Set[object] = set(own[0]) if own else set()
    globs: Set[str] = set(own[1]) if own else set()
    any_calls, loop_calls = calls

    def add(callee_fact, args, kws):
        params, cglobs = callee_fact
        globs.update(cglobs)  # the same module's globals
        by_kw = dict(kws)
        for p in params:
            if isinstance(p, int):
                if p < len(args):
                    idx.update(args[p][0])
                    globs.update(args[p][1])
            elif p in by_kw:
                idx.update(by_kw[p][0])
                globs.update(by_kw[p][1])

    inner_seen = seen | {name}
    for callee, args, kws in any_calls:
        if callee in inner_seen:
            continue
        f = _composed_fact(summary, kind, callee, depth + 1, inner_seen)
        if f:
            add(f, args, kws)
    if kind == "bwloop":
        for callee, args, kws in loop_calls:
            if callee in inner_seen:
                continue
            f = _composed_fact(summary, "bw", callee, depth + 1, inner_seen)
            if f:
                add(f, args, kws)
    if not idx and not globs:
        return own
    return tuple(sorted(idx, key=str)), tuple(sorted(globs))


def _outer_loops(stmts):
    """Loops of a body that are not inside another loop (nested defs excluded)."""
    for s in stmts:
        if isinstance(s, _LOOPS):
            yield s
        elif not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for block in A.child_blocks(s):
                yield from _outer_loops(block)


def _loops_with_grad(stmts):
    """Outermost loops of a body, not inside ``with torch.no_grad():`` and not in nested scopes."""
    for s in stmts:
        if isinstance(s, _LOOPS):
            yield s
            continue
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or A.is_no_grad_with(s):
            continue
        for block in A.child_blocks(s):
            yield from _loops_with_grad(block)


def _class_attr_loops(cls: ast.ClassDef):
    """``gg102:attrloop:<C>`` for a module-level class: which ``self.<attr>`` values
    a back-propagating loop of some method (not ``__init__``) reaches while that
    method never re-binds the attribute, so the loop reuses whatever an earlier
    method (``__init__``) left there. The fact is
    ``(loops, grad_attrs, init_calls, init_assigned, init_leaves, methods, trained_attrs)``:

    - ``loops``: sorted ``(attr, method, line, col, end_line, end_col, self_name,
      body_line, body_col)``, the first ``backward()`` that frees a graph through
      ``self.attr`` and the first statement of the innermost loop around it (-1
      when it shares the loop's line), lines counted from the ``class`` line (so
      the fact does not change when the class moves), columns in UTF-8 bytes (``ast``'s);
    - ``grad_attrs``: attributes whose gradient the class uses (``self.X.grad``,
      ``retain_grad``, handed to an optimizer in a list): data the program means
      to differentiate against;
    - ``init_calls``: methods ``__init__`` calls as ``self.m(...)`` statements (not
      under ``no_grad``): they build state before any training method runs too;
      ``init_assigned``: attributes ``__init__`` itself assigns (a helper's value for
      them may be replaced, so it is not reported); ``init_leaves``: ``(attr, kind)``
      of the requires-grad leaves ``__init__`` creates (``"data"`` or ``"param"``),
      which a helper starts from; ``methods``: the class's method names, so that
      a second class of the same name does not take this one's fact for its own;
      ``trained_attrs``: the part of ``grad_attrs`` handed to an optimizer (in a list).

    The ``__init__`` unit (and the helpers it calls) of the same class consumes it (see
    :meth:`_Analysis._check_init_attrs`); both live in the same top-level chunk."""
    from gradguard.analysis.context import ModuleContext, Unit
    from gradguard.model.text import LineIndex

    ctx = ModuleContext(None, LineIndex(""), {}, {})
    grad_attrs: Set[str] = set()
    trained_attrs: Set[str] = set()
    found: Dict[Tuple[str, str], tuple] = {}
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        me = S.self_arg(fn)
        if me is None:
            continue
        for n in A.iter_nodes(fn.body):
            if isinstance(n, ast.Attribute) and n.attr in ("grad", "retain_grad", "register_hook", "requires_grad"):
                if isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Name) \
                        and n.value.value.id == me and not (n.attr == "requires_grad" and isinstance(n.ctx, ast.Store)):
                    grad_attrs.add(n.value.attr)
            elif isinstance(n, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
                elts = n.values if isinstance(n, ast.Dict) else n.elts
                for e in elts:
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == me:
                        grad_attrs.add(e.attr)  # optim.SGD([self.X, ...]): a trained tensor
                        trained_attrs.add(e.attr)
        if fn.name == "__init__" or A.is_no_grad_function(fn):
            continue
        assigned = S.assigned_in(fn.body)
        an = None
        for loop in _loops_with_grad(fn.body):
            if any(isinstance(x, (ast.Break, ast.Return, ast.Raise)) for x in loop.body):
                continue  # runs at most once
            prefix = me + "."
            attrs = {
                d for d in (S.attr_name(n) for n in A.iter_nodes(loop.body) if isinstance(n, ast.Attribute))
                if d and d.startswith(prefix) and d not in assigned
            }
            if not attrs:
                continue
            if an is None:
                an = _Analysis(Unit("function", fn.body, fn, fn.name), ctx, unit_facts=False)
            taint = {d: {d} for d in attrs}
            backs: dict = {}
            for _ in range(2):
                an._taint_block(loop.body, taint, backs, 0)
            freeing = sorted([((c.lineno, c.col_offset), c, t) for c, keep, t in backs.values() if not keep],
                             key=lambda x: x[0])
            inner = [x for x in A.iter_statements(loop.body) if isinstance(x, _LOOPS)]
            for _pos, c, t in freeing:
                # where a recomputation would go: the top of the innermost loop around this backward()
                around = [x for x in [loop] + inner if x.lineno <= c.lineno <= (x.end_lineno or x.lineno)]
                body0 = max(around, key=lambda x: x.lineno).body[0]
                ok = body0.lineno > max(around, key=lambda x: x.lineno).lineno
                for d in sorted(t):
                    key = (d[len(prefix):], fn.name)
                    if key not in found:
                        found[key] = (key[0], fn.name, c.lineno - cls.lineno, c.col_offset,
                                      (c.end_lineno or c.lineno) - cls.lineno, c.end_col_offset or c.col_offset,
                                      me, body0.lineno - cls.lineno if ok else -1, body0.col_offset)
    if not found:
        return
    calls: List[str] = []
    assigned_init: Set[str] = set()
    leaves: Dict[str, str] = {}
    init = next((fn for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and fn.name == "__init__"), None)
    me = S.self_arg(init) if init is not None else None
    if init is not None and me is not None:
        prefix = me + "."
        assigned_init = {d[len(prefix):] for d in S.assigned_in(init.body) if d.startswith(prefix)}
        for st in _stmts_with_grad(init.body):
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                f = st.value.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == me \
                        and f.attr != "__init__" and f.attr not in calls:
                    calls.append(f.attr)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1:
                d = S.attr_name(st.targets[0])
                if d and d.startswith(prefix):
                    v = st.value
                    callee = v.func if isinstance(v, ast.Call) else None
                    last = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                    if _is_rg_expr(v):
                        leaves[d[len(prefix):]] = "data"
                    elif (last == "Parameter" and not any(k.arg == "requires_grad" for k in v.keywords)  # type: ignore[attr-defined]
                            and len(v.args) < 2):  # type: ignore[attr-defined]
                        leaves[d[len(prefix):]] = "param"
    yield f"gg102:attrloop:{cls.name}", (tuple(sorted(found.values())), tuple(sorted(grad_attrs)), tuple(calls),
                                         tuple(sorted(assigned_init)), tuple(sorted(leaves.items())), _method_names(cls),
                                         tuple(sorted(trained_attrs)))


def _method_names(cls: ast.ClassDef) -> Tuple[str, ...]:
    return tuple(fn.name for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _stmts_with_grad(stmts):
    """Statements of a body (nested blocks included) outside ``no_grad`` blocks and nested scopes."""
    for s in stmts:
        yield s
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or A.is_no_grad_with(s):
            continue
        for block in A.child_blocks(s):
            yield from _stmts_with_grad(block)


def _qualify_str(dotted: str, imports) -> str:
    head, _, rest = dotted.partition(".")
    q = imports.get(head, head)
    return f"{q}.{rest}" if rest else q


def _module_class_saves(name: str, ctx, depth: int = 0) -> Optional[bool]:
    """True if the user module class (or a user base class) holds a layer; None: cannot tell."""
    if ctx.summary.get(f"gg102:classsaves:{name}"):
        return True
    if depth > 5:
        return None
    for b in ctx.summary.get(f"gg102:class:{name}") or ():
        if "." not in b and _module_class_saves(b, ctx, depth + 1):
            return True
    return None


def _is_module_class(name: str, ctx, depth: int = 0) -> bool:
    bases = ctx.summary.get(f"gg102:class:{name}")
    if not bases or depth > 5:
        return False
    for b in bases:
        q = _qualify_str(b, ctx.imports)
        if q in K.MODULE_BASES:
            return True
        if "." not in b and _is_module_class(b, ctx, depth + 1):
            return True
    return False


# ---------------------------------------------------------------------------
# helpers on the AST


# ---------------------------------------------------------------------------
# the rule


# GG102's own module facts. ``gg102:bw:``, ``gg102:bwloop:`` and
# ``gg102:attrloop:`` are only written for code that back-propagates.
GG102_FACTS = _summary.FactSource("gg102", _gg102_facts, _fold_bwcalls,
                                  ("gg102:bw:", "gg102:bwloop:", "gg102:attrloop:"))


class StaleGraph(Rule):
    code = "GG102"
    name = "stale-graph"
    default_severity = Severity.ERROR
    needs_backprop = True
    fact_sources = (GRAPH_FACTS, GG102_FACTS)
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        # Exceptions are isolated per rule and unit by the engine.
        if not _may_report(unit, ctx):
            return []
        if K.other_framework_only(ctx.imports):
            return []  # mxnet/paddle/...: not a torch program
        return _Analysis(unit, ctx).run()


def _may_report(unit, ctx) -> bool:
    """Cheap pre-filter on the unit's text. A finding needs one of: a loop
    statement (``_check_loop``), a call of a same-file function whose loop
    back-propagates (``_check_call``, by that name), or this class's
    ``attrloop`` fact (``_check_init_attrs``). Keywords and names are looked
    up among the unit's words (comments and strings included: they only err on
    the side of analysing)."""
    if not unit.body:
        return False
    words = unit_words(unit, ctx.index.lines)
    if "for" in words or "while" in words:  # keywords as words: "forward" is no loop
        return True
    cls = unit.class_node
    if cls is not None and ctx.summary.get(f"gg102:attrloop:{cls.name}"):
        return True
    return _summary.query(ctx.summary, _mentions_bwloop, words)


def _mentions_bwloop(summary, words: frozenset) -> bool:
    """Do these words name a same-file function whose loop back-propagates?"""
    return not words.isdisjoint(_summary_index(summary)[2])


@record(frozen=False)
class _Hit:
    var: str
    graph: Graph
    loop: Optional[ast.stmt]  # the loop; or the statement calling a function whose loop back-propagates
    backward: Optional[ast.Call]  # (both None for a hit of a backward in another method: remote)
    via: Optional[str] = None  # the called function that runs backward(), if not a backward call itself
    remote: Optional[Range] = None  # the backward() in another method (loop is then None): self.attr hits
    remote_body: Optional[Position] = None  # start of the first statement of that method's loop body


_INDEX: tuple = (None, None)  # (summary, (has_bwloop, grad_read, bwloop names)) for the last summary seen


def _grad_read(summary) -> FrozenSet[str]:
    return _summary_index(summary)[1]


def _summary_index(summary) -> Tuple[bool, FrozenSet[str], FrozenSet[str]]:
    """What the units need from scanning every summary key, computed once per
    module summary (the engine builds one mapping per analysis and shares it by
    all units) instead of once per unit, which is quadratic on a large file."""
    global _INDEX
    last = _INDEX  # one read, one rebinding below: safe if documents are analysed on several threads
    if last[0] is summary:
        return last[1]
    bwloop = set()
    grad_read = set()
    delegating = []
    for k in summary:
        if k.startswith("gg102:"):
            if k.startswith("gg102:bwloop:"):
                bwloop.add(k[len("gg102:bwloop:"):])
            elif k.startswith("gg102:gradread:"):
                grad_read.add(k[len("gg102:gradread:"):])
            elif k.startswith("gg102:bwcalls:"):
                delegating.append(k[len("gg102:bwcalls:"):])
    # loops that back-propagate through the functions they call
    bwloop.update(n for n in delegating if n not in bwloop and _composed_fact(summary, "bwloop", n))
    out = (bool(bwloop), frozenset(grad_read), frozenset(bwloop))
    _INDEX = (summary, out)
    return out


class _Analysis:
    def __init__(self, unit, ctx, unit_facts: bool = True):
        self._bw_calls: dict = {}  # _backward_calls: id(node) -> its calls
        self.unit = unit
        self.ctx = ctx
        self.env: Dict[str, object] = {}
        self.nograd = 0
        self.order = 0
        self.hits: List[_Hit] = []
        self.reported: Set[Tuple[str, int]] = set()
        self.parent: Dict[int, Tuple[list, int]] = {}  # id(stmt) → (block, index)
        self.frozen: Set[str] = set()
        self.owner: Dict[int, ast.stmt] = {}  # id(block) → compound statement owning it
        self.rg_false_nonleaf: Dict[str, ast.stmt] = {}  # Y.requires_grad_(False) on a non-leaf
        self.self_name = None
        self.delegations: Optional[dict] = None  # set by _backprop_facts while summarising
        self.delegation_locals: Set[str] = set()
        node = unit.node
        if unit.class_node is not None and node is not None and _is_module_class(unit.class_node.name, ctx):
            args = list(node.args.posonlyargs) + list(node.args.args)
            if args and not any(getattr(d, "id", "") == "staticmethod" for d in node.decorator_list):
                self.self_name = args[0].arg
        # _check_call looks for calls of functions whose loop back-propagates: only
        # where the unit names one
        self.calls_bwloop = bool(unit.body) and _summary.query(ctx.summary, _mentions_bwloop,
                                                                unit_words(unit, ctx.index.lines))
        self.grad_read = _summary.query(ctx.summary, _grad_read) if unit.kind == "module" else frozenset()
        self.trained_attrs: Set[str] = set()
        self.torch_alias = next((k for k, v in ctx.imports.items() if v == "torch"), None)
        if unit_facts:  # the summarizers only run _taint_block, which never reads them
            self._collect_unit_facts(unit.body)

    # -- unit-wide facts --------------------------------------------------
    def _collect_unit_facts(self, body):
        self.module_evidence: Set[str] = set()
        self.grad_used: Set[str] = set()
        for s in body:
            for n in S.walk_no_scopes(s):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                    if n.attr in ("parameters", "named_parameters", "zero_grad"):
                        self.module_evidence.add(n.value.id)
                    if n.attr in ("grad", "retain_grad", "register_hook", "requires_grad"):
                        if not (n.attr == "requires_grad" and isinstance(n.ctx, ast.Store)):
                            self.grad_used.add(n.value.id)
                elif isinstance(n, ast.Attribute) and n.attr in ("grad", "retain_grad", "register_hook") \
                        and S.attr_name(n.value):
                    self.grad_used.add(S.attr_name(n.value))  # type: ignore[arg-type]  # self.X.grad
                elif isinstance(n, (ast.List, ast.Tuple, ast.Set)):
                    if isinstance(n.ctx if hasattr(n, "ctx") else ast.Load(), ast.Load):
                        for e in n.elts:
                            if isinstance(e, ast.Name):
                                self.grad_used.add(e.id)  # e.g. optim.SGD([X, w]): a trained tensor
                            elif S.attr_name(e):
                                self.grad_used.add(S.attr_name(e))  # type: ignore[arg-type]  # optim.SGD([self.X])
                elif isinstance(n, ast.Dict):
                    for e in n.values:
                        if isinstance(e, ast.Name):
                            self.grad_used.add(e.id)
                elif isinstance(n, ast.Call):
                    q = (self.ctx.qualify(n.func) or "") if (n.args or n.keywords) else ""  # no argument: nothing to add
                    if q.startswith(K.OPTIMIZER_PREFIXES) or q in K.BACKWARD_FUNCTIONS:
                        for a in list(n.args) + [k.value for k in n.keywords]:
                            if isinstance(a, ast.Name):
                                self.grad_used.add(a.id)
                    if isinstance(n.func, ast.Attribute) and n.func.attr in K.BACKWARD_METHODS:
                        k = S.kw(n, "inputs")
                        if k is not None:
                            for e in S.walk_no_scopes(k.value):
                                if isinstance(e, ast.Name):
                                    self.grad_used.add(e.id)
        if self.unit.kind == "module":
            self.grad_used |= self.grad_read

    # -- driver -------------------------------------------------------------
    def run(self) -> List[Finding]:
        node = self.unit.node
        if node is not None and A.is_no_grad_function(node, self.ctx):
            return []
        self._seed_params()
        self._seed_init_leaves()
        self._block(self.unit.body)
        self._check_init_attrs()
        return [f for f in (self._finding(h) for h in self.hits) if f is not None]

    def _init_fact(self):
        """``gg102:attrloop:<C>`` when this unit is ``__init__`` of a module-level
        class or a method ``__init__`` calls; with the instance name."""
        node, cls = self.unit.node, self.unit.class_node
        if node is None or cls is None or self.unit.parents != (cls,):
            return None, None
        fact = self.ctx.summary.get(f"gg102:attrloop:{cls.name}")
        me = S.self_arg(node)
        if not fact or me is None or (node.name != "__init__" and node.name not in fact[2]):
            return None, None
        if fact[5] != _method_names(cls):  # another class of the same name
            return None, None
        return fact, me

    def _seed_init_leaves(self):
        """A helper ``__init__`` calls starts from the requires-grad leaves ``__init__`` made."""
        fact, me = self._init_fact()
        if fact is None or self.unit.node.name == "__init__":
            return
        mine = S.assigned_in(self.unit.body)
        for attr, kind in fact[4]:
            d = f"{me}.{attr}"
            if d not in mine:
                self.env[d] = Leaf(self._src(d, kind, None, None, None))

    def _check_init_attrs(self):
        """In ``__init__`` of a module-level class (or a method it calls): the
        ``self.<attr>`` graphs it leaves behind that another method's
        back-propagating loop reuses (``gg102:attrloop:<C>``, computed from the
        same class, hence the same top-level chunk). Reported here, where the
        stale graph is built; the method with the loop reports nothing about them
        (it never sees the graph)."""
        fact, me = self._init_fact()
        if fact is None:
            return
        cls = self.unit.class_node
        loops, grad_attrs, _calls, init_assigned, _leaves, _methods, trained_attrs = fact
        self.trained_attrs = {f"{me}.{a}" for a in trained_attrs}
        helper = self.unit.node.name != "__init__"
        self.grad_used.update(f"{me}.{a}" for a in grad_attrs)
        index = self.ctx.index
        for attr, method, line, col, end_line, end_col, loop_self, body_line, body_col in loops:
            if helper and attr in init_assigned:
                continue  # __init__ may replace what the helper built
            var = f"{me}.{attr}"
            g = self.env.get(var)
            if not isinstance(g, Graph) or g.holder:
                continue
            for name in g.carried or (var,):
                gv = self.env.get(name)
                if not isinstance(gv, Graph) or not gv.stmts:
                    continue
                if gv.saving is not True and name in self.grad_used:
                    continue
                key = (name, id(gv.stmts[0]))
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
                self.hits.append(_Hit(name, gv, None, None, via=method, remote=rng, remote_body=at))

    def _seed_params(self):
        """Parameters of a module-level function that some call site passes a
        requires-grad tensor to."""
        node = self.unit.node
        if node is None or self.unit.class_node is not None or self.unit.parents:
            return
        summ = self.ctx.summary
        params = list(node.args.posonlyargs) + list(node.args.args)
        for i, a in enumerate(params):
            for key in (str(i), a.arg):
                val = summ.get(f"gg102:rgarg:{node.name}:{key}")
                if val is None or a.arg in self.module_evidence:
                    continue
                ok = val == "rg" or (
                    isinstance(val, str) and (
                        (val.startswith("call:") and summ.get(f"gg102:returns_rg:{val[5:]}"))
                        or (val.startswith("name:") and summ.get(f"gg102:rgglobal:{val[5:]}"))))
                if ok:
                    self.env[a.arg] = Leaf(self._src(a.arg, "data", None, a, None))
                    break

    def _block(self, stmts: list):
        for i, s in enumerate(stmts):
            self.parent[id(s)] = (stmts, i)
            self._stmt(s)

    # -- findings ---------------------------------------------------------------
    def _finding(self, h: _Hit) -> Optional[Finding]:
        ctx, var, g = self.ctx, h.var, h.graph
        origin = next((s for s in g.stmts if var in S.stmt_binds(s)), g.stmts[0])
        srcs = sorted(g.sources, key=lambda s: s.order)
        if not srcs:
            return None
        primary = next((s for s in srcs if s.name), srcs[0])
        if g.saving is False and all(s.kind in ("param", "module") for s in srcs) and g.stmts \
                and all(_view_statement(s) for s in g.stmts):
            # a view of a parameter (a tied projection `emb.weight.t()`, `w.T`, `w.view(...)`,
            # `w[0]`): it shares the parameter's storage, so the optimizer's in-place updates show
            # through it and the gradient it carries is the one wanted; nothing to report
            return None
        trained = any(s.kind in ("param", "module") or (s.name in self.grad_used) for s in srcs)
        certain = g.saving is True
        # X = torch.rand(..., requires_grad=True); X = X.reshape(...): the source is the replaced leaf
        shown = primary if primary.name != var else Src(None, primary.kind)
        before = M.built_where(h.via, self.unit.node.name if h.remote is not None else None)
        msg = M.stale(var, before, M.describe(shown.kind, shown.name), M.into(shown.kind, shown.name), g.saving,
                      g.unknown_op, primary.name if trained else None)
        related: List[Related] = []
        for src in srcs[:3]:
            node = src.stmt or src.node
            if node is None:
                continue
            rng = ctx.line_range(node) if isinstance(node, ast.stmt) else ctx.range(node)
            related.append(Related(rng, M.origin(src.kind, src.name, isinstance(src.node, ast.arg))))
        bmsg = M.backward_note(var, h.via, h.remote is not None, certain)
        related.append(Related(h.remote if h.remote is not None else ctx.range(h.backward), bmsg))
        rg = self.rg_false_nonleaf.get(var)
        if rg is not None:
            related.append(Related(ctx.line_range(rg), M.not_a_leaf(var)))
        if not trained and self._only_grad_source_of_loop(h, srcs):
            # the loop's loss needs these leaves' graph (`x_out = t @ (x + y)` with nothing
            # else requiring grad): removing requires_grad would leave it nothing to
            # back-propagate; computing the value again in the loop keeps every gradient
            trained = True
        fixes = Fixes(ctx, self.unit, self.parent, self.owner).choose(h, srcs, trained, self.grad_used,
                                                                       self.trained_attrs)
        return Finding(
            code="GG102",
            range=ctx.line_range(origin),
            message=msg,
            severity=Severity.ERROR if certain else Severity.WARNING,
            related=tuple(related),
            fixes=fixes,
            data={"variable": var, "source": primary.name, "certain": certain},
        )

    def _only_grad_source_of_loop(self, h: _Hit, srcs: List[Src]) -> bool:
        """Do the stale value's leaves feed the loop's computation directly, with no
        trainable module or other leaf that requires grad read in the loop?"""
        loop = h.loop
        if not isinstance(loop, _LOOPS):
            return False
        names = {s.name for s in srcs if s.name}
        read = {n.id for st in loop.body for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if not names & read:
            return False
        node = getattr(self.unit, "node", None)
        params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)} if node is not None else set()
        for name in read - names - {h.var}:
            v = self.env.get(name)
            if name in params or isinstance(v, Leaf) or (isinstance(v, Mod) and v.trainable):
                return False  # another tensor or model the loss may learn through, or one we cannot see
        return True

    # -- statements -----------------------------------------------------------
    def _stmt(self, s: ast.stmt):
        for block in A.child_blocks(s):
            self.owner[id(block)] = s
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.env[s.name] = None
            return
        if isinstance(s, _LOOPS):
            if not self.nograd:
                self._check_loop(s)
            if isinstance(s, (ast.For, ast.AsyncFor)):
                it = self._eval(s.iter)
                self._frozen_params_loop(s)
                for n in S.bound_names(s.target):
                    self.env[n] = _as_graph(it) if isinstance(it, (Graph, Leaf)) else None
            else:
                self._eval(s.test)
            self._block(s.body)
            self._block(s.orelse)
            return
        if self.calls_bwloop and isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)):
            self._check_call(s)
        if isinstance(s, ast.Assign):
            v = self._eval(s.value)
            for t in s.targets:
                self._assign(t, v, s)
            return
        if isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self._assign(s.target, self._eval(s.value), s)
            return
        if isinstance(s, ast.AugAssign):
            v = self._eval(s.value)
            key = s.target.id if isinstance(s.target, ast.Name) else S.attr_name(s.target)
            if key:
                cur = self.env.get(key)
                opname = type(s.op).__name__
                if isinstance(cur, (Graph, Leaf)) or isinstance(v, (Graph, Leaf)):
                    g = _merge([cur, v], self._binop_saving(opname, s.target, s.value), opname)
                    self.env[key] = _with_stmt(g, s)
            return
        if isinstance(s, (ast.With, ast.AsyncWith)):
            ng = A.is_no_grad_with(s, self.ctx)
            for it in s.items:
                v = self._eval(it.context_expr)
                if it.optional_vars is not None:
                    self._assign(it.optional_vars, None, s)
            if ng:
                self.nograd += 1
            self._block(s.body)
            if ng:
                self.nograd -= 1
            return
        if isinstance(s, ast.If):
            self._eval(s.test)
            self._block(s.body)
            self._block(s.orelse)
            return
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self._block(s.body)  # type: ignore[attr-defined]
            for h in s.handlers:  # type: ignore[attr-defined]
                self._block(h.body)
            self._block(s.orelse)  # type: ignore[attr-defined]
            self._block(s.finalbody)  # type: ignore[attr-defined]
            return
        if type(s).__name__ == "Match":
            self._eval(s.subject)  # type: ignore[attr-defined]
            for c in s.cases:  # type: ignore[attr-defined]
                self._block(c.body)
            return
        if isinstance(s, ast.Expr):
            self._expr_stmt(s)
            return
        if isinstance(s, ast.Delete):
            for t in s.targets:
                for n in S.bound_names(t):
                    self.env.pop(n, None)
            return

    # -- loops ------------------------------------------------------------------
    def _check_loop(self, loop: ast.stmt):
        if not any(isinstance(v, Graph) for v in self.env.values()):
            return
        if any(isinstance(x, (ast.Break, ast.Return, ast.Raise)) for x in loop.body):  # type: ignore[attr-defined]
            return  # the body runs at most once: nothing is back-propagated a second time
        if not any(isinstance(c, ast.Call) and (A.is_backward_call(c, self.ctx) or self._fn_fact("bw", c))
                   for c in A.iter_nodes(loop.body)):  # type: ignore[attr-defined]
            return
        assigned = S.assigned_in(loop.body)  # type: ignore[attr-defined]
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            assigned |= set(S.bound_names(loop.target))
        cands = {n: v for n, v in self.env.items() if isinstance(v, Graph) and not v.holder and n not in assigned}
        if not cands:
            return
        taint: Dict[str, Set[str]] = {n: {n} for n in cands}
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            t = self._taint(loop.iter, taint) & set(cands)
            for n in S.bound_names(loop.target):
                taint[n] = set(t)
        backs: Dict[int, Tuple[ast.Call, bool, Set[str]]] = {}
        for _ in range(2):  # twice: values carried from one iteration into the next
            self._taint_block(loop.body, taint, backs, 0)  # type: ignore[attr-defined]
        for cand in sorted(cands, key=lambda n: (self._first_line(cands[n]), n)):
            reaching = [(c, keep) for c, keep, t in backs.values() if cand in t]
            if not reaching:
                continue
            freeing = [c for c, keep in reaching if not keep]
            if not freeing:
                continue  # every backward through it retains the graph: legal
            freeing.sort(key=lambda c: (c.lineno, c.col_offset))
            for var in cands[cand].carried or (cand,):
                g = self.env.get(var)
                if not isinstance(g, Graph) or not g.stmts:
                    continue
                if g.saving is not True and var in self.grad_used:
                    # differentiated against on purpose (autograd.grad(u, x), x.grad, x.retain_grad()):
                    # without a certain crash, the reuse is what the program asks for
                    continue
                key = (var, id(g.stmts[0]))
                if key in self.reported:
                    continue
                self.reported.add(key)
                self.hits.append(_Hit(var, g, loop, freeing[0]))

    @staticmethod
    def _first_line(g: Graph) -> int:
        return g.stmts[0].lineno if g.stmts else 0

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
            fact = self._fn_fact("bw", c)
            if fact is not None:
                t = self._fact_taint(fact, c, taint)
                if t:
                    prev = backs.get(id(c))
                    backs[id(c)] = (c, False, (prev[2] if prev else set()) | t)
                continue
            if target is False:
                if self.delegations is not None and isinstance(c.func, ast.Name) \
                        and c.func.id not in self.delegation_locals and c.func.id not in _BUILTIN_NAMES:
                    self._delegation(c, taint)
                continue
            t = self._taint(target, taint)
            if q == "torch.autograd.grad":
                # grad(outputs, inputs) runs only the part of the graph leading to `inputs`
                inputs = c.args[1] if len(c.args) > 1 else (S.kw(c, "inputs").value if S.kw(c, "inputs") else None)  # type: ignore[union-attr]
                names = {n.id for n in S.walk_no_scopes(inputs) if isinstance(n, ast.Name)} if inputs is not None else set()
                t = {v for v in t if self._sources_named(v, names)}
            keep = S.retains(c)
            prev = backs.get(id(c))
            backs[id(c)] = (c, keep, (prev[2] if prev else set()) | t)

    def _delegation(self, c: ast.Call, taint) -> None:
        """While summarising: what reaches each argument of a call of a plain
        name (maybe a module-level function: ``gg102:bwcalls:``)."""
        args, kws = self.delegations.setdefault(c, ([], {}))  # type: ignore[union-attr]
        for i, a in enumerate(c.args):
            if isinstance(a, ast.Starred):
                break
            if i == len(args):
                args.append(set())
            args[i] |= self._taint(a, taint)
        for k in c.keywords:
            if k.arg:
                kws.setdefault(k.arg, set()).update(self._taint(k.value, taint))

    def _fn_fact(self, kind: str, c: ast.Call):
        if isinstance(c.func, ast.Name) and c.func.id not in self.env:
            return _summary.query(self.ctx.summary, _composed_fact, kind, c.func.id)
        return None

    def _fact_taint(self, fact, c: ast.Call, taint) -> Set[str]:
        """Names whose values reach a backward() inside the called function:
        through the arguments it back-propagates, or as globals it reads."""
        params, globs = fact
        out: Set[str] = set()
        for i, a in enumerate(c.args):
            if isinstance(a, ast.Starred):
                break
            if i in params:
                out |= self._taint(a, taint)
        for k in c.keywords:
            if k.arg in params:
                out |= self._taint(k.value, taint)
        for g in globs:
            if self.unit.kind == "module" or g not in S.assigned_in(self.unit.body):
                out |= taint.get(g, set())
        return out

    def _check_call(self, s: ast.stmt):
        """``train(model, X, Y)`` where ``train`` loops and back-propagates through
        its ``Y`` (or a global it reads): the stale graph is reused inside the callee's loop."""
        if self.nograd:
            return
        for c in S.walk_no_scopes(s):
            if not isinstance(c, ast.Call):
                continue
            fact = self._fn_fact("bwloop", c)
            if fact is None:
                continue
            taint = {n: {n} for n, v in self.env.items() if isinstance(v, Graph) and not v.holder}
            reached = []
            for cand in sorted(self._fact_taint(fact, c, taint)):
                for var in self.env[cand].carried or (cand,):  # type: ignore[attr-defined]
                    if var not in reached:
                        reached.append(var)
            for var in reached:
                g = self.env.get(var)
                if not isinstance(g, Graph) or not g.stmts:
                    continue
                key = (var, id(g.stmts[0]))
                if key in self.reported:
                    continue
                self.reported.add(key)
                self.hits.append(_Hit(var, g, s, c, via=c.func.id))  # type: ignore[attr-defined]

    def _sources_named(self, var: str, names: Set[str]) -> bool:
        g = self.env.get(var)
        return isinstance(g, Graph) and any(s.name in names for s in g.sources)

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
            if isinstance(n, _SCOPES) or isinstance(n, (ast.Compare, ast.Constant)):
                continue
            if isinstance(n, ast.Attribute):
                if n.attr in _CUT_ATTRS:
                    continue
                d = S.attr_name(n)
                if d and isinstance(n.ctx, ast.Load):
                    out |= taint.get(d, set())
            if isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Attribute) and (f.attr in K.GRAPH_CUT_METHODS or f.attr in _NON_TENSOR_METHODS):
                    continue
                if A.applies_cut(n):
                    continue
                if isinstance(f, ast.Name) and f.id in _CUT_BUILTINS and f.id not in taint:
                    continue
                q = self.ctx.qualify(f)
                if q in _GRAPHLESS_FUNCTIONS:
                    continue
            stack.extend(A.child_nodes(n))
        return out

    def _frozen_params_loop(self, s) -> bool:
        """``for p in m.parameters(): p.requires_grad = False`` (or ``_(False)``)."""
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "parameters"
                and isinstance(it.func.value, ast.Name) and isinstance(s.target, ast.Name)):
            return False
        p = s.target.id
        for n in s.body:
            for x in S.walk_no_scopes(n):
                if isinstance(x, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" and isinstance(t.value, ast.Name)
                    and t.value.id == p for t in x.targets) and S.const_false(x.value):
                    self._freeze(it.func.value.id)
                    return True
                if (isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "requires_grad_"
                        and isinstance(x.func.value, ast.Name) and x.func.value.id == p and x.args
                        and S.const_false(x.args[0])):
                    self._freeze(it.func.value.id)
                    return True
        return False

    def _comprehension(self, e):
        """``sum(p.pow(2).sum() for p in model.parameters())``, ``{n: p.norm() for n, p in
        model.named_parameters()}``: the element built from each parameter of a module the
        file builds, in the comprehension's own scope."""
        if self.nograd:
            return None
        saved = dict(self.env)
        try:
            for gen in e.generators:
                self._bind_item(gen.target, gen.iter)
                for cond in gen.ifs:
                    self._eval(cond)
            elts = [e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]
            vals = [self._eval(x) for x in elts]
        finally:
            self.env = saved
        return _merge(vals, False)

    def _bind_item(self, target: ast.AST, it: ast.AST):
        item = None
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in ("parameters", "named_parameters") and not it.args):
            owner = self._eval(it.func.value)
            if isinstance(owner, Mod) and owner.trainable:
                label = f"{ast.unparse(it.func.value)}.{it.func.attr}()"
                param = Mod(Src(label, "param", None, it, None, owner.src.order), True, True)
                if it.func.attr == "parameters" and isinstance(target, ast.Name):
                    self.env[target.id] = param
                    return
                if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[1], ast.Name):
                    self.env[target.elts[1].id] = param
                    if isinstance(target.elts[0], ast.Name):
                        self.env.pop(target.elts[0].id, None)
                    return
        else:
            # items of another value are not followed: whether a model read from another
            # file is frozen (fast_neural_style's Vgg16(requires_grad=False)) is not known
            # here, and an error must be a proof
            self._eval(it)
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                if item is None:
                    self.env.pop(n.id, None)
                else:
                    self.env[n.id] = item

    def _freeze(self, name: str):
        self.frozen.add(name)
        m = self.env.get(name)
        if isinstance(m, Mod):
            self.env[name] = Mod(m.src, False, m.saving)

    def _expr_stmt(self, s: ast.Expr):
        call = s.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
            name = call.func.value.id
            meth = call.func.attr
            cur = self.env.get(name)
            if meth == "requires_grad_":
                flag = call.args[0] if call.args else S.kw(call, "requires_grad")
                flag = flag.value if isinstance(flag, ast.keyword) else flag
                off = flag is not None and S.const_false(flag)
                if isinstance(cur, Mod) or name in self.module_evidence:
                    if off:
                        self._freeze(name)
                    return
                if off:
                    if isinstance(cur, Graph):
                        self.rg_false_nonleaf[name] = s  # raises at run time; the graph stays
                    else:
                        self.env[name] = None
                elif not isinstance(cur, Graph):
                    self.env[name] = Leaf(self._src(name, "data", s, call, ("method", call)))
                return
            if meth in ("detach_",):
                self.env[name] = None
                return
            if isinstance(cur, (Graph, Leaf)) and meth.endswith("_") and not meth.startswith("_"):
                base = meth[:-1]
                sv = True if base in K.SAVING_METHODS or meth in K.SAVING_METHODS else (
                    False if meth in K.NONSAVING_METHODS or base in K.NONSAVING_METHODS else None)
                args = [self._eval(a) for a in call.args] + [self._eval(k.value) for k in call.keywords]
                g = _merge([cur] + args, sv, f".{meth}()")
                self.env[name] = _with_stmt(g, s)
                return
        self._eval(s.value)

    def _assign(self, target: ast.AST, v, stmt: ast.stmt):
        if isinstance(target, ast.Name):
            if isinstance(v, Leaf) and v.src.name is None:
                v = Leaf(Src(target.id, v.src.kind, stmt, v.src.node, v.src.removal, v.src.order))
            elif isinstance(v, Mod) and v.src.name is None:
                v = Mod(Src(target.id, "module", stmt, v.src.node, None, v.src.order),
                        v.trainable and target.id not in self.frozen, v.saving)
            elif isinstance(v, Graph):
                v = _with_stmt(v, stmt)
            self.env[target.id] = v
        elif isinstance(target, (ast.Tuple, ast.List)):
            g = _as_graph(v) if isinstance(v, (Graph, Leaf)) else None
            for e in target.elts:
                self._assign(e.value if isinstance(e, ast.Starred) else e, g, stmt)
        elif isinstance(target, ast.Attribute) and target.attr != "requires_grad":
            d = S.attr_name(target)
            if d:
                if isinstance(v, Graph):
                    self.env[d] = _with_stmt(v, stmt)
                elif isinstance(v, Leaf) and v.src.name is None:  # self.X = torch.rand(..., requires_grad=True)
                    self.env[d] = Leaf(Src(d, v.src.kind, stmt, v.src.node, v.src.removal, v.src.order))
                elif isinstance(v, (Leaf, Mod)):
                    self.env[d] = v
                else:
                    self.env.pop(d, None)
        elif isinstance(target, ast.Attribute):
            if target.attr == "requires_grad" and isinstance(target.value, ast.Name):
                name = target.value.id
                cur = self.env.get(name)
                val = stmt.value if isinstance(stmt, ast.Assign) else None
                if S.const_true(val) and not isinstance(cur, Graph):
                    self.env[name] = Leaf(self._src(name, "data", stmt, stmt, None))
                elif val is not None and S.const_false(val) and not isinstance(cur, Graph):
                    self.env[name] = None
        elif isinstance(target, ast.Subscript):
            base = target.value
            if isinstance(base, ast.Name) and isinstance(v, (Graph, Leaf)):
                cur = self.env.get(base.id)
                self.env[base.id] = _with_stmt(_merge([cur, v], False), stmt)

    def _src(self, name, kind, stmt, node, removal) -> Src:
        self.order += 1
        return Src(name, kind, stmt, node, removal, self.order)

    # -- expressions ------------------------------------------------------------
    def _binop_saving(self, opname: str, left: ast.AST, right: ast.AST) -> Optional[bool]:
        if opname in K.SAVING_BINOPS:
            return True
        if opname in K.NONSAVING_BINOPS:
            return False
        return None

    def _eval(self, e: Optional[ast.AST]):
        if e is None:
            return None
        if isinstance(e, ast.Name):
            return self.env.get(e.id)
        if isinstance(e, ast.Constant):
            return None
        if isinstance(e, ast.BinOp):
            l, r = self._eval(e.left), self._eval(e.right)
            if self.nograd:
                return None
            opname = type(e.op).__name__
            return _merge([l, r], self._binop_saving(opname, e.left, e.right), f"`{_OPS.get(opname, opname)}`")
        if isinstance(e, ast.UnaryOp):
            v = self._eval(e.operand)
            if self.nograd or isinstance(e.op, (ast.Not, ast.Invert)):
                return None
            return _merge([v], False)
        if isinstance(e, (ast.Compare, ast.BoolOp)):
            for x in ast.iter_child_nodes(e):
                if isinstance(x, ast.expr):
                    self._eval(x)
            return None
        if isinstance(e, ast.IfExp):
            self._eval(e.test)
            return _merge([self._eval(e.body), self._eval(e.orelse)], False)
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            vs = [self._eval(x) for x in e.elts]
            return None if self.nograd else _carrier(_merge(vs, False), e.elts, self.env, vs, container=True)
        if isinstance(e, ast.Starred):
            return self._eval(e.value)
        if isinstance(e, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return self._comprehension(e)
        if isinstance(e, ast.NamedExpr):
            v = self._eval(e.value)
            self.env[e.target.id] = v
            return v
        if isinstance(e, ast.Await):
            return self._eval(e.value)
        if isinstance(e, ast.Attribute):
            d = S.attr_name(e)
            if d is not None and d in self.env:
                return self.env[d]
            if d is not None and self.self_name and e.value.id == self.self_name and e.value.id not in self.env:  # type: ignore[attr-defined]
                return self._self_attr(e)
            return self._attr_value(self._eval(e.value), e)
        if isinstance(e, ast.Subscript):
            v = self._eval(e.value)
            if isinstance(v, Mod):  # model[0]
                self._eval(e.slice)
                return v
            idx_saving = self._index_saving(e.slice)
            if self.nograd or not isinstance(v, (Graph, Leaf)):
                return None
            return _merge([v], idx_saving, "indexing")
        if isinstance(e, ast.Call):
            return self._call(e)
        return None

    def _self_attr(self, e: ast.Attribute):
        """``self.fc`` / ``self.gain`` in a method of a module class."""
        summ = self.ctx.summary
        if summ.get(f"gg102:modattr:{e.attr}"):
            return Mod(Src(f"{self.self_name}.{e.attr}", "module", None, e, None, 0), True, True)
        if summ.get(f"gg102:paramattr:{e.attr}"):
            return Mod(Src(f"{self.self_name}.{e.attr}", "param", None, e, None, 0), True, True)
        return None

    def _attr_value(self, v, e: ast.Attribute):
        attr = e.attr
        if isinstance(v, Mod):
            if not v.trainable or attr in _CUT_ATTRS or attr.startswith("_"):
                return None
            summ = self.ctx.summary
            name = f"{v.src.name}.{attr}" if v.src.name else attr
            if attr in ("weight", "bias") or attr.startswith(("weight_", "bias_")) or summ.get(f"gg102:paramattr:{attr}"):
                return Mod(Src(name, "param", None, e, None, v.src.order), True, True)  # a parameter
            if summ.get(f"gg102:modattr:{attr}"):
                return Mod(Src(name, "module", None, e, None, v.src.order), True, True)  # a submodule
            return None
        if attr in ("T", "mT", "H", "mH", "real") and not self.nograd:
            return _merge([v], False)
        return None

    def _index_saving(self, sl: ast.AST) -> Optional[bool]:
        """Basic indexing (ints, slices) saves nothing; a tensor index saves it."""
        parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        result: Optional[bool] = False
        for p in parts:
            if isinstance(p, ast.Slice):
                for b in (p.lower, p.upper, p.step):
                    self._eval(b)
                continue
            if isinstance(p, ast.Constant) or (isinstance(p, ast.UnaryOp) and isinstance(p.operand, ast.Constant)):
                continue
            v = self._eval(p)
            if isinstance(p, (ast.Compare, ast.List)) or isinstance(v, (Graph, Leaf)) or (
                    isinstance(p, ast.Call) and (self.ctx.qualify(p.func) or "") in K.TENSOR_FACTORIES):
                result = True
            elif isinstance(p, ast.Name) and p.id in self.env:
                result = _sv(result, None)
            else:
                result = _sv(result, None)
        return result

    def _call(self, e: ast.Call):  # noqa: C901  (one dispatch over call kinds; goes when GG102 moves onto the shared interpreter)
        func = e.func
        q = self.ctx.qualify(func) or ""
        args = [self._eval(a) for a in e.args] + [self._eval(k.value) for k in e.keywords]
        if A.applies_cut(e):  # apply_to_tensor(h, torch.Tensor.detach): detached
            return None
        # module construction: nn.Linear(5, 1), MyNet()
        ctor = self._module_ctor(func, q, args)
        if ctor is not None:
            return ctor
        # factories: leaves
        if q in K.TENSOR_FACTORIES or q in K.VARIABLE_CONSTRUCTORS:
            kw = S.kw(e, "requires_grad")
            if kw is not None and S.const_true(kw.value):
                return Leaf(self._src(None, "data", None, e, ("kw", kw, e)))
            return None
        if q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            kw = S.kw(e, "requires_grad")
            if (kw is not None and S.const_false(kw.value)) or (len(e.args) > 1 and S.const_false(e.args[1])):
                return None
            return Leaf(self._src(None, "param", None, e, None))
        if isinstance(func, ast.Attribute):
            d = S.attr_name(func)
            if d is not None and not q.startswith("torch."):
                held = self.env.get(d) if d in self.env else (
                    self._self_attr(func) if self.self_name and func.value.id == self.self_name else None)  # type: ignore[attr-defined]
                if isinstance(held, Mod):
                    return self._module_call(held, args, e)
            recv = self._eval(func.value) if not q.startswith("torch.") else None
            meth = func.attr
            if (meth in K.GRAPH_CUT_METHODS or meth in _NON_TENSOR_METHODS) and not isinstance(recv, Mod):
                return None
            if meth == "requires_grad_" and not isinstance(recv, Mod):
                flag = e.args[0] if e.args else (S.kw(e, "requires_grad").value if S.kw(e, "requires_grad") else None)  # type: ignore[union-attr]
                if flag is not None and S.const_false(flag):
                    return None if not isinstance(recv, Graph) else recv
                if recv is None and isinstance(func.value, ast.Call):
                    return Leaf(self._src(None, "data", None, e, ("method", e)))
                return recv
            if isinstance(recv, Mod) and recv.src.kind == "param" and meth not in ("forward", "__call__") \
                    and meth not in _MODULE_SELF_METHODS and meth not in _NON_TENSOR_METHODS:
                recv = _as_graph(recv)
            if isinstance(recv, Mod):  # module.forward(x), model.to(device), ...
                if meth in ("forward", "__call__"):
                    return self._module_call(recv, args, e)
                if meth == "requires_grad_":
                    flag = e.args[0] if e.args else None
                    return Mod(recv.src, not (flag is not None and S.const_false(flag)) and recv.trainable, recv.saving)
                if meth in _MODULE_SELF_METHODS:
                    return recv
                sub = self._attr_value(recv, func)  # model.fc(x)
                return self._module_call(sub, args, e) if isinstance(sub, Mod) else None
            if isinstance(recv, (Graph, Leaf)):
                if self.nograd:
                    return None
                if meth in K.SAVING_METHODS:
                    sv: Optional[bool] = True
                elif meth in K.PASSTHROUGH_METHODS or meth in K.NONSAVING_METHODS:
                    sv = False
                else:
                    sv = None
                return _merge([recv] + args, sv, f"`.{meth}()`")
            mod = None
        else:
            mod = self._module_of(func)
        # module calls
        if mod is not None:
            return self._module_call(mod, args, e)
        if self.nograd:
            return None
        if q.startswith("torch."):
            if not any(_as_graph(a) is not None for a in args):
                return None
            if q in K.SAVING_FUNCTIONS:
                return _merge(args, True)
            if q in K.NONSAVING_FUNCTIONS:
                return _merge(args, False)
            if q in _GRAPHLESS_FUNCTIONS:
                return None
            if q.startswith("torch.utils."):  # TensorDataset(x, y), DataLoader(...): containers
                return _carrier(_merge(args, None, f"`{q}`"), list(e.args) + [k.value for k in e.keywords],
                                self.env, args, container=True)
            return _merge(args, None, f"`{q}`")
        if isinstance(func, ast.Name) and func.id in _BUILTIN_NAMES and func.id not in self.env:
            if func.id in ("sum",):
                return _merge(args, False)
            if func.id in ("abs", "max", "min", "pow", "divmod", "round"):
                return _merge(args, None, f"`{func.id}()`")
            if func.id in ("list", "tuple", "zip", "reversed", "sorted", "enumerate", "iter", "next"):
                return _carrier(_merge(args, False), list(e.args) + [k.value for k in e.keywords], self.env, args,
                                container=True)
            return None
        fname = self._summarised_function(func)
        if fname is not None:
            # a function defined in this file (or resolved from another): what does it return?
            ff = self.ctx.summary.get(f"fn:{fname}")
            if ff is not None and hasattr(ff, "ret") and hasattr(ff, "no_grad"):
                if ff.no_grad or ff.detaches or not ff.returns_value:
                    return None
                flows = set(getattr(ff.ret, "params", ()) or ())
                nodes: List[ast.AST] = []
                vals = []
                pos = [a for a in e.args if not isinstance(a, ast.Starred)]
                for i, a in enumerate(pos):
                    if i in flows:
                        nodes.append(a)
                        vals.append(args[i])
                names = list(getattr(ff, "params", ()) or ())
                for j, k in enumerate(e.keywords):
                    if k.arg in names and names.index(k.arg) in flows:
                        nodes.append(k.value)
                        vals.append(args[len(e.args) + j])
                if not any(_as_graph(v) is not None for v in vals):
                    return None
                return _carrier(_merge(vals, None, f"`{fname}()`"), nodes, self.env, vals)
        if any(_as_graph(a) is not None for a in args):
            name = ast.unparse(func) if hasattr(ast, "unparse") else "call"
            return _carrier(_merge(args, None, f"`{name}()`"), list(e.args) + [k.value for k in e.keywords],
                            self.env, args)
        return None

    def _summarised_function(self, func: ast.AST) -> Optional[str]:
        """The name a call's function has in the summary: ``helper`` of this file
        or of a ``from m import``, ``utils.helper`` of an ``import utils`` (unless
        a local or a module-level object took that name)."""
        if isinstance(func, ast.Name):
            return None if func.id in self.env else func.id
        if isinstance(func, ast.Attribute):
            name = A.dotted(func)
            if name is None:
                return None
            base = name.split(".", 1)[0]
            if base in self.env or interp.rebound(self.ctx.summary, base):
                return None
            return name
        return None

    def _module_of(self, func: ast.AST) -> Optional[Mod]:
        if isinstance(func, ast.Subscript):
            m = self._eval(func)
            return m if isinstance(m, Mod) else None
        if isinstance(func, ast.Name):
            v = self.env.get(func.id)
            if isinstance(v, Mod):
                return v
            if func.id in self.module_evidence and func.id not in self.env:
                return Mod(Src(func.id, "module", None, None), func.id not in self.frozen, True)
            return None
        if isinstance(func, ast.Call):
            # nn.Linear(5, 1)(x)
            m = self._eval(func)
            return m if isinstance(m, Mod) else None
        return None

    def _module_call(self, mod: Mod, args, call: ast.Call):
        if self.nograd:
            return None
        if mod.trainable:
            src = mod.src
            if src.node is None or src.kind != "module":
                src = Src(src.name, "module", src.stmt, src.node if src.node is not None else call, None, src.order)
            return _merge([Leaf(src)] + list(args), mod.saving if mod.saving is not False else None,
                          f"`{ast.unparse(call.func)}`")
        return _merge(args, mod.saving, f"`{ast.unparse(call.func)}`")

    def _module_ctor(self, func: ast.AST, q: str, args) -> Optional[Mod]:
        if q.startswith("torch.nn.") and not q.startswith(("torch.nn.functional.", "torch.nn.init.", "torch.nn.utils.")):
            last = q.rsplit(".", 1)[-1]
            if not last[:1].isupper() or last in ("Parameter", "Buffer"):
                return None
            if last in K.PARAMETERLESS_MODULES:
                saving = None if last in K.CONFIG_DEPENDENT_MODULES else last not in K.NONSAVING_MODULES
                return Mod(self._src(None, "module", None, func, None), False, saving)
            if last in K.CONTAINER_MODULES:
                mods = [a for a in args if isinstance(a, Mod)]
                trainable = any(m.trainable for m in mods) if mods else True
                saving = None if not mods else (True if any(m.saving is not False for m in mods) else False)
                return Mod(self._src(None, "module", None, func, None), trainable, saving)
            return Mod(self._src(None, "module", None, func, None), True, True)
        if isinstance(func, ast.Name) and func.id not in self.env and _is_module_class(func.id, self.ctx):
            return Mod(self._src(None, "module", None, func, None), True, _module_class_saves(func.id, self.ctx))
        return None


_OPS = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "Pow": "**", "MatMult": "@", "FloorDiv": "//", "Mod": "%"}
_NON_TENSOR_METHODS = K.NON_TENSOR_METHODS | frozenset(
    {"keys", "values", "items", "format", "append", "extend", "state_dict", "zero_grad", "parameters",
     "named_parameters", "train", "eval", "apply", "register_buffer", "load_state_dict"}
)
_CUT_ATTRS = K.GRAPHLESS_ATTRS
_CUT_BUILTINS = frozenset({"float", "int", "bool", "str", "len", "print", "isinstance", "repr", "format", "id", "type"})
_MODULE_SELF_METHODS = K.MODULE_SELF_METHODS
_GRAPHLESS_FUNCTIONS = K.GRAPHLESS_FUNCTIONS


# Operations that return a view of their input (shares its storage, saves nothing for backward).
_VIEW_METHODS = frozenset({"t", "view", "view_as", "transpose", "permute", "unsqueeze", "squeeze", "expand",
                           "expand_as", "narrow", "select", "unflatten", "movedim", "swapaxes", "swapdims"})
_VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "weight", "bias", "data"})


def _view_statement(stmt: ast.stmt) -> bool:
    """``out_proj = emb.weight.t()``: an assignment of a chain of view operations on a
    name or attribute (a parameter), with basic indexing (numbers and slices) only."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
    return value is not None and _view_chain(value)


def _view_chain(e: ast.AST) -> bool:
    while True:
        if isinstance(e, ast.Name):
            return True
        if isinstance(e, ast.Attribute):
            if e.attr not in _VIEW_ATTRS and not isinstance(e.value, ast.Name):
                return False
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _VIEW_METHODS:
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
