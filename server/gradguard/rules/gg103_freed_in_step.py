"""GG103 freed-in-step: a backward() runs through part of a graph that an
earlier backward() of the same step already freed.

The third shape of "Trying to backward through the graph a second time", the
one that needs no loop at all: two losses share a piece of graph (a GAN's
``fake = G(z)`` feeding both the discriminator's and the generator's loss, an
encoder output feeding two heads), the first ``backward()`` frees that piece's
saved tensors, and the second runs into them.

The analysis reuses the graph interpreter (``analysis/interpreter.py``): each
backward event carries the graph tokens its loss reaches. In one statement list
(a loop body, a function body, the module), a backward that runs
unconditionally frees the tokens it reaches; a later backward of the same list
(or of a block nested after it) whose loss reaches one of them — built in that
list before the first backward, by an operation that saves tensors — fails.
Graphs built before the list (before the loop) are GG102's; graphs carried from
one iteration to the next are GG101's.
"""

from __future__ import annotations

import ast
import re
import threading

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.analysis import values as V
from gradguard.analysis.context import unit_text, unit_words
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Fix, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule
from gradguard.rules.common import unit_trace

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

EXPLANATION = {
    "en": '''\
## What it does
Finds a `backward()` whose loss reaches part of a graph that an earlier `backward()` of the same
step already back-propagated and freed: two losses built on one shared tensor, back-propagated one
after the other, with no `retain_graph=True` on the first. Either backward may sit in a helper of
yours: `train_discriminator(real, fake)` then `train_generator(fake)`, or in methods of a trainer
that a driver calls in turn (pix2pix's `optimize_parameters()` calling `self.forward()`, which keeps
`self.fake_B`, then `self.backward_D()` and `self.backward_G()`).

It also finds the same step written the other way round: the first backward keeps the graph
(`retain_graph=True`), then an optimizer step updates weights that graph saved, then the second
backward runs through them. It finds both in loops and in steps written out one after the other,
and where the second loss comes into a method as an argument that the callers in the file took from
another method of the same object (edge-connect's `backward(gen_loss, dis_loss)` stepping the
discriminator before `gen_loss.backward()`).

The two backward calls need not sit side by side: a value built in a loop whose own backward frees
it, read after the loop (`n` generator steps, then the discriminator scores the last `fake`), and
graphs kept in a list that one function fills and another back-propagates without clearing it
(REINFORCE's `finish_episode()` called twice) are reported too -- only when the freeing is certain
on every path (a loop that surely ran, a backward with no `retain_graph`, run on every path through
the function).

The second backward may also be the same one, in the next iteration: deep mutual learning keeps
each model's output in a list, and `for i in range(n):` back-propagates model i's loss built from
`outputs[i]` and its peers `outputs[j]` (`for j in range(n)`) without `.detach()`. The own index
names another element on each iteration, the peers' index every element, so the first iteration
frees every output's graph and the second runs into one. The fix detaches the peers where the loss
reads them: `F.softmax(outputs[j].detach(), dim=1)`.

## Why is this bad?
`backward()` frees the tensors the graph saved for the gradient (the inputs of a matrix multiply,
the outputs of an activation) as it goes. The second `backward()` needs them again for the shared
part and stops with

```
RuntimeError: Trying to backward through the graph a second time (or directly access saved
tensors after they have already been freed).
```

in the very first iteration. The classic case is a GAN whose discriminator step uses the
generator's output without `.detach()`.

With `retain_graph=True` on the first backward and `optD.step()` before the second, the saved
weights themselves have changed in place and torch stops instead with

```
RuntimeError: one of the variables needed for gradient computation has been modified by an
inplace operation
```

(PyTorch-GAN's `softmax_gan.py` and `cluster_gan.py` do this; torch before 1.5 did not check).
It is the same mistake -- a second backward through a graph the step has already used up -- so it
has the same code.

## Example
```python
for real in loader:
    fake = G(torch.randn(64, 100))
    optD.zero_grad()
    lossD = bce(D(real), ones) + bce(D(fake), zeros)
    lossD.backward()                 # frees G's part of the graph
    optD.step()
    optG.zero_grad()
    lossG = bce(D(fake), ones)
    lossG.backward()                 # RuntimeError: ... a second time
    optG.step()
```

## Fix
Either keep the shared part for the second backward, which computes exactly the gradients the
program asks for:

```python
    lossD.backward(retain_graph=True)
```

or cut the shared tensor out of the first loss when its producer should not learn from that loss
(the usual GAN discriminator step; the generator then gets no gradient from `lossD`):

```python
    lossD = bce(D(real), ones) + bce(D(fake.detach()), zeros)
```

Summing the losses and calling `backward()` once is a third way when both should update the
same parameters.

The quick fix is the detach when the producer's gradients from the first loss are zeroed before
any step uses them (`optG.zero_grad()` between the two backward calls): the updates are the same,
no graph is kept, and it is what tutorials write. Otherwise it is `retain_graph=True`.

When an optimizer step between the two backward calls updates the shared part (including through
an alias such as `g_optim = self.optim_g`, or a two-step optimizer's `first_step()` as in SAM),
keeping the graph is no fix. The quick fix then computes the shared part again after the step
(`d_fake = D(gen_imgs)` after `optD.step()`, SAM's second forward), or, when the optimizer stepped
after the second backward does not train what the step updated, detaches its output where the
second loss reads it (`D(gen_imgs.detach())` again after the generator's step).

## FAQ
**GG101 says `retain_graph=True` is the wrong fix. Why is it right here?**
GG101 is about a graph carried into the *next* iteration: retaining it makes every step
back-propagate through all earlier steps. Here both backward passes belong to the *same* step and
the same graph; `retain_graph=True` keeps it only until the second one, which frees it.

**Which fix does the quick fix apply?**
The one that changes no update: the detach when the producer's gradients from the first loss are
zeroed before any step (then `retain_graph=True` is the second action), else `retain_graph=True`
(then the detach is the second action, because it changes what the producer learns).

**Why is a second `loss.backward()` on an `x.sum()` not reported?**
Only parts of the graph that save tensors fail a second pass (a module call, a matrix multiply, a
product or a power, an activation). Sums, views and additions save none, and PyTorch
back-propagates through them twice without complaint.

**Two losses from one `torch.distributions` object?**
Reported for the ones whose graph from their parameters saves tensors: `Categorical` (either
way), `Bernoulli` and `Binomial` built from probabilities (they cache the logits they compute from
them) and `Geometric` built from logits.
`Normal(mu, 1.0)` and `Bernoulli(logits=...)` compute each log-prob afresh and are not reported.
''',
    "zh": '''\
## 它检查什么
找出这样的 `backward()`：它的损失所经过的部分计算图，已经被同一步里更早的一次 `backward()`
反向传播并释放了。典型情况是两个损失共用同一个中间张量，先后各调用一次 `backward()`，
而第一次没有写 `retain_graph=True`。两次 backward 也可以在你自己的辅助函数里：
`train_discriminator(real, fake)` 之后再 `train_generator(fake)`；或者在训练类的方法里，由一个驱动方法依次调用
（pix2pix 的 `optimize_parameters()` 先调用把结果存为 `self.fake_B` 的 `self.forward()`，再调用
`self.backward_D()` 和 `self.backward_G()`）。

它也检查反过来写的同一种错误：第一次 backward 保留了计算图（`retain_graph=True`），接着优化器 step
更新了这张图保存的权重，然后第二次 backward 又经过这些权重。循环里和不写循环、逐步展开的代码里都会检查；
第二个损失作为参数传进方法、而文件里的调用方取自同一对象另一个方法的返回值时也会检查（edge-connect 的
`backward(gen_loss, dis_loss)` 先 step 判别器，再 `gen_loss.backward()`）。

两次 backward 不必挨在一起：循环里构建、又被该循环自己的 backward 释放的值，在循环结束后再被使用
（生成器走 `n` 步之后，判别器给最后一个 `fake` 打分）；一个函数往列表里放计算图、另一个函数对它反向传播
却不清空（REINFORCE 的 `finish_episode()` 连续调用两次），也会报告——但只在释放是确定的时候：
循环一定执行过，backward 没有 `retain_graph`，并且在函数的每条路径上都会执行。

第二次 backward 也可以是同一个 backward 的下一轮：深度互学习（deep mutual learning）把每个模型的输出
放进列表，`for i in range(n):` 中模型 i 的损失由 `outputs[i]` 和同伴的 `outputs[j]`（`for j in range(n)`）
构成且没有 `.detach()`，然后反向传播。自身下标每一轮指向不同的元素，同伴下标却指向每一个元素，
所以第一轮就释放了所有输出的计算图，第二轮撞上其中之一。修复方法是在损失读取同伴输出的地方 detach：
`F.softmax(outputs[j].detach(), dim=1)`。

## 为什么这是个问题
`backward()` 在反向传播时会释放计算图为求梯度而保存的张量（矩阵乘法的输入、激活函数的输出等）。
第二次 `backward()` 经过共享部分时又需要它们，于是在第一轮迭代就报错：

```
RuntimeError: Trying to backward through the graph a second time (or directly access saved
tensors after they have already been freed).
```

最常见的是 GAN：训练判别器时直接用了生成器的输出，没有 `.detach()`。


如果第一次 backward 写了 `retain_graph=True`，而第二次之前有 `optD.step()`，被保存的权重本身已被原地修改，
torch 会改为报错

```
RuntimeError: one of the variables needed for gradient computation has been modified by an
inplace operation
```

（PyTorch-GAN 的 `softmax_gan.py` 和 `cluster_gan.py` 就是这样；torch 1.5 之前不做这个检查）。
这是同一个错误——第二次 backward 经过了这一步已经用掉的计算图——所以用同一个编号。

## 示例
```python
for real in loader:
    fake = G(torch.randn(64, 100))
    optD.zero_grad()
    lossD = bce(D(real), ones) + bce(D(fake), zeros)
    lossD.backward()                 # 释放了 G 那部分计算图
    optD.step()
    optG.zero_grad()
    lossG = bce(D(fake), ones)
    lossG.backward()                 # RuntimeError: ... a second time
    optG.step()
```

## 修复
一种做法是为第二次反向传播保留共享部分，这样算出的梯度与程序本意完全相同：

```python
    lossD.backward(retain_graph=True)
```

另一种做法是在第一个损失里切断共享张量，适用于它的来源不应从这个损失学习的情况
（GAN 判别器那一步的惯用写法；这样生成器不会从 `lossD` 得到梯度）：

```python
    lossD = bce(D(real), ones) + bce(D(fake.detach()), zeros)
```

如果两个损失本来就要更新同一组参数，也可以把它们相加后只调用一次 `backward()`。

如果两次 backward 之间有 `optG.zero_grad()`，第一个损失给来源的梯度在任何 step 之前就被清掉了，
这时快速修复用 detach：参数更新完全相同，不保留计算图，也是教程里的写法；否则用 `retain_graph=True`。

如果两次 backward 之间的优化器 step 更新了共享部分（包括通过别名 `g_optim = self.optim_g`，或者像
SAM 的 `first_step()` 那样两步走的优化器），保留计算图就不是修复。这时快速修复会在 step 之后重新计算
共享部分（`optD.step()` 之后的 `d_fake = D(gen_imgs)`，SAM 的第二次前向）；如果第二次 backward
之后 step 的优化器并不训练被更新的那部分，就在第二个损失读取它的输出的地方 detach
（生成器 step 之后重新计算 `D(gen_imgs.detach())`）。

## 常见问题
**GG101 说 `retain_graph=True` 不是正确的修复，为什么这里可以？**
GG101 说的是把计算图带进*下一轮*迭代：保留它会让每一步都回溯之前所有步的图。这里两次反向传播
属于*同一步*、同一张图，`retain_graph=True` 只把图保留到第二次反向传播，之后照常释放。

**快速修复用的是哪一种？**
选不改变任何参数更新的那一种：如果第一个损失给来源的梯度在任何 step 之前就被清零（两次 backward
之间有 `optG.zero_grad()`），就用 detach（`retain_graph=True` 作为第二个选项）；否则用
`retain_graph=True`（detach 作为第二个选项，因为它会改变来源学到的东西）。

**为什么对 `x.sum()` 再调用一次 `loss.backward()` 不会被报告？**
只有保存了张量的那部分计算图才会在第二次反向传播时出错（模块调用、矩阵乘法、乘法或乘方、激活函数）。
求和、view、加法不保存张量，PyTorch 可以对它们反向传播两次而不报错。

**同一个 `torch.distributions` 对象算出两个损失？**
只报告那些由参数构建时就保存了张量的分布：`Categorical`（两种构造方式都是），用概率构造的
`Bernoulli`、`Binomial`（它们会缓存由概率算出的 logits），以及用 logits 构造的 `Geometric`。`Normal(mu, 1.0)` 和
`Bernoulli(logits=...)` 每次都重新计算 log-prob，不会被报告。
''',
}


# backward( / manual_backward( / autograd.grad( — not zero_grad(
_BACKWARD_SPELLING = re.compile(r"backward\s*\(|(?<!\w)grad\s*\(")


class FreedInStep(Rule):
    code = "GG103"
    name = "freed-in-step"
    default_severity = Severity.ERROR
    needs_backprop = True
    names_lines = True  # "which `lossD.backward()` on line 33 already freed"
    fact_sources = (GRAPH_FACTS,)  # the interpreter reads fn:/class: facts of same-file definitions
    title = {
        "en": "A backward() runs through a graph an earlier backward() of the same step freed",
        "zh": "backward() 经过的计算图已被同一步里更早的 backward() 释放",
    }
    explanation = EXPLANATION

    def check(self, unit, ctx):
        if not unit.body:
            return ()
        if K.other_framework_only(ctx.imports):
            return ()  # mxnet/paddle/...: not a torch program
        text = unit_text(unit, ctx.index.lines)
        if len(_BACKWARD_SPELLING.findall(text)) + _own_backward_calls(unit, ctx, text) < 2 and \
                unit_words(unit, ctx.index.lines).isdisjoint(query(ctx.summary, _container_freers)) and \
                not _may_read_peers(text):
            return ()  # one backward cannot free a graph for another (unless a helper called twice frees one,
            # or one backward in a loop frees every element of a list its next iteration reads)
        if unit.kind == "function" and A.is_no_grad_function(unit.node, ctx):
            return ()
        flow = unit_trace(unit, ctx)  # GG101's run of the unit, if it asked first
        if flow is None:
            return ()
        events: Dict[int, V.BackwardEvent] = {}
        for ev in flow.events:
            events.setdefault(id(ev.call), ev)  # a loop body is walked more than once: its first walk
        if len(events) < 2 and not any(ev.peers for ev in events.values()):
            return ()
        out: List[Finding] = []
        reported: Set[int] = set()
        _WALKS.memo = {}  # this unit's statements, each walked once (see _calls_in)
        try:
            out.extend(_check_peers(self, events, reported, ctx))
            # a helper's backward through a container kept outside it first: the block check
            # below would read it as a helper back-propagating its arguments
            out.extend(_check_stale(self, unit.body, events, reported, ctx, kept_only=True))
            for block in _blocks(unit.body):
                for f in _check_block(self, block, events, flow.saving_calls, reported, ctx, (flow, unit)):
                    out.append(f)
            for block in _blocks(unit.body):
                for f in _check_stepped(self, block, events, flow.saving_calls, reported, ctx, flow.entry_graphs):
                    out.append(f)
            for f in _check_stale(self, unit.body, events, reported, ctx):
                out.append(f)
        finally:
            _WALKS.memo = None
        return out


_FOR_WORD = re.compile(r"\bfor\b")


def _may_read_peers(text: str) -> bool:
    """Cheap pre-filter (text) for one backward in a loop over a list that another loop
    inside reads element by element (``for i ...: for j ...: outputs[j]``)."""
    return "backward" in text and "[" in text and len(_FOR_WORD.findall(text)) >= 2


def _check_peers(rule, events, reported, ctx) -> Iterator[Finding]:
    """Deep mutual learning (``BackwardEvent.peers``): each iteration of ``for i`` reads
    every element of a list built before the loop (``outputs[j]`` for each ``j``, beside
    ``outputs[i]``) into a loss it back-propagates without retain_graph: the first
    iteration frees every element's graph, the second runs into one of them."""
    for ev in sorted(events.values(), key=lambda e: _pos(e.call)):
        if ev.peers and id(ev.call) not in reported:
            reported.add(id(ev.call))
            yield _peer_finding(rule, ev, ctx)


def _peer_finding(rule, ev, ctx) -> Finding:
    reads: List[ast.AST] = []
    for read, _, _ in ev.peers:
        if read not in reads:
            reads.append(read)
    read, node, loop = ev.peers[0]
    b = ev.call
    container = ast.unparse(read.value)
    own = f"{container}[{ast.unparse(loop.target)}]"
    shown = ast.unparse(read)
    error = '"Trying to backward through the graph a second time"'
    msg = {
        "en": f"`{_short(b)}` runs, from the second iteration of the loop on line {loop.lineno}, through the "
              f"graph of an element of `{container}` (built by `{_short(node)}`, line {node.lineno}) that it "
              f"already freed in the first: the loss reads every element of `{container}` through `{shown}` "
              f"(line {read.lineno}), not only this iteration's `{own}`, without `.detach()`, so the first "
              f"backward frees the graphs of all of them ({error}); detach the other elements where the loss "
              f"reads them (`{shown}.detach()`), or compute `{container}` again in each iteration.",
        "zh": f"`{_short(b)}` 从第 {loop.lineno} 行循环的第二轮起，要反向传播经过 `{container}` 中某个元素"
              f"（由第 {node.lineno} 行的 `{_short(node)}` 构建）的计算图，而它在第一轮已经释放了这些图："
              f"损失通过 `{shown}`（第 {read.lineno} 行）读取了 `{container}` 的每个元素，而不只是本轮的 "
              f"`{own}`，且没有 `.detach()`，所以第一次 backward 就释放了它们全部的计算图（报错 {error}）；"
              f"请在损失读取其他元素的地方 detach（`{shown}.detach()`），或在每一轮重新计算 `{container}`。",
    }
    related = (
        Related(ctx.range(node), {"en": "the graphs of the list's elements are built here",
                                  "zh": "列表各元素的计算图在这里构建"}),
        Related(ctx.range(read), {"en": f"every element of `{container}` is read here, each iteration",
                                  "zh": f"每一轮都在这里读取 `{container}` 的每个元素"}),
    )
    edits = []
    for r in reads:
        at = ctx.pos(getattr(r, "end_lineno", 0), getattr(r, "end_col_offset", 0))
        edits.append(TextEdit(Range(at, at), ".detach()"))
    preferred = _steps_own_model(loop, b)
    fix = Fix({"en": f"Detach `{shown}` where the loss reads it (each model learns from its own loss only"
                     + (", as its optimizer's zero_grad() already had it" if preferred else "") + ")",
               "zh": f"在损失读取 `{shown}` 的地方 detach（每个模型只从自己的损失学习"
                     + ("，与其优化器的 zero_grad() 的效果一致" if preferred else "") + "）"},
              tuple(edits), preferred=preferred)
    return Finding(rule.code, ctx.range(b), msg, rule.default_severity, related, (fix,),
                   {"variable": container, "first_backward_line": b.lineno})


def _steps_own_model(loop: ast.For, b: ast.Call) -> bool:
    """Does each iteration zero, before the backward, and step, after it, the optimizer
    of its own index (``optimizers[i].zero_grad()`` ... ``optimizers[i].step()``)? Then
    what the loss sends into the other elements' models is zeroed before any step uses
    it, and detaching them changes no update."""
    i = loop.target.id if isinstance(loop.target, ast.Name) else None
    stmts = _in_order(loop.body)
    at = next((k for k, s in enumerate(stmts) if _holds(s, b)), None)
    if i is None or at is None:
        return False

    def owner(s: ast.stmt, method: str) -> Optional[str]:
        c = s.value if isinstance(s, ast.Expr) else None
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == method \
                and isinstance(c.func.value, ast.Subscript) and isinstance(c.func.value.slice, ast.Name) \
                and c.func.value.slice.id == i:
            return ast.dump(c.func.value.value)
        return None

    zeroed = {owner(s, "zero_grad") for s in stmts[:at]} - {None}
    stepped = {owner(s, "step") for s in stmts[at + 1:]} - {None}
    return bool(zeroed & stepped)


def _container_freers(summary) -> FrozenSet[str]:
    """Same-file functions that surely back-propagate what a container kept outside
    them holds (``finish_episode()``): called twice, one call is the second backward.
    A summary query."""
    return frozenset(k[3:].rpartition(".")[2] for k, v in summary.items()
                     if k.startswith("fn:") and isinstance(v, V.FnFacts) and any(e.frees for e in v.containers))


def _own_backward_calls(unit, ctx, text: str) -> int:
    """How many times a method calls, on ``self``, its class's methods that
    back-propagate (``self.backward_D()``): the interpreter runs them in place."""
    if unit.class_node is None or "self." not in text:
        return 0
    cf = ctx.summary.get("class:" + unit.class_node.name)
    if not isinstance(cf, V.ClassFacts):
        return 0
    return sum(len(re.findall(r"\bself\s*\.\s*" + re.escape(name) + r"\s*\(", text))
               for name, facts in cf.methods if facts.calls_backward)


# ---------------------------------------------------------------------------
def _blocks(body: Sequence[ast.stmt]) -> Iterator[Sequence[ast.stmt]]:
    """Every statement list of the unit (nested defs and classes are units of their own)."""
    yield body
    for s in A.iter_statements(body):
        for block in A.child_blocks(s):
            yield block


def _in_order(block: Sequence[ast.stmt]) -> List[ast.stmt]:
    """The statements that run, in order, whenever the list runs: ``with`` bodies inline."""
    out: List[ast.stmt] = []
    for s in block:
        if isinstance(s, (ast.With, ast.AsyncWith)):
            out.extend(_in_order(s.body))
        else:
            out.append(s)
    return out


def _direct_backward(stmt: ast.stmt, ctx, events) -> Optional[ast.Call]:
    """``loss.backward(...)`` / ``grads = torch.autograd.grad(...)`` / ``d_loss =
    train_discriminator(real, fake)`` (a helper of the user's that back-propagates)
    as the statement itself."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, ast.Call) and (A.is_backward_call(value, ctx) or id(value) in events):
        return value
    return None


def _backward_calls(stmt: ast.stmt, ctx, events) -> List[ast.Call]:
    """Backward calls (and calls of helpers that back-propagate) anywhere in a
    statement, nested blocks included, nested defs not; in source order."""
    def backward(node: ast.AST) -> Optional[ast.Call]:
        if isinstance(node, ast.Call) and (A.is_backward_call(node, ctx) or id(node) in events):
            return node
        return None

    return _calls_in(stmt, "backward", backward, True)


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

# Within one check(): what _calls_in found in each statement, by (kind, id). Every
# statement list of the unit is examined (_blocks), each statement with everything
# nested in it: without this a statement was walked once per enclosing block.
_WALKS = threading.local()


def _calls_in(stmt: ast.stmt, kind: str, match: Callable, source_order: bool) -> list:
    """``match(node)`` for every node of ``stmt`` (nested blocks included, nested
    defs not) where it is not None: depth first, children in source order or
    (``source_order=False``) last child first. During a check() each statement's
    answer is remembered, and a statement inside another reuses it (a depth-first
    walk visits a subtree's nodes in one stretch, so the order is the same)."""
    memo = getattr(_WALKS, "memo", None)
    if memo is not None:
        got = memo.get((kind, id(stmt)))
        if got is not None:
            return got
    nodes = A.stmt_nodes(stmt)  # the statement's stretch of its def's one walk, if there is one
    if nodes is not None:
        found = [m for m in map(match, nodes) if m is not None]  # (source order, depth first)
        if not source_order and len(found) > 1:
            # last child first: of two nodes neither inside the other, the later comes first
            found = found[::-1] if not _nested(found) else _calls_walked(stmt, match, memo, kind, source_order)
        if memo is not None:
            memo[(kind, id(stmt))] = found
        return found
    return _calls_walked(stmt, match, memo, kind, source_order)


def _calls_walked(stmt: ast.stmt, match: Callable, memo, kind: str, source_order: bool) -> list:
    out: list = []
    stack: List[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, _NESTED):
            continue
        if memo is not None and node is not stmt and isinstance(node, ast.stmt):
            out.extend(_calls_in(node, kind, match, source_order))
            continue
        m = match(node)
        if m is not None:
            out.append(m)
        children = A.child_nodes(node)
        if source_order:
            children.reverse()
        stack.extend(children)
    if memo is not None:
        memo[(kind, id(stmt))] = out
    return out


def _pos(node: ast.AST) -> Tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _legacy_retain(call: ast.Call) -> bool:
    """``retain_variables=True``: retain_graph's name before PyTorch 0.4 (tutorials still show it)."""
    return any(kw.arg == "retain_variables" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
               for kw in call.keywords)


def _check_block(rule, block, events, saving, reported, ctx, where=None) -> Iterator[Finding]:
    stmts = _in_order(block)
    start = _pos(block[0])
    for i, s in enumerate(stmts):
        b1 = _direct_backward(s, ctx, events)
        if b1 is None or A.has_retain_graph(b1) or _legacy_retain(b1):  # (create_graph= counts there too)
            continue
        ev1 = events.get(id(b1))
        if ev1 is None or ev1.retain:  # a helper that keeps its graph
            continue
        end = _pos(s)
        # what this backward frees: saving parts of the graph built in this list, before it
        frees = ev1.loss.graph_tokens() if ev1.sure is None else ev1.sure  # an own method run in place: what it surely frees
        freed = {t for t in frees if start <= _pos(t[1]) < end and id(t[1]) in saving}
        if not freed:
            continue
        for later in stmts[i + 1:]:
            for b2 in _backward_calls(later, ctx, events):
                if id(b2) in reported:
                    continue
                ev2 = events.get(id(b2))
                if ev2 is None:
                    continue
                shared = freed & ev2.loss.graph_tokens()
                if shared:
                    reported.add(id(b2))
                    yield _finding(rule, stmts, s, b1, b2, shared, ctx, where)


def _check_stale(rule, body, events, reported, ctx, kept_only: bool = False) -> Iterator[Finding]:
    """The interpreter's proof beyond one statement list (``BackwardEvent.stale``): a
    value whose graph a backward surely freed on every path reaches a later one --
    the last ``fake_batch`` of an inner loop whose own backward freed it, scored
    after that loop; REINFORCE's log-probs kept in ``policy.saved_log_probs`` that
    a first ``finish_episode()`` back-propagated, back-propagated again by a second."""
    for ev in sorted(events.values(), key=lambda e: _pos(e.call)):
        if not ev.stale or id(ev.call) in reported:
            continue
        b2 = ev.call
        tok = min(ev.stale, key=lambda t: _pos(t[1][1]))
        node, b1 = tok[1][1], tok[2]
        if kept_only and (A.is_backward_call(b1, ctx) or not _kept_in(b1, ctx)):
            continue
        reported.add(id(b2))
        yield _stale_finding(rule, body, node, b1, b2, ctx)


def _stale_finding(rule, body, node, b1, b2, ctx) -> Finding:
    holder = next((s for s in A.iter_statements(body) if isinstance(s, (ast.Assign, ast.AnnAssign))
                   and _holds(s, node)), None)
    name = _single_name(holder) if holder is not None else None
    kept = _kept_in(b1, ctx, node) if not A.is_backward_call(b1, ctx) else []
    if kept:
        shown = ", ".join(f"`{k}`" for k in kept)
        what = f"the graphs kept in {shown} (filled by `{_short(node)}`, line {node.lineno})"
        what_zh = f"保存在 {shown} 里的计算图（由第 {node.lineno} 行的 `{_short(node)}` 放入）"
    else:
        shown = f"`{name}`" if name else f"`{_short(node)}`"
        what = f"the graph of {shown} (line {node.lineno})"
        what_zh = f"{shown}（第 {node.lineno} 行）的计算图"
    loop = _enclosing_loop(body, b1, b2)
    first, second = _short(b1), _short(b2)
    if loop is not None:
        how_en = f", in the loop on line {loop.lineno}, whose last iteration built it and ran that backward"
        how_zh = f"（在第 {loop.lineno} 行的循环里：它的最后一轮构建了它，又运行了那次 backward）"
    else:
        how_en = how_zh = ""
    fixes: List[Fix] = []
    edits = _detach_after(body, holder, name, b1, b2, ctx) if (name and holder is not None and not kept) else None
    if edits:
        advice_en = (f"nothing can back-propagate into it any more: detach {shown} where the "
                     f"second loss reads it, or compute it again")
        advice_zh = "它已无法再反向传播：请在第二个损失读取它的地方 detach，或重新计算它"
        fixes.append(Fix({"en": f"Detach `{name}` where the second loss reads it (its graph is freed: no gradient "
                                f"could reach it)",
                          "zh": f"在第二个损失读取 `{name}` 的地方 detach（它的计算图已释放，梯度本就无法到达）"},
                         tuple(edits), preferred=True))
    elif kept:
        advice_en = (f"clear {shown} after each backward through it (`del {kept[0]}[:]`), so that the next "
                     f"call back-propagates only the graphs built since")
        advice_zh = f"请在每次对它反向传播之后清空 {shown}（`del {kept[0]}[:]`），让下一次调用只反向传播之后新建的计算图"
    else:
        advice_en = "compute it again before the second loss, or detach it where that loss reads it"
        advice_zh = "请在第二个损失之前重新计算它，或在该损失读取它的地方 detach"
    direct = A.is_backward_call(b1, ctx)
    error = '"Trying to backward through the graph a second time"'
    error_en = error_zh = error
    if kept:  # the helper may step an optimizer after its backward: torch may stop on that first
        error_en += ', or "modified by an inplace operation" if a step in between changed the weights it saved'
        error_zh += '，若两次之间的 step 改变了它保存的权重，则报 "modified by an inplace operation"'
    msg = {
        "en": f"`{second}` back-propagates through {what}, which `{first}` on line {b1.lineno} already "
              f"freed{how_en} ({error_en}); {advice_en}.",
        "zh": f"`{second}` 要反向传播经过{what_zh}，而它已被第 {b1.lineno} 行的 `{first}` "
              f"释放{how_zh}（报错 {error_zh}）；{advice_zh}。",
    }
    related = (
        Related(ctx.range(node), {"en": "the graph is built here", "zh": "计算图在这里构建"}),
        Related(ctx.range(b1), {"en": "this backward frees it (no retain_graph=True)",
                                "zh": "这次反向传播释放了它（没有 retain_graph=True）"} if direct else
                {"en": f"`{_callee(b1)}` back-propagates through it here and frees it",
                 "zh": f"`{_callee(b1)}` 在这里对它反向传播并释放了它"}),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, tuple(fixes),
                   {"variable": name or (kept[0] if kept else ""), "first_backward_line": b1.lineno})


def _facts_of(call: ast.AST, ctx) -> Optional[V.FnFacts]:
    name = A.dotted(call.func) if isinstance(call, ast.Call) else None
    facts = ctx.summary.get("fn:" + name) if name else None
    return facts if isinstance(facts, V.FnFacts) else None


def _kept_in(call: ast.Call, ctx, filler: Optional[ast.AST] = None) -> List[str]:
    """The outside containers a helper surely back-propagates (its facts' container
    effects); with ``filler`` (the call that put the graph there), those it fills."""
    facts = _facts_of(call, ctx)
    if facts is None:
        return []
    kept = [e.path for e in facts.containers if e.frees and not e.path.startswith("#")]
    fills = _facts_of(filler, ctx) if filler is not None else None
    if fills is not None:
        filled = {e.path for e in fills.containers if e.appends}
        for d in fills.delegates:  # play(): a loop of select_action() calls
            inner = ctx.summary.get("fn:" + d[0])
            if isinstance(inner, V.FnFacts):
                filled |= {e.path for e in inner.containers if e.appends}
        kept = [k for k in kept if k in filled] or kept
    return kept


def _holds(s: ast.stmt, node: ast.AST) -> bool:
    """Does statement ``s`` span ``node``? (by position: a walk of a whole module's
    statements per finding would be quadratic)"""
    end = (getattr(s, "end_lineno", None) or s.lineno, getattr(s, "end_col_offset", None) or 0)
    return (s.lineno, s.col_offset) <= _pos(node) <= end


def _innermost(body, node) -> Optional[Tuple[List[ast.stmt], int]]:
    """The innermost statement list holding ``node`` (``with`` bodies inline) and the
    index there of the statement that holds it."""
    stmts = _in_order(body)
    while True:
        j = next((k for k, s in enumerate(stmts) if _holds(s, node)), None)
        if j is None:
            return None
        inner = next((b for b in A.child_blocks(stmts[j]) if any(_holds(t, node) for t in b)), None)
        if inner is None:
            return stmts, j
        stmts = _in_order(inner)


def _enclosing_loop(body, b1, b2) -> Optional[ast.stmt]:
    """The innermost loop holding ``b1`` but not ``b2``."""
    best = None
    for s in A.iter_statements(body):
        if isinstance(s, A.LOOPS) and _holds(s, b1) and not _holds(s, b2):
            if best is None or _pos(s) > _pos(best):
                best = s
    return best


def _detach_after(body, holder, name, b1, b2, ctx) -> Optional[List[TextEdit]]:
    """``name`` -> ``name.detach()`` in the statements after the one that freed it (the
    loop holding ``b1``) that build the second loss, in the statement list of ``b2``.
    None when that list does not also hold the freeing statement, or ``name`` is
    bound again in between (then what is read is not the freed value)."""
    found = _innermost(body, b2)
    if found is not None:
        stmts, j = found
        i = next((k for k, s in enumerate(stmts[:j]) if _holds(s, b1)), None)
        if i is None:
            return None
        need = _inputs_of(stmts, b2)
        edits: List[TextEdit] = []
        for s in stmts[i + 1:j + 1]:
            if name in _assigned(s) or any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                          ast.ClassDef)) for n in ast.walk(s)):
                return None
            if s is not stmts[j] and not (_assigned(s) & need):
                continue
            cut = _detached_names(s)
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in cut:
                    at = ctx.pos(n.end_lineno, n.end_col_offset)
                    edits.append(TextEdit(Range(at, at), ".detach()"))
        return edits or None
    return None


def _own_call(call: ast.AST) -> Optional[str]:
    """``self.backward_D()`` → ``backward_D``: a method of the unit's own object."""
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == "self":
        return call.func.attr
    return None


def _finding(rule, stmts, s1, b1, b2, shared, ctx, where) -> Finding:
    node = min((t[1] for t in shared), key=_pos)
    holder = _holder(stmts, s1, node)
    name = _single_name(holder) if holder is not None else None
    what = f"`{name}`" if name else f"`{_short(node)}`"
    flow, unit = where if where is not None else (None, None)
    kept = flow.sets_by_call.get(id(node), ()) if flow is not None else ()
    if not name and kept:
        # self.forward() left it on the object: self.fake_B
        what = " / ".join(f"`{k}`" for k in kept)
    line1, line0 = b1.lineno, node.lineno
    first, second = _short(b1), _short(b2)
    direct = A.is_backward_call(b1, ctx)
    keep: Optional[TextEdit] = None
    cut: List[TextEdit] = []
    if not direct and _own_call(b1) and kept:
        # a driver's own methods (pix2pix's backward_D() then backward_G()): the edit
        # belongs in the method that builds the first loss, which the message names
        m1 = _own_call(b1)
        shown = " / ".join(f"`{k}`" for k in kept)
        advice_en = (f"in `{m1}`, detach {shown} where the loss it back-propagates reads it, if what produced it "
                     f"should not learn from that loss, or keep the graph there (`retain_graph=True` on its "
                     f"backward)")
        advice_zh = (f"请在 `{m1}` 里它反向传播的损失读取 {shown} 的地方 detach（若其来源不应从该损失学习），"
                     f"或在那里保留计算图（在它的 backward 上加 `retain_graph=True`）")
        got = _detach_in_method(stmts, s1, b1, b2, node, kept, flow, unit, ctx) if flow is not None else None
        if got is not None:
            edits, zeroed = got
            advice_en = (f"detach {shown} where `{m1}` reads it (`{zeroed}` discards what that loss gives its producer "
                         f"before any step)")
            advice_zh = f"请在 `{m1}` 读取 {shown} 的地方 detach（`{zeroed}` 会在任何 step 之前清掉该损失给它来源的梯度）"
            fix = Fix({"en": f"Detach {shown} in `{m1}` (`{zeroed}` discards what that loss gives the producer; same updates)",
                       "zh": f"在 `{m1}` 里 detach {shown}（`{zeroed}` 会清掉该损失给来源的梯度；更新不变）"},
                      tuple(edits), preferred=True)
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         advice_en, advice_zh, [fix], name, ctx)
    elif not direct:
        # the first backward is inside a helper: no edit here keeps its graph, and a
        # detach alone changes what the input learns; the message says what to do
        advice_en = (f"keep the graph in `{_callee(b1)}`'s backward (`retain_graph=True`), or pass "
                     f"{what[:-1]}.detach()` to it if what produced {what} should not learn from it")
        advice_zh = (f"请在 `{_callee(b1)}` 内部的 backward 上加 `retain_graph=True`，或者若 {what} 的来源"
                     f"不应从中学习，就把 {what[:-1]}.detach()` 传给它")
    elif _stepped_in_between(stmts, s1, b2, shared, ctx):
        second_cut = _detach_in_second(stmts, holder, s1, b1, b2, name, shared, ctx) if name and holder is not None else None
        if second_cut:
            # the optimizer stepped after the second backward does not train what produced the
            # shared value: cutting it out of the second loss changes none of its gradients
            cut2, opt2 = second_cut
            advice_en = (f"an optimizer step in between updates what produced {what}, and `{opt2}` does not "
                         f"train it: detach {what} where it feeds the second loss")
            advice_zh = (f"两次之间的优化器 step 原地更新了 {what} 的来源，而 `{opt2}` 并不训练它：请在它进入"
                         f"第二个损失的地方 detach")
            fix2 = Fix({"en": f"Detach `{name}` in the second loss (`{opt2}` does not train what produced it)",
                        "zh": f"在第二个损失里 detach `{name}`（`{opt2}` 并不训练它的来源）"},
                       tuple(cut2), preferred=True)
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         advice_en, advice_zh, [fix2], name, ctx)
        redo = _recompute_after_step(stmts, s1, b2, shared, ctx)
        if redo is not None:
            # the forward again after the step that updated it (the second loss then sees the
            # updated weights, as a second step of SAM or a GAN trained in turn does)
            edits, kind, names, opt = redo
            shown = ", ".join(f"`{n}`" for n in names)
            advice_en = f"an optimizer step in between updates its weights in place: compute {shown} again after `{opt}.step()`"
            advice_zh = f"两次之间的优化器 step 原地更新了它的权重：请在 `{opt}.step()` 之后重新计算 {shown}"
            fix3 = Fix({"en": f"Compute {shown} again after `{opt}.step()`",
                        "zh": f"在 `{opt}.step()` 之后重新计算 {shown}"}, tuple(edits), preferred=True)
            return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                         advice_en, advice_zh, [fix3], name, ctx)
        # no fix then: a detach changes what the shared part learns, so it cannot be
        # the fix `--fix` and Fix All apply; the message says what to do
        advice_en = (f"an optimizer step in between may update its weights in place, so compute {what} again "
                     f"for the second loss")
        advice_zh = f"两次之间的优化器 step 可能原地更新了它的权重，请为第二个损失重新计算 {what}"
    else:
        keep = _retain_edit(b1, ctx)
        advice_en = "pass `retain_graph=True` to that first backward"
        advice_zh = "请给第一次 backward 加上 `retain_graph=True`"
    if direct and name and holder is not None:
        cut = _detach_uses(stmts, holder, s1, b2, name, ctx)
    if cut:
        advice_en += f", or detach {what} where it feeds the first loss"
        advice_zh += f"，或在它进入第一个损失的地方对 {what} 做 detach"
    fixes: List[Fix] = []
    if keep is not None:
        fixes.append(Fix({"en": f"Keep the graph for the second backward: `retain_graph=True` on line {line1} "
                                f"(same gradients)",
                          "zh": f"为第二次 backward 保留计算图：在第 {line1} 行加 `retain_graph=True`（梯度不变）"},
                         (keep,), preferred=True))
    zeroed = _producer_zeroed(stmts, s1, b2, shared, ctx) if cut and keep is not None else None
    if zeroed and keep is not None:
        # what the first loss gives the shared value's producer is zeroed before any step uses
        # it: the detach changes no update, keeps no graph alive, and is what tutorials write
        advice_en = (f"detach {what} where it feeds the first loss (`{zeroed}` discards what that loss gives "
                     f"its producer before any step), or pass `retain_graph=True` to that first backward")
        advice_zh = (f"请在 {what} 进入第一个损失的地方 detach（`{zeroed}` 会在任何 step 之前清掉该损失给它来源的"
                     f"梯度），或给第一次 backward 加上 `retain_graph=True`")
        fixes = [Fix({"en": f"Detach `{name}` in the first loss (`{zeroed}` discards what it gives the producer; "
                            f"same updates)",
                      "zh": f"在第一个损失里 detach `{name}`（`{zeroed}` 会清掉它给来源的梯度；更新不变）"},
                     tuple(cut), preferred=True),
                 Fix({"en": f"Keep the graph for the second backward: `retain_graph=True` on line {line1} "
                            f"(same gradients, more memory)",
                      "zh": f"为第二次 backward 保留计算图：在第 {line1} 行加 `retain_graph=True`（梯度不变，内存更多）"},
                     (keep,))]
    elif cut and keep is not None:
        fixes.append(Fix({"en": f"Detach `{name}` in the first loss (what produced it gets no gradient from "
                                f"that loss)",
                          "zh": f"在第一个损失里 detach `{name}`（它的来源不再从该损失得到梯度）"},
                         tuple(cut)))
    return _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct,
                 advice_en, advice_zh, fixes, name, ctx)


def _detach_in_method(stmts, s1, b1, b2, node, kept, flow, unit, ctx):
    """A driver's first backward runs in its own method ``m1`` (pix2pix's
    ``backward_D()``), reading attributes another own method left with a graph
    (``self.fake_B``). ``self.fake_B`` → ``self.fake_B.detach()`` where ``m1`` reads it
    changes no update when: the driver discards what that loss gives the producer
    before any step can use it (``optimizer_G.zero_grad()``, an optimizer built
    from every module that built it, and no step in between of one that may hold
    them), ``m1`` is called from this driver only, and nothing in ``m1`` needs the
    attribute's graph (an ``autograd.grad`` against what is built from it, here or
    in a helper whose summary says so, or a call we cannot see). ([edits], the
    zero_grad call) or None."""
    m1 = _own_call(b1)
    cls = unit.class_node if unit is not None else None
    producers = flow.modules_by_call.get(id(node), frozenset())
    if not m1 or cls is None or not producers:
        return None
    fn = next((d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == m1), None)
    if fn is None or fn.decorator_list:
        return None
    text = "\n".join(ctx.index.lines)
    if len(re.findall(r"\.\s*" + re.escape(m1) + r"\s*\(", text)) != 1:
        return None  # called elsewhere too: the detach would change what those calls learn
    zeroed = None
    after = False
    for s in stmts:
        if s is s1:
            after = True
            continue
        if not after:
            continue
        if any(n is b2 for n in ast.walk(s)):
            break
        for call, opt in _step_calls(s):
            owned = _owned(opt, ctx)
            if not owned or producers & owned:
                return None  # a step that may use the producer's gradients from that loss
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute) \
                and s.value.func.attr == "zero_grad":
            who = A.dotted(s.value.func.value)
            if who and (producers <= _owned(who, ctx) or who.split(".")[-1] in producers and len(producers) == 1):
                zeroed = f"{who}.zero_grad()"
                break
    if zeroed is None:
        return None
    attrs = {k[5:] for k in kept}
    reads: List[ast.Attribute] = []
    cut = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Attribute) and n.attr in ("detach", "data") and isinstance(n.value, ast.Attribute):
            cut.add(id(n.value))
    for n in ast.walk(fn):
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
            return None
        if isinstance(n, ast.Attribute) and n.attr in attrs and isinstance(n.value, ast.Name) and n.value.id == "self":
            if not isinstance(n.ctx, ast.Load):
                return None  # m1 sets it again
            if id(n) not in cut:
                reads.append(n)
    own = {d.name for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not reads or not _graph_not_needed(fn, attrs, own, ctx):
        return None
    edits = []
    for n in reads:
        at = ctx.pos(n.end_lineno, n.end_col_offset)
        edits.append(TextEdit(Range(at, at), ".detach()"))
    return edits, zeroed


def _graph_not_needed(fn, attrs, own, ctx) -> bool:
    """Nothing in ``fn`` needs the graph of ``self.<attr>`` or of what it builds from
    it: no ``autograd.grad`` against them, and every call handed them is a module of
    ``self``, a tensor method, torch's own, or a summarised function of this file that
    does not differentiate against that argument as given (``FnFacts.grad_params``)."""
    derived: Set[str] = set()
    live = set(attrs)  # self.<attr> holding it, or built from it

    def touches(node) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                    and n.attr in live:
                return True
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in derived:
                return True
        return False

    for s in A.iter_statements(fn.body):
        if A.child_blocks(s) and not isinstance(s, (ast.With, ast.AsyncWith)):
            if touches(s):
                return False  # under a branch or a loop: not followed
            continue
        for n in ast.walk(s):
            if not isinstance(n, ast.Call):
                continue
            args = list(n.args) + [k.value for k in n.keywords]
            hit = [i for i, a in enumerate(args) if touches(a)]
            if not hit:
                continue
            q = A.qualify(n.func, ctx) or ""
            if q.endswith("autograd.grad") or q.endswith("autograd.backward"):
                return False
            if isinstance(n.func, ast.Attribute):
                base = n.func.value
                if isinstance(base, ast.Name) and base.id == "self":
                    if n.func.attr in own:
                        return False  # an own method handed it: not followed here
                    continue  # self.netD(x): a module of self
                if q.startswith("torch."):
                    continue
                if not touches(base) and not isinstance(base, ast.Name):
                    return False
                if touches(base) or base.id in derived:  # type: ignore[attr-defined]
                    continue  # x.mean(), fake_AB.view(...): a tensor method
                return False
            if isinstance(n.func, ast.Name):
                if q.startswith("torch."):
                    continue
                facts = ctx.summary.get("fn:" + n.func.id)
                if not isinstance(facts, V.FnFacts) or any(i in facts.grad_params for i in hit):
                    return False
                continue
            return False
        if touches(s) and isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(e, ast.Name):
                        derived.add(e.id)
                    elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        live.add(e.attr)
                    elif not isinstance(e, (ast.Attribute, ast.Subscript, ast.Starred)):
                        return False
    return True


def _make(rule, stmts, s1, b1, b2, node, what, line0, line1, first, second, direct, advice_en, advice_zh,
          fixes, name, ctx) -> Finding:
    msg = {
        "en": f"`{second}` back-propagates through the graph of {what} (line {line0}), which `{first}` on line "
              f"{line1} already freed (\"Trying to backward through the graph a second time\"); {advice_en}.",
        "zh": f"`{second}` 要反向传播经过 {what}（第 {line0} 行）的计算图，而它已被第 {line1} 行的 `{first}` "
              f"释放（报错 \"Trying to backward through the graph a second time\"）；{advice_zh}。",
    }
    related = (
        Related(ctx.range(node), {"en": f"the graph of {what} is built here", "zh": f"{what} 的计算图在这里构建"}),
        Related(ctx.range(b1), {"en": "this backward frees it (no retain_graph=True)",
                                "zh": "这次反向传播释放了它（没有 retain_graph=True）"} if direct else
                {"en": f"`{_callee(b1)}` back-propagates through it here and frees it",
                 "zh": f"`{_callee(b1)}` 在这里对它反向传播并释放了它"}),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, tuple(fixes),
                   {"variable": name or "", "first_backward_line": line1})


def _stepped_in_between(stmts, s1, b2, shared, ctx) -> bool:
    """Does an optimizer step between the two backward calls possibly update the
    parameters of the shared part? Then a retained graph holds weights that the
    step changed in place, and the second backward fails on that instead ("one of
    the variables needed for gradient computation has been modified by an inplace
    operation"): retain_graph=True is no fix. An optimizer whose construction does
    not name the shared part's module (a GAN's ``optD = Adam(D.parameters())``
    while the shared part is ``G(z)``) is safe; one we cannot find is not."""
    steppers: List[str] = []
    after = False
    for s in stmts:
        if s is s1:
            after = True
            continue
        if not after:
            continue
        for n in ast.walk(s):
            if n is b2:
                return _any_may_update(steppers, shared, ctx)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _is_step(n.func.attr):
                name = A.dotted(n.func.value)
                steppers.append(name or "?")
    return _any_may_update(steppers, shared, ctx)


def _any_may_update(steppers: List[str], shared, ctx) -> bool:
    if not steppers:
        return False
    parts: Set[str] = set()
    for t in shared:
        node = t[1]
        name = A.dotted(node.func) if isinstance(node, ast.Call) else None
        if name is None:
            return True  # a part we cannot name: assume the step reaches it
        bits = name.split(".")
        parts.update(b for b in bits if b != "self")
    lines = ctx.index.lines
    for opt in steppers:
        if opt == "?":
            return True
        made = _constructions(opt, lines)
        if not made:
            return True  # an optimizer we cannot see: it may hold anything
        seen = {opt}
        while made:
            value = made.pop()
            if re.fullmatch(r"[\w.]+", value) and value not in seen:
                # an alias (`g_optim = self.optim_g`): what the aliased optimizer was built from
                seen.add(value)
                more = _constructions(value, lines)
                if not more:
                    return True
                made.extend(more)
                continue
            if set(re.findall(r"\w+", value)) & parts:
                return True
    return False


def _is_step(attr: str) -> bool:
    """``opt.step()``, and the in-place parameter updates of two-step optimizers
    (SAM's ``first_step()`` / ``second_step()``)."""
    return attr == "step" or attr.endswith("_step")


def _constructions(name: str, lines: List[str]) -> List[str]:
    """The source of each value assigned to ``name`` (``opt = Adam(D.parameters())``,
    ``optD, optG = Adam(D...), Adam(G...)``: that element), found textually: a
    line whose text up to its first ``=`` (not ``==``) holds only names, dots,
    commas, brackets and spaces, one of its dotted names being ``name``.

    Remembered per file text and thread (the lines that start an assignment are
    indexed by the names before their ``=`` once; every unit asks about its
    optimizers again)."""
    memo = getattr(_CONSTRUCTIONS_MEMO, "memo", None)
    if memo is None or memo[0] is not lines:
        found: Dict[str, List[str]] = {}
        memo = (lines, _assignment_heads(lines), found)
        _CONSTRUCTIONS_MEMO.memo = memo
    found = memo[2]
    got = found.get(name)
    if got is None:
        got = found[name] = _constructions_at(name, lines, memo[1].get(name, ()))
    return list(got)  # (callers consume the list)


_CONSTRUCTIONS_MEMO = threading.local()
_HEAD = re.compile(r"[\w.,\s()\[\]]*")
_DOTTED_RUN = re.compile(r"[\w.]+")


def _assignment_heads(lines: List[str]) -> Dict[str, List[int]]:
    """Each dotted name (a whole run of word characters and dots) written before
    the ``=`` of a line that starts an assignment → those lines' indexes, in order."""
    heads: Dict[str, List[int]] = {}
    match = _HEAD.match
    for i, line in enumerate(lines):
        if "=" not in line:
            continue
        k = match(line).end()  # type: ignore[union-attr]  # (a * pattern always matches)
        if line[k:k + 1] != "=" or line[k + 1:k + 2] == "=":
            continue
        for run in set(_DOTTED_RUN.findall(line, 0, k)):
            heads.setdefault(run, []).append(i)
    return heads


def _constructions_at(name: str, lines: List[str], starts) -> List[str]:
    out: List[str] = []
    for i in starts:
        line = lines[i]
        text = line
        for more in lines[i + 1:i + 20]:  # the statement, over its lines
            if text.count("(") + text.count("[") <= text.count(")") + text.count("]"):
                break
            text += "\n" + more
        try:
            stmt = ast.parse(text.strip()).body[0]
        except (SyntaxError, IndexError, ValueError):
            continue
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            value = _value_for(target, stmt.value, name)
            if value is not None:
                out.append(ast.unparse(value))
    return out


def _value_for(target: ast.expr, value: ast.expr, name: str) -> Optional[ast.expr]:
    if A.dotted(target) == name:
        return value
    if isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts):
                found = _value_for(t, v, name)
                if found is not None:
                    return found
            return None
        if any(A.dotted(t) == name for t in target.elts):
            return value  # unpacked from one call: all of it may be this one
    return None


def _short(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    if len(text) <= limit:
        return text
    if isinstance(node, ast.Call):
        func = ast.unparse(node.func)
        if len(func) <= limit:
            return func + "(...)"
    return text[: limit - 1] + "…"


def _holder(stmts, s1, node) -> Optional[ast.stmt]:
    """The statement of the list, before the first backward, that holds ``node``."""
    for s in stmts:
        if s is s1:
            return None
        for n in ast.walk(s):
            if n is node:
                return s
    return None


def _single_name(stmt: ast.stmt) -> Optional[str]:
    """``fake = G(z)`` → ``fake``: the one name a simple assignment binds."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return stmt.target.id
    return None


def _retain_edit(call: ast.Call, ctx) -> Optional[TextEdit]:
    """``retain_graph=True`` added as the call's last argument."""
    if any(kw.arg in ("retain_graph", "create_graph") or kw.arg is None for kw in call.keywords):
        return None  # retain_graph=False spelled out, or **kwargs: leave it to the user
    end_line, end_col = call.end_lineno, call.end_col_offset
    if end_line is None or end_col is None:
        return None
    line_bytes = ctx.index.line(end_line - 1).encode("utf-8")
    if end_col < 1 or line_bytes[end_col - 1:end_col] != b")":
        return None
    args = list(call.args) + [kw.value for kw in call.keywords]
    if not args:
        at = ctx.pos(end_line, end_col - 1)
        return TextEdit(Range(at, at), "retain_graph=True")
    last = max(args, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
    if last.end_lineno is None or last.end_col_offset is None:
        return None
    between = _text_between(ctx, last.end_lineno, last.end_col_offset, end_line, end_col - 1)
    if between is None:
        return None
    comma = between.find(",")
    if comma >= 0 and not between[:comma].strip() and "\n" not in between[:comma]:
        # `f(a, )`: after the comma already there
        at = ctx.pos(last.end_lineno, last.end_col_offset + len(between[:comma + 1].encode("utf-8")))
        return TextEdit(Range(at, at), " retain_graph=True")
    at = ctx.pos(last.end_lineno, last.end_col_offset)  # right after the last argument
    return TextEdit(Range(at, at), ", retain_graph=True")


def _text_between(ctx, l0, c0, l1, c1) -> Optional[str]:
    if l0 is None or c0 is None:
        return None
    if l0 == l1:
        return ctx.index.line(l0 - 1).encode("utf-8")[c0:c1].decode("utf-8", "replace")
    parts = [ctx.index.line(l0 - 1).encode("utf-8")[c0:].decode("utf-8", "replace")]
    for ln in range(l0 + 1, l1):
        parts.append(ctx.index.line(ln - 1))
    parts.append(ctx.index.line(l1 - 1).encode("utf-8")[:c1].decode("utf-8", "replace"))
    return "\n".join(parts)


def _detach_uses(stmts, holder, s1, b2, name, ctx) -> List[TextEdit]:
    """``name`` → ``name.detach()`` where the statements between its assignment and
    the first backward read it (the first loss is built there) — only when none of
    those statements also feeds the second loss: detaching ``value`` in an
    actor-critic's ``advantage = reward - value`` would starve the critic's loss
    built from the same ``advantage``."""
    second = _inputs_of(stmts, b2)
    edits: List[TextEdit] = []
    rewritten: Set[str] = set()
    inside = False
    for s in stmts:
        if s is holder:
            inside = True
            continue
        if s is s1:
            break
        if not inside:
            continue
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(s)) and _assigned(s) & second:
            return []
        cut_already = _detached_names(s)
        for n in ast.walk(s):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return []  # a use inside a nested scope: not ours to rewrite
            if isinstance(n, ast.Name) and n.id == name and id(n) not in cut_already:
                if not isinstance(n.ctx, ast.Load):
                    return []  # reassigned before the backward: the fix would not reach it
                at = ctx.pos(n.end_lineno, n.end_col_offset)
                edits.append(TextEdit(Range(at, at), ".detach()"))
                rewritten |= _assigned(s)
    if rewritten and _differentiated_inputs(stmts, holder, s1) & rewritten:
        return []  # a gradient penalty differentiates with respect to it: it must keep its graph
    return edits


def _assigned(stmt: ast.stmt) -> Set[str]:
    out: Set[str] = set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for t in targets:
        if t is not None:
            out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def _inputs_of(stmts, b2: ast.Call) -> Set[str]:
    """The names the second backward's loss is computed from, followed back through
    the assignments of the statement list (a name-level def-use closure)."""
    need = {n.id for n in ast.walk(b2) if isinstance(n, ast.Name)}
    before: List[ast.stmt] = []
    for s in stmts:
        if any(n is b2 for n in ast.walk(s)):
            break
        before.append(s)
    for s in reversed(before):
        if _assigned(s) & need:
            need.update(n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return need


def _callee(call: ast.Call) -> str:
    return A.dotted(call.func) or _short(call.func)


# ---------------------------------------------------------------------------
# retain-then-step


def _nested(found: list) -> bool:
    """Is one of the matched nodes (a node, or a tuple starting with one) inside another?"""
    calls = [m[0] if isinstance(m, tuple) else m for m in found]
    return any(d is not c and any(n is d for n in A.iter_nodes(c)) for c in calls for d in calls)


def _step_calls(stmt: ast.stmt) -> List[Tuple[ast.Call, str]]:
    """``opt.step()`` calls anywhere in a statement (nested blocks, not nested defs),
    last first."""
    return _calls_in(stmt, "step", _step_call, False)


def _step_call(n: ast.AST) -> Optional[Tuple[ast.Call, str]]:
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _is_step(n.func.attr):
        name = A.dotted(n.func.value)
        if name:
            return n, name
    return None


_OWNED_MEMO = threading.local()


def _owned(opt: str, ctx, depth: int = 2) -> Set[str]:
    """The names of what ``opt`` was built from (``Adam(D.parameters())`` → D,
    parameters, ...), through a name the construction reads (``ge_chain =
    ichain(generator.parameters(), ...)``); empty when it cannot be read.

    Remembered per file text (the same ``lines`` object) and thread: the answer
    is read off the whole file, and every unit of a file with many steps and
    backward calls asks it again (a 7,000-line file took minutes without it)."""
    lines = ctx.index.lines
    memo = getattr(_OWNED_MEMO, "memo", None)
    if memo is None or memo[0] is not lines:
        table: Dict[Tuple[str, int], FrozenSet[str]] = {}
        memo = (lines, table)
        _OWNED_MEMO.memo = memo
    table = memo[1]
    key = (opt, depth)
    got = table.get(key)
    if got is None:
        got = table[key] = frozenset(_owned_uncached(opt, ctx, depth))
    return set(got)


def _owned_uncached(opt: str, ctx, depth: int) -> Set[str]:
    out: Set[str] = set()
    for value in _constructions(opt, ctx.index.lines):
        try:
            tree = ast.parse(value, mode="eval")
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
        if depth > 0 and isinstance(tree.body, ast.Call):
            # a list of parameters built beforehand: Adam(ge_chain, ...), Adam(a + b)
            for arg in tree.body.args[:1]:
                receivers = _receivers(arg)
                for n in ast.walk(arg):
                    if isinstance(n, ast.Name) and n.id != opt and id(n) not in receivers:
                        out |= _owned(n.id, ctx, depth - 1)
    return out


def _receivers(root: ast.AST) -> Set[int]:
    """``D`` in ``D.parameters()`` (ids): read as an object, not as a list of parameters."""
    out: Set[int] = set()
    for n in ast.walk(root):
        if isinstance(n, ast.Attribute):
            out.add(id(n.value))
        elif isinstance(n, ast.Call):
            out.add(id(n.func))
    return out


def _module_name(node: ast.AST) -> Optional[str]:
    """``D(x)`` → D, ``self.netD(x)`` → netD: the module a graph token calls."""
    if isinstance(node, ast.Call):
        name = A.dotted(node.func)
        if name:
            return name.split(".")[-1]
    return None


def _holder_of(stmts, node) -> Optional[ast.stmt]:
    for s in stmts:
        if any(n is node for n in ast.walk(s)):
            return s
    return None


def _innermost_stmt(stmt: ast.stmt, node: ast.AST) -> ast.stmt:
    """The innermost statement inside ``stmt`` that holds ``node``."""
    best = stmt
    for n in ast.walk(stmt):
        if isinstance(n, ast.stmt) and any(m is node for m in ast.walk(n)):
            if (n.lineno, n.col_offset) >= (best.lineno, best.col_offset) and n is not best:
                best = n
    return best


def _check_stepped(rule, block, events, saving, reported, ctx, entry=None) -> Iterator[Finding]:
    stmts = _in_order(block)
    if not stmts:
        return
    start = _pos(block[0])
    steps: List[Tuple[int, ast.stmt, ast.Call, str]] = []
    for i, s in enumerate(stmts):
        for call, opt in _step_calls(s):
            steps.append((i, s, call, opt))
    if not steps:
        return
    for j, s in enumerate(stmts):
        for b2 in _backward_calls(s, ctx, events):
            if id(b2) in reported:
                continue
            ev2 = events.get(id(b2))
            if ev2 is None or not A.is_backward_call(b2, ctx):
                continue
            for i, s_step, step, opt in steps:
                if not (i < j or (i == j and _pos(step) < _pos(b2))):
                    continue
                owned = _owned(opt, ctx)
                if not owned:
                    continue  # an optimizer we cannot read: no proof
                if entry:
                    # a parameter whose callers pass what another method of this object
                    # built through a module the step updates: built before the method ran
                    passed = [(entry[id(t[1])], t[1]) for t in ev2.loss.graph_tokens()
                              if id(t[1]) in entry and entry[id(t[1])][2] & owned]
                    if passed:
                        reported.add(id(b2))
                        yield _passed_finding(rule, step, opt, b2, passed[0], owned, ctx)
                        break
                hit = [t[1] for t in ev2.loss.graph_tokens()
                       if id(t[1]) in saving and start <= _pos(t[1]) < _pos(step)
                       and _module_name(t[1]) in owned and _holder_of(stmts[:i], t[1]) is not None]
                if not hit or _rebound_after_step(stmts[:i], s_step, step, hit):
                    continue
                reported.add(id(b2))
                yield _stepped_finding(rule, stmts, i, s_step, step, opt, j, b2, hit, ctx)
                break


def _passed_finding(rule, step, opt, b2, passed, owned, ctx) -> Finding:
    """The retain-then-step shape across methods (edge-connect's ``backward(gen_loss,
    dis_loss)``): the graph came in as an argument, so no edit here recomputes it;
    the message says what to do and no fix is offered."""
    (param, src, modules), arg = passed
    module = "self." + sorted(modules & owned)[0]
    second = _short(b2)
    msg = {
        "en": f"`{second}` back-propagates through the graph `{param}` holds: the callers pass what `{src}()` "
              f"returns, built through `{module}`, whose weights `{opt}.step()` on line {step.lineno} updates in place "
              f"before this backward: it stops with \"one of the variables needed for gradient computation has been "
              f"modified by an inplace operation\"; back-propagate `{param}` before the step (then the step also "
              f"applies its gradients to `{module}`), or build it after the step.",
        "zh": f"`{second}` 要反向传播经过 `{param}` 的计算图：调用方传入的是 `{src}()` 的返回值，它经过 `{module}` 构建，"
              f"而第 {step.lineno} 行的 `{opt}.step()` 在这次 backward 之前原地更新了 `{module}` 的权重：会报错 "
              f"\"one of the variables needed for gradient computation has been modified by an inplace operation\"；"
              f"请在 step 之前对 `{param}` 反向传播（这样这次 step 也会把它对 `{module}` 的梯度用上），或在 step 之后再构建它。",
    }
    related = (
        Related(ctx.range(arg), {"en": f"`{param}` comes from `{src}()`, through `{module}`",
                                 "zh": f"`{param}` 来自 `{src}()`，经过 `{module}`"}),
        Related(ctx.range(step), {"en": f"this step updates `{module}`'s weights in place",
                                  "zh": f"这次 step 原地更新了 `{module}` 的权重"}),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, (),
                   {"variable": param, "step_line": step.lineno})


def _names_read(s: ast.AST) -> Set[str]:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_RANDOM = re.compile(r"(^|\.)(randn|rand|randint|randperm|normal|bernoulli|multinomial|randn_like|rand_like|"
                     r"randint_like|uniform|choice|shuffle|sample)$")


def _simple(s: ast.stmt) -> bool:
    if any(isinstance(n, ast.Call) and _RANDOM.search(A.dotted(n.func) or "") for n in ast.walk(s)):
        return False  # drawn again, it would not be the same value
    return (isinstance(s, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in s.targets)
            and not any(isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield)) for n in ast.walk(s))
            and not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr in ("backward", "step", "zero_grad", "append", "extend")
                        for n in ast.walk(s)))


def _stepped_finding(rule, stmts, i, s_step, step, opt, j, b2, hit, ctx) -> Finding:
    node = min(hit, key=_pos)
    module = A.dotted(node.func) or _short(node.func)
    second = _short(b2)
    fix = _recompute_fix(stmts, i, s_step, step, j, b2, hit, ctx)
    how_en = how_zh = ""
    fixes: List[Fix] = []
    if fix is not None:
        edits, kind, names = fix
        shown = ", ".join(f"`{n}`" for n in names)
        if kind == "detach":
            how_en = f"; compute {shown} again after the step, from the detached input (its optimizer does not update `{module}`)"
            how_zh = f"；请在 step 之后用 detach 过的输入重新计算 {shown}（它的优化器并不更新 `{module}`）"
            title = {"en": f"Compute {shown} again after `{opt}.step()`, from the detached input (same gradients for what the next step updates)",
                     "zh": f"在 `{opt}.step()` 之后用 detach 的输入重新计算 {shown}（下一步要更新的参数梯度不变）"}
        else:
            how_en = f"; compute {shown} again after the step"
            how_zh = f"；请在 step 之后重新计算 {shown}"
            title = {"en": f"Compute {shown} again after `{opt}.step()` (the second loss then sees the updated `{module}`)",
                     "zh": f"在 `{opt}.step()` 之后重新计算 {shown}（第二个损失使用更新后的 `{module}`）"}
        fixes.append(Fix(title, tuple(edits), preferred=True))
    msg = {
        "en": f"`{second}` back-propagates through `{_short(node)}` (line {node.lineno}), whose graph saved "
              f"`{module}`'s weights before `{opt}.step()` on line {step.lineno} updated them in place: it stops with "
              f"\"one of the variables needed for gradient computation has been modified by an inplace operation\""
              f"{how_en}.",
        "zh": f"`{second}` 要反向传播经过 `{_short(node)}`（第 {node.lineno} 行），它的计算图保存了 `{module}` 的权重，"
              f"而第 {step.lineno} 行的 `{opt}.step()` 已原地更新了这些权重：会报错 \"one of the variables needed for "
              f"gradient computation has been modified by an inplace operation\"{how_zh}。",
    }
    related = (
        Related(ctx.range(node), {"en": f"the graph through `{module}` is built here",
                                  "zh": f"经过 `{module}` 的计算图在这里构建"}),
        Related(ctx.range(step), {"en": f"this step updates `{module}`'s weights in place",
                                  "zh": f"这次 step 原地更新了 `{module}` 的权重"}),
    )
    return Finding(rule.code, ctx.range(b2), msg, rule.default_severity, related, tuple(fixes),
                   {"variable": module, "step_line": step.lineno})


def _recompute_fix(stmts, i, s_step, step, j, b2, hit, ctx):
    """Statements to run again right after the step. Whether the next update
    needs gradients *through* the stepped module decides how: a generator's
    loss through the critic the step just updated needs the critic called again
    ("recompute"); a critic's loss whose input came from the stepped generator
    only needs that input cut ("detach")."""
    second_names = _inputs_deep(stmts, b2)
    before = stmts[:i]  # statements before the one holding the step
    holders = [s for s in before if any(any(n is h for n in ast.walk(s)) for h in hit)]
    if not holders:
        return None
    bound: Set[str] = set()
    for h in holders:
        bound |= _assigned(h)
    # the optimizer stepped after the second backward: what the second loss trains
    nxt = None
    for s in stmts[j:]:
        for call, opt in _step_calls(s):
            if _pos(call) > _pos(b2):
                nxt = opt
                break
        if nxt:
            break
    trains = _owned(nxt, ctx) if nxt else set()
    # does something the second loss trains consume the stepped module's output (and
    # not the stepped module itself, whose gradient it then needs)?
    derived = set(bound)
    downstream = False
    producers = {_module_name(h) for h in hit}
    if producers & trains:
        derived = set()  # it trains what the step updated: run that forward again
    first = min(stmts.index(h) for h in holders)
    for s in stmts[first:j + 1]:
        if s in holders:
            continue
        reads = _names_read(s)
        if reads & derived:
            for n in ast.walk(s):
                if isinstance(n, ast.Call) and _module_name(n) in trains and _names_read(n) & derived:
                    downstream = True
            derived |= _assigned(s)
    redo: List[ast.stmt] = []
    if downstream:
        # cut: the statements that read the stepped output, again, from its detached value
        for s in before[first:]:
            if s in holders:
                continue
            if _names_read(s) & bound and _assigned(s) & second_names:
                redo.append(s)
        kind = "detach"
    else:
        have: Set[str] = set()
        for s in before[first:]:
            if (s in holders or _names_read(s) & have) and _assigned(s) & second_names:
                redo.append(s)
                have |= _assigned(s)
        kind = "recompute"
    if not redo or not all(_simple(s) for s in redo):
        return None
    # nothing they read is rebound between them and the step
    written_after: Set[str] = set()
    for s in stmts[stmts.index(redo[0]):i]:
        if s not in redo:
            written_after |= _assigned(s)
    for s in redo:
        if _names_read(s) & written_after:
            return None
    texts = []
    for s in redo:
        if kind == "detach":
            s2 = _DetachNames(bound).visit(ast.parse(ast.unparse(s)).body[0])
            texts.append(ast.unparse(s2))
        else:
            texts.append(ast.unparse(s))
    inner = _innermost_stmt(s_step, step)
    end = inner.end_lineno or inner.lineno
    line_text = ctx.index.line(inner.lineno - 1)
    indent = line_text[: len(line_text) - len(line_text.lstrip())]
    new = "".join(f"{indent}{t}\n" for t in texts)
    at = ctx.pos(end + 1, 0)
    shown: List[str] = []
    for s in redo:
        for bound_name in sorted(_assigned(s)):
            if bound_name in second_names and bound_name not in shown:
                shown.append(bound_name)
    return [TextEdit(Range(at, at), new)], kind, shown


class _DetachNames(ast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.names:
            return ast.Call(ast.Attribute(ast.Name(node.id, ast.Load()), "detach", ast.Load()), [], [])
        return node


def _detach_in_second(stmts, holder, s1, b1, b2, name, shared, ctx):
    """``name`` → ``name.detach()`` in the statements that build only the second
    loss, when the optimizer stepped after the second backward does not train the
    module that produced ``name`` (a discriminator step after the generator's):
    ([edits], optimizer) or None."""
    nxt = None
    after_b2 = False
    for s in stmts:
        for n in ast.walk(s):
            if n is b2:
                after_b2 = True
        if after_b2:
            for call, opt in _step_calls(s):
                if _pos(call) > _pos(b2):
                    nxt = opt
                    break
        if nxt:
            break
    if nxt is None:
        return None
    trains = _owned(nxt, ctx)
    producers = {_module_name(t[1]) for t in shared}
    if not trains or None in producers or producers & trains:
        return None
    first_in = _inputs_of(stmts, b1)
    second_in = _inputs_of(stmts, b2)
    edits: List[TextEdit] = []
    inside = False
    for s in stmts:
        if s is holder:
            inside = True
            continue
        if not inside:
            continue
        if any(n is b2 for n in ast.walk(s)):
            break
        cut_already = _detached_names(s)
        reads = [n for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == name and id(n) not in cut_already]
        if not reads:
            continue
        bound = _assigned(s)
        if not bound & second_in:
            continue
        if bound & first_in or s is s1:
            return None  # it builds the first loss too
        for n in ast.walk(s):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return None
        for n in reads:
            if not isinstance(n.ctx, ast.Load):
                return None
            at = ctx.pos(n.end_lineno, n.end_col_offset)
            edits.append(TextEdit(Range(at, at), ".detach()"))
    return (edits, nxt) if edits else None


def _producer_zeroed(stmts, s1, b2, shared, ctx) -> Optional[str]:
    """``optG.zero_grad()`` (an optimizer built from the shared value's producer) or
    ``G.zero_grad()`` between the two backward calls: the producer's gradients from
    the first loss are discarded before any step could use them. The call, or None."""
    producers = {_module_name(t[1]) for t in shared}
    if None in producers:
        return None
    after = False
    for s in stmts:
        if s is s1:
            after = True
            continue
        if not after:
            continue
        if any(n is b2 for n in ast.walk(s)):
            return None
        if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Call):
            continue  # an unconditional statement of its own, nothing nested
        call = s.value
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "zero_grad"):
            continue
        who = A.dotted(call.func.value)
        if not who:
            continue
        if who.split(".")[-1] in producers or producers <= _owned(who, ctx):
            return f"{who}.zero_grad()"
    return None


def _recompute_after_step(stmts, s1, b2, shared, ctx):
    """The statements that build the shared value and the second loss from it, run again
    right after the step between the two backward calls: (edits, kind, names, optimizer)."""
    start = stmts.index(s1)
    j = next((k for k, s in enumerate(stmts) if any(n is b2 for n in ast.walk(s))), None)
    if j is None:
        return None
    for i in range(start + 1, j):
        steps = list(_step_calls(stmts[i]))
        if not steps:
            continue
        step, opt = steps[0]
        hit = [t[1] for t in shared]
        fix = _recompute_fix(stmts, i, stmts[i], step, j, b2, hit, ctx)
        if fix is None or fix[1] != "recompute":
            return None
        return fix[0], fix[1], fix[2], opt
    return None


def _inputs_deep(stmts, b2: ast.Call) -> Set[str]:
    """:func:`_inputs_of`, also through assignments inside the list's compound
    statements (``if wass_metric: d_loss = ... else: d_loss = ...``)."""
    need = {n.id for n in ast.walk(b2) if isinstance(n, ast.Name)}
    before: List[ast.stmt] = []
    for s in stmts:
        if any(n is b2 for n in ast.walk(s)):
            before.append(s)  # the statement holding the backward may build its loss too
            break
        before.append(s)
    for s in reversed(before):
        bound = {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if bound & need:
            need.update(n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return need


def _rebound_after_step(before, s_step: ast.stmt, step: ast.Call, hit) -> bool:
    """A step inside a branch (``if i % n_skip == 0: ...; opt.step()``) followed, in
    that branch, by statements that compute again what the hit parts flow into: the
    branch that steps recomputes them, the one that does not keeps a graph no step
    changed."""
    holders = [s for s in before if any(any(n is h for n in ast.walk(s)) for h in hit)]
    flows: Set[str] = set()
    for h in holders:
        flows |= _assigned(h)
    for s in before:
        if s not in holders and _names_read(s) & flows:
            flows |= _assigned(s)
    return bool(_assigned_after(s_step, step) & flows)


def _assigned_after(stmt: ast.stmt, step: ast.Call) -> Set[str]:
    """Names assigned after ``step`` in the innermost statement list inside ``stmt`` holding it."""
    for block in A.child_blocks(stmt):
        for k, st in enumerate(block):
            if any(n is step for n in ast.walk(st)):
                inner = _assigned_after(st, step)
                if inner or A.child_blocks(st):
                    return inner
                later: Set[str] = set()
                for t in block[k + 1:]:
                    later |= _assigned(t)
                return later
    return set()


def _detached_names(stmt: ast.AST) -> Set[int]:
    """Names already cut where they are read: ``fake`` in ``D(fake.detach())``."""
    return {id(n.value) for n in ast.walk(stmt)
            if isinstance(n, ast.Attribute) and n.attr in ("detach", "data") and isinstance(n.value, ast.Name)}


def _differentiated_inputs(stmts, holder, s1) -> Set[str]:
    """Names passed as ``inputs`` to ``torch.autograd.grad`` between ``holder`` and ``s1``
    (a gradient penalty's interpolates): detached, they would not require grad."""
    out: Set[str] = set()
    inside = False
    for s in stmts:
        if s is holder:
            inside = True
        if s is s1:
            break
        if not inside:
            continue
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and (A.dotted(n.func) or "").endswith("autograd.grad"):
                arg = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords if k.arg == "inputs"), None)
                if arg is not None:
                    out |= {m.id for m in ast.walk(arg) if isinstance(m, ast.Name)}
    return out
