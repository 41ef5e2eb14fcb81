"""The one bounded, non-blocking reader (``gradguard.model.files.read_regular``)
that the command line, the configuration and cross-file resolution share, and
each caller's choice at the limit (refuse or truncate) and wording of its errors."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from gradguard import cli
from gradguard.analysis import resolve
from gradguard.engine import config
from gradguard.model.files import NotRegularFile, OverLimit, read_regular

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def _within(seconds, fn):
    """fn() on a thread; fails (instead of hanging the suite) when it blocks."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(_catch(fn)), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked"
    return out[0]


def _catch(fn):
    try:
        return fn()
    except BaseException as e:  # noqa: BLE001  (returned to the test)
        return e


def test_a_regular_file_is_read_whole_and_its_identity_recorded(tmp_path):
    p = tmp_path / "训练.py"
    p.write_bytes(b"x = 1  # \xe4\xb8\xad\n" * 1000)
    ident: list = []
    assert read_regular(str(p), identity=ident) == p.read_bytes()
    st = os.stat(p)
    assert ident == [(st.st_dev, st.st_ino)]


def test_over_the_limit_refused_or_truncated_as_the_caller_asks(tmp_path):
    p = tmp_path / "big.py"
    p.write_bytes(b"a" * 3_000_001)
    with pytest.raises(OverLimit) as e:
        read_regular(str(p), 3_000_000)
    assert e.value.size == 3_000_001
    assert read_regular(str(p), 3_000_001) == p.read_bytes()  # at the limit: read
    head = read_regular(str(p), 2_500_000, truncate=True)  # (over one read's size: the limit still holds)
    assert head == b"a" * 2_500_000


@needs_fifo
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    got = _within(10, lambda: read_regular(str(fifo)))
    assert isinstance(got, NotRegularFile) and not got.is_dir
    assert _within(10, lambda: resolve._read_regular(str(fifo), 100)) is None
    got = _within(10, lambda: cli.read_bytes(str(fifo)))
    assert isinstance(got, cli.ReadError) and "not a regular file" in str(got)
    got = _within(10, lambda: config._read_pyproject(str(fifo)))
    assert isinstance(got, config.ConfigError) and f"{fifo}: not a regular file" in str(got)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_and_a_link_to_it_are_refused_at_once(tmp_path):
    link = tmp_path / "zero.py"
    os.symlink("/dev/zero", link)
    for path in ("/dev/zero", str(link)):
        got = _within(10, lambda p=path: read_regular(p, 10, truncate=True))  # (even when only a head is asked)
        assert isinstance(got, NotRegularFile)
        assert resolve._read_regular(path, 10) is None
        with pytest.raises(cli.ReadError, match="not a regular file"):
            cli.read_bytes(path, 4.0)
        with pytest.raises(config.ConfigError, match="not a regular file"):
            config._read_pyproject(path)


def test_a_symlink_to_a_regular_file_is_followed(tmp_path):
    real = tmp_path / "real.py"
    real.write_bytes(b"print(1)\n")
    link = tmp_path / "link.py"
    os.symlink(real.name, link)
    ident: list = []
    assert read_regular(str(link), identity=ident) == b"print(1)\n"
    assert ident == [(os.stat(real).st_dev, os.stat(real).st_ino)]  # the file's, not the link's
    assert resolve._read_regular(str(link), 5) == b"print"


def test_a_directory_and_a_missing_file_each_callers_words(tmp_path):
    d = tmp_path / "目录.py"
    d.mkdir()
    got = _catch(lambda: read_regular(str(d)))
    assert isinstance(got, NotRegularFile) and got.is_dir
    with pytest.raises(cli.ReadError, match="^is a directory$"):
        cli.read_bytes(str(d))
    with pytest.raises(config.ConfigError, match="cannot read: Is a directory"):
        config._read_pyproject(str(d))
    assert resolve._read_regular(str(d), 10) is None
    gone = tmp_path / "gone.py"
    with pytest.raises(OSError) as e:
        read_regular(str(gone))
    assert e.value.errno == errno.ENOENT
    with pytest.raises(cli.ReadError, match="No such file"):
        cli.read_bytes(str(gone))
    with pytest.raises(config.ConfigError, match="cannot read: No such file"):
        config._read_pyproject(str(gone))
    assert resolve._read_regular(str(gone), 10) is None


def test_each_caller_keeps_its_limit(tmp_path):
    p = tmp_path / "p.toml"
    p.write_bytes(b"#" * 16_000_001)
    with pytest.raises(config.ConfigError, match="over 16 MB, not read as a configuration"):
        config._read_pyproject(str(p))
    with pytest.raises(cli.ReadError, match=r"skipped: 16\.0 MB, over the 1 MB limit"):
        cli.read_bytes(str(p), 1.0)
    assert len(cli.read_bytes(str(p), 0)) == 16_000_001  # 0: no limit
    assert len(resolve._read_regular(str(p), 1000)) == 1000
