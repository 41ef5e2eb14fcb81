"""The comparison programs of ``bench/quiet.py`` that are not fixtures carry
fixture headers too; gradguard reports exactly what they say (their runtime
labels are checked by ``python tests/torch_harness.py bench/quiet_programs``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch_harness as th  # noqa: E402

from gradguard.engine import check_source  # noqa: E402

PROGRAMS = th.fixture_paths(Path(__file__).resolve().parent.parent / "bench" / "quiet_programs")


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_bench_program_labels(path):
    spec = th.parse_header(path.read_text(encoding="utf-8"), str(path))
    found = {(f.code, f.range.start.line + 1) for f in check_source(path.read_text(encoding="utf-8"), str(path)).findings}
    assert found == set(spec.expect)


@pytest.mark.needs_torch
def test_bench_programs_train():
    for path in PROGRAMS:
        assert th.run_program(str(path)).status == "train", path.name


def test_the_comparison_section_survives_a_rewrite_of_benchmarks_md(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import bench.__main__ as harness
    from bench import quiet

    page = tmp_path / "BENCHMARKS.md"
    page.write_text("# gradguard benchmarks\n\nold\n\n## Experiments\n\nmypyc\n", encoding="utf-8")
    quiet.write_section("## 6. table v1", page)
    quiet.write_section("## 6. table v2", page)
    text = page.read_text(encoding="utf-8")
    assert text.count(quiet.BEGIN) == 1 and "table v2" in text and "table v1" not in text
    assert text.index("## Experiments") < text.index(quiet.BEGIN)
    monkeypatch.setattr(harness, "ROOT", tmp_path)  # python -m bench rewrites the file from its results
    harness._write_report("# gradguard benchmarks\n\nnew\n")
    rewritten = page.read_text(encoding="utf-8")
    assert "new" in rewritten and "old" not in rewritten and "table v2" in rewritten and "mypyc" in rewritten
