"""GG101 carried-graph: a value with an autograd graph is carried from one
iteration of a back-propagating loop into the next one's backward().

Detection runs the graph interpreter of :mod:`gradguard.analysis.interpreter` over the
unit: a back-propagating loop body is walked once to learn which values an
iteration leaves behind still attached to a graph that iteration's backward
traversed (and so freed), then once more with those values marked as carried;
a carried mark reaching a backward (directly, or through a same-file helper
that back-propagates its argument) is the bug.

Assumptions about code it cannot see (chosen so that the common bug is caught
and the common correct idioms stay silent):

* a callable held in a variable or parameter (``model(x)``) is a module: its
  result has a graph; a same-file ``nn.Module`` class is read instead (its
  ``forward`` may detach, its submodules may be frozen);
* ``out, h = f(x, h)`` / ``h = obj(x, h)`` through anything unseen threads a
  recurrent state, with a graph;
* ``h = helper(h)`` with a helper it cannot see (imported) is a repackaging
  helper (a cut) — the usual reason to write that line; a same-file helper is
  judged by its body instead, whatever its name;
* ``create_graph=True`` steps keep graphs on purpose (MAML-style unrolling).

State kept between *calls* (``global h`` in a step function, ``self.h`` in a
module's ``forward`` driven by a training loop) is the same bug one level up.
"""

from __future__ import annotations

import ast
import re

from gradguard.analysis import facts as _facts
from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis import values as V
from gradguard.analysis import interpreter as interp
from gradguard.analysis.context import unit_text, unit_words
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule
from gradguard.rules.common import unit_trace

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple


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


class CarriedGraph(Rule):
    code = "GG101"
    name = "carried-graph"
    default_severity = Severity.ERROR
    needs_backprop = True
    fact_sources = (_facts.GRAPH_FACTS,)
    title = {
        "en": "A value with an autograd graph is carried into the next iteration's backward()",
        "zh": "带计算图的值被带入下一轮迭代的 backward()",
    }
    explanation = EXPLANATION

    def check(self, unit, ctx):
        if not _worth_running(unit, ctx) and not _maybe_stateful(unit, ctx):
            return ()
        if K.other_framework_only(ctx.imports):
            return ()  # mxnet/paddle/...: not a torch program
        if unit.kind == "function" and A.is_no_grad_function(unit.node, ctx):
            return ()
        flow = unit_trace(unit, ctx)
        if flow is None:
            return ()
        self_obj = flow.self_obj
        stateful = unit.kind == "function" and unit.node is not None
        out = []
        for carry in flow.carries:
            f = _finding(self, carry, flow, ctx, unit)
            if f is not None:
                out.append(f)
        if stateful:
            done = set()
            for f in _call_state_findings(self, unit, flow, ctx):
                done.add(f.data["variable"])
                out.append(f)
            if self_obj is not None:
                out.extend(f for f in _stateful_findings(self, unit, flow, ctx) if f.data["variable"] not in done)
        out.extend(_imported_state_findings(self, unit, ctx))
        out.extend(_container_state_findings(self, unit, ctx))
        if ctx.unverified:
            out.extend(_unverified_note(self, u, ctx) for u in flow.unverified)
        return out


# ---------------------------------------------------------------------------
# pre-filter: one cheap walk; most units have no loop or no backward at all
# ---------------------------------------------------------------------------
def _worth_running(unit, ctx) -> bool:
    """Cheap pre-filter on the unit's TEXT: a loop keyword and something that
    back-propagates (a backward/grad call, or a same-file helper that does)."""
    if not unit.body:
        return False
    text = unit_text(unit, ctx.index.lines)
    words = unit_words(unit, ctx.index.lines)
    if "for" not in words and "while" not in words:  # keywords as words: "forward" is no loop
        # no loop: only state kept between calls (global h / self.h) can be carried
        if unit.kind != "function" or ("global" not in text and unit.class_node is None):
            return False
    if "backward" in text or "grad(" in text:
        return True
    # names of same-file helpers that back-propagate: a word lookup per name
    # (substring scans for every helper name made large files quadratic)
    return query(ctx.summary, _mentions_backprop_helper, words)


def _mentions_backprop_helper(summary, words: frozenset) -> bool:
    """Does a unit with these words name a same-file function or method that
    back-propagates? (A summary query: the incremental engine re-asks it.)"""
    _, bw_methods, bw_functions = _summary_index(summary)
    if not bw_functions and len(bw_methods) <= 1:
        return False
    return not words.isdisjoint(bw_functions) or any(n in words for n in bw_methods if n != "grad")


def _maybe_stateful(unit, ctx) -> bool:
    """A method of a class some back-propagating loop in this file drives."""
    if unit.class_node is None or unit.node is None:
        return False
    return bool(_driving_loops(unit, ctx))


_INDEX_CACHE: list = [None, None]  # [summary object, index]: the engine builds one summary per analysis


def _summary_index(summary):
    """Per-summary index (built once, not once per unit): loop-call entries and the
    names of same-file methods that back-propagate."""
    if _INDEX_CACHE[0] is summary:
        return _INDEX_CACHE[1]
    loopcalls: Dict[str, list] = {}  # class short name ("" = untyped) → entries
    bw_methods = {"grad"}
    bw_functions = set()
    delegating: list = []  # (the set its name joins if it back-propagates, name, facts)
    for key, value in summary.items():
        if key.startswith("loopcalls:") and isinstance(value, frozenset):
            for entry in value:
                callee, ctor = entry[0], entry[1]
                if not ctor:
                    raw = summary.get("var:" + callee)
                    ctor = raw if isinstance(raw, str) else ""
                    if not ctor and ("." in callee or "fn:" + callee in summary or "class:" + callee in summary
                                     or "import:" + callee in summary):
                        continue  # a function, a class, an import: not an instance we could not type
                loopcalls.setdefault(ctor.rsplit(".", 1)[-1], []).append(entry)
        elif isinstance(value, V.ClassFacts):
            bw_methods.update(name for name, m in value.methods if m.calls_backward)
            delegating.extend((bw_methods, name, m) for name, m in value.methods
                              if m.delegates and not m.calls_backward and not m.no_grad)
        elif isinstance(value, V.FnFacts) and key.startswith("fn:"):
            if value.calls_backward:
                bw_functions.add(key[3:])
            elif value.delegates and not value.no_grad:
                delegating.append((bw_functions, key[3:], value))
    # back-propagating through the module-level functions they call (FnFacts.delegates)
    grew = True
    while grew and delegating:
        grew = False
        for entry in list(delegating):
            joins, name, facts = entry
            if any(d[0] in bw_functions for d in facts.delegates):
                joins.add(name)
                delegating.remove(entry)
                grew = True
    index = (loopcalls, frozenset(bw_methods), frozenset(bw_functions))
    _INDEX_CACHE[0], _INDEX_CACHE[1] = summary, index
    return index


_MODEL_WORDS = ("model", "net", "rnn", "lstm", "gru", "encoder", "decoder", "cell", "lm")


def _driving_loops(unit, ctx) -> Iterable[Tuple[str, frozenset, frozenset]]:
    """(callee, methods called on it, attributes assigned on it) for every object
    of this method's class called in a back-propagating loop of the file."""
    own = frozenset(s.name for s in unit.class_node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return query(ctx.summary, _driving_entries, unit.class_node.name, unit.node.name, own)


def _driving_entries(summary, cls: str, meth: str, own: frozenset) -> Iterable[Tuple[str, frozenset, frozenset]]:
    """The entries of the class's own and of untyped callees that call ``meth``,
    most likely driver first: typed entries first; then the objects on which the
    loop calls more of this class's own methods (``model.reset()``); then names
    that read like a model rather than a loss (``model``/``net``/``rnn`` before
    ``criterion``); then by name (the facts are sets, whose order changes from
    process to process); ties in index order, the class's entries first.

    Not quadratic in the file: the untyped entries are ordered once per analysis
    (:func:`_untyped_order`) and their answer for a method name made once; an
    entry sharing none of this class's method names keeps that order, so a class
    without typed entries or sharing ones gets that answer as it is, and
    otherwise only those few are placed one by one. (Sorting every untyped
    entry for every method of every class cost a 5 MB generated file 20 s.)"""
    index = _summary_index(summary)[0]

    def matches(methods) -> bool:
        return meth in methods or (meth == "forward" and "__call__" in methods)

    def likeness(entry):
        callee, ctor, methods, _ = entry
        low = callee.lower()
        return (not ctor, -len(methods & own), not any(w in low for w in _MODEL_WORDS), callee)

    order, by_name, ranked, shared = _untyped_order(summary, index)
    got = ranked.get(meth)
    if got is None:  # the untyped entries calling ``meth``, in order: once per method name
        pos_ = set(by_name.get(meth, ()))
        if meth == "forward":
            pos_.update(by_name.get("__call__", ()))
        base = sorted(pos_)
        got = ranked[meth] = (base, [_public(order[p]) for p in base])
    base, answer = got
    # untyped entries that call one of the class's own methods move ahead, by how
    # many they call: once per (those of its names some loop calls, method), for
    # every class that has them
    called = frozenset(name for name in own if name in by_name)  # not own & by_name: that walks the dict
    moving = shared.get((called, meth))
    if moving is None:
        sharing = sorted({pos for name in called for pos in by_name[name]})
        ahead = sorted((order[pos] for pos in sharing if matches(order[pos][2])), key=likeness)
        moving = shared[(called, meth)] = (frozenset(sharing), [(likeness(e), e) for e in ahead])
    moved, ahead_keyed = moving
    typed = [e for e in index.get(cls, []) if matches(e[2])]
    if not typed and not moved:
        return answer  # shared by every class in this position (read only)
    if typed:  # the class's entries before untyped ones of the same rank
        ahead_keyed = sorted([(likeness(e), e) for e in typed] + ahead_keyed, key=lambda ke: ke[0])
    return _Merged(ahead_keyed, base, moved, order, likeness)


class _Merged:
    """The answer of :func:`_driving_entries` when some entries move ahead of the
    shared order: ``special`` (few, sorted) merged into the untyped entries at
    ``base`` (less those ``moved``), as (callee, methods, attrs), each special
    one before the first entry that does not rank above it. Made as it is read:
    a reader that stops at the first live loop does not pay for the rest."""

    __slots__ = ("_special", "_base", "_moved", "_order", "_key")

    def __init__(self, special, base, moved, order, key):
        self._special, self._base, self._moved, self._order, self._key = special, base, moved, order, key

    def __iter__(self):
        special, moved, order, key = self._special, self._moved, self._order, self._key
        i, n = 0, len(special)
        for pos in self._base:
            if pos in moved:
                continue
            e = order[pos]
            if i < n:
                k = key(e)
                while i < n and special[i][0] <= k:
                    yield _public(special[i][1])
                    i += 1
            yield _public(e)
        while i < n:
            yield _public(special[i][1])
            i += 1

    def __bool__(self) -> bool:
        return bool(self._special) or any(pos not in self._moved for pos in self._base)

    def __eq__(self, other) -> bool:  # FactTable.still_answers compares answers
        if isinstance(other, (list, _Merged)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _public(entry) -> Tuple[str, frozenset, frozenset]:
    callee, _, methods, attrs = entry
    return (callee, methods, attrs)


_UNTYPED_CACHE: list = [None, None]  # [summary object, what _untyped_order returns for it]


def _untyped_order(summary, index):
    """The untyped entries in the order they rank for a class none of whose
    method names they call (stable: index order among equals), each entry's
    positions by method name, and two memos filled as methods are asked about:
    per method name, the positions (and answer) of the entries calling it; per
    (method names, method), the entries that move ahead."""
    if _UNTYPED_CACHE[0] is summary:
        return _UNTYPED_CACHE[1]
    entries = index.get("", [])
    order = sorted(entries, key=lambda e: (not e[1], 0, not any(w in e[0].lower() for w in _MODEL_WORDS), e[0]))
    by_name: Dict[str, List[int]] = {}
    for pos, e in enumerate(order):
        for name in e[2]:
            by_name.setdefault(name, []).append(pos)
    cached: tuple = (order, by_name, {}, {})
    _UNTYPED_CACHE[0], _UNTYPED_CACHE[1] = summary, cached
    return cached


def _stateful_findings(rule, unit, flow: interp.GraphFlow, ctx) -> List[Finding]:
    """``out, self.hidden = self.rnn(x, self.hidden)`` in a module's forward, with
    the module called by a training loop that never resets or detaches the state."""
    states = flow.self_states()
    if not states:
        return []
    loops = _driving_loops(unit, ctx)
    if not loops:
        return []
    cf = ctx.summary.get("class:" + unit.class_node.name)
    out = []
    for key, v in states:
        attr = key.split(".", 1)[1]
        cutting = cf.methods_cutting(key) if isinstance(cf, V.ClassFacts) else frozenset()
        cutting = cutting - {unit.node.name}
        # the first loop that neither resets nor detaches it (lazily: the loops may be many)
        live = next((c for c, methods, attrs in loops if not (methods & cutting) and attr not in attrs), None)
        if live is None or v.site is None:
            continue
        built = interp._built_by(v)
        # no backward event: a probe for the state's shape, which _structure reads without one
        carry = V.Carry(unit.node, (key,), v.site, built, None, (), len(v.elems) if v.elems else None, {}, {})  # type: ignore[arg-type]
        shape = _structure(carry, flow, ctx, unit)
        if isinstance(cf, V.ClassFacts) and any(k == key and sh == "list" for k, sh, _ in cf.carried):
            shape = "list"  # self.states = [...] and self.states[i] = ...: it must stay a list
        elif _one_of_a_pair(v.site, key):
            shape = "tensor"  # self.h, self.c = self.cell(obs, (self.h, self.c)): each one is a tensor
        via = live if unit.node.name == "forward" else f"{live}.{unit.node.name}"
        msg = {
            "en": f"`{key}` keeps this call's autograd graph on the module, and the next call (the next training "
            f"iteration, through `{via}(...)`) builds on it, so that iteration's backward() runs into the "
            f"already-freed graph (\"Trying to backward through the graph a second time\"); detach it at the start "
            f"of `{unit.node.name}`.",
            "zh": f"`{key}` 把本次调用的计算图留在了模块上，下一次调用（即下一轮训练迭代中的 `{via}(...)`）"
            f"会接着它继续计算，那一轮的 backward() 就会回溯进已经释放的图（报错 \"Trying to backward through "
            f"the graph a second time\"）；请在 `{unit.node.name}` 开头对它 detach。",
        }
        related = []
        if built is not None:
            related.append(Related(ctx.range(built), {"en": f"the graph that `{key}` keeps is built here",
                                                      "zh": f"`{key}` 保留的计算图在这里构建"}))
        fixes = _method_top_fix(unit, key, shape, ctx)
        out.append(Finding(rule.code, ctx.line_range(v.site), msg, rule.default_severity, tuple(related), fixes,
                           {"variable": key, "variables": [key], "stateful": True}))
    return out


def _imported_state_findings(rule, unit, ctx) -> List[Finding]:
    """``out = net(x)`` in a training loop, ``net`` an instance of a class
    imported from another file whose forward keeps its recurrent state on the
    module (``ClassFacts.carried``), and the loop neither resets that state nor
    calls a method that cuts it. A class of this file is reported in its own
    forward (:func:`_stateful_findings`); one from another file is reported
    here, where the loop is, with the detach put before the call."""
    summary = ctx.summary
    imported = query(summary, _imported_stateful_classes)
    if not imported:
        return []
    ctors, loops = _facts.backprop_loops(unit.body)
    if not loops:
        return []
    # instances of the imported classes, whatever their names look like (`fMRI_LSTM(...)`)
    for node in A.iter_statements(unit.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            made = _facts.instance_of(node.value)
            if made is not None and made in imported:
                ctors[node.targets[0].id] = made
    out = []
    for loop in loops:
        for callee, (call, methods, attrs) in _facts.loop_call_sites(loop, {}).items():
            if call is None or "." in callee or not ({"__call__", "forward"} & methods):
                continue
            ctor = ctors.get(callee) or summary.get("var:" + callee) or summary.get("inst:" + callee)
            if not isinstance(ctor, str) or ctor not in imported:
                continue
            cf = summary.get("class:" + ctor)
            if not isinstance(cf, V.ClassFacts):
                continue
            for key, shape, maybe_none in cf.carried:
                attr = key.split(".", 1)[1]
                if attr in attrs or methods & cf.methods_cutting(key):
                    continue  # the loop resets it, or calls a method of the class that cuts it
                out.append(_imported_state_finding(rule, unit, ctx, loop, call, callee, ctor, attr, shape, maybe_none))
    return out


def _container_state_findings(rule, unit, ctx) -> List[Finding]:
    """``net = nn.Sequential(nn.Linear(3, 4), Leaky(beta, init_hidden=True), ...)``
    and a back-propagating loop calling ``net(x)`` without resetting it (issue 12,
    shape 1): the neuron keeps its membrane potential on itself, computed from the
    layer before it, so the next iteration's backward runs into this one's freed
    graph. The neuron is a library one of the knowledge table
    (``STATEFUL_LIBRARY_MODULES``) or a class of this file whose forward rebuilds
    state on ``self`` from its input and its last value (``ClassFacts.keeps_input``).
    A loop that calls anything named like a reset (``utils.reset(net)``,
    ``functional.reset_net(net)``, ``reset_mem()``, ``detach_hidden()``) says nothing."""
    if unit.kind != "module" or "Sequential" not in unit_text(unit, ctx.index.lines) and "ModuleList" not in unit_text(unit, ctx.index.lines):
        return []
    resolver = interp.Resolver(ctx)
    nets: Dict[str, Tuple[str, Tuple[str, ...], ast.Call]] = {}
    for node in A.iter_statements(unit.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found = _stateful_member(node.value, resolver, ctx)
            if found is not None:
                nets[node.targets[0].id] = found
    if not nets:
        return []
    _, loops = _facts.backprop_loops(unit.body)
    out = []
    for loop in loops:
        sites = _facts.loop_call_sites(loop, {})
        if any(name.rsplit(".", 1)[-1] in K.STATE_RESET_CALLS for name in sites if "__call__" in sites[name][1]):
            continue
        for name, (cls, attrs, _made) in nets.items():
            call = sites.get(name, [None])[0]
            if call is None or "__call__" not in sites[name][1]:
                continue
            if attrs and _detaches_attr(loop, attrs):
                continue  # for m in net.modules(): m.mem = m.mem.detach()
            out.append(_container_state_finding(rule, ctx, loop, call, name, cls, attrs))
    return out


def _one_of_a_pair(site, key: str) -> bool:
    """``self.h, self.c = ...``: ``key`` is one of a tuple of the object's own
    attributes (an LSTMCell's pair unpacked), not a state tuple of its own."""
    if not isinstance(site, ast.Assign) or len(site.targets) != 1 or not isinstance(site.targets[0], ast.Tuple):
        return False
    names = [A.dotted(e) for e in site.targets[0].elts]
    return key in names and len(names) >= 2 and all(n is not None and n.startswith("self.") for n in names)


def _detaches_attr(loop: ast.stmt, attrs: Tuple[str, ...]) -> bool:
    """Does the loop body assign ``<x>.<attr> = ...detach()`` for one of ``attrs``?"""
    for node in A.block_nodes(loop.body):  # type: ignore[attr-defined]
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr in attrs for t in node.targets):
            if A.is_graph_cut(node.value):
                return True
    return False


def _stateful_member(value: ast.expr, resolver, ctx) -> Optional[Tuple[str, Tuple[str, ...], ast.Call]]:
    """(class, state attributes, its call) of the stateful neuron inside an
    ``nn.Sequential(...)`` / ``nn.ModuleList([...])`` that also holds a module
    with parameters before or after it (its input or output has a graph)."""
    if not isinstance(value, ast.Call):
        return None
    q = resolver.qualify(value.func) or ""
    if q.rsplit(".", 1)[-1] not in ("Sequential", "ModuleList") or not q.startswith("torch.nn"):
        return None
    items: List[ast.expr] = list(value.args)
    if len(items) == 1 and isinstance(items[0], (ast.List, ast.Tuple)):
        items = list(items[0].elts)
    found = None
    others = 0
    for it in items:
        if not isinstance(it, ast.Call):
            continue
        iq = resolver.qualify(it.func) or ""
        lib = K.STATEFUL_LIBRARY_MODULES.get(iq, False)
        if lib is not False and (lib is None or any(k.arg == lib and isinstance(k.value, ast.Constant)
                                                    and k.value.value is True for k in it.keywords)):
            found = found or (iq.rsplit(".", 1)[-1], (), it)
            continue
        name = A.dotted(it.func)
        cf = resolver.cls(name) if name else None
        if cf is not None and cf.keeps_input and not cf.carried:
            found = found or (name, tuple(k[5:] for k in cf.keeps_input), it)
            continue
        if iq.startswith("torch.nn.") and iq.rsplit(".", 1)[-1] not in K.PARAMETERLESS_MODULES:
            others += 1
    return found if found is not None and others else None


def _container_state_finding(rule, ctx, loop, call, net, cls, attrs) -> Finding:
    msg = {
        "en": f"`{net}(...)` runs a `{cls}` that keeps its state on the module between calls, computed from this "
        f"iteration's autograd graph; nothing in the loop resets it, so the next iteration's backward() runs into "
        f"the already-freed graph (\"Trying to backward through the graph a second time\"). Reset it every "
        f"iteration (snntorch: `utils.reset({net})`; spikingjelly: `functional.reset_net({net})`) or detach it.",
        "zh": f"`{net}(...)` 里的 `{cls}` 会在两次调用之间把状态保存在模块上，而这个状态来自本轮迭代的计算图；"
        f"循环里没有重置它，于是下一轮的 backward() 会回溯进已经释放的图（报错 \"Trying to backward through the "
        f"graph a second time\"）。请每轮重置它（snntorch：`utils.reset({net})`；spikingjelly："
        f"`functional.reset_net({net})`）或对它做 detach。",
    }
    fixes: Tuple[Fix, ...] = ()
    stmt = _statement_holding(loop.body, call)
    if attrs and stmt is not None:
        line = ctx.index.line(stmt.lineno - 1)
        indent = line[: len(line) - len(line.lstrip())]
        if len(indent) == ctx.index.char_col(stmt.lineno, stmt.col_offset):
            step = _indent_unit(loop, indent, ctx) if indent else "    "
            m = _fresh("_m", (net,))
            body = "".join(f"{indent}{step}{step}{m}.{a} = {m}.{a}.detach()\n" for a in attrs)
            cond = " and ".join([f"isinstance({m}, {cls})"] + [f'hasattr({m}.{a}, "detach")' for a in attrs])
            text = f"{indent}for {m} in {net}.modules():\n{indent}{step}if {cond}:\n{body}"
            pos = Position(stmt.lineno - 1, 0)
            fixes = (Fix({"en": f"Detach the state of every `{cls}` in `{net}` before calling it (keeps the state, cuts the graph)",
                          "zh": f"调用 `{net}` 之前 detach 其中每个 `{cls}` 的状态（保留状态，切断计算图）"},
                         (TextEdit(Range(pos, pos), text),), preferred=True),)
    state = f"{net}.{cls}"
    return Finding(rule.code, ctx.range(call), msg, rule.default_severity, (), fixes,
                   {"variable": state, "variables": [state], "stateful": True})


def _imported_stateful_classes(summary) -> frozenset:
    """Classes imported from other modules of the project whose forward keeps
    state on the module (a summary query: one scan per table, not per unit)."""
    return frozenset(k[6:] for k, v in summary.items()
                     if k.startswith("class:") and isinstance(v, V.ClassFacts) and v.carried
                     and ("." in k or "import:" + k[6:] in summary))  # dotted: from `import m`


def _imported_state_finding(rule, unit, ctx, loop, call, callee, ctor, attr, shape, maybe_none) -> Finding:
    state = f"{callee}.{attr}"
    msg = {
        "en": f"`{callee}(...)` runs `{ctor}.forward`, which keeps its state in `{state}` still attached to this "
        f"iteration's autograd graph and starts the next call from it; the next iteration's backward() then runs "
        f"into the already-freed graph (\"Trying to backward through the graph a second time\"). Detach "
        f"`{state}` before the call (or reset it every iteration).",
        "zh": f"`{callee}(...)` 会执行 `{ctor}.forward`，它把状态保存在 `{state}` 里，而这个状态仍连着本轮迭代的"
        f"计算图，下一次调用又从它开始计算；于是下一轮的 backward() 会回溯进已经释放的图（报错 \"Trying to "
        f"backward through the graph a second time\"）。请在调用前对 `{state}` 做 detach（或每轮迭代重置它）。",
    }
    stmt = _statement_holding(loop.body, call)
    helper: Optional[str] = None
    edits: List[TextEdit] = []
    if stmt is not None and not _one_line_shape(shape):
        helper, edits = _helper_edits(unit, loop, ctx, _step(loop.body[0], ctx.indent_of(loop.lineno), ctx))
    edit = _detach_before(stmt, state, shape, ctx, guard=maybe_none, helper=helper) if stmt is not None else None
    fixes: Tuple[Fix, ...] = ()
    if edit is not None:
        fixes = (Fix({"en": f"Detach `{state}` before calling `{callee}` (keeps the state, cuts the graph)",
                      "zh": f"在调用 `{callee}` 之前 detach `{state}`（保留状态，切断计算图）"},
                     tuple(edits) + (edit,), preferred=True),)
    return Finding(rule.code, ctx.range(call), msg, rule.default_severity, (), fixes,
                   {"variable": state, "variables": [state], "stateful": True})


def _statement_holding(body, node) -> Optional[ast.stmt]:
    """The innermost statement of ``body`` (nested blocks entered) that holds ``node``."""
    for s in body:
        if s.lineno <= node.lineno <= (s.end_lineno or s.lineno):
            for block in A.child_blocks(s):
                inner = _statement_holding(block, node)
                if inner is not None:
                    return inner
            return s
    return None


def _call_state_findings(rule, unit, flow: interp.GraphFlow, ctx) -> List[Finding]:
    """``global hidden`` (or ``self.hidden``) rebuilt from its previous value in a
    function that back-propagates it: the next call runs into the freed graph."""
    out = []
    for key, v, ev in flow.call_carried_states():
        if v.site is None:
            continue
        built = interp._built_by(v)
        carry = V.Carry(unit.node, (key,), v.site, built, ev, (), len(v.elems) if v.elems else None, {}, {})
        shape = _structure(carry, flow, ctx, unit)
        fname = unit.node.name
        bw = _code(ev.call)
        msg = {
            "en": f"`{key}` is kept between calls of `{fname}` still attached to this call's autograd graph, and "
            f"the next call's `{bw}` back-propagates into that already-freed graph (\"Trying to backward through "
            f"the graph a second time\"); detach it at the start of `{fname}`.",
            "zh": f"`{key}` 在两次调用 `{fname}` 之间被保留下来，却仍连着本次调用的计算图，下一次调用中的 `{bw}` "
            f"会反向传播进这张已经释放的图（报错 \"Trying to backward through the graph a second time\"）；"
            f"请在 `{fname}` 开头对它 detach。",
        }
        related = []
        if built is not None:
            related.append(Related(ctx.range(built), {"en": f"the graph that `{key}` keeps is built here",
                                                      "zh": f"`{key}` 保留的计算图在这里构建"}))
        related.append(Related(ctx.range(ev.call), {
            "en": f"the next call's backward() reaches the freed graph through `{key}`",
            "zh": f"下一次调用时，这里的 backward() 会经由 `{key}` 回溯到已释放的计算图"}))
        out.append(Finding(rule.code, ctx.line_range(v.site), msg, rule.default_severity, tuple(related),
                           _method_top_fix(unit, key, shape, ctx),
                           {"variable": key, "variables": [key], "stateful": True}))
    return out


def _method_top_fix(unit, key: str, shape: str, ctx) -> Tuple[Fix, ...]:
    body = unit.node.body
    i = 0
    if (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        i = 1  # keep the docstring first
    while i < len(body) and isinstance(body[i], (ast.Global, ast.Nonlocal)):
        i += 1  # a `global h` must stay before any use of h
    if i >= len(body):
        return ()
    first = body[i]
    if first.lineno == unit.node.lineno:
        return ()
    head = ctx.indent_of(unit.node.lineno)
    helper: Optional[str] = None
    edits: List[TextEdit] = []
    if not _one_line_shape(shape):
        helper, edits = _helper_edits(unit, first, ctx, _step(first, head, ctx))
    edit = _detach_before(first, key, shape, ctx, guard=True, head=head, helper=helper)
    if edit is None:
        return ()
    return (
        Fix(
            {"en": f"Detach `{key}` at the start of `{unit.node.name}` (keeps the state, cuts the graph)",
             "zh": f"在 `{unit.node.name}` 开头 detach `{key}`（保留状态，切断计算图）"},
            tuple(edits) + (edit,),
            preferred=True,
        ),
    )


def _step(stmt: ast.stmt, head: str, ctx) -> str:
    """One indentation step of the file, as ``stmt`` (inside a block opened at ``head``) shows it."""
    indent = ctx.indent_of(stmt.lineno)
    if indent.startswith(head) and len(indent) > len(head):
        return indent[len(head):]
    return "\t" if "\t" in indent else "    "


def _detach_before(stmt: ast.stmt, name: str, shape: str, ctx, guard: bool, head: Optional[str] = None,
                   helper: Optional[str] = None):
    """A TextEdit putting the detach of ``name`` on its own line before ``stmt``,
    at its indentation (under ``if name is not None:`` when ``guard``, indented
    one step further: the step ``stmt`` has over ``head``, else four spaces);
    None when ``stmt`` does not start its line. ``helper``: the state's shape is
    not known, the detach calls that helper (see :func:`_helper_edits`)."""
    line = ctx.index.line(stmt.lineno - 1)
    indent = line[: len(line) - len(line.lstrip())]
    if len(indent) != ctx.index.char_col(stmt.lineno, stmt.col_offset):
        return None
    detach = f"{name} = {helper}({name})" if helper is not None else _detach_line((name,), shape)
    if guard:
        step = indent[len(head):] if head is not None and indent.startswith(head) and len(indent) > len(head) else "    "
        text = f"{indent}if {name} is not None:\n{indent}{step}{detach}\n"
    else:
        text = f"{indent}{detach}\n"
    pos = Position(stmt.lineno - 1, 0)
    return TextEdit(Range(pos, pos), text)


# ---------------------------------------------------------------------------
# notes on paths that cannot be verified (``unverified-notes``, off by default)
# ---------------------------------------------------------------------------
def _unverified_note(rule, u, ctx) -> Finding:
    """An information-level note where GG101 stays silent because one link of
    the path is unknown: which value, which backward, and which link."""
    name, bw, why = u.name, _code(u.event.call), _code(u.why)
    if u.kind == "imported":
        link_en = (f"`{why}` calls a function imported from a module gradguard has not read, so whether its result "
                   f"keeps its arguments' graph is unknown")
        link_zh = f"`{why}` 调用的函数来自 gradguard 没有读到的模块，无法知道它的返回值是否保留了参数的计算图"
    elif u.kind == "container":
        link_en = (f"`{why}` takes a part of a container whose parts differ (some hold a graph, some do not), so "
                   f"whether this part holds one is unknown")
        link_zh = f"`{why}` 取自一个各部分并不相同的容器（有的带计算图，有的不带），无法知道这一部分是否带计算图"
    else:
        link_en = f"`{why}` calls a module whose class cannot be told, so what it returns is unknown"
        link_zh = f"`{why}` 调用的模块无法确定其类型，无法知道它返回什么"
    msg = {
        "en": f"The path could not be verified: `{name}` may carry this iteration's autograd graph into the next "
        f"iteration's `{bw}`, but {link_en}. If it does, that backward fails with \"Trying to backward through the "
        f"graph a second time\"; detaching `{name}` between iterations is safe either way.",
        "zh": f"无法验证这条路径：`{name}` 可能把本轮迭代的计算图带进下一轮的 `{bw}`，但{link_zh}。"
        f"如果确实如此，那次 backward 会报错 \"Trying to backward through the graph a second time\"；"
        f"无论哪种情况，在两轮之间对 `{name}` 做 detach 都是安全的。",
    }
    related = (
        Related(ctx.range(u.why), {"en": "this link of the path is unknown", "zh": "路径上的这一环无法确定"}),
        Related(ctx.range(u.event.call), {"en": f"the backward `{name}` may reach",
                                         "zh": f"`{name}` 可能到达的 backward"}),
    )
    return Finding(rule.code, ctx.line_range(u.site), msg, Severity.INFO, related, (),
                   {"variable": name, "variables": [name], "unverified": u.kind})


# ---------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------
def _code(node: ast.AST, limit: int = 48) -> str:
    try:
        s = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of a valid tree does not fail
        return "backward()"
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _names_en(names: Sequence[str]) -> str:
    q = [f"`{n}`" for n in names]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]


def _names_zh(names: Sequence[str]) -> str:
    q = [f"`{n}`" for n in names]
    return "、".join(q)


_ELEM_EN = {0: "the hidden state h", 1: "the cell state c"}
_ELEM_ZH = {0: "隐状态 h", 1: "细胞状态 c"}


def _message(carry: V.Carry) -> Dict[str, str]:
    bw = _code(carry.event.call)
    retain_en = retain_zh = ""
    if carry.event.retain:
        retain_en = " (`retain_graph=True` does not fix this: it keeps every batch's graph alive and fails once the optimizer updates the weights in place)"
        retain_zh = "（`retain_graph=True` 不能解决：它让每个批次的图一直留在内存里，优化器原地更新权重后照样报错）"
    if carry.missing and carry.arity == 2:
        var = carry.names[0]
        parts_en = " and ".join(f"`{var}[{i}]` ({_ELEM_EN.get(i, 'element %d' % i)})" for i in carry.missing)
        parts_zh = "、".join(f"`{var}[{i}]`（{_ELEM_ZH.get(i, '第 %d 个元素' % i)}）" for i in carry.missing)
        return {
            "en": f"The LSTM state `{var}` is only partly detached: {parts_en} still carries this iteration's graph "
            f"into the next iteration's `{bw}`, which fails with \"Trying to backward through the graph a second "
            f"time\"{retain_en}; detach both h and c.",
            "zh": f"LSTM 状态 `{var}` 只 detach 了一部分：{parts_zh} 仍带着本轮的计算图进入下一轮的 `{bw}`，"
            f"会报 \"Trying to backward through the graph a second time\"{retain_zh}；h 和 c 都要 detach。",
        }
    n_en, n_zh = _names_en(carry.names), _names_zh(carry.names)
    verb = "carries" if len(carry.names) == 1 else "carry"
    return {
        "en": f"{n_en} {verb} this iteration's autograd graph into the next iteration, where `{bw}` back-propagates "
        f"into that already-freed graph (\"Trying to backward through the graph a second time\"){retain_en}; "
        f"detach {'it' if len(carry.names) == 1 else 'them'} between iterations.",
        "zh": f"{n_zh} 把本轮迭代的计算图带进了下一轮，下一轮的 `{bw}` 会反向传播进这张已经释放的图"
        f"（报错 \"Trying to backward through the graph a second time\"）{retain_zh}；请在两轮之间 detach。",
    }


def _related(carry: V.Carry, ctx) -> Tuple[Related, ...]:
    out: List[Related] = []
    n_en, n_zh = _names_en(carry.names), _names_zh(carry.names)
    if carry.built_by is not None and hasattr(carry.built_by, "lineno"):
        out.append(
            Related(
                ctx.range(carry.built_by),
                {
                    "en": f"the graph that {n_en} {'carries' if len(carry.names) == 1 else 'carry'} is built here",
                    "zh": f"{n_zh} 携带的计算图在这里构建",
                },
            )
        )
    call = carry.event.call
    if A.is_backward_call(call, ctx):
        msg = {
            "en": f"this backward() reaches the previous iteration's freed graph through {n_en}",
            "zh": f"这里的 backward() 会经由 {n_zh} 回溯到上一轮已释放的计算图",
        }
    else:  # a same-file helper that back-propagates its argument
        name = _code(call.func, 32)
        msg = {
            "en": f"`{name}(...)` calls backward() on a graph that reaches the previous iteration's freed graph "
            f"through {n_en}",
            "zh": f"`{name}(...)` 内部调用了 backward()，其计算图经由 {n_zh} 连到上一轮已释放的图",
        }
    out.append(Related(ctx.range(call), msg))
    return tuple(out)


# ---------------------------------------------------------------------------
# fixes
# ---------------------------------------------------------------------------
# Where the detach goes. The preferred place is the FIRST statement of the
# loop body: at that point the value is either what the loop started with
# (iteration 1) or what the previous iteration left behind, and nothing of
# the current iteration has used it yet — so the detach cuts exactly the
# edge between iterations and leaves every gradient computed inside an
# iteration unchanged, whatever comes later in the body (a reassignment after
# backward(), a `continue`, several backward calls, a state used by the loss
# itself). "Right after backward()" is not always correct: a state reassigned
# after the backward, or a `continue` before it, would still be carried.
# Two adjustments keep the first-statement placement exact:
#   * the state may be None (or unbound) before the first iteration → guard
#     with `if h is not None:` (and bind it to None before the loop when the
#     loop is what first assigns it);
#   * the value the loop starts with may itself need gradients (a learned
#     initial state): detaching it at the top would change iteration 1, so
#     then the detach goes after the last body statement that back-propagates
#     or assigns the state.


def _body_indent(loop: ast.stmt, ctx) -> Optional[str]:
    first = loop.body[0]  # type: ignore[attr-defined]
    if first.lineno == loop.lineno:
        return None  # `for x in y: stmt` on one line: no place for a new line
    line = ctx.index.line(first.lineno - 1)
    indent = line[: len(line) - len(line.lstrip())]
    col = ctx.index.char_col(first.lineno, first.col_offset)
    if len(indent) != col:
        return None  # first statement after a `;` or similar: give up on a fix
    return indent


def _indent_unit(loop: ast.stmt, body_indent: str, ctx) -> str:
    head = ctx.indent_of(loop.lineno)
    if body_indent.startswith(head) and len(body_indent) > len(head):
        return body_indent[len(head):]
    return "\t" if "\t" in body_indent else "    "


def _fresh(name: str, avoid: Sequence[str]) -> str:
    for cand in ("s", "t", "state", "_s"):
        if cand not in avoid and cand != name:
            return cand
    return "_gg_s"


def _structure(carry: V.Carry, flow: interp.GraphFlow, ctx, unit=None) -> str:
    """'tuple' | 'tensor' | 'unknown': the shape of the carried state."""
    if carry.arity and carry.arity >= 2:
        return "tuple"
    end_v = carry.end.get(carry.names[0]) if len(carry.names) == 1 else None
    if end_v is not None and end_v.kind == "tensor":
        return "tensor"  # a torch recurrent module's state, here or through the model's forward
    node = carry.built_by
    if isinstance(node, ast.Call):
        kind = _callee_kind(node, carry, ctx, unit)
        if kind == "unknown":
            kind = _recurrent_state_shape(carry, node, ctx, unit)
        if kind == "unknown":
            kind = _site_shape(carry, ctx, unit)
        return kind
    return "tensor" if node is not None else "unknown"


def _recurrent_state_shape(carry: V.Carry, call: ast.Call, ctx, unit=None) -> str:
    """The state of a torch recurrent module reached through an attribute of a
    model (``seq, hx = model.rnn(x, hx)``, ``h = model.cell(x, h)``), when the
    statement binds exactly that state: a cell's result, a layer's second one."""
    site = carry.site
    if len(carry.names) != 1 or not isinstance(site, ast.Assign) or site.value is not call or len(site.targets) != 1:
        return "unknown"
    tc = _module_class(call, ctx, unit)
    if not tc or not K.is_recurrent(tc):
        return "unknown"
    target = site.targets[0]
    cell = tc.rsplit(".", 1)[-1].endswith("Cell")
    if cell and isinstance(target, ast.Name) and target.id == carry.names[0]:
        return V.state_shape(tc)
    if not cell and isinstance(target, ast.Tuple) and len(target.elts) == 2 and (
            isinstance(target.elts[1], ast.Name) and target.elts[1].id == carry.names[0]):
        return V.state_shape(tc)
    return "unknown"


def _site_shape(carry: V.Carry, ctx, unit=None) -> str:
    """'tensor' when the statement that leaves the state behind assigns it one
    tensor (``h = h.clone()``, ``p = torch.bernoulli(...)``, ``feat = enc(x)`` with
    ``enc`` a one-output torch module), else 'unknown'."""
    site = carry.site
    if len(carry.names) != 1 or not isinstance(site, ast.Assign) or len(site.targets) != 1:
        return "unknown"
    if A.dotted(site.targets[0]) != carry.names[0]:
        return "unknown"
    return _expr_shape(site.value, ctx, unit)


def _expr_shape(expr: ast.expr, ctx, unit, depth: int = 0) -> str:
    """'tensor' when ``expr`` is known to give one tensor, else 'unknown'."""
    if depth > 8:
        return "unknown"
    if isinstance(expr, ast.Call):
        func = expr.func
        q = interp.Resolver(ctx).qualify(func)
        if q in K.ONE_TENSOR_FUNCTIONS:
            return "tensor"
        if isinstance(func, ast.Attribute) and func.attr in K.ONE_TENSOR_METHODS and not (
                q and q.startswith("torch.") and q not in K.ONE_TENSOR_FUNCTIONS):
            return "tensor"  # x.clone(), logits.softmax(-1); not torch.<module>.<fn>
        tc = _module_class(expr, ctx, unit)
        if tc and not K.is_recurrent(tc) and tc not in K.MULTI_OUTPUT_MODULES and (
                tc.rsplit(".", 1)[-1] not in K.CONTAINER_MODULES):
            return "tensor"  # feat = enc(x), enc an nn.Linear
        return "unknown"
    if isinstance(expr, ast.BinOp):
        sides = (expr.left, expr.right)
        if any(isinstance(x, (ast.List, ast.Tuple, ast.ListComp, ast.Dict, ast.Set, ast.JoinedStr)) or (
                isinstance(x, ast.Constant) and not isinstance(x.value, (int, float))) for x in sides):
            return "unknown"  # [loss] + new_mems: a list
        return "tensor" if any(_expr_shape(x, ctx, unit, depth + 1) == "tensor" for x in sides) else "unknown"
    if isinstance(expr, ast.UnaryOp) and not isinstance(expr.op, ast.Not):
        return _expr_shape(expr.operand, ctx, unit, depth + 1)
    if isinstance(expr, ast.IfExp):
        both = {_expr_shape(expr.body, ctx, unit, depth + 1), _expr_shape(expr.orelse, ctx, unit, depth + 1)}
        return "tensor" if both == {"tensor"} else "unknown"
    return "unknown"


def _module_class(call: ast.Call, ctx, unit=None) -> Optional[str]:
    """The torch.nn class of the module ``call`` calls, when it is known: a
    variable or ``self.<attr>`` built by a torch constructor, or ``<var>.<attr>``
    of a same-file model instance (``model.rnn(x, h)``)."""
    r = interp.Resolver(ctx)
    name = A.dotted(call.func)
    if not name:
        return None
    head, _, attr = name.partition(".")
    raw = None
    if not attr:
        raw = ctx.summary.get("var:" + head)
    elif "." not in attr:
        if head == "self" and unit is not None and unit.class_node is not None:
            cf = r.cls(unit.class_node.name)
        else:
            obj = _local_ctor(unit, head) if unit is not None and unit.kind == "function" else None
            obj = obj or r.global_obj(head)
            cf = r.cls(obj[5:]) if obj and obj.startswith("user:") else None
        raw = cf.attr(attr) if cf is not None else None
    return r.torch_class(r.qualify_raw(raw)) if isinstance(raw, str) else None


def _local_ctor(unit, name: str) -> Optional[str]:
    """``user:<Class>`` when the function binds ``name`` once, to an instance of
    a class (``net = CharLSTM()``), else None."""
    made = [n.value for n in A.iter_statements(unit.body) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            and name in [x for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) for x in A.target_names(t)]]
    if len(made) != 1 or not isinstance(made[0], ast.Call) or not isinstance(made[0].func, ast.Name):
        return None
    return "user:" + made[0].func.id


def _callee_kind(call: ast.Call, carry: Optional[V.Carry], ctx, unit=None) -> str:
    r = interp.Resolver(ctx)
    func = call.func
    q = None
    name = A.dotted(func)
    if name and name.startswith("self.") and name.count(".") == 1 and unit is not None and unit.class_node is not None:
        cf = r.cls(unit.class_node.name)
        raw = cf.attr(name[5:]) if cf is not None else None
        if raw:
            q = r.qualify_raw(raw)
    elif isinstance(func, ast.Name):
        obj = r.global_obj(func.id)
        raw = ctx.summary.get("var:" + func.id)
        if isinstance(raw, str):
            q = r.qualify_raw(raw)
        elif obj and obj.startswith("fn:"):
            return "unknown"
    return V.state_shape(r.torch_class(q) if q else None)


def _detach_line(names: Tuple[str, ...], shape: str) -> str:
    if len(names) > 1:
        return f"{', '.join(names)} = {', '.join(n + '.detach()' for n in names)}"
    n = names[0]
    s = _fresh(n, names)
    if shape == "tensor":
        return f"{n} = {n}.detach()"
    if shape == "list":
        return f"{n} = [{s}.detach() for {s} in {n}]"
    if shape == "maybe-number":
        return f'{n} = {n}.detach() if hasattr({n}, "detach") else {n}'
    if shape == "tuple":
        return f"{n} = tuple({s}.detach() for {s} in {n})"
    raise ValueError(f"no one-line detach for a state of shape {shape!r}: use the helper")


def _fixes(carry: V.Carry, flow: interp.GraphFlow, ctx, unit=None) -> Tuple[Fix, ...]:
    loop = carry.loop
    indent = _body_indent(loop, ctx)
    if indent is None:
        return ()
    bw = carry.event.call
    built_line = getattr(carry.built_by, "lineno", None) or carry.site.lineno
    if built_line > getattr(bw, "end_lineno", bw.lineno) and loop.lineno < bw.lineno:
        # The graph is rebuilt AFTER this iteration's backward (a look-ahead step,
        # `out, h = rnn(x_next, h)` at the end of the body): the next backward uses a
        # value computed before its iteration started, so no single detach at the top
        # or after backward() is certain to keep the gradients. No automatic fix.
        return ()
    unit_ = _indent_unit(loop, indent, ctx)
    names = carry.names
    shape = _structure(carry, flow, ctx, unit)
    first = loop.body[0]  # type: ignore[attr-defined]
    entry = [carry.entry.get(n) for n in names]
    unbound_names = [n for n, v in zip(names, entry) if v is None or v.undef]
    unbound = bool(unbound_names) and bool(set(unbound_names) - _kept_outside(unbound_names, unit))
    maybe_none = unbound or any(v is not None and (v.none or v.param) for v in entry)
    grad_entry = any(v is not None and v.has_grad() for v in entry)
    end_v = carry.end.get(names[0])
    helper = None
    edits: List[TextEdit] = []
    if len(names) == 1 and _nested_state(entry + [end_v]):
        # states[wid] = new_state, mems[i] = (h, c), {"enc": (h, c), "dec": {...}}:
        # a dict must stay a dict and each (h, c) a tuple; a helper detaches every
        # tensor inside and keeps the containers (repackage_hidden, generalised)
        shape = "nested"
    elif len(names) == 1 and (any(v is not None and v.kind == "list" for v in entry)
                              or (end_v is not None and end_v.kind == "list")):
        shape = "list"  # history = []; history.append(out): stays a list
    elif any(v is not None and v.const for v in entry) and len(names) == 1:
        shape = "maybe-number"  # running = 0 before the loop: an int has no .detach()
    elif len(names) > 1:
        # out, (h, c) = lstm(x, (h, c)): each one tensor; out, (a, b) = model(x, (a, b)):
        # what a and b are is not known
        shape = "tensor" if _elements_are_tensors(carry, ctx, unit) else "unknown"
    if not _one_line_shape(shape):
        # a state of unknown shape (a model of the project or unseen code returns it:
        # a tensor, an (h, c) pair, a dict or a list of pairs): the helper detaches
        # every tensor in it and keeps its containers; no guess of one shape
        helper, edits = _helper_edits(unit, loop, ctx, unit_)
    if helper is None:
        line = _detach_line(names, shape)
    else:
        line = f"{', '.join(names)} = {', '.join(f'{helper}({n})' for n in names)}"
    head = names[0]
    if grad_entry:
        # after the last body statement that back-propagates or assigns the state
        at = _after_statement(loop, carry, names)
        pos = Position(at, 0)
    else:
        pos = Position(first.lineno - 1, 0)
    if maybe_none and len(names) == 1:
        text = f"{indent}if {head} is not None:\n{indent}{unit_}{line}\n"
    elif maybe_none:
        text = f"{indent}if {head} is not None:\n{indent}{unit_}{line}\n"
    else:
        text = f"{indent}{line}\n"
    if unbound:
        loop_indent = ctx.indent_of(loop.lineno)
        init = " = ".join(names) + " = None"
        edits.append(TextEdit(Range(Position(loop.lineno - 1, 0), Position(loop.lineno - 1, 0)), f"{loop_indent}{init}\n"))
    edits.append(TextEdit(Range(pos, pos), text))
    v_en, v_zh = _names_en(names), _names_zh(names)
    fixes = [
        Fix(
            {
                "en": f"Detach {v_en} at the start of each iteration (keeps the state, cuts the graph)",
                "zh": f"在每轮迭代开始时 detach {v_zh}（保留状态，切断计算图）",
            }
            if not grad_entry
            else {
                "en": f"Detach {v_en} after this iteration's backward() (keeps the state, cuts the graph)",
                "zh": f"在本轮 backward() 之后 detach {v_zh}（保留状态，切断计算图）",
            },
            tuple(edits),
            preferred=True,
        )
    ]
    # Alternative: start every iteration from a fresh (None) state. Offered only
    # when None is known to be accepted: a torch recurrent module takes
    # hx=None, and a loop that already starts from None handles it.
    if len(names) == 1 and not grad_entry and (shape in ("tensor", "tuple") and _direct_torch(carry, ctx, unit) or _starts_none(entry)):
        top = Position(first.lineno - 1, 0)
        fixes.append(
            Fix(
                {
                    "en": f"Reset {v_en} to None at the start of each iteration (loses the state carried between batches)",
                    "zh": f"每轮迭代开始时把 {v_zh} 重置为 None（会丢失跨批次传递的状态）",
                },
                (TextEdit(Range(top, top), f"{indent}{head} = None\n"),),
                preferred=False,
            )
        )
    return tuple(fixes)


def _kept_outside(names, unit) -> Set[str]:
    """The dotted names among ``names`` that the unit reads but never assigns
    (``policy.saved_log_probs``, filled by a helper): an attribute its object
    already has, so there is nothing to initialise, and setting it to None would
    lose it."""
    dotted_names = {n for n in names if "." in n}
    if not dotted_names or unit is None:
        return set()
    stored = {A.dotted(n) for n in A.unit_nodes(unit)
              if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)}
    return dotted_names - stored


def _nested_state(vals) -> bool:
    """Is the carried state a dict, or a list whose elements are containers
    themselves (a list of per-chunk ``(h, c)`` pairs)?"""
    for v in vals:
        if v is None:
            continue
        if v.kind == "dict":
            return True
        if v.kind == "list":
            if v.elems is not None and any(e.elems is not None or e.kind in ("list", "dict") for e in v.elems):
                return True
            site = v.site
            value = getattr(site, "value", None)
            if isinstance(value, ast.ListComp) and isinstance(value.elt, (ast.Tuple, ast.List, ast.Dict, ast.ListComp)):
                return True
            if isinstance(value, ast.BinOp) and isinstance(value.left, ast.List) and value.left.elts and isinstance(
                    value.left.elts[0], (ast.Tuple, ast.List, ast.Dict)):
                return True  # [(h0, c0)] * n
    return False


_HELPER = "_detach_state"
_HELPER_DOC = '"""Detach every tensor of a state, keeping its dicts, lists and tuples."""'


def _one_line_shape(shape: str) -> bool:
    """Is the state's shape known well enough for a one-line detach?"""
    return shape in ("tensor", "tuple", "list", "maybe-number")


def _elements_are_tensors(carry: V.Carry, ctx, unit) -> bool:
    """``h, c = ...`` unpacked from a torch recurrent module's state (or each
    bound to one tensor): each name is one tensor."""
    ends = [carry.end.get(n) for n in carry.names]
    if all(v is not None and v.kind == "tensor" for v in ends):
        return True
    node = carry.built_by
    if isinstance(node, ast.Call):
        if _callee_kind(node, carry, ctx, unit) in ("tensor", "tuple"):
            return True
        tc = _module_class(node, ctx, unit)
        if tc and K.is_recurrent(tc):
            return True
    site = carry.site
    if isinstance(site, ast.Assign) and len(site.targets) == 1 and isinstance(site.targets[0], ast.Tuple) and (
            isinstance(site.value, ast.Tuple) and len(site.value.elts) == len(site.targets[0].elts)):
        return all(_expr_shape(e, ctx, unit) == "tensor" for e in site.value.elts)
    return False


def _helper_edits(unit, anchor: ast.stmt, ctx, step: str) -> Tuple[str, List[TextEdit]]:
    """The name of the state-detaching helper a fix calls, and the edit that
    defines it (none when the file already defines it).

    The helper is defined once for the file, in the module's scope: right
    before the outermost definition holding the unit (its decorators first), or
    for a loop at module level before the top-level statement holding it. Two
    fixes in the file define it with the same text, which the fix loop applies
    once (``engine.fixing``). A file that already defines it (a previous fix) is
    reused, if the definition comes first; a name the file uses otherwise is
    never taken: ``_detach_state2``, ``_detach_state3``... instead."""
    if unit.kind == "function":
        top = unit.parents[0] if unit.parents else unit.node
        line = min([d.lineno for d in getattr(top, "decorator_list", ())] + [top.lineno])
    else:
        top = next((s for s in unit.body if s.lineno <= anchor.lineno <= (s.end_lineno or s.lineno)), anchor)
        line = top.lineno
    indent = ctx.indent_of(line)
    lines = ctx.index.lines
    name, n = _HELPER, 1
    while True:
        defined = [i for i, ln in enumerate(lines) if ln.rstrip() == f"{indent}def {name}(s):"
                   and i + 1 < len(lines) and lines[i + 1].strip() == _HELPER_DOC]
        if defined and (unit.kind == "function" or defined[0] + 1 < line):
            return name, []  # the file's own copy, defined before the loop runs
        if not defined and not any(name in ln for ln in lines):
            break
        n += 1
        name = f"{_HELPER}{n}"
    pos = Position(line - 1, 0)
    text = _helper_text(name, indent, step)
    if not indent:  # a module-level def: two blank lines around it (PEP 8)
        before = ctx.index.line(line - 2).strip() if line >= 2 else ""
        text = ("\n\n" if before else "") + text + "\n"
    return name, [TextEdit(Range(pos, pos), text)]


def _helper_text(name: str, indent: str, unit: str) -> str:
    """A repackage_hidden-style helper put before the loop: detaches every tensor
    of a (nested) state and keeps its dicts, lists, tuples and namedtuples."""
    body = [
        f"def {name}(s):",
        f"{unit}{_HELPER_DOC}",
        f'{unit}if hasattr(s, "detach"):',
        f"{unit}{unit}return s.detach()",
        f"{unit}elif isinstance(s, dict):",
        f"{unit}{unit}s = s.copy()",
        f"{unit}{unit}for k in s:",
        f"{unit}{unit}{unit}s[k] = {name}(s[k])",
        f"{unit}{unit}return s",
        f"{unit}elif isinstance(s, (list, tuple)):",
        f"{unit}{unit}parts = [{name}(v) for v in s]",
        f'{unit}{unit}return type(s)(*parts) if hasattr(s, "_fields") else type(s)(parts)',
        f"{unit}else:",
        f"{unit}{unit}return s",
        "",
    ]
    return "".join(f"{indent}{ln}\n" if ln else "\n" for ln in body)


def _starts_none(entry) -> bool:
    return all(v is not None and v.none and not v.taints for v in entry)


def _direct_torch(carry: V.Carry, ctx, unit=None) -> bool:
    node = carry.built_by
    if not isinstance(node, ast.Call):
        return False
    return _callee_kind(node, carry, ctx, unit) in ("tensor", "tuple")


def _after_statement(loop: ast.stmt, carry: V.Carry, names) -> int:
    """0-based line after the last loop-body statement that contains the failing
    backward or assigns one of ``names``."""
    last = None
    bw_line = carry.event.call.lineno
    for s in loop.body:  # type: ignore[attr-defined]
        end = getattr(s, "end_lineno", s.lineno)
        if s.lineno <= bw_line <= end:
            last = s
            continue
        for node in A.iter_statements([s]):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(n in names for t in tgts for n in A.target_names(t)):
                    last = s
                    break
    if last is None:
        last = loop.body[-1]  # type: ignore[attr-defined]
    return getattr(last, "end_lineno", last.lineno)


def _kept_cache(carry: V.Carry, ctx) -> Optional[Tuple[str, str, str, bool, str]]:
    """(object, attribute, class, is it None before the first call, shape) when the
    carried value is a cache a module of the user's keeps on itself
    (``ClassFacts.cached``, followed by the interpreter as ``<object>.<attribute>``)."""
    if len(carry.names) != 1 or "." not in carry.names[0]:
        return None
    base, _, attr = carry.names[0].rpartition(".")
    v = carry.entry.get(base) or carry.end.get(base)
    obj = (v.obj if v is not None else None) or ""
    if not obj.startswith("user:"):
        return None
    cf = interp.Resolver(ctx).cls(obj[5:])
    if cf is None:
        return None
    for key, _, _, init_none, shape in cf.cached:
        if key == "self." + attr:
            return base, attr, obj[5:], init_none, shape
    return None


def _cache_finding(rule: Rule, carry: V.Carry, ctx, cache: Tuple[str, str, str, bool, str]) -> Finding:
    """The cache's own words, and two fixes put before the call that hands it back:
    detach it (preferred: it keeps the cached value, so every later step computes
    what it computed, without the freed graph) or, where the cache starts empty,
    empty it (the encoder computes it afresh and is trained every step)."""
    base, attr, cls, init_none, shape = cache
    name = f"{base}.{attr}"
    bw = _code(carry.event.call)
    msg = {
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
    fixes: List[Fix] = []
    site = carry.site
    first = carry.loop.body[0]  # type: ignore[attr-defined]
    if site.lineno > carry.loop.lineno and _body_indent(carry.loop, ctx) is not None:
        # at the top of the iteration: it cuts exactly the edge between iterations
        edit = _detach_before(first, name, shape, ctx, guard=init_none, head=ctx.indent_of(carry.loop.lineno))
        if edit is not None:
            fixes.append(Fix({"en": f"Detach `{name}` at the start of each iteration (keeps the cached value, cuts the graph)",
                              "zh": f"在每轮迭代开始时 detach `{name}`（保留缓存的值，切断计算图）"},
                             (edit,), preferred=True))
            if init_none:
                pos = edit.range.start
                indent = ctx.indent_of(first.lineno)
                fixes.append(Fix({"en": f"Empty `{name}` at the start of each iteration, so `{base}` computes it afresh "
                                        f"(and is trained) every iteration",
                                  "zh": f"在每轮迭代开始时清空 `{name}`，让 `{base}` 每轮重新计算它（并得到训练）"},
                                 (TextEdit(Range(pos, pos), f"{indent}{name} = None\n"),)))
    data: Dict[str, object] = {"variable": name, "variables": [name], "stateful": True}
    return Finding(rule.code, ctx.line_range(site), msg, rule.default_severity, _related(carry, ctx), tuple(fixes), data)


def unit_words_of(node: ast.AST, ctx) -> frozenset:
    """The identifiers written in ``node``'s lines (names a fix must not take)."""
    end = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    text = "\n".join(ctx.index.line(i) for i in range(node.lineno - 1, end))  # type: ignore[attr-defined]
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _member_states(carry: V.Carry, ctx) -> Optional[Tuple[str, List[Tuple[str, str, Tuple[str, ...], bool]]]]:
    """(object, [(member, class, state attributes, a library's?)]) when every carried
    name is the state of a module kept on an object of the user's
    (``ClassFacts.members``, followed by the interpreter as ``net.lif1.mem``)."""
    first = carry.names[0]
    base = first.split(".", 1)[0]
    v = carry.entry.get(base) or carry.end.get(base)
    obj = (v.obj if v is not None else None) or ""
    if not obj.startswith("user:"):
        return None
    r = interp.Resolver(ctx)
    cf = r.cls(obj[5:])
    if cf is None or not cf.members:
        return None
    found = []
    names = set(carry.names)
    for attr, raw, kws, _, _ in cf.members:
        states = r.state_names(raw, kws)
        hit = tuple(nm for nm in states if f"{base}.{attr}.{nm}" in names)
        if hit:
            names -= {f"{base}.{attr}.{nm}" for nm in hit}
            lib = r.qualify_raw(raw) in K.STATEFUL_LIBRARY_MODULES
            found.append((attr, raw, hit, lib))
    return (base, found) if found and not names else None


def _member_state_finding(rule: Rule, carry: V.Carry, ctx, net: str, members) -> Finding:
    """Neurons kept on a user's module, called through it in a loop that never resets
    them. Preferred fix where every one is a class of the user's (its state attributes
    known): detach their state before the call, for every such module in ``net``
    (keeps the state, cuts the graph). A library's neurons: the message names the
    library's reset; no edit (it would need an import the file may not have)."""
    shown = ", ".join(f"`{net}.{attr}` ({raw.rsplit('.', 1)[-1]})" for attr, raw, _, _ in members)
    msg = {
        "en": f"`{net}(...)` runs modules that keep their state on themselves between calls ({shown}), computed from "
        f"this iteration's autograd graph; nothing in the loop resets them, so the next iteration's backward() runs "
        f"into the already-freed graph (\"Trying to backward through the graph a second time\"). Reset them every "
        f"iteration (snntorch: `utils.reset({net})`; spikingjelly: `functional.reset_net({net})`) or detach them.",
        "zh": f"`{net}(...)` 运行的模块会在两次调用之间把状态保存在自身上（{shown}），而这个状态来自本轮迭代的计算图；"
        f"循环里没有重置它们，于是下一轮的 backward() 会回溯进已经释放的图（报错 \"Trying to backward through the "
        f"graph a second time\"）。请每轮重置它们（snntorch：`utils.reset({net})`；spikingjelly："
        f"`functional.reset_net({net})`）或对它们做 detach。",
    }
    fixes: Tuple[Fix, ...] = ()
    site = carry.site
    by_cls: Dict[str, set] = {}
    for _, raw, states, lib in members:
        if lib:
            by_cls = {}
            break
        by_cls.setdefault(raw, set()).update(states)
    indent = _body_indent(carry.loop, ctx)
    if by_cls and site.lineno > carry.loop.lineno and indent is not None:
        # at the top of the iteration, not before the call: a call inside an inner loop
        # of time steps must keep its graph from step to step within the iteration
        first = carry.loop.body[0]  # type: ignore[attr-defined]
        step = _indent_unit(carry.loop, indent, ctx)
        words = unit_words_of(carry.loop, ctx)
        m = next(n for n in ("_m", "_mod", "_gg_m", "_gg_module") if n not in words)
        text = f"{indent}for {m} in {net}.modules():\n"
        for cls, attrs in sorted(by_cls.items()):
            cond = " and ".join([f"isinstance({m}, {cls})"] + [f'hasattr({m}.{a}, "detach")' for a in sorted(attrs)])
            body = "".join(f"{indent}{step}{step}{m}.{a} = {m}.{a}.detach()\n" for a in sorted(attrs))
            text += f"{indent}{step}if {cond}:\n{body}"
        pos = Position(first.lineno - 1, 0)
        fixes = (Fix({"en": f"Detach the state of every stateful module in `{net}` at the start of each iteration "
                            f"(keeps the state, cuts the graph)",
                      "zh": f"在每轮迭代开始时 detach `{net}` 中每个有状态模块的状态（保留状态，切断计算图）"},
                     (TextEdit(Range(pos, pos), text),), preferred=True),)
    data: Dict[str, object] = {"variable": carry.names[0], "variables": list(carry.names), "stateful": True}
    return Finding(rule.code, ctx.line_range(site), msg, rule.default_severity, _related(carry, ctx), fixes, data)


def _finding(rule: Rule, carry: V.Carry, flow: interp.GraphFlow, ctx, unit=None) -> Optional[Finding]:
    site = carry.site
    if not hasattr(site, "lineno"):
        return None
    cache = _kept_cache(carry, ctx)
    if cache is not None:
        return _cache_finding(rule, carry, ctx, cache)
    members = _member_states(carry, ctx)
    if members is not None:
        return _member_state_finding(rule, carry, ctx, *members)
    data: Dict[str, object] = {"variable": carry.names[0], "variables": list(carry.names)}
    if carry.missing:
        data["attached_elements"] = list(carry.missing)
    if carry.event.retain:
        data["retain_graph"] = True
    return Finding(
        code=rule.code,
        range=ctx.line_range(site),
        message=_message(carry),
        severity=rule.default_severity,
        related=_related(carry, ctx),
        fixes=_fixes(carry, flow, ctx, unit),
        data=data,
    )
