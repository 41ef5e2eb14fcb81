"""GG104's fixes: the out-of-place spelling of an in-place edit.

- ``x += r`` → ``x = x + r`` (any augmented operator);
- ``x.add_(r)`` alone on its line → ``x = x.add(r)``;
- ``h[i] = v`` / ``h[i] += v`` → ``h = h.clone()`` on the line before;
- ``F.relu(x, inplace=True)`` → ``inplace=False`` where the result is bound
  back to ``x`` (or returned);
- a layer built with ``inplace=True`` → ``inplace=False`` at its constructor,
  where every call of it in the class binds its result.

Each keeps the values the program computes and gives the saved tensor a
storage of its own, so the gradients are those of the program as written
(the fixture harness compares them with the original run with every saved
tensor copied when saved). A fix is offered only where no other name of the
edited storage is read after the edit: those names would no longer see it.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.model.findings import Fix, Position, Range, TextEdit
from gradguard.rules.gg104_inplace_saved import messages as M

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import List, Optional

AUG = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%", "Pow": "**",
       "MatMult": "@", "BitAnd": "&", "BitOr": "|", "BitXor": "^", "LShift": "<<", "RShift": ">>"}
# in-place methods whose name without the underscore is the out-of-place method with the same arguments
_OUT_OF_PLACE = frozenset({"add_", "sub_", "mul_", "div_", "pow_", "clamp_", "clamp_min_", "clamp_max_", "clip_",
                           "relu_", "sigmoid_", "tanh_", "exp_", "log_", "sqrt_", "rsqrt_", "abs_", "neg_",
                           "masked_fill_", "index_add_", "index_fill_", "scatter_", "scatter_add_", "addcmul_",
                           "addcdiv_", "lerp_", "floor_", "ceil_", "round_", "sign_", "fmod_", "remainder_",
                           "reciprocal_", "sin_", "cos_"})
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While, ast.If,
             ast.With, ast.AsyncWith, ast.Try)
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Tuple, ast.Dict)


def text(node: ast.AST, ctx) -> str:
    r = ctx.range(node)
    if r.start.line == r.end.line:
        return ctx.index.line(r.start.line)[r.start.character:r.end.character]
    if not isinstance(node, ast.AST):  # a Spot (known by its position): its first line
        return ctx.index.line(r.start.line)[r.start.character:].rstrip()
    return ast.unparse(node)


def short(node: ast.AST, ctx, limit: int = 60) -> str:
    t = text(node, ctx)
    return t if len(t) <= limit else t[: limit - 3] + "..."


def _statement_range(stmt: ast.stmt, ctx) -> Range:
    return ctx.range(stmt)


def _loads_after(name: str, hit, unit) -> bool:
    """Is ``name`` read after the editing statement -- later in the unit, or
    anywhere in an enclosing loop's body, before the loop binds it again?"""
    stmt = hit.stmt
    end = getattr(stmt, "end_lineno", stmt.lineno)
    head, _, _ = name.partition(".")
    inside = {id(n) for n in ast.walk(stmt)}
    for n in A.block_nodes(unit.body):
        if id(n) in inside:
            continue
        if _reads(n, name, head) and n.lineno > end:  # type: ignore[attr-defined]
            return True
    for loop in _enclosing_loops(unit.body, stmt):
        first_store = None
        first_load = None
        for n in A.block_nodes(getattr(loop, "body")):
            if id(n) in inside:
                continue
            if isinstance(n, ast.Name) and n.id == name:
                pos = (n.lineno, n.col_offset)
                if isinstance(n.ctx, ast.Store):
                    first_store = pos if first_store is None or pos < first_store else first_store
                elif first_load is None or pos < first_load:
                    first_load = pos
            elif "." in name and _reads(n, name, head):
                return True
        if first_load is not None and (first_store is None or first_load < first_store):
            return True
    return False


def _reads(n: ast.AST, name: str, head: str) -> bool:
    if "." in name:
        return isinstance(n, ast.Attribute) and A.dotted(n) == name and isinstance(n.ctx, ast.Load)
    return isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)


def _enclosing_loops(body, stmt) -> "List[ast.stmt]":
    out: "List[ast.stmt]" = []

    def walk(stmts, chain):
        for s in stmts:
            if s is stmt:
                out.extend(chain)
                return True
            loop = [s] if isinstance(s, (ast.For, ast.AsyncFor, ast.While)) else []
            for block in A.child_blocks(s):
                if walk(block, chain + loop):
                    return True
        return False

    walk(body, [])
    walk = None  # type: ignore[assignment]  # (a closure that calls itself is a reference cycle holding ``stmt``)
    return out


def _safe(hit, unit) -> bool:
    if hit.escaped:
        return False  # a list or an attribute keeps a view of the edited tensor: it would miss the edit
    return not any(_loads_after(a, hit, unit) for a in hit.aliases)


def fixes_for(hit, unit, ctx) -> "List[Fix]":
    fix = _fix(hit, unit, ctx)
    return [fix] if fix is not None else []


def _fix(hit, unit, ctx) -> "Optional[Fix]":
    if hit.how == "callee-inner":
        # the index write inside the called function or module: a copy of its local first
        # (the callee's own tensors, so no caller sees a difference)
        name, at = hit.inside_copy, hit.inside
        if not name or at is None:
            return None
        start = ctx.pos(at.lineno, at.col_offset)
        indent = ctx.index.line(at.lineno - 1)[: start.character]
        if indent.strip():
            return None
        return Fix(M.fix_clone_before(name), (TextEdit(Range(start, start), f"{name} = {name}.clone()\n{indent}"),),
                   preferred=True)
    if hit.how in ("callee", "index") and isinstance(hit.target, ast.Attribute) and isinstance(hit.saver, ast.Call):
        # a method edits a buffer the saving operation read (MoCo's queue): the operation reads a
        # copy, as it would have seen the buffer then (``einsum(..., [q, self.queue.clone()])``)
        read = _attribute_read(hit.saver, hit.target.attr)
        if read is None:
            return None
        end = ctx.range(read).end
        return Fix(M.fix_clone_read(text(read, ctx)), (TextEdit(Range(end, end), ".clone()"),), preferred=True)
    if not _safe(hit, unit):
        return None
    node, stmt = hit.node, hit.stmt
    if hit.how == "callee" and isinstance(hit.target, ast.Name) and isinstance(node, ast.Call) \
            and any(a is hit.target for a in node.args):
        # a function of the file edits the argument in place (``batch -= mean`` in a helper): it gets
        # a copy, when the caller binds the result back to that name or reads the name no more
        name = hit.target.id
        back = isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
        if not back and _loads_after(name, hit, unit):
            return None
        end = ctx.range(hit.target).end
        call = text(node.func, ctx)
        return Fix(M.fix_clone_argument(call, name), (TextEdit(Range(end, end), ".clone()"),), preferred=True)
    if hit.how == "augassign" and isinstance(node, ast.AugAssign) and (isinstance(node.target, ast.Name) or (
            isinstance(node.target, ast.Subscript) and isinstance(node.target.value, ast.Name))):
        # (``laterals[i - 1] += ...``: an element of a list, mmdet's FPN: the element rebound)
        name = node.target.id if isinstance(node.target, ast.Name) else text(node.target, ctx)
        value = text(node.value, ctx)
        if not isinstance(node.value, _ATOMS):
            value = f"({value})"
        new = f"{name} = {name} {AUG[type(node.op).__name__]} {value}"
        return Fix(M.fix_out_of_place(new), (TextEdit(_statement_range(node, ctx), new),), preferred=True)
    if hit.how == "index":
        base = getattr(node.target if isinstance(node, ast.AugAssign) else node, "value", None)
        if not isinstance(base, ast.Name) or not isinstance(stmt, (ast.Assign, ast.AugAssign)):
            return None
        name = base.id
        read = _read_in_saver(hit, stmt, name)
        if read is not None:
            # ``x[s] = x[s] * w``: the product saved the slice the write then changes; a copy made
            # first would be read (and saved) instead, so the copy goes on the read
            end = ctx.range(read).end
            return Fix(M.fix_clone_read(text(read, ctx)), (TextEdit(Range(end, end), ".clone()"),), preferred=True)
        if A.within(hit.saver, stmt) and any(_reads(n, name, name) for n in ast.walk(hit.saver)):
            return None  # the copy would be the tensor read, saved and written
        start = ctx.pos(stmt.lineno, stmt.col_offset)
        indent = ctx.index.line(stmt.lineno - 1)[: start.character]
        if indent.strip():
            return None  # the statement does not start its line (``a = 1; h[0] = v``)
        new = f"{name} = {name}.clone()\n{indent}"
        return Fix(M.fix_clone_before(name), (TextEdit(Range(start, start), new),), preferred=True)
    if hit.how == "method" and isinstance(node, ast.Call) and isinstance(stmt, ast.Expr) and stmt.value is node:
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in _OUT_OF_PLACE):
            return None
        name = func.value.id
        call_text, func_text = text(node, ctx), text(func, ctx)
        if not call_text.startswith(func_text):
            return None
        new = f"{name} = {name}.{func.attr[:-1]}{call_text[len(func_text):]}"
        return Fix(M.fix_out_of_place(new), (TextEdit(ctx.range(node), new),), preferred=True)
    if hit.how == "inplace-arg" and isinstance(node, ast.Call):
        if not _bound_back(node, stmt):
            return None
        for kw in node.keywords:
            if kw.arg == "inplace":
                return Fix(M.fix_inplace_arg_false(), (TextEdit(ctx.range(kw.value), "False"),), preferred=True)
        return None
    if hit.how == "inplace-layer" and hit.layer is not None and hit.layer.inplace_node is not None:
        if hit.layer.kind == "Sequential" or not _layer_calls_bound(hit, unit):
            return None
        return Fix(M.fix_inplace_false(), (TextEdit(ctx.range(hit.layer.inplace_node), "False"),), preferred=True)
    return None


def _attribute_read(call: ast.Call, attr: str) -> "Optional[ast.expr]":
    """The one operand of ``call`` (an argument, or an element of a list argument) that reads
    ``self.<attr>`` as it is."""
    operands = [x for a in call.args for x in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
    if isinstance(call.func, ast.Attribute):
        operands.append(call.func.value)  # ``self.queue.mm(q)``
    reads = [o for o in operands if _reads_attribute(o, attr)]
    return reads[0] if len(reads) == 1 else None


def _reads_attribute(o: ast.expr, attr: str) -> bool:
    """``self.<attr>``, or a detached view of it (``self.queue.detach()``)."""
    while isinstance(o, ast.Call) and isinstance(o.func, ast.Attribute) and o.func.attr == "detach" and not o.args:
        o = o.func.value
    return isinstance(o, ast.Attribute) and o.attr == attr and isinstance(o.value, ast.Name)


def _read_in_saver(hit, stmt: ast.stmt, name: str) -> "Optional[ast.expr]":
    """The operand of the saving operation, inside the editing assignment's value, that
    reads the written tensor (``x[s]`` in ``x[s] = x[s] * w``), when it is the only one."""
    saver = hit.saver
    if not isinstance(stmt, ast.Assign) or not A.within(saver, stmt.value):
        return None
    if isinstance(saver, ast.BinOp):
        operands = [saver.left, saver.right]
    elif isinstance(saver, ast.Call):
        operands = list(saver.args)
        if isinstance(saver.func, ast.Attribute):
            operands.append(saver.func.value)
    else:
        return None
    reads = []
    for o in operands:
        base = o.value if isinstance(o, ast.Subscript) else o
        if isinstance(o, (ast.Subscript, ast.Name)) and isinstance(base, ast.Name) and base.id == name:
            reads.append(o)
    return reads[0] if len(reads) == 1 else None


def _bound_back(call: ast.Call, stmt: ast.stmt) -> bool:
    """``x = f(x, ...)`` or ``return f(x, ...)``: the caller keeps only the result."""
    if isinstance(stmt, ast.Return):
        return True
    arg = call.args[0] if call.args else None
    return (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(arg, ast.Name)
            and stmt.targets[0].id == arg.id)


def _layer_calls_bound(hit, unit) -> bool:
    """Every call of the layer in the class (or the unit) binds its result back to
    the argument's name or returns it; a layer inside a Sequential is always."""
    name = hit.layer.name
    if not name:
        return True  # an element of a Sequential: its input is an intermediate nobody else reads
    owner = unit.class_node if name.startswith("self.") and unit.class_node is not None else None
    scope = owner.body if owner is not None else unit.body
    for s in A.iter_statements(scope) if owner is None else _all_statements(owner):
        if isinstance(s, _COMPOUND):
            continue  # its blocks' statements come on their own
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and _calls(n, name):
                if not _bound_back(n, s):
                    return False
    return True


def _all_statements(cls: ast.ClassDef):
    for d in cls.body:
        if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from A.iter_statements(d.body)


def _calls(n: ast.Call, name: str) -> bool:
    f = n.func
    if "." in name:
        return A.dotted(f) == name
    return isinstance(f, ast.Name) and f.id == name


__all__ = ["AUG", "Position", "fixes_for", "short", "text"]
