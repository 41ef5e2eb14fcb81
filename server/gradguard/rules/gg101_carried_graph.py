"""GG101 carried-graph: a value with an autograd graph is carried from one
iteration of a back-propagating loop into the next one's backward().

Detection runs the graph interpreter of :mod:`gradguard.core.flow` over the
unit: a back-propagating loop body is walked once to learn which values an
iteration leaves behind still attached to a graph that iteration's backward
traversed (and so freed), then once more with those values marked as carried;
a carried mark reaching a backward (directly, or through a same-file helper
that back-propagates its argument) is the bug.
"""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Sequence, Tuple

from gradguard.core import facts as _facts  # noqa: F401  (registers the module summarizers)
from gradguard.core import flow as F
from gradguard.core.model import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule

EXPLANATION = {"en": "", "zh": ""}  # filled below


class CarriedGraph(Rule):
    code = "GG101"
    name = "carried-graph"
    default_severity = Severity.ERROR
    title = {
        "en": "A value with an autograd graph is carried into the next iteration's backward()",
        "zh": "带计算图的值被带入下一轮迭代的 backward()",
    }
    explanation = EXPLANATION

    def check(self, unit, ctx):
        if not _worth_running(unit.body, ctx):
            return ()
        resolver = F.Resolver(ctx)
        self_obj = None
        if unit.class_node is not None:
            self_obj = "user:" + unit.class_node.name
        no_grad = unit.kind == "function" and F.is_no_grad_function(unit.node, ctx)
        if no_grad:
            return ()
        env: Dict[str, F.Val] = {}
        if unit.kind == "function" and unit.node is not None:
            env = _param_env(unit.node, unit.class_node is not None)
        flow = F.GraphFlow(resolver, self_obj=self_obj)
        try:
            flow.run(unit.body, env)
        except RecursionError:
            return ()
        out = []
        for carry in flow.carries:
            f = _finding(self, carry, flow, ctx)
            if f is not None:
                out.append(f)
        return out


# ---------------------------------------------------------------------------
# pre-filter: one cheap walk; most units have no loop or no backward at all
# ---------------------------------------------------------------------------
def _worth_running(body: Sequence[ast.stmt], ctx) -> bool:
    has_loop = has_bw = False
    summary = ctx.summary
    bw_methods = None
    for node in F.iter_nodes(list(body)):
        if isinstance(node, F.LOOPS):
            has_loop = True
        elif isinstance(node, ast.Call) and not has_bw:
            func = node.func
            if isinstance(func, ast.Attribute):
                if func.attr in F.K.BACKWARD_METHODS:
                    has_bw = True
                else:
                    # method of a same-file class that back-propagates (trainer.step(...))
                    if bw_methods is None:
                        bw_methods = _backprop_methods(summary)
                    if func.attr in bw_methods:
                        has_bw = True
            elif isinstance(func, ast.Name):
                fx = summary.get("fn:" + func.id)
                if isinstance(fx, F.FnFacts) and fx.calls_backward:
                    has_bw = True
                elif F.qualify(func, ctx) in F.K.BACKWARD_FUNCTIONS:
                    has_bw = True
        if has_loop and has_bw:
            return True
    return False


def _backprop_methods(summary) -> frozenset:
    out = {"grad"}
    for v in summary.values():
        if isinstance(v, F.ClassFacts):
            out.update(name for name, m in v.methods if m.calls_backward)
    return frozenset(out)


def _param_env(fn: ast.AST, method: bool) -> Dict[str, F.Val]:
    a = fn.args  # type: ignore[attr-defined]
    positional = list(a.posonlyargs) + list(a.args)
    defaults = {}
    for arg, d in zip(reversed(positional), reversed(a.defaults)):
        defaults[arg.arg] = d
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        if d is not None:
            defaults[arg.arg] = d
    env = {}
    allargs = positional + list(a.kwonlyargs)
    if method and allargs:
        allargs = allargs[1:]
    for arg in allargs + [x for x in (a.vararg, a.kwarg) if x is not None]:
        d = defaults.get(arg.arg)
        env[arg.arg] = F.Val(param=True, none=d is None or (isinstance(d, ast.Constant) and d.value is None))
    return env


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


def _names_en(names: Sequence[str]) -> str:
    q = [f"`{n}`" for n in names]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]


def _names_zh(names: Sequence[str]) -> str:
    q = [f"`{n}`" for n in names]
    return "、".join(q)


_ELEM_EN = {0: "the hidden state h", 1: "the cell state c"}
_ELEM_ZH = {0: "隐状态 h", 1: "细胞状态 c"}


def _message(carry: F.Carry) -> Dict[str, str]:
    bw = _code(carry.event.call)
    retain_en = retain_zh = ""
    if carry.event.retain:
        retain_en = " (`retain_graph=True` does not fix this: it keeps every batch's graph alive and fails once the optimizer updates the weights in place)"
        retain_zh = "（`retain_graph=True` 不能解决：它让每个批次的图一直留在内存里，优化器原地更新权重后照样报错）"
    if carry.missing and carry.arity == 2:
        var = carry.names[0]
        parts_en = " and ".join(f"`{var}[{i}]` ({_ELEM_EN.get(i, 'element %d' % i)})" for i in carry.missing)
        parts_zh = "、".join(f"`{var}[{i}]`（{_ELEM_ZH.get(i, '第 %d 个元素' % i)}）" for i in carry.missing)
        return {
            "en": f"The LSTM state `{var}` is only partly detached: {parts_en} still carries this iteration's graph "
            f"into the next iteration's `{bw}`, which fails with \"Trying to backward through the graph a second "
            f"time\"{retain_en}; detach both h and c.",
            "zh": f"LSTM 状态 `{var}` 只 detach 了一部分：{parts_zh} 仍带着本轮的计算图进入下一轮的 `{bw}`，"
            f"会报 \"Trying to backward through the graph a second time\"{retain_zh}；h 和 c 都要 detach。",
        }
    n_en, n_zh = _names_en(carry.names), _names_zh(carry.names)
    verb = "carries" if len(carry.names) == 1 else "carry"
    return {
        "en": f"{n_en} {verb} this iteration's autograd graph into the next iteration, where `{bw}` back-propagates "
        f"into that already-freed graph (\"Trying to backward through the graph a second time\"){retain_en}; "
        f"detach {'it' if len(carry.names) == 1 else 'them'} between iterations.",
        "zh": f"{n_zh} 把本轮迭代的计算图带进了下一轮，下一轮的 `{bw}` 会反向传播进这张已经释放的图"
        f"（报错 \"Trying to backward through the graph a second time\"）{retain_zh}；请在两轮之间 detach。",
    }


def _related(carry: F.Carry, ctx) -> Tuple[Related, ...]:
    out: List[Related] = []
    n_en, n_zh = _names_en(carry.names), _names_zh(carry.names)
    if carry.built_by is not None and hasattr(carry.built_by, "lineno"):
        out.append(
            Related(
                ctx.range(carry.built_by),
                {
                    "en": f"the graph that {n_en} {'carries' if len(carry.names) == 1 else 'carry'} is built here",
                    "zh": f"{n_zh} 携带的计算图在这里构建",
                },
            )
        )
    out.append(
        Related(
            ctx.range(carry.event.call),
            {
                "en": f"this backward() reaches the previous iteration's freed graph through {n_en}",
                "zh": f"这里的 backward() 会经由 {n_zh} 回溯到上一轮已释放的计算图",
            },
        )
    )
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


def _indent_unit(loop: ast.stmt, body_indent: str, ctx) -> str:
    head = ctx.indent_of(loop.lineno)
    if body_indent.startswith(head) and len(body_indent) > len(head):
        return body_indent[len(head):]
    return "\t" if "\t" in body_indent else "    "


def _fresh(name: str, avoid: Sequence[str]) -> str:
    for cand in ("s", "t", "state", "_s"):
        if cand not in avoid and cand != name:
            return cand
    return "_gg_s"


def _structure(carry: F.Carry, flow: F.GraphFlow, ctx) -> str:
    """'tuple' | 'tensor' | 'unknown': the shape of the carried state."""
    if carry.arity and carry.arity >= 2:
        return "tuple"
    node = carry.built_by
    if isinstance(node, ast.Call):
        kind = _callee_kind(node, carry, ctx)
        return kind
    return "tensor" if node is not None else "unknown"


def _callee_kind(call: ast.Call, carry: F.Carry, ctx) -> str:
    r = F.Resolver(ctx)
    func = call.func
    q = None
    name = F.dotted(func)
    if name and name.startswith("self.") and carry is not None:
        return _user_kind_from_attr(r, carry, name.split(".", 1)[1])
    if isinstance(func, ast.Name):
        obj = r.global_obj(func.id)
        raw = ctx.summary.get("var:" + func.id)
        if isinstance(raw, str):
            q = r.qualify_raw(raw)
        elif obj and obj.startswith("fn:"):
            return "unknown"
    tc = r.torch_class(q) if q else None
    if tc:
        if tc in F.K.LSTM_LIKE:
            return "tuple"
        return "tensor" if F.K.is_recurrent(tc) else "unknown"
    return "unknown"


def _user_kind_from_attr(r: F.Resolver, carry, attr: str) -> str:
    return "unknown"


def _detach_line(names: Tuple[str, ...], shape: str) -> str:
    if len(names) > 1:
        return f"{', '.join(names)} = {', '.join(n + '.detach()' for n in names)}"
    n = names[0]
    s = _fresh(n, names)
    if shape == "tensor":
        return f"{n} = {n}.detach()"
    if shape == "tuple":
        return f"{n} = tuple({s}.detach() for {s} in {n})"
    return f'{n} = {n}.detach() if hasattr({n}, "detach") else tuple({s}.detach() for {s} in {n})'


def _fixes(carry: F.Carry, flow: F.GraphFlow, ctx) -> Tuple[Fix, ...]:
    loop = carry.loop
    indent = _body_indent(loop, ctx)
    if indent is None:
        return ()
    unit_ = _indent_unit(loop, indent, ctx)
    names = carry.names
    shape = _structure(carry, flow, ctx)
    first = loop.body[0]  # type: ignore[attr-defined]
    entry = [carry.entry.get(n) for n in names]
    unbound = any(v is None or v.undef for v in entry)
    maybe_none = unbound or any(v is not None and (v.none or v.param) for v in entry)
    grad_entry = any(v is not None and v.has_grad() for v in entry)
    line = _detach_line(names, shape)
    head = names[0]
    edits: List[TextEdit] = []
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
    v_en, v_zh = _names_en(names), _names_zh(names)
    fixes = [
        Fix(
            {
                "en": f"Detach {v_en} at the start of each iteration (keeps the state, cuts the graph)",
                "zh": f"在每轮迭代开始时 detach {v_zh}（保留状态，切断计算图）",
            }
            if not grad_entry
            else {
                "en": f"Detach {v_en} after this iteration's backward() (keeps the state, cuts the graph)",
                "zh": f"在本轮 backward() 之后 detach {v_zh}（保留状态，切断计算图）",
            },
            tuple(edits),
            preferred=True,
        )
    ]
    # Alternative: start every iteration from a fresh (None) state. Offered only
    # when None is known to be accepted: a torch recurrent module takes
    # hx=None, and a loop that already starts from None handles it.
    if len(names) == 1 and not grad_entry and (shape in ("tensor", "tuple") and _direct_torch(carry, ctx) or _starts_none(entry)):
        top = Position(first.lineno - 1, 0)
        fixes.append(
            Fix(
                {
                    "en": f"Reset {v_en} to None at the start of each iteration (loses the state carried between batches)",
                    "zh": f"每轮迭代开始时把 {v_zh} 重置为 None（会丢失跨批次传递的状态）",
                },
                (TextEdit(Range(top, top), f"{indent}{head} = None\n"),),
                preferred=False,
            )
        )
    return tuple(fixes)


def _starts_none(entry) -> bool:
    return all(v is not None and v.none and not v.taints for v in entry)


def _direct_torch(carry: F.Carry, ctx) -> bool:
    node = carry.built_by
    if not isinstance(node, ast.Call):
        return False
    return _callee_kind(node, carry, ctx) in ("tensor", "tuple")


def _after_statement(loop: ast.stmt, carry: F.Carry, names) -> int:
    """0-based line after the last loop-body statement that contains the failing
    backward or assigns one of ``names``."""
    last = None
    bw_line = carry.event.call.lineno
    for s in loop.body:  # type: ignore[attr-defined]
        end = getattr(s, "end_lineno", s.lineno)
        if s.lineno <= bw_line <= end:
            last = s
            continue
        for node in F.iter_statements([s]):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(n in names for t in tgts for n in F.target_names(t)):
                    last = s
                    break
    if last is None:
        last = loop.body[-1]  # type: ignore[attr-defined]
    return getattr(last, "end_lineno", last.lineno)


def _finding(rule: Rule, carry: F.Carry, flow: F.GraphFlow, ctx) -> Optional[Finding]:
    site = carry.site
    if not hasattr(site, "lineno"):
        return None
    data = {"variable": carry.names[0], "variables": list(carry.names)}
    if carry.missing:
        data["attached_elements"] = list(carry.missing)
    if carry.event.retain:
        data["retain_graph"] = True
    return Finding(
        code=rule.code,
        range=ctx.line_range(site),
        message=_message(carry),
        severity=rule.default_severity,
        related=_related(carry, ctx),
        fixes=_fixes(carry, flow, ctx),
        data=data,
    )
