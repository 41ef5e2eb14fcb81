"""GG207's words, in English and Chinese: the title and explanation, the
finding's message, related notes and the fix's title, from the optimizer's
name as written and line numbers. Each function returns ``{"en": ..., "zh": ...}``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict

TITLE = {
    "en": "zero_grad() between backward() and step(): the step sees no gradients",
    "zh": "zero_grad() 放在 backward() 和 step() 之间：step 看不到任何梯度",
}

EXPLANATION = {
    "en": '''\
## What it does
Finds `optimizer.zero_grad()` called after `loss.backward()` and before the `optimizer.step()` of the
same optimizer, in the same block, with no backward in between.

## Why is this bad?
`zero_grad()` erases what `backward()` just computed (sets every `.grad` to `None`, or to zeros).
The step that follows has nothing to apply: with `set_to_none=True` (the default) the optimizer skips
every parameter; with zeros, plain SGD does nothing and momentum or weight decay keep moving the
weights without the loss's gradient. Nothing fails: the loss is printed, it just never goes down.

## Example
```python
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad()             # erases the gradients just computed
    optimizer.step()                  # steps with nothing
```

## Fix
Zero the gradients before the backward, or after the step:

```python
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
```

The quick fix moves the `zero_grad()` line to just after the `step()`: the backward's gradients are
the same, and the step now applies them.

## FAQ
**I back-propagate a second loss after zeroing (`loss1.backward(); opt.zero_grad(); loss2.backward(); opt.step()`).**
Not reported: a backward between the zeroing and the step gives the step gradients.

**I compute gradients, zero them and write my own into `.grad` before the step (gradient surgery).**
Not reported: anything that touches `.grad`, or calls code the file cannot see, between the
zeroing and the step keeps the rule silent.

**I accumulate over micro-batches and zero inside their loop.**
Reported too: `for micro in range(k): optimizer.zero_grad(); ...; loss.backward()` followed by
`optimizer.step()` after the loop erases, at each micro-batch, what the earlier ones accumulated;
the step applies the last micro-batch's gradient only. The quick fix moves the zeroing to just
before the micro-batch loop.

**I zero every batch and step every `k` batches (`if (i + 1) % k == 0: optimizer.step()`).**
Reported: the zeroing of each iteration erases what the iterations that did not step accumulated,
so every step applies one batch's gradient. The same holds for a counter of samples the step resets
(`seen += len(x)` ... `if seen >= n: optimizer.step(); seen = 0`). The quick fix moves the zeroing to
just after the step, inside its branch. A step skipped on another condition (a non-finite loss, a
warm-up counter the step never resets) is not accumulation and is not reported.

**My training step is a helper that zeroes, then back-propagates (`train_step(x, y)`, `trainer.forward_backward(mb)`).**
Reported when a loop calls it in every iteration while the same optimizer steps only after the loop
(directly, or through a helper that only steps it: `trainer.optim_step()`) or under an accumulation
condition: each call erases what the calls before it accumulated. Reported at the call, without a
quick fix (the zeroing lives in the helper, which other callers may rely on): zero the gradients
after the step, or once before the micro-batches. The loop may be a list comprehension
(`losses = [trainer.fwd_bwd(mb) for mb in microbatches]`, then `trainer.optim_step()`). A helper
that also steps, or zeroes only under a condition, is not reported.

**My `training_step(batch, batch_idx)` zeroes, back-propagates, and steps every k batches.**
A function called once per batch is an iteration of its caller's loop: when its own statements zero
an optimizer and back-propagate in every call while the step runs only under a modulo of one of its
parameters (`if (batch_idx + 1) % self.accumulate_grad_batches == 0: opt.step()`), each call erases
what the calls before it accumulated. Reported for each optimizer so zeroed, with the fix that moves
the zeroing to just after its step.

**The zeroing is for another optimizer (`opt_g.zero_grad()` before `opt_d.step()`).**
Not reported: only the zeroing of the optimizer that steps counts.
''',
    "zh": '''\
## 它检查什么
找出在 `loss.backward()` 之后、同一个优化器的 `optimizer.step()` 之前调用的 `optimizer.zero_grad()`
（在同一个代码块里，中间没有其他反向传播）。

## 为什么这是个问题
`zero_grad()` 会抹掉 `backward()` 刚算出的梯度（把每个 `.grad` 设为 `None` 或清零）。之后的 step
无可应用：`set_to_none=True`（默认）时优化器跳过所有参数；清零时，普通 SGD 什么也不做，动量或权重衰减
则在没有损失梯度的情况下继续移动权重。程序不会报错：损失照常打印，只是永远不会下降。

## 示例
```python
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad()             # 抹掉了刚算出的梯度
    optimizer.step()                  # 什么也没有可更新
```

## 修复
在 backward 之前清零梯度，或者在 step 之后清零：

```python
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
```

快速修复把 `zero_grad()` 这一行移到 `step()` 之后：backward 算出的梯度不变，step 现在会应用它们。

## 常见问题
**我在清零之后反向传播第二个损失（`loss1.backward(); opt.zero_grad(); loss2.backward(); opt.step()`）。**
不会被报告：清零与 step 之间有一次反向传播，step 就有梯度可用。

**我先算出梯度、清零，再把自己的梯度写进 `.grad` 后 step（梯度手术）。**
不会被报告：在清零与 step 之间，任何触及 `.grad` 或调用文件外代码的语句都会让本规则保持沉默。

**我在多个 micro-batch 上累积梯度，并在它们的循环里清零。**
同样会被报告：`for micro in range(k): optimizer.zero_grad(); ...; loss.backward()`，循环之后才
`optimizer.step()`，每个 micro-batch 都会抹掉前面累积的梯度，step 只应用最后一个 micro-batch 的梯度。
快速修复会把清零移到 micro-batch 循环之前。

**我每个批次都清零，却每 `k` 个批次才 step 一次（`if (i + 1) % k == 0: optimizer.step()`）。**
会被报告：每一轮的清零都会抹掉那些没有 step 的轮次累积的梯度，于是每次 step 只应用一个批次的梯度。
用样本计数器并在 step 时重置（`seen += len(x)` ... `if seen >= n: optimizer.step(); seen = 0`）也一样。
快速修复把清零移到 step 之后、同一个分支里。因其他条件跳过的 step（损失非有限值、step 从不重置的预热计数器）
不是梯度累积，不会被报告。

**我的训练步骤是一个先清零、再反向传播的辅助函数（`train_step(x, y)`、`trainer.forward_backward(mb)`）。**
当循环每一轮都调用它，而同一个优化器只在循环之后（直接调用，或通过只执行 step 的辅助函数，如
`trainer.optim_step()`）或在累积条件下 step 时，会被报告：每次调用都会抹掉之前各次调用累积的梯度。
在调用处报告，没有快速修复（清零位于辅助函数中，其他调用者可能依赖它）：请在 step 之后清零，
或在 micro-batch 开始前清零一次。循环也可以是列表推导式（`losses = [trainer.fwd_bwd(mb) for mb in microbatches]`，
然后 `trainer.optim_step()`）。同时执行 step、或只在某个条件下清零的辅助函数不会被报告。

**我的 `training_step(batch, batch_idx)` 先清零、再反向传播，每 k 个 batch 才 step 一次。**
每个 batch 调用一次的函数就是其调用方循环的一轮：如果它自己的语句在每次调用时都清零某个优化器并反向传播，
而 step 只在对其某个参数取模的条件下运行（`if (batch_idx + 1) % self.accumulate_grad_batches == 0: opt.step()`），
每次调用都会抹掉之前各次调用累积的梯度。对每个这样清零的优化器分别报告，修复是把清零移到它的 step 之后。

**清零的是另一个优化器（在 `opt_d.step()` 之前调用 `opt_g.zero_grad()`）。**
不会被报告：只有执行 step 的那个优化器的清零才算数。
''',
}


def zeroed_before_step(opt: str, step: str, backward_line: int, step_line: int) -> "Dict[str, str]":
    """``step``: the step call as written (``optimizer.step()``, ``scaler.step(optimizer)``)."""
    return {
        "en": f"`{opt}.zero_grad()` erases the gradients that `backward()` computed on line {backward_line}, just "
              f"before `{step}` on line {step_line} applies them: every step sees no gradient and the model "
              f"does not learn; zero the gradients before the backward or after the step.",
        "zh": f"`{opt}.zero_grad()` 在第 {step_line} 行的 `{step}` 应用梯度之前，抹掉了第 {backward_line} 行 "
              f"`backward()` 算出的梯度：每次 step 都看不到梯度，模型学不到东西；请在 backward 之前或 step 之后清零。",
    }


def computed_here() -> "Dict[str, str]":
    return {"en": "the gradients computed here", "zh": "梯度在这里算出"}


def stepped_here() -> "Dict[str, str]":
    return {"en": "the step that finds them erased", "zh": "此处的 step 发现梯度已被抹掉"}


def fix_move_after_step(opt: str) -> "Dict[str, str]":
    return {"en": f"Move `{opt}.zero_grad()` after `{opt}.step()`",
            "zh": f"把 `{opt}.zero_grad()` 移到 `{opt}.step()` 之后"}


def zeroed_per_iteration(opt: str, loop_line: int, backward_line: int, step: str, step_line: int) -> "Dict[str, str]":
    """``opt.zero_grad()`` at the start of every iteration of an accumulating loop."""
    return {
        "en": f"`{opt}.zero_grad()` runs in every iteration of the loop on line {loop_line}, erasing what the "
              f"earlier iterations' `backward()` (line {backward_line}) accumulated: `{step}` on line {step_line}, "
              f"after the loop, applies the last iteration's gradient only; zero the gradients once, before the loop.",
        "zh": f"`{opt}.zero_grad()` 在第 {loop_line} 行循环的每一轮都会运行，抹掉了前几轮 `backward()`（第 "
              f"{backward_line} 行）累积的梯度：循环之后第 {step_line} 行的 `{step}` 只应用了最后一轮的梯度；"
              f"请在循环之前只清零一次。",
    }


def accumulated_here() -> "Dict[str, str]":
    return {"en": "the gradients each iteration accumulates", "zh": "每一轮在这里累积梯度"}


def stepped_after_loop() -> "Dict[str, str]":
    return {"en": "the step after the loop, which sees only the last iteration's", "zh": "循环之后的 step，只看到最后一轮的梯度"}


def fix_move_before_loop(opt: str) -> "Dict[str, str]":
    return {"en": f"Move `{opt}.zero_grad()` before the loop", "zh": f"把 `{opt}.zero_grad()` 移到循环之前"}


def zeroed_every_iteration(opt: str, backward_line: int, step: str, step_line: int, test: str,
                           per_call: "str | None" = None) -> "Dict[str, str]":
    """``opt.zero_grad()`` in every iteration while ``step`` runs only under ``if test:``
    (``per_call``: the def whose every call zeroes, ``training_step``, called once per batch)."""
    every_en = f"every call of `{per_call}()`" if per_call else "every iteration"
    every_zh = f"每次调用 `{per_call}()` 时" if per_call else "每一轮"
    rounds_en = "calls" if per_call else "iterations"
    rounds_zh = "那些次调用" if per_call else "那些轮"
    return {
        "en": f"`{opt}.zero_grad()` runs in {every_en}, but `{step}` (line {step_line}) only when `{test}`: "
              f"the gradients `backward()` (line {backward_line}) accumulates in the {rounds_en} that do not "
              f"step are erased by the next zeroing, so each step applies one batch's gradient; zero the "
              f"gradients after the step instead.",
        "zh": f"`{opt}.zero_grad()` {every_zh}都会运行，但 `{step}`（第 {step_line} 行）只在 `{test}` 时运行："
              f"不执行 step 的{rounds_zh}里 `backward()`（第 {backward_line} 行）累积的梯度被下一次清零抹掉，"
              f"每次 step 只应用一个批次的梯度；请改为在 step 之后清零。",
    }


def stepped_every_k() -> "Dict[str, str]":
    return {"en": "the step, which sees only its own iteration's gradient", "zh": "此处的 step 只看到本轮的梯度"}


def zeroed_under_the_steps_condition(opt: str, test: str, backward_line: int, step: str,
                                     step_line: int) -> "Dict[str, str]":
    """``if test: opt.zero_grad()`` before the backward, ``if test: step`` after it."""
    return {
        "en": f"`{opt}.zero_grad()` runs under `{test}`, the condition of `{step}` (line {step_line}), but before "
              f"`backward()` (line {backward_line}): the iteration that steps first erases the gradients the "
              f"iterations before it accumulated, so each step applies one batch's gradient; zero the gradients "
              f"after the step instead.",
        "zh": f"`{opt}.zero_grad()` 在 `{test}` 条件下运行，与 `{step}`（第 {step_line} 行）的条件相同，却位于 "
              f"`backward()`（第 {backward_line} 行）之前：执行 step 的那一轮先抹掉了之前各轮累积的梯度，"
              f"每次 step 只应用一个批次的梯度；请改为在 step 之后清零。",
    }


def zeroed_by_a_helper(helper: str, opt: str, step: str, step_line: int, test: "str | None") -> "Dict[str, str]":
    """``helper()`` zeroes ``opt`` before its own backward, once per iteration; the step runs after
    the loop (``test`` None) or only under ``if test:``."""
    when_en = f"only when `{test}`" if test else "once, after the loop"
    when_zh = f"只在 `{test}` 时运行" if test else "只在循环之后运行一次"
    return {
        "en": f"`{helper}()` zeroes the gradients of `{opt}` before its own `backward()`, and runs in every iteration, "
              f"but `{step}` (line {step_line}) runs {when_en}: each call erases the gradients the earlier "
              f"iterations accumulated, so each step applies the gradient of one call only; zero the gradients "
              f"after the step (or once before the accumulation) instead of inside `{helper}()`.",
        "zh": f"`{helper}()` 在它自己的 `backward()` 之前把 `{opt}` 的梯度清零，并且每一轮都会运行，"
              f"但 `{step}`（第 {step_line} 行）{when_zh}：每次调用都会抹掉之前各轮累积的梯度，"
              f"每次 step 只应用一次调用的梯度；请改为在 step 之后（或在累积开始前一次）清零，而不是在 `{helper}()` 里清零。",
    }


def zeroes_here(helper: str) -> "Dict[str, str]":
    return {"en": f"`{helper}()` zeroes the gradients, then back-propagates", "zh": f"`{helper}()` 先清零梯度，再反向传播"}


def stepped_once(step: str) -> "Dict[str, str]":
    return {"en": f"`{step}`, which sees only the last call's gradient", "zh": f"`{step}` 只看到最后一次调用的梯度"}
