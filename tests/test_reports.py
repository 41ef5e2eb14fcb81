"""The corpus of programs rebuilt from public bug reports (tests/fixtures/reports).

Each program keeps the flow and names of a posted report (GitHub issues,
forums, blogs), shrunk to tiny random data and labelled by running it under
torch (the runtime half is tests/test_fixtures.py, which runs these with the
rest of the catalogue and checks that today's findings are exactly
``expect:``). Here: the corpus's own bookkeeping.

- Every report names its source and the shape of its bug.
- A report that crashes is either caught today (``expect:``) or carries the
  finding it should get as ``expect-later:``; a report that trains expects
  nothing. So every gap is written down, and none is silently forgotten.
- (``expect-later:`` findings must not be reported yet: the day the analysis
  finds one, tests/test_fixtures.py fails until the header moves it to ``expect:``.)
- docs/bug-reports.md states the recall this corpus measures; it must agree.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch_harness as th  # noqa: E402


REPO = Path(__file__).resolve().parent.parent
REPORTS = th.FIXTURES / th.REPORTS
PATHS = [p for p in th.fixture_paths() if p.parent == REPORTS]
SPECS = {p.name: th.parse_header(p.read_text(encoding="utf-8"), str(p)) for p in PATHS}
NAMES = sorted(SPECS)
SHAPES = {
    "carried", "stale-before-loop", "freed-in-step", "retain-then-step", "gradient-penalty",
    "unrolled", "distributions", "comprehension", "container", "helper-value", "module-state", "inplace-saved",
}


def recall_table() -> dict:
    """{shape: [crashing, caught, training, flagged]} over the corpus, plus 'all'."""
    table: dict = {}
    for name in NAMES:
        spec = SPECS[name]
        found = bool(spec.expect)
        for key in (spec.shape, "all"):
            row = table.setdefault(key, [0, 0, 0, 0])
            if spec.runtime == "crash":
                row[0] += 1
                row[1] += found
            else:
                row[2] += 1
                row[3] += found
    return table


def test_corpus_size():
    kinds = Counter(SPECS[n].runtime for n in NAMES)
    assert len(NAMES) >= 30 and kinds["crash"] >= 15 and kinds["train"] >= 10, kinds


@pytest.mark.parametrize("name", NAMES)
def test_report_header(name):
    spec = SPECS[name]
    assert name.startswith("report_"), name
    assert re.match(r"https?://\S+$", spec.source), f"{name}: 'source:' must be the report's URL"
    assert spec.shape in SHAPES, f"{name}: shape {spec.shape!r} not one of {sorted(SHAPES)}"
    if spec.runtime == "crash":
        assert spec.expect or spec.later, f"{name}: crashes, but neither expect: nor expect-later: says what should catch it"
    else:
        assert not spec.expect, f"{name}: trains, so every finding on it is a false alarm"


def test_bug_reports_doc_states_the_measured_recall():
    row = recall_table()["all"]
    doc = (REPO / "docs" / "bug-reports.md").read_text(encoding="utf-8")
    m = re.search(r"Now: gradguard catches (\d+) of (\d+) crashing reports.*?flags (\d+) of (\d+) that train",
                  doc, re.S)
    assert m, "docs/bug-reports.md: no 'Now: gradguard catches N of M crashing reports ... flags K of L that train'"
    assert [int(g) for g in m.groups()] == [row[1], row[0], row[3], row[2]], (m.group(0), row)


if __name__ == "__main__":  # the table for docs/bug-reports.md
    for shape, (crash, caught, train, flagged) in sorted(recall_table().items()):
        print(f"| {shape} | {caught}/{crash} | {flagged}/{train} |")
