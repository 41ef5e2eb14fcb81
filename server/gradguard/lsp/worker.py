"""The analysis off the event loop: the worker threads and what runs on them.

Everything here runs on a worker thread except :func:`analysable`; a target's
incremental :class:`~gradguard.engine.Document` is touched only here, under the
target's ``doc_lock``.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from concurrent.futures import Executor, Future
from typing import Any, Dict, List, Optional, Tuple

from gradguard.engine.config import Config
from gradguard.engine.document import CheckResult, Document
from gradguard.lsp.target import Target

log = logging.getLogger("gradguard.lsp")

# Larger buffers are not analysed (logged once; the server keeps serving). Parsing
# holds the GIL, and a 30k-line parse can take seconds on a slow machine.
MAX_SOURCE_CHARS = 1_000_000
MAX_SOURCE_LINES = 20_000
ANALYSIS_THREADS = 2  # a slow document must not starve the others


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


def resolve_facts(source: str, path: Optional[str], root: Optional[str]) -> Optional[Dict[str, object]]:
    try:
        from gradguard.engine.document import resolve_external_facts

        return resolve_external_facts(source, path, root)
    except Exception:
        log.debug("import resolution failed", exc_info=True)
        return None


def compute(target: Target, source: str, config: Config) -> Tuple[Optional[CheckResult], Optional[List[str]]]:
    """On a worker thread: incremental analysis, restarting from scratch if the
    incremental state ever fails; with the lines the analysis split ``source``
    into. (None, None): analysis is impossible (logged)."""
    with target.doc_lock:  # a cancelled run may still be finishing on another thread
        result = compute_locked(target, source, config)
        doc = target.doc
        return result, (doc.lines if result is not None and doc is not None else None)


def log_internal(target: Target, result: CheckResult) -> CheckResult:
    for code, unit, err in result.internal_errors:
        log.error("internal error: rule %s failed on %s in %s (%s); please report it", code, unit, target.key, err)
    return result


def compute_locked(target: Target, source: str, config: Config) -> Optional[CheckResult]:
    facts = target.external
    try:
        if target.doc is None:
            target.doc = Document(source, target.path, config, facts)
            return log_internal(target, target.doc.result())
        target.doc.set_config(config)
        target.doc.set_external_facts(facts)
        return log_internal(target, target.doc.update(source))
    except Exception:
        log.exception("incremental analysis of %s failed; retrying from scratch", target.key)
    try:
        target.doc = Document(source, target.path, config, facts)
        return target.doc.result()
    except Exception:
        log.exception("analysis of %s failed", target.key)
        target.doc = None
        return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def analysable(text: str) -> str:
    """JSON text can hold lone surrogates, which no parser accepts; each becomes
    U+FFFD (one code point for one: every position stays where it was)."""
    try:
        text.encode("utf-8")  # the usual case, decided in C: no lone surrogate
        return text
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
