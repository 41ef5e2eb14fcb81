"""The '# noqa' quick fix never breaks the program or changes its strings.

The comment goes at the end of the finding's first line. When that line goes
on in the next one (a backslash) the comment made it a syntax error; when its
end is inside a string (a triple-quoted string opened there) the comment
became part of the string's value. Such a line gets no suppression action;
any other gets it, and the finding goes."""

from __future__ import annotations

import ast
import asyncio

import pytest
from lsprotocol import types as lsp

from lsp_harness import GRU_SEED, TIMEOUT, apply_workspace_edit, file_uri, open_doc, use, wait_for_diagnostics

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOOP_LINE = "    out, hidden = gru(x, hidden)"
SHAPES = {
    "backslash": "    out, hidden = \\\n        gru(x, hidden)",
    "string opened on the line": "    out, hidden = gru(x, hidden); note = '''第一行 😀\n    第二行'''",
    "f-string opened on the line": "    out, hidden = gru(x, hidden); note = f\"\"\"{step} 第一行\n    第二行\"\"\"",
    "a '#' in a string": "    out, hidden = gru(x, hidden); tag = '# 标签 #'",
    "a noqa in a string": "    out, hidden = gru(x, hidden); tag = '# noqa: E501'  # 注释",
    "brackets going on": "    out, hidden = gru(x,\n                      hidden)",
}


def _strings(text: str):
    return sorted(n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant) and isinstance(n.value, str))


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_suppression_keeps_the_program_and_its_strings(shared, tmp_path, shape):
    text = GRU_SEED.replace(LOOP_LINE, SHAPES[shape])
    uri = file_uri(tmp_path, f"noqa_{len(shape)}.py")
    async with use(shared) as client:
        open_doc(client, uri, text, 1)
        (d,) = (await wait_for_diagnostics(client, uri, 1)).diagnostics
        actions = await asyncio.wait_for(client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
            context=lsp.CodeActionContext(diagnostics=[d], only=[lsp.CodeActionKind.QuickFix]))), TIMEOUT)
        suppress = [a for a in actions if "noqa" in a.title.lower() or "Suppress" in a.title]
        for a in suppress:
            new = apply_workspace_edit(text, uri, a.edit, expect_version=1)
            compile(new, "t.py", "exec")  # still a program
            assert _strings(new) == _strings(text), a.title  # every string as it was
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=new)]))
            assert list((await wait_for_diagnostics(client, uri, 2)).diagnostics) == []  # and it suppresses
        if shape in ("a '#' in a string", "a noqa in a string", "brackets going on"):
            assert suppress, "an ordinary line is offered the suppression"
