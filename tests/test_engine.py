"""Engine-level guarantees that do not depend on a particular rule."""

import pytest

from gradguard.engine.document import Document, check_source
from gradguard.rules import all_rules

# it back-propagates: a file that cannot is only parsed (engine.may_backprop)
SRC = "import torch\n\ndef f():\n    return 1\n\nx = f()\nx.backward()\n"


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


def test_fixes_insert_lines_with_the_files_line_ending():
    """A CRLF file (Windows) gets CRLF lines from a fix, never a lone LF."""
    import glob
    from pathlib import Path

    from gradguard.engine import Document
    from gradguard.engine.parallel import check_source_parallel
    from gradguard.model.text import apply_text_edits

    checked = 0
    for p in sorted(glob.glob(str(Path(__file__).parent / "fixtures" / "gg10*_*.py"))):
        lf = Path(p).read_text(encoding="utf-8")
        crlf = lf.replace("\n", "\r\n")
        a, b = check_source(lf, p), check_source(crlf, p)
        assert [(f.code, f.range) for f in a.findings] == [(f.code, f.range) for f in b.findings]
        for fa, fb in zip(a.findings, b.findings):
            if fa.preferred_fix is None:
                continue
            fixed_lf = apply_text_edits(lf, fa.preferred_fix.edits)
            fixed_crlf = apply_text_edits(crlf, fb.preferred_fix.edits)
            assert "\n" not in fixed_crlf.replace("\r\n", "")
            assert fixed_crlf == fixed_lf.replace("\n", "\r\n")
            checked += 1
            if any("\n" in e.new_text for e in fa.preferred_fix.edits):
                inserting = (lf, crlf)  # a fixture whose fix inserts a line
    assert checked > 40
    lf, crlf = inserting
    # an editor that switches the file to LF gets LF fixes again, with the same lines
    doc = Document(crlf, "x.py")
    assert any("\r\n" in e.new_text for f in doc.result().findings for fx in f.fixes for e in fx.edits)
    assert not any("\r" in e.new_text for f in doc.update(lf).findings for fx in f.fixes for e in fx.edits)
    # and the parallel path agrees
    assert check_source_parallel(crlf, "x.py", jobs=2, min_lines=0).findings == check_source(crlf, "x.py").findings
