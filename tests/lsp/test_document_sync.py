"""The server's copy of a document must stay the editor's, character for character.

LSP ends a line at ``\\r\\n``, ``\\r`` or ``\\n`` and nowhere else; Python's
``str.splitlines()`` also breaks at a form feed, a vertical tab, ``\\x1c``-``\\x1e``,
U+0085, U+2028 and U+2029. A server that splits the text that way applies every
incremental edit below such a character one line too high: the diagnostics drift,
and Fix All (so fix-on-save) rewrites the wrong line. Here the real server is fed
incremental edits above, below and on the line of each of those characters, with
Chinese text and emoji (UTF-16 columns), and what it publishes and the edits it
hands back must be those of the editor's text.
"""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp

from lsp_harness import (
    FAST,
    GRU_LINE,
    GRU_SEED,
    apply_lsp_edits,
    apply_workspace_edit,
    code_actions,
    file_uri,
    hover,
    open_doc,
    start_session,
    use,
    utf16_col,
    vscode_capabilities,
    wait_for_diagnostics,
)
from gradguard.engine import check_source
from gradguard.engine.fixing import fix_until_stable
from gradguard.model.text import apply_text_edits, split_lines

pytestmark = pytest.mark.asyncio(loop_scope="module")

# every character str.splitlines() takes for a line break and LSP does not
NOT_LINE_ENDS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


class Editor:
    """The editor's side: its text, and the incremental changes it sends."""

    def __init__(self, client, uri: str, text: str):
        self.client, self.uri, self.text, self.version = client, uri, text, 1
        open_doc(client, uri, text, 1)

    def edit(self, line: int, char: int, end_line: int, end_char: int, new: str) -> int:
        """Replace a range given in code points of the editor's lines; sent in UTF-16."""
        lines = split_lines(self.text)
        rng = lsp.Range(
            lsp.Position(line, utf16_col(lines[line], char)),
            lsp.Position(end_line, utf16_col(lines[end_line], end_char)),
        )
        self.version += 1
        self.text = apply_lsp_edits(self.text, [lsp.TextEdit(range=rng, new_text=new)])
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=[lsp.TextDocumentContentChangePartial(range=rng, text=new)],
            )
        )
        return self.version

    def insert(self, line: int, char: int, new: str) -> int:
        return self.edit(line, char, line, char, new)


def expected_lines(text: str):
    return sorted((f.code, f.range.start.line) for f in check_source(text).findings)


def published_lines(pub):
    return sorted((str(d.code), d.range.start.line) for d in pub.diagnostics)


def fixed_by_gradguard(text: str) -> str:
    return fix_until_stable(text, check_source(text), apply_text_edits, check_source).state


@pytest.mark.parametrize("ch", NOT_LINE_ENDS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_ENDS])
async def test_incremental_edits_around_characters_splitlines_breaks_at(shared, tmp_path, ch):
    lines = GRU_SEED.split("\n")
    # a comment holding the character above the loop (and, for a form feed, the old
    # page-break line of its own), Chinese text and emoji around it
    extra = [f"# 第一页 😀{ch}第二页 🚀 结束"]
    if ch == "\x0c":
        extra.append("\x0c")
    text = "\n".join(lines[:5] + extra + lines[5:])
    mark_line = 5
    gru_line = GRU_LINE + len(extra)
    uri = file_uri(tmp_path, f"sync_{ord(ch):04x}.py")
    async with use(shared) as client:
        ed = Editor(client, uri, text)
        pub = await wait_for_diagnostics(client, uri, 1)
        assert published_lines(pub) == expected_lines(ed.text) == [("GG101", gru_line)]

        # below the character: a line inserted before the loop, then a change inside
        # the flagged line after Chinese text and an emoji
        v = ed.insert(mark_line + 1, 0, "# 新增 🚀 一行\n")
        gru_line += 1
        flagged = split_lines(ed.text)[gru_line]
        v = ed.insert(gru_line, len(flagged), "  # 隐状态 😀 没有 detach")
        # above it: a line at the top
        v = ed.insert(0, 0, "# 顶部 😀\n")
        gru_line += 1
        mark_line += 1
        # on the character's own line, after the character (and after an emoji)
        mark = split_lines(ed.text)[mark_line]
        v = ed.insert(mark_line, mark.index(ch) + 1, "又一页 😀")
        # a replacement spanning the character's line and the next one
        mark = split_lines(ed.text)[mark_line]
        v = ed.edit(mark_line, mark.index("又"), mark_line + 1, 0, "改 🚀\n")
        pub = await wait_for_diagnostics(client, uri, v)
        assert published_lines(pub) == expected_lines(ed.text) == [("GG101", gru_line)]
        assert ch in ed.text and ed.text.count("# 新增 🚀 一行") == 1

        # hover on the flagged statement: found at the editor's line and UTF-16 column
        flagged = split_lines(ed.text)[gru_line]
        h = await hover(client, uri, gru_line, utf16_col(flagged, flagged.index("gru(")) + 1)
        assert h is not None and "GG101" in h.contents.value

        # Fix All's edit, applied to the editor's text, is gradguard's fix of that text
        src = await code_actions(client, uri, lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), only=["source.fixAll"])
        assert [a.kind for a in src] == ["source.fixAll.gradguard"]
        fixed = apply_workspace_edit(ed.text, uri, src[0].edit, expect_version=v)
        assert fixed == fixed_by_gradguard(ed.text)
        assert check_source(fixed).findings == () and fixed.count(ch) == ed.text.count(ch)
        assert fixed.count("# 新增 🚀 一行") == 1 and fixed.count("# 顶部 😀") == 1

        # the quick fix for the finding, too
        d = pub.diagnostics[0]
        actions = await code_actions(client, uri, d.range, [d], only=[lsp.CodeActionKind.QuickFix])
        preferred = next(a for a in actions if a.is_preferred)
        quick = apply_workspace_edit(ed.text, uri, preferred.edit, expect_version=v)
        assert check_source(quick).findings == () and split_lines(quick)[: mark_line + 1] == split_lines(ed.text)[: mark_line + 1]


async def test_mixed_line_ends_and_a_line_deleted_whole(shared, tmp_path):
    """\\r and \\r\\n are line ends (LSP's too): a document mixing them with the
    characters above still maps every edit right."""
    lines = GRU_SEED.split("\n")
    text = "\r\n".join(lines[:5]) + "\r# 页\x0c码 \u2028 😀\r\n" + "\n".join(lines[5:])
    uri = file_uri(tmp_path, "mixed.py")
    async with use(shared) as client:
        ed = Editor(client, uri, text)
        await wait_for_diagnostics(client, uri, 1)
        v = ed.insert(6, 0, "标记 = 1  # 插入 🚀\r\n")
        v = ed.insert(2, 0, "# 上面\n")
        v = ed.edit(6, 0, 7, 0, "")  # the comment line, deleted whole
        pub = await wait_for_diagnostics(client, uri, v)
        assert published_lines(pub) == expected_lines(ed.text) == [("GG101", GRU_LINE + 2)]
        src = await code_actions(client, uri, lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), only=["source.fixAll"])
        assert apply_workspace_edit(ed.text, uri, src[0].edit, expect_version=v) == fixed_by_gradguard(ed.text)


LOOP = """\
for step in range(4):
    x = stream[step * 5:(step + 1) * 5]
    out, hidden = gru(x, hidden)
    loss = head(out).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()"""


async def test_notebook_cells_with_characters_splitlines_breaks_at(tmp_path):
    nb = (tmp_path / "页.ipynb").as_uri()
    c0, c1 = f"vscode-notebook-cell:{nb[7:]}#C0", f"vscode-notebook-cell:{nb[7:]}#C1"
    setup = "\n".join(GRU_SEED.split("\n")[:4]) + "\nstream = torch.randn(20, 3, 4)\nhidden = torch.zeros(1, 3, 6)"
    # every one of the characters on lines of their own comments, above the loop, in the loop's cell
    head = "".join(f"# 注释 {ch} 😀\n" for ch in NOT_LINE_ENDS) + "\x0c\n"
    loop = head + LOOP
    async with start_session(init_options=FAST, capabilities=vscode_capabilities(notebooks=True)) as client:
        client.notebook_document_did_open(
            lsp.DidOpenNotebookDocumentParams(
                notebook_document=lsp.NotebookDocument(
                    uri=nb, notebook_type="jupyter-notebook", version=1,
                    cells=[lsp.NotebookCell(kind=lsp.NotebookCellKind.Code, document=u) for u in (c0, c1)],
                ),
                cell_text_documents=[lsp.TextDocumentItem(uri=u, language_id="python", version=1, text=t)
                                     for u, t in ((c0, setup), (c1, loop))],
            )
        )
        n_head = len(NOT_LINE_ENDS) + 1
        pub = await wait_for_diagnostics(client, c1, 1)
        assert published_lines(pub) == [("GG101", n_head + 2)]

        # incremental edits in the loop's cell, below and above the characters
        text = loop
        version = 1
        # a line inserted below them, one deleted whole above, one inserted at the top,
        # a character typed on one of their lines
        for sl, el, new in ((n_head, n_head, "# 新 🚀\n"), (0, 1, ""), (0, 0, "# 顶 😀\n"), (3, 3, "又")):
            version += 1
            rng = lsp.Range(lsp.Position(sl, 0), lsp.Position(el, 0))
            text = apply_lsp_edits(text, [lsp.TextEdit(range=rng, new_text=new)])
            client.notebook_document_did_change(
                lsp.DidChangeNotebookDocumentParams(
                    notebook_document=lsp.VersionedNotebookDocumentIdentifier(uri=nb, version=version),
                    change=lsp.NotebookDocumentChangeEvent(
                        cells=lsp.NotebookDocumentCellChanges(
                            text_content=[
                                lsp.NotebookDocumentCellContentChanges(
                                    document=lsp.VersionedTextDocumentIdentifier(uri=c1, version=version),
                                    changes=[lsp.TextDocumentContentChangePartial(range=rng, text=new)],
                                )
                            ]
                        )
                    ),
                )
            )
        pub = await wait_for_diagnostics(client, c1, version)
        flagged = n_head + 2 + 1
        assert split_lines(text)[flagged].strip() == "out, hidden = gru(x, hidden)"
        assert published_lines(pub) == [("GG101", flagged)]

        # Fix All for the cell: its edit applied to the cell's text in the editor
        src = await code_actions(client, c1, lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), only=["source.fixAll"])
        assert [a.kind for a in src] == ["source.fixAll.gradguard"]
        fixed = apply_workspace_edit(text, c1, src[0].edit, expect_version=version)
        # gradguard's fix of the whole program, seen in this cell
        program = fixed_by_gradguard(setup + "\n" + text)
        assert fixed == "\n".join(split_lines(program)[len(split_lines(setup)):])
        # (`gru` is not defined in the notebook: the state's shape is unknown, so the fix
        # calls the container-keeping helper, defined in the loop's own cell)
        assert "hidden = _detach_state(hidden)" in fixed and fixed.count("def _detach_state(s):") == 1
        assert fixed.count("# 新 🚀") == 1
        assert check_source(setup + "\n" + fixed).findings == ()
