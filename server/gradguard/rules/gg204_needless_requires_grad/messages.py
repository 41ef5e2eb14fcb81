"""GG204's words, in English and Chinese: the rule's title and explanation, the
finding's message and the title of its fix, from the tensor's name. Each function
returns ``{"en": ..., "zh": ...}``, so a message is changed in both languages in
one place.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict

TITLE = {
    "en": "A data tensor requires grad, but nothing reads its gradient",
    "zh": "数据张量设置了 requires_grad，却没有任何地方用到它的梯度",
}

EXPLANATION = {
    "en": '''\
## What it does
Finds a tensor of data (inputs, features) created with `requires_grad=True`, or flagged with
`x.requires_grad_()` or `x.requires_grad = True` (or the old `Variable(data, requires_grad=True)`,
also as one element of `inputs, labels = Variable(inputs, requires_grad=True), Variable(labels)`),
that is only ever fed into
the model inside the training loop, or inside a training-step function that back-propagates and
steps once per call: its `.grad` is never read, and no optimizer and no `torch.autograd.grad` call
takes it. Moving it to a device or a dtype under its own name (`inputs = inputs.to(device)`,
`inputs, gts = inputs.to(device), gts.to(device)`) keeps it the same data.

## Why is this bad?
A tensor that requires grad makes autograd record every operation on it, keep what it needs for
the backward pass, and compute its gradient in every `backward()`, all for a gradient nobody reads.
It costs memory and time, and it is one step away from a crash: a label or a feature computed from
it *before* the loop carries a graph that the first `backward()` frees (GG102, "Trying to backward
through the graph a second time"). Data does not need the flag: the parameters of the model
require grad, and gradients flow to them whatever the inputs.

## Example
```python
X = torch.rand(64, 5, requires_grad=True)     # data
linear = nn.Linear(5, 1)
for i in range(100):
    loss = ((linear(X) - Y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
```

## Fix
Drop the flag:

```python
X = torch.rand(64, 5)
```

The model's gradients are exactly the same.

## FAQ
**I need the gradient with respect to the input (adversarial examples, saliency maps, deep dream). Is that reported?**
No. Reading `x.grad`, handing `x` to an optimizer (style transfer, input optimisation) or to
`torch.autograd.grad` (physics-informed networks that differentiate with respect to inputs) keeps
the rule silent.

**Why a hint and not a warning?**
The program is correct; it only does work it does not need. The hint also names the tensor that
GG102 would blame if a value were computed from it before the loop.

**My tensor is used in a function of another file.**
The rule only sees this file; add `# noqa: GG204` on the line if the flag is needed elsewhere.
''',
    "zh": '''\
## 它检查什么
找出用 `requires_grad=True` 创建（或被 `x.requires_grad_()`、`x.requires_grad = True` 标记，或旧写法
`Variable(data, requires_grad=True)`，包括元组赋值中的一项
`inputs, labels = Variable(inputs, requires_grad=True), Variable(labels)`）的数据张量（输入、特征），它只在训练循环里、或在每次调用
都反向传播并 step 一次的训练步函数里被送进模型：从没读取过它的 `.grad`，也没有优化器或
`torch.autograd.grad` 用到它。以原名把它移到设备上或换类型（`inputs = inputs.to(device)`、
`inputs, gts = inputs.to(device), gts.to(device)`）仍算同一份数据。

## 为什么这是个问题
需要梯度的张量会让 autograd 记录它参与的每一个操作，保存反向传播需要的东西，并在每次
`backward()` 时计算它的梯度——而这个梯度没有人读。这浪费内存和时间，而且离崩溃只差一步：
如果在循环*之前*用它算出标签或特征，那个值就带着计算图，第一次 `backward()` 会把图释放
（GG102，"Trying to backward through the graph a second time"）。数据不需要这个标记：模型的
参数本身需要梯度，无论输入如何，梯度都会流到参数上。

## 示例
```python
X = torch.rand(64, 5, requires_grad=True)     # 数据
linear = nn.Linear(5, 1)
for i in range(100):
    loss = ((linear(X) - Y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
```

## 修复
去掉这个标记：

```python
X = torch.rand(64, 5)
```

模型得到的梯度完全相同。

## 常见问题
**我需要对输入求梯度（对抗样本、显著图、deep dream），会被报告吗？**
不会。读取 `x.grad`、把 `x` 交给优化器（风格迁移、输入优化）或 `torch.autograd.grad`
（对输入求导的物理信息神经网络）都会让本规则保持沉默。

**为什么是提示（hint）而不是警告？**
程序是正确的，只是做了不必要的工作。这个提示也指出了：如果在循环前用它计算了别的值，
GG102 会归咎于哪个张量。

**我的张量在另一个文件的函数里用到。**
本规则只看当前文件；如果别处确实需要这个标记，请在该行加上 `# noqa: GG204`。
''',
}


def needless_requires_grad(name: str) -> Dict[str, str]:
    """``name`` requires grad, and only the training loop reads it."""
    return {
        "en": f"`{name}` requires grad, but nothing reads its gradient: it is only fed into the training loop, "
              f"so autograd records and differentiates it for nothing; drop the flag (the model's gradients are "
              f"the same).",
        "zh": f"`{name}` 设置了 requires_grad，却没有任何地方用到它的梯度：它只被送进训练循环，autograd 白白"
              f"记录并为它求导；请去掉这个标记（模型的梯度不变）。",
    }


def fix_drop_requires_grad(name: str) -> Dict[str, str]:
    return {"en": f"Drop `requires_grad` from `{name}`", "zh": f"去掉 `{name}` 的 `requires_grad`"}
