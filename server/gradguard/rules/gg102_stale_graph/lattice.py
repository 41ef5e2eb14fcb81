"""GG102's values: what a local name holds in its analysis. A *leaf* that
requires grad, a *module*, or a *graph* (a non-leaf tensor) with where its graph
comes from (:class:`Src`: data, parameter or module), whether one of the
operations that built it saves tensors for backward (tri-state), and which
statements built it. (The shared interpreter's :class:`~gradguard.analysis.values.Val`
says where a graph comes from by tokens; this lattice is what GG102 still
needs beyond them: the origin's kind and name, the saving flag, the building
statements its fixes move.)"""

from __future__ import annotations

import ast

from gradguard.analysis.values import Source
from gradguard.model.record import record
from gradguard.rules.gg102_stale_graph import syntax as S

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple


Src = Source  # where a graph originates (the shared record: the trace names its sources with it too)


@record
class Leaf:
    src: Src


@record
class Mod:
    src: Src
    trainable: bool  # has parameters that require grad
    saving: Optional[bool]  # for parameter-free modules: does its op save tensors?


@record
class Graph:
    sources: FrozenSet[Src]
    saving: Optional[bool]  # True: certainly saves tensors; False: certainly not; None: unknown
    stmts: Tuple[ast.stmt, ...] = ()  # statements that built it, in order
    unknown_op: Optional[str] = None  # an operation whose saving is unknown (for the message)
    # A container or opaque object holding stale tensors (DataLoader(TensorDataset(feats, y)), (a, b)):
    # the names of those tensors, which are what a finding is about.
    carried: Tuple[str, ...] = ()
    # A container of leaves only ((w, b), TensorDataset(X)): reusing it is reusing leaves, which is fine;
    # a tensor op on it (torch.cat([X, X])) builds a real non-leaf.
    holder: bool = False


def join_saving(a: Optional[bool], b: Optional[bool]) -> Optional[bool]:
    """Combine saving flags: True wins, then unknown, then False."""
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def as_graph(v) -> Optional[Graph]:
    if isinstance(v, Graph):
        return v
    if isinstance(v, Leaf):
        return Graph(frozenset({v.src}), False, ())
    if isinstance(v, Mod) and v.trainable and v.src.kind == "param":  # scaler.gain used as a tensor
        return Graph(frozenset({v.src}), False, ())
    return None


def merge(values: Iterable, saving: Optional[bool] = False, op: Optional[str] = None) -> Optional[Graph]:
    """A non-leaf computed from ``values`` by an op with the given saving flag."""
    gs = [g for g in (as_graph(v) for v in values) if g is not None]
    if not gs:
        return None
    sources: Set[Src] = set()
    stmts: List[ast.stmt] = []
    sv = saving
    unknown = op if saving is None else None
    for g in gs:
        sources |= g.sources
        for s in g.stmts:
            if s not in stmts:
                stmts.append(s)
        sv = join_saving(sv, g.saving)
        if unknown is None and g.unknown_op:
            unknown = g.unknown_op
    return Graph(frozenset(sources), sv, tuple(stmts), unknown if sv is None else None)


def carrier(g: Optional[Graph], nodes: Sequence[ast.AST], env, values: Sequence = (),
             container: bool = False) -> Optional[Graph]:
    """``g`` built by an opaque call or a display from ``nodes`` (evaluated to
    ``values``): remember which named stale tensors it holds. A pure
    ``container`` of leaves (``TensorDataset(X)``, ``(w, b)``) holds no graph."""
    if g is None:
        return None
    if container and not any(isinstance(v, Graph) and not v.holder for v in values):
        return Graph(g.sources, g.saving, g.stmts, g.unknown_op, (), True)
    names: List[str] = []
    for v in values:
        if isinstance(v, Graph):
            for c in v.carried:
                if c not in names:
                    names.append(c)
    for n in nodes:
        if isinstance(n, ast.Starred):
            n = n.value
        key = n.id if isinstance(n, ast.Name) else S.attr_name(n)  # feats, self.feats
        if key:
            v = env.get(key)
            if isinstance(v, Graph) and not v.holder:
                for c in (v.carried or (key,)):
                    if c not in names:
                        names.append(c)
    if not names:
        return g
    return Graph(g.sources, g.saving, g.stmts, g.unknown_op, tuple(names))


def with_stmt(g: Optional[Graph], stmt: ast.stmt) -> Optional[Graph]:
    if g is None or stmt in g.stmts:
        return g
    return Graph(g.sources, g.saving, g.stmts + (stmt,), g.unknown_op, g.carried, g.holder)
