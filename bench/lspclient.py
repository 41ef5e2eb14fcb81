"""A minimal JSON-RPC-over-stdio LSP client for latency measurements.

No pygls on this side: a reader thread parses ``Content-Length`` frames and
hands notifications to a queue, so the measurement is the server's time plus
a pipe round trip.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Sequence


class LspClient:
    def __init__(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None):
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=cwd, bufsize=0,
        )
        self._id = 0
        self._lock = threading.Lock()
        self.notifications: "queue.Queue[tuple[float, dict]]" = queue.Queue()
        self._responses: Dict[int, "queue.Queue[dict]"] = {}
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- wire -------------------------------------------------------------
    def _send(self, msg: Dict[str, Any]) -> None:
        body = json.dumps(msg, ensure_ascii=False).encode("utf-8")
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        with self._lock:
            self.proc.stdin.write(data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]

    def _read_loop(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            if length is None:
                continue
            body = b""
            while len(body) < length:
                chunk = out.read(length - len(body))
                if not chunk:
                    return
                body += chunk
            t = time.perf_counter()
            msg = json.loads(body)
            if "id" in msg and "method" not in msg:
                q = self._responses.get(msg["id"])
                if q is not None:
                    q.put(msg)
            elif "id" in msg and "method" in msg:
                # a server→client request (registerCapability, configuration, ...): answer null
                result: Any = None
                if msg["method"] == "workspace/configuration":
                    result = [None for _ in msg.get("params", {}).get("items", [])]
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            else:
                self.notifications.put((t, msg))

    def request(self, method: str, params: Any, timeout: float = 30.0) -> Any:
        with self._lock:
            self._id += 1
            rid = self._id
        q: "queue.Queue[dict]" = queue.Queue()
        self._responses[rid] = q
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        msg = q.get(timeout=timeout)
        del self._responses[rid]
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg.get("result")

    def notify(self, method: str, params: Any) -> float:
        t = time.perf_counter()
        self._send({"jsonrpc": "2.0", "method": method, "params": params})
        return t

    # -- LSP --------------------------------------------------------------
    def initialize(self, root_uri: str, options: Optional[dict] = None) -> Any:
        caps = {
            "textDocument": {
                "synchronization": {"didSave": True},
                "publishDiagnostics": {"relatedInformation": True, "versionSupport": True},
            },
            "general": {"positionEncodings": ["utf-16"]},
        }
        res = self.request("initialize", {
            "processId": os.getpid(), "rootUri": root_uri, "capabilities": caps,
            "initializationOptions": options or {},
        })
        self.notify("initialized", {})
        return res

    def wait_diagnostics(self, uri: str, version: Optional[int], timeout: float = 30.0) -> tuple:
        """(arrival time, params) of the first publishDiagnostics for ``uri`` whose
        version is ``version`` (any version when None); earlier ones are dropped."""
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no publishDiagnostics for {uri} v{version}")
            t, msg = self.notifications.get(timeout=left)
            if msg.get("method") != "textDocument/publishDiagnostics":
                continue
            p = msg["params"]
            if p.get("uri") != uri:
                continue
            if version is None or p.get("version") == version:
                return t, p

    def drain(self) -> List[dict]:
        out = []
        while True:
            try:
                out.append(self.notifications.get_nowait()[1])
            except queue.Empty:
                return out

    def shutdown(self) -> None:
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
