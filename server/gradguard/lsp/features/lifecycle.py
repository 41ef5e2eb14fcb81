"""initialize / initialized / shutdown / exit, and the workspace's settings and files changing."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from lsprotocol import types as lsp

from gradguard import __version__
from gradguard.lsp.convert import Codec
from gradguard.lsp.document import LspWorkspace, encoding_name
from gradguard.lsp.hover import hover_shows_diagnostics
from gradguard.lsp.language_server import SYNC_KIND, GradguardServer
from gradguard.lsp.logs import ClientLogHandler

log = logging.getLogger("gradguard.lsp")


def initialize(ls: GradguardServer, params: lsp.InitializeParams) -> None:
    # pygls made the (empty) workspace just before: ours keeps documents with
    # LSP's line ends (lsp/document.py), text files and notebook cells alike.
    # pygls has no public way to hand it another workspace.
    ls.protocol._workspace = LspWorkspace.replacing(ls.workspace, SYNC_KIND)
    ls.locale = params.locale
    ls.client_name = params.client_info.name if params.client_info else None
    ls.hover_shows_diagnostics = hover_shows_diagnostics(ls.client_name)
    ls.codec = Codec(encoding_name(ls.workspace.position_encoding))
    ls.publisher.pull = ls.cap("text_document.diagnostic") is not None
    ls.settings_ready = asyncio.Event()
    if ls.client_handler is None:
        ls.client_handler = ClientLogHandler(ls, asyncio.get_event_loop())
        logging.getLogger("gradguard").addHandler(ls.client_handler)
    ls.apply_settings(params.initialization_options, "initializationOptions")
    ls.set_log_level()


async def initialized(ls: GradguardServer, params: lsp.InitializedParams) -> None:
    try:
        if ls.cap("workspace.did_change_configuration.dynamic_registration", False):
            try:
                await asyncio.wait_for(
                    ls.client_register_capability_async(
                        lsp.RegistrationParams(
                            registrations=[
                                lsp.Registration(id="gradguard-config", method=lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
                            ]
                        )
                    ),
                    5.0,
                )
            except Exception as e:
                log.debug("could not register for configuration changes: %s", e)
        await ls.pull_configuration()
    finally:
        if ls.settings_ready is not None:
            ls.settings_ready.set()
    log.info(
        "gradguard %s (Python %s) ready for %s; position encoding %s; diagnostics %s; language %s; hover %s; settings %s",
        __version__,
        sys.version.split()[0],
        ls.client_name or "an unnamed client",
        ls.codec.encoding,
        "pull" if ls.publisher.pull else "push",
        ls.lang,
        "without the message (the client's hover shows it)" if ls.hover_shows_diagnostics else "with the message",
        ls.settings.as_dict(),
    )


def shutdown(ls: GradguardServer, params: Any) -> None:
    ls.shutdown_requested = True
    for t in ls.targets.values():
        if t.task is not None:
            t.task.cancel()
    ls.executor.shutdown(wait=False, cancel_futures=True)
    # The requests still in flight (a Fix All waiting for the client's answer to its
    # workspace/applyEdit, a code action still computing) are cancelled here, over a
    # copy of pygls's table: pygls cancels them after this handler while iterating the
    # table itself, a cancelled request's callback removes it from that table, and the
    # shutdown was answered with "dictionary changed size during iteration".
    protocol = ls.protocol
    current = getattr(protocol, "msg_id", None)
    for msg_id, future in list(getattr(protocol, "_request_futures", {}).items()):
        if msg_id != current and not future.done():
            future.cancel()


def on_exit(ls: GradguardServer, params: Any) -> None:
    # pygls computes the same status, but its SystemExit is swallowed by its
    # own loop and the process ended with 0 whatever came before
    ls.exit_code = 0 if ls.shutdown_requested else 1
    if ls.exit_code:
        log.warning("exit without shutdown: exiting with status 1")


async def did_change_configuration(ls: GradguardServer, params: lsp.DidChangeConfigurationParams) -> None:
    raw = params.settings
    if isinstance(raw, dict) and ("gradguard" in raw or raw and not ls.cap("workspace.configuration", False)):
        ls.apply_settings(raw, "didChangeConfiguration")
        ls.editor.folders = []  # a client that pushes settings does not scope them
    else:
        await ls.pull_configuration()
    ls.forget_configs()
    ls.refresh_all()


async def did_change_folders(ls: GradguardServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    await ls.pull_configuration()  # per-folder settings
    ls.forget_configs()
    ls.refresh_all()


def did_change_watched_files(ls: GradguardServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    if any(c.uri.endswith("pyproject.toml") for c in params.changes):
        ls.forget_configs()
        ls.refresh_all()
