"""gradguard: static detection of PyTorch autograd graph-lifetime bugs."""

import sys as _sys

__version__ = "0.1.0"

# Each rule's page; diagnostics link here (codeDescription.href).
DOCS_BASE = "https://github.com/gradguard/gradguard/blob/main/docs/rules"


def _forget_the_working_directory() -> None:
    """``python -m gradguard ...`` (or ``-m gradguard.lsp.server``) without ``-I``:
    Python put the working directory first on ``sys.path``, and an editor starts
    the server in the user's workspace, so a cloned repository's ``tokenize.py``,
    ``typing.py``, ``tomllib.py`` or ``jedi.py`` would be imported in place of the
    standard library's or a dependency's: code run by opening a folder. This
    package is the first of ours to run (before any of those imports), and
    nothing gradguard imports lives in the working directory: it is taken off
    ``sys.path`` here. (A workspace folder named ``gradguard`` is found before
    this package and cannot be stopped from inside it: editors must start the
    console script or ``python -I -m gradguard serve``; see docs/server.md.)"""
    if _sys.flags.isolated or getattr(_sys.flags, "safe_path", False):
        return  # -I / -P: the working directory is not on sys.path
    if not _sys.argv or _sys.argv[0] != "-m":
        return  # imported as a library, or by the console script: sys.path is not ours to change
    orig = getattr(_sys, "orig_argv", None) or []
    if "-m" in orig[:-1] and orig[orig.index("-m") + 1].split(".")[0] != __name__:
        return  # `python -m other` whose package imports gradguard
    import os

    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    _sys.path[:] = [p for p in _sys.path if p != "" and (cwd is None or os.path.abspath(p) != cwd)]


_forget_the_working_directory()
