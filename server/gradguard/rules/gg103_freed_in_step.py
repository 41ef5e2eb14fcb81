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

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.analysis import values as V
from gradguard.analysis.context import unit_text
from gradguard.model.findings import Finding, Fix, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule
from gradguard.rules.common import unit_trace

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

EXPLANATION = {
    "en": '''\
## What it does
Finds a `backward()` whose loss reaches part of a graph that an earlier `backward()` of the same
step already back-propagated and freed: two losses built on one shared tensor, back-propagated one
after the other, with no `retain_graph=True` on the first. Either backward may sit in a helper of
yours: `train_discriminator(real, fake)` then `train_generator(fake)`.

## Why is this bad?
`backward()` frees the tensors the graph saved for the gradient (the inputs of a matrix multiply,
the outputs of an activation) as it goes. The second `backward()` needs them again for the shared
part and stops with

```
RuntimeError: Trying to backward through the graph a second time (or directly access saved
tensors after they have already been freed).
```

in the very first iteration. The classic case is a GAN whose discriminator step uses the
generator's output without `.detach()`.

## Example
```python
for real in loader:
    fake = G(torch.randn(64, 100))
    optD.zero_grad()
    lossD = bce(D(real), ones) + bce(D(fake), zeros)
    lossD.backward()                 # frees G's part of the graph
    optD.step()
    optG.zero_grad()
    lossG = bce(D(fake), ones)
    lossG.backward()                 # RuntimeError: ... a second time
    optG.step()
```

## Fix
Either keep the shared part for the second backward, which computes exactly the gradients the
program asks for:

```python
    lossD.backward(retain_graph=True)
```

or cut the shared tensor out of the first loss when its producer should not learn from that loss
(the usual GAN discriminator step; the generator then gets no gradient from `lossD`):

```python
    lossD = bce(D(real), ones) + bce(D(fake.detach()), zeros)
```

Summing the losses and calling `backward()` once is a third way when both should update the
same parameters.

## FAQ
**GG101 says `retain_graph=True` is the wrong fix. Why is it right here?**
GG101 is about a graph carried into the *next* iteration: retaining it makes every step
back-propagate through all earlier steps. Here both backward passes belong to the *same* step and
the same graph; `retain_graph=True` keeps it only until the second one, which frees it.

**Which fix does the quick fix apply?**
`retain_graph=True` on the first backward: it changes no gradient. The detach is offered as a
second action, because it changes what the shared tensor's producer learns.

**Why is a second `loss.backward()` on an `x.sum()` not reported?**
Only parts of the graph that save tensors fail a second pass (a module call, a matrix multiply, an
activation). Sums, views and additions save none, and PyTorch back-propagates through them twice
without complaint.
''',
    "zh": '''\
## 它检查什么
找出这样的 `backward()`：它的损失所经过的部分计算图，已经被同一步里更早的一次 `backward()`
反向传播并释放了。典型情况是两个损失共用同一个中间张量，先后各调用一次 `backward()`，
而第一次没有写 `retain_graph=True`。两次 backward 也可以在你自己的辅助函数里：
`train_discriminator(real, fake)` 之后再 `train_generator(fake)`。

## 为什么这是个问题
`backward()` 在反向传播时会释放计算图为求梯度而保存的张量（矩阵乘法的输入、激活函数的输出等）。
第二次 `backward()` 经过共享部分时又需要它们，于是在第一轮迭代就报错：

```
RuntimeError: Trying to backward through the graph a second time (or directly access saved
tensors after they have already been freed).
```

最常见的是 GAN：训练判别器时直接用了生成器的输出，没有 `.detach()`。

## 示例
```python
for real in loader:
    fake = G(torch.randn(64, 100))
    optD.zero_grad()
    lossD = bce(D(real), ones) + bce(D(fake), zeros)
    lossD.backward()                 # 释放了 G 那部分计算图
    optD.step()
    optG.zero_grad()
    lossG = bce(D(fake), ones)
    lossG.backward()                 # RuntimeError: ... a second time
    optG.step()
```

## 修复
一种做法是为第二次反向传播保留共享部分，这样算出的梯度与程序本意完全相同：

```python
    lossD.backward(retain_graph=True)
```

另一种做法是在第一个损失里切断共享张量，适用于它的来源不应从这个损失学习的情况
（GAN 判别器那一步的惯用写法；这样生成器不会从 `lossD` 得到梯度）：

```python
    lossD = bce(D(real), ones) + bce(D(fake.detach()), zeros)
```

如果两个损失本来就要更新同一组参数，也可以把它们相加后只调用一次 `backward()`。

## 常见问题
**GG101 说 `retain_graph=True` 不是正确的修复，为什么这里可以？**
GG101 说的是把计算图带进*下一轮*迭代：保留它会让每一步都回溯之前所有步的图。这里两次反向传播
属于*同一步*、同一张图，`retain_graph=True` 只把图保留到第二次反向传播，之后照常释放。

**快速修复用的是哪一种？**
在第一次 backward 上加 `retain_graph=True`：它不改变任何梯度。detach 作为第二个修复选项提供，
因为它会改变共享张量的来源学到的东西。

**为什么对 `x.sum()` 再调用一次 `loss.backward()` 不会被报告？**
只有保存了张量的那部分计算图才会在第二次反向传播时出错（模块调用、矩阵乘法、激活函数）。
求和、view、加法不保存张量，PyTorch 可以对它们反向传播两次而不报错。
''',
}


# backward( / manual_backward( / autograd.grad( — not zero_grad(
_BACKWARD_SPELLING = re.compile(r"backward\s*\(|(?<!\w)grad\s*\(")


class FreedInStep(Rule):
    code = "GG103"
    name = "freed-in-step"
    default_severity = Severity.ERROR
    needs_backprop = True
    fact_sources = (GRAPH_FACTS,)  # the interpreter reads fn:/class: facts of same-file definitions
    title = {
        "en": "A backward() runs through a graph an earlier backward() of the same step freed",
        "zh": "backward() 经过的计算图已被同一步里更早的 backward() 释放",
    }
    explanation = EXPLANATION

    def check(self, unit, ctx):
        if not unit.body:
            return ()
        if K.other_framework_only(ctx.imports):
            return ()  # mxnet/paddle/...: not a torch program
        text = unit_text(unit, ctx.index.lines)
        if len(_BACKWARD_SPELLING.findall(text)) < 2:
            return ()  # one backward cannot free a graph for another
        if unit.kind == "function" and A.is_no_grad_function(unit.node, ctx):
            return ()
        flow = unit_trace(unit, ctx)  # GG101's run of the unit, if it asked first
        if flow is None:
            return ()
        events: Dict[int, V.BackwardEvent] = {}
        for ev in flow.events:
            events.setdefault(id(ev.call), ev)  # a loop body is walked more than once: its first walk
        if len(events) < 2:
            return ()
        out: List[Finding] = []
        reported: Set[int] = set()
        for block in _blocks(unit.body):
            for f in _check_block(self, block, events, flow.saving_calls, reported, ctx):
                out.append(f)
        return out


# ---------------------------------------------------------------------------
def _blocks(body: Sequence[ast.stmt]) -> Iterator[Sequence[ast.stmt]]:
    """Every statement list of the unit (nested defs and classes are units of their own)."""
    yield body
    for s in A.iter_statements(body):
        for block in A.child_blocks(s):
            yield block


def _in_order(block: Sequence[ast.stmt]) -> List[ast.stmt]:
    """The statements that run, in order, whenever the list runs: ``with`` bodies inline."""
    out: List[ast.stmt] = []
    for s in block:
        if isinstance(s, (ast.With, ast.AsyncWith)):
            out.extend(_in_order(s.body))
        else:
            out.append(s)
    return out


def _direct_backward(stmt: ast.stmt, ctx, events) -> Optional[ast.Call]:
    """``loss.backward(...)`` / ``grads = torch.autograd.grad(...)`` / ``d_loss =
    train_discriminator(real, fake)`` (a helper of the user's that back-propagates)
    as the statement itself."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, ast.Call) and (A.is_backward_call(value, ctx) or id(value) in events):
        return value
    return None


def _backward_calls(stmt: ast.stmt, ctx, events) -> Iterator[ast.Call]:
    """Backward calls (and calls of helpers that back-propagate) anywhere in a
    statement, nested blocks included, nested defs not."""
    stack: List[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call) and (A.is_backward_call(node, ctx) or id(node) in events):
            yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _pos(node: ast.AST) -> Tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _legacy_retain(call: ast.Call) -> bool:
    """``retain_variables=True``: retain_graph's name before PyTorch 0.4 (tutorials still show it)."""
    return any(kw.arg == "retain_variables" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
               for kw in call.keywords)


def _check_block(rule, block, events, saving, reported, ctx) -> Iterator[Finding]:
    stmts = _in_order(block)
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
        freed = {t for t in ev1.loss.graph_tokens() if start <= _pos(t[1]) < end and id(t[1]) in saving}
        if not freed:
            continue
        for later in stmts[i + 1:]:
            for b2 in _backward_calls(later, ctx, events):
                if id(b2) in reported:
                    continue
                ev2 = events.get(id(b2))
                if ev2 is None:
                    continue
                shared = freed & ev2.loss.graph_tokens()
                if shared:
                    reported.add(id(b2))
                    yield _finding(rule, stmts, s, b1, b2, shared, ctx)


def _finding(rule, stmts, s1, b1, b2, shared, ctx) -> Finding:
    node = min((t[1] for t in shared), key=_pos)
    holder = _holder(stmts, s1, node)
    name = _single_name(holder) if holder is not None else None
    what = f"`{name}`" if name else f"`{_short(node)}`"
    line1, line0 = b1.lineno, node.lineno
    first, second = _short(b1), _short(b2)
    direct = A.is_backward_call(b1, ctx)
    keep: Optional[TextEdit] = None
    cut: List[TextEdit] = []
    if not direct:
        # the first backward is inside a helper: no edit here keeps its graph, and a
        # detach alone changes what the input learns; the message says what to do
        advice_en = (f"keep the graph in `{_callee(b1)}`'s backward (`retain_graph=True`), or pass "
                     f"{what[:-1]}.detach()` to it if what produced {what} should not learn from it")
        advice_zh = (f"请在 `{_callee(b1)}` 内部的 backward 上加 `retain_graph=True`，或者若 {what} 的来源"
                     f"不应从中学习，就把 {what[:-1]}.detach()` 传给它")
    elif _stepped_in_between(stmts, s1, b2, shared, ctx):
        # no fix then: a detach changes what the shared part learns, so it cannot be
        # the fix `--fix` and Fix All apply; the message says what to do
        advice_en = (f"an optimizer step in between may update its weights in place, so compute {what} again "
                     f"for the second loss")
        advice_zh = f"两次之间的优化器 step 可能原地更新了它的权重，请为第二个损失重新计算 {what}"
    else:
        keep = _retain_edit(b1, ctx)
        advice_en = "pass `retain_graph=True` to that first backward"
        advice_zh = "请给第一次 backward 加上 `retain_graph=True`"
    if direct and name and holder is not None:
        cut = _detach_uses(stmts, holder, s1, b2, name, ctx)
    if cut:
        advice_en += f", or detach {what} where it feeds the first loss"
        advice_zh += f"，或在它进入第一个损失的地方对 {what} 做 detach"
    msg = {
        "en": f"`{second}` back-propagates through the graph of {what} (line {line0}), which `{first}` on line "
              f"{line1} already freed (\"Trying to backward through the graph a second time\"); {advice_en}.",
        "zh": f"`{second}` 要反向传播经过 {what}（第 {line0} 行）的计算图，而它已被第 {line1} 行的 `{first}` "
              f"释放（报错 \"Trying to backward through the graph a second time\"）；{advice_zh}。",
    }
    related = (
        Related(ctx.range(node), {"en": f"the graph of {what} is built here", "zh": f"{what} 的计算图在这里构建"}),
        Related(ctx.range(b1), {"en": "this backward frees it (no retain_graph=True)",
                                "zh": "这次反向传播释放了它（没有 retain_graph=True）"} if direct else
                {"en": f"`{_callee(b1)}` back-propagates through it here and frees it",
                 "zh": f"`{_callee(b1)}` 在这里对它反向传播并释放了它"}),
    )
    fixes: List[Fix] = []
    if keep is not None:
        fixes.append(Fix({"en": f"Keep the graph for the second backward: `retain_graph=True` on line {line1} "
                                f"(same gradients)",
                          "zh": f"为第二次 backward 保留计算图：在第 {line1} 行加 `retain_graph=True`（梯度不变）"},
                         (keep,), preferred=True))
    if cut and keep is not None:
        fixes.append(Fix({"en": f"Detach `{name}` in the first loss (what produced it gets no gradient from "
                                f"that loss)",
                          "zh": f"在第一个损失里 detach `{name}`（它的来源不再从该损失得到梯度）"},
                         tuple(cut)))
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
    after = False
    for s in stmts:
        if s is s1:
            after = True
            continue
        if not after:
            continue
        for n in ast.walk(s):
            if n is b2:
                return _any_may_update(steppers, shared, ctx)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step":
                name = A.dotted(n.func.value)
                steppers.append(name or "?")
    return _any_may_update(steppers, shared, ctx)


def _any_may_update(steppers: List[str], shared, ctx) -> bool:
    if not steppers:
        return False
    parts: Set[str] = set()
    for t in shared:
        node = t[1]
        name = A.dotted(node.func) if isinstance(node, ast.Call) else None
        if name is None:
            return True  # a part we cannot name: assume the step reaches it
        bits = name.split(".")
        parts.update(b for b in bits if b != "self")
    lines = ctx.index.lines
    for opt in steppers:
        if opt == "?":
            return True
        made = _constructions(opt, lines)
        if not made:
            return True  # an optimizer we cannot see: it may hold anything
        for value in made:
            if set(re.findall(r"\w+", value)) & parts:
                return True
    return False


def _constructions(name: str, lines: List[str]) -> List[str]:
    """The source of each value assigned to ``name`` (``opt = Adam(D.parameters())``,
    ``optD, optG = Adam(D...), Adam(G...)``: that element), found textually."""
    head = re.compile(r"^\s*[\w.,\s()\[\]]*?(?<![\w.])" + re.escape(name) + r"(?![\w.])[\w.,\s()\[\]]*=(?!=)")
    out: List[str] = []
    for i, line in enumerate(lines):
        if name not in line or head.match(line) is None:
            continue
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
    for s in stmts:
        if s is s1:
            return None
        for n in ast.walk(s):
            if n is node:
                return s
    return None


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
    inside = False
    for s in stmts:
        if s is holder:
            inside = True
            continue
        if s is s1:
            break
        if not inside:
            continue
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(s)) and _assigned(s) & second:
            return []
        for n in ast.walk(s):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return []  # a use inside a nested scope: not ours to rewrite
            if isinstance(n, ast.Name) and n.id == name:
                if not isinstance(n.ctx, ast.Load):
                    return []  # reassigned before the backward: the fix would not reach it
                at = ctx.pos(n.end_lineno, n.end_col_offset)
                edits.append(TextEdit(Range(at, at), ".detach()"))
    return edits


def _assigned(stmt: ast.stmt) -> Set[str]:
    out: Set[str] = set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for t in targets:
        if t is not None:
            out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def _inputs_of(stmts, b2: ast.Call) -> Set[str]:
    """The names the second backward's loss is computed from, followed back through
    the assignments of the statement list (a name-level def-use closure)."""
    need = {n.id for n in ast.walk(b2) if isinstance(n, ast.Name)}
    before: List[ast.stmt] = []
    for s in stmts:
        if any(n is b2 for n in ast.walk(s)):
            break
        before.append(s)
    for s in reversed(before):
        if _assigned(s) & need:
            need.update(n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return need


def _callee(call: ast.Call) -> str:
    return A.dotted(call.func) or _short(call.func)
