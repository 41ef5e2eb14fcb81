"""GG201's words, in English and Chinese: the rule's title and explanation, the
findings' messages (history kept across a training loop; a loop that never
back-propagates, with or without something accumulated), related notes and fix
titles, from the accumulated names, how they accumulate and the evaluation call
before the loop, as written. Each function returns ``{"en": ..., "zh": ...}``, so
a message is changed in both languages in one place.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Optional, Sequence

TITLE = {
    "en": "A tensor with a graph is accumulated across iterations and never back-propagated",
    "zh": "带计算图的张量在迭代之间被累积，却从未反向传播",
}

EXPLANATION = {
    "en": '''\
## What it does
Finds a tensor that carries an autograd graph and is accumulated across the iterations of a loop
without ever being back-propagated: `total_loss += loss`, a running average
`running = 0.9 * running + 0.1 * loss`, `losses.append(loss)` or `outputs.append(out)` into a list
that outlives the iteration, or a meter handed the loss (`meter.update(loss)`, whose method does
`self.sum += val`). Also an evaluation loop (one that never calls `backward()`, often after
`model.eval()`) run without `torch.no_grad()` whose outputs or losses are kept, in a training file
or in an inference script that calls `model.eval()`.

## Why is this bad?
A tensor computed from parameters remembers how it was computed. `total_loss + loss` is a new
tensor whose graph holds the previous `total_loss` *and* this iteration's `loss`, so after `N`
iterations the accumulator holds `N` iterations' graphs, with every intermediate tensor they still
reference. Nothing fails: the program trains, memory grows with every step, and a long run ends in
an out-of-memory error far from the line that caused it. PyTorch's own FAQ calls this "accumulating
history across your training loop". `model.eval()` does not help: it changes dropout and batch
norm, not graph recording; only `torch.no_grad()` (or `torch.inference_mode()`) stops it.

## Example
```python
total_loss = 0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss          # keeps every iteration's graph
print(total_loss.item() / len(loader))
```

## Fix
Accumulate a Python number (and read it as one later), or a detached tensor:

```python
    total_loss += loss.item()
print(total_loss / len(loader))

    outputs.append(out.detach())
```

An evaluation loop is wrapped in `torch.no_grad()`, which builds no graph at all and is faster. An
evaluation loop that keeps only numbers does not grow, but still builds a graph per batch for
nothing: that one gets a hint with the same fix. So does an evaluation reached through a call: a
loop after `model.eval()` that runs the model through one of its methods (`model.infer(x)`), a
helper named for evaluation (`_eval_step(x, y)`) run once per batch by such a loop, or a
`predict()` that calls `.eval()` itself and is run per batch by a loop of the file (the hint is on
the helper's forward, with `@torch.no_grad()` as the fix). So does a function that both trains and
evaluates, back-propagating only under one of its parameters (`if optimizer is not None:`,
`if is_train:`), when the file calls it with that parameter left out (its default `None` or
`False`) or handed `None`/`False`, after `model.eval()` or where the function switches to
evaluation mode itself (`run_epoch(valid_data, model, loss_compute)`,
`train_and_valid(..., is_train=False)`): the hint is on its forward, and the fix records the graph
only when it trains, `with torch.set_grad_enabled(optimizer is not None):` around it. The outputs
of an evaluation step of the project (`validation_step(x, y)`, run with graph recording on) kept in
a list across the batches count as a model's outputs. A helper whose caller runs under
`torch.no_grad()` (at its call site, or as a decorated function) is left alone; so is a file named
like a test suite (`test_*.py`) that holds tests, but not a script that runs the test set.

```python
model.eval()
with torch.no_grad():
    for x, y in val_loader:
        val_loss += criterion(model(x), y)
```

The quick fix uses `.item()` when the accumulator starts as a Python number and holds a loss, and
then also rewrites a later `total_loss.item()` into `total_loss`; otherwise `.detach()`, which keeps
a tensor with the same values.

## FAQ
**I sum the losses of several chunks and call `backward()` on the sum after the loop. Is that reported?**
No. An accumulator that reaches a `backward()` (inside the loop or after it), is returned, or is
stored on an object is what the program means to differentiate: gradient accumulation on purpose.
Unless what it adds was already back-propagated in the loop (`loss.backward()`, then
`total += loss`): a second backward through it would fail, so it is a record of numbers kept as a
graph, and it is reported even when returned (`return total / len(loader)` from `train()`), with a
`.detach()` fix (the caller may read a tensor).

**I log the loss with a meter (`meter.update(loss)`). Is that reported?**
When the meter's method adds what it is handed to an attribute of its object (`self.sum += val * n`,
the usual `AverageMeter`; `self.totals[name] += val`; `self.avg = b * self.avg + (1 - b) * val`;
`self.preds = torch.cat([self.preds, preds])`), the attribute keeps every iteration's graph:
reported on the call (`meter.update(loss)`, or `stats["loss"].update(loss)` on a dict of meters,
a `defaultdict(AverageMeter)` too, and `stats[k].update(v)` in a loop over a dict of losses),
with `.detach()` on the argument that carries the graph. `meter.update(loss.item())` is silent.
So is a helper that files what it is handed in its meters (`self._update_stats(stats, n)`,
`self.stats[phase][name].update(val)`; a function `update_meter(report, meter)` calling
`meter.update(...)` with the report's losses): reported on the helper's call, with no fix
(the `.item()` belongs in the helper, which may be handed a dict of losses).

**I keep a nested dict of outputs through my own `detach_tree(out)` helper.**
A function of the file that returns for every tensor (`x.detach()`) and every dict, list or tuple
(itself on each element) and hands anything else back unchanged returns no graph: what it returns
is kept silently.

**Is `float(loss)` or `loss.item()` enough?**
Yes: both give a Python number with no graph. So does `loss.detach()` (a tensor).

**Does `model.eval()` stop the graph?**
No. It switches layers such as dropout and batch norm to evaluation behaviour; autograd still
records every operation until you enter `torch.no_grad()`.

**Why is my evaluation function not reported, though it has no `no_grad`?**
When the same file calls it inside `with torch.no_grad():` (or from a function decorated with
`@torch.no_grad()`), nothing is recorded, and it is not reported. It is not reported either when it
returns the accumulated tensor and nothing in the loop back-propagates it: its caller decides. A
file that never back-propagates (an inference script) is analysed only where it calls `.eval()`,
and only a loop after such a call counts as an evaluation there.
''',
    "zh": '''\
## 它检查什么
找出这样的张量：它带着自动求导的计算图，在循环的各次迭代之间被不断累积，却从未被反向传播：
`total_loss += loss`、滑动平均 `running = 0.9 * running + 0.1 * loss`、把 `loss` 或 `out`
`append` 进一个在迭代结束后仍然存在的列表，或者把损失交给一个计量器（`meter.update(loss)`，
其方法执行 `self.sum += val`）。还包括评估循环（从不调用 `backward()`，常在 `model.eval()`
之后）：它没有放在 `torch.no_grad()` 下，却保存了输出或损失；无论是在训练文件里，还是在调用了
`model.eval()` 的推理脚本里。

## 为什么这是个问题
由参数计算出来的张量会记住自己是怎么算出来的。`total_loss + loss` 是一个新张量，它的计算图
同时挂着上一轮的 `total_loss` *和* 这一轮的 `loss`，于是 `N` 轮之后累加器持有 `N` 轮的计算图，
以及它们仍然引用的所有中间张量。程序不会报错，照常训练，但内存每一步都在增长，长时间训练后
以显存/内存不足告终，而出错的位置离真正的原因很远。PyTorch 官方 FAQ 把这叫作“在训练循环中
累积历史”。`model.eval()` 不能解决：它只改变 dropout 和 batch norm 的行为，不影响计算图的
记录；只有 `torch.no_grad()`（或 `torch.inference_mode()`）才会停止记录。

## 示例
```python
total_loss = 0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss          # 保留了每一轮的计算图
print(total_loss.item() / len(loader))
```

## 修复
累加 Python 数值（之后也按数值读取），或者累加 detach 之后的张量：

```python
    total_loss += loss.item()
print(total_loss / len(loader))

    outputs.append(out.detach())
```

评估循环放进 `torch.no_grad()`，完全不建计算图，而且更快。只保存数值的评估循环不会增长内存，
但每个 batch 仍然白白构建计算图：对它给出一个提示（hint），修复方法相同。通过调用进行的评估也一样：
`model.eval()` 之后的循环通过模型的某个方法运行模型（`model.infer(x)`），或者这样的循环对每个 batch
调用一个以评估命名的辅助函数（`_eval_step(x, y)`），或者一个自己调用 `.eval()` 的 `predict()` 被文件中的
循环逐 batch 调用（提示位于辅助函数的前向计算处，修复是 `@torch.no_grad()`）。既训练又评估、只在某个参数下
做反向传播（`if optimizer is not None:`、`if is_train:`）的函数也是如此：当文件在 `model.eval()` 之后、或在
函数自己切换到评估模式时，调用它而不传该参数（其默认值为 `None` 或 `False`）或传入 `None`/`False`
（`run_epoch(valid_data, model, loss_compute)`、`train_and_valid(..., is_train=False)`）：提示位于它的前向计算处，
修复是只在训练时记录计算图，在其外面加上 `with torch.set_grad_enabled(optimizer is not None):`。项目中的评估步骤
（`validation_step(x, y)`，在记录计算图的状态下运行）的输出若被跨 batch 保存在列表中，也算作模型的输出。调用方在 `torch.no_grad()`
下运行（在调用处，或作为被装饰的函数）的辅助函数不会被报告；以测试套件命名（`test_*.py`）且包含测试的
文件也不会，但运行测试集的脚本会。

```python
model.eval()
with torch.no_grad():
    for x, y in val_loader:
        val_loss += criterion(model(x), y)
```

当累加器以 Python 数值开始、累加的是损失时，快速修复使用 `.item()`，并把之后的
`total_loss.item()` 改成 `total_loss`；否则使用 `.detach()`，得到数值相同的张量。

## 常见问题
**我把几个分块的损失加起来，在循环之后对总和调用 `backward()`，会被报告吗？**
不会。累加器如果到达了 `backward()`（在循环内或循环后）、被 `return`、或被存到对象的属性上，
那正是程序要求导的东西：这是有意的梯度累积。除非它累加的东西已经在循环里反向传播过
（先 `loss.backward()`，再 `total += loss`）：再对它反向传播一次会失败，所以它只是以计算图
形式保存的一串数值，即使被 `return`（`train()` 里的 `return total / len(loader)`）也会报告，
快速修复使用 `.detach()`（调用者可能把它当张量读取）。

**我用计量器记录损失（`meter.update(loss)`），会被报告吗？**
如果计量器的方法把传入的值累加到对象的属性上（`self.sum += val * n`，常见的 `AverageMeter`；
`self.totals[name] += val`；`self.avg = b * self.avg + (1 - b) * val`；
`self.preds = torch.cat([self.preds, preds])`），这个属性就会保留每一轮的计算图：在这次调用处报告
（`meter.update(loss)`，或计量器字典上的 `stats["loss"].update(loss)`，包括
`defaultdict(AverageMeter)`，以及在损失字典的循环里调用的 `stats[k].update(v)`），并对携带计算图的参数加上
`.detach()`。`meter.update(loss.item())` 不会被报告。把传入的值交给自己的计量器的辅助函数也一样
（`self._update_stats(stats, n)` 里的 `self.stats[phase][name].update(val)`；以报告中的损失调用
`meter.update(...)` 的函数 `update_meter(report, meter)`）：在辅助函数的调用处报告，不提供快速修复
（`.item()` 应写在辅助函数里，它拿到的可能是一个损失字典）。

**我用自己写的 `detach_tree(out)` 辅助函数保存嵌套的输出字典。**
文件中的函数若对每个张量返回 `x.detach()`、对每个字典、列表或元组逐元素调用自身，其余的原样返回，
它返回的就不带计算图：保存它不会被报告。

**`float(loss)` 或 `loss.item()` 就够了吗？**
够了：两者都得到没有计算图的 Python 数值。`loss.detach()`（得到张量）也可以。

**`model.eval()` 会停止记录计算图吗？**
不会。它只把 dropout、batch norm 等层切换到评估行为；在进入 `torch.no_grad()` 之前，
autograd 仍然记录每一个操作。

**我的评估函数没有 `no_grad`，为什么没有被报告？**
如果同一个文件在 `with torch.no_grad():` 之内（或在带 `@torch.no_grad()` 装饰的函数里）调用它，
就不会记录任何计算图，因此不报告。如果它 `return` 累积的张量，而循环里没有任何东西对它反向
传播，也不报告：由调用者决定。从不进行反向传播的文件（推理脚本）只在它调用 `.eval()` 时才分析，
并且只有在这个调用之后的循环才算作评估。
''',
}


def accumulated(kind: str, name: str) -> Dict[str, str]:
    """What accumulates: ``name``, added to ("aug"), rebuilt from itself ("assign"),
    a list appended to ("append"), or an object's attribute a method of it adds its
    argument to ("meter": ``loss_meter.sum``, by ``loss_meter.update(loss)``), or one where
    a method keeps what it builds ("kept": ``model.training_step_outputs``)."""
    return {"en": {"aug": f"`{name}`", "assign": f"`{name}`", "append": f"the list `{name}`",
                   "meter": f"`{name}`, to which this call adds its argument,",
                   "kept": f"`{name}`, to which this call appends what it builds,",
                   "step": f"the list `{name}`, kept on the object and appended to by every call of this method,"}[kind],
            "zh": {"aug": f"`{name}`", "assign": f"`{name}`", "append": f"列表 `{name}`",
                   "meter": f"这次调用把参数累加进去的 `{name}`",
                   "kept": f"这次调用把它构建的结果追加进去的 `{name}`",
                   "step": f"保存在对象上、每次调用此方法都会追加的列表 `{name}`"}[kind]}


def accumulated_names(names: Sequence[str]) -> Dict[str, str]:
    """Several names accumulated in one loop."""
    return {"en": ", ".join(f"`{n}`" for n in names[:-1]) + f" and `{names[-1]}`",
            "zh": "、".join(f"`{n}`" for n in names)}


def _after(eval_func: Optional[str]) -> Dict[str, str]:
    if eval_func is None:
        return {"en": "", "zh": ""}
    return {"en": f" after `{eval_func}()`", "zh": f"（在 `{eval_func}()` 之后）"}


def history(what: Dict[str, str]) -> Dict[str, str]:
    """``what`` (from :func:`accumulated`) keeps every iteration's graph of a training loop."""
    return {
        "en": f"{what['en']} keeps the autograd graph of every iteration and is never back-propagated: memory grows "
              f"with every iteration (\"accumulating history across the training loop\"); accumulate "
              f"`.item()` or `.detach()` instead.",
        "zh": f"{what['zh']} 保留了每一轮迭代的计算图，却从未被反向传播：内存随迭代不断增长"
              f"（“在训练循环中累积历史”）；请改为累积 `.item()` 或 `.detach()`。",
    }


def quiet_loop(what: Dict[str, str], plural: bool, eval_func: Optional[str]) -> Dict[str, str]:
    """``what`` keeps the graphs of a loop that never back-propagates (after a call
    of ``eval_func``, when there is one) and runs with graph recording on."""
    after = _after(eval_func)
    return {
        "en": f"{what['en']} {'keep' if plural else 'keeps'} the autograd graph of every iteration of a loop that never back-propagates"
              f"{after['en']} and runs without `torch.no_grad()`: memory grows with every iteration; "
              f"run the loop under `torch.no_grad()`.",
        "zh": f"{what['zh']} 保留了一个从不反向传播的循环{after['zh']}每一轮的计算图，而这个循环没有放在 "
              f"`torch.no_grad()` 下：内存随迭代不断增长；请在 `torch.no_grad()` 下运行这个循环。",
    }


def evaluation_loop(eval_func: Optional[str]) -> Dict[str, str]:
    """An evaluation loop (after a call of ``eval_func``) builds graphs and keeps nothing."""
    after = _after(eval_func)
    return {
        "en": f"this evaluation loop{after['en']} runs the model with graph recording on and back-propagates "
              f"nothing: every iteration builds an autograd graph (and keeps activations) for nothing; run it "
              f"under `torch.no_grad()`.",
        "zh": f"这个评估循环{after['zh']}在记录计算图的状态下运行模型，却不做任何反向传播：每一轮都白白构建"
              f"计算图（并保存激活值）；请在 `torch.no_grad()` 下运行它。",
    }


def loop_accumulated_across() -> Dict[str, str]:
    return {"en": "the loop it accumulates across",
            "zh": "在这个循环的各次迭代之间累积"}


def eval_does_not_stop_recording() -> Dict[str, str]:
    return {"en": "`eval()` does not stop graph recording",
            "zh": "`eval()` 不会停止记录计算图"}


def fix_no_grad() -> Dict[str, str]:
    return {"en": "Run the loop under `torch.no_grad()`", "zh": "在 `torch.no_grad()` 下运行这个循环"}


def fix_accumulate(method: str) -> Dict[str, str]:
    """``method``: ``.item()`` or ``.detach()``, as the fix writes it."""
    return {"en": f"Accumulate `{method}` of the value (no graph)",
            "zh": f"累积数值的 `{method}`（不带计算图）"}


def evaluation_call(fn: str, eval_func: str) -> Dict[str, str]:
    """A loop-less evaluation function runs the model with graph recording on and keeps nothing."""
    return {
        "en": f"`{fn}()` evaluates (after `{eval_func}()`) with graph recording on and back-propagates nothing: "
              f"this forward builds an autograd graph and keeps the activations of the whole batch for nothing; "
              f"run it under `torch.no_grad()`.",
        "zh": f"`{fn}()` 在 `{eval_func}()` 之后做评估，却在记录计算图的状态下运行，且不做任何反向传播：这次前向传播"
              f"白白构建计算图并保存整个批次的激活值；请在 `torch.no_grad()` 下运行它。",
    }


def evaluation_step_call(fn: str, caller: str) -> Dict[str, str]:
    """A loop-less evaluation helper run per batch by an evaluation loop, with graph recording on."""
    where = f"the evaluation loop of `{caller}()`" if caller else "an evaluation loop"
    where_zh = f"`{caller}()` 的评估循环" if caller else "一个评估循环"
    return {
        "en": f"`{fn}()` runs once per batch in {where} (after `.eval()`, nothing back-propagated) with graph "
              f"recording on: this forward builds an autograd graph and keeps the activations of every batch "
              f"for nothing; run it under `torch.no_grad()`.",
        "zh": f"`{fn}()` 在{where_zh}中（`.eval()` 之后，不做任何反向传播）每个批次运行一次，且处于记录计算图的状态："
              f"这次前向传播白白构建计算图并保存每个批次的激活值；请在 `torch.no_grad()` 下运行它。",
    }


def fix_no_grad_decorator(fn: str) -> Dict[str, str]:
    return {"en": f"Decorate `{fn}()` with `@torch.no_grad()`", "zh": f"给 `{fn}()` 加上 `@torch.no_grad()` 装饰器"}


def step_called_in_a_loop(method: str) -> Dict[str, str]:
    """Related: the step method, called once per iteration of a loop of the file."""
    return {"en": f"`{method}()` is called once per iteration of a loop: each call appends one more graph",
            "zh": f"`{method}()` 在循环的每一轮迭代中被调用一次：每次调用都会再追加一个计算图"}


def flag_guarded_evaluation(fn: str, param: str, guard: str) -> Dict[str, str]:
    """A loop of ``fn`` back-propagates only ``if guard:`` and the file calls ``fn`` for evaluation with
    ``param`` left out or ``None``/``False``: this forward records a graph for nothing there."""
    return {
        "en": f"`{fn}()` back-propagates only when `{guard}`, and the file also calls it for evaluation without "
              f"`{param}` (or with `{param}` None/False): there this forward runs with graph recording on and "
              f"builds an autograd graph (and keeps activations) for nothing; run it under "
              f"`torch.set_grad_enabled({guard})` or call `{fn}()` under `torch.no_grad()` for evaluation.",
        "zh": f"`{fn}()` 只在 `{guard}` 时做反向传播，而文件中还以评估为目的调用它，且未传 `{param}`（或传入 "
              f"None/False）：此时这次前向传播在记录计算图的状态下运行，白白构建计算图（并保存激活值）；请把它放在 "
              f"`torch.set_grad_enabled({guard})` 下运行，或在评估时于 `torch.no_grad()` 下调用 `{fn}()`。",
    }


def backpropagates_only_here() -> Dict[str, str]:
    return {"en": "the only backward, under this condition", "zh": "唯一的反向传播，只在这个条件下运行"}


def fix_set_grad_enabled(test: str) -> Dict[str, str]:
    return {"en": f"Record this forward's graph only when `{test}`: `torch.set_grad_enabled({test})`",
            "zh": f"只在 `{test}` 时记录这次前向传播的计算图：`torch.set_grad_enabled({test})`"}
