"""GG102's words, in English and Chinese: the rule's title and explanation, the
finding's message and notes, and the title of each fix. Nothing here looks at a
tree or decides anything; the analysis says what it found (which variable,
built from what, whether the crash is certain) and these functions say it.

Each function returns ``{"en": ..., "zh": ...}`` (or a pair for the fragments
that are put into a sentence), so a new message is added in both languages in
one place.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Optional, Tuple

TITLE = {
    "en": "A tensor whose graph was built before the loop is back-propagated in every iteration",
    "zh": "循环前构建计算图的张量在每轮迭代中被反向传播",
}


# ---------------------------------------------------------------------------
# where a graph starts (kind: "data", "param" or "module"; name None for an inline call)


def describe(kind: str, name: Optional[str]) -> Tuple[str, str]:
    """What the graph is built from, as the object of "built ... from"."""
    if kind == "param":
        return (f"parameter `{name}`", f"参数 `{name}` ") if name else ("a parameter", "一个参数")
    if kind == "module":
        return (f"module `{name}`", f"模块 `{name}` ") if name else ("a module", "一个模块")
    if name:
        return f"`{name}`, which requires grad", f"需要梯度的 `{name}` "
    return "a tensor created with `requires_grad=True`", "一个 `requires_grad=True` 的张量"


def into(kind: str, name: Optional[str]) -> Tuple[str, str]:
    """Where the leaking gradients go."""
    if kind == "module":
        return (f"`{name}`'s parameters", f" `{name}` 的参数") if name else ("the module's parameters", "模块的参数")
    if name:
        return f"`{name}`", f" `{name}`"
    return "that tensor", "该张量"


def origin(kind: str, name: Optional[str], argument: bool) -> Dict[str, str]:
    """The related note at the leaf, parameter or module the graph starts at
    (``argument``: a parameter of the function that a caller passes such a tensor)."""
    n = name or "this tensor"
    nz = name or "这个张量"
    if argument:
        return {"en": f"the graph starts at argument `{n}`: a caller passes a tensor created with `requires_grad=True`",
                "zh": f"计算图从参数 `{nz}` 开始：调用方传入了一个 `requires_grad=True` 的张量"}
    if kind == "param":
        return {"en": f"the graph starts at parameter `{n}`", "zh": f"计算图从参数 `{nz}` 开始"}
    if kind == "module":
        return {"en": f"the graph starts at the trainable parameters of `{n}`",
                "zh": f"计算图从 `{nz}` 的可训练参数开始"}
    return {"en": f"the graph starts here: `{n}` is created with `requires_grad=True`",
            "zh": f"计算图从这里开始：`{nz}` 创建时设置了 `requires_grad=True`"}


# ---------------------------------------------------------------------------
# the finding


def built_where(via: Optional[str], builder: Optional[str]) -> Tuple[str, str]:
    """Where the stale value is built: before the loop (in ``via()`` when the loop
    is in a function this statement calls), or, for a ``self.attr`` another
    method's loop reuses (``builder`` is this method), in ``__init__()`` or a
    helper it calls."""
    if builder is not None:
        if builder == "__init__":
            return f"in `__init__()`, before the loop in `{via}()`,", f"在 `__init__()` 中（`{via}()` 的循环之前）"
        return (f"in `{builder}()` (called from `__init__()`), before the loop in `{via}()`,",
                f"在 `__init__()` 调用的 `{builder}()` 中（`{via}()` 的循环之前）")
    if via:
        return f"before the loop in `{via}()`", f"在 `{via}()` 的循环之前"
    return "before the loop", "在循环之前"


def stale(var: str, before: Tuple[str, str], src: Tuple[str, str], dest: Tuple[str, str],
          saving: Optional[bool], op: Optional[str], tail: Optional[str]) -> Dict[str, str]:
    """The finding's message. ``saving``: True when an operation that built it
    saves tensors for backward (the second iteration crashes), False when none
    does (a silent leak), None when ``op`` may; ``tail``: the trained source it
    is never recomputed from (said only for the silent leak)."""
    before_en, before_zh = before
    src_en, src_zh = src
    into_en, into_zh = dest
    if saving is True:
        return {
            "en": f"`{var}` is built {before_en} from {src_en}, so the first `backward()` in the loop frees its "
                  f"graph and the next iteration fails with \"Trying to backward through the graph a second time\".",
            "zh": f"`{var}` {before_zh}由{src_zh}计算得到，循环中第一次 `backward()` 就会释放它的计算图，"
                  f"下一轮迭代会报错 “Trying to backward through the graph a second time”。",
        }
    if saving is False:
        tail_en = f", and `{var}` is never recomputed when `{tail}` changes" if tail else ""
        tail_zh = f"，而且 `{tail}` 更新后 `{var}` 也不会重新计算" if tail else ""
        return {
            "en": f"`{var}` is built {before_en} from {src_en}, so every iteration back-propagates through the "
                  f"same pre-loop graph: this does not crash (none of its operations saves tensors for backward), "
                  f"but gradients silently keep flowing into {into_en}{tail_en}.",
            "zh": f"`{var}` {before_zh}由{src_zh}计算得到，每轮迭代都会反向传播经过同一张循环前的计算图：不会报错"
                  f"（构建它的运算都不为反向传播保存张量），但梯度会悄悄地持续流入{into_zh}{tail_zh}。",
        }
    op = op or "an operation"
    return {
        "en": f"`{var}` is built {before_en} from {src_en}, so every iteration back-propagates through the "
              f"same pre-loop graph: the second iteration crashes if {op} saved tensors for backward, "
              f"otherwise gradients silently keep flowing into {into_en}.",
        "zh": f"`{var}` {before_zh}由{src_zh}计算得到，每轮迭代都会反向传播经过同一张循环前的计算图：如果 "
              f"{op} 为反向传播保存了张量，第二轮迭代就会报错，否则梯度会悄悄地持续流入{into_zh}。",
    }


def backward_note(var: str, via: Optional[str], remote: bool, certain: bool) -> Dict[str, str]:
    """The related note at the backward that goes through the stale graph (or at
    the call of ``via()``, the function whose loop does; ``remote``: at that
    backward in another method)."""
    if remote:
        return {"en": f"`{via}()` back-propagates through `{var}` here, in a loop"
                      + (": its second iteration fails" if certain else ""),
                "zh": f"`{via}()` 在这里的循环中反向传播经过 `{var}`" + ("，第二轮迭代会报错" if certain else "")}
    if via:
        return {"en": f"`{via}()` back-propagates through `{var}` in a loop"
                      + (": its second iteration fails" if certain else ""),
                "zh": f"`{via}()` 在循环中反向传播经过 `{var}`" + ("，第二轮迭代会报错" if certain else "")}
    if certain:
        return {"en": f"this `backward()` frees `{var}`'s graph; in the next iteration it fails",
                "zh": f"这里的 `backward()` 会释放 `{var}` 的计算图，下一轮迭代再调用时报错"}
    return {"en": f"this `backward()` runs through `{var}`'s pre-loop graph in every iteration",
            "zh": f"这里的 `backward()` 每轮迭代都会经过 `{var}` 在循环前构建的计算图"}


def not_a_leaf(var: str) -> Dict[str, str]:
    """The related note at ``var.requires_grad_(False)`` on the stale non-leaf."""
    return {"en": f"`{var}.requires_grad_(False)` raises here: `{var}` is not a leaf; use `{var} = {var}.detach()`",
            "zh": f"`{var}` 不是叶子张量，`{var}.requires_grad_(False)` 在这里就会报错；请改用 `{var} = {var}.detach()`"}


# ---------------------------------------------------------------------------
# fix titles


def fix_remove(names: str) -> Dict[str, str]:
    """``names``: the leaves, as "`X`, `w`", or "the tensor" for an inline call."""
    return {"en": f"Remove `requires_grad=True` from {names} (nothing reads its `.grad`)",
            "zh": f"去掉 {names.replace('the tensor', '该张量')} 的 `requires_grad=True`（没有代码读取它的 `.grad`）"}


def fix_detach(var: str) -> Dict[str, str]:
    return {"en": f"Detach `{var}` once it is built (`{var} = {var}.detach()`)",
            "zh": f"在 `{var}` 构建完成后将其分离（`{var} = {var}.detach()`）"}


def fix_nograd(var: str, expr: str) -> Dict[str, str]:
    return {"en": f"Build `{var}` under `{expr}`", "zh": f"在 `{expr}` 下构建 `{var}`"}


def fix_recompute(var: str) -> Dict[str, str]:
    return {"en": f"Recompute `{var}` inside the loop", "zh": f"在循环内重新计算 `{var}`"}


def fix_recompute_remote(var: str, via: Optional[str]) -> Dict[str, str]:
    return {"en": f"Recompute `{var}` in every iteration of `{via}()`'s loop",
            "zh": f"在 `{via}()` 的循环中每轮重新计算 `{var}`"}


# ---------------------------------------------------------------------------
# the explanation (`gradguard rule GG102`, hover, docs/rules/GG102.md)

EXPLANATION_EN = r'''# GG102 stale-graph

## What it does

Finds a tensor that is **computed before a training loop from something that requires grad** (a tensor created
with `requires_grad=True`, an `nn.Parameter`, or the output of a module with trainable parameters) and is then
used in a loss that is back-propagated **inside** the loop.

Such a tensor is a *non-leaf*: it carries a `grad_fn` and the graph that produced it. That graph is built once,
before the loop, but every `backward()` in the loop walks through it again.

- **error** — one of the operations that built the tensor saved tensors for backward (`@`/`matmul`, `*`, `/`,
  `**`, `tanh`, `sigmoid`, `relu`, `exp`, tensor indexing, any module call...). The first `backward()` frees
  those saved tensors, so the second iteration crashes with
  `RuntimeError: Trying to backward through the graph a second time`.
- **warning** — the tensor was built only with operations that save nothing (`+`, `-`, slicing, `view`,
  `reshape`, `sum`, `mean`, `cat`...). Nothing crashes, but every iteration silently sends gradient back into
  the source tensor through the same old graph; or gradguard cannot tell whether an operation (e.g. an unknown
  function) saves tensors.

## Why is this bad?

The loop means "a fresh forward and backward per step", but part of the forward was done only once. If that
part saved tensors, the program dies on the second step. If it did not, the program runs but keeps
accumulating gradient into data that nobody trains (wasted work, a growing `X.grad`), or — when the source is a
parameter — uses a value that is never recomputed after the optimizer updates the parameter.

## Example

```python
import torch
from torch import nn

X = torch.rand(size=(2, 5), requires_grad=True)      # data that "requires grad" for no reason
true_w = torch.tensor([1, 2, 3, 4, 5.]).reshape((5, -1))
Y = torch.matmul(X, true_w)                          # GG102: Y is a non-leaf built before the loop
Y += torch.rand(size=Y.shape)
linear1 = nn.Linear(5, 1)
for i in range(10):
    l = (linear1(X) - Y) ** 2
    linear1.zero_grad()
    l.sum().backward()                               # 2nd iteration: "backward through the graph a second time"
```

## Fix

Make the data plain data. The preferred fix depends on where the graph comes from:

- **Data created with `requires_grad=True` whose `.grad` nothing reads**: remove `requires_grad=True`
  (`X = torch.rand(size=(2, 5))`). The gradients of the parameters you train are exactly the same.
- **Otherwise, to keep the value fixed**: detach it once it is built (`Y = Y.detach()`), or build it inside
  `with torch.no_grad():`.
- **When it comes from a parameter or a module you train** (`feats = encoder(X)`, `w2 = w * 2`): recompute it
  inside the loop, so each step builds (and frees) its own graph and sees the updated parameters. Detach it
  instead only if that part is meant to stay frozen.

## FAQ

**Leaf vs non-leaf?** A *leaf* is a tensor you created yourself (`torch.rand(..., requires_grad=True)`,
`nn.Parameter`). It has no `grad_fn`; using it in every iteration is normal — that is how parameters work. A
*non-leaf* is the result of an operation on something that requires grad (`X @ w`, `encoder(X)`); it remembers
how it was computed, and that record is what the first `backward()` frees.

**Why does the `Conv2d` version of the same loop work?** There `X` and `Y` are plain tensors
(`requires_grad=False`): `Y` has no graph, each iteration builds a new graph from the convolution's parameters,
and `backward()` frees only that new graph.

**Does it follow `self.` attributes across methods?** Yes, within one class: a `self.Y` built in `__init__`
(or in a method that `__init__` calls) from something that requires grad, and back-propagated by a loop in
another method (`fit()`) that never re-assigns `self.Y`, is reported at the line in `__init__` that builds it.
Build it from plain data, detach it there, or build it inside the loop.

**Which objects have `zero_grad()`?** Every `nn.Module` (`nn.Linear`, `nn.Conv2d`, your own model classes: it
zeroes the gradients of all its parameters) and every optimizer (`torch.optim.SGD(...)`). A tensor has no
`zero_grad()`; you reset a tensor's gradient with `x.grad = None` or `x.grad.zero_()`.

**Why is `retain_graph=True` not the fix?** It does stop the crash — the old graph is kept alive, so gradguard
stays quiet when every `backward()` that reaches the tensor passes it — but it keeps every iteration
back-propagating through the pre-loop graph into `X`, keeps that memory alive, and hides the real problem: the
tensor should never have had a graph. `Y.requires_grad_(False)` is not the fix either: on a non-leaf it raises
("you can only change requires_grad flags of leaf variables"); use `Y = Y.detach()`.

**Which operations save tensors for backward?** Those whose derivative needs their inputs or output:
`matmul`/`@` (the gradient for `X` in `X @ w` needs `w`, even when `w` does not require grad), `*` and `/`
(even by a Python number), `**`, `tanh`, `sigmoid`, `relu`, `exp`, `log`, indexing with a tensor or mask,
`F.linear`, every layer with weights, dropout. Those that save nothing: `+`, `-`, negation, slicing and integer
indexing, `view`/`reshape`/`permute`/`transpose`, `sum`, `mean`, `cat`, `stack`, `clone`, dtype conversion.
Through a graph of only the latter, a second `backward()` succeeds — the *silent gradient leak* variant, which
GG102 reports as a warning.
'''

EXPLANATION_ZH = r'''# GG102 stale-graph（循环前构建的陈旧计算图）

## 它检查什么

检查这样一种张量：它在训练循环**之前**，由需要梯度的东西计算得到（用 `requires_grad=True` 创建的张量、
`nn.Parameter`，或带可训练参数的模块的输出），然后在循环**内部**参与计算损失并被反向传播。

这样的张量是*非叶子*张量：它带着 `grad_fn` 以及产生它的那张计算图。这张图只在循环前构建了一次，
但循环里的每一次 `backward()` 都要再经过它一遍。

- **error（错误）**：构建它的某个运算为反向传播保存了张量（`@`/`matmul`、`*`、`/`、`**`、`tanh`、`sigmoid`、
  `relu`、`exp`、用张量做索引、任何模块调用……）。第一次 `backward()` 会释放这些保存的张量，
  所以第二轮迭代必然报错 `RuntimeError: Trying to backward through the graph a second time`。
- **warning（警告）**：它只经过不保存任何张量的运算（`+`、`-`、切片、`view`、`reshape`、`sum`、`mean`、
  `cat`……）。程序不会报错，但每一轮都会沿着同一张旧图把梯度悄悄地传回源张量；或者 gradguard
  无法判断某个运算（例如未知函数）是否保存了张量。

## 为什么这是个问题

循环的本意是“每一步都做一次新的前向和反向”，可前向计算中有一部分只做了一次。如果这部分保存了张量，
程序会在第二步崩溃；如果没有保存，程序能跑，但会不断把梯度累加到没人训练的数据上（白白浪费计算，
`X.grad` 越积越大）；当源头是参数时，这个值在优化器更新参数后也不会重新计算。

## 示例

```python
import torch
from torch import nn

X = torch.rand(size=(2, 5), requires_grad=True)      # 数据无缘无故设置了 requires_grad
true_w = torch.tensor([1, 2, 3, 4, 5.]).reshape((5, -1))
Y = torch.matmul(X, true_w)                          # GG102：Y 是在循环前构建的非叶子张量
Y += torch.rand(size=Y.shape)
linear1 = nn.Linear(5, 1)
for i in range(10):
    l = (linear1(X) - Y) ** 2
    linear1.zero_grad()
    l.sum().backward()                               # 第二轮：Trying to backward through the graph a second time
```

## 修复

让数据回归普通数据。首选的修复方式取决于计算图从哪里来：

- **数据用 `requires_grad=True` 创建，但没有代码读取它的 `.grad`**：去掉 `requires_grad=True`
  （`X = torch.rand(size=(2, 5))`）。被训练参数的梯度完全不变。
- **其他情况下，如果这个值本来就应该固定**：构建完成后立即分离（`Y = Y.detach()`），
  或者把构建它的语句放进 `with torch.no_grad():`。
- **如果它来自正在训练的参数或模块**（`feats = encoder(X)`、`w2 = w * 2`）：把它移到循环内部重新计算，
  这样每一步都构建（并释放）自己的计算图，也能用上更新后的参数。只有当这部分本来就要冻结时，才改用 detach。

## 常见问题

**叶子张量和非叶子张量有什么区别？** *叶子*张量是你自己创建的（`torch.rand(..., requires_grad=True)`、
`nn.Parameter`），没有 `grad_fn`；在每一轮中直接使用它完全正常，参数就是这样工作的。*非叶子*张量是对需要梯度的
东西做运算的结果（`X @ w`、`encoder(X)`），它记录了自己是如何算出来的，第一次 `backward()` 释放的正是这份记录。

**为什么同样的循环换成 `Conv2d` 版本就能正常运行？** 那里的 `X` 和 `Y` 都是普通张量（`requires_grad=False`）：
`Y` 没有计算图，每一轮都从卷积层的参数构建一张新图，`backward()` 释放的只是这张新图。

**它能跨方法跟踪 `self.` 属性吗？** 能，限于同一个类：在 `__init__`（或 `__init__` 调用的方法）中由需要梯度的东西
构建的 `self.Y`，如果在另一个方法（`fit()`）的循环里被反向传播、而该方法从不重新赋值 `self.Y`，就会在 `__init__`
中构建它的那一行报告。请用普通数据构建它、在那里 detach，或者在循环内构建它。

**哪些对象可以调用 `zero_grad()`？** 所有 `nn.Module`（`nn.Linear`、`nn.Conv2d` 以及你自己的模型类，
它会把所有参数的梯度清零）和所有优化器（`torch.optim.SGD(...)`）。张量没有 `zero_grad()`；
清空张量的梯度用 `x.grad = None` 或 `x.grad.zero_()`。

**为什么 `retain_graph=True` 不是正确的修复？** 它确实能消除报错——旧图被保留下来，所以当所有经过该张量的
`backward()` 都传了它时，gradguard 不会报告——但每一轮仍然沿着循环前的旧图把梯度传回 `X`，这部分内存也一直
无法释放，真正的问题被掩盖了：这个张量根本就不该带计算图。`Y.requires_grad_(False)` 也不是修复：
对非叶子张量调用它会直接报错（“you can only change requires_grad flags of leaf variables”），应使用 `Y = Y.detach()`。

**哪些运算会为反向传播保存张量？** 求导时需要用到输入或输出的运算：`matmul`/`@`（`X @ w` 对 `X` 求梯度需要 `w`，
即使 `w` 不需要梯度）、`*` 和 `/`（即使乘除的是 Python 数字）、`**`、`tanh`、`sigmoid`、`relu`、`exp`、`log`、
用张量或掩码做索引、`F.linear`、所有带权重的层、dropout。不保存任何张量的运算：`+`、`-`、取负、切片和整数索引、
`view`/`reshape`/`permute`/`transpose`、`sum`、`mean`、`cat`、`stack`、`clone`、类型转换。
如果计算图只由后者构成，第二次 `backward()` 能够成功——这就是*梯度悄悄泄漏*的情形，GG102 将其报告为警告。
'''

EXPLANATION = {"en": EXPLANATION_EN, "zh": EXPLANATION_ZH}
