"""textDocument/hover: the findings under the cursor, and a few autograd idioms explained."""

from __future__ import annotations

from typing import List, Optional

from lsprotocol import types as lsp

from gradguard.lsp.hover import finding_markdown, idiom_at, idiom_markdown
from gradguard.lsp.language_server import GradguardServer


async def hover(ls: GradguardServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
    uri = params.text_document.uri
    target = ls.target_for(uri)
    if target is None or not ls.settings_for(target).enable:
        return None
    cur = await ls.current(target)
    if cur is None:
        return None
    smap = cur.smap
    pos = smap.from_client_position(uri, params.position, ls.codec)
    if pos is None:
        return None
    lang = ls.lang
    blocks: List[str] = []
    hits = [f for f in cur.result.findings if f.range.contains(pos)]
    if hits:
        blocks.append(finding_markdown(hits, lang, with_message=not ls.hover_shows_diagnostics))
    part = smap.part_for_uri(uri)
    line_text = part.line(pos.line - part.start) if part else ""
    idiom = idiom_at(line_text, pos.character)
    rng = None
    if idiom is not None:
        blocks.append(idiom_markdown(idiom[0], lang))
        ln = params.position.line
        rng = lsp.Range(
            lsp.Position(ln, ls.codec.to_client(line_text, idiom[1])),
            lsp.Position(ln, ls.codec.to_client(line_text, idiom[2])),
        )
    if not blocks:
        return None
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(blocks)),
        range=rng if not hits else None,
    )
