"""GG202 data-cut: ``.data`` used to take a value with a graph out of the
graph (``hidden = hidden.data``, ``Variable(h.data)``, ``x = y.data``).

``.data`` and ``.detach()`` give the same values without a graph; ``.data``
also hides the result from autograd's version counter, so an in-place change of
it that corrupts a gradient goes unreported. The fix is ``.detach()``.

Detection runs the graph interpreter of :mod:`gradguard.analysis.interpreter` over the unit
and looks at the places where ``.data`` is *kept* as a tensor: the right-hand
side of an assignment, a ``return``, the argument of ``Variable(...)``, alone
or through a passthrough (``.clone()``, ``.to(device)``) or a tuple of such.
It reports the ones whose base carries a graph (it was built by a module call or
an operation on parameters), and a helper that returns the ``.data`` of its
parameter (the old ``repackage_hidden``). Parameter updates and
initialisation (``p.data.add_(...)``, ``p.data.copy_(...)``,
``w.data.normal_()``, ``p.data = ...``) and reads that leave torch
(``.numpy()``, ``.tolist()``, ``.item()``) are not kept graph values and are
never looked at.
"""

from __future__ import annotations

import ast

from gradguard.analysis import interpreter as interp
from gradguard.analysis import knowledge as K
from gradguard.analysis.context import unit_text
from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.model.findings import Finding, Fix, Severity, TextEdit
from gradguard.rules.base import Rule
from gradguard.rules.common import imports_torch

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Tuple

EXPLANATION = {
    "en": '''\
## What it does
Finds `.data` used to take a tensor that carries an autograd graph out of that graph and keep it:
`hidden = hidden.data`, `h = Variable(h.data)`, `x = y.data.clone()`, or a helper that returns
`h.data` for a recurrent state. `.detach()` does the same job and is the supported way.

## Why is this bad?
`x.data` and `x.detach()` return a tensor with the same values that shares storage with `x` and has
no graph. The difference shows when that tensor is later changed in place: a tensor from
`.detach()` shares autograd's version counter with `x`, so if `x` is still needed by a backward pass,
PyTorch stops with "one of the variables needed for gradient computation has been modified by an
inplace operation". A tensor from `.data` does not, so the same mistake back-propagates silently
with wrong gradients. `.data` is a leftover of the old `Variable` API; PyTorch's documentation
recommends `.detach()` in its place.

## Example
```python
hidden = model.init_hidden(batch_size)
for x, y in batches:
    output, hidden = model(x, hidden)
    loss = criterion(output, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    hidden = hidden.data          # cuts the graph, but hides in-place edits from autograd
```

## Fix
```python
    hidden = hidden.detach()
```

The values are identical and training is unchanged; only errors that `.data` would hide are now
reported. `Variable(h.data)` becomes `Variable(h.detach())` (`Variable` itself is a no-op today).

## FAQ
**I update parameters with `p.data.add_(...)` / `p.data.copy_(...)` / `w.data.normal_()`. Is that reported?**
No. Changing a parameter in place outside autograd is a different question (`with torch.no_grad():`
is the modern spelling), and the rule leaves those idioms alone.

**What about `loss.data.item()` or `out.data.cpu().numpy()`?**
Not reported: the value leaves torch as a number or an array, and nothing can change it in place
behind autograd's back.

**Why is `w.data` of a parameter not reported?**
A parameter is a leaf: `.data` of it carries no graph to cut. The rule reports `.data` of values
that were computed (a module's output, a loss, a recurrent state).
''',
    "zh": '''\
## 它检查什么
找出用 `.data` 把一个带自动求导计算图的张量从图中取出并保存下来的写法：`hidden = hidden.data`、
`h = Variable(h.data)`、`x = y.data.clone()`，或者一个对循环状态返回 `h.data` 的辅助函数。
`.detach()` 做的是同一件事，而且是官方支持的写法。

## 为什么这是个问题
`x.data` 和 `x.detach()` 都返回数值相同、与 `x` 共享存储、不带计算图的张量。区别在于之后对它做
原地修改时：`.detach()` 得到的张量与 `x` 共用 autograd 的版本计数器，如果 `x` 还要参与反向传播，
PyTorch 会报错 "one of the variables needed for gradient computation has been modified by an inplace
operation"；`.data` 得到的张量不会，同样的错误会悄无声息地算出错误的梯度。`.data` 是旧版
`Variable` API 的遗留，PyTorch 文档建议用 `.detach()` 代替。

## 示例
```python
hidden = model.init_hidden(batch_size)
for x, y in batches:
    output, hidden = model(x, hidden)
    loss = criterion(output, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    hidden = hidden.data          # 切断了计算图，但对 autograd 隐藏了原地修改
```

## 修复
```python
    hidden = hidden.detach()
```

数值完全相同，训练不受影响；只是 `.data` 会掩盖的错误现在会被报告出来。`Variable(h.data)` 改为
`Variable(h.detach())`（如今 `Variable` 本身什么也不做）。

## 常见问题
**我用 `p.data.add_(...)` / `p.data.copy_(...)` / `w.data.normal_()` 更新参数，会被报告吗？**
不会。在 autograd 之外原地修改参数是另一个问题（现代写法是 `with torch.no_grad():`），
本规则不管这些惯用法。

**`loss.data.item()` 或 `out.data.cpu().numpy()` 呢？**
不报告：数值以 Python 数或数组的形式离开了 torch，不会在 autograd 背后被原地修改。

**为什么参数的 `w.data` 不报告？**
参数是叶子节点：它的 `.data` 没有计算图可切。本规则报告的是计算出来的值（模块输出、损失、
循环状态）的 `.data`。
''',
}

_PASS = K.PASSTHROUGH_METHODS - {"sum", "mean"}


def _data_nodes(expr: ast.expr) -> List[ast.Attribute]:
    """The ``X.data`` nodes an expression keeps as a tensor: itself, through
    passthrough calls, ``Variable(...)``, tuples/lists and generators of them."""
    e = expr
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PASS:
        e = e.func.value
    if isinstance(e, ast.Attribute) and e.attr == "data":
        return [e]
    if isinstance(e, ast.Call) and isinstance(e.func, (ast.Name, ast.Attribute)) and len(e.args) == 1:
        name = e.func.id if isinstance(e.func, ast.Name) else e.func.attr
        if name in ("Variable", "tuple", "list"):
            return _data_nodes(e.args[0])
    if isinstance(e, (ast.Tuple, ast.List)):
        return [d for x in e.elts for d in _data_nodes(x)]
    if isinstance(e, (ast.GeneratorExp, ast.ListComp)):
        return _data_nodes(e.elt)
    if isinstance(e, ast.IfExp):
        return _data_nodes(e.body) + _data_nodes(e.orelse)
    return []


def _plain_target(t: ast.expr) -> bool:
    if isinstance(t, (ast.Tuple, ast.List)):
        return all(_plain_target(e) for e in t.elts)
    return isinstance(t, (ast.Name, ast.Attribute))


class _DataFlow(interp.GraphFlow):
    """GraphFlow that records, at each statement keeping a ``.data``, whether
    its base carries a graph (or is a parameter of the unit)."""

    def __init__(self, resolver, self_obj=None):
        super().__init__(resolver, self_obj=self_obj, find_carries=False)
        self.hits: Dict[int, Tuple[ast.Attribute, ast.stmt, str]] = {}

    def stmt(self, s, env):
        value = None
        if isinstance(s, ast.Return):
            value = s.value
        elif isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            # kept under a name (an alias of the original storage); not copied into a
            # buffer (``buf[i] = x.data``) nor combined (``total += x.data``)
            if all(_plain_target(t) for t in targets):
                value = s.value
        if value is not None and not self.no_grad:
            for node in _data_nodes(value):
                if id(node) in self.hits:
                    continue
                base = node.value
                v = self.eval(base, dict(env))
                if v.graph_tokens():
                    self.hits[id(node)] = (node, s, "graph")
                elif isinstance(s, ast.Return) and isinstance(base, ast.Name) and v.param:
                    self.hits[id(node)] = (node, s, "param")
        return super().stmt(s, env)


class DataCut(Rule):
    code = "GG202"
    name = "data-cut"
    default_severity = Severity.WARNING
    needs_backprop = True
    fact_sources = (GRAPH_FACTS,)  # the interpreter reads fn:/class: facts of same-file definitions
    title = {
        "en": "`.data` used to cut a tensor out of its graph: use `.detach()`",
        "zh": "用 `.data` 把张量从计算图中切出：请用 `.detach()`",
    }
    explanation = EXPLANATION

    def check(self, unit, ctx):
        if not unit.body or ".data" not in unit_text(unit, ctx.index.lines) or not imports_torch(ctx):
            return ()
        from gradguard.rules.common import unit_entry

        env, self_obj = unit_entry(unit)
        flow = _DataFlow(interp.Resolver(ctx), self_obj=self_obj)
        try:
            flow.run(unit.body, env)
        except RecursionError:
            return ()
        out = []
        for node, s, why in sorted(flow.hits.values(), key=lambda h: (h[0].lineno, h[0].col_offset)):
            if why == "param" and not _helper_returns_state(unit):
                continue
            out.append(_finding(self, node, ctx))
        return out


def _helper_returns_state(unit) -> bool:
    """A def of one parameter that returns its ``.data`` (maybe per element):
    the old ``repackage_hidden`` helper."""
    node = unit.node
    if unit.kind != "function" or node is None:
        return False
    args = node.args.posonlyargs + node.args.args
    if unit.class_node is not None:
        args = args[1:]
    return len(args) == 1


def _finding(rule, node: ast.Attribute, ctx) -> Finding:
    base = _text(node.value, ctx)
    start = ctx.range(node.value).end
    end = ctx.range(node).end
    from gradguard.model.findings import Range

    edit = TextEdit(Range(start, end), ".detach()")
    msg = {
        "en": f"`{base}.data` takes a value out of its autograd graph without autograd's checks: an in-place change "
              f"of it that corrupts a gradient goes unreported; use `{base}.detach()` (same values).",
        "zh": f"`{base}.data` 把数值从计算图中取出，却绕过了 autograd 的检查：之后对它的原地修改即使破坏了梯度"
              f"也不会报错；请用 `{base}.detach()`（数值相同）。",
    }
    fix = Fix({"en": f"Use `{base}.detach()`", "zh": f"改用 `{base}.detach()`"}, (edit,), preferred=True)
    return Finding(rule.code, ctx.range(node), msg, rule.default_severity, (), (fix,), {"variable": base})


def _text(node, ctx) -> str:
    r = ctx.range(node)
    if r.start.line != r.end.line:
        return ast.unparse(node)
    return ctx.index.line(r.start.line)[r.start.character:r.end.character]
