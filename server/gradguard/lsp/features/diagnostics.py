"""textDocument/diagnostic: a pull of a text document's diagnostics (notebook cells are pushed)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from gradguard.lsp.convert import RawJson
from gradguard.lsp.language_server import GradguardServer
from gradguard.lsp.publishing import result_id

OPTIONS = lsp.DiagnosticOptions(identifier="gradguard", inter_file_dependencies=False, workspace_diagnostics=False)


async def pull_diagnostics(ls: GradguardServer, params: lsp.DocumentDiagnosticParams) -> Any:
    uri = params.text_document.uri
    target = ls.targets.get(uri)
    if target is None or target.kind != "text":
        # notebook cells are pushed (see publish); unknown documents have nothing
        return lsp.RelatedFullDocumentDiagnosticReport(items=[])
    cur = await ls.current(target)
    if cur is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[])
    items = ls.diagnostics_for(target).get(uri, [])
    rid = result_id(target, items)
    if params.previous_result_id == rid:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
    return RawJson(kind="full", resultId=rid, items=items)
