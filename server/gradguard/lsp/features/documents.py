"""Text documents opened, edited, saved and closed (pygls keeps their text)."""

from __future__ import annotations

from lsprotocol import types as lsp

from gradguard.lsp.language_server import GradguardServer


def did_open(ls: GradguardServer, params: lsp.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri in ls.cell_owner:
        return
    ls.schedule(ls.open_target(uri, "text"), 0)


def did_change(ls: GradguardServer, params: lsp.DidChangeTextDocumentParams) -> None:
    target = ls.targets.get(params.text_document.uri)
    if target is None or target.kind != "text":
        return
    if ls.settings_for(target).run == "onType":
        ls.schedule(target)
    # onSave: an analysis started by the last save still publishes (for the saved text)


def did_save(ls: GradguardServer, params: lsp.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri.endswith("pyproject.toml"):
        ls.forget_configs()
        ls.refresh_all()
        return
    target = ls.targets.get(uri)
    if target is not None:
        ls.schedule(target, 0)
    for other in ls.targets.values():  # it may define names the others import
        if other is not target:
            ls.schedule_resolve(other)


def did_close(ls: GradguardServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    target = ls.targets.get(uri)
    if target is not None and target.kind == "text":
        ls.close_target(target)
    elif uri not in ls.cell_owner:
        ls.clear(uri)
