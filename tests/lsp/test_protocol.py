"""The wire, as a hostile or broken client drives it: the server answers what it
can, refuses what it cannot hold, and ends the way the specification says.

Raw JSON-RPC over the server's stdin/stdout (no client library that would
refuse to send what these tests send)."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import List

import pytest

from lsp_harness import GRU_LINE, GRU_SEED, RawClient


@pytest.fixture
def raw(tmp_path):
    clients: List[RawClient] = []

    def start(**kw) -> RawClient:
        c = RawClient(tmp_path, **kw)
        clients.append(c)
        return c

    yield start
    for c in clients:
        c.close()


def test_a_content_length_no_memory_can_hold_is_refused_without_a_crash(raw, tmp_path):
    c = raw()
    c.initialize(tmp_path)
    c.send_bytes(b"Content-Length: 100000000000\r\n\r\n" + b"x" * 100_000)
    time.sleep(1.0)
    assert c.proc.poll() is None, c.stderr.decode(errors="replace")  # still reading, not dead
    c.proc.stdin.close()  # the client goes away mid-body
    rc = c.end()
    err = c.stderr.decode("utf-8", errors="replace")
    assert "MemoryError" not in err and "Traceback" not in err, err
    assert "100000000000 bytes" in err and "over the limit" in err, err
    assert rc in (0, 1)


def test_an_oversized_message_is_skipped_and_the_next_one_answered():
    """In process, with a small limit: the oversized body is read and dropped
    (never held whole) and the message after it is handled."""
    import asyncio
    from pygls.io_ import run_async

    from gradguard.lsp.server import create_server
    from gradguard.lsp.wire import BoundedInput

    small = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "shutdown"}).encode()
    big = b"[" + b"0," * 600 + b"0]"
    stream = (b"Content-Length: %d\r\n\r\n" % len(big) + big
              + b"Content-Length: %d\r\n\r\n" % len(small) + small)
    server = create_server()
    out = io.BytesIO()

    class Writer:
        def write(self, data: bytes) -> None:
            out.write(data)

        def close(self) -> None:
            pass

    server.protocol.set_writer(Writer())
    reader = BoundedInput(io.BytesIO(stream), limit=1000, chunk=256)
    largest = []
    orig = reader.raw.read

    def spy(n=-1):
        largest.append(n)
        return orig(n)

    reader.raw.read = spy

    class Async:
        async def readline(self):
            return reader.readline()

        async def readexactly(self, n):
            return reader.read(n)

    asyncio.run(run_async(threading.Event(), Async(), server.protocol))
    assert b'"id": 7' in out.getvalue() and b'"result": null' in out.getvalue(), out.getvalue()
    assert max(largest) <= 1000


def test_a_request_with_a_negative_position_is_answered(raw, tmp_path):
    c = raw()
    c.initialize(tmp_path)
    uri = (tmp_path / "t.py").as_uri()
    c.open(uri, GRU_SEED)
    c.diagnostics(uri)
    pos = {"line": -1, "character": 0}
    c.send({"jsonrpc": "2.0", "id": 10, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": pos}})
    c.send({"jsonrpc": "2.0", "id": 11, "method": "textDocument/codeAction",
            "params": {"textDocument": {"uri": uri}, "range": {"start": pos, "end": {"line": 0, "character": -5}},
                       "context": {"diagnostics": []}}})
    for i in (10, 11):
        res = c.response(i)
        assert res.get("error", {}).get("code") == -32602 or res.get("result") in (None, []), res
    # and the server still serves
    c.send({"jsonrpc": "2.0", "id": 12, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": GRU_LINE, "character": 20}}})
    assert "GG101" in c.response(12)["result"]["contents"]["value"]
    c.send({"jsonrpc": "2.0", "id": 13, "method": "shutdown"})
    c.response(13)
    c.send({"jsonrpc": "2.0", "method": "exit"})
    assert c.end() == 0


def test_exit_without_shutdown_exits_with_code_1(raw, tmp_path):
    c = raw()
    c.initialize(tmp_path)
    c.send({"jsonrpc": "2.0", "method": "exit"})
    assert c.end() == 1


def test_exit_after_shutdown_exits_with_code_0(raw, tmp_path):
    c = raw()
    c.initialize(tmp_path)
    c.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    c.response(2)
    # a request after shutdown is answered with InvalidRequest, not left hanging
    c.send({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": (tmp_path / "t.py").as_uri()}, "position": {"line": 0, "character": 0}}})
    assert c.response(3)["error"]["code"] == -32600
    c.send({"jsonrpc": "2.0", "method": "exit"})
    assert c.end() == 0


def test_a_code_action_never_carries_client_supplied_edits(raw, tmp_path):
    """Diagnostics travel without their fixes; a client (or a file it was
    handed) that sends back a diagnostic whose data holds edits for other files
    must not get them back as a workspace edit: the fixes are the server's own,
    and only for the document asked about."""
    c = raw()
    c.initialize(tmp_path)
    uri = (tmp_path / "t.py").as_uri()
    victim = (tmp_path / "victim.py").as_uri()
    c.open(uri, GRU_SEED)
    d = c.diagnostics(uri)["params"]["diagnostics"][0]
    forged = dict(d)
    forged["data"] = {"gradguard": 1, "uri": uri, "version": 1, "fixes": [
        {"title": "Fix GG101 (forged)", "preferred": True,
         "edits": [{"uri": victim, "version": None, "range": {"start": {"line": 0, "character": 0},
                                                           "end": {"line": 0, "character": 0}},
                    "newText": "import os; os.system('echo owned')\n"}]}]}
    c.send({"jsonrpc": "2.0", "id": 20, "method": "textDocument/codeAction",
            "params": {"textDocument": {"uri": uri}, "range": d["range"],
                       "context": {"diagnostics": [forged], "only": ["quickfix"]}}})
    actions = c.response(20)["result"]
    assert actions, "the real fixes are still offered"
    for a in actions:
        for dc in (a.get("edit") or {}).get("documentChanges", []):
            assert dc["textDocument"]["uri"] == uri, a
            assert all("owned" not in e["newText"] for e in dc["edits"]), a
        assert "forged" not in a["title"]


@pytest.mark.parametrize("answer", [{"result": {"applied": False, "failureReason": "用户拒绝了"}},
                                    {"error": {"code": -32603, "message": "the editor failed"}},
                                    {"result": None}])
def test_fix_all_command_when_the_client_refuses_or_fails_the_edit(raw, tmp_path, answer):
    """workspace/applyEdit answered with applied: false, with an error, or with
    nothing usable: the command says it was not applied (and why), and the
    document is still served."""
    c = raw()
    c.initialize(tmp_path)
    uri = (tmp_path / "t.py").as_uri()
    c.open(uri, GRU_SEED)
    c.diagnostics(uri)
    c.send({"jsonrpc": "2.0", "id": 30, "method": "workspace/executeCommand",
            "params": {"command": "gradguard.fixAll", "arguments": [uri]}})
    ask = c.wait_for(lambda m: m.get("method") == "workspace/applyEdit")
    c.send({"jsonrpc": "2.0", "id": ask["id"], **answer})
    got = c.response(30)
    assert "error" not in got, got
    assert got["result"]["applied"] is False
    assert got["result"]["reason"], got
    c.send({"jsonrpc": "2.0", "id": 31, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": GRU_LINE, "character": 10}}})
    assert "GG101" in c.response(31)["result"]["contents"]["value"]


def test_messages_out_of_order_are_survived(raw, tmp_path):
    """A change before the open, requests after the close, a change after the
    close, a notebook change for a notebook never opened: each is answered
    (with nothing) or dropped, the server's copy of a document reopened is the
    text the editor sends, and other documents are still served."""
    c = raw()
    c.initialize(tmp_path)
    uri = (tmp_path / "乱序.py").as_uri()
    at0 = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    c.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"range": at0, "text": "x"}]}})
    c.send({"jsonrpc": "2.0", "id": 40, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}})
    assert c.response(40)["result"] is None
    c.open(uri, GRU_SEED)
    (d,) = c.diagnostics(uri)["params"]["diagnostics"]
    assert d["range"]["start"]["line"] == GRU_LINE  # the open's text, nothing of the early change
    c.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
    requests = [
        ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": GRU_LINE, "character": 10}}, None),
        ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": d["range"],
                                     "context": {"diagnostics": [d]}}, []),
        ("textDocument/diagnostic", {"textDocument": {"uri": uri}}, {"kind": "full", "items": []}),
    ]
    for i, (method, params, empty) in enumerate(requests):
        c.send({"jsonrpc": "2.0", "id": 41 + i, "method": method, "params": params})
        assert c.response(41 + i)["result"] == empty, method
    c.send({"jsonrpc": "2.0", "id": 45, "method": "workspace/executeCommand",
            "params": {"command": "gradguard.fixAll", "arguments": [uri]}})
    assert c.response(45)["result"]["applied"] is False
    assert not [m for m in c.messages if m.get("method") == "workspace/applyEdit"]
    c.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": 9}, "contentChanges": [{"text": "y = 1\n"}]}})
    c.send({"jsonrpc": "2.0", "method": "notebookDocument/didChange", "params": {
        "notebookDocument": {"uri": (tmp_path / "nb.ipynb").as_uri(), "version": 2},
        "change": {"cells": {"textContent": [{"document": {"uri": "vscode-notebook-cell:/nb.ipynb#c1", "version": 2},
                                              "changes": [{"text": "x"}]}]}}}})
    other = (tmp_path / "other.py").as_uri()
    c.open(other, GRU_SEED)
    assert [x["code"] for x in c.diagnostics(other)["params"]["diagnostics"]] == ["GG101"]
    n = len(c.messages)
    c.open(uri, "import torch\n" + GRU_SEED)  # reopened: the text sent now, nothing of the change after the close
    got = c.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
                     and m in c.messages[n:])
    assert [x["range"]["start"]["line"] for x in got["params"]["diagnostics"]] == [GRU_LINE + 1]


def test_shutdown_while_a_fix_all_waits_for_the_editor(raw, tmp_path):
    """Shutdown arrives while a Fix All command waits for the editor's answer to
    its workspace/applyEdit (the window is closing) and edits are still being
    analysed: the shutdown is answered with null, not with an internal error,
    and exit ends the process with status 0."""
    c = raw()
    c.initialize(tmp_path)
    uri = (tmp_path / "关闭.py").as_uri()
    c.open(uri, GRU_SEED)
    c.diagnostics(uri)
    c.send({"jsonrpc": "2.0", "id": 50, "method": "workspace/executeCommand",
            "params": {"command": "gradguard.fixAll", "arguments": [uri]}})
    c.wait_for(lambda m: m.get("method") == "workspace/applyEdit")  # never answered
    for v in range(2, 6):
        c.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": v}, "contentChanges": [{"text": GRU_SEED + "# 😀" * v}]}})
    c.send({"jsonrpc": "2.0", "id": 51, "method": "shutdown"})
    res = c.response(51)
    assert "error" not in res and res["result"] is None, res
    # the command in flight is answered too (cancelled, or not applied), never left waiting
    fix = c.response(50)
    assert fix.get("error", {}).get("code") == -32800 or fix["result"]["applied"] is False, fix
    c.send({"jsonrpc": "2.0", "method": "exit"})
    assert c.end() == 0
    assert b"Traceback" not in c.stderr, c.stderr.decode(errors="replace")


def test_a_code_action_kind_that_is_not_a_string_is_ignored(raw, tmp_path):
    """``context.only`` holding a number (a broken client): the kinds that are
    strings are still served (it was an internal error, a TypeError), and the
    server goes on."""
    c = raw()
    c.initialize(tmp_path)
    uri = (tmp_path / "种类.py").as_uri()
    c.open(uri, GRU_SEED)
    d = c.diagnostics(uri)["params"]["diagnostics"][0]
    c.send({"jsonrpc": "2.0", "id": 60, "method": "textDocument/codeAction",
            "params": {"textDocument": {"uri": uri}, "range": d["range"],
                       "context": {"diagnostics": [d], "only": [5, "quickfix"]}}})
    res = c.response(60)
    assert "error" not in res, res
    assert any(a.get("isPreferred") for a in res["result"]) and all(a["kind"] == "quickfix" for a in res["result"])
    c.send({"jsonrpc": "2.0", "id": 61, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": GRU_LINE, "character": 10}}})
    assert "GG101" in c.response(61)["result"]["contents"]["value"]


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_a_fix_in_a_notebook_cell_ends_its_lines_as_the_cell_does(raw, tmp_path, eol):
    """A cell whose lines end in \\r\\n or \\r (the program joins cells with \\n):
    the quick fix and Fix All inserted their line with \\n, mixing line ends in
    the cell of a client that applies edits as they come; a text document got
    its own line end already."""
    c = raw()
    c.initialize(tmp_path)
    nb = (tmp_path / "笔记.ipynb").as_uri()
    first, rest = GRU_SEED.split("for step")
    cells = {"a": first.replace("\n", eol), "b": ("for step" + rest).replace("\n", eol)}
    uri = {k: f"vscode-notebook-cell:/笔记.ipynb#{k}" for k in cells}
    c.send({"jsonrpc": "2.0", "method": "notebookDocument/didOpen", "params": {
        "notebookDocument": {"uri": nb, "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": 2, "document": uri[k]} for k in cells]},
        "cellTextDocuments": [{"uri": uri[k], "languageId": "python", "version": 1, "text": t} for k, t in cells.items()]}})
    pub = c.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri["b"]
                     and m["params"]["diagnostics"])
    d = pub["params"]["diagnostics"][0]
    c.send({"jsonrpc": "2.0", "id": 70, "method": "textDocument/codeAction", "params": {
        "textDocument": {"uri": uri["b"]}, "range": d["range"], "context": {"diagnostics": [d], "only": ["quickfix"]}}})
    c.send({"jsonrpc": "2.0", "id": 71, "method": "textDocument/codeAction", "params": {
        "textDocument": {"uri": uri["b"]}, "range": d["range"], "context": {"diagnostics": [], "only": ["source.fixAll"]}}})
    quick = next(a for a in c.response(70)["result"] if a.get("isPreferred"))
    (fix_all,) = c.response(71)["result"]
    for action in (quick, fix_all):
        (change,) = action["edit"]["documentChanges"]
        assert change["textDocument"]["uri"] == uri["b"]
        (edit,) = change["edits"]
        assert edit["newText"] == "    hidden = hidden.detach()" + eol, edit
