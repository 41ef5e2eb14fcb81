"""GG207 zeroed-before-step: ``optimizer.zero_grad()`` between ``loss.backward()``
and ``optimizer.step()``, so the step finds the gradients erased.

Read on one block (a statement list) at a time: a statement ``O.zero_grad(...)``,
a later statement of the same block ``O.step()`` (or ``scaler.step(O)``) of the
same optimizer, a backward earlier in the block (with no step or zeroing of
``O`` between it and the zeroing), and between the zeroing and the step nothing
that could give ``O`` gradients again: no backward, no ``.grad`` touched, no call
of code the rule cannot read (a few logging and clipping calls are known).
``O.step(closure)`` computes its own gradients and is never reported.

The fix moves the zeroing's lines to just after the step's.

Also read: a zeroing under the step's own modulo condition but before the backward
(``if i % k == 0: O.zero_grad()``, backward, ``if i % k == 0: O.step()``), which erases what
the iterations before the stepping one accumulated (``_zeroed_under_the_steps_condition``),
and a same-file helper that zeroes then back-propagates, called once per iteration of a loop
that steps after it or every k iterations (``_zeroed_by_a_helper``, through this rule's facts).
"""

from __future__ import annotations

import ast
import builtins

from gradguard.analysis import ast_util as A
from gradguard.analysis import steps as S
from gradguard.analysis.context import unit_text
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.gg207_zeroed_before_step import messages as M
from gradguard.rules.gg207_zeroed_before_step.facts import STEP_ONLY, ZERO_BACK, ZEROING_HELPERS

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Optional, Sequence

_BUILTINS = frozenset(dir(builtins))
# methods that never give an optimizer's parameters a gradient (logging, metrics, clipping)
_HARMLESS = frozenset({"item", "info", "debug", "warning", "log", "append", "add_scalar", "add_scalars", "write",
                       "format", "cpu", "detach", "numpy", "tolist", "mean", "sum", "set_postfix", "set_description",
                       "clip_grad_norm_", "clip_grad_value_", "flush", "extend", "print", "parameters",
                       "named_parameters", "get_last_lr", "state_dict"})


class ZeroedBeforeStep(Rule):
    code = "GG207"
    name = "zeroed-before-step"
    default_severity = Severity.WARNING
    needs_backprop = True
    names_lines = True  # the message names the backward's and the step's lines
    fact_sources = (ZEROING_HELPERS,)  # helpers that zero then back-propagate, helpers that only step
    trigger = Trigger(torch=True, text=("step",))  # (zero_grad and backward may sit in a helper: read in check)
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        out = []
        text = unit_text(unit, ctx.index.lines)
        if "zero_grad" not in text or "backward" not in text:
            return _helper_findings(self, unit, ctx)
        blocks = [unit.body]
        for s in A.iter_statements(unit.body):
            blocks.extend(A.child_blocks(s))
        for block in blocks:
            for j, st in enumerate(block):
                opt = _zeroing(st)
                if opt is None:
                    continue
                back = _backward_before(block[:j], opt, ctx)
                if back is None:
                    continue
                step = _step_after(block[j + 1:], opt, ctx)
                if step is not None:
                    out.append(_finding(self, st, back, step, opt, ctx))
            if len(block) > 2:
                found = _zeroed_under_the_steps_condition(self, block, ctx)
                if found is not None:
                    out.append(found)
            for j, st in enumerate(block):
                if isinstance(st, (ast.For, ast.While)):
                    found = _zeroed_per_micro_batch(self, st, block[j + 1:], ctx)
                    if found is None:
                        found = _zeroed_every_iteration_stepped_every_k(self, st, ctx)
                    if found is not None:
                        out.append(found)
        if unit.node is not None and _steps_every_kth_call(unit.node, unit.class_node is not None):
            # the def is the iteration: zeroed per call, stepped every k calls (a Lightning-style training_step)
            out.extend(_zeroed_every_k_all(self, unit.node, ctx, every=True))
        out.extend(_helper_findings(self, unit, ctx))
        return out


def _steps_every_kth_call(fn, method: bool) -> bool:
    """Does a statement of ``fn``'s own body step under a modulo test of one of its parameters
    (``if (batch_idx + 1) % self.accumulate_grad_batches == 0: opt.step()``; a method's ``self``
    is none): a def called once per batch, whose every call is one iteration of its caller's loop?"""
    args = fn.args
    positional = list(args.posonlyargs) + list(args.args)
    if method and positional:
        positional = positional[1:]
    params = {a.arg for a in positional + list(args.kwonlyargs)}
    for st in A.with_bodies_inline(fn.body):
        if st.__class__ is ast.If and any(n.__class__ is ast.BinOp and n.op.__class__ is ast.Mod
                                          and any(isinstance(x, ast.Name) and x.id in params for x in ast.walk(n.left))
                                          for n in ast.walk(st.test)) \
                and any(S.stepped(n, scaler=True, closure=False) is not None for n in A.iter_nodes(st.body)):
            return True
    return False


def _helper_findings(rule, unit, ctx) -> "list":
    """The loops of the unit that call a zeroing helper once per iteration
    (:func:`_zeroed_by_a_helper`); nothing when the file has no such helper."""
    if not query(ctx.summary, _has_zeroing_helper):
        return []
    out = []
    blocks = [unit.body]
    for s in A.iter_statements(unit.body):
        blocks.extend(A.child_blocks(s))
    for block in blocks:
        for j, st in enumerate(block):
            if isinstance(st, (ast.For, ast.While)):
                found = _zeroed_by_a_helper(rule, st, block[j + 1:], ctx)
            elif st.__class__ is ast.Assign or st.__class__ is ast.Expr:
                found = _zeroed_by_a_helper_comprehension(rule, st, block[j + 1:], ctx)
            else:
                continue
            if found is not None:
                out.append(found)
    return out


def _has_zeroing_helper(summary) -> bool:
    """Does a def of the file zero an optimizer and then back-propagate (a summary query)?"""
    return any(key.startswith(ZERO_BACK) for key in summary)


def _helper_call(st: ast.stmt, summary, prefix: str) -> "Optional[tuple]":
    """(the call, the helper's name, the optimizer's last name) when ``st`` is a plain call
    statement (``trainer.forward_backward(mb)``, ``loss = train_step(x, y)``) of a def with
    a ``prefix`` fact."""
    if st.__class__ is not ast.Expr and st.__class__ is not ast.Assign:
        return None
    v = st.value
    if v.__class__ is not ast.Call:
        return None
    f = v.func
    name = f.attr if f.__class__ is ast.Attribute else f.id if f.__class__ is ast.Name else None
    got = summary.get(prefix + name) if name else None
    return (v, name, got) if isinstance(got, str) else None


def _steps_named(node: ast.AST, opt: str, summary) -> "Optional[ast.Call]":
    """``X.step()`` (or ``scaler.step(X)``) with ``X``'s last part ``opt``, or a call of a
    helper that only steps ``opt``: the call, else None."""
    if node.__class__ is not ast.Call:
        return None
    got = S.stepped(node, scaler=True, closure=False)
    if got is not None:
        return node if got.rsplit(".", 1)[-1] == opt else None
    f = node.func
    name = f.attr if f.__class__ is ast.Attribute else f.id if f.__class__ is ast.Name else None
    return node if name and summary.get(STEP_ONLY + name) == opt else None


def _zeroed_by_a_helper(rule, loop, after, ctx) -> "Optional[Finding]":
    """A loop whose every iteration calls a same-file helper that zeroes ``O`` and then
    back-propagates (torchtitan's RL trainer: ``trainer.forward_backward(mb)`` per micro-batch,
    ``trainer.optim_step()`` after the loop), while ``O`` steps only after the loop or under an
    accumulation condition in it: each call erases what the earlier ones accumulated. No
    fix: the zeroing lives in the helper, which other callers may rely on."""
    if loop.orelse or _runs_once(loop):
        return None
    summary = ctx.summary
    body: "list" = A.with_bodies_inline(loop.body)
    got = None
    for k, st in enumerate(body):
        got = _helper_call(st, summary, ZERO_BACK)
        if got is not None:
            break
    if got is None:
        return None
    call, name, opt = got
    if any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in A.iter_nodes(list(body[:k]))):
        return None  # an iteration may skip the helper
    cond = None
    for st in body:
        if st is body[k]:
            continue
        nodes = list(A.iter_nodes(st))
        if any(S.zeroing_call(n) or (isinstance(n, ast.stmt) and _helper_call(n, summary, ZERO_BACK) is not None)
               for n in nodes):
            return None  # the loop zeroes by itself too: the other shapes' business
        if any(_steps_named(n, opt, summary) is not None for n in nodes):
            if st.__class__ is not ast.If or cond is not None or st.orelse or not _accumulation_test(st, body):
                return None  # a step in every iteration, or under some other condition
            cond = st
    if cond is not None:
        step = next((x for x in cond.body if x.__class__ is ast.Expr and _steps_named(x.value, opt, summary)), None)
        test: "Optional[str]" = ast.unparse(cond.test)
    else:
        step, test = None, None
        for st in after:
            if st.__class__ is ast.Expr and _steps_named(st.value, opt, summary) is not None:
                step = st
                break
            if not _harmless(st, ctx):
                return None
    if step is None:
        return None
    return _helper_finding(rule, body[k], call, opt, step, test, ctx)


def _zeroed_by_a_helper_comprehension(rule, st, after, ctx) -> "Optional[Finding]":
    """The same as :func:`_zeroed_by_a_helper`, the loop a list comprehension:
    ``losses = [trainer.fwd_bwd(mb) for mb in microbatches]`` then ``trainer.optim_step()``
    (torchtitan's RL trainer): each call erases what the earlier ones accumulated."""
    comp = st.value
    if comp.__class__ is not ast.ListComp or len(comp.generators) != 1 or comp.generators[0].ifs:
        return None
    summary = ctx.summary
    got = _helper_call(ast.Expr(value=comp.elt), summary, ZERO_BACK)
    if got is None:
        return None
    call, _, opt = got
    for nxt in after:
        if nxt.__class__ is ast.Expr and _steps_named(nxt.value, opt, summary) is not None:
            return _helper_finding(rule, st, call, opt, nxt, None, ctx)
        if not _harmless(nxt, ctx):
            return None
    return None


def _helper_finding(rule, st, call, opt: str, step, test: "Optional[str]", ctx) -> Finding:
    text = ast.unparse(step.value)
    label = ast.unparse(call.func)
    msg = M.zeroed_by_a_helper(label, opt, text, step.lineno, test)
    related = (Related(ctx.line_range(step), M.stepped_every_k() if test else M.stepped_once(text)),)
    return Finding(rule.code, ctx.line_range(st), msg, rule.default_severity, related, (),
                   {"optimizer": opt, "shape": "helper"})


def _zeroed_every_iteration_stepped_every_k(rule, loop, ctx) -> "Optional[Finding]":
    """Gradient accumulation undone the other way round: a loop whose every iteration zeroes
    ``O`` and back-propagates, while ``O.step()`` runs only under an accumulation condition
    (``if (i + 1) % k == 0:``, or a counter the loop adds to and the step resets): the
    zeroing of the next iteration erases what the iterations that did not step accumulated,
    so each step applies one batch's gradient (accelerate's demo, Opacus' virtual steps,
    openWakeWord's sample count). The fix moves the zeroing to just after the step."""
    found = _zeroed_every_k_all(rule, loop, ctx)
    return found[0] if found else None


def _zeroed_every_k_all(rule, loop, ctx, every: bool = False) -> "list":
    """:func:`_zeroed_every_iteration_stepped_every_k` for the first zeroing of the loop, or (``every``:
    a def called once per batch) for each optimizer it zeroes that way, a GAN's two (PreDiff's
    autoencoder and discriminator), each with its own backward between its zeroing and its step's
    ``if`` (a backward after that ``if`` is another network's loss: clustergan's discriminator
    loss reaching the generator in the iterations that skip its step)."""
    if isinstance(loop, ast.While) and loop.orelse:
        return []
    # statements typed loosely: the fast `__class__ is` tests below do not narrow for mypy
    body: "list" = A.with_bodies_inline(loop.body)
    zeros: "list" = []
    for st in body:
        opt = _zeroing(st)
        if opt is not None and all(opt != o for _, o in zeros):
            zeros.append((st, opt))
            if not every:
                break
    if not zeros:
        return []
    # (cheap first: most loops that zero every iteration also step every iteration)
    if not any(st.__class__ is ast.If and _accumulation_test(st, body) for st in body):
        return []
    out = []
    for zero in zeros:
        found = _zeroed_every_k(rule, body, zero, every, loop, ctx)
        if found is not None:
            out.append(found)
    return out


def _zeroed_every_k(rule, body: "list", zero, after_zero: bool, loop, ctx) -> "Optional[Finding]":
    """One zeroing ``zero`` (statement, optimizer) of :func:`_zeroed_every_k_all` (``after_zero``:
    the backward is the first after it, and comes before the step's ``if``)."""
    zst, opt = zero
    back = cond = None
    for st in body:
        cls = st.__class__
        simple = cls is ast.Expr or cls is ast.Assign
        if simple and _steps(st.value, opt):
            return None  # a step in every iteration
        if not simple and any(_steps(n, opt) for n in A.iter_nodes(st)):
            if cls is not ast.If or cond is not None:
                return None  # a step under some other statement, or under two conditions
            cond = st
        elif back is None and simple and not (after_zero and st.lineno <= zst.lineno):
            back = next((n for n in A.iter_nodes(st) if n.__class__ is ast.Call and A.is_backward_call(n, ctx)
                         and not A.has_create_graph(n)
                         and (A.qualify(n.func, ctx) or "") != "torch.autograd.grad"), None)
    if cond is None or back is None or not _accumulation_test(cond, body):
        return None
    if after_zero and back.lineno > cond.lineno:
        return None
    step = next((st for st in cond.body if isinstance(st, ast.Expr) and _steps(st.value, opt)), None)
    if step is None:
        return None
    msg = M.zeroed_every_iteration(opt, back.lineno, ast.unparse(step.value), step.lineno,
                                   ast.unparse(cond.test), loop.name if isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
    related = (Related(ctx.line_range(back), M.accumulated_here()), Related(ctx.line_range(step), M.stepped_every_k()))
    fixes = []
    if _own_lines(zst, ctx) and zst.end_lineno == zst.lineno and _own_lines(step, ctx):
        z0 = zst.lineno - 1
        moved = ctx.indent_of(step.lineno) + ctx.index.line(z0).lstrip() + "\n"
        after = step.end_lineno or step.lineno
        if after < len(ctx.index.lines):
            at = Position(after, 0)
            edits = (TextEdit(Range(Position(z0, 0), Position(z0 + 1, 0)), ""), TextEdit(Range(at, at), moved))
            fixes.append(Fix(M.fix_move_after_step(opt), edits, preferred=True))
    return Finding(rule.code, ctx.line_range(zst), msg, rule.default_severity, related, tuple(fixes), {"optimizer": opt})


def _zeroed_under_the_steps_condition(rule, block, ctx) -> "Optional[Finding]":
    """Accumulation whose zeroing sits under the step's own condition but before the
    backward (ignite's FAQ, ignite#583: ``if iteration % k == 0: optimizer.zero_grad()``,
    the backward, then ``if iteration % k == 0: optimizer.step()``): the iteration that steps
    first erases what the k - 1 before it accumulated, so each step applies one batch's
    gradient. Only the very same modulo test on both ``if``s, with no name it reads rebound
    between them (zeroing under ``i % k == 0`` and stepping under ``(i + 1) % k == 0``, or under
    the same test after ``count += 1``, is the right order: the zeroing opens each window). The
    fix moves the zeroing into the step's branch, after the step."""
    body: "list" = A.with_bodies_inline(block)
    for j, st in enumerate(body):
        if st.__class__ is not ast.If or st.orelse or len(st.body) != 1:
            continue
        opt = _zeroing(st.body[0])
        if opt is None or not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(st.test)):
            continue
        test = ast.dump(st.test)
        read = {n.id for n in ast.walk(st.test) if isinstance(n, ast.Name)}
        back = None
        for t in body[j + 1:]:
            if _rebinds(t, read):
                return None  # `count += 1` between: the step's test reads another count (the zeroing opens a window)
            if t.__class__ is ast.If and ast.dump(t.test) == test:
                step = next((x for x in t.body if isinstance(x, ast.Expr) and _steps(x.value, opt)), None)
                if step is None or back is None or t.orelse:
                    return None
                return _same_condition_finding(rule, st, back, t, step, opt, ctx)
            nodes = list(A.iter_nodes(t))
            if any(_zeroing(x) == opt for x in nodes if isinstance(x, ast.stmt)) or any(
                    _steps(x, opt) for x in nodes):
                return None  # zeroed or stepped again in between
            if back is None and (t.__class__ is ast.Expr or t.__class__ is ast.Assign):
                back = next((n for n in nodes if n.__class__ is ast.Call and A.is_backward_call(n, ctx)
                             and not A.has_create_graph(n)
                             and (A.qualify(n.func, ctx) or "") != "torch.autograd.grad"), None)
    return None


def _rebinds(st: ast.stmt, names: "set[str]") -> bool:
    """Does ``st`` (a plain statement) rebind one of ``names`` (``count += 1``, ``i = i + 1``)?"""
    cls = st.__class__
    if cls is ast.AugAssign or cls is ast.AnnAssign:
        targets = [st.target]  # type: ignore[attr-defined]
    elif cls is ast.Assign:
        targets = st.targets  # type: ignore[attr-defined]
    else:
        return False
    return any(isinstance(n, ast.Name) and n.id in names for t in targets for n in ast.walk(t))


def _same_condition_finding(rule, zif: ast.If, back: ast.AST, sif: ast.If, step: ast.stmt, opt: str, ctx) -> Finding:
    zst = zif.body[0]
    msg = M.zeroed_under_the_steps_condition(opt, ast.unparse(zif.test), back.lineno,  # type: ignore[attr-defined]
                                             ast.unparse(step.value), step.lineno)  # type: ignore[attr-defined]
    related = (Related(ctx.line_range(back), M.accumulated_here()), Related(ctx.line_range(step), M.stepped_every_k()))
    fixes = []
    if (_own_lines(zif, ctx) and _own_lines(zst, ctx) and zst.lineno == zif.lineno + 1 and zst.end_lineno == zst.lineno
            and _own_lines(step, ctx)):
        z0, after = zif.lineno - 1, step.end_lineno or step.lineno
        moved = ctx.indent_of(step.lineno) + ctx.index.line(zst.lineno - 1).lstrip() + "\n"
        if after < len(ctx.index.lines):
            at = Position(after, 0)
            edits = (TextEdit(Range(Position(z0, 0), Position(z0 + 2, 0)), ""), TextEdit(Range(at, at), moved))
            fixes.append(Fix(M.fix_move_after_step(opt), edits, preferred=True))
    return Finding(rule.code, ctx.line_range(zst), msg, rule.default_severity, related, tuple(fixes), {"optimizer": opt})


def _accumulation_test(cond: ast.If, body) -> bool:
    """Does ``if cond:`` read as "enough has accumulated": a modulo (``(i + 1) % k == 0``,
    maybe ``or`` the last batch), or a comparison of a counter the loop adds to (``+=``) and
    the step's branch resets (``accumulated = 0``)?"""
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(cond.test)):
        return True
    names = {A.dotted(n) for n in ast.walk(cond.test) if isinstance(n, (ast.Name, ast.Attribute))} - {None}
    added = {A.dotted(st.target) for st in body if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add)}
    reset = {A.dotted(t) for st in cond.body if isinstance(st, ast.Assign)
             and isinstance(st.value, ast.Constant) and st.value.value == 0 for t in st.targets}
    return bool(names & added & reset)


def _zeroed_per_micro_batch(rule, loop, after, ctx) -> "Optional[Finding]":
    """Gradient accumulation undone: a loop whose every iteration zeroes ``O`` and then
    back-propagates, with no step of ``O`` in it, followed (in the same block, past
    statements that give ``O`` no gradient) by ``O.step()``: each iteration erases what
    the earlier ones accumulated, and the step applies the last one's gradient only
    (RAE's ``optimizer.zero_grad()`` inside the micro-batch loop). The fix moves the
    zeroing to just before the loop."""
    if loop.orelse or _runs_once(loop):
        return None
    body = loop.body
    for k, st in enumerate(body):
        opt = _zeroing(st)
        if opt is None:
            continue
        rest = body[k + 1:]
        if any(_steps(n, opt) for n in A.iter_nodes(list(body))):
            return None
        if any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in A.iter_nodes(list(body[:k]))):
            return None  # an iteration may skip the zeroing
        back = _backward_before(rest, opt, ctx)
        if back is None:
            return None
        step = _step_after(after, opt, ctx)
        if step is None:
            return None
        return _micro_finding(rule, loop, st, back, step, opt, ctx)
    return None


def _runs_once(loop) -> bool:
    """``for _ in range(1)``: a loop of one iteration."""
    it = getattr(loop, "iter", None)
    return isinstance(it, ast.Call) and A.dotted(it.func) == "range" and len(it.args) == 1 \
        and isinstance(it.args[0], ast.Constant) and it.args[0].value in (0, 1)


def _micro_finding(rule, loop, zero: ast.stmt, back: ast.AST, step: ast.stmt, opt: str, ctx) -> Finding:
    msg = M.zeroed_per_iteration(opt, loop.lineno, back.lineno, ast.unparse(step.value), step.lineno)  # type: ignore[attr-defined]
    related = (Related(ctx.line_range(back), M.accumulated_here()), Related(ctx.line_range(step), M.stepped_after_loop()))
    fixes = []
    if _own_lines(zero, ctx) and zero.end_lineno == zero.lineno and loop.col_offset < zero.col_offset:
        z0 = zero.lineno - 1
        text = ctx.index.line(z0)
        indent = ctx.indent_of(loop.lineno)
        moved = indent + text.lstrip() + "\n"
        at = Position(loop.lineno - 1, 0)
        edits = (TextEdit(Range(at, at), moved), TextEdit(Range(Position(z0, 0), Position(z0 + 1, 0)), ""))
        fixes.append(Fix(M.fix_move_before_loop(opt), edits, preferred=True))
    return Finding(rule.code, ctx.line_range(zero), msg, rule.default_severity, related, tuple(fixes), {"optimizer": opt})


def _zeroing(st: ast.stmt) -> "Optional[str]":
    call = S.zeroing_statement(st)
    return S.zeroed(call) if call is not None else None


def _steps(call: ast.AST, opt: str) -> bool:
    """``opt.step()`` or ``scaler.step(opt)``; not ``opt.step(closure)``, which makes its own gradients."""
    return S.stepped(call, scaler=True, closure=False) == opt


def _backward_before(stmts: "Sequence[ast.stmt]", opt: str, ctx) -> "Optional[ast.AST]":
    """The last backward of ``stmts`` not followed by a step or a zeroing of ``opt``."""
    found = None
    for n in A.iter_nodes(list(stmts)):
        if n.__class__ is not ast.Call:
            continue
        f = n.func
        if A.is_backward_call(n, ctx):
            q = A.qualify(f, ctx) or ""
            if q != "torch.autograd.grad" and not A.has_create_graph(n):
                found = n
        elif found is not None and (_steps(n, opt) or S.zeroed(n) == opt):
            found = None
    return found


def _harmless(st: ast.stmt, ctx) -> bool:
    for n in A.iter_nodes(st):
        cls = n.__class__
        if cls is ast.Attribute and n.attr in ("grad", "backward", "_grad"):  # type: ignore[attr-defined]
            return False
        if cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
            return False
        if cls is ast.Call:
            f = n.func  # type: ignore[attr-defined]
            if isinstance(f, ast.Name):
                if f.id not in _BUILTINS:
                    return False
            elif isinstance(f, ast.Attribute):
                q = A.qualify(f, ctx) or ""
                if f.attr not in _HARMLESS and f.attr != "step" and not (
                        q.startswith("torch.") and not q.startswith("torch.autograd")):
                    return False
            else:
                return False
    return True


def _step_after(stmts: "Sequence[ast.stmt]", opt: str, ctx) -> "Optional[ast.stmt]":
    for st in stmts:
        if isinstance(st, ast.Expr) and _steps(st.value, opt):
            return st
        if not _harmless(st, ctx):
            return None
        if any(_steps(n, opt) for n in A.iter_nodes(st)):
            return None  # a step under a branch: not the plain shape
    return None


def _own_lines(st: ast.stmt, ctx) -> bool:
    """Is the statement alone on its lines (nothing before it, at most a comment after it)?"""
    first = ctx.index.line(st.lineno - 1)
    if first[:st.col_offset].strip():
        return False
    last = ctx.index.line((st.end_lineno or st.lineno) - 1)
    tail = last.encode("utf-8")[st.end_col_offset:].decode("utf-8", "replace").strip()
    return not tail or tail.startswith("#")


def _finding(rule, zero: ast.stmt, back: ast.AST, step: ast.stmt, opt: str, ctx) -> Finding:
    msg = M.zeroed_before_step(opt, ast.unparse(step.value), back.lineno, step.lineno)  # type: ignore[attr-defined]
    related = (Related(ctx.line_range(back), M.computed_here()), Related(ctx.line_range(step), M.stepped_here()))
    fixes = []
    if _own_lines(zero, ctx) and _own_lines(step, ctx):
        z0, z1 = zero.lineno - 1, zero.end_lineno or zero.lineno
        moved = "".join(ctx.index.line(i) + "\n" for i in range(z0, z1))
        after = step.end_lineno or step.lineno
        if after < len(ctx.index.lines):
            put = TextEdit(Range(Position(after, 0), Position(after, 0)), moved)
        else:  # the step ends the file without a newline
            end = Position(after - 1, len(ctx.index.line(after - 1)))
            put = TextEdit(Range(end, end), "\n" + moved.rstrip("\n"))
        edits = (TextEdit(Range(Position(z0, 0), Position(z1, 0)), ""), put)
        fixes.append(Fix(M.fix_move_after_step(opt), edits, preferred=True))
    return Finding(rule.code, ctx.line_range(zero), msg, rule.default_severity, related, tuple(fixes), {"optimizer": opt})
