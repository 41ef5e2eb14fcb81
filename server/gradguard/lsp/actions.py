"""Code actions from diagnostics: quick fixes, ``# noqa`` suppression, fix-all.

Quick fixes are built from the finding the diagnostic was published for (found
again by ``convert.fixes_data``), so offering them needs no re-analysis; the
diagnostic the client sends back only says which finding it means. Fix All
(``features/fixes.py``) runs the engine's fix loop (:mod:`gradguard.engine.fixing`, the same as
``gradguard check --fix``) and sends the result as one whole-line edit. Every
edit is a ``TextDocumentEdit`` carrying the version the diagnostic was computed
for: a client applying it to a newer text refuses it instead of corrupting code.
"""

from __future__ import annotations

import re
from typing import Any, Container, Dict, List, Mapping, Optional, Sequence, Tuple

from lsprotocol import types as lsp

from gradguard.model.i18n import pick
from gradguard.model.noqa import add_noqa
from gradguard.lsp.convert import DATA_MARK, SOURCE, Codec, range_from_json, sequence

FIX_ALL_KIND = "source.fixAll.gradguard"
FIX_ALL_COMMAND = "gradguard.fixAll"

_SUPPRESS = {"en": "Suppress {code} on this line", "zh": "在此行忽略 {code}（# noqa）"}
_FIX_ALL = {"en": "gradguard: fix all auto-fixable problems", "zh": "gradguard：修复所有可自动修复的问题"}


def kind_wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """LSP kind matching: ``source`` asks for ``source.fixAll.gradguard`` too."""
    if not only:
        return True
    # (a kind that is not a string, sent by a broken client, asks for nothing)
    return any(isinstance(k, str) and (kind == k or kind.startswith(k + ".")) for k in only)


def workspace_edit(changes: Mapping[str, Tuple[Optional[int], List[lsp.TextEdit]]]) -> lsp.WorkspaceEdit:
    return lsp.WorkspaceEdit(
        document_changes=[
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=list(edits),
            )
            for uri, (version, edits) in changes.items()
            if edits
        ]
    )


def is_ours(diag: lsp.Diagnostic) -> bool:
    return diag.source == SOURCE and isinstance(diag.code, str) and diag.code.upper().startswith("GG")


def quick_fixes(uri: str, diag: lsp.Diagnostic, data: Any, current_version: Optional[int],
                allowed: Optional[Container[str]] = None) -> List[lsp.CodeAction]:
    """One ``quickfix`` per fix carried in the diagnostic's data; a fix with an
    edit outside ``allowed`` (the URIs of the analysed document or notebook
    cells; default: ``uri``) is not offered."""
    allowed = {uri} if allowed is None else allowed
    out: List[lsp.CodeAction] = []
    if not isinstance(data, Mapping) or not data.get(DATA_MARK):
        return out
    for fix in sequence(data.get("fixes")):
        if not isinstance(fix, Mapping):
            continue
        changes: Dict[str, Tuple[Optional[int], List[lsp.TextEdit]]] = {}
        ok = True
        for e in sequence(fix.get("edits")):
            rng = range_from_json(e.get("range")) if isinstance(e, Mapping) else None
            new_text = e.get("newText") if isinstance(e, Mapping) else None
            if rng is None or not isinstance(new_text, str):
                ok = False
                break
            e_uri = e.get("uri") or uri
            if e_uri not in allowed:
                ok = False
                break
            version = e.get("version", data.get("version", current_version))
            changes.setdefault(e_uri, (version, []))[1].append(lsp.TextEdit(range=rng, new_text=new_text))
        if not ok or not changes:
            continue
        out.append(
            lsp.CodeAction(
                title=str(fix.get("title") or f"Fix {diag.code}"),
                kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[diag],
                is_preferred=bool(fix.get("preferred")) or None,
                edit=workspace_edit(changes),
            )
        )
    return out


def suppress_action(
    uri: str, diag: lsp.Diagnostic, lines: Sequence[str], version: Optional[int], codec: Codec, lang: str
) -> Optional[lsp.CodeAction]:
    """Add (or extend) ``# noqa: GGxxx`` on the diagnostic's first line."""
    code = str(diag.code)
    ln = diag.range.start.line
    if not (0 <= ln < len(lines)):
        return None
    old = lines[ln]
    new = noqa_line(lines, ln, code)
    if new is None or new == old:
        return None
    edit = lsp.TextEdit(
        range=lsp.Range(lsp.Position(ln, 0), lsp.Position(ln, codec.to_client(old, len(old)))),
        new_text=new,
    )
    title = pick(_SUPPRESS, lang).format(code=code)
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag],
        edit=workspace_edit({uri: (version, [edit])}),
    )


def noqa_line(lines: Sequence[str], ln: int, code: str) -> Optional[str]:
    """Line ``ln`` with ``code`` in its ``# noqa`` comment (merged into the
    line's comment, if it has one); None when no comment can end that line: it
    goes on in the next one (a backslash: the comment would be a syntax error)
    or ends inside a string (the comment would become part of its value)."""
    line = lines[ln]
    where = _comment_start(lines, ln)
    if where is None:
        return None
    if where < 0:  # no comment: one at the end ("#" in a string is not a comment)
        return line.rstrip() + f"  # noqa: {code}"
    return line[:where] + add_noqa(line[where:], code)


def _comment_start(lines: Sequence[str], ln: int) -> Optional[int]:
    """Where line ``ln``'s comment starts (-1: it has none); None when the line
    does not end there (a backslash, or a string running on). Read by Python's
    tokenizer from that line on (a line or two, not the file: code actions are
    asked at every move of the cursor)."""
    import tokenize

    rest = iter(lines[ln:ln + 1000])
    comment = -1
    try:
        for tok in tokenize.generate_tokens(lambda: _next_line(rest)):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
                return comment if tok.start[0] == 1 else None
            if tok.end[0] > 1:
                return None  # a token running past the line's end (a string), or the line went on
            if tok.type == tokenize.COMMENT:
                comment = tok.start[1]
    except (tokenize.TokenError, SyntaxError):
        pass
    # the tokenizer could not read it from there (a line in the middle of a statement
    # whose start it does not see): offered only when the line alone is plainly safe
    line = lines[ln]
    return -1 if "#" not in line and not line.rstrip().endswith("\\") and "'" not in line and '"' not in line else None


def _next_line(rest) -> str:
    line = next(rest, None)
    return "" if line is None else line + "\n"


def fix_all_title(lang: str) -> str:
    return pick(_FIX_ALL, lang)


def whole_line_diff(old: str, new: str, codec: Codec) -> Optional[lsp.TextEdit]:
    """One edit replacing the changed lines of ``old`` to obtain ``new``,
    exactly: the lines are compared with their ends, and the edit's text is
    ``new``'s own lines, ends included (a text that mixes ``\\n`` and ``\\r\\n``
    keeps each line's end; they are never re-joined with the first line's)."""
    if old == new:
        return None
    a, b = _lines_with_ends(old), _lines_with_ends(new)
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    # every line but old's last ends a line, so the edit runs from the start of
    # line p (the prefix is the same text in both: the edit's text never joins a
    # \r before it into a \r\n) to the start of the unchanged suffix, or to the
    # end of old's last line when that line has no end and is replaced too
    start = lsp.Position(p, 0)
    if s == 0 and a and not _ends_a_line(a[-1]):
        end = lsp.Position(len(a) - 1, codec.to_client(a[-1], len(a[-1])))
    else:
        end = lsp.Position(len(a) - s, 0)
    return lsp.TextEdit(range=lsp.Range(start, end), new_text="".join(b[p : len(b) - s]))


_LINE_WITH_END = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _lines_with_ends(text: str) -> List[str]:
    """``text``'s lines, each with its end (LSP's: ``\\r\\n``, ``\\r``, ``\\n``); the
    last without one if the text does not end a line; "" has no lines."""
    return _LINE_WITH_END.findall(text)


def _ends_a_line(line: str) -> bool:
    return line.endswith(("\n", "\r"))
