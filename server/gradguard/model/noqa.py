"""``# noqa`` handling (flake8/ruff compatible).

``# noqa`` on a finding's first line suppresses every finding there;
``# noqa: GG101, GG102`` only those codes. Matching other tools' codes in the
same comment (``# noqa: E501, GG101``) is fine.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Optional, Tuple

_NOQA_PATTERN = r"#\s*noqa(?::[\s]*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?"
_NOQA = None  # compiled on first use: most lines never get this far, and start-up pays for every compile


def _noqa_re():
    global _NOQA
    if _NOQA is None:
        _NOQA = re.compile(_NOQA_PATTERN, re.IGNORECASE)
    return _NOQA


def parse_noqa(line: str) -> Optional[Tuple[str, ...]]:
    """None: no noqa. (): bare noqa (all codes). Else the listed codes."""
    if "#" not in line or "noqa" not in line.lower():
        return None
    # every match on the line counts, not the first: the first may be inside a
    # string holding a noqa of its own, before the real comment (which the
    # editor's suppression action writes after such a string)
    found = None
    for m in _noqa_re().finditer(line):
        codes = m.group("codes")
        if not codes:
            return ()
        found = (found or ()) + tuple(c.upper() for c in re.split(r"[\s,]+", codes.strip()) if c)
    return found


def is_suppressed(line: str, code: str) -> bool:
    codes = parse_noqa(line)
    if codes is None:
        return False
    return codes == () or code.upper() in codes


def add_noqa(line: str, code: str) -> str:
    """The line with ``code`` added to its noqa comment (merging with one that exists)."""
    m = _noqa_re().search(line) if "#" in line else None
    if m is None:
        body = line.rstrip()
        return f"{body}  # noqa: {code}"
    codes = m.group("codes")
    if not codes:  # bare noqa already suppresses everything
        return line
    listed = [c for c in re.split(r"[\s,]+", codes.strip()) if c]
    if code.upper() in (c.upper() for c in listed):
        return line
    merged = ", ".join(listed + [code])
    return line[: m.start()] + f"# noqa: {merged}" + line[m.end():]
