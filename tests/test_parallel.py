"""A large file split across processes (engine/parallel.py) gives exactly the
serial engine's result: same findings, fixes, order, internal errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gradguard.engine import check_source
from gradguard.engine.parallel import check_source_parallel, split_points
import gradguard.engine.parallel as P
from seed_programs import CATALOGUE_PATH, fixture_catalogue, fresh_check

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the parallel path needs fork()")

FIXTURES = Path(__file__).parent / "fixtures"


def _same(a, b) -> None:
    assert a.findings == b.findings
    assert [f.data for f in a.findings] == [f.data for f in b.findings]
    assert a.syntax_error == b.syntax_error
    assert a.internal_errors == b.internal_errors


@pytest.mark.parametrize("jobs", [2, 3, 5])
def test_catalogue_matches_serial(jobs):
    text = fixture_catalogue()
    serial = fresh_check(text, CATALOGUE_PATH)  # (the serial engine's answer, computed once per session)
    assert len(serial.findings) > 50  # the catalogue is full of real bugs
    par = check_source_parallel(text, CATALOGUE_PATH, jobs=jobs, min_lines=0)
    assert P.last_mode == "parallel"
    _same(serial, par)


def test_each_fixture_matches_serial_even_when_small():
    checked = 0
    for p in sorted(FIXTURES.glob("*.py")):
        text = p.read_text(encoding="utf-8")
        par = check_source_parallel(text, p.name, jobs=2, min_lines=0)
        _same(fresh_check(text, p.name), par)  # (the serial answer: made once per session)
        checked += P.last_mode == "parallel"
    assert checked > 20  # most fixtures have a def to cut at


def test_syntax_error_falls_back_to_the_serial_engine():
    text = fixture_catalogue()
    lines = text.split("\n")
    broken = "\n".join(lines[: len(lines) * 3 // 4] + ["def oops(:"] + lines[len(lines) * 3 // 4 :])
    par = check_source_parallel(broken, "b.py", jobs=2, min_lines=0)
    assert P.last_mode == "serial"
    serial = check_source(broken, "b.py")
    _same(serial, par)
    assert par.syntax_error is not None and par.findings  # the rest is still analysed


def test_small_files_and_one_job_stay_serial(monkeypatch):
    text = fixture_catalogue()
    # the serial engine it hands the text to answers from the session's one run (the
    # mode is what this test reads; test_catalogue_matches_serial holds the answer)
    seen = []

    def serial(source, path=None, config=None, external_facts=None):
        seen.append(path)
        return fresh_check(source, path)

    monkeypatch.setattr(P.E, "check_source", serial)
    got = check_source_parallel(text, CATALOGUE_PATH, jobs=1, min_lines=0)
    assert P.last_mode == "serial" and seen == [CATALOGUE_PATH]
    assert got is fresh_check(text, CATALOGUE_PATH)
    monkeypatch.undo()
    check_source_parallel("x = 1\n", "c.py", jobs=2)
    assert P.last_mode == "serial"


def test_split_points_cut_before_decorators_and_never_inside_statements():
    lines = [
        "import torch",  # 0
        "x = (1,",  # 1
        "def not_a_statement_start)",  # 2 (inside brackets: the region would not parse)
        "",  # 3
        "@decorator",  # 4
        "def f():",  # 5 (its decorator is the cut, not this line)
        "    return 1",  # 6
        "class 模型:",  # 7
        "    pass",  # 8
    ]
    pts = split_points(lines, 3)
    assert pts[0] == 0 and pts[-1] == len(lines)
    assert 5 not in pts
    assert all(lines[i].startswith(("def ", "class ", "@")) for i in pts[1:-1])
    # a cut that lands inside a statement is caught when the region is parsed
    assert P._region_chunks(lines, 2, 4) is None
    assert P._region_chunks(lines, 4, 9) is not None


def test_crlf_line_endings_match_serial():
    text = fixture_catalogue().replace("\n", "\r\n")
    serial = check_source(text, "crlf.py")
    par = check_source_parallel(text, "crlf.py", jobs=2, min_lines=0)
    assert P.last_mode == "parallel"
    _same(serial, par)
    assert serial.findings
