"""Mutations of fixture programs for the fuzz test (tests/test_fuzz.py) and its
longer run (scripts/fuzz.py): line deletions, duplications and swaps, token
insertions, truncation, deep nesting (100 / 500 / 1,000 levels of brackets,
calls, method chains, operators, ``elif``\\s), unusual Unicode and line ends.

An operation is a plain tuple, ``(kind, a, b, token)``: ``a`` and ``b`` are
taken modulo the size of what they index, so any integers make a valid
operation (hypothesis draws them and shrinks them; the script draws them from a
seeded ``random.Random``). :func:`check_one` is the property both assert.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import List, Sequence, Tuple

HERE = Path(__file__).resolve().parent

TOKENS = (
    "(", ")", "[", "]", "{", "}", ":", ",", "=", "*", "**", "@", "\\", "#", '"""', "'", "f'{", "lambda",
    "def f(", "class C:", "elif x:", "else:", "yield", "await", "return", "global h", "nonlocal h",
    "with torch.no_grad():", "for i in range(3):", "loss.backward()", ".backward(retain_graph=True)",
    ".detach()", "h = h.detach()", "opt.step()", "del loss", "\t", "    ", "\x00", "# noqa: GG101",
    "# 中文注释", "变量 = 1", "😀", "é", "e\u0301", "\u202e", "\ufeff", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e",
    "\x85", "\u2028", "\u2029", "\r", "\r\n", "\n", "ｂａｃｋｗａｒｄ", "\ud800",
)

KINDS = ("delete", "duplicate", "swap", "insert", "truncate", "nest", "eol", "indent")
NEST_DEPTHS = (100, 500, 1000)
NEST_SHAPES = ("parens", "brackets", "calls", "chain", "binop", "elif", "ifs", "unary")

Op = Tuple[str, int, int, int]


def fixture_sources() -> List[str]:
    out = []
    for p in sorted((HERE / "fixtures").glob("*.py")):
        out.append(p.read_text(encoding="utf-8"))
    return out


def nested(shape: str, depth: int) -> str:
    """One statement nested ``depth`` deep, of the given shape."""
    if shape == "parens":
        return "x = " + "(" * depth + "1" + ")" * depth + "\n"
    if shape == "brackets":
        return "x = " + "[" * depth + "]" * depth + "\n"
    if shape == "calls":
        return "x = " + "f(" * depth + "h" + ")" * depth + "\n"
    if shape == "chain":
        return "x = h" + ".detach()" * depth + "\n"
    if shape == "binop":
        return "x = " + " + ".join(["h"] * depth) + "\n"
    if shape == "unary":
        return "x = " + "-" * depth + "h\n"
    if shape == "elif":
        return "if h == 0:\n    pass\n" + "".join(f"elif h == {i}:\n    h = h + {i}\n" for i in range(1, depth)) + "\n"
    # ifs: nested blocks (Python allows 100 levels of indentation)
    return "".join("    " * i + "if h:\n" for i in range(depth)) + "    " * depth + "pass\n"


def apply(source: str, ops: Sequence[Op]) -> str:
    """``source`` with ``ops`` applied in order."""
    text = source
    for kind, a, b, t in ops:
        lines = text.splitlines(keepends=True) or [""]
        n = len(lines)
        if kind == "delete":
            del lines[a % n]
        elif kind == "duplicate":
            i = a % n
            lines.insert(i, lines[i])
        elif kind == "swap":
            i, j = a % n, b % n
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "insert":
            pos = a % (len(text) + 1)
            text = text[:pos] + TOKENS[t % len(TOKENS)] + text[pos:]
            continue
        elif kind == "truncate":
            text = text[: a % (len(text) + 1)]
            continue
        elif kind == "nest":
            stmt = nested(NEST_SHAPES[b % len(NEST_SHAPES)], NEST_DEPTHS[t % len(NEST_DEPTHS)])
            i = a % (n + 1)
            indent = ""
            if i < n:  # at the indentation of the line it goes before, so that it often still parses
                line = lines[i]
                indent = line[: len(line) - len(line.lstrip(" \t"))]
            lines.insert(i, "".join(indent + ln for ln in stmt.splitlines(keepends=True)))
        elif kind == "eol":
            eol = ("\r\n", "\r", "\n", "\x0c\n", "\u2028")[b % 5]
            body = [ln.rstrip("\r\n") for ln in lines]
            if t % 2:  # every line
                text = eol.join(body) + (eol if text.endswith(("\n", "\r")) else "")
            else:  # one line only
                i = a % n
                lines[i] = body[i] + eol
                text = "".join(lines)
            continue
        elif kind == "indent":
            i = a % n
            lines[i] = (" " * (b % 9) + "\t" * (t % 2)) + lines[i].lstrip(" \t")
        text = "".join(lines)
    return text


def random_ops(rng: random.Random, max_ops: int = 4) -> List[Op]:
    ops: List[Op] = []
    for _ in range(rng.randint(1, max_ops)):
        kind = rng.choice(KINDS)
        if kind == "nest" and rng.random() < 0.5:
            kind = "insert"  # deep nesting is slow to analyse: half as often as the others
        ops.append((kind, rng.randrange(1 << 16), rng.randrange(1 << 16), rng.randrange(1 << 16)))
    return ops


def result_key(result) -> tuple:
    return (result.findings, result.syntax_error, result.not_analysed)


def check_one(base: str, mutated: str) -> None:
    """The property: a full analysis of ``mutated`` raises nothing, and the
    incremental document edited from ``base`` to it (and back) agrees with a
    full analysis at every step. Raises AssertionError on a mismatch."""
    from gradguard.engine.document import Document, check_source

    full = check_source(mutated, "fuzz.py")
    assert full.internal_errors == (), full.internal_errors
    doc = Document(base, "fuzz.py")
    doc.result()
    inc = doc.update(mutated)
    assert result_key(inc) == result_key(full), ("incremental != full", mutated)
    back = doc.update(base)
    assert result_key(back) == result_key(check_source(base, "fuzz.py")), ("incremental (back) != full", mutated)
    fresh = Document(mutated, "fuzz.py").result()
    assert result_key(fresh) == result_key(full), ("document != check_source", mutated)
