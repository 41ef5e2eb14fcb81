"""Facts about names a file imports from the user's *other* modules.

``from utils import repackage_hidden`` or ``from model import RNNModel``: the
in-file pass cannot know whether ``repackage_hidden`` detaches or what
``RNNModel.forward`` returns. This module finds the defining file, parses it
with :mod:`ast` (never imports or runs it), and summarises the definition with
the same summarizers the engine uses for same-file definitions
(:func:`gradguard.analysis.summary.summarize`), renamed to the local alias — so a
rule sees ``fn:repackage_hidden`` exactly as if it were defined in the file.

How a name is found, cheapest first:

1. names that are not used in the file, and imports from torch, the standard
   library or installed packages, are skipped without any lookup;
2. the module is looked up *by path* (next to the file, under the project
   root, under ``<root>/src``; relative imports from the file's package), and
   re-exports (``from .model import RNNModel`` in a package ``__init__``) are
   followed a few levels;
3. only what that cannot settle goes to ``jedi`` (``Script.goto`` with a
   ``jedi.Project``), and only if its answer lies inside the project.

Results are cached per (path, source hash) and validated against the
modification time and size of every file consulted; a time budget (default
2 s) bounds the work, after which the facts found so far are returned.
Nothing here raises.

Two uses::

    # CLI: once per file, only when the file imports from a possibly-local module
    # (the engine's wrapper passes the rules' fact sources)
    from gradguard.engine.document import resolve_external_facts
    facts = resolve_external_facts(source, path, project_root)
    result = check_source(source, path, config, external_facts=facts)

    # language server: off the keystroke path, after the first publish, on the
    # server's own worker threads (lsp/worker.py, never the loop's default pool)
    facts = await loop.run_in_executor(server.executor, resolve_facts, text, path, root)
    result = document.set_external_facts(facts)   # no re-parse; re-publish if changed

:func:`stats` reports how often jedi was consulted and how long it took.
"""

from __future__ import annotations

import _thread
import ast
import os
import re
import time

from gradguard.analysis.libraries import never_users
from gradguard.analysis.summary import FactSource

from gradguard.model.text import split_lines

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["resolve_external_facts", "stats", "clear_cache"]

DEFAULT_BUDGET = 2.0  # seconds

_MAX_FOLLOW = 4  # re-export hops
_MAX_FILE_BYTES = 2_000_000

_lock = _thread.allocate_lock()  # (not `threading`: the CLI should not pay for importing it)
# (abs path, content key, root) -> (facts, deps: ((path, mtime_ns, size), ...))
_RESULTS: Dict[Tuple[str, Tuple[int, int], str, Tuple[FactSource, ...]], Tuple[Dict[str, object], Tuple[Tuple[str, int, int], ...]]] = {}
# abs path -> (mtime_ns, size, _ModuleInfo or None)
_MODULES: Dict[str, Tuple[int, int, Optional["_ModuleInfo"]]] = {}
# (module, root) jedi could not find: asked once per process, not once per file
# (a project importing a package gradguard's environment does not have would
# otherwise pay jedi's whole sys.path search in every file)
_JEDI_MISSES: set = set()
_STATS = {"calls": 0, "cache_hits": 0, "files_resolved": 0, "names_resolved": 0, "jedi_files": 0,
          "jedi_calls": 0, "jedi_seconds": 0.0, "seconds": 0.0, "timeouts": 0}


def stats() -> Dict[str, float]:
    """Counters since start (or :func:`clear_cache`): ``calls``, ``cache_hits``,
    ``jedi_files`` (files on which jedi was consulted), ``jedi_calls``,
    ``jedi_seconds``, ``seconds`` (total time in this module), ``timeouts``."""
    with _lock:
        return dict(_STATS)


def clear_cache() -> None:
    with _lock:
        _RESULTS.clear()
        _MODULES.clear()
        _BASES.clear()
        _JEDI_MISSES.clear()
        _IMPORTS.clear()
        for k in _STATS:
            _STATS[k] = 0.0 if isinstance(_STATS[k], float) else 0


# ---------------------------------------------------------------- module info
class _ModuleInfo:
    """What one parsed module defines at top level."""

    __slots__ = ("path", "defs", "imports", "aliases", "is_package", "stars", "summaries", "raw_facts")

    def __init__(self, path: str, tree: ast.Module):
        self.path = path
        self.is_package = os.path.basename(path) == "__init__.py"
        self.defs: Dict[str, ast.stmt] = {}
        # name -> (module, level, original name) for `from m import x as name`
        self.imports: Dict[str, Tuple[str, int, str]] = {}
        # alias -> qualified name, for qualifying raw dotted names in facts
        self.aliases: Dict[str, str] = {}
        self.stars: List[Tuple[str, int]] = []  # `from m import *`
        # def name -> its facts as (key prefix, value): summarised once per file version
        self.summaries: Dict[Tuple[str, Tuple[FactSource, ...]], List[Tuple[str, object]]] = {}  # keyed (name, fact sources)
        # def name -> its facts as its own module sees them (before folding), for the folds
        self.raw_facts: Dict[Tuple[str, Tuple[FactSource, ...]], Dict[str, object]] = {}  # keyed (name, fact sources)
        for stmt in _top_level(tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[stmt.name] = stmt
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        self.defs[t.id] = stmt
            elif isinstance(stmt, ast.ImportFrom):
                for a in stmt.names:
                    if a.name == "*":
                        self.stars.append((stmt.module or "", stmt.level or 0))
                    else:
                        local = a.asname or a.name
                        self.imports[local] = (stmt.module or "", stmt.level or 0, a.name)
                        if not stmt.level and stmt.module:
                            self.aliases[local] = f"{stmt.module}.{a.name}"
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.aliases[top] = top


def _top_level(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Top-level statements, entering ``if``/``try`` blocks (guarded imports/defs)."""
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.Try)) or type(stmt).__name__ == "TryStar":
            yield from _top_level(stmt.body)  # type: ignore[attr-defined]  # TryStar: 3.11+
            yield from _top_level(getattr(stmt, "orelse", ()))
            for h in getattr(stmt, "handlers", ()):
                yield from _top_level(h.body)
        else:
            yield stmt


def _stat(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _read_regular(path: str, limit: int) -> Optional[bytes]:
    """At most ``limit`` bytes of ``path`` if it is a regular file, else None. Opened
    without blocking and checked on the open file: a FIFO named ``x.py`` beside the
    file checked (its folder is read for the callers of its classes) blocked
    ``open`` for ever, hanging the CLI and a worker thread of the server."""
    from gradguard.model.files import NotRegularFile, read_regular

    try:
        return read_regular(path, limit, truncate=True)
    except (NotRegularFile, OSError):
        return None


def _load_module(path: str, deps: Dict[str, Tuple[int, int]]) -> Optional[_ModuleInfo]:
    st = _stat(path)
    if st is None:
        return None
    deps[path] = st
    with _lock:
        hit = _MODULES.get(path)
    if hit is not None and hit[:2] == st:
        return hit[2]
    info: Optional[_ModuleInfo] = None
    if st[1] <= _MAX_FILE_BYTES:
        data = _read_regular(path, _MAX_FILE_BYTES)
        try:
            if data is not None:
                info = _ModuleInfo(path, ast.parse(data.decode("utf-8", errors="replace"), filename=path))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            info = None
    with _lock:
        _MODULES[path] = (st[0], st[1], info)
    return info


# ---------------------------------------------------------------- finding modules
def _module_file(base: str, parts: List[str]) -> Optional[str]:
    if not parts:
        init = os.path.join(base, "__init__.py")
        return init if os.path.isfile(init) else None
    stem = os.path.join(base, *parts)
    for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


_BASES: Dict[Tuple[str, str], List[str]] = {}
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def _search_bases(path: Optional[str], root: Optional[str]) -> List[str]:
    """Where top-level imports of ``path`` are looked for: its directory, the
    directory above its package (``proj/pkg/mod.py`` importing ``proj.x`` when
    ``proj/`` and ``proj/pkg/`` are packages), the project root given, and the
    nearest ancestor that looks like a project (pyproject.toml, setup.py, .git),
    each with its ``src/``."""
    d = os.path.dirname(os.path.abspath(path)) if path else ""
    key = (d, root or "")
    hit = _BASES.get(key)
    if hit is not None:
        return hit
    bases: List[str] = []
    if d:
        bases.append(d)
        top = d
        while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
            top = os.path.dirname(top)
        bases.append(top)
        cur = d
        for _ in range(12):
            if any(os.path.exists(os.path.join(cur, m)) for m in _PROJECT_MARKERS):
                bases.extend([cur, os.path.join(cur, "src")])
                break
            parent = os.path.dirname(cur)
            if parent == cur:
                break
            cur = parent
    if root:
        r = os.path.abspath(root)
        bases.extend([r, os.path.join(r, "src")])
    out: List[str] = []
    for b in bases:
        if b not in out and os.path.isdir(b):
            out.append(b)
    if len(_BASES) < 4096:
        _BASES[key] = out
    return out


def _find_module(module: str, level: int, from_file: Optional[str], root: Optional[str]) -> Optional[str]:
    parts = [p for p in module.split(".") if p] if module else []
    if level:
        if not from_file:
            return None
        base = os.path.dirname(os.path.abspath(from_file))
        for _ in range(level - 1):
            base = os.path.dirname(base)
        return _module_file(base, parts)
    for base in _search_bases(from_file, root):
        found = _module_file(base, parts)
        if found:
            return found
    return None


_INSTALLED: Dict[str, bool] = {}


def _is_installed(top: str, root: Optional[str]) -> bool:
    """Is ``top`` an installed top-level module outside the project? Asks the path
    finder (a directory scan; nothing is imported), once per name."""
    hit = _INSTALLED.get(top)
    if hit is None:
        hit = False
        try:
            from importlib.machinery import PathFinder

            spec = PathFinder.find_spec(top)
            origin = (spec.origin or (list(spec.submodule_search_locations or [])[:1] or [""])[0]) if spec else ""
            hit = bool(origin) and ("site-packages" in origin or "dist-packages" in origin
                                    or not (root and os.path.abspath(origin).startswith(os.path.abspath(root))))
        except (ImportError, ValueError, AttributeError, TypeError):
            hit = False
        _INSTALLED[top] = hit
    return hit


def _is_external_module(module: str, level: int) -> bool:
    if level:
        return False
    top = module.split(".")[0]
    return never_users(top)


# ---------------------------------------------------------------- facts
def _qualify_raw(raw: str, info: _ModuleInfo) -> str:
    head, _, rest = raw.partition(".")
    full = info.aliases.get(head)
    if not full:
        return raw
    return f"{full}.{rest}" if rest else full


def _requalify(value: object, info: _ModuleInfo) -> object:
    """Raw dotted constructor/base names inside a fact are written with the
    *defining* module's import aliases; qualify them there, so the importing
    file reads ``torch.nn.LSTM`` whatever aliases it uses itself."""
    from gradguard.model.record import is_record, replace

    if isinstance(value, str):
        return _qualify_raw(value, info)
    if isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
        return tuple(_qualify_raw(v, info) for v in value)
    if is_record(value):
        changes = {}
        for name in ("bases", "attrs"):
            if hasattr(value, name):
                old = getattr(value, name)
                if name == "bases" and isinstance(old, tuple):
                    changes[name] = tuple(_qualify_raw(b, info) if isinstance(b, str) else b for b in old)
                elif name == "attrs" and isinstance(old, tuple):
                    changes[name] = tuple(
                        (k, _qualify_raw(v, info)) if isinstance(v, str) else (k, v) for k, v in old
                    )
        if changes:
            try:
                return replace(value, **changes)
            except (TypeError, ValueError):
                return value
    return value


def _facts_for(stmt: ast.stmt, name: str, alias: str, info: _ModuleInfo,
               sources: Tuple[FactSource, ...]) -> List[Tuple[str, object]]:
    cached = info.summaries.get((name, sources))
    if cached is None:
        cached = _summarise(stmt, name, info, sources)
        info.summaries[(name, sources)] = cached
    return [(f"{prefix}:{alias}", value) for prefix, value in cached]


def _summarise(stmt: ast.stmt, name: str, info: _ModuleInfo, sources: Tuple[FactSource, ...]) -> List[Tuple[str, object]]:
    from gradguard.analysis.summary import cross_file_folds

    def lookup(other: str, classes: bool = False) -> Dict[str, object]:
        # (a class or a module-level assignment only when asked: a fold following the
        # functions a function calls would otherwise summarise every class it constructs)
        d = info.defs.get(other)
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign) if classes \
            else (ast.FunctionDef, ast.AsyncFunctionDef)
        return _raw_facts(d, other, info, sources) if isinstance(d, kinds) else {}

    facts = _raw_facts(stmt, name, info, sources)
    try:
        for fold in cross_file_folds(sources):  # names of the defining module, resolved here
            facts = fold(name, facts, lookup)
    except Exception:  # a fold tripping on odd facts: export nothing, never names the importer would misread
        return []
    out: List[Tuple[str, object]] = []
    for prefix, value in facts.items():
        try:
            out.append((prefix, _requalify(value, info)))
        except Exception:
            out.append((prefix, value))
    return out


def _raw_facts(stmt: ast.stmt, name: str, info: _ModuleInfo, sources: Tuple[FactSource, ...]) -> Dict[str, object]:
    """:func:`_own_facts` of one definition of ``info``, once per module version
    (the folds look callees up; a chain of helpers shares them). Read-only."""
    raw = info.raw_facts.get((name, sources))
    if raw is None:
        raw = info.raw_facts[(name, sources)] = dict(_own_facts(stmt, name, sources))
    return raw


def _own_facts(stmt: ast.stmt, name: str, sources: Sequence[FactSource]) -> List[Tuple[str, object]]:
    """The by-name facts the summarizers give a definition of ``name``, as
    (key prefix, value), as its own module sees them (nothing folded or
    requalified). Never raises: a summarizer tripping on odd code says less."""
    from gradguard.analysis.summary import summarize

    out: List[Tuple[str, object]] = []
    try:
        facts = summarize(stmt, True, sources)
    except Exception:
        return out
    for key, value in facts:
        prefix, sep, tail = key.rpartition(":")
        if sep and tail == name and not key.startswith("import:"):
            out.append((prefix, value))
    return out


def _lookup(module: str, level: int, name: str, from_file: Optional[str], root: Optional[str],
            deps: Dict[str, Tuple[int, int]], depth: int = 0) -> Optional[Tuple[ast.stmt, _ModuleInfo]]:
    """The defining statement of ``name`` in ``module`` (by path), following re-exports."""
    if depth > _MAX_FOLLOW or _is_external_module(module, level):
        return None
    mod_file = _find_module(module, level, from_file, root)
    if mod_file is None:
        return None
    info = _load_module(mod_file, deps)
    if info is None:
        return None
    stmt = info.defs.get(name)
    if stmt is not None:
        return stmt, info
    imp = info.imports.get(name)
    if imp is not None:
        m, lvl, orig = imp
        return _lookup(m, lvl, orig, mod_file, root, deps, depth + 1)
    for m, lvl in info.stars:
        found = _lookup(m, lvl, name, mod_file, root, deps, depth + 1)
        if found is not None:
            return found
    return None


# `from <module> import <names>`, one line or parenthesised over several
_FROM_RE = re.compile(r"^([ \t]*)from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)


def _imports_of(source: str) -> List[Tuple[str, int, str, str, int, int]]:
    """``(module, level, name, alias, lineno, col)`` of every ``from m import name``
    in the text (module level or indented), found textually: no parse and no tree
    walk, so a file with a syntax error still tells, and the cost stays far below
    the analysis itself."""
    out = []
    for m in _FROM_RE.finditer(source):
        mod = m.group(2)
        level = len(mod) - len(mod.lstrip("."))
        mod = mod[level:]
        if not mod and not level:
            continue
        names = m.group(3)
        if names.startswith("("):
            names = names[1:-1]
        lineno = source.count("\n", 0, m.start()) + 1
        for line in split_lines(names):
            line = line.split("#", 1)[0].rstrip().rstrip("\\")
            for part in line.split(","):
                named = _name_as(part, dotted=False)
                if named is not None:
                    out.append((mod, level, named[0], named[1], lineno, len(m.group(1))))
    return out


def _name_as(part: str, dotted: bool) -> Optional[Tuple[str, str]]:
    """``x`` → (x, x), ``x as y`` → (x, y) for one item of an import list;
    ``dotted``: the name may be ``a.b`` (``import a.b``), used by that path."""
    bits = part.split()
    if not bits or not (all(p.isidentifier() for p in bits[0].split(".")) if dotted else bits[0].isidentifier()):
        return None
    if len(bits) == 1:
        return bits[0], bits[0]
    if len(bits) == 3 and bits[1] == "as" and bits[2].isidentifier():
        return bits[0], bits[2]
    return None


# `import a.b.c`, `import a.b as x, d` (one line; `import` has no parenthesised form)
_IMPORT_RE = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.M)


def _module_imports_of(source: str) -> List[Tuple[str, str]]:
    """``(module, name it is used by)`` of every ``import m`` / ``import a.b as m``
    in the text, found textually like :func:`_imports_of`. ``import a.b`` is used
    as ``a.b.<name>``, so that dotted path is the name."""
    out = []
    for m in _IMPORT_RE.finditer(source):
        for part in m.group(1).rstrip().rstrip("\\").split(","):
            named = _name_as(part, dotted=True)
            if named is not None:
                out.append(named)
    return out


def _attributes_used(source: str, alias: str) -> List[str]:
    """The names the text reads off a module alias: ``alias.<name>``, in order, once each."""
    seen: Dict[str, None] = {}
    for m in re.finditer(r"(?<![\w.])" + re.escape(alias) + r"[ \t]*\.[ \t]*([^\W\d]\w*)", source):
        seen.setdefault(m.group(1), None)
    return list(seen)


def _is_used(source: str, alias: str) -> bool:
    """Does ``alias`` occur in the text besides its import? (Textual: a mention in
    a comment counts, which only costs a lookup.)"""
    n = 0
    for _ in re.finditer(r"(?<![\w.])" + re.escape(alias) + r"\b", source):
        n += 1
        if n >= 2:
            return True
    return False


# ---------------------------------------------------------------- jedi
def _jedi_lookup(source: str, path: Optional[str], root: Optional[str], line: int, col: int, alias: str,
                 deadline: float) -> Optional[Tuple[str, int]]:
    """(defining file, line) of ``alias`` as imported at ``line``, per jedi; only
    inside the project. Counted in :func:`stats`."""
    if time.monotonic() >= deadline:
        return None
    t0 = time.monotonic()
    try:
        import jedi  # lazily: only a file jedi is really needed for pays for it

        project = jedi.Project(os.path.abspath(root)) if root else None
        script = jedi.Script(source, path=path, project=project)
        lines = split_lines(source)
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        c = _find_word(text, alias, col)
        if c is None:
            return None
        names = script.goto(line, c, follow_imports=True)
    except Exception:
        return None
    finally:
        with _lock:
            _STATS["jedi_calls"] += 1
            _STATS["jedi_seconds"] += time.monotonic() - t0
    for n in names:
        mp = getattr(n, "module_path", None)
        if mp is None or n.line is None:
            continue
        mp = str(mp)
        if root and not os.path.abspath(mp).startswith(os.path.abspath(root) + os.sep):
            continue
        if "site-packages" in mp or "dist-packages" in mp:
            continue
        return mp, n.line
    return None


# ---------------------------------------------------------------- the other way: callers
_METHOD_PARAMS = re.compile(r"def[ \t]+\w+[ \t]*\([ \t]*self[ \t]*,([^)]*)\)")
_CLASS_NAMES = re.compile(r"^class\s+(\w+)", re.M)
_MAX_CALLER_FILES = 200  # a directory holding more is not searched for callers
# folder -> (mtime_ns, size, {file: the names it imports at its top: ((module, level, name, alias), ...)})
_IMPORTS: Dict[str, Tuple[int, int, Optional[Dict[str, Tuple[Tuple[str, int, str, str], ...]]]]] = {}


def may_be_called(source: str) -> bool:
    """Cheap textual test: does the file define a class with a method whose parameter
    is back-propagated (``def backward(self, gen_loss, dis_loss): ... gen_loss.backward()``)?
    Then what its callers hand it matters (``callargs:`` facts), and they may be in
    the files that import the class. (String scans, not a regex over every word: the
    command line asks it of every file.)"""
    if "class " not in source:
        return False
    received = set()
    n = len(source)
    i = source.find("backward")
    while i >= 0:
        k = i + 8
        while k < n and source[k] in " \t":
            k += 1
        b = i - 1
        while b >= 0 and source[b] in " \t":
            b -= 1
        if k < n and source[k] == "(" and b >= 0 and source[b] == ".":
            b -= 1
            end = b + 1
            while b >= 0 and (source[b].isalnum() or source[b] == "_"):
                b -= 1
            if end > b + 1:
                received.add(source[b + 1:end])
        i = source.find("backward", i + 8)
    if not received:
        return False
    for m in _METHOD_PARAMS.finditer(source):
        for p in m.group(1).split(","):
            if p.split("=", 1)[0].split(":", 1)[0].strip() in received:
                return True
    return False


_IMPORTS_HEAD = 32768  # bytes of a possible caller read for its imports


def _head_imports(path: str) -> Tuple[Tuple[str, int, str, str], ...]:
    """The ``from m import name`` at the top of a file (before its first definition, in
    its first 32 KiB), read textually: where a caller of another file's class imports it."""
    data = _read_regular(path, _IMPORTS_HEAD)
    if data is None:
        return ()
    head = data.decode("utf-8", errors="replace")
    cut = min((i for i in (head.find("\ndef "), head.find("\nclass "), head.find("\nasync def ")) if i >= 0),
              default=len(head))
    return tuple((m, lvl, n, a) for m, lvl, n, a, _, _ in _imports_of(head[:cut]))


def _folder_imports(folder: str, st: Tuple[int, int]) -> Optional[Dict[str, Tuple[Tuple[str, int, str, str], ...]]]:
    """:func:`_head_imports` of every ``.py`` file of a folder, read again when the folder
    changes (a file added, removed or replaced), else kept for the process: a caller
    edited in place to import a class it did not is seen once the folder changes (a
    miss until then, never a finding). None for a folder too large to search."""
    with _lock:
        hit = _IMPORTS.get(folder)
    if hit is not None and hit[:2] == st:
        return hit[2]
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
    except OSError:
        return None
    got = None
    if len(names) <= _MAX_CALLER_FILES:
        got = {os.path.join(folder, n): _head_imports(os.path.join(folder, n)) for n in names}
    with _lock:
        _IMPORTS[folder] = (st[0], st[1], got)
    return got


def _callers_facts(source: str, abspath: str, root: Optional[str], deps: Dict[str, Tuple[int, int]],
                   sources: Tuple[FactSource, ...], deadline: float) -> Dict[str, object]:
    """What the files importing a class of this one hand to its methods
    (``FactSource.callers``: edge-connect's ``src/edge_connect.py`` calling
    ``self.edge_model.process(...)`` then ``self.edge_model.backward(gen_loss,
    dis_loss)`` on the ``EdgeModel`` of ``src/models.py``), with the constructor named
    as this file names it. The callers are looked for in this file's own directory, by
    the imports at their top (:func:`_folder_imports`); the directory and the callers
    become dependencies of the result, so a caller edited, added or removed is seen."""
    classes = set(_CLASS_NAMES.findall(source))
    if not classes:
        return {}
    folders = [os.path.dirname(abspath)]
    out: Dict[str, object] = {}
    for folder in folders:
        st = _stat(folder)
        if st is None:
            continue
        deps[folder] = st
        index = _folder_imports(folder, st)
        for other, imports in (index or {}).items():
            if other == abspath or time.monotonic() >= deadline:
                continue
            aliases: Dict[str, str] = {}
            for module, level, name, alias in imports:
                if name in classes and _find_module(module, level, other, root) == abspath:
                    aliases[alias] = name
            if not aliases:
                continue
            info = _load_module(other, deps)
            if info is None:
                continue
            for key, values in _caller_facts_of(info, sources):
                for ctor, recv, bound in values:
                    if ctor in aliases:
                        got = out.setdefault(key, frozenset())
                        out[key] = got | {(aliases[ctor], recv, bound)}  # type: ignore[operator]
    return out


def _caller_facts_of(info: "_ModuleInfo", sources: Tuple[FactSource, ...]) -> List[Tuple[str, frozenset]]:
    """``FactSource.callers`` over the top-level definitions of a parsed module, once per
    module version."""
    key = ("<callers>", sources)
    cached = info.summaries.get(key)
    if cached is None:
        cached = []
        seen: set = set()
        for stmt in info.defs.values():
            if id(stmt) in seen or not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            seen.add(id(stmt))
            for src in sources:
                if src.callers is None:
                    continue
                try:
                    cached.extend((k, v) for k, v in src.callers(stmt) if isinstance(v, frozenset))
                except Exception:
                    continue
        info.summaries[key] = cached
    return cached  # type: ignore[return-value]


def _find_word(text: str, word: str, start: int) -> Optional[int]:
    """Character column of ``word`` as a whole word after ``import`` on ``text``."""
    i = text.find(" import ", start)
    i = 0 if i < 0 else i
    while True:
        j = text.find(word, i)
        if j < 0:
            return None
        before = text[j - 1] if j else " "
        after = text[j + len(word)] if j + len(word) < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return j
        i = j + 1


# ---------------------------------------------------------------- public API
def resolve_external_facts(
    source: str,
    path: Optional[str],
    project_root: Optional[str] = None,
    budget: float = DEFAULT_BUDGET,
    use_jedi: bool = True,
    sources: Sequence[FactSource] = (),
) -> Dict[str, object]:
    """Facts (``fn:<alias>``, ``class:<alias>``, ``var:<alias>``, ...) for the names
    ``source`` imports from the user's other modules and actually uses.

    ``path`` is the file's path (relative imports and sibling modules are found
    from it), ``project_root`` where top-level imports are looked up (default:
    the file's directory). Gives up after ``budget`` seconds with what it has.
    ``sources``: the fact sources to summarise definitions with, those the
    engine summarises the file itself with (front ends call the engine's
    :func:`gradguard.engine.document.resolve_external_facts`, which passes them).
    Never raises; returns ``{}`` when there is nothing to say."""
    t0 = time.monotonic()
    try:
        return _resolve(source, path, project_root, budget, use_jedi, t0, tuple(sources))
    except Exception:
        return {}
    finally:
        with _lock:
            _STATS["calls"] += 1
            _STATS["seconds"] += time.monotonic() - t0


def _resolve(source: str, path: Optional[str], root: Optional[str], budget: float, use_jedi: bool,
             t0: float, sources: Tuple[FactSource, ...]) -> Dict[str, object]:
    if not isinstance(source, str):
        return {}
    if root is None and path:
        root = os.path.dirname(os.path.abspath(path))
    abspath = os.path.abspath(path) if path else ""
    # an in-process cache: the string hash (plus the length) is key enough, and
    # cheaper than a cryptographic digest of the whole text
    digest = (len(source), hash(source))
    key = (abspath, digest, os.path.abspath(root) if root else "", sources)
    with _lock:
        hit = _RESULTS.get(key)
    if hit is not None and all(_stat(p) == (m, s) for p, m, s in hit[1]):
        with _lock:
            _STATS["cache_hits"] += 1
        return dict(hit[0])

    deadline = t0 + budget
    facts: Dict[str, object] = {}
    deps: Dict[str, Tuple[int, int]] = {}
    jedi_used = False
    complete = True
    # (module, level, alias) of the user's modules imported whole, read as alias.<name>
    modules: List[Tuple[str, int, str]] = [
        (module, 0, alias) for module, alias in _module_imports_of(source) if not _is_external_module(module, 0)
    ]
    for module, level, name, alias, lineno, col in _imports_of(source):
        if _is_external_module(module, level) or not _is_used(source, alias):
            continue
        if time.monotonic() >= deadline:
            complete = False
            break
        found = _lookup(module, level, name, path, root, deps)
        if found is None:
            sub = f"{module}.{name}" if module else name
            if _find_module(sub, level, path, root) is not None:
                modules.append((sub, level, alias))  # `from pkg import mod`: a module, read as mod.<name>
                continue
        if found is None and use_jedi:
            if _find_module(module, level, path, root) is not None:
                continue  # the module is local and by path it does not define the name: jedi would not either
            if not level and _is_installed(module.split(".")[0], root):
                continue  # an installed package, not the user's code
            miss_key = (module if not level else f"{os.path.dirname(abspath)}:{'.' * level}{module}", key[2])
            with _lock:
                known_miss = miss_key in _JEDI_MISSES
            if known_miss:
                continue  # jedi already found nothing for this module (e.g. a package of another environment)
            jedi_used = True
            loc = _jedi_lookup(source, path or None, root, lineno, col, alias, deadline)
            if loc is None:
                with _lock:
                    if len(_JEDI_MISSES) < 4096:
                        _JEDI_MISSES.add(miss_key)
            if loc is not None:
                info = _load_module(loc[0], deps)
                if info is not None:
                    for stmt in info.defs.values():
                        if getattr(stmt, "lineno", None) == loc[1] or (
                            hasattr(stmt, "decorator_list") and stmt.lineno <= loc[1] <= (stmt.end_lineno or stmt.lineno)
                            and getattr(stmt, "name", None) == name
                        ):
                            found = (stmt, info)
                            break
        if found is None:
            continue
        stmt, info = found
        def_name = getattr(stmt, "name", None) or name
        for k, v in _facts_for(stmt, def_name, alias, info, sources):
            facts[k] = v
        with _lock:
            _STATS["names_resolved"] += 1
    for module, level, alias in modules:
        if time.monotonic() >= deadline:
            complete = False
            break
        if _find_module(module, level, path, root) is None:
            continue  # not one of the user's modules
        for name in _attributes_used(source, alias):
            found = _lookup(module, level, name, path, root, deps)
            if found is None:
                continue
            stmt, info = found
            def_name = getattr(stmt, "name", None) or name
            for k, v in _facts_for(stmt, def_name, f"{alias}.{name}", info, sources):
                facts[k] = v
            with _lock:
                _STATS["names_resolved"] += 1
    if path and time.monotonic() < deadline and any(src.callers is not None for src in sources) \
            and may_be_called(source):
        for k, v in _callers_facts(source, abspath, root, deps, sources, deadline).items():
            old = facts.get(k)
            facts[k] = (old | v) if isinstance(old, frozenset) and isinstance(v, frozenset) else v
    with _lock:
        if jedi_used:
            _STATS["jedi_files"] += 1
        if facts:
            _STATS["files_resolved"] += 1
        if not complete:
            _STATS["timeouts"] += 1
        elif len(_RESULTS) < 4096:
            _RESULTS[key] = (dict(facts), tuple((p, m, s) for p, (m, s) in deps.items()))
    return facts
