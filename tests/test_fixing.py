"""The one fix loop (engine/fixing.py): its policy, and that every front end uses it."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from gradguard.engine import check_source
from gradguard.engine.document import CheckResult
from gradguard.engine.fixing import MAX_ROUNDS, fix_until_stable, preferred_edits
from gradguard.model.findings import Finding, Fix, Range, Severity, TextEdit
from gradguard.model.text import apply_text_edits

FIXTURES = Path(__file__).parent / "fixtures"


def _finding(line: int, *fixes: Fix) -> Finding:
    return Finding("GG999", Range.of(line, 0, line, 1), {"en": "x"}, Severity.ERROR, (), tuple(fixes))


def _fix(*edits: TextEdit, preferred: bool = True) -> Fix:
    return Fix({"en": "fix"}, tuple(edits), preferred)


def _insert(line: int, text: str) -> TextEdit:
    return TextEdit(Range.of(line, 0, line, 0), text)


def _replace(line: int, a: int, b: int, text: str) -> TextEdit:
    return TextEdit(Range.of(line, a, line, b), text)


def _markers(text: str) -> CheckResult:
    """A stand-in analysis: every `BUG` is a finding whose preferred fix makes it
    `ok`, and every `bug` one with only an alternative fix."""
    out = []
    for i, line in enumerate(text.split("\n")):
        col = line.find("BUG")
        if col >= 0:
            out.append(_finding(i, _fix(_replace(i, col, col + 3, "ok"))))
        col = line.find("bug")
        if col >= 0:
            out.append(_finding(i, _fix(_replace(i, col, col + 3, "ok"), preferred=False)))
    return CheckResult(tuple(out))


def test_only_preferred_fixes_apply():
    text = "a = BUG\nb = bug\n"
    run = fix_until_stable(text, _markers(text), apply_text_edits, _markers)
    assert run.state == "a = ok\nb = bug\n"
    assert run.rounds == 1
    assert [f.range.start.line for f in run.result.findings] == [1]  # the alternative is left to the user


def test_identical_edits_of_two_findings_apply_once():
    detach = _insert(1, "h = h.detach()\n")
    findings = [_finding(0, _fix(detach)), _finding(2, _fix(detach))]
    assert preferred_edits(findings) == [detach]
    assert apply_text_edits("a\nb\n", preferred_edits(findings)) == "a\nh = h.detach()\nb\n"


def test_two_insertions_at_one_point_wait_a_round():
    """Which goes first would be a guess: the second is recomputed on the new text."""
    first, second = _insert(1, "x = 1\n"), _insert(1, "y = 2\n")
    findings = [_finding(0, _fix(first)), _finding(0, _fix(second))]
    assert preferred_edits(findings) == [first]


def test_overlapping_fixes_wait_a_round_and_then_apply():
    text = "BUG BUG\n"
    wide = _finding(0, _fix(_replace(0, 0, 7, "fine")))
    inner = _finding(0, _fix(_replace(0, 4, 7, "ok")))
    inside = _finding(0, _fix(TextEdit(Range.of(0, 5, 0, 5), "!")))
    assert preferred_edits([wide, inner]) == list(wide.fixes[0].edits)
    assert preferred_edits([wide, inside]) == list(wide.fixes[0].edits)  # an insertion inside a replaced span
    # a finding the first round's fix unveils is fixed in the next round
    run = fix_until_stable(text, _markers(text), apply_text_edits, _markers)
    assert run.state == "ok ok\n" and run.rounds == 2 and not run.result.findings


def test_rounds_are_bounded_and_a_loop_that_changes_nothing_stops():
    def grow(text: str) -> CheckResult:  # each fix removes its finding and unveils a new one
        return CheckResult((_finding(0, _fix(_insert(0, f"#{text.count(chr(10))}\n"))),))

    run = fix_until_stable("x\n", grow("x\n"), apply_text_edits, grow)
    assert run.rounds == MAX_ROUNDS
    assert run.state == "".join(f"#{n}\n" for n in range(MAX_ROUNDS, 0, -1)) + "x\n"
    same = CheckResult((_finding(0, _fix(_replace(0, 0, 1, "x"))),))
    assert fix_until_stable("x\n", same, apply_text_edits, lambda text: same).rounds == 0


def test_a_fix_that_does_not_remove_its_finding_is_dropped_not_repeated():
    """A rule bug: the fix is asked for again after it was applied (it inserts a
    line that settles nothing). The loop must not write it again and again (the
    user's file would get the same line eight times), nor keep it at all: the
    finding is left for the user, while a fix that works in the same round stays."""
    def analyse(text: str) -> CheckResult:
        lines = text.split("\n")
        out = []
        for i, line in enumerate(lines):
            if line.startswith("acc +="):  # asks for a detach above it, and is not settled by it
                out.append(_finding(i, _fix(_insert(i, "acc = acc.detach()\n"))))
            col = line.find("BUG")
            if col >= 0:
                out.append(_finding(i, _fix(_replace(i, col, col + 3, "ok"))))
        return CheckResult(tuple(out))

    text = "acc = 0\nfor x in xs:\nacc += x\nb = BUG\n"
    run = fix_until_stable(text, analyse(text), apply_text_edits, analyse)
    assert run.state == "acc = 0\nfor x in xs:\nacc += x\nb = ok\n"
    assert run.rounds == 1
    assert [f.range.start.line for f in run.result.findings] == [2]
    # two findings asking for one identical edit that settles both: applied once, kept
    both = CheckResult((_finding(0, _fix(_insert(1, "h = h.detach()\n"))),
                        _finding(2, _fix(_insert(1, "h = h.detach()\n")))))
    run = fix_until_stable("a\nb\nc\n", both, apply_text_edits, lambda text: CheckResult(()))
    assert run.state == "a\nh = h.detach()\nb\nc\n" and run.rounds == 1


def test_a_fix_asked_for_again_at_its_own_insertion_point_is_dropped():
    """The other side of the same rule bug: the finding stays below the line its
    fix inserted and asks for the same line at the same point, above the copy it
    wrote (GG103's "compute `v` again after the step" where the loss was built
    from the old `v` before the step). One copy is one too many: nothing applies."""
    def analyse(text: str) -> CheckResult:
        lines = text.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("loss.backward()"))
        first = next((i for i, line in enumerate(lines) if line == "v = f(e.detach())"), at)
        return CheckResult((_finding(at, _fix(_insert(first, "v = f(e.detach())\n"))),))

    text = "v = f(e)\nloss = g(v)\nopt.step()\nloss.backward()\n"
    run = fix_until_stable(text, analyse(text), apply_text_edits, analyse)
    assert run.state == text and run.rounds == 0
    assert [f.range.start.line for f in run.result.findings] == [3]


def test_cli_fix_never_writes_the_same_line_twice(tmp_path):
    """GG103's "compute again after the step" on a GAN-style program whose critic loss was
    built from the old value before the step: `--fix` writes the recomputation once (the
    value and the loss made from it) and the fixed program has no finding left."""
    src = (FIXTURES / "gg103_one_linear_after_an_encoder_stepped_between.py").read_text(encoding="utf-8")
    path = tmp_path / "prog.py"
    path.write_text(src, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "gradguard", "check", str(path), "--fix", "--no-cache", "-q",
                    "--exit-zero"], check=True, capture_output=True)
    fixed = path.read_text(encoding="utf-8")
    assert fixed != src
    added = Counter(fixed.split("\n")) - Counter(src.split("\n"))
    assert added and set(added.values()) == {1}  # each line the fix writes, written once
    assert check_source(fixed).findings == ()


def test_edits_that_cannot_be_applied_leave_the_last_good_state():
    def refuse(state, edits):
        raise ValueError("overlapping edits")

    text = "a = BUG\n"
    run = fix_until_stable(text, _markers(text), refuse, _markers)
    assert run.state == text and run.rounds == 0 and len(run.result.findings) == 1


def test_cli_fix_is_the_engine_loop(tmp_path):
    """`gradguard check --fix` writes what fix_until_stable computes, on the
    fixture whose two fixes insert at one point (two rounds)."""
    src = (FIXTURES / "gg101_two_carried_states.py").read_text(encoding="utf-8")
    expected = fix_until_stable(src, check_source(src, "t.py"), apply_text_edits,
                                lambda text: check_source(text, "t.py"))
    assert expected.rounds == 2 and not expected.result.findings
    target = tmp_path / "t.py"
    target.write_text(src, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "gradguard", "check", "--fix", "--no-cache", str(target)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert target.read_text(encoding="utf-8") == expected.state
