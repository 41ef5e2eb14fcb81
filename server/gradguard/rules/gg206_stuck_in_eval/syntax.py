"""The AST questions GG206's fact source and its analysis both ask: which calls
switch a module's mode, and which back-propagate.

A *mode event* is one of

* ``("E", recv)`` -- ``recv.eval()``, ``recv.train(False)``, ``recv.train(mode=False)``;
* ``("R", recv)`` -- ``recv.train()``, ``recv.train(True)``, ``recv.train(flag)``
  (a flag we cannot read counts as a restore: silence is the safe side),
  ``recv.training = ...``;
* ``("T", "")``   -- a backward call (the loop trains here).

``recv`` is the receiver's dotted name as written (``model``, ``self.net``).
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Optional, Tuple


# methods of nn.Module that return the module itself: ``model.to(device).train()``
_RETURNS_SELF = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "type", "train", "eval",
                           "requires_grad_", "zero_grad", "share_memory", "apply"})


def receiver(e: ast.expr) -> "Optional[str]":
    """The dotted name of the module a mode switch is called on, through
    ``.to(device)`` / ``.cuda()`` chains."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _RETURNS_SELF:
        e = e.func.value
    return A.dotted(e)


def _is_false(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value is False


def mode_event(node: ast.AST, ctx=None) -> "Optional[Tuple[str, str]]":
    """The mode event ``node`` is, or None."""
    cls = node.__class__
    if cls is ast.Call:
        f = node.func  # type: ignore[attr-defined]
        if f.__class__ is ast.Attribute:
            m = f.attr
            if m == "eval" or m == "train":
                recv = receiver(f.value)
                if recv is None:
                    return None
                if m == "eval":
                    if node.args or node.keywords:  # type: ignore[attr-defined]
                        return None  # not nn.Module.eval() (a metric's, a parser's eval(x))
                    return ("E", recv)
                args = list(node.args) + [k.value for k in node.keywords if k.arg in (None, "mode")]  # type: ignore[attr-defined]
                if len(args) > 1:
                    return None  # not nn.Module.train(mode)
                if args and _is_false(args[0]):
                    return ("E", recv)
                return ("R", recv)
        if A.is_backward_call(node, ctx):
            return ("T", "")
        return None
    if cls is ast.Assign:
        for t in node.targets:  # type: ignore[attr-defined]
            if isinstance(t, ast.Attribute) and t.attr == "training":
                recv = A.dotted(t.value)
                if recv is not None:
                    return ("R", recv)
    return None


def restores(recv: str, target: str) -> bool:
    """Does switching ``recv`` switch ``target`` too (the same module, or one it contains)?"""
    return recv == "*" or recv == target or target.startswith(recv + ".")
