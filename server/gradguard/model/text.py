"""Line/column arithmetic.

Three column units meet in this product:

* Python's ``ast`` reports ``col_offset`` in UTF-8 *bytes*;
* the core (and the CLI, 1-based) uses *characters* (code points);
* LSP uses UTF-16 *code units* (unless the client negotiated otherwise).

Lines are split the way both Python and LSP split them: on ``\\r\\n``,
``\\r`` and ``\\n`` only (``str.splitlines`` would also split on form feeds
and U+2028, which neither does).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import List

_EOL = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> List[str]:
    """Lines without their terminators. ``"a\\n"`` → ``["a", ""]``."""
    return _EOL.split(text)


def utf8_to_char(line: str, byte_col: int) -> int:
    if byte_col <= 0:
        return 0
    if line.isascii():
        return min(byte_col, len(line))
    b = line.encode("utf-8")
    return len(b[:byte_col].decode("utf-8", errors="ignore"))


def char_to_utf16(line: str, col: int) -> int:
    if line.isascii():
        return min(col, len(line)) if col >= 0 else 0
    col = max(0, min(col, len(line)))
    return len(line[:col].encode("utf-16-le")) // 2


def utf16_to_char(line: str, units: int) -> int:
    """Clamp to the line; a position inside a surrogate pair rounds down.

    Only the characters wider than one unit are visited, found by one scan in
    C: a loop over every character took 0.2 s on a line of a few million (a
    minified data line in a .py file), at each keystroke on it."""
    if units <= 0:
        return 0
    if line.isascii():
        return min(units, len(line))
    extra = 0  # the characters outside the BMP met so far: each one unit more than a character
    for m in _ASTRAL.finditer(line):  # a lone surrogate (JSON text can hold one) is one unit, like any other
        at = m.start() + extra  # the unit where this character starts
        if units <= at:
            break
        if units == at + 1:
            return m.start()  # inside the pair: rounds down to before it
        extra += 1
    return min(units - extra, len(line))


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")  # the characters of two UTF-16 units


class LineIndex:
    """Lines of one document, for converting positions."""

    __slots__ = ("lines",)

    def __init__(self, text: str):
        self.lines = split_lines(text)

    @classmethod
    def of_lines(cls, lines: List[str]) -> "LineIndex":
        """An index over lines already split (no second split of the text)."""
        index = cls.__new__(cls)
        index.lines = lines
        return index

    def line(self, n: int) -> str:
        if 0 <= n < len(self.lines):
            return self.lines[n]
        return ""

    def char_col(self, lineno_1based: int, byte_col: int) -> int:
        """ast (1-based line, UTF-8 byte column) → character column."""
        return utf8_to_char(self.line(lineno_1based - 1), byte_col)

    def clamp(self, line: int, col: int):
        """Clamp a (line, char) position into the document."""
        if line < 0:
            return 0, 0
        if line >= len(self.lines):
            last = len(self.lines) - 1
            return last, len(self.lines[last])
        return line, max(0, min(col, len(self.lines[line])))


def apply_text_edits(text: str, edits) -> str:
    """Apply core ``TextEdit``s (character positions) to ``text``.

    Edits must not overlap; they are applied from the end backwards. Line
    terminators of the document are preserved.
    """
    if not edits:
        return text
    # absolute offsets of line starts, in characters
    starts = [0]
    for m in _EOL.finditer(text):
        starts.append(m.end())
    lines = split_lines(text)

    def offset(pos) -> int:
        if pos.line >= len(starts):
            return len(text)
        ln = lines[pos.line]
        return starts[pos.line] + max(0, min(pos.character, len(ln)))

    spans = sorted(
        ((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits),
        key=lambda s: (s[0], s[1]),
        reverse=True,
    )
    out = text
    prev_start = None
    for a, b, new in spans:
        if prev_start is not None and b > prev_start:
            raise ValueError("overlapping edits")
        out = out[:a] + new + out[b:]
        prev_start = a
    return out


# (the last text folded that was not ASCII, and its folding: the one-shot check folds a
# file's text twice, to ask whether it back-propagates and which defs it never mentions)
_LAST_FOLD = ("", "")


def fold_identifiers(text: str) -> str:
    """``text`` NFKC-folded when it is not ASCII, as Python folds identifiers
    (``ｆｏｏ`` *is* ``foo``), so that a name is found however it is typed."""
    global _LAST_FOLD
    if text.isascii():
        return text
    last = _LAST_FOLD
    if last[0] is text:
        return last[1]
    import unicodedata

    folded = unicodedata.normalize("NFKC", text)
    _LAST_FOLD = (text, folded)
    return folded


def words(text: str) -> List[str]:
    """The identifier-like tokens of ``text`` (comments and strings included),
    folded as Python folds identifiers (:func:`fold_identifiers`): "is this
    name mentioned?" answered by a lookup."""
    return _WORD.findall(fold_identifiers(text))


_WORD = re.compile(r"\w+")


def line_ending(text: str) -> str:
    """The text's line ending, by its first line break ("\n" when it has none)."""
    i = text.find("\n")
    if i > 0 and text[i - 1] == "\r":
        return "\r\n"
    if i < 0 and "\r" in text:
        return "\r"
    return "\n"
