"""gradguard's proof on a catalogue of runnable training programs.

Every program in ``tests/fixtures`` declares, in its header, what torch does
with it and which findings gradguard must report (see ``torch_harness.py``).
These tests prove each label both ways:

1. torch agrees with the runtime label (a ``crash`` program raises the graph
   error, a ``train`` program completes) -- run for real, in one subprocess;
2. ``check_source`` reports exactly the expected (code, line) set, with the
   expected severity;
3. applying every finding's preferred fix gives a program that trains, is
   clean on a re-check, and is a fixed point of fixing;
4. the fixed program's first-iteration parameter gradients equal the
   original's (the fix cuts the graph *between* iterations only); for GG101
   also its second loss equals the original's second loss, computed just before the
   crash (the fix keeps the carried state's value).

The runtime tests need torch and are skipped without it; 2 and the fix
round-trip on text run everywhere.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch_harness as th  # noqa: E402

from gradguard.engine import check_source  # noqa: E402
from gradguard.engine.document import may_backprop  # noqa: E402
from gradguard.engine.fixing import MAX_ROUNDS, fix_until_stable  # noqa: E402
from gradguard.model.text import apply_text_edits  # noqa: E402
from gradguard.rules import get_rule  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURE_PATHS = th.fixture_paths()
# keyed by the path under tests/fixtures ("gg101_x.py", "reports/report_y.py")
SPECS = {p.relative_to(th.FIXTURES).as_posix(): th.parse_header(p.read_text(encoding="utf-8"), str(p))
         for p in FIXTURE_PATHS}
NAMES = sorted(SPECS)
WITH_FINDINGS = [n for n in NAMES if SPECS[n].expect]
# reported programs whose preferred fix holds; the others carry `fix-later:` (a known gap)
FIXES_HOLD = [n for n in WITH_FINDINGS if not SPECS[n].fix_later]
FIX_GAPS = [n for n in WITH_FINDINGS if SPECS[n].fix_later]
GG101_NAMES = [n for n in FIXES_HOLD if "GG101" in SPECS[n].codes]

# Programs of several files (projects/<folder>/<program>.py and the modules beside
# them): checked with the facts resolution finds in those modules, as the CLI does.
PROJECT_SPECS = {f"{p.parent.name}/{p.name}": th.parse_header(p.read_text(encoding="utf-8"), str(p))
                 for p in th.project_fixture_paths()}
PROJECTS = sorted(PROJECT_SPECS)

# The README demo programs: (what torch does, the (code, line) findings gradguard reports)
EXAMPLES_DIR = REPO / "examples"
EXAMPLES = {
    "gru_hidden_across_batches.py": ("crash", {("GG101", 38)}),  # pred, hidden = model(x, hidden)
    "regression_requires_grad_labels.py": ("crash", {("GG102", 18)}),  # Y = torch.matmul(X, true_w) + true_b
    "lstm_language_model_correct.py": ("train", set()),
    "gan_discriminator_without_detach.py": ("crash", {("GG103", 38)}),  # lossG.backward()
}


def _source(name: str) -> str:
    return (th.FIXTURES / name).read_text(encoding="utf-8")


def _found(result) -> set:
    return {(f.code, f.range.start.line + 1) for f in result.findings}


def _describe(result) -> str:
    return "\n".join(
        f"  {f.code}@{f.range.start.line + 1} [{f.severity.value}] {f.message_in('en')}" for f in result.findings
    ) or "  (no findings)"


def _fix_run(source: str, result, reanalyse):
    """The engine's fix loop, the one behind `gradguard check --fix` and the
    editor's Fix All: what the catalogue proves is what users get."""
    for f in result.findings:
        assert any(x.preferred for x in f.fixes), f"{f.code}@{f.range.start.line + 1} offers no preferred fix"
    return fix_until_stable(source, result, apply_text_edits, reanalyse)


def _apply_preferred(source: str, result, reanalyse) -> str:
    return _fix_run(source, result, reanalyse).state


# --------------------------------------------------------------------------
# the catalogue itself


def test_catalogue_size_and_label_coverage():
    labels = Counter(s.label for s in SPECS.values())
    summary = "\n".join(f"  {n:3}  {k}" for k, n in sorted(labels.items()))
    print(f"\nfixture catalogue: {len(SPECS)} programs\n{summary}")
    assert len(SPECS) >= 40, summary
    for kind in ("crash:GG101", "crash:GG101/alt-error", "crash:GG102", "train:GG102", "train:none"):
        assert labels[kind] >= 1, f"no fixture labelled {kind}\n{summary}"
    assert labels["crash:GG101"] >= 10 and labels["train:none"] >= 15, summary
    assert any(s.severity for s in SPECS.values()), "no fixture declares a non-default severity"


def test_headers_are_strict():
    with pytest.raises(th.HeaderError):
        th.parse_header("# gradguard-fixture\n# runtime: maybe\n# expect: none\n")
    with pytest.raises(th.HeaderError):
        th.parse_header("# gradguard-fixture\n# runtime: crash\n# expect: GG101:3\n")
    with pytest.raises(th.HeaderError):
        th.parse_header("# gradguard-fixture\n# runtime: train\n# expect: GG102@3\n# severity: GG102@4=warning\n")
    with pytest.raises(th.HeaderError):
        th.parse_header("import torch\n")
    spec = th.parse_header(
        "# gradguard-fixture\n# runtime: crash\n# error: inplace\n# expect: GG101@5 GG101@9\n"
        "# severity: GG101@9=warning\n"
    )
    with pytest.raises(th.HeaderError):  # a training program has no finding to get later
        th.parse_header("# gradguard-fixture\n# runtime: train\n# expect: none\n# expect-later: GG103@3\n")
    with pytest.raises(th.HeaderError):  # expected now and later at once
        th.parse_header("# gradguard-fixture\n# runtime: crash\n# expect: GG103@3\n# expect-later: GG103@3\n")
    with pytest.raises(th.HeaderError):  # a fix gap without a finding
        th.parse_header("# gradguard-fixture\n# runtime: crash\n# expect: none\n# fix-later: why\n")
    later = th.parse_header("# gradguard-fixture\n# runtime: crash\n# expect: none\n# expect-later: GG103@7\n"
                            "# shape: unrolled -- two calls\n# source: https://example.org/1\n")
    assert later.later == {("GG103", 7)} and later.shape == "unrolled" and later.source == "https://example.org/1"
    assert spec.expect == {("GG101", 5), ("GG101", 9)} and spec.error == "inplace"
    assert spec.severity == {("GG101", 9): "warning"} and spec.label == "crash:GG101/alt-error"


def test_expected_lines_point_at_code():
    """A label that points at a blank line or a comment is a typo."""
    for name, spec in SPECS.items():
        lines = _source(name).splitlines()
        for code, line in spec.expect | spec.later:
            text = lines[line - 1].strip() if line <= len(lines) else ""
            assert text and not text.startswith("#"), f"{name}: {code}@{line} points at {text!r}"


# --------------------------------------------------------------------------
# 2. static analysis: exactly the expected findings


@pytest.mark.parametrize("name", NAMES)
def test_findings_match_label(name):
    spec = SPECS[name]
    result = check_source(_source(name), str(th.FIXTURES / name))
    assert result.syntax_error is None
    got = _found(result)
    now = sorted(got & spec.later)
    assert not now, f"{name}: {now} is reported now: move it from expect-later: to expect:"
    missing = sorted(spec.expect - got)
    extra = sorted(got - spec.expect)
    assert not missing and not extra, (
        f"{name}: missing {missing}, unexpected {extra}\nreported:\n{_describe(result)}"
    )
    for f in result.findings:
        key = (f.code, f.range.start.line + 1)
        rule = get_rule(f.code)
        want = spec.severity.get(key, rule.default_severity.value)
        assert f.severity.value == want, f"{name}: {f.code}@{key[1]} severity {f.severity.value}, want {want}"


def _project_main(name: str) -> Path:
    return th.FIXTURES / "projects" / name


def _check_project_main(path: Path, source: str = None):
    from gradguard.engine.document import resolve_external_facts

    source = path.read_text(encoding="utf-8") if source is None else source
    facts = resolve_external_facts(source, str(path), str(path.parent))
    return check_source(source, str(path), external_facts=facts)


def test_project_catalogue():
    assert PROJECTS, "no programs of several files under tests/fixtures/projects"
    assert {PROJECT_SPECS[n].runtime for n in PROJECTS} == {"crash", "train"}


@pytest.mark.parametrize("name", PROJECTS)
def test_project_findings_match_label(name):
    spec = PROJECT_SPECS[name]
    path = _project_main(name)
    result = _check_project_main(path)
    assert result.syntax_error is None
    assert _found(result) == set(spec.expect), _describe(result)
    lines = path.read_text(encoding="utf-8").splitlines()
    for code, line in spec.expect:
        assert lines[line - 1].strip() and not lines[line - 1].strip().startswith("#")
    # the imported modules alone report nothing: the loop is not theirs
    for other in sorted(path.parent.glob("*.py")):
        if f"{other.parent.name}/{other.name}" not in PROJECT_SPECS:
            assert not check_source(other.read_text(encoding="utf-8"), str(other)).findings, other.name
    if spec.expect:  # and without what resolution found, the main file alone reports nothing
        assert not check_source(path.read_text(encoding="utf-8"), str(path)).findings


def _fixed_project_main(path: Path):
    source = path.read_text(encoding="utf-8")
    result = _check_project_main(path)
    if not result.findings:
        return None
    return _apply_preferred(source, result, lambda text: _check_project_main(path, text))


@pytest.mark.parametrize("name", [n for n in PROJECTS if PROJECT_SPECS[n].expect and PROJECT_SPECS[n].fix_later])
def test_project_known_fix_gap_is_still_there(name):
    """A `fix-later:` program of several files offers no preferred fix yet (the day it
    does, this fails: drop the header and the fix tests below take over)."""
    result = _check_project_main(_project_main(name))
    assert result.findings and any(f.preferred_fix is None for f in result.findings), _describe(result)


@pytest.mark.parametrize("name", [n for n in PROJECTS if PROJECT_SPECS[n].expect and not PROJECT_SPECS[n].fix_later])
def test_project_preferred_fix_is_clean_and_idempotent(name):
    path = _project_main(name)
    fixed = _fixed_project_main(path)
    assert fixed is not None and fixed != path.read_text(encoding="utf-8")
    again = _check_project_main(path, fixed)
    assert again.syntax_error is None and not again.findings, _describe(again)


# --------------------------------------------------------------------------
# 3a. fixing, on text (no torch needed)


@pytest.mark.parametrize("name", FIXES_HOLD)
def test_preferred_fix_is_clean_and_idempotent(name):
    source = _source(name)
    result = check_source(source, name)
    assert result.findings, f"{name}: nothing reported, so nothing to fix"
    run = _fix_run(source, result, lambda text: check_source(text, name))
    fixed = run.state
    assert fixed != source
    # a fix waits for the next round only when it conflicts with another (two
    # insertions at one point: gg101_two_carried_states.py); it never runs out of rounds
    assert 1 <= run.rounds < MAX_ROUNDS, f"{name}: {run.rounds} rounds"
    again = check_source(fixed, name)
    assert run.result == again
    assert again.syntax_error is None, f"{name}: the fix breaks the syntax: {again.syntax_error}\n{fixed}"
    assert not again.findings, f"{name}: still reported after fixing:\n{_describe(again)}\n--- fixed ---\n{fixed}"
    assert _fix_run(fixed, again, lambda text: check_source(text, name)).rounds == 0


# --------------------------------------------------------------------------
# 1, 3b, 4. runtime, under real torch (one subprocess for everything)


def _fixed_source(path: Path):
    source = path.read_text(encoding="utf-8")
    result = check_source(source, str(path))
    if not result.findings:
        return None
    try:
        return _apply_preferred(source, result, lambda text: check_source(text, str(path)))
    except AssertionError:
        return None


# rules whose every quick fix (not only the preferred one) is run under torch
OTHER_FIXES_RUN = ("GG103",)


@functools.lru_cache(maxsize=None)
def _other_fixes() -> tuple:
    """(fixture, index, fixed text) for each non-preferred fix of the rules above
    (asked by the runtime fixture and by the test: analysed once)."""
    out = []
    for name in NAMES:
        if SPECS[name].fix_later:
            continue  # its fixes are a known gap (test_known_fix_gap_is_still_there)
        source = _source(name)
        for f in check_source(source, name).findings:
            if f.code not in OTHER_FIXES_RUN:
                continue
            for i, fx in enumerate(f.fixes):
                if fx is not f.preferred_fix:
                    out.append((name, i, apply_text_edits(source, fx.edits)))
    return tuple(out)


@pytest.mark.needs_torch
def test_every_other_fix_trains(runtime):
    others = [(n, i) for n, i, _ in _other_fixes()]
    assert others, "no non-preferred fix to run"
    for name, i in others:
        run = runtime[f"other{i}/{name}"]["original"]
        assert run["status"] == "train", (name, i, _why(run))


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """Run every fixture, its fixed version, and the examples, in one process."""
    work = tmp_path_factory.mktemp("fixed")
    jobs = []
    targets = [(n, th.FIXTURES / n) for n in NAMES]
    targets += [(f"examples/{n}", EXAMPLES_DIR / n) for n in EXAMPLES if (EXAMPLES_DIR / n).exists()]
    for name in PROJECTS:  # the fixed program runs beside copies of the modules it imports
        import shutil

        path = _project_main(name)
        job = {"name": f"projects/{name}", "original": str(path), "fixed": None, "seed": 0}
        fixed = _fixed_project_main(path) if not PROJECT_SPECS[name].fix_later else None
        if fixed is not None:
            folder = work / "projects" / name.replace("/", "__")
            shutil.copytree(path.parent, folder, ignore=shutil.ignore_patterns("__pycache__"))
            (folder / path.name).write_text(fixed, encoding="utf-8")
            job["fixed"] = str(folder / path.name)
        jobs.append(job)
    for name, path in targets:
        job = {"name": name, "original": str(path), "fixed": None, "seed": 0,
               "holds": list(SPECS[name].holds) if name in SPECS else [],
               # GG207: the original's first step applies erased gradients, on purpose unlike the fix's;
               # the first backward's gradients are what the fix must keep
               "first_grads": name in SPECS and "GG207" in SPECS[name].codes,
               # GG104: the original fails in its first backward; compare with its run on saved copies
               "copy_saved": name in SPECS and SPECS[name].reference == "saved-copies",
               # GG208: the fix changes which parameters the optimizers hold; compare what the fixed
               # program's optimizers update
               "fixed_owned": name in SPECS and "GG208" in SPECS[name].codes}
        fixed = _fixed_source(path)
        if fixed is not None:
            out = work / name.replace("/", "__")
            out.write_text(fixed, encoding="utf-8")
            job["fixed"] = str(out)
        jobs.append(job)
    for name, i, text in _other_fixes():  # the other quick fixes must make a program that trains too
        out = work / f"other{i}__{name.replace('/', '__')}"
        out.write_text(text, encoding="utf-8")
        jobs.append({"name": f"other{i}/{name}", "original": str(out), "fixed": None, "seed": 0})
    manifest = work / "jobs.json"
    manifest.write_text(json.dumps(jobs), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    proc = subprocess.run(
        [sys.executable, str(Path(th.__file__)), "--manifest", str(manifest)],
        capture_output=True, text=True, encoding="utf-8", env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(results) == {j["name"] for j in jobs}
    return results


def _why(run: dict) -> str:
    return f"{run['status']} ({run['error_type']}: {(run['error'] or '')[:200]})"


# inference scripts (GG201 after model.eval(): the file never back-propagates)
INFERENCE = {n for n in NAMES if not may_backprop(_source(n))}


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_torch_agrees_with_runtime_label(runtime, name):
    spec = SPECS[name]
    run = runtime[name]["original"]
    if spec.runtime == "crash":
        assert run["status"] == "crash" and run["error_type"] == "RuntimeError", _why(run)
        assert spec.error in run["error"], f"expected {spec.error!r}, got {_why(run)}"
        if spec.reference == "saved-copies":
            # the first backward fails; with every saved tensor copied when saved, the program trains
            ref = runtime[name]["reference"]
            assert ref["status"] == "train" and ref["backward_calls"] >= 2, _why(ref)
        else:
            assert run["captured"], "the first iteration's backward should succeed before the crash"
    elif name in INFERENCE:
        assert run["status"] == "train" and run["backward_calls"] == 0, _why(run)
    else:
        assert run["status"] == "train", _why(run)
        assert run["backward_calls"] >= 2, "a training fixture should back-propagate more than once"


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", FIXES_HOLD)
def test_fixed_program_trains(runtime, name):
    entry = runtime[name]
    assert "fixed" in entry, f"{name}: no preferred fix could be applied (see test_findings_match_label)"
    assert entry["fixed"]["status"] == "train", f"{name}: fixed program: {_why(entry['fixed'])}"
    assert entry["fixed"]["backward_calls"] >= (0 if name in INFERENCE else 2)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", FIXES_HOLD)
def test_fix_keeps_first_iteration_gradients(runtime, name):
    """The original's first iteration is right (the bug only bites from the
    second); a fix must not change what it learns. For GG102 this rules out,
    e.g., detaching a parameter-derived penalty, which would silently drop
    its gradient."""
    entry = runtime[name]
    assert "fixed" in entry, f"{name}: no preferred fix could be applied"
    if name in INFERENCE:  # nothing learns, before or after (test_fixed_program_trains: no backward)
        assert entry["original"]["backward_calls"] == entry["fixed"]["backward_calls"] == 0
        return
    assert entry["grads_equal"], f"{name}: {entry['grads_why']}"


HOLDS_NAMES = [n for n in NAMES if SPECS[n].holds]


def test_leak_fixtures_declare_what_leaks():
    """Every GG201 program proves its leak at runtime (``holds-graph:``)."""
    assert HOLDS_NAMES
    for name in NAMES:
        spec = SPECS[name]
        leaks = [key for key in spec.expect if key[0] == "GG201" and spec.severity.get(key) != "hint"]
        # (an evaluation loop's hint keeps nothing; a leak inside a function is out of the harness's reach)
        if leaks and name not in ("gg201_evaluate_function.py", "gg201_wrapper_validation_step_outputs_kept.py"):
            assert spec.holds, f"{name}: no 'holds-graph:' header"


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", HOLDS_NAMES)
def test_leak_is_real_and_the_fix_ends_it(runtime, name):
    """The program ends holding an autograd graph in the declared names (the
    leak, which never crashes); the fixed program trains and holds none."""
    entry = runtime[name]
    held = entry["original"]["holds"]
    assert held and all(held.values()), f"{name}: {held}"
    if SPECS[name].fix_later:
        return  # no preferred fix yet (test_known_fix_gap_is_still_there holds the gap)
    assert "fixed" in entry, f"{name}: no preferred fix could be applied"
    assert not any(entry["fixed"]["holds"].values()), f"{name}: still holds a graph once fixed: {entry['fixed']['holds']}"


# (an accumulation's hint, fix-later: the loss not divided by the count has no fix to run)
GG205_NAMES = [n for n in NAMES if "GG205" in SPECS[n].codes and not SPECS[n].fix_later]


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", GG205_NAMES)
def test_gradients_accumulate_and_the_fix_resets_them(runtime, name):
    """GG205: the original's second gradient is its first plus the fixed run's
    second (the fix zeroes once per iteration and changes nothing else)."""
    entry = runtime[name]
    assert "fixed" in entry, f"{name}: no preferred fix could be applied"
    # (per backward for a loop with one backward per step, per optimizer step for one with several: a GAN;
    # or a GAN whose generator's backward leaves gradients in the discriminator after its zeroing: the
    # same first steps, a different second one)
    assert entry["accumulates"] or entry["step_accumulates"] or entry["step_leaks"], (
        f"{name}: {entry['accumulates_why']}; {entry['step_accumulates_why']}; {entry['step_leaks_why']}")


GG206_NAMES = [n for n in NAMES if "GG206" in SPECS[n].codes]


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", GG206_NAMES)
def test_trained_in_eval_mode_and_the_fix_trains_in_train_mode(runtime, name):
    """GG206: some backward of the original runs while a trained module is in
    evaluation mode; once fixed, none does."""
    entry = runtime[name]
    assert entry["original"]["eval_backwards"] > 0, f"{name}: never trains in evaluation mode"
    assert "fixed" in entry, f"{name}: no preferred fix could be applied"
    assert entry["fixed"]["eval_backwards"] == 0, f"{name}: still trains in evaluation mode once fixed"


GG207_NAMES = [n for n in NAMES if "GG207" in SPECS[n].codes]


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", GG207_NAMES)
def test_steps_find_no_gradient_and_the_fix_gives_them_one(runtime, name):
    """GG207: every step of the original finds its gradients erased, or (zeroing inside an
    accumulation loop) zeroing erases gradients no step used; no step of the fixed run finds
    its gradients erased, and its zeroing erases nothing unused."""
    entry = runtime[name]
    orig = entry["original"]
    assert orig["steps"] >= 2 and (orig["empty_steps"] == orig["steps"] or orig["discarded"] >= 2), f"{name}: {orig}"
    if SPECS[name].fix_later:
        return  # (the zeroing sits in a helper: no preferred fix yet)
    assert "fixed" in entry, f"{name}: no preferred fix could be applied"
    assert entry["fixed"]["steps"] == orig["steps"] and entry["fixed"]["empty_steps"] == 0, entry["fixed"]
    assert entry["fixed"]["discarded"] == 0, entry["fixed"]


GG208_NAMES = [n for n in NAMES if "GG208" in SPECS[n].codes]


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", GG208_NAMES)
def test_gradients_reach_parameters_no_optimizer_holds(runtime, name):
    """GG208: the original ends with gradients in parameters no optimizer holds; once
    fixed (when a fix holds), none."""
    entry = runtime[name]
    assert entry["original"]["unowned_grads"] > 0, f"{name}: {entry['original']}"
    if SPECS[name].fix_later:
        return
    assert "fixed" in entry, f"{name}: no preferred fix could be applied"
    assert entry["fixed"]["unowned_grads"] == 0, entry["fixed"]


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", [n for n in NAMES if "gg208" in n and not SPECS[n].expect])
def test_gg208_twins_leave_no_gradient_unowned(runtime, name):
    """The silent twins of GG208 really are right: no parameter outside every optimizer
    ends with a gradient (or none gets one because it is frozen)."""
    assert runtime[name]["original"]["unowned_grads"] == 0, runtime[name]["original"]


def test_quiet_runtime_proofs_are_exercised():
    assert GG206_NAMES and GG207_NAMES and GG208_NAMES


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", FIX_GAPS)
def test_known_fix_gap_is_still_there(runtime, name):
    """A `fix-later:` program: its preferred fix does not hold yet (no fix, a
    fix that leaves the finding, or a fixed program that crashes or learns
    something else in its first iteration). The day it holds, this fails:
    drop the header and the regular fix tests take over."""
    source = _source(name)
    result = check_source(source, name)
    assert result.findings, f"{name}: nothing reported, so nothing to fix"
    holds = all(f.preferred_fix is not None for f in result.findings)
    if holds:
        fixed = _apply_preferred(source, result, lambda text: check_source(text, name))
        again = check_source(fixed, name)
        entry = runtime[name]
        holds = (again.syntax_error is None and not again.findings and "fixed" in entry
                 and entry["fixed"]["status"] == "train" and entry["grads_equal"])
    assert not holds, f"{name}: the preferred fix holds now; remove 'fix-later: {SPECS[name].fix_later}'"


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", GG101_NAMES)
def test_fix_keeps_the_carried_state(runtime, name):
    """The original computes its second loss before the second backward
    raises. Detaching keeps the state's value, so the fixed program's second
    loss is the same number; a "fix" that reset the state would change it."""
    entry = runtime[name]
    assert "fixed" in entry, f"{name}: no preferred fix could be applied"
    if SPECS[name].resets:
        # the fix empties the kept list (`resets:`): the second loss no longer reads the old entries
        assert not entry["losses_equal"], f"{name}: the fix was to empty a kept list, yet the second loss is unchanged"
        return
    assert entry["losses_equal"], f"{name}: {entry['losses_why']}"


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", PROJECTS)
def test_projects_under_torch(runtime, name):
    """A program of several files: torch agrees with its label; a reported one,
    once fixed in its main file, trains with the same first-iteration gradients
    and the same second loss (the state is kept, only its graph is cut)."""
    spec = PROJECT_SPECS[name]
    entry = runtime[f"projects/{name}"]
    run = entry["original"]
    if spec.runtime == "crash":
        assert run["status"] == "crash" and spec.error in (run["error"] or ""), _why(run)
        assert run["captured"]
    else:
        assert run["status"] == "train" and run["backward_calls"] >= 2, _why(run)
    if spec.expect and not spec.fix_later:  # (a fix-later one has no fix to run: the gap is checked above)
        assert entry["fixed"]["status"] == "train", _why(entry["fixed"])
        assert entry["grads_equal"], entry["grads_why"]
        assert entry["losses_equal"], entry["losses_why"]


# --------------------------------------------------------------------------
# the README demo programs


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_are_reported_as_documented(name):
    path = EXAMPLES_DIR / name
    assert path.exists(), f"examples/{name} is missing"
    result = check_source(path.read_text(encoding="utf-8"), str(path))
    assert _found(result) == EXAMPLES[name][1], _describe(result)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_behave_as_documented(runtime, name):
    entry = runtime[f"examples/{name}"]
    want = EXAMPLES[name][0]
    assert entry["original"]["status"] == want, _why(entry["original"])
    if want == "crash":
        assert th.DEFAULT_ERROR in entry["original"]["error"]
        assert "fixed" in entry and entry["fixed"]["status"] == "train"


# --------------------------------------------------------------------------
# the reference idioms of pytorch/examples must stay silent


PYTORCH_EXAMPLES = os.environ.get("GRADGUARD_PYTORCH_EXAMPLES")
SILENT_DIRS = ("word_language_model", "time_sequence_prediction", "dcgan", "mnist", "reinforcement_learning")


@pytest.mark.skipif(not PYTORCH_EXAMPLES, reason="set GRADGUARD_PYTORCH_EXAMPLES to a pytorch/examples checkout")
@pytest.mark.parametrize("folder", SILENT_DIRS)
def test_pytorch_examples_are_silent(folder):
    root = Path(PYTORCH_EXAMPLES) / folder
    files = sorted(root.rglob("*.py"))
    assert files, f"no Python files under {root}"
    noisy = []
    for p in files:
        result = check_source(p.read_text(encoding="utf-8", errors="replace"), str(p))
        noisy += [f"{p.relative_to(root)}:{f.range.start.line + 1}: {f.code} {f.message_in('en')}" for f in result.findings]
    assert not noisy, "\n".join(noisy)
