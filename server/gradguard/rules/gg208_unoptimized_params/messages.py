"""GG208's words, in English and Chinese: the title and explanation, the
findings' messages, related notes and the fixes' titles. Each function returns
``{"en": ..., "zh": ...}``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List

TITLE = {
    "en": "Gradients flow into parameters that no optimizer updates",
    "zh": "梯度流入了没有任何优化器更新的参数",
}

EXPLANATION = {
    "en": '''\
## What it does
Finds a `backward()` whose gradients land in parameters that no optimizer of the file updates. Four
shapes:

- a network that no optimizer owns is called with graph recording on, and its output reaches the
  loss: the TD target of a DQN built from `self.target_net(next_states)` without `.detach()` or
  `torch.no_grad()`;
- layers put into a model after the optimizer was built from `model.parameters()`
  (`model.fc = nn.Linear(...)`, `model = Net2()`, or a same-file function that assigns new layers
  to the model's attributes), then trained with that optimizer;
- a layer that `forward` calls and that no parameter group holds: the optimizer built from groups
  of some of the model's layers (`[{"params": model.encoder.parameters()}, ...]`, or a same-file
  `model.get_optimizer_parameters()` that returns them), and one layer left out; likewise a weight
  (`nn.Parameter`) that `forward` reads, missing from the list of weights the optimizer is given
  (`[net.w1, net.w2]`), reported where the list is written with a fix that adds it;
- layers (or `nn.Parameter` weights) that a module's `__init__` keeps in a plain Python list or
  dict (`self.convs = [nn.Conv1d(...), ...]`, or `self.convs = []` filled by
  `self.convs.append(...)`) and that its `forward` reads, while an optimizer is built from an
  instance's `.parameters()`: `nn.Module` registers no layer held in a plain container, so the
  optimizer never holds them (nor does `.to(device)` move them). Reported at the binding, with a fix
  that wraps it in `nn.ModuleList` (`nn.ModuleDict`, `nn.ParameterList`). The list may also be filled
  with `[layer, activation]` pairs (the fix wraps each pair in `nn.ModuleList` too), or with the
  layers the constructor is given (`for layer in layers: self.layers.append(layer)`, when the file
  builds the module with a list of layers, as inside `nn.Sequential(Merge([nn.Linear(...), ...]))`).

Two more shapes need no backward of their own: a parameter group filled by name
(`group["params"].append(p)`) and never appended to the list of groups the optimizer is built from
(reported at the optimizer, with a fix that appends it), and a deep copy of the model handed to a
new object of the same class together with the original's optimizer
(`type(self)(copy.deepcopy(self.model), ..., self._optimizer)` in a class that steps that
optimizer), which trains the copy with an optimizer that holds none of its parameters.

In a script's own loop, the first shape also covers a module made at module level that no optimizer
owns: run on the optimized model's output and compared with labels by a loss
(`criterion(head(model(x)), y)`), it is a head left out of the optimizer (reported at the optimizer,
with a fix adding its parameters), and so is a loss with weights of its own (a same-file class whose
name ends with `Loss`, `criterion_cent(features, labels)` of a center loss); run on the data under a name that says it stays as it is
(`teacher`, `target`, `ema`), it is a teacher whose output needs `.detach()`. A model made again after
its optimizer is also found when a module-level function (`train(x, y)`) that steps the optimizer
on the model runs later.

## Why is this bad?
An optimizer takes its list of parameters once, when it is built. Parameters it does not hold are
never updated, however many gradients they receive. For a target network the backward pass runs
through a second network for nothing (time and memory every step) and piles gradients into it that
nothing reads or zeroes; the update is no longer the semi-gradient the algorithm describes. For
replaced layers it is worse: the new layers get gradients and keep their initial values, while the
optimizer keeps updating the old layers that are no longer in the model. Nothing fails: the loss
moves, a little.

## Example
```python
class DQN:
    def __init__(self):
        self.q_net = Qnet()
        self.target_q_net = Qnet()
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=1e-3)

    def update(self, s, a, r, s2, done):
        q = self.q_net(s).gather(1, a)
        q_next = self.target_q_net(s2).max(1)[0]       # backward runs into target_q_net
        loss = F.mse_loss(q, r + 0.99 * q_next * (1 - done))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
```

```python
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model.fc = nn.Linear(512, 10)      # optimizer still holds the old fc: the new one never trains
for x, y in loader:
    ...
    optimizer.step()
```

## Fix
Cut the target network out of the graph, and build the optimizer after the model is complete:

```python
        q_next = self.target_q_net(s2).detach().max(1)[0]     # or under torch.no_grad()

model.fc = nn.Linear(512, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
```

The quick fix appends `.detach()` to the network's call (the optimizer's parameters get the same
gradients: none of them flowed through it), or builds the optimizer again, with the same
statement, right after the replacement (offered only when nothing, such as a learning-rate
scheduler, holds the old optimizer yet).

## FAQ
**I freeze the target network (`requires_grad_(False)`) or update it by hand.**
Not reported: a network frozen anywhere in the file (`requires_grad_(False)`,
`for p in net.parameters(): p.requires_grad = False`, a `freeze(net)` call), whose gradients the
file reads (`p.grad` in a loop over its parameters), or wrapped into another module or container is
left alone. So is a network called under `torch.no_grad()` or in a `@torch.no_grad()` method.

**A second optimizer updates it.**
Not reported: the rule reads every optimizer built in the file, and stays silent as soon as one of
them is built from parameters it cannot follow (`optim.Adam(params)` of an unknown `params`).

**Is there a quick fix for a layer left out of the groups?**
No: which group, and so which learning rate, the layer belongs to is the author's choice. Add a group
for it, or freeze it if leaving it untrained is the intent (then it is not reported).

**I build the optimizer again after replacing the layer.**
Not reported; neither is `optimizer.add_param_group(...)` after the replacement, nor replacing a
layer by one without parameters (`nn.Identity()`).

**I keep the layers in a list and register them myself.**
Not reported: a class that calls `add_module`, `register_module`, `register_parameter` or
`setattr`, hands the list to a call (`nn.Sequential(*self.layers)`, `nn.ModuleList(self.layers)`),
binds the attribute again, mentions `requires_grad` or `no_grad`, or whose list holds a single
module (a network hidden from `.parameters()` and `state_dict()` on purpose, a perceptual loss's) is
left alone; so is a list whose items' parameters the file gathers by hand
(`for m in model.layers: params += list(m.parameters())`).

**My critic gets gradients from the actor's loss (DDPG, a GAN's discriminator).**
Not reported: that network has its own optimizer, which zeroes its gradients before its own step.
''',
    "zh": '''\
## 它检查什么
找出这样的 `backward()`：它的梯度落在文件中没有任何优化器更新的参数上。四种形态：

- 一个没有优化器拥有的网络在记录计算图的情况下被调用，它的输出进入了损失：例如 DQN 的 TD 目标由
  `self.target_net(next_states)` 计算，却没有 `.detach()`，也不在 `torch.no_grad()` 中；
- 在优化器已经用 `model.parameters()` 构建之后，又把新层放进模型（`model.fc = nn.Linear(...)`、
  `model = Net2()`，或同一文件中把新层赋给模型属性的函数），然后继续用这个优化器训练；
- `forward` 调用了某一层，但没有任何参数组包含它：优化器由模型部分层的参数组构建
  （`[{"params": model.encoder.parameters()}, ...]`，或同一文件中返回这些参数组的
  `model.get_optimizer_parameters()`），漏掉了其中一层；同样，`forward` 读取的某个权重（`nn.Parameter`）
  不在交给优化器的权重列表（`[net.w1, net.w2]`）里，会在写出该列表的地方报告，并提供把它加入列表的修复；
- 模块的 `__init__` 把层（或 `nn.Parameter` 权重）放在普通的 Python 列表或字典里
  （`self.convs = [nn.Conv1d(...), ...]`，或先 `self.convs = []` 再 `self.convs.append(...)`），
  `forward` 又读取它们，而优化器由该模块实例的 `.parameters()` 构建：`nn.Module` 不会注册放在普通容器里的层，
  优化器因此从不持有它们（`.to(device)` 也不会移动它们）。在绑定处报告，修复把它包进 `nn.ModuleList`
  （`nn.ModuleDict`、`nn.ParameterList`）。列表里也可以是 `[层, 激活函数]` 这样的成对元素（修复同样把每一对包进
  `nn.ModuleList`），或是构造函数收到的层（`for layer in layers: self.layers.append(layer)`，而文件用一个层列表
  创建该模块，例如 `nn.Sequential(Merge([nn.Linear(...), ...]))`）。

另有两种形态本身不需要 `backward`：按名字填充的参数组（`group["params"].append(p)`）从未加入构建优化器的
参数组列表（在优化器处报告，修复把它加入列表）；以及把模型的深拷贝连同原模型的优化器一起交给同一个类的新对象
（`type(self)(copy.deepcopy(self.model), ..., self._optimizer)`，且该类会对这个优化器执行 step），于是拷贝由一个
不包含它任何参数的优化器训练。

在脚本自己的循环中，第一种形态也包括在模块级创建、却没有优化器拥有的模块：如果它作用在被优化模型的输出上，
并由损失函数与标签比较（`criterion(head(model(x)), y)`），它就是被漏掉的分类头（在优化器处报告，修复会加入
它的参数），自带权重的损失（同一文件中名字以 `Loss` 结尾的类，例如中心损失的 `criterion_cent(features, labels)`）
也一样；如果它直接作用在数据上，且名字表明它应保持不变（`teacher`、`target`、`ema`），它就是需要
`.detach()` 的教师网络。模型在优化器之后被重新创建、随后由一个模块级函数（`train(x, y)`）用该优化器训练，
也会被发现。

## 为什么这是个问题
优化器只在构建时读取一次参数列表。它没有持有的参数永远不会被更新，无论收到多少梯度。对目标网络而言，
反向传播白白穿过了第二个网络（每一步都浪费时间和显存），并把梯度堆积在它上面，没有人读取或清零；
更新也不再是算法所描述的半梯度。对被替换的层来说更糟：新层得到梯度却一直保持初始值，而优化器仍在更新
已经不在模型里的旧层。程序不会报错：损失还会动一点。

## 示例
```python
class DQN:
    def __init__(self):
        self.q_net = Qnet()
        self.target_q_net = Qnet()
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=1e-3)

    def update(self, s, a, r, s2, done):
        q = self.q_net(s).gather(1, a)
        q_next = self.target_q_net(s2).max(1)[0]       # 反向传播会进入 target_q_net
        loss = F.mse_loss(q, r + 0.99 * q_next * (1 - done))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
```

```python
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model.fc = nn.Linear(512, 10)      # 优化器仍持有旧的 fc：新的 fc 永远不会被训练
for x, y in loader:
    ...
    optimizer.step()
```

## 修复
把目标网络从计算图中切断，并在模型完整之后再构建优化器：

```python
        q_next = self.target_q_net(s2).detach().max(1)[0]     # 或放在 torch.no_grad() 中

model.fc = nn.Linear(512, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
```

快速修复会在网络调用后加上 `.detach()`（优化器持有的参数得到的梯度不变：没有梯度经过它），或在替换
之后用同一条语句重新构建优化器（只在还没有任何东西——例如学习率调度器——持有旧优化器时提供）。

## 常见问题
**我冻结了目标网络（`requires_grad_(False)`），或者手动更新它。**
不会被报告：在文件中任何地方被冻结（`requires_grad_(False)`、
`for p in net.parameters(): p.requires_grad = False`、`freeze(net)` 调用）、其梯度被读取（遍历其参数时
读取 `p.grad`）、或被包进其他模块或容器的网络都会被放过。在 `torch.no_grad()` 中或
`@torch.no_grad()` 方法里调用的网络也一样。

**有第二个优化器更新它。**
不会被报告：本规则会读取文件中构建的每个优化器；只要其中一个的参数来源无法追踪（例如未知的
`params` 构建的 `optim.Adam(params)`），就保持沉默。

**漏在参数组之外的层有快速修复吗？**
没有：这一层属于哪个参数组（也就是用哪个学习率）应由作者决定。请为它添加参数组；如果本意就是不训练它，
请冻结它（这样就不会被报告）。

**我在替换层之后重新构建了优化器。**
不会被报告；替换之后调用 `optimizer.add_param_group(...)`，或者替换成没有参数的层（`nn.Identity()`），
也都不会。

**我把层放在列表里，并自己注册它们。**
不会被报告：类中调用了 `add_module`、`register_module`、`register_parameter` 或 `setattr`，把列表交给某个调用
（`nn.Sequential(*self.layers)`、`nn.ModuleList(self.layers)`），再次绑定该属性，提到 `requires_grad` 或 `no_grad`，
或者列表只有一个模块（有意对 `.parameters()` 和 `state_dict()` 隐藏的网络，例如感知损失的网络）时，都会被放过；
文件自己收集列表中各项参数（`for m in model.layers: params += list(m.parameters())`）时也一样。

**我的 critic 从 actor 的损失中得到梯度（DDPG、GAN 的判别器）。**
不会被报告：那个网络有自己的优化器，会在自己的更新之前把梯度清零。
''',
}


def unowned(net: str, backward_line: int, prefix: str = "self.") -> "Dict[str, str]":
    """``prefix``: ``self.`` for a network of the object, empty for a function's parameter."""
    return {
        "en": f"`{prefix}{net}` is called with graph recording on and its output reaches the `backward()` on line "
              f"{backward_line}, but no optimizer updates its parameters: every backward also runs through it and "
              f"piles unused gradients into it; detach its output (or call it under `torch.no_grad()`).",
        "zh": f"`{prefix}{net}` 在记录计算图的情况下被调用，它的输出进入了第 {backward_line} 行的 `backward()`，"
              f"但没有任何优化器更新它的参数：每次反向传播都会穿过它，并在它上面堆积无用的梯度；"
              f"请对它的输出调用 `.detach()`（或在 `torch.no_grad()` 中调用它）。",
    }


def left_out_of_optimizer(net: str, base: str, opt: str, backward_line: int) -> "Dict[str, str]":
    """A module run on the optimized model's output, left out of the optimizer."""
    return {
        "en": f"`{opt}` is built from `{base}`'s parameters only, but `{net}`, run on `{base}`'s output, is part of "
              f"the loss back-propagated on line {backward_line}: its parameters receive gradients and are never "
              f"updated (it stays as initialised); add them to the optimizer.",
        "zh": f"`{opt}` 只由 `{base}` 的参数构建，但作用在 `{base}` 输出上的 `{net}` 也是第 {backward_line} 行反向传播"
              f"的损失的一部分：它的参数得到梯度却从不更新（一直保持初始值）；请把它们加入优化器。",
    }


def called_on_output(net: str, base: str) -> "Dict[str, str]":
    return {"en": f"`{net}` runs on `{base}`'s output here", "zh": f"`{net}` 在这里作用在 `{base}` 的输出上"}


def fix_add_parameters(net: str, opt: str) -> "Dict[str, str]":
    return {"en": f"Add `{net}.parameters()` to `{opt}`", "zh": f"把 `{net}.parameters()` 加入 `{opt}`"}


def backward_here(net: str, prefix: str = "self.") -> "Dict[str, str]":
    return {"en": f"this backward also computes gradients for `{prefix}{net}`",
            "zh": f"这次反向传播也为 `{prefix}{net}` 计算梯度"}


def fix_detach(text: str) -> "Dict[str, str]":
    return {"en": f"Detach the output: `{text}.detach()`", "zh": f"切断输出的计算图：`{text}.detach()`"}


def replaced(what: str, opt: str, owner: str, opt_line: int) -> "Dict[str, str]":
    if what == owner:
        how_en, how_zh = f"`{owner}` is bound to a new model", f"`{owner}` 被绑定到了一个新模型"
    elif what.endswith("(...)"):
        how_en, how_zh = f"`{what}` puts new layers into `{owner}`", f"`{what}` 把新层放进了 `{owner}`"
    else:
        how_en, how_zh = f"`{what}` is replaced by a new layer", f"`{what}` 被替换成了新层"
    return {
        "en": f"{how_en} after `{opt}` was built from `{owner}.parameters()` (line {opt_line}): `{opt}` still "
              f"holds the old parameters, so the new layers receive gradients but are never updated; build the "
              f"optimizer after the replacement.",
        "zh": f"{how_zh}，而 `{opt}` 早已在第 {opt_line} 行由 `{owner}.parameters()` 构建：`{opt}` 仍持有旧参数，"
              f"新层得到梯度却永远不会被更新；请在替换之后再构建优化器。",
    }


def optimizer_built_here(opt: str) -> "Dict[str, str]":
    return {"en": f"`{opt}` takes its parameters here, once", "zh": f"`{opt}` 在这里一次性取得它的参数"}


def fix_rebuild(opt: str) -> "Dict[str, str]":
    return {"en": f"Build `{opt}` again after the replacement", "zh": f"在替换之后重新构建 `{opt}`"}


def left_out_of_list(weights: "List[str]", opt: str) -> "Dict[str, str]":
    names = ", ".join(f"`{w}`" for w in weights)
    one = len(weights) == 1
    return {
        "en": f"{names} {'is' if one else 'are'} used in `forward` but missing from the weights `{opt}` is given: "
              f"{'it receives' if one else 'they receive'} gradients and never {'changes' if one else 'change'}; "
              f"add {'it' if one else 'them'} to the list (or freeze {'it' if one else 'them'} on purpose).",
        "zh": f"{names} 在 `forward` 中被使用，却不在交给 `{opt}` 的权重列表里：得到梯度却永远不会改变；"
              f"请把它加入列表（或有意冻结它）。",
    }


def fix_add_to_list(weights: "List[str]") -> "Dict[str, str]":
    names = ", ".join(f"`{w}`" for w in weights)
    return {"en": f"Add {names} to the list", "zh": f"把 {names} 加入列表"}


def left_out(modules: "List[str]", opt: str) -> "Dict[str, str]":
    names = ", ".join(f"`{m}`" for m in modules)
    return {
        "en": f"{names} {'is' if len(modules) == 1 else 'are'} called in `forward` but in no parameter group of "
              f"`{opt}`: {'it receives' if len(modules) == 1 else 'they receive'} gradients and never "
              f"{'changes' if len(modules) == 1 else 'change'}; add a group for "
              f"{'it' if len(modules) == 1 else 'them'} (or freeze {'it' if len(modules) == 1 else 'them'} on purpose).",
        "zh": f"{names} 在 `forward` 中被调用，却不在 `{opt}` 的任何参数组里：它们得到梯度却永远不会改变；"
              f"请为它们添加参数组（或有意冻结它们）。",
    }


def plain_container(attr: str, shape: str, kind: str, nn: str, container: str) -> "Dict[str, str]":
    what = {"module": ("layers", "层"), "parameter": ("weights", "权重")}[kind]
    holder = {"list": ("list", "列表"), "dict": ("dict", "字典")}[shape]
    return {
        "en": f"`self.{attr}` keeps its {what[0]} in a plain {holder[0]}: `nn.Module` does not register them, so "
              f"`.parameters()` leaves them out and the optimizer built from it never updates them (nor does "
              f"`.to(device)` move them), though `forward` uses them and they get gradients; use `{nn}{container}`",
        "zh": f"`self.{attr}` 把它的{what[1]}放在普通{holder[1]}里：`nn.Module` 不会注册它们，`.parameters()` 不包含它们，"
              f"由它构建的优化器永远不会更新它们（`.to(device)` 也不会移动它们），尽管 `forward` 用到了它们、它们也得到了梯度；"
              f"请使用 `{nn}{container}`",
    }


def fix_register(container: str) -> "Dict[str, str]":
    return {"en": f"Wrap it in `{container}`", "zh": f"用 `{container}` 包装它"}


def copy_given_the_optimizer(copy: str, opt: str) -> "Dict[str, str]":
    return {
        "en": f"`{copy}`, a deep copy of the model, is handed on with `{opt}`, the optimizer built from the "
              f"original's parameters: it holds none of the copy's, so training the copy steps the original's "
              f"parameters (with no gradients) and the copy never changes; build a new optimizer from "
              f"`{copy}.parameters()`",
        "zh": f"`{copy}` 是模型的深拷贝，却与 `{opt}` 一起交出，而该优化器是由原模型的参数构建的：它不包含拷贝的任何参数，"
              f"训练拷贝时只会对原模型的参数（没有梯度）执行 step，拷贝永远不会改变；请用 `{copy}.parameters()` 构建新的优化器",
    }


def copy_made_here(copy: str) -> "Dict[str, str]":
    return {"en": f"`{copy}` is copied here: its parameters are new tensors",
            "zh": f"`{copy}` 在这里被拷贝：它的参数是新的张量"}


def dropped_group(groups: str, line: int) -> "Dict[str, str]":
    return {
        "en": f"The parameter group made on line {line} is filled and never added to `{groups}`: the optimizer "
              f"built from `{groups}` holds none of its parameters, so they get gradients and never change",
        "zh": f"第 {line} 行创建的参数组被填充后从未加入 `{groups}`：由 `{groups}` 构建的优化器不包含其中任何参数，"
              f"它们得到梯度却永远不会改变",
    }


def group_made_here() -> "Dict[str, str]":
    return {"en": "the group is made here", "zh": "参数组在这里创建"}


def fix_append_group(name: str, groups: str) -> "Dict[str, str]":
    return {"en": f"Append `{name}` to `{groups}` before the optimizer is built",
            "zh": f"在构建优化器之前把 `{name}` 加入 `{groups}`"}
