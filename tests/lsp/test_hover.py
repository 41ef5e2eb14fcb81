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
        assert d.message in text  # headed by the finding's message
        explanation = get_rule("GG101").explain("en").strip()
        assert explanation and explanation.splitlines()[0] in text
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
        zh_expl = get_rule("GG102").explain("zh").strip()
        assert zh_expl.splitlines()[0] in h.contents.value
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
        assert get_rule("GG102").explain("en").strip().splitlines()[0] in h.contents.value


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
            assert get_rule("GG101").explain("zh").strip().splitlines()[0] in h.contents.value
        finally:
            mark = len(client.published)
            client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"gradguard": FAST}))
            d = (await wait_for_diagnostics(client, uri, 1, since=mark)).diagnostics[0]
            assert d.message.isascii()
