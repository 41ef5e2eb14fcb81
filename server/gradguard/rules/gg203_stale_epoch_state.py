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
from gradguard.analysis.context import unit_text
from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule
from gradguard.rules.common import imports_torch, loaded_names

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Optional, Set, Tuple

EXPLANATION = {
    "en": '''\
## What it does
Finds a recurrent state (an RNN/GRU/LSTM hidden state) that is initialised once, before the epoch
loop, and then carried through every batch of every epoch, detached after each batch. The last
state of one epoch becomes the first state of the next.

## Why is this bad?
Each epoch restarts the data from its beginning, but not the state: the first batch of epoch 2 is
read with the memory of the last batch of epoch 1, which is unrelated text or signal. Nothing fails
and training runs; the first batches of every epoch learn from a wrong context, and the results
depend on the order of the data. The usual training loop initialises the state at the start of
each epoch (`hidden = model.init_hidden(batch_size)`), and detaches it after each batch.

## Example
```python
hidden = model.init_hidden(batch_size)
for epoch in range(epochs):
    for x, y in batches:
        output, hidden = model(x, hidden)
        loss = criterion(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        hidden = hidden.detach()
```

## Fix
Initialise the state at the top of the epoch loop:

```python
for epoch in range(epochs):
    hidden = model.init_hidden(batch_size)
    for x, y in batches:
        ...
```

The quick fix copies the initialisation into the top of the epoch loop. The first epoch is
unchanged; later epochs start from a fresh state.

## FAQ
**My data is one continuous stream and the state should run on. Is that reported?**
Not when there is no epoch loop around the batch loop. If the stream continues across epochs on
purpose, add `# noqa: GG203` on the reported line; it is a hint because such code is legal.

**I reset the state every batch (`hidden = None`, or `init_hidden` inside the batch loop).**
Not reported: the state never crosses an epoch boundary.

**Why is this a hint, when GG101 is an error?**
GG101's state is not detached and the program crashes. Here it is detached, so the program trains;
only the first batches of each epoch see a state that does not belong to them.
''',
    "zh": '''\
## 它检查什么
找出这样的循环状态（RNN/GRU/LSTM 的 hidden）：它只在 epoch 循环之前初始化一次，然后在每个
epoch 的每个 batch 之间传递，每个 batch 之后 detach。一个 epoch 的最后状态变成了下一个 epoch
的初始状态。

## 为什么这是个问题
每个 epoch 都从头开始读数据，状态却没有重来：第 2 个 epoch 的第一个 batch 带着第 1 个 epoch
最后一个 batch 的记忆，而那是毫不相关的文本或信号。程序不会报错，照常训练；但每个 epoch 的前几个
batch 都在错误的上下文中学习，结果还依赖数据的顺序。通常的训练循环在每个 epoch 开头初始化状态
（`hidden = model.init_hidden(batch_size)`），并在每个 batch 之后 detach。

## 示例
```python
hidden = model.init_hidden(batch_size)
for epoch in range(epochs):
    for x, y in batches:
        output, hidden = model(x, hidden)
        loss = criterion(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        hidden = hidden.detach()
```

## 修复
在 epoch 循环的开头初始化状态：

```python
for epoch in range(epochs):
    hidden = model.init_hidden(batch_size)
    for x, y in batches:
        ...
```

快速修复把初始化语句复制到 epoch 循环的开头。第一个 epoch 不变；之后的 epoch 从全新的状态开始。

## 常见问题
**我的数据是一条连续的流，状态本来就应该一直延续。会被报告吗？**
如果 batch 循环外面没有 epoch 循环，就不会。如果流确实有意跨 epoch 延续，请在报告的那一行加上
`# noqa: GG203`；正因为这样的代码是合法的，它只是一个提示。

**我每个 batch 都重置状态（`hidden = None`，或在 batch 循环里调用 `init_hidden`）。**
不会报告：状态从不跨越 epoch 边界。

**为什么 GG101 是错误，而这里只是提示？**
GG101 的状态没有 detach，程序会崩溃。这里状态已经 detach，程序能训练；只是每个 epoch 的前几个
batch 看到了不属于它们的状态。
''',
}

_EPOCH_NAME = re.compile(r"epoch|ep\b|^e$|轮|周期", re.IGNORECASE)


class StaleEpochState(Rule):
    code = "GG203"
    name = "stale-epoch-state"
    default_severity = Severity.HINT
    needs_backprop = True
    title = {
        "en": "A recurrent state is initialised once and carried across epochs",
        "zh": "循环状态只初始化一次，并被带过 epoch 边界",
    }
    explanation = EXPLANATION

    def check(self, unit, ctx):
        if not unit.body or not imports_torch(ctx):
            return ()
        text = unit_text(unit, ctx.index.lines)
        if "backward" not in text:
            return ()
        out = []
        for outer in A.iter_statements(unit.body):
            if not isinstance(outer, (ast.For, ast.AsyncFor)) or not _epoch_loop(outer):
                continue
            for inner in A.iter_statements(outer.body):
                if not isinstance(inner, (ast.For, ast.AsyncFor)) or not A.loop_backprops(inner, ctx):
                    continue
                for name, thread in _threaded_and_cut(inner):
                    init = _init_before(unit.body, outer, name)
                    if init is None or _rebound_in(outer, inner, name):
                        continue
                    out.append(_finding(self, name, thread, init, outer, ctx))
        return out


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


def _init_before(body, outer, name: str) -> Optional[ast.stmt]:
    """The last statement of the unit's top-level list before ``outer``
    (on the way to it) that binds ``name`` to a fresh value (not ``None``)."""
    found = None
    for s in body:
        if s is outer:
            return found
        if _contains(s, outer):
            for block in A.child_blocks(s):
                r = _init_before(block, outer, name)
                if r is not None:
                    return r
                if any(b is outer or _contains(b, outer) for b in block):
                    return found
        if isinstance(s, ast.Assign) and any(name in A.target_names(t) for t in s.targets):
            v = s.value
            found = None if isinstance(v, ast.Constant) and v.value is None else s
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
    msg = {
        "en": f"`{name}` is initialised once before the epoch loop (line {init.lineno}) and carried from the last "
              f"batch of each epoch into the first batch of the next, while the data restarts; initialise it at "
              f"the top of the epoch loop.",
        "zh": f"`{name}` 只在 epoch 循环之前（第 {init.lineno} 行）初始化一次，并从每个 epoch 的最后一个 batch "
              f"带进下一个 epoch 的第一个 batch，而数据已经从头开始；请在 epoch 循环开头初始化它。",
    }
    related = (Related(ctx.line_range(init), {"en": "initialised once, here", "zh": "只在这里初始化了一次"}),
               Related(ctx.line_range(outer), {"en": "the epoch loop", "zh": "epoch 循环"}))
    fixes: Tuple[Fix, ...] = ()
    edit = _copy_init(init, outer, ctx)
    if edit is not None:
        fixes = (Fix({"en": f"Initialise `{name}` at the top of the epoch loop",
                      "zh": f"在 epoch 循环开头初始化 `{name}`"}, (edit,), preferred=True),)
    return Finding(rule.code, ctx.line_range(thread), msg, rule.default_severity, related, fixes,
                   {"variable": name, "init_line": init.lineno})


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
