"""Reading a file that may not be one: the bounded, non-blocking reader that the
command line (the files it checks), the configuration (``pyproject.toml``, or
whatever ``--config`` names) and cross-file resolution (the modules a file
imports, the folder searched for a class's callers) share.

A FIFO named ``x.py`` blocks ``open`` until a writer comes, and ``/dev/zero``
never ends: the file is opened without blocking and checked on the open
descriptor (no race between a ``stat`` and the ``open``), anything but a regular
file is refused without reading, and reading stops at a limit. What happens at
the limit is the caller's choice (``truncate``): refuse the file, or keep its
first bytes (resolution reads only a file's head for its imports). The errors
are the caller's to word: :class:`NotRegularFile`, :class:`OverLimit`, and the
:class:`OSError` of the open or a read, unchanged (its ``errno`` and
``filename`` say what happened: a broken link, no permission).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import List, Optional, Tuple


class NotRegularFile(Exception):
    """Not a regular file: ``is_dir`` for a directory, else a FIFO, device or socket."""

    def __init__(self, is_dir: bool) -> None:
        super().__init__("is a directory" if is_dir else "not a regular file")
        self.is_dir = is_dir


class OverLimit(Exception):
    """Over the limit asked for: ``size`` is its size on disk, or the bytes read
    when it went past the limit (a file that grows while it is read)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes, over the limit")
        self.size = size


_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def read_regular(path: str, limit: Optional[int] = None, truncate: bool = False,
                 identity: Optional[List[Tuple[int, int]]] = None) -> bytes:
    """The bytes of ``path`` if it is a regular file (read to its end, not to the
    size it had when opened: it may be growing).

    ``limit`` (bytes; None: none): with ``truncate``, the first ``limit`` bytes;
    without, a file whose size on disk is over it, or that grows past it while it
    is read, raises :class:`OverLimit`. ``identity`` receives the (device, inode)
    of the file opened (what a later write checks is still there). Raises
    :class:`NotRegularFile` for a directory, FIFO, device or socket (none read),
    and the :class:`OSError` of the open or a read."""
    import stat

    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(stat.S_ISDIR(st.st_mode))
        if identity is not None:
            identity.append((st.st_dev, st.st_ino))
        if limit is not None and not truncate and st.st_size > limit:
            raise OverLimit(st.st_size)
        chunks = []
        total = 0
        while True:
            ask = 1 << 20
            if limit is not None and truncate:
                if total >= limit:
                    break
                ask = min(ask, limit - total)
            b = os.read(fd, ask)
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if limit is not None and not truncate and total > limit:
                raise OverLimit(total)
        return b"".join(chunks)
    finally:
        os.close(fd)
