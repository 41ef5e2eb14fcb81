"""Code actions: quick fixes and suppressions per diagnostic, and Fix All
(``source.fixAll.gradguard``, the lightbulb action resolved later, and the
``gradguard.fixAll`` command), all made from the server's own result."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Set, Tuple
from urllib.parse import unquote

from lsprotocol import types as lsp

from gradguard.engine.document import check_source
from gradguard.engine.fixing import fix_until_stable, preferred_edits
from gradguard.lsp import actions as act
from gradguard.lsp.convert import Lines, fixes_data, range_json
from gradguard.lsp.language_server import GradguardServer
from gradguard.lsp.target import Target
from gradguard.lsp.worker import analysable
from gradguard.model.text import apply_text_edits, split_lines

OPTIONS = lsp.CodeActionOptions(
    code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll, act.FIX_ALL_KIND],
    resolve_provider=True,
)


async def code_action(ls: GradguardServer, params: lsp.CodeActionParams) -> Optional[List[lsp.CodeAction]]:
    uri = params.text_document.uri
    target = ls.target_for(uri)
    if target is None or not ls.settings_for(target).enable:
        return []
    only = params.context.only
    td = ls.workspace.text_documents.get(unquote(uri))
    if td is None:
        return []
    lines = split_lines(td.source)
    if params.range.start.line >= len(lines) or params.range.start.line < 0:
        return []  # past the end: nothing to offer
    lang = ls.lang
    out: List[lsp.CodeAction] = []
    if act.kind_wanted(lsp.CodeActionKind.QuickFix, only):
        fixes: List[lsp.CodeAction] = []
        suppress: List[lsp.CodeAction] = []
        seen_codes: Set[Tuple[str, int]] = set()
        for d in params.context.diagnostics:
            if not act.is_ours(d):
                continue
            # the fixes are the server's own, made from its result: a client's
            # diagnostic (its data included) only says which finding is meant
            data = _lookup_data(ls, target, uri, d)
            parts = {p.uri for p in target.analysed.smap.parts} if target.analysed else {uri}
            fixes.extend(act.quick_fixes(uri, d, data, td.version, allowed=parts))
            key = (str(d.code), d.range.start.line)
            if key not in seen_codes and not _of_another_version(d, td.version):
                seen_codes.add(key)
                a = act.suppress_action(uri, d, lines, td.version, ls.codec, lang)
                if a is not None:
                    suppress.append(a)
        out.extend(fixes)
        out.extend(suppress)
    if only and act.kind_wanted(act.FIX_ALL_KIND, only):
        edit = await fix_all_edit(ls, uri)
        if edit is not None:
            out.append(lsp.CodeAction(title=act.fix_all_title(lang), kind=act.FIX_ALL_KIND, edit=edit))
    elif not only and ls.cap("text_document.code_action.resolve_support") is not None:
        cur = await ls.current(target)
        if cur is not None and any(any(x.preferred for x in f.fixes) for f in cur.result.findings):
            out.append(
                lsp.CodeAction(title=act.fix_all_title(lang), kind=act.FIX_ALL_KIND, data={"uri": uri, "gradguard": "fixAll"})
            )
    return out


async def code_action_resolve(ls: GradguardServer, action: lsp.CodeAction) -> lsp.CodeAction:
    data = action.data
    if isinstance(data, dict) and data.get("gradguard") == "fixAll" and isinstance(data.get("uri"), str):
        action.edit = await fix_all_edit(ls, data["uri"]) or lsp.WorkspaceEdit(document_changes=[])
    return action


async def fix_all_command(ls: GradguardServer, *args: Any) -> Dict[str, Any]:
    uri = None
    for a in args:
        if isinstance(a, str):
            uri = a
        elif isinstance(a, dict) and isinstance(a.get("uri"), str):
            uri = a["uri"]
        if uri:
            break
    if uri is None:
        return {"applied": False, "reason": "no document given"}
    for _ in range(_CATCH_UP):
        edit = await fix_all_edit(ls, uri)
        if edit is None:
            return {"applied": False, "reason": "nothing to fix"}
        if _edit_is_current(ls, edit):
            break
    else:
        # the edit names the version it was made from, but a client may apply it
        # without looking: the server sends none that the text has left behind
        return {"applied": False, "reason": "the document kept changing while the fixes were computed; run it again"}
    try:
        res = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label="gradguard: fix all"))
    except Exception as e:  # the client answered with an error (or with something that is no answer)
        return {"applied": False, "reason": f"the editor did not apply the fixes: {e}"}
    if not res.applied:
        return {"applied": False, "reason": res.failure_reason or "the editor did not apply the fixes"}
    return {"applied": True, "reason": None}


# how many times Fix All analyses again when the text moved on while it worked
_CATCH_UP = 3


def _edit_is_current(ls: GradguardServer, edit: lsp.WorkspaceEdit) -> bool:
    """Does every document the edit changes still have the version the edit names?"""
    for dc in edit.document_changes or ():
        if not isinstance(dc, lsp.TextDocumentEdit):
            return False
        td = ls.workspace.text_documents.get(unquote(dc.text_document.uri))
        if td is None or td.version != dc.text_document.version:
            return False
    return True


def _of_another_version(diag: lsp.Diagnostic, version: Optional[int]) -> bool:
    """Was the diagnostic published for another version of the text than ``version``
    (the document's now)? Its line then names a line of that text, and an edit
    made there on the current text would change a line that has moved."""
    sent = diag.data if isinstance(diag.data, dict) else {}
    published = sent.get("version")
    return isinstance(published, int) and version is not None and published != version


def _lookup_data(ls: GradguardServer, target: Target, uri: str, diag: lsp.Diagnostic) -> Any:
    """The data of one of our diagnostics with its fixes, made from the result it
    was published from (diagnostics travel without their fixes). A diagnostic of
    another version of the document gets none: its edits would not apply."""
    a = target.analysed
    if a is None:
        return None
    sent = diag.data if isinstance(diag.data, dict) else {}
    version = sent.get("version") if isinstance(sent.get("version"), int) else None
    index = sent.get("n") if isinstance(sent.get("n"), int) else None
    return fixes_data(a.result.findings, a.smap, ls.codec, ls.lang, uri, diag.code, range_json(diag.range), version, index)


async def fix_all_edit(ls: GradguardServer, uri: str) -> Optional[lsp.WorkspaceEdit]:
    """Every preferred fix in the document, as one edit of it naming the version
    of the text the fixes were computed from.

    The analysis is awaited, and the editor keeps sending changes meanwhile: the
    edit is made from the analysed text and carries that text's version (the
    document's version when the edit is sent may be newer: an edit computed for
    version N labelled N+1 would be accepted by the editor and land on the
    wrong lines). When the text moved on during the analysis, it is analysed
    again, a few times at most, so that the edit usually applies."""
    target = ls.target_for(uri)
    td = ls.workspace.text_documents.get(unquote(uri))
    if target is None or td is None:
        return None
    cur = None
    for _ in range(_CATCH_UP):
        cur = await ls.current(target, latest=True)
        part = cur.smap.part_for_uri(uri) if cur is not None else None
        if part is None or part.version == td.version:
            break
    if cur is None:
        return None
    result, smap = cur.result, cur.smap
    part = smap.part_for_uri(uri)
    if part is None:
        return None
    if target.kind == "notebook":
        # one round over the whole program; only this cell's edits
        edits = []
        for e in preferred_edits(result.findings):
            conv = smap.to_client_range(e.range, ls.codec)
            if conv is not None and conv[0].uri == uri:
                edits.append(lsp.TextEdit(range=conv[1], new_text=conv[0].in_own_eol(e.new_text)))
        if not edits:
            return None
        return act.workspace_edit({uri: (part.version, edits)})
    if not any(any(x.preferred for x in f.fixes) for f in result.findings):
        return None
    lines = part.lines
    if not isinstance(lines, Lines):
        return None
    text = lines.text  # the text that was analysed, not the document's text now
    version = part.version
    config = ls.config_for(target)
    path = target.path
    facts = target.external

    def run() -> str:
        return fix_until_stable(text, result, apply_text_edits,
                                lambda t: check_source(analysable(t), path, config, facts)).state

    loop = asyncio.get_running_loop()
    new_text = await loop.run_in_executor(ls.executor, run)
    edit = act.whole_line_diff(text, new_text, ls.codec)
    if edit is None:
        return None
    return act.workspace_edit({uri: (version, [edit])})
