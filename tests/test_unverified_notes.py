"""GG101's information-level note where a path cannot be verified (issue 16).

An error is reported only where every link of its path is established. Where
GG101 stays silent because one link is unknown -- here, a function imported
from a module nobody summarised, whose result may or may not keep its
arguments' graph -- the ``unverified-notes`` setting (off by default) adds an
INFO finding naming the value, the backward and the unknown link. Off, the
output is what it was (the snapshot corpus is held to it by
scripts/output_snapshot.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from gradguard.engine import Document, check_source
from gradguard.engine.config import Config, ConfigError, config_from_mapping
from gradguard.lsp.settings import Settings, parse_settings
from gradguard.model.findings import Severity

# `trace` is rebuilt from itself and from what hebbian_update makes of `out`
# (a graph): whether that result keeps the graph is unknown, so nothing can be
# proven; if it does, the next iteration's backward fails.
UNKNOWN_LINK = textwrap.dedent(
    """\
    import torch
    from plasticity import hebbian_update

    w = torch.randn(3, 3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    trace = torch.zeros(3)
    # 迹：由外部模块更新
    for step in range(4):
        x = torch.randn(3)
        out = x @ w
        trace = 0.9 * trace + hebbian_update(out, x)  # <note>
        loss = (out + trace).sum()
        opt.zero_grad()
        loss.backward()  # <bw>
        opt.step()
    """
)
ON = Config(unverified_notes=True)


def line_of(text: str, marker: str) -> int:
    (i,) = [n for n, ln in enumerate(text.splitlines()) if marker in ln]
    return i


def test_off_by_default_and_silent():
    assert Config().unverified_notes is False
    assert check_source(UNKNOWN_LINK, "prog.py").findings == ()


def test_on_the_note_names_the_value_the_backward_and_the_unknown_link():
    (f,) = check_source(UNKNOWN_LINK, "prog.py", ON).findings
    assert f.code == "GG101" and f.severity == Severity.INFO
    assert f.range.start.line == line_of(UNKNOWN_LINK, "# <note>") and f.range.start.character == 4
    assert f.data == {"variable": "trace", "variables": ["trace"], "unverified": "imported"}
    assert f.fixes == ()  # nothing is proven: no edit is pushed on the user
    en, zh = f.message_in("en"), f.message_in("zh")
    assert en.startswith("The path could not be verified: `trace`")
    assert "`hebbian_update(out, x)`" in en and "imported from a module" in en and "`loss.backward()`" in en
    assert zh.startswith("无法验证这条路径：`trace`") and "`hebbian_update(out, x)`" in zh and "没有读到的模块" in zh
    link, bw = f.related
    call_line = line_of(UNKNOWN_LINK, "# <note>")
    assert (link.range.start.line, link.range.start.character) == (call_line, UNKNOWN_LINK.splitlines()[call_line].index("hebbian"))
    assert bw.range.start.line == line_of(UNKNOWN_LINK, "# <bw>")


def test_a_proven_carry_stays_an_error_and_gets_no_note():
    # the same loop with the state threaded through a module: proven, reported as before
    text = UNKNOWN_LINK.replace("trace = 0.9 * trace + hebbian_update(out, x)", "trace = out * trace")
    off = check_source(text, "prog.py").findings
    on = check_source(text, "prog.py", ON).findings
    assert [f.severity for f in off] == [Severity.ERROR] and on == off


def test_a_value_that_does_not_reach_the_next_backward_gets_no_note():
    # rebuilt every iteration without its previous value: nothing is carried
    text = UNKNOWN_LINK.replace("trace = 0.9 * trace + hebbian_update(out, x)", "trace = hebbian_update(out, x)")
    assert check_source(text, "prog.py", ON).findings == ()


def test_a_severity_set_for_gg101_does_not_turn_the_note_into_an_error():
    cfg = config_from_mapping({"severity": {"GG101": "error"}, "unverified-notes": True})
    (f,) = check_source(UNKNOWN_LINK, "prog.py", cfg).findings
    assert f.severity == Severity.INFO


def test_the_config_key_is_validated():
    assert config_from_mapping({"unverified-notes": True}).unverified_notes is True
    assert config_from_mapping({"unverified_notes": False}).unverified_notes is False
    with pytest.raises(ConfigError, match="'unverified-notes' must be true or false"):
        config_from_mapping({"unverified-notes": "yes"}, where="pyproject.toml")


def test_the_editor_setting_turns_it_on_over_the_project():
    s, problems = parse_settings({"unverifiedNotes": True})
    assert problems == [] and s.unverified_notes is True
    assert s.apply_to(Config()).unverified_notes is True
    assert Settings().apply_to(ON).unverified_notes is True  # off in the editor: the project's value
    bad, problems = parse_settings({"unverifiedNotes": "yes"})
    assert bad.unverified_notes is False and any("unverifiedNotes" in p for p in problems)


def test_an_open_document_follows_the_setting():
    doc = Document(UNKNOWN_LINK, "prog.py")
    assert doc.result().findings == ()
    assert [f.severity for f in doc.set_config(ON).findings] == [Severity.INFO]
    # an edit elsewhere keeps the note where it belongs
    moved = doc.update("# 新的一行\n" + UNKNOWN_LINK)
    assert [f.range.start.line for f in moved.findings] == [line_of(UNKNOWN_LINK, "# <note>") + 1]
    assert doc.set_config(Config()).findings == ()


def run_cli(*args, cwd):
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "gradguard", "check", "--no-cache", "--format", "json", *args],
                          cwd=cwd, capture_output=True, text=True, encoding="utf-8", env=env)


def test_the_cli_flag_and_the_pyproject_key(tmp_path):
    (tmp_path / "prog.py").write_text(UNKNOWN_LINK, encoding="utf-8")
    off = run_cli("prog.py", cwd=tmp_path)
    assert off.returncode == 0 and json.loads(off.stdout) == [], off.stderr
    on = run_cli("--unverified-notes", "prog.py", cwd=tmp_path)
    (f,) = json.loads(on.stdout)
    assert (f["code"], f["severity"], f["line"]) == ("GG101", "info", line_of(UNKNOWN_LINK, "# <note>") + 1)
    (tmp_path / "pyproject.toml").write_text("[tool.gradguard]\nunverified-notes = true\n", encoding="utf-8")
    assert json.loads(run_cli("prog.py", cwd=tmp_path).stdout) == [f]
    (tmp_path / "pyproject.toml").write_text("[tool.gradguard]\nunverified-notes = 1\n", encoding="utf-8")
    broken = run_cli("prog.py", cwd=tmp_path)
    assert broken.returncode == 2 and "unverified-notes" in broken.stderr


# transformer-XL's shape: forward returns `[loss] + new_mems`, a list whose first part has
# a graph and whose others (made by a comprehension, not known one by one) have none; the
# loop slices the memories off. Which part holds what is unknown: silent, or a note.
MIXED_LIST = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x, *mems):
            h = self.lin(x)
            loss = h.pow(2).mean() + sum(m.sum() for m in mems)
            new_mems = [t.detach() for t in (h,)]
            return [loss] + new_mems


    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mems = tuple()
    for step in range(3):
        ret = model(torch.randn(2, 3), *mems)
        loss, mems = ret[0], ret[1:]  # <note>
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
)


def test_a_part_of_a_mixed_list_is_noted_with_the_part_that_is_unknown():
    assert check_source(MIXED_LIST, "xl.py").findings == ()
    (f,) = check_source(MIXED_LIST, "xl.py", ON).findings
    row = line_of(MIXED_LIST, "# <note>")
    assert (f.range.start.line, f.severity, f.data["unverified"], f.data["variable"]) == (row, Severity.INFO, "container", "mems")
    assert "`ret[1:]`" in f.message_in("en") and "`ret[1:]`" in f.message_in("zh")
    assert f.related[0].range.start == type(f.related[0].range.start)(row, MIXED_LIST.splitlines()[row].index("ret[1:]"))


def test_a_note_for_an_item_assignment_is_put_inside_the_loop():
    # `mems[i] = ret[1:]` keeps the site of the list (made before the loop): the note
    # goes on the loop's statement that binds the item
    text = MIXED_LIST.replace("mems = tuple()\n", "mems = [tuple()]\n").replace(
        "torch.randn(2, 3), *mems)", "torch.randn(2, 3), *mems[0])").replace("loss, mems = ret[0], ret[1:]", "loss, mems[0] = ret[0], ret[1:]")
    assert check_source(text, "xl.py").syntax_error is None and check_source(text, "xl.py").findings == ()
    (f,) = check_source(text, "xl.py", ON).findings
    assert f.range.start.line == line_of(text, "# <note>") and "`ret[1:]`" in f.message_in("en")
