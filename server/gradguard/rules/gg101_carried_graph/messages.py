"""GG101's words, in English and Chinese: the rule's title and explanation, the
finding's messages and related notes, and the title of each fix. Nothing here
looks at a tree or decides anything; the analysis says what it found (which
names, which backward, in which function, as source snippets) and these
functions say it.

Each function returns ``{"en": ..., "zh": ...}``, so a message is changed in
both languages in one place.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Sequence, Tuple

TITLE = {
    "en": "A value with an autograd graph is carried into the next iteration's backward()",
    "zh": "带计算图的值被带入下一轮迭代的 backward()",
}

# The rule page: `gradguard rule GG101`, hovers and docs/rules/GG101.md all use this text.
EXPLANATION = {
    "en": '''\
## What it does

Finds loops that back-propagate (`loss.backward()`, `torch.autograd.backward/grad`,
`scaler.scale(loss).backward()`, `accelerator.backward(loss)`, `self.manual_backward(loss)`,
or a helper that calls one of these — directly or through further helpers, in the same
file or in an imported module of the project) in which a value computed *with an
autograd graph* in one iteration is kept for the next iteration and reaches that
iteration's backward, with no `.detach()` in between.

The classic case is the hidden state of an `nn.RNN` / `nn.GRU` / `nn.LSTM` (or an
`RNNCell` / `GRUCell` / `LSTMCell`, or a model that wraps one) passed from batch to batch:

```python
out, hidden = model(x, hidden)   # hidden now points into this batch's graph
```

The rule follows the value through tuple unpacking, same-file models and helper
functions, `self.rnn = nn.GRU(...)` attributes and import aliases, and it knows the
usual cuts: `.detach()`, `.detach_()`, `tuple(s.detach() for s in h)`, a
`repackage_hidden`-style helper (recognised by what its body does, not by its name),
a detach mapped over a nested state (`apply_to_tensor(h, torch.Tensor.detach)`,
`tree_map(lambda t: t.detach(), h)`), resetting the state to `None` or fresh zeros, and `torch.no_grad()` /
`torch.inference_mode()` blocks.

A model can also keep the state itself (`out, self.hidden = self.lstm(x, self.hidden)` in
`forward`). Defined in the same file, it is reported in `forward`; imported from another
module of the project, it is reported where the training loop calls it, with the detach
put before that call. A loop that resets the state (`model.hidden = model.init_hidden()`,
or a method of the model that does) is left alone.

## Why is this bad?

`hidden` is not just numbers: its `grad_fn` links it to everything that produced it
in this iteration. `loss.backward()` walks that graph and then frees the tensors it
saved. In the next iteration the new loss is built on top of the old `hidden`, so the
new backward walks into the previous iteration's graph as well, finds its buffers
gone, and stops with

```
RuntimeError: Trying to backward through the graph a second time (or directly access
saved tensors after they have already been freed).
```

Even where it does not crash (`retain_graph=True`), every batch would back-propagate
through every earlier batch: time and memory grow with each step, and the optimizer's
in-place weight updates soon make the old graph invalid anyway.

## Example

```python
hidden = None
for x, y in loader:
    out, hidden = gru(x, hidden)      # GG101: hidden carries this batch's graph
    loss = criterion(out, y)
    optimizer.zero_grad()
    loss.backward()                   # the next batch's backward fails here
    optimizer.step()
```

## Fix

Keep the *values* of the state and drop its history: detach it at the start of each
iteration, before anything uses it.

```python
hidden = None
for x, y in loader:
    if hidden is not None:
        hidden = hidden.detach()      # LSTM: hidden = tuple(s.detach() for s in hidden)
    out, hidden = gru(x, hidden)
    loss = criterion(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
```

The quick fix inserts exactly this as the first statement of the loop body. There the
value is either the loop's starting state or what the previous iteration left behind,
and nothing of the current iteration has used it yet, so only the link *between*
iterations is cut: the gradients computed inside an iteration are exactly what they
were. (Detaching "right after `backward()`" is not always equivalent: a state
reassigned after the backward, or an early `continue`, would still be carried.) The
`None` check is added when the state can be `None` before the first batch. An
alternative fix resets the state every iteration; it removes the error but also the
information carried between batches.

When the backward runs on some iterations only (inside an `if` of the loop body:
`if prev is not None:`, every k-th batch), an iteration that skips it hands its graph,
still whole, to the next one, whose backward goes through it as the program meant. A
detach at the top would cut that live graph and change what the first step learns, so
the fix puts the detach right after the backward, inside its block. When the state is a
plain copy made after that block (`prev_out = out`), the copied value is detached there
instead; when it is bound again from anything else, no fix is offered.

When the state's shape cannot be told where the loop carries it (the model is a
parameter, or comes from code gradguard cannot see, and may hand back a tensor, an
`(h, c)` pair, a dict of states or a list of pairs), no one-line detach is guessed:
the fix defines a helper once in the file, before the function that needs it, and
calls it at the top of the loop. The helper detaches every tensor inside the state
and keeps its dicts, lists, tuples and namedtuples; a later fix in the same file
reuses it, and a name the file already uses is never taken.

```python
def _detach_state(s):
    """Detach every tensor of a state, keeping its dicts, lists and tuples."""
    if hasattr(s, "detach"):
        return s.detach()
    elif isinstance(s, dict):
        s = s.copy()
        for k in s:
            s[k] = _detach_state(s[k])
        return s
    elif isinstance(s, (list, tuple)):
        parts = [_detach_state(v) for v in s]
        return type(s)(*parts) if hasattr(s, "_fields") else type(s)(parts)
    else:
        return s
```

## FAQ

**Can I just reset the state to `None` (or zeros) every batch?**
Yes, the error goes away, but the model then starts every batch from an empty state.
That is right when batches are independent samples; for a long stream split into
chunks (language models, streaming time series) it throws away exactly the context
the recurrent state exists to carry. Detach instead.

**`hidden.detach()` or `hidden.data`?**
Use `.detach()`. `.data` also gives a tensor without history, but it is the old API:
autograd does not track changes made through it, so an in-place update through `.data`
can silently produce wrong gradients instead of an error.

**My model is an LSTM. Is detaching `h` enough?**
No. The LSTM state is a pair `(h, c)` and both elements carry the graph. Detaching only
`h` (`hidden = (hidden[0].detach(), hidden[1])`) still fails through `c`. Detach both:
`hidden = tuple(s.detach() for s in hidden)`, or `h, c = h.detach(), c.detach()`.

**After detaching, do gradients still flow across batches?**
No. Each batch back-propagates only through its own steps (truncated backpropagation
through time, with the batch length as the truncation window). The state's *values*
still carry over, so the model keeps its context; only the gradient path is cut at the
batch boundary. If you need longer gradient paths, use longer sequences per batch.

**What does gradguard say when it cannot tell?**
Nothing, by default: an error is reported only when every link of the path is established
(the value is built with a graph, reaches the next iteration's backward on a path that can
run, and nothing cuts it). When one link is unknown (a function imported from a module
gradguard has not read, a part of a list whose parts differ), it stays silent.
`gradguard check --unverified-notes` (or `unverified-notes = true` in `[tool.gradguard]`, or
the editor setting `unverifiedNotes`) turns such a silence into an information-level note
that names the value, the backward it may reach and the link that could not be verified.

**Why is `loss.backward(retain_graph=True)` not the fix?**
It only stops PyTorch from freeing the graph, so the next backward walks through this
batch *and every batch before it*: memory and time grow with every step. And because
`optimizer.step()` updates the weights in place, the next backward through the old graph
fails anyway, with "one of the variables needed for gradient computation has been
modified by an inplace operation". `retain_graph=True` is meant for two backward passes
through the *same* graph within one iteration (which this rule leaves alone, and GG103 asks for
when the first of them frees what the second needs).
''',
    "zh": '''\
## 它检查什么

检查会做反向传播的循环（`loss.backward()`、`torch.autograd.backward/grad`、
`scaler.scale(loss).backward()`、`accelerator.backward(loss)`、`self.manual_backward(loss)`，
或直接、或经由其他辅助函数调用了它们的辅助函数，无论在同一文件还是在项目里被导入的模块中）：如果某个值在一轮迭代中*带着计算图*被算出来，
被保留到下一轮，并且在下一轮参与了 backward，中间却没有任何 `.detach()` 截断，就会报告。

最典型的是 `nn.RNN` / `nn.GRU` / `nn.LSTM`（以及 `RNNCell` / `GRUCell` / `LSTMCell`，
或包了它们的模型）的隐状态在批次之间直接传递：

```python
out, hidden = model(x, hidden)   # 此时 hidden 挂在本批次的计算图上
```

规则会顺着元组解包、同文件中定义的模型和辅助函数、`self.rnn = nn.GRU(...)` 这类属性以及
import 别名去追踪这个值，也认得常见的截断写法：`.detach()`、`.detach_()`、
`tuple(s.detach() for s in h)`、`repackage_hidden` 式的辅助函数（看函数体做了什么，而不是看名字）、
映射到嵌套状态上的 detach（`apply_to_tensor(h, torch.Tensor.detach)`、`tree_map(lambda t: t.detach(), h)`）、
每批重置为 `None` 或新建的全零张量，以及 `torch.no_grad()` / `torch.inference_mode()` 代码块。

模型也可能自己保存状态（在 `forward` 里写 `out, self.hidden = self.lstm(x, self.hidden)`）。
模型定义在同一文件时，问题报告在 `forward` 中；从项目里的其他模块导入时，报告在训练循环调用它的地方，
修复会在那次调用之前插入 detach。循环里重置了状态（`model.hidden = model.init_hidden()`，
或调用了模型自己做重置的方法）则不会报告。

## 为什么这是个问题

`hidden` 不只是一组数值，它的 `grad_fn` 把它和本轮迭代中产生它的所有运算连在一起。
`loss.backward()` 沿着这张图回溯完之后，会释放图里保存的中间结果。下一轮的 loss
是在旧的 `hidden` 之上继续算出来的，于是新的 backward 会一路回溯进上一轮的计算图，
发现中间结果已经被释放，直接报错：

```
RuntimeError: Trying to backward through the graph a second time (or directly access
saved tensors after they have already been freed).
```

即使加了 `retain_graph=True` 不再报这个错，每个批次也都要回溯之前所有批次的图：
耗时和显存随步数不断增长，而且优化器原地更新权重之后，旧图很快也会失效。

## 示例

```python
hidden = None
for x, y in loader:
    out, hidden = gru(x, hidden)      # GG101：hidden 带着本批次的计算图
    loss = criterion(out, y)
    optimizer.zero_grad()
    loss.backward()                   # 下一批次的 backward 会在这里报错
    optimizer.step()
```

## 修复

保留状态的数值，丢掉它的历史：在每轮迭代开始、还没有任何地方用到它之前先 detach。

```python
hidden = None
for x, y in loader:
    if hidden is not None:
        hidden = hidden.detach()      # LSTM：hidden = tuple(s.detach() for s in hidden)
    out, hidden = gru(x, hidden)
    loss = criterion(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
```

快速修复就是把这样一行插到循环体的第一句。此时这个值要么是循环开始前的初始状态，
要么是上一轮留下来的结果，本轮还没有用过它，所以只切断了迭代*之间*的联系，每轮内部
算出的梯度与原来完全一样。（放在 `backward()` 之后并不总是等价：如果状态在 backward
之后又被重新赋值，或者循环中途 `continue` 跳过了那一行，状态依然会被带到下一轮。）
当第一批之前状态可能是 `None` 时，修复会加上 `None` 判断。另一个可选修复是每轮重置状态，
它同样能消除报错，但也丢掉了批次之间传递的信息。

如果 backward 只在部分迭代里执行（在循环体的 `if` 里：`if prev is not None:`、每 k 个批次一次），
跳过它的那一轮会把完整、仍然有效的计算图交给下一轮，下一轮的 backward 会照程序本意穿过它。
在循环开头 detach 会切断这张还活着的图，改变第一步学到的东西，所以修复把 detach 放在
backward 之后、同一个代码块里。如果状态是在那个代码块之后做的简单拷贝（`prev_out = out`），
就改为在那里 detach 被拷贝的值；如果状态之后又由别的值重新赋值，则不提供修复。

如果在循环传递状态的地方无法判断状态的结构（模型是函数参数，或来自 gradguard 看不到的代码，
它返回的可能是一个张量、一对 `(h, c)`、状态字典，或由状态对组成的列表），修复不会去猜一行 detach，
而是在文件里（需要它的函数之前）只定义一次辅助函数，并在循环开头调用它。这个辅助函数会 detach
状态里的每个张量，同时保留其中的字典、列表、元组和 namedtuple；同一文件里之后的修复会复用它，
也绝不会占用文件里已经用过的名字（代码见上方英文部分的 `_detach_state`）。

## 常见问题

**每个批次直接把状态重置成 `None`（或全零）行不行？**
可以消除报错，但模型每个批次都要从空状态开始。如果批次之间是互相独立的样本，这样做没问题；
如果是一条长序列被切成若干块（语言模型、流式时间序列），这恰恰丢掉了循环状态本该传递的上下文。
这种情况请用 detach。

**用 `hidden.detach()` 还是 `hidden.data`？**
用 `.detach()`。`.data` 同样能拿到不带历史的张量，但它是旧接口：通过它做的修改不会被自动求导记录，
原地修改时可能悄悄算出错误的梯度，而不是报错提醒你。

**我的模型是 LSTM，只 detach `h` 够吗？**
不够。LSTM 的状态是 `(h, c)` 两个张量，两者都连着计算图。只 detach `h`
（`hidden = (hidden[0].detach(), hidden[1])`）照样会通过 `c` 报错。两个都要 detach：
`hidden = tuple(s.detach() for s in hidden)`，或 `h, c = h.detach(), c.detach()`。

**detach 之后，梯度还会跨批次传递吗？**
不会。每个批次只在自己的时间步内反向传播（即截断的时间反向传播，截断长度就是每批的序列长度）。
状态的*数值*仍然会传到下一批，模型保留了上下文，只是梯度在批次边界处被截断。
如果需要更长的梯度路径，请增大每批的序列长度。

**gradguard 无法判断时会怎样？**
默认什么都不报：只有路径上的每一环都能确定（这个值带着计算图、能沿着真实可执行的路径到达下一轮的 backward、
中间没有任何截断）时才报告错误。只要有一环无法确定（调用了 gradguard 没有读到的模块里的函数，
或取自一个各部分并不相同的列表），它就保持沉默。`gradguard check --unverified-notes`
（或 `[tool.gradguard]` 中的 `unverified-notes = true`，或编辑器设置 `unverifiedNotes`）会把这种沉默变成一条
信息级提示，指出是哪个值、它可能到达哪个 backward，以及哪一环无法验证。

**为什么 `loss.backward(retain_graph=True)` 不是正确的修复？**
它只是让 PyTorch 不释放计算图，于是下一次 backward 要回溯本批次*以及之前所有批次*的图：
显存和耗时随步数不断增长。而且 `optimizer.step()` 会原地更新权重，之后再回溯旧图照样会失败，
报错变成 "one of the variables needed for gradient computation has been modified by an inplace
operation"。`retain_graph=True` 的正确用途是在同一轮迭代里对*同一张*图做两次反向传播（这种情况本规则不会报告；
若第一次反向传播释放了第二次需要的部分，GG103 会提示加上它）。
''',
}


# ---------------------------------------------------------------------------
# names in a sentence


def names_en(names: Sequence[str]) -> str:
    q = [f"`{n}`" for n in names]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]


def names_zh(names: Sequence[str]) -> str:
    q = [f"`{n}`" for n in names]
    return "、".join(q)


_ELEM_EN = {0: "the hidden state h", 1: "the cell state c"}
_ELEM_ZH = {0: "隐状态 h", 1: "细胞状态 c"}


# ---------------------------------------------------------------------------
# a value carried from one iteration of a loop into the next one's backward


def carried(names: Sequence[str], bw: str, retain: bool) -> Dict[str, str]:
    """``names`` carry the graph into the next iteration's ``bw`` (``retain``:
    that backward passes ``retain_graph=True``)."""
    retain_en, retain_zh = _retain(retain)
    n_en, n_zh = names_en(names), names_zh(names)
    verb = "carries" if len(names) == 1 else "carry"
    return {
        "en": f"{n_en} {verb} this iteration's autograd graph into the next iteration, where `{bw}` back-propagates "
        f"into that already-freed graph (\"Trying to backward through the graph a second time\"){retain_en}; "
        f"detach {'it' if len(names) == 1 else 'them'} between iterations.",
        "zh": f"{n_zh} 把本轮迭代的计算图带进了下一轮，下一轮的 `{bw}` 会反向传播进这张已经释放的图"
        f"（报错 \"Trying to backward through the graph a second time\"）{retain_zh}；请在两轮之间 detach。",
    }


def carried_element(name: str, bw: str, retain: bool) -> Dict[str, str]:
    """The list ``name`` is carried into the next iteration and its ``bw`` back-propagates
    one of its elements (``list_of_loss[i].backward()``), which may be an earlier iteration's."""
    retain_en, retain_zh = _retain(retain)
    return {
        "en": f"`{name}` carries this iteration's autograd graph into the next iteration, where `{bw}` "
        f"back-propagates an element an earlier iteration put in it, whose graph is already freed "
        f"(\"Trying to backward through the graph a second time\"){retain_en}; back-propagate the loss "
        f"just computed, or empty `{name}` in each iteration.",
        "zh": f"`{name}` 把本轮迭代的计算图带进了下一轮，下一轮的 `{bw}` 反向传播的是之前某轮放进去的元素，"
        f"它的图已经释放（报错 \"Trying to backward through the graph a second time\"）{retain_zh}；"
        f"请对刚算出的 loss 做反向传播，或在每轮清空 `{name}`。",
    }


def carried_list_kept(name: str, bw: str, retain: bool) -> Dict[str, str]:
    """The list ``name``, kept on an object and filled each iteration, is back-propagated
    whole by the helper ``bw``, which never empties it."""
    retain_en, retain_zh = _retain(retain)
    return {
        "en": f"`{name}` keeps every iteration's autograd graph, and `{bw}` back-propagates the whole list each "
        f"time, including what earlier calls already freed (\"Trying to backward through the graph a second "
        f"time\"){retain_en}; empty `{name}` after each call.",
        "zh": f"`{name}` 保存了每轮迭代的计算图，而 `{bw}` 每次都对整个列表做反向传播，包括之前调用已经释放的图"
        f"（报错 \"Trying to backward through the graph a second time\"）{retain_zh}；请在每次调用之后清空 `{name}`。",
    }


def fix_clear_after(name: str, call: str) -> Dict[str, str]:
    return {
        "en": f"Empty `{name}` after each `{call}(...)` (`del {name}[:]`)",
        "zh": f"每次 `{call}(...)` 之后清空 `{name}`（`del {name}[:]`）",
    }


def partly_detached(var: str, missing: Sequence[int], bw: str, retain: bool) -> Dict[str, str]:
    """An LSTM state ``var`` whose elements ``missing`` are still attached."""
    retain_en, retain_zh = _retain(retain)
    parts_en = " and ".join(f"`{var}[{i}]` ({_ELEM_EN.get(i, 'element %d' % i)})" for i in missing)
    parts_zh = "、".join(f"`{var}[{i}]`（{_ELEM_ZH.get(i, '第 %d 个元素' % i)}）" for i in missing)
    return {
        "en": f"The LSTM state `{var}` is only partly detached: {parts_en} still carries this iteration's graph "
        f"into the next iteration's `{bw}`, which fails with \"Trying to backward through the graph a second "
        f"time\"{retain_en}; detach both h and c.",
        "zh": f"LSTM 状态 `{var}` 只 detach 了一部分：{parts_zh} 仍带着本轮的计算图进入下一轮的 `{bw}`，"
        f"会报 \"Trying to backward through the graph a second time\"{retain_zh}；h 和 c 都要 detach。",
    }


def _retain(retain: bool) -> Tuple[str, str]:
    if not retain:
        return "", ""
    return (" (`retain_graph=True` does not fix this: it keeps every batch's graph alive and fails once the optimizer updates the weights in place)",
            "（`retain_graph=True` 不能解决：它让每个批次的图一直留在内存里，优化器原地更新权重后照样报错）")


def built_here(names: Sequence[str]) -> Dict[str, str]:
    """The related note where the carried graph is built."""
    return {
        "en": f"the graph that {names_en(names)} {'carries' if len(names) == 1 else 'carry'} is built here",
        "zh": f"{names_zh(names)} 携带的计算图在这里构建",
    }


def reaches_freed(names: Sequence[str]) -> Dict[str, str]:
    """The related note at the backward that reaches the previous iteration's graph."""
    return {
        "en": f"this backward() reaches the previous iteration's freed graph through {names_en(names)}",
        "zh": f"这里的 backward() 会经由 {names_zh(names)} 回溯到上一轮已释放的计算图",
    }


def helper_reaches_freed(helper: str, names: Sequence[str]) -> Dict[str, str]:
    """The same, at a call of a same-file ``helper`` that back-propagates its argument."""
    return {
        "en": f"`{helper}(...)` calls backward() on a graph that reaches the previous iteration's freed graph "
        f"through {names_en(names)}",
        "zh": f"`{helper}(...)` 内部调用了 backward()，其计算图经由 {names_zh(names)} 连到上一轮已释放的图",
    }


def fix_detach_at_top(names: Sequence[str]) -> Dict[str, str]:
    return {
        "en": f"Detach {names_en(names)} at the start of each iteration (keeps the state, cuts the graph)",
        "zh": f"在每轮迭代开始时 detach {names_zh(names)}（保留状态，切断计算图）",
    }


def fix_detach_after_backward(names: Sequence[str]) -> Dict[str, str]:
    return {
        "en": f"Detach {names_en(names)} after this iteration's backward() (keeps the state, cuts the graph)",
        "zh": f"在本轮 backward() 之后 detach {names_zh(names)}（保留状态，切断计算图）",
    }


def fix_detach_source_after_backward(sources: Sequence[str], names: Sequence[str]) -> Dict[str, str]:
    return {
        "en": f"Detach {names_en(sources)} after this iteration's backward(), before it becomes {names_en(names)} "
              "(keeps the state, cuts the graph only where the backward ran)",
        "zh": f"在本轮 backward() 之后、赋给 {names_zh(names)} 之前 detach {names_zh(sources)}"
              "（保留状态，只在执行了 backward 的迭代切断计算图）",
    }


def fix_reset_to_none(names: Sequence[str]) -> Dict[str, str]:
    return {
        "en": f"Reset {names_en(names)} to None at the start of each iteration (loses the state carried between batches)",
        "zh": f"每轮迭代开始时把 {names_zh(names)} 重置为 None（会丢失跨批次传递的状态）",
    }


# ---------------------------------------------------------------------------
# state kept on a module or between calls


def module_state(key: str, via: str, fname: str) -> Dict[str, str]:
    """``key`` (``self.h``) kept on the module by method ``fname``, which a
    training loop calls through ``via``."""
    return {
        "en": f"`{key}` keeps this call's autograd graph on the module, and the next call (the next training "
        f"iteration, through `{via}(...)`) builds on it, so that iteration's backward() runs into the "
        f"already-freed graph (\"Trying to backward through the graph a second time\"); detach it at the start "
        f"of `{fname}`.",
        "zh": f"`{key}` 把本次调用的计算图留在了模块上，下一次调用（即下一轮训练迭代中的 `{via}(...)`）"
        f"会接着它继续计算，那一轮的 backward() 就会回溯进已经释放的图（报错 \"Trying to backward through "
        f"the graph a second time\"）；请在 `{fname}` 开头对它 detach。",
    }


def state_built_here(key: str) -> Dict[str, str]:
    return {"en": f"the graph that `{key}` keeps is built here",
            "zh": f"`{key}` 保留的计算图在这里构建"}


def call_state(key: str, fname: str, bw: str) -> Dict[str, str]:
    """``key`` kept between calls of ``fname``, whose ``bw`` back-propagates it."""
    return {
        "en": f"`{key}` is kept between calls of `{fname}` still attached to this call's autograd graph, and "
        f"the next call's `{bw}` back-propagates into that already-freed graph (\"Trying to backward through "
        f"the graph a second time\"); detach it at the start of `{fname}`.",
        "zh": f"`{key}` 在两次调用 `{fname}` 之间被保留下来，却仍连着本次调用的计算图，下一次调用中的 `{bw}` "
        f"会反向传播进这张已经释放的图（报错 \"Trying to backward through the graph a second time\"）；"
        f"请在 `{fname}` 开头对它 detach。",
    }


def next_call_reaches(key: str) -> Dict[str, str]:
    return {
        "en": f"the next call's backward() reaches the freed graph through `{key}`",
        "zh": f"下一次调用时，这里的 backward() 会经由 `{key}` 回溯到已释放的计算图"}


def fix_detach_at_method_top(key: str, fname: str) -> Dict[str, str]:
    return {"en": f"Detach `{key}` at the start of `{fname}` (keeps the state, cuts the graph)",
            "zh": f"在 `{fname}` 开头 detach `{key}`（保留状态，切断计算图）"}


def container_state(net: str, cls: str) -> Dict[str, str]:
    """A ``cls`` inside ``net`` (a library neuron) keeps its state on the module."""
    return {
        "en": f"`{net}(...)` runs a `{cls}` that keeps its state on the module between calls, computed from this "
        f"iteration's autograd graph; nothing in the loop resets it, so the next iteration's backward() runs into "
        f"the already-freed graph (\"Trying to backward through the graph a second time\"). Reset it every "
        f"iteration (snntorch: `utils.reset({net})`; spikingjelly: `functional.reset_net({net})`) or detach it.",
        "zh": f"`{net}(...)` 里的 `{cls}` 会在两次调用之间把状态保存在模块上，而这个状态来自本轮迭代的计算图；"
        f"循环里没有重置它，于是下一轮的 backward() 会回溯进已经释放的图（报错 \"Trying to backward through the "
        f"graph a second time\"）。请每轮重置它（snntorch：`utils.reset({net})`；spikingjelly："
        f"`functional.reset_net({net})`）或对它做 detach。",
    }


def fix_detach_container_state(net: str, cls: str) -> Dict[str, str]:
    return {"en": f"Detach the state of every `{cls}` in `{net}` before calling it (keeps the state, cuts the graph)",
            "zh": f"调用 `{net}` 之前 detach 其中每个 `{cls}` 的状态（保留状态，切断计算图）"}


def imported_state(callee: str, ctor: str, state: str) -> Dict[str, str]:
    """``callee``, an instance of the imported ``ctor``, keeps its state in ``state``."""
    return {
        "en": f"`{callee}(...)` runs `{ctor}.forward`, which keeps its state in `{state}` still attached to this "
        f"iteration's autograd graph and starts the next call from it; the next iteration's backward() then runs "
        f"into the already-freed graph (\"Trying to backward through the graph a second time\"). Detach "
        f"`{state}` before the call (or reset it every iteration).",
        "zh": f"`{callee}(...)` 会执行 `{ctor}.forward`，它把状态保存在 `{state}` 里，而这个状态仍连着本轮迭代的"
        f"计算图，下一次调用又从它开始计算；于是下一轮的 backward() 会回溯进已经释放的图（报错 \"Trying to "
        f"backward through the graph a second time\"）。请在调用前对 `{state}` 做 detach（或每轮迭代重置它）。",
    }


def fix_detach_before_call(state: str, callee: str) -> Dict[str, str]:
    return {"en": f"Detach `{state}` before calling `{callee}` (keeps the state, cuts the graph)",
            "zh": f"在调用 `{callee}` 之前 detach `{state}`（保留状态，切断计算图）"}


def member_states(net: str, shown: Sequence[Tuple[str, str]]) -> Dict[str, str]:
    """Modules inside ``net`` keep their state on themselves; ``shown``: each
    one's attribute and class name."""
    listed = ", ".join(f"`{net}.{attr}` ({cls})" for attr, cls in shown)
    return {
        "en": f"`{net}(...)` runs modules that keep their state on themselves between calls ({listed}), computed from "
        f"this iteration's autograd graph; nothing in the loop resets them, so the next iteration's backward() runs "
        f"into the already-freed graph (\"Trying to backward through the graph a second time\"). Reset them every "
        f"iteration (snntorch: `utils.reset({net})`; spikingjelly: `functional.reset_net({net})`) or detach them.",
        "zh": f"`{net}(...)` 运行的模块会在两次调用之间把状态保存在自身上（{listed}），而这个状态来自本轮迭代的计算图；"
        f"循环里没有重置它们，于是下一轮的 backward() 会回溯进已经释放的图（报错 \"Trying to backward through the "
        f"graph a second time\"）。请每轮重置它们（snntorch：`utils.reset({net})`；spikingjelly："
        f"`functional.reset_net({net})`）或对它们做 detach。",
    }


def member_caches(net: str, shown: Sequence[Tuple[str, str]]) -> Dict[str, str]:
    """Modules inside ``net`` cache a tensor computed on their first call (``self.build()``
    storing an embedding of the positions) and hand it back on every later call."""
    listed = ", ".join(f"`{net}.{attr}` ({cls})" for attr, cls in shown)
    return {
        "en": f"`{net}(...)` runs modules that compute a tensor once, on their first call, keep it on themselves and "
        f"use it again on every later call ({listed}); it stays attached to the autograd graph of the call that "
        f"computed it, so the next iteration's backward() runs into that already-freed graph (\"Trying to backward "
        f"through the graph a second time\"). Compute it afresh in every call if it must be trained by every step, "
        f"or keep it detached.",
        "zh": f"`{net}(...)` 运行的模块在第一次调用时算出一个张量，把它保存在自身上，之后每次调用都再用它（{listed}）；"
        f"它仍连着算出它的那次调用的计算图，于是下一轮的 backward() 会回溯进那张已经释放的图（报错 \"Trying to "
        f"backward through the graph a second time\"）。如果每一步都要训练它，请在每次调用时重新计算；否则请保存 detach "
        f"后的值。",
    }


def parametrize_cached(module: str, line: int, bw: str) -> Dict[str, str]:
    """A training loop inside ``with parametrize.cached():`` (opened on ``line``)."""
    return {
        "en": f"`{module}(...)` uses a parametrized weight inside `parametrize.cached()` (line {line}), which computes "
        f"it once, on its first use in the block, and hands that same tensor, still on the first call's autograd "
        f"graph, to every later call; this loop inside the block back-propagates it again in the next iteration's "
        f"`{bw}`, into the already-freed graph (\"Trying to backward through the graph a second time\"). Open "
        f"`parametrize.cached()` inside each iteration, around its forward and backward, or only around evaluation.",
        "zh": f"`{module}(...)` 在 `parametrize.cached()`（第 {line} 行）中使用了参数化的权重：它只在块内第一次使用时计算一次，"
        f"之后每次调用都拿到同一个张量，而它仍连着第一次调用的计算图；块内的这个循环在下一轮的 `{bw}` 中再次对它反向传播，"
        f"回溯进已经释放的图（报错 \"Trying to backward through the graph a second time\"）。请在每轮迭代内部、"
        f"围绕该轮的前向和反向打开 `parametrize.cached()`，或者只在评估时使用它。",
    }


def parametrize_block() -> Dict[str, str]:
    return {"en": "the block that computes each parametrized weight once", "zh": "这个块只计算一次每个参数化的权重"}


def parametrize_computed() -> Dict[str, str]:
    return {"en": "the parametrized weight is computed here, by the block's first call, and kept",
            "zh": "参数化的权重在这里由块内的第一次调用计算并保留下来"}


def parametrize_reached() -> Dict[str, str]:
    return {"en": "this backward() reaches the weight's graph, which the previous iteration's backward() freed",
            "zh": "这次 backward() 到达了该权重的计算图，而上一轮的 backward() 已经释放了它"}


def fix_detach_member_states(net: str) -> Dict[str, str]:
    return {"en": f"Detach the state of every stateful module in `{net}` at the start of each iteration "
                  f"(keeps the state, cuts the graph)",
            "zh": f"在每轮迭代开始时 detach `{net}` 中每个有状态模块的状态（保留状态，切断计算图）"}


# ---------------------------------------------------------------------------
# a cache a module keeps and hands back


def kept_cache(base: str, name: str, cls: str, bw: str) -> Dict[str, str]:
    """``base(...)`` hands back ``name``, cached on the module by ``cls.forward``."""
    return {
        "en": f"`{base}(...)` hands back `{name}`, which `{cls}.forward` computed on an earlier call and keeps on the "
        f"module still attached to that call's autograd graph; the next iteration's `{bw}` back-propagates into "
        f"that already-freed graph (\"Trying to backward through the graph a second time\"). Detach the cache "
        f"(it stays as it is), compute it afresh every iteration if `{base}` must be trained by every step, or "
        f"freeze `{base}` (`{base}.requires_grad_(False)`) / fill the cache under `torch.no_grad()`.",
        "zh": f"`{base}(...)` 返回的是 `{name}`：`{cls}.forward` 在之前某次调用时算出它并缓存在模块上，它仍连着那次调用的"
        f"计算图；下一轮的 `{bw}` 会反向传播进这张已经释放的图（报错 \"Trying to backward through the graph a second "
        f"time\"）。请对缓存 detach（值保持不变）；如果每一步都要训练 `{base}`，就每轮重新计算它；"
        f"或者冻结 `{base}`（`{base}.requires_grad_(False)`），或在 `torch.no_grad()` 下填充缓存。",
    }


def framework_state(name: str, method: str, ret: str) -> Dict[str, str]:
    """``name`` kept on the module by ``method``, which the framework (Lightning) calls in
    a loop, back-propagating what it returns (``ret``) and stepping after each call."""
    return {
        "en": f"`{name}` keeps this step's autograd graph on the module: the framework calls `{method}` again and again, "
              f"back-propagating what it returns (`{ret}`) and stepping the optimizer after each call, so the next "
              f"step's loss back-propagates into the graph this step kept, which that backward freed or whose saved "
              f"weights the step changed in place (\"Trying to backward through the graph a second time\" or \"modified "
              f"by an inplace operation\"). Keep it detached (`.detach()` where it is stored) or compute it afresh in "
              f"each step.",
        "zh": f"`{name}` 把这一步的计算图保存在模块上：框架会反复调用 `{method}`，对它返回的 `{ret}` 做反向传播，"
              f"并在每次调用之后执行优化器的 step，所以下一步的损失会反向传播进这一步保存的计算图，而那张图已被释放，"
              f"或其保存的权重已被 step 原地修改（报错 \"Trying to backward through the graph a second time\" 或 "
              f"\"modified by an inplace operation\"）。请在保存它的地方 `.detach()`，或在每一步重新计算它。",
    }


def saved_weights_here(module: str) -> Dict[str, str]:
    return {"en": f"its graph saved the weights of `{module}` here, which the optimizer step changes",
            "zh": f"它的计算图在这里保存了 `{module}` 的权重，而优化器的 step 会修改这些权重"}


def framework_backward(ret: str) -> Dict[str, str]:
    return {"en": f"the framework back-propagates `{ret}` after each call, then steps the optimizer",
            "zh": f"每次调用之后，框架对 `{ret}` 反向传播，再执行优化器的 step"}


def fix_detach_cache(name: str) -> Dict[str, str]:
    return {"en": f"Detach `{name}` at the start of each iteration (keeps the cached value, cuts the graph)",
            "zh": f"在每轮迭代开始时 detach `{name}`（保留缓存的值，切断计算图）"}


def fix_empty_cache(name: str, base: str) -> Dict[str, str]:
    return {"en": f"Empty `{name}` at the start of each iteration, so `{base}` computes it afresh "
                  f"(and is trained) every iteration",
            "zh": f"在每轮迭代开始时清空 `{name}`，让 `{base}` 每轮重新计算它（并得到训练）"}


# ---------------------------------------------------------------------------
# notes on paths that cannot be verified (``unverified-notes``, off by default)


def unverified(kind: str, name: str, bw: str, why: str) -> Dict[str, str]:
    """``name`` may reach ``bw``; ``why`` is the unknown link, of ``kind``
    "imported", "container" or (otherwise) an untyped module."""
    if kind == "imported":
        link_en = (f"`{why}` calls a function imported from a module gradguard has not read, so whether its result "
                   f"keeps its arguments' graph is unknown")
        link_zh = f"`{why}` 调用的函数来自 gradguard 没有读到的模块，无法知道它的返回值是否保留了参数的计算图"
    elif kind == "container":
        link_en = (f"`{why}` takes a part of a container whose parts differ (some hold a graph, some do not), so "
                   f"whether this part holds one is unknown")
        link_zh = f"`{why}` 取自一个各部分并不相同的容器（有的带计算图，有的不带），无法知道这一部分是否带计算图"
    else:
        link_en = f"`{why}` calls a module whose class cannot be told, so what it returns is unknown"
        link_zh = f"`{why}` 调用的模块无法确定其类型，无法知道它返回什么"
    return {
        "en": f"The path could not be verified: `{name}` may carry this iteration's autograd graph into the next "
        f"iteration's `{bw}`, but {link_en}. If it does, that backward fails with \"Trying to backward through the "
        f"graph a second time\"; detaching `{name}` between iterations is safe either way.",
        "zh": f"无法验证这条路径：`{name}` 可能把本轮迭代的计算图带进下一轮的 `{bw}`，但{link_zh}。"
        f"如果确实如此，那次 backward 会报错 \"Trying to backward through the graph a second time\"；"
        f"无论哪种情况，在两轮之间对 `{name}` 做 detach 都是安全的。",
    }


def unknown_link() -> Dict[str, str]:
    return {"en": "this link of the path is unknown", "zh": "路径上的这一环无法确定"}


def may_reach(name: str) -> Dict[str, str]:
    return {"en": f"the backward `{name}` may reach",
            "zh": f"`{name}` 可能到达的 backward"}
