"""The wire: what the server reads before any handler sees a message.

* :class:`BoundedInput` wraps stdin as pygls reads it. A ``Content-Length``
  larger than any message a client sends (an editor syncs files of a few
  megabytes) is not allocated: pygls would ask for the whole body at once, and
  ``Content-Length: 100000000000`` ended the server with a ``MemoryError``. The
  body is read and dropped in small pieces, the error is logged, and the next
  message is read as usual; a stream that ends meanwhile ends the server
  cleanly. A header line is read with a bound as well.
* :class:`GradguardProtocol` answers a request whose parameters do not fit the
  protocol's types (a position with ``line: -1``) with ``InvalidParams``
  instead of never answering it (pygls raised while reading the message, before
  it knew what to answer), and drops an invalid notification with a log line;
  a request after ``shutdown`` gets ``InvalidRequest``, as the specification
  says (pygls dropped it unanswered). A response of the client that does not
  fit its type fails the server's request that waits for it (pygls dropped
  it, and the request waited for ever).
"""

from __future__ import annotations

import logging
from typing import Any, BinaryIO, Dict

from lsprotocol import types as lsp
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage

log = logging.getLogger("gradguard.lsp")

# No editor sends a message near this (VS Code does not even sync files over
# 50 MB to extensions); documents over MAX_SOURCE_CHARS are kept but not analysed.
MAX_MESSAGE_BYTES = 128 * 1024 * 1024
MAX_HEADER_LINE = 64 * 1024
_CHUNK = 1024 * 1024

# What a dropped message becomes: an object with no "jsonrpc", which the protocol
# below ignores (pygls hands it over as a plain dict)
_DROPPED = b"{}"


class BoundedInput:
    """``readline``/``read`` of a binary stream, bounded (see the module's docstring)."""

    def __init__(self, raw: BinaryIO, limit: int = MAX_MESSAGE_BYTES, chunk: int = _CHUNK):
        self.raw = raw
        self.limit = limit
        self.chunk = chunk

    def readline(self) -> bytes:
        return self.raw.readline(MAX_HEADER_LINE)

    def read(self, n: int) -> bytes:
        if n <= self.limit:
            return self.raw.read(n)
        log.error(
            "a message of %d bytes is over the limit of %d bytes: its bytes are read and dropped, "
            "and the server goes on with the next message",
            n, self.limit,
        )
        left = n
        while left > 0:
            chunk = self.raw.read(min(left, self.chunk))
            if not chunk:
                log.error("the input ended inside the dropped message")
                return b""  # pygls stops reading: the server ends
            left -= len(chunk)
        return _DROPPED


class GradguardProtocol(LanguageServerProtocol):
    """pygls's protocol, answering what it could not read (see the module's docstring)."""

    def structure_message(self, data: Dict[str, Any]) -> Any:
        if "jsonrpc" not in data:
            return data  # an inner object of the message (json.loads's object hook)
        try:
            return self._converter.structure(data, self._message_type(data))
        except Exception as e:
            method = data.get("method")
            detail = _describe(e)
            if method is not None and "id" in data:
                log.error("invalid parameters in request %r (id %r): %s; answered with an error", method, data["id"], detail)
                self._send_response(
                    data["id"],
                    error=lsp.ResponseError(
                        code=lsp.ErrorCodes.InvalidParams,
                        message=f"gradguard: invalid parameters for {method}: {detail}",
                    ),
                )
            elif method is None and "id" in data:
                # a response the client sent that does not fit its type (``result: null`` for
                # workspace/applyEdit): the request waiting for it gets an error, instead of
                # waiting for ever (and the command that sent it never answering)
                log.error("invalid response to request %r: %s", data["id"], detail)
                return lsp.ResponseErrorMessage(id=data["id"], error=lsp.ResponseError(
                    code=lsp.ErrorCodes.InvalidParams, message=f"invalid response from the client: {detail}"))
            else:
                log.error("invalid message %r dropped: %s", method or "(a response)", detail)
            return {}

    def _message_type(self, data: Dict[str, Any]) -> Any:
        # the same choice pygls makes for each kind of message
        if "id" not in data:
            return self.get_message_type(data.get("method", "")) or JsonRPCNotification
        if "error" in data:
            return lsp.ResponseErrorMessage
        if "method" in data:
            return self.get_message_type(data["method"]) or JsonRPCRequestMessage
        return self._result_types.pop(data["id"], None) or JsonRPCResponseMessage

    def handle_message(self, message: Any) -> None:
        if isinstance(message, dict):  # dropped above, or a message that is not JSON-RPC
            if message:
                log.error("a message without \"jsonrpc\" was ignored")
            return
        method = getattr(message, "method", None)
        if self._shutdown and method not in (None, lsp.EXIT) and getattr(message, "id", None) is not None:
            # the specification: a request after shutdown is answered with InvalidRequest
            # (pygls drops it, and the client waits for an answer forever)
            self._send_response(
                message.id,
                error=lsp.ResponseError(code=lsp.ErrorCodes.InvalidRequest, message=f"gradguard: {method} after shutdown"),
            )
            return
        super().handle_message(message)


def _describe(e: Exception) -> str:
    """Where a message did not fit its type, e.g. ``invalid value @ $.params.position``."""
    try:
        from cattrs import transform_error

        return "; ".join(transform_error(e)) or str(e)
    except Exception:
        return f"{type(e).__name__}: {e}"
