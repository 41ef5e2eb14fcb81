"""Jupyter notebooks as one program.

Code cells are concatenated in order (each cell starts on a new line) and
analysed once; :class:`CellMap` maps a line of the concatenation back to
(cell, line in cell). IPython syntax that is not Python — ``%magic``,
``!shell``, ``%%cell_magic`` cells, ``?help`` — is blanked out with the line
count preserved, so positions stay right.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from typing import List, Optional, Sequence, Tuple

from gradguard.model.record import record
from gradguard.model.text import split_lines

_IPY_LINE = re.compile(r"^\s*(%|!|\?)|^\s*\w[\w.]*\?\??\s*$")


def blank_ipython(cell_source: str) -> str:
    lines = split_lines(cell_source)
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n".join("" for _ in lines)  # a cell magic: the whole cell is not Python
    if not any(_IPY_LINE.match(ln) for ln in lines):
        return "\n".join(lines)
    out = []
    state = _Continuation()
    for ln in lines:
        if not state.inside and _IPY_LINE.match(ln):
            # a magic, a shell escape or a help query only ever starts a logical
            # line: inside brackets "% (a, b)" is Python's modulo
            out.append("")
            continue
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


@record
class CellMap:
    starts: Tuple[int, ...]  # first line of each cell in the concatenation
    keys: Tuple[object, ...]  # cell identity (index in the notebook, or URI)

    def locate(self, line: int) -> Tuple[int, int]:
        """(cell position in ``keys``, line within the cell)."""
        i = max(0, bisect_right(self.starts, line) - 1)
        return i, line - self.starts[i]


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


def concatenate(cells: Sequence[Tuple[object, str]]) -> Tuple[str, CellMap]:
    parts: List[str] = []
    starts: List[int] = []
    keys: List[object] = []
    line = 0
    for key, src in cells:
        text = blank_ipython(src)
        if opens_indented(text):
            parts.append(CELL_WRAPPER)  # a line of its own, in no cell
            line += 1
        starts.append(line)
        keys.append(key)
        parts.append(text)
        line += len(split_lines(text))
    return "\n".join(parts), CellMap(tuple(starts), tuple(keys))


def code_cells(data: bytes) -> List[Tuple[int, str]]:
    """(1-based cell number, source) of the code cells of an .ipynb file. Raises ValueError."""
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("no 'cells' list (nbformat 4 expected)")
    lang = (nb.get("metadata") or {}).get("kernelspec", {}).get("language", "python") if isinstance(nb.get("metadata"), dict) else "python"
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
    from gradguard.model.text import apply_text_edits

    text = data.decode("utf-8")
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
    for i, cell_edits in per_cell.items():
        number, src = cells[i]
        new = apply_text_edits(src, cell_edits)
        cell = nb["cells"][number - 1]
        cell["source"] = new.splitlines(keepends=True) if isinstance(cell.get("source"), list) else new
    return _dump_like(nb, text).encode("utf-8")


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
