"""Core findings → LSP types. Pure conversion: no detection logic here.

Positions: the core counts code points; the client counts in the negotiated
position encoding (UTF-16 code units unless it offered UTF-8/UTF-32). Every
range is clamped into its document, so nothing is ever published past EOF.

An analysed *source* may be made of several *parts* (the cells of a
notebook, concatenated by the engine's one notebook model,
:mod:`gradguard.engine.notebook`); a part (a ``Cell``) knows its URI, its first
line in the source and its own lines, so a range in the source maps back to one
part. A text document is a source of one part.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from lsprotocol import types as lsp

from gradguard.engine.notebook import Cell, CellMap, concatenate
from gradguard.model.findings import Finding, Fix, Position, Range, Severity
from gradguard.model.text import split_lines, utf16_to_char

SOURCE = "gradguard"
DATA_MARK = "gradguard"

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}


class Codec:
    """Code point columns ↔ the client's position encoding."""

    def __init__(self, encoding: Optional[str] = None):
        enc = str(encoding or "utf-16").lower()
        self.encoding = enc if enc in ("utf-8", "utf-16", "utf-32") else "utf-16"

    def to_client(self, line: str, col: int) -> int:
        col = max(0, min(col, len(line)))
        if self.encoding == "utf-16":
            if line.isascii():
                return col
            # surrogatepass: a lone surrogate (possible in JSON text) is one unit, not an error
            return len(line[:col].encode("utf-16-le", errors="surrogatepass")) // 2
        if self.encoding == "utf-8":
            return len(line[:col].encode("utf-8", errors="surrogatepass"))
        return col

    def from_client(self, line: str, units: int) -> int:
        """Clamped to the line; inside a multi-unit character rounds down."""
        if units <= 0:
            return 0
        if self.encoding == "utf-16":
            return utf16_to_char(line, units)
        if self.encoding == "utf-8":
            if line.isascii():
                return min(units, len(line))
            # by the codec, in C (a loop over a line of millions of characters took
            # a fifth of a second at each keystroke on it)
            data = line.encode("utf-8", errors="surrogatepass")
            cut = min(units, len(data))
            while cut < len(data) and data[cut] & 0xC0 == 0x80:  # inside a character: back to its start
                cut -= 1
            return len(data[:cut].decode("utf-8", errors="surrogatepass"))
        return min(units, len(line))


class Lines(Sequence[str]):
    """A text's lines (:func:`split_lines`), split when first read: a snapshot
    is taken on the server's event loop at every keystroke, and most of them are
    never looked up line by line; and the analysis splits the same text anyway,
    so its lines can be :meth:`adopt`-ed instead."""

    __slots__ = ("_text", "_lines")

    def __init__(self, text: str):
        self._text = text
        self._lines: Optional[List[str]] = None

    def _get(self) -> List[str]:
        if self._lines is None:
            self._lines = split_lines(self._text)
        return self._lines

    @property
    def text(self) -> str:
        """The text these are the lines of."""
        return self._text

    def adopt(self, text: str, lines: List[str]) -> None:
        """Take ``lines``, split elsewhere from ``text``, when that is this text."""
        if self._lines is None and text is self._text:
            self._lines = lines

    def __len__(self) -> int:
        return len(self._get())

    def __getitem__(self, i):
        return self._get()[i]

    def __iter__(self):
        return iter(self._get())

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, (list, Lines)) else NotImplemented


class SourceMap:
    """Where each part (a text document, or a notebook's cell) lives in the
    analysed source, and positions converted between the two: the engine's
    :class:`~gradguard.engine.notebook.CellMap` (keyed by URI) with the client's
    position encoding."""

    __slots__ = ("cells",)

    def __init__(self, cells: CellMap):
        self.cells = cells

    @property
    def parts(self) -> List[Cell]:
        return self.cells.cells

    @staticmethod
    def single(uri: str, text: str, version: Optional[int]) -> "SourceMap":
        return SourceMap(CellMap([Cell(uri, 0, Lines(text), version)]))

    @staticmethod
    def of_cells(cells: Sequence[Tuple[str, str, Optional[int]]]) -> Tuple[str, "SourceMap"]:
        """(uri, text, version) of a notebook's code cells in order: the program
        the core analyses (:func:`~gradguard.engine.notebook.concatenate`, as the
        CLI reads an ``.ipynb``) and its map."""
        source, cmap = concatenate(cells)
        return source, SourceMap(cmap)

    def part_for_uri(self, uri: str) -> Optional[Cell]:
        return self.cells.cell_for(uri)

    def part_at(self, line: int) -> Optional[Cell]:
        return self.cells.cell_at(line)

    # -- core → client ----------------------------------------------------
    def to_client_span(self, rng: Range, codec: Codec) -> Optional[Tuple[Cell, Tuple[int, int, int, int]]]:
        """The part holding ``rng.start`` and (start line, start character, end
        line, end character) in its coordinates, clamped into that part (a range
        never spills into another cell)."""
        part = self.part_at(rng.start.line)
        if part is None:
            return None
        lines = part.lines
        last = max(len(lines) - 1, 0)

        def conv(pos: Position) -> Tuple[int, int]:
            ln = pos.line - part.start
            if ln < 0:
                return 0, 0
            if ln > last:
                text = part.line(last)
                return last, codec.to_client(text, len(text))
            return ln, codec.to_client(part.line(ln), pos.character)

        start = conv(rng.start)
        end = conv(rng.end)
        if end < start:
            end = start
        return part, start + end

    def to_client_range(self, rng: Range, codec: Codec) -> Optional[Tuple[Cell, lsp.Range]]:
        """:meth:`to_client_span` as an LSP range."""
        conv = self.to_client_span(rng, codec)
        if conv is None:
            return None
        part, (sl, sc, el, ec) = conv
        return part, lsp.Range(lsp.Position(sl, sc), lsp.Position(el, ec))

    # -- client → core ----------------------------------------------------
    def from_client_position(self, uri: str, pos: lsp.Position, codec: Codec) -> Optional[Position]:
        """A client position as a source position; None when it is outside the document."""
        part = self.part_for_uri(uri)
        if part is None or pos.line < 0 or pos.line >= len(part.lines):
            return None
        text = part.line(pos.line)
        if pos.character > codec.to_client(text, len(text)):
            return None
        return Position(part.start + pos.line, codec.from_client(text, pos.character))


def fix_to_data(fix: Fix, smap: SourceMap, codec: Codec, lang: str) -> Dict[str, Any]:
    edits = []
    for e in fix.edits:
        conv = smap.to_client_span(e.range, codec)
        if conv is None:
            continue
        part, span = conv
        edits.append({"uri": part.uri, "version": part.version, "range": _span_json(span),
                      "newText": part.in_own_eol(e.new_text)})
    return {"title": fix.title_in(lang), "preferred": bool(fix.preferred), "edits": edits}


def _span_json(span: Tuple[int, int, int, int]) -> Dict[str, Any]:
    return {"start": {"line": span[0], "character": span[1]}, "end": {"line": span[2], "character": span[3]}}


def range_json(r: lsp.Range) -> Dict[str, Any]:
    """An LSP range as it travels (what a client sends back in a diagnostic)."""
    return _span_json((r.start.line, r.start.character, r.end.line, r.end.character))


def range_from_json(d: Any) -> Optional[lsp.Range]:
    try:
        s, e = d["start"], d["end"]
        return lsp.Range(lsp.Position(int(s["line"]), int(s["character"])), lsp.Position(int(e["line"]), int(e["character"])))
    except (KeyError, TypeError, ValueError):
        return None


def diagnostic_json(finding: Finding, smap: SourceMap, codec: Codec, lang: str,
                    index: int = -1) -> Optional[Tuple[str, Dict[str, Any]]]:
    """(uri, Diagnostic) for one finding, or None if it maps nowhere. The
    Diagnostic is built as it travels (a JSON object, LSP field names, absent
    fields left out): every keystroke publishes every finding of the file, and
    building protocol objects to have them taken apart again by the serializer
    cost more than the analysis of the edit."""
    from gradguard.rules import get_rule

    conv = smap.to_client_span(finding.range, codec)
    if conv is None:
        return None
    part, span = conv
    diag: Dict[str, Any] = {
        "range": _span_json(span),
        "severity": int(_SEVERITY.get(finding.severity, lsp.DiagnosticSeverity.Error)),
        "code": finding.code,
        "source": SOURCE,
        "message": finding.message_in(lang),
    }
    rule = get_rule(finding.code)
    href = rule.docs_url() if rule else None
    if href:
        diag["codeDescription"] = {"href": href}
    related = []
    for r in finding.related:
        rc = smap.to_client_span(r.range, codec)
        if rc is not None:
            related.append({"location": {"uri": rc[0].uri, "range": _span_json(rc[1])}, "message": r.message_in(lang)})
    if related:
        diag["relatedInformation"] = related
    # the fixes themselves are made when a code action asks (fixes_data): every
    # keystroke publishes every finding, and most are never clicked
    diag["data"] = {DATA_MARK: 1, "uri": part.uri, "version": part.version, "fixes": len(finding.fixes),
                    "n": index}
    return part.uri, diag


def fixes_data(findings: Sequence[Finding], smap: SourceMap, codec: Codec, lang: str, uri: str, code: Any,
               rng: Dict[str, Any], version: Optional[int], index: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """The data of the diagnostic at ``rng`` (wire form) with code ``code`` in
    ``uri``, fixes included, from the findings it was published from; None when
    no finding matches or the diagnostic came from another version of the part
    (its edits would no longer apply). ``index`` is the finding's position as
    published (``data.n``): a client that hands the diagnostic back with its
    columns recomputed (Neovim counts bytes there) still finds it by that and its
    line; without it, the range must match."""
    candidates = list(enumerate(findings))
    if index is not None and 0 <= index < len(findings):
        candidates = [(index, findings[index])] + candidates
    for i, f in candidates:
        if f.code != code:
            continue
        conv = smap.to_client_span(f.range, codec)
        if conv is None:
            continue
        part, span = conv
        if part.uri != uri:
            continue
        if i == index:
            if span[0] != rng.get("start", {}).get("line"):
                continue
        elif _span_json(span) != rng:
            continue
        if version is not None and part.version is not None and version != part.version:
            return None
        return {DATA_MARK: 1, "uri": part.uri, "version": part.version,
                "fixes": [fix_to_data(fx, smap, codec, lang) for fx in f.fixes]}
    return None


def diagnostics_json(findings: Iterable[Finding], smap: SourceMap, codec: Codec, lang: str) -> Dict[str, List[Dict[str, Any]]]:
    """Diagnostics (as they travel) per part URI (every part present, possibly empty)."""
    out: Dict[str, List[Dict[str, Any]]] = {p.uri: [] for p in smap.parts}
    for i, f in enumerate(findings):
        conv = diagnostic_json(f, smap, codec, lang, i)
        if conv is None:
            continue
        uri, diag = conv
        out.setdefault(uri, []).append(diag)
    return out


class RawJson(dict):
    """A value already in its wire form: the server's converter passes it
    through untouched (``language_server._converter``), and the JSON encoder writes it
    as the dict it is."""


def sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, (list, tuple)) else ()
