"""gradguard's language server (pygls 2): thin glue over the analysis core.

* documents (and notebooks, as one program) are kept as incremental
  :class:`gradguard.engine.Document`\\ s and re-analysed on a worker thread,
  debounced per document; work made stale by a newer edit is dropped;
* findings become diagnostics (push; pull when the client supports it),
  with fixes carried in ``data`` for code actions;
* hover explains findings and a few autograd idioms, in English or Chinese.

No detection logic lives here. Run with ``gradguard serve`` or
``python -I -m gradguard serve`` (never a plain ``python -m`` in a workspace:
see docs/server.md and ``gradguard/__init__.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import sys
import threading
import queue
import re
from concurrent.futures import Executor, Future
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from gradguard import __version__
from gradguard.engine.config import Config, ConfigError, find_pyproject, load_config_file
from gradguard.engine.document import CheckResult, Document
from gradguard.engine.fixing import fix_until_stable, preferred_edits
from gradguard.model.text import apply_text_edits, split_lines
from gradguard.lsp import actions as act
from gradguard.lsp.document import LspWorkspace, encoding_name
from gradguard.lsp.convert import Codec, Lines, RawJson, SourceMap, diagnostics_json, fixes_data, range_json
from gradguard.lsp.hover import finding_markdown, hover_shows_diagnostics, idiom_at, idiom_markdown
from gradguard.lsp.notebook import build_source
from gradguard.lsp.settings import Settings, parse_settings, resolve_language
from gradguard.lsp.wire import BoundedInput, GradguardProtocol

log = logging.getLogger("gradguard.lsp")

NAME = "gradguard"
# Larger buffers are not analysed (logged once; the server keeps serving). Parsing
# holds the GIL, and a 30k-line parse can take seconds on a slow machine.
MAX_SOURCE_CHARS = 1_000_000
MAX_SOURCE_LINES = 20_000
ANALYSIS_THREADS = 2  # a slow document must not starve the others
_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


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
        self.result: Optional[CheckResult] = None
        self.result_key: Optional[tuple] = None  # (version, config, source hash)
        self.result_smap: Optional[SourceMap] = None
        self.result_version: Optional[int] = None
        self.published: Set[str] = set()  # part URIs that hold our diagnostics
        # facts about names imported from the user's other files (analysis/resolve), found
        # off the keystroke path after a publish; read by the worker thread
        self.external: Dict[str, object] = {}
        self.resolve_task: Optional[asyncio.Task] = None
        self.too_big_logged = False


class GradguardServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            NAME,
            __version__,
            protocol_cls=GradguardProtocol,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            notebook_document_sync=lsp.NotebookDocumentSyncOptions(
                notebook_selector=[
                    lsp.NotebookDocumentFilterWithCells(
                        notebook="*", cells=[lsp.NotebookCellLanguage(language="python")]
                    )
                ],
                save=True,
            ),
        )
        self.settings = Settings()  # global (window) settings
        self.base_settings = Settings()
        # per workspace folder, from workspace/configuration with a scopeUri:
        # (folder path + separator, settings), longest path first
        self.folder_settings: List[Tuple[str, Settings]] = []
        self.locale: Optional[str] = None
        self.codec = Codec("utf-16")
        self.pull = False  # the client pulls diagnostics for text documents
        self.targets: Dict[str, Target] = {}
        self.cell_owner: Dict[str, str] = {}  # cell URI → notebook URI
        self.executor = DaemonExecutor(ANALYSIS_THREADS)
        self.settings_ready: Optional[asyncio.Event] = None
        self._pyproject_dirs: Dict[str, Optional[str]] = {}
        self._configs: Dict[Tuple[str, float], Any] = {}
        self._reported_config_errors: Set[str] = set()
        self._client_handler: Optional[ClientLogHandler] = None
        # the process's exit status: `exit` before `shutdown` is 1 (the specification's rule)
        self.exit_code = 0
        self.client_name: Optional[str] = None
        self.hover_shows_diagnostics = False  # the client's hover shows the message itself (VS Code)
        # diagnostics are built as they travel (convert.diagnostic_json): the
        # converter passes those values through instead of taking them apart
        self.protocol._converter.register_unstructure_hook(RawJson, _as_is)

    # -- helpers ------------------------------------------------------------
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
        if self._client_handler is not None:
            level = self.settings.log_level
            self._client_handler.setLevel(_LEVELS.get(level, logging.CRITICAL + 10))

    # -- configuration ------------------------------------------------------
    def project_config(self, path: Optional[str]) -> Config:
        """The nearest pyproject's [tool.gradguard]; a broken one → error message + defaults."""
        start = path or self.workspace_root()
        if not start:
            return Config()
        d = str(Path(start).parent if path else Path(start))
        if d not in self._pyproject_dirs:
            try:
                self._pyproject_dirs[d] = find_pyproject(d)
            except OSError:
                self._pyproject_dirs[d] = None
        found = self._pyproject_dirs[d]
        if found is None:
            return Config()
        try:
            mtime = os.stat(found).st_mtime
        except OSError:
            return Config()
        key = (str(found), mtime)
        cached = self._configs.get(key)
        if cached is None:
            try:
                cached = load_config_file(found)
            except ConfigError as e:
                cached = e
            except Exception as e:  # never let a config file take the server down
                cached = ConfigError(f"{found}: {e}")
            self._configs[key] = cached
        if isinstance(cached, Exception):
            msg = f"gradguard: {cached} — using the default configuration"
            if msg not in self._reported_config_errors:
                self._reported_config_errors.add(msg)
                self.show_error(msg)
            return Config()
        return cached

    def workspace_root(self) -> Optional[str]:
        try:
            return self.workspace.root_path
        except RuntimeError:
            return None

    def settings_for(self, target: Optional[Target]) -> Settings:
        """The settings of the workspace folder holding the target (else the global ones)."""
        path = target.path if target is not None else None
        if path and self.folder_settings:
            for folder, settings in self.folder_settings:
                if path.startswith(folder):
                    return settings
        return self.settings

    def config_for(self, target: Target) -> Config:
        return self.settings_for(target).apply_to(self.project_config(target.path))

    def forget_configs(self) -> None:
        self._pyproject_dirs.clear()
        self._configs.clear()
        self._reported_config_errors.clear()

    # -- snapshots ------------------------------------------------------------
    def snapshot(self, target: Target) -> Optional[Tuple[str, SourceMap, int]]:
        """(source, map, version) of the target's current text, on the event loop."""
        ws = self.workspace
        if target.kind == "text":
            doc = ws.text_documents.get(unquote(target.key))  # pygls keys documents by the unquoted URI
            if doc is None:
                return None
            text = doc.source
            return _analysable(text), SourceMap.single(target.key, text, doc.version), doc.version or 0
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
        source, smap = build_source(cells)
        return _analysable(source), smap, nb.version

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
        """Bring ``target.result`` up to date with its text and settings."""
        async with target.lock:
            snap = self.snapshot(target)
            if snap is None:
                return False
            source, smap, version = snap
            config = self.config_for(target)
            digest = hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=12).digest()
            enabled = self.settings_for(target).enable
            key = (version, config, digest, enabled)
            if target.result is not None and target.result_key == key:
                target.result_smap = smap  # same text; part versions may have moved
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
                result, lines = await loop.run_in_executor(self.executor, _compute, target, source, config)  # type: ignore[arg-type]
                if result is None:
                    return target.result is not None  # keep the previous diagnostics
                if lines is not None and len(smap.parts) == 1 and isinstance(smap.parts[0].lines, Lines):
                    smap.parts[0].lines.adopt(source, lines)  # the analysis split this very text
            target.result, target.result_key, target.result_smap, target.result_version = result, key, smap, version
            if result.syntax_error is not None:
                log.debug("%s: syntax error at %s; published the findings outside it", target.key, result.syntax_error)
            return True

    async def current(self, target: Target) -> Optional[Tuple[CheckResult, SourceMap]]:
        """The result for the target's current text, computing it if needed."""
        if self.settings_for(target).run == "onSave" and target.result is not None:
            return target.result, target.result_smap  # type: ignore[return-value]
        try:
            ok = await self.analyse(target)
        except Exception:
            log.exception("analysis of %s failed", target.key)
            ok = target.result is not None
        if not ok or target.result is None or target.result_smap is None:
            return None
        return target.result, target.result_smap

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
            facts = await loop.run_in_executor(self.executor, _resolve_facts, snap[0], target.path, root)
            if facts is None or facts == target.external or self.targets.get(target.key) is not target:
                return
            log.debug("%s: %d fact(s) about imported names; re-analysing", target.key, len(facts))
            target.external = facts
            target.result_key = None
            self.schedule(target, 0)
            if self.pull and target.kind == "text" and self.cap("workspace.diagnostics.refresh_support", False):
                self.workspace_diagnostic_refresh(None)  # pulled documents: ask the client to pull again
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("resolving imports of %s failed", target.key)

    def diagnostics_for(self, target: Target) -> Dict[str, List[Dict[str, Any]]]:
        """The target's diagnostics per URI, as they travel (JSON objects)."""
        if target.result is None or target.result_smap is None:
            return {}
        return diagnostics_json(target.result.findings, target.result_smap, self.codec, self.lang)

    def publish(self, target: Target) -> None:
        if target.result_smap is None:
            return
        if target.kind == "text" and self.pull:
            return  # the client pulls; pushing too would show everything twice
        per_uri = self.diagnostics_for(target)
        parts = {p.uri: p for p in target.result_smap.parts}
        for uri, diags in per_uri.items():
            part = parts.get(uri)
            self._publish_json(uri, diags, part.version if part else None)
        for uri in target.published - set(per_uri):
            self.clear(uri)  # a cell that left the notebook
        target.published = set(per_uri)
        n = sum(len(v) for v in per_uri.values())
        log.debug("published %d diagnostic(s) for %s (version %s)", n, target.key, target.result_version)

    def clear(self, uri: str) -> None:
        self._publish_json(uri, [], None)

    def _publish_json(self, uri: str, diagnostics: List[Dict[str, Any]], version: Optional[int]) -> None:
        """textDocument/publishDiagnostics with diagnostics already in their wire
        form, handed to the transport as one JSON object. A notification's
        parameters are taken apart by their declared type, so a pass-through
        value cannot ride in one; without pygls's sender, they are structured
        and sent the documented way."""
        params: Dict[str, Any] = {"uri": uri, "diagnostics": diagnostics}
        if version is not None:
            params["version"] = version
        send = getattr(self.protocol, "_send_data", None)
        if send is None:  # pragma: no cover  (a pygls without it)
            self.text_document_publish_diagnostics(self.protocol._converter.structure(params, lsp.PublishDiagnosticsParams))
            return
        send({"jsonrpc": "2.0", "method": lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, "params": params})

    def target_for(self, uri: str) -> Optional[Target]:
        owner = self.cell_owner.get(uri)
        return self.targets.get(owner or uri)

    def refresh_all(self) -> None:
        for target in list(self.targets.values()):
            self.schedule(target, 0)
        if self.pull and self.cap("workspace.diagnostics.refresh_support", False):
            try:
                self.workspace_diagnostic_refresh(None)
            except Exception:
                log.debug("workspace/diagnostic/refresh failed", exc_info=True)

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
        new, problems = parse_settings(raw, self.base_settings)
        if where == "initializationOptions":
            self.base_settings = new
        for p in problems:
            self.show_error(p)
        changed = new != self.settings
        self.settings = new
        self.set_log_level()
        if changed:
            log.info("settings (%s): %s", where, new.as_dict())

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
        reported: Set[str] = set()
        per_folder: List[Tuple[str, Settings]] = []
        for folder, raw in zip(folders, answers[1:]):
            path = _path_of(folder.uri)
            if path is None or not isinstance(raw, dict):
                continue
            folder_settings, problems = parse_settings(raw, self.base_settings)
            for p in problems:
                if p not in reported:
                    reported.add(p)
                    if p not in parse_settings(answers[0], self.base_settings)[1]:
                        self.show_error(p)
            # window-scoped keys are the global ones
            folder_settings = replace(
                folder_settings, debounce=self.settings.debounce, language=self.settings.language, log_level=self.settings.log_level
            )
            if folder_settings != self.settings:
                per_folder.append((os.path.join(os.path.abspath(path), ""), folder_settings))
                log.info("settings for folder %s: %s", path, folder_settings.as_dict())
        self.folder_settings = sorted(per_folder, key=lambda fs: -len(fs[0]))
        return True


class DaemonExecutor(Executor):
    """Worker threads that never delay the process's exit.

    ``ThreadPoolExecutor`` joins its threads at interpreter exit, so a
    long analysis still running when the client says ``exit`` would keep the
    server alive; analysis has nothing to save, so these threads are daemons.
    """

    def __init__(self, workers: int):
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._closed = False
        for i in range(workers):
            threading.Thread(target=self._work, name=f"gradguard-analysis-{i}", daemon=True).start()
        self._workers = workers

    def submit(self, fn, /, *args, **kwargs):
        fut: Future = Future()
        if self._closed:
            fut.cancel()
            fut.set_running_or_notify_cancel()
            return fut
        self._queue.put((fut, fn, args, kwargs))
        return fut

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fut, fn, args, kwargs = item
            if not fut.set_running_or_notify_cancel():
                continue  # cancelled while queued: stale work is dropped
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:
                fut.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in range(self._workers):
            self._queue.put(None)


def _resolve_facts(source: str, path: Optional[str], root: Optional[str]) -> Optional[Dict[str, object]]:
    try:
        from gradguard.engine.document import resolve_external_facts

        return resolve_external_facts(source, path, root)
    except Exception:
        log.debug("import resolution failed", exc_info=True)
        return None


def _compute(target: Target, source: str, config: Config) -> Tuple[Optional[CheckResult], Optional[List[str]]]:
    """On a worker thread: incremental analysis, restarting from scratch if the
    incremental state ever fails; with the lines the analysis split ``source``
    into. (None, None): analysis is impossible (logged)."""
    with target.doc_lock:  # a cancelled run may still be finishing on another thread
        result = _compute_locked(target, source, config)
        doc = target.doc
        return result, (doc.lines if result is not None and doc is not None else None)


def _log_internal(target: Target, result: CheckResult) -> CheckResult:
    for code, unit, err in result.internal_errors:
        log.error("internal error: rule %s failed on %s in %s (%s); please report it", code, unit, target.key, err)
    return result


def _compute_locked(target: Target, source: str, config: Config) -> Optional[CheckResult]:
    facts = target.external
    try:
        if target.doc is None:
            target.doc = Document(source, target.path, config, facts)
            return _log_internal(target, target.doc.result())
        target.doc.set_config(config)
        target.doc.set_external_facts(facts)
        return _log_internal(target, target.doc.update(source))
    except Exception:
        log.exception("incremental analysis of %s failed; retrying from scratch", target.key)
    try:
        target.doc = Document(source, target.path, config, facts)
        return target.doc.result()
    except Exception:
        log.exception("analysis of %s failed", target.key)
        target.doc = None
        return None


class ClientLogHandler(logging.Handler):
    """Forwards log records to the client's output (``window/logMessage``)."""

    _TYPES = [
        (logging.ERROR, lsp.MessageType.Error),
        (logging.WARNING, lsp.MessageType.Warning),
        (logging.INFO, lsp.MessageType.Info),
        (0, lsp.MessageType.Log),
    ]

    def __init__(self, server: GradguardServer, loop: asyncio.AbstractEventLoop):
        super().__init__()
        self.server = server
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            mtype = next(t for lvl, t in self._TYPES if record.levelno >= lvl)
            params = lsp.LogMessageParams(type=mtype, message=self.format(record))
            if threading.get_ident() == self.loop_thread:
                self.server.window_log_message(params)
            elif not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self._send, params)
        except Exception:  # logging must never raise
            pass

    def _send(self, params: lsp.LogMessageParams) -> None:
        try:
            self.server.window_log_message(params)
        except Exception:
            pass


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _analysable(text: str) -> str:
    """JSON text can hold lone surrogates, which no parser accepts; each becomes
    U+FFFD (one code point for one: every position stays where it was)."""
    try:
        text.encode("utf-8")  # the usual case, decided in C: no lone surrogate
        return text
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)


def _path_of(uri: str) -> Optional[str]:
    if not uri.startswith("file:"):
        return None
    try:
        return to_fs_path(uri)
    except Exception:
        return None


def create_server() -> GradguardServer:
    ls = GradguardServer()

    # ---- lifecycle --------------------------------------------------------------
    @ls.feature(lsp.INITIALIZE)
    def initialize(ls: GradguardServer, params: lsp.InitializeParams) -> None:
        # pygls made the (empty) workspace just before: ours keeps documents with
        # LSP's line ends (lsp/document.py), text files and notebook cells alike
        ls.protocol._workspace = LspWorkspace.replacing(ls.workspace)
        ls.locale = params.locale
        ls.client_name = params.client_info.name if params.client_info else None
        ls.hover_shows_diagnostics = hover_shows_diagnostics(ls.client_name)
        ls.codec = Codec(encoding_name(ls.workspace.position_encoding))
        ls.pull = ls.cap("text_document.diagnostic") is not None
        ls.settings_ready = asyncio.Event()
        if ls._client_handler is None:
            ls._client_handler = ClientLogHandler(ls, asyncio.get_event_loop())
            logging.getLogger("gradguard").addHandler(ls._client_handler)
        ls.apply_settings(params.initialization_options, "initializationOptions")
        ls.set_log_level()

    @ls.feature(lsp.INITIALIZED)
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
            "pull" if ls.pull else "push",
            ls.lang,
            "without the message (the client's hover shows it)" if ls.hover_shows_diagnostics else "with the message",
            ls.settings.as_dict(),
        )

    @ls.feature(lsp.SHUTDOWN)
    def shutdown(ls: GradguardServer, params: Any) -> None:
        for t in ls.targets.values():
            if t.task is not None:
                t.task.cancel()
        ls.executor.shutdown(wait=False, cancel_futures=True)

    @ls.feature(lsp.EXIT)
    def on_exit(ls: GradguardServer, params: Any) -> None:
        # pygls computes the same status, but its SystemExit is swallowed by its
        # own loop and the process ended with 0 whatever came before
        ls.exit_code = 0 if ls.protocol._shutdown else 1
        if ls.exit_code:
            log.warning("exit without shutdown: exiting with status 1")

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: GradguardServer, params: lsp.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if isinstance(raw, dict) and ("gradguard" in raw or raw and not ls.cap("workspace.configuration", False)):
            ls.apply_settings(raw, "didChangeConfiguration")
            ls.folder_settings = []  # a client that pushes settings does not scope them
        else:
            await ls.pull_configuration()
        ls.forget_configs()
        ls.refresh_all()

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(ls: GradguardServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        await ls.pull_configuration()  # per-folder settings
        ls.forget_configs()
        ls.refresh_all()

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: GradguardServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        if any(c.uri.endswith("pyproject.toml") for c in params.changes):
            ls.forget_configs()
            ls.refresh_all()

    # ---- text documents --------------------------------------------------------
    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GradguardServer, params: lsp.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri in ls.cell_owner:
            return
        target = ls.targets.get(uri)
        if target is None:
            target = ls.targets[uri] = Target(uri, "text", _path_of(uri))
        ls.schedule(target, 0)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GradguardServer, params: lsp.DidChangeTextDocumentParams) -> None:
        target = ls.targets.get(params.text_document.uri)
        if target is None or target.kind != "text":
            return
        if ls.settings_for(target).run == "onType":
            ls.schedule(target)
        # onSave: an analysis started by the last save still publishes (for the saved text)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GradguardServer, params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.endswith("pyproject.toml"):
            ls.forget_configs()
            ls.refresh_all()
            return
        target = ls.targets.get(uri)
        if target is not None:
            ls.schedule(target, 0)
        for other in ls.targets.values():  # it may define names the others import
            if other is not target:
                ls.schedule_resolve(other)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GradguardServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        target = ls.targets.get(uri)
        if target is not None and target.kind == "text":
            ls.close_target(target)
        elif uri not in ls.cell_owner:
            ls.clear(uri)

    # ---- notebooks ----------------------------------------------------------------
    @ls.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def nb_did_open(ls: GradguardServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        target = ls.targets.get(uri)
        if target is None:
            target = ls.targets[uri] = Target(uri, "notebook", _path_of(uri))
        for cell in params.cell_text_documents:
            ls.cell_owner[cell.uri] = uri
        ls.schedule(target, 0)

    @ls.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def nb_did_change(ls: GradguardServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        target = ls.targets.get(uri)
        if target is None:
            return
        structure = params.change.cells.structure if params.change.cells else None
        if structure is not None:
            for cell in structure.did_open or ():
                ls.cell_owner[cell.uri] = uri
            for cell in structure.did_close or ():  # type: ignore[assignment]
                ls.cell_owner.pop(cell.uri, None)
                target.published.discard(cell.uri)
                ls.clear(cell.uri)  # at once: the cell is gone, whatever the debounce
        if structure is not None or ls.settings_for(target).run == "onType":
            ls.schedule(target, 0 if structure is not None else None)

    @ls.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def nb_did_save(ls: GradguardServer, params: lsp.DidSaveNotebookDocumentParams) -> None:
        target = ls.targets.get(params.notebook_document.uri)
        if target is not None:
            ls.schedule(target, 0)

    @ls.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def nb_did_close(ls: GradguardServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        cells = [c.uri for c in params.cell_text_documents]
        target = ls.targets.get(uri)
        if target is not None:
            ls.close_target(target, cells)
        else:
            for c in cells:
                ls.clear(c)

    # ---- pull diagnostics -----------------------------------------------------
    @ls.feature(
        lsp.TEXT_DOCUMENT_DIAGNOSTIC,
        lsp.DiagnosticOptions(identifier="gradguard", inter_file_dependencies=False, workspace_diagnostics=False),
    )
    async def pull_diagnostics(ls: GradguardServer, params: lsp.DocumentDiagnosticParams):
        uri = params.text_document.uri
        target = ls.targets.get(uri)
        if target is None or target.kind != "text":
            # notebook cells are pushed (see publish); unknown documents have nothing
            return lsp.RelatedFullDocumentDiagnosticReport(items=[])
        cur = await ls.current(target)
        if cur is None:
            return lsp.RelatedFullDocumentDiagnosticReport(items=[])
        items = ls.diagnostics_for(target).get(uri, [])
        result_id = _result_id(target, items)
        if params.previous_result_id == result_id:
            return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return RawJson(kind="full", resultId=result_id, items=items)

    # ---- hover --------------------------------------------------------------------
    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls: GradguardServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        uri = params.text_document.uri
        target = ls.target_for(uri)
        if target is None or not ls.settings_for(target).enable:
            return None
        cur = await ls.current(target)
        if cur is None:
            return None
        result, smap = cur
        pos = smap.from_client_position(uri, params.position, ls.codec)
        if pos is None:
            return None
        lang = ls.lang
        blocks: List[str] = []
        hits = [f for f in result.findings if f.range.contains(pos)]
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

    # ---- code actions -----------------------------------------------------------
    @ls.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(
            code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll, act.FIX_ALL_KIND],
            resolve_provider=True,
        ),
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
            ours = [d for d in params.context.diagnostics if act.is_ours(d)]
            fixes: List[lsp.CodeAction] = []
            suppress: List[lsp.CodeAction] = []
            seen_codes: Set[Tuple[str, int]] = set()
            for d in ours:
                # the fixes are the server's own, made from its result: a client's
                # diagnostic (its data included) only says which finding is meant
                data = await _lookup_data(ls, target, uri, d)
                parts = {p.uri for p in target.result_smap.parts} if target.result_smap else {uri}
                fixes.extend(act.quick_fixes(uri, d, data, td.version, allowed=parts))
                key = (str(d.code), d.range.start.line)
                if key not in seen_codes:
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
            if cur is not None and any(any(x.preferred for x in f.fixes) for f in cur[0].findings):
                out.append(
                    lsp.CodeAction(title=act.fix_all_title(lang), kind=act.FIX_ALL_KIND, data={"uri": uri, "gradguard": "fixAll"})
                )
        return out

    @ls.feature(lsp.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: GradguardServer, action: lsp.CodeAction) -> lsp.CodeAction:
        data = action.data
        if isinstance(data, dict) and data.get("gradguard") == "fixAll" and isinstance(data.get("uri"), str):
            action.edit = await fix_all_edit(ls, data["uri"]) or lsp.WorkspaceEdit(document_changes=[])
        return action

    @ls.command(act.FIX_ALL_COMMAND)
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
        edit = await fix_all_edit(ls, uri)
        if edit is None:
            return {"applied": False, "reason": "nothing to fix"}
        res = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label="gradguard: fix all"))
        return {"applied": bool(res.applied), "reason": res.failure_reason}

    return ls


def _as_is(value: Any) -> Any:
    return value


def _result_id(target: Target, items: List[Dict[str, Any]]) -> str:
    h = hashlib.blake2b(digest_size=8)
    h.update(repr(target.result_version).encode())
    for d in items:
        r = d["range"]
        h.update(repr((d["code"], r["start"]["line"], r["start"]["character"], r["end"]["line"], r["end"]["character"],
                       d["message"], d["severity"])).encode())
    return h.hexdigest()


async def _lookup_data(ls: GradguardServer, target: Target, uri: str, diag: lsp.Diagnostic) -> Any:
    """The data of one of our diagnostics with its fixes, made from the result it
    was published from (diagnostics travel without their fixes). A diagnostic of
    another version of the document gets none: its edits would not apply."""
    result, smap = target.result, target.result_smap
    if result is None or smap is None:
        return None
    sent = diag.data if isinstance(diag.data, dict) else {}
    version = sent.get("version") if isinstance(sent.get("version"), int) else None
    index = sent.get("n") if isinstance(sent.get("n"), int) else None
    return fixes_data(result.findings, smap, ls.codec, ls.lang, uri, diag.code, range_json(diag.range), version, index)


async def fix_all_edit(ls: GradguardServer, uri: str) -> Optional[lsp.WorkspaceEdit]:
    """Every preferred fix in the document, as one versioned edit of it."""
    target = ls.target_for(uri)
    td = ls.workspace.text_documents.get(unquote(uri))
    if target is None or td is None:
        return None
    cur = await ls.current(target)
    if cur is None:
        return None
    result, smap = cur
    if target.kind == "notebook":
        # one round over the whole program; only this cell's edits
        edits = []
        for e in preferred_edits(result.findings):
            conv = smap.to_client_range(e.range, ls.codec)
            if conv is not None and conv[0].uri == uri:
                edits.append(lsp.TextEdit(range=conv[1], new_text=e.new_text))
        if not edits:
            return None
        return act.workspace_edit({uri: (td.version, edits)})
    if not any(any(x.preferred for x in f.fixes) for f in result.findings):
        return None
    text = td.source
    version = td.version
    config = ls.config_for(target)
    path = target.path
    facts = target.external

    def run() -> str:
        from gradguard.engine.document import check_source

        return fix_until_stable(text, result, apply_text_edits,
                                lambda t: check_source(_analysable(t), path, config, facts)).state

    loop = asyncio.get_running_loop()
    new_text = await loop.run_in_executor(ls.executor, run)
    edit = act.whole_line_diff(text, new_text, ls.codec)
    if edit is None:
        return None
    return act.workspace_edit({uri: (version, [edit])})


# ---- entry point -----------------------------------------------------------------
def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gradguard serve", description="Run the gradguard language server (stdio by default).")
    p.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead (for debugging)")
    p.add_argument("--log-file", metavar="FILE", help="also write the server's log to FILE")
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="level for --log-file and stderr (the client's output follows the logLevel setting)",
    )
    p.add_argument("--version", action="version", version=f"gradguard {__version__}")
    return p.parse_args(list(argv) if argv is not None else None)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``gradguard serve [--tcp HOST:PORT] [--log-file F] [--log-level L]``."""
    args = _parse_args(argv)
    tcp: Optional[Tuple[str, int]] = None
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not port.isdigit() or not 0 < int(port) < 65536:
            print(f"gradguard serve: --tcp wants HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        tcp = (host or "127.0.0.1", int(port))
    level = _LEVELS[args.log_level]
    root = logging.getLogger("gradguard")
    root.setLevel(logging.DEBUG)  # handlers filter
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.log_file:
        try:
            fh = logging.FileHandler(args.log_file, encoding="utf-8")
        except OSError as e:
            print(f"gradguard serve: cannot open log file {args.log_file}: {e}", file=sys.stderr)
            return 2
        fh.setLevel(level)
        fh.setFormatter(fmt)
        root.addHandler(fh)
        logging.getLogger("pygls").addHandler(fh)
        logging.getLogger("pygls").setLevel(max(level, logging.INFO))
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(max(level, logging.WARNING))  # stderr stays quiet: clients show it as noise
    stderr.setFormatter(fmt)
    root.addHandler(stderr)
    root.info("gradguard %s language server starting (pid %d, %s)", __version__, os.getpid(), f"tcp {args.tcp}" if tcp else "stdio")
    # Each analysis parses the edited region and allocates many short-lived values
    # that reference counting frees at once; the default collector thresholds
    # made a full collection (every open document's trees) land inside a
    # keystroke's analysis now and then. Fewer, larger young collections; the
    # engine's own structures hold no reference cycles.
    import gc

    gc.set_threshold(100_000, 50, 20)
    server = create_server()
    if tcp:
        server.start_tcp(*tcp)
        return server.exit_code
    # stdout carries the protocol: anything else printing there would corrupt it
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr
    server.start_io(BoundedInput(sys.stdin.buffer), protocol_out)  # type: ignore[arg-type]
    return server.exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
