"""The server's copy of a text document equals the editor's after random
incremental edits, in each position encoding: edits next to characters of two
UTF-16 units (emoji, CJK extension B), Chinese text, \\r\\n, lone \\r and \\n
line ends (an edit can make a \\r and a \\n meet, or part them), form feeds and
U+2028 (not line ends in LSP), ranges ending past their line. In process, on
the workspace the server uses (lsp/document.py)."""

from __future__ import annotations

import random
import re

import pytest
from lsprotocol import types as lsp

from gradguard.lsp.document import LspWorkspace

_EOL = re.compile(r"\r\n|\r|\n")
PIECES = ["a", "😀", "𠀀", "中文", "\r\n", "\r", "\n", " ", "x = 1", "\t", "é", "\u2028", "\x0c", "# 注释"]


def _position(text: str, offset: int, encoding: str) -> lsp.Position:
    """The LSP position of a code-point offset, as the editor computes it."""
    line, start = 0, 0
    for m in _EOL.finditer(text):
        if m.end() > offset:
            break
        line, start = line + 1, m.end()
    before = text[start:offset]
    if encoding == "utf-16":
        col = len(before.encode("utf-16-le")) // 2
    elif encoding == "utf-8":
        col = len(before.encode("utf-8"))
    else:
        col = len(before)
    return lsp.Position(line, col)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_random_incremental_edits_keep_the_editors_text(encoding):
    rnd = random.Random(f"sync-{encoding}")
    for trial in range(150):
        ws = LspWorkspace(None, lsp.TextDocumentSyncKind.Incremental, position_encoding=encoding)
        text = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 25)))
        uri = "file:///训练.py"
        ws.put_text_document(lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        for step in range(15):
            # an editor never puts a position between the \r and the \n of one line end
            offsets = [i for i in range(len(text) + 1) if not (0 < i < len(text) and text[i - 1:i + 1] == "\r\n")]
            a, b = sorted(rnd.choice(offsets) for _ in range(2))
            new = "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 3)))
            rng = lsp.Range(_position(text, a, encoding), _position(text, b, encoding))
            if rnd.random() < 0.1 and b == len(text):  # an end past the end of its line: the line's end
                rng.end = lsp.Position(rng.end.line, rng.end.character + 5)
            text = text[:a] + new + text[b:]
            ws.update_text_document(lsp.VersionedTextDocumentIdentifier(uri=uri, version=step + 2),
                                    lsp.TextDocumentContentChangePartial(range=rng, text=new))
            assert ws.get_text_document(uri).source == text, (trial, step)
