"""GG103's words, in English and Chinese: the rule's title and explanation, the
finding's messages (and the advice each one ends with), related notes and the
title of each fix. Nothing here looks at a tree or decides anything; the
analysis says what it found (which backward calls, on which lines, through
which name, module or optimizer, as source snippets) and these functions say it.

Each function returns ``{"en": ..., "zh": ...}``, so a message is changed in
both languages in one place. (A name typed ``Optional`` is one the analysis
holds as optional but always has when it asks for that text.)
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Optional

TITLE = {
    "en": "A backward() runs through a graph an earlier backward() of the same step freed",
    "zh": "backward() 经过的计算图已被同一步里更早的 backward() 释放",
}

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

Or each element of a list may hold part of one graph: a feedback network's forward computes the
first features once and returns one output per feedback step, and `for step in range(len(losses)):
losses[step].backward()` back-propagates each step's loss on its own. The first element's backward
frees the shared part; the fix keeps the graph (`retain_graph=True`), or sums the losses and
back-propagates once.

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
second loss reads it (`D(gen_imgs.detach())` again after the generator's step, or
`discriminator(pred_g.detach())` where the program reads `pred_g` again after it). A step and a
backward in branches that never both run in one pass are not one after the other: the two
branches of one `if`, or two `if` statements whose tests clash on a name nothing in between
binds (`if train_dec and train_dis: ... opt.step()` then `if train_dec and not train_dis:
loss.backward()`). Where the second
pass keeps adding to the variable the first loss was summed in (`loss += loss_t` again after SAM's
`first_step()`), the quick fix starts that sum again (`loss = 0`) before it is refilled.

A helper or a method that back-propagates the loss it returns (`loss = train_step(model, x, y)`,
fairseq-style `criterion.forward_reg(model, sample, optimizer)` calling `optimizer.backward(loss)`)
has freed that loss's graph when it returns: a second backward of the returned loss is reported, and
the quick fix removes it (the helper's backward already gave every gradient). A graph a constructor
keeps from a module it is handed (`self.weights = model.encode_text(self.texts)` in `__init__`) is
read by every call of the object; the quick fix keeps the module (`self.model = model`) and computes
`self.weights` at the top of `forward`, which gives the first iteration the same gradients.

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

列表的每个元素也可能含有同一个计算图的一部分：反馈网络的 forward 只计算一次最初的特征，却为每个反馈步骤
返回一个输出，`for step in range(len(losses)): losses[step].backward()` 分别反向传播每一步的损失。
第一个元素的 backward 释放了共享部分；修复方法是保留计算图（`retain_graph=True`），或把损失相加后只反向传播一次。

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
（生成器 step 之后重新计算 `D(gen_imgs.detach())`，或者在 step 之后程序再次读取 `pred_g` 的地方写
`discriminator(pred_g.detach())`）。同一遍执行中不会都运行的两个分支里的 step 和 backward 不算先后：
同一个 `if` 的两个分支，或者两个 `if` 语句的条件在同一个名字上互相矛盾、且中间没有重新绑定它
（`if train_dec and train_dis: ... opt.step()` 之后是 `if train_dec and not train_dis: loss.backward()`）。
如果第二轮继续往第一个损失所在的变量上累加
（SAM 的 `first_step()` 之后又写 `loss += loss_t`），快速修复会在再次累加之前把它重新置为初值（`loss = 0`）。

如果辅助函数或方法对它返回的损失做了反向传播（`loss = train_step(model, x, y)`，或 fairseq 风格的
`criterion.forward_reg(model, sample, optimizer)` 内部调用 `optimizer.backward(loss)`），返回时这个损失的
计算图已被释放：对返回的损失再做一次 backward 会被报告，快速修复删去这一次（辅助函数的 backward 已经给出
全部梯度）。构造函数从传入的模块算出并保存的计算图（`__init__` 中的 `self.weights =
model.encode_text(self.texts)`）会被对象的每次调用读取；快速修复改为保存模块（`self.model = model`），
在 `forward` 开头计算 `self.weights`，第一次迭代的梯度不变。

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


# ---------------------------------------------------------------------------
# a second backward through what the first one freed


def freed(second: str, what: str, line0: int, first: str, line1: int, advice: Dict[str, str]) -> Dict[str, str]:
    """``second`` runs through the graph of ``what`` (built on ``line0``), which
    ``first`` on ``line1`` freed; ``advice`` ends the sentence."""
    return {
        "en": f"`{second}` back-propagates through the graph of {what} (line {line0}), which `{first}` on line "
              f"{line1} already freed (\"Trying to backward through the graph a second time\"); {advice['en']}.",
        "zh": f"`{second}` 要反向传播经过 {what}（第 {line0} 行）的计算图，而它已被第 {line1} 行的 `{first}` "
              f"释放（报错 \"Trying to backward through the graph a second time\"）；{advice['zh']}。",
    }


def graph_of_built_here(what: str) -> Dict[str, str]:
    return {"en": f"the graph of {what} is built here", "zh": f"{what} 的计算图在这里构建"}


def frees_it(direct: bool, callee: str) -> Dict[str, str]:
    """The related note at the first backward (``direct``), or at the call of
    ``callee``, a helper that back-propagates."""
    if direct:
        return {"en": "this backward frees it (no retain_graph=True)",
                "zh": "这次反向传播释放了它（没有 retain_graph=True）"}
    return {"en": f"`{callee}` back-propagates through it here and frees it",
            "zh": f"`{callee}` 在这里对它反向传播并释放了它"}


def advice_detach_in_method(m1: Optional[str], shown: str) -> Dict[str, str]:
    return {"en": (f"in `{m1}`, detach {shown} where the loss it back-propagates reads it, if what produced it "
                   f"should not learn from that loss, or keep the graph there (`retain_graph=True` on its "
                   f"backward)"),
            "zh": (f"请在 `{m1}` 里它反向传播的损失读取 {shown} 的地方 detach（若其来源不应从该损失学习），"
                   f"或在那里保留计算图（在它的 backward 上加 `retain_graph=True`）")}


def advice_detach_where_method_reads(m1: Optional[str], shown: str, zeroed: str) -> Dict[str, str]:
    return {"en": (f"detach {shown} where `{m1}` reads it (`{zeroed}` discards what that loss gives its producer "
                   f"before any step)"),
            "zh": f"请在 `{m1}` 读取 {shown} 的地方 detach（`{zeroed}` 会在任何 step 之前清掉该损失给它来源的梯度）"}


def fix_detach_in_method(m1: Optional[str], shown: str, zeroed: str) -> Dict[str, str]:
    return {"en": f"Detach {shown} in `{m1}` (`{zeroed}` discards what that loss gives the producer; same updates)",
            "zh": f"在 `{m1}` 里 detach {shown}（`{zeroed}` 会清掉该损失给来源的梯度；更新不变）"}


def advice_retain_in_helper(callee: str, what: str) -> Dict[str, str]:
    """``what`` is a back-quoted name: the detach is written inside its quotes."""
    return {"en": (f"keep the graph in `{callee}`'s backward (`retain_graph=True`), or pass "
                   f"{what[:-1]}.detach()` to it if what produced {what} should not learn from it"),
            "zh": (f"请在 `{callee}` 内部的 backward 上加 `retain_graph=True`，或者若 {what} 的来源"
                   f"不应从中学习，就把 {what[:-1]}.detach()` 传给它")}


def stepped_inside(callee: str) -> Dict[str, str]:
    """The ``how`` of :func:`stepped` when the step runs inside the module that returned the value."""
    return {"en": (f"; the step runs inside `{callee}` after it built the value it returns: compute the "
                   f"returned loss from a forward after that step, or step there after the caller's backward"),
            "zh": (f"；这次 step 发生在 `{callee}` 内部、它构建返回值之后：请在该 step 之后重新前向计算返回的损失，"
                   f"或者把 step 放到调用方的 backward 之后")}


def advice_backward_once(callee: str) -> Dict[str, str]:
    return {"en": (f"`{callee}` already back-propagates the loss it returns (a `backward()` inside it, "
                   f"as a custom `forward` may do): back-propagate that loss once, inside it or here, "
                   f"not in both"),
            "zh": (f"`{callee}` 内部已经对它返回的损失调用了 `backward()`（自定义的 `forward` 可能这样写）："
                   f"这个损失只反向传播一次，在它内部或在这里，不要两处都做")}


def advice_detach_in_second(what: str, opt2: str) -> Dict[str, str]:
    return {"en": (f"an optimizer step in between updates what produced {what}, and `{opt2}` does not "
                   f"train it: detach {what} where it feeds the second loss"),
            "zh": (f"两次之间的优化器 step 原地更新了 {what} 的来源，而 `{opt2}` 并不训练它：请在它进入"
                   f"第二个损失的地方 detach")}


def fix_detach_in_second(name: Optional[str], opt2: str) -> Dict[str, str]:
    return {"en": f"Detach `{name}` in the second loss (`{opt2}` does not train what produced it)",
            "zh": f"在第二个损失里 detach `{name}`（`{opt2}` 并不训练它的来源）"}


def advice_recompute_after_step(shown: str, opt: str) -> Dict[str, str]:
    return {"en": f"an optimizer step in between updates its weights in place: compute {shown} again after `{opt}.step()`",
            "zh": f"两次之间的优化器 step 原地更新了它的权重：请在 `{opt}.step()` 之后重新计算 {shown}"}


def fix_recompute_after_step(shown: str, opt: str) -> Dict[str, str]:
    return {"en": f"Compute {shown} again after `{opt}.step()`",
            "zh": f"在 `{opt}.step()` 之后重新计算 {shown}"}


def advice_reset_accumulator(acc: str) -> Dict[str, str]:
    return {"en": (f"the second pass keeps adding to `{acc}`, which still holds the first loss and its freed graph, "
                   f"and the weights changed in between: start `{acc}` again for the second loss"),
            "zh": (f"第二轮继续往 `{acc}` 上累加，而它仍持有第一个损失及其已释放的计算图，且两次之间权重已更新："
                   f"请为第二个损失重新开始累加 `{acc}`")}


def fix_reset_accumulator(acc: str, init: str) -> Dict[str, str]:
    return {"en": f"Start the second loss afresh: `{acc} = {init}` before it is summed again",
            "zh": f"第二个损失重新开始：再次累加之前先写 `{acc} = {init}`"}


def advice_encode_in_forward(attr: str, param: str) -> Dict[str, str]:
    return {"en": (f"the constructor computes `self.{attr}` once from the `{param}` it is handed, which trains: keep "
                   f"`{param}` and compute `self.{attr}` in `forward`, or compute it under `torch.no_grad()` if "
                   f"`{param}` should not learn from it"),
            "zh": (f"构造函数只用传入的 `{param}`（它在训练）计算了一次 `self.{attr}`：请保留 `{param}`，在 `forward` 中"
                   f"计算 `self.{attr}`；若 `{param}` 不应从中学习，则在 `torch.no_grad()` 下计算")}


def fix_encode_in_forward(attr: str, param: str) -> Dict[str, str]:
    return {"en": f"Keep `{param}` and compute `self.{attr}` at the top of `forward` (same first gradients)",
            "zh": f"保留 `{param}`，在 `forward` 开头计算 `self.{attr}`（第一次的梯度不变）"}


def advice_may_update(what: str) -> Dict[str, str]:
    return {"en": (f"an optimizer step in between may update its weights in place, so compute {what} again "
                   f"for the second loss"),
            "zh": f"两次之间的优化器 step 可能原地更新了它的权重，请为第二个损失重新计算 {what}"}


def advice_edited_in_between(what: str, call: str) -> Dict[str, str]:
    return {"en": (f"`{call}` in between edits parameters in place, so keeping the graph is no fix (the second "
                   f"backward would find weights it saved changed): compute {what} again for the second loss"),
            "zh": (f"两次之间的 `{call}` 原地修改了参数，保留计算图不能解决问题（第二次 backward 会发现它保存的权重已被修改）："
                   f"请为第二个损失重新计算 {what}")}


def advice_retain() -> Dict[str, str]:
    return {"en": "pass `retain_graph=True` to that first backward",
            "zh": "请给第一次 backward 加上 `retain_graph=True`"}


def or_detach_in_first(advice: Dict[str, str], what: str) -> Dict[str, str]:
    """``advice``, with the detach in the first loss offered as well."""
    return {"en": advice["en"] + f", or detach {what} where it feeds the first loss",
            "zh": advice["zh"] + f"，或在它进入第一个损失的地方对 {what} 做 detach"}


def fix_backward_once(name: str, callee: str) -> Dict[str, str]:
    return {"en": f"Back-propagate `{name}` once: remove this `backward` (`{callee}` already ran it; same gradients)",
            "zh": f"`{name}` 只反向传播一次：删去这里的 `backward`（`{callee}` 已经做过；梯度不变）"}


def fix_retain(line1: int) -> Dict[str, str]:
    return {"en": f"Keep the graph for the second backward: `retain_graph=True` on line {line1} "
                  f"(same gradients)",
            "zh": f"为第二次 backward 保留计算图：在第 {line1} 行加 `retain_graph=True`（梯度不变）"}


def advice_detach_in_first_zeroed(what: str, zeroed: str) -> Dict[str, str]:
    return {"en": (f"detach {what} where it feeds the first loss (`{zeroed}` discards what that loss gives "
                   f"its producer before any step), or pass `retain_graph=True` to that first backward"),
            "zh": (f"请在 {what} 进入第一个损失的地方 detach（`{zeroed}` 会在任何 step 之前清掉该损失给它来源的"
                   f"梯度），或给第一次 backward 加上 `retain_graph=True`")}


def fix_detach_in_first_zeroed(name: Optional[str], zeroed: str) -> Dict[str, str]:
    return {"en": f"Detach `{name}` in the first loss (`{zeroed}` discards what it gives the producer; "
                  f"same updates)",
            "zh": f"在第一个损失里 detach `{name}`（`{zeroed}` 会清掉它给来源的梯度；更新不变）"}


def fix_retain_more_memory(line1: int) -> Dict[str, str]:
    return {"en": f"Keep the graph for the second backward: `retain_graph=True` on line {line1} "
                  f"(same gradients, more memory)",
            "zh": f"为第二次 backward 保留计算图：在第 {line1} 行加 `retain_graph=True`（梯度不变，内存更多）"}


def fix_detach_in_first(name: Optional[str]) -> Dict[str, str]:
    return {"en": f"Detach `{name}` in the first loss (what produced it gets no gradient from "
                  f"that loss)",
            "zh": f"在第一个损失里 detach `{name}`（它的来源不再从该损失得到梯度）"}


# ---------------------------------------------------------------------------
# a graph built in a loop (or kept in a list) and used again after its backward


def stale_kept(shown: str, filler: str, line: int) -> Dict[str, str]:
    """What is reached again: the graphs kept in ``shown``, filled by ``filler``."""
    return {"en": f"the graphs kept in {shown} (filled by `{filler}`, line {line})",
            "zh": f"保存在 {shown} 里的计算图（由第 {line} 行的 `{filler}` 放入）"}


def stale_value(shown: str, line: int) -> Dict[str, str]:
    return {"en": f"the graph of {shown} (line {line})",
            "zh": f"{shown}（第 {line} 行）的计算图"}


def stale_state(state: str, call: str, line: int) -> Dict[str, str]:
    """What is reached again: the state ``state`` a call of ``call`` on ``line`` left
    on its module, which the next call of it reads."""
    return {"en": f"the graph `{call}` (line {line}) left in `{state}`, the state it keeps on its module and "
                  f"reads on its next call",
            "zh": f"第 {line} 行的 `{call}` 留在 `{state}` 里的计算图（它把状态保存在模块上，下次调用时读取）"}


def stale_advice_state(state: str) -> Dict[str, str]:
    return {"en": f"calling it again does not help: reset `{state}` (to None or fresh zeros) or detach it "
                  f"before the second call",
            "zh": f"再调用一次也无济于事：请在第二次调用之前重置 `{state}`（设为 None 或新的零张量）或将其 detach"}


def in_loop(line: int) -> Dict[str, str]:
    return {"en": f", in the loop on line {line}, whose last iteration built it and ran that backward",
            "zh": f"（在第 {line} 行的循环里：它的最后一轮构建了它，又运行了那次 backward）"}


def nothing() -> Dict[str, str]:
    """An empty fragment (no loop to name, no advice to add)."""
    return {"en": "", "zh": ""}


def stale_advice_detach(shown: str) -> Dict[str, str]:
    return {"en": (f"nothing can back-propagate into it any more: detach {shown} where the "
                   f"second loss reads it, or compute it again"),
            "zh": "它已无法再反向传播：请在第二个损失读取它的地方 detach，或重新计算它"}


def fix_stale_detach(name: Optional[str]) -> Dict[str, str]:
    return {"en": f"Detach `{name}` where the second loss reads it (its graph is freed: no gradient "
                  f"could reach it)",
            "zh": f"在第二个损失读取 `{name}` 的地方 detach（它的计算图已释放，梯度本就无法到达）"}


def stale_advice_clear(shown: str, first_kept: str) -> Dict[str, str]:
    return {"en": (f"clear {shown} after each backward through it (`del {first_kept}[:]`), so that the next "
                   f"call back-propagates only the graphs built since"),
            "zh": f"请在每次对它反向传播之后清空 {shown}（`del {first_kept}[:]`），让下一次调用只反向传播之后新建的计算图"}


def framework_backward(what: str, line0: int, first: str, line1: int, retain: bool) -> Dict[str, str]:
    """A Lightning ``training_step`` back-propagates its own loss and returns it: the
    framework back-propagates the returned loss again."""
    error = '"Trying to backward through the graph a second time"'
    if retain:
        en = f"pass `retain_graph=True` to `{first}` (the framework steps only after its own backward)"
        zh = f"请给 `{first}` 加上 `retain_graph=True`（框架在它自己的 backward 之后才 step）"
    else:
        en = f"keep the graph in `{first}` (`retain_graph=True`), or leave the backward to the framework"
        zh = f"请在 `{first}` 中保留计算图（`retain_graph=True`），或把 backward 交给框架"
    return {
        "en": f"the framework back-propagates the loss `training_step` returns, through the graph of {what} "
              f"(line {line0}), which `{first}` on line {line1} already freed ({error}); {en}.",
        "zh": f"框架会对 `training_step` 返回的损失做反向传播，要经过 {what}（第 {line0} 行）的计算图，"
              f"而它已被第 {line1} 行的 `{first}` 释放（报错 {error}）；{zh}。",
    }


def stale_advice_recompute() -> Dict[str, str]:
    return {"en": "compute it again before the second loss, or detach it where that loss reads it",
            "zh": "请在第二个损失之前重新计算它，或在该损失读取它的地方 detach"}


def stale(second: str, what: Dict[str, str], first: str, line1: int, how: Dict[str, str], kept: bool,
          advice: Dict[str, str]) -> Dict[str, str]:
    """``second`` runs through ``what``, freed by ``first`` on ``line1`` (``how``:
    in which loop); ``kept``: the graphs sit in a list a helper back-propagates."""
    error = '"Trying to backward through the graph a second time"'
    error_en = error_zh = error
    if kept:  # the helper may step an optimizer after its backward: torch may stop on that first
        error_en += ', or "modified by an inplace operation" if a step in between changed the weights it saved'
        error_zh += '，若两次之间的 step 改变了它保存的权重，则报 "modified by an inplace operation"'
    return {
        "en": f"`{second}` back-propagates through {what['en']}, which `{first}` on line {line1} already "
              f"freed{how['en']} ({error_en}); {advice['en']}.",
        "zh": f"`{second}` 要反向传播经过{what['zh']}，而它已被第 {line1} 行的 `{first}` "
              f"释放{how['zh']}（报错 {error_zh}）；{advice['zh']}。",
    }


def freed_next_iteration(call: str, what: str, line0: int, loop_line: int, advice: Dict[str, str]) -> Dict[str, str]:
    """``call`` back-propagates, in each iteration of the loop on ``loop_line``, through
    ``what`` (back-quoted), built once before the loop on ``line0``."""
    error = '"Trying to backward through the graph a second time"'
    return {
        "en": f"`{call}` back-propagates, in every iteration of the loop on line {loop_line}, through the graph "
              f"of {what}, built once before the loop (line {line0}): the first iteration's backward frees it "
              f"and the second runs into it ({error}); {advice['en']}.",
        "zh": f"`{call}` 在第 {loop_line} 行循环的每一轮都要反向传播经过 {what} 的计算图，而它只在循环之前"
              f"（第 {line0} 行）构建了一次：第一轮的反向传播释放了它，第二轮就会撞上（报错 {error}）；"
              f"{advice['zh']}。",
    }


def attr_set_here(attr: str) -> Dict[str, str]:
    return {"en": f"`{attr}` is set here", "zh": f"`{attr}` 在这里被赋值"}


def backward_inside(method: Optional[str], first: bool) -> Dict[str, str]:
    """The related note at the backward inside a driver's own method (``backward_G``)."""
    if first:
        return {"en": f"the backward inside `{method}` that frees it",
                "zh": f"`{method}` 内部释放它的反向传播"}
    return {"en": f"the backward inside `{method}` that runs into it again",
            "zh": f"`{method}` 内部再次经过它的反向传播"}


def frees_it_each_iteration(direct: bool, callee: str) -> Dict[str, str]:
    """The related note at the backward that frees it in one iteration and reaches it in the next."""
    if direct:
        return {"en": "this backward frees it in the first iteration and runs into it in the next",
                "zh": "这次反向传播在第一轮释放了它，下一轮又要经过它"}
    return {"en": f"`{callee}` back-propagates through it here: it frees it in the first iteration and runs "
                  f"into it in the next",
            "zh": f"`{callee}` 在这里对它反向传播：第一轮释放了它，下一轮又要经过它"}


def advice_recompute_each_iteration() -> Dict[str, str]:
    return {"en": ("compute it again in each iteration, or detach it where the loss reads it if what produced it "
                   "should not learn from that loss"),
            "zh": "请在每一轮重新计算它；若它的来源不应从该损失学习，也可以在损失读取它的地方 detach"}


def graph_built_here() -> Dict[str, str]:
    return {"en": "the graph is built here", "zh": "计算图在这里构建"}


# ---------------------------------------------------------------------------
# a backward through weights an optimizer step updated in place


def stepped(second: str, node: str, line: int, module: str, opt: str, step_line: int,
            how: Dict[str, str]) -> Dict[str, str]:
    """``second`` runs through ``node`` (on ``line``), whose graph saved
    ``module``'s weights, updated by ``opt.step()`` on ``step_line``."""
    return {
        "en": f"`{second}` back-propagates through `{node}` (line {line}), whose graph saved "
              f"`{module}`'s weights before `{opt}.step()` on line {step_line} updated them in place: it stops with "
              f"\"one of the variables needed for gradient computation has been modified by an inplace operation\""
              f"{how['en']}.",
        "zh": f"`{second}` 要反向传播经过 `{node}`（第 {line} 行），它的计算图保存了 `{module}` 的权重，"
              f"而第 {step_line} 行的 `{opt}.step()` 已原地更新了这些权重：会报错 \"one of the variables needed for "
              f"gradient computation has been modified by an inplace operation\"{how['zh']}。",
    }


def stepped_loop(second: str, node: str, line: int, module: str, opt: str, step_line: int) -> Dict[str, str]:
    """``second`` runs, in every iteration, through ``node`` built before the loop (on
    ``line``), whose graph saved ``module``'s weights, which ``opt.step()`` (on
    ``step_line``, in the loop) updated in place in the iteration before."""
    return {
        "en": f"`{second}` back-propagates, in every iteration, through `{node}` (line {line}, before the loop), whose "
              f"graph saved `{module}`'s weights; `{opt}.step()` on line {step_line} updates them in place in the "
              f"first iteration, so the second stops with \"one of the variables needed for gradient computation has "
              f"been modified by an inplace operation\" (retain_graph=True keeps the graph, not the old weights). "
              f"Compute it again inside the loop, or detach it if `{module}` is not meant to learn from this loss.",
        "zh": f"`{second}` 每轮迭代都要反向传播经过循环之前（第 {line} 行）构建的 `{node}`，它的计算图保存了 `{module}` "
              f"的权重；第 {step_line} 行的 `{opt}.step()` 在第一轮就原地更新了这些权重，于是第二轮会报错 \"one of the "
              f"variables needed for gradient computation has been modified by an inplace operation\"（retain_graph=True "
              f"保留的是计算图，不是旧的权重）。请在循环内重新计算它；如果 `{module}` 不该从这个损失学习，就 detach 它。",
    }


def built_before_loop(module: str) -> Dict[str, str]:
    return {"en": f"the graph through `{module}` is built here, before the loop, and reused by every iteration",
            "zh": f"经过 `{module}` 的计算图在这里（循环之前）构建，每轮迭代都复用它"}


def stepped_how_detached(shown: str, module: str) -> Dict[str, str]:
    return {"en": f"; compute {shown} again after the step, from the detached input (its optimizer does not update `{module}`)",
            "zh": f"；请在 step 之后用 detach 过的输入重新计算 {shown}（它的优化器并不更新 `{module}`）"}


def stepped_how_detach_read(shown: str, module: str) -> Dict[str, str]:
    return {"en": f"; detach {shown} where it is read after the step (its optimizer does not update `{module}`)",
            "zh": f"；请在 step 之后读取 {shown} 的地方对它 detach（它的优化器并不更新 `{module}`）"}


def fix_detach_read(shown: str, opt: str) -> Dict[str, str]:
    return {"en": f"Detach {shown} where it is read after `{opt}.step()` (same gradients for what the next step updates)",
            "zh": f"在 `{opt}.step()` 之后读取 {shown} 的地方对它 detach（下一步要更新的参数梯度不变）"}


def fix_recompute_detached(shown: str, opt: str) -> Dict[str, str]:
    return {"en": f"Compute {shown} again after `{opt}.step()`, from the detached input (same gradients for what the next step updates)",
            "zh": f"在 `{opt}.step()` 之后用 detach 的输入重新计算 {shown}（下一步要更新的参数梯度不变）"}


def stepped_how_recompute(shown: str) -> Dict[str, str]:
    return {"en": f"; compute {shown} again after the step",
            "zh": f"；请在 step 之后重新计算 {shown}"}


def fix_recompute_updated(shown: str, opt: str, module: str) -> Dict[str, str]:
    return {"en": f"Compute {shown} again after `{opt}.step()` (the second loss then sees the updated `{module}`)",
            "zh": f"在 `{opt}.step()` 之后重新计算 {shown}（第二个损失使用更新后的 `{module}`）"}


def graph_through_built_here(module: str) -> Dict[str, str]:
    return {"en": f"the graph through `{module}` is built here",
            "zh": f"经过 `{module}` 的计算图在这里构建"}


def step_updates(module: str) -> Dict[str, str]:
    return {"en": f"this step updates `{module}`'s weights in place",
            "zh": f"这次 step 原地更新了 `{module}` 的权重"}


def passed(second: str, param: str, src: str, module: str, opt: str, step_line: int) -> Dict[str, str]:
    """The graph ``param`` holds came from ``src()`` through ``module``, whose
    weights ``opt.step()`` on ``step_line`` updates before ``second``."""
    return {
        "en": f"`{second}` back-propagates through the graph `{param}` holds: the callers pass what `{src}()` "
              f"returns, built through `{module}`, whose weights `{opt}.step()` on line {step_line} updates in place "
              f"before this backward: it stops with \"one of the variables needed for gradient computation has been "
              f"modified by an inplace operation\"; back-propagate `{param}` before the step (then the step also "
              f"applies its gradients to `{module}`), or build it after the step.",
        "zh": f"`{second}` 要反向传播经过 `{param}` 的计算图：调用方传入的是 `{src}()` 的返回值，它经过 `{module}` 构建，"
              f"而第 {step_line} 行的 `{opt}.step()` 在这次 backward 之前原地更新了 `{module}` 的权重：会报错 "
              f"\"one of the variables needed for gradient computation has been modified by an inplace operation\"；"
              f"请在 step 之前对 `{param}` 反向传播（这样这次 step 也会把它对 `{module}` 的梯度用上），或在 step 之后再构建它。",
    }


def kept_stepped(second: str, first: str, first_line: int, attrs: str, module: str, opt: str,
                 step_line: int) -> Dict[str, str]:
    """``second`` back-propagates what ``first`` (on ``first_line``) left on the object
    (``attrs``), built through ``module``, whose weights ``opt.step()`` updates before it."""
    return {
        "en": f"`{second}` back-propagates through a graph `{first}` (line {first_line}) left on the object "
              f"({attrs}), built through `{module}`, whose weights `{opt}.step()` on line {step_line} updates in "
              f"place before this backward: it stops with \"one of the variables needed for gradient computation "
              f"has been modified by an inplace operation\"; compute it again after the step, or back-propagate it "
              f"before the step.",
        "zh": f"`{second}` 要反向传播经过 `{first}`（第 {first_line} 行）留在对象上的计算图（{attrs}），它经过 `{module}` "
              f"构建，而第 {step_line} 行的 `{opt}.step()` 在这次 backward 之前原地更新了 `{module}` 的权重：会报错 "
              f"\"one of the variables needed for gradient computation has been modified by an inplace operation\"；"
              f"请在 step 之后重新计算它，或在 step 之前对它反向传播。",
    }


def kept_here(attrs: str, module: str) -> Dict[str, str]:
    return {"en": f"this call leaves {attrs} on the object, built through `{module}`",
            "zh": f"这次调用把 {attrs} 留在对象上，它们经过 `{module}` 构建"}


def comes_from(param: str, src: str, module: str) -> Dict[str, str]:
    return {"en": f"`{param}` comes from `{src}()`, through `{module}`",
            "zh": f"`{param}` 来自 `{src}()`，经过 `{module}`"}


# ---------------------------------------------------------------------------
# deep mutual learning: one backward per iteration over a list whose every element its loss reads


def peers(second: str, loop_line: int, container: str, builder: str, built_line: int, shown: str, read_line: int,
          own: str) -> Dict[str, str]:
    """``second`` in the loop on ``loop_line`` reads every element of ``container``
    (built by ``builder`` on ``built_line``) through ``shown`` on ``read_line``, not
    only this iteration's ``own``."""
    error = '"Trying to backward through the graph a second time"'
    return {
        "en": f"`{second}` runs, from the second iteration of the loop on line {loop_line}, through the "
              f"graph of an element of `{container}` (built by `{builder}`, line {built_line}) that it "
              f"already freed in the first: the loss reads every element of `{container}` through `{shown}` "
              f"(line {read_line}), not only this iteration's `{own}`, without `.detach()`, so the first "
              f"backward frees the graphs of all of them ({error}); detach the other elements where the loss "
              f"reads them (`{shown}.detach()`), or compute `{container}` again in each iteration.",
        "zh": f"`{second}` 从第 {loop_line} 行循环的第二轮起，要反向传播经过 `{container}` 中某个元素"
              f"（由第 {built_line} 行的 `{builder}` 构建）的计算图，而它在第一轮已经释放了这些图："
              f"损失通过 `{shown}`（第 {read_line} 行）读取了 `{container}` 的每个元素，而不只是本轮的 "
              f"`{own}`，且没有 `.detach()`，所以第一次 backward 就释放了它们全部的计算图（报错 {error}）；"
              f"请在损失读取其他元素的地方 detach（`{shown}.detach()`），或在每一轮重新计算 `{container}`。",
    }


def elements_built_here() -> Dict[str, str]:
    return {"en": "the graphs of the list's elements are built here",
            "zh": "列表各元素的计算图在这里构建"}


def every_element_read(container: str) -> Dict[str, str]:
    return {"en": f"every element of `{container}` is read here, each iteration",
            "zh": f"每一轮都在这里读取 `{container}` 的每个元素"}


def fix_detach_peers(shown: str, zeroed_anyway: bool) -> Dict[str, str]:
    """``zeroed_anyway``: each iteration zeroes and steps its own model's optimizer
    around the backward, so the detach changes no update."""
    return {"en": f"Detach `{shown}` where the loss reads it (each model learns from its own loss only"
                  + (", as its optimizer's zero_grad() already had it" if zeroed_anyway else "") + ")",
            "zh": f"在损失读取 `{shown}` 的地方 detach（每个模型只从自己的损失学习"
                  + ("，与其优化器的 zero_grad() 的效果一致" if zeroed_anyway else "") + "）"}

# ---------------------------------------------------------------------------
# a backward per element of a list whose elements share one graph (a feedback network's steps)


def shared_elements(call: str, loop_line: int, container: str, builder: str, built_line: int) -> Dict[str, str]:
    """``call`` back-propagates, in the loop on ``loop_line``, one element of
    ``container`` per iteration; every element holds part of the graph ``builder``
    built once (line ``built_line``)."""
    error = '"Trying to backward through the graph a second time"'
    return {
        "en": f"`{call}` back-propagates one element of `{container}` per iteration of the loop on line "
              f"{loop_line}, but every element holds part of one graph, built once by `{builder}` (line "
              f"{built_line}): the first element's backward frees that part and the second element's runs "
              f"into it ({error}); sum the elements and back-propagate once, or keep the graph "
              f"(`retain_graph=True`) for all but the last.",
        "zh": f"`{call}` 在第 {loop_line} 行的循环里每轮反向传播 `{container}` 的一个元素，但每个元素都含有"
              f"同一个计算图的一部分（由第 {built_line} 行的 `{builder}` 一次构建）：第一个元素的 backward "
              f"释放了这部分，第二个元素的 backward 再经过它时报错（{error}）；请把各元素相加后只反向传播一次，"
              f"或在除最后一个以外的 backward 上保留计算图（`retain_graph=True`）。",
    }


def shared_graph_built_here() -> Dict[str, str]:
    return {"en": "the graph every element shares is built here",
            "zh": "所有元素共享的计算图在这里构建"}


def fix_retain_each_element() -> Dict[str, str]:
    return {"en": "Keep the graph for the next element: `retain_graph=True` (same gradients)",
            "zh": "为下一个元素保留计算图：加 `retain_graph=True`（梯度不变）"}
