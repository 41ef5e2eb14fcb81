"""The server's LSP features, one module per feature, registered in one place.

Each handler is a module-level function taking the server first (``ls``);
:func:`register` is the whole list of what the server answers.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from lsprotocol import types as lsp

from gradguard.lsp import actions as act
from gradguard.lsp.features import diagnostics, documents, fixes, hover, lifecycle, notebooks
from gradguard.lsp.language_server import GradguardServer

# (method, options or None, handler)
FEATURES: List[Tuple[str, Any, Callable[..., Any]]] = [
    (lsp.INITIALIZE, None, lifecycle.initialize),
    (lsp.INITIALIZED, None, lifecycle.initialized),
    (lsp.SHUTDOWN, None, lifecycle.shutdown),
    (lsp.EXIT, None, lifecycle.on_exit),
    (lsp.WORKSPACE_DID_CHANGE_CONFIGURATION, None, lifecycle.did_change_configuration),
    (lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, None, lifecycle.did_change_folders),
    (lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, None, lifecycle.did_change_watched_files),
    (lsp.TEXT_DOCUMENT_DID_OPEN, None, documents.did_open),
    (lsp.TEXT_DOCUMENT_DID_CHANGE, None, documents.did_change),
    (lsp.TEXT_DOCUMENT_DID_SAVE, None, documents.did_save),
    (lsp.TEXT_DOCUMENT_DID_CLOSE, None, documents.did_close),
    (lsp.NOTEBOOK_DOCUMENT_DID_OPEN, None, notebooks.did_open),
    (lsp.NOTEBOOK_DOCUMENT_DID_CHANGE, None, notebooks.did_change),
    (lsp.NOTEBOOK_DOCUMENT_DID_SAVE, None, notebooks.did_save),
    (lsp.NOTEBOOK_DOCUMENT_DID_CLOSE, None, notebooks.did_close),
    (lsp.TEXT_DOCUMENT_DIAGNOSTIC, diagnostics.OPTIONS, diagnostics.pull_diagnostics),
    (lsp.TEXT_DOCUMENT_HOVER, None, hover.hover),
    (lsp.TEXT_DOCUMENT_CODE_ACTION, fixes.OPTIONS, fixes.code_action),
    (lsp.CODE_ACTION_RESOLVE, None, fixes.code_action_resolve),
]
COMMANDS: List[Tuple[str, Callable[..., Any]]] = [
    (act.FIX_ALL_COMMAND, fixes.fix_all_command),
]


def register(ls: GradguardServer) -> None:
    for method, options, handler in FEATURES:
        ls.feature(method, options)(handler)
    for name, command in COMMANDS:
        ls.command(name)(command)
