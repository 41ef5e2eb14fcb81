"""[tool.gradguard] parsing, selection and clear errors for broken configs."""

import pytest

from gradguard.engine.config import Config, ConfigError, config_from_mapping, load_config
from gradguard.model.i18n import normalize_language
from gradguard.model.findings import Severity


def test_select_ignore_severity_and_per_file_ignores(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradguard]\nselect = ["GG1"]\nignore = ["GG102"]\n'
        '[tool.gradguard.severity]\nGG101 = "warning"\n'
        '[tool.gradguard.per-file-ignores]\n"tests/**" = ["GG101"]\n',
        encoding="utf-8",
    )
    (tmp_path / "tests").mkdir()
    cfg = load_config(str(tmp_path / "tests" / "x.py"))
    assert cfg.is_enabled("GG101", str(tmp_path / "train.py"))
    assert not cfg.is_enabled("GG102", str(tmp_path / "train.py"))
    assert not cfg.is_enabled("GG101", str(tmp_path / "tests" / "x.py"))
    assert cfg.severity_for("GG101", Severity.ERROR) is Severity.WARNING
    assert cfg.severity_for("GG102", Severity.ERROR) is Severity.ERROR


@pytest.mark.parametrize(
    "table, fragment",
    [
        ({"select": "GG101,E501"}, "'E501'"),
        ({"severity": {"GG101": "fatal"}}, "unknown severity"),
        ({"selekt": ["GG101"]}, "unknown key"),
        ({"per-file-ignores": ["x"]}, "per-file-ignores"),
        ({"language": "fr"}, "language"),
    ],
)
def test_broken_config_is_a_clear_error(table, fragment):
    with pytest.raises(ConfigError) as e:
        config_from_mapping(table, where="pyproject.toml")
    assert fragment in str(e.value)
    assert "pyproject.toml" in str(e.value)


def test_invalid_toml_names_the_file(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text("[tool.gradguard\nselect = [", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(str(tmp_path))
    assert str(p) in str(e.value) and "invalid TOML" in str(e.value)


def test_no_config_means_every_rule():
    cfg = Config()
    assert cfg.is_enabled("GG101") and cfg.is_enabled("GG102")


def test_exclude_patterns_are_gitignore_flavoured(tmp_path):
    cfg = config_from_mapping({"exclude": ["build/", "*_pb2.py", "/scripts/old"]}, root=str(tmp_path))
    assert cfg.is_excluded(str(tmp_path / "build" / "a.py"))
    assert cfg.is_excluded(str(tmp_path / "pkg" / "x_pb2.py"))
    assert cfg.is_excluded(str(tmp_path / "scripts" / "old"))
    assert not cfg.is_excluded(str(tmp_path / "train.py"))


@pytest.mark.parametrize("rel, pattern, expected", [
    ("test/unit/a.py", "/test*.py", False), ("test_a.py", "/test*.py", True), ("pkg/test_a.py", "test*.py", True),
    ("tests/b.py", "tests/*.py", True), ("tests/a/b.py", "tests/*.py", False), ("tests/a/b.py", "tests/*", True),
    ("a/b/c/d.py", "a/**/d.py", True), ("a/d.py", "a/**/d.py", True), ("x/a/d.py", "**/a/d.py", True),
    ("build", "build/", False), ("build/", "build/", True), ("src/build/a.py", "build/", True),
    ("a/scripts/old", "/scripts/old", False), ("gen/x1.py", "gen/x[0-9].py", True), ("gen/xa.py", "gen/x[!0-9].py", True),
])
def test_glob_star_never_crosses_a_slash(rel, pattern, expected):
    from gradguard.engine.config import _path_matches

    assert _path_matches(rel, pattern) is expected


@pytest.mark.parametrize("value, expected", [("zh-CN", "zh"), ("zh_cn", "zh"), ("zh-Hans", "zh"), ("en-US", "en"), ("auto", "en"), ("fr", None)])
def test_language_normalisation(value, expected):
    assert normalize_language(value) == expected


def test_config_is_immutable_comparable_picklable_and_repr_is_stable():
    import pickle

    a = config_from_mapping({"select": ["GG1"], "severity": {"GG102": "warning", "GG101": "hint"}}, where="x")
    b = config_from_mapping({"select": ["GG1"], "severity": {"GG101": "hint", "GG102": "warning"}}, where="x")
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)  # repr is part of the CLI cache key
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.select = ()
    c = a.merged(ignore=("GG102",), severity={"GG101": "error"})
    assert c.ignore == ("GG102",) and c.severity["GG102"] is Severity.WARNING and c.severity["GG101"] == "error"
    assert a.ignore == () and a != c
    with pytest.raises(TypeError):
        a.merged(selekt=("GG1",))


def test_a_select_that_matches_no_rule_is_an_error_not_an_empty_check(tmp_path):
    # select = ["GG999"] alone would check nothing and pass: a green CI run that checked nothing
    with pytest.raises(ConfigError, match="matches no gradguard rule"):
        config_from_mapping({"select": ["GG999"]})
    with pytest.raises(ConfigError, match="nothing would be checked"):
        config_from_mapping({"select": ["GG9"], "extend-select": ["GG99"]})
    # a code of a newer release beside codes that select something is left alone
    cfg = config_from_mapping({"select": ["GG101", "GG999"]})
    assert cfg.is_enabled("GG101") and not cfg.is_enabled("GG102")
    assert config_from_mapping({"select": ["ALL"]}).is_enabled("GG205")
    assert config_from_mapping({"select": ["GG2"]}).is_enabled("GG201")


def test_the_cli_says_a_select_matching_no_rule_and_checks_nothing_silently_no_more(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "pyproject.toml").write_text('[tool.gradguard]\nselect = ["GG999"]\n', encoding="utf-8")
    prog = tmp_path / "训练.py"
    prog.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n", encoding="utf-8")
    server = str(Path(__file__).resolve().parent.parent / "server")
    env = dict(os.environ, PYTHONPATH=server + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", str(prog)],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert out.returncode != 0
    assert "matches no gradguard rule" in out.stdout + out.stderr
    assert prog.read_text(encoding="utf-8").startswith("import torch")


def test_a_severity_for_a_code_no_rule_has_is_a_warning_naming_it(tmp_path):
    """``GG999 = "info"`` in the severity table (a typo of GG199, or a rule of a
    newer release) changed nothing and said nothing. It is a warning naming the
    code, once per file; the rest of the configuration still applies."""
    import subprocess
    import sys
    import textwrap

    warned: list = []
    cfg = config_from_mapping({"severity": {"GG999": "info", "GG101": "warning", "gg1": "hint"}},
                              where="pyproject.toml", warnings=warned)
    assert cfg.severity_for("GG101", Severity.ERROR) is Severity.WARNING
    assert len(warned) == 2 and "severity.GG999" in warned[0] and "severity.GG1:" in warned[1]
    assert all(w.startswith("pyproject.toml: ") and "no gradguard rule has this code" in w for w in warned)
    clean: list = []
    config_from_mapping({"severity": {"GG101": "warning"}}, warnings=clean)
    assert clean == []

    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradguard]\nignore = ["GG102"]\n[tool.gradguard.severity]\nGG999 = "info"\nGG101 = "warning"\n',
        encoding="utf-8")
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(textwrap.dedent("""\
            import torch
            # 隐状态
            gru = torch.nn.GRU(4, 8)
            opt = torch.optim.SGD(gru.parameters(), lr=0.1)
            hidden = torch.zeros(1, 2, 8)
            for step in range(3):
                out, hidden = gru(torch.randn(5, 2, 4), hidden)
                opt.zero_grad()
                out.sum().backward()
                opt.step()
            """), encoding="utf-8")
    for args in (["."], ["--config", "pyproject.toml", "a.py", "b.py"]):
        r = subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", "--format", "json", *args],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, r.stderr
        assert r.stderr.count("gradguard: warning: ") == 1 and "severity.GG999" in r.stderr, r.stderr
        import json

        found = json.loads(r.stdout)
        assert {f["code"] for f in found} == {"GG101"} and {f["severity"] for f in found} == {"warning"}
