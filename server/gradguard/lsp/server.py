"""gradguard's language server (pygls 2): thin glue over the analysis core.

* documents (and notebooks, as one program) are kept as incremental
  :class:`gradguard.engine.Document`\\ s and re-analysed on a worker thread,
  debounced per document; work made stale by a newer edit is dropped;
* findings become diagnostics (push; pull when the client supports it); a
  diagnostic's ``data`` says which finding it is, and code actions make its
  fixes from the server's own result;
* hover explains findings and a few autograd idioms, in English or Chinese.

Where things live: the state and the life of a document in
:mod:`~gradguard.lsp.language_server`; one module per LSP feature in
:mod:`~gradguard.lsp.features` (registered in one list there); settings and
pyproject files in :mod:`~gradguard.lsp.configuration`; diagnostics out in
:mod:`~gradguard.lsp.publishing`; the worker threads in :mod:`~gradguard.lsp.worker`.
This module makes the server and runs it.

No detection logic lives here. Run with ``gradguard serve`` or
``python -I -m gradguard serve`` (never a plain ``python -m`` in a workspace:
see docs/server.md and ``gradguard/__init__.py``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Optional, Sequence, Tuple

from gradguard import __version__
from gradguard.lsp import features
from gradguard.lsp.language_server import GradguardServer
from gradguard.lsp.logs import LEVELS
from gradguard.lsp.wire import BoundedInput


def create_server() -> GradguardServer:
    ls = GradguardServer()
    features.register(ls)
    return ls


# ---- entry point -----------------------------------------------------------------
def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gradguard serve", description="Run the gradguard language server (stdio by default).")
    p.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead (for debugging)")
    p.add_argument("--log-file", metavar="FILE", help="also write the server's log to FILE")
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="level for --log-file and stderr (the client's output follows the logLevel setting)",
    )
    p.add_argument("--version", action="version", version=f"gradguard {__version__}")
    return p.parse_args(list(argv) if argv is not None else None)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``gradguard serve [--tcp HOST:PORT] [--log-file F] [--log-level L]``."""
    args = _parse_args(argv)
    tcp: Optional[Tuple[str, int]] = None
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not port.isdigit() or not 0 < int(port) < 65536:
            print(f"gradguard serve: --tcp wants HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        tcp = (host or "127.0.0.1", int(port))
    level = LEVELS[args.log_level]
    root = logging.getLogger("gradguard")
    root.setLevel(logging.DEBUG)  # handlers filter
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.log_file:
        try:
            fh = logging.FileHandler(args.log_file, encoding="utf-8")
        except OSError as e:
            print(f"gradguard serve: cannot open log file {args.log_file}: {e}", file=sys.stderr)
            return 2
        fh.setLevel(level)
        fh.setFormatter(fmt)
        root.addHandler(fh)
        logging.getLogger("pygls").addHandler(fh)
        logging.getLogger("pygls").setLevel(max(level, logging.INFO))
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(max(level, logging.WARNING))  # stderr stays quiet: clients show it as noise
    stderr.setFormatter(fmt)
    root.addHandler(stderr)
    root.info("gradguard %s language server starting (pid %d, %s)", __version__, os.getpid(), f"tcp {args.tcp}" if tcp else "stdio")
    # Each analysis parses the edited region and allocates many short-lived values
    # that reference counting frees at once; the default collector thresholds
    # made a full collection (every open document's trees) land inside a
    # keystroke's analysis now and then. Fewer, larger young collections; the
    # engine's own structures hold no reference cycles.
    import gc

    gc.set_threshold(100_000, 50, 20)
    server = create_server()
    if tcp:
        server.start_tcp(*tcp)
        return server.exit_code
    # stdout carries the protocol: anything else printing there would corrupt it
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr
    server.start_io(BoundedInput(sys.stdin.buffer), protocol_out)  # type: ignore[arg-type]
    return server.exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
