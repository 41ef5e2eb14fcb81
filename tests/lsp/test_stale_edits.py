"""An edit the server sends must apply to the text it was computed from.

Fix All analyses the document, then runs the fix loop; the editor keeps typing
meanwhile. An edit computed from version N but labelled N+1 is accepted by the
editor and lands on the wrong lines: the user's code is corrupted. Each test
here lets the document move while the server works, then applies what came
back to the text of the version it names and compares with what the fix loop
makes of that text.
"""

from __future__ import annotations

import asyncio
from typing import Dict

import pytest
from lsprotocol import types as lsp

from gradguard.engine.document import check_source
from gradguard.engine.fixing import fix_until_stable
from gradguard.model.text import apply_text_edits

from lsp_harness import (
    GRU_SEED, REGRESSION_SEED, TIMEOUT, apply_lsp_edits, change_full, change_range, file_uri, open_doc, use, wait_for_diagnostics,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

# enough unrelated code that one analysis takes a noticeable time, so that an
# edit sent a moment after the request arrives while the server is still at work
FILLER = "".join(f"def helper_{i}(a, b):\n    c = a + b * {i}\n    return [c for _ in range(3)]\n\n" for i in range(4000))


def fixed_by_the_cli(text: str) -> str:
    return fix_until_stable(text, check_source(text), apply_text_edits, check_source).state


def versioned_edits(edit: lsp.WorkspaceEdit, uri: str):
    assert edit.document_changes, "Fix All must send a versioned edit"
    (dc,) = edit.document_changes
    assert isinstance(dc, lsp.TextDocumentEdit) and dc.text_document.uri == uri
    return dc.text_document.version, list(dc.edits)


async def test_fix_all_edit_names_the_version_it_was_computed_from(session, tmp_path):
    uri = file_uri(tmp_path, "race.py")
    texts: Dict[int, str] = {1: GRU_SEED + "\n" + FILLER}
    top = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
    # a long debounce: only the code action analyses the edited text
    async with session(init_options={"debounce": 60000}) as client:
        open_doc(client, uri, texts[1], 1)
        await wait_for_diagnostics(client, uri, 1)
        # version 2: one more line above the loop, and every helper changed (all of it
        # analysed again, by the request below)
        texts[2] = "# 第二版 🙂\n" + texts[1].replace("c = a + b", "c = b + a")
        change_full(client, uri, texts[2], 2)
        request = asyncio.ensure_future(client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=top,
            context=lsp.CodeActionContext(diagnostics=[], only=["source.fixAll.gradguard"]))))
        await asyncio.sleep(0.15)
        # version 3 arrives while version 2 is being analysed: two lines more above the loop
        change_range(client, uri, 3, top, "import os\nimport sys\n")
        texts[3] = "import os\nimport sys\n" + texts[2]
        actions = await asyncio.wait_for(request, 4 * TIMEOUT)
        (action,) = [a for a in actions if isinstance(a, lsp.CodeAction)]
        version, edits = versioned_edits(action.edit, uri)
        assert version in texts
        assert apply_lsp_edits(texts[version], edits) == fixed_by_the_cli(texts[version])


async def test_fix_all_of_unsaved_text_in_on_save_mode(session, tmp_path):
    """``run: onSave`` analyses what was saved; Fix All, asked for the unsaved
    text (as an editor's fix-on-save does, just before it saves), must fix that
    text, not apply the saved text's fixes to it."""
    uri = file_uri(tmp_path, "on_save.py")
    saved = "# 保存的版本\n" + GRU_SEED
    async with session(init_options={"debounce": 0, "run": "onSave"}) as client:
        open_doc(client, uri, saved, 1)
        assert [str(d.code) for d in (await wait_for_diagnostics(client, uri, 1)).diagnostics] == ["GG101"]
        top = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        change_range(client, uri, 2, top, "import os  # 𝐱 未保存\nimport sys\n")
        unsaved = "import os  # 𝐱 未保存\nimport sys\n" + saved
        actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=top,
            context=lsp.CodeActionContext(diagnostics=[], only=["source.fixAll.gradguard"]))), TIMEOUT)
        (action,) = [a for a in actions if isinstance(a, lsp.CodeAction)]
        version, edits = versioned_edits(action.edit, uri)
        assert version == 2
        assert apply_lsp_edits(unsaved, edits) == fixed_by_the_cli(unsaved)


async def test_fix_all_keeps_each_lines_own_end(shared, tmp_path):
    """A file whose first line ends in \\r\\n and the rest in \\n (edited on two
    systems): Fix All rebuilt the lines it touched with the first line's end."""
    lines = REGRESSION_SEED.splitlines(keepends=True)
    text = lines[0].replace("\n", "\r\n") + "".join(lines[1:])
    uri = file_uri(tmp_path, "mixed_ends.py")
    async with use(shared) as client:
        open_doc(client, uri, text, 4)
        await wait_for_diagnostics(client, uri, 4)
        top = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=top,
            context=lsp.CodeActionContext(diagnostics=[], only=["source.fixAll.gradguard"]))), TIMEOUT)
        (action,) = [a for a in actions if isinstance(a, lsp.CodeAction)]
        version, edits = versioned_edits(action.edit, uri)
        assert version == 4
        fixed = fixed_by_the_cli(text)
        assert fixed != text and fixed.count("\r\n") == 1  # the fix changes a line, not its end
        assert apply_lsp_edits(text, edits) == fixed


async def test_a_diagnostic_of_an_older_version_gets_no_edit_for_the_new_text(shared, tmp_path):
    """The editor hands back the diagnostics it shows, which may be those of an
    older version (the user typed lines above since). The suppression was made
    on the new text at the old diagnostic's line and labelled with the new
    version: the editor applied '# noqa' to a line that had moved. Every edit
    offered must, applied to the text of the version it names, touch the
    finding's line."""
    uri = file_uri(tmp_path, "stale_diag.py")
    texts = {1: GRU_SEED}
    async with use(shared) as client:
        open_doc(client, uri, texts[1], 1)
        (d,) = (await wait_for_diagnostics(client, uri, 1)).diagnostics
        finding_line = texts[1].splitlines()[d.range.start.line]
        top = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        change_range(client, uri, 2, top, "# 新的一行 🙂\nimport os\n")
        texts[2] = "# 新的一行 🙂\nimport os\n" + texts[1]
        await wait_for_diagnostics(client, uri, 2)
        actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
            context=lsp.CodeActionContext(diagnostics=[d], only=[lsp.CodeActionKind.QuickFix]))), TIMEOUT)
        for a in actions:
            version, edits = versioned_edits(a.edit, uri)
            assert version in texts, a.title
            old, new = texts[version].splitlines(), apply_lsp_edits(texts[version], edits).splitlines()
            changed = [ln for ln in old if ln not in new]
            assert changed in ([], [finding_line]), (a.title, changed)
            if "noqa" in a.title or "忽略" in a.title:
                assert finding_line + "  # noqa: GG101" in new, a.title


def _apply_in(encoding: str, text: str, edits) -> str:
    """Apply LSP edits whose columns count ``encoding`` units, as an editor that
    negotiated that position encoding does."""
    from gradguard.lsp.convert import Codec
    from gradguard.lsp.document import apply_change

    codec = Codec(encoding)
    # from the last edit to the first: the earlier positions stay valid
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = apply_change(text, e.range, e.new_text, codec)
    return text


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
async def test_fixes_land_in_place_after_wide_characters_on_the_fixed_line(session, tmp_path, encoding):
    """Chinese names and characters outside the BMP (emoji, 𝐱) before the fixed
    columns on the same line: the quick fix and Fix All, in each position
    encoding a client may negotiate, give exactly what the CLI's fix gives."""
    from lsp_harness import vscode_capabilities

    text = REGRESSION_SEED.replace(
        "X = torch.rand(size = (2,5),requires_grad = True)",
        "标签 = '😀𝐱'; X = torch.rand(size = (2,5),requires_grad = True)  # 输入 🙂")
    uri = file_uri(tmp_path, "宽字符.py")
    caps = vscode_capabilities(encodings=[encoding])
    async with session(capabilities=caps, init_options={"debounce": 0}) as client:
        got = client.init_result.capabilities.position_encoding
        assert str(getattr(got, "value", got)) == encoding
        open_doc(client, uri, text, 1)
        (d,) = (await wait_for_diagnostics(client, uri, 1)).diagnostics
        assert d.code == "GG102"
        fixed = fixed_by_the_cli(text)
        assert fixed != text
        quick = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
            context=lsp.CodeActionContext(diagnostics=[d], only=[lsp.CodeActionKind.QuickFix]))), TIMEOUT)
        preferred = [a for a in quick if a.is_preferred]
        assert preferred
        version, edits = versioned_edits(preferred[0].edit, uri)
        assert version == 1 and _apply_in(encoding, text, edits) == fixed
        actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
            context=lsp.CodeActionContext(diagnostics=[], only=["source.fixAll.gradguard"]))), TIMEOUT)
        (fix_all,) = actions
        version, edits = versioned_edits(fix_all.edit, uri)
        assert version == 1 and _apply_in(encoding, text, edits) == fixed
