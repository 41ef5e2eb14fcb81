"""Result cache of ``gradguard check``: unchanged files are not re-analysed.

A file's entry is keyed by everything its result depends on: its bytes and
path, the effective configuration, the message language, and gradguard itself
(version plus the size and mtime of every module of the package, so an edited
checkout never serves stale results). Files whose findings depend on *other*
files (names imported from the user's own modules) are never cached.

Entries are ``marshal``-ed plain data (no imports needed to read them), one
file per key, written atomically, each behind a checksum of its bytes: a
corrupt, truncated or unreadable entry is a miss (one flipped bit gave wrong
findings before the checksum). The directory holds a ``.gitignore`` of ``*``
and a ``CACHEDIR.TAG``.

The cache directory sits in the checked tree, which may be someone else's
repository: a ``.gradguard_cache`` committed as a symbolic link (to ``~/.ssh``,
say) must not make ``check`` write where it points. A symlinked cache
directory, shard directory or entry is never followed: no cache is used.
"""

from __future__ import annotations

import marshal
import os
from gradguard import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Optional

try:  # the built-in module: loading OpenSSL through hashlib costs more than a cached check
    from _blake2 import blake2b as _hash
except ImportError:  # pragma: no cover
    from hashlib import blake2b as _hash

_FORMAT = 2
_SUM = 16  # bytes of checksum in front of each entry
_code_fp: Optional[bytes] = None


def _code_fingerprint() -> bytes:
    global _code_fp
    if _code_fp is None:
        h = _hash(f"{__version__}/{_FORMAT}".encode())
        root = os.path.dirname(os.path.abspath(__file__))
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                if e.is_dir() and e.name != "__pycache__":
                    stack.append(e.path)
                elif e.name.endswith(".py"):
                    st = e.stat()
                    h.update(f"{e.path}:{st.st_size}:{st.st_mtime_ns};".encode())
        _code_fp = h.digest()
    return _code_fp


def key(path: str, data: bytes, config, lang: str, resolve: bool) -> str:
    h = _hash(_code_fingerprint(), digest_size=20)
    h.update(f"\0{os.path.abspath(path)}\0{lang}\0{int(resolve)}\0{config!r}\0".encode("utf-8", "surrogatepass"))
    h.update(data)
    return h.hexdigest()


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _real_dir(path: str, create: bool) -> bool:
    """Is ``path`` a directory itself, not a symbolic link to one (made if ``create``)?"""
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return False
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            pass
        except OSError:
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode)


def _create_new(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def prepare(directory: Optional[str]) -> Optional[str]:
    """Create the cache directory (or return None if that is impossible, or if
    it is a symbolic link: no cache, no error)."""
    d = os.path.abspath(directory or ".gradguard_cache")
    try:
        parent = os.path.dirname(d)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
        fresh = not os.path.lexists(d) or (os.path.isdir(d) and not os.listdir(d))
        if not _real_dir(d, create=True):
            return None
        gi = os.path.join(d, ".gitignore")
        # only in a folder of its own: "--cache-dir ." made the project's own
        # .gitignore "*", and git then ignored every new file of the user's
        if fresh and not os.path.lexists(gi):
            _create_new(gi, "# created by gradguard\n*\n")
            _create_new(os.path.join(d, "CACHEDIR.TAG"),
                        "Signature: 8a477f597d28d172789f06886806bc55\n# gradguard result cache\n")
    except OSError:
        return None
    return d


def _entry(directory: str, k: str) -> str:
    return os.path.join(directory, k[:2], k[2:])


def _checksum(payload: bytes) -> bytes:
    return _hash(payload, digest_size=_SUM).digest()


def load(directory: str, k: str):
    try:
        fd = os.open(_entry(directory, k), os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read()
        payload = raw[_SUM:]
        if len(raw) <= _SUM or raw[:_SUM] != _checksum(payload):
            return None  # corrupt or truncated: a miss
        value = marshal.loads(payload)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not (isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], list)):
        return None
    return value


def store(directory: str, k: str, value) -> None:
    path = _entry(directory, k)
    shard = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        if not _real_dir(directory, create=False) or not _real_dir(shard, create=True):
            return  # the directory, or the shard in it, was swapped for a link: write nothing
        payload = marshal.dumps(value)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(_checksum(payload) + payload)
        os.replace(tmp, path)  # replaces a link at ``path`` itself, never what it points to
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
