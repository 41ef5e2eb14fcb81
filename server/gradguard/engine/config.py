"""Configuration: ``[tool.gradguard]`` in ``pyproject.toml`` (and editor settings).

```toml
[tool.gradguard]
select = ["GG"]            # codes or prefixes; default: every rule
ignore = ["GG102"]
exclude = ["build/", "third_party/**"]   # gitignore-style, for `gradguard check DIR`
[tool.gradguard.severity]
GG102 = "warning"
[tool.gradguard.per-file-ignores]
"tests/**" = ["GG101"]
```

A broken config raises :class:`ConfigError` with a message naming the file
and the key; nothing here ever falls back silently.
"""

from __future__ import annotations

import os
import sys

from gradguard.model.i18n import normalize_language

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (this module is on the CLI's start-up path: no typing, no dataclasses)
    from typing import Dict, Iterable, List, Mapping, Optional, Tuple
    import re

    from gradguard.model.findings import Severity


class ConfigError(ValueError):
    """A configuration value or file that cannot be used."""


_KNOWN_KEYS = {
    "select",
    "ignore",
    "extend-select",
    "extend-ignore",
    "severity",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "language",
    "max-file-size",
    "unverified-notes",
}


class Config:
    """Immutable effective configuration (a plain class, not a dataclass, to
    keep ``gradguard check``'s start-up light)."""

    __slots__ = ("select", "ignore", "severity", "per_file_ignores", "exclude", "language", "root", "source",
                 "max_file_size", "unverified_notes")
    _FIELDS = __slots__
    # (declared for type checkers; set once in __init__)
    select: Tuple[str, ...]
    ignore: Tuple[str, ...]
    severity: Dict[str, Severity]
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...]
    exclude: Tuple[str, ...]
    language: str
    root: Optional[str]
    source: Optional[str]
    unverified_notes: bool

    def __init__(
        self,
        select: Tuple[str, ...] = (),  # empty = all rules
        ignore: Tuple[str, ...] = (),
        severity: Optional[Mapping[str, Severity]] = None,
        per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = (),
        exclude: Tuple[str, ...] = (),
        language: str = "en",
        root: Optional[str] = None,  # directory of the pyproject.toml it came from
        source: Optional[str] = None,  # path of that file, for messages
        max_file_size: Optional[float] = None,  # MB; files over it are skipped by `check` (None: its default, 0: no limit)
        unverified_notes: bool = False,  # info notes where a path cannot be verified (GG101)
    ):
        set_ = object.__setattr__
        set_(self, "select", tuple(select))
        set_(self, "ignore", tuple(ignore))
        set_(self, "severity", dict(severity or {}))
        set_(self, "per_file_ignores", tuple(per_file_ignores))
        set_(self, "exclude", tuple(exclude))
        set_(self, "language", language)
        set_(self, "root", root)
        set_(self, "source", source)
        set_(self, "max_file_size", max_file_size)
        set_(self, "unverified_notes", bool(unverified_notes))

    def __setattr__(self, name, value):
        raise AttributeError("Config is immutable; use merged()")

    def __reduce__(self):  # picklable (the CLI sends configs to worker processes)
        return (Config, self._values())

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __eq__(self, other):
        if not isinstance(other, Config):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self):
        v = self._values()
        return hash(v[:2] + (tuple(sorted(v[2].items())),) + v[3:])

    def __repr__(self) -> str:  # deterministic: part of the CLI cache key
        sev = {k: getattr(v, "value", v) for k, v in sorted(self.severity.items())}
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS if f != "severity")
        return f"Config({inner}, severity={sev!r})"

    # -- rule selection -------------------------------------------------
    def is_enabled(self, code: str, path: Optional[str] = None) -> bool:
        if self.select and not _matches_any(code, self.select):
            return False
        if _matches_any(code, self.ignore):
            # a more specific select beats a broader ignore (ruff's rule)
            if not any(code.startswith(s) and len(s) > _longest(code, self.ignore) for s in self.select):
                return False
        if path and self.per_file_ignores:
            rel = self._relative(path)
            for pattern, codes in self.per_file_ignores:
                if _path_matches(rel, pattern) and _matches_any(code, codes):
                    return False
        return True

    def severity_for(self, code: str, default: Severity) -> Severity:
        return self.severity.get(code, default)

    def _relative(self, path: str) -> str:
        if self.root:
            p = os.path.abspath(path)
            root = self.root.rstrip(os.sep) + os.sep
            if p.startswith(root):
                return p[len(root):].replace(os.sep, "/")
        return path.replace(os.sep, "/")

    def is_excluded(self, path: str) -> bool:
        if not self.exclude:
            return False
        rel = self._relative(path)
        return any(_path_matches(rel, pat) for pat in self.exclude)

    def merged(self, **overrides) -> "Config":
        """Editor/CLI overrides on top of the file config (None = keep)."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        if "severity" in clean:
            sev = dict(self.severity)
            sev.update(clean["severity"])
            clean["severity"] = sev
        unknown = set(clean) - set(self._FIELDS)
        if unknown:
            raise TypeError(f"unknown Config field(s): {', '.join(sorted(unknown))}")
        values = {f: getattr(self, f) for f in self._FIELDS}
        values.update(clean)
        return Config(**values)


def _longest(code: str, prefixes: Iterable[str]) -> int:
    return max((len(p) for p in prefixes if code.startswith(p)), default=0)


def _matches_any(code: str, prefixes: Iterable[str]) -> bool:
    for p in prefixes:
        if p.upper() == "ALL" or code.startswith(p):
            return True
    return False


_GLOB_CACHE: Dict[str, "re.Pattern[str]"] = {}


def _glob_regex(pat: str) -> "re.Pattern[str]":
    """A gitignore glob as a regex: ``*`` and ``?`` stay inside one path component
    (``/test*.py`` is ``test_a.py`` at the top, never ``test/a/b.py``), ``**`` spans
    components (``a/**/b``, ``**/b``, ``a/**``), ``[...]`` is a character class."""
    cached = _GLOB_CACHE.get(pat)
    if cached is not None:
        return cached
    import re

    out, i, n = [], 0, len(pat)
    while i < n:
        c = pat[i]
        if c == "*":
            if pat.startswith("**", i):
                before_ok = i == 0 or pat[i - 1] == "/"
                after = pat[i + 2:i + 3]
                if before_ok and after == "/":
                    out.append("(?:[^/]*/)*")  # "**/": zero or more directories
                    i += 3
                    continue
                if before_ok and after == "":
                    out.append(".*")  # "a/**": everything below
                    i += 2
                    continue
            out.append("[^/]*")
            while i < n and pat[i] == "*":
                i += 1
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pat.find("]", i + 2 if pat[i + 1:i + 2] in ("!", "^") else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pat[i + 1:j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    rx = re.compile("".join(out))
    _GLOB_CACHE[pat] = rx
    return rx


def _path_matches(rel: str, pattern: str) -> bool:
    """gitignore-flavoured match of a relative path: a pattern without ``/`` (a
    trailing one aside) matches any component; one with ``/`` (or anchored by a
    leading ``/``) matches from the top; ``dir/`` matches directories only; a
    matched directory covers everything below it. ``*`` never crosses ``/``."""
    pat = pattern.strip()
    if not pat:
        return False
    anchored = pat.startswith("/")
    pat = pat.lstrip("/")
    dir_only = pat.endswith("/")
    pat = pat.rstrip("/")
    if not pat:
        return False
    is_dir = rel.endswith("/")
    parts = [p for p in rel.split("/") if p]
    if not parts:
        return False
    # the prefixes of rel a pattern may name: every parent directory, and rel
    # itself unless a directory pattern meets a file
    last = len(parts) if (is_dir or not dir_only) else len(parts) - 1
    rx = _glob_regex(pat)
    if "/" not in pat and not anchored:
        return any(rx.fullmatch(parts[k]) for k in range(last))
    return any(rx.fullmatch("/".join(parts[:k + 1])) for k in range(last))


def _codes(value, key: str, where: str) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: '{key}' must be a list of rule codes like [\"GG101\"], got {value!r}")
    out = []
    for v in value:
        v = v.strip().upper()
        if v != "ALL" and not (v.startswith("GG") and (len(v) == 2 or v[2:].isdigit())):
            raise ConfigError(f"{where}: '{key}' has {v!r}, which is not a gradguard rule code (GGnnn)")
        out.append(v)
    return tuple(out)


def config_from_mapping(table: Mapping, where: str = "settings", root: Optional[str] = None,
                        warnings: Optional[List[str]] = None) -> Config:
    """Validate a ``[tool.gradguard]``-shaped mapping. Raises ConfigError.
    ``warnings`` receives what is honoured but likely a mistake: a ``severity``
    entry for a code no rule has (a typo, or a rule of a newer release) changes
    nothing, and said nothing."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.gradguard] must be a table, got {type(table).__name__}")
    unknown = set(table) - _KNOWN_KEYS - {k.replace("-", "_") for k in _KNOWN_KEYS}
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))} in [tool.gradguard] "
            f"(known: {', '.join(sorted(_KNOWN_KEYS))})"
        )

    def get(key):
        return table.get(key, table.get(key.replace("-", "_")))

    select = _codes(get("select") or [], "select", where)
    select += _codes(get("extend-select") or [], "extend-select", where)
    ignore = _codes(get("ignore") or [], "ignore", where)
    ignore += _codes(get("extend-ignore") or [], "extend-ignore", where)
    if select and "ALL" not in select:
        # select = ["GG999"] (a typo, or a code of a newer release) alone would check
        # nothing and pass: a CI run that looks green. A code no rule has beside codes
        # that select something is left alone (a config shared with a newer release).
        from gradguard.rules import all_rules

        known = [r.code for r in all_rules()]
        if not any(k.startswith(c) for c in select for k in known):
            raise ConfigError(f"{where}: 'select' = {list(select)!r} matches no gradguard rule, so nothing would be "
                              f"checked (known: {', '.join(known)})")

    from gradguard.model.findings import Severity

    severity: Dict[str, Severity] = {}
    sev = get("severity") or {}
    if not isinstance(sev, dict):
        raise ConfigError(f"{where}: 'severity' must be a table of code = \"error|warning|info|hint\"")
    for code, value in sev.items():
        (code_,) = _codes([code], "severity", where)
        try:
            severity[code_] = Severity.parse(value)
        except ValueError as e:
            raise ConfigError(f"{where}: severity.{code}: {e}") from None
    if severity and warnings is not None:
        from gradguard.rules import all_rules

        known = [r.code for r in all_rules()]
        for code_ in severity:
            if code_ not in known:
                warnings.append(f"{where}: severity.{code_}: no gradguard rule has this code, so it changes nothing "
                                f"(known: {', '.join(known)})")

    pfi = get("per-file-ignores") or {}
    if not isinstance(pfi, dict):
        raise ConfigError(f"{where}: 'per-file-ignores' must be a table of \"glob\" = [codes]")
    per_file = tuple((str(pat), _codes(codes, f"per-file-ignores.{pat}", where)) for pat, codes in pfi.items())

    exclude = []
    for key in ("exclude", "extend-exclude"):
        v = get(key) or []
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{where}: '{key}' must be a list of glob patterns")
        exclude.extend(v)

    max_mb = get("max-file-size")
    if max_mb is not None and (isinstance(max_mb, bool) or not isinstance(max_mb, (int, float))
                               or not 0 <= max_mb < float("inf")):  # TOML has nan and inf
        raise ConfigError(f"{where}: 'max-file-size' must be a number of megabytes (0: no limit), got {max_mb!r}")

    notes = get("unverified-notes")
    if notes is not None and not isinstance(notes, bool):
        raise ConfigError(f"{where}: 'unverified-notes' must be true or false, got {notes!r}")

    language = get("language") or "en"
    if not isinstance(language, str) or normalize_language(language) is None:
        raise ConfigError(f"{where}: 'language' must be \"en\" or \"zh\", got {language!r}")

    return Config(
        select=select,
        ignore=ignore,
        severity=severity,
        per_file_ignores=per_file,
        exclude=tuple(exclude),
        language=normalize_language(language) or "en",
        root=root,
        source=where,
        max_file_size=None if max_mb is None else float(max_mb),
        unverified_notes=bool(notes),
    )


_MAX_PYPROJECT_BYTES = 16_000_000


def _read_pyproject(path: str) -> bytes:
    """The bytes of a ``pyproject.toml`` (``--config`` names any file). Raises
    ConfigError for what is not a regular file (a FIFO named by ``--config``
    blocked for ever; ``/dev/zero`` filled the memory and ended in an empty
    MemoryError message) or is over 16 MB."""
    from gradguard.model.files import NotRegularFile, OverLimit, read_regular

    try:
        return read_regular(path, _MAX_PYPROJECT_BYTES)
    except NotRegularFile as e:
        if e.is_dir:
            raise ConfigError(f"{path}: cannot read: Is a directory") from None
        raise ConfigError(f"{path}: not a regular file (a FIFO, device or socket): not read") from None
    except OverLimit:
        raise ConfigError(f"{path}: over {_MAX_PYPROJECT_BYTES // 1_000_000} MB, not read as a configuration") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None


def find_pyproject(start: str) -> Optional[str]:
    """Path of the nearest pyproject.toml with a [tool.gradguard] table, from ``start`` upwards."""
    d = os.path.realpath(start)
    if not os.path.isdir(d):
        d = os.path.dirname(d)
    while True:
        candidate = os.path.join(d, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                if os.path.getsize(candidate) > _MAX_PYPROJECT_BYTES:
                    return candidate  # too large to search: loading it says so
                text = _read_pyproject(candidate)
            except (OSError, ConfigError):
                text = b""
            # the word, not a header: `[tool] gradguard = {...}` and dotted keys
            # (`tool.gradguard.select = [...]`) are the same table in TOML
            if b"gradguard" in text and _has_table(text):
                return candidate
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _has_table(text: bytes) -> bool:
    """Does this pyproject.toml define ``tool.gradguard``? A file that does not
    parse (or whose ``tool`` is not a table) says yes, so that loading it
    reports what is wrong instead of the table being ignored without a word."""
    try:
        data = _toml().loads(text.decode("utf-8"))
    except Exception:
        return True
    tool = data.get("tool")
    return not isinstance(tool, dict) or "gradguard" in tool


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


def load_config_file(pyproject, warnings: Optional[List[str]] = None) -> Config:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    where = str(pyproject)
    raw = _read_pyproject(where)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not valid UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: invalid TOML: {e}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        kind = "an array of tables ([[tool]])" if isinstance(tool, list) else f"a {type(tool).__name__}"
        raise ConfigError(f"{where}: 'tool' must be a table ([tool.gradguard] lives in it), but it is {kind}")
    table = tool.get("gradguard", {})
    return config_from_mapping(table, where=where, root=os.path.dirname(os.path.realpath(pyproject)), warnings=warnings)


def load_config(start: str, warnings: Optional[List[str]] = None) -> Config:
    """Config for a path: the nearest ``[tool.gradguard]``, else defaults
    (``warnings``: see :func:`config_from_mapping`)."""
    found = find_pyproject(start)
    if found is None:
        return Config()
    return load_config_file(found, warnings)
