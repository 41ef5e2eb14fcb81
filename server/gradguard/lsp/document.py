"""The server's copy of each open document, kept character for character equal
to the editor's.

LSP ends a line at ``\\r\\n``, ``\\r`` or ``\\n`` and nowhere else. pygls's
``TextDocument`` applies an incremental change by splitting the text with
``str.splitlines()``, which also breaks lines at a form feed, a vertical tab,
``\\x1c``-``\\x1e``, U+0085, U+2028 and U+2029: below any of them (a form feed is
an old page break in Python files) every edit landed a line too high, and Fix
All rewrote the wrong line. Here a change is applied by offsets found with LSP's
three line ends only (:func:`apply_change`), in the client's position encoding;
the workspace creates these documents for text files and notebook cells alike.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence, Tuple

from lsprotocol import types as lsp
from pygls.workspace import TextDocument, Workspace

from gradguard.lsp.convert import Codec

_EOL = re.compile(r"\r\n|\r|\n")
# a line with its terminator; the last line (if not empty) without one
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def encoding_name(value: Any) -> str:
    """An LSP position encoding kind (an enum member or its string) as its string."""
    return str(getattr(value, "value", value) or "utf-16")


def offset_at(text: str, pos: lsp.Position, codec: Codec) -> int:
    """The index in ``text`` of an LSP position, clamped as editors clamp: a
    column past the end of its line is the line's end (before its terminator),
    a line past the last one is the end of the text."""
    start = _line_start(text, max(pos.line, 0))
    if start is None:
        return len(text)
    # the line's end: the first \n or \r after its start (found by str.find, in C:
    # the regular expression took 13 ms to cross a line of millions of characters)
    nl = text.find("\n", start)
    if nl < 0:
        nl = len(text)
    cr = text.find("\r", start, nl)
    end = cr if cr >= 0 else nl
    return start + codec.from_client(text[start:end], pos.character)


def _line_start(text: str, line: int) -> Optional[int]:
    """Where line ``line`` starts (None past the last line). Split in C, at most
    ``line`` times: what follows the last split is the rest of the text, whatever
    the lengths of the line ends before it."""
    if line == 0:
        return 0
    parts = text.split("\n", line) if "\r" not in text else _EOL.split(text, line)
    if len(parts) <= line:
        return None
    return len(text) - len(parts[-1])


def apply_change(text: str, rng: lsp.Range, new_text: str, codec: Codec) -> str:
    """``text`` with the range (LSP lines, ``codec`` columns) replaced by ``new_text``."""
    a = offset_at(text, rng.start, codec)
    b = offset_at(text, rng.end, codec)
    if b < a:  # a reversed range: the text between, as a forgiving editor would
        a, b = b, a
    return text[:a] + new_text + text[b:]


def lsp_lines(text: str) -> Tuple[str, ...]:
    """The lines of ``text`` with their terminators, split where LSP splits."""
    return tuple(_LINE.findall(text))


class LspTextDocument(TextDocument):
    """pygls's document with LSP's line ends (see the module's docstring)."""

    def __init__(self, *args: Any, codec: Optional[Codec] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.codec = codec or Codec(encoding_name(self.position_codec.encoding))

    def _apply_incremental_change(self, change: lsp.TextDocumentContentChangePartial) -> None:
        self._source = apply_change(self.source, change.range, change.text, self.codec)

    @property
    def lines(self) -> Sequence[str]:  # used by pygls's own position helpers
        return lsp_lines(self.source)


class LspWorkspace(Workspace):
    """pygls's workspace, holding :class:`LspTextDocument`\\ s (text files and notebook cells)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._codec = Codec(encoding_name(self.position_encoding))

    def _create_text_document(
        self,
        doc_uri: str,
        source: Optional[str] = None,
        version: Optional[int] = None,
        language_id: Optional[str] = None,
    ) -> TextDocument:
        return LspTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self.position_codec,
            codec=self._codec,
        )

    @classmethod
    def replacing(cls, ws: Workspace, sync_kind: lsp.TextDocumentSyncKind) -> "LspWorkspace":
        """The same (still empty) workspace as ``ws``, made by pygls at ``initialize``,
        for a server that syncs documents by ``sync_kind`` (pygls keeps it private)."""
        return cls(ws.root_uri, sync_kind, list(ws.folders.values()), ws.position_encoding)
