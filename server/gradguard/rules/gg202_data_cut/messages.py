"""GG202's words, in English and Chinese: the rule's title and explanation, the
finding's message and the title of its fix, from the source text of the value
whose ``.data`` is read. Each function returns ``{"en": ..., "zh": ...}``, so a
message is changed in both languages in one place.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict

TITLE = {
    "en": "`.data` used to cut a tensor out of its graph: use `.detach()`",
    "zh": "用 `.data` 把张量从计算图中切出：请用 `.detach()`",
}

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


def data_cut(base: str) -> Dict[str, str]:
    """``base.data`` read where ``base.detach()`` says the same with autograd's checks."""
    return {
        "en": f"`{base}.data` takes a value out of its autograd graph without autograd's checks: an in-place change "
              f"of it that corrupts a gradient goes unreported; use `{base}.detach()` (same values).",
        "zh": f"`{base}.data` 把数值从计算图中取出，却绕过了 autograd 的检查：之后对它的原地修改即使破坏了梯度"
              f"也不会报错；请用 `{base}.detach()`（数值相同）。",
    }


def fix_detach(base: str) -> Dict[str, str]:
    return {"en": f"Use `{base}.detach()`", "zh": f"改用 `{base}.detach()`"}
