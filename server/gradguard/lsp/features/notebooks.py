"""Notebooks opened, edited, saved and closed: their code cells are one program."""

from __future__ import annotations

from lsprotocol import types as lsp

from gradguard.lsp.language_server import GradguardServer


def did_open(ls: GradguardServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    target = ls.open_target(uri, "notebook")
    for cell in params.cell_text_documents:
        ls.cell_owner[cell.uri] = uri
    ls.schedule(target, 0)


def did_change(ls: GradguardServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    target = ls.targets.get(uri)
    if target is None:
        return
    structure = params.change.cells.structure if params.change.cells else None
    if structure is not None:
        for cell in structure.did_open or ():
            ls.cell_owner[cell.uri] = uri
        for closed in structure.did_close or ():
            ls.cell_owner.pop(closed.uri, None)
            target.published.discard(closed.uri)
            ls.clear(closed.uri)  # at once: the cell is gone, whatever the debounce
    if structure is not None or ls.settings_for(target).run == "onType":
        ls.schedule(target, 0 if structure is not None else None)


def did_save(ls: GradguardServer, params: lsp.DidSaveNotebookDocumentParams) -> None:
    target = ls.targets.get(params.notebook_document.uri)
    if target is not None:
        ls.schedule(target, 0)


def did_close(ls: GradguardServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    cells = [c.uri for c in params.cell_text_documents]
    target = ls.targets.get(uri)
    if target is not None:
        ls.close_target(target, cells)
    else:
        for c in cells:
            ls.clear(c)
