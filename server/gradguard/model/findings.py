"""Immutable result types shared by every front end.

Positions are 0-based lines and 0-based *character* (Unicode code point)
columns, i.e. indexes into the Python ``str`` of the line.  Front ends convert:
the CLI prints 1-based characters, the language server converts to UTF-16
code units with :mod:`gradguard.model.text`.
"""

from __future__ import annotations

import enum
from gradguard.model.i18n import pick
from gradguard.model.record import Factory, record, replace

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (typing costs start-up time on the CLI path)
    from typing import Mapping, Tuple


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"

    @classmethod
    def parse(cls, value: str) -> "Severity":
        v = str(value).strip().lower()
        aliases = {"information": "info", "warn": "warning", "err": "error"}
        v = aliases.get(v, v)
        try:
            return cls(v)
        except ValueError:
            raise ValueError(
                f"unknown severity {value!r} (expected one of: error, warning, info, hint)"
            ) from None


@record(order=True)
class Position:
    line: int  # 0-based
    character: int  # 0-based code point index into the line

    def shifted(self, lines: int) -> "Position":
        return Position(self.line + lines, self.character)


@record(order=True)
class Range:
    start: Position
    end: Position

    @staticmethod
    def of(line: int, col: int, end_line: int, end_col: int) -> "Range":
        return Range(Position(line, col), Position(end_line, end_col))

    def shifted(self, lines: int) -> "Range":
        if not lines:
            return self
        return Range(self.start.shifted(lines), self.end.shifted(lines))

    def contains(self, pos: Position) -> bool:
        return self.start <= pos <= self.end


@record
class TextEdit:
    range: Range
    new_text: str

    def shifted(self, lines: int) -> "TextEdit":
        return replace(self, range=self.range.shifted(lines)) if lines else self


@record
class Fix:
    """One way of fixing a finding, as edits to the same document."""

    title: Mapping[str, str]  # {"en": ..., "zh": ...}
    edits: Tuple[TextEdit, ...]
    preferred: bool = False

    def title_in(self, lang: str = "en") -> str:
        return pick(self.title, lang)

    def shifted(self, lines: int) -> "Fix":
        if not lines:
            return self
        return replace(self, edits=tuple(e.shifted(lines) for e in self.edits))


@record
class Related:
    range: Range
    message: Mapping[str, str]

    def message_in(self, lang: str = "en") -> str:
        return pick(self.message, lang)

    def shifted(self, lines: int) -> "Related":
        return replace(self, range=self.range.shifted(lines)) if lines else self


@record(compare=("code", "range", "message", "severity", "related", "fixes"))
class Finding:
    code: str  # "GG101"
    range: Range  # the line that carries the graph across the boundary
    message: Mapping[str, str]  # {"en": one sentence, "zh": 一句话}
    severity: Severity
    related: Tuple[Related, ...] = ()
    fixes: Tuple[Fix, ...] = ()
    # Free-form machine-readable details (e.g. {"variable": "hidden"}), JSON-serialisable.
    data: Mapping[str, object] = Factory(dict)

    def message_in(self, lang: str = "en") -> str:
        return pick(self.message, lang)

    @property
    def preferred_fix(self) -> "Fix | None":
        """The fix ``--fix`` and Fix All apply (engine/fixing.py), if any: an
        alternative that is not marked preferred is only ever offered."""
        for f in self.fixes:
            if f.preferred:
                return f
        return None

    def shifted(self, lines: int) -> "Finding":
        if not lines:
            return self
        return replace(
            self,
            range=self.range.shifted(lines),
            related=tuple(r.shifted(lines) for r in self.related),
            fixes=tuple(f.shifted(lines) for f in self.fixes),
        )

    def sort_key(self):
        return (self.range.start, self.code, self.range.end)
