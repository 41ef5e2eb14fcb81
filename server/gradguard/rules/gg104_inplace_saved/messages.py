"""GG104's words, in English and Chinese: the rule's title and explanation, the
finding's message, the related note and the title of each fix, from source
snippets the analysis hands over. Each function returns ``{"en": ..., "zh": ...}``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict

TITLE = {
    "en": "A tensor autograd saved for backward is changed in place before the backward",
    "zh": "自动求导为反向传播保存的张量在反向传播之前被原地修改",
}

EXPLANATION = {
    "en": '''\
## What it does
Finds an in-place edit of a tensor that an earlier operation of the same forward pass saved for its
backward: `x += residual` right after `x = torch.relu(x)`, `nn.ReLU(inplace=True)` or
`nn.Dropout(inplace=True)` right after a layer that saved its output, `out = x` then `out *= att`
after `x` went into a convolution, `h[layer] = ...` into a tensor whose slice a matrix product
read, `x.clamp_(...)` on the input of a `Linear`. The saving operation may be a block of the same
file (`x = self.block(x)` whose `forward` returns `F.relu(...)`, also when that depends on how the
block was built: `activation="relu"`), a helper method (`self._block(x)`), an element of an
`nn.ModuleList`, an `nn.Sequential` called earlier on one path of an `if` (`sc = self.shortcut(x)`
when the block downsamples), or a custom `torch.autograd.Function` whose `forward` hands its input
to `ctx.save_for_backward`. A block of the file whose `forward` edits its own input in place and then
saves it (`x = token; x += self.pos_embedding` before its `LayerNorm`) edits the caller's tensor:
a second block handed the same tensor (two decoders reading one `quant`) is reported at its call.

## Why is this bad?
To compute gradients, many operations keep one of their tensors: `relu`, `sigmoid`, `tanh`, `exp`,
`softmax` keep their **output**; `Linear`, `Conv2d`, `BatchNorm`, `matmul`, `*` keep their **input**
(the other operand's gradient needs it). `add`, `sub`, `cat`, views and dropout keep nothing. If the
kept tensor (or a view of it, which shares its storage) is changed in place before `backward()`,
autograd notices that its version changed and stops:

```
RuntimeError: one of the variables needed for gradient computation has been modified by an
inplace operation: [torch.FloatTensor [8, 16]], which is output 0 of ReluBackward0, is at
version 1; expected version 0 instead.
```

The error names the operation but not the line. The same edit after an operation that keeps
nothing trains fine, which is why `conv -> bn -> relu(inplace=True)` and `x = conv(x); x += res`
work and `x = relu(x); x += res` does not.

## Example
```python
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.skip = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        res = self.skip(x)
        x = self.conv(x)      # ends in ReLU, which keeps its output
        x += res              # changes that output in place: backward fails
        return x
```

## Fix
Write the edit out of place, so that a new tensor holds the result and the saved one is untouched:

```python
        x = x + res
```

The values are the same and so are the gradients. The other spellings:
- `nn.ReLU(inplace=True)` / `F.relu(x, inplace=True)` / `nn.Dropout(inplace=True)` → `inplace=False`;
- `out = x` then `out *= a` → `out = out * a` (or `out = x.clone()`);
- `h[i] = v` into a tensor a previous operation read → `h = h.clone()` before the write (or build a
  list and `torch.stack` it).

## FAQ
**torchvision's ResNet uses `nn.ReLU(inplace=True)` and `out += identity`. Is it reported?**
No: the in-place ReLU there follows a BatchNorm, which keeps its input, not its output, and
`out += identity` edits the output of a BatchNorm. Nothing saved is changed.

**Is an in-place edit after `backward()` reported?**
No. Once the backward has run, the saved tensors have been used; editing them is safe.

**Why is my `x.data.add_(...)` not reported?**
`.data` has its own version counter, so autograd cannot see the edit (and does not stop). GG202
explains why that is worse.

**Is an edit inside a helper I call reported?**
Yes, for a function or module class of the same file: a helper that edits the tensor it is handed
(`batch -= mean` in `subtract_mean(batch)`) is reported where it is called with a tensor an
operation saved (the output of a `Tanh`), and a loss module that saves a tensor of its own and then
edits it (`p = score.sigmoid(); p[neg] /= s`) where it is called with an input that requires grad.
The edit inside is given as related information. Where the caller keeps only what the helper
returns (`y = subtract_mean(y)`), the fix hands it a copy: `subtract_mean(y.clone())`.

**Is a buffer written by another method reported?**
Yes: a method of the class that writes into one of its registered buffers in place (MoCo's
`self.queue[:, ptr:ptr + n] = keys.T` in `_dequeue_and_enqueue`, also under `torch.no_grad()`) is
reported where `forward` calls it after a product read that buffer
(`einsum('nc,ck->nk', [q, self.queue])` keeps it for `q`'s gradient). The fix lets the product read
a copy: `self.queue.clone()`.

**What does the rule not see?**
Edits in a function of another file, and values it cannot follow: it stays silent rather than
guess.
''',
    "zh": '''\
## 它检查什么
找出对前向传播中某个张量的原地修改，而这个张量已被之前的运算保存下来供反向传播使用：在
`x = torch.relu(x)` 之后写 `x += residual`；在一个保存了输出的层后面紧跟 `nn.ReLU(inplace=True)`
或 `nn.Dropout(inplace=True)`；`x` 送入卷积之后又 `out = x`、`out *= att`；一个矩阵乘法读过某个
切片后又对该张量写 `h[layer] = ...`；对 `Linear` 的输入做 `x.clamp_(...)`。保存张量的运算也可以是
同一文件中的模块（`x = self.block(x)`，其 `forward` 返回 `F.relu(...)`，包括取决于构造参数的情况，
如 `activation="relu"`）、辅助方法（`self._block(x)`）、`nn.ModuleList` 的元素、在 `if` 的某一分支
中先调用的 `nn.Sequential`（下采样时的 `sc = self.shortcut(x)`），或者在 `forward` 中把输入交给
`ctx.save_for_backward` 的自定义 `torch.autograd.Function`。如果同一文件中某个模块的 `forward` 原地修改
自己的输入后又保存它（`x = token; x += self.pos_embedding` 之后接 `LayerNorm`），它修改的就是调用者的
张量：把同一个张量交给第二个这样的模块（两个解码器读同一个 `quant`）会在这次调用处被报告。

## 为什么这是个问题
为了计算梯度，很多运算会保存自己的某个张量：`relu`、`sigmoid`、`tanh`、`exp`、`softmax` 保存
**输出**；`Linear`、`Conv2d`、`BatchNorm`、`matmul`、`*` 保存**输入**（另一个操作数的梯度需要它）。
`add`、`sub`、`cat`、视图和 dropout 什么都不保存。如果被保存的张量（或与它共享存储的视图）在
`backward()` 之前被原地修改，autograd 会发现它的版本号变了并报错：

```
RuntimeError: one of the variables needed for gradient computation has been modified by an
inplace operation: [torch.FloatTensor [8, 16]], which is output 0 of ReluBackward0, is at
version 1; expected version 0 instead.
```

报错只说出是哪种运算，不说是哪一行。同样的修改如果发生在不保存任何东西的运算之后则完全没问题，
所以 `conv -> bn -> relu(inplace=True)` 和 `x = conv(x); x += res` 能训练，而
`x = relu(x); x += res` 不行。

## 示例
```python
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.skip = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        res = self.skip(x)
        x = self.conv(x)      # 以 ReLU 结尾，ReLU 保存了它的输出
        x += res              # 原地修改了这个输出：反向传播失败
        return x
```

## 修复
改成非原地的写法，让结果放进一个新张量，被保存的张量保持不变：

```python
        x = x + res
```

数值相同，梯度也相同。其他写法：
- `nn.ReLU(inplace=True)` / `F.relu(x, inplace=True)` / `nn.Dropout(inplace=True)` → `inplace=False`；
- `out = x` 之后 `out *= a` → `out = out * a`（或 `out = x.clone()`）；
- 对之前的运算读过的张量写 `h[i] = v` → 在写之前 `h = h.clone()`（或者先放进列表再 `torch.stack`）。

## 常见问题
**torchvision 的 ResNet 用了 `nn.ReLU(inplace=True)` 和 `out += identity`，会被报告吗？**
不会：那里的原地 ReLU 跟在 BatchNorm 之后，BatchNorm 保存的是输入而不是输出；`out += identity`
修改的也是 BatchNorm 的输出。没有任何被保存的张量被修改。

**在 `backward()` 之后的原地修改会被报告吗？**
不会。反向传播结束后，保存的张量已经用完，修改它们是安全的。

**为什么 `x.data.add_(...)` 没有被报告？**
`.data` 有自己的版本计数器，autograd 看不到这个修改（也不会报错）。GG202 解释了为什么这样更糟。

**在我调用的辅助函数内部的原地修改会被报告吗？**
会，只要该函数或模块类在同一文件中：原地修改传入张量的辅助函数（`subtract_mean(batch)` 中的
`batch -= mean`），在传入一个已被某个运算保存的张量（例如 `Tanh` 的输出）的调用处报告；先保存自己
的张量再原地修改它的损失模块（`p = score.sigmoid(); p[neg] /= s`），在传入需要梯度的输入的调用处
报告。函数内部的那次修改作为相关信息给出。如果调用处只保留辅助函数的返回值
（`y = subtract_mean(y)`），修复会传给它一个副本：`subtract_mean(y.clone())`。

**另一个方法写入的 buffer 会被报告吗？**
会：类中某个方法原地写入该类注册的 buffer（MoCo 在 `_dequeue_and_enqueue` 中的
`self.queue[:, ptr:ptr + n] = keys.T`，即使在 `torch.no_grad()` 下），如果 `forward` 在某个乘积读取
该 buffer 之后调用这个方法（`einsum('nc,ck->nk', [q, self.queue])` 为 `q` 的梯度保存了它），就会在
调用处报告。修复是让乘积读取一个副本：`self.queue.clone()`。

**这条规则看不到什么？**
在其他文件的函数中进行的修改，以及它无法跟踪的值：不确定时它保持沉默，而不是猜测。
''',
}

_OPS = {
    "augassign": ("the in-place `{op}`", "原地运算 `{op}`"),
    "index": ("the index assignment `{op}`", "下标赋值 `{op}`"),
    "method": ("the in-place `{op}`", "原地方法 `{op}`"),
    "inplace-fn": ("the in-place `{op}`", "原地运算 `{op}`"),
    "inplace-arg": ("`{op}` with `inplace=True`", "带 `inplace=True` 的 `{op}`"),
    "inplace-layer": ("the layer `{op}` built with `inplace=True`", "以 `inplace=True` 构造的层 `{op}`"),
}


def modified_saved(how: str, op: str, target: str, saver: str, line: int, saved_what: str) -> "Dict[str, str]":
    en_op, zh_op = _OPS.get(how, _OPS["method"])
    what_en = "its output" if saved_what == "output" else "its input"
    what_zh = "它的输出" if saved_what == "output" else "它的输入"
    return {
        "en": (f"{en_op.format(op=op)} changes `{target}` in place, but `{saver}` on line {line} saved "
               f"{what_en} for backward: backward() will fail with \"one of the variables needed for gradient "
               f"computation has been modified by an inplace operation\""),
        "zh": (f"{zh_op.format(op=op)} 原地修改了 `{target}`，但第 {line} 行的 `{saver}` 已把{what_zh}保存下来"
               f"供反向传播使用：backward() 会报错 \"one of the variables needed for gradient computation has "
               f"been modified by an inplace operation\""),
    }


def modified_in_sequential(layer: str, seq: str, saver: str, line: int, saved_what: str) -> "Dict[str, str]":
    what_en = "its output" if saved_what == "output" else "its input"
    what_zh = "它的输出" if saved_what == "output" else "它的输入"
    return {
        "en": (f"inside `{seq}`, `{layer}` changes in place the tensor that `{saver}` (line {line}) saved as "
               f"{what_en} for backward: backward() will fail with \"one of the variables needed for gradient "
               f"computation has been modified by an inplace operation\""),
        "zh": (f"在 `{seq}` 中，`{layer}` 原地修改了第 {line} 行的 `{saver}` 已保存为{what_zh}、供反向传播使用的"
               f"张量：backward() 会报错 \"one of the variables needed for gradient computation has been modified "
               f"by an inplace operation\""),
    }


_FAILS_EN = ("backward() will fail with \"one of the variables needed for gradient computation has been modified "
             "by an inplace operation\"")
_FAILS_ZH = ("backward() 会报错 \"one of the variables needed for gradient computation has been modified by an "
             "inplace operation\"")


def callee_edits_argument(call: str, target: str, inside: str, inside_line: int, saver: str, line: int,
                          saved_what: str) -> "Dict[str, str]":
    what_en = "its output" if saved_what == "output" else "its input"
    what_zh = "它的输出" if saved_what == "output" else "它的输入"
    return {
        "en": (f"`{call}` changes `{target}` in place (`{inside}` on line {inside_line}), but `{saver}` on line "
               f"{line} saved {what_en} for backward: {_FAILS_EN}"),
        "zh": (f"`{call}` 原地修改了 `{target}`（第 {inside_line} 行的 `{inside}`），但第 {line} 行的 `{saver}` "
               f"已把{what_zh}保存下来供反向传播使用：{_FAILS_ZH}"),
    }


def callee_edits_own(call: str, inside: str, inside_line: int, saver: str, line: int,
                     saved_what: str) -> "Dict[str, str]":
    what_en = "the output" if saved_what == "output" else "the input"
    what_zh = "输出" if saved_what == "output" else "输入"
    return {
        "en": (f"`{call}` is called with an input that requires grad, and inside it `{inside}` (line "
               f"{inside_line}) changes in place {what_en} that `{saver}` on line {line} saved for backward: "
               f"{_FAILS_EN}"),
        "zh": (f"调用 `{call}` 时传入了需要梯度的张量，而它内部第 {inside_line} 行的 `{inside}` 原地修改了第 {line} 行"
               f"的 `{saver}` 为反向传播保存的{what_zh}：{_FAILS_ZH}"),
    }


def edited_inside_here() -> "Dict[str, str]":
    return {"en": "the in-place edit, inside the called function", "zh": "被调用函数内部的原地修改"}


def saved_here(saved_what: str) -> "Dict[str, str]":
    if saved_what == "output":
        return {"en": "this operation saves its output for backward", "zh": "这个运算为反向传播保存了它的输出"}
    return {"en": "this operation saves this input for backward", "zh": "这个运算为反向传播保存了这个输入"}


def built_inplace_here() -> "Dict[str, str]":
    return {"en": "the layer is built with inplace=True here", "zh": "这个层在这里以 inplace=True 构造"}


def fix_out_of_place(new: str) -> "Dict[str, str]":
    return {"en": f"Compute it out of place: `{new}`", "zh": f"改为非原地计算：`{new}`"}


def fix_inplace_false() -> "Dict[str, str]":
    return {"en": "Build the layer with `inplace=False`", "zh": "用 `inplace=False` 构造这个层"}


def fix_inplace_arg_false() -> "Dict[str, str]":
    return {"en": "Pass `inplace=False`", "zh": "改为传入 `inplace=False`"}


def fix_clone_read(read: str) -> "Dict[str, str]":
    return {"en": f"Let the operation that saves it read a copy: `{read}.clone()`",
            "zh": f"让保存它的运算读取一个副本：`{read}.clone()`"}


def fix_clone_argument(call: str, name: str) -> "Dict[str, str]":
    return {"en": f"Hand `{call}` a copy to edit: `{name}.clone()`",
            "zh": f"传给 `{call}` 一个副本去修改：`{name}.clone()`"}


def fix_clone_before(name: str) -> "Dict[str, str]":
    return {"en": f"Write into a copy: `{name} = {name}.clone()` before the write",
            "zh": f"写入一个副本：在写之前加 `{name} = {name}.clone()`"}
