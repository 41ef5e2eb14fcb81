"""What a rule sees: one unit of analysis plus facts about the whole module.

A *unit* is a function body (methods and nested functions included, each a
unit of its own) or the module-level statements. Units are what the engine
caches and re-analyses incrementally; a rule must therefore depend only on
its unit and on the module :class:`Summary` (never on another unit's AST).
"""

from __future__ import annotations

import ast
from gradguard.model.record import Factory, record

from gradguard.model.findings import Position, Range
from gradguard.model.text import LineIndex, words

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Any, List, Mapping, Optional, Tuple


@record(frozen=False, eq=False)
class Unit:
    kind: str  # "module" | "function"
    body: List[ast.stmt]
    node: Optional[ast.AST] = None  # FunctionDef / AsyncFunctionDef for functions
    qualname: str = "<module>"
    class_node: Optional[ast.ClassDef] = None  # enclosing class, for methods
    parents: Tuple[ast.AST, ...] = ()  # enclosing defs/classes, outermost first
    # filled on demand by unit_text / unit_words (shared by the rules' triggers and pre-filters)
    text: Optional[str] = None
    words: Optional[frozenset] = None
    # the graph interpreter's run over this unit, shared by the rules that read it
    # (rules/common.py:unit_trace); False: it ran out of recursion depth
    trace: Any = None
    # every node of the body (ast_util.unit_nodes), walked once for every rule
    nodes: Any = None


def unit_text(unit: Unit, lines) -> str:
    """The source lines the unit's statements span (nested defs included)."""
    if unit.text is None:
        body = unit.body
        if not body:
            unit.text = ""
        else:
            first = min(s.lineno for s in body)
            last = max(getattr(s, "end_lineno", None) or s.lineno for s in body)
            unit.text = "\n".join(lines[first - 1:last])
    return unit.text


def unit_words(unit: Unit, lines) -> frozenset:
    """The words (identifier-like tokens) of :func:`unit_text`, NFKC-folded as
    Python folds identifiers: a pre-filter asks "is this name mentioned?" in
    time linear in the unit, however many names it asks about."""
    if unit.words is None:
        unit.words = frozenset(words(unit_text(unit, lines)))
    return unit.words


def unit_name_says(unit: Unit, words) -> bool:
    """Is one of ``words`` a part, between underscores, of the unit's def name (``_eval_step``)?"""
    name = getattr(unit.node, "name", None) if unit.kind == "function" else None
    if not isinstance(name, str):
        return False
    parts = name.lower().split("_")
    return any(w in parts for w in words)


@record(frozen=False, eq=False)
class ModuleContext:
    path: Optional[str]
    index: LineIndex
    # Merged module summary: name → hashable fact object (see analysis/summary.py).
    summary: Mapping[str, Any] = Factory(dict)
    imports: Mapping[str, str] = Factory(dict)  # local alias → qualified name
    # notes on paths a link of which is unknown (``unverified-notes``; off by default)
    unverified: bool = False

    # -- positions -------------------------------------------------------
    def pos(self, lineno: int, byte_col: int) -> Position:
        return Position(lineno - 1, self.index.char_col(lineno, byte_col))

    def range(self, node: ast.AST) -> Range:
        """The node's own range (start..end), in characters."""
        start = self.pos(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end_lineno = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end = Position(end_lineno - 1, len(self.index.line(end_lineno - 1)))
        else:
            end = self.pos(end_lineno, end_col)
        return Range(start, end)

    def line_range(self, node: ast.AST) -> Range:
        """From the node's start to the end of its first line (statement squiggle)."""
        start = self.pos(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        text = self.index.line(node.lineno - 1)  # type: ignore[attr-defined]
        end_char = len(text.rstrip())
        # do not run into a trailing comment
        r = self.range(node)
        if r.end.line == start.line:
            end_char = r.end.character
        return Range(start, Position(start.line, max(end_char, start.character)))

    def indent_of(self, lineno: int) -> str:
        text = self.index.line(lineno - 1)
        return text[: len(text) - len(text.lstrip())]

    # -- names -----------------------------------------------------------
    def qualify(self, expr: ast.AST) -> Optional[str]:
        """Dotted name of an expression through import aliases:
        ``nn.LSTM`` → ``torch.nn.LSTM`` when ``from torch import nn``."""
        name = dotted(expr)
        if name is None:
            return None
        head, dot, rest = name.partition(".")
        return self.imports.get(head, head) + dot + rest


_Name, _Attribute = ast.Name, ast.Attribute


def dotted(expr: ast.AST) -> Optional[str]:
    """``a.b.c`` → ``"a.b.c"``; anything that is not a Name/Attribute chain → None."""
    cls = expr.__class__  # AST node classes are never subclassed: an identity test is enough (hot path)
    if cls is _Name:
        return expr.id  # type: ignore[attr-defined]
    if cls is not _Attribute:
        return None
    parts: List[str] = []
    cur = expr
    while cur.__class__ is _Attribute:
        parts.append(cur.attr)
        cur = cur.value
    if cur.__class__ is not _Name:
        return None
    parts.append(cur.id)
    parts.reverse()
    return ".".join(parts)


def iter_units(stmts: List[ast.stmt], module_level: bool) -> List[Unit]:
    """All units inside ``stmts``. With ``module_level`` the non-def statements
    form the module unit (returned first, only if there are any)."""
    units: List[Unit] = []
    if module_level:
        body = [s for s in stmts if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        if body:
            units.append(Unit("module", body))
    for s in stmts:
        _collect_defs(s, units, (), None, "")
    return units


def _collect_defs(node: ast.AST, out: List[Unit], parents, cls, prefix):
    # iterative (an explicit stack, children pushed in reverse: the same order as
    # a recursive walk): an elif chain of a thousand branches is valid Python
    stack = [(node, parents, cls, prefix)]
    while stack:
        node, parents, cls, prefix = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qual = f"{prefix}{node.name}"
            out.append(Unit("function", node.body, node, qual, cls, parents))
            stack.extend((child, parents + (node,), None, qual + ".<locals>.") for child in reversed(node.body))
            continue
        if isinstance(node, ast.ClassDef):
            qual = f"{prefix}{node.name}"
            stack.extend((child, parents + (node,), node, qual + ".") for child in reversed(node.body))
            continue
        # compound statements (if __name__ == "__main__": def ...; try: ...)
        children = []
        for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field_name, ()) or ():
                if isinstance(child, ast.AST):
                    children.append(child)
        stack.extend((child, parents, cls, prefix) for child in reversed(children))
