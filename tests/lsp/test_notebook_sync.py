"""The server's copy of a notebook equals the editor's after every change.

A seeded run of notebook changes as an editor sends them (cells inserted,
deleted and moved, cell text edited incrementally with Chinese text, emoji and
every line end, several changes in one event) is applied to the server's
workspace and to a model of the editor's notebook; after each event the
program the server would analyse (its snapshot) is the one made from the
editor's cells, and each cell carries the editor's version."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Dict, List, Tuple

from lsprotocol import types as lsp

from gradguard.lsp.convert import SourceMap
from gradguard.lsp.document import LspWorkspace
from gradguard.lsp.language_server import SYNC_KIND, GradguardServer
from gradguard.lsp.target import Target
from gradguard.lsp.worker import analysable
from gradguard.model.text import split_lines

from lsp_harness import apply_lsp_edits

NB = "file:///work/训练.ipynb"
PIECES = ["x = 1", "隐状态 = h.detach()", "😀", "𝐱", " ", "\t", "\n", "\r\n", "\r", "\x0c", "# 注释", "%time f()", "for i in r:\n    y = i"]


class EditorNotebook:
    """What the editor holds: cells in order (uri, kind, text, version)."""

    def __init__(self) -> None:
        self.cells: List[Tuple[str, lsp.NotebookCellKind]] = []
        self.text: Dict[str, str] = {}
        self.version: Dict[str, int] = {}

    def program(self) -> Tuple[str, SourceMap]:
        code = [(u, self.text[u], self.version[u]) for u, k in self.cells if k == lsp.NotebookCellKind.Code]
        return SourceMap.of_cells(code)


def _u16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _position(rnd: random.Random, lines: List[str]) -> lsp.Position:
    """A position on one of ``lines``, now and then a little past its end."""
    ln = rnd.randrange(len(lines))
    return lsp.Position(ln, rnd.randint(0, _u16(lines[ln]) + 1))


def test_the_server_copy_of_a_notebook_follows_the_editor_through_random_changes():
    rnd = random.Random(20261201)
    ws = LspWorkspace(None, SYNC_KIND, [], lsp.PositionEncodingKind.Utf16)
    # the server's own snapshot, of this workspace (a whole server in the test
    # process would leave its worker threads behind, and later tests fork)
    ls = SimpleNamespace(workspace=ws)
    target = Target(NB, "notebook", None)
    ed = EditorNotebook()
    serial = [0]

    def new_cell() -> Tuple[str, lsp.NotebookCellKind, str]:
        serial[0] += 1
        kind = lsp.NotebookCellKind.Code if rnd.random() < 0.8 else lsp.NotebookCellKind.Markup
        text = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 5)))
        return f"vscode-notebook-cell:/work/训练.ipynb#W{serial[0]}", kind, text

    def item(uri: str, kind: lsp.NotebookCellKind, text: str) -> lsp.TextDocumentItem:
        lang = "python" if kind == lsp.NotebookCellKind.Code else "markdown"
        return lsp.TextDocumentItem(uri=uri, language_id=lang, version=1, text=text)

    first = [new_cell() for _ in range(4)]
    for u, k, t in first:
        ed.cells.append((u, k))
        ed.text[u], ed.version[u] = t, 1
    ws.put_notebook_document(lsp.DidOpenNotebookDocumentParams(
        notebook_document=lsp.NotebookDocument(uri=NB, notebook_type="jupyter-notebook", version=1,
                                               cells=[lsp.NotebookCell(kind=k, document=u) for u, k, _ in first]),
        cell_text_documents=[item(u, k, t) for u, k, t in first]))

    def text_change(uri: str) -> lsp.NotebookDocumentCellContentChanges:
        changes = []
        for _ in range(rnd.randint(1, 3)):
            text = ed.text[uri]
            lines = split_lines(text)

            a, b = sorted((_position(rnd, lines), _position(rnd, lines)), key=lambda p: (p.line, p.character))
            new = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 3)))
            ed.text[uri] = apply_lsp_edits(text, [lsp.TextEdit(range=lsp.Range(a, b), new_text=new)])
            changes.append(lsp.TextDocumentContentChangePartial(range=lsp.Range(a, b), text=new))
        ed.version[uri] += 1
        return lsp.NotebookDocumentCellContentChanges(
            document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=ed.version[uri]), changes=changes)

    for version in range(2, 400):
        structure = None
        op = rnd.random()
        if op < 0.25 or not ed.cells:  # insert
            u, k, t = new_cell()
            i = rnd.randint(0, len(ed.cells))
            ed.cells.insert(i, (u, k))
            ed.text[u], ed.version[u] = t, 1
            structure = lsp.NotebookDocumentCellChangeStructure(
                array=lsp.NotebookCellArrayChange(start=i, delete_count=0, cells=[lsp.NotebookCell(kind=k, document=u)]),
                did_open=[item(u, k, t)])
        elif op < 0.4 and len(ed.cells) > 1:  # delete
            i = rnd.randrange(len(ed.cells))
            u, _ = ed.cells.pop(i)
            structure = lsp.NotebookDocumentCellChangeStructure(
                array=lsp.NotebookCellArrayChange(start=i, delete_count=1),
                did_close=[lsp.TextDocumentIdentifier(uri=u)])
        elif op < 0.55 and len(ed.cells) > 1:  # move: the span between the two places, in its new order
            i, j = rnd.sample(range(len(ed.cells)), 2)
            lo, hi = min(i, j), max(i, j)
            cell = ed.cells.pop(i)
            ed.cells.insert(j, cell)
            structure = lsp.NotebookDocumentCellChangeStructure(
                array=lsp.NotebookCellArrayChange(start=lo, delete_count=hi - lo + 1,
                                                  cells=[lsp.NotebookCell(kind=k, document=u) for u, k in ed.cells[lo:hi + 1]]))
        edited = []
        if ed.cells and (structure is None or rnd.random() < 0.5):  # text edits, alone or with the structure change
            for u, _ in rnd.sample(ed.cells, min(len(ed.cells), rnd.randint(1, 2))):
                edited.append(text_change(u))
        ws.update_notebook_document(lsp.DidChangeNotebookDocumentParams(
            notebook_document=lsp.VersionedNotebookDocumentIdentifier(uri=NB, version=version),
            change=lsp.NotebookDocumentChangeEvent(cells=lsp.NotebookDocumentCellChanges(
                structure=structure, text_content=edited or None))))

        source, smap, nb_version = GradguardServer.snapshot(ls, target)  # type: ignore[arg-type]
        want_source, want_map = ed.program()
        assert nb_version == version
        assert source == analysable(want_source), version
        assert [(p.uri, p.start, list(p.lines), p.version) for p in smap.parts] == \
            [(p.uri, p.start, list(p.lines), p.version) for p in want_map.parts], version
        for u, _ in ed.cells:
            assert ws.text_documents[u].source == ed.text[u]
