"""The server's entry point (stdio is covered everywhere else; here --tcp and
argument errors), and the CLI's promise never to load the server's libraries."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from lsp_harness import GRU_SEED
from gradguard.lsp.server import main


def test_bad_arguments_and_version(capsys):
    assert main(["--tcp", "nonsense"]) == 2
    assert "HOST:PORT" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and "gradguard" in capsys.readouterr().out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rpc(sock: socket.socket, payload: dict) -> None:
    body = json.dumps(payload).encode("utf-8")
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _read_message(f) -> dict:
    length = None
    while True:
        line = f.readline()
        if not line:
            raise EOFError
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(f.read(length))


def test_tcp_transport(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradguard.lsp.server", "--tcp", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=20)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.1)
        with sock, sock.makefile("rb") as f:
            _rpc(sock, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None}})
            msg = _read_message(f)
            while msg.get("id") != 1:
                msg = _read_message(f)
            assert msg["result"]["serverInfo"]["name"] == "gradguard"
            assert msg["result"]["capabilities"]["hoverProvider"]
            _rpc(sock, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
            uri = (tmp_path / "t.py").as_uri()
            _rpc(sock, {"jsonrpc": "2.0", "method": "textDocument/didOpen",
                        "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": GRU_SEED}}})
            while True:
                msg = _read_message(f)
                if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                    break
            assert msg["params"]["version"] == 1
            assert [d["code"] for d in msg["params"]["diagnostics"]] == ["GG101"]
            _rpc(sock, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
            _rpc(sock, {"jsonrpc": "2.0", "method": "exit"})
    finally:
        proc.kill()
        proc.wait(10)


def test_cli_check_path_does_not_import_pygls(tmp_path):
    src = tmp_path / "t.py"
    src.write_text(GRU_SEED, encoding="utf-8")
    probe = (
        "import sys\n"
        "from gradguard.cli import main\n"
        f"rc = main(['check', {str(src)!r}])\n"
        "print('PYGLS' if any(m.startswith(('pygls', 'lsprotocol')) for m in sys.modules) else 'CLEAN', rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip().splitlines()[-1] == "CLEAN 1", r.stdout + r.stderr


# Modules a cloned repository could hold to run code when an editor starts the
# server in it: the standard library's (imported as the server starts, or when a
# pyproject.toml is read) and a dependency's (jedi, for names imported from the
# user's files).
_SHADOWS = ("tokenize", "linecache", "typing", "enum", "tomllib", "jedi", "pygls", "lsprotocol")


def _hostile_workspace(root) -> None:
    for name in _SHADOWS:
        (root / f"{name}.py").write_text(
            f"open({str(root / ('RAN_' + name))!r}, 'w').write('the workspace ran code')\n", encoding="utf-8"
        )
    (root / "pyproject.toml").write_text("[tool.gradguard]\nignore = []\n", encoding="utf-8")
    (root / "helpers.py").write_text("import torch\n\ndef make():\n    return torch.zeros(3, requires_grad=True) * 2\n",
                                     encoding="utf-8")


def _launches():
    import os

    scripts = os.path.dirname(sys.executable)  # the venv's console scripts live beside its python
    return {
        "console script": [os.path.join(scripts, "gradguard"), "serve"],
        "python -I -m gradguard serve": [sys.executable, "-I", "-m", "gradguard", "serve"],
        "python -m gradguard serve": [sys.executable, "-m", "gradguard", "serve"],
        "python -m gradguard.lsp.server": [sys.executable, "-m", "gradguard.lsp.server"],
    }


@pytest.mark.parametrize("launch", list(_launches()))
def test_starting_the_server_in_a_hostile_workspace_runs_none_of_its_code(tmp_path, launch):
    """Editors start the server with the workspace as the working directory;
    `python -m` puts that directory first on sys.path. No launch, documented or
    not, may import the workspace's files in place of the standard library's or
    a dependency's."""
    from lsp_harness import RawClient

    _hostile_workspace(tmp_path)
    c = RawClient(tmp_path, cmd=_launches()[launch])
    try:
        c.initialize(tmp_path)
        uri = (tmp_path / "train.py").as_uri()
        # a name from the user's own file, and one no file defines (asked of jedi)
        text = GRU_SEED.replace("from torch import nn\n", "from torch import nn\nfrom helpers import make\n"
                                "from nowhere_in_particular import build\nmade, built = make(), build()\n")
        c.open(uri, text)
        diags = c.diagnostics(uri)["params"]["diagnostics"]
        assert [d["code"] for d in diags] == ["GG101"]
        c.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        c.response(2)
        c.send({"jsonrpc": "2.0", "method": "exit"})
        assert c.end() == 0, c.stderr.decode(errors="replace")
    finally:
        c.close()
    ran = sorted(p.name for p in tmp_path.glob("RAN_*"))
    assert ran == [], f"{launch} ran the workspace's {ran}"


def test_importing_gradguard_as_a_library_leaves_sys_path_alone(tmp_path):
    """The working directory is dropped only when `python -m gradguard...` runs:
    a program (or `python -m` of another package) that imports gradguard keeps
    its sys.path."""
    probe = "import sys; before = list(sys.path); import gradguard; print(sys.path == before)"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.stdout.strip() == "True", r.stderr
    pkg = tmp_path / "otherpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import gradguard\n", encoding="utf-8")
    (pkg / "__main__.py").write_text("import os, sys\nprint(os.getcwd() in sys.path)\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "otherpkg"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.stdout.strip() == "True", r.stderr
