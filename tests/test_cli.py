"""The `gradguard` command line, run as a real process."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GRU_SEED = textwrap.dedent(
    """\
    import torch
    from torch import nn

    # 序列模型:隐状态跨批次传递
    gru = nn.GRU(input_size=4, hidden_size=8, batch_first=True)
    head = nn.Linear(8, 1)
    opt = torch.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.1)
    hidden = torch.zeros(1, 2, 8)
    for step in range(3):
        x = torch.randn(2, 5, 4)
        y = torch.randn(2, 5, 1)
        out, hidden = gru(x, hidden)
        loss = ((head(out) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
)

REGRESSION_SEED = textwrap.dedent(
    """\
    import torch
    from torch import nn
    X = torch.rand(size = (2,5),requires_grad = True)
    true_w = torch.tensor([1,2,3,4,5.]).reshape((X.shape[1],-1))
    true_b = torch.zeros(X.shape[0]).reshape((-1,1))
    Y = torch.matmul(X,true_w) + true_b
    Y += torch.rand(size=(Y.shape))
    linear1 = nn.Linear(5,1)
    lr = 0.01
    for i in range(10):
        Y_hat = linear1(X)
        l = (Y_hat-Y)**2
        linear1.zero_grad()
        l.sum().backward()
        linear1.weight.data[:] -= lr*linear1.weight.grad
    """
)

CLEAN = "import torch\n\nprint(torch.ones(2).sum().item())\n"


def run(*args, cwd=None, env=None):
    e = dict(os.environ, NO_COLOR="1")
    e.update(env or {})
    e = {k: v for k, v in e.items() if v is not None}  # env={"X": None}: X unset
    return subprocess.run(
        [sys.executable, "-m", "gradguard", *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8", env=e
    )


@pytest.fixture
def project(tmp_path):
    (tmp_path / "gru_train.py").write_text(GRU_SEED, encoding="utf-8")
    (tmp_path / "regression.py").write_text(REGRESSION_SEED, encoding="utf-8")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    return tmp_path


def test_json_shape_is_the_documented_contract(project):
    r = run("check", "--format", "json", "gru_train.py", cwd=project)
    assert r.returncode == 1, r.stderr
    items = json.loads(r.stdout)
    assert len(items) == 1
    f = items[0]
    assert set(f) == {"path", "line", "column", "end_line", "end_column", "code", "name", "severity", "message",
                      "related", "fixes"}
    assert (f["path"], f["line"], f["column"], f["code"], f["name"], f["severity"]) == (
        "gru_train.py", 12, 5, "GG101", "carried-graph", "error")
    assert "hidden" in f["message"]
    assert {tuple(sorted(r)) for r in f["related"]} == {("column", "line", "message", "path")}
    assert any(r["line"] == 15 for r in f["related"]), "the backward() that fails is a related location"
    assert sum(fx["preferred"] for fx in f["fixes"]) == 1
    for fx in f["fixes"]:
        assert fx["title"] and fx["edits"]
        for e in fx["edits"]:
            assert set(e) == {"line", "column", "end_line", "end_column", "new_text"}
            assert e["line"] >= 1 and e["column"] >= 1


def test_exit_codes_clean_findings_and_errors(project):
    assert run("check", "clean.py", cwd=project).returncode == 0
    assert run("check", "gru_train.py", cwd=project).returncode == 1
    (project / "broken.py").write_text("def f(:\n", encoding="utf-8")
    r = run("check", ".", cwd=project)
    assert r.returncode == 2
    assert "broken.py" in r.stderr and "syntax error" in r.stderr
    # the other files were still checked
    assert "gru_train.py:12:5: GG101" in r.stdout and "regression.py" in r.stdout
    assert run("check", "nope.py", cwd=project).returncode == 2
    assert run("check", "--select", "E501", ".", cwd=project).returncode == 2


def test_unreadable_inputs_are_reported_and_the_rest_checked(project):
    (project / "blob.py").write_bytes(b"\x00\x01\x02")
    (project / "latin.py").write_bytes(b"# -*- coding: ascii -*-\nx = '\xe9'\n")
    (project / "nb.ipynb").write_text('{"cells": "nope"}', encoding="utf-8")
    r = run("check", ".", cwd=project)
    assert r.returncode == 2
    assert "blob.py: error: binary file" in r.stderr
    assert "latin.py: error: cannot decode" in r.stderr
    assert "nb.ipynb: error: malformed notebook" in r.stderr
    assert "gru_train.py:12:5: GG101" in r.stdout


def test_select_ignore_and_pyproject(project):
    assert run("check", "--ignore", "GG101", "gru_train.py", cwd=project).returncode == 0
    assert run("check", "--select", "GG102", "gru_train.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.gradguard]\nignore = ["GG102"]\n', encoding="utf-8")
    assert run("check", "regression.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.gradguard]\nignore = "GG1O2"\n', encoding="utf-8")
    r = run("check", "regression.py", cwd=project)
    assert r.returncode == 2 and "pyproject.toml" in r.stderr and "GG1O2" in r.stderr


def test_gitignore_and_default_excludes(project):
    (project / ".gitignore").write_text("generated/\n", encoding="utf-8")
    for d in ("generated", ".venv", "nested"):
        (project / d).mkdir()
        (project / d / "gru.py").write_text(GRU_SEED, encoding="utf-8")
    r = run("check", "--format", "json", ".", cwd=project)
    paths = {Path(f["path"]).as_posix() for f in json.loads(r.stdout)}
    assert "nested/gru.py" in paths
    assert not any(p.startswith(("generated/", ".venv/")) for p in paths)


def test_a_gitignore_star_stays_inside_one_path_component(project):
    # spikingjelly's .gitignore has "/test*.py": top-level scratch files, not the test/ package
    (project / ".gitignore").write_text("/test*.py\nout/*.py\n", encoding="utf-8")
    for rel in ("test_scratch.py", "test/unit/gru.py", "out/gru.py", "out/deep/gru.py"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(GRU_SEED, encoding="utf-8")
    r = run("check", "--format", "json", ".", cwd=project)
    paths = {Path(f["path"]).as_posix() for f in json.loads(r.stdout)}
    assert {"test/unit/gru.py", "out/deep/gru.py"} <= paths
    assert not paths & {"test_scratch.py", "out/gru.py"}


def test_fix_and_diff(project):
    d = run("check", "--diff", "gru_train.py", cwd=project)
    assert d.returncode == 1
    assert "+" in d.stdout and "detach" in d.stdout
    assert (project / "gru_train.py").read_text(encoding="utf-8") == GRU_SEED  # --diff changes nothing
    f = run("check", "--fix", "gru_train.py", "regression.py", cwd=project)
    assert f.returncode == 0, f.stdout + f.stderr
    assert "detach" in (project / "gru_train.py").read_text(encoding="utf-8")
    again = run("check", "--fix", "gru_train.py", "regression.py", cwd=project)
    assert again.returncode == 0
    assert run("check", "--diff", ".", cwd=project).stdout == ""


def test_chinese_messages_and_rule_pages(project):
    r = run("check", "--lang", "zh", "gru_train.py", cwd=project)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in r.stdout.split("GG101", 1)[1].splitlines()[0])
    en = run("rule", "GG101")
    zh = run("rule", "GG101", "--lang", "zh")
    assert en.returncode == zh.returncode == 0
    assert "detach" in en.stdout and "retain_graph" in en.stdout
    assert "detach" in zh.stdout and "计算图" in zh.stdout
    assert run("rule", "GG999").returncode == 2


def test_sarif_and_github_formats(project):
    s = json.loads(run("check", "--format", "sarif", ".", cwd=project).stdout)
    run0 = s["runs"][0]
    assert {r["id"] for r in run0["tool"]["driver"]["rules"]} >= {"GG101", "GG102"}
    ids = {res["ruleId"] for res in run0["results"]}
    assert ids == {"GG101", "GG102"}
    res = next(x for x in run0["results"] if x["ruleId"] == "GG101")
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == 12
    g = run("check", "--format", "github", "gru_train.py", cwd=project).stdout
    assert g.startswith("::error file=gru_train.py,line=12,col=5,")


def test_notebook_findings_map_to_cells(project):
    cells = [
        {"cell_type": "markdown", "source": ["# 训练"], "metadata": {}},
        {"cell_type": "code", "source": GRU_SEED.splitlines(keepends=True)[:8], "metadata": {}, "outputs": [], "execution_count": None},
        {"cell_type": "code", "source": ["%matplotlib inline\n"] + GRU_SEED.splitlines(keepends=True)[8:], "metadata": {}, "outputs": [], "execution_count": None},
    ]
    (project / "nb.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    items = json.loads(run("check", "--format", "json", "nb.ipynb", cwd=project).stdout)
    assert [(f["code"], f["cell"], f["line"]) for f in items] == [("GG101", 3, 5)]


def _gru_notebook() -> dict:
    return {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# 训练 GRU"]},
            {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
             "source": GRU_SEED.splitlines(keepends=True)[:8]},
            {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [{"output_type": "stream",
             "name": "stdout", "text": ["ok\n"]}],
             "source": ["%matplotlib inline\n"] + GRU_SEED.splitlines(keepends=True)[8:]},
        ],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_fix_writes_the_detach_into_the_notebook_cell(project):
    nb = _gru_notebook()
    path = project / "nb.ipynb"
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"  # as Jupyter writes it
    path.write_text(text, encoding="utf-8")
    diff = run("check", "--diff", "nb.ipynb", cwd=project)
    assert diff.returncode == 1 and "hidden.detach()" in diff.stdout
    assert path.read_text(encoding="utf-8") == text  # --diff writes nothing
    r = run("check", "--fix", "nb.ipynb", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    new_text = path.read_text(encoding="utf-8")
    fixed = json.loads(new_text)
    assert new_text.startswith('{\n "cells": [') and "训练" in new_text  # same layout, raw UTF-8
    assert fixed["cells"][0] == nb["cells"][0] and fixed["cells"][1] == nb["cells"][1]
    cell = fixed["cells"][2]
    assert cell["outputs"] == nb["cells"][2]["outputs"] and cell["source"][0] == "%matplotlib inline\n"
    assert all(isinstance(line, str) for line in cell["source"])
    assert any("hidden = hidden.detach()" in line for line in cell["source"])
    assert json.loads(run("check", "--format", "json", "nb.ipynb", cwd=project).stdout) == []


def test_jobs_gives_the_same_result(project):
    for i in range(12):
        (project / f"copy_{i}.py").write_text(GRU_SEED, encoding="utf-8")
    one = run("check", "--format", "json", "--jobs", "1", ".", cwd=project)
    two = run("check", "--format", "json", "--jobs", "2", ".", cwd=project)
    assert json.loads(one.stdout) == json.loads(two.stdout)
    assert len(json.loads(two.stdout)) == 14


def test_result_cache_is_used_and_invalidated(project):
    cache_dir = project / "cc"
    args = ("check", "--format", "json", "--cache-dir", str(cache_dir), "gru_train.py", "regression.py", "clean.py")
    first = run(*args, cwd=project)
    entries = [p for p in cache_dir.rglob("*") if p.is_file() and p.parent != cache_dir]
    assert len(entries) == 3  # one per file, findings or not
    assert (cache_dir / ".gitignore").read_text(encoding="utf-8").strip().endswith("*")
    # a hit serves the stored result (prove it by planting a different one) ...
    from gradguard import cache

    for e in entries:
        k = e.parent.name + e.name
        items, syntax, deep = cache.load(str(cache_dir), k)
        for it in items:
            it["message"] = "from the cache"
        cache.store(str(cache_dir), k, (items, syntax, deep))
    cached = json.loads(run(*args, cwd=project).stdout)
    assert {f["message"] for f in cached} == {"from the cache"}
    assert [(f["code"], f["line"]) for f in cached] == [(f["code"], f["line"]) for f in json.loads(first.stdout)]
    # ... --no-cache ignores it, and so does any change of the file, the config or the language
    fresh = json.loads(run(*args, "--no-cache", cwd=project).stdout)
    assert fresh == json.loads(first.stdout)
    assert "from the cache" not in run(*args, "--lang", "zh", cwd=project).stdout
    assert "from the cache" not in run(*args, "--ignore", "GG102", cwd=project).stdout
    (project / "gru_train.py").write_text("# 注释\n" + GRU_SEED, encoding="utf-8")
    moved = json.loads(run(*args, cwd=project).stdout)
    gru = [f for f in moved if f["path"] == "gru_train.py"]
    assert [(f["line"], f["message"] != "from the cache") for f in gru] == [(13, True)]
    # a corrupt entry is a miss, not an error
    for e in cache_dir.rglob("*"):
        if e.is_file() and e.parent != cache_dir:
            e.write_bytes(b"\x00garbage")
    again = run(*args, cwd=project)
    assert again.returncode == 1
    assert json.loads(again.stdout) == json.loads(run(*args, "--no-cache", cwd=project).stdout)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["a.py", "b"],
        ["--format", "json", "--select", "GG101", "--select=GG102", "-j", "2", "x"],
        ["--fix", "--no-cache", "--cache-dir", "/tmp/c", "--lang=zh", "--ignore", "GG1", "--statistics"],
        ["--no-resolve", "--config", "p.toml", "--", "--weird-name.py"],
        ["--diff", "--jobs=3", "--extend-select", "GG101", "."],
    ],
)
def test_fast_argument_parser_agrees_with_argparse(argv):
    from gradguard.cli import _fast_check_args, build_parser

    fast = _fast_check_args(argv)
    assert fast is not None
    assert vars(fast) == vars(build_parser().parse_args(["check", *argv]))


@pytest.mark.parametrize("argv", [["--help"], ["--format", "xml"], ["--jobs", "many"], ["--select"], ["--bogus"]])
def test_fast_argument_parser_defers_the_unusual_to_argparse(argv):
    from gradguard.cli import _fast_check_args

    assert _fast_check_args(argv) is None


def test_one_large_file_on_two_cores_reports_what_one_core_does(tmp_path):
    """A file given alone is split across --jobs processes (engine/parallel.py):
    same findings, same order, same fixes written by --fix."""
    from seed_programs import fixture_catalogue

    text = fixture_catalogue()
    assert text.count("\n") > 1000
    big = tmp_path / "大文件.py"
    big.write_text(text, encoding="utf-8")
    one = run("check", "--format", "json", "--no-cache", "--jobs", "1", str(big))
    two = run("check", "--format", "json", "--no-cache", "--jobs", "2", str(big))
    assert one.returncode == two.returncode == 1, two.stderr
    items = json.loads(two.stdout)
    assert len(items) > 50 and json.loads(one.stdout) == items
    assert "internal error" not in two.stderr
    fixed1, fixed2 = tmp_path / "f1.py", tmp_path / "f2.py"
    fixed1.write_text(text, encoding="utf-8")
    fixed2.write_text(text, encoding="utf-8")
    run("check", "--fix", "--jobs", "1", str(fixed1))
    run("check", "--fix", "--jobs", "2", str(fixed2))
    assert fixed1.read_text(encoding="utf-8") == fixed2.read_text(encoding="utf-8") != text


def test_process_ends_without_teardown_but_loses_no_output(tmp_path):
    """`gradguard check` ends with os._exit after flushing (gradguard.cli.run):
    output far larger than a pipe's buffer arrives whole, in both formats, the
    exit status survives. Block-buffered, as a pipe is by default (the lost
    tail of an unflushed buffer is what a hard exit risks)."""
    buffered = {"PYTHONUNBUFFERED": None}
    for i in range(60):
        (tmp_path / f"gru_{i:02d}.py").write_text(GRU_SEED, encoding="utf-8")
        (tmp_path / f"reg_{i:02d}.py").write_text(REGRESSION_SEED, encoding="utf-8")
    r = run("check", "--format", "json", "--no-cache", ".", cwd=tmp_path, env=buffered)
    assert r.returncode == 1, r.stderr
    assert len(r.stdout.encode()) > 128 * 1024  # twice a pipe buffer
    items = json.loads(r.stdout)
    assert len({it["path"] for it in items}) == 120
    text = run("check", "--no-cache", ".", cwd=tmp_path, env=buffered)
    assert text.returncode == 1
    assert text.stdout.rstrip().endswith(f"Checked 120 files: {len(items)} findings ({len(items)} fixable with --fix)")
    clean = run("check", "--no-cache", str(tmp_path / "gru_00.py"), "--ignore", "ALL", env=buffered)
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_output_into_a_closed_pipe_ends_quietly(project):
    """`gradguard check ... | head -1`: the reader goes away; the process ends
    with no traceback (the flush before the hard exit meets a closed pipe)."""
    for i in range(40):
        (project / f"copy_{i}.py").write_text(GRU_SEED, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    p = subprocess.Popen([sys.executable, "-m", "gradguard", "check", "--no-cache", str(project)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env, NO_COLOR="1"))
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    assert "Traceback" not in err, err
    assert p.returncode in (0, 1), (p.returncode, err)


def test_a_module_imported_whole_is_followed_and_its_edits_invalidate_the_cache(tmp_path):
    """`import lm_utils` … `lm_utils.repackage_hidden(h)`: the CLI resolves modules
    imported whole as it does `from m import x`, and the importer's result follows
    edits of the imported module."""
    src = Path(__file__).parent / "fixtures" / "projects" / "word_language_model"
    for f in ("rnn_lm.py", "lm_utils.py", "ok_hidden_detached_by_a_helper_of_another_module.py"):
        (tmp_path / f).write_text((src / f).read_text(encoding="utf-8"), encoding="utf-8")
    main = "ok_hidden_detached_by_a_helper_of_another_module.py"
    args = ("check", "--format", "json", "--cache-dir", str(tmp_path / "cc"), main)
    first = run(*args, cwd=tmp_path)
    assert first.returncode == 0 and json.loads(first.stdout) == [], first.stdout + first.stderr
    # its findings depend on another file: never stored in the result cache
    assert not [p for p in (tmp_path / "cc").rglob("*") if p.is_file() and p.parent != tmp_path / "cc"]
    # without resolution the helper is an unknown call that keeps the graph
    unresolved = json.loads(run(*args, "--no-resolve", "--no-cache", cwd=tmp_path).stdout)
    assert [f["code"] for f in unresolved] == ["GG101"]
    # the helper stops detaching: the importer is reported again, cache or not
    utils = tmp_path / "lm_utils.py"
    utils.write_text(utils.read_text(encoding="utf-8").replace("return h.detach()", "return h"), encoding="utf-8")
    again = json.loads(run(*args, cwd=tmp_path).stdout)
    assert [(f["code"], f["path"]) for f in again] == [("GG101", main)]


def _ipython_leading_indent(cell: str) -> str:
    """What IPython runs for a cell (its leading_empty_lines and leading_indent
    input transforms): leading blank lines dropped, then the first line's
    indentation stripped from every line that starts with it."""
    lines = cell.splitlines(keepends=True)
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ""
    space = lines[0][: len(lines[0]) - len(lines[0].lstrip(" \t"))]
    return "".join(ln[len(space):] if space and ln.startswith(space) else ln for ln in lines)


def test_a_cell_that_starts_indented_is_read_as_ipython_runs_it(project):
    """A stray space before a cell's first statement: IPython strips it and runs
    the cell; Python alone would say "unexpected indent". The cell is analysed
    (no syntax error), its finding lands on its own line and column, and the fix,
    indented like the cell, leaves a cell IPython still runs."""
    head = GRU_SEED.splitlines(keepends=True)[:8]
    loop = [" " + ln if ln.strip() else ln for ln in GRU_SEED.splitlines(keepends=True)[8:]]  # 每行多一个空格
    cells = [
        {"cell_type": "code", "source": head, "metadata": {}, "outputs": [], "execution_count": None},
        {"cell_type": "code", "source": ["\n", " # 数据\n"] + [" trigram = [(i, i + 1)\n", "            for i in range(3)]\n"],
         "metadata": {}, "outputs": [], "execution_count": None},
        {"cell_type": "code", "source": loop, "metadata": {}, "outputs": [], "execution_count": None},
    ]
    nb = project / "nb.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    r = run("check", "--format", "json", "nb.ipynb", cwd=project)
    assert "syntax error" not in r.stderr, r.stderr
    items = json.loads(r.stdout)
    assert [(f["code"], f["cell"], f["line"], f["column"]) for f in items] == [("GG101", 3, 4, 6)]
    assert loop[3][5:].startswith("out, hidden = gru(x, hidden)")
    assert run("check", "--fix", "nb.ipynb", cwd=project).returncode == 0
    fixed = json.loads(nb.read_text(encoding="utf-8"))
    cell = "".join(fixed["cells"][2]["source"])
    assert "\n     hidden = hidden.detach()\n" in cell  # the cell's own indentation, plus the loop's
    for c in fixed["cells"]:
        compile(_ipython_leading_indent("".join(c["source"])), "cell", "exec")
    assert json.loads(run("check", "--format", "json", "nb.ipynb", cwd=project).stdout) == []


def test_a_notebook_syntax_error_is_located_in_its_cell(project):
    cells = [["import torch\n", "x = 1\n"], ["y = (2\n"], ["z = 3\n"]]
    nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [], "execution_count": None}
                    for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (project / "bad.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    r = run("check", "bad.ipynb", cwd=project)
    assert "bad.ipynb: error: syntax error in cell 2 at 1:5: '(' was never closed" in r.stderr, r.stderr


def test_language_flag_then_environment_then_project_config(project):
    """`[tool.gradguard] language` is honoured; GRADGUARD_LANG beats it, --lang beats both."""
    (project / "pyproject.toml").write_text('[tool.gradguard]\nlanguage = "zh-CN"\n', encoding="utf-8")

    def message(*args, env):
        r = run("check", "--format", "json", "--no-cache", *args, cwd=project, env=env)
        assert r.returncode == 1, r.stderr
        return json.loads(r.stdout)[0]["message"]

    zh = message("gru_train.py", env={"GRADGUARD_LANG": None})
    assert "计算图" in zh
    assert message(".", env={"GRADGUARD_LANG": None}) == zh  # a directory: its own pyproject.toml
    en = message("gru_train.py", env={"GRADGUARD_LANG": "en"})
    assert "graph" in en and "计算图" not in en
    assert message("--lang", "en", "gru_train.py", env={"GRADGUARD_LANG": "zh"}) == en
    assert message("--lang", "zh", "gru_train.py", env={"GRADGUARD_LANG": "en"}) == zh
    # `gradguard rule` reads the config of the directory it runs in
    r = run("rule", "GG101", cwd=project, env={"GRADGUARD_LANG": None})
    assert r.returncode == 0 and "计算图" in r.stdout
    # without the setting, English
    (project / "pyproject.toml").write_text("[tool.gradguard]\n", encoding="utf-8")
    assert message("gru_train.py", env={"GRADGUARD_LANG": None}) == en


def test_a_broken_config_language_is_a_usage_error(project):
    (project / "pyproject.toml").write_text('[tool.gradguard]\nlanguage = "klingon"\n', encoding="utf-8")
    r = run("check", "gru_train.py", cwd=project, env={"GRADGUARD_LANG": None})
    assert r.returncode == 2 and "language" in r.stderr


def test_ipython_assignments_and_indented_escapes_are_not_syntax_errors(project):
    """`files = !ls`, `t = %time ...`, an indented `!pip` and `torch.*Tensor?`
    are valid IPython (read as IPython reads them): the notebook is analysed, and
    the finding of the loop cell keeps its cell, line and column."""
    cells = [
        GRU_SEED.splitlines(keepends=True)[:8] + ["文件 = !ls\n", "torch.*Tensor?\n"],
        ["if True:\n", "    !pip install torch\n", "    版本 = %env HOME\n", "t = %time 1 + 1\n"]
        + GRU_SEED.splitlines(keepends=True)[8:],
    ]
    nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [], "execution_count": None}
                    for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (project / "nb.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    r = run("check", "--format", "json", "nb.ipynb", cwd=project)
    assert "syntax error" not in r.stderr, r.stderr
    items = json.loads(r.stdout)
    assert [(f["code"], f["cell"], f["line"], f["column"]) for f in items] == [("GG101", 2, 8, 5)]
    assert cells[1][7].startswith("    out, hidden = gru(x, hidden)")


def test_a_one_shot_check_imports_no_module_it_does_not_need(project):
    """The CLI's start-up path (a one-shot check pays every import): a check that
    runs every rule, with findings and fixes, imports neither ``typing`` nor the
    modules the analysis once pulled in for one name each (``threading`` for a
    thread-local memo, ``weakref`` for ``weakref.ref``: both are C modules'
    names), nor ``dataclasses``/``inspect``."""
    code = ("import sys, io, contextlib\nfrom gradguard import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    code = cli.main(['check', '--no-cache', '--jobs', '1', '--format', 'json', 'gru_train.py'])\n"
            "print(code, sorted(m for m in ('typing', 'threading', 'weakref', 'dataclasses', 'inspect')"
            " if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    assert r.stdout.split(None, 1) == ["1", "[]\n"], r.stdout + r.stderr
    # nor when the file asks for facts from the user's other modules (cross-file
    # resolution: an import from a local module, a method back-propagating what it is handed)
    (project / "helpers.py").write_text("def repackage(h):\n    return h.detach()\n", encoding="utf-8")
    (project / "trainer.py").write_text(
        "from helpers import repackage\n\n\nclass Trainer:\n    def update(self, loss):\n"
        "        loss.backward()\n        return repackage(loss)\n", encoding="utf-8")
    code = code.replace("'gru_train.py'", "'trainer.py'").replace(
        "print(code, ", "print(code, 'gradguard.analysis.resolve' in sys.modules, ")
    r = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    assert r.stdout.split(None, 2) == ["0", "True", "[]\n"], r.stdout + r.stderr
