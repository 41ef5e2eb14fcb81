"""GG102's module facts (the ``gg102`` fact source) and the queries over them.

Keys, each written by :func:`_gg102_facts` for one top-level statement:

- ``gg102:paramattr:<a>`` / ``gg102:modattr:<a>``: some class sets ``self.a = nn.Parameter(...)``
  / ``self.a = SomeModule(...)``; (a class's bases are the shared ``class:<C>`` fact's);
- ``gg102:gradread:<x>``: ``x.grad`` is read;

What GG102 used to keep as facts of its own about back-propagation (what a function's
loop back-propagates, which ``self.<attr>`` a method's loop reuses) is the shared
interpreter's now: ``FnFacts.loop_backward``/``loop_delegates``/``loop_backward_globals``
and :func:`class_attr_loops`, a run of the interpreter over the class's methods
asked by the ``__init__`` unit of the same class (one chunk with it).
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis import summary as _summary
from gradguard.analysis import values as V
from gradguard.analysis.facts import is_requires_grad_expr
from gradguard.rules.gg102_stale_graph import syntax as S

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, FrozenSet, List, Optional, Set, Tuple


def _gg102_facts(stmt: ast.stmt, referenced: bool = True):
    """Cross-unit facts, in one walk of the top-level statement (a class's
    base classes, to tell an nn.Module, are the shared ``class:<C>`` fact's, :func:`class_bases`):

    - ``paramattr:<a>`` / ``modattr:<a>``: ``self.a = nn.Parameter(...)`` / ``self.a = SomeModule(...)``;
    - ``gradread:<x>``: ``x.grad`` is read (a data tensor whose gradient is inspected keeps requires_grad);
    """
    is_cls = isinstance(stmt, ast.ClassDef)
    out: List[Tuple[str, object]] = []
    grad_names: Set[str] = set()
    Attribute, Assign, Name = ast.Attribute, ast.Assign, ast.Name
    for n in A.walk_all_list(stmt):  # ast.walk's order, without ctx nodes (one walk for both sources)
        cls = n.__class__  # (a parsed tree's nodes are of these exact classes: no isinstance chain per node)
        if cls is Attribute:
            if n.attr == "grad" and n.value.__class__ is Name:  # type: ignore[attr-defined]
                grad_names.add(n.value.id)  # type: ignore[attr-defined]
        elif cls is Assign and is_cls:
            value = n.value  # type: ignore[attr-defined]
            if isinstance(value, ast.Call):
                callee = value.func
                last = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                for t in n.targets:  # type: ignore[attr-defined]
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        if last == "Parameter":
                            out.append((f"gg102:paramattr:{t.attr}", True))
                        elif last[:1].isupper():
                            out.append((f"gg102:modattr:{t.attr}", True))
    for name in sorted(grad_names):
        out.append((f"gg102:gradread:{name}", True))
    return out


def _loops_with_grad(stmts):
    """Outermost loops of a body, not inside ``with torch.no_grad():`` and not in nested scopes."""
    for s in stmts:
        if isinstance(s, A.LOOPS):
            yield s
            continue
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or A.is_no_grad_with(s):
            continue
        for block in A.child_blocks(s):
            yield from _loops_with_grad(block)


def class_attr_loops(cls: ast.ClassDef, ctx):
    """The ``self.<attr>`` values a back-propagating loop of some method of ``cls``
    (not ``__init__``) reuses while that method never re-binds the attribute, so the
    loop reuses whatever an earlier method (``__init__``) left there; asked by the
    ``__init__`` unit of ``cls`` and the helpers ``__init__`` calls (the class is one
    chunk with them), only when one of them leaves a graph on ``self``. The answer
    is ``(loops, grad_attrs, init_calls, init_assigned, init_leaves, methods,
    trained_attrs)``, or None when there is no such loop:

    - ``loops``: sorted ``(attr, method, line, col, end_line, end_col, self_name,
      body_line, body_col)``, the first ``backward()`` that frees a graph through
      ``self.attr`` and the first statement of the innermost loop around it (-1
      when it shares the loop's line), lines counted from the ``class`` line,
      columns in UTF-8 bytes (``ast``'s);
    - ``grad_attrs``: attributes whose gradient the class uses (``self.X.grad``,
      ``retain_grad``, handed to an optimizer in a list): data the program means
      to differentiate against;
    - ``init_calls``: methods ``__init__`` calls as ``self.m(...)`` statements (not
      under ``no_grad``): they build state before any training method runs too;
      ``init_assigned``: attributes ``__init__`` itself assigns (a helper's value for
      them may be replaced, so it is not reported); ``init_leaves``: ``(attr, kind)``
      of the requires-grad leaves ``__init__`` creates (``"data"`` or ``"param"``),
      which a helper starts from; ``methods``: the class's method names;
      ``trained_attrs``: the part of ``grad_attrs`` handed to an optimizer (in a list).

    Which backward a loop's ``self.<attr>`` reaches is the shared interpreter's: a
    run over the method marking each ``self.<attr>`` read before the method sets it
    (``("A", "self.attr")``, as ``FnFacts.loop_backward_attrs`` is computed), and
    the backward events in a loop (not retaining the graph) whose loss holds the mark."""
    from gradguard.analysis import interpreter as interp
    from gradguard.analysis.context import Unit
    from gradguard.rules.common import unit_entry

    defs = [fn for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not class_backprops(cls):
        return None
    cf = ctx.summary.get(f"class:{cls.name}")
    if not isinstance(cf, V.ClassFacts) or {n for n, _ in cf.methods} != {fn.name for fn in defs}:
        # a class the module's name does not stand for (a later class of the same name
        # replaces it), or not a top-level one: what its methods do is not run
        return None
    found: Dict[Tuple[str, str], tuple] = {}
    resolver = None
    for fn in defs:
        me = S.self_arg(fn)
        if fn.name == "__init__" or me != "self" or A.is_no_grad_function(fn, ctx):
            continue  # (the interpreter follows ``self.<attr>`` of the instance named self)
        assigned = S.assigned_in(fn.body)
        outer = []
        for lp in _loops_with_grad(fn.body):
            if any(isinstance(x, (ast.Break, ast.Return, ast.Raise)) for x in lp.body):
                continue  # runs at most once
            nodes = A.block_nodes(lp.body)
            read = {d for d in (S.attr_name(n) for n in nodes if n.__class__ is ast.Attribute)
                    if d and d.startswith("self.") and d not in assigned}
            if read and any(n.__class__ is ast.Call for n in nodes):
                outer.append((lp, read))
        if not outer:
            continue
        if resolver is None:
            resolver = interp.Resolver(ctx)
        env, _ = unit_entry(Unit("function", fn.body, fn, fn.name, cls))
        run = interp.GraphFlow(resolver, self_obj="user:" + cls.name, track_self_state=True, find_carries=False)
        try:
            run.run(fn.body, env)
        except RecursionError:
            continue
        firsts: Dict[int, V.BackwardEvent] = {}
        for ev in run.events:
            if ev.in_loop and not ev.retain:
                prev = firsts.get(id(ev.call))
                firsts[id(ev.call)] = ev if prev is None else prev
        events = sorted(firsts.values(), key=lambda ev: (ev.call.lineno, ev.call.col_offset))
        for ev in events:
            c = ev.call
            at = next(((lp, read) for lp, read in outer if lp.lineno <= c.lineno <= (lp.end_lineno or lp.lineno)), None)
            if at is None:
                continue
            loop, read = at
            marks = {t[1] for t in ev.loss.taints if t[0] == "A"}
            reached = sorted(d for d in read if d in marks)
            if not reached:
                continue
            # where a recomputation would go: the top of the innermost loop around this backward()
            inner = [x for x in A.iter_statements(loop.body) if isinstance(x, A.LOOPS)]
            around = max([x for x in [loop] + inner if x.lineno <= c.lineno <= (x.end_lineno or x.lineno)],
                         key=lambda x: x.lineno)
            body0 = around.body[0]
            ok = body0.lineno > around.lineno
            for d in reached:
                key = (d[5:], fn.name)
                if key not in found:
                    found[key] = (key[0], fn.name, c.lineno - cls.lineno, c.col_offset,
                                  (c.end_lineno or c.lineno) - cls.lineno, c.end_col_offset or c.col_offset,
                                  me, body0.lineno - cls.lineno if ok else -1, body0.col_offset)
    if not found:
        return None
    grad_attrs, calls, assigned_init, leaves, trained_attrs = _class_attr_parts(cls)
    return (tuple(sorted(found.values())), grad_attrs, calls, assigned_init, leaves, method_names(cls), trained_attrs)


def class_backprops(cls: ast.ClassDef) -> bool:
    """Does a method of the class call ``.backward()`` (or another backward method)?"""
    got = cls.__dict__.get("_gg102_backprops")
    if got is None:
        got = any(n.__class__ is ast.Call and n.func.__class__ is ast.Attribute
                  and n.func.attr in K.BACKWARD_METHODS
                  for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in A.body_nodes(fn))
        cls._gg102_backprops = got  # type: ignore[attr-defined]  # (the class's text decides: kept on its node)
    return got


def init_calls(cls: ast.ClassDef) -> Tuple[str, ...]:
    """The methods ``__init__`` calls as ``self.m(...)`` statements, not under ``no_grad``
    (kept on the class's node)."""
    got = cls.__dict__.get("_gg102_init_calls")
    if got is None:
        calls: List[str] = []
        init = next((fn for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and fn.name == "__init__"), None)
        me = S.self_arg(init) if init is not None else None
        if init is not None and me is not None:
            for st in _stmts_with_grad(init.body):
                if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                    f = st.value.func
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == me \
                            and f.attr != "__init__" and f.attr not in calls:
                        calls.append(f.attr)
        got = cls._gg102_init_calls = tuple(calls)  # type: ignore[attr-defined]
    return got


def _class_attr_parts(cls: ast.ClassDef):
    """``(grad_attrs, init_calls, init_assigned, init_leaves, trained_attrs)`` of
    :func:`class_attr_loops`, from the class's text (kept on its node)."""
    got = cls.__dict__.get("_gg102_parts")
    if got is None:
        got = cls._gg102_parts = _attr_parts(cls)  # type: ignore[attr-defined]
    return got


def _attr_parts(cls: ast.ClassDef):
    grad_attrs: Set[str] = set()
    trained_attrs: Set[str] = set()
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        me = S.self_arg(fn)
        if me is None:
            continue
        for n in A.body_nodes(fn):
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
    calls = init_calls(cls)
    assigned_init: Set[str] = set()
    leaves: Dict[str, str] = {}
    init = next((fn for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and fn.name == "__init__"), None)
    me = S.self_arg(init) if init is not None else None
    if init is not None and me is not None:
        prefix = me + "."
        assigned_init = {d[len(prefix):] for d in S.assigned_in(init.body) if d.startswith(prefix)}
        for st in _stmts_with_grad(init.body):
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                d = S.attr_name(st.targets[0])
                if d and d.startswith(prefix):
                    v = st.value
                    callee = v.func if isinstance(v, ast.Call) else None
                    last = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                    if is_requires_grad_expr(v):
                        leaves[d[len(prefix):]] = "data"
                    elif (last == "Parameter" and not any(k.arg == "requires_grad" for k in v.keywords)  # type: ignore[attr-defined]
                            and len(v.args) < 2):  # type: ignore[attr-defined]
                        leaves[d[len(prefix):]] = "param"
    return (tuple(sorted(grad_attrs)), calls, tuple(sorted(assigned_init)), tuple(sorted(leaves.items())),
            tuple(sorted(trained_attrs)))


def method_names(cls: ast.ClassDef) -> Tuple[str, ...]:
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


def class_bases(summary, name: str) -> Optional[Tuple[str, ...]]:
    """The raw dotted base names of same-file (or imported) class ``name``, from
    the shared ``class:<name>`` fact (:class:`~gradguard.analysis.values.ClassFacts`);
    None when no class of that name is known."""
    cf = summary.get(f"class:{name}")
    return cf.bases if isinstance(cf, V.ClassFacts) else None


def is_module_class(name: str, ctx, depth: int = 0) -> bool:
    bases = class_bases(ctx.summary, name)
    if not bases or depth > 5:
        return False
    for b in bases:
        q = _qualify_str(b, ctx.imports)
        if q in K.MODULE_BASES:
            return True
        if "." not in b and is_module_class(b, ctx, depth + 1):
            return True
    return False


# GG102's own module facts (none of them says anything about back-propagation).
GG102_FACTS = _summary.FactSource("gg102", _gg102_facts)


def mentions_backprop(summary, words: frozenset) -> bool:
    """Do these words name a function or method that may back-propagate (the shared
    ``fn:``/``class:`` facts: it calls a backward, or delegates to functions that may)?"""
    return not words.isdisjoint(_summary_index(summary)[3])


def mentions_bwloop(summary, words: frozenset) -> bool:
    """Do these words name a function whose own loop back-propagates what it is
    passed or a global it reads (the shared ``fn:`` facts)?"""
    return not words.isdisjoint(_summary_index(summary)[2])


_INDEX: tuple = (None, None)  # (summary, (has_bwloop, grad_read, bwloop names, backprop names)) for the last summary seen


def grad_read_names(summary) -> FrozenSet[str]:
    return _summary_index(summary)[1]


def _summary_index(summary) -> Tuple[bool, FrozenSet[str], FrozenSet[str], FrozenSet[str]]:
    """What the units need from scanning every summary key, computed once per
    module summary (the engine builds one mapping per analysis and shares it by
    all units) instead of once per unit, which is quadratic on a large file."""
    global _INDEX
    last = _INDEX  # one read, one rebinding below: safe if documents are analysed on several threads
    if last[0] is summary:
        return last[1]
    bwloop = set()
    grad_read = set()
    backprop = set()
    for k in summary:
        if k.startswith("gg102:gradread:"):
            grad_read.add(k[len("gg102:gradread:"):])
        elif k.startswith("fn:"):
            f = summary[k]
            if not isinstance(f, V.FnFacts) or f.no_grad:
                continue
            name = k[3:]
            if f.calls_backward or f.delegates:
                backprop.update(name.split("."))  # (utils.train_step: both words)
            if "." not in name and (f.loop_backward or f.loop_delegates or f.loop_backward_globals or (
                    f.loop_calls and V.loop_globals_of(lambda n: summary.get("fn:" + n), f))):
                bwloop.add(name)  # its own loop back-propagates what it is passed, or a global (or a callee does)
        elif k.startswith("class:"):
            c = summary[k]
            if isinstance(c, V.ClassFacts):
                backprop.update(n for n, m in c.methods if (m.calls_backward or m.delegates) and not m.no_grad)
                # flow.fit(latent): a method whose own loop back-propagates what it is passed
                bwloop.update(n for n, m in c.methods if m.loop_backward and not m.no_grad)
    out = (bool(bwloop), frozenset(grad_read), frozenset(bwloop), frozenset(backprop | bwloop))
    _INDEX = (summary, out)
    return out
