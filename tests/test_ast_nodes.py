"""The shared node lists (analysis.ast_util.body_nodes / block_nodes / unit_nodes)
are exactly what a walk (iter_nodes) gives, in the same order, for every def and
every statement list of the fixture programs and of code written to be awkward."""

import ast
import gc
import weakref
from pathlib import Path

from gradguard.analysis import ast_util as A
from gradguard.analysis.context import iter_units

FIXTURES = Path(__file__).parent / "fixtures"

AWKWARD = '''
def f(x, 变量=1):
    for i in range(3):
        while x:
            if i:
                x = [y for y in x if y]
            elif x:
                def inner(z):
                    for k in z:
                        k.backward()
                    return z
                x = inner(x)
            else:
                pass
        else:
            try:
                x += 1
            except (ValueError, KeyError) as e:
                with open(x) as fh, g() as h:
                    x = lambda q: q.backward()
            finally:
                class C:
                    a = 1
                    def m(self):
                        return self.a
    match x:
        case [a, *rest] if a:
            x = rest
        case {"k": v}:
            x = v
    async def g():
        async for t in x:
            await t
        async with x as y:
            pass
    return x
'''


def _statement_lists(tree):
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            v = getattr(node, name, None)
            if isinstance(v, list) and v and isinstance(v[0], ast.stmt):
                yield v


def _check(source: str) -> int:
    tree = ast.parse(source)
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    for d in defs:
        assert A.body_nodes(d) == list(A.iter_nodes(d.body))
        assert A.body_nodes(d) is A.body_nodes(d)  # walked once
    blocks = 0
    for block in _statement_lists(tree):
        assert A.block_nodes(block) == list(A.iter_nodes(block))
        blocks += 1
    for unit in iter_units(tree.body, True):
        assert A.unit_nodes(unit) == list(A.iter_nodes(list(unit.body)))
    return blocks


def test_awkward_code():
    assert _check(AWKWARD) > 10


def test_every_fixture():
    files = sorted(FIXTURES.glob("**/*.py"))
    assert files
    for f in files:
        _check(f.read_text(encoding="utf-8"))


def test_a_list_that_is_not_a_body_is_walked():
    tree = ast.parse("def f(x):\n    a = 1\n    def g():\n        pass\n    b = x.grad\n")
    fn = tree.body[0]
    A.body_nodes(fn)
    picked = [fn.body[0], fn.body[2]]  # skips the nested def: not one stretch of the def's walk
    assert A.block_nodes(picked) == list(A.iter_nodes(picked))


def test_no_reference_cycle_keeps_a_tree():
    tree = ast.parse(AWKWARD)
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            A.body_nodes(n)
    probe = weakref.ref(tree.body[0].body[0])  # a statement inside the def: it refers to the def's list
    gc.disable()
    try:
        del tree, n
        assert probe() is None  # freed by reference counting alone
    finally:
        gc.enable()


def _walk_order(stmt, match, source_order):
    """The plain walk GG103's statement scans must agree with."""
    out, stack = [], [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        m = match(n)
        if m is not None:
            out.append(m)
        children = list(ast.iter_child_nodes(n))
        if source_order:
            children.reverse()
        stack.extend(children)
    return out


def test_gg103_scans_read_the_shared_list_in_the_walks_order():
    # calls nested in calls (f(g(x))) make the last-child-first order differ from
    # reversed source order: those statements must still come out as the walk gives them
    from gradguard.rules import gg103_freed_in_step as G

    def calls(n):
        return n if isinstance(n, ast.Call) else None

    sources = [AWKWARD] + [f.read_text(encoding="utf-8") for f in sorted(FIXTURES.glob("gg103*.py"))]
    checked = 0
    for source in sources:
        tree = ast.parse(source)
        for d in ast.walk(tree):
            if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)):
                A.body_nodes(d)
        for memo in (None, {}):
            G._WALKS.memo = memo
            try:
                for s in ast.walk(tree):
                    if isinstance(s, ast.stmt):
                        for k, (match, order) in enumerate([(calls, True), (calls, False), (G._step_call, False)]):
                            assert G._calls_in(s, str(k), match, order) == _walk_order(s, match, order)
                            checked += 1
            finally:
                G._WALKS.memo = None
    assert checked > 1000


def test_iter_statements_is_source_order_depth_first():
    def recursive(stmts):
        for s in stmts:
            yield s
            for block in A.child_blocks(s):
                yield from recursive(block)

    tree = ast.parse(AWKWARD)
    got = list(A.iter_statements(tree.body))
    assert got == list(recursive(tree.body))
    assert [type(s).__name__ for s in got][:4] == ["FunctionDef"]  # nested defs are yielded, not entered
    fn = tree.body[0]
    kinds = [type(s).__name__ for s in A.iter_statements(fn.body)]
    assert kinds[:4] == ["For", "While", "If", "Assign"]  # depth first
    assert kinds.index("Try") < kinds.index("AugAssign") < kinds.index("ClassDef") < kinds.index("With")  # body, finalbody, handlers
    assert sum(isinstance(s, ast.Pass) for s in A.iter_statements(fn.body)) == 1  # else: pass (not the one in async def g)
    for f in sorted(FIXTURES.glob("**/*.py")):
        body = ast.parse(f.read_text(encoding="utf-8")).body
        assert list(A.iter_statements(body)) == list(recursive(body))


def test_walk_all_is_ast_walk_without_ctx_nodes():
    for source in [AWKWARD] + [f.read_text(encoding="utf-8") for f in sorted(FIXTURES.glob("**/*.py"))]:
        for stmt in ast.parse(source).body:
            expected = [n for n in ast.walk(stmt) if not isinstance(n, ast.expr_context)]
            assert list(A.walk_all(stmt)) == expected


def test_a_bare_name_is_a_backward_call_only_through_an_import():
    from gradguard.analysis.context import ModuleContext
    from gradguard.model.text import LineIndex

    def ctx(imports):
        return ModuleContext(None, LineIndex(""), {}, imports)

    def call(src):
        return ast.parse(src).body[0].value

    aliased = ctx({"g": "torch.autograd.grad", "backward": "torch.autograd.backward", "autograd": "torch.autograd"})
    assert A.is_backward_call(call("g(loss, params)"), aliased)
    assert A.is_backward_call(call("backward(loss)"), aliased)
    assert A.is_backward_call(call("autograd.grad(loss, params)"), aliased)
    assert A.is_backward_call(call("loss.backward()"), aliased)
    assert not A.is_backward_call(call("model(x)"), aliased)
    assert not A.is_backward_call(call("grad(loss, params)"), ctx({}))  # not imported: someone's own grad()
    assert not A.is_backward_call(call("g(loss)"), None)
    assert A.is_backward_call(call("autograd.backward(loss)"), None)  # the default alias of torch.autograd
    assert A.is_backward_call(call("torch.autograd.grad(loss, params)"), ctx({"torch": "torch"}))


def test_an_analysis_leaves_no_reference_cycle():
    # A closure that calls itself (GG201's statement visitor was one) is a reference
    # cycle: the unit and its whole tree then live until the cyclic collector runs,
    # which a one-shot check all but turns off (gc.set_threshold(200_000, ...)), so a
    # project's trees piled up. Every fixture's analysis must be freed by reference counting.
    from gradguard.engine import check_source

    files = sorted(FIXTURES.glob("*.py"))
    assert len(files) > 50
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        kept = set()
        for f in files:
            check_source(f.read_text(encoding="utf-8"), str(f))
            gc.collect()
            kept |= {(f.name, type(o).__module__ + "." + type(o).__qualname__) for o in gc.garbage
                     if type(o).__module__.startswith(("gradguard", "ast"))}
            gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not kept, sorted(kept)[:10]


SAME_LINE = '''
@decorate(opt.Adam(p))
@other
def step(x):
    a = f(x); loss.backward(); b = g(a)
    for i in x: h(i); k.backward()
    out = [m(y) for y in x]; z = out
    return f"{a!r:>{b}}"
'''


def _within_is_descent(source: str) -> int:
    """A.within(node, region) against a walk of region: equal for every positioned node and
    every statement (the ones rules ask about: loops, statements of a list, defs), but for
    region's ancestors that start where it starts (an ``Expr`` and its call), which no rule asks."""
    tree = ast.parse(source)
    nodes = [n for n in ast.walk(tree) if hasattr(n, "lineno")]
    asked = 0
    for region in (n for n in nodes if isinstance(n, ast.stmt)):
        below = {id(n) for n in ast.walk(region)}
        for node in nodes:
            if node is not region and id(region) in {id(n) for n in ast.walk(node)}:
                continue  # an ancestor
            assert A.within(node, region) == (id(node) in below), (ast.dump(node)[:80], ast.dump(region)[:80])
            asked += 1
    return asked


def test_within_is_being_inside_the_region():
    assert _within_is_descent(AWKWARD) > 1000
    assert _within_is_descent(SAME_LINE) > 500  # semicolons, a one-line loop, decorators, an f-string
    for f in sorted(FIXTURES.glob("*.py"))[:40]:
        _within_is_descent(f.read_text(encoding="utf-8"))
    tree = ast.parse(SAME_LINE)
    fn = tree.body[0]
    first, backward = fn.body[0], fn.body[1]
    call = backward.value
    assert A.within(call, backward) and not A.within(call, first)  # one line, told apart by column
    assert A.within(fn.decorator_list[0].args[0], fn)  # the optimizer built in a decorator
    assert not A.within(ast.comprehension(), fn) and not A.within(("G", 3), fn)  # no position: nowhere
