"""GG207's fact source: the helpers that zero an optimizer and then back-propagate
without stepping it (a trainer's ``forward_backward(batch)``), and the helpers that only
step it (``optim_step()``), so that a loop calling the first once per micro-batch and the
second once per accumulation window can be read where the loop is.

Keys written (a top-level def, or a method of a top-level class, on its own):

* ``gg207:zero-back:<def>`` -- the last part of ``O`` (``self.optimizers`` ->
  ``optimizers``): a statement of the def's own body (not nested under a branch or a
  loop; a ``with`` block's body counts) is ``O.zero_grad()``, a later one back-propagates,
  and nothing in the def steps an optimizer or touches a ``.grad``;
* ``gg207:step-only:<def>`` -- the last part of ``O``: the def's own body holds an
  ``O.step()`` statement and nothing in it back-propagates or zeroes ``O`` before that step.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import steps as S
from gradguard.analysis.summary import FactSource

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import List, Optional, Tuple

ZERO_BACK = "gg207:zero-back:"
STEP_ONLY = "gg207:step-only:"

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _last(d: str) -> str:
    return d.rsplit(".", 1)[-1]


def _zeroes_then_backward(fn) -> "Optional[str]":
    body = A.with_bodies_inline(fn.body)
    zero = None
    for k, st in enumerate(body):
        call = S.zeroing_statement(st)
        if call is not None:
            zero = (k, S.zeroed(call))
            break
    if zero is None or zero[1] is None:
        return None
    k, opt = zero
    back = False
    for n in A.body_nodes(fn):
        if n.__class__ is ast.Attribute and n.attr in ("grad", "_grad"):
            return None
        if n.__class__ is ast.Call:
            f = n.func
            if f.__class__ is ast.Attribute and f.attr == "step":
                return None
    for st in body[k + 1:]:
        if any(A.is_backward_call(n) for n in A.iter_nodes(st)):
            back = True
            break
    return _last(opt) if back and opt is not None else None


def _steps_only(fn) -> "Optional[str]":
    body = A.with_bodies_inline(fn.body)
    at = next((k for k, st in enumerate(body) if st.__class__ is ast.Expr
               and S.stepped(st.value, scaler=True, closure=False) is not None), None)
    if at is None:
        return None  # (cheap first: most defs step nothing)
    for n in A.iter_nodes(body[:at]):
        if n.__class__ is ast.Call and (A.is_backward_call(n) or S.zeroing_call(n)):
            return None
    return _last(S.stepped(body[at].value, scaler=True, closure=False) or "")  # type: ignore[attr-defined]


def summarize_zeroing_helpers(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    if isinstance(stmt, _DEFS):
        defs = [stmt]
    elif isinstance(stmt, ast.ClassDef):
        defs = [s for s in stmt.body if isinstance(s, _DEFS)]
    else:
        return []
    out: "List[Tuple[str, object]]" = []
    for d in defs:
        body = d.body
        # (cheap first: a zeroing or a step statement in the def's own body)
        if not any(st.__class__ is ast.Expr or st.__class__ is ast.With for st in body):
            continue
        opt = _zeroes_then_backward(d)
        if opt is not None:
            out.append((ZERO_BACK + d.name, opt))
            continue
        opt = _steps_only(d)
        if opt is not None:
            out.append((STEP_ONLY + d.name, opt))
    return out


ZEROING_HELPERS = FactSource("gg207", summarize_zeroing_helpers)
