"""The flake8 plugin (entry point GG under flake8.extension), run by real flake8
as a process: what it reports, noqa, flake8's own selection, configuration,
the other modules a file imports, and the same findings as `gradguard check`."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import CLEAN, GRU_SEED
from test_precommit import readme_block

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FIXTURES = ROOT / "tests" / "fixtures"
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) (?P<text>.*)$")

pytestmark = pytest.mark.skipif(not (BIN / "flake8").exists(), reason="flake8 is in the test extra: pip install -e '.[test]'")


def sh(script: str, cwd, env=None):
    e = dict(os.environ, NO_COLOR="1", GRADGUARD_NO_CACHE="1", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    e.pop("GRADGUARD_LANG", None)
    e.update(env or {})
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=e, capture_output=True, text=True, encoding="utf-8",
                          timeout=300)


def flake8(args: str, cwd, env=None):
    r = sh(f"flake8 --isolated {args}", cwd, env)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r, [LINE.match(ln).groupdict() for ln in r.stdout.splitlines()]


def gg(found):
    return [(f["path"], int(f["line"]), int(f["col"]), f["code"]) for f in found if f["code"].startswith("GG")]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(GRU_SEED, encoding="utf-8")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    return tmp_path


def test_the_readme_snippet(project):
    block = readme_block("flake8", "console")
    commands = [ln[2:] for ln in block.splitlines() if ln.startswith("$ ")]
    assert commands[0].startswith("pip install") and commands[1].startswith("flake8 ")
    shown = [ln for ln in block.splitlines() if ln and not ln.startswith("$ ")]
    r = sh(commands[1], project)  # the pip line installs what the test extra already holds
    assert r.returncode == 1, r.stderr
    assert len(shown) == 1 and shown[0].endswith("[...]")
    assert r.stdout.startswith(shown[0][: -len("[...]")]) and r.stdout.count("\n") == 1


def test_a_flake8_run_reports_gradguard_next_to_its_own_checks(project):
    (project / "train.py").write_text(GRU_SEED + "import os\n", encoding="utf-8")
    r, found = flake8(".", project)
    assert r.returncode == 1
    codes = sorted((f["path"], f["code"]) for f in found)
    # GG is selected by default, like any plugin's prefix, next to pyflakes' and pycodestyle's codes
    assert ("./train.py", "GG101") in codes and ("./train.py", "F401") in codes and ("./train.py", "E402") in codes
    gg101 = [f for f in found if f["code"] == "GG101"][0]
    assert (gg101["line"], gg101["col"]) == ("12", "5")
    assert gg101["text"].startswith("`hidden` carries this iteration's autograd graph into the next iteration")
    assert not [f for f in found if f["path"] == "./clean.py"]


def test_noqa_and_flake8_selection(project):
    lines = GRU_SEED.splitlines(keepends=True)
    target = "    out, hidden = gru(x, hidden)\n"
    assert lines[11] == target
    for comment, reported in (("  # noqa: GG101", False), ("  # noqa", False), ("  # noqa:E501,GG101", False),
                              ("  # noqa: E501", True), ("  # noqa: GG102", True)):
        lines[11] = target.rstrip("\n") + comment + "\n"
        (project / "train.py").write_text("".join(lines), encoding="utf-8")
        _, found = flake8("--select GG train.py", project)
        assert bool(gg(found)) is reported, comment
    (project / "train.py").write_text(GRU_SEED, encoding="utf-8")
    assert gg(flake8("--select GG train.py", project)[1]) == [("train.py", 12, 5, "GG101")]
    assert gg(flake8("--extend-ignore GG101 train.py", project)[1]) == []
    assert gg(flake8("--per-file-ignores train.py:GG train.py", project)[1]) == []
    assert gg(flake8("--select E train.py", project)[1]) == []


def test_gradguard_configuration_and_language(project):
    (project / "pyproject.toml").write_text('[tool.gradguard]\nignore = ["GG101"]\n', encoding="utf-8")
    assert gg(flake8("--select GG train.py", project)[1]) == []
    (project / "pyproject.toml").write_text('[tool.gradguard]\nignore = ["GG1O1"]\n', encoding="utf-8")
    _, found = flake8("--select GG train.py", project)
    # a broken table is said once, at the top of the file, and the file is still checked with the defaults
    assert [(f["line"], f["code"]) for f in found] == [("1", "GG000"), ("12", "GG101")]
    assert "pyproject.toml" in found[0]["text"]
    # exclude: what `gradguard check .` skips, the plugin is silent on
    (project / "vendored").mkdir()
    (project / "vendored" / "gru.py").write_text(GRU_SEED, encoding="utf-8")
    (project / "pyproject.toml").write_text('[tool.gradguard]\nexclude = ["vendored/"]\n', encoding="utf-8")
    assert gg(flake8("--select GG .", project)[1]) == [("./train.py", 12, 5, "GG101")]
    assert [f["path"] for f in json.loads(sh("gradguard check --format json .", project).stdout)] == ["./train.py"]
    (project / "pyproject.toml").unlink()
    _, zh = flake8("--select GG --gradguard-lang zh train.py", project)
    assert zh[0]["text"].startswith("`hidden` 把本轮迭代的计算图带进了下一轮")
    # the option from flake8's own configuration file (not --isolated here)
    (project / ".flake8").write_text("[flake8]\nselect = GG\ngradguard-lang = zh\n", encoding="utf-8")
    r = sh("flake8 train.py", project)
    assert r.returncode == 1 and "把本轮迭代的计算图带进了下一轮" in r.stdout, r.stdout + r.stderr
    assert "计算图" in flake8("--select GG train.py", project, env={"GRADGUARD_LANG": "zh"})[1][0]["text"]


def test_columns_count_characters_as_the_cli_does(project):
    # a Chinese identifier before the finding on its line: a byte column would be 2 further on
    src = GRU_SEED.replace("    out, hidden = gru(x, hidden)", "    步 = step; out, hidden = gru(x, hidden)")
    (project / "train.py").write_text(src, encoding="utf-8")
    _, found = flake8("--select GG train.py", project)
    cli = json.loads(sh("gradguard check --format json train.py", project).stdout)
    assert gg(found) == [("train.py", 12, 15, "GG101")] == [(f["path"], f["line"], f["column"], f["code"]) for f in cli]


def test_the_other_modules_a_file_imports_are_followed(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    helper = (FIXTURES / "projects" / "word_language_model" / "lm_utils.py").read_text(encoding="utf-8")
    (pkg / "lm_utils.py").write_text(helper, encoding="utf-8")
    src = GRU_SEED.replace("from torch import nn\n", "from torch import nn\n\nfrom .lm_utils import repackage_hidden\n")
    src = src.replace("    x = torch.randn(2, 5, 4)\n", "    hidden = repackage_hidden(hidden)\n    x = torch.randn(2, 5, 4)\n")
    (pkg / "train.py").write_text(src, encoding="utf-8")
    assert gg(flake8("--select GG pkg/train.py", tmp_path)[1]) == []
    # the helper stops detaching: the importer is reported, from a file and from standard input
    (pkg / "lm_utils.py").write_text(helper.replace("return h.detach()", "return h"), encoding="utf-8")
    assert gg(flake8("--select GG pkg/train.py", tmp_path)[1]) == [("pkg/train.py", 15, 5, "GG101")]
    r = sh("cat pkg/train.py | flake8 --isolated --select GG --stdin-display-name pkg/train.py -", tmp_path)
    assert r.stdout.startswith("pkg/train.py:15:5: GG101 "), r.stdout + r.stderr


def test_the_same_findings_as_the_cli_on_every_fixture_and_example():
    """Every labelled fixture program (projects of several modules included) and
    every example: flake8 reports what `gradguard check` reports, place for place."""
    dirs = "tests/fixtures examples"
    cli = json.loads(sh(f"gradguard check --format json {dirs}", ROOT).stdout)
    expected = sorted((f["path"], f["line"], f["column"], f["code"]) for f in cli if f["path"].endswith(".py"))
    _, found = flake8(f"--select GG,E999 {dirs}", ROOT)
    assert not [f for f in found if f["code"] == "E999"]
    assert sorted(gg(found)) == expected
    assert len(expected) > 50 and len({p for p, *_ in expected}) > 40
