"""Benchmark inputs, generated from the runnable fixture programs.

Real training code keeps its loops inside functions and its models in
classes, so each fixture program is turned into a *block*: its imports are
hoisted to the top of the generated file, its top-level names get a unique
suffix (so many copies can live in one file), and its module-level script
(``if __name__ == "__main__":`` body included) becomes a ``def run_<name>()``.
Blocks are concatenated until the wanted size.

Without fixtures (an early checkout), a few built-in programs of the same
shape stand in.
"""

from __future__ import annotations

import ast
import os
import random
import re
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

_FALLBACK = [
    '''\
import torch
import torch.nn as nn


class GRUTagger(nn.Module):
    def __init__(self, vocab=20, emb=8, hid=16, tags=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.GRU(emb, hid, batch_first=True)
        self.out = nn.Linear(hid, tags)

    def forward(self, x, hidden=None):
        y, hidden = self.rnn(self.emb(x), hidden)
        return self.out(y), hidden


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


model = GRUTagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
hidden = None
for step in range(4):
    x = torch.randint(0, 20, (2, 7))
    y = torch.randint(0, 5, (2, 7))
    out, hidden = model(x, hidden)
    loss = nn.functional.cross_entropy(out.reshape(-1, 5), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    hidden = repackage_hidden(hidden)
''',
    '''\
import torch
from torch import nn
# 种子：X 带 requires_grad，Y 由 X 算出
X = torch.rand(size=(2, 5), requires_grad=True)
true_w = torch.tensor([1, 2, 3, 4, 5.]).reshape((X.shape[1], -1))
Y = torch.matmul(X, true_w)
linear1 = nn.Linear(5, 1)
for i in range(10):
    l = (linear1(X) - Y) ** 2
    linear1.zero_grad()
    l.sum().backward()
''',
]


def fixture_sources() -> List[Tuple[str, str]]:
    """(name, source) of every runnable fixture program (or the built-in stand-ins)."""
    out: List[Tuple[str, str]] = []
    if FIXTURES.is_dir():
        for p in sorted(FIXTURES.glob("*.py")):
            try:
                text = p.read_text(encoding="utf-8")
                ast.parse(text)
            except (OSError, UnicodeDecodeError, SyntaxError):
                continue
            out.append((p.stem, text))
    if not out:
        out = [(f"builtin_{i}", s) for i, s in enumerate(_FALLBACK)]
    return out


class Block:
    """One fixture program, split for re-assembly."""

    def __init__(self, name: str, source: str):
        self.name = re.sub(r"\W", "_", name)
        tree = ast.parse(source)
        lines = source.splitlines()
        self.imports: List[str] = []
        self.defs: List[str] = []  # source text of defs/classes (with decorators)
        self.script: List[str] = []  # module-level statements, in order
        self.names: List[str] = []
        for stmt in tree.body:
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            text = "\n".join(lines[first - 1 : stmt.end_lineno])
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.imports.append(text)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs.append(text)
                self.names.append(stmt.name)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                continue  # module docstring
            elif _is_main_guard(stmt):
                for s in stmt.body:
                    f2 = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
                    self.script.append(_dedent("\n".join(lines[f2 - 1 : s.end_lineno])))
            else:
                self.script.append(text)
                if isinstance(stmt, ast.Assign):
                    self.names.extend(t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id[:1].isupper()
                                      and len(t.id) > 2)

    def render(self, suffix: str) -> str:
        """The block with its names suffixed; the script wrapped in a function."""
        parts = list(self.defs)
        if self.script:
            body = "\n".join("    " + ln if ln.strip() else "" for ln in "\n".join(self.script).splitlines())
            parts.append(f"def run_{self.name}():\n{body}")
        text = "\n\n\n".join(parts)
        for n in sorted(set(self.names), key=len, reverse=True):
            text = re.sub(rf"\b{re.escape(n)}\b", f"{n}{suffix}", text)
        return text.replace(f"def run_{self.name}()", f"def run_{self.name}{suffix}()")


def _is_main_guard(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare)
            and isinstance(stmt.test.left, ast.Name) and stmt.test.left.id == "__name__")


def _dedent(text: str) -> str:
    lines = text.splitlines()
    ind = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
    return "\n".join(ln[ind:] for ln in lines)


_BLOCKS: List[Block] = []


def blocks() -> List[Block]:
    if not _BLOCKS:
        for name, src in fixture_sources():
            try:
                _BLOCKS.append(Block(name, src))
            except SyntaxError:
                continue
    return _BLOCKS


def training_file(n_lines: int, seed: int = 0, header: str = "") -> str:
    """A realistic training module of about ``n_lines`` lines (never fewer)."""
    rng = random.Random(seed)
    bl = blocks()
    order = list(range(len(bl)))
    rng.shuffle(order)
    imports: Dict[str, None] = {}
    parts: List[str] = []
    count = 0
    k = 0
    while count < n_lines:
        b = bl[order[k % len(order)]]
        text = b.render(f"_{k}")
        for imp in b.imports:
            imports.setdefault(imp, None)
        parts.append(text)
        count += text.count("\n") + 3
        k += 1
    head = (header + "\n" if header else "") + '"""Generated training module (gradguard benchmark corpus)."""\n'
    return head + "\n".join(imports) + "\n\n\n" + "\n\n\n".join(parts) + "\n"


def write_project(dest: Path, n_files: int = 300, seed: int = 1) -> List[Path]:
    """A package tree of ``n_files`` modules (10 sub-packages) of 40–250 lines;
    about a third of the modules import a model or helper from a sibling
    module and use it (so cross-file resolution has work to do)."""
    rng = random.Random(seed)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "pyproject.toml").write_text("[project]\nname = 'benchproj'\nversion = '0'\n", encoding="utf-8")
    files: List[Path] = []
    defined: List[Tuple[str, str]] = []  # (module dotted, top-level name)
    n_pkgs = 10
    for i in range(n_files):
        pkg = f"proj/pkg{i % n_pkgs}"
        (dest / pkg).mkdir(parents=True, exist_ok=True)
        init = dest / pkg / "__init__.py"
        if not init.exists():
            init.write_text("", encoding="utf-8")
            files.append(init)
            if len(files) >= n_files:
                break
        header = ""
        if defined and rng.random() < 0.35:
            mod, name = rng.choice(defined)
            header = f"from {mod} import {name}\n\n_ = {name}\n"
        text = training_file(rng.randint(40, 250), seed=seed * 1000 + i, header=header)
        path = dest / pkg / f"mod{i}.py"
        path.write_text(text, encoding="utf-8")
        files.append(path)
        for m in re.finditer(r"^(?:def|class) (\w+)", text, re.M):
            if rng.random() < 0.2:
                defined.append((f"{pkg.replace('/', '.')}.mod{i}", m.group(1)))
        if len(files) >= n_files:
            break
    return files[:n_files]


def edit_target_line(text: str) -> Tuple[int, int]:
    """(line, column) in the middle of the file where typing into an identifier
    keeps the program valid: the end of the first name assigned in a function
    body near the middle."""
    lines = text.splitlines()
    mid = len(lines) // 2
    for off in range(0, len(lines)):
        for i in (mid + off, mid - off):
            if 0 <= i < len(lines):
                m = re.match(r"^(\s{8,})([A-Za-z_]\w*) = ", lines[i])
                if m:
                    return i, len(m.group(1)) + len(m.group(2))
    return mid, 0


def comment_target_line(text: str) -> Tuple[int, int]:
    lines = text.splitlines()
    mid = len(lines) // 2
    for off in range(len(lines)):
        i = mid + off
        if i < len(lines) and lines[i].startswith("    ") and lines[i].strip() and not lines[i].rstrip().endswith(("\\", ",")):
            return i, len(lines[i])
    return mid, 0


def sizes() -> Sequence[int]:
    return (100, 500, 1000, 2000, 5000, 10000, 20000)


if __name__ == "__main__":  # quick look: python -m bench.corpus
    t = training_file(1800)
    print(t[:2000])
    print(len(t.splitlines()), "lines;", len(blocks()), "blocks")
    os.makedirs("/tmp/gg-corpus", exist_ok=True)
