"""Jupyter notebooks as one program.

Code cells are concatenated in order (each cell starts on a new line) and
analysed once; :class:`CellMap` maps a line of the concatenation back to
(cell, line in cell). This is the one notebook model: the CLI reads ``.ipynb``
files with it, and the language server the notebook documents of the editor
(keyed by cell URI, with their versions). IPython syntax that is not Python — ``%magic``,
``!shell``, ``%%cell_magic`` cells, ``?help`` — is blanked out with the line
count preserved, so positions stay right; where IPython makes a statement of
it (an escape inside an indented block, ``files = !ls``, ``t = %time f()``),
a statement stands in its place, as IPython's input transforms read it.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from gradguard.model.text import line_ending, split_lines

# a magic, a shell escape, a help query (``?x``, ``x?``, ``x??``, and IPython's
# wildcard search ``torch.*Tensor?``)
_IPY_LINE = re.compile(r"^\s*(%|!|\?)|^\s*[\w*][\w.*]*\?\??\s*$")
# ``files = !ls`` / ``t = %time f()``: IPython's SystemAssign and MagicAssign
# (a plain ``=``, then the escape: ``x != y``, ``x == y`` and ``x += y`` are not them)
_IPY_ASSIGN = re.compile(r"^[^=!%#'\"]*[^=!<>+\-*/%&|^@:~ \t]\s*=\s*[!%]")
_IPY_ANY = re.compile(r"^\s*(%|!|\?)|\?\s*$|=\s*[!%]")


def blank_ipython(cell_source: str) -> str:
    lines = split_lines(cell_source)
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n".join("" for _ in lines)  # a cell magic: the whole cell is not Python
    if not any(_IPY_ANY.search(ln) for ln in lines):
        return "\n".join(lines)
    out = []
    state = _Continuation()
    for ln in lines:
        # a magic, a shell escape or a help query only ever starts a logical
        # line: inside brackets "% (a, b)" is Python's modulo
        if not state.inside:
            if _IPY_LINE.match(ln):
                # IPython runs it as a call (get_ipython().system('...')): in an
                # indented block it is the block's statement, so one stands in
                # its place; at the top level the line is left out
                indent = ln[: len(ln) - len(ln.lstrip())]
                out.append(indent + "pass" if indent else "")
                continue
            m = _IPY_ASSIGN.match(ln)
            if m:
                # files = get_ipython().getoutput('ls'): the names are bound to
                # something that is not a tensor; the left side keeps its columns
                ln = ln[: m.end() - 1] + "None"
        out.append(ln)
        state.feed(ln)
    return "\n".join(out)


class _Continuation:
    """Does the statement go on after the lines fed so far? Open brackets, an
    open triple-quoted string, or a trailing backslash."""

    _DEPTH = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}

    def __init__(self) -> None:
        self.depth = 0
        self.quote: Optional[str] = None  # the open triple quote, if any
        self.inside = False

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if self.quote is not None:
                if c == "\\":
                    i += 2
                elif line.startswith(self.quote, i):
                    i += 3
                    self.quote = None
                else:
                    i += 1
                continue
            if c == "#":
                break
            if c == "'" or c == '"':
                if line.startswith(c * 3, i):
                    self.quote = c * 3
                    i += 3
                    continue
                j = i + 1  # a one-line string
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            d = self._DEPTH.get(c)
            if d:
                self.depth = max(0, self.depth + d)
            i += 1
        self.inside = self.depth > 0 or self.quote is not None or line.rstrip().endswith("\\")


@dataclass
class Cell:
    """One cell inside the concatenated program."""

    key: object  # its identity: the cell's number in the file (CLI), or its URI (editor)
    start: int  # its first line in the program
    lines: Sequence[str]  # its own (original) lines
    version: Optional[int] = None  # the editor's version of the cell
    # its line ending (the program joins cells with "\n"): a line a fix inserts ends so
    eol: str = "\n"

    def in_own_eol(self, text: str) -> str:
        """``text`` (a fix's, with "\n" line ends) with this cell's line ends."""
        return text if self.eol == "\n" else text.replace("\r\n", "\n").replace("\n", self.eol)

    @property
    def uri(self) -> str:
        return self.key if isinstance(self.key, str) else str(self.key)

    @property
    def end(self) -> int:
        return self.start + len(self.lines)

    def line(self, n: int) -> str:
        return self.lines[n] if 0 <= n < len(self.lines) else ""


class CellMap:
    """Where each cell lives in the program: the one map between a notebook's
    cells and the text the core analyses, for the CLI and the editor alike. A
    text document is a map of one cell."""

    __slots__ = ("cells", "_starts")

    def __init__(self, cells: Sequence[Cell]):
        self.cells: List[Cell] = list(cells)
        self._starts = [c.start for c in self.cells]

    @property
    def keys(self) -> Tuple[object, ...]:
        return tuple(c.key for c in self.cells)

    def locate(self, line: int) -> Tuple[int, int]:
        """(cell position in ``cells``, line within the cell), for any line of
        the program (a wrapper line maps to one past the end of the cell before)."""
        i = max(0, bisect_right(self._starts, line) - 1)
        return i, line - self._starts[i]

    def cell_at(self, line: int) -> Optional[Cell]:
        """The cell holding ``line`` of the program; None for a line in no cell
        (a wrapper line, or past the end: the last cell's end counts as its own)."""
        i = bisect_right(self._starts, line) - 1
        if i < 0:
            return None
        c = self.cells[i]
        if line >= c.end and not (i == len(self.cells) - 1 and line == c.end):
            return None
        return c

    def cell_for(self, key: object) -> Optional[Cell]:
        for c in self.cells:
            if c.key == key:
                return c
        return None


# The line put before a cell whose code starts indented (see :func:`opens_indented`).
CELL_WRAPPER = "with __ipython_cell__:"


def opens_indented(text: str) -> bool:
    """Does the (blanked) cell's first line of code start indented?

    IPython runs such a cell: its ``leading_indent`` input transform strips the
    first line's indentation from every line that starts with it (a stray space
    before the first statement is common in notebooks). Python would call it an
    "unexpected indent". The cell is then analysed under a ``with`` line of its
    own put before it: the body runs once, in order, and every line and column
    of the cell stays where it is (dedenting would move every column, and every
    fix would have to be re-indented). Comment lines do not count: Python skips
    them whatever their indentation."""
    for ln in text.split("\n"):
        stripped = ln.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        return ln[:1] in (" ", "\t")
    return False


def concatenate(cells: Sequence[Tuple[Any, ...]]) -> Tuple[str, CellMap]:
    """The program of a notebook's code cells, ``(key, text)`` or ``(key, text,
    version)`` in notebook order, and the map from its lines back to the cells.
    Each cell starts on a new line; IPython syntax is read by :func:`blank_ipython`,
    which keeps every line, so a cell's lines keep their numbers."""
    parts: List[str] = []
    out: List[Cell] = []
    line = 0
    for key, src, *rest in cells:
        original = split_lines(src)
        clean = split_lines(blank_ipython(src))
        if len(clean) != len(original):  # never trust, always keep positions right
            clean = (clean + [""] * len(original))[: len(original)]
        text = "\n".join(clean)
        if opens_indented(text):
            parts.append(CELL_WRAPPER)  # a line of its own, in no cell
            line += 1
        out.append(Cell(key, line, original, rest[0] if rest else None, line_ending(src)))
        parts.append(text)
        line += len(original)
    return "\n".join(parts), CellMap(out)


def code_cells(data: bytes) -> List[Tuple[int, str]]:
    """(1-based cell number, source) of the code cells of an .ipynb file. Raises ValueError."""
    try:
        # (a BOM: VS Code writes and reads such files; json.loads refuses it)
        nb = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("no 'cells' list (nbformat 4 expected)")
    lang = _language(nb)
    if isinstance(lang, str) and lang.lower() not in ("python", "python3", ""):
        return []
    out: List[Tuple[int, str]] = []
    for n, cell in enumerate(nb["cells"], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        if isinstance(src, list):
            if not all(isinstance(s, str) for s in src):
                raise ValueError(f"cell {n}: 'source' is not text")
            src = "".join(src)
        elif not isinstance(src, str):
            raise ValueError(f"cell {n}: 'source' is not text")
        out.append((n, src))
    return out


def _language(nb: dict) -> object:
    """``metadata.kernelspec.language``, "python" when any level is missing or
    not a table (a hand-written ``"kernelspec": "python3"`` is not a reason to fail)."""
    meta = nb.get("metadata")
    spec = meta.get("kernelspec") if isinstance(meta, dict) else None
    return spec.get("language", "python") if isinstance(spec, dict) else "python"


def notebook_source(data: bytes) -> str:
    text, _ = concatenate(code_cells(data))
    return text


def notebook_map(data: bytes) -> CellMap:
    _, m = concatenate(code_cells(data))
    return m


def apply_notebook_edits(data: bytes, edits) -> bytes:
    """The notebook with ``edits`` (core TextEdits in the coordinates of its
    concatenated code, as findings give them) applied to its code cells, as
    file bytes. Each edit must lie within one cell (an edit that spans cells
    is skipped); other cells, outputs and metadata are left as they are, and
    the JSON keeps the file's indentation, key order and escaping of non-ASCII
    text. Raises ValueError for a malformed notebook."""
    from gradguard.model.findings import Position, Range, TextEdit
    from gradguard.model.record import replace
    from gradguard.model.text import apply_text_edits

    text = data.decode("utf-8")
    bom = "\ufeff" if text.startswith("\ufeff") else ""  # kept, in front of the JSON
    text = text[len(bom):]
    nb = json.loads(text)
    cells = code_cells(data)
    _, cmap = concatenate(cells)
    per_cell: dict = {}
    for e in edits:
        i, l0 = cmap.locate(e.range.start.line)
        j, l1 = cmap.locate(e.range.end.line)
        if i != j:
            continue
        per_cell.setdefault(i, []).append(
            TextEdit(Range(Position(l0, e.range.start.character), Position(l1, e.range.end.character)), e.new_text))
    if not per_cell:
        return data
    spans = _source_spans(text)
    spliced: List[Tuple[int, int, str]] = []
    for i, cell_edits in per_cell.items():
        number, src = cells[i]
        eol = cmap.cells[i].eol
        if eol != "\n":  # the program joins cells with "\n": a line a fix inserts ends as the cell's lines do
            cell_edits = [replace(e, new_text=cmap.cells[i].in_own_eol(e.new_text)) for e in cell_edits]
        new = apply_text_edits(src, cell_edits)
        cell = nb["cells"][number - 1]
        old_source = cell.get("source")
        if isinstance(old_source, list):
            # an item per line: split at \n (a form feed or U+2028 inside a line stays in
            # its item), at \r in a cell of \r line ends listed a line an item
            cell["source"] = (_CR_LINE if eol == "\r" and len(old_source) > 1 else _LIST_LINE).findall(new)
        else:
            cell["source"] = new
        span = spans[number - 1] if spans is not None and number - 1 < len(spans) else None
        if span is None:
            spliced = []
            break
        spliced.append((span[0], span[1], _source_json(cell["source"], text[span[0]:span[1]], text)))
    if not spliced:  # the source values could not be located (never seen): the whole JSON written again
        return (bom + _dump_like(nb, text)).encode("utf-8")
    # every other byte of the file as it was: outputs, metadata, numbers as they
    # were written (VS Code writes 0.00001 where Python writes 1e-05), escapes, layout
    for a, b, value in sorted(spliced, reverse=True):
        text = text[:a] + value + text[b:]
    return (bom + text).encode("utf-8")


# a source list's items: lines ending at \n (str.splitlines would also split an
# untouched line at a form feed, U+2028 or \x1c-\x1e, rewriting it as two items)
_LIST_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
_CR_LINE = re.compile(r"[^\r]*\r|[^\r]+\Z")
_DECODER = json.JSONDecoder()
_scanstring: Any = getattr(json.decoder, "scanstring")
_WS = re.compile(r"[ \t\n\r]*")


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)  # matches the empty string: never None
    return m.end() if m else i


def _members(text: str, i: int):
    """(key, value start, value end) of the JSON object at ``text[i]``."""
    if text[i] != "{":
        return
    i = _skip(text, i + 1)
    while text[i] == '"':
        key, i = _scanstring(text, i + 1)
        i = _skip(text, i)
        i = _skip(text, i + 1)  # the colon
        _, end = _DECODER.raw_decode(text, i)
        yield key, i, end
        i = _skip(text, end)
        if text[i] != ",":
            return
        i = _skip(text, i + 1)


def _elements(text: str, i: int):
    """(start, end) of each value of the JSON array at ``text[i]``."""
    if text[i] != "[":
        return
    i = _skip(text, i + 1)
    if text[i] == "]":
        return
    while True:
        _, end = _DECODER.raw_decode(text, i)
        yield i, end
        i = _skip(text, end)
        if text[i] != ",":
            return
        i = _skip(text, i + 1)


def _source_spans(text: str) -> Optional[List[Optional[Tuple[int, int]]]]:
    """Where each cell's ``source`` value is in the notebook's JSON text (None
    for a cell without one), in the order of the ``cells`` list; None when the
    text cannot be walked. As ``json.loads`` reads it: the last of repeated keys."""
    try:
        start = _skip(text, 0)
        cells_at = None
        for key, a, _ in _members(text, start):
            if key == "cells":
                cells_at = a
        if cells_at is None:
            return None
        spans: List[Optional[Tuple[int, int]]] = []
        for a, _ in _elements(text, cells_at):
            span = None
            for key, va, vb in _members(text, a):
                if key == "source":
                    span = (va, vb)
            spans.append(span)
        return spans
    except (ValueError, IndexError, RecursionError):
        return None


def _source_json(value: Any, old: str, whole: str) -> str:
    """``value`` (a cell's new source: a string or a list of lines) as JSON
    written like ``old``, the value it replaces: the same line breaks and
    indentation between a list's items, the same escaping of non-ASCII text."""
    ascii_only = whole.isascii() and "\\u" in whole

    def dump(s: str) -> str:
        return json.dumps(s, ensure_ascii=ascii_only)

    if not isinstance(value, list):
        return dump(value)
    if not value:
        return "[]"
    items = list(_elements(old, 0)) if old.startswith("[") else []
    if not items:
        return json.dumps(value, ensure_ascii=ascii_only)
    lead = old[1:items[0][0]]
    trail = old[items[-1][1]:-1]
    if len(items) > 1:
        sep = old[items[0][1]:items[1][0]]
    elif "\n" in lead:
        sep = "," + lead
    else:
        sep = ", " if ", " in whole else ","
    return "[" + lead + sep.join(dump(s) for s in value) + trail + "]"


def _dump_like(nb: dict, original: str) -> str:
    """JSON text of ``nb`` formatted like ``original`` (Jupyter writes one-space
    indentation and raw UTF-8; other tools differ)."""
    body = original.strip()
    indent = None
    if "\n" in body:
        second = body.split("\n", 2)[1]
        indent = len(second) - len(second.lstrip(" ")) or 1
    ascii_only = original.isascii() and "\\u" in original
    separators = None
    if indent is None and ", " not in body:
        separators = (",", ":")  # minified
    out = json.dumps(nb, indent=indent, ensure_ascii=ascii_only, separators=separators)
    out += "\n" if original.endswith("\n") else ""
    return out.replace("\n", "\r\n") if "\r\n" in original else out
