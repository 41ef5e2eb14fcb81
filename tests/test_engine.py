"""Engine-level guarantees that do not depend on a particular rule."""

import pytest

from gradguard.core import engine
from gradguard.core.engine import Document, check_source
from gradguard.rules import all_rules

SRC = "import torch\n\ndef f():\n    return 1\n\nx = f()\n"


def _boom(self, unit, ctx):
    raise ValueError("rule bug")


def test_a_crashing_rule_costs_its_findings_not_the_caller(monkeypatch):
    rule = all_rules()[0]
    monkeypatch.setattr(type(rule), "check", _boom)
    monkeypatch.delenv("GRADGUARD_STRICT", raising=False)
    doc = Document(SRC)
    res = doc.result()
    assert res.findings == ()
    assert any(code == rule.code and "rule bug" in err for code, _, err in res.internal_errors)
    # errors belong to one analysis run and do not pile up over edits: after an edit
    # of module-level code only the module unit is analysed again (f's chunk is reused)
    assert len(res.internal_errors) == 2
    assert [unit for _, unit, _ in doc.update(SRC + "\nz = 2\n").internal_errors] == ["<module>"]
    monkeypatch.setenv("GRADGUARD_STRICT", "1")
    with pytest.raises(ValueError):
        check_source(SRC)


def test_syntax_error_keeps_the_rest_and_reports_in_range():
    res = check_source("x = 1\ndef f(:\n    pass\n\ny = (\n")
    assert res.syntax_error is not None
    assert 0 <= res.syntax_error.line <= 4


def test_nul_bytes_are_a_syntax_problem_not_a_crash():
    res = check_source("x = 1\x00\n")
    assert res.syntax_error is not None
