"""Output formats of ``gradguard check``: text, json, sarif, github; and --diff.

The JSON shape is a public contract (editors and CI scripts parse it):
a list of objects with ``path, line, column, end_line, end_column, code, name,
severity, message, related[{path, line, column, message}], fixes[{title,
preferred, edits[{line, column, end_line, end_column, new_text}]}]``. Lines
and columns are 1-based; columns count characters. Notebook findings also
carry ``cell`` (1-based cell number) and their lines count within the cell.
"""

from __future__ import annotations

import os
import sys
from gradguard import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import IO, List, Optional

_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note", "hint": "note"}


class Locator:
    """Maps core positions of one file to (1-based line, cell) — cells for notebooks."""

    def __init__(self, path: str, data: Optional[bytes] = None):
        self.cells = None
        if path.endswith(".ipynb") and data is not None:
            from gradguard.engine.notebook import notebook_map

            try:
                self.cells = notebook_map(data)
            except ValueError:
                self.cells = None

    def line(self, line0: int):
        """(1-based line, cell number or None)."""
        if self.cells is None:
            return line0 + 1, None
        i, ln = self.cells.locate(line0)
        return ln + 1, self.cells.keys[i]


def rule_name(code: str) -> str:
    """The rule's kebab-case name (``carried-graph``), or the code of a rule
    the registry does not know."""
    from gradguard.rules import get_rule

    rule = get_rule(code)
    return rule.name if rule else code


def finding_dict(path: str, f, lang: str, loc: Optional[Locator] = None) -> dict:
    loc = loc or Locator(path)
    line, cell = loc.line(f.range.start.line)
    end_line, _ = loc.line(f.range.end.line)
    d = {
        "path": path,
        "line": line,
        "column": f.range.start.character + 1,
        "end_line": end_line,
        "end_column": f.range.end.character + 1,
        "code": f.code,
        "name": rule_name(f.code),
        "severity": f.severity.value,
        "message": f.message_in(lang),
        "related": [
            {
                "path": path,
                "line": loc.line(r.range.start.line)[0],
                "column": r.range.start.character + 1,
                "message": r.message_in(lang),
            }
            for r in f.related
        ],
        "fixes": [
            {
                "title": fx.title_in(lang),
                "preferred": bool(fx.preferred),
                "edits": [
                    {
                        "line": loc.line(e.range.start.line)[0],
                        "column": e.range.start.character + 1,
                        "end_line": loc.line(e.range.end.line)[0],
                        "end_column": e.range.end.character + 1,
                        "new_text": e.new_text,
                    }
                    for e in fx.edits
                ],
            }
            for fx in f.fixes
        ],
    }
    if cell is not None:
        d["cell"] = cell
    return d


def _problems(rec: dict) -> List[str]:
    out = []
    if rec.get("error"):
        out.append(rec["error"])
    if rec.get("syntax") is not None:
        line, col, msg = rec["syntax"][:3]
        where = f" in cell {rec['syntax'][3]}" if len(rec["syntax"]) > 3 else ""
        out.append(f"syntax error{where} at {line + 1}:{col + 1}: {msg} (the rest of the file was still checked)")
    return out


def emit(records: List[dict], fmt: str, lang: str, out: IO[str], statistics: bool = False,
         quiet: bool = False) -> None:
    """Print records' findings (``rec["items"]``: :func:`finding_dict` dicts) in a format.

    ``statistics`` (ruff's ``--statistics``): a count per rule instead of the
    findings, as JSON with ``--format json``, else as a table. ``quiet``
    (``--quiet``): the findings and nothing else (no summary, no "fixed" lines)."""
    if statistics:
        _emit_statistics(records, fmt, out)
    elif fmt == "json":
        _emit_json(records, out)
    elif fmt == "sarif":
        _emit_sarif(records, lang, out)
    elif fmt == "github":
        _emit_github(records, out)
    else:
        _emit_text(records, lang, out, quiet)


def _emit_statistics(records, fmt, out):
    stats: dict = {}
    for rec in records:
        for p in _problems(rec):
            sys.stderr.write(f"{rec['path']}: {p}\n")
        for f in rec["items"]:
            s = stats.setdefault(f["code"], {"code": f["code"], "name": f["name"], "count": 0, "fixable": False})
            s["count"] += 1
            s["fixable"] = s["fixable"] or bool(f["fixes"])
    rows = sorted(stats.values(), key=lambda s: (-s["count"], s["code"]))  # ruff's order: most frequent first
    if fmt == "json":
        import json

        out.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        return
    width = max((len(str(s["count"])) for s in rows), default=1)
    any_fixable = any(s["fixable"] for s in rows)
    for s in rows:
        mark = ("[*] " if s["fixable"] else "[ ] ") if any_fixable else ""
        out.write(f"{s['count']:>{width}}\t{s['code']}\t{mark}{s['name']}\n")


def _emit_json(records, out):
    import json

    # One finding per line: each goes through the C encoder (``indent`` would
    # route the whole array through json's pure-Python one, 3× slower on a
    # project's output), and a line per finding still reads and greps well.
    out.write("[")
    sep = "\n"
    for rec in records:
        for item in rec["items"]:
            out.write(sep)
            out.write(json.dumps(item, ensure_ascii=False))
            sep = ",\n"
    out.write("\n]\n" if sep != "\n" else "]\n")
    for rec in records:
        for p in _problems(rec):
            sys.stderr.write(f"{rec['path']}: {p}\n")


def _color(out) -> bool:
    return hasattr(out, "isatty") and out.isatty() and not os.environ.get("NO_COLOR")


def _emit_text(records, lang, out, quiet=False):
    color = _color(out)
    bold = (lambda s: f"\033[1m{s}\033[0m") if color else (lambda s: s)
    sev_color = {"error": "31", "warning": "33", "info": "36", "hint": "36"}
    total = 0
    fixable = 0
    for rec in records:
        for p in _problems(rec):
            sys.stderr.write(f"{rec['path']}: {'错误' if lang == 'zh' else 'error'}: {p}\n")
        for f in rec["items"]:
            cell = f.get("cell")
            where = f"{f['path']}:{'cell ' + str(cell) + ':' if cell else ''}{f['line']}:{f['column']}"
            sev = f["severity"]
            sev_s = f"\033[{sev_color[sev]}m{sev}\033[0m" if color else sev
            out.write(f"{bold(where)}: {bold(f['code'])} [{sev_s}] {f['message']}\n")
            for r in f["related"]:
                out.write(f"    {r['path']}:{r['line']}:{r['column']}: {r['message']}\n")
            preferred = [fx for fx in f["fixes"] if fx["preferred"]] or f["fixes"][:1]
            if preferred:
                fixable += 1
                label = "修复" if lang == "zh" else "fix"
                out.write(f"    {label}: {preferred[0]['title']}\n")
            total += 1
        if rec.get("fixed_written") and not quiet:
            out.write(f"{rec['path']}: {'已修复' if lang == 'zh' else 'fixed'}\n")
    if quiet:
        return
    files = len(records)
    if lang == "zh":
        summary = f"检查了 {files} 个文件，发现 {total} 个问题" + (f"（{fixable} 个可用 --fix 自动修复）" if fixable else "")
    else:
        summary = f"Checked {files} file{'s' if files != 1 else ''}: {total} finding{'s' if total != 1 else ''}" + (
            f" ({fixable} fixable with --fix)" if fixable else ""
        )
    if total or files:
        out.write(("\n" if total else "") + summary + "\n")


def _emit_github(records, out):
    def esc(s: str) -> str:
        return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(s: str) -> str:
        return esc(s).replace(":", "%3A").replace(",", "%2C")

    kind = {"error": "error", "warning": "warning", "info": "notice", "hint": "notice"}
    for rec in records:
        for p in _problems(rec):
            out.write(f"::error file={prop(rec['path'])},title=gradguard::{esc(p)}\n")
        for f in rec["items"]:
            out.write(
                f"::{kind[f['severity']]} file={prop(f['path'])},line={f['line']},col={f['column']},"
                f"endLine={f['end_line']},endColumn={f['end_column']},title={prop(f['code'] + ' ' + f['name'])}::"
                f"{esc(f['message'])}\n"
            )


def _emit_sarif(records, lang, out):
    import json
    from pathlib import Path

    from gradguard.rules import all_rules

    rules = all_rules()
    index = {r.code: i for i, r in enumerate(rules)}

    def uri(path: str) -> str:
        p = Path(path)
        return p.as_posix() if not p.is_absolute() else p.as_uri()

    def region(d: dict) -> dict:
        r = {"startLine": d["line"], "startColumn": d["column"]}
        if "end_line" in d:
            r.update(endLine=d["end_line"], endColumn=d["end_column"])
        return r

    results = []
    notifications = []
    for rec in records:
        for p in _problems(rec):
            notifications.append({"level": "error", "message": {"text": p},
                                  "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri(rec["path"])}}}]})
        for f in rec["items"]:
            art = {"uri": uri(f["path"])}
            results.append(
                {
                    "ruleId": f["code"],
                    "ruleIndex": index.get(f["code"], 0),
                    "level": _SARIF_LEVEL[f["severity"]],
                    "message": {"text": f["message"]},
                    "locations": [{"physicalLocation": {"artifactLocation": art, "region": region(f)}}],
                    "relatedLocations": [
                        {"id": i, "message": {"text": r["message"]},
                         "physicalLocation": {"artifactLocation": art, "region": region(r)}}
                        for i, r in enumerate(f["related"])
                    ],
                    "fixes": [
                        {
                            "description": {"text": fx["title"]},
                            "artifactChanges": [
                                {"artifactLocation": art,
                                 "replacements": [{"deletedRegion": region(e), "insertedContent": {"text": e["new_text"]}}
                                                  for e in fx["edits"]]}
                            ],
                        }
                        for fx in f["fixes"]
                    ],
                }
            )
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gradguard",
                        "version": __version__,
                        "informationUri": "https://github.com/gradguard/gradguard",
                        "rules": [
                            {
                                "id": r.code,
                                "name": r.name,
                                "shortDescription": {"text": r.title.get(lang) or r.title.get("en", "")},
                                "fullDescription": {"text": r.title.get(lang) or r.title.get("en", "")},
                                "help": {"text": r.explain(lang), "markdown": r.explain(lang)},
                                "helpUri": r.docs_url(),
                                "defaultConfiguration": {"level": _SARIF_LEVEL[r.default_severity.value]},
                            }
                            for r in rules
                        ],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
                "invocations": [{"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}],
            }
        ],
    }
    json.dump(sarif, out, ensure_ascii=False, indent=2)
    out.write("\n")


def diff(rec: dict) -> str:
    """Unified diff of the preferred fixes the worker computed for one file ('' if
    none), one that ``patch`` and ``git apply`` apply: lines are the file's lines
    as those tools read them, split after each ``\\n`` only (``str.splitlines``
    also broke at a form feed or U+2028 inside a line, and splitting at a lone
    ``\\r`` made a file with old Mac line ends, or a stray ``\\r`` in a line, a
    patch they call corrupt: such a file is one line to them, and its patch
    replaces that line), and a last line without a newline is marked
    ``\\ No newline at end of file`` (a newline was added to it, so the hunk did
    not match the file); a UTF-8 BOM stays on the first line, as in the file.
    A file in another encoding (``rec["encoding"]``, its PEP 263 cookie's) has
    its lines in that encoding's bytes, each byte that is not UTF-8 a lone
    surrogate (``surrogateescape``): the patch is bytes, written as the file's
    (:func:`patch_bytes`). Raises ValueError when the fixed text cannot be
    written in that encoding (``--fix`` would not write it either)."""
    fixed = rec.get("fixed")
    if rec.get("error") or fixed is None or fixed == rec["source"]:
        return ""
    import difflib
    import re

    line = re.compile(r"[^\n]*\n|[^\n]+\Z")
    a = line.findall(rec["source"])
    b = line.findall(fixed)
    encoding = rec.get("encoding")
    if encoding:
        try:
            a = [t.encode(encoding).decode("utf-8", "surrogateescape") for t in a]
            b = [t.encode(encoding).decode("utf-8", "surrogateescape") for t in b]
        except (UnicodeEncodeError, LookupError) as e:
            raise ValueError(f"no patch: the fixed text cannot be written in the file's encoding ({e})") from None
    if rec.get("bom"):  # the file's first line starts with it (the source was read without it)
        for lines in (a, b):
            if lines:
                lines[0] = "\ufeff" + lines[0]
    out: List[str] = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(3):
        if not out:
            out += [f"--- a/{rec['path']}\n", f"+++ b/{rec['path']}\n"]
        out.append(f"@@ -{_hunk_range(group[0][1], group[-1][2])} +{_hunk_range(group[0][3], group[-1][4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [_diff_line(" ", t) for t in a[i1:i2]]
                continue
            out += [_diff_line("-", t) for t in a[i1:i2]]
            out += [_diff_line("+", t) for t in b[j1:j2]]
    return "".join(out)


def _hunk_range(start: int, stop: int) -> str:
    """A hunk header's ``start,length`` (the unified format's: 1-based; an empty range names the line before)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def patch_bytes(text: str) -> bytes:
    """A patch made by :func:`diff` as the bytes to write: UTF-8, and each lone
    surrogate the byte of the file's own encoding it stands for."""
    return text.encode("utf-8", "surrogateescape")


def _diff_line(prefix: str, text: str) -> str:
    if text.endswith("\n"):
        return prefix + text
    return prefix + text + "\n\\ No newline at end of file\n"
