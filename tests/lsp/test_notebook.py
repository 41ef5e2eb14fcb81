"""Jupyter notebooks: cells analysed as one program, diagnostics mapped back to cells."""

from __future__ import annotations

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from lsp_harness import FAST, apply_workspace_edit, code_actions, hover, start_session, use, vscode_capabilities, wait_for_diagnostics
from gradguard.engine import check_source

pytestmark = pytest.mark.asyncio(loop_scope="module")

SETUP = """\
import torch
from torch import nn
gru = nn.GRU(input_size=4, hidden_size=6)
head = nn.Linear(6, 1)
optimizer = torch.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.05)
stream = torch.randn(20, 3, 4)"""
MAGIC = """\
%matplotlib inline
!pip install torch
hidden = torch.zeros(1, 3, 6)  # 初始化 😀"""
LOOP = """\
for step in range(4):
    x = stream[step * 5:(step + 1) * 5]
    out, hidden = gru(x, hidden)
    loss = head(out).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()"""
LOOP_LINE = 2


def cell_uri(nb: str, i: int) -> str:
    return f"vscode-notebook-cell:{nb[len('file://'):]}#C{i}"


def _item(uri: str, text: str, lang: str = "python", version: int = 1) -> lsp.TextDocumentItem:
    return lsp.TextDocumentItem(uri=uri, language_id=lang, version=version, text=text)


def _cell_text(nb: str, version: int, cell: str, cell_version: int, text: str) -> lsp.DidChangeNotebookDocumentParams:
    """The notebook change that replaces one cell's whole text (as an editor sends it)."""
    return lsp.DidChangeNotebookDocumentParams(
        notebook_document=lsp.VersionedNotebookDocumentIdentifier(uri=nb, version=version),
        change=lsp.NotebookDocumentChangeEvent(
            cells=lsp.NotebookDocumentCellChanges(
                text_content=[
                    lsp.NotebookDocumentCellContentChanges(
                        document=lsp.VersionedTextDocumentIdentifier(uri=cell, version=cell_version),
                        changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
                    )
                ]
            )
        ),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def nb_client():
    """One server for this module, with a client that syncs notebooks."""
    async with start_session(init_options=FAST, capabilities=vscode_capabilities(notebooks=True)) as client:
        yield client


async def test_notebook_open_change_close(nb_client, tmp_path):
    nb = (tmp_path / "train.ipynb").as_uri()
    c = [cell_uri(nb, i) for i in range(6)]
    cells = [
        (c[0], SETUP, "python", lsp.NotebookCellKind.Code),
        (c[1], "# Training\nThe loop below forgets `detach()`.", "markdown", lsp.NotebookCellKind.Markup),
        (c[2], MAGIC, "python", lsp.NotebookCellKind.Code),
        (c[3], LOOP, "python", lsp.NotebookCellKind.Code),
    ]
    async with use(nb_client) as client:
        sync = client.init_result.capabilities.notebook_document_sync
        assert sync is not None and sync.notebook_selector[0].cells[0].language == "python"
        client.notebook_document_did_open(
            lsp.DidOpenNotebookDocumentParams(
                notebook_document=lsp.NotebookDocument(
                    uri=nb, notebook_type="jupyter-notebook", version=1,
                    cells=[lsp.NotebookCell(kind=k, document=u) for u, _, _, k in cells],
                ),
                cell_text_documents=[_item(u, t, lang) for u, t, lang, _ in cells],
            )
        )
        loop_pub = await wait_for_diagnostics(client, c[3], 1)
        assert [d.code for d in loop_pub.diagnostics] == ["GG101"]
        d = loop_pub.diagnostics[0]
        assert d.range.start.line == LOOP_LINE  # a line of the cell, not of the concatenation
        # related locations point into the right cells (the backward() is in the same cell)
        assert d.related_information and all(r.location.uri in c for r in d.related_information)
        for other in (c[0], c[2]):
            assert list((await wait_for_diagnostics(client, other, 1)).diagnostics) == []
        assert not [p for p in client.published if p.uri == c[1]], "markdown cells are not analysed"

        # hover in the cell's own coordinates; past the cell's end: nothing
        h = await hover(client, c[3], LOOP_LINE, d.range.start.character + 2)
        assert h is not None and h.contents.value.startswith("### GG101")
        assert await hover(client, c[3], 50, 0) is None
        h = await hover(client, c[2], 2, MAGIC.split("\n")[2].index("zeros"))
        assert h is None  # nothing to say about torch.zeros; and the magic lines did not break anything

        # quick fix inside the cell: edits only that cell, versioned
        actions = await code_actions(client, c[3], d.range, [d], only=[lsp.CodeActionKind.QuickFix])
        preferred = next(a for a in actions if a.is_preferred)
        fixed = apply_workspace_edit(LOOP, c[3], preferred.edit, expect_version=1)
        assert "hidden.detach()" in fixed

        # a cell is added before the loop: still one program, finding stays on the loop cell
        mark = len(client.published)
        client.notebook_document_did_change(
            lsp.DidChangeNotebookDocumentParams(
                notebook_document=lsp.VersionedNotebookDocumentIdentifier(uri=nb, version=2),
                change=lsp.NotebookDocumentChangeEvent(
                    cells=lsp.NotebookDocumentCellChanges(
                        structure=lsp.NotebookDocumentCellChangeStructure(
                            array=lsp.NotebookCellArrayChange(start=3, delete_count=0, cells=[lsp.NotebookCell(kind=lsp.NotebookCellKind.Code, document=c[4])]),
                            did_open=[_item(c[4], "print('新单元格')\nprint(stream.shape)")],
                        )
                    )
                ),
            )
        )
        again = await wait_for_diagnostics(client, c[3], 1, since=mark)
        assert [(x.code, x.range.start.line) for x in again.diagnostics] == [("GG101", LOOP_LINE)]
        assert list((await wait_for_diagnostics(client, c[4], 1, since=mark)).diagnostics) == []

        # the user applies the fix in the loop cell (cell text version 2)
        mark = len(client.published)
        client.notebook_document_did_change(_cell_text(nb, 3, c[3], 2, fixed))
        assert list((await wait_for_diagnostics(client, c[3], 2, since=mark)).diagnostics) == []

        # back to the bug, then the loop cell is deleted: its diagnostics are cleared
        mark = len(client.published)
        client.notebook_document_did_change(_cell_text(nb, 4, c[3], 3, LOOP))
        assert [x.code for x in (await wait_for_diagnostics(client, c[3], 3, since=mark)).diagnostics] == ["GG101"]
        mark = len(client.published)
        client.notebook_document_did_change(
            lsp.DidChangeNotebookDocumentParams(
                notebook_document=lsp.VersionedNotebookDocumentIdentifier(uri=nb, version=5),
                change=lsp.NotebookDocumentChangeEvent(
                    cells=lsp.NotebookDocumentCellChanges(
                        structure=lsp.NotebookDocumentCellChangeStructure(
                            array=lsp.NotebookCellArrayChange(start=4, delete_count=1),
                            did_close=[lsp.TextDocumentIdentifier(uri=c[3])],
                        )
                    )
                ),
            )
        )
        gone = await wait_for_diagnostics(client, c[3], since=mark)
        assert list(gone.diagnostics) == []
        await wait_for_diagnostics(client, c[0], since=mark)  # the rest was re-analysed
        assert not [p for p in client.published[mark:] if p.uri == c[3] and p.diagnostics]

        # closing the notebook clears every cell
        mark = len(client.published)
        client.notebook_document_did_close(
            lsp.DidCloseNotebookDocumentParams(
                notebook_document=lsp.NotebookDocumentIdentifier(uri=nb),
                cell_text_documents=[lsp.TextDocumentIdentifier(uri=u) for u in (c[0], c[1], c[2], c[4])],
            )
        )
        for u in (c[0], c[2], c[4]):
            assert list((await wait_for_diagnostics(client, u, since=mark)).diagnostics) == []


async def test_notebook_graph_built_in_one_cell_used_in_another(nb_client, tmp_path):
    """GG102 across cells: Y built in cell 1, back-propagated in the loop of cell 2."""
    from lsp_harness import REGRESSION_SEED

    lines = REGRESSION_SEED.split("\n")
    split = next(i for i, ln in enumerate(lines) if ln.startswith("for "))
    first, second = "\n".join(lines[:split]), "\n".join(lines[split:])
    nb = (tmp_path / "reg.ipynb").as_uri()
    c0, c1 = cell_uri(nb, 0), cell_uri(nb, 1)
    async with use(nb_client) as client:
        client.notebook_document_did_open(
            lsp.DidOpenNotebookDocumentParams(
                notebook_document=lsp.NotebookDocument(
                    uri=nb, notebook_type="jupyter-notebook", version=1,
                    cells=[lsp.NotebookCell(kind=lsp.NotebookCellKind.Code, document=u) for u in (c0, c1)],
                ),
                cell_text_documents=[_item(c0, first), _item(c1, second)],
            )
        )
        pub = await wait_for_diagnostics(client, c0, 1)
        assert [d.code for d in pub.diagnostics] == ["GG102"]
        d = pub.diagnostics[0]
        assert d.range.start.line == 5
        assert {r.location.uri for r in d.related_information} == {c0, c1}
        assert list((await wait_for_diagnostics(client, c1, 1)).diagnostics) == []
        # fix-all on the first cell
        actions = await code_actions(client, c0, lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), only=["source.fixAll"])
        assert [a.kind for a in actions] == ["source.fixAll.gradguard"]
        new_first = apply_workspace_edit(first, c0, actions[0].edit, expect_version=1)
        assert check_source(new_first + "\n" + second).findings == ()


async def test_a_cell_that_starts_indented_is_analysed_as_ipython_runs_it(nb_client, tmp_path):
    """A stray space before every line of the loop cell (IPython strips it and
    runs the cell): no syntax error, the GG101 squiggle on the cell's own line
    and UTF-16 column (after a Chinese identifier), and a fix indented like the cell."""
    loop = "\n".join(" " + ln for ln in LOOP.replace("out, hidden", "输出, hidden").replace("head(out)", "head(输出)").split("\n"))
    nb = (tmp_path / "indented.ipynb").as_uri()
    c0, c1, c2 = cell_uri(nb, 0), cell_uri(nb, 1), cell_uri(nb, 2)
    async with use(nb_client) as client:
        client.notebook_document_did_open(
            lsp.DidOpenNotebookDocumentParams(
                notebook_document=lsp.NotebookDocument(
                    uri=nb, notebook_type="jupyter-notebook", version=1,
                    cells=[lsp.NotebookCell(kind=lsp.NotebookCellKind.Code, document=u) for u in (c0, c1, c2)],
                ),
                cell_text_documents=[_item(c0, SETUP), _item(c1, "hidden = torch.zeros(1, 3, 6)"), _item(c2, loop)],
            )
        )
        pub = await wait_for_diagnostics(client, c2, 1)
        assert [(d.code, d.severity) for d in pub.diagnostics] == [("GG101", lsp.DiagnosticSeverity.Error)]
        d = pub.diagnostics[0]
        line = loop.split("\n")[LOOP_LINE]
        assert d.range.start.line == LOOP_LINE
        assert d.range.start.character == line.index("输出")  # UTF-16 units: 输 and 出 are one each
        assert line[d.range.start.character:].startswith("输出, hidden = gru(x, hidden)")
        for other in (c0, c1):
            assert list((await wait_for_diagnostics(client, other, 1)).diagnostics) == []
        actions = await code_actions(client, c2, d.range, [d], only=[lsp.CodeActionKind.QuickFix])
        preferred = next(a for a in actions if a.is_preferred)
        fixed = apply_workspace_edit(loop, c2, preferred.edit, expect_version=1)
        assert "\n     hidden = hidden.detach()\n" in fixed
        program = "\n".join([SETUP, "hidden = torch.zeros(1, 3, 6)", "\n".join(ln[1:] for ln in fixed.split("\n"))])
        assert check_source(program).findings == ()
