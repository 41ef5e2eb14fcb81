"""Optimizer steps and gradient zeroing, recognised once for every rule.

What counts as "a step of optimizer ``O``" depends on the question a rule asks,
so the caller chooses its readings instead of each rule spelling its own copy:

* ``scaler``: ``scaler.step(opt)`` (a ``GradScaler``) is a step of ``opt``; without it,
  a step of the receiver ``scaler`` (GG103 reads it so: the scaler's construction
  trains nothing, so it never proves a step updated a module);
* ``closure``: ``opt.step(closure)`` counts; it computes its own gradients, so a
  rule about the gradients found in ``.grad`` (GG207) leaves it out;
* ``two_step``: the in-place parameter updates of two-step optimizers (SAM's
  ``first_step()`` / ``second_step()``, any ``*_step()`` method) count as steps:
  they change the weights in place as ``step()`` does (GG103).

Zeroing: ``X.zero_grad()`` names ``X`` (an optimizer, or a module whose own
parameters it zeroes: the caller decides which it accepts). The wider zeroing
forms (``p.grad = None``, ``p.grad.zero_()``) are
:func:`gradguard.analysis.quiet_facts.zeroes`.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Optional, Tuple


def is_step_name(attr: str, two_step: bool = False) -> bool:
    """``step``, and with ``two_step`` any ``*_step`` method (SAM's ``first_step``)."""
    return attr == "step" or two_step and attr.endswith("_step")


def is_scaler(receiver: str) -> bool:
    """``scaler``, ``self.grad_scaler``: a receiver named like a ``GradScaler``."""
    return "scaler" in receiver.rsplit(".", 1)[-1].lower()


def step_of(node: ast.AST, scaler: bool = False, closure: bool = True,
            two_step: bool = False) -> "Optional[Tuple[str, str]]":
    """The optimizer a call steps, as ``(its dotted name, how)``, ``how`` being
    ``"step"`` (``opt.step()``) or ``"scaler"`` (``scaler.step(opt)``); None for
    any other node, for a receiver that is not a dotted name, and for the readings
    the caller left out."""
    if node.__class__ is not ast.Call:
        return None
    f = node.func
    if f.__class__ is not ast.Attribute or not is_step_name(f.attr, two_step):
        return None
    recv = A.dotted(f.value)
    if recv is None:
        return None
    args, keywords = node.args, node.keywords
    if scaler and f.attr == "step" and args and is_scaler(recv):
        if not closure and (len(args) != 1 or keywords):
            return None  # scaler.step(opt, closure)
        opt = A.dotted(args[0])
        return (opt, "scaler") if opt else None
    if not closure and (args or keywords):
        return None  # opt.step(closure): it makes its own gradients
    return recv, "step"


def stepped(node: ast.AST, scaler: bool = False, closure: bool = True, two_step: bool = False) -> "Optional[str]":
    """The dotted name of the optimizer ``node`` steps (see :func:`step_of`), or None."""
    got = step_of(node, scaler, closure, two_step)
    return got[0] if got is not None else None


def zeroing_call(node: ast.AST) -> bool:
    """``X.zero_grad(...)`` (any receiver)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "zero_grad"


def zeroed(node: ast.AST) -> "Optional[str]":
    """``X`` of a call ``X.zero_grad(...)`` when ``X`` is a dotted name, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "zero_grad"):
        return None
    return A.dotted(node.func.value)


def zeroing_statement(st: ast.stmt) -> "Optional[ast.Call]":
    """The call of a statement that is only ``X.zero_grad(...)``, or None."""
    value = st.value if isinstance(st, ast.Expr) else None
    return value if isinstance(value, ast.Call) and zeroing_call(value) else None


def def_step_facts(fn: ast.AST) -> "Tuple[Tuple[Tuple[str, bool], ...], Tuple[str, ...]]":
    """(:func:`def_steps`, :func:`def_parameter_edits`) of a def, its calls' method names
    read once."""
    body = getattr(fn, "body", None)
    if not body:
        return (), ()
    attrs = {n.func.attr for n in A.body_nodes(fn) if n.__class__ is ast.Call and n.func.__class__ is ast.Attribute}
    steps = def_steps(fn) if "step" in attrs else ()
    edits = def_parameter_edits(fn) if "parameters" in attrs or "named_parameters" in attrs else ()
    return steps, edits


_NOT_WEIGHT_EDITS = frozenset({"requires_grad_", "retain_grad", "share_memory_"})


def def_parameter_edits(fn: ast.AST) -> "Tuple[str, ...]":
    """The modules whose parameters a def edits in place, outside any optimizer (SAM's
    ``first_step()``, a weight perturbation: ``for p in model.parameters(): p.add_(e)``,
    ``p.data.mul_(...)``), as written (a parameter's name, ``self.net``): a call of it
    between two backward calls changes weights a kept graph saved, as a step does
    (``FnFacts.param_edits``). Not nested defs; not ``p.grad``'s edits."""
    out: list = []
    for loop in A.body_nodes(fn):
        if loop.__class__ not in (ast.For, ast.AsyncFor):
            continue
        it = loop.iter
        if not (it.__class__ is ast.Call and it.func.__class__ is ast.Attribute
                and it.func.attr in ("parameters", "named_parameters")):
            continue
        owner = A.dotted(it.func.value)
        target = loop.target
        if it.func.attr == "named_parameters" and target.__class__ is ast.Tuple and len(target.elts) == 2:
            target = target.elts[1]
        if owner is None or target.__class__ is not ast.Name or owner in out:
            continue
        p = target.id
        for n in A.iter_nodes(loop.body):
            f = n.func if n.__class__ is ast.Call else None
            if f is None or f.__class__ is not ast.Attribute or not f.attr.endswith("_") \
                    or f.attr.startswith("_") or f.attr in _NOT_WEIGHT_EDITS:
                continue
            if A.dotted(f.value) in (p, p + ".data"):
                out.append(owner)
                break
    return tuple(out)


def def_steps(fn: ast.AST) -> "Tuple[Tuple[str, bool], ...]":
    """The optimizers a def steps (``step()``, ``scaler.step(opt)``; not nested defs), as
    written, each with whether every run of the def steps it: a statement of the body
    itself (``with`` bodies inline), before anything that may leave early
    (``FnFacts.steps``)."""
    body = getattr(fn, "body", None)
    if not body or "step" not in {n.func.attr for n in A.body_nodes(fn)
                                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}:
        return ()
    sure = set()
    stmts = list(body)
    while stmts:
        s = stmts.pop(0)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            stmts[:0] = s.body
            continue
        if isinstance(s, (ast.Return, ast.Raise)) or A.child_blocks(s) and any(
                isinstance(n, (ast.Return, ast.Raise, ast.Break)) for n in A.iter_nodes([s])):
            break
        if isinstance(s, ast.Expr):
            got = stepped(s.value, scaler=True)
            if got is not None:
                sure.add(got)
    out = []
    seen = set()
    for n in A.body_nodes(fn):
        got = stepped(n, scaler=True)
        if got is not None and got not in seen:
            seen.add(got)
            out.append((got, got in sure))
    return tuple(out)
