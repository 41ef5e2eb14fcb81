"""GG205 unzeroed-grads: a loop back-propagates and steps every iteration and
never zeroes the gradients, so each step uses the sum of all earlier ones.

``backward()`` *adds* into ``.grad``. A training loop that calls
``loss.backward()`` and ``optimizer.step()`` every iteration without
``optimizer.zero_grad()`` (or ``model.zero_grad()``, ``p.grad = None``,
``p.grad.zero_()``) trains on a running sum of gradients: nothing fails, the
model learns worse or diverges.

Detection is on the loop's statements, with the AST predicates of
:mod:`gradguard.analysis.interpreter` (``is_backward_call``, the loops of a unit): the
innermost loop whose body both back-propagates (``backward()``, not
``torch.autograd.grad``, which accumulates nothing) and updates what it trains
(an optimizer's ``step()``, ``scaler.step(opt)``, or a hand-written update from
``p.grad``) is reported when nothing in its body, nor in a same-file helper it
calls, zeroes gradients. Zeroing anywhere in the iteration (before or after the
backward, every ``k`` steps under an ``if``) is enough; a loop that only
back-propagates (the update and the zeroing after it) accumulates on purpose.
"""

from __future__ import annotations

import ast
import re

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis import steps as S
from gradguard.analysis.context import unit_text
from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.analysis.quiet_facts import COUNTER, LOOPCALL, QUIET_FACTS, ZEROES, zeroes as _zeroes
from gradguard.analysis.summary import query
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.gg205_unzeroed_grads import messages as M

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import List, Optional, Set, Tuple

_OPT_NAME = re.compile(r"opt", re.IGNORECASE)
_SCHED_NAME = re.compile(r"sched|lr_|warmup", re.IGNORECASE)


class UnzeroedGrads(Rule):
    code = "GG205"
    name = "unzeroed-grads"
    default_severity = Severity.WARNING
    needs_backprop = True
    fact_sources = (GRAPH_FACTS, QUIET_FACTS)  # var: (optimizers made at module level), and zeroing helpers
    trigger = Trigger(torch=True, text=("backward", (".grad", "step")))
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        text = unit_text(unit, ctx.index.lines)
        out = []
        local_opts = _Lazy(lambda: _local_optimizers(unit.body, ctx))
        for loop, nodes, steps in _training_loops(unit.body, ctx, local_opts):
            if not _zeroed(nodes, ctx):
                out.append(_finding(self, loop, steps, ctx))
                continue
            other = _unzeroed_optimizer(nodes, steps, ctx, local_opts)
            if other is not None:
                out.append(_finding(self, loop, [other], ctx, zeroed=_zeroed_optimizers(nodes)))
                continue
            leak = _leaked_after_zeroing(self, loop, steps, ctx, unit)
            if leak is not None:
                out.append(leak)
                continue
            hint = _undivided_accumulation(self, loop, steps, ctx, text, unit)
            if hint is not None:
                out.append(hint)
        if not out and unit.kind == "function" and isinstance(unit.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = _stepped_per_call(self, unit, ctx, local_opts)
            if found is not None:
                out.append(found)
        return out


def _zeroing_defs(summary) -> bool:
    """Does some def of the file zero gradients (``QUIET_FACTS``'s ``gg2:zeroes:``)? A summary query."""
    return any(k.startswith(ZEROES) for k in summary)


def _zeroing_def_names(summary) -> frozenset:
    """The names of the defs of the file that zero gradients (a summary query)."""
    return frozenset(k[len(ZEROES):] for k in summary if k.startswith(ZEROES))


def _own_callees(unit, fn, depth: int = 2) -> List[ast.AST]:
    """The methods of ``fn``'s class it calls on ``self`` (``self.forward_backward(...)``),
    and theirs, ``depth`` deep."""
    cls = unit.class_node
    if cls is None or depth <= 0:
        return []
    defs = {d.name: d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: List[ast.AST] = []
    for n in A.body_nodes(fn):
        if n.__class__ is ast.Call and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id == "self" and n.func.attr in defs and defs[n.func.attr] is not fn:
            d = defs[n.func.attr]
            if d not in out:
                out.append(d)
                out.extend(m for m in _own_callees(unit, d, depth - 1) if m not in out and m is not fn)
    return out


def _stepped_per_call(rule, unit, ctx, local_opts) -> Optional[Finding]:
    """A trainer's method (or a function) that back-propagates and steps an optimizer each
    time it runs -- itself or through the methods it calls on ``self`` -- and is called in
    the body of a loop or comprehension that zeroes nothing (``QUIET_FACTS``'s
    ``gg2:loopcall:``), in a file where no def zeroes gradients: the loop's iterations
    step with the sum of every earlier gradient. Reported at the step, with the zeroing
    put at the top of the method."""
    fn = unit.node
    summary = ctx.summary
    if (LOOPCALL + fn.name) not in summary or A.is_no_grad_function(fn, ctx):
        return None
    own = A.body_nodes(fn)
    called = _own_callees(unit, fn)
    everything = list(own) + [n for d in called for n in A.body_nodes(d)]
    zeroings = [n for n in everything if _zeroes(n)]
    if query(summary, _zeroing_defs) and not (
            zeroings and query(summary, _zeroing_def_names) <= {fn.name} | {getattr(d, "name", "") for d in called}):
        return None  # some def zeroes gradients (maybe for this one); unless only this one and its own
    if not any(n.__class__ is ast.Call and _real_backward(n, ctx) for n in everything):
        return None
    steps = [st for st in _steps(own, ctx, local_opts) if st[1] == "optimizer"]
    if zeroings:
        # a GAN class's step() that zeroes the generator and never the discriminator
        steps = _steps_zeroed_by_none(zeroings, steps, unit.class_node)
    if not steps:
        return None
    node, _, what = steps[0]
    if what is None:
        return None
    zero = f"{what}.zero_grad()"
    line = getattr(node, "lineno", 0)
    stmt = next((s for s in A.iter_statements(fn.body) if s.lineno == line
                 and not isinstance(s, (ast.If, ast.For, ast.While, ast.With, ast.Try))), None)
    fixes = []
    edit = _insert_in_def(fn, zero, ctx)
    if edit is not None:
        fixes.append(Fix(M.fix_zero_per_call(fn.name, zero), (edit,), preferred=True))
    related = (Related(ctx.line_range(fn), M.called_in_a_loop(fn.name)),)
    zeroed = _zeroed_optimizers(zeroings)
    msg = M.only_others_zeroed_per_call(fn.name, what, zeroed, zero) if zeroed else M.never_zeroed_per_call(fn.name, what, zero)
    return Finding(rule.code, ctx.line_range(stmt if stmt is not None else node),
                   msg, rule.default_severity, related, tuple(fixes),
                   {"zero": zero})


def _optimizer_modules(cls) -> dict:
    """``{"self.optimizerD": "self.discriminator"}``: the optimizers a class's methods build on
    its object over the parameters of one of its modules (``torch.optim.Adam(self.D.parameters())``)."""
    out: dict = {}
    if cls is None:
        return out
    for n in ast.walk(cls):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.value, ast.Call) and n.value.args:
            target = A.dotted(n.targets[0])
            f = n.value.func
            first = n.value.args[0]
            if target is None or not target.startswith("self.") or not (
                    isinstance(f, ast.Attribute) and A.dotted(f.value) in ("torch.optim", "optim")):
                continue
            if isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) \
                    and first.func.attr == "parameters" and not first.args:
                owner = A.dotted(first.func.value)
                if owner is not None and owner.startswith("self."):
                    out[target] = owner
    return out


def _steps_zeroed_by_none(zeroings, steps, cls) -> list:
    """The optimizer steps of a method no zeroing of it reaches, when every zeroing is
    ``opt.zero_grad()`` or ``module.zero_grad()`` of a class's optimizer or the module it
    was built over (``self.generator.zero_grad()`` reaches ``self.optimizerG``'s
    parameters, not ``self.optimizerD``'s); none when a zeroing could reach anything
    (``p.grad = None``, a helper, a module no optimizer of the class is built over, or a
    module holding another's)."""
    owners = _optimizer_modules(cls)
    modules = set(owners.values())
    if len(modules) != len(owners):
        return []  # two optimizers over one module
    reached = set()
    for n in zeroings:
        d = S.zeroed(n) if S.zeroing_call(n) else None
        if d is None:
            return []
        if d in owners:
            reached.add(d)
        elif d in modules:
            reached.update(o for o, m in owners.items() if m == d)
        else:
            return []
    if any(a != b and (a.startswith(b + ".") or b.startswith(a + ".")) for a in modules for b in modules):
        return []
    return [st for st in steps if st[2] in owners and st[2] not in reached]


def _insert_in_def(fn, line: str, ctx) -> Optional[TextEdit]:
    """``line`` as the first statement of ``fn``'s body (after its docstring)."""
    body = fn.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        if len(body) < 2 or body[1].lineno == (first.end_lineno or 0):
            return None  # a statement sharing the docstring's line
        first = body[1]
    if first.lineno == fn.lineno:
        return None  # `def f(): step()` on one line
    indent = ctx.indent_of(first.lineno)
    pos = Position(first.lineno - 1, 0)
    return TextEdit(Range(pos, pos), f"{indent}{line}\n")


def _real_backward(call: ast.Call, ctx) -> bool:
    if not A.is_backward_call(call, ctx):
        return False
    q = A.qualify(call.func, ctx) or ""
    if q.startswith("torch.distributed") or "dist_autograd" in (A.dotted(call.func) or ""):
        return False  # distributed autograd accumulates into its context, made anew each iteration
    return q != "torch.autograd.grad" and not A.has_create_graph(call)


def _training_loops(body, ctx, local_opts) -> List[Tuple[ast.stmt, List[ast.AST], list]]:
    """Innermost loops whose body back-propagates and steps: (loop, its nodes, its steps)."""
    cands: List[Tuple[ast.stmt, List[ast.AST], list]] = []
    lines = ctx.index.lines
    # the words a back-propagating call is spelled with: ``backward`` (a method, or
    # torch.autograd.backward by its name), or a bare alias of that function
    spellings = ["backward"] + [k for k, v in (ctx.imports or {}).items()
                                if v == "torch.autograd.backward" and "backward" not in k]
    for s in A.iter_statements(body):
        if not isinstance(s, A.LOOPS):
            continue
        text = "\n".join(lines[s.lineno - 1:s.end_lineno or s.lineno])
        if not any(w in text for w in spellings):
            continue  # (cheap: a loop without one cannot back-propagate; nested loops are walked once each)
        nodes = A.block_nodes(s.body)
        if not any(n.__class__ is ast.Call and _real_backward(n, ctx) for n in nodes):
            continue
        steps = _steps(nodes, ctx, local_opts)
        if steps:
            cands.append((s, nodes, steps))
    inner: List[Tuple[ast.stmt, List[ast.AST], list]] = []
    for s, nodes, steps in cands:
        if not any(o is not s and s.lineno <= o.lineno and (o.end_lineno or 0) <= (s.end_lineno or 0)
                   for o, _, _ in cands):
            inner.append((s, nodes, steps))
    return inner


def _steps(nodes, ctx, local_opts) -> List[Tuple[ast.AST, str, Optional[str]]]:
    """The updates of what the loop trains: (node, kind, what to zero)."""
    out: List[Tuple[ast.AST, str, Optional[str]]] = []
    for n in nodes:
        cls = n.__class__
        got = S.step_of(n, scaler=True) if cls is ast.Call else None
        if got is not None:
            opt, how = got
            if how == "scaler" or _is_optimizer(opt, opt.rsplit(".", 1)[-1], ctx, local_opts):
                out.append((n, "optimizer", opt))
        elif cls is ast.AugAssign and isinstance(n.op, (ast.Sub, ast.Add)):
            base = _param_base(n.target)
            if base and _reads_grad_of(n.value, base):
                out.append((n, "manual", base))
        elif cls is ast.Call and isinstance(n.func, ast.Attribute) and n.func.attr in ("add_", "sub_"):
            base = _param_base(n.func.value)
            if base and any(_reads_grad_of(a, base) for a in list(n.args) + [k.value for k in n.keywords]):
                out.append((n, "manual", base))
    return out


def _is_optimizer(recv: str, last: str, ctx, local_opts) -> bool:
    """``optimizer.step()``, ``self.opt_g.step()``, or a name bound to a
    ``torch.optim`` constructor (``优化器 = torch.optim.Adam(...)``) — never a
    learning-rate scheduler's ``step()``."""
    if _SCHED_NAME.search(last):
        return False
    if _OPT_NAME.search(last):
        return True
    return recv in local_opts.get() or recv in query(ctx.summary, _module_optimizers)


def _module_optimizers(summary) -> frozenset:
    """Module-level names bound to a ``torch.optim`` optimizer (a summary query)."""
    names = set()
    for key, raw in summary.items():
        if key.startswith("var:") and isinstance(raw, str):
            head, dot, rest = raw.partition(".")
            full = summary.get("import:" + head)
            q = (full + dot + rest) if isinstance(full, str) else raw
            if q.startswith("torch.optim.") and "lr_scheduler" not in q:
                names.add(key[4:])
    return frozenset(names)


class _Lazy:
    """A value computed on first use (the unit's optimizer names: most step()
    receivers are named ``opt...`` and never need them)."""

    def __init__(self, make):
        self._make = make
        self._value = None

    def get(self):
        if self._value is None:
            self._value = self._make()
        return self._value


def _local_optimizers(body, ctx) -> Set[str]:
    names: Set[str] = set()
    for s in A.iter_statements(body):
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
            q = A.qualify(s.value.func, ctx) or ""
            if q.startswith("torch.optim.") and "lr_scheduler" not in q:
                for t in s.targets:
                    names.update(A.target_names(t))
    return names


def _param_base(t: ast.AST) -> Optional[str]:
    """``w`` of ``w``, ``w.data``, ``w.data[:]``, ``model.weight.data``."""
    while isinstance(t, ast.Subscript):
        t = t.value
    if isinstance(t, ast.Attribute) and t.attr == "data":
        t = t.value
    return A.dotted(t)


def _reads_grad_of(e: ast.AST, base: str) -> bool:
    for n in A.iter_nodes(e):
        if isinstance(n, ast.Attribute) and n.attr == "grad":
            inner = n.value
            if A.dotted(inner) == base:
                return True
    return False


def _zeroed(nodes, ctx) -> bool:
    summary = ctx.summary
    for n in nodes:
        if _zeroes(n):
            return True
        if n.__class__ is ast.Call:
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name and (ZEROES + name) in summary:
                return True
    return False


def _zeroed_optimizers(nodes) -> List[str]:
    out: List[str] = []
    for n in nodes:
        d = S.zeroed(n)
        if d is not None and d not in out:
            out.append(d)
    return out


def _unzeroed_optimizer(nodes, steps, ctx, local_opts):
    """A loop with several optimizers that zeroes only some of them (a GAN zeroing
    its discriminator's): the step of one never zeroed, or None. Only when every
    zeroing is ``opt.zero_grad()`` of a ``torch.optim`` optimizer made in this file
    (a ``model.zero_grad()``, ``p.grad = None`` or a helper could reach any
    parameters), and the unzeroed one is made there too."""
    known = local_opts.get() | query(ctx.summary, _module_optimizers)
    zeroed = []
    summary = ctx.summary
    for n in nodes:
        if n.__class__ is ast.Call:
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name and (ZEROES + name) in summary:
                return None
        if not _zeroes(n):
            continue
        if not S.zeroing_call(n):
            return None
        d = S.zeroed(n)
        if d is None or d not in known:
            return None
        zeroed.append(d)
    for step in steps:
        node, kind, what = step
        if kind == "optimizer" and what in known and what not in zeroed and node.__class__ is ast.Call \
                and isinstance(node.func, ast.Attribute) and A.dotted(node.func.value) == what:
            return step
    return None


def _finding(rule, loop, steps, ctx, zeroed=None) -> Finding:
    node, kind, what = steps[0]
    stmt_line = node.lineno
    if kind == "optimizer":
        zero = f"{what}.zero_grad()"
        msg = M.never_zeroed(what, zero) if not zeroed else M.only_others_zeroed(what, zeroed, zero)
        lines = [zero]
    else:
        bases = []
        for _, k, b in steps:
            if k == "manual" and b not in bases:
                bases.append(b)
        msg = M.never_reset(bases)
        lines = [f"{b}.grad = None" for b in bases]
        loop_vars = set(A.target_names(loop.target)) if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
        if any(b.split(".")[0] in loop_vars for b in bases):
            lines = []  # a per-parameter loop variable: nothing to name at the top of the iteration
    fixes = []
    edit = _insert_at_top(loop, lines, ctx) if lines else None
    if edit is not None:
        fixes.append(Fix(M.fix_zero_at_top(lines), (edit,), preferred=True))
    related = (Related(ctx.line_range(loop), M.loop_never_zeroes()),)
    stmt = _statement_of(loop, stmt_line)
    return Finding(rule.code, ctx.line_range(stmt if stmt is not None else node), msg, rule.default_severity,
                   related, tuple(fixes), {"zero": "; ".join(lines)})


def _owned_modules(unit, ctx) -> dict:
    """``{"opt_d": "D"}``: the optimizers the unit (or its class) builds over one module's
    ``parameters()`` (``opt_d = torch.optim.Adam(D.parameters(), ...)``)."""
    out = _optimizer_modules(unit.class_node)
    for st in A.iter_statements(unit.body):
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.value, ast.Call)
                and st.value.args):
            continue
        q = A.qualify(st.value.func, ctx) or ""
        first = st.value.args[0]
        target = A.dotted(st.targets[0])
        if (target is not None and q.startswith("torch.optim.") and "lr_scheduler" not in q
                and isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute)
                and first.func.attr == "parameters" and not first.args):
            owner = A.dotted(first.func.value)
            if owner is not None:
                out[target] = owner
    return out


def _leaked_after_zeroing(rule, loop, steps, ctx, unit) -> Optional[Finding]:
    """A GAN loop zeroing each optimizer only after its own step (Lightning#591's template):
    ``d_loss.backward(); opt_d.step(); opt_d.zero_grad()``, then ``g_loss.backward()`` through
    ``D(G(z))``, ``opt_g.step(); opt_g.zero_grad()``. The generator's backward, after D's
    zeroing, leaves its gradients in D's parameters, and D's next step adds them to its own
    loss's. Read on the loop's flat statements only (no branch holding a backward, a step or a
    zeroing; no ``with`` block that turns graph recording off), with every zeroing an
    optimizer's (or its module's) built over one module in this unit or its class; the modules
    a loss reaches are followed by name (``.detach()`` cuts). The fix zeroes that optimizer at
    the top of the iteration."""
    opts = {what for _, kind, what in steps if kind == "optimizer"}
    if len(opts) < 2:
        return None
    owners = {o: m for o, m in _owned_modules(unit, ctx).items() if o in opts}
    if len(owners) != len(opts) or len(set(owners.values())) != len(owners):
        return None
    modules = set(owners.values())
    if any(a != b and a.startswith(b + ".") for a in modules for b in modules):
        return None
    taint: dict = {}
    zeros: dict = {}
    first_step: dict = {}
    backwards: list = []  # (index, statement, modules reached)

    def of(e) -> set:
        if isinstance(e, ast.Name):
            return set(taint.get(e.id, ()))
        if isinstance(e, ast.Call):
            f = e.func
            got: set = set()
            for a in list(e.args) + [k.value for k in e.keywords]:
                got |= of(a.value if isinstance(a, ast.Starred) else a)
            if isinstance(f, ast.Attribute):
                if f.attr in K.GRAPH_CUT_METHODS:
                    return set()
                callee = A.dotted(f.value) if f.attr == "forward" else None
                if callee in modules:
                    return got | {callee}
                got |= of(f.value)
            d = A.dotted(f)
            if d in modules:
                got.add(d)
            return got
        out: set = set()
        for child in A.child_nodes(e):
            if isinstance(child, ast.expr):
                out |= of(child)
        return out

    for i, st in enumerate(loop.body):
        cls = st.__class__
        if cls is not ast.Expr and any(_zeroes(n) for n in A.iter_nodes(st)):
            return None  # p.grad = None and the like
        if cls is ast.Expr and isinstance(st.value, ast.Call):
            call = st.value
            if S.zeroing_call(call):
                d = S.zeroed(call)
                opt = d if d in owners else next((o for o, m in owners.items() if m == d), None)
                if opt is None:
                    return None  # a zeroing the rule cannot place
                zeros.setdefault(opt, []).append(i)
                continue
            got = S.step_of(call, scaler=True)
            if got is not None:
                first_step.setdefault(got[0], i)
                continue
            if _real_backward(call, ctx):
                target = A.backward_target(call, ctx)
                backwards.append((i, st, of(target) if target is not None else set()))
                continue
        elif cls is ast.Assign:
            val = of(st.value)
            for t in st.targets:
                for n in A.target_names(t):
                    taint[n] = val
            continue
        elif cls is ast.AugAssign:
            acc = A.dotted(st.target)
            if acc is not None:
                taint[acc] = taint.get(acc, set()) | of(st.value)
            continue
        elif cls in (ast.Expr, ast.AnnAssign, ast.Pass):
            continue
        else:
            nodes = A.iter_nodes(st)
            if any(n.__class__ is ast.Call and (S.zeroing_call(n) or S.step_of(n, scaler=True) is not None
                                                or A.is_backward_call(n, ctx)) for n in nodes):
                return None  # a branch or a block holding part of the update: not read
            if cls in (ast.With, ast.AsyncWith):
                return None
        if any(_zeroes(n) for n in A.iter_nodes(st)):
            return None  # p.grad = None and the like
    for opt, module in owners.items():
        z, s = zeros.get(opt), first_step.get(opt)
        if not z or s is None or min(z) < s:
            continue  # never zeroed (another finding), or zeroed before its step
        leak = next(((i, st) for i, st, reached in backwards if i > max(z) and module in reached), None)
        if leak is None:
            continue
        i, st = leak
        zero_stmt, step_stmt = loop.body[max(z)], loop.body[s]
        msg = M.leaked_after_zeroing(opt, module, zero_stmt.lineno, step_stmt.lineno)
        zero = f"{opt}.zero_grad()"
        fixes = []
        edit = _insert_at_top(loop, [zero], ctx)
        if edit is not None:
            fixes.append(Fix(M.fix_zero_at_top([zero]), (edit,), preferred=True))
        related = (Related(ctx.line_range(zero_stmt), M.zeroed_too_early(opt)),
                   Related(ctx.line_range(step_stmt), M.next_step_adds(opt)))
        return Finding(rule.code, ctx.line_range(st), msg, rule.default_severity, related, tuple(fixes),
                       {"zero": zero})
    return None


def _modulo_divisor(test: ast.expr) -> Optional[ast.expr]:
    for n in A.iter_nodes(test):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            return n.right
    return None


def _counter_divisor(guard: ast.If, loop) -> Optional[ast.expr]:
    """``K`` of the counter-gated form: ``n += 1`` in the loop, ``if n >= K:`` (or
    ``n == K``) steps and sets ``n = 0`` again (neural_sp's ``accum_n_steps``)."""
    t = guard.test
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.left, ast.Name)):
        return None
    if not isinstance(t.ops[0], (ast.GtE, ast.Eq)):
        return None
    counter, k = t.left.id, t.comparators[0]
    if isinstance(k, ast.Constant) and not isinstance(k.value, int):
        return None
    counts = any(isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name)
                 and n.target.id == counter and isinstance(n.value, ast.Constant) and n.value.value == 1
                 for n in A.block_nodes(loop.body))
    resets = any(isinstance(n, ast.Assign) and any(isinstance(x, ast.Name) and x.id == counter for x in n.targets)
                 and isinstance(n.value, ast.Constant) and n.value.value == 0 for n in A.block_nodes(guard.body))
    return k if counts and resets else None


def _helper_divisor(guard: ast.If, ctx) -> Optional[ast.expr]:
    """``K`` of a step gated by a counting helper object: ``if acc.ready(len(xb)):`` where
    ``ready`` adds to a count on its object, compares it with ``self.n_acc`` (or a number),
    resets it and answers True or False (fastai's ``GradientAccumulation``, ``gg2:counter:``):
    ``acc.n_acc`` (a node placed at the test, for the related range)."""
    t = guard.test
    if not (isinstance(t, ast.Call) and isinstance(t.func, ast.Attribute) and isinstance(t.func.value, ast.Name)):
        return None
    got = ctx.summary.get(COUNTER + t.func.attr)
    if not isinstance(got, tuple) or len(got) != 3:
        return None
    kind, value, per = got
    if kind == "attr":
        node: ast.expr = ast.Attribute(value=ast.Name(id=t.func.value.id, ctx=ast.Load()), attr=value, ctx=ast.Load())
    else:
        node = ast.Constant(value=value)
    node._gg_samples = per == "sample"  # type: ignore[attr-defined]
    return ast.copy_location(node, t)


def _flag_divisor(guard: ast.If, loop) -> Optional[ast.expr]:
    """``K`` of a step gated by a flag the iteration computes with a modulo:
    ``is_grad_step = (batch_idx + 1) % K == 0`` assigned once in the loop's body, then
    ``if is_grad_step:`` (e2e_sae's trainer)."""
    t = guard.test
    if not isinstance(t, ast.Name):
        return None
    found = None
    for n in A.block_nodes(loop.body):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(x, ast.Name) and x.id == t.id for x in targets):
                if found is not None or not isinstance(n, ast.Assign):
                    return None  # set twice, or updated: not one modulo test
                found = n
    return _modulo_divisor(found.value) if found is not None else None


def _same(a: ast.expr, b: ast.expr) -> bool:
    if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):
        return a.value == b.value
    da, db = A.dotted(a), A.dotted(b)
    return da is not None and da == db


def _undivided_accumulation(rule, loop, steps, ctx, text: str, unit=None) -> Optional[Finding]:
    """Accumulation on purpose (the step under ``if (i + 1) % k == 0:``) while the
    loss is never divided by ``k``: the step sees the sum of ``k`` gradients.
    A hint without a fix (dividing changes the gradients' scale, and with it the
    learning rate that was tuned); libraries that scale for you are left alone."""
    if "accelerator" in text or "accumulate(" in text or "deepspeed" in text:
        return None
    step_ids = {id(n) for n, k, _ in steps if k == "optimizer"}
    divisor = guard = None
    for s in A.iter_statements(list(loop.body)):
        if isinstance(s, ast.If) and any(id(n) in step_ids for n in A.block_nodes(s.body)):
            divisor = _modulo_divisor(s.test)
            if divisor is None:
                divisor = _counter_divisor(s, loop)
            if divisor is None:
                divisor = _helper_divisor(s, ctx)
            if divisor is None:
                divisor = _flag_divisor(s, loop)
            if divisor is not None:
                guard = s
                break
    if guard is None or divisor is None:
        return _undivided_micro_steps(rule, loop, steps, ctx, unit)
    if isinstance(divisor, ast.Constant) and divisor.value in (0, 1):
        return None
    guarded = {id(n) for n in A.iter_nodes(guard)}
    backward = None
    for n in A.block_nodes(loop.body):
        if id(n) in guarded:
            continue  # a step skipped every k iterations (a GAN's generator), not accumulation
        if _zeroes(n):
            return None  # zeroed every iteration: nothing accumulates
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult)) and (
                _same(n.right, divisor) or isinstance(n.op, ast.Mult) and _same(n.left, divisor)):
            return None  # loss / k (or a factor built from k)
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div) and _same(n.value, divisor):
            return None
        if isinstance(n, ast.Call) and backward is None and _real_backward(n, ctx):
            backward = n
    if backward is None:
        return None
    k = A.dotted(divisor) or ast.unparse(divisor)
    msg = M.accumulated_samples_not_scaled(k) if getattr(divisor, "_gg_samples", False) else M.accumulated_not_divided(k)
    stmt = _statement_of(loop, backward.lineno)
    return Finding(rule.code, ctx.line_range(stmt if stmt is not None else backward), msg, Severity.HINT,
                   (Related(ctx.line_range(divisor), M.accumulation_count()),), (),
                   {"accumulation": k})


def _divides(nodes, k: ast.expr) -> bool:
    """Is some value divided by ``k`` (or by a count named like one), or scaled by a factor built from it?"""
    for n in nodes:
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult)):
            if _same(n.right, k) or isinstance(n.op, ast.Mult) and _same(n.left, k):
                return True
            if isinstance(n.op, ast.Div) and _ACCUM_NAME.search(A.dotted(n.right) or ""):
                return True
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div):
            if _same(n.value, k) or _ACCUM_NAME.search(A.dotted(n.value) or ""):
                return True
    return False


# (``iter_size``: Caffe's name for it, kept by Detectron-style trainers: ``for inner_iter in range(iter_size)``)
_ACCUM_NAME = re.compile(r"accum|micro|iter_size", re.IGNORECASE)


def _range_count(loop: ast.stmt) -> Optional[ast.expr]:
    """``k`` of ``for _ in range(k)`` (or ``range(0, k)``)."""
    it = getattr(loop, "iter", None)
    if not (isinstance(it, ast.Call) and A.dotted(it.func) == "range" and not it.keywords):
        return None
    if len(it.args) == 1:
        return it.args[0]
    if len(it.args) == 2 and isinstance(it.args[0], ast.Constant) and it.args[0].value == 0:
        return it.args[1]
    return None


def _undivided_micro_steps(rule, loop, steps, ctx, unit=None) -> Optional[Finding]:
    """The nanoGPT shape: ``for micro_step in range(k): ... loss.backward()`` inside the
    training loop, one step after it, the loss never divided by ``k``. Reported only when
    the inner loop says it accumulates (its count or its variable named ``accum``/``micro``/
    ``iter_size``): summing over other inner loops (tasks, augmentations) is often meant.
    Silent too when the unit scales something else by ``k`` (the learning rate made ``k``
    times smaller, ``BASE_LR *= batch_size / (original_batch_size * iter_size)``: the same
    update as dividing the loss, for plain SGD)."""
    step_ids = {id(n) for n, k, _ in steps if k == "optimizer"}
    for inner in A.iter_statements(list(loop.body)):
        if not isinstance(inner, ast.For):
            continue
        k = _range_count(inner)
        if k is None or isinstance(k, ast.Constant):
            continue
        names = (A.dotted(k) or "") + " " + " ".join(A.target_names(inner.target))
        if not _ACCUM_NAME.search(names):
            continue
        nodes = A.block_nodes(inner.body)
        if any(id(n) in step_ids or _zeroes(n) for n in nodes):
            continue  # steps or zeroes per micro-step: nothing accumulates
        backward = next((n for n in nodes if isinstance(n, ast.Call) and _real_backward(n, ctx)), None)
        if backward is None or _divides(nodes, k):
            continue
        inner_ids = {id(n) for n in nodes}
        if not any(sid not in inner_ids for sid in step_ids):
            continue
        if unit is not None and _divides(A.unit_nodes(unit), k):
            continue
        count = A.dotted(k) or ast.unparse(k)
        stmt = _statement_of(inner, backward.lineno)
        return Finding(rule.code, ctx.line_range(stmt if stmt is not None else backward),
                       M.accumulated_not_divided(count), Severity.HINT,
                       (Related(ctx.line_range(inner), M.accumulation_count()),), (), {"accumulation": count})
    return None


def _statement_of(loop, line: int) -> Optional[ast.stmt]:
    for s in A.iter_statements(list(loop.body)):
        if s.lineno == line and not isinstance(s, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            return s
    return None


def _insert_at_top(loop, lines: List[str], ctx) -> Optional[TextEdit]:
    first = loop.body[0]
    if first.lineno == loop.lineno:
        return None  # `for x in xs: step(x)` on one line
    indent = ctx.indent_of(first.lineno)
    text = "".join(f"{indent}{ln}\n" for ln in lines)
    pos = Position(first.lineno - 1, 0)
    return TextEdit(Range(pos, pos), text)
