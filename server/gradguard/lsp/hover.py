"""Hover text.

Over a finding: the finding's message as a heading, then the rule's
explanation (the same Markdown as ``gradguard rule CODE``).

Over a few autograd idioms (``.detach()``, ``.data``, ``requires_grad=``…):
a short note on what it does to the graph. These notes are editor help
text, not detection knowledge, so they live here rather than in the core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from gradguard.model.findings import Finding
from gradguard.model.i18n import pick


@dataclass(frozen=True)
class Idiom:
    key: str
    pattern: "re.Pattern[str]"  # group "name" is the hover target
    text: dict  # {"en": Markdown, "zh": Markdown}


IDIOMS: Tuple[Idiom, ...] = (
    Idiom(
        "detach_",
        re.compile(r"\.(?P<name>detach_)\s*\("),
        {
            "en": "**`Tensor.detach_()`** — detaches the tensor *in place*: from now on it is a leaf "
            "with no `grad_fn`, so later `backward()` calls stop here. Unlike `.detach()` it changes the "
            "object every other reference also sees; it fails on views of tensors that need grad.",
            "zh": "**`Tensor.detach_()`** —— *原地*把张量从计算图上摘下：此后它是没有 `grad_fn` 的叶子，"
            "之后的 `backward()` 在这里停止回传。与 `.detach()` 不同，它修改的是同一个对象，所有引用都会受影响；"
            "对需要梯度的张量的视图调用会报错。",
        },
    ),
    Idiom(
        "detach",
        re.compile(r"\.(?P<name>detach)\s*\("),
        {
            "en": "**`Tensor.detach()`** — returns a new tensor that shares the same storage but has no "
            "autograd history (`requires_grad=False`, no `grad_fn`). Assigning it back "
            "(`hidden = hidden.detach()`) cuts the graph: the next `backward()` stops here instead of "
            "walking into a graph that an earlier `backward()` already freed.",
            "zh": "**`Tensor.detach()`** —— 返回一个与原张量共享存储、但没有求导历史的新张量"
            "（`requires_grad=False`，没有 `grad_fn`）。赋值回去（`hidden = hidden.detach()`）就切断了计算图："
            "下一次 `backward()` 在这里停下，而不会回溯到上一次 `backward()` 已经释放的图里。",
        },
    ),
    Idiom(
        "data",
        re.compile(r"\.(?P<name>data)\b(?!\s*\()"),
        {
            "en": "**`Tensor.data`** — the legacy way to reach a tensor's values without autograd. It cuts "
            "the graph like `.detach()`, but in-place changes made through it are invisible to autograd "
            "(no version-counter check), which can silently produce wrong gradients. Prefer `.detach()`, "
            "or update parameters under `torch.no_grad()`.",
            "zh": "**`Tensor.data`** —— 绕过自动求导访问张量数值的旧写法。它和 `.detach()` 一样切断计算图，"
            "但通过它做的原地修改自动求导察觉不到（不做版本号检查），可能悄悄算出错误的梯度。"
            "建议用 `.detach()`，或在 `torch.no_grad()` 下更新参数。",
        },
    ),
    Idiom(
        "requires_grad",
        re.compile(r"\b(?P<name>requires_grad_?)\s*(=|\()"),
        {
            "en": "**`requires_grad`** — asks autograd to record every operation on this tensor. A tensor "
            "*created* with `requires_grad=True` is a leaf and safe to reuse; anything *computed* from it "
            "carries a graph. Computing such a value once before a training loop and back-propagating "
            "through it in every iteration fails from the second iteration on (the graph is freed after "
            "the first `backward()`). Input data and labels normally should not require grad.",
            "zh": "**`requires_grad`** —— 让自动求导记录该张量上的每一步运算。用 `requires_grad=True` *创建*的张量"
            "是叶子，可以反复使用；但由它*计算*出来的值都带着计算图。若在训练循环之前算好这样的值，"
            "再在每一轮里对它反向传播，从第二轮起就会报错（第一次 `backward()` 后图已被释放）。"
            "输入数据和标签通常不需要梯度。",
        },
    ),
    Idiom(
        "backward",
        re.compile(r"\.(?P<name>backward)\s*\("),
        {
            "en": "**`Tensor.backward()`** — computes gradients of this value with respect to every leaf "
            "that requires grad, accumulating them into `.grad`. Afterwards the graph's saved "
            "intermediate results are freed (unless `retain_graph=True`), so a second `backward()` "
            "through any part of the same graph raises *Trying to backward through the graph a second time*.",
            "zh": "**`Tensor.backward()`** —— 计算该值对所有需要梯度的叶子张量的梯度，并累加到 `.grad`。"
            "完成后计算图保存的中间结果会被释放（除非 `retain_graph=True`），所以再次对同一张图的任何部分调用 "
            "`backward()` 会抛出 *Trying to backward through the graph a second time*。",
        },
    ),
    Idiom(
        "retain_graph",
        re.compile(r"\b(?P<name>retain_graph)\s*="),
        {
            "en": "**`retain_graph=True`** — keeps the graph's saved tensors after `backward()` so the "
            "same graph can be back-propagated again. It is the fix when two losses of the *same step* "
            "share a graph and are back-propagated one after the other (GG103): the second backward frees "
            "it. It is not the fix for a graph carried into the *next* iteration (GG101, GG102): the graph "
            "(and memory) then grows every iteration and gradients flow into earlier batches; cut it with "
            "`.detach()` instead.",
            "zh": "**`retain_graph=True`** —— 在 `backward()` 之后保留计算图保存的张量，以便对同一张图再次反向传播。"
            "当*同一步*里的两个损失共用一张图、先后各做一次反向传播时（GG103），它就是正确的修法：第二次反向传播"
            "之后图照常释放。但若计算图被带进*下一轮*迭代（GG101、GG102），它不是正确的修法：计算图和内存会逐轮增长，"
            "梯度还会流回以前的批次；应当用 `.detach()` 截断计算图。",
        },
    ),
    Idiom(
        "no_grad",
        re.compile(r"\b(?P<name>torch\.no_grad)\b"),
        {
            "en": "**`torch.no_grad()`** — inside this context (or a function decorated with it) no graph "
            "is recorded: results have `requires_grad=False`. Use it for evaluation and for manual "
            "parameter updates; values computed under it never carry a graph into a later `backward()`.",
            "zh": "**`torch.no_grad()`** —— 在这个上下文（或被它装饰的函数）里不记录计算图：结果的 "
            "`requires_grad=False`。适合评估和手动更新参数；在其中算出的值不会把计算图带进之后的 `backward()`。",
        },
    ),
    Idiom(
        "zero_grad",
        re.compile(r"\.(?P<name>zero_grad)\s*\("),
        {
            "en": "**`.zero_grad()`** — resets the `.grad` of parameters so gradients do not accumulate "
            "across iterations. It exists on every `nn.Module` (its parameters, recursively — e.g. "
            "`nn.Linear`, `nn.Conv2d`, your own model) and on every optimizer (the parameters it "
            "updates). A plain tensor has no `zero_grad()`: use `x.grad = None` or `x.grad.zero_()`. "
            "It clears gradients only; it does not cut any graph.",
            "zh": "**`.zero_grad()`** —— 把参数的 `.grad` 清零（或置为 None），避免梯度跨迭代累加。"
            "每个 `nn.Module`（递归作用于它的参数，例如 `nn.Linear`、`nn.Conv2d`、自定义模型）和每个优化器"
            "（作用于它负责更新的参数）都有这个方法。普通张量没有 `zero_grad()`：请用 `x.grad = None` 或 "
            "`x.grad.zero_()`。它只清梯度，并不切断计算图。",
        },
    ),
)


def _code_end(line: str) -> int:
    """Index where a trailing comment starts (len(line) if none); quotes respected."""
    quote: Optional[str] = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        else:
            if ch == "#":
                return i
            if ch in "'\"":
                quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else ch
                i += len(quote)
                continue
        i += 1
    return len(line)


def idiom_at(line: str, col: int) -> Optional[Tuple[Idiom, int, int]]:
    """The idiom under column ``col`` (code points) and its span."""
    limit = _code_end(line)
    if col >= limit:
        return None
    for idiom in IDIOMS:
        for m in idiom.pattern.finditer(line, 0, limit):
            s, e = m.span("name")
            if s <= col < e:
                return idiom, s, e
    return None


def idiom_markdown(idiom: Idiom, lang: str) -> str:
    return pick(idiom.text, lang)


# Editors whose hover already shows the diagnostics under the mouse, above the
# language server's hover: VS Code and the editors built on it, by the name their
# LSP client gives (clientInfo.name: vscode.env.appName). Neovim's
# vim.lsp.buf.hover(), Helix, Emacs and Sublime show the hover alone.
_SHOWS_DIAGNOSTICS = re.compile(r"visual studio code|vscodium|code - oss|code-server|cursor|windsurf|positron", re.I)


def hover_shows_diagnostics(client_name: Optional[str]) -> bool:
    """Does this client's hover already show the diagnostic's message?"""
    return client_name is not None and _SHOWS_DIAGNOSTICS.search(client_name) is not None


# The explanation's sections a hover leads with (every rule's page has them, in
# both languages: tests/rule_pages.py); what the rule checks, the example and the
# FAQ stay on the rule's page, one click away.
_HOVER_SECTIONS = {
    "en": (("## Why is this bad?", "Why it fails"), ("## Fix", "Fix")),
    "zh": (("## 为什么这是个问题", "为什么会出错"), ("## 修复", "修复")),
}
_MORE = {"en": "The rule's page: what it checks, examples, FAQ", "zh": "规则说明页：检查什么、示例、常见问题"}


def _sections(explanation: str) -> dict:
    """``## heading`` → its body, for each section of a rule's explanation."""
    out = {}
    for chunk in re.split(r"^(?=## )", explanation, flags=re.M):
        head, _, body = chunk.partition("\n")
        if head.startswith("## "):
            out[head.strip()] = body.strip()
    return out


def finding_markdown(findings: Sequence[Finding], lang: str, with_message: bool = True) -> str:
    """The hover of findings: what the diagnostic's message does not say — why
    the program fails and how to fix it — then a link to the rule's page.
    ``with_message``: start with the message itself, for clients whose hover does
    not already show it (see :func:`hover_shows_diagnostics`)."""
    from gradguard.rules import get_rule

    key = "zh" if lang == "zh" else "en"
    blocks: List[str] = []
    for f in findings:
        rule = get_rule(f.code)
        head = f"### {f.code} {rule.name if rule else ''}".rstrip()
        body = [head]
        if with_message:
            body += ["", f.message_in(lang)]
        explanation = rule.explain(lang) if rule else ""
        sections = _sections(explanation)
        wanted = [(label, sections.get(h, "")) for h, label in _HOVER_SECTIONS[key]]
        if all(text for _, text in wanted):
            for label, text in wanted:
                body += ["", f"**{label}**", "", text]
        elif explanation:  # an explanation without those sections: all of it
            body += ["", explanation.strip()]
        if rule:
            body += ["", f"[{_MORE[key]}]({rule.docs_url()})"]
        blocks.append("\n".join(body))
    return "\n\n---\n\n".join(blocks)
