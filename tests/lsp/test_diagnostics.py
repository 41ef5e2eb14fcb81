"""Diagnostics end to end: the real server, the real rules, the seed programs."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types as lsp

from lsp_harness import (
    FAST,
    GRU_LINE,
    GRU_SEED,
    REGRESSION_SEED,
    apply_workspace_edit,
    change_full,
    change_range,
    code_actions,
    codes,
    file_uri,
    hover,
    open_doc,
    use,
    utf16_col,
    wait_for_diagnostics,
)
from gradguard.engine import check_source

pytestmark = pytest.mark.asyncio(loop_scope="module")

REGRESSION_Y_LINE = 5  # `Y = torch.matmul(X,true_w) + true_b`


def _only(params, code):
    found = [d for d in params.diagnostics if d.code == code]
    assert len(found) == 1, [(d.code, d.range) for d in params.diagnostics]
    return found[0]


async def test_gru_seed_diagnostic_shape_and_quick_fix(shared, tmp_path):
    uri = file_uri(tmp_path, "gru_train.py")
    async with use(shared) as client:
        open_doc(client, uri, GRU_SEED, version=1)
        pub = await wait_for_diagnostics(client, uri, 1)
        assert codes(pub) == ["GG101"]
        d = pub.diagnostics[0]
        assert d.range.start.line == GRU_LINE
        assert d.source == "gradguard"
        assert d.severity == lsp.DiagnosticSeverity.Error
        assert d.code_description is not None and d.code_description.href.endswith("GG101.md")
        assert "hidden" in d.message
        # where the graph is built / where backward fails
        assert d.related_information, "related locations expected"
        assert all(r.location.uri == uri for r in d.related_information)
        assert any("backward" in GRU_SEED.splitlines()[r.location.range.start.line] for r in d.related_information)
        # the fixes are not on the wire (every keystroke would carry them): a count is
        assert d.data and d.data["fixes"] == 2 and d.data["version"] == 1, d.data

        actions = await code_actions(client, uri, d.range, [d])
        fixes = [a for a in actions if a.kind == lsp.CodeActionKind.QuickFix and "noqa" not in (a.title or "").lower() and not a.title.startswith("Suppress")]
        assert fixes, [a.title for a in actions]
        assert sum(1 for a in fixes if a.is_preferred) == 1
        preferred = next(a for a in fixes if a.is_preferred)
        fixed = apply_workspace_edit(GRU_SEED, uri, preferred.edit, expect_version=1)
        assert "detach" in fixed
        assert check_source(fixed).findings == ()

        change_full(client, uri, fixed, 2)
        pub2 = await wait_for_diagnostics(client, uri, 2)
        assert pub2.diagnostics == [] or list(pub2.diagnostics) == []


async def test_every_quick_fix_of_both_seeds_clears_the_finding(shared, tmp_path):
    """Apply each offered fix (not only the preferred one), re-publish, expect nothing left."""
    uri = file_uri(tmp_path, "seed.py")
    version = 1
    async with use(shared) as client:
        for seed, code in ((GRU_SEED, "GG101"), (REGRESSION_SEED, "GG102")):
            version += 1
            change_full(client, uri, seed, version) if version > 2 else open_doc(client, uri, seed, version)
            pub = await wait_for_diagnostics(client, uri, version)
            d = _only(pub, code)
            if code == "GG102":
                assert d.range.start.line == REGRESSION_Y_LINE
            actions = await code_actions(client, uri, d.range, [d], only=[lsp.CodeActionKind.QuickFix])
            titles = [a.title for a in actions if not a.title.startswith("Suppress")]
            assert titles, f"{code}: no quick fix offered"
            for title in titles:
                # ask again for the current version: edits carry the version they were made for
                current = {a.title: a for a in await code_actions(client, uri, d.range, [d], only=[lsp.CodeActionKind.QuickFix])}
                fixed = apply_workspace_edit(seed, uri, current[title].edit, expect_version=version)
                assert check_source(fixed).findings == (), (title, fixed)
                version += 1
                change_full(client, uri, fixed, version)
                after = await wait_for_diagnostics(client, uri, version)
                assert list(after.diagnostics) == [], (title, fixed)
                # back to the seed for the next fix
                version += 1
                change_full(client, uri, seed, version)
                d = _only(await wait_for_diagnostics(client, uri, version), code)


async def test_fix_all_source_action_and_command(shared, tmp_path):
    text = GRU_SEED + "\n\n" + REGRESSION_SEED.replace("import torch\nfrom torch import nn\n", "")
    uri = file_uri(tmp_path, "both.py")
    async with use(shared) as client:
        open_doc(client, uri, text, 7)
        pub = await wait_for_diagnostics(client, uri, 7)
        assert codes(pub) == ["GG101", "GG102"]
        whole = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))

        # context.only is honoured: a quickfix request gets no source action, and vice versa
        quick = await code_actions(client, uri, whole, [], only=[lsp.CodeActionKind.QuickFix])
        assert all(a.kind == lsp.CodeActionKind.QuickFix for a in quick)
        src = await code_actions(client, uri, whole, [], only=[lsp.CodeActionKind.SourceFixAll])
        assert [a.kind for a in src] == ["source.fixAll.gradguard"]
        fixed = apply_workspace_edit(text, uri, src[0].edit, expect_version=7)
        assert check_source(fixed).findings == ()
        change_full(client, uri, fixed, 8)
        assert list((await wait_for_diagnostics(client, uri, 8)).diagnostics) == []

        # unfiltered requests (the lightbulb) get fix-all unresolved; codeAction/resolve fills it in
        change_full(client, uri, text, 9)
        d = (await wait_for_diagnostics(client, uri, 9)).diagnostics[0]
        lazy = [a for a in await code_actions(client, uri, d.range, [d]) if a.kind == "source.fixAll.gradguard"]
        assert len(lazy) == 1 and lazy[0].edit is None
        resolved = await asyncio.wait_for(client.code_action_resolve_async(lazy[0]), 20)
        assert apply_workspace_edit(text, uri, resolved.edit, expect_version=9) == fixed
        change_full(client, uri, fixed, 10)
        assert list((await wait_for_diagnostics(client, uri, 10)).diagnostics) == []

        # the same through workspace/executeCommand → workspace/applyEdit
        change_full(client, uri, text, 11)
        assert codes(await wait_for_diagnostics(client, uri, 11)) == ["GG101", "GG102"]
        n_applied = len(client.applied_edits)
        res = await asyncio.wait_for(
            client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="gradguard.fixAll", arguments=[uri])), 20
        )
        assert res["applied"] is True
        assert len(client.applied_edits) == n_applied + 1
        assert apply_workspace_edit(text, uri, client.applied_edits[-1].edit, expect_version=11) == fixed


async def test_noqa_action_suppresses_and_merges(shared, tmp_path):
    uri = file_uri(tmp_path, "noqa.py")
    lines = GRU_SEED.splitlines(keepends=True)
    lines[GRU_LINE] = lines[GRU_LINE].rstrip("\n") + "  # noqa: E501\n"
    text = "".join(lines)
    async with use(shared) as client:
        open_doc(client, uri, text, 1)
        d = _only(await wait_for_diagnostics(client, uri, 1), "GG101")
        actions = await code_actions(client, uri, d.range, [d])
        sup = [a for a in actions if a.title == "Suppress GG101 on this line"]
        assert len(sup) == 1
        new = apply_workspace_edit(text, uri, sup[0].edit, expect_version=1)
        assert new.splitlines()[GRU_LINE].endswith("# noqa: E501, GG101")
        change_full(client, uri, new, 2)
        assert list((await wait_for_diagnostics(client, uri, 2)).diagnostics) == []


async def test_settings_change_republishes(session, tmp_path):
    uri = file_uri(tmp_path, "cfg.py")
    async with session(init_options=FAST) as client:
        open_doc(client, uri, GRU_SEED, 1)
        assert codes(await wait_for_diagnostics(client, uri, 1)) == ["GG101"]

        # pushed in the notification
        mark = len(client.published)
        client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings={"gradguard": {"debounce": 20, "severity": {"GG101": "warning"}}})
        )
        pub = await wait_for_diagnostics(client, uri, 1, since=mark)
        assert codes(pub) == ["GG101"] and pub.diagnostics[0].severity == lsp.DiagnosticSeverity.Warning

        # pulled with workspace/configuration after an empty notification (VS Code's way)
        client.set_configuration({"debounce": 20, "ignore": ["GG101"]}, section="gradguard")
        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        pub = await wait_for_diagnostics(client, uri, 1, since=mark)
        assert list(pub.diagnostics) == []

        # and back
        client.set_configuration({"debounce": 20}, section="gradguard")
        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        assert codes(await wait_for_diagnostics(client, uri, 1, since=mark)) == ["GG101"]


async def test_burst_of_200_changes_publishes_the_latest_version(session, tmp_path):
    uri = file_uri(tmp_path, "burst.py")
    async with session(init_options={"debounce": 150}) as client:
        open_doc(client, uri, GRU_SEED, 1)
        assert codes(await wait_for_diagnostics(client, uri, 1)) == ["GG101"]
        mark = len(client.published)
        for i in range(200):
            # each keystroke adds a comment line at the top (Chinese + emoji): the finding moves down
            change_range(client, uri, i + 2, lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), f"# 第{i}行 😀\n")
        last = await wait_for_diagnostics(client, uri, 201, since=mark)
        assert codes(last) == ["GG101"]
        assert last.diagnostics[0].range.start.line == GRU_LINE + 200
        await asyncio.sleep(0.5)  # nothing stale may follow
        after = [p for p in client.published[mark:] if p.uri == uri]
        assert after[-1].version == 201
        versions = [p.version for p in after]
        assert versions == sorted(versions), versions
        assert len(after) < 20, f"debounce should coalesce the burst, got {len(after)} publishes"


async def test_syntax_error_mid_edit_keeps_other_findings(shared, tmp_path):
    text = GRU_SEED + "\n\n" + REGRESSION_SEED.replace("import torch\nfrom torch import nn\n", "")
    uri = file_uri(tmp_path, "partial.py")
    lines = text.split("\n")
    broken_line = next(i for i, ln in enumerate(lines) if ln.strip() == "l = (Y_hat-Y)**2")
    async with use(shared) as client:
        open_doc(client, uri, text, 1)
        assert codes(await wait_for_diagnostics(client, uri, 1)) == ["GG101", "GG102"]
        # the user is typing in the regression loop: an unclosed parenthesis
        col = lines[broken_line].index("Y)")
        change_range(client, uri, 2, lsp.Range(lsp.Position(broken_line, col + 1), lsp.Position(broken_line, col + 2)), "")
        pub = await wait_for_diagnostics(client, uri, 2)
        assert "GG101" in codes(pub), "the GRU loop is intact: its finding must stay"
        gg101 = _only(pub, "GG101")
        assert gg101.range.start.line == GRU_LINE
        n = len(lines)
        for d in pub.diagnostics:
            assert 0 <= d.range.start.line < n and 0 <= d.range.end.line < n

        # a half-typed statement at the end of the file: still no crash, still GG101
        change_range(client, uri, 3, lsp.Range(lsp.Position(n - 1, 0), lsp.Position(n - 1, 0)), "for q in (")
        pub = await wait_for_diagnostics(client, uri, 3)
        assert "GG101" in codes(pub)


async def test_utf16_positions_with_chinese_and_emoji(shared, session, tmp_path):
    lines = GRU_SEED.split("\n")
    # a Chinese identifier and an emoji (a surrogate pair in UTF-16) before the flagged statement
    lines[GRU_LINE] = '    标记 = "😀"; out, hidden = gru(x, hidden)  # 隐状态 🚀 没有截断'
    text = "\n".join(lines)
    flagged = lines[GRU_LINE]
    stmt = "out, hidden = gru(x, hidden)"
    uri = file_uri(tmp_path, "unicode.py")

    def covered(rng: lsp.Range, units_per_char) -> str:
        # the text a client sees under the range, counting columns the given way
        cols = [0]
        for ch in flagged:
            cols.append(cols[-1] + units_per_char(ch))
        start = cols.index(rng.start.character)
        end = cols.index(rng.end.character)
        return flagged[start:end]

    async with use(shared) as client:
        assert client.init_result.capabilities.position_encoding in (None, "utf-16")
        open_doc(client, uri, text, 1)
        d = _only(await wait_for_diagnostics(client, uri, 1), "GG101")
        assert d.range.start.line == d.range.end.line == GRU_LINE
        under = covered(d.range, lambda ch: 2 if ord(ch) > 0xFFFF else 1)
        assert under and under in stmt, repr(under)
        assert d.range.start.character >= utf16_col(flagged, flagged.index(stmt))

        # hover inside the flagged range (UTF-16 column of "gru")
        from lsp_harness import hover

        h = await hover(client, uri, GRU_LINE, utf16_col(flagged, flagged.index("gru(")) + 1)
        assert h is not None and "GG101" in h.contents.value

    # the same document with a client that negotiates UTF-8
    from lsp_harness import vscode_capabilities

    async with session(init_options=FAST, capabilities=vscode_capabilities(encodings=["utf-8", "utf-16"])) as client:
        assert client.init_result.capabilities.position_encoding == "utf-8"
        open_doc(client, uri, text, 1)
        d = _only(await wait_for_diagnostics(client, uri, 1), "GG101")
        under = covered(d.range, lambda ch: len(ch.encode("utf-8")))
        assert under and under in stmt, repr(under)


async def test_pull_diagnostics_without_double_reporting(session, tmp_path):
    from lsp_harness import vscode_capabilities

    uri = file_uri(tmp_path, "pull.py")
    async with session(init_options=FAST, capabilities=vscode_capabilities(pull=True)) as client:
        assert client.init_result.capabilities.diagnostic_provider is not None
        open_doc(client, uri, GRU_SEED, 1)
        report = await asyncio.wait_for(
            client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri))), 20
        )
        assert report.kind == "full"
        assert [d.code for d in report.items] == ["GG101"]
        assert report.items[0].range.start.line == GRU_LINE
        same = await asyncio.wait_for(
            client.text_document_diagnostic_async(
                lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri), previous_result_id=report.result_id)
            ),
            20,
        )
        assert same.kind == "unchanged"
        # after an edit the next pull sees the new version
        fixed = GRU_SEED.replace("    loss = ", "    hidden = hidden.detach()\n    loss = ", 1)
        change_full(client, uri, fixed, 2)
        report2 = await asyncio.wait_for(
            client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri))), 20
        )
        assert report2.kind == "full" and list(report2.items) == []
        await asyncio.sleep(0.3)
        assert not [p for p in client.published if p.uri == uri], "pulled documents must not also be pushed"
        # a settings change asks the client to pull again
        refreshes = client.diagnostic_refresh_count
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"gradguard": {"debounce": 20, "ignore": ["GG101"]}}))
        for _ in range(200):
            if client.diagnostic_refresh_count > refreshes:
                break
            await asyncio.sleep(0.05)
        assert client.diagnostic_refresh_count > refreshes
        change_full(client, uri, GRU_SEED, 3)
        report3 = await asyncio.wait_for(
            client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri))), 20
        )
        assert report3.kind == "full" and list(report3.items) == []  # GG101 is ignored now
        # closing still clears
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri)))
        closed = await wait_for_diagnostics(client, uri)
        assert list(closed.diagnostics) == []


async def test_close_publishes_empty(shared, tmp_path):
    uri = file_uri(tmp_path, "close.py")
    async with use(shared) as client:
        open_doc(client, uri, GRU_SEED, 1)
        assert codes(await wait_for_diagnostics(client, uri, 1)) == ["GG101"]
        mark = len(client.published)
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri)))
        pub = await wait_for_diagnostics(client, uri, since=mark)
        assert list(pub.diagnostics) == []


GAN_STEP = """\
import torch
import torch.nn as nn

G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))  # 生成器
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))  # 判别器
optD, optG = torch.optim.Adam(D.parameters()), torch.optim.Adam(G.parameters())
bce = nn.BCEWithLogitsLoss()
for step in range(3):
    假样本 = G(torch.randn(16, 4))
    optD.zero_grad()
    lossD = bce(D(torch.randn(16, 2)), torch.ones(16, 1)) + bce(D(假样本), torch.zeros(16, 1))
    lossD.backward()
    optD.step()
    optG.zero_grad()
    lossG = bce(D(假样本), torch.ones(16, 1))
    lossG.backward()
    optG.step()
"""


async def test_gg103_in_the_editor_each_fix_clears_it(shared, tmp_path):
    """GG103 over LSP: the squiggle on the second backward, related locations on the
    shared value and the first backward, the retain fix preferred, and each fix
    clearing the finding when applied."""
    uri = file_uri(tmp_path, "gan_step.py")
    lines = GAN_STEP.split("\n")
    version = 1
    async with use(shared) as client:
        open_doc(client, uri, GAN_STEP, version)
        d = _only(await wait_for_diagnostics(client, uri, version), "GG103")
        assert d.range.start.line == 15 and d.range.start.character == 4
        assert "假样本" in d.message and d.code_description.href.endswith("GG103.md")
        assert [r.location.range.start.line for r in d.related_information] == [8, 11]
        shared_at = d.related_information[0].location.range.start
        assert lines[8][shared_at.character:].startswith("G(torch.randn")  # UTF-16 column after 假样本
        actions = await code_actions(client, uri, d.range, [d], only=[lsp.CodeActionKind.QuickFix])
        fixes = [a for a in actions if not a.title.startswith("Suppress")]
        assert fixes, ([a.title for a in actions], d.data)
        assert [a.is_preferred for a in fixes] == [True, None] or [bool(a.is_preferred) for a in fixes] == [True, False]
        for title in [a.title for a in fixes]:
            # ask again for the current version: edits carry the version they were made for
            current = {a.title: a for a in await code_actions(client, uri, d.range, [d], only=[lsp.CodeActionKind.QuickFix])}
            fixed = apply_workspace_edit(GAN_STEP, uri, current[title].edit, expect_version=version)
            assert "lossD.backward(retain_graph=True)" in fixed or "D(假样本.detach())" in fixed
            version += 1
            change_full(client, uri, fixed, version)
            assert list((await wait_for_diagnostics(client, uri, version)).diagnostics) == [], title
            version += 1
            change_full(client, uri, GAN_STEP, version)
            d = _only(await wait_for_diagnostics(client, uri, version), "GG103")


async def test_unverified_notes_setting_adds_an_information_diagnostic(session, tmp_path):
    # off by default: the unknown link keeps GG101 silent; on: one Information diagnostic
    from test_unverified_notes import UNKNOWN_LINK, line_of  # the program the engine tests use

    uri = file_uri(tmp_path, "hebb.py")
    async with session(init_options={"debounce": 20}) as client:
        open_doc(client, uri, UNKNOWN_LINK, 1)
        assert codes(await wait_for_diagnostics(client, uri, 1)) == []
        client.set_configuration({"debounce": 20, "unverifiedNotes": True}, section="gradguard")
        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        pub = await wait_for_diagnostics(client, uri, 1, since=mark)
        (d,) = pub.diagnostics
        assert (d.code, d.severity) == ("GG101", lsp.DiagnosticSeverity.Information)
        assert d.range.start.line == line_of(UNKNOWN_LINK, "# <note>") and "could not be verified" in d.message
        assert d.data["fixes"] == 0


RESIDUAL_BLOCK = """\
import torch
import torch.nn as nn


class 残差块(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.ReLU())  # 以 ReLU 结尾
        self.skip = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        残差 = self.skip(x)
        特征 = self.conv(x)
        特征 += 残差
        return 特征


model = 残差块()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    model(torch.randn(2, 3, 4, 4)).pow(2).mean().backward()
    opt.step()
"""


async def test_gg104_in_the_editor_fix_and_hover(shared, tmp_path):
    """GG104 over LSP: an error on the in-place `+=` (UTF-16 columns after Chinese
    names), related information on the saving call, the out-of-place fix preferred
    and clearing the finding, and the rule's explanation on hover."""
    uri = file_uri(tmp_path, "residual.py")
    lines = RESIDUAL_BLOCK.split("\n")
    async with use(shared) as client:
        open_doc(client, uri, RESIDUAL_BLOCK, 1)
        d = _only(await wait_for_diagnostics(client, uri, 1), "GG104")
        assert d.severity == lsp.DiagnosticSeverity.Error
        assert d.range.start.line == 13 and d.range.start.character == 8
        assert d.range.end.character == utf16_col(lines[13], len(lines[13]))
        assert "特征" in d.message and d.code_description.href.endswith("GG104.md")
        (rel,) = d.related_information
        assert rel.location.range.start.line == 7  # the ReLU at the end of the Sequential saved it
        assert lines[7][rel.location.range.start.character:].startswith("nn.ReLU()")
        actions = await code_actions(client, uri, d.range, [d], only=[lsp.CodeActionKind.QuickFix])
        fixes = [a for a in actions if not a.title.startswith("Suppress")]
        assert [bool(a.is_preferred) for a in fixes] == [True], [a.title for a in actions]
        fixed = apply_workspace_edit(RESIDUAL_BLOCK, uri, fixes[0].edit, expect_version=1)
        assert "特征 = 特征 + 残差" in fixed
        h = await hover(client, uri, 13, d.range.start.character + 1)
        assert h is not None and h.contents.value.startswith("### GG104")
        change_full(client, uri, fixed, 2)
        assert [x.code for x in (await wait_for_diagnostics(client, uri, 2)).diagnostics] == []
