"""``gradguard`` command line: check, rule, serve.

Exit codes of ``check``: 0 clean, 1 findings (or, with ``--diff``, changes to
make), 2 usage errors, files that could not be read or parsed (those are
reported; every other file is still checked) or an internal error.
"""

from __future__ import annotations

import os
import sys
from gradguard import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (annotations only: the start-up path imports as little as it can)
    import argparse
    from pathlib import Path
    from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

_DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "__pycache__", "node_modules", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", "site-packages", ".ipynb_checkpoints",
    ".eggs", ".gradguard_cache",
)


# ---------------------------------------------------------------- discovery
class _Ignore:
    """gitignore-style patterns from ``.gitignore`` files met while walking."""

    def __init__(self) -> None:
        self._by_dir: Dict[Path, List[Tuple[str, bool]]] = {}

    def load(self, directory: Path) -> None:
        gi = directory / ".gitignore"
        pats: List[Tuple[str, bool]] = []
        try:  # an unreadable directory: is_file() itself raises (EACCES), and the walk reports it
            if gi.is_file():
                for raw in read_bytes(str(gi)).decode("utf-8", errors="replace").splitlines():
                    line = raw.strip()
                    if not line or line.startswith("#"):
                        continue
                    neg = line.startswith("!")
                    pats.append((line[1:] if neg else line, neg))
        except (OSError, ReadError):
            pass
        self._by_dir[directory] = pats

    def ignored(self, path: Path, roots: Sequence[Path]) -> bool:
        from gradguard.engine.config import _path_matches

        verdict = False
        for d in roots:
            pats = self._by_dir.get(d)
            if not pats:
                continue
            try:
                rel = path.relative_to(d).as_posix()
            except ValueError:
                continue
            if path.is_dir():
                rel_dir = rel + "/"
            else:
                rel_dir = None
            for pat, neg in pats:
                if pat.endswith("/") and rel_dir is None:
                    # a directory pattern only matches directories (and what is below them)
                    if not any(_path_matches(p, pat) for p in _parents(rel)):
                        continue
                elif not (_path_matches(rel, pat) or (rel_dir and _path_matches(rel_dir, pat))):
                    continue
                verdict = not neg
        return verdict


def _parents(rel: str) -> List[str]:
    parts = rel.split("/")
    return ["/".join(parts[: i + 1]) + "/" for i in range(len(parts) - 1)]


def discover(paths: Sequence[str], config_for) -> Iterator[Tuple[str, bool]]:
    """(path, explicit) for every file to check. Files named explicitly are
    always checked; directories are walked for ``*.py``/``*.pyi``/``*.ipynb``,
    skipping default excludes, ``.gitignore`` patterns and config ``exclude``."""
    seen = set()  # absolute paths: "a.py", "./a.py" and its absolute path are one file (a link stays a name of its own)
    for p in paths:
        if not os.path.isdir(p):
            key = os.path.abspath(p)
            if key not in seen:
                seen.add(key)
                yield p, True
            continue
        from pathlib import Path

        path = Path(p)
        ign = _Ignore()
        stack: List[Tuple[Path, Tuple[Path, ...]]] = [(path, ())]
        while stack:
            d, roots = stack.pop()
            ign.load(d)
            roots = roots + (d,)
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError as err:
                yield f"{d}\0{err.strerror or err}", True
                continue
            subdirs = []
            for e in entries:
                child = Path(e.path)
                if e.is_dir(follow_symlinks=False):
                    if e.name in _DEFAULT_EXCLUDES or ign.ignored(child, roots):
                        continue
                    if _excluded(config_for, e.path, e.path + "/"):
                        continue
                    subdirs.append((child, roots))
                elif e.name.endswith((".py", ".pyi", ".ipynb")):
                    if ign.ignored(child, roots) or _excluded(config_for, e.path, e.path):
                        continue
                    key = os.path.abspath(e.path)
                    if key not in seen:
                        seen.add(key)
                        yield e.path, False
            stack.extend(reversed(subdirs))


def _excluded(config_for, path: str, rel: str) -> bool:
    from gradguard.engine.config import ConfigError

    try:
        return config_for(path).is_excluded(rel)
    except ConfigError:  # reported per file when it is checked (see _run_all); the walk goes on
        return False


# ---------------------------------------------------------------- reading
class ReadError(Exception):
    pass


# A buffer checked under a file's name instead of that file's bytes (the text
# piped on standard input, ``check --stdin-filename PATH -``: see cli_io.py).
BUFFERS: Dict[str, bytes] = {}

# Files larger than this are not analysed (reported "skipped"): a generated data
# file named *.py must not cost minutes and gigabytes. ``--max-file-size`` and
# ``[tool.gradguard] max-file-size`` (in MB; 0 = no limit) change it.
DEFAULT_MAX_FILE_MB = 4.0


def read_bytes(path: str, max_mb: Optional[float] = None, identity: Optional[List[Tuple[int, int]]] = None) -> bytes:
    """The bytes of a *regular* file: a FIFO named ``x.py`` would block forever
    and ``/dev/zero`` never ends, so anything else is refused without reading
    (opened non-blocking: opening a FIFO for reading does not wait for a writer).
    A file over ``max_mb`` MB is refused with its size. A buffer (``BUFFERS``)
    is its bytes. ``identity`` receives the (device, inode) of the file read
    (what ``write_fixed`` checks is still there)."""
    from gradguard.model.files import NotRegularFile, OverLimit, read_regular

    if path in BUFFERS:
        return BUFFERS[path]
    limit = None if not max_mb or max_mb <= 0 else int(max_mb * 1_000_000)
    try:
        return read_regular(path, limit, identity=identity)
    except NotRegularFile as e:
        raise ReadError("is a directory" if e.is_dir else "not a regular file (a FIFO, device or socket): not read") \
            from None
    except OverLimit as e:
        raise ReadError(_too_big(e.size, max_mb)) from None
    except IsADirectoryError:
        raise ReadError("is a directory") from None
    except OSError as e:
        raise ReadError(_open_error(path, e)) from None


def _open_error(path: str, e: OSError) -> str:
    """Why ``path`` could not be opened, naming a symbolic link that leads nowhere
    (``ls`` lists it, so "No such file or directory" alone reads as a mistake)."""
    import errno

    if e.errno in (errno.ENOENT, errno.ELOOP) and os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        if e.errno == errno.ELOOP:
            return f"a symbolic link loop (to {target}), not read"
        return f"a broken symbolic link (to {target}, which does not exist), not read"
    return e.strerror or str(e)


def _too_big(size: int, max_mb: Optional[float]) -> str:
    return (f"skipped: {size / 1_000_000:.1f} MB, over the {max_mb:g} MB limit "
            f"(--max-file-size or [tool.gradguard] max-file-size changes it)")


def decode_source(path: str, data: bytes) -> str:
    if b"\0" in data[:8192]:
        raise ReadError("binary file (contains NUL bytes), not Python source")
    if path.endswith(".ipynb"):
        from gradguard.engine.notebook import notebook_source

        try:
            return notebook_source(data)
        except ValueError as e:
            raise ReadError(f"malformed notebook: {e}") from None
    try:
        text = data.decode(source_encoding(data))
    except (SyntaxError, LookupError, UnicodeDecodeError) as e:
        raise ReadError(f"cannot decode as Python source ({e.__class__.__name__}: {e})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def source_encoding(data: bytes) -> str:
    """The encoding Python reads ``data`` with: a PEP 263 cookie, else UTF-8
    ("utf-8-sig" with a BOM). Raises SyntaxError for a bad cookie."""
    head = data[:400].split(b"\n", 2)[:2]
    if any(b"coding" in line for line in head):
        # the standard library reads the cookie (importing tokenize costs ~8 ms
        # of start-up, so only files that declare one pay it)
        import io
        import tokenize

        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    return "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"


def read_source(path: str, max_mb: Optional[float] = None) -> str:
    return decode_source(path, read_bytes(path, max_mb))


# ---------------------------------------------------------------- check
def _new_record(path: str) -> dict:
    # items: JSON-ready finding dicts (output.finding_dict) in the requested language;
    # findings: the core Finding objects, only when analysed in this run (--fix/--diff need them);
    # deep: (0-based line, unit, rule codes) of units too deeply nested to analyse.
    return {"path": path, "error": None, "items": [], "findings": (), "syntax": None, "source": None, "fixed": None,
            "deep": ()}


def _check_one(args) -> dict:
    """Worker: check one file; returns a picklable record. Whatever goes wrong
    with this file (nesting too deep for Python itself, memory, a bug of ours)
    is this file's error message: every other file is still checked."""
    path = args[0]
    try:
        return _check_one_file(args)
    except RecursionError:
        why = "not analysed: nested too deeply"
    except MemoryError:
        why = "not analysed: out of memory"
    except Exception as e:
        if os.environ.get("GRADGUARD_STRICT"):  # the test suite: a bug of ours fails loudly
            raise
        why = f"gradguard internal error ({type(e).__name__}: {e}); please report it"
    rec = _new_record(path)
    rec["error"] = why
    return rec


def _check_one_file(args) -> dict:
    path, config, fix, external, lang, cache_dir, file_jobs = args
    rec = _new_record(path)
    identity: List[Tuple[int, int]] = []
    try:
        data = read_bytes(path, _max_mb(config), identity)
    except ReadError as e:
        rec["error"] = str(e)
        return rec
    key = None
    if cache_dir is not None:
        from gradguard import cache

        key = cache.key(path, data, config, lang, external)
        hit = cache.load(cache_dir, key)
        if hit is not None:
            rec["items"], rec["syntax"], rec["deep"] = hit
            for item in rec["items"]:  # the same file may be named differently this time ("./a.py")
                item["path"] = path
                for r in item["related"]:
                    r["path"] = path
            return rec
    try:
        src = decode_source(path, data)
    except ReadError as e:
        rec["error"] = str(e)
        return rec
    from gradguard.output import Locator, finding_dict

    facts = None
    depends_on_other_files = external and resolve_needed(src)
    if depends_on_other_files:
        facts = _external_facts(src, path, config)
    res = _analyse(src, path, config, facts, file_jobs)
    findings, syntax = res.findings, res.syntax_error
    rec["deep"] = res.not_analysed
    for code, unit, err in res.internal_errors:
        sys.stderr.write(f"{path}: gradguard internal error: rule {code} failed on {unit} ({err}); please report it\n")
    if fix:  # only --fix/--diff need the text and the Finding objects back in the parent
        read = data
        if path.endswith(".ipynb"):
            rec["source"] = data.decode("utf-8")
            if findings:
                fixed_data, findings, syntax = _fix_notebook_loop(data, path, config, facts, res, file_jobs)
                rec["fixed"] = fixed_data.decode("utf-8")
                data = fixed_data  # remaining findings are located in the fixed notebook's cells
        else:
            rec["source"] = src
            rec["bom"] = data.startswith(b"\xef\xbb\xbf")  # kept by --fix; shown by --diff
            encoding = source_encoding(data)
            if encoding not in ("utf-8", "utf-8-sig"):
                rec["encoding"] = encoding  # --diff's patch is in the file's bytes
            if findings:
                rec["fixed"], findings, syntax = _fix_loop(src, path, config, facts, res, file_jobs)
        rec["findings"] = findings
        if fix == "write" and rec["fixed"] is not None and rec["fixed"] != rec["source"]:
            # written now, as soon as its fixes are known, not at the end of the run
            # (the longer the wait, the likelier the user saves the file meanwhile)
            try:
                write_fixed(path, read, rec["fixed"], identity[0] if identity else None)
                rec["fixed_written"] = True
            except ReadError as e:
                rec["error"] = str(e)
    loc = Locator(path, data)
    rec["syntax"] = None
    if syntax is not None:
        line, cell = loc.line(syntax.line)  # a notebook's: the line within its cell
        rec["syntax"] = (line - 1, syntax.character, syntax.message) + ((cell,) if cell is not None else ())
    rec["items"] = [finding_dict(path, f, lang, loc) for f in findings]
    if key is not None and not depends_on_other_files and not res.internal_errors:
        # a file whose findings depend on other files' contents is never served from the cache
        cache.store(cache_dir, key, (rec["items"], rec["syntax"], rec["deep"]))
    return rec


def _max_mb(config) -> Optional[float]:
    v = getattr(config, "max_file_size", None)
    return DEFAULT_MAX_FILE_MB if v is None else v


def _external_facts(src: str, path: str, config):
    from gradguard.engine.document import resolve_external_facts

    try:
        return resolve_external_facts(src, path, config.root or os.path.dirname(os.path.abspath(path)))
    except Exception:  # resolution is best effort; the in-file pass stands alone
        return None


def resolve_needed(src: str) -> bool:
    """Cheap textual test: does the file import from a module that could be the user's own,
    or define a class whose methods back-propagate what they are handed (its callers may
    be in the files that import it)?"""
    from gradguard.analysis.libraries import never_users

    if "class " in src and "backward" in src:
        from gradguard.analysis.resolve import may_be_called

        if may_be_called(src):
            return True

    for line in src.splitlines():
        s = line.lstrip()
        if s.startswith("from ") and " import " in s:
            mod = s[5:].split(" import ", 1)[0].strip()
            top = mod.lstrip(".").split(".")[0]
            if mod.startswith(".") or not never_users(top):
                return True
        elif s.startswith("import "):
            # `import utils`, `import models.rnn as rnn`: read as utils.<name>
            for part in s[7:].split("#", 1)[0].split(","):
                top = part.strip().split(" ", 1)[0].split(".")[0]
                if top and not never_users(top):
                    return True
    return False


def _analyse(src: str, path: str, config, facts, file_jobs: int):
    """One file's analysis; a large file alone on the command line is split
    across ``file_jobs`` processes (same result, see engine/parallel.py). Code
    nested deeper than the analysis can walk on the interpreter's stack (an
    ``elif`` chain of a thousand branches, a chain of hundreds of calls) is
    analysed again on a thread with a deep stack: the command line is one
    analysis at a time, so it may raise the (process-wide) recursion limit
    for it, which the editor's server, analysing on several threads, may not."""
    res = _analyse_once(src, path, config, facts, file_jobs)
    if res.not_analysed:
        deeper = _on_deep_stack(_analyse_once, src, path, config, facts, 1)
        if deeper is not None and len(deeper.not_analysed) <= len(res.not_analysed):
            res = deeper
    return res


_DEEP_LIMIT = 40_000
_DEEP_STACK = 1 << 29  # 512 MB of address space, touched only as deep as the code goes


def _on_deep_stack(fn, *args):
    """``fn(*args)`` on a thread with a large stack and a raised recursion
    limit; None if that cannot be arranged or the code is deeper still."""
    import threading

    box: dict = {}

    def target() -> None:
        try:
            box["result"] = fn(*args)
        except RecursionError:
            pass
        except BaseException as e:  # noqa: B036  (handed back to the caller's thread)
            box["error"] = e

    old_limit = sys.getrecursionlimit()
    try:
        old_stack = threading.stack_size(_DEEP_STACK)
    except (ValueError, RuntimeError):
        return None
    try:
        sys.setrecursionlimit(max(old_limit, _DEEP_LIMIT))
        t = threading.Thread(target=target, name="gradguard-deep", daemon=True)
        t.start()
        t.join()
    except (RuntimeError, MemoryError):  # no thread with such a stack here
        return None
    finally:
        sys.setrecursionlimit(old_limit)
        threading.stack_size(old_stack)
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _analyse_once(src: str, path: str, config, facts, file_jobs: int):
    if file_jobs > 1:
        from gradguard.engine.parallel import check_source_parallel

        return check_source_parallel(src, path, config, facts, file_jobs)
    from gradguard.engine.document import check_source

    return check_source(src, path, config, facts)


def _fix_loop(src, path, config, facts, res, file_jobs: int = 1):
    """The engine's fix loop (engine/fixing.py) on a file's text. Returns
    (fixed text, remaining findings, syntax error)."""
    from gradguard.engine.fixing import fix_until_stable
    from gradguard.model.text import apply_text_edits

    run = fix_until_stable(src, res, apply_text_edits, lambda text: _analyse(text, path, config, facts, file_jobs))
    return run.state, run.result.findings, run.result.syntax_error


def _fix_notebook_loop(data: bytes, path, config, facts, res, file_jobs: int = 1):
    """_fix_loop for a notebook: the edits go into the cells they fall in, and
    each round re-reads the notebook it wrote."""
    from gradguard.engine.fixing import fix_until_stable
    from gradguard.engine.notebook import apply_notebook_edits, notebook_source

    run = fix_until_stable(data, res, apply_notebook_edits,
                           lambda nb: _analyse(notebook_source(nb), path, config, facts, file_jobs))
    return run.state, run.result.findings, run.result.syntax_error


def _run_all(files: List[Tuple[str, bool]], config_for, fix: Union[bool, str], jobs: int, external: bool, lang: str,
             cache_dir: Optional[str]) -> List[dict]:
    from gradguard.engine.config import ConfigError

    tasks = []
    records: Dict[int, dict] = {}
    for i, (path, explicit) in enumerate(files):
        if "\0" in path:  # an unreadable directory, from discovery
            d, why = path.split("\0", 1)
            records[i] = _new_record(d)
            records[i]["error"] = why
            continue
        try:
            cfg = config_for(path)
        except ConfigError as e:
            # a broken pyproject.toml costs the files it governs (each says why), not the run
            records[i] = _new_record(path)
            records[i]["error"] = f"not checked: {e}"
            continue
        tasks.append((i, [path, cfg, fix, external, lang, cache_dir, 1]))
    # never more processes than cores, nor than files (`--jobs 1000` started 1,000)
    jobs = max(1, min(jobs, usable_cores()))
    if len(tasks) < 8:
        # a pool's start-up would cost more than it saves: the files one after
        # another, each large one split across the cores (engine/parallel.py)
        for _, t in tasks:
            t[-1] = jobs
        jobs = 1
    jobs = min(jobs, len(tasks))
    if jobs > 1 and len(tasks) > 1:
        # import the analysis before forking the workers: each then starts with it
        import gradguard.engine.document  # noqa: F401
        import gradguard.output  # noqa: F401
        from gradguard.rules import all_rules

        all_rules()
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_die_with_parent,
                                 initargs=(os.getpid(),)) as ex:
            chunk = max(1, len(tasks) // (jobs * 4))
            for (i, _), rec in zip(tasks, ex.map(_check_one, [t for _, t in tasks], chunksize=chunk)):
                records[i] = rec
    else:
        for i, t in tasks:
            records[i] = _check_one(t)
    return [records[i] for i in sorted(records)]


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _die_with_parent(parent: int) -> None:
    """Pool worker start-up: end when the parent ends, even if it is killed
    (then nothing tells an idle worker, and a busy one would run on). Linux:
    the kernel sends SIGTERM on the parent's death; elsewhere a daemon thread
    watches the parent id and sends it. SIGTERM, not SIGKILL: a worker that is
    replacing a file under ``--fix`` holds it until the file is in place and its
    temporary file gone (``cli_io.HeldSignals``), then ends; SIGKILL left the
    temporary file beside the user's when the run was stopped."""
    import signal

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(1, int(signal.SIGTERM), 0, 0, 0) == 0:  # PR_SET_PDEATHSIG
                if os.getppid() != parent:  # the parent died before the request
                    os._exit(1)
                return
        except Exception:
            pass
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # (held by a file being replaced: at most that long)
        os._exit(1)

    threading.Thread(target=watch, name="gradguard-parent-watch", daemon=True).start()


def _make_config_for(args):
    from gradguard.engine.config import Config, ConfigError, load_config, load_config_file

    cache: Dict[str, Union[Config, ConfigError]] = {}
    said: set = set()

    def warn(warnings: List[str]) -> None:  # each once, however many folders share the file
        for w in warnings:
            if w not in said:
                said.add(w)
                sys.stderr.write(f"gradguard: warning: {w}\n")

    explicit = None
    if args.config:
        from pathlib import Path

        warnings: List[str] = []
        explicit = load_config_file(Path(args.config), warnings)
        warn(warnings)

    for codes in (args.select, args.ignore, args.extend_select):
        if codes:
            _split_codes(codes)  # now, not when (or whether) a file's config asks: an unknown code is an error

    def overrides(cfg: Config) -> Config:
        select = tuple(_split_codes(args.select)) if args.select else None
        ignore = tuple(cfg.ignore) + tuple(_split_codes(args.ignore)) if args.ignore else None
        max_mb = getattr(args, "max_file_size", None)
        notes = True if getattr(args, "unverified_notes", False) else None  # the flag turns them on; else the config's
        cfg = cfg.merged(select=select, ignore=ignore, max_file_size=max_mb, unverified_notes=notes)
        if args.extend_select:
            cfg = cfg.merged(select=tuple(cfg.select) + tuple(_split_codes(args.extend_select)) if cfg.select else ())
        return cfg

    def config_for(path: str) -> Config:
        if explicit is not None:
            return overrides(explicit)
        d = os.path.dirname(os.path.abspath(path))
        got = cache.get(d)
        if got is None:
            found: List[str] = []
            try:
                got = overrides(load_config(d, found))
            except ConfigError as e:  # raised for every file under it, read once
                got = e
            warn(found)
            cache[d] = got
        if isinstance(got, ConfigError):
            raise got
        return got

    return config_for, ConfigError


def _split_codes(values: Sequence[str]) -> List[str]:
    out: List[str] = []
    for v in values:
        out.extend(c.strip().upper() for c in v.split(",") if c.strip())
    for c in out:
        if c != "ALL" and not (c.startswith("GG") and (len(c) == 2 or c[2:].isdigit())):
            raise SystemExit(_usage_error(f"{c!r} is not a gradguard rule code (GGnnn)"))
    if any(c != "ALL" for c in out):
        # a code no rule has (GG999) would select nothing and pass: say so instead
        from gradguard.rules import all_rules

        known = [r.code for r in all_rules()]
        for c in out:
            if c != "ALL" and not any(k.startswith(c) for k in known):
                raise SystemExit(_usage_error(f"{c!r} matches no gradguard rule (known: {', '.join(known)})"))
    return out


def _usage_error(msg: str) -> int:
    sys.stderr.write(f"gradguard: error: {msg}\n")
    return 2


def cmd_check(args) -> int:
    import gc

    # The analysis allocates millions of short-lived objects that reference
    # counting frees at once; with the default thresholds the cyclic collector
    # still ran ~1,200 times over the benchmark project (13 % of the run),
    # re-scanning every result kept so far. One-shot process: collect rarely.
    gc.set_threshold(200_000, 100, 100)
    from gradguard import cli_io

    try:
        piped = cli_io.stdin_name(args)
    except cli_io.UsageError as e:
        return _usage_error(str(e))
    try:
        config_for, ConfigError = _make_config_for(args)
    except Exception as e:  # ConfigError from --config
        return _usage_error(str(e))
    if piped is not None:  # a buffer on standard input, checked as the file it names
        if piped != "-" and _same_file(piped, args.output_file):
            return _usage_error(f"--output-file {args.output_file} is the file the buffer stands for: "
                                f"the report would replace its code")
        try:
            lang = _language(args.lang, lambda: config_for(piped))
        except ConfigError as e:
            return _usage_error(str(e))
        jobs = args.jobs if args.jobs and args.jobs > 0 else (os.cpu_count() or 1)
        try:
            return cli_io.check_stdin(args, lang, lambda data: _check_buffer(piped, data, config_for, args, jobs, lang),
                                      source_encoding)
        except ConfigError as e:
            return _usage_error(str(e))
    try:
        files = list(discover(args.paths, config_for))
        lang = _language(args.lang, lambda: _config_or_default(config_for, _config_probe(args.paths)))
    except ConfigError as e:
        return _usage_error(str(e))
    clash = next((p for p, _ in files if "\0" not in p and _same_file(p, args.output_file)), None)
    if clash is not None:
        return _usage_error(f"--output-file {args.output_file} is {clash}, one of the files checked: "
                            f"the report would replace its code")
    # (lexists: a broken link or a link loop is there, and its read error says what it is)
    missing = [p for p, explicit in files if explicit and "\0" not in p and not os.path.lexists(p)]
    jobs = args.jobs if args.jobs and args.jobs > 0 else usable_cores()
    cache_dir = None
    if args.cache and not (args.fix or args.diff):
        from gradguard import cache

        cache_dir = cache.prepare(args.cache_dir)
    try:
        # --diff computes the same fixed text as --fix (same fix loop, same cross-file facts), then prints it
        # --fix writes each file from its worker, as soon as its fixes are known
        fix = "write" if args.fix else ("diff" if args.diff else False)
        records = _run_all(files, config_for, fix, jobs, args.resolve, lang, cache_dir)
    except ConfigError as e:
        return _usage_error(str(e))

    from gradguard import output

    status = 0
    errors = 0
    n_findings = 0
    diffs: List[str] = []
    for rec in records:
        if rec["path"] in missing:
            rec["error"] = "no such file or directory"
        if rec["error"] or rec["syntax"]:
            errors += 1
        n_findings += len(rec["items"])
        for note in _deep_notes(rec, lang):
            sys.stderr.write(note)
        if args.diff:
            try:
                d = output.diff(rec)
            except ValueError as e:  # no patch can say it in the file's encoding
                sys.stderr.write(f"{rec['path']}: error: {e}\n")
                errors += 1
                d = ""
            if d:
                diffs.append(d)
    out = cli_io.Output(args.output_file)  # standard output, or --output-file written whole at the end
    if args.diff:
        out.write_patch("".join(diffs))
        status = 1 if diffs else 0
    else:
        output.emit(records, args.format, lang, out.stream, statistics=args.statistics, quiet=args.quiet)
        status = 1 if n_findings and not args.exit_zero else 0
    if not out.close():  # --output-file could not be written (said on stderr)
        errors += 1
    if errors:
        status = 2
    return status


def _same_file(path: str, output: Optional[str]) -> bool:
    """Is ``output`` (``--output-file``) the file at ``path`` (the same file, by any
    name: a link, ``./x.py``)? The report written there would replace its code."""
    if not output:
        return False
    try:
        return os.path.samefile(path, output)
    except (OSError, ValueError):  # either does not exist (yet): not the same file
        return False


def _check_buffer(name: str, data: bytes, config_for, args, jobs: int, lang: str) -> dict:
    """The record of a buffer checked as the file ``name`` (``check -``, see cli_io.py).
    No result cache: editors pipe each version of the text once."""
    BUFFERS[name] = data
    try:
        # "diff": the fixed text comes back in the record and nothing is written (cli_io prints it)
        fix = "diff" if args.fix or args.diff else False
        return _run_all([(name, True)], config_for, fix, jobs, args.resolve, lang, None)[0]
    finally:
        del BUFFERS[name]


def _language(flag: Optional[str], config) -> str:
    """The message language: ``--lang``, else ``GRADGUARD_LANG``, else the
    ``language`` of the project config (``config()``, read only when needed),
    else English. A value that names no language we have means English."""
    from gradguard.model.i18n import normalize_language

    for value in (flag, os.environ.get("GRADGUARD_LANG")):
        if value:
            return normalize_language(value) or "en"
    return normalize_language(config().language) or "en"


def _config_or_default(config_for, path: str):
    """The config of ``path``; the defaults when it is broken (each file under
    it says so when it is checked, see _run_all)."""
    from gradguard.engine.config import Config, ConfigError

    try:
        return config_for(path)
    except ConfigError:
        return Config()


def _config_probe(paths: Sequence[str]) -> str:
    """A path whose config is the run's: the first path named (for a directory,
    a file inside it, so that the directory's own pyproject.toml counts)."""
    first = paths[0] if paths else "."
    return os.path.join(first, "__init__.py") if os.path.isdir(first) else first


def _deep_notes(rec: dict, lang: str) -> List[str]:
    """One line per unit nested too deeply to analyse: its findings are unknown, not absent."""
    out = []
    for line, unit, codes in rec.get("deep") or ():
        what = "the module" if unit == "<module>" else unit
        rules = "" if codes == "*" else f" ({codes})"
        if lang == "zh":
            what = "模块顶层" if unit == "<module>" else unit
            out.append(f"{rec['path']}:{line + 1}: 注意: {what} 未分析{rules}: 代码嵌套过深，其中的问题未知\n")
        else:
            out.append(f"{rec['path']}:{line + 1}: note: {what} not analysed{rules}: nested too deeply, "
                       f"its findings are unknown\n")
    return out


def write_fixed(path: str, read: bytes, fixed: str, identity: Optional[Tuple[int, int]] = None) -> None:
    """Replace ``path``'s content with ``fixed`` (text of a ``.py`` file in the
    encoding, BOM and newlines it was read with; a notebook's JSON as UTF-8),
    only if the file still holds exactly the ``read`` bytes the fixes were
    computed from, and is still the file they were read from (``identity``:
    its device and inode; a file replaced meanwhile by a link to another file
    with the same bytes would have had that other file fixed): a save made
    while the run went on is never overwritten (a ReadError says so and
    nothing is written). The new content goes to a
    temporary file in the same folder, with the file's mode (and owner, where
    allowed), flushed to disk, then ``os.replace``-d over it: a reader sees the
    old file or the new one, never a part. A read-only file is not written
    (the replace would need only the folder's permission). A file with several
    hard links is rewritten in place (``_write_in_place``), and a file that
    already holds the fixed bytes (fixed by another name of it in this run) is
    left as it is."""
    if path.endswith(".ipynb"):
        new = fixed.encode("utf-8")
    else:
        encoding = source_encoding(read)
        prefix = b""
        if encoding == "utf-8-sig":
            encoding, prefix = "utf-8", b"\xef\xbb\xbf"
        try:
            new = prefix + fixed.encode(encoding)
        except (UnicodeEncodeError, LookupError) as e:
            raise ReadError(f"fixes not written: cannot encode the fixed text ({e})") from None
    from gradguard.cli_io import HeldSignals

    with HeldSignals():  # a SIGTERM meanwhile: the file whole, no temporary file left, then the end
        _write_checked(path, read, new, identity)


def _write_checked(path: str, read: bytes, new: bytes, identity: Optional[Tuple[int, int]]) -> None:
    """:func:`write_fixed`'s checks and write, of the encoded bytes ``new``."""
    changed = "fixes not written: the file changed on disk while it was checked (run again)"
    path = os.path.realpath(path)  # a linked file is fixed where it lives; the link stays a link
    try:
        st = os.stat(path)
        current = _current_bytes(path)
        if current == new:
            # already fixed, by another name of the same file checked in this run (a
            # symbolic or hard link to it): nothing to write, nothing lost
            return
        if identity is not None and (st.st_dev, st.st_ino) != identity:
            raise ReadError(changed)
        if not st.st_mode & 0o222 or not os.access(path, os.W_OK):
            # replacing it needs only the folder to be writable: the file's own
            # permission is what says whether the user lets it be changed
            raise ReadError("fixes not written: the file is read-only")
        if current != read:
            raise ReadError(changed)
        if st.st_nlink > 1:
            # a hard-linked file: a rename would give this name a new file and leave
            # the old content under every other name; it is rewritten in place instead
            _write_in_place(path, read, new, st, changed)
            return
        directory = os.path.dirname(os.path.abspath(path))
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".gradguard-tmp", dir=directory)
    except OSError as e:
        raise ReadError(f"fixes not written: {e.strerror or e}") from None
    try:
        try:
            os.fchmod(fd, st.st_mode & 0o7777)
            if hasattr(os, "fchown"):
                try:
                    os.fchown(fd, st.st_uid, st.st_gid)
                except OSError:  # not ours to give away: the mode is kept, the owner becomes the caller
                    pass
            _copy_xattrs(path, fd)
            _write_all(fd, new)
            os.fsync(fd)
        finally:
            os.close(fd)
        # the last look before the switch: the window left is the replace itself
        st2 = os.stat(path)
        if (st2.st_mtime_ns, st2.st_size, st2.st_ino) != (st.st_mtime_ns, st.st_size, st.st_ino):
            raise ReadError(changed)
        os.replace(tmp, path)
    except OSError as e:
        _unlink_quietly(tmp)
        raise ReadError(f"fixes not written: {e.strerror or e}") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _copy_xattrs(path: str, fd: int) -> None:
    """The file's extended attributes onto the new file that replaces it (Linux):
    a POSIX ACL (``setfacl``) lives in one, and so do labels and tags a rename
    would silently drop. One that cannot be set (a security label not ours to
    give) is left out."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(path)
    except OSError:
        return
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(path, name))
        except OSError:
            pass


def _write_in_place(path: str, read: bytes, new: bytes, st, changed: str) -> None:
    """Rewrite a hard-linked file (``st_nlink > 1``) in place, so that every name
    of it sees the fix, as editors do for such files (a rename would split the
    names into two files). Not atomic, so: the file is opened and checked to be
    the same file (device, inode) still holding exactly ``read``, under an
    exclusive ``flock`` (another gradguard fixing it by another name waits); a
    copy of ``read`` is first written and flushed beside it (``.NAME.*.gradguard-backup``),
    removed once the new content is flushed — if the process dies mid-write, that
    copy is the file as it was; a write that fails (a full disk) puts ``read``
    back. Mode, owner, ACLs and extended attributes are the inode's and stay."""
    import stat
    import tempfile

    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise ReadError(f"fixes not written: {e.strerror or e}") from None
    backup = None
    try:
        try:
            _lock_briefly(fd)
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                raise ReadError(changed)
            current = _read_fd(fd)
            if current == new:  # fixed meanwhile by another name of it
                return
            if current != read:
                raise ReadError(changed)
            bfd, backup = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".gradguard-backup",
                                           dir=os.path.dirname(path))
            try:
                _write_all(bfd, read)
                os.fsync(bfd)
            finally:
                os.close(bfd)
        except OSError as e:
            raise ReadError(f"fixes not written: {e.strerror or e}") from None
        try:
            _write_all(fd, new, 0)
            os.ftruncate(fd, len(new))
            os.fsync(fd)
        except BaseException as e:
            try:  # put the file back as it was read
                _write_all(fd, read, 0)
                os.ftruncate(fd, len(read))
                os.fsync(fd)
            except OSError:  # could not: the copy stays, and the message names it
                kept, backup = backup, None
                raise ReadError(f"fixes not written and the file may be damaged: its content is kept in {kept}") from None
            if isinstance(e, OSError):
                raise ReadError(f"fixes not written: {e.strerror or e}") from None
            raise
    finally:
        os.close(fd)
        if backup is not None:
            _unlink_quietly(backup)


def _lock_briefly(fd: int, wait: float = 10.0) -> None:
    """An exclusive ``flock`` on ``fd``, waited for ``wait`` seconds at most (a
    program that holds one for ever must not hang the run: ReadError). No lock
    where ``flock`` is missing (Windows, some network file systems)."""
    import time

    try:
        import fcntl
    except ImportError:
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ReadError("fixes not written: another program holds a lock on the file (run again)") from None
            time.sleep(0.05)
        except OSError:  # not supported here
            return


def _read_fd(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: List[bytes] = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _write_all(fd: int, data: bytes, offset: Optional[int] = None) -> None:
    if offset is not None:
        os.lseek(fd, offset, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _current_bytes(path: str) -> Optional[bytes]:
    try:
        return read_bytes(path)
    except ReadError:
        return None


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ---------------------------------------------------------------- rule
def cmd_rule(args) -> int:
    from gradguard.rules import all_rules, get_rule

    def config():
        from gradguard.engine.config import load_config

        return load_config(os.getcwd())

    try:
        lang = _language(args.lang, config)
    except ValueError as e:  # a broken pyproject.toml: ConfigError
        return _usage_error(str(e))
    if args.all or not args.code:
        for r in all_rules():
            sys.stdout.write(f"{r.code}  {r.name:<16} {r.default_severity.value:<8} {r.title.get(lang) or r.title.get('en', '')}\n")
        return 0
    rule = get_rule(args.code)
    if rule is None:
        known = ", ".join(r.code for r in all_rules())
        return _usage_error(f"unknown rule {args.code!r} (known: {known})")
    if args.format == "json":
        import json

        json.dump(
            {"code": rule.code, "name": rule.name, "severity": rule.default_severity.value,
             "title": rule.title.get(lang), "explanation": rule.explain(lang), "url": rule.docs_url()},
            sys.stdout, ensure_ascii=False, indent=2,
        )
        sys.stdout.write("\n")
    else:
        sys.stdout.write(f"# {rule.code} {rule.name}\n\n{rule.explain(lang).strip()}\n")
    return 0


# ---------------------------------------------------------------- serve
def cmd_serve(argv: List[str]) -> int:
    from gradguard.lsp.server import main as serve_main

    return serve_main(argv) or 0


# ---------------------------------------------------------------- main
_CHECK_FLAGS = {
    "--fix": ("fix", True),
    "--diff": ("diff", True),
    "--statistics": ("statistics", True),
    "--no-resolve": ("resolve", False),
    "--no-cache": ("cache", False),
    "--exit-zero": ("exit_zero", True),
    "--quiet": ("quiet", True),
    "-q": ("quiet", True),
    "--unverified-notes": ("unverified_notes", True),
}
_CHECK_OPTIONS = {
    "--format": "format", "--select": "select", "--extend-select": "extend_select", "--ignore": "ignore",
    "--lang": "lang", "--config": "config", "--jobs": "jobs", "-j": "jobs", "--cache-dir": "cache_dir",
    "--stdin-filename": "stdin_filename", "--output-file": "output_file", "-o": "output_file",
    "--max-file-size": "max_file_size",
}
_FORMATS = ("text", "json", "sarif", "github")


def _check_defaults() -> dict:
    return {
        "command": "check", "paths": [], "format": "text", "fix": False, "diff": False, "select": None,
        "extend_select": None, "ignore": None, "lang": None, "config": None,
        "jobs": 0, "statistics": False, "resolve": True, "cache": not os.environ.get("GRADGUARD_NO_CACHE"),
        "cache_dir": os.environ.get("GRADGUARD_CACHE_DIR"), "exit_zero": False, "quiet": False,
        "stdin_filename": None, "output_file": None, "max_file_size": None, "unverified_notes": False,
    }


def _fast_check_args(argv):
    """``check`` arguments without argparse (whose import costs more than a
    cached check): the common forms only. None → let argparse parse them (help,
    errors and anything unusual), so behaviour and messages stay argparse's."""
    ns = _check_defaults()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            ns["paths"].extend(argv[i + 1 :])
            break
        if a.startswith("-") and a != "-":
            name, eq, value = a.partition("=")
            if name in _CHECK_FLAGS and not eq:
                key, v = _CHECK_FLAGS[name]
                ns[key] = v
            elif name in _CHECK_OPTIONS:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        return None
                    value = argv[i]
                key = _CHECK_OPTIONS[name]
                if key in ("select", "extend_select", "ignore"):
                    ns[key] = (ns[key] or []) + [value]
                elif key == "jobs":
                    if not value.lstrip("-").isdigit():
                        return None
                    ns[key] = int(value)
                elif key == "format" and value not in _FORMATS:
                    return None
                elif key == "max_file_size":
                    try:
                        ns[key] = megabytes(value)
                    except ValueError:
                        return None
                else:
                    ns[key] = value
            else:
                return None
        else:
            ns["paths"].append(a)
        i += 1
    if not ns["paths"]:
        ns["paths"] = ["."]
    import types

    return types.SimpleNamespace(**ns)


def megabytes(value: str) -> float:
    v = float(value)
    if not v >= 0 or v == float("inf"):
        raise ValueError(value)
    return v


def build_parser() -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog="gradguard",
        description="Catch PyTorch autograd graph-lifetime bugs (\"Trying to backward through the graph a second time\").",
    )
    p.add_argument("--version", action="version", version=f"gradguard {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{check,rule,serve}")

    c = sub.add_parser("check", help="check files and directories")
    c.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    c.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text")
    c.add_argument("--fix", action="store_true", help="apply the preferred fix of every finding, in place")
    c.add_argument("--diff", action="store_true", help="print the preferred fixes as a unified diff; change nothing")
    c.add_argument("--select", action="append", metavar="CODES", help="only these rules (codes or prefixes, comma-separated)")
    c.add_argument("--extend-select", action="append", metavar="CODES", help=argparse.SUPPRESS)
    c.add_argument("--ignore", action="append", metavar="CODES", help="skip these rules")
    c.add_argument("--lang", default=None,
                   help="message language: en or zh (default: $GRADGUARD_LANG, else [tool.gradguard] language, else en)")
    c.add_argument("--config", metavar="PYPROJECT", help="use this pyproject.toml instead of the nearest one")
    c.add_argument("--jobs", "-j", type=int, default=0, help="parallel processes (default: number of cores); a single large file is split across them")
    c.add_argument("--statistics", action="store_true",
                   help="a count of findings per rule instead of the findings (a JSON list with --format json)")
    c.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings (2 still means errors)")
    c.add_argument("--quiet", "-q", action="store_true", help="print the findings and nothing else")
    c.add_argument("--output-file", "-o", metavar="FILE", help="write the report to FILE instead of standard output")
    c.add_argument("--stdin-filename", metavar="PATH",
                   help="check standard input (path '-') as if it were PATH: PATH picks the configuration, "
                        "notebook handling and where its imports resolve; with --fix the fixed text goes to "
                        "standard output and the report to standard error")
    c.add_argument("--no-resolve", dest="resolve", action="store_false",
                   help="never resolve names imported from other files (faster, less precise)")
    c.add_argument("--no-cache", dest="cache", action="store_false", default=not os.environ.get("GRADGUARD_NO_CACHE"),
                   help="do not read or write the result cache")
    c.add_argument("--unverified-notes", action="store_true",
                   help="also report, as information, where GG101 stays silent because a link of the path is unknown "
                        "(an unsummarised callee, a part of a mixed container) ([tool.gradguard] unverified-notes)")
    c.add_argument("--max-file-size", type=megabytes, default=None, metavar="MB",
                   help=f"skip files larger than this (default {DEFAULT_MAX_FILE_MB:g} MB; 0: no limit)")
    c.add_argument("--cache-dir", default=os.environ.get("GRADGUARD_CACHE_DIR"), metavar="DIR",
                   help="where results of unchanged files are kept (default: ./.gradguard_cache)")

    r = sub.add_parser("rule", help="explain a rule")
    r.add_argument("code", nargs="?")
    r.add_argument("--all", action="store_true", help="list every rule")
    r.add_argument("--lang", default=None, help="as for check")
    r.add_argument("--format", choices=("text", "json"), default="text")

    sub.add_parser("serve", help="run the language server (stdio; --tcp HOST:PORT for debugging)", add_help=False)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        return cmd_serve(argv[1:])
    _escape_what_the_streams_cannot_encode()
    args = _fast_check_args(argv[1:]) if argv and argv[0] == "check" else None
    parser = None
    if args is None:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:
            return int(e.code or 0) if isinstance(e.code, int) else 2
    try:
        if args.command == "check":
            if args.fix and args.diff:
                return _usage_error("--fix and --diff cannot be used together")
            return cmd_check(args)
        if args.command == "rule":
            return cmd_rule(args)
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        # never the interpreter's status 1, which says "findings" to a CI job
        if os.environ.get("GRADGUARD_STRICT"):  # the test suite: a bug of ours fails loudly
            raise
        import traceback

        traceback.print_exc()
        sys.stderr.write(f"gradguard: internal error ({type(e).__name__}: {e}); please report it\n")
        return 2
    (parser or build_parser()).print_help()
    return 2


def _escape_what_the_streams_cannot_encode() -> None:
    """Standard output and error in an encoding that cannot hold every character
    (``PYTHONIOENCODING=ascii``, a Windows job whose output is piped in cp1252):
    a Chinese message or a file name in Chinese ended the run with a
    UnicodeEncodeError and the interpreter's status 1, which reads as "findings".
    Such characters are written as escapes instead (``\\u4e2d``)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if encoding in ("utf8", "utf8sig", "utf16", "utf32"):
            continue
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # not a text stream of io's (a test's capture)
            pass


def run() -> None:
    """The ``gradguard`` command (console script and ``python -m gradguard``):
    :func:`main`, then the process ends without the interpreter's tear-down.

    A check leaves behind every parsed tree, fact and finding of the run;
    freeing them one by one at exit cost 15–20 ms of a 250 ms run on the
    benchmark's large file, for memory the operating system takes back anyway
    (mypy ends the same way). Output is flushed first, so nothing written is
    lost; the language server (``serve``) ends the ordinary way, since its
    threads and streams own their shutdown."""
    argv = sys.argv[1:]
    code = main(argv)
    if argv and argv[0] == "serve":
        raise SystemExit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or a closed stream: nothing more to say
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
