"""Notebook cells ↔ the concatenated program the core analyses: edits made in
the concatenation's coordinates land in the right cell, formatting survives."""

import json

import pytest

from gradguard.model.findings import Position, Range, TextEdit
from gradguard.engine.notebook import apply_notebook_edits, notebook_source


def _nb(sources, as_list=True):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "说明"}]
    for src in sources:
        cells.append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                      "source": src.splitlines(keepends=True) if as_list else src})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _edit(line, col, text, end_line=None, end_col=None):
    return TextEdit(Range(Position(line, col), Position(end_line if end_line is not None else line,
                                                        end_col if end_col is not None else col)), text)


@pytest.mark.parametrize("as_list", [True, False])
@pytest.mark.parametrize("indent", [1, 2, None])
def test_edits_go_to_their_cell_and_the_json_keeps_its_shape(as_list, indent):
    nb = _nb(["%pip install x\na = 1\n", "for i in range(3):\n    b = a\n"], as_list)
    text = json.dumps(nb, indent=indent, ensure_ascii=False) + ("\n" if indent else "")
    lines = notebook_source(text.encode()).split("\n")
    assert lines[0] == ""  # the magic is blanked, the line kept
    loop = lines.index("for i in range(3):")
    out = apply_notebook_edits(text.encode(), [_edit(loop + 1, 4, "b = b  # 改\n    ")]).decode()
    new = json.loads(out)
    assert new["cells"][0] == nb["cells"][0] and new["cells"][1] == nb["cells"][1]
    src = new["cells"][2]["source"]
    joined = "".join(src) if as_list else src
    assert joined == "for i in range(3):\n    b = b  # 改\n    b = a\n"
    assert isinstance(src, list) == as_list
    assert out == json.dumps(new, indent=indent, ensure_ascii=False) + ("\n" if indent else "")


def test_an_edit_across_two_cells_is_left_out_and_crlf_is_kept():
    nb = _nb(["a = 1\n", "b = 2\n"])
    text = json.dumps(nb, indent=1).replace("\n", "\r\n") + "\r\n"
    second = notebook_source(text.encode()).split("\n").index("b = 2")
    assert apply_notebook_edits(text.encode(), [_edit(0, 0, "x", second, 0)]) == text.encode()
    out = apply_notebook_edits(text.encode(), [_edit(second, 0, "# c\n")]).decode()
    assert "\r\n" in out and "\n" not in out.replace("\r\n", "")
    assert json.loads(out)["cells"][2]["source"] == ["# c\n", "b = 2\n"]


def test_malformed_notebook_is_a_value_error():
    with pytest.raises(ValueError):
        apply_notebook_edits(b'{"cells": 3}', [_edit(0, 0, "x")])


def test_ipython_escapes_are_blanked_only_where_a_statement_starts():
    """A line starting with % is a magic only at the start of a logical line; a
    continuation line of a call ("% (epoch, loss)") is Python's modulo. The
    Chinese d2l notebooks print that way and were reported as syntax errors."""
    from gradguard.engine.notebook import blank_ipython

    cell = ("%matplotlib inline\n"
            "print('epoch %d, loss %.4f'\n"
            "      % (epoch + 1, loss))  # 打印\n"
            "!pip install torch\n"
            "doc = '''\n"
            "%not a magic inside a string\n"
            "'''\n"
            "y = 1 \\\n"
            "  % 2\n"
            "model?\n"
            "%time train()")
    out = blank_ipython(cell).split("\n")
    assert len(out) == len(cell.split("\n"))  # positions are kept
    assert [i for i, ln in enumerate(out) if not ln] == [0, 3, 9, 10]
    import ast

    ast.parse("epoch = loss = 0\n" + "\n".join(out))


# What IPython 8's input transforms make of each form (checked with
# IPython.core.inputtransformer2.TransformerManager().transform_cell), and the
# line gradguard reads in its place: same line count, the left side's columns kept.
IPYTHON_FORMS = [
    ("files = !ls -la", "files = get_ipython().getoutput('ls -la')", "files = None"),
    ("a, b = !ls", "a, b = get_ipython().getoutput('ls')", "a, b = None"),
    ("self.x = !ls", "self.x = get_ipython().getoutput('ls')", "self.x = None"),
    ("x[0] = !ls", "x[0] = get_ipython().getoutput('ls')", "x[0] = None"),
    ("t = %timeit -o f()", "t = get_ipython().run_line_magic('timeit', '-o f()')", "t = None"),
    ("torch.*Tensor?", "get_ipython().run_line_magic('psearch', 'torch.*Tensor')", ""),
    ("*Tensor?", "get_ipython().run_line_magic('psearch', '*Tensor')", ""),
    ("    !pip install torch", "    get_ipython().system('pip install torch')", "    pass"),
    ("    %time g()", "    get_ipython().run_line_magic('time', 'g()')", "    pass"),
    ("    输出 = !echo 你好", "    输出 = get_ipython().getoutput('echo 你好')", "    输出 = None"),
    ("    y = %env HOME", "    y = get_ipython().run_line_magic('env', 'HOME')", "    y = None"),
]


@pytest.mark.parametrize("line,ipython,read", IPYTHON_FORMS)
def test_ipython_forms_are_read_as_ipython_reads_them(line, ipython, read):
    """`var = !cmd` (top level and indented), `x = %magic`, an escape alone in
    an indented block and the wildcard search `torch.*Tensor?` are valid IPython;
    they were syntax errors. The block around an indented one still parses."""
    import ast

    from gradguard.engine.notebook import blank_ipython

    indented = line.startswith(" ")
    cell = ("for i in range(2):\n" if indented else "") + line + "\nprint(1)  # 后面的行不动"
    out = blank_ipython(cell).split("\n")
    assert out[1 if indented else 0] == read
    assert out[-1] == "print(1)  # 后面的行不动"
    assert len(out) == len(cell.split("\n"))
    ast.parse("\n".join(out))
    ast.parse(("for i in range(2):\n" if indented else "") + ipython)  # what IPython runs is Python too
    if "=" in read:
        assert read.split("=")[0] == line.split("=")[0]  # the names keep their columns


@pytest.mark.parametrize("line", ["y = a != b", "y = a == b", "z = a <= b", "x = 5 %3", "s = 'x = !ls'",
                                  "d = {'k': 1}  # x = !ls", "x += 1"])
def test_python_that_looks_like_an_ipython_assignment_is_left_alone(line):
    from gradguard.engine.notebook import blank_ipython

    assert blank_ipython(line + "\n") == line + "\n"


def test_the_editor_reads_the_same_ipython_forms_with_exact_positions():
    """The language server builds the notebook's program with the same reader
    (cells keyed by URI, with versions): an indented `!cmd` and `var = !cmd`
    leave every cell's lines where they were."""
    from gradguard.engine.notebook import concatenate

    cells = [("c0", "if True:\n    !pip install torch\n文件 = !ls", 1), ("c1", "x = %time 1 + 1\nprint(x)", 1)]
    text, cmap = concatenate(cells)
    assert text.split("\n") == ["if True:", "    pass", "文件 = None", "x = None", "print(x)"]
    assert cmap.locate(3) == (1, 0)
    import ast

    ast.parse(text)


# A notebook as other tools write it: numbers as JavaScript prints them (VS Code
# saves notebooks: 0.00001, 1e-7, 1.50 stay so), an escaped "é" and "/" next to
# raw Chinese, a hand-compacted object, a source list on one line. SRC is the
# code cell's source value.
_FOREIGN = '''{
 "cells": [
  {"cell_type": "markdown", "metadata": {}, "source": ["# 标题 caf\\u00e9 \\/ x"]},
  {
   "cell_type": "code",
   "execution_count": 3,
   "metadata": {"scrolled": true, "tags": []},
   "outputs": [
    {"name": "stdout", "output_type": "stream", "text": ["loss 0.00001 \\u001b[0m\\n"]},
    {"data": {"application/json": {"lr": 0.00001, "eps": 1e-7, "big": 1E+21, "w": 1.50}},
     "metadata": {}, "output_type": "execute_result", "execution_count": 3}
   ],
   "source": SRC
  }
 ],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
 "nbformat": 4, "nbformat_minor": 5
}
'''


@pytest.mark.parametrize("layout", ["one line", "one item a line", "a string"])
def test_a_fixed_notebook_keeps_every_byte_outside_the_source_it_changes(layout):
    """The fix rewrote the whole JSON: every number, escape and line of the
    outputs and metadata came back as Python's json writes them."""
    before = ["for i in range(3):\n", "    b = a  # 注释\n"]
    after = ["for i in range(3):\n", "    b = b  # 改\n", "    b = a  # 注释\n"]

    def value(lines):
        if layout == "one line":
            return json.dumps(lines, ensure_ascii=False)
        if layout == "a string":
            return json.dumps("".join(lines), ensure_ascii=False)
        return "[\n" + ",\n".join("    " + json.dumps(s, ensure_ascii=False) for s in lines) + "\n   ]"

    text = _FOREIGN.replace("SRC", value(before))
    loop = notebook_source(text.encode()).split("\n").index("for i in range(3):")
    out = apply_notebook_edits(text.encode(), [_edit(loop + 1, 4, "b = b  # 改\n    ")]).decode()
    assert out == _FOREIGN.replace("SRC", value(after))
    src = json.loads(out)["cells"][1]["source"]
    assert ("".join(src) if isinstance(src, list) else src) == "".join(after)


def test_a_fixed_ascii_notebook_keeps_escaping_non_ascii():
    nb = _nb(["for i in range(3):\n    b = a\n"])
    text = json.dumps(nb, indent=1) + "\n"  # "说明" written as \u8bf4\u660e
    loop = notebook_source(text.encode()).split("\n").index("for i in range(3):")
    out = apply_notebook_edits(text.encode(), [_edit(loop + 1, 4, "b = b  # 改\n    ")]).decode()
    nb["cells"][1]["source"] = ["for i in range(3):\n", "    b = b  # 改\n", "    b = a\n"]
    assert out == json.dumps(nb, indent=1) + "\n"


def test_a_fixed_cell_keeps_its_unchanged_lines_as_they_were_listed():
    """A source list holds one line per item, split at \\n; the fixed cell was
    split again with str.splitlines, which also breaks at a form feed (a page
    break), U+2028 and \\x1c-\\x1e: untouched lines came back as two items."""
    nb = _nb(["for i in range(3):\n    b = a  # 第\x0c页 \u2028 \x1c\n    c = b\n"])
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    loop = notebook_source(text.encode()).split("\n").index("for i in range(3):")
    out = apply_notebook_edits(text.encode(), [_edit(loop + 2, 4, "d = c\n    ")]).decode()
    nb["cells"][1]["source"] = ["for i in range(3):\n", "    b = a  # 第\x0c页 \u2028 \x1c\n", "    d = c\n", "    c = b\n"]
    assert out == json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
@pytest.mark.parametrize("as_list", [True, False])
def test_a_line_a_fix_inserts_ends_as_its_cells_lines_do(eol, as_list):
    """A cell written with \\r\\n (a notebook made on Windows by a tool that
    keeps them) or \\r line ends: the inserted line ends the same way, as in a
    .py file (the program joins cells with \\n, and the fix's \\n went into
    the cell as it was, mixing line ends in one cell)."""
    src = "for i in range(3):\n    b = a  # 注释 😀\n".replace("\n", eol)
    nb = _nb([src], as_list)
    if as_list:  # a list item per line, each ending with the line's own end
        nb["cells"][1]["source"] = [ln + eol for ln in src.split(eol)[:-1]]
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    loop = notebook_source(text.encode()).split("\n").index("for i in range(3):")
    out = apply_notebook_edits(text.encode(), [_edit(loop + 1, 4, "b = b  # 改\n    ")]).decode()
    got = json.loads(out)["cells"][1]["source"]
    assert ("".join(got) if as_list else got) == f"for i in range(3):{eol}    b = b  # 改{eol}    b = a  # 注释 😀{eol}"
    assert out.count("\n") == text.count("\n") + (1 if as_list else 0)  # one item more: the inserted line


def test_a_notebook_with_a_bom_is_read_and_fixed_keeping_it():
    """VS Code opens and saves a notebook that starts with a UTF-8 BOM; it was
    reported as malformed ("not JSON: Unexpected UTF-8 BOM") and never checked.
    It is read, and a fix keeps the BOM and every other byte."""
    nb = _nb(["for i in range(3):\n    b = a  # 注释\n"])
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    data = b"\xef\xbb\xbf" + text.encode()
    loop = notebook_source(data).split("\n").index("for i in range(3):")
    out = apply_notebook_edits(data, [_edit(loop + 1, 4, "b = b  # 改\n    ")])
    nb["cells"][1]["source"] = ["for i in range(3):\n", "    b = b  # 改\n", "    b = a  # 注释\n"]
    assert out == b"\xef\xbb\xbf" + (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()
