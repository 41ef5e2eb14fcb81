"""What the server analyses as one program, and what it last found there.

A :class:`Target` is a text document or a notebook (its Python code cells
read as one program); its last analysis is one :class:`Analysed` record, so
the result and the map and version it was made from never drift apart.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Dict, Optional, Set

from pygls.uris import to_fs_path

from gradguard.engine.document import CheckResult, Document
from gradguard.lsp.convert import SourceMap


@dataclass(frozen=True)
class Analysed:
    """One analysis of a target: its findings, the map from the analysed text
    to the client's documents, the document version, and the key that says
    whether it still answers for the current text and settings."""

    result: CheckResult
    smap: SourceMap
    version: Optional[int]
    key: Optional[tuple]  # (version, config, source hash, enabled); None: analyse again


class Target:
    """What is analysed as one program: a text document, or a notebook's code cells."""

    def __init__(self, key: str, kind: str, path: Optional[str]):
        self.key = key
        self.kind = kind  # "text" | "notebook"
        self.path = path
        self.doc: Optional[Document] = None  # touched only on a worker thread, under doc_lock
        self.doc_lock = threading.Lock()
        self.lock = asyncio.Lock()
        self.task: Optional[asyncio.Task] = None
        self.generation = 0
        self.analysed: Optional[Analysed] = None
        self.published: Set[str] = set()  # part URIs that hold our diagnostics
        # facts about names imported from the user's other files (analysis/resolve), found
        # off the keystroke path after a publish; read by the worker thread
        self.external: Dict[str, object] = {}
        self.resolve_task: Optional[asyncio.Task] = None
        self.too_big_logged = False


def path_of(uri: str) -> Optional[str]:
    """The file system path of a ``file:`` URI (None for any other scheme)."""
    if not uri.startswith("file:"):
        return None
    try:
        return to_fs_path(uri)
    except Exception:
        return None
