"""GG102's module facts (the ``gg102`` fact source) and the queries over them.

Keys, each written by :func:`_gg102_facts` for one top-level statement:

- ``gg102:classsaves:<C>``: class ``C`` holds a layer (``self.fc = nn.Linear(...)``);
  ``gg102:paramattr:<a>`` / ``gg102:modattr:<a>``: some class sets ``self.a = nn.Parameter(...)``
  / ``self.a = SomeModule(...)``; (a class's bases are the shared ``class:<C>`` fact's);
- ``gg102:gradread:<x>``: ``x.grad`` is read;
- ``gg102:bw:<f>``, ``gg102:bwloop:<f>``, ``gg102:bwcalls:<f>``: what a function back-propagates
  (anywhere, in a loop, through the functions it calls): :func:`_backprop_facts`;
- ``gg102:attrloop:<C>``: the ``self.<attr>`` graphs a method's loop reuses: :func:`_class_attr_loops`.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import interpreter as interp
from gradguard.analysis import knowledge as K
from gradguard.analysis import summary as _summary
from gradguard.analysis import values as V
from gradguard.analysis.facts import is_requires_grad_expr
from gradguard.rules.gg102_stale_graph import syntax as S
from gradguard.rules.gg102_stale_graph.taint import LoopTaint, composed_fact

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, FrozenSet, List, Optional, Set, Tuple


def _gg102_facts(stmt: ast.stmt, referenced: bool = True):
    """Cross-unit facts, in one walk of the top-level statement (a class's
    base classes, to tell an nn.Module, are the shared ``class:<C>`` fact's, :func:`class_bases`):

    - ``classsaves:<C>``: the class holds a layer;
      ``paramattr:<a>`` / ``modattr:<a>``: ``self.a = nn.Parameter(...)`` / ``self.a = SomeModule(...)``;
    - ``gradread:<x>``: ``x.grad`` is read (a data tensor whose gradient is inspected keeps requires_grad);
    - ``bw:<f>`` / ``bwloop:<f>``: see :func:`_backprop_facts`;
    - ``attrloop:<C>``: see :func:`_class_attr_loops`.
    """
    is_fn = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    is_cls = isinstance(stmt, ast.ClassDef)
    out: List[Tuple[str, object]] = []
    grad_names: Set[str] = set()
    calls: List[ast.Call] = []
    has_bw = False
    saves_cls = False
    Attribute, Call, Assign, Name = ast.Attribute, ast.Call, ast.Assign, ast.Name
    for n in A.walk_all_list(stmt):  # ast.walk's order, without ctx nodes (one walk for both sources)
        cls = n.__class__  # (a parsed tree's nodes are of these exact classes: no isinstance chain per node)
        if cls is Attribute:
            if n.attr == "grad" and n.value.__class__ is Name:  # type: ignore[attr-defined]
                grad_names.add(n.value.id)  # type: ignore[attr-defined]
        elif cls is Call:
            func = n.func  # type: ignore[attr-defined]
            if func.__class__ is Name and func.id not in S.BUILTIN_NAMES and (n.args or n.keywords):  # type: ignore[attr-defined]
                calls.append(n)  # type: ignore[arg-type]
            elif func.__class__ is Attribute and func.attr in K.BACKWARD_METHODS:
                has_bw = True
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
                            if last not in K.NONSAVING_MODULES and not last.startswith("Parameter"):
                                saves_cls = True
    if saves_cls:
        # it holds a layer (self.fc = nn.Linear(...)): calling it saves tensors for backward
        out.append((f"gg102:classsaves:{stmt.name}", True))  # type: ignore[attr-defined]
    for name in sorted(grad_names):
        out.append((f"gg102:gradread:{name}", True))
    if is_fn and referenced and (has_bw or _delegating_calls(calls, stmt.name)):  # type: ignore[attr-defined]
        # ``bw:<f>``/``bwloop:<f>``/``bwcalls:<f>`` are read at calls of <f> only
        out.extend(_backprop_facts(stmt))
    if is_cls and has_bw:
        out.extend(_class_attr_loops(stmt))  # type: ignore[arg-type]
    return out


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
    ``<name>`` is called (:func:`composed_fact`)."""
    from gradguard.analysis.context import ModuleContext, Unit
    from gradguard.model.text import LineIndex

    ctx = ModuleContext(None, LineIndex(""), {}, {})
    an = LoopTaint(Unit("function", fn.body, fn, fn.name), ctx)
    an.delegations = {}  # call → per-argument names reaching it, recorded by _backwards_in
    a = fn.args
    params = [x.arg for x in list(a.posonlyargs) + list(a.args)]
    assigned, loaded = S.assigned_and_loaded(fn.body)
    an.delegation_locals = assigned | set(params) | {x.arg for x in a.kwonlyargs}  # not module-level callees
    globs = {g for g in loaded - assigned - set(params) - {x.arg for x in a.kwonlyargs} if g not in S.BUILTIN_NAMES}
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
        v = composed_fact(mini, kind, name)
        if v:
            out[f"gg102:{kind}"] = v
    return out


def _outer_loops(stmts):
    """Loops of a body that are not inside another loop (nested defs excluded)."""
    for s in stmts:
        if isinstance(s, A.LOOPS):
            yield s
        elif not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for block in A.child_blocks(s):
                yield from _outer_loops(block)


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
        if fn.name == "__init__" or A.is_no_grad_function(fn):
            continue
        assigned = S.assigned_in(fn.body)
        an = None
        for loop in _loops_with_grad(fn.body):
            if any(isinstance(x, (ast.Break, ast.Return, ast.Raise)) for x in loop.body):
                continue  # runs at most once
            prefix = me + "."
            attrs = {
                d for d in (S.attr_name(n) for n in A.block_nodes(loop.body) if isinstance(n, ast.Attribute))
                if d and d.startswith(prefix) and d not in assigned
            }
            if not attrs:
                continue
            if an is None:
                an = LoopTaint(Unit("function", fn.body, fn, fn.name), ctx)
            taint = {d: {d} for d in attrs}
            backs: dict = {}
            for _ in range(2):
                an._taint_block(loop.body, taint, backs, 0)
            freeing = sorted([((c.lineno, c.col_offset), c, t) for c, keep, t in backs.values() if not keep],
                             key=lambda x: x[0])
            inner = [x for x in A.iter_statements(loop.body) if isinstance(x, A.LOOPS)]
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
                    if is_requires_grad_expr(v):
                        leaves[d[len(prefix):]] = "data"
                    elif (last == "Parameter" and not any(k.arg == "requires_grad" for k in v.keywords)  # type: ignore[attr-defined]
                            and len(v.args) < 2):  # type: ignore[attr-defined]
                        leaves[d[len(prefix):]] = "param"
    yield f"gg102:attrloop:{cls.name}", (tuple(sorted(found.values())), tuple(sorted(grad_attrs)), tuple(calls),
                                         tuple(sorted(assigned_init)), tuple(sorted(leaves.items())), method_names(cls),
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


def module_class_saves(name: str, ctx, depth: int = 0) -> Optional[bool]:
    """True if the user module class (or a user base class) holds a layer; None: cannot tell."""
    if ctx.summary.get(f"gg102:classsaves:{name}"):
        return True
    if depth > 5:
        return None
    for b in class_bases(ctx.summary, name) or ():
        if "." not in b and module_class_saves(b, ctx, depth + 1):
            return True
    return None


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


# GG102's own module facts. ``gg102:bw:``, ``gg102:bwloop:`` and
# ``gg102:attrloop:`` are only written for code that back-propagates.
GG102_FACTS = _summary.FactSource("gg102", _gg102_facts, _fold_bwcalls,
                                  ("gg102:bw:", "gg102:bwloop:", "gg102:attrloop:"))


def mentions_bwloop(summary, words: frozenset) -> bool:
    """Do these words name a same-file function whose loop back-propagates?"""
    return not words.isdisjoint(_summary_index(summary)[2])


_INDEX: tuple = (None, None)  # (summary, (has_bwloop, grad_read, bwloop names)) for the last summary seen


def grad_read_names(summary) -> FrozenSet[str]:
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
    bwloop.update(n for n in delegating if n not in bwloop and composed_fact(summary, "bwloop", n))
    out = (bool(bwloop), frozenset(grad_read), frozenset(bwloop))
    _INDEX = (summary, out)
    return out
