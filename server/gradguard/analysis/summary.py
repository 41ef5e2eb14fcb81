"""Module summaries: the cross-unit facts a rule may use.

Every top-level statement is summarised on its own (and the result cached with
its chunk), into hashable ``(key, fact)`` pairs; the engine merges them into
``ModuleContext.summary`` (a :class:`FactTable`), which records what each unit
reads, so a unit is re-analysed when a fact it read changes. A rule that scans
many facts to answer one question asks it through :func:`query`, so that the
unit depends on the answer rather than on everything scanned.

Keys are namespaced: ``"import:<alias>"`` (qualified name), and whatever the
:class:`FactSource` s in use produce (e.g. ``"fn:<name>"``, ``"class:<name>"``,
``"global:<name>"``). Facts must be hashable (frozen records, tuples,
strings) and must not hold AST nodes.

Which fact sources exist is explicit, never a side effect of importing a rule:
each rule declares the sources it reads (``Rule.fact_sources``), the registry
collects them, and the engine passes them to :func:`summarize` and to
:mod:`gradguard.analysis.resolve`.
"""

from __future__ import annotations

import ast

from gradguard.model.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

    Fact = Tuple[str, object]
    Summarizer = Callable[[ast.stmt, bool], Iterable[Fact]]  # (statement, referenced)
else:
    Fact = Summarizer = object  # annotation names only


@record
class FactSource:
    """One producer of module facts.

    ``summarize(stmt, referenced)`` gives the facts of one top-level statement
    (see :func:`summarize`). ``cross_file_fold``: for facts that leave their
    file (:mod:`gradguard.analysis.resolve`), a source whose facts name other
    definitions of the same module (a def's callees) gives a fold that resolves
    those names where they are defined, since the importing file would look them
    up among its own; called as ``fold(name, facts, lookup)`` with ``facts`` the
    def's by-name facts {prefix: value} and ``lookup(other)`` the same for
    another def of the defining module ({} if there is none); returns the facts
    to export. ``backprop_prefixes``: keys this source only ever writes for
    code that back-propagates (the engine's cheap "can anything here
    back-propagate?" test reads them in facts imported from other files).
    ``callers(stmt)``: the facts a statement of another file writes about what it
    hands to methods of objects of a class it imports (``callargs:``); the resolver
    reads them in the files that import a class, for the file defining it.
    ``positional``: prefixes of keys whose key or value holds absolute line numbers
    of the statement summarised (where a callee edits in place, a module-level
    constructor's line): the engine summarises such a statement again when an edit
    above it moved it, where it would otherwise keep a moved statement's facts
    (every other fact is the same wherever the statement stands). ``names_lines(key,
    value)``: the same question for a fact whose key alone cannot tell (a def's facts
    that hold a line of its body only in some shapes, ``RetPos.stepped_after``)."""

    name: str
    summarize: Summarizer
    cross_file_fold: Optional[Callable] = None
    backprop_prefixes: Tuple[str, ...] = ()
    callers: Optional[Callable] = None
    positional: Tuple[str, ...] = ()
    names_lines: Optional[Callable[[str, object], bool]] = None


def _import_facts(stmt: ast.stmt) -> Iterable[Fact]:
    # iterative (children pushed in reverse, the order of a recursive walk): an
    # elif chain of a thousand branches is valid Python
    stack = [stmt]
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    yield f"import:{a.asname}", a.name
                else:
                    top = a.name.split(".")[0]
                    yield f"import:{top}", top
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for a in stmt.names:
                if a.name == "*":
                    continue
                yield f"import:{a.asname or a.name}", f"{stmt.module}.{a.name}"
        elif isinstance(stmt, (ast.If, ast.Try)) or type(stmt).__name__ == "TryStar":
            children: List[ast.stmt] = []
            for field_name in ("body", "orelse", "finalbody"):
                children.extend(getattr(stmt, field_name, ()))
            for h in getattr(stmt, "handlers", ()):
                children.extend(h.body)
            stack.extend(reversed(children))


def summarize(stmt: ast.stmt, referenced: bool = True, sources: Sequence[FactSource] = ()) -> Tuple[Fact, ...]:
    """The facts of one top-level statement: its imports, then each of
    ``sources``' in order. ``referenced=False`` says the statement is a ``def``
    whose name nothing else in the file mentions (see :func:`unreferenced_defs`):
    sources may then leave out the facts that are only ever looked up *by that
    name* at a call site, typically the costly interface facts that come from
    interpreting the body."""
    facts: List[Fact] = list(_import_facts(stmt))
    for src in sources:
        facts.extend(src.summarize(stmt, referenced))
    return tuple(facts)


def cross_file_folds(sources: Sequence[FactSource]) -> List[Callable]:
    """The folds of ``sources`` that have one, in order."""
    return [s.cross_file_fold for s in sources if s.cross_file_fold is not None]


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def word_counts(source: str) -> Dict[str, int]:
    """How often each word (:func:`gradguard.model.text.words`) occurs in ``source``."""
    from collections import Counter

    from gradguard.model.text import words

    return Counter(words(source))


def unreferenced_defs(source: str, stmts: Iterable[ast.stmt], counts: Optional[Dict[str, int]] = None) -> frozenset:
    """Names of the top-level functions among ``stmts`` whose name occurs only
    once in ``source`` (in its own ``def`` line): no call site, no reference,
    not even in a string or a comment. Their by-name facts cannot be read by
    any unit of this file, so a one-shot analysis need not compute them (an
    entry point run by a framework, dead code, a script's many ``run_*``
    functions). The incremental engine computes every fact: there, a
    reference typed a moment later must not change which facts exist.
    ``counts``: :func:`word_counts` of ``source``, when already known."""
    defs = [s.name for s in stmts if isinstance(s, _FUNCS)]
    if not defs:
        return frozenset()
    if counts is not None:
        return frozenset(name for name in defs if counts.get(name, 0) <= 1)
    # each name looked for (found twice: referenced), instead of counting every word of
    # the file (a list and a count of tens of thousands of words for a few dozen names)
    from gradguard.model.text import fold_identifiers

    text = fold_identifiers(source)
    return frozenset(name for name in defs if not _mentioned_twice(text, name))


def _mentioned_twice(text: str, name: str) -> bool:
    """Is ``name`` (an identifier) at least two of the words of ``text`` (the maximal
    runs of word characters that :func:`word_counts` counts)? An occurrence inside a
    longer word is no mention: the characters either side must not be word characters
    (``\\w``: alphanumeric or ``_``, as ``str.isalnum`` tells)."""
    end, n, seen = len(text), len(name), 0
    find = text.find
    i = find(name)
    while i >= 0:
        j = i + n
        if (i == 0 or not _is_word_char(text[i - 1])) and (j == end or not _is_word_char(text[j])):
            seen += 1
            if seen == 2:
                return True
            i = find(name, j)
        else:
            i = find(name, i + 1)
    return False


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def local_imports(body: Iterable[ast.stmt]) -> List[Fact]:
    """Imports inside a function body (``import torch.nn as nn`` in ``main``)."""
    out: List[Fact] = []
    for s in body:
        out.extend(_import_facts(s))
    return out


_MISSING = object()


class FactTable(dict):
    """The merged module facts of one analysis, as ``ModuleContext.summary``.

    A plain dict to read, except that the incremental engine can have it record
    what a unit reads: every key looked up (with what was found, or that it was
    missing) and every :meth:`query` answered. A unit whose recorded reads and
    queries give the same answers against the next analysis's table can keep
    its findings — so an edit that changes one function's facts re-analyses the
    units that asked about that function, not the whole file."""

    __slots__ = ("reads", "queries", "_memo")

    def __init__(self, *args):
        super().__init__(*args)
        self.reads: Optional[dict] = None  # key → value found (or _MISSING), while recording
        self.queries: Optional[dict] = None  # (fn, args) → answer, while recording
        self._memo: dict = {}

    def _look(self, key):
        """The value under ``key`` (or _MISSING), recorded when recording."""
        v = dict.get(self, key, _MISSING)
        if self.reads is not None:
            self.reads[key] = v
        return v

    # (not recording -- a one-shot check, every summarizer's own lookups -- each read is
    # the plain dict's: the interpreter asks the table on most names and calls it meets)
    def get(self, key, default=None):
        if self.reads is None:
            return dict.get(self, key, default)
        v = self._look(key)
        return default if v is _MISSING else v

    def __getitem__(self, key):
        if self.reads is None:
            return dict.__getitem__(self, key)
        v = self._look(key)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def __contains__(self, key) -> bool:
        if self.reads is None:
            return dict.__contains__(self, key)
        return self._look(key) is not _MISSING

    def query(self, fn, *args):
        """``fn(self, *args)``, memoised per table, recorded as one dependency:
        for answers derived from scanning many facts (an index of every function
        that back-propagates), so that a unit depends on the answer it got, not
        on every fact the scan looked at. ``fn`` must be a module-level function
        and ``args`` hashable."""
        key = (fn, args)
        memo = self._memo
        if key in memo:
            answer = memo[key]
        else:
            reads, self.reads = self.reads, None  # the scan's own lookups are not the unit's
            try:
                answer = memo[key] = fn(self, *args)
            finally:
                self.reads = reads
        if self.queries is not None:
            self.queries[key] = answer
        return answer

    def still_answers(self, reads: dict, queries: dict) -> bool:
        """Would a unit that recorded ``reads`` and ``queries`` against an older
        table read the same from this one?"""
        get = dict.get
        for k, v in reads.items():
            now = get(self, k, _MISSING)
            if now is not v and (now is _MISSING or v is _MISSING or now != v):
                return False
        for (fn, args), answer in queries.items():
            if self.query(fn, *args) != answer:
                return False
        return True


def query(summary, fn, *args):
    """:meth:`FactTable.query` on the engine's table; on any other mapping (a
    summarizer's own, a test's dict) simply ``fn(summary, *args)``."""
    q = getattr(summary, "query", None)
    return q(fn, *args) if q is not None else fn(summary, *args)
