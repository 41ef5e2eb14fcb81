"""`gradguard check -`: a buffer piped through a real shell into the console
script, as editors that pipe unsaved text run it; and ruff's --exit-zero,
--quiet, --statistics and --output-file."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import CLEAN, GRU_SEED, _gru_notebook
from test_precommit import readme_block

BIN = Path(sys.executable).parent
FIXTURES = Path(__file__).parent / "fixtures"
DETACH = "for step in range(3):\n    hidden = hidden.detach()\n"

pytestmark = pytest.mark.skipif(not (BIN / "gradguard").exists(), reason="needs the installed console script")


def sh(script: str, cwd, stdin_text=None):
    """Run a shell command line with the venv's console scripts first on PATH."""
    env = dict(os.environ, NO_COLOR="1", GRADGUARD_NO_CACHE="1", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, timeout=300)


def pipe(buffer: bytes, args: str, cwd):
    """`cat <buffer> | gradguard check ARGS` in cwd."""
    (Path(cwd) / ".buffer").write_bytes(buffer)
    try:
        return sh(f"cat .buffer | gradguard check {args}", cwd)
    finally:
        (Path(cwd) / ".buffer").unlink()


def test_the_readme_snippet(tmp_path):
    (tmp_path / "train.py").write_text(GRU_SEED, encoding="utf-8")
    command = readme_block("Editors that pipe text (stdin)", "console").strip()
    assert command.startswith("$ ") and "|" in command
    r = sh(command[2:], tmp_path)
    assert r.returncode == 1, r.stderr
    out = r.stdout.decode()
    assert out.startswith("train.py:12:5: GG101 [error] `hidden` carries")
    assert "Checked 1 file: 1 finding" in out


def test_the_buffer_is_checked_not_the_file_on_disk(tmp_path):
    (tmp_path / "train.py").write_text(CLEAN, encoding="utf-8")
    r = pipe(GRU_SEED.encode(), "--format json --stdin-filename train.py -", tmp_path)
    assert r.returncode == 1, r.stderr
    assert [(f["path"], f["code"], f["line"]) for f in json.loads(r.stdout)] == [("train.py", "GG101", 12)]
    clean = pipe(CLEAN.encode(), "--stdin-filename train.py -", tmp_path)
    assert clean.returncode == 0 and b"0 findings" in clean.stdout
    # no name at all: `-` alone
    bare = pipe(GRU_SEED.encode(), "--format json -", tmp_path)
    assert [f["path"] for f in json.loads(bare.stdout)] == ["-"]


def test_fix_writes_the_fixed_buffer_to_stdout_and_leaves_the_file_alone(tmp_path):
    on_disk = tmp_path / "train.py"
    on_disk.write_text(GRU_SEED, encoding="utf-8")
    before = on_disk.read_bytes()
    # a BOM, CRLF line ends and a Chinese comment all come back as they went in
    buffer = b"\xef\xbb\xbf" + GRU_SEED.replace("\n", "\r\n").encode()
    r = pipe(buffer, "--fix --stdin-filename train.py -", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"\xef\xbb\xbf" + GRU_SEED.replace("for step in range(3):\n", DETACH).replace("\n", "\r\n").encode()
    assert b"Checked 1 file: 0 findings" in r.stderr
    assert on_disk.read_bytes() == before
    # nothing to fix, or a buffer that does not parse: the buffer comes back byte for byte
    for text, code in ((CLEAN.encode(), 0), (b"def f(:\n    pass\n", 2)):
        same = pipe(text, "--fix --stdin-filename train.py -", tmp_path)
        assert (same.returncode, same.stdout) == (code, text), same.stderr
    broken = pipe(b"def f(:\n", "--stdin-filename train.py -", tmp_path)
    assert broken.returncode == 2 and b"train.py: error: syntax error at 1:7" in broken.stderr


def test_the_path_decides_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    helper = (FIXTURES / "projects" / "word_language_model" / "lm_utils.py").read_text(encoding="utf-8")
    # a helper that forgets to detach: followed, it carries the graph
    (pkg / "lm_utils.py").write_text(helper.replace("return h.detach()", "return h"), encoding="utf-8")
    buffer = GRU_SEED.replace("from torch import nn\n", "from torch import nn\n\nfrom .lm_utils import repackage_hidden\n")
    buffer = buffer.replace("    x = torch.randn(2, 5, 4)\n", "    hidden = repackage_hidden(hidden)  # 切断?\n    x = torch.randn(2, 5, 4)\n")
    inside = pipe(buffer.encode(), "--format json --stdin-filename pkg/train.py -", tmp_path)
    assert [(f["path"], f["code"]) for f in json.loads(inside.stdout)] == [("pkg/train.py", "GG101")], inside.stderr
    # the same buffer named outside the package: `.lm_utils` is not there, nothing is claimed
    outside = pipe(buffer.encode(), "--format json --stdin-filename other/train.py -", tmp_path)
    assert json.loads(outside.stdout) == [], outside.stderr
    # the helper detaches: followed, the buffer is fine
    (pkg / "lm_utils.py").write_text(helper, encoding="utf-8")
    fixed = pipe(buffer.encode(), "--format json --stdin-filename pkg/train.py -", tmp_path)
    assert json.loads(fixed.stdout) == [] and fixed.returncode == 0


def test_the_path_decides_the_configuration(tmp_path):
    quiet = tmp_path / "legacy"
    quiet.mkdir()
    (quiet / "pyproject.toml").write_text('[tool.gradguard]\nignore = ["GG101"]\n', encoding="utf-8")
    assert pipe(GRU_SEED.encode(), "--stdin-filename legacy/train.py -", tmp_path).returncode == 0
    assert pipe(GRU_SEED.encode(), "--stdin-filename train.py -", tmp_path).returncode == 1
    (quiet / "pyproject.toml").write_text('[tool.gradguard]\nignore = ["GG1O1"]\n', encoding="utf-8")
    bad = pipe(GRU_SEED.encode(), "--stdin-filename legacy/train.py -", tmp_path)
    assert bad.returncode == 2 and b"pyproject.toml" in bad.stderr


def test_a_notebook_buffer(tmp_path):
    nb = _gru_notebook()
    text = (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()
    r = pipe(text, "--format json --stdin-filename 训练.ipynb -", tmp_path)
    assert [(f["path"], f["cell"], f["line"]) for f in json.loads(r.stdout)] == [("训练.ipynb", 3, 5)], r.stderr
    fixed = pipe(text, "--fix --stdin-filename 训练.ipynb -", tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    cells = json.loads(fixed.stdout)["cells"]
    assert cells[:2] == nb["cells"][:2] and cells[2]["outputs"] == nb["cells"][2]["outputs"]
    assert "    hidden = hidden.detach()\n" in cells[2]["source"]
    # the same text named .py is Python, and JSON is no Python program with a training loop
    assert pipe(text, "--stdin-filename nb.py -", tmp_path).returncode == 0


def test_stdin_is_checked_alone(tmp_path):
    (tmp_path / "a.py").write_text(CLEAN, encoding="utf-8")
    for args in ("- a.py", "--stdin-filename x.py a.py", "--stdin-filename - -"):
        r = pipe(CLEAN.encode(), args, tmp_path)
        assert r.returncode == 2 and r.stderr.startswith(b"gradguard: error:") and r.stdout == b"", args


# ---------------------------------------------------------------- ruff's report options
@pytest.fixture
def project(tmp_path):
    (tmp_path / "gru.py").write_text(GRU_SEED, encoding="utf-8")
    shutil.copy(FIXTURES.parents[1] / "examples" / "regression_requires_grad_labels.py", tmp_path / "reg.py")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    return tmp_path


def test_exit_zero_quiet_and_statistics(project):
    r = sh("gradguard check --exit-zero .", project)
    assert r.returncode == 0 and b"Checked 3 files: 2 findings" in r.stdout
    q = sh("gradguard check --quiet .", project)
    assert q.returncode == 1
    lines = q.stdout.decode().splitlines()
    assert lines[0].startswith("./gru.py:12:5: GG101") and not any("Checked" in ln for ln in lines)
    assert any(ln.startswith("./reg.py:") and " GG102 " in ln for ln in lines)
    s = sh("gradguard check --statistics .", project)
    assert s.returncode == 1
    assert s.stdout.decode().splitlines() == ["1\tGG101\t[*] carried-graph", "1\tGG102\t[*] stale-graph"]
    js = sh("gradguard check --statistics --format json --exit-zero .", project)
    assert js.returncode == 0
    assert json.loads(js.stdout) == [{"code": "GG101", "name": "carried-graph", "count": 1, "fixable": True},
                                     {"code": "GG102", "name": "stale-graph", "count": 1, "fixable": True}]
    # --exit-zero is about findings: an unreadable file is still an error
    assert sh("gradguard check --exit-zero missing.py", project).returncode == 2


def test_output_file_is_written_whole(project):
    report = project / "report.json"
    report.write_text("old", encoding="utf-8")
    os.chmod(report, 0o640)
    r = sh("gradguard check --format json --output-file report.json .", project)
    assert r.returncode == 1 and r.stdout == b""
    assert json.loads(report.read_text(encoding="utf-8")) == json.loads(sh("gradguard check --format json .", project).stdout)
    assert stat.S_IMODE(report.stat().st_mode) == 0o640
    assert sorted(p.name for p in project.iterdir()) == ["clean.py", "gru.py", "reg.py", "report.json"]
    # the report of a piped buffer too; -o is ruff's short form
    p = pipe(GRU_SEED.encode(), "-q -o piped.txt --stdin-filename gru.py -", project)
    assert p.returncode == 1 and p.stdout == b""
    assert (project / "piped.txt").read_text(encoding="utf-8").startswith("gru.py:12:5: GG101")
    # a directory that does not exist: an error, and nothing half-written anywhere
    bad = sh("gradguard check -o nowhere/r.txt .", project)
    assert bad.returncode == 2 and not (project / "nowhere").exists()


@pytest.mark.parametrize("argv", [
    ["--stdin-filename", "a/训练.py", "-"],
    ["-q", "--exit-zero", "-o", "r.txt", "--quiet", "."],
    ["--stdin-filename=x.ipynb", "--statistics", "--fix", "--output-file=r.json", "-"],
])
def test_fast_argument_parser_agrees_with_argparse_on_the_new_options(argv):
    from gradguard.cli import _fast_check_args, build_parser

    fast = _fast_check_args(argv)
    assert fast is not None
    assert vars(fast) == vars(build_parser().parse_args(["check", *argv]))


@pytest.mark.parametrize("how", ["the file", "its folder", "another name for it", "the buffer's name"])
def test_output_file_never_replaces_a_checked_file(tmp_path, how):
    """--output-file naming a file the run checks (a slip of the shell: the
    report's name and the file's swapped) replaced the user's code with the
    report. It is refused before anything is checked or written."""
    code = tmp_path / "train.py"
    code.write_text(GRU_SEED, encoding="utf-8")
    out = code
    args = ["check", "--no-cache", str(code)]
    if how == "its folder":
        args = ["check", "--no-cache", "--fix", str(tmp_path)]
    elif how == "another name for it":
        (tmp_path / "sub").mkdir()
        out = Path(os.path.join(tmp_path, "sub", "..", ".", "train.py"))
    elif how == "the buffer's name":
        args = ["check", "--no-cache", "--stdin-filename", str(code), "-"]
    r = subprocess.run([sys.executable, "-m", "gradguard", *args, "--output-file", str(out)],
                       input=GRU_SEED.encode(), capture_output=True)
    assert r.returncode == 2
    assert b"--output-file" in r.stderr and b"would replace its code" in r.stderr
    assert code.read_text(encoding="utf-8") == GRU_SEED  # not the report, and not fixed either
