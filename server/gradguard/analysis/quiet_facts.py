"""Module facts for the GG2xx rules: the :data:`QUIET_FACTS` source.

One walk per top-level statement that can hold code (a def, a class, a compound
statement; a plain assignment or call at module level cannot), giving:

* ``gg2:nograd:<name>`` — a function or method called (by its last name) inside
  ``with torch.no_grad():`` / ``inference_mode()`` or in a def decorated with
  one: an evaluation helper called that way builds no graph (GG201);
* ``gg2:zeroes:<def>``  — a def or method whose body zeroes gradients
  (``zero_grad()``, ``p.grad = None``, ``p.grad.zero_()``) (GG205);
* ``gg2:keep:<name>``   — a name whose gradient a def or class asks for: ``x.grad``
  read, ``x.register_hook``, ``x`` in the arguments of an optimizer or of
  ``autograd.grad`` (GG204);
* ``gg2:loopcall:<name>`` — a function or method called (by its last name) in the body
  of a loop or comprehension that zeroes no gradient itself: a trainer's
  ``train_step()`` that back-propagates and steps runs once per iteration of it (GG205);
* ``gg2:retloss:<def>`` — a def every ``return`` of which returns a name it calls
  ``.backward()`` on (without ``retain_graph``), or the name that loss was taken from or
  came with (``loss = info["loss"]``, ``loss, parts = criterion(...)``): a training step
  handing back the loss it back-propagated, a graph no one can differentiate again (GG201);
* ``gg2:loopin:<name>:<def>`` — a function or method named for evaluation (``evaluate``,
  ``_eval_step``, ``predict``) called in the body of a loop of ``<def>`` (empty at module
  level), and ``gg2:evalloop:<name>:<def>`` when that loop comes after a ``<module>.eval()``
  call of the same def and spells no backward: an evaluation helper run once per batch of
  an evaluation loop, and who runs it (is that caller itself run under no_grad?) (GG201);
* ``gg2:steps:<def>`` — a module-level def that back-propagates and calls ``X.step()`` on
  names it neither binds nor takes as parameters: ``((X, ...), (the global names it calls,
  ...))`` (GG208: a training function stepping the module's optimizer on the module's model);
* ``gg2:flagcall:<name>|<n>|<falsy positions>|<keywords>|<falsy keywords>|<evaled>`` — a call of
  the function or method ``<name>`` (by its last name) after a ``<module>.eval()`` of the same
  def (``evaled`` 1), or handing it ``None``/``False`` (a position, a keyword): its ``n``
  positional arguments, which of them are ``None``/``False``, the other keywords it names, and
  those it hands ``None``/``False`` (GG201: ``run_epoch(valid_data, model, loss_compute)`` with
  no optimizer, ``train_and_valid(..., is_train=False)``: the def's backward, guarded by that
  parameter, does not run);
* ``gg2:counter:<method>`` — a short method of a class that adds to a count on its object,
  compares it with a threshold, sets it back to 0 and returns True or False (fastai's
  ``GradientAccumulation``): the threshold, ``("attr", name, per)`` of the object or ``("const",
  n, per)``, ``per`` "pass" (it counts by one) or "sample" (GG205: the step it gates sees the sum
  of that many gradients).
"""

from __future__ import annotations

import ast
import builtins
import re

from gradguard.analysis import ast_util as A
from gradguard.analysis.summary import FactSource

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Iterable, List, Optional, Set, Tuple

NOGRAD = "gg2:nograd:"
ZEROES = "gg2:zeroes:"
KEEP = "gg2:keep:"
LOOPCALL = "gg2:loopcall:"
RETLOSS = "gg2:retloss:"
LOOPIN = "gg2:loopin:"
EVALLOOP = "gg2:evalloop:"
STEPS = "gg2:steps:"
COUNTER = "gg2:counter:"
FLAGCALL = "gg2:flagcall:"
# a name that says it evaluates (GG201's evaluation functions)
EVAL_NAME = re.compile(r"^_*(eval|evaluate|evaluation|validate|validation|val|predict|inference|infer|test)"
                       r"(_|$)", re.IGNORECASE)

_BUILTINS = frozenset(dir(builtins))
_HOLDERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.AsyncWith, ast.If, ast.For,
            ast.AsyncFor, ast.While, ast.Try)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_ASKS_GRAD = frozenset({"grad", "register_hook", "retain_grad"})
_ZEROING_CALLS = frozenset({"zero_grad", "clear_grad", "clear_gradients"})


def zeroes(node: ast.AST) -> bool:
    """``x.zero_grad()``, ``p.grad = None``, ``p.grad.zero_()``, ``p.grad.data.zero_()``,
    ``p.grad.fill_(0)``, ``del p.grad`` (and Paddle's ``clear_grad()``)."""
    cls = node.__class__
    if cls is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if func.__class__ is not ast.Attribute:
            return False
        m = func.attr
        if m in _ZEROING_CALLS:
            return True
        if m in ("zero_", "fill_", "mul_"):
            recv = func.value
            while isinstance(recv, ast.Attribute) and recv.attr == "data":
                recv = recv.value
            return isinstance(recv, ast.Attribute) and recv.attr == "grad"
        return False
    if cls is ast.Assign or cls is ast.Delete:
        return any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets)  # type: ignore[attr-defined]
    return False


def asks_gradient_of(node: ast.AST, out: Set[str]) -> None:
    """Add to ``out`` the names whose gradient ``node`` asks for."""
    if node.__class__ is ast.Attribute:
        if node.attr in _ASKS_GRAD and node.value.__class__ is ast.Name:
            out.add(node.value.id)
    elif node.__class__ is ast.Call:
        f = node.func
        last = f.attr if f.__class__ is ast.Attribute else f.id if f.__class__ is ast.Name else ""
        if last != "grad" and not last[:1].isupper() and "optim" not in last.lower():
            return  # (the cheap test first: this runs on every call of the file)
        name = A.dotted(f) or ""
        if last == "grad" or "optim" in name.lower() or (last[:1].isupper() and "Optim" in last):
            for a in list(node.args) + [k.value for k in node.keywords]:
                for m in A.walk_all(a):
                    if m.__class__ is ast.Name:
                        out.add(m.id)


def _called_names(body) -> Iterable[str]:
    return _called_names_of(A.iter_nodes(list(body)))


def _scan(nodes, facts: Set[str], keep: Optional[Set[str]], losses: "Optional[Tuple[Set[str], list]]" = None,
          owner: str = "", names: "Optional[Tuple[Set[str], Set[str], Set[str]]]" = None) -> bool:
    """One pass over ``nodes`` (nested defs not entered): no_grad blocks (into
    ``facts``), gradient requests (into ``keep``, when given), the names back-propagated
    and the returns (into ``losses``, when given); does it zero gradients? (``owner``:
    the def's name, empty at module level; ``names``: the names it calls ``.step()`` on,
    the names it calls, the names it assigns.)"""
    zeroing = False
    evaled = False  # a ``<module>.eval()`` call seen (nodes come in source order)
    Return = ast.Return
    With, AsyncWith, Call, Attribute, Name = ast.With, ast.AsyncWith, ast.Call, ast.Attribute, ast.Name
    Assign, Delete = ast.Assign, ast.Delete
    asks = _ASKS_GRAD
    for n in nodes:
        cls = n.__class__
        if cls is Attribute:
            # (asks_gradient_of's test, inlined: this runs on every attribute of the file)
            if keep is not None and n.attr in asks and n.value.__class__ is Name:
                keep.add(n.value.id)
        elif cls is Call:
            f = n.func
            if not zeroing and f.__class__ is Attribute and zeroes(n):
                zeroing = True
            if not evaled and f.__class__ is Attribute and f.attr == "eval" and not n.args and not n.keywords:
                evaled = True
            elif n.args or n.keywords:
                _flag_call(n, evaled, facts)
            if keep is not None:
                asks_gradient_of(n, keep)
            if (losses is not None and f.__class__ is Attribute and f.attr == "backward"
                    and f.value.__class__ is Name and not any(k.arg == "retain_graph" for k in n.keywords)):
                losses[0].add(f.value.id)
            if names is not None:
                if f.__class__ is Name:
                    names[1].add(f.id)
                elif f.__class__ is Attribute and f.attr == "step" and f.value.__class__ is Name:
                    names[0].add(f.value.id)
        elif cls is Return:
            if losses is not None:
                losses[1].append(n)
        elif cls is With or cls is AsyncWith:
            if A.is_no_grad_with(n):
                facts.update(NOGRAD + name for name in _called_names(n.body))
        elif cls is Assign or cls is Delete:
            if not zeroing and zeroes(n):
                zeroing = True
            if names is not None and cls is Assign:
                for t in n.targets:
                    names[2].update(A.target_names(t))
        if cls in _LOOPS:
            _loop_calls(n, facts, owner, evaled)
    return zeroing


def _loss_kin(d: ast.AST, back: Set[str]) -> Set[str]:
    """The names a def's back-propagated ``loss`` was taken from or came with (``loss =
    loss_info["loss"]``; ``loss, parts = criterion(out, y)``): what they hold is part of
    the graph its backward went through (``RETLOSS``)."""
    kin: Set[str] = set()
    for n in A.body_nodes(d):
        if n.__class__ is not ast.Assign or len(n.targets) != 1:
            continue
        t, v = n.targets[0], n.value
        if t.__class__ is ast.Name and t.id in back and v.__class__ is ast.Subscript and v.value.__class__ is ast.Name:
            kin.add(v.value.id)
        elif t.__class__ is ast.Tuple and v.__class__ is ast.Call:
            names = [e.id for e in t.elts if e.__class__ is ast.Name]
            if len(names) == len(t.elts) and any(x in back for x in names):
                kin.update(x for x in names if x not in back)
    return kin


def _falsy(e: ast.expr) -> bool:
    return e.__class__ is ast.Constant and (e.value is None or e.value is False)


def _flag_call(call: ast.Call, evaled: bool, facts: Set[str]) -> None:
    """``FLAGCALL``: a call after ``.eval()`` or handing ``None``/``False``, by its shape."""
    if not evaled and not any(a.__class__ is ast.Constant and _falsy(a) for a in call.args) and not any(
            k.value.__class__ is ast.Constant and _falsy(k.value) for k in call.keywords):
        return  # (cheap first: this runs on every call with arguments)
    falsy_pos = [i for i, a in enumerate(call.args) if _falsy(a)]
    falsy_kw = [k.arg or "" for k in call.keywords if _falsy(k.value)]
    f = call.func
    if f.__class__ is ast.Name:
        name: "Optional[str]" = None if f.id in _BUILTINS else f.id
    elif f.__class__ is ast.Attribute and f.value.__class__ is ast.Name and f.value.id == "self":
        name = f.attr
    else:
        return  # (a library's function: torch.cat(...), np.mean(...))
    if name is None or any(a.__class__ is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
        return
    named = ",".join(k.arg for k in call.keywords if k.arg and not _falsy(k.value))
    facts.add(f"{FLAGCALL}{name}|{len(call.args)}|{','.join(map(str, falsy_pos))}|{named}|{','.join(falsy_kw)}"
              f"|{int(evaled)}")


_LOOPS = frozenset({ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})


def _loop_calls(loop: ast.AST, facts: Set[str], owner: str = "", evaled: bool = False) -> None:
    """``LOOPCALL`` facts for the calls of a loop's body (a comprehension's element) when
    nothing in it zeroes gradients; ``LOOPIN``/``EVALLOOP`` for the evaluation helpers it
    calls (a statement loop after ``.eval()`` in ``owner``: ``EVALLOOP`` too)."""
    if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        nodes = A.block_nodes(loop.body)
    else:
        parts = [loop.key, loop.value] if isinstance(loop, ast.DictComp) else [loop.elt]  # type: ignore[attr-defined]
        nodes = list(A.iter_nodes(parts))
    if any(zeroes(n) for n in nodes):
        return
    names = set(_called_names_of(nodes))
    facts.update(LOOPCALL + name for name in names)
    helpers = [name for name in names if EVAL_NAME.match(name)]
    if helpers:
        evaluates = evaled and "backward" not in names and isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
        for name in helpers:
            facts.add(f"{LOOPIN}{name}:{owner}")
            if evaluates:
                facts.add(f"{EVALLOOP}{name}:{owner}")


def _called_names_of(nodes) -> Iterable[str]:
    for n in nodes:
        if n.__class__ is ast.Call:
            f = n.func
            if f.__class__ is ast.Name:
                yield f.id
            elif f.__class__ is ast.Attribute:
                yield f.attr


_THRESHOLD_OPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq)


def _counter_threshold(d: ast.AST) -> "Optional[Tuple[str, object, str]]":
    """(see ``COUNTER``) The threshold a counting method compares its count with, or None."""
    added: Set[str] = set()
    by_one: Set[str] = set()  # counts passes (``+= 1``), not samples
    reset: Set[str] = set()
    compared: "List[Tuple[str, ast.expr]]" = []
    returns_bool = False
    for n in A.body_nodes(d):
        cls = n.__class__
        if cls is ast.AugAssign and isinstance(n.op, ast.Add):  # type: ignore[attr-defined]
            t = n.target  # type: ignore[attr-defined]
            if t.__class__ is ast.Attribute and t.value.__class__ is ast.Name and t.value.id == "self":
                added.add(t.attr)
                v = n.value  # type: ignore[attr-defined]
                if v.__class__ is ast.Constant and v.value == 1:
                    by_one.add(t.attr)
        elif cls is ast.Assign:
            v = n.value  # type: ignore[attr-defined]
            if v.__class__ is ast.Constant and v.value == 0:
                for t in n.targets:  # type: ignore[attr-defined]
                    if t.__class__ is ast.Attribute and t.value.__class__ is ast.Name and t.value.id == "self":
                        reset.add(t.attr)
        elif cls is ast.Compare and len(n.ops) == 1 and isinstance(n.ops[0], _THRESHOLD_OPS):  # type: ignore[attr-defined]
            left, right = n.left, n.comparators[0]  # type: ignore[attr-defined]
            if left.__class__ is ast.Attribute and left.value.__class__ is ast.Name and left.value.id == "self":
                compared.append((left.attr, right))
        elif cls is ast.Return:
            v = n.value  # type: ignore[attr-defined]
            if v.__class__ is ast.Constant and isinstance(v.value, bool):
                returns_bool = True
    if not returns_bool:
        return None
    for attr, right in compared:
        if attr in added and attr in reset:
            per = "pass" if attr in by_one else "sample"
            if right.__class__ is ast.Attribute and right.value.__class__ is ast.Name and right.value.id == "self":
                return ("attr", right.attr, per)
            if right.__class__ is ast.Constant and isinstance(right.value, int) and not isinstance(right.value, bool):
                return ("const", right.value, per)
    return None


def summarize_quiet_facts(stmt: ast.stmt, referenced: bool = True) -> "List[Tuple[str, object]]":
    if not isinstance(stmt, _HOLDERS):
        return []
    facts: Set[str] = set()
    keep: Set[str] = set()
    valued: "List[Tuple[str, object]]" = []  # facts with a value
    if isinstance(stmt, ast.ClassDef):
        defs = [s for s in stmt.body if isinstance(s, _DEFS)]
    elif isinstance(stmt, _DEFS):
        defs = [stmt]
    else:  # module-level code: its no_grad blocks
        _scan(A.iter_nodes(stmt), facts, None)
        return sorted((f, True) for f in facts)
    for d in defs:
        if isinstance(stmt, ast.ClassDef) and len(d.body) <= 8:
            threshold = _counter_threshold(d)
            if threshold is not None:
                valued.append((COUNTER + d.name, threshold))
        if d.decorator_list and A.is_no_grad_function(d):
            facts.update(NOGRAD + name for name in _called_names(d.body))
        losses: "Tuple[Set[str], list]" = (set(), [])
        names: "Tuple[Set[str], Set[str], Set[str]]" = (set(), set(), set())
        if _scan(A.body_nodes(d), facts, keep, losses, d.name, names):
            facts.add(ZEROES + d.name)
        back, returns = losses
        stepped, called, assigned = names
        if back and stepped and isinstance(stmt, _DEFS):
            args = d.args
            local = assigned | {a.arg for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)}
            stepped -= local
            if stepped:
                valued.append((STEPS + d.name, (tuple(sorted(stepped)), tuple(sorted(called - local)))))
        if back and returns and all(r.value.__class__ is ast.Name for r in returns):
            if not all(r.value.id in back for r in returns):
                back = back | _loss_kin(d, back)
            if all(r.value.id in back for r in returns):
                facts.add(RETLOSS + d.name)
    facts.update(KEEP + name for name in keep)
    flags: "List[Tuple[str, object]]" = [(f, True) for f in sorted(facts)]
    return flags + valued


QUIET_FACTS = FactSource("quiet", summarize_quiet_facts)
