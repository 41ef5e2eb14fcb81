"""GG206's words, in English and Chinese: the title and explanation, the
findings' messages, related notes and the fix's title, from the module's name
as written, the helper's name and line numbers. Each function returns
``{"en": ..., "zh": ...}``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, Optional, Sequence

TITLE = {
    "en": "A loop switches the model to evaluation mode and trains it again without model.train()",
    "zh": "循环把模型切换到评估模式后，没有调用 model.train() 就再次训练它",
}

EXPLANATION = {
    "en": '''\
## What it does
Finds a loop that trains a model (a `backward()` in the loop, or a call of a same-file function that
back-propagates), then switches that model to evaluation mode (`model.eval()`, `model.train(False)`,
or a same-file `validate(model)` that calls `model.eval()`), and never switches it back with
`model.train()` before the next iteration trains it again.

## Why is this bad?
`model.eval()` is sticky: it turns dropout off and makes batch norm normalise with its running
statistics (and stop updating them) until something calls `model.train()`. In the usual
"train an epoch, then validate" loop without `model.train()` at the top of the epoch, only the first
epoch trains as intended; every later one trains a model without dropout and with frozen batch-norm
statistics. Nothing fails: the loss keeps moving and the model over- or under-fits.

## Example
```python
model.train()
for epoch in range(epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    model.eval()                      # still in evaluation mode when the next epoch trains
    with torch.no_grad():
        validate(model, val_loader)
```

## Fix
Switch the model back to training mode at the top of each iteration that trains it:

```python
for epoch in range(epochs):
    model.train()
    for x, y in train_loader:
        ...
    model.eval()
    with torch.no_grad():
        validate(model, val_loader)
```

The quick fix inserts `model.train()` (the module the loop switched to evaluation mode) as the first
statement of the loop's body. The first iteration already ran in training mode, so it is unchanged;
every later one now runs as the first did.

## FAQ
**My helper `train_one_epoch(model, ...)` starts with `model.train()`. Is that reported?**
No. A function defined in the same file is read: a `model.train()` in it counts where it is called.
A function imported from another file is not read; when the model is handed to one, the rule assumes
it may switch the mode and stays silent. The same holds for methods: a trainer's own
`self.evaluate()` calling `self.model.eval()`, or a helper `validate(model)` calling a wrapper's
`model.val_start()` that switches its encoders, counts where it is called. So do hooks: a hook
method (`after_train_iter(self, runner)`, `on_train_batch_end`) that hands `runner.model` to a
same-file function calling `.eval()`, called directly or by a runner method that runs hooks by their
name (`self.call_hook("after_train_iter")` doing `getattr(hook, fn_name)(self)`).

**I validate every few iterations from inside the batch loop, before the training step.**
A helper named for evaluation (`self.validate()`, `evaluate(model)`) called under an `if` of the
loop before the iteration trains is read as evaluation, not as a deliberate frozen mode: when it
leaves the model in evaluation mode it is reported, with the fix `model.train()` right after the
call (from that iteration on, training runs in evaluation mode). An unconditional switch before the
training step is still read as deliberate.

**I freeze batch norm on purpose (`model.eval()` before training, or `model.backbone.eval()`).**
Not reported: the rule needs the first iteration to train in training mode and a later one to train
in evaluation mode because of the loop's own `eval()`. A switch before the training step of the same
iteration is read as deliberate.

**My model has no dropout and no batch norm.**
Then the two modes compute the same thing today, and the finding is a trap for the day a layer is
added. Add the `model.train()` anyway, or `# noqa: GG206` on the reported line.

**I use Lightning, Keras-style `fit()` or the Hugging Face `Trainer`.**
They switch the modes for you; without an explicit loop that back-propagates there is nothing to
report.
''',
    "zh": '''\
## 它检查什么
找出这样的循环：它训练一个模型（循环里有 `backward()`，或调用同一文件中会反向传播的函数），然后把
这个模型切换到评估模式（`model.eval()`、`model.train(False)`，或同一文件中调用了 `model.eval()` 的
`validate(model)`），却在下一轮再次训练它之前，从不用 `model.train()` 切换回来。

## 为什么这是个问题
`model.eval()` 会一直生效：它关闭 dropout，让 batch norm 用滑动统计量做归一化（并停止更新它们），
直到有代码调用 `model.train()`。常见的"训练一个 epoch、再验证"循环如果没有在每个 epoch 开头调用
`model.train()`，只有第一个 epoch 按预期训练；之后每个 epoch 训练的都是没有 dropout、batch norm
统计量被冻结的模型。程序不会报错：损失照样变化，模型却会过拟合或欠拟合。

## 示例
```python
model.train()
for epoch in range(epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    model.eval()                      # 下一个 epoch 训练时仍处于评估模式
    with torch.no_grad():
        validate(model, val_loader)
```

## 修复
在每一轮训练它的迭代开头，把模型切换回训练模式：

```python
for epoch in range(epochs):
    model.train()
    for x, y in train_loader:
        ...
    model.eval()
    with torch.no_grad():
        validate(model, val_loader)
```

快速修复会把 `model.train()`（循环切换到评估模式的那个模块）插入为循环体的第一条语句。第一轮本来就在
训练模式下运行，所以不受影响；之后每一轮都和第一轮一样运行。

## 常见问题
**我的辅助函数 `train_one_epoch(model, ...)` 一开始就调用了 `model.train()`，会被报告吗？**
不会。同一文件中定义的函数会被读取：其中的 `model.train()` 在调用处同样算数。从其他文件导入的函数
不会被读取；当模型被传给这样的函数时，本规则假定它可能切换模式，保持沉默。方法也是如此：训练器自己的
`self.evaluate()` 调用 `self.model.eval()`，或辅助函数 `validate(model)` 调用包装对象的
`model.val_start()` 去切换它的编码器，都在调用处算数。钩子也是如此：钩子方法（`after_train_iter(self, runner)`、
`on_train_batch_end`）把 `runner.model` 传给同一文件中调用 `.eval()` 的函数，无论它是被直接调用，还是被按名字
运行钩子的 runner 方法调用（`self.call_hook("after_train_iter")`，其中执行 `getattr(hook, fn_name)(self)`）。

**我在 batch 循环内部每隔几轮验证一次，位于训练步骤之前。**
在循环的某个 `if` 下、于本轮训练之前调用的以评估命名的辅助函数（`self.validate()`、`evaluate(model)`）被视为
评估，而不是有意冻结的模式：如果它让模型停留在评估模式，就会被报告，修复是在调用之后立即执行
`model.train()`（从那一轮起，训练都在评估模式下进行）。训练步骤之前无条件的切换仍被视为有意为之。

**我是有意冻结 batch norm（训练前 `model.eval()`，或 `model.backbone.eval()`）。**
不会被报告：本规则要求第一轮在训练模式下训练，而之后某一轮因为循环自己的 `eval()` 在评估模式下训练。
在同一轮训练步骤之前的切换被视为有意为之。

**我的模型没有 dropout 也没有 batch norm。**
那么两种模式目前算的是同一件事，这个报告是给将来加入这类层的那一天留的陷阱提示。仍然建议加上
`model.train()`，或在报告的那一行加 `# noqa: GG206`。

**我用的是 Lightning、Keras 风格的 `fit()` 或 Hugging Face 的 `Trainer`。**
它们会替你切换模式；没有显式的、会反向传播的循环，就没有可报告的内容。
''',
}


def left_in_eval(module: str, helper: "Optional[str]", train_line: int, others: "Sequence[str]" = (),
                 before: bool = False) -> "Dict[str, str]":
    """``module`` (and ``others``) switched to evaluation mode (directly, or by the same-file function
    ``helper``), trained again on ``train_line`` in the next iteration (``before``: the evaluation
    helper runs now and then before the iteration's training, which it leaves in evaluation mode)."""
    names = [module, *others]
    what = " and ".join(f"`{m}`" for m in names)
    what_zh = "、".join(f"`{m}`" for m in names)
    calls = " and ".join(f"`{m}.train()`" for m in names)
    calls_zh = "、".join(f"`{m}.train()`" for m in names)
    it, it_zh = ("them", "它们") if others else ("it", "它")
    if helper:
        how_en = f"`{helper}(...)` switches {what} to evaluation mode (it calls `.eval()`)"
        how_zh = f"`{helper}(...)` 把 {what_zh} 切换到评估模式（它调用了 `.eval()`）"
    else:
        how_en = f"this switches {what} to evaluation mode"
        how_zh = f"这里把 {what_zh} 切换到评估模式"
    if before and helper:
        return {
            "en": f"{how_en}, and nothing switches {it} back before the training that follows (line {train_line}): "
                  f"from the first evaluation on, dropout is off and batch norm uses frozen running statistics "
                  f"while training; call {calls} right after `{helper}(...)` (or at its end).",
            "zh": f"{how_zh}，而之后的训练（第 {train_line} 行）之前没有把{it_zh}切换回来：从第一次评估起，训练时"
                  f" dropout 被关闭，batch norm 使用冻结的滑动统计量；请在 `{helper}(...)` 之后（或在它的末尾）调用 "
                  f"{calls_zh}。",
        }
    return {
        "en": f"{how_en}, and nothing in the loop switches {it} back before the next iteration trains {it} "
              f"(line {train_line}): from the second iteration on, dropout is off and batch norm uses frozen "
              f"running statistics while training; call {calls} at the top of the iteration.",
        "zh": f"{how_zh}，而循环在下一轮训练{it_zh}（第 {train_line} 行）之前没有把{it_zh}切换回来：从第二轮起，训练时"
              f" dropout 被关闭，batch norm 使用冻结的滑动统计量；请在每轮迭代开头调用 {calls_zh}。",
    }


def trained_here() -> "Dict[str, str]":
    return {"en": "trained here, in evaluation mode from the second iteration on",
            "zh": "在这里训练，从第二轮起处于评估模式"}


def the_loop() -> "Dict[str, str]":
    return {"en": "the loop that never switches it back", "zh": "从不切换回训练模式的循环"}


def fix_train_at_top(module: str, others: "Sequence[str]" = ()) -> "Dict[str, str]":
    calls = ", ".join(f"`{m}.train()`" for m in [module, *others])
    return {"en": f"Switch back to training mode at the top of the iteration: {calls}",
            "zh": f"在每轮迭代开头切换回训练模式：{calls}"}


def fix_train_after(module: str, helper: str, others: "Sequence[str]" = ()) -> "Dict[str, str]":
    calls = ", ".join(f"`{m}.train()`" for m in [module, *others])
    return {"en": f"Switch back to training mode right after `{helper}(...)`: {calls}",
            "zh": f"在 `{helper}(...)` 之后立即切换回训练模式：{calls}"}
