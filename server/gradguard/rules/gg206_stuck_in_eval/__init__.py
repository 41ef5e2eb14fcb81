"""GG206 stuck-in-eval: a loop trains a model, switches it to evaluation mode
(``model.eval()``, directly or in a same-file ``validate(model)``) and never
switches it back before the next iteration trains it again.

``eval()`` is sticky: dropout stays off and batch norm keeps normalising with
frozen running statistics until ``train()``. The first iteration trains as
meant, every later one does not; nothing fails.

The analysis reads each loop of a unit as one iteration: the *mode events* of
its body in source order (``syntax.mode_event``), with the calls of same-file
functions replaced by the events of their bodies (the ``gg206:mode:`` facts,
their receivers mapped onto the call's arguments). A module ``X`` is reported
when

* the loop trains: a backward (or a same-file function that back-propagates),
  and ``X`` takes part (called outside ``no_grad``, or handed to that function);
* nothing switches ``X``'s mode before the first training event of the body
  (a switch there is read as deliberate: frozen batch norm, a target network);
* the last event on ``X`` in the body is a switch to evaluation mode, so the
  next iteration starts in it;
* the code before the loop does not leave ``X`` in evaluation mode already
  (the whole training deliberately in eval mode).

A call that hands ``X`` to a function the file does not define (imported, or
a method of an object of unknown type) may switch its mode: it counts as a
switch back to training, i.e. silence. ``x.train(flag)`` with a flag that cannot
be read counts the same way.

The finding is on the statement that leaves ``X`` in evaluation mode; the fix
inserts ``X.train()`` as the first statement of the loop's body.
"""

from __future__ import annotations

import ast
import builtins
import re

from gradguard.analysis import ast_util as A
from gradguard.analysis.context import unit_text, unit_words
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Fix, Position, Range, Related, TextEdit, Severity
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.gg206_stuck_in_eval import messages as M
from gradguard.rules.gg206_stuck_in_eval.facts import MODE, MODE_FACTS, defines_mode_methods
from gradguard.rules.gg206_stuck_in_eval.syntax import mode_event, restores

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Optional, Set, Tuple

_BUILTINS = frozenset(dir(builtins))
# methods of modules, tensors and optimizers that never switch a mode
_MODULE_METHODS = frozenset({
    "zero_grad", "parameters", "named_parameters", "state_dict", "load_state_dict", "to", "cuda", "cpu", "forward",
    "modules", "children", "named_modules", "buffers", "float", "half", "double", "requires_grad_", "step",
    "item", "backward", "detach", "size", "view", "reshape", "append", "extend", "update", "mean", "sum",
    "format", "info", "debug", "warning", "log", "write", "add_scalar", "print", "numpy", "tolist", "argmax",
    "max", "min", "eq", "squeeze", "unsqueeze", "permute", "transpose", "contiguous", "clone", "long",
    "set_postfix", "set_description", "get", "items", "keys", "values", "scale", "unscale_", "flush",
})
# a helper that runs an evaluation by its name: ``validate``, ``_eval_epoch``, ``run_test``
_EVALUATING = re.compile(r"(^|_)(val|valid|validate|validation|eval|evaluate|evaluation|test)(_|$)", re.IGNORECASE)
_NOT_TRAINED = re.compile(r"ema|teacher|target|swa|averag|momentum|shadow|frozen|(^|_)old", re.IGNORECASE)


class StuckInEval(Rule):
    code = "GG206"
    name = "stuck-in-eval"
    default_severity = Severity.WARNING
    needs_backprop = True
    names_lines = True  # the message names the line that trains
    fact_sources = (MODE_FACTS,)
    trigger = Trigger(torch=True)
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        text = unit_text(unit, ctx.index.lines)
        if "eval(" not in text and "train(" not in text:
            helpers = query(ctx.summary, _evaluating_helpers)
            if not helpers or not (helpers & unit_words(unit, ctx.index.lines)):
                return []
        loops = [s for s in A.iter_statements(unit.body) if isinstance(s, A.LOOPS)]
        if not loops:
            return []
        hits: "Dict[int, Tuple[ast.stmt, _Event, _Event, str, Tuple[str, ...]]]" = {}
        own_modes = defines_mode_methods(unit.class_node)
        own_calls = _own_callables(unit.class_node)
        dispatch = _hook_dispatchers(unit.class_node)
        for loop in loops:
            events = _events(loop, ctx, own_modes, own_calls, dispatch)
            for target, last_e, first_t in _stuck(events, loop):
                if _left_in_eval_before(unit, loop, target, ctx) or _leaves_the_loop_after(loop, last_e.node):
                    continue
                key = id(last_e.node)
                old = hits.get(key)
                if old is not None and old[0] is loop and last_e.helper is not None and target not in old[4]:
                    # validate(model) leaving both model.img_enc and model.txt_enc in eval: one finding
                    hits[key] = old[:4] + (old[4] + (target,),)
                elif old is None or old[0].lineno <= loop.lineno:  # the innermost loop
                    hits[key] = (loop, last_e, first_t, target, ())
        return [_finding(self, loop, e, t, target, ctx, others) for loop, e, t, target, others in
                sorted(hits.values(), key=lambda h: getattr(h[1].node, "lineno", 0))]


def _evaluating_helpers(summary) -> frozenset:
    """Names of same-file defs that switch something to evaluation mode (a summary query)."""
    out = set()
    calling = []
    for key, value in summary.items():
        if key.startswith(MODE) and isinstance(value, tuple):
            if any(e[0] == "E" for e in value[1]):
                out.add(key[len(MODE):])
            elif any(e[0] == "M" for e in value[1]):
                calling.append((key[len(MODE):], value[1]))
    for name, events in calling:  # validate(model) calling model.val_start(), which calls .eval()
        if any(e[0] == "M" and e[1].rpartition("#")[2] in out for e in events):
            out.add(name)
    return frozenset(out)


class _Event:
    __slots__ = ("kind", "recv", "node", "helper")

    def __init__(self, kind: str, recv: str, node: ast.AST, helper: "Optional[str]" = None) -> None:
        # E, R, T; C (the module takes part in training); U (handed to unknown code);
        # P (unknown code called on an object that may own it)
        self.kind = kind
        self.recv = recv
        self.node = node
        self.helper = helper


def _own_callables(cls: "Optional[ast.ClassDef]") -> "frozenset":
    """The names ``self.<name>(...)`` calls in a method of ``cls`` that are the class's own: its
    methods (their mode switches are read from their facts) and the attributes its methods assign
    (``self.model = nn.Sequential(...)``: calling it runs the module, it switches no mode)."""
    if cls is None:
        return frozenset()
    out = set()
    for s in cls.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(s.name)
            for n in ast.walk(s):
                if isinstance(n, (ast.Assign, ast.AnnAssign)):
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            out.add(t.attr)
    return frozenset(out)


def _hook_dispatchers(cls: "Optional[ast.ClassDef]") -> "Dict[str, Tuple[int, Tuple[Optional[str], ...]]]":
    """The methods of ``cls`` that run a hook by its name (mmcv's runner: ``def call_hook(self, fn_name):
    for hook in self.hooks: getattr(hook, fn_name)(self)``): name -> (the position of the name among
    the call's arguments, what the hook's parameters are handed: ``self`` or ``self.<attr>``, else None)."""
    out: "Dict[str, Tuple[int, Tuple[Optional[str], ...]]]" = {}
    if cls is None:
        return out
    known = cls.__dict__.get("_gg206_hooks")
    if known is not None:
        return known  # (asked by every method of the class: answered once per parsed class)
    cls._gg206_hooks = out  # type: ignore[attr-defined]
    for d in cls.body:
        if not isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(d.args.args) < 2:
            continue
        names = [a.arg for a in d.args.args]
        for n in A.body_nodes(d):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Call) and A.dotted(n.func.func) == "getattr"
                    and len(n.func.args) >= 2 and isinstance(n.func.args[1], ast.Name)
                    and n.func.args[1].id in names[1:]):
                continue
            handed = []
            for a in n.args:
                dn = A.dotted(a)
                handed.append(dn if dn is not None and dn.partition(".")[0] == names[0] else None)
            out[d.name] = (names.index(n.func.args[1].id) - 1,
                           tuple(("self" + h[len(names[0]):]) if h is not None else None for h in handed))
            break
    return out


def _events(loop: ast.stmt, ctx, own_modes: bool = False, own_calls: "frozenset" = frozenset(),
            dispatch: "Optional[Dict[str, Tuple[int, Tuple[Optional[str], ...]]]]" = None) -> "List[_Event]":
    nodes = A.block_nodes(loop.body)  # type: ignore[attr-defined]
    quiet: "Set[int]" = set()
    for n in nodes:
        if n.__class__ in (ast.With, ast.AsyncWith) and A.is_no_grad_with(n, ctx):
            quiet.update(id(m) for m in A.iter_nodes(n.body))
    out: "List[_Event]" = []
    summary = ctx.summary
    dispatch = dispatch or {}
    for n in nodes:
        cls = n.__class__
        if cls is not ast.Call and cls is not ast.Assign:
            continue
        ev = mode_event(n, ctx)
        if ev is not None:
            if not (own_modes and ev[1] == "self"):
                out.append(_Event(ev[0], ev[1], n))
            continue
        if cls is ast.Assign:
            continue
        func = n.func  # type: ignore[attr-defined]
        callee = A.dotted(func)
        if callee is not None and id(n) not in quiet:
            out.append(_Event("C", callee, n))
            if callee.endswith(".forward"):
                out.append(_Event("C", callee[:-len(".forward")], n))
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        fact = summary.get(MODE + name) if name else None
        if name and isinstance(fact, tuple) and fact[0] == isinstance(func, ast.Attribute):
            _expand(n, name, fact[1], out, summary)  # type: ignore[arg-type]
            continue
        if name in dispatch and isinstance(func, ast.Attribute) and A.dotted(func.value) == "self":
            at, handed = dispatch[name]
            hook = n.args[at] if at < len(n.args) else None  # type: ignore[attr-defined]
            hook_name = hook.value if isinstance(hook, ast.Constant) and isinstance(hook.value, str) else None
            fact = summary.get(MODE + hook_name) if hook_name else None
            if isinstance(fact, tuple) and fact[0]:
                # self.call_hook("after_train_iter"): each hook's method, handed this object
                _expand(n, hook_name, fact[1], out, summary, None, 1, list(handed))  # type: ignore[arg-type]
                continue
        q = A.qualify(func, ctx) or ""
        if q.startswith("torch.") or (isinstance(func, ast.Name) and func.id in _BUILTINS):
            continue
        if isinstance(func, ast.Attribute) and func.attr not in _MODULE_METHODS:
            owner = A.dotted(func.value)
            if owner == "self" and func.attr in own_calls:
                pass  # self.model(x), self.helper(x): the class's own module or method
            elif owner is not None:  # a method the file does not define may switch its object's modules
                out.append(_Event("P", owner, n))
        for a in list(n.args) + [k.value for k in n.keywords]:  # type: ignore[attr-defined]
            d = A.dotted(a.value if isinstance(a, ast.Starred) else a)
            if d is not None:
                out.append(_Event("U", d, n))
    return out


def _expand(call: ast.Call, name: str, events, out: "List[_Event]", summary=None, recv: "Optional[str]" = None,
            depth: int = 0, args: "Optional[List[Optional[str]]]" = None) -> None:
    """The events of a same-file function's body, at its call, on the call's names
    (with the modules it calls, ``C``, when it back-propagates). ``M`` (a method called on
    a parameter: ``model.val_start()``) expands into that method's events on the argument
    (``recv``: the object a nested method's ``self`` stands for; its parameters are unknown).
    ``args``: the names the def's parameters stand for, when not ``call``'s own arguments (a hook
    run by a dispatcher, a function a hook calls); ``F`` expands that function's events on them."""
    if recv is None and depth == 0:
        recv = A.dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
    if args is None:
        args = [None if isinstance(a, ast.Starred) else A.dotted(a) for a in call.args] if depth == 0 else []
    trains = any(k == "T" for k, _ in events)
    for kind, rc in events:
        if kind == "C" and not trains:
            continue
        if kind == "T":
            out.append(_Event("T", "", call, name))
            continue
        if kind == "F":
            fname, _, rest_f = rc.partition("#")
            idx_f, _, on_f = rest_f.partition("#")
            fact = summary.get(MODE + fname) if summary is not None and depth < 3 else None
            obj = _mapped(on_f, args, recv)
            if isinstance(fact, tuple) and not fact[0] and obj is not None:
                handed: "List[Optional[str]]" = [None] * int(idx_f) + [obj]
                _expand(call, name, fact[1], out, summary, None, depth + 1, handed)
            continue
        if kind == "M":
            on, _, meth = rc.rpartition("#")
            fact = summary.get(MODE + meth) if summary is not None and depth < 2 else None
            obj = _mapped(on, args, recv) if on.startswith("p:") else None
            if isinstance(fact, tuple) and fact[0] and obj is not None:
                _expand(call, name, fact[1], out, summary, obj, depth + 1)
            elif obj is not None:
                out.append(_Event("U", obj, call, name))  # an unknown method of the object: it may restore
            continue
        target = _mapped(rc, args, recv)
        if target is None:
            if depth > 0 and rc.startswith("p:"):
                continue  # a nested def's parameter the call does not name
            if kind == "R":
                out.append(_Event("R", "*", call, name))
            continue
        out.append(_Event(kind, target, call, name))


def _mapped(rc: str, args: "List[Optional[str]]", recv: "Optional[str]") -> "Optional[str]":
    """The name at the call site of a fact's receiver ``rc`` (``p:<i>:<suffix>``: the ``i``-th of
    ``args``; ``s:<suffix>``: ``recv``'s; ``g:<dotted>``: itself)."""
    where, _, rest = rc.partition(":")
    if where == "p":
        idx, _, suffix = rest.partition(":")
        i = int(idx)
        base = args[i] if i < len(args) else None
        return base + suffix if base is not None else None
    if where == "s":
        return recv + rest if recv is not None else None
    return rest


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _evaluates_now_and_then(e: "_Event", loop: "Optional[ast.stmt]") -> bool:
    """Is ``e`` the switch of a helper named for evaluation (``self.validate()``) called under an
    ``if`` of the loop's body (every ``interval_validate`` iterations)? Not a deliberate
    frozen-mode training step, though it comes before the iteration's training."""
    if e.helper is None or loop is None or not _EVALUATING.search(e.helper):
        return False
    return any(s.__class__ is ast.If and any(A.within(e.node, b) for b in s.body)
               for s in A.iter_statements(loop.body))  # type: ignore[attr-defined]


def _stuck(events: "List[_Event]", loop: "Optional[ast.stmt]" = None) -> "List[Tuple[str, _Event, _Event]]":
    """(module, the last event that switches it to evaluation mode, the first training event)."""
    first_t = next((i for i, e in enumerate(events) if e.kind == "T"), None)
    if first_t is None:
        return []
    out = []
    seen = set()
    for e in events:
        if e.kind != "E" or e.recv in seen:
            continue
        x = e.recv
        seen.add(x)
        if _NOT_TRAINED.search(x.rsplit(".", 1)[-1]) or (x.endswith(".module") and _NOT_TRAINED.search(x)):
            continue  # an averaged copy, a teacher, a target network: its mode does not train anything
        rel = [i for i, ev in enumerate(events)
               if (ev.kind == "E" and ev.recv == x) or (ev.kind in ("R", "U") and restores(ev.recv, x))
               or (ev.kind == "P" and x.startswith(ev.recv + "."))]
        if not rel or rel[0] < first_t and not _evaluates_now_and_then(events[rel[0]], loop):
            continue  # switched before the training step of the same iteration: deliberate
        last = events[rel[-1]]
        if last.kind != "E":
            continue
        if not any(ev.kind == "C" and _related(ev.recv, x) for ev in events):
            continue  # a module the loop does not train (a teacher, a target network)
        out.append((x, last, events[first_t]))
    return out


def _left_in_eval_before(unit, loop: ast.stmt, target: str, ctx) -> bool:
    """Does the code before the loop leave ``target`` in evaluation mode already?"""
    last = None
    end = loop.lineno
    for n in A.unit_nodes(unit):
        line = getattr(n, "lineno", None)
        if line is None or line >= end:
            continue
        if n.__class__ is ast.Call or n.__class__ is ast.Assign:
            ev = mode_event(n, ctx)
            if ev is not None and ev[0] != "T" and (ev[1] == target if ev[0] == "E" else restores(ev[1], target)):
                last = ev[0]
    return last == "E"


def _leaves_the_loop_after(loop: ast.stmt, node: ast.AST) -> bool:
    """Is the switch followed, in its own block, by a ``break``, ``return`` or ``raise``
    (the final evaluation: no iteration trains after it)?"""
    line = node.lineno  # type: ignore[attr-defined]
    blocks = [loop.body]  # type: ignore[attr-defined]
    while blocks:
        block = blocks.pop()
        for i, s in enumerate(block):
            if not (s.lineno <= line <= (s.end_lineno or s.lineno)):
                continue
            inner = A.child_blocks(s)
            if inner and s.lineno != line:
                blocks.extend(inner)
                break
            return any(isinstance(t, (ast.Break, ast.Return, ast.Raise)) for t in block[i + 1:])
    return False


def _statement_at(loop: ast.stmt, node: ast.AST) -> ast.AST:
    best: ast.AST = node
    line = node.lineno  # type: ignore[attr-defined]
    for s in A.iter_statements(loop.body):  # type: ignore[attr-defined]
        if s.lineno <= line <= (s.end_lineno or s.lineno) and not A.child_blocks(s):
            best = s
    return best


def _finding(rule, loop, e: "_Event", t: "_Event", target: str, ctx, others: "Tuple[str, ...]" = ()) -> Finding:
    train_line = t.node.lineno  # type: ignore[attr-defined]
    before = e.helper is not None and e.node.lineno < train_line  # type: ignore[attr-defined]
    msg = M.left_in_eval(target, e.helper, train_line, others, before)
    stmt = _statement_at(loop, e.node)
    related = (Related(ctx.line_range(_statement_at(loop, t.node)), M.trained_here()),
               Related(ctx.line_range(loop), M.the_loop()))
    fixes = []
    first = loop.body[0]
    if before and e.helper is not None:
        # an evaluation now and then before the iteration's training: restore right after it
        st: "ast.stmt" = stmt  # type: ignore[assignment]
        end = st.end_lineno or st.lineno
        line = ctx.index.line(end - 1)
        if st.lineno == end and end < len(ctx.index.lines) and st.end_col_offset == len(line.rstrip().encode()):
            indent = ctx.indent_of(st.lineno)
            pos = Position(end, 0)
            edit = TextEdit(Range(pos, pos), "".join(f"{indent}{m}.train()\n" for m in (target, *others)))
            fixes.append(Fix(M.fix_train_after(target, e.helper, others), (edit,), preferred=True))
    elif first.lineno != loop.lineno:
        indent = ctx.indent_of(first.lineno)
        pos = Position(first.lineno - 1, 0)
        edit = TextEdit(Range(pos, pos), "".join(f"{indent}{m}.train()\n" for m in (target, *others)))
        fixes.append(Fix(M.fix_train_at_top(target, others), (edit,), preferred=True))
    return Finding(rule.code, ctx.line_range(stmt), msg, rule.default_severity, related, tuple(fixes),
                   {"module": target})
