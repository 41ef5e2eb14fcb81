"""GG102's values: what a local name holds in its walk. A *leaf* that requires
grad, a *module*, or a *graph* (a non-leaf tensor) with where its graph comes
from (:class:`Src`: data, parameter or module) and, for a container, the named
tensors it holds. (The shared interpreter's :class:`~gradguard.analysis.values.Val`
says where a graph comes from by tokens, which statements built it and whether
they save tensors; this lattice is what GG102's candidate filter still reads
beyond them: which names hold a graph by its older reading, and containers.)"""

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


@record
class Graph:
    sources: FrozenSet[Src]
    # A container or opaque object holding stale tensors (DataLoader(TensorDataset(feats, y)), (a, b)):
    # the names of those tensors, which are what a finding is about.
    carried: Tuple[str, ...] = ()
    # A container of leaves only ((w, b), TensorDataset(X)): reusing it is reusing leaves, which is fine;
    # a tensor op on it (torch.cat([X, X])) builds a real non-leaf.
    holder: bool = False


def as_graph(v) -> Optional[Graph]:
    if isinstance(v, Graph):
        return v
    if isinstance(v, Leaf):
        return Graph(frozenset({v.src}))
    if isinstance(v, Mod) and v.trainable and v.src.kind == "param":  # scaler.gain used as a tensor
        return Graph(frozenset({v.src}))
    return None


def merge(values: Iterable) -> Optional[Graph]:
    """A non-leaf computed from ``values``."""
    gs = [g for g in (as_graph(v) for v in values) if g is not None]
    if not gs:
        return None
    sources: Set[Src] = set()
    for g in gs:
        sources |= g.sources
    return Graph(frozenset(sources))


def carrier(g: Optional[Graph], nodes: Sequence[ast.AST], env, values: Sequence = (),
             container: bool = False) -> Optional[Graph]:
    """``g`` built by an opaque call or a display from ``nodes`` (evaluated to
    ``values``): remember which named stale tensors it holds. A pure
    ``container`` of leaves (``TensorDataset(X)``, ``(w, b)``) holds no graph."""
    if g is None:
        return None
    if container and not any(isinstance(v, Graph) and not v.holder for v in values):
        return Graph(g.sources, (), True)
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
    return Graph(g.sources, tuple(names))
