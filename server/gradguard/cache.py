"""Result cache of ``gradguard check``: unchanged files are not re-analysed.

A file's entry is keyed by everything its result depends on: its bytes and
path, the effective configuration, the message language, and gradguard itself
(version plus the size and mtime of every module of the package, so an edited
checkout never serves stale results). Files whose findings depend on *other*
files (names imported from the user's own modules) are never cached.

Entries are ``marshal``-ed plain data (no imports needed to read them), one
file per key, written atomically; a corrupt or unreadable entry is a miss.
The directory holds a ``.gitignore`` of ``*`` and a ``CACHEDIR.TAG``.
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

_FORMAT = 1
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


def prepare(directory: Optional[str]) -> Optional[str]:
    """Create the cache directory (or return None if that is impossible: no cache, no error)."""
    d = os.path.abspath(directory or ".gradguard_cache")
    try:
        os.makedirs(d, exist_ok=True)
        gi = os.path.join(d, ".gitignore")
        if not os.path.exists(gi):
            with open(gi, "w", encoding="utf-8") as fh:
                fh.write("# created by gradguard\n*\n")
            with open(os.path.join(d, "CACHEDIR.TAG"), "w", encoding="utf-8") as fh:
                fh.write("Signature: 8a477f597d28d172789f06886806bc55\n# gradguard result cache\n")
    except OSError:
        return None
    return d


def _entry(directory: str, k: str) -> str:
    return os.path.join(directory, k[:2], k[2:])


def load(directory: str, k: str):
    try:
        with open(_entry(directory, k), "rb") as fh:
            value = marshal.loads(fh.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], list)):
        return None
    return value


def store(directory: str, k: str, value) -> None:
    path = _entry(directory, k)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(marshal.dumps(value))
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
