"""Core findings → LSP types. Pure conversion: no detection logic here.

Positions: the core counts code points; the client counts in the negotiated
position encoding (UTF-16 code units unless it offered UTF-8/UTF-32). Every
range is clamped into its document, so nothing is ever published past EOF.

An analysed *source* may be made of several *parts* (the cells of a
notebook, concatenated); a part knows its URI, its first line in the source
and its own lines, so a range in the source maps back to one part.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from lsprotocol import types as lsp

from gradguard.core.model import Finding, Fix, Position, Range, Severity, TextEdit
from gradguard.core.text import split_lines, utf16_to_char

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
            seen = 0
            for i, ch in enumerate(line):
                w = len(ch.encode("utf-8", errors="surrogatepass"))
                if seen + w > units:
                    return i
                seen += w
            return len(line)
        return min(units, len(line))


@dataclass
class Part:
    """One client document inside an analysed source."""

    uri: str
    start: int  # first line in the analysed source
    lines: List[str]  # the part's own (original) lines
    version: Optional[int] = None

    @property
    def end(self) -> int:
        return self.start + len(self.lines)

    def line(self, n: int) -> str:
        return self.lines[n] if 0 <= n < len(self.lines) else ""


@dataclass
class SourceMap:
    """Where each part lives in the analysed source."""

    parts: List[Part] = field(default_factory=list)

    @staticmethod
    def single(uri: str, text: str, version: Optional[int]) -> "SourceMap":
        return SourceMap([Part(uri, 0, split_lines(text), version)])

    def part_for_uri(self, uri: str) -> Optional[Part]:
        for p in self.parts:
            if p.uri == uri:
                return p
        return None

    def part_at(self, line: int) -> Optional[Part]:
        if not self.parts:
            return None
        starts = [p.start for p in self.parts]
        i = bisect.bisect_right(starts, line) - 1
        if i < 0:
            return None
        p = self.parts[i]
        if line >= p.end and not (i == len(self.parts) - 1 and line == p.end):
            return None
        return p

    # -- core → client ----------------------------------------------------
    def to_client_range(self, rng: Range, codec: Codec) -> Optional[Tuple[Part, lsp.Range]]:
        """The part holding ``rng.start`` and the range in its coordinates,
        clamped into that part (a range never spills into another cell)."""
        part = self.part_at(rng.start.line)
        if part is None:
            return None
        last = max(len(part.lines) - 1, 0)

        def conv(pos: Position) -> lsp.Position:
            ln = pos.line - part.start
            if ln < 0:
                return lsp.Position(0, 0)
            if ln > last:
                return lsp.Position(last, codec.to_client(part.line(last), len(part.line(last))))
            text = part.line(ln)
            return lsp.Position(ln, codec.to_client(text, pos.character))

        start = conv(rng.start)
        end = conv(rng.end)
        if (end.line, end.character) < (start.line, start.character):
            end = start
        return part, lsp.Range(start, end)

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


def edit_to_client(edit: TextEdit, smap: SourceMap, codec: Codec) -> Optional[Tuple[Part, lsp.TextEdit]]:
    conv = smap.to_client_range(edit.range, codec)
    if conv is None:
        return None
    part, rng = conv
    return part, lsp.TextEdit(range=rng, new_text=edit.new_text)


def fix_to_data(fix: Fix, smap: SourceMap, codec: Codec, lang: str) -> Dict[str, Any]:
    edits = []
    for e in fix.edits:
        conv = edit_to_client(e, smap, codec)
        if conv is None:
            continue
        part, te = conv
        edits.append(
            {
                "uri": part.uri,
                "version": part.version,
                "range": _range_json(te.range),
                "newText": te.new_text,
            }
        )
    return {"title": fix.title_in(lang), "preferred": bool(fix.preferred), "edits": edits}


def _range_json(r: lsp.Range) -> Dict[str, Any]:
    return {
        "start": {"line": r.start.line, "character": r.start.character},
        "end": {"line": r.end.line, "character": r.end.character},
    }


def range_from_json(d: Any) -> Optional[lsp.Range]:
    try:
        s, e = d["start"], d["end"]
        return lsp.Range(lsp.Position(int(s["line"]), int(s["character"])), lsp.Position(int(e["line"]), int(e["character"])))
    except (KeyError, TypeError, ValueError):
        return None


def to_diagnostic(finding: Finding, smap: SourceMap, codec: Codec, lang: str) -> Optional[Tuple[str, lsp.Diagnostic]]:
    """(uri, Diagnostic) for one finding, or None if it maps nowhere."""
    from gradguard.rules import get_rule

    conv = smap.to_client_range(finding.range, codec)
    if conv is None:
        return None
    part, rng = conv
    related = []
    for r in finding.related:
        rc = smap.to_client_range(r.range, codec)
        if rc is None:
            continue
        related.append(lsp.DiagnosticRelatedInformation(location=lsp.Location(rc[0].uri, rc[1]), message=r.message_in(lang)))
    rule = get_rule(finding.code)
    href = rule.docs_url() if rule else None
    data = {
        DATA_MARK: 1,
        "uri": part.uri,
        "version": part.version,
        "fixes": [fix_to_data(f, smap, codec, lang) for f in finding.fixes],
    }
    return part.uri, lsp.Diagnostic(
        range=rng,
        message=finding.message_in(lang),
        severity=_SEVERITY.get(finding.severity, lsp.DiagnosticSeverity.Error),
        code=finding.code,
        code_description=lsp.CodeDescription(href=href) if href else None,
        source=SOURCE,
        related_information=related or None,
        data=data,
    )


def to_diagnostics(findings: Iterable[Finding], smap: SourceMap, codec: Codec, lang: str) -> Dict[str, List[lsp.Diagnostic]]:
    """Diagnostics per part URI (every part present, possibly empty)."""
    out: Dict[str, List[lsp.Diagnostic]] = {p.uri: [] for p in smap.parts}
    for f in findings:
        conv = to_diagnostic(f, smap, codec, lang)
        if conv is None:
            continue
        uri, diag = conv
        out.setdefault(uri, []).append(diag)
    return out


def lsp_range_contains(rng: lsp.Range, other: lsp.Range) -> bool:
    """Do two client ranges touch (the usual codeAction 'overlaps' test)?"""
    a = (rng.start.line, rng.start.character)
    b = (rng.end.line, rng.end.character)
    c = (other.start.line, other.start.character)
    d = (other.end.line, other.end.character)
    return not (d < a or b < c)


def sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, (list, tuple)) else ()
