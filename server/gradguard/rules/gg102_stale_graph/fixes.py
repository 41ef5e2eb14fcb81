"""GG102's fixes: given a finding's stale value (the statements that build it,
the loop that reuses it, the leaves it starts from), the text edits that
detach it, build it under ``no_grad``, rebuild it in every iteration, or drop
``requires_grad=True`` from the data it starts at. The analysis decides which
value and whether its sources are trained; this module only writes edits, each
one refused (None) when the text around it is not the plain shape it needs.

The block structure is the analysis's: ``parent`` maps ``id(stmt)`` to
``(block, index)`` and ``owner`` maps ``id(block)`` to the compound statement
holding it, for every statement the analysis walked.
"""

from __future__ import annotations

import ast
from _thread import _local  # threading.local itself, without importing threading (start-up)

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.model.findings import Fix, Position, Range, TextEdit
from gradguard.rules.gg102_stale_graph import messages as M
from gradguard.rules.gg102_stale_graph import syntax as S

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, List, Optional, Set, Tuple


class Fixes:
    """The fix builders for the findings of one unit's analysis (``ctx``: the
    module's ModuleContext, ``unit``: the unit analysed)."""

    def __init__(self, ctx, unit, parent: Dict[int, Tuple[list, int]],
                 owner: Dict[int, ast.stmt]):
        self.ctx = ctx
        self.unit = unit
        self.parent = parent
        self.owner = owner

    def choose(self, h, srcs, trained: bool, grad_used: Set[str], trained_attrs: Set[str]) -> Tuple[Fix, ...]:
        """The finding's fixes, the first one preferred. ``trained``: the value's
        sources are trained (parameters, modules, data whose gradient is read, or
        the only thing the loop's loss learns through): rebuild it in every
        iteration; otherwise the data need not require grad at all."""
        var = h.var
        remove = None if trained else self._fix_remove(var, srcs, grad_used)
        # `var.backward()` itself: a detached loss has nothing to back-propagate (torch raises
        # "element 0 of tensors does not require grad"), so no detach and no no_grad is a fix
        # nor where ``torch.autograd.grad(outputs, inputs)`` differentiates through the value
        # (the finding says its graph lies between the outputs and the inputs): a detach cuts
        # the outputs off the inputs
        own_loss = _backward_of(h.backward, var, self.ctx) or _differentiates(h.backward, self.ctx)
        detach = None if own_loss else self._fix_detach(h)
        nograd = None if own_loss else self._fix_nograd(h)
        recompute = self._fix_recompute(h) if trained and isinstance(h.loop, A.LOOPS) else (
            self._fix_recompute_remote(h) if trained and h.remote_body is not None else None)
        order = [recompute, detach, nograd] if trained else [remove, detach, nograd]
        keep_fixed = False
        if h.remote is not None and recompute is not None and not any(
                s.kind in ("param", "module") or s.name in trained_attrs for s in srcs):
            # data whose gradient is only read (self.X.grad): keep the value fixed where it is built
            order = [detach, recompute, nograd]
            keep_fixed = True
        # a detach (or no_grad) of a value built from what the loop updates changes the update
        # (no gradient reaches it through the value): offered, never preferred
        stepped = trained and not keep_fixed and self._updated(srcs, grad_used)
        out: List[Fix] = []
        for f in order:
            if f is not None:
                preferred = not out and not (stepped and f in (detach, nograd))
                out.append(Fix(f.title, f.edits, preferred=preferred))
        return tuple(out)

    def _updated(self, srcs, grad_used: Set[str]) -> bool:
        """Does the program update one of the value's sources: a tensor whose
        ``.grad`` it reads, or something handed to an optimizer this unit builds
        (``AdamW(params)`` with ``params = list(emb.parameters()) + ...``; an
        optimizer built elsewhere is not looked for)?"""
        if any(s.name in grad_used for s in srcs if s.name):
            return True
        handed = _optimized_once(self.unit.body, self.ctx)
        for s in srcs:
            if s.kind not in ("param", "module") or not s.name:
                continue
            if any(s.name == m or s.name.startswith(m + ".") or m.startswith(s.name + ".") for m in handed):
                return True
        return False

    def _fix_remove(self, var: str, srcs, grad_used: Set[str]) -> Optional[Fix]:
        if not srcs or any(s.kind != "data" or s.removal is None or s.name in grad_used for s in srcs):
            return None
        edits: List[TextEdit] = []
        for s in srcs:
            e = self._removal_edit(s.removal)
            if e is None:
                return None
            edits.append(e)
        names = ", ".join(f"`{s.name}`" for s in srcs if s.name) or "the tensor"
        return Fix(M.fix_remove(names), tuple(edits))

    def _removal_edit(self, removal) -> Optional[TextEdit]:
        ctx = self.ctx
        if removal[0] == "method":  # torch.rand(3).requires_grad_()
            call = removal[1]
            recv = call.func.value
            start = ctx.pos(recv.end_lineno, recv.end_col_offset)
            end = ctx.pos(call.end_lineno, call.end_col_offset)
            return TextEdit(Range(start, end), "")
        _, kw, call = removal
        items = sorted(list(call.args) + list(call.keywords), key=lambda n: (n.lineno, n.col_offset))
        i = next((j for j, n in enumerate(items) if n is kw), None)
        if i is None:
            return None
        kw_start = ctx.pos(kw.lineno, kw.col_offset)
        kw_end = ctx.pos(kw.end_lineno, kw.end_col_offset)
        if i > 0:
            prev = items[i - 1]
            start = ctx.pos(prev.end_lineno, prev.end_col_offset)
            end = kw_end
        elif i + 1 < len(items):
            nxt = items[i + 1]
            start = kw_start
            end = ctx.pos(nxt.lineno, nxt.col_offset)
        else:
            start, end = kw_start, kw_end
            # also drop a trailing comma: torch.rand(requires_grad=True,)
            line = ctx.index.line(end.line)
            j = end.character
            while j < len(line) and line[j] in " \t":
                j += 1
            if j < len(line) and line[j] == ",":
                end = Position(end.line, j + 1)
        if "#" in self._text(Range(start, end)):
            return None
        return TextEdit(Range(start, end), "")

    def _text(self, r: Range) -> str:
        lines = [self.ctx.index.line(n) for n in range(r.start.line, r.end.line + 1)]
        if len(lines) == 1:
            return lines[0][r.start.character:r.end.character]
        return "\n".join([lines[0][r.start.character:]] + lines[1:-1] + [lines[-1][:r.end.character]])

    def _whole_lines(self, s: ast.stmt) -> bool:
        """The statement owns its lines: nothing but indentation before it and
        nothing but a comment after it."""
        ctx = self.ctx
        first = ctx.index.line(s.lineno - 1)
        start = ctx.pos(s.lineno, s.col_offset).character
        if first[:start].strip():
            return False
        last = ctx.index.line(s.end_lineno - 1)  # type: ignore[operator]
        end = ctx.pos(s.end_lineno, s.end_col_offset).character
        rest = last[end:].strip()
        return not rest or rest.startswith("#")

    def _loop_blocks(self, loop: Optional[ast.stmt]) -> Set[int]:
        if loop is None:  # the loop is in another method: fix at the top level of this one
            return {id(self.unit.body)}
        out: Set[int] = set()
        cur = loop
        while id(cur) in self.parent:
            block, _ = self.parent[id(cur)]
            out.add(id(block))
            nxt = self.owner.get(id(block))
            if nxt is None:
                break
            cur = nxt
        return out

    def _lift(self, s: ast.stmt, blocks: Set[int]) -> Optional[ast.stmt]:
        """The statement, or the compound statement containing it, that sits in one
        of ``blocks`` (the blocks enclosing the loop)."""
        cur = s
        for _ in range(100):
            if id(cur) not in self.parent:
                return None
            block, _i = self.parent[id(cur)]
            if id(block) in blocks:
                return cur
            cur = self.owner.get(id(block))  # type: ignore[assignment]
            if cur is None:
                return None
        return None

    def _insert_after(self, s: ast.stmt, text_lines: List[str]) -> TextEdit:
        nlines = len(self.ctx.index.lines)
        body = "".join(t + "\n" for t in text_lines)
        if s.end_lineno < nlines:  # type: ignore[operator]
            p = Position(s.end_lineno, 0)  # type: ignore[arg-type]
            return TextEdit(Range(p, p), body)
        last = self.ctx.index.line(s.end_lineno - 1)  # type: ignore[operator]
        p = Position(s.end_lineno - 1, len(last))  # type: ignore[operator]
        return TextEdit(Range(p, p), "\n" + body.rstrip("\n"))

    def _fix_detach(self, h) -> Optional[Fix]:
        var = h.var
        if _holds_a_container(h.stmts, var):
            return None  # `outputs = outputs.detach()` on a list raises AttributeError
        last = self._lift(h.stmts[-1], self._loop_blocks(h.loop))
        if last is None or not self._whole_lines(last):
            return None
        indent = self.ctx.indent_of(last.lineno)
        edit = self._insert_after(last, [f"{indent}{var} = {var}.detach()"])
        return Fix(M.fix_detach(var), (edit,))

    def _nograd_expr(self) -> Optional[str]:
        imports = self.ctx.imports
        for k, v in sorted(imports.items()):
            if v == "torch":
                return f"{k}.no_grad()"
        for k, v in sorted(imports.items()):
            if v in ("torch.no_grad", "torch.autograd.no_grad"):
                return f"{k}()"
        return None

    def _fix_nograd(self, h) -> Optional[Fix]:
        expr = self._nograd_expr()
        if expr is None:
            return None
        blocks = self._loop_blocks(h.loop)
        first = self._lift(h.stmts[0], blocks)
        last = self._lift(h.stmts[-1], blocks)
        if first is None or last is None or self.parent[id(first)][0] is not self.parent[id(last)][0]:
            return None
        if not (self._whole_lines(first) and self._whole_lines(last)):
            return None
        block, i = self.parent[id(first)]
        _, j = self.parent[id(last)]
        if any(isinstance(x, A.LOOPS) for x in block[i:j + 1]):
            return None
        # only these statements (and blank/comment lines) between first and last: a module unit's
        # block skips the defs that may sit between its statements
        for a, b in zip(block[i:j], block[i + 1:j + 1]):
            for n in range(a.end_lineno, b.lineno - 1):
                text = self.ctx.index.line(n).strip()
                if text and not text.startswith("#"):
                    return None
        indent = self.ctx.indent_of(first.lineno)
        unit = "\t" if indent.startswith("\t") else "    "
        lines = [self.ctx.index.line(n) for n in range(first.lineno - 1, last.end_lineno)]  # type: ignore[arg-type]
        new = [f"{indent}with {expr}:"] + [(unit + ln) if ln.strip() else ln for ln in lines]
        end_line = last.end_lineno - 1  # type: ignore[operator]
        rng = Range(Position(first.lineno - 1, 0), Position(end_line, len(self.ctx.index.line(end_line))))
        return Fix(M.fix_nograd(h.var, expr), (TextEdit(rng, "\n".join(new)),))

    def _fix_recompute_remote(self, h) -> Optional[Fix]:
        """Rebuild ``self.attr`` at the top of the other method's loop body (the
        statements that build it are copied; ``__init__`` keeps its own copy for
        whatever else reads the attribute). Only when those statements read
        nothing local to this method but ``self``."""
        node = self.unit.node
        stmts = list(h.stmts)
        me = S.self_arg(node)
        local = S.assigned_in(self.unit.body) | {a.arg for a in list(node.args.posonlyargs) + list(node.args.args)
                                                + list(node.args.kwonlyargs)}
        for x in (node.args.vararg, node.args.kwarg):
            if x is not None:
                local.add(x.arg)
        local.discard(me)
        for st in stmts:
            pb = self.parent.get(id(st))
            if pb is None or pb[0] is not self.unit.body or not self._whole_lines(st):
                return None
            if not isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                return None
            for n in S.walk_no_scopes(st):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in local:
                    return None  # a local of this method: not available in the other one
        at = h.remote_body
        indent = self.ctx.index.line(at.line)[:at.character]
        if indent.strip():
            return None
        text: List[str] = []
        for st in stmts:
            old_indent = self.ctx.indent_of(st.lineno)
            for n in range(st.lineno - 1, st.end_lineno):
                ln = self.ctx.index.line(n)
                text.append(indent + ln[len(old_indent):] if ln.startswith(old_indent) and ln.strip() else ln)
        p = Position(at.line, 0)
        return Fix(M.fix_recompute_remote(h.var, h.via), (TextEdit(Range(p, p), "".join(t + "\n" for t in text)),))

    def _fix_recompute(self, h) -> Optional[Fix]:
        """Move the statements that build the value to the top of the loop body (an
        ``if`` of plain assignments holding them moves whole); copy them there instead
        when code between them and the loop reads the value (``print(loss.item())``)."""
        loop = h.loop
        if loop is None or id(loop) not in self.parent or not loop.body or loop.body[0].lineno <= loop.lineno:
            return None
        block, li = self.parent[id(loop)]
        stmts: list = []  # ast statements (their end_lineno is known: parsed code)
        for s in h.stmts:
            pb = self.parent.get(id(s))
            if pb is not None and pb[0] is not block:
                s = self._lift(s, {id(block)})
                if s is None or not self._plain_if(s):
                    return None
            if all(s is not x for x in stmts):
                stmts.append(s)
        stmts.sort(key=lambda x: x.lineno)
        idxs = []
        for s in stmts:
            pb = self.parent.get(id(s))
            if pb is None or pb[0] is not block or not self._whole_lines(s):
                return None
            idxs.append(pb[1])
        bound: Set[str] = set()
        reads: Set[str] = set()
        for s in stmts:
            for b in (s.body if isinstance(s, ast.If) else [s]):
                bound |= S.stmt_binds(b)
            reads |= S.names_read(s)
        moved = {id(s) for s in stmts}
        copy = False
        for other in block[min(idxs):li]:
            if id(other) in moved:
                continue
            if S.names_read(other, loads_only=False) & bound:
                if not self._only_reads(other, bound, reads - bound):
                    return None
                copy = True  # read before the loop: it stays there, the loop builds its own
        # the loop header and the code after the loop must not need the moved values
        header = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else loop.test
        after = [header] + list(getattr(loop, "orelse", [])) + list(block[li + 1:])
        for node in after:
            if S.names_read(node, loads_only=False) & bound:
                return None
        loop_assigned = S.assigned_in(loop.body)
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            loop_assigned |= set(S.bound_names(loop.target))
        if (reads - bound) & loop_assigned:
            return None
        first_body = loop.body[0]
        new_indent = self.ctx.indent_of(first_body.lineno)
        edits: List[TextEdit] = []
        text: List[str] = []
        for s in stmts:
            old_indent = self.ctx.indent_of(s.lineno)
            for n in range(s.lineno - 1, s.end_lineno):
                ln = self.ctx.index.line(n)
                text.append(new_indent + ln[len(old_indent):] if ln.startswith(old_indent) and ln.strip() else ln)
            if not copy:
                edits.append(TextEdit(Range(Position(s.lineno - 1, 0), Position(s.end_lineno, 0)), ""))
        p = Position(first_body.lineno - 1, 0)
        edits.append(TextEdit(Range(p, p), "".join(t + "\n" for t in text)))
        if any(s.end_lineno >= len(self.ctx.index.lines) for s in stmts):
            return None
        return Fix(M.fix_recompute(h.var), tuple(edits))


    def _plain_if(self, s: ast.stmt) -> bool:
        """``if flag:`` holding only plain assignments (no ``else``): it can run in
        every iteration as it ran once before the loop."""
        return isinstance(s, ast.If) and not s.orelse and all(
            isinstance(b, (ast.Assign, ast.AnnAssign)) and self._whole_lines(b) for b in s.body)

    @staticmethod
    def _only_reads(other: ast.stmt, bound: Set[str], reads: Set[str]) -> bool:
        """Is ``other`` (between the value's statements and the loop) a statement
        that only looks at the value: an expression statement reading it as
        ``v.item()`` (or ``.tolist()``, ``.size()``, ...) or handing it to
        ``print``, and changing nothing it is built from (no in-place method, no
        backward or optimizer step)? Then the value stays where it is for that
        statement, and a copy of its statements at the top of the loop builds the
        same value as before (nothing else holds the old one)."""
        if not isinstance(other, ast.Expr):
            return False
        looked = set()
        for n in ast.walk(other):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                name = n.func.attr
                if name in ("backward", "step", "zero_grad") or name.endswith("_") and not name.startswith("_"):
                    return False
                if name in _LOOKS and isinstance(n.func.value, ast.Name):
                    looked.add(id(n.func.value))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print":
                looked.update(id(a) for a in n.args if isinstance(a, ast.Name))
        return all(id(n) in looked for n in ast.walk(other) if isinstance(n, ast.Name) and n.id in bound)


_LOOKS = frozenset({"item", "tolist", "size", "dim", "numel"})


# _optimized of the last body asked about (by identity, with its context): a module-level
# script with many findings asked it once per finding, each a walk of the whole module.
_OPTIMIZED_MEMO = _local()


def _optimized_once(body: List[ast.stmt], ctx) -> Set[str]:
    """:func:`_optimized`, made once for the same body and context (read only)."""
    memo = getattr(_OPTIMIZED_MEMO, "memo", None)
    if memo is None or memo[0] is not body or memo[1] is not ctx:
        memo = _OPTIMIZED_MEMO.memo = (body, ctx, _optimized(body, ctx))
    return memo[2]


def _optimized(body: List[ast.stmt], ctx) -> Set[str]:
    """The dotted names handed to a ``torch.optim`` constructor in ``body`` (not in
    nested scopes): ``Adam(model.parameters())`` → model, ``SGD([w, b])`` → w, b,
    and through the body's assignments to a plain name handed there
    (``params = list(a.parameters()) + list(b.parameters())``) → a, b."""
    assigned: Dict[str, List[ast.expr]] = {}
    args: List[ast.expr] = []
    for st in body:
        for n in S.walk_no_scopes(st):
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Name):
                        assigned.setdefault(t.id, []).append(n.value)
            elif isinstance(n, ast.Call) and (A.qualify(n.func, ctx) or "").startswith(K.OPTIMIZER_PREFIXES):
                args.extend(n.args)
                args.extend(k.value for k in n.keywords)
    out: Set[str] = set()
    todo = list(args)
    seen: Set[str] = set()
    while todo:
        for d in _handed_names(todo.pop()):
            if d in out:
                continue
            out.add(d)
            if "." not in d and d not in seen:
                seen.add(d)
                todo.extend(assigned.get(d, ()))
    return out


def _handed_names(expr: ast.expr) -> Set[str]:
    """The names and attribute chains ``expr`` reads as values (``m.parameters()``
    → m; ``[w, self.b]`` → w, self.b), not the functions it calls."""
    out: Set[str] = set()
    heads = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Call):
            heads.add(id(n.func))
            if isinstance(n.func, ast.Attribute) and n.func.attr in ("parameters", "named_parameters"):
                d = A.dotted(n.func.value)
                if d:
                    out.add(d)
    inner = {id(n.value) for n in ast.walk(expr) if isinstance(n, ast.Attribute)}
    for n in ast.walk(expr):
        if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in heads and id(n) not in inner:
            d = A.dotted(n)
            if d:
                out.add(d)
    return out


def _backward_of(call, var: str, ctx) -> bool:
    """Is ``call`` a backward of ``var`` itself (``var.backward()``,
    ``torch.autograd.grad(var, ...)``, ``scaler.scale(var).backward()``)?"""
    if not isinstance(call, ast.Call) or not A.is_backward_call(call, ctx):
        return False
    target = A.backward_target(call, ctx)
    return isinstance(target, ast.Name) and target.id == var


def _differentiates(call, ctx) -> bool:
    """``torch.autograd.grad(...)``: gradients of its outputs with respect to its inputs."""
    return isinstance(call, ast.Call) and ctx.qualify(call.func) == "torch.autograd.grad"


_CONTAINERS = (ast.List, ast.ListComp, ast.Tuple, ast.Dict, ast.DictComp, ast.Set, ast.SetComp, ast.GeneratorExp)


def _holds_a_container(stmts, var: str) -> bool:
    """Is ``var`` bound to a list/tuple/dict display or comprehension, or filled by
    ``var.append(...)``, in the statements that build its graph? Such a value has
    no ``.detach()``: the one-line detach fix would raise AttributeError."""
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, _CONTAINERS):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(ast.unparse(t) == var for t in targets):
                    return True
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("append", "extend", "insert") and ast.unparse(node.func.value) == var):
                return True
    return False
