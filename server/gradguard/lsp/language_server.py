"""The language server's state and the life of a target: snapshot, debounce,
analysis on a worker thread, publishing, then the slower look-up of imported
names. The LSP handlers are in :mod:`gradguard.lsp.features`; they call this.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.protocol import default_converter

from gradguard import __version__
from gradguard.engine.config import Config
from gradguard.engine.document import CheckResult
from gradguard.lsp.configuration import EditorSettings, ProjectConfigs
from gradguard.lsp.convert import Codec, Lines, RawJson, SourceMap
from gradguard.lsp.logs import LEVELS, ClientLogHandler
from gradguard.lsp.publishing import Publisher
from gradguard.lsp.settings import Settings, resolve_language
from gradguard.lsp.target import Analysed, Target, path_of
from gradguard.lsp.wire import GradguardProtocol
from gradguard.lsp.worker import (
    ANALYSIS_THREADS, MAX_SOURCE_CHARS, MAX_SOURCE_LINES, DaemonExecutor, analysable, compute, resolve_facts,
)

log = logging.getLogger("gradguard.lsp")

NAME = "gradguard"
SYNC_KIND = lsp.TextDocumentSyncKind.Incremental


def _as_is(value: Any) -> Any:
    return value


def _converter() -> Any:
    """pygls's converter, passing diagnostics built as they travel
    (convert.diagnostic_json) through instead of taking them apart."""
    converter = default_converter()
    converter.register_unstructure_hook(RawJson, _as_is)
    return converter


class GradguardServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            NAME,
            __version__,
            protocol_cls=GradguardProtocol,
            converter_factory=_converter,
            text_document_sync_kind=SYNC_KIND,
            notebook_document_sync=lsp.NotebookDocumentSyncOptions(
                notebook_selector=[
                    lsp.NotebookDocumentFilterWithCells(
                        notebook="*", cells=[lsp.NotebookCellLanguage(language="python")]
                    )
                ],
                save=True,
            ),
        )
        self.editor = EditorSettings()
        self.projects = ProjectConfigs(self.show_error)
        # pygls has no public way to send a message already in its wire form
        self.publisher = Publisher(self.protocol._send_data)
        self.locale: Optional[str] = None
        self.codec = Codec("utf-16")
        self.targets: Dict[str, Target] = {}
        self.cell_owner: Dict[str, str] = {}  # cell URI → notebook URI
        self.executor = DaemonExecutor(ANALYSIS_THREADS)
        self.settings_ready: Optional[asyncio.Event] = None
        self.client_handler: Optional[ClientLogHandler] = None
        self.shutdown_requested = False
        # the process's exit status: `exit` before `shutdown` is 1 (the specification's rule)
        self.exit_code = 0
        self.client_name: Optional[str] = None
        self.hover_shows_diagnostics = False  # the client's hover shows the message itself (VS Code)

    # -- helpers ------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """The global (window) settings."""
        return self.editor.current

    @property
    def lang(self) -> str:
        return resolve_language(self.settings.language, self.locale)

    def show_error(self, message: str) -> None:
        log.error(message)
        try:
            self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))
        except Exception:  # no client yet / connection gone
            pass

    def cap(self, dotted: str, default: Any = None) -> Any:
        cur: Any = getattr(self.protocol, "client_capabilities", None)
        for name in dotted.split("."):
            if cur is None:
                return default
            cur = getattr(cur, name, None)
        return default if cur is None else cur

    def set_log_level(self) -> None:
        if self.client_handler is not None:
            level = self.settings.log_level
            self.client_handler.setLevel(LEVELS.get(level, logging.CRITICAL + 10))

    def workspace_root(self) -> Optional[str]:
        try:
            return self.workspace.root_path
        except RuntimeError:
            return None

    def settings_for(self, target: Optional[Target]) -> Settings:
        """The settings of the workspace folder holding the target (else the global ones)."""
        return self.editor.for_path(target.path if target is not None else None)

    def project_config(self, path: Optional[str]) -> Config:
        """The nearest pyproject's [tool.gradguard]; a broken one → error message + defaults."""
        return self.projects.for_path(path, self.workspace_root())

    def config_for(self, target: Target) -> Config:
        return self.settings_for(target).apply_to(self.project_config(target.path))

    def target_for(self, uri: str) -> Optional[Target]:
        owner = self.cell_owner.get(uri)
        return self.targets.get(owner or uri)

    # -- snapshots ------------------------------------------------------------
    def snapshot(self, target: Target) -> Optional[Tuple[str, SourceMap, int]]:
        """(source, map, version) of the target's current text, on the event loop."""
        ws = self.workspace
        if target.kind == "text":
            doc = ws.text_documents.get(unquote(target.key))  # pygls keys documents by the unquoted URI
            if doc is None:
                return None
            text = doc.source
            return analysable(text), SourceMap.single(target.key, text, doc.version), doc.version or 0
        nb = ws.get_notebook_document(notebook_uri=target.key)
        if nb is None:
            return None
        cells = []
        for cell in nb.cells:
            if cell.kind != lsp.NotebookCellKind.Code:
                continue
            td = ws.text_documents.get(unquote(cell.document))
            if td is None:
                continue
            if td.language_id and td.language_id.lower() not in ("python", "python3"):
                continue
            cells.append((cell.document, td.source, td.version))
        source, smap = SourceMap.of_cells(cells)
        return analysable(source), smap, nb.version

    # -- analysis -------------------------------------------------------------
    def schedule(self, target: Target, delay: Optional[float] = None) -> None:
        if delay is None:
            delay = self.settings.debounce / 1000.0
        if target.task is not None and not target.task.done():
            target.task.cancel()
        target.generation += 1
        target.task = asyncio.ensure_future(self._debounced(target, target.generation, delay))

    async def _debounced(self, target: Target, generation: int, delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            if self.settings_ready is not None and not self.settings_ready.is_set():
                try:
                    await asyncio.wait_for(self.settings_ready.wait(), 3.0)
                except asyncio.TimeoutError:
                    pass
            ok = await self.analyse(target)
            if not ok or generation != target.generation or self.targets.get(target.key) is not target:
                return  # superseded by a newer edit, or closed meanwhile
            self.publish(target)
            self.schedule_resolve(target)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("analysis of %s failed", target.key)

    async def analyse(self, target: Target) -> bool:
        """Bring ``target.analysed`` up to date with its text and settings."""
        async with target.lock:
            snap = self.snapshot(target)
            if snap is None:
                return False
            source, smap, version = snap
            config = self.config_for(target)
            digest = hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=12).digest()
            enabled = self.settings_for(target).enable
            key = (version, config, digest, enabled)
            before = target.analysed
            if before is not None and before.key == key:
                target.analysed = replace(before, smap=smap)  # same text; part versions may have moved
                return True
            if not enabled:
                result = CheckResult(())
            elif len(source) > MAX_SOURCE_CHARS or source.count("\n") > MAX_SOURCE_LINES:
                if not target.too_big_logged:
                    log.warning(
                        "%s: %d characters / %d lines, over the limit (%d / %d): not analysed",
                        target.key, len(source), source.count("\n") + 1, MAX_SOURCE_CHARS, MAX_SOURCE_LINES,
                    )
                    target.too_big_logged = True
                result = CheckResult(())
            else:
                loop = asyncio.get_running_loop()
                computed, lines = await loop.run_in_executor(self.executor, compute, target, source, config)
                if computed is None:
                    # the analysis failed (logged): the previous diagnostics describe an older
                    # text, so they go; the file says it was not analysed
                    computed = CheckResult((), None, (), ((0, "<module>", "*"),))
                result = computed
                if lines is not None and len(smap.parts) == 1 and isinstance(smap.parts[0].lines, Lines):
                    smap.parts[0].lines.adopt(source, lines)  # the analysis split this very text
            target.analysed = Analysed(result, smap, version, key)
            if result.syntax_error is not None:
                log.debug("%s: syntax error at %s; published the findings outside it", target.key, result.syntax_error)
            return True

    async def current(self, target: Target, latest: bool = False) -> Optional[Analysed]:
        """The analysis of the target's current text, computing it if needed. With
        ``run: onSave`` it is the analysis of what was last saved, unless ``latest``
        (Fix All: its edits are for the text in the editor, saved or not)."""
        if not latest and self.settings_for(target).run == "onSave" and target.analysed is not None:
            return target.analysed
        try:
            ok = await self.analyse(target)
        except Exception:
            log.exception("analysis of %s failed", target.key)
            ok = target.analysed is not None
        if not ok:
            return None
        return target.analysed

    def schedule_resolve(self, target: Target) -> None:
        """Look up names imported from the user's other modules, after the fast
        pass has published; if that changes what is known, analyse again."""
        if target.path is None or not self.settings_for(target).enable:
            return
        if target.resolve_task is not None and not target.resolve_task.done():
            target.resolve_task.cancel()
        target.resolve_task = asyncio.ensure_future(self._resolve(target))

    async def _resolve(self, target: Target) -> None:
        try:
            snap = self.snapshot(target)
            if snap is None or len(snap[0]) > MAX_SOURCE_CHARS:
                return
            root = self.project_config(target.path).root or self.workspace_root() or os.path.dirname(target.path or "")
            loop = asyncio.get_running_loop()
            facts = await loop.run_in_executor(self.executor, resolve_facts, snap[0], target.path, root)
            if facts is None or facts == target.external or self.targets.get(target.key) is not target:
                return
            log.debug("%s: %d fact(s) about imported names; re-analysing", target.key, len(facts))
            target.external = facts
            if target.analysed is not None:
                target.analysed = replace(target.analysed, key=None)
            self.schedule(target, 0)
            if self.publisher.pull and target.kind == "text" and self.cap("workspace.diagnostics.refresh_support", False):
                self.workspace_diagnostic_refresh(None)  # pulled documents: ask the client to pull again
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("resolving imports of %s failed", target.key)

    # -- publishing -----------------------------------------------------------
    def diagnostics_for(self, target: Target) -> Dict[str, List[Dict[str, Any]]]:
        """The target's diagnostics per URI, as they travel (JSON objects)."""
        return self.publisher.diagnostics_for(target, self.codec, self.lang)

    def publish(self, target: Target) -> None:
        self.publisher.publish(target, self.codec, self.lang)

    def clear(self, uri: str) -> None:
        self.publisher.clear(uri)

    def refresh_all(self) -> None:
        for target in list(self.targets.values()):
            self.schedule(target, 0)
        if self.publisher.pull and self.cap("workspace.diagnostics.refresh_support", False):
            try:
                self.workspace_diagnostic_refresh(None)
            except Exception:
                log.debug("workspace/diagnostic/refresh failed", exc_info=True)

    def open_target(self, uri: str, kind: str) -> Target:
        target = self.targets.get(uri)
        if target is None:
            target = self.targets[uri] = Target(uri, kind, path_of(uri))
        return target

    def close_target(self, target: Target, extra_uris: Sequence[str] = ()) -> None:
        for task in (target.task, target.resolve_task):
            if task is not None and not task.done():
                task.cancel()
        target.generation += 1
        self.targets.pop(target.key, None)
        uris = set(target.published) | set(extra_uris)
        if target.kind == "text":
            uris.add(target.key)
        for uri in sorted(uris):
            self.clear(uri)
            self.cell_owner.pop(uri, None)

    # -- settings ---------------------------------------------------------------
    def apply_settings(self, raw: Any, where: str) -> None:
        """A settings snapshot on top of the initializationOptions (not of the
        previous snapshot: a key the user removed goes back to its default)."""
        changed, problems = self.editor.apply(raw, where)
        for p in problems:
            self.show_error(p)
        self.set_log_level()
        if changed:
            log.info("settings (%s): %s", where, self.settings.as_dict())

    def forget_configs(self) -> None:
        self.projects.forget()

    async def pull_configuration(self) -> bool:
        """Ask the client for section ``gradguard``: globally, and for each
        workspace folder (resource-scoped settings may differ per folder)."""
        if not self.cap("workspace.configuration", False):
            return False
        try:
            folders = list(self.workspace.folders.values())
        except RuntimeError:
            folders = []
        items = [lsp.ConfigurationItem(section="gradguard")]
        items += [lsp.ConfigurationItem(scope_uri=f.uri, section="gradguard") for f in folders]
        try:
            answers = await asyncio.wait_for(self.workspace_configuration_async(lsp.ConfigurationParams(items=items)), 5.0)
        except Exception as e:
            log.warning("workspace/configuration failed: %s", e)
            return False
        answers = list(answers or [])
        if not answers or not isinstance(answers[0], dict):
            return False
        self.apply_settings(answers[0], "workspace/configuration")
        per_folder: List[Tuple[str, Any]] = []
        for folder, raw in zip(folders, answers[1:]):
            path = path_of(folder.uri)
            if path is not None:
                per_folder.append((path, raw))
        self.editor.apply_folders(answers[0], per_folder, self.show_error)
        return True
