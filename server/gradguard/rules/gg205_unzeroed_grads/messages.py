"""GG205's words, in English and Chinese: the rule's title and explanation, the
findings' messages, related notes and the title of the fix, from the optimizer's
or the parameters' names and the accumulation count as written. Each function
returns ``{"en": ..., "zh": ...}``, so a message is changed in both languages in
one place.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Sequence

TITLE = {
    "en": "A training loop never zeroes its gradients: each step uses the sum of all earlier ones",
    "zh": "训练循环从不清零梯度：每次 step 用的是之前所有梯度之和",
}

EXPLANATION = {
    "en": '''\
## What it does
Finds a training loop that calls `backward()` and updates the parameters (`optimizer.step()`, or
`w -= lr * w.grad` by hand) in every iteration, and never zeroes the gradients:
no `optimizer.zero_grad()`, no `model.zero_grad()`, no `p.grad = None` or `p.grad.zero_()`.

## Why is this bad?
`backward()` does not overwrite `.grad`, it *adds* to it. Without zeroing, the gradient used by
the step of iteration `n` is the sum of the gradients of iterations `1..n`. Nothing fails: the
loss goes down for a while, then training becomes unstable or diverges, and the learning rate
looks like the culprit.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()                 # steps with the sum of every earlier gradient
```

## Fix
Zero the gradients of what the optimizer steps once per iteration, before the backward:

```python
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
```

The quick fix inserts the zeroing call at the top of the iteration: the optimizer that steps (or,
for a hand-written update, `w.grad = None` for each updated tensor). The first iteration's
gradients are unchanged; every later one no longer includes the earlier ones.

## FAQ
**I accumulate gradients over several batches on purpose. Is that reported?**
No, as long as the loop zeroes them somewhere: every `k` steps under an `if`, or only after the loop
(then the loop only back-propagates and the step is outside it). When you accumulate on purpose,
divide each loss by the number of accumulated batches so that the step sees their mean: where the
step sits under `if (i + 1) % k == 0:` (or under `if n >= k:` with a counter `n += 1` set back to
0 there, or under `if acc.ready(len(xb)):` where a method of a same-file helper counts batches or
samples, compares the count with `self.n_acc`, and sets it back to 0, or under a flag the iteration
computes once with a modulo, `is_grad_step = (i + 1) % k == 0`) and no loss is divided by `k`,
a hint (without a quick fix,
since dividing changes the scale of every gradient) says so. The same hint is given for the
nanoGPT form, `for micro_step in range(gradient_accumulation_steps): ... loss.backward()` with the
step after the inner loop, when the inner loop's count or variable is named for accumulation
(`accum`, `micro`): an inner loop over tasks or augmentations often sums on purpose.

**My training step is a method of a trainer class.**
A method (or function) that back-propagates and steps an optimizer -- itself or through the
methods it calls on `self` -- runs once per iteration of the loop that calls it. When that loop
zeroes nothing and no def of the file zeroes gradients, the step in the method is reported and
the quick fix zeroes at the start of the method.

**My GAN zeroes one optimizer and steps two.**
Each optimizer that steps needs its own gradients zeroed: a loop that calls
`optimizer_D.zero_grad()` and never `optimizer_G.zero_grad()` (nor `generator.zero_grad()`, nor a
helper that zeroes) is reported at `optimizer_G.step()`, where each step adds the generator's new
gradients onto all the earlier ones.

**Does it matter whether `zero_grad()` comes before `backward()` or after `step()`?**
No. Either place zeroes once per iteration, and both are common.

**I use `torch.autograd.grad(...)`. Is that reported?**
No: it returns the gradients instead of adding them into `.grad`, so nothing accumulates.

**My zeroing is in a helper, `reset(model)`.**
A helper defined in the same file is read; one imported from elsewhere is not. Add
`# noqa: GG205` on the reported line if the analysis cannot see it.
''',
    "zh": '''\
## 它检查什么
找出这样的训练循环：每一轮都调用 `backward()` 并更新参数（`optimizer.step()`，或手写的
`w -= lr * w.grad`），却从不把梯度清零：没有 `optimizer.zero_grad()`、`model.zero_grad()`，
也没有 `p.grad = None` 或 `p.grad.zero_()`。

## 为什么这是个问题
`backward()` 不会覆盖 `.grad`，而是把梯度*累加*进去。不清零的话，第 `n` 轮的 step 用的是
第 `1..n` 轮梯度之和。程序不会报错：损失会先下降一阵，然后训练变得不稳定甚至发散，
看起来像是学习率的问题。

## 示例
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()                 # 用的是之前所有梯度之和
```

## 修复
每一轮迭代把优化器所更新参数的梯度清零一次，放在 backward 之前：

```python
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
```

快速修复会在迭代开头插入清零调用：执行 step 的那个优化器的 `zero_grad()`（手写更新时，
对每个被更新的张量写 `w.grad = None`）。第一轮的梯度不变；之后每一轮不再包含之前的梯度。

## 常见问题
**我是有意在几个 batch 上累积梯度，会被报告吗？**
不会，只要循环在某处清零：在 `if` 里每 `k` 步清零一次，或者只在循环之后清零（这时循环里只做
反向传播，step 在循环外）。有意累积时，请把每个损失除以累积的 batch 数，让 step 看到的是平均值：
如果 step 在 `if (i + 1) % k == 0:` 之下（或在 `if n >= k:` 之下，计数器 `n += 1` 并在那里重置为 0；或在
`if acc.ready(len(xb)):` 之下，其中同一文件中辅助类的方法对 batch 或样本计数、与 `self.n_acc` 比较并重置为 0；
或在每轮用取模算出一次的标志之下，`is_grad_step = (i + 1) % k == 0`），
而没有任何损失除以 `k`，会给出一个提示（没有快速修复，
因为除法会改变所有梯度的大小）。nanoGPT 的写法也会得到同样的提示：
`for micro_step in range(gradient_accumulation_steps): ... loss.backward()`，step 在内层循环之后，
且内层循环的次数或变量名表明是在累积（`accum`、`micro`）；遍历任务或数据增强的内层循环常常是有意求和。

**我的训练步骤是某个 trainer 类的方法。**
一个方法（或函数）自己或通过它在 `self` 上调用的方法进行反向传播并调用优化器的 step，那么调用它的
循环每轮都会运行它一次。如果该循环什么都不清零，文件中也没有任何函数清零梯度，就会在该方法中的 step
处报告，快速修复会在方法开头清零。

**我的 GAN 只清零了一个优化器，却对两个都执行 step。**
每个执行 step 的优化器都需要清零自己的梯度：循环调用了 `optimizer_D.zero_grad()`，却从不调用
`optimizer_G.zero_grad()`（也没有 `generator.zero_grad()` 或会清零的辅助函数），会在
`optimizer_G.step()` 处报告：生成器每次 step 都把新梯度加在之前所有梯度之上。

**`zero_grad()` 放在 `backward()` 之前还是 `step()` 之后有区别吗？**
没有。两种位置都是每轮清零一次，也都很常见。

**我用的是 `torch.autograd.grad(...)`，会被报告吗？**
不会：它把梯度作为返回值，而不是累加进 `.grad`，所以不会累积。

**我的清零写在辅助函数 `reset(model)` 里。**
同一文件里定义的辅助函数会被读取；从别处导入的不会。如果分析看不到它，请在报告的那一行
加上 `# noqa: GG205`。
''',
}


def never_zeroed(what: str, zero: str) -> Dict[str, str]:
    """The loop steps optimizer ``what`` and never calls ``zero`` (its ``zero_grad()``)."""
    return {
        "en": f"this loop back-propagates and steps `{what}` every iteration but never zeroes the gradients: "
              f"`backward()` adds into `.grad`, so each step uses the sum of all earlier gradients; call "
              f"`{zero}` once per iteration.",
        "zh": f"这个循环每一轮都反向传播并执行 `{what}` 的 step，却从不清零梯度：`backward()` 会累加进 "
              f"`.grad`，于是每次 step 用的是之前所有梯度之和；请每轮调用一次 `{zero}`。",
    }


def only_others_zeroed(what: str, zeroed: Sequence[str], zero: str) -> Dict[str, str]:
    """The loop zeroes the optimizers ``zeroed`` but steps ``what`` without ever zeroing it."""
    names = ", ".join(f"`{z}`" for z in zeroed)
    return {
        "en": f"this loop zeroes the gradients of {names} but never those of `{what}`, which it steps every "
              f"iteration: `backward()` adds into `.grad`, so each `{what}` step uses the sum of all earlier "
              f"gradients; call `{zero}` once per iteration.",
        "zh": f"这个循环清零了 {names} 的梯度，却从不清零每轮都执行 step 的 `{what}`：`backward()` 会累加进 "
              f"`.grad`，于是 `{what}` 每次 step 用的是之前所有梯度之和；请每轮调用一次 `{zero}`。",
    }


def never_reset(bases: Sequence[str]) -> Dict[str, str]:
    """The loop updates the tensors ``bases`` by hand from their ``.grad`` and never resets it."""
    names = ", ".join(f"`{b}`" for b in bases)
    grads = ", ".join(f"`{b}.grad`" for b in bases)
    return {
        "en": f"this loop back-propagates and updates {names} by hand from {grads} every iteration but never "
              f"resets the gradients: `backward()` adds into `.grad`, so each update uses the sum of all earlier "
              f"gradients; reset them once per iteration.",
        "zh": f"这个循环每一轮都反向传播并用 {grads} 手动更新 {names}，却从不清零梯度：`backward()` 会累加进 "
              f"`.grad`，于是每次更新用的是之前所有梯度之和；请每轮把它们清零一次。",
    }


def never_zeroed_per_call(fn: str, what: str, zero: str) -> Dict[str, str]:
    """``fn()`` back-propagates and steps ``what`` each time; a loop calls it and nothing zeroes."""
    return {
        "en": f"`{fn}()` back-propagates and steps `{what}` each time it runs, and a loop calls it without ever "
              f"zeroing the gradients: each step uses the sum of all earlier ones. Zero them once per call "
              f"(`{zero}`)",
        "zh": f"`{fn}()` 每次运行都会反向传播并调用 `{what}` 的 step，而循环调用它时从不清零梯度："
              f"每次 step 用的是之前所有梯度之和。请在每次调用时清零一次（`{zero}`）",
    }


def only_others_zeroed_per_call(fn: str, what: str, zeroed: Sequence[str], zero: str) -> Dict[str, str]:
    """``fn()`` zeroes the gradients of ``zeroed`` only, and steps ``what`` each time a loop calls it."""
    names = ", ".join(f"`{z}`" for z in zeroed)
    return {
        "en": f"`{fn}()` zeroes the gradients of {names} but never those of `{what}`, which it steps each time "
              f"it runs, and a loop calls it: `backward()` adds into `.grad`, so each `{what}` step uses the sum "
              f"of all earlier gradients. Zero them once per call (`{zero}`)",
        "zh": f"`{fn}()` 清零了 {names} 的梯度，却从不清零它每次运行都执行 step 的 `{what}`，而循环会反复调用它："
              f"`backward()` 会累加进 `.grad`，于是 `{what}` 每次 step 用的是之前所有梯度之和。"
              f"请在每次调用时清零一次（`{zero}`）",
    }


def called_in_a_loop(fn: str) -> Dict[str, str]:
    return {"en": f"`{fn}()` is called once per iteration of a loop that never zeroes the gradients",
            "zh": f"`{fn}()` 在一个从不清零梯度的循环中每轮调用一次"}


def fix_zero_per_call(fn: str, zero: str) -> Dict[str, str]:
    return {"en": f"Zero the gradients at the start of `{fn}()`: `{zero}`",
            "zh": f"在 `{fn}()` 开头清零梯度：`{zero}`"}


def fix_zero_at_top(lines: Sequence[str]) -> Dict[str, str]:
    """``lines``: the statements the fix puts at the top of the iteration."""
    return {"en": f"Zero the gradients at the top of the iteration: `{'; '.join(lines)}`",
            "zh": f"在每轮迭代开头清零梯度：`{'; '.join(lines)}`"}


def loop_never_zeroes() -> Dict[str, str]:
    return {"en": "the loop that never zeroes them",
            "zh": "从不清零梯度的循环"}


def accumulated_not_divided(k: str) -> Dict[str, str]:
    """Gradients accumulated over ``k`` backward passes (``k`` as written) into an undivided loss."""
    return {
        "en": f"gradients are accumulated over `{k}` backward passes per step, but the loss is not divided by `{k}`: "
              f"the step sees their sum, `{k}` times the mean gradient; divide the loss by `{k}` (and keep the "
              f"learning rate tuned for one batch).",
        "zh": f"每次 step 之前累积了 `{k}` 次反向传播的梯度，但损失没有除以 `{k}`：step 看到的是它们的和，"
              f"是平均梯度的 `{k}` 倍；请把损失除以 `{k}`（学习率按单个 batch 调好即可）。",
    }


def accumulated_samples_not_scaled(k: str) -> Dict[str, str]:
    """Gradients accumulated until ``k`` samples are counted, the loss never scaled."""
    return {
        "en": f"gradients are accumulated until `{k}` samples are counted per step, but the loss is not scaled by "
              f"each batch's share of them: the step sees the sum of the batches' mean gradients, several times "
              f"one batch's; multiply the loss by the batch size and divide it by `{k}`.",
        "zh": f"每次 step 之前累积梯度直到计满 `{k}` 个样本，但损失没有按每个 batch 所占的比例缩放：step 看到的是各 batch "
              f"平均梯度之和，是单个 batch 的数倍；请把损失乘以 batch 大小再除以 `{k}`。",
    }


def accumulation_count() -> Dict[str, str]:
    return {"en": "the accumulation count", "zh": "累积次数"}


def leaked_after_zeroing(opt: str, module: str, zero_line: int, step_line: int) -> Dict[str, str]:
    """A backward after ``opt``'s zeroing (line ``zero_line``) runs through ``module``, which
    ``opt`` steps next at line ``step_line`` without zeroing it first."""
    return {
        "en": f"this `backward()` also runs through `{module}`, whose optimizer `{opt}` was zeroed before it "
              f"(line {zero_line}) and is not zeroed again before its next step (line {step_line}): the gradients "
              f"it leaves in `{module}` are added to those of `{module}`'s own loss in the next iteration; zero "
              f"`{opt}` before its own backward (or detach what this loss reads from `{module}`).",
        "zh": f"这个 `backward()` 也会流经 `{module}`，而它的优化器 `{opt}` 已在此之前（第 {zero_line} 行）清零，"
              f"下一次 step（第 {step_line} 行）之前不会再清零：它留在 `{module}` 中的梯度会在下一轮与 "
              f"`{module}` 自己的损失的梯度相加；请在 `{opt}` 自己的 backward 之前清零（或对从 `{module}` "
              f"读出的值 detach）。",
    }


def zeroed_too_early(opt: str) -> Dict[str, str]:
    return {"en": f"`{opt}` is zeroed here, after its step but before that backward",
            "zh": f"`{opt}` 在这里清零：在它的 step 之后、那次 backward 之前"}


def next_step_adds(opt: str) -> Dict[str, str]:
    return {"en": f"the next iteration's `{opt}` step uses those gradients too",
            "zh": f"下一轮 `{opt}` 的 step 也会用到那些梯度"}
