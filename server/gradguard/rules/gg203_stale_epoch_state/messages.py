"""GG203's words, in English and Chinese: the rule's title and explanation, the
finding's message, related notes and the title of its fix, from the state's name
and the line it is initialised on. Each function returns ``{"en": ..., "zh": ...}``,
so a message is changed in both languages in one place.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict

TITLE = {
    "en": "A recurrent state is initialised once and carried across epochs",
    "zh": "循环状态只初始化一次，并被带过 epoch 边界",
}

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

**My state starts as `None` before the epoch loop (the model makes the first one).**
Reported when the batch loop tests it (`if state is not None: state = state.detach()`): after the
first batch it is a tensor, and it flows into every later epoch the same way. The fix sets it to
`None` at the top of each epoch.

**My model keeps the state itself (`self.h = h.detach()` in `forward`) and has a `reset()`.**
When the class is defined in the same file, sets `self.h` to a fresh tensor in `__init__`, detaches
it in `forward` and has a method that resets it (`self.h.zero_()`, `self.h = ...`), an epoch loop
that calls the model in its batch loop and never that method (nor rebuilds the model, nor hands it
to other code, such as a callback) is reported at the call; the fix calls the reset method at the
top of the epoch loop. This is fast.ai's `LMModel5` used without its `ModelResetter` callback.

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

**我的状态在 epoch 循环之前设为 `None`（第一个状态由模型创建）。**
当 batch 循环检查它时会报告（`if state is not None: state = state.detach()`）：第一个批次之后它就是
张量，同样会流入之后的每个 epoch。修复会在每个 epoch 开头把它设为 `None`。

**我的模型自己保存状态（`forward` 里 `self.h = h.detach()`），并且有 `reset()`。**
如果这个类定义在同一文件中，在 `__init__` 里把 `self.h` 设为新张量、在 `forward` 里 detach，
并且有重置它的方法（`self.h.zero_()`、`self.h = ...`），那么在 batch 循环里调用模型、却从不调用
该方法（也不重建模型，不把它交给回调等其他代码）的 epoch 循环会在调用处被报告；修复会在 epoch
循环开头调用这个重置方法。这就是 fast.ai 的 `LMModel5` 在没有 `ModelResetter` 回调时的用法。

**为什么 GG101 是错误，而这里只是提示？**
GG101 的状态没有 detach，程序会崩溃。这里状态已经 detach，程序能训练；只是每个 epoch 的前几个
batch 看到了不属于它们的状态。
''',
}


def stale_epoch_state(name: str, init_line: int) -> Dict[str, str]:
    """``name``, initialised once on ``init_line`` before the epoch loop, is carried across epochs."""
    return {
        "en": f"`{name}` is initialised once before the epoch loop (line {init_line}) and carried from the last "
              f"batch of each epoch into the first batch of the next, while the data restarts; initialise it at "
              f"the top of the epoch loop.",
        "zh": f"`{name}` 只在 epoch 循环之前（第 {init_line} 行）初始化一次，并从每个 epoch 的最后一个 batch "
              f"带进下一个 epoch 的第一个 batch，而数据已经从头开始；请在 epoch 循环开头初始化它。",
    }


def stale_module_state(model: str, attr: str, reset: str, init_line: int) -> Dict[str, str]:
    """``model`` (made on ``init_line``) keeps its state in ``self.<attr>``; its class resets it in ``reset``."""
    return {
        "en": f"`{model}` (made before the epoch loop, line {init_line}) keeps its recurrent state in `self.{attr}` "
              f"from one call to the next, and this epoch loop never calls `{model}.{reset}()`: the state runs from "
              f"the last batch of each epoch into the first batch of the next, while the data restarts; call "
              f"`{model}.{reset}()` at the top of the epoch loop.",
        "zh": f"`{model}`（在 epoch 循环之前、第 {init_line} 行创建）把循环状态保存在 `self.{attr}` 中并在调用之间"
              f"延续，而这个 epoch 循环从不调用 `{model}.{reset}()`：状态从每个 epoch 的最后一个 batch 带进下一个 "
              f"epoch 的第一个 batch，而数据已经从头开始；请在 epoch 循环开头调用 `{model}.{reset}()`。",
    }


def fix_reset_in_epoch(model: str, reset: str) -> Dict[str, str]:
    return {"en": f"Reset the state at the top of the epoch loop: `{model}.{reset}()`",
            "zh": f"在 epoch 循环开头重置状态：`{model}.{reset}()`"}


def initialised_here() -> Dict[str, str]:
    return {"en": "initialised once, here", "zh": "只在这里初始化了一次"}


def epoch_loop() -> Dict[str, str]:
    return {"en": "the epoch loop", "zh": "epoch 循环"}


def fix_initialise_in_epoch(name: str) -> Dict[str, str]:
    return {"en": f"Initialise `{name}` at the top of the epoch loop",
            "zh": f"在 epoch 循环开头初始化 `{name}`"}
