"""Helpers for the LSP tests: the real server in a subprocess over stdio,
driven by a client announcing VS Code's capabilities.

``start_session(...)`` starts one server so a test can choose its client's
capabilities, locale and settings. ``wait_for_diagnostics`` waits (with a
timeout) for a ``publishDiagnostics`` of a URI and version, and fails the
test if it never arrives. (A module of its own, not conftest.py: ``conftest``
is not a unique module name in this repository.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from pygls.protocol import default_converter

from gradguard.model.text import split_lines, utf16_to_char
# Linear regression whose label Y is computed from an input that requires grad (seed note 003).
from seed_programs import REGRESSION_SEED  # noqa: F401  (re-exported to the LSP tests)

# GRADGUARD_LSP_SERVER overrides the command (e.g. to test an installed `gradguard serve`);
# by default the server is started as the VS Code extension starts it (docs/server.md)
SERVER_CMD = os.environ.get("GRADGUARD_LSP_SERVER", f"{sys.executable} -I -m gradguard serve").split()
TIMEOUT = 20.0

# ---- the two seed programs -------------------------------------------------------
# A GRU's hidden state carried from batch to batch with no detach (seed note 000).
GRU_SEED = """\
import torch
from torch import nn

# 时序模型: 批与批之间在时间上连续, 所以 hidden 跨批保留
gru = nn.GRU(input_size=4, hidden_size=6)
head = nn.Linear(6, 1)
optimizer = torch.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.05)
stream = torch.randn(20, 3, 4)
targets = torch.randn(20, 3, 1)

hidden = torch.zeros(1, 3, 6)  # epoch 开头初始化
for step in range(4):
    x = stream[step * 5:(step + 1) * 5]
    y = targets[step * 5:(step + 1) * 5]
    out, hidden = gru(x, hidden)
    loss = ((head(out) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
GRU_LINE = 14  # 0-based line of `out, hidden = gru(x, hidden)`



def vscode_capabilities(*, pull: bool = False, notebooks: bool = False, encodings: Optional[List[str]] = None) -> lsp.ClientCapabilities:
    caps = client_capabilities("visual-studio-code")
    if pull:
        caps.text_document.diagnostic = lsp.DiagnosticClientCapabilities(dynamic_registration=False, related_document_support=False)
        caps.workspace.diagnostics = lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    if notebooks:
        caps.notebook_document = lsp.NotebookDocumentClientCapabilities(
            synchronization=lsp.NotebookDocumentSyncClientCapabilities(dynamic_registration=False, execution_summary_support=False)
        )
    if encodings is not None:
        caps.general = caps.general or lsp.GeneralClientCapabilities()
        caps.general.position_encodings = encodings
    return caps


def _record_publish(client: LanguageClient, params: lsp.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)  # type: ignore[attr-defined]


def _apply_edit(client: LanguageClient, params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)  # type: ignore[attr-defined]
    return lsp.ApplyWorkspaceEditResult(applied=True)


def _register_capability(client: LanguageClient, params: lsp.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)  # type: ignore[attr-defined]


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record_publish
    features[lsp.WORKSPACE_APPLY_EDIT] = _apply_edit
    features[lsp.CLIENT_REGISTER_CAPABILITY] = _register_capability
    register_lsp_features(client, features)
    client.published = []  # type: ignore[attr-defined]
    client.applied_edits = []  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    return client


@contextlib.asynccontextmanager
async def start_session(
    *,
    capabilities: Optional[lsp.ClientCapabilities] = None,
    locale: Optional[str] = None,
    init_options: Any = None,
    configuration: Optional[Dict[str, Any]] = None,
    root: Optional[Path] = None,
    folders: Sequence[Path] = (),
    server_args: Sequence[str] = (),
    server_cmd: Optional[List[str]] = None,
    client_info: Optional[lsp.ClientInfo] = None,
):
    client = make_client()
    if configuration is not None:
        client.set_configuration(configuration, section="gradguard")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONIOENCODING="utf-8")
    await client.start_io(*(server_cmd or SERVER_CMD), *server_args, env=env)
    try:
        result = await asyncio.wait_for(
            client.initialize_session(
                lsp.InitializeParams(
                    capabilities=capabilities or vscode_capabilities(),
                    locale=locale,
                    client_info=client_info,
                    initialization_options=init_options,
                    root_uri=root.as_uri() if root else None,
                    workspace_folders=[lsp.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in (folders or ([root] if root else []))] or None,
                )
            ),
            TIMEOUT,
        )
        client.init_result = result  # type: ignore[attr-defined]
        yield client
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 10)
        except Exception:
            pass
        await client.stop()


@contextlib.asynccontextmanager
async def use(client: LanguageClient):
    """``async with use(shared) as client`` — reads like a session of its own."""
    yield client


async def wait_for_diagnostics(
    client: LanguageClient,
    uri: str,
    version: Optional[int] = None,
    *,
    since: int = 0,
    timeout: float = TIMEOUT,
    check: Optional[Callable[[lsp.PublishDiagnosticsParams], bool]] = None,
) -> lsp.PublishDiagnosticsParams:
    """The first publishDiagnostics for ``uri`` (and ``version``) received after
    index ``since`` of the client's log; fails the test if none arrives in time."""
    deadline = time.monotonic() + timeout
    seen = since
    while True:
        published = client.published  # type: ignore[attr-defined]
        for p in published[seen:]:
            if p.uri == uri and (version is None or p.version == version) and (check is None or check(p)):
                return p
        seen = len(published)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            got = [(p.uri, p.version, len(p.diagnostics)) for p in published if p.uri == uri]
            pytest.fail(f"no publishDiagnostics for {uri} version {version} within {timeout}s; got {got}")
        try:
            await asyncio.wait_for(client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), remaining)
        except asyncio.TimeoutError:
            pass


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text))
    )


def change_full(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def change_range(client: LanguageClient, uri: str, version: int, rng: lsp.Range, text: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangePartial(range=rng, text=text)],
        )
    )


def apply_lsp_edits(text: str, edits: Sequence[lsp.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 positions) the way an editor does."""
    lines = split_lines(text)
    # absolute offsets (characters) of each line start: LSP ends lines at \r\n, \r
    # and \n only (a form feed or U+2028 is an ordinary character, as in an editor)
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def offset(p: lsp.Position) -> int:
        if p.line >= len(lines):
            return len(text)
        return starts[p.line] + utf16_to_char(lines[p.line], p.character)

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for a, b, new in spans:
        text = text[:a] + new + text[b:]
    return text


def apply_workspace_edit(text: str, uri: str, edit: lsp.WorkspaceEdit, expect_version: Optional[int] = None) -> str:
    assert edit.document_changes, "expected versioned documentChanges"
    edits: List[lsp.TextEdit] = []
    for dc in edit.document_changes:
        assert isinstance(dc, lsp.TextDocumentEdit), dc
        assert dc.text_document.uri == uri, "edits must target only the requested document"
        if expect_version is not None:
            assert dc.text_document.version == expect_version
        edits.extend(dc.edits)  # type: ignore[arg-type]
    return apply_lsp_edits(text, edits)


def file_uri(tmp_path: Path, name: str) -> str:
    return (tmp_path / name).as_uri()


FAST = {"debounce": 20}  # settings that keep tests quick


async def code_actions(
    client: LanguageClient, uri: str, rng: lsp.Range, diagnostics: Sequence[lsp.Diagnostic] = (), only: Optional[List[str]] = None
) -> List[lsp.CodeAction]:
    res = await asyncio.wait_for(
        client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=rng,
                context=lsp.CodeActionContext(diagnostics=list(diagnostics), only=only),
            )
        ),
        TIMEOUT,
    )
    return [a for a in (res or []) if isinstance(a, lsp.CodeAction)]


async def hover(client: LanguageClient, uri: str, line: int, character: int) -> Optional[lsp.Hover]:
    return await asyncio.wait_for(
        client.text_document_hover_async(
            lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line, character))
        ),
        TIMEOUT,
    )


def codes(params: lsp.PublishDiagnosticsParams) -> List[str]:
    return sorted(str(d.code) for d in params.diagnostics)


def utf16_col(line: str, chars: int) -> int:
    return len(line[:chars].encode("utf-16-le")) // 2


# ---- raw JSON-RPC (what no client library would send) ------------------------------
class RawClient:
    """The server as a subprocess, messages read on a thread."""

    def __init__(self, tmp_path, cmd: Optional[List[str]] = None):
        self.proc = subprocess.Popen(
            cmd or SERVER_CMD, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        )
        self.messages: List[Dict[str, Any]] = []
        self.cond = threading.Condition()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        f = self.proc.stdout
        while True:
            length = None
            while True:
                line = f.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(f.read(length))
            with self.cond:
                self.messages.append(msg)
                self.cond.notify_all()

    def _read_err(self) -> None:
        self.stderr = self.proc.stderr.read()

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, payload: Dict[str, Any]) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def wait_for(self, pred, timeout: float = 30.0) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.messages:
                    if pred(m):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"no such message within {timeout}s; got {[m.get('method', m.get('id')) for m in self.messages]}")
                self.cond.wait(left)

    def response(self, msg_id: int) -> Dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m)

    def initialize(self, tmp_path) -> None:
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {},
                              "initializationOptions": {"debounce": 0}}})
        assert self.response(1)["result"]["serverInfo"]["name"] == "gradguard"
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def open(self, uri: str, text: str) -> None:
        self.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                   "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})

    def diagnostics(self, uri: str) -> Dict[str, Any]:
        return self.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)

    def end(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
