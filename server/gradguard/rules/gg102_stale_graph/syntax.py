"""GG102's questions about syntax: names a statement binds or reads, keyword
arguments, whether a backward keeps its graph. Shared by the analysis and the
fix builders of the rule; no values, no findings."""

from __future__ import annotations

import ast
import builtins

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

BUILTIN_NAMES = frozenset(dir(builtins))
# what GG102 treats as no tensor, or as cutting the graph (beside knowledge's tables)
NON_TENSOR_METHODS = K.NON_TENSOR_METHODS | frozenset(
    {"keys", "values", "items", "format", "append", "extend", "state_dict", "zero_grad", "parameters",
     "named_parameters", "train", "eval", "apply", "register_buffer", "load_state_dict"}
)
CUT_ATTRS = K.GRAPHLESS_ATTRS
MODULE_SELF_METHODS = K.MODULE_SELF_METHODS
GRAPHLESS_FUNCTIONS = K.GRAPHLESS_FUNCTIONS


def self_arg(fn) -> Optional[str]:
    """The name a method calls its instance (``self``), or None for static/class methods."""
    if any(getattr(d, "id", getattr(d, "attr", "")) in ("staticmethod", "classmethod") for d in fn.decorator_list):
        return None
    args = list(fn.args.posonlyargs) + list(fn.args.args)
    return args[0].arg if args else None


def const_true(node: Optional[ast.AST]) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def const_false(node: Optional[ast.AST]) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, None, 0)


def kw(call: ast.Call, name: str) -> Optional[ast.keyword]:
    for k in call.keywords:
        if k.arg == name:
            return k
    return None


def walk_no_scopes(node: ast.AST):
    """Nodes under ``node`` without entering nested defs, classes or lambdas
    (a statement's: its stretch of its def's one walk, when there is one)."""
    nodes = A.stmt_nodes(node) if isinstance(node, ast.stmt) else None
    return nodes if nodes is not None else A.iter_nodes(node)


def attr_name(node: ast.AST) -> Optional[str]:
    """``self.target`` → "self.target" (an attribute of a plain name), else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def bound_names(target: ast.AST) -> List[str]:
    """The plain names an assignment target binds (``self.x`` and subscripts left out)."""
    return [n for n in A.target_names(target) if "." not in n]


def assigned_in(stmts: Sequence[ast.stmt]) -> Set[str]:
    """Every name (re)bound anywhere in ``stmts`` (not in nested scopes)."""
    out: Set[str] = set()
    for s in stmts:
        for n in walk_no_scopes(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.add(n.id)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
                d = attr_name(n)
                if d:
                    out.add(d)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
    return out


def names_read(node: ast.AST, loads_only: bool = True) -> Set[str]:
    """Names and ``name.attr`` attributes used in ``node`` (not in nested scopes)."""
    out: Set[str] = set()
    for n in walk_no_scopes(node):
        if isinstance(n, ast.Name) and (not loads_only or isinstance(n.ctx, ast.Load)):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and (not loads_only or isinstance(n.ctx, ast.Load)):
            d = attr_name(n)
            if d:
                out.add(d)
    return out


def stmt_binds(s: ast.stmt) -> Set[str]:
    out: Set[str] = set()
    if isinstance(s, ast.Assign):
        for t in s.targets:
            out |= set(bound_names(t))
            if attr_name(t):
                out.add(attr_name(t))  # type: ignore[arg-type]
                continue
            base = t
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if base is not t and isinstance(base, ast.Name):
                out.add(base.id)
    elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
        out |= set(bound_names(s.target))
        if attr_name(s.target):
            out.add(attr_name(s.target))  # type: ignore[arg-type]
    elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute):
        if isinstance(s.value.func.value, ast.Name):
            out.add(s.value.func.value.id)  # Y.add_(noise)
    return out


module_names = A.module_names  # (the analysis floor's: the trace asks it too)


def grad_used_names(unit, ctx, grad_read: FrozenSet[str] = frozenset()) -> Set[str]:
    """Names whose gradient the unit asks for, or that it hands an optimizer or a
    backward function (``x.grad``, ``optim.SGD([X, w])``, ``autograd.grad(u, x)``,
    ``loss.backward(inputs=[x])``); for a module unit, also ``grad_read``, the names
    whose gradient a function of the file reads."""
    grad_used: Set[str] = set()
    for n in A.unit_nodes(unit):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            if n.attr in ("grad", "retain_grad", "register_hook", "requires_grad"):
                if not (n.attr == "requires_grad" and isinstance(n.ctx, ast.Store)):
                    grad_used.add(n.value.id)
        elif isinstance(n, ast.Attribute) and n.attr in ("grad", "retain_grad", "register_hook") \
                and attr_name(n.value):
            grad_used.add(attr_name(n.value))  # type: ignore[arg-type]  # self.X.grad
        elif isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            if isinstance(n.ctx if hasattr(n, "ctx") else ast.Load(), ast.Load):
                for e in n.elts:
                    if isinstance(e, ast.Name):
                        grad_used.add(e.id)  # e.g. optim.SGD([X, w]): a trained tensor
                    elif attr_name(e):
                        grad_used.add(attr_name(e))  # type: ignore[arg-type]  # optim.SGD([self.X])
        elif isinstance(n, ast.Dict):
            for e in n.values:
                if isinstance(e, ast.Name):
                    grad_used.add(e.id)
        elif isinstance(n, ast.Call):
            q = (ctx.qualify(n.func) or "") if (n.args or n.keywords) else ""  # no argument: nothing to add
            if q.startswith(K.OPTIMIZER_PREFIXES) or q in K.BACKWARD_FUNCTIONS:
                for a in list(n.args) + [k.value for k in n.keywords]:
                    if isinstance(a, ast.Name):
                        grad_used.add(a.id)
            if isinstance(n.func, ast.Attribute) and n.func.attr in K.BACKWARD_METHODS:
                k = kw(n, "inputs")
                if k is not None:
                    for e in walk_no_scopes(k.value):
                        if isinstance(e, ast.Name):
                            grad_used.add(e.id)
    if unit.kind == "module":
        grad_used |= grad_read
    return grad_used


def statement_maps(body: list) -> Tuple[Dict[int, Tuple[list, int]], Dict[int, ast.stmt]]:
    """The block structure of a unit's statements, nested defs' bodies excluded: ``parent``
    maps ``id(stmt)`` to ``(block, index)`` and ``owner`` maps ``id(block)`` to the
    compound statement holding it (what GG102's fixes move, wrap and detach in)."""
    parent: Dict[int, Tuple[list, int]] = {}
    owner: Dict[int, ast.stmt] = {}
    stack = [body]
    while stack:
        block = stack.pop()
        for i, s in enumerate(block):
            parent[id(s)] = (block, i)
            for inner in A.child_blocks(s):
                owner[id(inner)] = s
                stack.append(inner)
    return parent, owner
