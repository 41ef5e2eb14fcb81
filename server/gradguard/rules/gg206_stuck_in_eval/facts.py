"""GG206's fact source: what a def does to the mode of the modules it is handed.

Key written (one per def or method of a top-level statement that a call in the
file can name):

* ``gg206:mode:<name>`` -- ``(is_method, events)``: the def's mode events in
  source order (``syntax.mode_event``), each ``(kind, receiver)`` with the
  receiver re-written so that a call site can map it onto its own names:
  ``"p:<i>:<suffix>"`` -- the ``i``-th parameter after ``self`` (``suffix``:
  ``""`` or ``".backbone"``), ``"s:<suffix>"`` -- ``self`` or an attribute of it,
  ``"g:<dotted>"`` -- any other name (a module-level model). Written only for a
  def with at least one event; ``("F", "<function>#<i>#<receiver>")`` -- a hook method (``after_*``,
  ``before_*``, ``on_*``) hands ``receiver`` as the ``i``-th argument of the same-file function
  ``<function>`` (its events are read where the hook is called); a def that back-propagates also lists, as ``("C", receiver)``
  after its events, what it calls (the modules it trains). (A method named ``train`` or ``eval`` is never read:
  ``x.train()`` is a mode switch wherever it is called; a function ``train(...)`` is.)
"""

from __future__ import annotations

import ast
import re

from gradguard.analysis import ast_util as A
from gradguard.analysis.summary import FactSource
from gradguard.rules.gg206_stuck_in_eval.syntax import mode_event

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import List, Optional, Tuple

MODE = "gg206:mode:"
# a hook's name (mmcv's ``after_train_iter``, a callback's ``on_train_batch_end``, fastai's ``before_epoch``)
_HOOK = re.compile(r"(after|before|on)_")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _receiver(recv: str, params: "List[str]", selfname: str) -> str:
    head, dot, rest = recv.partition(".")
    suffix = dot + rest
    if selfname and head == selfname:
        return "s:" + suffix
    if head in params:
        return f"p:{params.index(head)}:{suffix}"
    return "g:" + recv


def defines_mode_methods(cls: "Optional[ast.ClassDef]") -> bool:
    """A class with its own ``eval``/``train`` methods (a trainer object): ``self.eval()``
    there is that method, not ``nn.Module.eval``."""
    return cls is not None and any(isinstance(s, _DEFS) and s.name in ("eval", "train") for s in cls.body)


def def_events(d: ast.AST, is_method: bool, own_modes: bool = False) -> "Tuple[Tuple[str, str], ...]":
    args = d.args  # type: ignore[attr-defined]
    names = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    selfname = names[0] if is_method and names else ""
    params = names[1:] if selfname else names
    params = params + [a.arg for a in args.kwonlyargs]
    out: "List[Tuple[str, str]]" = []
    called: "List[str]" = []
    hook = is_method and bool(_HOOK.match(d.name))  # type: ignore[attr-defined]
    for n in A.body_nodes(d):
        cls = n.__class__
        if cls is not ast.Call and cls is not ast.Assign:
            continue
        ev = mode_event(n)
        if ev is None and hook and cls is ast.Call and n.func.__class__ is ast.Name:  # type: ignore[attr-defined]
            # a hook handing its runner's model to a function: single_gpu_test(runner.model, loader)
            for i, a in enumerate(n.args):  # type: ignore[attr-defined]
                recv = A.dotted(a)
                if recv is not None and (recv.partition(".")[0] in params or recv.partition(".")[0] == selfname):
                    out.append(("F", f"{n.func.id}#{i}#{_receiver(recv, params, selfname)}"))  # type: ignore[attr-defined]
        if ev is None:
            callee = A.dotted(n.func) if cls is ast.Call else None  # type: ignore[attr-defined]
            if callee is not None and callee not in called:
                called.append(callee)
            handed = _method_of_parameter(n, params) if cls is ast.Call else None
            if handed is not None:
                # model.val_start() on a parameter: a method of some class of the file, maybe,
                # that switches the modes of its object (``M``: read where the def is called)
                out.append(("M", _receiver(handed[0], params, selfname) + "#" + handed[1]))
            continue
        if ev[0] == "T":
            if not out or out[-1] != ev:
                out.append(ev)
        elif not (own_modes and ev[1] == selfname):
            out.append((ev[0], _receiver(ev[1], params, selfname)))
    if any(e[0] == "T" for e in out):
        # what a training function calls (``model(x)`` on a module-level model): it trains those
        out.extend(("C", _receiver(c, params, selfname)) for c in called)
    return tuple(out)


# zero-argument methods of tensors and modules that switch no mode (not looked up as ``M``)
_PLAIN_METHODS = frozenset({
    "zero_grad", "parameters", "named_parameters", "state_dict", "to", "cuda", "cpu", "modules", "children",
    "named_modules", "buffers", "float", "half", "double", "item", "backward", "detach", "size", "mean", "sum",
    "numpy", "tolist", "argmax", "max", "min", "squeeze", "contiguous", "clone", "long", "step", "keys", "values",
    "items", "copy", "clear", "pop", "t", "abs", "exp", "log", "sqrt", "sigmoid", "tanh", "relu", "softmax", "int",
    "bool", "dim", "numel", "flatten", "close", "flush", "reset", "reset_parameters", "get", "any", "all",
})


def _method_of_parameter(call: ast.AST, params: "List[str]") -> "Optional[Tuple[str, str]]":
    """(receiver, method) of a call ``p.meth()`` / ``p.attr.meth()`` with no argument, on a
    parameter ``p`` of the def, of a method that may be one of the file's (not a tensor's or
    a module's own)."""
    f = call.func  # type: ignore[attr-defined]
    if f.__class__ is not ast.Attribute or call.args or call.keywords or f.attr in _PLAIN_METHODS:  # type: ignore[attr-defined]
        return None
    recv = A.dotted(f.value)
    if recv is None or recv.partition(".")[0] not in params:
        return None
    return recv, f.attr


def summarize_mode_facts(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    if not referenced:
        return []
    own_modes = False
    if isinstance(stmt, _DEFS):
        defs = [(stmt, False)]
    elif isinstance(stmt, ast.ClassDef):
        defs = [(s, not any(A.dotted(dec) == "staticmethod" for dec in s.decorator_list))
                for s in stmt.body if isinstance(s, _DEFS)]
        own_modes = defines_mode_methods(stmt)
    else:
        return []
    out: "List[Tuple[str, object]]" = []
    for d, is_method in defs:
        events = def_events(d, is_method, own_modes)
        if events:
            out.append((MODE + d.name, (is_method, events)))
    return out


MODE_FACTS = FactSource("gg206", summarize_mode_facts)
