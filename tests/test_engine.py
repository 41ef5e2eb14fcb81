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


# ---------------------------------------------------------------------------
# Rule.trigger: what a unit must show before a rule runs, tested by the engine


def _spies(monkeypatch, triggers):
    """Rules that record the units they are run on, one per trigger (None: no
    trigger), enabled alone; the record: rule index → qualnames."""
    from gradguard.engine import document as D
    from gradguard.rules.base import Rule

    calls = {i: [] for i in range(len(triggers))}
    rules = []
    for i, trig in enumerate(triggers):
        def check(self, unit, ctx, _i=i):
            calls[_i].append(unit.qualname)
            return ()
        rules.append(type(f"Spy{i}", (Rule,), {"code": f"GG9{i:02d}", "trigger": trig, "check": check})())
    monkeypatch.setattr(D, "enabled_rules", lambda config, path: rules)
    monkeypatch.setattr(D, "enabled_declared", lambda config, path: rules)  # (the one-shot check's first question)
    return calls


def test_a_rule_runs_only_on_the_units_that_meet_its_trigger(monkeypatch):
    from gradguard.rules.base import Trigger

    calls = _spies(monkeypatch, [
        Trigger(torch=True, text=("backward",)),
        Trigger(text=(("no-such-text", ".sum("),)),  # a tuple: any one of its strings
        Trigger(words=("for",)),  # a whole word: "format" is not "for"
        None,
    ])
    src = ("import torch\n\n"
           "def trains(model):\n    for x in range(3):\n        model(x).sum().backward()\n\n"
           "def plain(xs):\n    return xs.sum()\n\n"
           "def fmt(x):\n    return format(x).backward()\n")
    check_source(src)
    assert calls == {0: ["trains", "fmt"], 1: ["trains", "plain"], 2: ["trains"],
                     3: ["trains", "plain", "fmt", "<module>"]}  # (the module unit last)
    # torch imported by the function itself, not by the module
    calls = _spies(monkeypatch, [Trigger(torch=True)])
    check_source("def own():\n    import torch.nn as nn\n    return nn\n\ndef other(x):\n    x.backward()\n")
    assert calls == {0: ["own"]}
    # another framework's file alone fails the weaker condition; a file of no imports meets it
    calls = _spies(monkeypatch, [Trigger(not_other_framework=True)])
    check_source("import mxnet as mx\n\ndef step(x):\n    x.backward()\n")
    check_source("def step(x):\n    x.backward()\n")
    check_source("import mxnet as mx\nimport torch\n\ndef both(x):\n    x.backward()\n")
    assert calls == {0: ["step", "both", "<module>"]}


def test_each_trigger_condition_is_answered_once_per_unit_for_every_rule(monkeypatch):
    from gradguard.engine import document as D
    from gradguard.rules.base import Trigger

    _spies(monkeypatch, [Trigger(torch=True, text=("backward",)), Trigger(torch=True, text=("backward",)),
                         Trigger(torch=True, text=("backward", (".grad", "step")))])
    asked = []
    answer = D._answer

    def counted(cond, unit, ctx):
        asked.append((unit.qualname, cond))
        return answer(cond, unit, ctx)

    monkeypatch.setattr(D, "_answer", counted)
    check_source("import torch\n\ndef step(loss, opt):\n    loss.backward()\n    opt.step()\n")
    assert sorted(asked) == sorted([
        ("<module>", ("torch",)), ("<module>", ("text", "backward")),
        ("step", ("torch",)), ("step", ("text", "backward")), ("step", ("text", ".grad", "step"))])


def test_rules_declare_the_framework_conditions_instead_of_testing_them():
    """Whether the unit imports torch, or is another framework's file, is a trigger
    condition the engine answers once per unit (``Trigger(torch=True)``,
    ``Trigger(not_other_framework=True)``): a rule module that asks it again in
    ``check`` copies what it should declare."""
    import ast
    from pathlib import Path

    rules_dir = Path(__file__).resolve().parents[1] / "server" / "gradguard" / "rules"
    asked = {}
    for path in sorted(rules_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            names = [a.name for a in n.names] if isinstance(n, ast.ImportFrom) else \
                [n.attr] if isinstance(n, ast.Attribute) else [n.id] if isinstance(n, ast.Name) else []
            for name in names:
                if name in ("imports_torch", "other_framework_only"):
                    asked.setdefault(path.relative_to(rules_dir).parts[0], set()).add(name)
    assert not asked, asked


# The catalog (rules/catalog.py): what deciding that a file needs no rule reads, before any rule is imported


def test_the_catalog_declares_every_rule_as_its_class_does():
    """One entry per registered rule, in the registry's order, each from the module
    that defines the rule and with its class's answers: the catalog and the classes
    cannot drift apart."""
    from gradguard.rules.catalog import RULES

    rules = all_rules()
    assert [d.code for d in RULES] == [r.code for r in rules]
    for d, r in zip(RULES, rules):
        assert type(r).__module__ == d.module, d.code
        assert d.needs_backprop is r.needs_backprop, d.code
        assert d.also_without_backprop is r.also_without_backprop, d.code


def test_a_file_that_never_back_propagates_imports_no_rule():
    """The CLI's check of a model or data file (nothing back-propagates) answers
    from the catalog: no rule module (nor the interpreter under them) is imported;
    a file that back-propagates loads them all."""
    import subprocess
    import sys

    probe = ("import sys\n"
             "from gradguard.engine.document import check_source\n"
             "check_source(sys.argv[1], 'm.py')\n"
             "print(sorted(m for m in sys.modules if m.startswith('gradguard.rules.gg') "
             "or m == 'gradguard.analysis.interpreter'))\n")
    quiet = subprocess.run([sys.executable, "-c", probe, "import torch\nx = torch.ones(2)\n"],
                           capture_output=True, text=True, check=True)
    assert quiet.stdout.strip() == "[]"
    trains = subprocess.run([sys.executable, "-c", probe, "import torch\nx = torch.ones(2)\nx.sum().backward()\n"],
                            capture_output=True, text=True, check=True)
    assert "gradguard.rules.gg101_carried_graph" in trains.stdout
    assert "gradguard.analysis.interpreter" in trains.stdout


def test_the_catalog_answers_until_the_registry_is_loaded(monkeypatch):
    """A registry in place (loaded, or a test's) is what ``declared`` answers."""
    import gradguard.rules as rules_pkg
    from gradguard.rules.catalog import RULES

    monkeypatch.setattr(rules_pkg, "_REGISTRY", None)
    assert rules_pkg.declared() == list(RULES)
    reg = {r.code: r for r in all_rules()}
    assert rules_pkg.declared() == list(reg.values())
