"""The pre-commit hooks (.pre-commit-hooks.yaml), run by real `pre-commit`.

`pre-commit try-repo` builds gradguard from this checkout into an environment
of its own, as a user's `pre-commit install` would from the published
repository, then runs the hook on the files of a throw-away git repository.
The checkout's working tree (uncommitted and new files included; try-repo
itself would take only the tracked ones) is first copied into a one-commit
repository. The README's `repos:` snippet is run as written, pointed at that
commit, and the environment pre-commit built for it must hold no torch.
try-repo builds an environment per run (~20 s); the checks after a fix use an
installed configuration, whose environment PRE_COMMIT_HOME keeps.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import CLEAN, GRU_SEED, _gru_notebook

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")

pytestmark = pytest.mark.skipif(not PRE_COMMIT.exists(), reason="pre-commit is in the test extra: pip install -e '.[test]'")


def git(*args, cwd):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def hooks(tmp_path_factory):
    """(snapshot of this checkout as a one-commit repository, PRE_COMMIT_HOME)."""
    base = tmp_path_factory.mktemp("precommit")
    snap = base / "gradguard"
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (snap / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, snap / rel)
    git("init", "-q", cwd=snap)
    git("add", "-A", cwd=snap)
    git("commit", "-q", "--no-verify", "-m", "snapshot", cwd=snap)
    return snap, base / "pre-commit-home"


@pytest.fixture
def repo(tmp_path):
    """A user's repository: a training script with the GRU bug and a clean one."""
    (tmp_path / "train.py").write_text(GRU_SEED, encoding="utf-8")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "README.txt").write_text("not Python: the hook never sees it\n", encoding="utf-8")
    (tmp_path / "训练.ipynb").write_text(json.dumps(_gru_notebook(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    git("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    return tmp_path


def pre_commit_env(hooks):
    env = dict(os.environ, PRE_COMMIT_HOME=str(hooks[1]), NO_COLOR="1", GRADGUARD_NO_CACHE="1")
    env.pop("VIRTUAL_ENV", None)
    return env


def try_repo(hooks, repo, hook, *files):
    return subprocess.run(
        [str(PRE_COMMIT), "try-repo", str(hooks[0]), hook, "--color", "never", "--files", *files],
        cwd=repo, env=pre_commit_env(hooks), capture_output=True, text=True, encoding="utf-8", timeout=900,
    )


def run_hooks(hooks, repo, ids, *files):
    """`pre-commit run` of a configuration that installs ``ids`` from the snapshot's commit."""
    sha = git("rev-parse", "HEAD", cwd=hooks[0]).strip()
    config = hooks[1].parent / f"config-{'-'.join(ids)}.yaml"
    config.write_text(f"repos:\n  - repo: {hooks[0]}\n    rev: {sha}\n    hooks:\n"
                      + "".join(f"      - id: {i}\n" for i in ids), encoding="utf-8")
    return subprocess.run([str(PRE_COMMIT), "run", "-c", str(config), "--color", "never", "--files", *files],
                          cwd=repo, env=pre_commit_env(hooks), capture_output=True, text=True, encoding="utf-8",
                          timeout=900)


def test_the_hook_fails_on_the_buggy_file_and_prints_the_finding(hooks, repo):
    r = try_repo(hooks, repo, "gradguard", "train.py", "README.txt", "训练.ipynb")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "train.py:12:5: GG101 [error] `hidden` carries this iteration's autograd graph" in r.stdout
    assert "训练.ipynb:cell 3:5:5: GG101 [error]" in r.stdout  # notebooks are checked too (types_or: jupyter)
    assert "Failed" in r.stdout and "README.txt" not in r.stdout.split("- hook id: gradguard", 1)[1]


def test_the_hook_passes_on_the_clean_file(hooks, repo):
    r = try_repo(hooks, repo, "gradguard", "clean.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout and "GG1" not in r.stdout


def test_the_fix_hook_rewrites_the_file(hooks, repo):
    before = (repo / "train.py").read_text(encoding="utf-8")
    r = try_repo(hooks, repo, "gradguard-fix", "train.py", "clean.py")
    # pre-commit fails a hook that changed files, so the fixes are reviewed before the commit
    assert r.returncode == 1, r.stdout + r.stderr
    assert "files were modified by this hook" in r.stdout
    after = (repo / "train.py").read_text(encoding="utf-8")
    assert after == before.replace("for step in range(3):\n", "for step in range(3):\n    hidden = hidden.detach()\n")
    assert (repo / "clean.py").read_text(encoding="utf-8") == CLEAN
    # fixed: both hooks pass now, and a second fix run changes nothing (from an installed
    # configuration: its environment is built once and kept, try-repo builds one per run)
    for hook in ("gradguard", "gradguard-fix"):
        again = run_hooks(hooks, repo, [hook], "train.py", "clean.py")
        assert again.returncode == 0 and "Passed" in again.stdout, again.stdout + again.stderr
    assert (repo / "train.py").read_text(encoding="utf-8") == after


def readme_block(heading: str, lang: str) -> str:
    """The first ```lang block of the README section under ``## heading``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_the_readme_snippet_installs_the_hook_without_torch(hooks, repo):
    snippet = readme_block("pre-commit", "yaml")
    assert re.search(r"^\s+- id: gradguard$", snippet, re.M)
    sha = git("rev-parse", "HEAD", cwd=hooks[0]).strip()
    # the published repository and tag, replaced by the snapshot of this checkout
    config = re.sub(r"(repo:\s*)\S+", lambda m: m.group(1) + str(hooks[0]), snippet, count=1)
    config = re.sub(r"(rev:\s*)\S+", lambda m: m.group(1) + sha, config, count=1)
    assert config != snippet
    (repo / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    git("add", "-A", cwd=repo)
    r = subprocess.run([str(PRE_COMMIT), "run", "--all-files", "--color", "never"], cwd=repo,
                       env=pre_commit_env(hooks), capture_output=True, text=True, encoding="utf-8", timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "train.py:12:5: GG101" in r.stdout and "clean.py" not in r.stdout
    # the environment pre-commit built (kept in PRE_COMMIT_HOME) has gradguard and no torch
    envs = [p for p in hooks[1].rglob("site-packages") if (p / "gradguard").is_dir()]
    assert envs, sorted(str(p) for p in hooks[1].rglob("site-packages"))
    for sp in envs:
        assert not (sp / "torch").exists() and not list(sp.glob("torch-*.dist-info")), sp
