"""The analysis engine: source → findings, whole or incremental.

The document is cut into *chunks*, one per top-level statement (a chunk owns
its decorators, and the blank lines and comments that follow it). Each chunk
is parsed, summarised and analysed on its own and keeps its results; an edit
re-parses only the chunks it touched, shifts the rest, and re-analyses only
what changed: a def chunk whose text is unchanged keeps its findings (moved by
the line delta) while every module fact its units read, and every summary
query they asked, still gives the same answer (``summary.FactTable``).
``check_source`` is the same machinery with nothing cached, so incremental and
full runs agree by construction — ``tests/test_incremental.py`` checks it on
random edits. Three differences, for speed only: a one-shot run does not
compute the by-name facts of functions nothing in the file mentions (no unit
can read them), it records no reads (nothing will be re-analysed), and it does
not analyse a file in which nothing can back-propagate (``may_backprop``: no
rule can report there).

With a syntax error, the chunks outside the broken region are still analysed
(their text is unchanged and parsed on its own before), so the user keeps
seeing what can be seen; ``CheckResult.syntax_error`` says what is broken.
"""

from __future__ import annotations

import ast
import os
import re
import warnings

from gradguard.model import noqa as _noqa
from gradguard.engine.config import Config
from gradguard.analysis.context import ModuleContext, Unit, iter_units, unit_name_says, unit_text, unit_words
from gradguard.analysis import knowledge as K
from gradguard.analysis.knowledge import imports_torch, other_framework_only
from gradguard.model.findings import Finding
from gradguard.analysis.values import describes_backward
from gradguard.analysis.summary import FactSource, FactTable, local_imports, summarize, unreferenced_defs
from gradguard.model.record import record, replace
from gradguard.model.text import LineIndex, line_ending, split_lines

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Iterable, List, Optional, Sequence, Tuple

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Tests set GRADGUARD_STRICT=1 (tests/conftest.py) so that a crash inside a
# rule fails loudly instead of silently dropping that unit's findings.
_STRICT_ENV = "GRADGUARD_STRICT"


@record
class SyntaxProblem:
    message: str
    line: int  # 0-based
    character: int  # 0-based, characters

    def __str__(self) -> str:
        return f"{self.line + 1}:{self.character + 1}: {self.message}"


@record
class CheckResult:
    findings: Tuple[Finding, ...]
    syntax_error: Optional[SyntaxProblem] = None
    # (rule, unit, error) for rules that crashed in this analysis: a bug of ours,
    # reported by the front ends; those units simply have no findings.
    internal_errors: Tuple[Tuple[str, str, str], ...] = ()
    # (0-based line, unit, rule codes) of units a rule could not analyse because
    # the code is nested deeper than the analysis can follow (a chain of hundreds
    # of calls, an elif chain of a thousand branches): their findings are
    # unknown, which the front ends say (never a silent "no finding").
    not_analysed: Tuple[Tuple[int, str, str], ...] = ()

    @property
    def partial(self) -> bool:
        return self.syntax_error is not None


class _Chunk:
    __slots__ = ("start", "nlines", "text", "tree", "tree_start", "kind", "facts", "findings", "basis",
                 "analyzed_start", "_may_backprop", "too_deep", "analyzed_after_blank", "facts_start",
                 "facts_positional")

    def __init__(self, start: int, nlines: int, text: str, tree: Optional[ast.Module], kind: str):
        self.start = start  # 0-based first line
        self.nlines = nlines
        self.text = text
        self.tree = tree  # linenos absolute as of tree_start
        self.tree_start = start
        self.kind = kind  # "def" | "stmt" | "empty" | "broken"
        self.facts: Optional[tuple] = None
        # where the chunk stood when its facts were made, and whether any of them
        # holds line numbers (``FactSource.positional``): such facts are made again
        # once the chunk has moved
        self.facts_start = start
        self.facts_positional = False
        self.findings: Optional[Tuple[Finding, ...]] = None
        # what the findings were computed from: (enabled rules, imports, the facts
        # the units read, the summary queries they asked — see FactTable)
        self.basis: Optional[tuple] = None
        self.analyzed_start = start
        self._may_backprop: Optional[bool] = None
        self.too_deep: Tuple[Tuple[int, str, str], ...] = ()  # not_analysed entries, as of analyzed_start
        # was the line before the chunk blank when it was analysed? A fix that puts a
        # definition before it (GG101's state-detaching helper) adds the blank lines
        # PEP 8 wants only where there are none
        self.analyzed_after_blank = True

    @property
    def end(self) -> int:
        return self.start + self.nlines

    def may_backprop(self) -> bool:
        """Does the chunk's text spell a backward (:func:`_text_may_backprop`)?
        Asked on every analysis, answered once per chunk (its text never changes)."""
        if self._may_backprop is None:
            self._may_backprop = _text_may_backprop(self.text)
        return self._may_backprop

    def positioned_tree(self) -> ast.Module:
        assert self.tree is not None, "a broken chunk has no tree"
        delta = self.start - self.tree_start
        if delta:
            ast.increment_lineno(self.tree, delta)
            self.tree_start = self.start
        return self.tree

    def get_facts(self, unreferenced: frozenset = frozenset()) -> tuple:
        if self.facts is not None and self.facts_positional and self.start != self.facts_start:
            self.facts = None  # a fact naming a line of this chunk: the chunk moved
        if self.facts is None:
            facts: list = []
            if self.tree is not None:
                sources = fact_sources()
                tree = self.positioned_tree()  # the lines where the chunk stands now
                for stmt in tree.body:
                    try:
                        facts.extend(summarize(stmt, getattr(stmt, "name", None) not in unreferenced, sources))
                    except RecursionError:
                        # nested too deeply to summarise: nothing is known about it (the
                        # rules, walking the same statement, record it as not analysed)
                        continue
                positional, by_value = _positional_prefixes(sources)
                self.facts_positional = any(
                    isinstance(k, str) and ((positional and k.startswith(positional))
                                            or any(names(k, v) for names in by_value)) for k, v in facts)
            self.facts = tuple(facts)
            self.facts_start = self.start
        return self.facts


def _parse(text: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning for invalid escapes etc.
        try:
            return ast.parse(text)
        except (RecursionError, MemoryError):
            # a 3,000-term expression, brackets nested by the thousand: Python's own
            # compiler gives up on these too, so the text is reported as not parsing
            # (and the statements around it are still analysed)
            raise SyntaxError(TOO_DEEP_TO_PARSE) from None


TOO_DEEP_TO_PARSE = "too deeply nested for Python's parser"
TOO_DEEP = "not analysed: nested too deeply"


def _stmt_first_line(stmt: ast.stmt) -> int:
    line = stmt.lineno
    for d in getattr(stmt, "decorator_list", ()) or ():
        line = min(line, d.lineno)
    return line


def _chunks_from_tree(tree: ast.Module, lines: Sequence[str], rs: int, re_: int) -> List[_Chunk]:
    """Cut a parsed region [rs, re_) (tree linenos already absolute) into chunks."""
    groups: List[Tuple[int, List[ast.stmt]]] = []
    for stmt in tree.body:
        b = _stmt_first_line(stmt) - 1
        if groups and groups[-1][0] >= b:
            groups[-1][1].append(stmt)
        else:
            groups.append((b, [stmt]))
    if not groups:
        return [_Chunk(rs, re_ - rs, "\n".join(lines[rs:re_]), ast.Module(body=[], type_ignores=[]), "empty")]
    out: List[_Chunk] = []
    for i, (b, stmts) in enumerate(groups):
        start = rs if i == 0 else b
        end = groups[i + 1][0] if i + 1 < len(groups) else re_
        kind = "def" if all(isinstance(s, _DEFS) for s in stmts) else "stmt"
        out.append(_Chunk(start, end - start, "\n".join(lines[start:end]), ast.Module(body=stmts, type_ignores=[]), kind))
    return out


# Column-0 lines that never start a statement: the rest of a compound statement,
# a closing bracket, and a line that starts with a backslash (it joins the next
# line to whatever came before: a class body goes on past a lone "\").
_CONTINUATION = re.compile(r"(else|elif|except|finally)\b|[)\]}\\]")


def _may_start_statement(lines: Sequence[str], i: int) -> bool:
    """Where :func:`_heuristic_chunks` cuts a text that does not parse: a line
    at column 0 that is not a comment, not the rest of a compound statement or
    of a bracket, and whose previous line is neither a decorator nor continued."""
    ln = lines[i]
    if not ln or ln[0].isspace() or ln[0] == "#" or _CONTINUATION.match(ln):
        return False
    prev = lines[i - 1].rstrip()
    return not (prev.startswith("@") or prev.endswith("\\"))


def _continued(text: str) -> bool:
    """Does a line of ``text`` end in a backslash? A chunk cut from a parse of
    more text may then not parse on its own (its last statement's line is joined
    to the next one's), so it is never taken for a piece without a parse."""
    return "\\\n" in text or text.endswith("\\")


def _continued_past_its_code(text: str) -> bool:
    """Can a backslash of ``text`` (a chunk's) join a line below it to its last statement?
    Only one on its last code line, or on a blank or comment line after it (``x = 1``,
    a line ``\\``, a blank line: the text alone ends in a continued line and does not
    parse). A backslash further up joins lines of the chunk itself, which it parsed with:
    a chunk cut where a fresh reading cuts parses alone as it did in the whole text."""
    for ln in reversed(text.split("\n")):
        if ln.endswith("\\"):
            return True
        s = ln.strip()
        if s and not s.startswith("#"):
            return False
    return False


# How many pieces a piece that does not parse may be merged with, looking for
# the end of its statement (a bound on the parses one broken line can cost).
_MAX_MERGE = 12


def _heuristic_chunks(lines: Sequence[str], rs: int, re_: int, known: Optional[Dict[str, _Chunk]] = None) -> List[_Chunk]:
    """Chunks of a region that does not parse as a whole: split at column-0
    statements, merge pieces until they parse, mark what never does 'broken'.
    A piece whose text is that of a ``known`` (previous) chunk is that chunk,
    taken out of ``known``: typing into one function does not re-parse the rest."""
    starts = [rs]
    starts.extend(i for i in range(rs + 1, re_) if _may_start_statement(lines, i))
    starts.append(re_)
    out: List[_Chunk] = []
    i = 0
    while i < len(starts) - 1:
        if known:
            a, b = starts[i], starts[i + 1]
            prev = known.get("\n".join(lines[a:b]))
            if prev is not None and prev.nlines == b - a and not _continued(prev.text):
                del known[prev.text]
                prev.start = a
                out.append(prev)
                i += 1
                continue
        done = False
        for j in range(i + 1, min(i + _MAX_MERGE, len(starts))):
            a, b = starts[i], starts[j]
            try:
                # leading newlines put the linenos where they belong: far cheaper
                # than ast.increment_lineno's walk over the whole tree
                tree = _parse("\n" * a + "\n".join(lines[a:b]))
            except (SyntaxError, ValueError):
                continue
            out.extend(_chunks_from_tree(tree, lines, a, b))
            i = j
            done = True
            break
        if not done:
            a, b = starts[i], starts[i + 1]
            out.append(_Chunk(a, b - a, "\n".join(lines[a:b]), None, "broken"))
            i += 1
    return out


def _syntax_problem(err: Exception, index: LineIndex, offset: int = 0) -> SyntaxProblem:
    if isinstance(err, SyntaxError):
        line = max(0, (err.lineno or 1) - 1 + offset)
        col = max(0, (err.offset or 1) - 1)  # SyntaxError.offset counts characters (1-based)
        line, col = index.clamp(line, col)
        return SyntaxProblem(err.msg or "invalid syntax", line, col)
    if isinstance(err, UnicodeEncodeError) and isinstance(err.object, str):
        # a lone surrogate (only an editor can send one): located where it is, in
        # words that do not depend on how much of the text was parsed with it
        text, at = err.object, err.start
        before = split_lines(text[:at])  # the text's own line ends, as the index splits them
        line, col = index.clamp(len(before) - 1 + offset, len(before[-1]))
        return SyntaxProblem(f"character U+{ord(text[at]):04X} cannot be encoded (a lone surrogate)", line, col)
    return SyntaxProblem(str(err), 0, 0)


class Document:
    """One source text, re-analysed incrementally by :meth:`update`."""

    def __init__(
        self,
        source: str,
        path: Optional[str] = None,
        config: Optional[Config] = None,
        external_facts: Optional[Dict[str, object]] = None,
        one_shot: bool = False,
    ):
        self.path = path
        self.config = config or Config()
        # (rule, unit, error) for rules that crashed in the latest analysis run.
        self.internal_errors: List[Tuple[str, str, str]] = []
        # Facts about names defined in *other* files (see analysis/resolve.py), merged
        # under the in-file facts; the fast path never waits for them.
        self.external_facts: Dict[str, object] = dict(external_facts or {})
        self.lines: List[str] = []
        self.chunks: List[_Chunk] = []
        self.syntax_error: Optional[SyntaxProblem] = None
        self._module_key: Optional[tuple] = None
        self._module_findings: Tuple[Finding, ...] = ()
        self._module_basis: Optional[tuple] = None
        self._module_too_deep: Tuple[Tuple[int, str, str], ...] = ()
        # The module facts of the previous analysis: every unit's basis held against
        # them, so while an edit leaves them equal, nothing needs re-asking.
        self._last_merged: Optional[Dict[str, object]] = None
        self._result: Optional[CheckResult] = None
        self._set_full(source)
        # One-shot (check_source): facts only unreferenced functions would be
        # looked up by are skipped (summary.unreferenced_defs). Kept only until
        # the first update: an incremental document computes every fact.
        self._unreferenced: frozenset = frozenset()
        self._one_shot = one_shot
        if one_shot:
            self._unreferenced = unreferenced_in(source, self.chunks)

    # -- text → chunks ---------------------------------------------------
    def _set_full(self, source: str, rs: int = 0, lines: Optional[List[str]] = None) -> None:
        """Read the text again from line ``rs`` to its end; the chunks before
        ``rs`` stay when :meth:`_prefix_stands` says they may (else all of it is
        read). The caller vouches that those lines are unchanged. Chunks that
        each parse on their own end where one top-level statement ends and the
        next begins, with no bracket, string or block open, so the whole text
        parses exactly when the rest does, and fails with the same error at the
        same place (the rest is parsed with its lines where they are). Typing
        inside an unclosed bracket in the middle of a file parses half of it,
        not all of it, at every keystroke."""
        self.eol = line_ending(source)
        lines = split_lines(source) if lines is None else lines
        self.index = LineIndex.of_lines(lines)
        self.lines = lines
        kept: List[_Chunk] = []
        if rs:
            kept = [c for c in self.chunks if c.end <= rs]
            if not self._prefix_stands(kept, lines, rs):
                kept, rs = [], 0
        old = {c.text: c for c in self.chunks[len(kept):] if c.kind != "broken"}
        if rs:
            text = "\n" * rs + "\n".join(lines[rs:])
        else:
            # the lines as an edit's region is parsed (joined by "\n"): Python words
            # some errors differently for "\r" line ends ("detected at line N")
            text = "\n".join(lines) if "\r" in source else source
        try:
            tree = _parse(text)
        except (SyntaxError, ValueError) as e:  # ValueError: NUL bytes
            self.syntax_error = _syntax_problem(e, self.index)
            chunks = _heuristic_chunks(lines, rs, len(lines), old)
        else:
            self.syntax_error = None
            chunks = _chunks_from_tree(tree, lines, rs, len(lines))
        self.chunks = kept + [self._reuse(c, old) for c in chunks]
        self._result = None

    @staticmethod
    def _prefix_stands(kept: List[_Chunk], lines: Sequence[str], rs: int) -> bool:
        """May the chunks before line ``rs`` stay while the rest is read again?
        They must be cut exactly as a fresh reading of the whole text would cut
        them should the rest not parse (:func:`_heuristic_chunks`): ``rs`` and
        every kept chunk's first line are places it cuts; none of the kept
        statements spans so many of its cuts (a long string with lines at
        column 0) that it would be given up on as broken; and no kept chunk ends
        in a line continued by a backslash, which can tie its statement to the
        next one's line so that it no longer parses on its own (a backslash
        inside a function's body joins two of its own lines: center-loss's
        ``distmat = ... + \\``, which made an error below it read the whole file)."""
        if not kept or kept[-1].end != rs or not _may_start_statement(lines, rs):
            return False
        for c in kept:
            if c.kind == "broken" or (c.start and not _may_start_statement(lines, c.start)):
                return False
            if _continued_past_its_code(c.text):
                return False
            if c.nlines > 1 and sum(1 for i in range(c.start + 1, c.end)
                                    if _may_start_statement(lines, i)) >= _MAX_MERGE - 2:
                return False
        return True

    @staticmethod
    def _reuse(new: _Chunk, old: Dict[str, _Chunk]) -> _Chunk:
        prev = old.get(new.text)
        if prev is None or prev.kind != new.kind:
            return new
        del old[new.text]  # one old chunk can stand for one new chunk only
        prev.start = new.start  # same text elsewhere: keep its tree, facts and findings
        return prev

    def update(self, source: str) -> CheckResult:
        new_lines = split_lines(source)
        old_lines = self.lines
        eol = line_ending(source)
        if eol != self.eol:  # fixes insert lines with the text's line ending
            self.eol = eol
            self._result = None
        if new_lines == old_lines:
            return self.result()
        if self._one_shot:  # leave one-shot mode: every fact, and what each unit read, from now on
            self._one_shot = False
            self._unreferenced = frozenset()
            for c in self.chunks:
                c.facts = c.findings = None
            self._module_key = None
        if not self.chunks:
            self._set_full(source)
            return self.result()
        n_old, n_new = len(old_lines), len(new_lines)
        p = 0
        lim = min(n_old, n_new)
        while p < lim and old_lines[p] == new_lines[p]:
            p += 1
        s = 0
        while s < lim - p and old_lines[n_old - 1 - s] == new_lines[n_new - 1 - s]:
            s += 1
        delta = n_new - n_old
        lo = max(p - 1, 0)
        hi = min(n_old - s + 1, n_old)
        a: Optional[int] = None
        b = -1  # with a: the last chunk the edit touches
        for i, c in enumerate(self.chunks):
            if c.end > lo and c.start < max(hi, lo + 1):
                if a is None:
                    a = i
                b = i
        # While the text does not parse, an edit in or next to a chunk that does
        # not parse on its own (the bracket being closed) takes every such chunk
        # into the region: when the region parses now, so does the whole text, and
        # the rest keeps its trees, facts and findings instead of the whole file
        # being parsed again. An edit elsewhere cannot mend them: the text is read
        # again from the first of them (or the edit) on.
        broken = [i for i, c in enumerate(self.chunks) if c.kind == "broken"]
        if broken:
            if a is None or not any(a - 1 <= i <= b + 1 for i in broken):
                self._set_full(source, self.chunks[min(a, broken[0]) if a is not None else 0].start, new_lines)
                return self.result()
            a, b = min(a, broken[0]), max(b, broken[-1])
        if a is None:
            self._set_full(source)
            return self.result()
        rs = self.chunks[a].start
        re_new = self.chunks[b].end + delta
        text = "\n".join(new_lines[rs:re_new])
        try:
            tree = _parse("\n" * rs + text)  # linenos absolute without a tree walk
        except (SyntaxError, ValueError):
            # maybe the edit needs its neighbours (a string opened here closes
            # below): only the rest of the file can tell.
            self._set_full(source, rs, new_lines)
            return self.result()
        self.lines = new_lines
        self.index = LineIndex.of_lines(new_lines)
        old_texts = {c.text: c for c in self.chunks[a : b + 1]}
        region = [self._reuse(c, old_texts) for c in _chunks_from_tree(tree, new_lines, rs, re_new)]
        tail = self.chunks[b + 1 :]
        if delta:
            for c in tail:
                c.start += delta
        self.chunks = self.chunks[:a] + region + tail
        self.syntax_error = None
        self._result = None
        return self.result()

    def set_external_facts(self, facts: Dict[str, object]) -> CheckResult:
        if facts != self.external_facts:
            self.external_facts = dict(facts)
            self._result = None
        return self.result()

    def set_config(self, config: Config) -> CheckResult:
        if config != self.config:
            self.config = config
            self._result = None
        return self.result()

    # -- analysis --------------------------------------------------------
    def result(self) -> CheckResult:
        if self._result is None:
            self.internal_errors = []
            try:
                findings, too_deep = self._analyse()
            except RecursionError:
                # a walk outside the rules (facts, summaries) that has no guard of its
                # own: the whole text is not analysed, and says so
                self._forget_analysis()
                findings, too_deep = (), ((0, "<module>", "*"),)
            self._result = CheckResult(findings, self.syntax_error, tuple(self.internal_errors), too_deep)
        return self._result

    def _forget_analysis(self) -> None:
        for c in self.chunks:
            c.findings = c.basis = None
            c.too_deep = ()
        self._module_key = self._module_basis = self._last_merged = None
        self._module_too_deep = ()

    def _analyse(self) -> Tuple[Tuple[Finding, ...], Tuple[Tuple[int, str, str], ...]]:
        rules = enabled_rules(self.config, self.path)
        if (all(r.needs_backprop for r in rules) and not any(c.may_backprop() for c in self.chunks)
                and not _facts_may_backprop(self.external_facts)):  # rules_to_run, each chunk's text read once
            # nothing here back-propagates (a model, a data module): only a rule that
            # reports without it may run, where its pattern is found
            rules = _rules_without_backprop(rules, [c.text for c in self.chunks])
            if not rules:
                # no rule can report, so no fact is computed; the module unit is
                # re-analysed once something does
                self._module_key = self._last_merged = None
                return (), ()
        merged = merge_facts(self.external_facts, (c.get_facts(self._unreferenced) for c in self.chunks))
        # (the notes on unverified paths change what a unit reports: part of the key)
        rules_key = tuple(r.code for r in rules) + (("unverified-notes",) if self.config.unverified_notes else ())
        ctx = module_context(self.path, self.index, merged, self.config)
        imports = ctx.imports
        record = not self._one_shot  # what each unit reads: only worth keeping for later edits
        # Typing inside a body rarely changes any fact: then every recorded read and
        # summary query answers as it did (each basis was checked against the last
        # table, or made from it), and re-asking the queries was half an edit's time.
        same_facts = self._last_merged is not None and dict.__eq__(merged, self._last_merged)
        self._last_merged = None  # until every unit has been checked against this table

        def still_valid(basis) -> bool:
            return (basis is not None and basis[0] == rules_key and basis[1] == imports
                    and (same_facts or merged.still_answers(basis[2], basis[3])))

        def analyse(units) -> Tuple[tuple, Optional[tuple], tuple]:
            """(findings, basis, too deep); no basis in one-shot mode: nothing is re-used."""
            if record:
                merged.reads, merged.queries = {}, {}
            too_deep: List[Tuple[int, str, str]] = []
            try:
                found = tuple(run_rules(rules, units, ctx, self.internal_errors, too_deep))
                return found, ((rules_key, imports, merged.reads, merged.queries) if record else None), tuple(too_deep)
            finally:
                merged.reads = merged.queries = None

        raw: List[Finding] = []
        deep: List[Tuple[int, str, str]] = []
        module_chunks: List[_Chunk] = []
        module_key: List[tuple] = []
        line_naming = {r.code for r in rules if r.names_lines}
        for c in self.chunks:
            if c.kind == "def":
                moved = c.start != c.analyzed_start and c.findings is not None and any(
                    f.code in line_naming for f in c.findings)
                after_blank = self._after_blank(c.start)
                if c.findings is None or moved or after_blank != c.analyzed_after_blank or not still_valid(c.basis):
                    tree = c.positioned_tree()
                    c.findings, c.basis, c.too_deep = analyse(iter_units(tree.body, False))
                    c.analyzed_start = c.start
                    c.analyzed_after_blank = after_blank
                shift = c.start - c.analyzed_start
                raw.extend(f.shifted(shift) for f in c.findings)  # shifted(0) is the finding itself
                deep.extend((line + shift, unit, codes) for line, unit, codes in c.too_deep)
            elif c.kind == "stmt":
                module_key.append((c.start, c.text, self._after_blank(c.start)))
                module_chunks.append(c)
        key = tuple(module_key)
        if key != self._module_key or not still_valid(self._module_basis):
            body: List[ast.stmt] = []
            for c in module_chunks:
                body.extend(c.positioned_tree().body)
            self._module_findings, self._module_basis, self._module_too_deep = analyse(iter_units(body, True))
            self._module_key = key
        raw.extend(self._module_findings)
        deep.extend(self._module_too_deep)
        if record:
            self._last_merged = merged
        return self._postprocess(raw), tuple(sorted(set(deep)))

    def _after_blank(self, start: int) -> bool:
        """Is the line before 0-based line ``start`` blank (or the file's start)?"""
        return start == 0 or start > len(self.lines) or not self.lines[start - 1].strip()

    def _postprocess(self, raw: List[Finding]) -> Tuple[Finding, ...]:
        return postprocess(raw, self.lines, self.config, self.eol)


def unreferenced_in(source: str, chunks, counts=None) -> frozenset:
    """:func:`summary.unreferenced_defs` over the top-level statements of ``chunks``,
    judged against the whole ``source`` (``counts``: its word counts, if known)."""
    return unreferenced_defs(source, (s for c in chunks if c.tree is not None for s in c.tree.body), counts)


def merge_facts(external_facts: Optional[Dict[str, object]], facts_in_chunk_order) -> FactTable:
    """The module summary: other files' facts under this file's, and of two
    chunks defining the same key the later one wins (as at run time)."""
    merged = FactTable(external_facts or {})
    for chunk_facts in facts_in_chunk_order:
        for k, v in chunk_facts:
            merged[k] = v
    return merged


def enabled_rules(config: Config, path: Optional[str]):
    from gradguard.rules import all_rules

    return [r for r in all_rules() if config.is_enabled(r.code, path)]


def enabled_declared(config: Config, path: Optional[str]):
    """:func:`enabled_rules` as the catalog declares them until the rules are
    imported (:func:`gradguard.rules.declared`): enough for :func:`nothing_to_report`,
    which a file that never back-propagates answers without importing any rule."""
    from gradguard.rules import declared

    return [r for r in declared() if config.is_enabled(r.code, path)]


_POSITIONAL: List[object] = [None, ((), ())]


def _positional_prefixes(sources: Tuple[FactSource, ...]) -> Tuple[Tuple[str, ...], tuple]:
    """The key prefixes of ``sources``' facts that hold line numbers
    (``FactSource.positional``) and the sources' questions for facts whose key alone
    cannot tell (``FactSource.names_lines``), collected once per tuple of sources."""
    if _POSITIONAL[0] is not sources:
        _POSITIONAL[:] = [sources, (tuple(p for s in sources for p in s.positional),
                                    tuple(s.names_lines for s in sources if s.names_lines is not None))]
    return _POSITIONAL[1]  # type: ignore[return-value]


def fact_sources() -> Tuple[FactSource, ...]:
    """The fact sources every file is summarised with: those the registered
    rules declare (:func:`gradguard.rules.fact_sources`)."""
    from gradguard.rules import fact_sources as declared

    return declared()


def resolve_external_facts(source: str, path: Optional[str], project_root: Optional[str] = None,
                           **options) -> Dict[str, object]:
    """:func:`gradguard.analysis.resolve.resolve_external_facts` with the rules'
    fact sources: facts about the names ``source`` imports from the user's
    other modules, summarised as this file's own definitions are."""
    from gradguard.analysis.resolve import resolve_external_facts as resolve

    return resolve(source, path, project_root, sources=fact_sources(), **options)


def module_context(path: Optional[str], index: LineIndex, merged: Dict[str, object],
                   config: Optional[Config] = None) -> ModuleContext:
    imports: Dict[str, str] = {k[7:]: v for k, v in merged.items() if k.startswith("import:")}  # type: ignore[misc]  # import facts are names
    return ModuleContext(path, index, merged, imports, bool(config is not None and config.unverified_notes))


def run_rules(rules, units: List[Unit], ctx: ModuleContext, internal_errors: List[Tuple[str, str, str]],
              too_deep: Optional[List[Tuple[int, str, str]]] = None):
    """Every enabled rule on every unit that meets its trigger (``Rule.trigger``,
    :func:`unit_meets`); a crashing rule costs that unit's
    findings of that rule (recorded in ``internal_errors``), never the run. A
    unit nested too deeply for a rule's walk is recorded in ``too_deep`` as
    (0-based line, unit, comma-separated rule codes)."""
    out: List[Finding] = []
    for unit in units:
        deep_codes: List[str] = []
        uctx = ctx
        if unit.kind == "function":
            extra = local_imports(unit.body)
            if extra:
                imports = dict(ctx.imports)
                imports.update((k[7:], v) for k, v in extra)  # type: ignore[misc]  # import facts are names
                uctx = ModuleContext(ctx.path, ctx.index, ctx.summary, imports, ctx.unverified)
        answers: Dict[Tuple[str, ...], bool] = {}  # this unit's answers to the triggers' conditions
        for rule in rules:
            trigger = rule.trigger
            if trigger is not None and not unit_meets(trigger, unit, uctx, answers):
                continue
            try:
                out.extend(rule.check(unit, uctx))
            except RecursionError:  # absurdly deep code: that unit's findings of this rule are unknown
                deep_codes.append(rule.code)
            except Exception as e:  # a rule bug must cost one unit's findings, never the editor
                if os.environ.get(_STRICT_ENV):
                    raise
                internal_errors.append((rule.code, unit.qualname, f"{type(e).__name__}: {e}"))
        if deep_codes:
            line = _unit_line(unit)
            if too_deep is not None:
                too_deep.append((line, unit.qualname, ",".join(deep_codes)))
            else:
                internal_errors.extend((code, unit.qualname, TOO_DEEP) for code in deep_codes)
    return out


def unit_meets(trigger, unit: Unit, ctx: ModuleContext, answers: Dict[Tuple[str, ...], bool]) -> bool:
    """Does ``unit`` meet every condition of ``trigger`` (:class:`gradguard.rules.base.Trigger`)?
    Each condition is answered once per unit and kept in ``answers``, which every
    rule's trigger on the unit shares (three GG2xx rules ask whether the unit's
    text spells ``backward``, five whether it imports torch, GG101 and GG103
    whether it is another framework's)."""
    if not unit.body:
        return False
    for cond in trigger.conditions:
        got = answers.get(cond)
        if got is None:
            got = answers[cond] = _answer(cond, unit, ctx)
        if not got:
            return False
    return True


def _answer(cond: Tuple[str, ...], unit: Unit, ctx: ModuleContext) -> bool:
    kind = cond[0]
    if kind == "torch":
        return imports_torch(ctx.imports)
    if kind == "not-other-framework":
        return not other_framework_only(ctx.imports)
    if kind == "text":
        text = unit_text(unit, ctx.index.lines)
        return any(s in text for s in cond[1:])
    if kind == "words" or kind == "words-or-name":
        words = unit_words(unit, ctx.index.lines)
        if any(w in words for w in cond[1:]):
            return True
        return kind == "words-or-name" and unit_name_says(unit, cond[1:])
    raise ValueError(f"unknown trigger condition {cond!r}")


def _unit_line(unit: Unit) -> int:
    """0-based line a unit is reported at: its ``def`` line, or its first statement's."""
    node = unit.node if unit.node is not None else (unit.body[0] if unit.body else None)
    return max(0, getattr(node, "lineno", 1) - 1)


def _with_eol(f: Finding, eol: str) -> Finding:
    """Rules write inserted lines with "\n"; a CRLF file must get CRLF back."""
    fixes = []
    changed = False
    for fx in f.fixes:
        edits = []
        for e in fx.edits:
            if "\n" in e.new_text:
                e = replace(e, new_text=e.new_text.replace("\r\n", "\n").replace("\n", eol))
                changed = True
            edits.append(e)
        fixes.append(replace(fx, edits=tuple(edits)))
    return replace(f, fixes=tuple(fixes)) if changed else f


def postprocess(raw: List[Finding], lines: Sequence[str], cfg: Config, eol: str = "\n") -> Tuple[Finding, ...]:
    """Drop findings outside the text or suppressed by ``# noqa``, apply the
    configured severities and the text's line ending, de-duplicate, and sort."""
    out: List[Finding] = []
    seen = set()
    n = len(lines)
    for f in raw:
        if not (0 <= f.range.start.line < n):
            continue  # never report outside the document
        if _noqa.is_suppressed(lines[f.range.start.line], f.code):
            continue
        # (a note on a path that cannot be verified stays a note whatever the rule's severity)
        sev = f.severity if f.data.get("unverified") else cfg.severity_for(f.code, f.severity)
        if sev != f.severity:
            f = replace(f, severity=sev)
        key = (f.code, f.range)
        if key in seen:
            continue
        seen.add(key)
        if eol != "\n" and f.fixes:
            f = _with_eol(f, eol)
        out.append(f)
    out.sort(key=Finding.sort_key)
    return tuple(out)


def check_source(
    source: str,
    path: Optional[str] = None,
    config: Optional[Config] = None,
    external_facts: Optional[Dict[str, object]] = None,
) -> CheckResult:
    """Analyse one source text from scratch. A file in which nothing can
    back-propagate (:func:`may_backprop`) has no findings from rules that need
    it (all of ours): then it is only parsed, for its syntax error."""
    if nothing_to_report((source,), external_facts, enabled_declared(config or Config(), path)):
        return CheckResult((), parse_problem(source), ())
    return Document(source, path, config, external_facts, one_shot=True).result()


def nothing_to_report(texts: Iterable[str], external_facts: Optional[Dict[str, object]], rules) -> bool:
    """No rule of ``rules`` can report: :func:`rules_to_run` is empty."""
    return not rules_to_run(texts, external_facts, rules)


def rules_to_run(texts: Iterable[str], external_facts: Optional[Dict[str, object]], rules) -> list:
    """``rules``, unless every one of them needs back-propagation and nothing in
    ``texts`` (a file, or its chunks) nor in the facts imported from other files
    can back-propagate: then only those whose ``also_without_backprop`` pattern
    is found in the text (often none). The one decision of the CLI, the parallel
    path and the incremental document (which asks it chunk by chunk, remembering
    each chunk's answer: ``_Chunk.may_backprop``)."""
    texts = list(texts)
    if (all(r.needs_backprop for r in rules) and not any(_text_may_backprop(t) for t in texts)
            and not _facts_may_backprop(external_facts)):
        return _rules_without_backprop(rules, texts)
    return list(rules)


def _rules_without_backprop(rules, texts: List[str]) -> list:
    out = []
    for r in rules:
        pattern = r.also_without_backprop
        if pattern is not None and any(pattern.search(t) for t in texts):
            out.append(r)
    return out


# Every way to back-propagate that the rules know spells one of the words of
# ``K.BACKPROP_WORD`` in the file (``K.text_may_backprop``).


def may_backprop(source: str, external_facts: Optional[Dict[str, object]] = None) -> bool:
    """Can anything in this file back-propagate? Only then can a graph be freed
    and reused, which is what every rule looks for. No: the text never spells a
    backward (identifiers NFKC-folded, as Python folds them: ``ｂａｃｋｗａｒｄ``
    *is* ``backward``) and no fact about a name imported from another file
    (:mod:`gradguard.analysis.resolve`) describes one. Most files of a real project
    (models, data, utilities) answer no and cost a parse instead of an analysis."""
    return _text_may_backprop(source) or _facts_may_backprop(external_facts)


def _text_may_backprop(text: str) -> bool:
    return K.text_may_backprop(text)


def _facts_may_backprop(external_facts: Optional[Dict[str, object]]) -> bool:
    if not external_facts:
        return False
    prefixes = _backprop_prefixes()
    return any(_describes_backprop(k, v, prefixes) for k, v in external_facts.items())


def _backprop_prefixes() -> Tuple[str, ...]:
    """Fact keys that are only ever produced for code that back-propagates, as
    the fact sources declare them."""
    return tuple(p for src in fact_sources() for p in src.backprop_prefixes)


def _describes_backprop(key: str, value: object, prefixes: Tuple[str, ...]) -> bool:
    return key.startswith(prefixes) or describes_backward(value)


def parse_problem(source: str) -> Optional[SyntaxProblem]:
    """The text's syntax error, located as :class:`Document` locates it (None if it parses)."""
    lines = split_lines(source)
    try:
        _parse("\n".join(lines) if "\r" in source else source)  # as Document parses it
    except (SyntaxError, ValueError) as e:  # ValueError: NUL bytes
        return _syntax_problem(e, LineIndex.of_lines(lines))
    return None
