"""GG203 stale-epoch-state: a recurrent state initialised once, before the
epoch loop, and carried from the last batch of one epoch into the first batch
of the next.

The state is detached each batch, so training runs (that is GG101's side), but
the data restarts each epoch while the state does not: the first batch of
epoch 2 starts from the end of epoch 1's last sequence. The seed note's
training loop initialises the state at the top of each epoch. A hint: a stream
continuous on purpose is legal.

Detection is on the unit's statements, with the AST predicates of
:mod:`gradguard.analysis.interpreter`: an outer ``for`` loop (over ``range(...)`` or a name
that says epoch) holding an inner ``for`` loop that back-propagates; in the inner
loop a statement threads a name through a call (``out, h = model(x, h)``) and
the name is cut each batch (``h = h.detach()``, ``h = repackage_hidden(h)``,
``h.detach_()``, or ``model(x, h.detach())``); the name is bound before the
outer loop and nowhere in the outer loop except by the inner loop's threading
and cutting statements.
"""

from __future__ import annotations

import ast
import re

from gradguard.analysis import ast_util as A
from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.common import loaded_names
from gradguard.rules.gg203_stale_epoch_state import messages as M
from gradguard.rules.gg203_stale_epoch_state.facts import STATE, STATE_FACTS

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Optional, Set, Tuple

_EPOCH_NAME = re.compile(r"epoch|ep\b|^e$|轮|周期", re.IGNORECASE)


class StaleEpochState(Rule):
    code = "GG203"
    name = "stale-epoch-state"
    default_severity = Severity.HINT
    needs_backprop = True
    trigger = Trigger(torch=True, text=("backward",))
    fact_sources = (STATE_FACTS,)  # modules keeping a detached state on themselves, with their reset methods
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        out = []
        for outer in A.iter_statements(unit.body):
            if not isinstance(outer, (ast.For, ast.AsyncFor)) or not _epoch_loop(outer):
                continue
            for inner in A.iter_statements(outer.body):
                if not isinstance(inner, (ast.For, ast.AsyncFor)) or not A.loop_backprops(inner, ctx):
                    continue
                for name, thread in _threaded_and_cut(inner):
                    # ``state = None`` counts when the batch loop asks ``if state is not None:``
                    # before cutting it (d2l's idiom): the model makes the first state, then it flows on
                    init = _init_before(unit.body, outer, name, allow_none=_tests_none(inner, name))
                    if init is None or _rebound_in(outer, inner, name):
                        continue
                    out.append(_finding(self, name, thread, init, outer, ctx))
                out.extend(_module_states(self, unit, outer, inner, ctx))
        return out


def _module_states(rule, unit, outer, inner, ctx) -> List[Finding]:
    """A model made before the epoch loop from a class of the file that keeps a
    detached state on itself (``self.h``) and has a method to reset it, called in
    the batch loop, and never reset (nor rebuilt, nor handed to other code) in the
    epoch loop: the fast.ai ``LMModel5`` written out without its reset callback."""
    out: List[Finding] = []
    seen: Set[str] = set()
    for n in A.block_nodes(inner.body):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)) or n.func.id in seen:
            continue
        model = n.func.id
        seen.add(model)
        init = _init_before(unit.body, outer, model)
        if init is None or not isinstance(init.value, ast.Call):  # type: ignore[attr-defined]
            continue
        cls = (A.dotted(init.value.func) or "").rsplit(".", 1)[-1]  # type: ignore[attr-defined]
        state = ctx.summary.get(STATE + cls) if cls else None
        if not isinstance(state, tuple) or _reset_in(outer, model, state):
            continue
        attr, resets = state[0]
        stmt = _statement_of(inner, n)
        msg = M.stale_module_state(model, attr, resets[0], init.lineno)
        related = (Related(ctx.line_range(init), M.initialised_here()),
                   Related(ctx.line_range(outer), M.epoch_loop()))
        fixes: Tuple[Fix, ...] = ()
        first = outer.body[0]
        if first.lineno != outer.lineno:
            pos = Position(first.lineno - 1, 0)
            edit = TextEdit(Range(pos, pos), f"{ctx.indent_of(first.lineno)}{model}.{resets[0]}()\n")
            fixes = (Fix(M.fix_reset_in_epoch(model, resets[0]), (edit,), preferred=True),)
        out.append(Finding(rule.code, ctx.line_range(stmt), msg, rule.default_severity, related, fixes,
                           {"variable": f"{model}.{attr}", "init_line": init.lineno}))
    return out


def _reset_in(outer, model: str, state) -> bool:
    """Does the epoch loop reset, rebuild, or hand on the model (then maybe reset elsewhere)?"""
    for n in A.block_nodes(outer.body):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and A.dotted(n.func.value) == model and n.func.attr not in (
                    "parameters", "zero_grad", "named_parameters", "forward"):
                return True  # model.reset(), or any method the analysis does not read
            if any(A.dotted(a) == model for a in list(n.args) + [k.value for k in n.keywords]):
                return True
        elif isinstance(n, ast.Name) and n.id == model and not isinstance(n.ctx, ast.Load):
            return True
        elif isinstance(n, ast.Attribute) and A.dotted(n.value) == model and not isinstance(n.ctx, ast.Load):
            return True
    return False


def _statement_of(loop, node) -> ast.AST:
    best: ast.AST = node
    for s in A.iter_statements(list(loop.body)):
        if s.lineno <= node.lineno <= (s.end_lineno or s.lineno) and not A.child_blocks(s):
            best = s
    return best


def _epoch_loop(s) -> bool:
    if not isinstance(s, (ast.For, ast.AsyncFor)):
        return False
    names = A.target_names(s.target)
    it = s.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("range", "trange", "tqdm"):
        return True
    return any(_EPOCH_NAME.search(n) for n in names)


def _threaded_and_cut(loop) -> List[Tuple[str, ast.stmt]]:
    """Names threaded through a call in the loop (``out, h = f(x, h)``) and cut
    each iteration (``h = h.detach()``, ``h.detach_()``, ``f(x, h.detach())``)."""
    threads: Dict[str, ast.stmt] = {}
    cut: Set[str] = set()
    for s in A.iter_statements(list(loop.body)):
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            targets = A.target_names(s.targets[0])
            v = s.value
            if isinstance(v, ast.Call):
                args = list(v.args) + [k.value for k in v.keywords]
                for t in targets:
                    for a in args:
                        if A.dotted(a) == t:
                            threads.setdefault(t, s)
                        elif t in loaded_names(a) and A.is_graph_cut(a):
                            threads.setdefault(t, s)
                            cut.add(t)  # f(x, h.detach())
                if len(targets) == 1 and len(v.args) == 1 and A.dotted(v.args[0]) == targets[0] and not v.keywords:
                    if not isinstance(v.func, ast.Attribute) or v.func.attr in ("detach", "repackage_hidden"):
                        cut.add(targets[0])  # h = repackage_hidden(h)
            if A.is_graph_cut(v) and any(n in targets for n in loaded_names(v)):
                cut.update(targets)  # h = h.detach(), h = (h[0].detach(), h[1].detach())
        name = A.inplace_cut_target(s) if isinstance(s, (ast.Expr, ast.For)) else None
        if name:
            cut.add(name)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute):
            recv = s.value.func.value
            if s.value.func.attr == "detach_" and isinstance(recv, ast.Subscript):
                base = A.dotted(recv.value)
                if base:
                    cut.add(base)  # h[0].detach_()
    return [(n, s) for n, s in threads.items() if n in cut]


def _tests_none(loop, name: str) -> bool:
    """Does the loop test ``name is None`` / ``name is not None``?"""
    for n in A.block_nodes(loop.body):
        if (isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and n.left.id == name
                and len(n.ops) == 1 and isinstance(n.ops[0], (ast.Is, ast.IsNot))
                and isinstance(n.comparators[0], ast.Constant) and n.comparators[0].value is None):
            return True
    return False


def _init_before(body, outer, name: str, allow_none: bool = False) -> Optional[ast.stmt]:
    """The last statement of the unit's top-level list before ``outer``
    (on the way to it) that binds ``name`` to a fresh value (not ``None``, unless
    ``allow_none``)."""
    found = None
    for s in body:
        if s is outer:
            return found
        if _contains(s, outer):
            for block in A.child_blocks(s):
                r = _init_before(block, outer, name, allow_none)
                if r is not None:
                    return r
                if any(b is outer or _contains(b, outer) for b in block):
                    return found
        if isinstance(s, ast.Assign) and any(name in A.target_names(t) for t in s.targets):
            v = s.value
            found = None if isinstance(v, ast.Constant) and v.value is None and not allow_none else s
    return found


def _contains(s, node) -> bool:
    return s.lineno <= node.lineno <= (s.end_lineno or s.lineno) and s is not node


def _rebound_in(outer, inner, name: str) -> bool:
    """Is ``name`` bound in the epoch loop other than by the batch loop's own
    threading and cutting? (Then it is re-initialised somewhere.)"""
    for s in A.iter_statements(list(outer.body)):
        if _contains(inner, s) or s is inner:
            continue
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if any(name in A.target_names(t) for t in targets):
                return True
        if isinstance(s, (ast.For, ast.AsyncFor)) and s is not inner and name in A.target_names(s.target):
            return True
    # inside the batch loop: a fresh value each batch (h = None, h = init_hidden(...))
    for s in A.iter_statements(list(inner.body)):
        if isinstance(s, ast.Assign) and any(name in A.target_names(t) for t in s.targets):
            if name not in loaded_names(s.value):
                return True
    return False


def _finding(rule, name, thread, init, outer, ctx) -> Finding:
    msg = M.stale_epoch_state(name, init.lineno)
    related = (Related(ctx.line_range(init), M.initialised_here()),
               Related(ctx.line_range(outer), M.epoch_loop()))
    fixes: Tuple[Fix, ...] = ()
    edit = _copy_init(init, outer, ctx)
    if edit is not None:
        # an initial value drawn at random (``nn.Parameter(torch.randn(...))``): made again
        # every epoch, it draws from the generator, so every later random tensor of the run
        # differs (and a parameter made again is a new one): offered, never applied unasked
        fixes = (Fix(M.fix_initialise_in_epoch(name), (edit,), preferred=not _draws_at_random(init.value)),)
    return Finding(rule.code, ctx.line_range(thread), msg, rule.default_severity, related, fixes,
                   {"variable": name, "init_line": init.lineno})


_RANDOM_CALL = re.compile(r"(^|\.)(randn|rand|randint|randperm|normal|normal_|uniform_|bernoulli|multinomial|"
                          r"randn_like|rand_like|randint_like|Parameter)$")


def _draws_at_random(value: ast.expr) -> bool:
    """Does ``value`` call a random draw (``torch.randn``) or make an ``nn.Parameter``?"""
    return any(isinstance(n, ast.Call) and _RANDOM_CALL.search(A.dotted(n.func) or "") is not None
               for n in A.walk_all(value))


def _copy_init(init, outer, ctx) -> Optional[TextEdit]:
    first = outer.body[0]
    if first.lineno == outer.lineno or (init.end_lineno or init.lineno) != init.lineno:
        return None
    line = ctx.index.line(init.lineno - 1)
    a = ctx.pos(init.lineno, init.col_offset).character
    b = ctx.pos(init.lineno, init.end_col_offset).character
    text = line[a:b]
    indent = ctx.indent_of(first.lineno)
    pos = Position(first.lineno - 1, 0)
    return TextEdit(Range(pos, pos), f"{indent}{text}\n")
