"""Position arithmetic: UTF-8 bytes (ast) ↔ code points (core) ↔ UTF-16 (LSP)."""

import ast

import pytest

from gradguard.model.findings import Position, Range, TextEdit
from gradguard.model.text import (
    LineIndex,
    apply_text_edits,
    char_to_utf16,
    split_lines,
    utf8_to_char,
    utf16_to_char,
)


def test_split_lines_only_on_python_line_ends():
    assert split_lines("a\nb\r\nc\rd") == ["a", "b", "c", "d"]
    assert split_lines("x\n") == ["x", ""]
    # form feed and U+2028 are not line breaks for Python or LSP
    assert split_lines("a\x0cb\u2028c") == ["a\x0cb\u2028c"]


def test_ast_byte_columns_convert_to_characters_with_chinese_and_emoji():
    line = "隐状态 = 模型(输入, 隐状态)  # 😀 注释"
    tree = ast.parse(line)
    call = tree.body[0].value
    ch = utf8_to_char(line, call.col_offset)
    assert line[ch:].startswith("模型(")
    end = utf8_to_char(line, call.end_col_offset)
    assert line[ch:end] == "模型(输入, 隐状态)"


def test_utf16_round_trip_with_surrogate_pairs():
    line = "a😀b中c"
    # code points: a=0 😀=1 b=2 中=3 c=4 ; utf-16: a=0 😀=1,2 b=3 中=4 c=5
    assert [char_to_utf16(line, i) for i in range(6)] == [0, 1, 3, 4, 5, 6]
    assert [utf16_to_char(line, u) for u in (0, 1, 3, 4, 5, 6)] == [0, 1, 2, 3, 4, 5]
    # inside the surrogate pair rounds down; past the end clamps
    assert utf16_to_char(line, 2) == 1
    assert utf16_to_char(line, 99) == len(line)
    assert char_to_utf16(line, 99) == 6


def test_line_index_clamps_out_of_range_positions():
    idx = LineIndex("ab\ncd")
    assert idx.clamp(-3, 5) == (0, 0)
    assert idx.clamp(7, 0) == (1, 2)
    assert idx.clamp(0, 99) == (0, 2)
    assert idx.line(42) == ""


def test_apply_text_edits_keeps_crlf_and_applies_from_the_end():
    text = "a = 1\r\nb = 2\r\n"
    edits = [
        TextEdit(Range(Position(1, 0), Position(1, 0)), "# 中文\r\n"),
        TextEdit(Range(Position(0, 4), Position(0, 5)), "10"),
    ]
    assert apply_text_edits(text, edits) == "a = 10\r\n# 中文\r\nb = 2\r\n"


def test_apply_text_edits_rejects_overlaps():
    with pytest.raises(ValueError):
        apply_text_edits(
            "abcdef",
            [TextEdit(Range(Position(0, 0), Position(0, 3)), "x"), TextEdit(Range(Position(0, 2), Position(0, 4)), "y")],
        )


def _units_to_char_by_loop(line, units, width):
    """The reference: walk the characters, each ``width(ch)`` units wide."""
    if units <= 0:
        return 0
    seen = 0
    for i, ch in enumerate(line):
        w = width(ch)
        if seen + w > units:
            return i
        seen += w
    return len(line)


def test_client_columns_to_characters_agree_with_a_walk_over_the_characters():
    """The conversions count in C (a walk over the characters cost 0.2 s a
    keystroke on a line of millions of characters); on every column of lines
    of Chinese text, emoji, 𝐱, lone surrogates and tabs, they agree with the walk."""
    import random

    from gradguard.lsp.convert import Codec

    rnd = random.Random(5)
    alphabet = ["a", "\t", "中", "😀", "𝐱", "é", "\ud83d", "\ude00", "\x0c", " "]
    u16, u8 = Codec("utf-16"), Codec("utf-8")
    for _ in range(300):
        line = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12)))
        if rnd.random() < 0.5:
            line = line.replace("\ud83d", "").replace("\ude00", "")
        for units in range(-1, 2 * len(line) + 4):
            assert utf16_to_char(line, units) == u16.from_client(line, units) == _units_to_char_by_loop(
                line, units, lambda ch: 2 if ord(ch) > 0xFFFF else 1), (line, units)
        for units in range(-1, 4 * len(line) + 4):
            assert u8.from_client(line, units) == _units_to_char_by_loop(
                line, units, lambda ch: len(ch.encode("utf-8", "surrogatepass"))), (line, units)
