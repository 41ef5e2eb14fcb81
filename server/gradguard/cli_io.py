"""What ``gradguard check`` reads and writes besides the files it checks.

- A buffer on standard input (``gradguard check --stdin-filename PATH -``), as
  ruff, black and flake8 take it: editors that pipe the unsaved text (ALE,
  efm-langserver, flymake, ...) use the CLI this way. PATH decides everything a
  file's path decides on disk: the configuration (the nearest
  ``pyproject.toml``), notebook handling (``.ipynb``: the buffer is the
  notebook's JSON), and which sibling modules and packages its imports resolve
  to. The buffer is checked as it is; the file at PATH is never read for it
  and never written: with ``--fix`` the fixed buffer goes to standard output
  (the unchanged buffer when there is nothing to fix or it cannot be read) and
  the report to standard error, as ruff does.
- ``--output-file FILE``: the report goes to FILE, written whole or not at all
  (a temporary file beside it, then renamed over it).
"""

from __future__ import annotations

import io
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import IO, Callable, List, Optional


class UsageError(Exception):
    pass


def stdin_name(args) -> Optional[str]:
    """The name standard input is checked under, or None when the paths are
    files and directories. Raises UsageError for a mix of both."""
    paths = [] if args.paths == ["."] else list(args.paths)  # ["."]: also what no path at all gives
    named = getattr(args, "stdin_filename", None)
    if "-" not in paths and not named:
        return None
    others = [p for p in paths if p != "-"]
    if others:
        raise UsageError(f"standard input ('-' or --stdin-filename) is checked alone; "
                         f"also given: {', '.join(others)}")
    if named == "-":
        raise UsageError("--stdin-filename needs the path the buffer stands for, not '-'")
    return named or "-"


class Output:
    """Where the report goes: standard output, or ``path`` written atomically by :meth:`close`."""

    def __init__(self, path: Optional[str], default: Optional[IO[str]] = None):
        self.path = path
        self.stream: IO[str] = io.StringIO() if path else (default or sys.stdout)

    def write_patch(self, text: str) -> None:
        """A patch (:func:`gradguard.output.diff`) written as bytes, the files' own:
        through the standard output's binary buffer, whatever its text encoding
        (an ASCII or cp1252 stream escaped a UTF-8 file's Chinese comment, and the
        patch no longer matched the file)."""
        if self.path:
            self.stream.write(text)
            return
        from gradguard.output import patch_bytes

        buffer = getattr(self.stream, "buffer", None)
        if buffer is None:  # not a stream of bytes underneath (a test's capture)
            self.stream.write(patch_bytes(text).decode("utf-8", "replace"))
            return
        self.stream.flush()
        buffer.write(patch_bytes(text))
        buffer.flush()

    def close(self) -> bool:
        """Write the file; False when it could not be written (said on standard error)."""
        if self.path:
            assert isinstance(self.stream, io.StringIO)
            try:
                # (surrogateescape: a patch's lone surrogates are bytes of a file in another encoding)
                write_atomic(self.path, self.stream.getvalue().encode("utf-8", "surrogateescape"))
            except OSError as e:
                sys.stderr.write(f"gradguard: error: cannot write {self.path}: {e.strerror or e}\n")
                return False
        return True


class HeldSignals:
    """``with HeldSignals():`` around the replacement of a file: a SIGTERM,
    SIGHUP or SIGINT that arrives meanwhile (a CI job cancelled, a terminal
    closed, Ctrl-C) waits until the block is left, then acts as it would have
    (the process ends, or KeyboardInterrupt is raised). Killed half-way, a run
    left its temporary file beside the user's file (``.train.py.*.gradguard-tmp``);
    now the new file is in place or the temporary file is gone, and the user's
    file is whole either way. Only the main thread can hold signals: elsewhere
    this does nothing."""

    def __init__(self) -> None:
        self.saved: list = []
        self.got: list = []

    def _hold(self, signum, frame) -> None:
        self.got.append(signum)

    def __enter__(self) -> "HeldSignals":
        import signal

        for name in ("SIGTERM", "SIGHUP", "SIGINT"):
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                self.saved.append((sig, signal.signal(sig, self._hold)))
            except (ValueError, OSError):  # not the main thread (or not settable here)
                break
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, old in reversed(self.saved):
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self.saved = []
        if self.got:
            signal.raise_signal(self.got[0])  # now: the handler there was, or the default (the end)


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` by ``data`` in one rename: a reader sees the old file or
    the new one, never half of one. Keeps the mode of a file that exists. A
    symbolic link is written through (the link stays); what is not a regular
    file (``/dev/stdout``, ``/dev/null``, a FIFO) is written to as a stream: the
    rename replaced the link or the device node itself with a regular file (run
    as root, ``--output-file /dev/stdout`` replaced the system's ``/dev/stdout``)."""
    import stat

    try:
        st: Optional[os.stat_result] = os.stat(path)  # through links, /proc's included
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        with open(path, "wb") as out:
            out.write(data)
        return
    path = os.path.realpath(path)
    directory = os.path.dirname(os.path.abspath(path))
    with HeldSignals():
        _replace_via_temporary(path, directory, data)


def _replace_via_temporary(path: str, directory: str, data: bytes) -> None:
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=".gradguard-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_stdin(args, lang: str, check: Callable[[bytes], dict], source_encoding: Callable[[bytes], str]) -> int:
    """``gradguard check -``: read the buffer, ``check`` it (the CLI's own check
    of one file, under the name the buffer stands for), report."""
    from gradguard import output

    data = sys.stdin.buffer.read()
    rec = check(data)
    records = [rec]
    errors = 1 if rec["error"] or rec["syntax"] else 0
    if args.diff:
        out = Output(args.output_file)
        try:
            d = output.diff(rec)
        except ValueError as e:
            sys.stderr.write(f"{rec['path']}: error: {e}\n")
            d, errors = "", 1
        out.write_patch(d)
        _stderr_problems(records)
        return 2 if errors or not out.close() else (1 if d else 0)
    if args.fix:
        sys.stdout.buffer.write(_fixed_bytes(rec, data, source_encoding))
        sys.stdout.flush()
    out = Output(args.output_file, sys.stderr if args.fix else None)
    output.emit(records, args.format, lang, out.stream, statistics=args.statistics, quiet=args.quiet)
    if not out.close() or errors:
        return 2
    return 1 if rec["items"] and not args.exit_zero else 0


def _fixed_bytes(rec: dict, data: bytes, source_encoding: Callable[[bytes], str]) -> bytes:
    """The buffer after --fix, in its own encoding; the buffer as it came when nothing changed."""
    fixed = rec.get("fixed")
    if rec.get("error") or fixed is None or fixed == rec.get("source"):
        return data
    if rec["path"].endswith(".ipynb"):
        return fixed.encode("utf-8")
    encoding = source_encoding(data)
    if encoding == "utf-8-sig":
        return b"\xef\xbb\xbf" + fixed.encode("utf-8")
    return fixed.encode(encoding)


def _stderr_problems(records: List[dict]) -> None:
    from gradguard.output import _problems

    for rec in records:
        for p in _problems(rec):
            sys.stderr.write(f"{rec['path']}: {p}\n")
