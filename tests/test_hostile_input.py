"""Hostile trees and careless repositories: one bad file costs only itself,
nothing hangs, nothing is written where it should not be, and ``--fix`` never
loses a save (issue 13, items 2-6 and 8-10)."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gradguard import cli
from gradguard.engine.config import ConfigError, load_config, load_config_file
from gradguard.engine.document import Document, check_source
from test_cli import GRU_SEED, run

GG101_AT = 12  # 1-based line of GRU_SEED's finding


def main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def deep_chain_train(n: int) -> str:
    """A training function whose real GG101 finding sits next to a chain of n calls."""
    return textwrap.dedent("""\
        import torch


        def train(model, opt, cfg, data):
            c = cfg{chain}
            h = torch.zeros(2)
            for x in data:
                h = model(h)
                loss = h.sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
        """).format(chain=".copy()" * n)


# ---------------------------------------------------------------- item 2: --fix
def test_fix_never_overwrites_a_save_made_while_it_ran(tmp_path, capsys, monkeypatch):
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    a.write_text(GRU_SEED, encoding="utf-8")
    b.write_text(GRU_SEED, encoding="utf-8")
    saved = GRU_SEED + "# 用户刚保存的一行\n"
    real = cli._analyse

    def analyse_while_the_user_saves(src, path, *rest):
        if path.endswith("a.py") and a.read_text(encoding="utf-8") == GRU_SEED:
            a.write_text(saved, encoding="utf-8")  # the editor saves mid-run
        return real(src, path, *rest)

    monkeypatch.setattr(cli, "_analyse", analyse_while_the_user_saves)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", "--jobs", "1", str(a), str(b))
    assert a.read_text(encoding="utf-8") == saved  # the save survives
    assert "changed on disk" in err and str(a) in err
    assert code == 2
    assert ".detach()" in b.read_text(encoding="utf-8")  # the other file is still fixed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]  # no temporary left behind


@pytest.mark.parametrize("name", ["train.py", "train.ipynb"])
def test_fix_replaces_the_file_atomically_keeping_its_mode(tmp_path, capsys, monkeypatch, name):
    target = tmp_path / name
    if name.endswith(".ipynb"):
        nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                         "source": GRU_SEED.splitlines(keepends=True)}],
              "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
        target.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    else:
        target.write_text(GRU_SEED, encoding="utf-8")
    target.chmod(0o640)
    before = target.read_bytes()
    seen = []
    real_replace = os.replace

    def watching_replace(src, dst, *a, **k):
        if os.path.abspath(dst) == str(target):
            # at the switch, the file is still whole and old, and the new one whole beside it
            seen.append((Path(src).parent == tmp_path, target.read_bytes() == before,
                         stat.S_IMODE(os.stat(src).st_mode), Path(src).read_bytes()))
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", watching_replace)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(target))
    assert code == 0, err
    assert len(seen) == 1
    same_dir, old_intact, mode, new = seen[0]
    assert same_dir and old_intact and mode == 0o640
    assert target.read_bytes() == new and b"detach" in new
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_fix_keeps_the_files_extended_attributes(tmp_path, capsys):
    """The rename gives the name a new file: its extended attributes (a POSIX ACL
    set with setfacl lives in one; tags, labels) were lost."""
    target = tmp_path / "train.py"
    target.write_text(GRU_SEED, encoding="utf-8")
    try:
        os.setxattr(target, "user.gradguard.标签", "保留".encode())
    except (AttributeError, OSError):
        pytest.skip("no user extended attributes here")
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(target))
    assert code == 0, err
    assert "detach" in target.read_text(encoding="utf-8")
    assert os.getxattr(target, "user.gradguard.标签") == "保留".encode()


def test_fix_through_a_symlink_keeps_the_link(tmp_path, capsys):
    real = tmp_path / "src" / "train.py"
    real.parent.mkdir()
    real.write_text(GRU_SEED, encoding="utf-8")
    link = tmp_path / "train.py"
    os.symlink(real, link)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(link))
    assert code == 0, err
    assert link.is_symlink() and "detach" in real.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["train.py", "train.ipynb"])
def test_fix_of_a_hard_linked_file_reaches_every_name(tmp_path, capsys, name):
    """A file with several hard links (a ``cp -al`` snapshot, a conda or pnpm
    store) is rewritten in place: every name sees the fix, the names stay one
    file (a rename gave this name a new file and left the others unfixed), with
    its mode; nothing is left beside it."""
    target = tmp_path / name
    if name.endswith(".ipynb"):
        nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                         "source": GRU_SEED.splitlines(keepends=True)}],
              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        target.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    else:
        target.write_text(GRU_SEED + "# 尾注 😀\n", encoding="utf-8")
    target.chmod(0o640)
    other = tmp_path / "elsewhere" / ("other" + target.suffix)
    other.parent.mkdir()
    os.link(target, other)
    inode = target.stat().st_ino
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(target))
    assert code == 0, err
    fixed = target.read_bytes()
    assert b"hidden.detach()" in fixed
    assert name.endswith(".ipynb") or "😀".encode() in fixed
    assert other.read_bytes() == fixed  # the other name sees it
    assert target.stat().st_ino == inode == other.stat().st_ino and target.stat().st_nlink == 2
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["elsewhere", name])
    # idempotent: a second run finds nothing to change
    assert main(capsys, "check", "--fix", "--no-cache", str(other))[0] == 0 and other.read_bytes() == fixed


@pytest.mark.parametrize("jobs", ["1", "4"])
def test_fix_of_two_names_of_one_file_in_one_run(tmp_path, capsys, jobs):
    """Two names of one file (a hard link, a symbolic link) in the same run, one
    after the other or in parallel workers: the file is fixed once, the second
    name finds it already fixed — not "changed on disk", not fixed twice."""
    files = []
    for i in range(5):  # enough files for the worker pool
        a = tmp_path / f"a{i}.py"
        a.write_text(GRU_SEED, encoding="utf-8")
        hard = tmp_path / f"hard{i}.py"
        os.link(a, hard)
        soft = tmp_path / f"soft{i}.py"
        os.symlink(a.name, soft)
        files += [a, hard, soft]
    code, out, err = main(capsys, "check", "--fix", "--no-cache", "--jobs", jobs, str(tmp_path))
    assert code == 0, err
    for i in range(5):
        a = tmp_path / f"a{i}.py"
        text = a.read_text(encoding="utf-8")
        assert text.count("hidden = hidden.detach()") == 1
        assert (tmp_path / f"hard{i}.py").stat().st_ino == a.stat().st_ino
        assert (tmp_path / f"soft{i}.py").is_symlink()
    assert not [p for p in tmp_path.iterdir() if "gradguard" in p.name]


def test_fix_of_a_hard_linked_file_never_overwrites_a_save(tmp_path, capsys, monkeypatch):
    a = tmp_path / "a.py"
    a.write_text(GRU_SEED, encoding="utf-8")
    os.link(a, tmp_path / "b.py")
    saved = GRU_SEED + "# 用户刚保存的一行\n"
    real = cli._analyse

    def analyse_while_the_user_saves(src, path, *rest):
        if a.read_text(encoding="utf-8") == GRU_SEED:
            with open(a, "w", encoding="utf-8") as f:  # saved in place, through the other name's inode
                f.write(saved)
        return real(src, path, *rest)

    monkeypatch.setattr(cli, "_analyse", analyse_while_the_user_saves)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(a))
    assert code == 2 and "changed on disk" in err
    assert a.read_text(encoding="utf-8") == saved == (tmp_path / "b.py").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_fix_of_a_hard_linked_file_held_locked_gives_up(tmp_path, capsys, monkeypatch):
    """Another program holds an exclusive lock on the hard-linked file for ever:
    the run does not hang with it; the file is left alone and the run says why."""
    pytest.importorskip("fcntl")
    a = tmp_path / "a.py"
    a.write_text(GRU_SEED, encoding="utf-8")
    os.link(a, tmp_path / "b.py")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "f = open(sys.argv[1], 'rb'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "print('locked', flush=True); time.sleep(120)", str(a)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"locked"
        monkeypatch.setattr(cli, "_lock_briefly", lambda fd, wait=0.3, real=cli._lock_briefly: real(fd, wait))
        code, out, err = main(capsys, "check", "--fix", "--no-cache", str(a))
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and "holds a lock" in err
    assert a.read_text(encoding="utf-8") == GRU_SEED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_a_failed_in_place_write_puts_the_file_back(tmp_path, capsys, monkeypatch):
    """The disk fills up half-way through rewriting a hard-linked file: the
    file is put back byte for byte, the run says why, the copy is removed."""
    import errno

    a = tmp_path / "a.py"
    a.write_text(GRU_SEED, encoding="utf-8")
    os.link(a, tmp_path / "b.py")
    real_write = os.write
    failed = []

    def write_until_the_disk_is_full(fd, data):
        if not failed and b"hidden.detach()" in bytes(data):
            failed.append(1)
            real_write(fd, bytes(data)[:40])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write_until_the_disk_is_full)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(a))
    assert failed and code == 2 and "No space left on device" in err and "fixes not written" in err
    assert a.read_text(encoding="utf-8") == GRU_SEED == (tmp_path / "b.py").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


@pytest.mark.parametrize("meanwhile", ["deleted", "replaced by a link", "moved away", "made a directory"])
def test_fix_writes_nothing_when_the_file_went_away_while_it_ran(tmp_path, capsys, monkeypatch, meanwhile):
    """Between the read and the write the file is deleted, replaced by a link to
    another file, moved, or replaced by a folder: nothing is written (no file
    is brought back, the other file is untouched) and the run says why."""
    a = tmp_path / "a.py"
    a.write_text(GRU_SEED, encoding="utf-8")
    other = tmp_path / "other.py"
    other.write_text(GRU_SEED, encoding="utf-8")
    real = cli._analyse
    done = []

    def analyse_while_the_file_goes(src, path, *rest):
        if path.endswith("a.py") and not done:
            done.append(1)
            if meanwhile == "deleted":
                a.unlink()
            elif meanwhile == "replaced by a link":
                a.unlink()
                os.symlink(other, a)
            elif meanwhile == "moved away":
                a.rename(tmp_path / "moved.py")
            else:
                a.unlink()
                a.mkdir()
        return real(src, path, *rest)

    monkeypatch.setattr(cli, "_analyse", analyse_while_the_file_goes)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", "--jobs", "1", str(a))
    assert code == 2 and "fixes not written" in err and str(a) in err
    assert other.read_text(encoding="utf-8") == GRU_SEED
    if meanwhile == "deleted":
        assert not a.exists()
    if meanwhile == "moved away":
        assert not a.exists() and (tmp_path / "moved.py").read_text(encoding="utf-8") == GRU_SEED
    if meanwhile == "made a directory":
        assert a.is_dir() and list(a.iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if "gradguard" in p.name]


def test_fix_leaves_a_read_only_file_alone(tmp_path, capsys):
    """A file made read-only (vendored code, a locked checkout) is not fixed: the
    atomic replace only needs the folder to be writable, and rewrote it anyway."""
    ro = tmp_path / "vendored.py"
    ro.write_text(GRU_SEED, encoding="utf-8")
    ro.chmod(0o444)
    other = tmp_path / "train.py"
    other.write_text(GRU_SEED, encoding="utf-8")
    try:
        code, out, err = main(capsys, "check", "--fix", "--no-cache", str(ro), str(other))
        assert ro.read_text(encoding="utf-8") == GRU_SEED
        assert stat.S_IMODE(ro.stat().st_mode) == 0o444
        assert "read-only" in err and str(ro) in err
        assert code == 2
        assert "detach" in other.read_text(encoding="utf-8")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py", "vendored.py"]
    finally:
        ro.chmod(0o644)


_EMOJI_SEED = GRU_SEED.replace("# 序列模型", "# 序列模型 😀𝐱\f\t").replace("    x = torch", "    z = '😀𝐱'; x = torch")


@pytest.mark.parametrize("shape", ["lf", "crlf", "cr", "bom", "bom crlf", "no final newline", "mixed lf first",
                                   "mixed crlf first", "latin-1 cookie"])
def test_fix_changes_only_the_fixed_lines_bytes(tmp_path, capsys, shape):
    """Every byte the fix does not change stays: line ends (each its own), BOM,
    the missing last newline, the declared encoding, form feeds, tabs, and
    characters outside the BMP before the fixed position; the inserted line
    ends as the file's first line does. Through the file and through stdin."""
    text, eol = _EMOJI_SEED, "\n"
    lines = text.splitlines(keepends=True)
    encoding, bom = "utf-8", b""
    if shape in ("crlf", "bom crlf"):
        text, eol = text.replace("\n", "\r\n"), "\r\n"
    elif shape == "cr":
        text, eol = text.replace("\n", "\r"), "\r"
    elif shape == "no final newline":
        text = text.rstrip("\n")
    elif shape == "mixed lf first":
        text = "".join(lines[:5]) + "".join(ln.replace("\n", "\r\n") for ln in lines[5:])
    elif shape == "mixed crlf first":
        text, eol = lines[0].replace("\n", "\r\n") + "".join(lines[1:]), "\r\n"
    elif shape == "latin-1 cookie":
        encoding = "latin-1"
        text = "# -*- coding: latin-1 -*-\n# café\n" + "".join(
            ln for ln in lines if not any(ord(c) > 0xFF for c in ln.replace("😀𝐱", "")))
        text = text.replace("😀𝐱", "ñ")
    if shape.startswith("bom"):
        bom = b"\xef\xbb\xbf"
    data = bom + text.encode(encoding)
    key = "    z = '".encode(encoding)
    expected = data.replace(key, ("    hidden = hidden.detach()" + eol).encode(encoding) + key, 1)
    f = tmp_path / "train.py"
    f.write_bytes(data)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(f))
    assert code == 0, err
    assert f.read_bytes() == expected
    proc = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", "--fix",
                           "--stdin-filename", str(tmp_path / "other.py"), "-"], input=data, capture_output=True)
    assert proc.stdout == expected, proc.stderr


_DATA_AT_THE_END = """\
import torch
from torch import nn

gru = nn.GRU(4, 8)  # 门控循环单元 😀
opt = torch.optim.SGD(gru.parameters(), lr=0.1)
hidden = torch.zeros(1, 2, 8)
for step in range(3):
    out, hidden = gru(torch.randn(5, 2, 4), hidden)
    loss = out.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    hidden = hidden.data"""


@pytest.mark.parametrize("shape", ["no final newline", "crlf, no final newline", "form feed and U+2028 in lines",
                                   "bom, fix near the top", "trailing newline", "cr only", "a stray cr in a line",
                                   "latin-1, accents beside the fix", "ascii standard output"])
def test_diff_applies_with_git_apply_and_gives_what_fix_writes(tmp_path, capsys, shape):
    """``--diff`` is a patch of the file: applied with ``git apply`` it gives the
    bytes ``--fix`` writes. It printed a missing last newline as present (no
    ``\\ No newline at end of file``), split lines at a form feed or U+2028
    (``str.splitlines``), and dropped the BOM from the first line: the patch
    did not apply. A file with old Mac line ends (``\\r`` alone) or a stray
    ``\\r`` inside a line was split there, and a latin-1 file's accented lines
    were printed in UTF-8: git called both patches corrupt or did not find the
    lines; an ASCII standard output escaped the Chinese comment of a UTF-8 file."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    text, bom, encoding, env = _DATA_AT_THE_END, b"", "utf-8", None
    if shape == "crlf, no final newline":
        text = text.replace("\n", "\r\n")
    elif shape == "form feed and U+2028 in lines":
        text = text.replace("# 门控", "# 第一页\x0c第二页 \u2028 门控").replace("opt.step()", "opt.step()  # \x0b\x1c\x85")
    elif shape == "bom, fix near the top":
        bom = b"\xef\xbb\xbf"
        text = ("import torch; gru = torch.nn.GRU(4, 8); opt = torch.optim.SGD(gru.parameters(), lr=0.1); "
                "hidden = torch.zeros(1, 2, 8)  # 第一行\n" + text[text.index("for step"):])  # the fix: on line 3
    elif shape == "trailing newline":
        text += "\n"
    elif shape == "cr only":
        text = text.replace("\n", "\r") + "\r"
    elif shape == "a stray cr in a line":
        text = text.replace("opt.step()", "opt.step()  # a\r    # b") + "\n"  # (two lines to Python, one to git)
    elif shape == "latin-1, accents beside the fix":
        encoding = "latin-1"
        text = ("# -*- coding: latin-1 -*-\n" + text.replace("门控循环单元 😀", "unité récurrente")
                .replace("opt.step()", "opt.step()  # étape") + "\n")
    elif shape == "ascii standard output":
        env = dict(os.environ, PYTHONIOENCODING="ascii")
        text = text.replace("opt.step()", "opt.step()  # 第几步") + "\n"
    data = bom + text.encode(encoding)
    f = tmp_path / "train.py"
    f.write_bytes(data)
    proc = subprocess.run([sys.executable, "-m", "gradguard", "check", "--diff", "--no-cache", "train.py"],
                          cwd=tmp_path, capture_output=True, env=env)
    assert proc.returncode == 1, proc.stderr
    patch = proc.stdout
    assert (b"\\ No newline at end of file" in patch) == (not text.endswith("\n"))
    if shape == "latin-1, accents beside the fix":
        assert "opt.step()  # \xe9tape\n".encode("latin-1") in patch  # the file's bytes, not UTF-8's
    (tmp_path / "fix.patch").write_bytes(patch)
    applied = subprocess.run([git, "apply", "fix.patch"], cwd=tmp_path, capture_output=True)
    assert applied.returncode == 0, applied.stderr.decode(errors="replace") + patch.decode(errors="replace")
    patched = f.read_bytes()
    f.write_bytes(data)
    code, out, err = main(capsys, "check", "--fix", "--no-cache", str(f))
    assert code == 0, err
    assert patched == f.read_bytes() != data


# ---------------------------------------------------------------- item 3: one bad file
def _hostile_tree(root: Path, n_good: int) -> None:
    elif_chain = "x = 0\nif x == 0:\n    pass\n" + "".join(f"elif x == {i}:\n    pass\n" for i in range(1, 1000))
    (root / "elifs.py").write_text(elif_chain + GRU_SEED, encoding="utf-8")
    (root / "terms.py").write_text("y = " + " + ".join(["a"] * 3000) + "\n" + GRU_SEED, encoding="utf-8")
    (root / "brackets.py").write_text("y = " + "[" * 5000 + "]" * 5000 + "\n" + GRU_SEED, encoding="utf-8")
    nb = {"cells": [{"cell_type": "code", "source": GRU_SEED, "metadata": {}, "outputs": [], "execution_count": None}],
          "metadata": {"kernelspec": "python3"}, "nbformat": 4, "nbformat_minor": 5}
    (root / "kernelspec.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    (root / "nested.ipynb").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    bad = root / "badcfg"
    bad.mkdir()
    (bad / "pyproject.toml").write_text("tool = 5\n# [tool.gradguard] lives elsewhere\n", encoding="utf-8")
    (bad / "governed.py").write_text(GRU_SEED, encoding="utf-8")
    arr = root / "arraycfg"
    arr.mkdir()
    (arr / "pyproject.toml").write_text('[[tool]]\nname = "gradguard"\n', encoding="utf-8")
    (arr / "governed.py").write_text(GRU_SEED, encoding="utf-8")
    os.symlink("/dev/zero", root / "zero.py")
    for i in range(n_good):
        (root / f"good_{i}.py").write_text(GRU_SEED, encoding="utf-8")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_one_bad_file_costs_only_itself(tmp_path, jobs):
    _hostile_tree(tmp_path, 8)  # 8 good files: enough for the process pool with --jobs 2
    r = run("check", "--format", "json", "--no-cache", "--jobs", jobs, ".", cwd=tmp_path)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, r.stderr
    found = {(f["path"].removeprefix("./"), f["line"]) for f in json.loads(r.stdout)}
    for i in range(8):
        assert (f"good_{i}.py", GG101_AT) in found
    # valid Python nested deep (a 1,000-branch elif chain) is analysed, finding included
    assert ("elifs.py", 3 + 2 * 999 + GG101_AT) in found
    # a notebook whose kernelspec is a string is still a Python notebook
    assert any(p == "kernelspec.ipynb" for p, _ in found)
    err = r.stderr
    assert "terms.py: syntax error at 1:1: too deeply nested for Python's parser" in err
    assert "brackets.py: syntax error" in err
    assert "nested.ipynb: malformed notebook: JSON nested too deeply to read" in err
    assert "zero.py: not a regular file" in err
    assert "badcfg/governed.py: not checked:" in err and "'tool' must be a table" in err
    assert "arraycfg/governed.py: not checked:" in err and "[[tool]]" in err
    # the statements around the part too deep to parse are still analysed
    assert ("terms.py", GG101_AT + 1) in found and ("brackets.py", GG101_AT + 1) in found


def test_an_unreadable_subdirectory_is_reported_and_the_walk_goes_on(tmp_path, capsys, monkeypatch):
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "a.py").write_text(GRU_SEED, encoding="utf-8")
    (tmp_path / "ok.py").write_text(GRU_SEED, encoding="utf-8")
    locked = str(tmp_path / "locked")
    real_stat, real_scandir = os.stat, os.scandir

    def no_search(path, *a, **k):  # what a directory without r-x permission does (root is exempt)
        if os.fspath(path).startswith(locked + os.sep):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_stat(path, *a, **k)

    def no_read(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "stat", no_search)
    monkeypatch.setattr(os, "scandir", no_read)
    code, out, err = main(capsys, "check", "--no-cache", "--jobs", "1", str(tmp_path))
    assert code == 2
    assert f"{locked}: error: Permission denied" in err
    assert f"ok.py:{GG101_AT}:" in out


# ---------------------------------------------------------------- item 4: depth
def test_a_unit_too_deep_to_analyse_says_so():
    ok = check_source(deep_chain_train(100), "t.py")
    assert [f.code for f in ok.findings] == ["GG101"] and ok.not_analysed == ()
    deep = check_source(deep_chain_train(400), "t.py")
    assert deep.findings == ()
    # recorded, not a silent "no finding", for each rule that reads the interpreter's trace of the unit
    assert deep.not_analysed == ((3, "train", "GG101,GG102,GG103"),)
    assert deep.internal_errors == ()
    assert Document(deep_chain_train(400), "t.py").result().not_analysed == deep.not_analysed


def test_the_cli_analyses_deep_code_on_a_deep_stack_and_shows_what_is_still_too_deep(tmp_path, capsys, monkeypatch):
    deep = tmp_path / "deep.py"
    deep.write_text(deep_chain_train(400), encoding="utf-8")
    code, out, err = main(capsys, "check", "--no-cache", str(deep))
    assert code == 1 and f"deep.py:{GG101_AT - 4}:" in out and "note" not in err  # the real finding
    monkeypatch.setattr(cli, "_DEEP_LIMIT", 1000)  # no deeper stack to be had: the note instead
    code, out, err = main(capsys, "check", "--no-cache", str(deep))
    assert code == 0 and "deep.py:4: note: train not analysed (GG101,GG102,GG103): nested too deeply" in err
    code, out, err = main(capsys, "check", "--no-cache", "--lang", "zh", str(deep))
    assert "deep.py:4: 注意: train 未分析 (GG101,GG102,GG103)" in err


# ---------------------------------------------------------------- item 5: hostile trees
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_py_is_refused_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text(GRU_SEED, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", "."], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)  # it used to block here forever
    assert "pipe.py: error: not a regular file" in r.stderr
    assert f"ok.py:{GG101_AT}:" in r.stdout and r.returncode == 2


def test_a_fifo_beside_a_checked_file_is_not_opened_when_its_folder_is_searched(tmp_path):
    """A file defining a class whose method back-propagates what it is handed has
    its folder searched for the files that import the class; a FIFO named
    ``*.py`` there was opened to read its imports and the check hung for ever
    (the server's worker thread too). Named alone, and with the tree walked."""
    (tmp_path / "trainer.py").write_text(textwrap.dedent("""\
        class Trainer:  # 训练器
            def __init__(self, model):
                self.model = model

            def backward(self, gen_loss, dis_loss):
                gen_loss.backward()
                dis_loss.backward()
        """), encoding="utf-8")
    (tmp_path / "main.py").write_text("from trainer import Trainer\n", encoding="utf-8")
    os.mkfifo(tmp_path / "pipe.py")
    for args, status in ((["trainer.py"], 0), (["."], 2)):
        r = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", *args], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)  # it blocked here forever
        assert r.returncode == status, r.stderr
        assert ("pipe.py: error: not a regular file" in r.stderr) == (args == ["."])


@pytest.mark.parametrize("named", [True, False], ids=["named", "walked"])
def test_a_link_loop_and_a_broken_link_say_what_they_are(tmp_path, capsys, named):
    """``a.py -> b.py -> a.py`` and a link to a file that is gone: each is reported
    as what it is (a named loop was "no such file or directory", which ``ls``
    contradicts), the run goes on and exits 2."""
    os.symlink("b.py", tmp_path / "a.py")
    os.symlink("a.py", tmp_path / "b.py")
    os.symlink("已删除.py", tmp_path / "dangling.py")
    (tmp_path / "train.py").write_text(GRU_SEED, encoding="utf-8")
    paths = [str(tmp_path / n) for n in ("a.py", "dangling.py", "train.py")] if named else [str(tmp_path)]
    code, out, err = main(capsys, "check", "--no-cache", *paths)
    assert code == 2
    assert f"{tmp_path / 'a.py'}: error: a symbolic link loop (to b.py), not read" in err
    assert f"{tmp_path / 'dangling.py'}: error: a broken symbolic link (to 已删除.py, which does not exist)" in err
    assert "GG101" in out and "no such file" not in err


def test_files_over_the_size_limit_are_skipped_with_their_size(tmp_path):
    big = tmp_path / "data.py"
    big.write_text("# grad\nDATA = [\n" + "    1.0,\n" * 700_000 + "]\n", encoding="utf-8")  # ~6.3 MB
    (tmp_path / "ok.py").write_text(GRU_SEED, encoding="utf-8")
    r = run("check", "--no-cache", ".", cwd=tmp_path)
    assert "data.py: error: skipped: 6.3 MB, over the 4 MB limit" in r.stderr
    assert f"ok.py:{GG101_AT}:" in r.stdout and r.returncode == 2
    assert "skipped" not in run("check", "--no-cache", "--max-file-size", "0", "data.py", cwd=tmp_path).stderr
    assert "skipped" not in run("check", "--no-cache", "--max-file-size", "10", "data.py", cwd=tmp_path).stderr
    (tmp_path / "pyproject.toml").write_text("[tool.gradguard]\nmax-file-size = 0.0001\n", encoding="utf-8")
    small = run("check", "--no-cache", "ok.py", cwd=tmp_path)
    assert "ok.py: error: skipped: 0.0 MB, over the 0.0001 MB limit" in small.stderr


@pytest.mark.parametrize("calls", ["", "model_{i}.reset_{i}()", "model_{i}.reset()"])
def test_gg101_driving_loop_lookup_is_linear(calls):
    """Classes x untyped loop callees: the work per class must not grow with
    the number of loops in the file (it was a sort of every one, per method):
    loops that call only the model, that also call a method of their own class,
    or one that every class has."""
    import gradguard.rules.gg101_carried_graph as gg101

    def source(n):
        parts = ["import torch\n"]
        for i in range(n):
            parts.append(textwrap.dedent(f"""
                class Net{i}(torch.nn.Module):
                    def forward(self, x):
                        self.h = x if self.h is None else self.h + x
                        return self.h

                    def reset_{i}(self):
                        self.h = None

                    def reset(self):
                        self.h = None

                def train_{i}(model_{i}, opt, data):
                    for x in data:
                        loss = model_{i}(x).sum()
                        {calls.format(i=i)}
                        loss.backward()
                        opt.step()
                """))
        return "".join(parts)

    class Counting(tuple):
        calls = 0

        def __iter__(self):
            Counting.calls += 1
            return super().__iter__()

    real = gg101._MODEL_WORDS
    work = []
    try:
        gg101._MODEL_WORDS = Counting(real)
        for n in (50, 200):
            Counting.calls = 0
            check_source(source(n), "gen.py")
            work.append(Counting.calls)
    finally:
        gg101._MODEL_WORDS = real
    assert work[1] < 6 * work[0], work  # 4x the file, about 4x the work (it was 16x)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pool_workers_die_with_a_killed_parent(tmp_path):
    for i in range(10):
        (tmp_path / f"f{i}.py").write_text(GRU_SEED, encoding="utf-8")
    hang = ("import time, gradguard.cli as c\n"
            "c._analyse = lambda *a, **k: time.sleep(600)\n"
            "raise SystemExit(c.main(['check', '--no-cache', '--jobs', '2', '.']))\n")
    parent = subprocess.Popen([sys.executable, "-c", hang], cwd=tmp_path)

    def children():
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == parent.pid and fields[0] != "Z":
                    out.append(int(d))
        return out

    try:
        deadline = time.monotonic() + 60
        while len(children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = children()
        assert len(workers) >= 2
        time.sleep(1.0)  # the workers are inside the (endless) analysis
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 20
        alive = workers
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [w for w in workers if Path(f"/proc/{w}").exists()
                     and Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
        assert not alive, "pool workers outlived their killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        for w in children():
            os.kill(w, signal.SIGKILL)


# ---------------------------------------------------------------- item 6: --jobs
def test_jobs_is_capped_by_files_and_cores(tmp_path, capsys, monkeypatch):
    import concurrent.futures

    for i in range(9):
        (tmp_path / f"f{i}.py").write_text(GRU_SEED, encoding="utf-8")
    started = []
    real = concurrent.futures.ProcessPoolExecutor

    class Recording(real):
        def __init__(self, max_workers=None, *a, **k):
            started.append(max_workers)
            super().__init__(max_workers, *a, **k)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Recording)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    code, out, err = main(capsys, "check", "--no-cache", "--jobs", "1000", str(tmp_path))
    assert code == 1 and started == [9]  # 9 files: 9 processes, not 1,000
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    main(capsys, "check", "--no-cache", "--jobs", "1000", str(tmp_path))
    assert started == [9, 2]  # 2 cores: 2 processes


# ---------------------------------------------------------------- items 8, 9: the cache
def test_a_cache_directory_that_is_the_users_folder_gets_no_gitignore(tmp_path):
    """--cache-dir pointed at the project (or any folder holding the user's
    files) wrote a .gitignore of "*" there: git then ignored every new file in
    the project. The ignore file is written only into a folder of the cache's own."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "t.py").write_text(GRU_SEED, encoding="utf-8")
    r = run("check", "--cache-dir", ".", "t.py", cwd=project)
    assert r.returncode == 1, r.stderr
    assert not (project / ".gitignore").exists() and not (project / "CACHEDIR.TAG").exists()
    r = run("check", "--cache-dir", "own_cache", "t.py", cwd=project)
    assert r.returncode == 1, r.stderr
    assert (project / "own_cache" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"


def test_a_symlinked_cache_directory_is_not_followed(tmp_path):
    project = tmp_path / "repo"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / "t.py").write_text(GRU_SEED, encoding="utf-8")
    os.symlink(elsewhere, project / ".gradguard_cache")  # committed by a hostile repository
    r = run("check", "t.py", cwd=project)
    assert r.returncode == 1
    assert list(elsewhere.iterdir()) == []
    # nor a shard directory or an entry inside a real cache directory
    os.unlink(project / ".gradguard_cache")
    run("check", "t.py", cwd=project)
    shard = next(p for p in (project / ".gradguard_cache").iterdir() if p.is_dir())
    entry = next(shard.iterdir())
    entry.unlink()
    os.symlink(elsewhere / "planted", entry)
    r = run("check", "t.py", cwd=project)
    assert r.returncode == 1 and not (elsewhere / "planted").exists()
    for p in list(shard.iterdir()):
        p.unlink()
    shard.rmdir()
    os.symlink(elsewhere, shard)
    r = run("check", "t.py", cwd=project)
    assert r.returncode == 1 and list(elsewhere.iterdir()) == []


def test_a_corrupted_cache_entry_is_a_miss(tmp_path, capsys):
    (tmp_path / "t.py").write_text(GRU_SEED, encoding="utf-8")
    cdir = tmp_path / "cc"
    args = ("check", "--format", "json", "--jobs", "1", "--cache-dir", str(cdir), str(tmp_path / "t.py"))
    code, fresh, _ = main(capsys, *args)
    (entry,) = [p for p in cdir.rglob("*") if p.is_file() and p.parent != cdir]
    good = entry.read_bytes()
    wrong = 0
    for pos in range(0, len(good), max(1, len(good) // 40)):  # ~40 single-bit flips over the entry
        for bit in (0, 3, 6):
            flipped = bytearray(good)
            flipped[pos] ^= 1 << bit
            entry.write_bytes(bytes(flipped))
            c, out, _ = main(capsys, *args)
            wrong += c != code or json.loads(out) != json.loads(fresh)
    assert wrong == 0  # every flip is caught (a miss, re-analysed), none serves a wrong finding


# ---------------------------------------------------------------- item 10: config
@pytest.mark.parametrize("spelling", [
    '[tool]\ngradguard = { ignore = ["GG101"] }\n',
    'tool.gradguard.ignore = ["GG101"]\n',
    '[tool]\ngradguard.ignore = ["GG101"]\n',
    '[tool.gradguard]\nignore = ["GG101"]\n',
])
def test_every_toml_spelling_of_the_table_is_read(tmp_path, spelling):
    (tmp_path / "pyproject.toml").write_text(spelling, encoding="utf-8")
    assert load_config(str(tmp_path)).ignore == ("GG101",)
    (tmp_path / "t.py").write_text(GRU_SEED, encoding="utf-8")
    r = run("check", "--no-cache", "t.py", cwd=tmp_path)
    assert r.returncode == 0 and "GG101" not in r.stdout


def test_a_pyproject_whose_tool_is_not_a_table_is_a_config_error(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text("tool = 5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'tool' must be a table"):
        load_config_file(p)
    p.write_text('[[tool]]\nx = 1\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[\[tool\]\]"):
        load_config_file(p)
    # and a pyproject that never mentions gradguard is not ours to judge
    assert load_config(str(tmp_path)).select == ()


@pytest.mark.parametrize("flag", ["--select", "--ignore", "--extend-select"])
def test_an_unknown_rule_code_is_an_error_naming_it(tmp_path, flag):
    (tmp_path / "t.py").write_text(GRU_SEED, encoding="utf-8")
    r = run("check", "--no-cache", flag, "GG101,GG999", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "GG999" in r.stderr and r.stdout == ""
    # prefixes of real codes stay valid
    assert run("check", "--no-cache", flag, "GG1", "t.py", cwd=tmp_path).returncode in (0, 1)


@pytest.mark.parametrize("value", ['"big"', "-1", "true", "nan", "inf", "-inf"])
def test_a_bad_max_file_size_is_a_config_error(tmp_path, value):
    """TOML has nan and inf: they were taken, and every file governed by the
    config then failed as "gradguard internal error ... please report it"."""
    p = tmp_path / "pyproject.toml"
    p.write_text(f"[tool.gradguard]\nmax-file-size = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="max-file-size"):
        load_config_file(p)
    (tmp_path / "t.py").write_text(GRU_SEED, encoding="utf-8")
    r = run("check", "--no-cache", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "max-file-size" in r.stderr + r.stdout and "internal error" not in r.stderr + r.stdout
    p.write_text("[tool.gradguard]\nmax-file-size = 2.5\n", encoding="utf-8")
    assert load_config_file(p).max_file_size == 2.5


@pytest.mark.parametrize("what", ["fifo", "/dev/zero", "directory", "too large"])
def test_config_that_is_not_a_readable_file_is_refused_at_once(tmp_path, what):
    """``--config`` naming a FIFO blocked for ever, ``/dev/zero`` filled the memory
    (and ended as "gradguard: error: " with an empty MemoryError); each is now a
    configuration error that says what it is, at once."""
    (tmp_path / "t.py").write_text(GRU_SEED, encoding="utf-8")
    cfg = tmp_path / "配置.toml"
    if what == "fifo":
        os.mkfifo(cfg)
    elif what == "/dev/zero":
        cfg = Path("/dev/zero")
    elif what == "directory":
        cfg.mkdir()
    else:
        cfg.write_bytes(b"[tool.gradguard]\n" + b"#" * 17_000_000 + b"\n")
    r = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", "--config", str(cfg), "t.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    why = {"fifo": "not a regular file", "/dev/zero": "not a regular file", "directory": "Is a directory",
           "too large": "over 16 MB"}[what]
    assert r.returncode == 2 and f"gradguard: error: {cfg}: " in r.stderr and why in r.stderr, r.stderr
    if what == "too large":  # found as the project's pyproject.toml, the same error for the file it governs
        cfg.rename(tmp_path / "pyproject.toml")
        r = run("check", "--no-cache", "t.py", cwd=tmp_path)
        assert r.returncode == 2 and "over 16 MB" in r.stderr, r.stderr


def test_an_output_encoding_that_cannot_hold_the_text_escapes_it(tmp_path):
    """Standard output in ASCII (``PYTHONIOENCODING=ascii``; a Windows job piping
    its output in cp1252): Chinese messages and a file named in Chinese ended the
    run with a UnicodeEncodeError and status 1, read as "findings"."""
    (tmp_path / "训练.py").write_text(GRU_SEED, encoding="utf-8")
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    for lang, status in (("zh", 1), ("en", 1)):
        r = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", "--lang", lang, "."],
                           cwd=tmp_path, capture_output=True, env=env, timeout=60)
        assert r.returncode == status, r.stderr
        assert b"Traceback" not in r.stderr and b"\\u8bad\\u7ec3.py:12:" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "gradguard", "rule", "GG101", "--lang", "zh"],
                       capture_output=True, env=env, timeout=60)
    assert r.returncode == 0 and b"Traceback" not in r.stderr


def test_an_internal_error_exits_2_not_1(monkeypatch, capsys):
    """Status 1 means findings; an error of ours must not look like them."""
    monkeypatch.delenv("GRADGUARD_STRICT", raising=False)

    def broken(args):
        raise RuntimeError("坏了")

    monkeypatch.setattr(cli, "cmd_check", broken)
    code, out, err = main(capsys, "check", "x.py")
    assert code == 2 and "internal error (RuntimeError: 坏了); please report it" in err


def test_output_file_through_a_link_or_to_a_device_or_fifo(tmp_path, capsys):
    """``--output-file`` naming a symbolic link writes through it (the rename
    replaced the link with a regular file), and a device or a FIFO is written
    to as a stream: ``/dev/null`` behind a link stayed a link, and, run as root,
    ``--output-file /dev/stdout`` replaced the system's /dev/stdout."""
    import threading

    (tmp_path / "t.py").write_text(GRU_SEED, encoding="utf-8")
    (tmp_path / "reports").mkdir()
    target = tmp_path / "reports" / "报告.txt"
    target.write_text("old\n", encoding="utf-8")
    os.symlink(target, tmp_path / "link.txt")
    os.symlink(os.devnull, tmp_path / "null.txt")
    t = str(tmp_path / "t.py")
    for out in ("link.txt", "null.txt"):
        code, _, err = main(capsys, "check", "--no-cache", "--output-file", str(tmp_path / out), t)
        assert code == 1, err
        assert (tmp_path / out).is_symlink()
    assert f"t.py:{GG101_AT}:" in target.read_text(encoding="utf-8")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    code, _, err = main(capsys, "check", "--no-cache", "--output-file", str(fifo), t)
    reader.join(30)
    assert code == 1, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and f"t.py:{GG101_AT}:".encode() in got[0]
    assert not [p for p in tmp_path.iterdir() if "gradguard" in p.name]


def test_one_file_named_several_ways_is_checked_once(tmp_path, capsys, monkeypatch):
    """``a.py``, ``./a.py``, its absolute path and the folder holding it: one file,
    checked and reported once (each spelling was a file of its own: the same
    findings three times, "Checked 4 files"). A symbolic link stays a name of its own."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "训练.py").write_text(GRU_SEED, encoding="utf-8")
    code, out, err = main(capsys, "check", "--no-cache", "训练.py", "./训练.py", str(tmp_path / "训练.py"), ".", "./")
    assert code == 1, err
    assert out.count(f":{GG101_AT}:5: GG101") == 1 and "Checked 1 file:" in out, out


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or not sys.platform.startswith("linux"), reason="POSIX signals")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_sigterm_while_fix_replaces_a_file_leaves_no_temporary_file(tmp_path, jobs):
    """A run stopped by SIGTERM (a CI job cancelled) while ``--fix`` was replacing
    a file left its temporary file (``.a.py.*.gradguard-tmp``) beside the user's
    file: in one process the default action ended it between the write and the
    rename, and a pool worker got SIGKILL when its parent died. The signal now
    waits until the file is in place (or the temporary file gone): no temporary
    file is left, and every file holds its old bytes or its fixed bytes, whole."""
    names = ["a.py", "b.py"]
    for n in names:
        (tmp_path / n).write_text(GRU_SEED, encoding="utf-8")
    flag = tmp_path.parent / f"{tmp_path.name}.writing"
    # the write of the temporary file is made slow (its fsync), so that the signal lands inside it
    driver = ("import os, sys, time\n"
              "real = os.fsync\n"
              f"def slow(fd):\n    open({str(flag)!r}, 'a').close()\n    time.sleep(2)\n    real(fd)\n"
              "os.fsync = slow\n"
              "from gradguard import cli\n"
              f"raise SystemExit(cli.main(['check', '--fix', '--no-cache', '--jobs', {jobs!r}, *{names!r}]))\n")
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert flag.exists(), proc.communicate()
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGTERM  # it still ends by the signal
        deadline = time.monotonic() + 20  # (a pool worker finishes its file after the parent is gone)
        while any(".gradguard-tmp" in p.name for p in tmp_path.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(p.name for p in tmp_path.iterdir()) == names
        fixed = 0
        for n in names:
            text = (tmp_path / n).read_text(encoding="utf-8")
            assert text == GRU_SEED or ("detach()" in text and text.replace("    hidden = hidden.detach()\n", "")
                                        == GRU_SEED), text
            fixed += text != GRU_SEED
        assert fixed >= 1  # the file being replaced when the signal came is in place
    finally:
        if proc.poll() is None:
            proc.kill()
