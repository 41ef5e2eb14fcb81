"""The server's log, forwarded to the client's output (``window/logMessage``)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

# the logLevel setting and --log-level, as logging levels ("off" is above every level)
LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


class ClientLogHandler(logging.Handler):
    """Forwards log records to the client's output (``window/logMessage``)."""

    _TYPES = [
        (logging.ERROR, lsp.MessageType.Error),
        (logging.WARNING, lsp.MessageType.Warning),
        (logging.INFO, lsp.MessageType.Info),
        (0, lsp.MessageType.Log),
    ]

    def __init__(self, server: LanguageServer, loop: asyncio.AbstractEventLoop):
        super().__init__()
        self.server = server
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            mtype = next(t for lvl, t in self._TYPES if record.levelno >= lvl)
            params = lsp.LogMessageParams(type=mtype, message=self.format(record))
            if threading.get_ident() == self.loop_thread:
                self.server.window_log_message(params)
            elif not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self._send, params)
        except Exception:  # logging must never raise
            pass

    def _send(self, params: lsp.LogMessageParams) -> None:
        try:
            self.server.window_log_message(params)
        except Exception:
            pass
