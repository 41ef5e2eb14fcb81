"""One large file analysed on several cores (POSIX ``fork``), same result as
:func:`gradguard.engine.document.check_source`.

The engine already treats a file as a sequence of chunks (one per top-level
statement) that are parsed and summarised on their own, and whose units are
checked against the merged module facts. That makes the work split cleanly:

1. The text is cut into ``jobs`` regions at top-level ``def``/``class`` lines
   near equal sizes. Each process (the parent and ``jobs - 1`` forked children)
   parses *its* region and summarises its chunks — parsing is the one step no
   process can skip, so it is shared too.
2. Facts are exchanged through pipes and merged in chunk order, exactly as the
   engine merges them: every process then holds the same module summary.
3. Each process checks the units of its own def chunks; the parent also checks
   the module-level statements (re-parsing the children's few statement
   chunks), collects the children's findings and post-processes the lot the
   way the engine does.

Any doubt — a region that does not parse on its own (a syntax error, a cut in
the wrong place), a child that fails, a platform without ``fork``, threads
running — falls back to the serial engine, so the result never depends on the
path taken. ``tests/test_parallel.py`` compares both on every fixture program.
"""

from __future__ import annotations

import os
import sys

from gradguard.engine import document as E
from gradguard.analysis.context import iter_units
from gradguard.model.text import LineIndex, line_ending, split_lines

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, List, Tuple

# Below this many lines a fork costs more than it saves.
MIN_LINES = 600
_STARTS = ("def ", "class ", "async def ", "@")


def split_points(lines, parts: int):
    """Line indexes ``[0, b1, ..., len(lines)]`` cutting ``lines`` into ``parts``
    regions of similar size, each cut at a column-0 ``def``/``class``/decorator
    line whose previous line is not a decorator or a continuation. Fewer
    regions when there are not enough such lines."""
    n = len(lines)
    cum = [0] * (n + 1)
    total = 0
    for i, ln in enumerate(lines):
        total += len(ln) + 1
        cum[i + 1] = total
    cands = []
    for i in range(1, n):
        ln = lines[i]
        if ln.startswith(_STARTS):
            prev = lines[i - 1]
            if prev.startswith("@") or prev.rstrip().endswith("\\"):
                continue
            cands.append(i)
    out = [0]
    for k in range(1, parts):
        target = total * k / parts
        best = None
        for i in cands:
            if i <= out[-1]:
                continue
            if best is None or abs(cum[i] - target) < abs(cum[best] - target):
                best = i
            elif cum[i] > target:
                break
        if best is not None and best > out[-1]:
            out.append(best)
    out.append(n)
    return out


def _region_chunks(lines, a: int, b: int):
    """Chunks of region [a, b), or None when the region does not parse on its
    own or does not start with a statement at line ``a``."""
    try:
        tree = E._parse("\n" * a + "\n".join(lines[a:b]))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if a and (not tree.body or E._stmt_first_line(tree.body[0]) - 1 != a):
        return None
    return E._chunks_from_tree(tree, lines, a, b)


def _pickler():
    """The C pickler alone: ``import pickle`` costs ~5 ms more on this path for
    its pure-Python half, which nothing here uses. Imported before the fork, so
    no child pays for it on its way to the first message."""
    global _dumps, _loads
    if _dumps is None:
        try:
            from _pickle import dumps, loads
        except ImportError:  # an interpreter without the accelerator
            from pickle import dumps, loads
        _dumps, _loads = dumps, loads


_dumps: Any = None  # pickle's, bound by _pickler()
_loads: Any = None


def _write_msg(fd: int, obj) -> None:
    data = _dumps(obj, protocol=5)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_msg(fd: int):
    def exactly(k: int) -> bytes:
        parts = []
        while k:
            b = os.read(fd, min(k, 1 << 20))
            if not b:
                raise EOFError("worker closed its pipe")
            parts.append(b)
            k -= len(b)
        return b"".join(parts)

    return _loads(exactly(int.from_bytes(exactly(8), "little")))


def _usable(jobs: int, n_lines: int, min_lines: int) -> bool:
    if jobs < 2 or n_lines < min_lines or not hasattr(os, "fork"):
        return False
    if sys.platform == "darwin":  # fork without exec is unsafe once system frameworks are loaded
        return False
    import _thread

    # forking a process with running threads can copy a held lock
    return _thread._count() == 0


# How the last call ran: "parallel", or "serial" (small file, no fork, or a fallback).
last_mode = ""


def check_source_parallel(source: str, path=None, config=None, external_facts=None, jobs: int = 2,
                          min_lines: int = MIN_LINES):
    """:func:`gradguard.engine.document.check_source` on ``jobs`` processes."""
    global last_mode
    last_mode = "serial"
    config = config or E.Config()
    lines = split_lines(source)
    if not _usable(jobs, len(lines), min_lines) or not E.may_backprop(source, external_facts) or E.nothing_to_report(
            (source,), external_facts, E.enabled_declared(config, path)):
        # (where nothing back-propagates, at most a rule that reports without it runs: serially)
        return E.check_source(source, path, config, external_facts)
    bounds = split_points(lines, jobs)
    if len(bounds) < 3:
        return E.check_source(source, path, config, external_facts)
    regions = list(zip(bounds, bounds[1:]))
    _pickler()
    children: List[Tuple[int, int, int]] = []  # (pid, read fd from child, write fd to child)
    try:
        for k in range(1, len(regions)):
            up_r, up_w = os.pipe()
            down_r, down_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: never returns
                try:
                    os.close(up_r)
                    os.close(down_w)
                    for _, r, w in children:  # earlier workers' pipes: theirs and the parent's alone
                        os.close(r)
                        os.close(w)
                    _child(source, lines, regions[k], path, config, external_facts, up_w, down_r)
                finally:
                    os._exit(1)  # _child exits by itself; this only guards the lines above
            os.close(up_w)
            os.close(down_r)
            children.append((pid, up_r, down_w))
        result = _parent(source, lines, regions[0], path, config, external_facts, children)
    except Exception:
        if os.environ.get(E._STRICT_ENV) and sys.exc_info()[0] is not _Fallback:
            raise
        result = None
    finally:
        for pid, r, w in children:
            for fd in (r, w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    if result is None:
        return E.check_source(source, path, config, external_facts)
    last_mode = "parallel"
    return result


class _Fallback(Exception):
    """A region did not parse on its own: the serial engine decides."""


def _region_facts(source, lines, region):
    """A region's chunks and their facts (None, None when it does not parse on its
    own). Which defs get no by-name facts is decided against the whole text, as
    the serial one-shot engine decides; every process counts the words itself,
    after the fork, so that no core waits for it."""
    chunks = _region_chunks(lines, *region)
    if chunks is None:
        return None, None
    unref = E.unreferenced_in(source, chunks)
    return chunks, [c.get_facts(unref) for c in chunks]


def _child(source, lines, region, path, config, external_facts, up_w: int, down_r: int) -> None:
    status = 0
    try:
        chunks, facts = _region_facts(source, lines, region)
        if chunks is None:
            _write_msg(up_w, None)
            return
        stmt_spans = [(c.start, c.end) for c in chunks if c.kind == "stmt"]
        _write_msg(up_w, (facts, stmt_spans))
        merged_facts = _read_msg(down_r)  # every region's facts, in order
        errors: list = []
        deep: list = []
        raw, _, _ = _check_defs(chunks, lines, path, config, external_facts, merged_facts, errors, deep)
        _write_msg(up_w, ("ok", raw, (errors, deep)))
    except BaseException as e:  # report, never raise into the parent's stack (this is a fork)
        status = 1
        try:
            _write_msg(up_w, ("error", f"{type(e).__name__}: {e}", None))
        except BaseException:
            pass
    finally:
        os._exit(status)


def _check_defs(chunks, lines, path, config, external_facts, all_facts, errors, deep):
    ctx = E.module_context(path, LineIndex.of_lines(lines), E.merge_facts(external_facts, all_facts), config)
    rules = E.enabled_rules(config, path)
    raw = []
    for c in chunks:
        if c.kind == "def":
            raw.extend(E.run_rules(rules, iter_units(c.tree.body, False), ctx, errors, deep))
    return raw, ctx, rules


def _parent(source, lines, region, path, config, external_facts, children):
    chunks, own_facts = _region_facts(source, lines, region)
    replies = [_read_msg(r) for _, r, _ in children]
    if chunks is None or any(rep is None for rep in replies):
        raise _Fallback()  # closing the pipes ends the children
    all_facts = list(own_facts)
    stmt_spans = [(c.start, c.end) for c in chunks if c.kind == "stmt"]
    for facts, spans in replies:
        all_facts.extend(facts)
        stmt_spans.extend(spans)
    for _, _, w in children:
        _write_msg(w, all_facts)
    errors: list = []
    deep: list = []
    raw, ctx, rules = _check_defs(chunks, lines, path, config, external_facts, all_facts, errors, deep)
    # the module unit: every region's top-level statements, analysed together
    body = []
    for a, b in stmt_spans:
        body.extend(E._parse("\n" * a + "\n".join(lines[a:b])).body)
    module_errors: list = []
    module_raw = E.run_rules(rules, iter_units(body, True), ctx, module_errors, deep)
    # the serial engine's order (def chunks in file order, then the module unit):
    # post-processing keeps the first of two equal findings
    for _, r, _ in children:
        status, child_raw, child_errors = _read_msg(r)
        if status != "ok":
            raise RuntimeError(f"analysis worker failed: {child_raw}")
        raw.extend(child_raw)
        errors.extend(child_errors[0])
        deep.extend(child_errors[1])
    raw.extend(module_raw)
    errors.extend(module_errors)
    return E.CheckResult(E.postprocess(raw, lines, config, line_ending(source)), None, tuple(errors),
                         tuple(sorted(set(deep))))
