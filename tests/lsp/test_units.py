"""The server's pure helpers, in process (no subprocess, milliseconds)."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types as lsp

from lsp_harness import apply_lsp_edits
from gradguard.model.findings import Position, Range
from gradguard.lsp.actions import kind_wanted, whole_line_diff
from gradguard.lsp.convert import Codec, SourceMap
from gradguard.lsp.hover import idiom_at
from gradguard.lsp.settings import Settings, parse_settings, resolve_language

pytestmark = pytest.mark.filterwarnings("ignore")


def test_codec_round_trips_in_every_encoding():
    line = '标记 = "😀"; out, hidden = gru(x, 隐)  # 🚀'
    for enc, width in (("utf-16", lambda c: 2 if ord(c) > 0xFFFF else 1), ("utf-8", lambda c: len(c.encode())), ("utf-32", lambda c: 1)):
        codec = Codec(enc)
        units = 0
        for i, ch in enumerate(line):
            assert codec.to_client(line, i) == units
            assert codec.from_client(line, units) == i
            if width(ch) > 1:  # inside a multi-unit character rounds down
                assert codec.from_client(line, units + 1) == i
            units += width(ch)
        assert codec.to_client(line, 10_000) == units  # clamped
        assert codec.from_client(line, 10_000) == len(line)
    assert Codec("utf-16").to_client('s = "\udcff"; x', 8) == 8  # a lone surrogate is one unit
    assert Codec("latin-1").encoding == "utf-16"


def test_source_map_clamps_and_never_spills_into_the_next_cell():
    text, smap = SourceMap.of_cells([("c0", "a = 1\nb = 2", 1), ("c1", "%time\nfor i in x:\n    y = 😀", 3)])
    assert text.split("\n") == ["a = 1", "b = 2", "", "for i in x:", "    y = 😀"]
    codec = Codec("utf-16")
    part, rng = smap.to_client_range(Range(Position(3, 0), Position(99, 99)), codec)
    assert part.uri == "c1" and part.version == 3
    assert (rng.start.line, rng.start.character, rng.end.line, rng.end.character) == (1, 0, 2, 10)  # 😀 = 2 units
    part, rng = smap.to_client_range(Range(Position(1, 2), Position(4, 0)), codec)
    assert part.uri == "c0" and rng.end.line == 1  # clamped to its own cell
    assert smap.to_client_range(Range(Position(50, 0), Position(50, 1)), codec) is None
    assert smap.from_client_position("c1", lsp.Position(2, 10), codec) == Position(4, 9)
    assert smap.from_client_position("c1", lsp.Position(7, 0), codec) is None
    assert smap.from_client_position("c1", lsp.Position(2, 11), codec) is None
    single = SourceMap.single("u", "x", 1)
    assert single.to_client_range(Range(Position(0, 5), Position(0, 9)), codec)[1].start.character == 1


def test_whole_line_diff_rebuilds_the_new_text():
    rng = random.Random(7)
    words = ["a = 1", "    hidden = hidden.detach()", "# 注释 😀", "", "for i in x:", "with torch.no_grad():"]
    codec = Codec("utf-16")
    for _ in range(400):
        old = [rng.choice(words) for _ in range(rng.randint(1, 8))]
        new = list(old)
        for _ in range(rng.randint(1, 3)):
            op = rng.random()
            if op < 0.4:
                new.insert(rng.randint(0, len(new)), rng.choice(words))
            elif op < 0.7 and len(new) > 1:
                del new[rng.randrange(len(new))]
            else:
                new[rng.randrange(len(new))] = rng.choice(words)
        old_text, new_text = "\n".join(old), "\n".join(new)
        if rng.random() < 0.5:
            old_text += "\n"
            new_text += "\n"
        edit = whole_line_diff(old_text, new_text, codec)
        if old_text == new_text:
            assert edit is None
            continue
        assert apply_lsp_edits(old_text, [edit]) == new_text, (old, new)


def test_whole_line_diff_keeps_every_line_end_of_a_mixed_text():
    """Fix All's edit rebuilds the fixed text exactly: each line keeps its own
    end (a file edited on two systems mixes them), and the fixed lines get what
    the fix loop gave them, not the first line's end."""
    rng = random.Random(11)
    words = ["a = 1", "    hidden = hidden.detach()", "# 注释 😀 𝐱", "", "\tx = 1\f", "for i in x:"]
    ends = ["\n", "\r\n", "\r"]
    codec = Codec("utf-16")
    for _ in range(400):
        old = [(rng.choice(words), rng.choice(ends)) for _ in range(rng.randint(1, 8))]
        new = list(old)
        for _ in range(rng.randint(1, 3)):
            op = rng.random()
            if op < 0.4:
                new.insert(rng.randint(0, len(new)), (rng.choice(words), rng.choice(ends)))
            elif op < 0.7 and len(new) > 1:
                del new[rng.randrange(len(new))]
            else:
                i = rng.randrange(len(new))
                new[i] = (rng.choice(words), new[i][1])
        old_text, new_text = "".join(a + b for a, b in old), "".join(a + b for a, b in new)
        if rng.random() < 0.5 and old_text.endswith(old[-1][1]) and new_text.endswith(new[-1][1]):
            old_text, new_text = old_text[: -len(old[-1][1])], new_text[: -len(new[-1][1])]
        edit = whole_line_diff(old_text, new_text, codec)
        if old_text == new_text:
            assert edit is None
            continue
        assert apply_lsp_edits(old_text, [edit]) == new_text, (old_text, new_text)


def test_whole_line_diff_keeps_crlf():
    old = "a = 1\r\nb = 2\r\n"
    new = "a = 1\r\nx = 0\r\nb = 2\r\n"
    edit = whole_line_diff(old, new, Codec("utf-16"))
    assert edit.new_text == "x = 0\r\n"


def test_kind_matching():
    assert kind_wanted("source.fixAll.gradguard", ["source"])
    assert kind_wanted("source.fixAll.gradguard", ["source.fixAll"])
    assert not kind_wanted("source.fixAll.gradguard", ["source.organizeImports"])
    assert not kind_wanted("quickfix", ["source"])
    assert kind_wanted("quickfix", None) and kind_wanted("quickfix", [])


def test_settings_parsing_and_precedence():
    s, problems = parse_settings({"gradguard": {"Run": "onsave", "log_level": "WARN", "severity": {"gg102": "information"}, "select": "GG101, GG102"}})
    assert problems == []
    assert (s.run, s.log_level, s.select) == ("onSave", "warning", ("GG101", "GG102"))
    assert s.severity["GG102"].value == "info"
    base, _ = parse_settings({"debounce": 50, "language": "zh_CN"})
    snap, _ = parse_settings({"ignore": ["GG101"]}, base)
    assert (snap.debounce, snap.language, snap.ignore) == (50, "zh-cn", ("GG101",))
    bad, problems = parse_settings({"debounce": True, "language": "fr", "bogus": 1})
    assert bad.debounce == Settings().debounce and bad.language == "auto"
    assert len(problems) == 3 and any("bogus" in p for p in problems)
    assert parse_settings(["not", "a", "table"])[1]
    typo, problems = parse_settings({"severity": {"GG999": "hint", "GG101": "warning"}})  # kept, and said
    assert typo.severity["GG101"].value == "warning" and len(problems) == 1 and "severity.GG999" in problems[0]
    assert parse_settings(None) == (Settings(), [])
    assert resolve_language("auto", "zh-TW") == "zh" and resolve_language("auto", "en-GB") == "en"
    assert resolve_language("en", "zh-CN") == "en" and resolve_language("zh-cn", None) == "zh"


def test_idioms_ignore_comments_and_strings():
    line = 'y = x.detach()  # not .data here'
    assert idiom_at(line, line.index("detach"))[0].key == "detach"
    assert idiom_at(line, line.index("data")) is None
    s = 'msg = "# call .backward( later"; z.backward()'
    assert idiom_at(s, s.rindex("backward"))[0].key == "backward"
    assert idiom_at("opt.zero_grad()", 5)[0].key == "zero_grad"
    assert idiom_at("x.detach_()", 3)[0].key == "detach_"


def test_diagnostics_built_as_they_travel_are_valid_lsp_diagnostics():
    """The server builds each Diagnostic as its JSON (convert.diagnostic_json)
    instead of as a protocol object. Every one, for every fixture program and
    in a notebook of Chinese cells, must read back as an lsprotocol Diagnostic
    and write out again unchanged: the field names, the types and the left-out
    fields are the protocol's own. UTF-16 columns are checked against the line."""
    from pathlib import Path

    from lsprotocol.converters import get_converter

    from gradguard.engine import check_source
    from gradguard.lsp.convert import diagnostic_json, fixes_data

    conv = get_converter()
    fixtures = sorted((Path(__file__).parent.parent / "fixtures").glob("*.py"))
    assert len(fixtures) > 20
    seen = 0
    codec = Codec("utf-16")
    for path in fixtures:
        text = path.read_text(encoding="utf-8")
        smap = SourceMap.single(path.as_uri(), text, 7)
        for lang in ("en", "zh"):
            for f in check_source(text, str(path)).findings:
                uri, d = diagnostic_json(f, smap, codec, lang)
                assert uri == path.as_uri()
                obj = conv.structure(d, lsp.Diagnostic)
                assert conv.unstructure(obj) == d
                line = text.split("\n")[f.range.start.line]
                assert obj.range.start.character == codec.to_client(line, f.range.start.character)
                assert d["data"]["version"] == 7 and d["data"]["fixes"] == len(f.fixes)
                # the fixes are made when asked, for the diagnostic as the client sends it back
                full = fixes_data([f], smap, codec, lang, uri, obj.code, d["range"], 7)
                assert full is not None and len(full["fixes"]) == len(f.fixes)
                assert all(e["version"] == 7 and e["uri"] == uri for fx in full["fixes"] for e in fx["edits"])
                assert fixes_data([f], smap, codec, lang, uri, obj.code, d["range"], 6) is None  # another version
                # a client that recomputes the columns (Neovim sends byte columns back) finds it by data.n
                moved = {"start": {"line": d["range"]["start"]["line"], "character": 999},
                         "end": d["range"]["end"]}
                assert d["data"]["n"] == -1  # one finding built alone has no place in a result
                assert fixes_data([f], smap, codec, lang, uri, obj.code, moved, 7, 0) == full
                assert fixes_data([f], smap, codec, lang, uri, obj.code, moved, 7) is None
                seen += 1
    assert seen > 50
    # a notebook: every diagnostic lands in its own cell, in that cell's coordinates
    cell0 = "import torch\nfrom torch import nn\n# 训练循环\ngru = nn.GRU(2, 3)\n隐 = torch.zeros(1, 1, 3)"
    cell1 = ("opt = torch.optim.SGD(gru.parameters(), lr=0.1)\nfor x in torch.randn(4, 1, 5, 2):\n"
             "    out, 隐 = gru(x, 隐)  # 状态\n    out.sum().backward()\n    opt.step()")
    source, smap = SourceMap.of_cells([("cell0", cell0, 1), ("cell1", cell1, 2)])
    # (the cell never zeroes its gradients: GG205 reports the step too; this is about GG101's place)
    found = [f for f in check_source(source, "nb.ipynb").findings if f.code == "GG101"]
    assert found
    for f in found:
        uri, d = diagnostic_json(f, smap, codec, "zh")
        assert uri == "cell1"
        assert conv.unstructure(conv.structure(d, lsp.Diagnostic)) == d
        assert d["range"]["start"]["line"] == 2 and d["data"]["version"] == 2


def test_document_changes_use_lsp_line_ends_and_clamp_like_an_editor():
    from gradguard.lsp.document import LspTextDocument, apply_change, lsp_lines

    def rng(a, b, c, d):
        return lsp.Range(lsp.Position(a, b), lsp.Position(c, d))

    u16 = Codec("utf-16")
    text = "页\x0c码 😀\r\nb\u2028c\rd\ne"
    assert lsp_lines(text) == ("页\x0c码 😀\r\n", "b\u2028c\r", "d\n", "e")
    assert lsp_lines("a\n") == ("a\n",) and lsp_lines("") == ()
    # after the emoji (two UTF-16 units), on the line after a form feed, after \r alone
    assert apply_change(text, rng(0, 6, 0, 6), "!", u16) == "页\x0c码 😀!\r\nb\u2028c\rd\ne"
    assert apply_change(text, rng(1, 2, 2, 1), "X", u16) == "页\x0c码 😀\r\nb\u2028X\ne"
    # a \r\n is one line end: deleting line 0 whole takes both characters
    assert apply_change(text, rng(0, 0, 1, 0), "", u16) == "b\u2028c\rd\ne"
    # a column past the end of its line is the line's end; a line past the last, the text's end
    assert apply_change(text, rng(2, 99, 2, 99), "~", u16) == "页\x0c码 😀\r\nb\u2028c\rd~\ne"
    assert apply_change(text, rng(9, 0, 9, 0), "\nf", u16) == text + "\nf"
    # in the middle of a surrogate pair: before the emoji (rounds down, as the codec does)
    assert apply_change("😀a", rng(0, 1, 0, 1), "^", u16) == "^😀a"
    # the same columns counted in UTF-8 bytes
    assert apply_change(text, rng(0, 12, 0, 12), "!", Codec("utf-8")) == "页\x0c码 😀!\r\nb\u2028c\rd\ne"

    doc = LspTextDocument("file:///x.py", text, version=1, codec=u16)
    doc.apply_change(lsp.TextDocumentContentChangePartial(range=rng(3, 0, 3, 1), text="最后 🚀"))
    assert doc.source == "页\x0c码 😀\r\nb\u2028c\rd\n最后 🚀"
    assert doc.lines == lsp_lines(doc.source) and len(doc.lines) == 4


def test_document_model_follows_an_editor_through_random_edits():
    """2,000 seeded random incremental edits (insertions, deletions, replacements
    spanning lines, text holding every character str.splitlines() breaks at, all
    three line ends, Chinese text and emoji) applied to the server's document and
    to an editor's model of the text (tests/lsp/lsp_harness.apply_lsp_edits): the
    texts stay equal after every edit. (pygls's own document fails at the first.)"""
    from gradguard.lsp.document import LspTextDocument
    from gradguard.model.text import split_lines

    rnd = random.Random(20261201)
    pieces = ["a", "x = 1", "隐状态", "😀", " ", "\t", "\n", "\r\n", "\r", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e",
              "\x85", "\u2028", "\u2029", "# 注释 🚀", "def f():\n    pass"]

    def snippet() -> str:
        return "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))

    def u16(s: str) -> int:
        return len(s.encode("utf-16-le")) // 2

    def pos(lines) -> lsp.Position:
        ln = rnd.randrange(len(lines) + 1)  # one past the last line, too
        width = u16(lines[ln]) if ln < len(lines) else 0
        return lsp.Position(ln, rnd.randint(0, width + 2))  # a little past the line's end, too

    text = "".join(snippet() for _ in range(20))
    doc = LspTextDocument("file:///fuzz.py", text, version=1, codec=Codec("utf-16"))
    for i in range(2000):
        lines = split_lines(text)
        a, b = sorted((pos(lines), pos(lines)), key=lambda p: (p.line, p.character))
        new = snippet()
        text = apply_lsp_edits(text, [lsp.TextEdit(range=lsp.Range(a, b), new_text=new)])
        doc.apply_change(lsp.TextDocumentContentChangePartial(range=lsp.Range(a, b), text=new))
        assert doc.source == text, (i, a, b, new)


def test_the_editor_and_the_cli_read_a_notebook_as_the_same_program():
    """One notebook model: the cells the editor sends and the same cells in an
    .ipynb file give the same program and the same cell boundaries, through
    IPython lines, an indented first line (the wrapper line in no cell) and
    non-ASCII text; a wrapper line belongs to no cell in the editor's map."""
    import json

    from gradguard.engine.notebook import code_cells, concatenate, notebook_map, notebook_source

    cells = ["import torch\n%matplotlib inline\n隐 = torch.zeros(3)  # 状态",
             " x = 1\n y = !ls",
             "%%time\nfor i in range(3):\n    pass",
             "for i in range(2):\n    !echo hi\n    z = 隐 * 2"]
    nb = {"cells": [{"cell_type": "markdown", "source": "# 笔记"}]
          + [{"cell_type": "code", "source": c, "outputs": []} for c in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    data = json.dumps(nb, ensure_ascii=False).encode("utf-8")
    source, smap = SourceMap.of_cells([(f"cell{i}", c, i + 10) for i, c in enumerate(cells)])
    assert source == notebook_source(data) == concatenate(code_cells(data))[0]
    cli = notebook_map(data)
    assert [c.start for c in smap.parts] == [c.start for c in cli.cells]
    assert cli.keys == (2, 3, 4, 5) and [p.version for p in smap.parts] == [10, 11, 12, 13]
    wrapper = smap.parts[1].start - 1
    assert source.split("\n")[wrapper] == "with __ipython_cell__:"
    assert smap.part_at(wrapper) is None and cli.locate(wrapper) == (0, 3)
    for line in range(len(source.split("\n"))):
        part = smap.part_at(line)
        if part is not None:
            i, ln = cli.locate(line)
            assert part.uri == f"cell{i}" and part.line(ln) == cells[i].split("\n")[ln]


def test_project_configs_report_a_broken_pyproject_once_and_reload_when_it_changes(tmp_path):
    import os

    from gradguard.lsp.configuration import ProjectConfigs

    shown = []
    configs = ProjectConfigs(shown.append)
    proj = tmp_path / "项目"
    (proj / "pkg").mkdir(parents=True)
    py = proj / "pyproject.toml"
    py.write_text("[tool.gradguard]\nselect = 5\n", encoding="utf-8")
    train = str(proj / "pkg" / "train.py")
    assert configs.for_path(train, None).select == () and len(shown) == 1
    assert configs.for_path(train, None).select == () and len(shown) == 1  # once, not per analysis
    py.write_text('[tool.gradguard]\nselect = ["GG101"]\n', encoding="utf-8")
    os.utime(py, (1, 1))  # a new modification time: read again
    assert configs.for_path(train, None).select == ("GG101",)
    assert configs.for_path(None, str(proj)).select == ("GG101",)  # no file: the workspace root's
    assert configs.for_path(None, None).select == ()
    configs.forget()
    py.write_text("[tool.gradguard]\nselect = 5\n", encoding="utf-8")
    assert configs.for_path(train, None).select == () and len(shown) == 2  # reported again after forget
    py.write_text('[tool.gradguard]\nselect = ["GG101"]\n[tool.gradguard.severity]\nGG999 = "hint"\n', encoding="utf-8")
    os.utime(py, (2, 2))
    assert configs.for_path(train, None).select == ("GG101",)  # honoured, and the code no rule has is named
    assert configs.for_path(train, None).select == ("GG101",) and len(shown) == 3 and "severity.GG999" in shown[2]


def test_editor_settings_per_folder_longest_first_with_window_keys_global(tmp_path):
    from gradguard.lsp.configuration import EditorSettings

    editor = EditorSettings()
    editor.apply({"language": "zh-cn"}, "initializationOptions")
    changed, problems = editor.apply({"debounce": 50, "run": "onSave"}, "workspace/configuration")
    assert changed and not problems and editor.current.language == "zh-cn"  # on top of the init options
    outer, inner = tmp_path / "外", tmp_path / "外" / "内"
    shown = []
    editor.apply_folders({}, [(str(outer), {"enable": False, "debounce": 9}), (str(inner), {"select": ["GG102"]}),
                              (str(tmp_path / "same"), {"debounce": 50, "run": "onSave"}),
                              (str(tmp_path / "bad"), {"run": "sometimes"})], shown.append)
    assert len(shown) == 1 and "run" in shown[0]
    assert not editor.for_path(str(outer / "a.py")).enable
    assert editor.for_path(str(outer / "a.py")).debounce == 50  # window-scoped: the global value
    assert editor.for_path(str(inner / "b.py")).select == ("GG102",) and editor.for_path(str(inner / "b.py")).enable
    assert editor.for_path(str(tmp_path / "same" / "c.py")) is editor.current  # no different folder entry
    assert editor.for_path(str(tmp_path / "外面.py")) is editor.current  # a prefix of the name is not the folder
