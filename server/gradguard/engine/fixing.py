"""The one fix loop: apply the preferred fixes, analyse again, repeat.

``gradguard check --fix`` and ``--diff``, the editor's Fix All and the fixture
catalogue's proof that a fixed program trains all call :func:`fix_until_stable`,
so what the tests prove is what users get (ruff's server calls the function
behind ``ruff check --fix`` for the same reason).

The policy, in one place:

* only a fix marked ``preferred`` is applied automatically; a finding whose
  fixes are all alternatives keeps them for the user to choose (a quick fix);
* within one round the chosen edits must not conflict: a fix that overlaps one
  already chosen (shares text with it, inserts inside it, or inserts at the same
  point, where the order would be a guess) waits for the next round, when it is
  recomputed against the new text; an edit identical to one already chosen (two
  findings asking for the same detach) is applied once, and so is a definition
  two fixes insert with the same text at different points (a helper the file
  needs once: GG101's state detacher), at the earlier point, before every use;
* rounds continue while some preferred fix is left and the text changes, at
  most :data:`MAX_ROUNDS`: a fix may unveil or settle another finding;
* a fix must remove the finding it was for: when the analysis of a round's
  text still has that finding (the same rule, where the finding's place moved
  to with the round's edits) asking for the same fix (the same edit texts), the
  fix did not converge (a rule bug: applying it again would only duplicate its
  lines in the user's file), so the round is done again from the same text
  without it, and it is never applied;
* if the edits cannot be applied (a rule bug), the loop stops with the last
  good state: nothing half-applied is ever returned.
"""

from __future__ import annotations

from gradguard.model.findings import Position
from gradguard.model.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Any, Callable, FrozenSet, Iterable, List, Optional, Tuple

    from gradguard.engine.document import CheckResult
    from gradguard.model.findings import Finding, Fix, TextEdit

MAX_ROUNDS = 8


def _conflict(x: Tuple[Position, Position], y: Tuple[Position, Position]) -> bool:
    (a, b), (c, d) = x, y
    if a < d and c < b:  # the spans share text (or one inserts strictly inside the other)
        return True
    if a == b and c == d and a == c:  # two insertions at one point: order unknown
        return True
    return False


def preferred_edits(findings: Iterable[Finding]) -> List[TextEdit]:
    """The edits of every finding's preferred fix that can be applied together
    (see the module docstring), in finding order."""
    return _choose(findings, frozenset())[0]


def _preferred(f: Finding) -> Optional[Fix]:
    fix = next((x for x in f.fixes if x.preferred), None)
    return fix if fix is not None and fix.edits else None


def _signature(f: Finding, fix: Fix) -> Tuple[str, Tuple[str, ...]]:
    """What a finding's fix is, whatever the lines it moved to: its rule and the
    texts it writes (a fix that did not remove its finding is asked for again
    with the same texts, a line or two further down)."""
    return f.code, tuple(e.new_text for e in fix.edits)


def _moved(p: Position, edits: List[TextEdit]) -> Optional[Position]:
    """Where the text at ``p`` is once ``edits`` (not overlapping) are applied;
    None when an edit replaces it (the finding's text itself changed)."""
    line, col = p.line, p.character
    for e in sorted(edits, key=lambda e: (e.range.start, e.range.end), reverse=True):
        s, t = e.range.start, e.range.end
        if s > p or (s == p and t > p):
            continue  # after it, or replacing text that starts there
        if t > p:
            return None  # inside a replaced span
        parts = e.new_text.split("\n")
        if t.line == line:
            col = col - t.character + (s.character if len(parts) == 1 else 0) + len(parts[-1])
        line += len(parts) - 1 - (t.line - s.line)
    return Position(line, col)


def _stuck(applied: List[Tuple[Finding, Tuple[str, Tuple[str, ...]]]], edits: List[TextEdit],
           after: Iterable[Finding]) -> FrozenSet[Tuple[str, Tuple[str, ...]]]:
    """The fixes of ``applied`` that ``after`` (the analysis of the round's text)
    asks for again: the same rule, the same texts at the places the round's
    ``edits`` moved the applied ones to (a line inserted and asked for again
    right below itself, or again at the point where it was inserted)."""
    asked = set()
    for f in after:
        fix = _preferred(f)
        if fix is not None:
            asked.add((f.code, tuple((e.range.start, e.new_text) for e in fix.edits)))
    out = set()
    for f, sig in applied:
        fix = _preferred(f)
        assert fix is not None
        below = tuple((_moved(e.range.start, edits), e.new_text) for e in fix.edits)
        # the same place seen from the other side: where the inserted text starts (the
        # finding asks for the same lines again above the copy it already wrote)
        above = tuple((_moved(e.range.start, [x for x in edits if x is not e]), e.new_text)
                      for e in fix.edits)
        if (f.code, below) in asked or (f.code, above) in asked:
            out.add(sig)
    return frozenset(out)


def _choose(findings: Iterable[Finding], blocked: FrozenSet[Tuple[str, Tuple[str, ...]]]
            ) -> Tuple[List[TextEdit], List[Tuple[Finding, Tuple[str, Tuple[str, ...]]]]]:
    """:func:`preferred_edits`, leaving out the fixes in ``blocked``; with the
    findings whose fix was chosen, and its signature."""
    chosen: List[TextEdit] = []
    spans: List[Tuple[Position, Position]] = []
    applied: List[Tuple[Finding, Tuple[str, Tuple[str, ...]]]] = []
    for f in findings:
        fix = _preferred(f)
        if fix is None or _signature(f, fix) in blocked:
            continue
        fresh = [e for e in fix.edits if e not in chosen]
        moved: List[Tuple[int, TextEdit]] = []  # (index in chosen, the earlier copy of a definition)
        for e in list(fresh):
            i = _same_definition(e, chosen)
            if i is not None:
                fresh.remove(e)
                if e.range.start < chosen[i].range.start:
                    moved.append((i, e))
        others = [s for j, s in enumerate(spans) if j not in {i for i, _ in moved}]
        if any(_conflict((e.range.start, e.range.end), s) for e in fresh + [m for _, m in moved] for s in others):
            continue
        for i, e in moved:
            chosen[i] = e
            spans[i] = (e.range.start, e.range.end)
        chosen.extend(fresh)
        spans.extend((e.range.start, e.range.end) for e in fresh)
        applied.append((f, _signature(f, fix)))
    return chosen, applied


def _same_definition(e: TextEdit, chosen: List[TextEdit]) -> Optional[int]:
    """The index of a chosen insertion defining the same thing with the same
    text as the insertion ``e`` (a ``def`` or ``class``), if any."""
    if e.range.start != e.range.end or not e.new_text.lstrip().startswith(("def ", "class ")):
        return None
    for i, c in enumerate(chosen):
        if c.range.start == c.range.end and c.new_text == e.new_text:
            return i
    return None


@record
class FixRun:
    state: Any  # the fixed text (or notebook bytes)
    result: CheckResult  # the analysis of ``state``
    rounds: int  # rounds that changed the state


def fix_until_stable(state: Any, result: CheckResult, apply: Callable[[Any, List[TextEdit]], Any],
                     reanalyse: Callable[[Any], CheckResult], max_rounds: int = MAX_ROUNDS) -> FixRun:
    """Fix ``state`` (analysed as ``result``) until no preferred fix is left.

    ``apply(state, edits)`` returns the new state (raising ValueError if the
    edits cannot be applied); ``reanalyse(state)`` its analysis. The state is a
    text for a ``.py`` file, the notebook's bytes for a notebook (its edits go
    into the cells they fall in)."""
    rounds = 0
    blocked: FrozenSet[Tuple[str, Tuple[str, ...]]] = frozenset()
    attempts = 0
    while rounds < max_rounds and attempts < 2 * max_rounds:
        attempts += 1
        edits, applied = _choose(result.findings, blocked)
        if not edits:
            break
        try:
            new = apply(state, edits)
        except ValueError:
            break
        if new == state:
            break
        new_result = reanalyse(new)
        stuck = _stuck(applied, edits, new_result.findings)
        if stuck:
            # those fixes left their findings in place: this round again, without them
            blocked |= stuck
            continue
        state, result = new, new_result
        rounds += 1
    return FixRun(state, result, rounds)
