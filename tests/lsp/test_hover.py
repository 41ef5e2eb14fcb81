"""Hover: a finding's explanation, and short notes on autograd idioms, in English or Chinese."""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp

from lsp_harness import FAST, GRU_LINE, GRU_SEED, REGRESSION_SEED, code_actions, file_uri, hover, open_doc, use, wait_for_diagnostics
from gradguard.rules import get_rule

pytestmark = pytest.mark.asyncio(loop_scope="module")

IDIOMS = """\
import torch
from torch import nn
model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
w = torch.zeros(2, requires_grad=True)
h = torch.zeros(2)
h = h.detach()
h.detach_()
v = w.data
loss = model(h).sum()
loss.backward(retain_graph=True)
with torch.no_grad():
    pass
opt.zero_grad()
"""


def _col(line: str, needle: str, offset: int = 1) -> int:
    return line.index(needle) + offset


def _section(explanation: str, heading: str) -> str:
    """A section's body (its first paragraph) of a rule's explanation."""
    body = explanation.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    return body.strip().split("\n\n")[0]


# (clientInfo.name, does its hover already show the diagnostic under the mouse?)
CLIENTS = [
    ("Visual Studio Code", True),
    ("Visual Studio Code - Insiders", True),
    ("code-server", True),
    ("VSCodium", True),
    ("Neovim", False),  # vim.lsp.buf.hover() shows the hover alone; diagnostics float apart
    ("helix", False),
    (None, False),  # a client that does not say: the message stays
]


@pytest.mark.parametrize("name,shows", CLIENTS, ids=[str(c[0]) for c in CLIENTS])
async def test_finding_hover_adds_to_what_the_client_already_shows(session, tmp_path, name, shows):
    """VS Code's hover already shows the diagnostic's message above the
    provider's hover: the hover leads with what the message does not say (why it
    fails, the fix, a link to the rule's page) and repeats nothing. A client
    whose hover shows no diagnostics gets the message once, plainly."""
    uri = file_uri(tmp_path, "gru.py")
    info = lsp.ClientInfo(name=name) if name else None
    for lang, locale in (("en", None), ("zh", "zh-CN")):
        async with session(init_options=FAST, client_info=info, locale=locale) as client:
            open_doc(client, uri, GRU_SEED, 1)
            d = (await wait_for_diagnostics(client, uri, 1)).diagnostics[0]
            text = (await hover(client, uri, GRU_LINE, d.range.start.character + 2)).contents.value
            assert text.startswith("### GG101 ")
            assert text.count(d.message) == (0 if shows else 1), text[:300]
            assert f"**{d.message}**" not in text
            rule = get_rule("GG101")
            why = ("## Why is this bad?", "## 为什么这是个问题")[lang == "zh"]
            fix = ("## Fix", "## 修复")[lang == "zh"]
            what = ("## What it does", "## 它检查什么")[lang == "zh"]
            explanation = rule.explain(lang)
            # why, then the fix, then the link; what the rule checks is on the rule's page
            at = [text.index(_section(explanation, why)), text.index(_section(explanation, fix)), text.index(rule.docs_url())]
            assert at == sorted(at), at
            assert _section(explanation, what) not in text
            assert len(text) < len(explanation)


async def test_finding_hover_english(shared, tmp_path):
    uri = file_uri(tmp_path, "gru.py")
    async with use(shared) as client:
        open_doc(client, uri, GRU_SEED, 1)
        d = (await wait_for_diagnostics(client, uri, 1)).diagnostics[0]
        h = await hover(client, uri, GRU_LINE, d.range.start.character + 2)
        assert h is not None
        text = h.contents.value
        assert h.contents.kind == lsp.MarkupKind.Markdown
        assert text.startswith("### GG101")
        # a client not known to show diagnostics in its hover gets the message, once
        assert text.count(d.message) == 1 and f"**{d.message}**" not in text
        assert _section(get_rule("GG101").explain("en"), "## Why is this bad?") in text
        assert "计算图" not in text


async def test_hover_outside_anything_and_past_eof_is_empty(shared, tmp_path):
    uri = file_uri(tmp_path, "eof.py")
    async with use(shared) as client:
        open_doc(client, uri, GRU_SEED, 1)
        await wait_for_diagnostics(client, uri, 1)
        assert await hover(client, uri, 0, 0) is None  # `import torch`: nothing to say
        assert await hover(client, uri, 10_000, 0) is None
        assert await hover(client, uri, GRU_LINE, 10_000) is None
        far = lsp.Range(lsp.Position(9_999, 0), lsp.Position(10_000, 5))
        assert await code_actions(client, uri, far) == []
        # a document the server never saw
        assert await hover(client, file_uri(tmp_path, "unknown.py"), 0, 0) is None


@pytest.mark.parametrize(
    "needle,offset,en,zh",
    [
        (".detach()", 2, "no autograd history", "求导历史"),
        (".detach_()", 2, "in place", "原地"),
        (".data", 2, "legacy", "旧写法"),
        ("requires_grad=", 3, "leaf", "叶子"),
        (".backward(", 2, "a second time", "second time"),
        ("retain_graph=", 3, "retain_graph=True", "retain_graph=True"),
        ("torch.no_grad", 8, "no graph", "不记录计算图"),
        (".zero_grad()", 3, "optimizer", "优化器"),
    ],
)
async def test_idiom_hovers_in_both_languages(shared, session, tmp_path, needle, offset, en, zh):
    uri = file_uri(tmp_path, "idioms.py")
    lines = IDIOMS.split("\n")
    ln = next(i for i, t in enumerate(lines) if needle in t)
    col = _col(lines[ln], needle, offset)
    async with use(shared) as client:
        open_doc(client, uri, IDIOMS, 1)
        h = await hover(client, uri, ln, col)
        assert h is not None, needle
        assert en in h.contents.value
        assert h.range is not None and h.range.start.line == ln
    if needle == ".zero_grad()":
        # which objects have it: nn.Module and optimizers, not tensors
        assert "nn.Module" in h.contents.value and "tensor" in h.contents.value.lower()


async def test_chinese_locale_and_language_override(session, tmp_path):
    uri = file_uri(tmp_path, "reg.py")
    lines = IDIOMS.split("\n")
    zg = next(i for i, t in enumerate(lines) if ".zero_grad()" in t)
    async with session(init_options=FAST, locale="zh-CN") as client:
        open_doc(client, uri, REGRESSION_SEED, 1)
        pub = await wait_for_diagnostics(client, uri, 1)
        d = next(d for d in pub.diagnostics if d.code == "GG102")
        assert any("\u4e00" <= ch <= "\u9fff" for ch in d.message), d.message  # the diagnostic itself is Chinese
        h = await hover(client, uri, d.range.start.line, d.range.start.character + 1)
        assert h is not None
        assert d.message in h.contents.value
        assert _section(get_rule("GG102").explain("zh"), "## 为什么这是个问题") in h.contents.value
        # code action titles follow the language too
        actions = await code_actions(client, uri, d.range, [d])
        assert any(a.title.startswith("在此行忽略 GG102") for a in actions)

        idi = file_uri(tmp_path, "idioms.py")
        open_doc(client, idi, IDIOMS, 1)
        h = await hover(client, idi, zg, _col(lines[zg], ".zero_grad()", 3))
        assert h is not None and "优化器" in h.contents.value

        # the `language` setting overrides the locale
        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"gradguard": {"language": "en", "debounce": 20}}))
        pub = await wait_for_diagnostics(client, uri, 1, since=mark)
        d = next(d for d in pub.diagnostics if d.code == "GG102")
        assert d.message.isascii()
        h = await hover(client, uri, d.range.start.line, d.range.start.character + 1)
        assert _section(get_rule("GG102").explain("en"), "## Why is this bad?") in h.contents.value


async def test_language_setting_zh_with_english_locale(shared, tmp_path):
    uri = file_uri(tmp_path, "gru.py")
    async with use(shared) as client:  # the shared client has no locale: English
        open_doc(client, uri, GRU_SEED, 1)
        d = (await wait_for_diagnostics(client, uri, 1)).diagnostics[0]
        assert d.message.isascii()
        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"gradguard": {"debounce": 20, "language": "zh-cn"}}))
        try:
            d = (await wait_for_diagnostics(client, uri, 1, since=mark)).diagnostics[0]
            assert not d.message.isascii()
            h = await hover(client, uri, GRU_LINE, d.range.start.character + 1)
            assert _section(get_rule("GG101").explain("zh"), "## 为什么这是个问题") in h.contents.value
        finally:
            mark = len(client.published)
            client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"gradguard": FAST}))
            d = (await wait_for_diagnostics(client, uri, 1, since=mark)).diagnostics[0]
            assert d.message.isascii()
