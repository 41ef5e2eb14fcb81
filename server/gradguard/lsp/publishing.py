"""Diagnostics out: a target's findings as diagnostics, pushed
(``textDocument/publishDiagnostics``, per part: a text document, or each cell
of a notebook) or handed to a pull (``textDocument/diagnostic``)."""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Callable, Dict, List, Optional

from lsprotocol import types as lsp

from gradguard.engine.document import CheckResult
from gradguard.lsp.convert import SOURCE, Codec, SourceMap, diagnostics_json
from gradguard.lsp.convert import _span_json as span_json
from gradguard.model.findings import Position, Range
from gradguard.lsp.target import Target

log = logging.getLogger("gradguard.lsp")


def not_analysed_json(result: CheckResult, smap: SourceMap, codec: Codec, lang: str):
    """(uri, information Diagnostic) for each unit of ``result`` that was nested
    too deeply to analyse (or a whole text whose analysis failed): its findings
    are unknown, and the editor says so rather than showing nothing."""
    for line, unit, codes in result.not_analysed:
        conv = smap.to_client_span(Range(Position(line, 0), Position(line, 0)), codec)
        if conv is None:
            continue
        what = unit if unit != "<module>" else ("此文件" if lang == "zh" else "this file")
        rules = "" if codes == "*" else f" ({codes})"
        if lang == "zh":
            msg = f"gradguard 未分析 {what}{rules}：代码嵌套过深（或分析失败），其中的问题未知"
        else:
            msg = f"gradguard did not analyse {what}{rules}: nested too deeply (or the analysis failed); its findings are unknown"
        yield conv[0].uri, {"range": span_json(conv[1]), "severity": int(lsp.DiagnosticSeverity.Information),
                            "source": SOURCE, "message": msg}


class Publisher:
    """Sends diagnostics built in their wire form (``convert.diagnostic_json``).

    ``send`` hands one JSON-RPC message to the transport as it is: a
    notification's parameters would otherwise be taken apart by their declared
    type, so a pass-through value cannot ride in one."""

    def __init__(self, send: Callable[[Dict[str, Any]], None]):
        self._send = send
        self.pull = False  # the client pulls diagnostics for text documents

    def diagnostics_for(self, target: Target, codec: Codec, lang: str) -> Dict[str, List[Dict[str, Any]]]:
        """The target's diagnostics per URI, as they travel (JSON objects)."""
        a = target.analysed
        if a is None:
            return {}
        out = diagnostics_json(a.result.findings, a.smap, codec, lang)
        for uri, diag in not_analysed_json(a.result, a.smap, codec, lang):
            out.setdefault(uri, []).append(diag)
        return out

    def publish(self, target: Target, codec: Codec, lang: str) -> None:
        a = target.analysed
        if a is None:
            return
        if target.kind == "text" and self.pull:
            return  # the client pulls; pushing too would show everything twice
        per_uri = self.diagnostics_for(target, codec, lang)
        parts = {p.uri: p for p in a.smap.parts}
        for uri, diags in per_uri.items():
            part = parts.get(uri)
            self.send(uri, diags, part.version if part else None)
        for uri in target.published - set(per_uri):
            self.clear(uri)  # a cell that left the notebook
        target.published = set(per_uri)
        n = sum(len(v) for v in per_uri.values())
        log.debug("published %d diagnostic(s) for %s (version %s)", n, target.key, a.version)

    def clear(self, uri: str) -> None:
        self.send(uri, [], None)

    def send(self, uri: str, diagnostics: List[Dict[str, Any]], version: Optional[int]) -> None:
        """textDocument/publishDiagnostics with diagnostics already in their wire form."""
        params: Dict[str, Any] = {"uri": uri, "diagnostics": diagnostics}
        if version is not None:
            params["version"] = version
        self._send({"jsonrpc": "2.0", "method": lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, "params": params})


def result_id(target: Target, items: List[Dict[str, Any]]) -> str:
    """A pull's resultId: the same for the same version and diagnostics."""
    h = hashlib.blake2b(digest_size=8)
    h.update(repr(target.analysed.version if target.analysed else None).encode())
    for d in items:
        r = d["range"]
        h.update(repr((d["code"], r["start"]["line"], r["start"]["character"], r["end"]["line"], r["end"]["character"],
                       d["message"], d["severity"])).encode())
    return h.hexdigest()
