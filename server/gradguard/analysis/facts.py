"""Module facts for the graph-lifetime rules: the :data:`GRAPH_FACTS` source.

Per top-level statement, coarse and hashable:

* ``fn:<name>``    → :class:`gradguard.analysis.values.FnFacts` (what a same-file function
  returns, whether it back-propagates and which parameters reach that backward,
  whether it is a detaching helper — recognised by its body, not its name);
* ``class:<name>`` → :class:`gradguard.analysis.values.ClassFacts` (bases, ``self.x = Ctor(...)``
  attributes, method facts: ``forward``, ``init_hidden``, ...);
* ``var:<name>``   → raw dotted constructor name of a module-level ``name = Ctor(...)``
  (``"nn.GRU"``, ``"RNNModel"``), qualified later through the import table;
* ``rg:global:<x>``, ``rg:returns:<f>``, ``rg:arg:<f>:<i|name>`` → tensors made to require
  grad: bound at module level, returned, passed to a function's parameter
  (:func:`requires_grad_argument`; the trace of ``f`` starts that parameter as a leaf);
* ``alias:<C>.<name>`` → the class of this file a namespace class's attribute names;
* ``flag:<f>:<i|name>`` → the truth of a constant a module-level call passes to ``f``
  (:func:`argument_flag`; the trace of ``f`` knows which way a test of it goes).

Facts never hold AST nodes, and they summarise *interfaces*: an edit inside a
body changes them only when what the function returns or back-propagates changes.
"""

from __future__ import annotations

import ast

from gradguard.analysis import knowledge as K
from gradguard.analysis import ast_util as A
from gradguard.analysis import values as V
from gradguard.analysis import steps as S
from gradguard.analysis import interpreter as interp
from gradguard.model.record import replace
from gradguard.analysis.summary import Fact, FactSource

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

_STATIC = ("staticmethod",)
_BUILTINS = frozenset(dir(__import__("builtins")))


class _FactResolver(interp.Resolver):
    """Resolution while summarising: default torch aliases, the class being
    summarised, and an optimistic assumption for recursion (a recursive call
    of the function being summarised returns what the function returns
    elsewhere — so ``tuple(repackage(v) for v in h)`` is a cut when the base
    case is)."""

    def __init__(self, self_name: Optional[str] = None, cls: Optional[V.ClassFacts] = None,
                 method: Optional[str] = None):
        summary = {}
        if cls is not None and self_name:
            summary["class:" + self_name] = cls
        super().__init__(None, summary, local_aliases=K.SUMMARY_ALIASES)
        self.current: Optional[str] = None
        # the method summarised: a call of it on its own object or class (``self.repackage(v)``,
        # ``cls.repackage(v)``) is its recursion, assumed as above on every run over the class
        self.own = ("user:" + self_name, method) if self_name and method else None

    def fn(self, name):
        if name == self.current:
            return V.FnFacts(returns_value=False)
        return None

    def method_facts(self, obj, name):
        if self.own is not None and (obj, name) == self.own:
            return V.FnFacts(returns_value=False)
        return super().method_facts(obj, name)

    def ctor_obj(self, raw, _depth=0):
        """A class of this file other than the one summarised, or of another
        module: not seen from here. Its methods' results are composed where the
        summarised function is called (``FnFacts.calls``)."""
        got = super().ctor_obj(raw, _depth)
        last = raw.rsplit(".", 1)[-1]
        if got is None and raw != "?" and last[:1].isupper() and not raw.startswith(("nn.", "torch.")) \
                and not ("." in raw and last in K.STATEFUL_LIBRARY_NAMES):
            return "pending:" + raw
        return got

    def global_obj(self, name, _depth=0):
        if name == self.current:
            return "fn:" + name
        return super().global_obj(name, _depth)


def _decorated(fn: ast.AST, *names: str) -> bool:
    """Is ``fn`` decorated ``@staticmethod`` (one of ``names``), by its bare name?"""
    return any(isinstance(d, ast.Name) and d.id in names for d in getattr(fn, "decorator_list", ()))


def _params(fn: ast.AST, method: bool) -> Tuple[Tuple[str, ...], Dict[str, ast.expr]]:
    named, defaults = A.parameters(fn, method)
    names = [p.arg for p in named]
    a: ast.arguments = fn.args  # type: ignore[attr-defined]
    if a.vararg is not None and not a.kwonlyargs:
        # forward(self, data, target, *mems): the last parameter takes every
        # remaining positional argument (FnFacts.vararg)
        names.append(a.vararg.arg)
    return tuple(names), defaults


def _hands_to_a_parameter(body, names) -> bool:
    """``meter.update(losses)``: a statement calling a method of a parameter with arguments
    (what another parameter brings may reach it: ``FnFacts.calls``' ``"@#i"``)."""
    for s in body:
        v = s.value if isinstance(s, ast.Expr) else None
        if isinstance(v, ast.Call) and v.args and isinstance(v.func, ast.Attribute) \
                and isinstance(v.func.value, ast.Name) and v.func.value.id in names:
            return True
    return False


def _needs_interpretation(body) -> bool:
    """A statement-level scan (no expression walk): a ``return <value>``, a
    ``yield``, a statement whose call back-propagates, or one calling a
    module-level function (which may: ``FnFacts.delegates``)."""
    bound: set = set()
    filled: list = []
    for s in A.iter_statements(body):
        if isinstance(s, ast.Return) and s.value is not None:
            return True
        if isinstance(s, ast.Assign):
            for t in s.targets:
                bound.update(A.target_names(t))
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.AnnAssign, ast.AugAssign)):
            bound.add("*")  # (a name bound otherwise: looked at no further, rare with a fill)
        value = s.value if isinstance(s, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)) else None
        if isinstance(value, (ast.Yield, ast.YieldFrom, ast.Await)):
            return True
        if isinstance(value, ast.Call):
            f = value.func
            name = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
            if name in K.BACKWARD_METHODS or name == "grad":
                return True
            if isinstance(f, ast.Name) and name not in _BUILTINS:
                return True
            if name in _FILLS and (isinstance(f.value, ast.Attribute) or (  # type: ignore[attr-defined]
                    isinstance(f.value, ast.Subscript) and isinstance(f.value.value, ast.Attribute))):  # type: ignore[attr-defined]
                return True  # policy.saved_log_probs.append(...), self.scalars[tag].append(...): a container kept outside
            if name == "update" and isinstance(f.value, ast.Subscript) and value.args:  # type: ignore[attr-defined]
                return True  # self.meters[k].update(v): one of a dict of meters kept outside (_outside_containers)
            if name in _FILLS and isinstance(f.value, ast.Name) and isinstance(s, ast.Expr):  # type: ignore[attr-defined]
                filled.append(f.value.id)  # type: ignore[attr-defined]
        if isinstance(s, ast.Delete):
            return True
        if _accumulates_on_attribute(s):
            return True  # self.sum += val * n: a meter keeping what it is handed
    # fmaps.append(output) on a list the body never binds: a module-level one, maybe
    return "*" not in bound and any(n not in bound for n in filled)


def _accumulates_on_attribute(s: ast.stmt) -> bool:
    """``self.sum += val * n`` (or ``meter.sum = meter.sum + val``): a running total
    kept on an object, of something that is not a constant. What the value holds is
    kept there across calls (``ContainerEffect.appends_params``: an ``AverageMeter``'s
    ``update(loss)`` keeps every loss's graph). So with a total kept under a key of a
    dict on the object (``self.totals[k] += val``, ``self.totals[k] = self.totals.get(k, 0)
    + val``), an average that reads its old value deeper in the arithmetic (``self.x = a *
    loss + (1 - a) * self.x``: each graph holds the one before), and a tensor grown by
    concatenation (``self.preds = torch.cat([self.preds, preds])``)."""
    return _accumulated_attribute(s) is not None


def _accumulated_attribute(s: ast.stmt) -> Optional[ast.Attribute]:
    """The ``X.attr`` node :func:`_accumulates_on_attribute` finds a running total on."""
    target: ast.expr
    value: ast.expr
    if isinstance(s, ast.AugAssign):
        target, value = s.target, s.value
        if isinstance(value, ast.Constant):
            return None
    elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, (ast.BinOp, ast.Call)):
        target, value = s.targets[0], s.value
    else:
        return None
    attr = target.value if isinstance(target, ast.Subscript) else target
    if not isinstance(attr, ast.Attribute) or not isinstance(attr.value, ast.Name):
        return None
    if isinstance(s, ast.AugAssign):
        return attr
    key = (attr.value.id, attr.attr)
    if isinstance(value, ast.Call):
        # self.preds = torch.cat([self.preds, preds]): the old tensor is part of the new one
        if not (isinstance(value.func, ast.Attribute) and value.func.attr in _GROWS and value.args
                and isinstance(value.args[0], (ast.List, ast.Tuple)) and len(value.args[0].elts) >= 2):
            return None
        return attr if any(_reads_attr(e, key) for e in value.args[0].elts) else None
    leaves = _arithmetic_leaves(value)
    if len(leaves) < 2 or not any(_reads_attr(e, key) for e in leaves):
        return None
    return attr


_GROWS = frozenset({"cat", "concat", "concatenate", "hstack", "vstack"})


def _arithmetic_leaves(e: ast.expr) -> List[ast.expr]:
    """The operands of an arithmetic expression (``a * loss + (1 - a) * x`` → a, loss, 1, a, x)."""
    out: List[ast.expr] = []
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.BinOp):
            stack += (n.right, n.left)
        elif isinstance(n, ast.UnaryOp):
            stack.append(n.operand)
        else:
            out.append(n)
    return out


def _reads_attr(e: ast.expr, key: Tuple[str, str]) -> bool:
    """``X.attr`` itself, ``X.attr[k]`` or ``X.attr.get(k, ...)``."""
    if isinstance(e, ast.Subscript):
        e = e.value
    elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "get":
        e = e.func.value
    return isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and (e.value.id, e.attr) == key


def _empties_own_container(fn: ast.AST) -> bool:
    """A method setting a container on its object anew (``self.ets = []`` in a scheduler's
    ``set_timesteps()``): it empties what earlier calls kept there (``ContainerEffect.clears``)."""
    args = fn.args.args  # type: ignore[attr-defined]
    me = args[0].arg if args else None
    for s in A.iter_statements(fn.body):  # type: ignore[attr-defined]
        if not isinstance(s, ast.Assign):
            continue
        if isinstance(s.value, (ast.List, ast.Dict)) and any(_own_attr(t, me) for t in s.targets):
            return True
        if isinstance(s.value, ast.Tuple) and any(  # self.values, self.log_probs = [], []
                isinstance(t, ast.Tuple) and len(t.elts) == len(s.value.elts) and any(
                    isinstance(v, (ast.List, ast.Dict)) and _own_attr(e, me) for e, v in zip(t.elts, s.value.elts))
                for t in s.targets):
            return True
    return False


def _own_attr(t: ast.expr, me: Optional[str]) -> bool:
    return isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me


_FILLS = ("append", "extend", "insert", "clear")
_NOT_OBJECTS = frozenset(A.DEFAULT_ALIASES) | K.NON_GRAPH_LIBRARIES | K.NON_GRAPH_ALIASES | {"self", "cls"}


# The node classes _outside_containers reads (every other class falls through its chain).
_OUTSIDE_KINDS = frozenset({ast.Attribute, ast.Name, ast.Call, ast.Delete, ast.AugAssign, ast.Assign, ast.Global,
                            ast.Nonlocal, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                            ast.ClassDef, ast.arg})


def _outside_containers(fn: ast.AST, names: Tuple[str, ...], me: Optional[str] = None) -> Dict[str, str]:
    """The containers a def reaches from outside, ``{dotted name in the body: path}``:
    ``X.attr`` with ``X`` a module-level name (path ``"X.attr"``) or parameter ``i``
    (``"#i.attr"``), that the body fills, clears or assigns -- or, when it back-propagates,
    reads (``torch.cat(policy.saved_log_probs)``). Calls' callees are not containers."""
    local: set = set()
    declared: set = set()
    funcs: set = set()
    changed: set = set()
    filled: list = []
    emptied: set = set()
    backprop = False
    attrs: list = []
    if me is not None and getattr(fn, "name", "") == "__init__":
        me = None  # (run once, on an object no call has filled yet)
    kinds = _OUTSIDE_KINDS
    for node in A.body_nodes(fn):  # (the def's one walk)
        cls = node.__class__
        if cls not in kinds:
            continue  # (most nodes: constants, subscripts, operators; one test instead of the chain)
        if cls is ast.Attribute:
            if node.value.__class__ is ast.Name:  # type: ignore[attr-defined]
                attrs.append(node)
        elif cls is ast.Name and not isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
            local.add(node.id)  # type: ignore[attr-defined]
        elif cls is ast.Call:
            f = node.func  # type: ignore[attr-defined]
            funcs.add(id(f))
            if isinstance(f, ast.Attribute):
                if f.attr in _FILLS:
                    changed.add(id(f.value))
                    if f.value.__class__ is ast.Subscript:
                        changed.add(id(f.value.value))  # self.scalars[tag].append(v): a dict of lists filled
                    if f.value.__class__ is ast.Name and f.attr != "clear":
                        filled.append(f.value.id)  # fmaps.append(output): a module-level list, maybe
                elif f.attr == "update" and f.value.__class__ is ast.Subscript:
                    # self.stats[phase][name].update(v): a meter of a dict of dicts of meters,
                    # filled (what its update() keeps: GraphFlow._method_call)
                    inner: ast.expr = f.value
                    while inner.__class__ is ast.Subscript:
                        inner = inner.value
                    changed.add(id(inner))
                elif f.attr in K.BACKWARD_METHODS or f.attr == "grad":
                    backprop = True
        elif cls is ast.Delete:
            for t in node.targets:  # type: ignore[attr-defined]
                changed.add(id(t.value if isinstance(t, ast.Subscript) else t))
        elif (cls is ast.AugAssign or cls is ast.Assign) and (acc := _accumulated_attribute(node)) is not None:  # type: ignore[arg-type]
            changed.add(id(acc))  # self.sum += val * n: a running total kept on the object
        elif cls is ast.Assign and me is not None and node.value.__class__ in (ast.List, ast.Dict):  # type: ignore[attr-defined]
            emptied.update(id(t) for t in node.targets)  # type: ignore[attr-defined]  # self.memory = []
        elif cls is ast.Assign and me is not None and node.value.__class__ is ast.Tuple:  # type: ignore[attr-defined]
            # self.values, self.log_probs = [], []: each target emptied by its own display
            for t in node.targets:  # type: ignore[attr-defined]
                if t.__class__ is ast.Tuple and len(t.elts) == len(node.value.elts):  # type: ignore[attr-defined]
                    emptied.update(id(e) for e, v in zip(t.elts, node.value.elts)  # type: ignore[attr-defined]
                                   if v.__class__ in (ast.List, ast.Dict))
        elif cls in (ast.Global, ast.Nonlocal):
            declared.update(node.names)  # type: ignore[attr-defined]
        elif cls in (ast.Import, ast.ImportFrom):
            local.update((a.asname or a.name).split(".")[0] for a in node.names)  # type: ignore[attr-defined]
        elif cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            local.add(node.name)  # type: ignore[attr-defined]
        elif cls is ast.arg:
            local.add(node.arg)  # type: ignore[attr-defined]
    local -= declared
    params = {n: i for i, n in enumerate(names)}
    out: Dict[str, str] = {}
    for node in attrs:
        if id(node) in funcs:
            continue
        root = node.value.id
        mine = id(node) in changed or not isinstance(node.ctx, ast.Load)
        if not (mine or backprop):
            continue
        if root == me and me is not None:
            # a method's own object's container (``self.memory.append(...)``, emptied by
            # ``self.memory = []``, read by a back-propagating ``learn()``): ``"#self.memory"``,
            # named through the receiver where the method is called (``agent.memory``)
            if id(node) in changed or id(node) in emptied or (backprop and isinstance(node.ctx, ast.Load)):
                out[f"{root}.{node.attr}"] = f"#self.{node.attr}"
            continue
        if root in local or root in _NOT_OBJECTS:
            continue
        if root in params:
            path = f"#{params[root]}.{node.attr}"
        elif root in _BUILTINS:
            continue
        else:
            path = f"{root}.{node.attr}"
        out[f"{root}.{node.attr}"] = path
    for name in filled:
        # a module-level list a function fills (a forward hook keeping feature maps):
        # path ``"fmaps"``, the name itself where the function is called
        if name not in local and name not in _NOT_OBJECTS and name not in params and name not in _BUILTINS:
            out[name] = name
    return out


def _retpos(v: V.Val, saving: frozenset = frozenset(), g: Optional[interp.GraphFlow] = None,
            dist: bool = False, step_lines: Tuple[Tuple[int, str], ...] = ()) -> V.RetPos:
    """``dist``: every return hands back a torch distribution at this position (``return
    Normal(mu, std), value``): where it is called, ``dist.sample()`` is drawn without a graph."""
    graph = any(t[0] == "G" or t[0] == "L" for t in v.taints)
    opaque = g.opaque if g is not None else None
    assumed = graph and bool(opaque) and all(t[0] != "L" and (t[0] != "G" or id(t[1]) in opaque)  # type: ignore[operator]
                                             for t in v.taints)
    via_names = frozenset(g.opaque_via[id(t[1])] for t in v.taints  # type: ignore[union-attr]
                          if t[0] == "G" and id(t[1]) in g.opaque_via) if assumed else frozenset()  # type: ignore[union-attr]
    params = frozenset(t[1] for t in v.taints if t[0] == "P")
    arity = len(v.elems) if v.elems is not None and len(v.elems) >= 2 else None
    derived = frozenset(t[1] for t in v.taints if t[0] == "Q")
    via = frozenset((t[1], t[2]) for t in v.taints if t[0] == "R")
    reads = frozenset(t[1] for t in v.taints if t[0] == "N")
    return V.RetPos(graph, params, arity, derived, v.mixed and arity is None, via,
                    "tensor" if v.kind == "tensor" and arity is None else ("dist" if dist and arity is None else None),
                    _saved_modules(v, saving), reads,
                    assumed, via_names, graph and not any(t[0] == "G" for t in v.taints),
                    frozenset(g.param_calls[id(t[1])] for t in v.taints if t[0] == "G" and id(t[1]) in g.param_calls)
                    if g is not None and g.param_calls else V.EMPTY,
                    _stepped_after(v, saving, step_lines, g) if step_lines and g is not None else V.EMPTY,
                    derived_saving=frozenset(t[1] for t in v.taints if t[0] == "QS"))


def _stepped_after(v: V.Val, saving: frozenset, step_lines: Tuple[Tuple[int, str], ...],
                   g: interp.GraphFlow) -> frozenset:
    """``RetPos.stepped_after``: the ``self.<module>`` calls of ``v``'s graph that saved
    tensors (or that call a module of another class of the file, ``self.discriminator(x)``,
    whose own facts say, where they are read, whether it saves), each with the optimizers
    stepped after it by a statement of the def's body."""
    out: Set[Tuple[str, str, int, int]] = set()
    for t in v.taints:
        node = t[1] if t[0] == "G" else g.pending_nodes.get(t[1]) if t[0] == "R" else None
        if isinstance(node, ast.Call) and (id(node) in saving or t[0] == "R"):
            name = A.dotted(node.func)
            if name and name.startswith("self.") and name.count(".") == 1:
                out.update((name[5:], opt, node.lineno, line) for line, opt in step_lines if node.lineno < line)
    return frozenset(out)


def _saved_modules(v: V.Val, saving: frozenset) -> frozenset:
    """The ``self.<module>`` calls whose graphs ``v`` holds and which surely saved
    tensors (the interpreter's ``saving_calls``): whose weights its backward reads."""
    if not saving:
        return frozenset()
    out = set()
    for t in v.taints:
        node = t[1] if t[0] == "G" else None
        if isinstance(node, ast.Call) and id(node) in saving:
            name = A.dotted(node.func)
            if name and name.startswith("self.") and name.count(".") == 1:
                out.add(name[5:])
    return frozenset(out)


def function_facts(fn: ast.AST, resolver: interp.Resolver, method: bool = False, self_obj: Optional[str] = None,
                   states: Optional[list] = None, members: Optional[list] = None,
                   own_calls: bool = False, kept: Optional[list] = None,
                   setters: Optional[Dict[str, ast.AST]] = None,
                   state_setters: Optional[Dict[str, ast.AST]] = None) -> V.FnFacts:
    """Summarise one def by running the graph interpreter over its body with
    each parameter as a ``("P", i)`` token. ``states``: a list to receive what
    :meth:`GraphFlow.self_states` finds (a method run on its own object's
    state; only asked of a forward that assigns to ``self``). ``kept``: a list to
    receive those of them whose graph surely saved tensors (``ClassFacts.kept``)."""
    is_static = _decorated(fn, *_STATIC)
    names, defaults = _params(fn, method and not is_static)
    steps, edits = S.def_step_facts(fn)
    if not own_calls and not _needs_interpretation(fn.body) and not (  # type: ignore[attr-defined]
            method and getattr(fn, "name", "") != "__init__" and _empties_own_container(fn)) \
            and not _hands_to_a_parameter(fn.body, names):  # type: ignore[attr-defined]
        # returns nothing and back-propagates nothing: nothing to learn (most defs)
        return V.FnFacts(params=names, no_grad=A.is_no_grad_function(fn), steps=steps, param_edits=edits)
    env = {}
    for i, n in enumerate(names):
        d = defaults.get(n)
        env[n] = V.Val(frozenset({("P", i)}), param=True, none=isinstance(d, ast.Constant) and d.value is None)
    no_grad = A.is_no_grad_function(fn)
    g = interp.GraphFlow(resolver, no_grad=no_grad, self_obj=self_obj if method else None, find_carries=False)
    g.untensored_returns = A.untensored_returns(fn)
    me = fn.args.args[0].arg if method and not is_static and fn.args.args and self_obj else None  # type: ignore[attr-defined]
    if me is not None and self_obj is not None and self_obj.startswith("user:") and _decorated(fn, "classmethod"):
        env[me] = V.Val(obj="ucls:" + self_obj[5:])  # cls.repackage(h): a method of its own class
    outside = _outside_containers(fn, names, me)
    seeded = {}
    for key, path in outside.items():
        # what the container held on entry: an ("N", path) token, beside what reading it gives
        head, _, attr = key.partition(".")
        before = g.eval(ast.Attribute(ast.Name(head, ast.Load()), attr, ast.Load()) if attr else ast.Name(head, ast.Load()), env)
        if path.startswith("#self."):
            if before.obj is not None and before.obj != "inst:?" and not before.obj.startswith("dict:user:"):
                continue  # self.policy: a module of its own, not a container (a dict of meters is one)
            before = V._with(before, obj=None)
        seeded[key] = env[key] = V._with(before, taints=before.taints | {("N", path)}, elems=None, kind="list")
    try:
        g.run(fn.body, dict(env))  # type: ignore[attr-defined]
    except RecursionError:  # pathological nesting: say nothing rather than crash
        return V.FnFacts(params=names)
    if members is not None and not no_grad:
        members.extend(g.member_calls)
    for key in seeded:
        del env[key]  # (the second run below marks state kept on self; these are not)
    if (states is not None or kept is not None) and method and self_obj and not no_grad:
        # a second run that marks state kept from the previous call: its ("A", ...)
        # tokens must not leak into the facts above
        t = interp.GraphFlow(resolver, self_obj=self_obj, track_self_state=True, find_carries=False)
        try:
            t.run(fn.body, env)  # type: ignore[attr-defined]
            own = t.self_states()
            if not own and state_setters:
                # the state rebuilt by a method forward calls with arguments (a spiking
                # neuron's ``self.neuronal_charge(x)`` charging ``self.v``): that method in place
                t = interp.GraphFlow(resolver, self_obj=self_obj, track_self_state=True, find_carries=False,
                                     methods=state_setters)
                t.inline_setters = True
                t.run(fn.body, env)  # type: ignore[attr-defined]
                own = t.self_states()
            if states is not None:
                states.extend(own)
                states.extend(("input", key) for key in t.input_states())
                states.extend(("cached", kv) for kv in t.cached_states())
            if kept is not None:
                kept.extend(key for key, v in own if any(id(x[1]) in t.saving_calls for x in v.graph_tokens()))
        except RecursionError:
            pass
    if states is not None and setters and method and self_obj and not no_grad:
        # a cache a method forward calls fills (``if not self.built: self.build()``, which
        # stores ``self.encoded = self.embedding(positions)``): a run with those methods
        # in place, read only for the caches they fill
        t = interp.GraphFlow(resolver, self_obj=self_obj, track_self_state=True, find_carries=False,
                             methods=setters)
        t.inline_setters = True
        try:
            t.run(fn.body, env)  # type: ignore[attr-defined]
            have = {kv[0] for k, kv in states if k == "cached"}
            by_setters = {"self." + a for m in setters.values() for a in _self_assigned(m)}
            states.extend(("cached", kv) for kv in t.cached_states() if kv[0] in by_setters and kv[0] not in have)
        except RecursionError:
            pass
    makes = None if method else _factory_class(fn)
    loop_attrs: Tuple[str, ...] = ()
    if method and self_obj and not no_grad and any(ev.in_loop and not ev.retain for ev in g.events):
        loop_attrs = _loop_backward_attrs(fn, resolver, self_obj, env)
    rets = [r for r in g.returns if not (r.none and not r.taints and r.elems is None)]
    saving = frozenset(g.saving_calls) if method else frozenset()
    step_lines: Tuple[Tuple[int, str], ...] = ()
    if method and any(sure for _, sure in steps):
        # the optimizer steps a statement of the body makes (RetPos.stepped_after)
        step_lines = tuple((s.lineno, got) for s in fn.body  # type: ignore[attr-defined]
                           if isinstance(s, ast.Expr) and (got := S.stepped(s.value, scaler=True)))
    whole = V.CLEAN
    for r in rets:
        whole = V.join(whole, r)
    returns = None
    tuples = [r for r in rets if r.elems is not None]
    if len(tuples) != len(rets):
        tuples = [r for r in tuples if len(r.elems) >= 2]  # type: ignore[arg-type]
    if any(r.mixed for r in rets):
        tuples = []  # return [loss] + new_mems: a list whose parts differ (Val.mixed), kept whole
    if tuples and len({len(r.elems) for r in tuples}) == 1:  # type: ignore[arg-type]
        # every tuple returned has the same length (return out, phi / return out;
        # return loss, mems / return logits, mems / return logits): a caller that
        # unpacks the result unpacks one of those, position by position
        arity = len(tuples[0].elems)  # type: ignore[arg-type]
        returns = tuple(_retpos(_join_all([r.elems[i] for r in tuples]), saving, g,  # type: ignore[index]
                                _distributions([r.elems[i] for r in tuples]), step_lines)  # type: ignore[index]
                        for i in range(arity))
    ret = _retpos(whole, saving, g, _distributions(rets), step_lines)
    if returns is None and rets and all(r.kind == "list" for r in rets) and not no_grad \
            and _elements_share(fn, whole, g.saving_calls):
        ret = replace(ret, elems_share=True)
    if not method and not no_grad and rets:
        ret, returns = _returned_globals(fn, resolver, env, names, ret, returns)
    share, share_via = _returns_share(tuples, returns, g) if returns is not None and not no_grad else (False, ())
    sure_bw = _sure_backwards(fn, g) if g.events and not no_grad else []
    frees = _frees_returned(whole, sure_bw, [_join_all([r.elems[i] for r in tuples])  # type: ignore[index]
                                             for i in range(len(returns))] if returns is not None else ())
    bparams: set = set()
    for ev in g.events:
        bparams.update(t[1] for t in ev.loss.taints if t[0] == "P")
    loop_backward, loop_delegates = _loop_backward(fn, names, g)
    loop_globals: Tuple[str, ...] = ()
    bw_globals: Tuple[str, ...] = ()
    if not method and not no_grad and any(not ev.retain for ev in g.events):
        loop_globals, bw_globals = _loop_backward_globals(fn, resolver, env, names)
    loop_calls = () if method or no_grad else _names_called_in_loops(fn)
    detaches = bool(names) and bool(rets) and not ret.graph and not ret.params and (
        returns is None or all(not p.graph and not p.params for p in returns)
    )
    return V.FnFacts(
        params=names,
        vararg=fn.args.vararg is not None and not fn.args.kwonlyargs,  # type: ignore[attr-defined]
        ret=V.RetPos(False, frozenset(), ret.arity) if no_grad else ret,
        returns=tuple(V.RetPos(False, frozenset(), p.arity) for p in returns) if (no_grad and returns) else returns,
        calls_backward=bool(g.events),
        backward_params=frozenset(bparams),
        backward_retains=bool(g.events) and all(ev.retain for ev in g.events),
        grad_params=frozenset(g.grad_params),
        detaches=detaches,
        no_grad=no_grad,
        returns_value=bool(rets),
        delegates=tuple(g.delegates),
        calls=tuple(g.calls),
        containers=() if no_grad else _container_effects(g, fn, outside, seeded),
        loop_backward=loop_backward,
        loop_delegates=loop_delegates,
        loop_backward_attrs=loop_attrs,
        loop_backward_globals=loop_globals,
        backward_globals=bw_globals,
        loop_calls=loop_calls,
        makes=makes,
        returns_share=share,
        returns_share_via=() if method else share_via,
        steps=steps,
        param_edits=edits,
        retain_param=_retain_param(fn, names, defaults) if g.events else None,
        returns_sites=_returns_sites(fn, tuples, returns) if returns is not None and not no_grad else (),
        frees_returned=frees == (),
        frees_positions=frees or (),
        frees_returned_saving=frees == () and _frees_returned_saving(g, whole, sure_bw),
    )


def _sure_backwards(fn: ast.AST, g: interp.GraphFlow) -> list:
    """The backward events of the def's trace that run whenever it runs and keep no graph."""
    sure = interp._unconditional_calls(fn.body)  # type: ignore[attr-defined]
    return [ev for ev in g.events if not ev.retain and id(ev.call) in sure and A.is_backward_call(ev.call)]


def _frees_returned_saving(g: interp.GraphFlow, whole: V.Val, sure_bw: Sequence) -> bool:
    """``FnFacts.frees_returned_saving``: of a def whose backward frees every graph it
    returns, does that backward (one of ``sure_bw``, :func:`_sure_backwards`) reach a part of
    it a call of the def's own saved tensors in? (a second backward of the returned value
    then surely fails)"""
    returned = whole.graph_tokens()
    for ev in sure_bw:
        both = returned & ev.loss.graph_tokens()
        if both and (any(id(t[1]) in g.saving_calls for t in both)
                     or any(t[0] == "QS" for t in whole.taints & ev.loss.taints)):
            return True  # (QS: an operation that saves ran on what an argument brought, F.mse_loss(model(x), y))
    return False


def _frees_returned(whole: V.Val, sure_bw: Sequence,
                    parts: Sequence[V.Val] = ()) -> Optional[Tuple[int, ...]]:
    """Does a backward the def makes whenever it runs, keeping no graph (``sure_bw``,
    :func:`_sure_backwards`), reach a graph built inside that the def returns? None if not;
    ``()`` if it reaches every returned graph (``FnFacts.frees_returned``); with a tuple
    returned (``parts``, position by position) of which only some positions share a graph
    with such a backward, those positions (``FnFacts.frees_positions``): RN's ``process()``
    back-propagating the discriminator's loss it returns beside the generator's, built on a
    detached input, hands back a generator's loss nothing freed (the caller's
    ``gen_loss.backward()`` is its first)."""
    returned = whole.graph_tokens()
    if not returned:
        return None
    freed = [ev.loss.graph_tokens() for ev in sure_bw]
    if not any(not returned.isdisjoint(f) for f in freed):
        return None
    hit = [k for k, p in enumerate(parts) if any(not p.graph_tokens().isdisjoint(f) for f in freed)]
    kept = [k for k, p in enumerate(parts) if p.graph_tokens() and k not in hit]
    return tuple(hit) if kept else ()


_GROWING = frozenset({"append", "extend", "insert", "update", "setdefault", "__setitem__"})

interp.SUMMARISE_DEF = function_facts  # (a def nested in a body: GraphFlow.local_defs)


def _sites(e: ast.AST, seen: Set[str], binders: Dict[str, List[ast.AST]],
           memo: Dict[str, frozenset]) -> Set[Tuple[int, int, str]]:
    """:func:`_returns_sites` for one expression (a function of its own: a closure calling
    itself would be a reference cycle keeping the tree alive)."""
    out: Set[Tuple[int, int, str]] = set()
    stack = [e]
    while stack:
        m = stack.pop()
        if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr == "detach" \
                and not m.args:
            continue  # x.detach(): no graph
        if isinstance(m, ast.Attribute) and m.attr == "data":
            continue
        key = None
        if isinstance(m, ast.Call):
            out.add((m.lineno, m.col_offset, A.dotted(m.func) or ""))
            if _self_attr(m.func) is not None:
                stack.extend(m.args)  # self.q(x): a module of self, not an attribute read
                stack.extend(k.value for k in m.keywords)
                continue
        elif isinstance(m, (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.AugAssign)):
            out.add((m.lineno, m.col_offset, ""))
        elif isinstance(m, ast.Name):
            key = m.id
        elif isinstance(m, ast.Attribute) and _self_attr(m) is not None:
            key = "self." + m.attr
            out.add((0, 0, key))  # an attribute read: shared by every position reading it
        if key is not None and key in binders and key not in seen:
            if key not in memo:
                seen.add(key)
                got: Set[Tuple[int, int, str]] = set()
                for b in binders[key]:
                    got |= _sites(b, seen, binders, memo)
                memo[key] = frozenset(got)
            out |= memo[key]
        stack.extend(ast.iter_child_nodes(m))
    return out


def _returns_sites(fn: ast.AST, tuples: List[V.Val], returns: Tuple[V.RetPos, ...]):
    """``FnFacts.returns_sites``: per returned position, the nodes inside the def that may
    build part of its graph, read off the source (not the interpreter's tokens, which
    stand for a whole call of another class's method): the operations and calls of the
    returned expression and, through every name it reads that the def binds, of each
    statement binding or changing that name (``out.append(v)``, ``out[i] = v``,
    ``h += v``). Parameters and attributes read add nothing: their graphs are not built
    by this call. An over-approximation: two positions with no site in common surely
    hold separate graphs. Empty when a return is not a tuple of that length."""
    rets = [n for n in A.body_nodes(fn) if isinstance(n, ast.Return)]
    if not rets or any(not isinstance(r.value, (ast.Tuple, ast.List)) or len(r.value.elts) != len(returns)
                       or any(isinstance(e, ast.Starred) for e in r.value.elts) for r in rets):
        return ()
    binders: Dict[str, List[ast.AST]] = {}
    for n in A.body_nodes(fn):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return ()  # a nested scope: not followed
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            value = n.value
            for t in targets:
                for m in A.walk_all(t):
                    key = m.id if isinstance(m, ast.Name) else _self_attr(m) if isinstance(m, ast.Attribute) else None
                    if key is not None:
                        key = key if isinstance(m, ast.Name) else "self." + key
                        binders.setdefault(key, []).append(value if value is not None else t)
                        if isinstance(n, ast.AugAssign):
                            binders[key].append(n)
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            for m in A.walk_all(n.target):
                if isinstance(m, ast.Name):
                    binders.setdefault(m.id, []).append(n.iter)
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            for m in A.walk_all(n.optional_vars):
                if isinstance(m, ast.Name):
                    binders.setdefault(m.id, []).append(n.context_expr)
        elif isinstance(n, ast.NamedExpr):
            binders.setdefault(n.target.id, []).append(n.value)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and (n.func.attr in _GROWING or n.func.attr.endswith("_") and not n.func.attr.startswith("_")) \
                and n.func.value.id not in ("self", "cls"):
            binders.setdefault(n.func.value.id, []).append(n)  # out.append(v), h.add_(v): changes it
    memo: Dict[str, frozenset] = {}

    out = []
    for i in range(len(returns)):
        got: Set[Tuple[int, int, str]] = set()
        for r in rets:
            got |= _sites(r.value.elts[i], set(), binders, memo)  # type: ignore[union-attr]
        out.append(tuple(sorted(got)))
    return tuple(out)


def _retain_param(fn: ast.AST, names: Tuple[str, ...], defaults: Dict[str, ast.expr]) -> Optional[int]:
    """``FnFacts.retain_param``: the parameter every ``backward()`` of the def takes its
    ``retain_graph`` from, when that parameter's default keeps no graph."""
    found = None
    for n in A.body_nodes(fn):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"):
            continue
        kw = next((k for k in n.keywords if k.arg == "retain_graph"), None)
        if kw is None or not isinstance(kw.value, ast.Name) or kw.value.id not in names \
                or any(k.arg == "create_graph" or k.arg is None for k in n.keywords):
            return None
        if found is not None and found != kw.value.id:
            return None
        found = kw.value.id
    d = defaults.get(found) if found is not None else None
    if found is None or not (isinstance(d, ast.Constant) and d.value in (False, None)):
        return None
    return names.index(found)


def _self_assigned(fn: ast.AST) -> List[str]:
    """The attributes ``self.<a>`` a def assigns (plain assignments)."""
    out: List[str] = []
    for n in A.body_nodes(fn):
        if isinstance(n, ast.Assign):
            out.extend(a for a in (_self_attr(t) for t in n.targets) if a is not None)
    return out


def _forward_setters(defs, with_args: bool = False) -> Dict[str, ast.AST]:
    """The methods (not forward, not __init__) that forward calls on ``self`` as a
    statement of its own and that assign attributes of the object: ``self.build()``
    (``with_args``: also those handed arguments, spikingjelly's ``self.neuronal_charge(x)``)."""
    by_name = {fn.name: fn for fn in defs}
    fwd = by_name.get("forward")
    if fwd is None:
        return {}
    out: Dict[str, ast.AST] = {}
    for n in A.body_nodes(fwd):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and (
                with_args or (not n.value.args and not n.value.keywords)):
            name = _self_attr(n.value.func)
            fn = by_name.get(name) if name is not None else None
            if fn is not None and name not in ("forward", "__init__") and _self_assigned(fn):
                out[name] = fn  # type: ignore[index]
    return out


def _returns_share(tuples: List[V.Val], returns: Tuple[V.RetPos, ...],
                   g: interp.GraphFlow) -> Tuple[bool, Tuple[str, ...]]:
    """Do the positions of the returned tuples that carry a graph (two at least) all
    hold one graph built inside that saved tensors (``FnFacts.returns_share``), or else
    one built by a call of a module-level name (``returns_share_via``: those names)?"""
    delegated = {d[0] for d in g.delegates}
    saving = g.saving_calls
    common: Optional[frozenset] = None
    n = 0
    for i, rp in enumerate(returns):
        if not rp.graph:
            continue
        got = frozenset(t for r in tuples for t in r.elems[i].taints  # type: ignore[index]
                        if t[0] == "G" and (id(t[1]) in saving or _call_of(t[1], delegated)))
        common = got if common is None else common & got
        n += 1
        if not common:
            return False, ()
    if n < 2 or not common:
        return False, ()
    if any(id(t[1]) in saving for t in common):
        return True, ()
    return False, tuple(sorted({t[1].func.id for t in common}))


def _call_of(node: object, names: set) -> bool:
    """A call of one of these plain names (``actor(obs)``)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


def _made_name(value: ast.expr) -> Optional[str]:
    """:func:`_ctor_name`, for any name a class may have: ``小网()`` too (no case to
    tell by); a name starting with a lower-case letter is a function's."""
    value = _unmoved(value)
    if not isinstance(value, ast.Call):
        return None
    name = A.dotted(value.func)
    if name is None or name.rsplit(".", 1)[-1][:1].islower():
        return None
    return name


def _factory_class(fn: ast.AST) -> Optional[str]:
    """``def resnet32(): return ResNet(BasicBlock, [5, 5, 5])``, or ``model = ResNet(...)``
    bound once at the top of the body, then ``return model`` (``FnFacts.makes``): the raw
    constructor every ``return`` hands back, if one (a class by its name's case, or one of
    torch's), else None."""
    made: Dict[str, Optional[str]] = {}
    for s in fn.body:  # type: ignore[attr-defined]
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            made[name] = _made_name(s.value) if name not in made else None
    rets = []
    top = set(map(id, fn.body))  # type: ignore[attr-defined]
    for s in A.iter_statements(fn.body):  # type: ignore[attr-defined]
        if isinstance(s, ast.Return):
            rets.append(s.value)
        elif not (id(s) in top and isinstance(s, ast.Assign)):
            for t in _stmt_targets(s):
                if isinstance(t, ast.Name) and t.id in made:
                    made[t.id] = None  # bound again: not surely what was made
    found: Optional[str] = None
    for v in rets:
        raw = made.get(v.id) if isinstance(v, ast.Name) else (_made_name(v) if v is not None else None)
        if raw is None or raw == "?" or (found is not None and raw != found):
            return None
        found = raw
    return found


def _container_effects(g: interp.GraphFlow, fn: ast.AST, outside: Dict[str, str], seeded) -> Tuple[V.ContainerEffect, ...]:
    """What the run ``g`` of a def did to each container it reaches from outside."""
    if not outside:
        return ()
    final = getattr(g, "final", None) or {}
    # a backward on every path: the body's own end, with no return before it
    body = fn.body  # type: ignore[attr-defined]
    early = any(isinstance(s, ast.Return) for s in A.iter_statements(body[:-1])) or any(
        isinstance(s, ast.Return) for b in A.child_blocks(body[-1]) for s in A.iter_statements(b)) if body else True
    sure = set() if early else {t[1] for t in V.freed_set(final)}
    displays = set()
    for n in A.body_nodes(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "insert") \
                and n.args and isinstance(n.args[-1], (ast.Tuple, ast.List, ast.Dict, ast.Set)):
            key = A.dotted(n.func.value)
            if key is not None:
                displays.add(key)
    out = []
    for key, path in sorted(outside.items()):
        tok = ("N", path)
        v = final.get(key)
        before = seeded[key].taints
        added = frozenset() if v is None else v.taints - before
        graph = frozenset(t for t in added if t[0] == "G")
        via = tuple(sorted({g.delegates[t[1]][0] for t in added if t[0] == "D" and t[1] < len(g.delegates)}))
        eff = V.ContainerEffect(
            path,
            displays=key in displays,
            appends=bool(graph),
            appends_params=frozenset(t[1] for t in added if t[0] == "P"),
            saving=any(id(t[1]) in g.saving_calls for t in graph),
            saving_via=via,
            backprops=any(tok in ev.loss.taints for ev in g.events),
            frees=tok in sure,
            clears=v is not None and tok not in v.taints,
        )
        if eff.appends or eff.appends_params or eff.backprops or eff.clears:
            out.append(eff)
    return tuple(out)


def _loop_backward_attrs(fn: ast.AST, resolver: interp.Resolver, self_obj: str, env) -> Tuple[str, ...]:
    """``FnFacts.loop_backward_attrs``: a run that marks each ``self.<a>`` read before
    the method assigns it (``("A", "self.a")``), and the marks that reach a backward
    freeing its graph in a loop, of attributes the method never assigns."""
    t = interp.GraphFlow(resolver, self_obj=self_obj, track_self_state=True, find_carries=False)
    try:
        t.run(fn.body, env)  # type: ignore[attr-defined]
    except RecursionError:
        return ()
    assigned = {A.dotted(n) for n in A.body_nodes(fn)
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del))}
    found = {tok[1][5:] for ev in t.events if ev.in_loop and not ev.retain for tok in ev.loss.taints
             if tok[0] == "A" and tok[1].startswith("self.") and tok[1] not in assigned}
    return tuple(sorted(found))


def _unbound_reads(fn: ast.AST, names: Tuple[str, ...], operands: Optional[Set[str]] = None) -> List[str]:
    """The module-level names ``fn`` reads as values and never binds, sorted: not its
    parameters (``names``, keyword-only and star ones), not a name it only calls
    (``range``, ``train_step``), not a builtin or torch's usual aliases. ``operands``,
    when given, is filled with the names that are an operand of an operator, a call's
    argument or a method call's receiver (what an operation may save)."""
    bound = set(names)
    loaded = set()
    called = set()
    for n in A.body_nodes(fn):
        k = n.__class__
        if k is ast.Name:
            if n.ctx.__class__ is ast.Load:  # type: ignore[attr-defined]
                loaded.add(n.id)  # type: ignore[attr-defined]
            else:
                bound.add(n.id)  # type: ignore[attr-defined]
        elif k is ast.Call:
            f = n.func  # type: ignore[attr-defined]
            if f.__class__ is ast.Name:
                called.add(f.id)
            elif operands is not None and f.__class__ is ast.Attribute and f.value.__class__ is ast.Name:
                operands.add(f.value.id)
            if operands is not None:
                operands.update(x.id for x in n.args if x.__class__ is ast.Name)  # type: ignore[attr-defined]
        elif k is ast.BinOp and operands is not None:
            operands.update(x.id for x in (n.left, n.right) if x.__class__ is ast.Name)  # type: ignore[attr-defined]
        elif k is ast.Global or k is ast.Nonlocal:
            bound.update(n.names)  # type: ignore[attr-defined]
    a = fn.args  # type: ignore[attr-defined]
    bound.update(x.arg for x in a.kwonlyargs)
    bound.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    return sorted(n for n in loaded - bound - called if n not in _BUILTINS and n not in A.DEFAULT_ALIASES)


def _loop_backward_globals(fn: ast.AST, resolver: interp.Resolver, env,
                           names: Tuple[str, ...]) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """``FnFacts.loop_backward_globals`` and ``backward_globals``: a run that marks each
    module-level name the function reads as a value and never binds (``("A", name)``),
    and the marks that reach a backward freeing its graph in a loop, and anywhere. Names
    the function calls only (``range``, ``train_step``), builtins and torch's usual
    aliases are not marked."""
    marked = _unbound_reads(fn, names)
    if not marked:
        return (), ()
    run_env = dict(env)
    for n in marked:
        run_env[n] = V.Val(frozenset({("A", n)}))
    t = interp.GraphFlow(resolver, find_carries=False)
    try:
        t.run(fn.body, run_env)  # type: ignore[attr-defined]
    except RecursionError:
        return (), ()
    found: set = set()
    anywhere: set = set()
    for ev in t.events:
        if ev.retain:
            continue
        got = {tok[1] for tok in ev.loss.taints if tok[0] == "A" and tok[1] in run_env}
        anywhere |= got
        if ev.in_loop:
            found |= got
    return tuple(n for n in marked if n in found), tuple(n for n in marked if n in anywhere)


def _elements_share(fn: ast.AST, v: V.Val, saving) -> bool:
    """``RetPos.elems_share``: the returned list holds a graph that saved tensors built by
    a statement of the body outside every loop and comprehension (so once per call), and
    the list is filled inside one (an element per iteration, each reading that part)."""
    nodes = A.body_nodes(fn)
    spans = [(n.lineno, getattr(n, "end_lineno", n.lineno) or n.lineno) for n in nodes
             if n.__class__ in (ast.For, ast.While, ast.AsyncFor, ast.ListComp, ast.GeneratorExp)]
    if not spans:
        return False
    # each element made alike: a comprehension returned, or a list made empty and appended to
    returned = [n.value for n in nodes if isinstance(n, ast.Return) and n.value is not None]
    names = {r.id for r in returned if isinstance(r, ast.Name)}
    if not returned or not all(isinstance(r, (ast.ListComp, ast.Name)) for r in returned) or len(names) > 1:
        return False
    for n in nodes:
        if names and isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in n.targets):
            if not (isinstance(n.value, ast.List) and not n.value.elts):
                return False  # outs = [self.stem(x)]: an element unlike the others
        elif names and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id in names and n.func.attr != "append":
            return False  # outs.insert(0, x), outs.extend(...)
    for t in v.taints:
        if t[0] == "G" and id(t[1]) in saving:
            line = getattr(t[1], "lineno", None)
            if line is not None and not any(lo <= line <= hi for lo, hi in spans):
                return True
    return False


def _returned_globals(fn: ast.AST, resolver: interp.Resolver, env, names: Tuple[str, ...], ret: V.RetPos,
                      returns: Optional[Tuple[V.RetPos, ...]]):
    """``RetPos.globals_saving``: the module-level names a module-level function reads
    and never binds that an operation saving tensors combines into what it returns (a
    functional model's ``h = relu(inputs @ Wxh + bxh)`` of module-level weights). Cheap
    pre-check: such a name is an operand of an operator or a call's argument or receiver
    in the body; then a run with each such name as one more parameter."""
    operands: Set[str] = set()
    marked = [n for n in _unbound_reads(fn, names, operands) if n in operands and resolver.global_obj(n) is None]
    if not marked:
        return ret, returns
    base = len(names)
    run_env = dict(env)
    for j, n in enumerate(marked):
        run_env[n] = V.Val(frozenset({("P", base + j)}))
    t = interp.GraphFlow(resolver, find_carries=False)
    try:
        t.run(fn.body, run_env)  # type: ignore[attr-defined]
    except RecursionError:
        return ret, returns

    def saving_names(v: V.Val) -> frozenset:
        got = set()
        for tok in v.taints:
            if tok[0] == "QS" and tok[1] >= base:
                got.add(marked[tok[1] - base])
        for e in v.elems or ():
            got |= saving_names(e)
        return frozenset(got)

    rets = [r for r in t.returns if not (r.none and not r.taints and r.elems is None)]
    whole: frozenset = frozenset().union(*(saving_names(r) for r in rets)) if rets else frozenset()
    if not whole:
        return ret, returns
    ret = replace(ret, globals_saving=whole)
    if returns is not None:
        arity = len(returns)
        per = [frozenset().union(*(saving_names(r.elems[i]) for r in rets if r.elems is not None and len(r.elems) == arity))
               for i in range(arity)]
        if any(r.elems is None or len(r.elems) != arity for r in rets):
            per = [whole] * arity
        returns = tuple(replace(p, globals_saving=got) if got else p for p, got in zip(returns, per))
    return ret, returns


def _names_called_in_loops(fn: ast.AST) -> Tuple[str, ...]:
    """``FnFacts.loop_calls``: the names called (``train(model, opt)``) inside the
    function's own loops (nested defs excluded), in order of first call."""
    out: List[str] = []
    for n in A.body_nodes(fn):
        if n.__class__ in (ast.For, ast.AsyncFor, ast.While):
            for c in A.iter_nodes(n.body):
                if c.__class__ is ast.Call and c.func.__class__ is ast.Name and c.func.id not in out:
                    out.append(c.func.id)
    return tuple(out)



def _loop_backward(fn: ast.AST, names: Tuple[str, ...], g: interp.GraphFlow):
    """``FnFacts.loop_backward`` and ``loop_delegates``: the parameters the function
    never rebinds that reach a backward (freeing its graph) in one of its loops, and
    the module-level functions such a loop calls with them."""
    if not any(ev.in_loop and not ev.retain for ev in g.events) and not g.loop_delegates:
        return V.EMPTY, ()
    rebound = {n.id for n in A.body_nodes(fn) if isinstance(n, ast.Name)
               and isinstance(n.ctx, (ast.Store, ast.Del))}
    kept = frozenset(i for i, n in enumerate(names) if n not in rebound)
    found: set = set()
    for ev in g.events:
        if ev.in_loop and not ev.retain:
            found.update(t[1] for t in ev.loss.taints if t[0] == "P" and t[1] in kept)
    delegates = []
    for k in g.loop_delegates:
        name, argsets, kwsets = g.delegates[k]
        delegates.append((name, tuple(ps & kept for ps in argsets), tuple((kw, ps & kept) for kw, ps in kwsets)))
    return frozenset(found), tuple(delegates)


def _distributions(vals: List[V.Val]) -> bool:
    """Is every one of ``vals`` a torch distribution (``Normal(mu, std)``, the interpreter's
    ``dist:`` object)?"""
    return bool(vals) and all(v.obj is not None and v.obj.startswith("dist:") for v in vals)


def _join_all(vals: List[V.Val]) -> V.Val:
    out = vals[0]
    for v in vals[1:]:
        out = V.join(out, v)
    return out


_MOVES = ("to", "cuda", "cpu", "float", "double", "half", "train", "eval")


def _unmoved(value: ast.expr) -> ast.expr:
    """``Model(...).to(dev).eval()`` → ``Model(...)``: what was made, not where it went."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _MOVES:
        value = value.func.value
    return value


def _self_attr(node: ast.AST) -> Optional[str]:
    """``self.<attr>`` → ``attr``; anything else → None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def instance_of(value: ast.expr) -> Optional[str]:
    """``Name(...)`` or ``module.Name(...)`` (or either ``.to(dev)``): the name
    called, whatever its case."""
    value = _unmoved(value)
    if isinstance(value, ast.Call):
        if isinstance(value.func, ast.Name):
            return value.func.id
        if isinstance(value.func, ast.Attribute):
            return A.dotted(value.func)
    return None


# How many modules deep a call of a module is followed into the modules it holds.
HELD_DEPTH = 3


def held_modules(summary, ctor: str, depth: int = HELD_DEPTH) -> Tuple[Tuple[str, str], ...]:
    """The user's modules an instance of ``ctor`` (a raw constructor name of this file's
    summary) holds and its ``forward`` calls: :func:`values.held_modules` over the summary."""
    return V.held_modules(lambda raw: summary.get("class:" + raw.rsplit(".", 1)[-1]), ctor, depth)

def _ctor_name(value: ast.expr) -> Optional[str]:
    """``nn.GRU(...)`` → ``"nn.GRU"``; ``Model(...).to(dev)`` → ``"Model"``;
    ``getattr(nn, t)(...)`` → ``"?"`` (a constructor we cannot name)."""
    value = _unmoved(value)
    if not isinstance(value, ast.Call):
        return None
    name = A.dotted(value.func)
    if name is None:
        return "?" if isinstance(value.func, ast.Call) else None
    last = name.rsplit(".", 1)[-1]
    if not last[:1].isupper():
        return None
    return name


def class_facts(cls: ast.ClassDef) -> V.ClassFacts:
    bases = tuple(b for b in (A.dotted(x) for x in cls.bases) if b)
    attrs: Dict[str, str] = {}
    defs = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    # each method's assignments, walked once for both passes below
    assigns = [[n for n in A.body_nodes(fn) if n.__class__ is ast.Assign] for fn in defs]
    for fn_assigns in assigns:
        for asg in fn_assigns:
            if isinstance(asg, ast.Assign) and len(asg.targets) == 1:
                attr = _self_attr(asg.targets[0])
                if attr is not None:
                    ctor = _ctor_name(asg.value)
                    if ctor and attr not in attrs:
                        attrs[attr] = ctor
    for fn_assigns in assigns:  # self.layers = nn.ModuleList([Block(d) for _ in range(n)]): what a layer is
        for asg in fn_assigns:
            if isinstance(asg, ast.Assign) and len(asg.targets) == 1:
                attr = _self_attr(asg.targets[0])
                elem = _container_element(asg.value) if attr is not None else None
                if elem and attr is not None and (attr + "[]") not in attrs:
                    attrs[attr + "[]"] = elem
    for attr, raw in _list_elements(defs, assigns).items():  # self.models = []; self.models.append(resnet32())
        attrs.setdefault(attr + "[]", raw)
    for s in cls.body:  # class-level: rnn = nn.GRU(...)
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            ctor = _ctor_name(s.value)
            if ctor:
                attrs.setdefault(s.targets[0].id, ctor)
    attr_t = tuple(sorted(attrs.items()))
    unbound = frozenset(fn.name for fn in defs if _decorated(fn, "staticmethod", "classmethod"))
    partial = V.ClassFacts(bases=bases, attrs=attr_t, has_forward=True, unbound=unbound)
    methods: List[Tuple[str, V.FnFacts]] = []
    states: list = []
    member_calls: Dict[str, list] = {}
    kept: List[Tuple[str, Tuple[str, ...]]] = []
    for fn in defs:
        r = _FactResolver(cls.name, partial, method=fn.name)
        setters = _forward_setters(defs) if fn.name == "forward" else None
        ask = states if fn.name == "forward" and (_assigns_self(fn) or setters) else None
        got = member_calls.setdefault(fn.name, [])
        keep: Optional[list] = [] if _rebuilds_self_attr(fn) else None
        charge = _forward_setters(defs, with_args=True) if fn.name == "forward" and (ask is not None or keep is not None) \
            else None
        methods.append((fn.name, function_facts(fn, r, method=True, self_obj="user:" + cls.name, states=ask,
                                                members=got, kept=keep, setters=setters, state_setters=charge)))
        if keep:
            kept.append((fn.name, tuple(sorted(set(keep)))))
    mdict = dict(methods)
    callers = [fn for fn in defs if _calls_own_method(fn, mdict, cls.name)]
    for _ in range(OWN_METHOD_DEPTH):
        # forward() calling self._forward() calling self._update_mems(): another
        # run, knowing the last run's facts of the class's own methods (one level
        # deeper each run), until they no longer change
        if not callers:
            break
        known = replace(partial, methods=tuple(sorted(mdict.items(), key=lambda kv: kv[0])))
        changed = False
        for fn in callers:
            r = _FactResolver(cls.name, known, method=fn.name)
            setters = _forward_setters(defs) if fn.name == "forward" else None
            ask = [] if fn.name == "forward" and (_assigns_self(fn) or setters) else None
            new = function_facts(fn, r, method=True, self_obj="user:" + cls.name, states=ask, own_calls=True,
                                 setters=setters,
                                 state_setters=_forward_setters(defs, with_args=True) if ask is not None else None)
            if new != mdict[fn.name]:
                mdict[fn.name] = new
                changed = True
            if ask is not None:
                states[:] = ask
        if not changed:
            break
    fwd = mdict.get("forward")
    fwd_detaches = False
    if fwd is not None and fwd.returns is not None and len(fwd.returns) >= 2:
        fwd_detaches = all(not p.graph for p in fwd.returns[1:])
    cuts = []
    for fn in defs:
        attrs_cut = set()
        for node in A.iter_statements(fn.body):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    attr = _self_attr(t)
                    if attr is not None and (_is_reset_value(node.value) or _fresh_from_own_method(node.value, mdict)):
                        attrs_cut.add("self." + attr)
            else:
                name = A.inplace_cut_target(node)
                if name and name.startswith("self."):
                    attrs_cut.add(name)
        if attrs_cut:
            cuts.append((fn.name, frozenset(attrs_cut)))
    keeps_input = tuple(sorted({v for k, v in states if k == "input"}))
    eval_read = _eval_only_reads(defs, keeps_input) if keeps_input else ()
    cached = _cached(cls, defs, [v for k, v in states if k == "cached"])
    states = [(k, v) for k, v in states if k not in ("input", "cached")]
    members = _members(defs, assigns, member_calls) if member_calls.get("forward") else ()
    return V.ClassFacts(
        keeps_input=keeps_input,
        eval_read=eval_read,
        cached=cached,
        members=members,
        resetting=_resetting(defs) if members else frozenset(),
        carried=tuple((key, "list" if _a_list(defs, key[5:]) else _state_shape(v, partial), _ever_none(defs, key[5:]))
                      for key, v in states),
        cuts=tuple(sorted(cuts, key=lambda kv: kv[0])),
        kept=tuple(kept),
        kept_resets=_kept_resets(defs, kept) if kept else frozenset(),
        inplace_resets=_inplace_resets(defs, "inplace"),
        dispatch_resets=_inplace_resets(defs, "dispatch"),
        bases=bases,
        attrs=attr_t,
        methods=tuple(sorted(mdict.items(), key=lambda kv: kv[0])),
        has_forward="forward" in mdict,
        has_init_hidden="init_hidden" in mdict,
        forward_detaches_hidden=fwd_detaches,
        unbound=unbound,
        init_freezes=_init_freezes(defs),
        init_graphs=_init_graphs(defs),
    )


def _mode_test(test: ast.expr) -> Optional[bool]:
    """``self.training`` → True, ``not self.training`` → False (the branch of an
    ``if`` whose test is True runs in that mode); None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _mode_test(test.operand)
        return None if inner is None else not inner
    return True if _self_attr(test) == "training" else None


def _eval_only_reads(defs, keys: Tuple[str, ...]) -> Tuple[str, ...]:
    """The states of ``keys`` (``"self.running_mean"``, ``ClassFacts.keeps_input``) that
    no method reads in training mode: every load of ``self.<attr>`` outside ``__init__``
    is either in its own update (``self.running_mean = m * mean + (1 - m) *
    self.running_mean``, one statement assigning that attribute alone) or on the branch
    of ``if self.training:`` / ``... if self.training else ...`` that runs in eval mode
    (a custom batch norm's running statistics, pytorch issue 20275). A training-mode
    forward then returns nothing computed from them: the graph they carry from call to
    call is no backward's (it grows: GG201's question, not a crash)."""
    attrs = {k[5:] for k in keys}
    reads: Dict[str, int] = {}  # attr -> loads outside an eval-only branch and its own update

    def walk(node: ast.AST, evaluating: bool) -> None:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            own = _self_attr(node.targets[0])
            if own in attrs and not evaluating:
                # its own update: the loads of it on the right are the chain itself
                for sub in ast.walk(node.value):
                    a = _self_attr(sub)
                    if a is not None and a != own and a in attrs and isinstance(sub.ctx, ast.Load):  # type: ignore[attr-defined]
                        reads[a] = reads.get(a, 0) + 1
                return
        if isinstance(node, (ast.If, ast.IfExp)):
            mode = _mode_test(node.test)
            if mode is not None:
                walk(node.test, evaluating)
                body = node.body if isinstance(node.body, list) else [node.body]
                orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
                for sub in body:
                    walk(sub, evaluating or not mode)
                for sub in orelse:
                    walk(sub, evaluating or mode)
                return
        a = _self_attr(node)
        if a is not None and a in attrs and isinstance(node.ctx, ast.Load) and not evaluating:  # type: ignore[attr-defined]
            reads[a] = reads.get(a, 0) + 1
        for child in ast.iter_child_nodes(node):
            walk(child, evaluating)

    for fn in defs:
        if fn.name != "__init__":
            for st in fn.body:
                walk(st, False)
    return tuple(sorted("self." + a for a in attrs if not reads.get(a)))


def _init_freezes(defs) -> Tuple[Tuple[str, int, bool], ...]:
    """:attr:`ClassFacts.init_freezes`: ``__init__``'s loop freezing ``self``'s parameters
    (``ast_util.frozen_by_loop``), at its top level or the only statement kind of an
    ``if not <parameter>:`` (no ``else``) at its top level."""
    init = next((fn for fn in defs if fn.name == "__init__"), None)
    if init is None:
        return ()
    params = [a.arg for a in list(init.args.posonlyargs) + list(init.args.args)][1:]
    defaults = list(init.args.defaults)
    for s in init.body:
        if isinstance(s, ast.For) and A.frozen_by_loop(s) == "self":
            return (("", -1, False),)
        if isinstance(s, ast.If) and not s.orelse and isinstance(s.test, ast.UnaryOp) \
                and isinstance(s.test.op, ast.Not) and isinstance(s.test.operand, ast.Name) \
                and s.test.operand.id in params \
                and any(isinstance(b, ast.For) and A.frozen_by_loop(b) == "self" for b in s.body):
            i = params.index(s.test.operand.id)
            k = i - (len(params) - len(defaults))  # (defaults are the last parameters')
            d = defaults[k] if k >= 0 else None
            falsy = isinstance(d, ast.Constant) and not d.value
            return ((s.test.operand.id, i, falsy),)
    return ()


def _init_graphs(defs) -> Tuple[Tuple[str, int, str, str], ...]:
    """:attr:`ClassFacts.init_graphs`: ``self.<attr> = <param>.<method>(...)`` (or
    ``<param>(...)``, or through ``self.<m> = <param>`` set before it) as a top-level
    statement of ``__init__``, the attribute read by ``forward`` and stored by no other
    method."""
    by_name = {fn.name: fn for fn in defs}
    init, fwd = by_name.get("__init__"), by_name.get("forward")
    if init is None or fwd is None or not init.args.args:
        return ()
    if any(isinstance(n, ast.Attribute) and n.attr in ("requires_grad", "requires_grad_") for n in A.body_nodes(init)):
        return ()  # it freezes something itself (``self.clip.requires_grad_(False)``): left alone
    me = init.args.args[0].arg
    params = [a.arg for a in init.args.args[1:]]
    held: Dict[str, str] = {}  # self.<m> = <param>
    found: List[Tuple[str, int, str, str]] = []
    for s in init.body:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            continue
        t, v = s.targets[0], s.value
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me):
            continue
        if isinstance(v, ast.Name) and v.id in params:
            held[t.attr] = v.id
            continue
        if not isinstance(v, ast.Call):
            continue
        f = v.func.value if isinstance(v.func, ast.Attribute) else v.func
        src = None
        if isinstance(f, ast.Name) and f.id in params:
            src = f.id
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == me:
            src = held.get(f.attr)
        if src is None and isinstance(f, ast.Name) and f.id not in params and f is v.func:
            # ``self.clip = TextTower(...)``: a module built here, by the class named (-1)
            held[t.attr] = "=" + f.id
            continue
        if src is None or (isinstance(v.func, ast.Attribute) and v.func.attr in _INIT_NO_GRAPH):
            continue
        method = v.func.attr if isinstance(v.func, ast.Attribute) else "forward"
        if src.startswith("="):
            found.append((t.attr, -1, src[1:], method))
        else:
            found.append((t.attr, params.index(src), src, method))
    if not found:
        return ()
    read = {n.attr for n in A.body_nodes(fwd) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name) and n.value.id == fwd.args.args[0].arg} if fwd.args.args else set()
    out = []
    for attr, i, name, method in found:
        if attr not in read or any(_self_attr(t) == attr for fn in defs if fn is not init
                                   for n in A.body_nodes(fn) if isinstance(n, (ast.Assign, ast.AugAssign))
                                   for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
            continue
        out.append((attr, i, name, method))
    return tuple(out)


# methods of a handed object whose result holds no graph of it
_INIT_NO_GRAPH = frozenset({"parameters", "named_parameters", "modules", "children", "state_dict", "to", "cpu",
                            "cuda", "eval", "train", "requires_grad_", "detach", "item", "tolist", "numpy",
                            "size", "dim", "get", "keys", "items", "values"})


def _member_ctors(assigns) -> List[Tuple[str, str, frozenset, bool]]:
    """Modules of the user's or of a library kept on the object (torch's own are
    known anyway): ``self.lif1 = snn.Leaky(beta=.9, init_hidden=True)`` → ("lif1",
    "snn.Leaky", {"init_hidden"}, False); each such element of ``self.net =
    nn.Sequential(nn.Linear(4, 8), snn.Leaky(...))`` → ("net.1", ..., True when a
    layer with parameters comes before it: its input has a graph)."""
    out = []
    for fn_assigns in assigns:  # each method's assignments (class_facts walked them once)
        for node in fn_assigns:
            if len(node.targets) != 1:
                continue
            attr = _self_attr(node.targets[0])
            value = _unmoved(node.value)
            if attr is None or not isinstance(value, ast.Call):
                continue
            name = A.dotted(value.func) or ""
            if name.rsplit(".", 1)[-1] == "Sequential" and name.startswith(("nn.", "torch.nn.")):
                trained = False
                for i, el in enumerate(value.args):
                    raw = _ctor_name(el) if isinstance(el, ast.Call) else None
                    if raw is None:
                        continue
                    if raw.startswith(("nn.", "torch.")):
                        trained = trained or raw.rsplit(".", 1)[-1] not in K.PARAMETERLESS_MODULES
                        continue
                    out.append((f"{attr}.{i}", raw, _true_keywords(el), trained))  # type: ignore[arg-type]
                continue
            raw = _ctor_name(value)
            if raw and raw != "?" and not raw.startswith(("nn.", "torch.")):
                out.append((attr, raw, _true_keywords(value), False))
    return out


def _resetting(defs) -> frozenset:
    """Methods other than forward that reset or detach what the object's modules keep:
    a call named like a reset (``functional.reset_net(self)``, ``self.lif1.reset_mem()``),
    or a call of such a method of the class."""
    calls: Dict[str, set] = {}
    out = set()
    for fn in defs:
        if fn.name == "forward":
            continue
        own = calls.setdefault(fn.name, set())
        for n in A.body_nodes(fn):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            last = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
            if last in K.STATE_RESET_CALLS:
                out.add(fn.name)
            name = _self_attr(f)
            if name is not None:
                own.add(name)
    for _ in range(3):
        out |= {m for m, cs in calls.items() if cs & out}
    return frozenset(out)


def _true_keywords(call: ast.Call) -> frozenset:
    return frozenset(k.arg for k in call.keywords if k.arg and isinstance(k.value, ast.Constant) and k.value.value is True)


def _members(defs, assigns, member_calls: Dict[str, list]) -> Tuple[Tuple[str, str, frozenset, bool, frozenset], ...]:
    """``ClassFacts.members``: the modules of :func:`_member_ctors` that forward calls
    (itself, or through a method of the class it calls), with what their input holds:
    a graph built here, forward's parameters. A member forward resets itself
    (``self.lif1.reset_mem()``, ``utils.reset(self.net)``; ``utils.reset(self)``: all
    of them) keeps nothing across calls."""
    ctors = _member_ctors(assigns)
    if not ctors:
        return ()
    by_name = {fn.name: fn for fn in defs}
    fwd = by_name["forward"]
    called = {_self_attr(n.func) for n in A.body_nodes(fwd) if isinstance(n, ast.Call)}
    runs = [fwd] + [by_name[m] for m in sorted(n for n in called if n is not None and n != "forward" and n in by_name)]
    reset: set = set()
    for fn in runs:
        for n in A.body_nodes(fn):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            last = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
            if last not in K.STATE_RESET_CALLS:
                continue
            if isinstance(f, ast.Attribute):
                recv = A.dotted(f.value) or ""
                if recv == "self":
                    reset.add("")
                elif recv.startswith("self."):
                    reset.add(recv[5:].split(".", 1)[0])
            for a in [*n.args, *(k.value for k in n.keywords)]:
                arg = A.dotted(a) or ""
                if arg == "self":
                    reset.add("")  # utils.reset(self)
                elif arg.startswith("self."):
                    reset.add(arg[5:].split(".", 1)[0])  # utils.reset(self.net): what self.net holds
    if "" in reset:
        return ()
    seen: Dict[str, Tuple[bool, frozenset]] = {}
    for fn in runs:
        own = fn is fwd
        for m, taints in member_calls.get(fn.name, ()):
            graph, params = seen.get(m, (False, frozenset()))
            graph = graph or any(t[0] in ("G", "L") for t in taints)
            if own:
                params = params | frozenset(t[1] for t in taints if t[0] == "P")
            seen[m] = (graph, params)
    out = []
    for attr, raw, kws, trained in ctors:
        head = attr.split(".", 1)[0]
        if head in seen and head not in reset:
            graph, params = seen[head]
            out.append((attr, raw, kws, graph or trained, params))
    return tuple(sorted(set(out)))


def _cached(cls: ast.ClassDef, defs, found) -> Tuple[Tuple[str, V.RetPos, Tuple[Tuple[str, str, int, bool], ...], bool, str], ...]:
    """``ClassFacts.cached`` from what forward's run found (``GraphFlow.cached_states``):
    each kept only where every path that stores or hands back the cache is known --
    the conditions on it read the cache itself or flags the constructor sets from
    its arguments (``self.cache_feature = cache_feature``), and no method but
    forward stores anything but a reset into it."""
    if not found:
        return ()
    by_name = {fn.name: fn for fn in defs}
    fwd, init = by_name.get("forward"), by_name.get("__init__")
    setters = _forward_setters(defs)
    out = []
    for key, v in found:
        attr = key[5:]
        fillers = {m: fn for m, fn in setters.items() if attr in _self_assigned(fn)}
        if fwd is None or _stored_elsewhere(defs, attr, frozenset(fillers)):
            continue
        needs = _cache_needs(fwd, init, attr, fillers, defs)
        if needs is None:
            continue
        init_none = init is not None and any(
            isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None
            and any(_self_attr(t) == attr for t in n.targets) for n in init.body)
        if v.elems is not None:
            shape = "tuple"
        else:
            shape = "tensor" if v.kind is None and not v.mixed else "unknown"
        out.append((key, _retpos(v), needs, init_none, shape))
    return tuple(out)


def _stored_elsewhere(defs, attr: str, fillers: frozenset = frozenset()) -> bool:
    """Does a method other than forward (and __init__'s reset, and the ``fillers`` forward
    calls to fill the cache) store into ``self.<attr>``?"""
    for fn in defs:
        if fn.name == "forward" or fn.name in fillers:
            continue
        for node in A.body_nodes(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_self_attr(t) == attr for t in tgts):
                    if isinstance(node, ast.AugAssign) or node.value is None or not _is_reset_value(node.value):
                        return True
    return False


def _cache_needs(fwd: ast.AST, init: Optional[ast.AST], attr: str, fillers: Optional[Dict[str, ast.AST]] = None,
                 defs=()) -> Optional[Tuple[Tuple[str, str, int, bool], ...]]:
    """The constructor flags the caching paths of forward need true: every ``if`` around
    a ``return self.<attr>`` or a store into it (or a call of a ``fillers`` method that
    stores it: ``self.build()``) tests the cache itself (``self.cache is not None``), a
    flag saying it is filled (``not self.built``: set true only by the filler, and false
    or not at all elsewhere), or, on its true branch, ``self.<flag>`` (``and``-ed) where
    __init__ sets ``self.<flag>`` from a parameter of its own (or to a true constant). None
    when a condition is anything else (``self.training``, a flag set elsewhere): unknown."""
    flags: set = set()
    fillers = fillers or {}
    filled = _filled_flags(fillers, defs) if fillers else frozenset()

    def test_ok(test: ast.expr, positive: bool) -> bool:
        if positive and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
                and _self_attr(test.operand) in filled:
            return True  # if not self.built: self.build()
        if not positive and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            # the else of ``if self.cached and self._cached is not None:``: a flag off or the
            # cache empty, needing nothing true (what a store under it needs, it tests itself)
            return all(_self_attr(p) is not None or (
                any(_self_attr(n) == attr for n in ast.walk(p)) and (
                    isinstance(p, ast.Compare) or (isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.Not))))
                for p in test.values)
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and positive else [test]
        for p in parts:
            if any(_self_attr(n) == attr for n in A.walk_all(p)):
                if _self_attr(p) == attr or isinstance(p, ast.Compare) or (
                        isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.Not)):
                    continue  # about the cache itself
                return False
            name = _self_attr(p)
            if positive and name is not None:
                flags.add(name)
                continue
            return False
        return True

    def walk(stmts, guards) -> bool:
        for st in stmts:
            if isinstance(st, ast.If):
                if not walk(st.body, guards + [(st.test, True)]) or not walk(st.orelse, guards + [(st.test, False)]):
                    return False
                continue
            hit = False
            if isinstance(st, ast.Return) and st.value is not None:
                hit = any(_self_attr(n) == attr for n in A.walk_all(st.value))
            elif isinstance(st, ast.Assign):
                hit = any(_self_attr(n) == attr for t in st.targets for n in A.walk_all(t))
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                hit = _self_attr(st.value.func) in fillers
            if hit and not all(test_ok(t, pos) for t, pos in guards):
                return False
            for block in A.child_blocks(st):
                if not walk(block, guards):
                    return False
        return True

    if not walk(fwd.body, []):  # type: ignore[attr-defined]
        return None
    if not flags:
        return ()
    if init is None:
        return None
    named, defaults = A.parameters(init, True)
    index = {p.arg: i for i, p in enumerate(named)}
    needs = []
    for flag in sorted(flags):
        sets = [n for n in A.body_nodes(init)
                if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                and any(_self_attr(t) == flag for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
        if len(sets) != 1 or not isinstance(sets[0], ast.Assign):
            return None
        value = sets[0].value
        if isinstance(value, ast.Constant):
            if not value.value:
                return None  # never on
            continue
        if not isinstance(value, ast.Name) or value.id not in index:
            return None
        d = defaults.get(value.id)
        needs.append((flag, value.id, index[value.id], isinstance(d, ast.Constant) and bool(d.value)))
    return tuple(needs)


def _filled_flags(fillers: Dict[str, ast.AST], defs) -> frozenset:
    """Flags saying a cache is filled: ``self.<flag>`` set to True by every filler
    method, and elsewhere in the class only to a false constant (``self.built = False``
    in ``__init__``)."""
    out = None
    for fn in fillers.values():
        mine = {a for n in A.body_nodes(fn) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                and n.value.value is True for a in (_self_attr(t) for t in n.targets) if a is not None}
        out = mine if out is None else out & mine
    if not out:
        return frozenset()
    for fn in defs:
        if fn.name in fillers:
            continue
        for n in A.body_nodes(fn):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    a = _self_attr(t)
                    if a in out and not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                                         and not n.value.value):
                        out.discard(a)
    return frozenset(out)


# How many times a class's methods that call its other methods are summarised again.
OWN_METHOD_DEPTH = 3


_CONTAINERS = ("ModuleList", "Sequential")


def _container_element(value: ast.expr) -> Optional[str]:
    """``nn.ModuleList([Block(d) for _ in range(n)])``, ``nn.ModuleList([A(), A()])``,
    ``nn.Sequential(A(), A())``: the one constructor of every element, else None."""
    if not (isinstance(value, ast.Call) and (A.dotted(value.func) or "").rsplit(".", 1)[-1] in _CONTAINERS):
        return None
    items: List[ast.expr] = list(value.args)
    if len(items) == 1 and isinstance(items[0], (ast.List, ast.Tuple)):
        items = list(items[0].elts)
    elif len(items) == 1 and isinstance(items[0], ast.ListComp):
        items = [items[0].elt]
    names = {_ctor_name(x) for x in items}
    if len(names) == 1:
        name = names.pop()
        return name if name and name != "?" else None
    return None


def _list_elements(defs, assigns) -> Dict[str, str]:
    """Plain lists of modules kept on the object, ``{attr: raw callee}``: ``self.models =
    [Net() for _ in range(n)]``, or ``self.models = []`` filled only by
    ``self.models.append(m)`` of one callee's results (``model = resnet32()`` in that
    method, or the call itself; a helper returning a module is known by its facts,
    ``FnFacts.makes``). Any other change of the list (another assignment, ``extend``,
    an item set) and the elements are not known."""
    out: Dict[str, str] = {}
    empty: set = set()
    bad: set = set()
    for fn_assigns in assigns:
        for asg in fn_assigns:
            if len(asg.targets) != 1:
                continue
            attr = _self_attr(asg.targets[0])
            if attr is None:
                continue
            v = asg.value
            if isinstance(v, ast.List) and not v.elts:
                empty.add(attr)
            elif isinstance(v, ast.ListComp) and isinstance(v.elt, ast.Call) and attr not in out:
                raw = A.dotted(_unmoved(v.elt).func)  # type: ignore[attr-defined]
                if raw:
                    out[attr] = raw
                else:
                    bad.add(attr)
            else:
                bad.add(attr)
    if not empty:
        return {k: v for k, v in out.items() if k not in bad}
    elems: Dict[str, set] = {}
    for fn, fn_assigns in zip(defs, assigns):
        local: Dict[str, Optional[str]] = {}
        for asg in fn_assigns:
            t = asg.targets[0] if len(asg.targets) == 1 else None
            if isinstance(t, ast.Name):
                c = _unmoved(asg.value)
                local[t.id] = (A.dotted(c.func) if isinstance(c, ast.Call) else None) if t.id not in local else None
        for n in A.body_nodes(fn):
            if n.__class__ is ast.Call and isinstance(n.func, ast.Attribute):
                attr = _self_attr(n.func.value)
                if attr is None or attr not in empty:
                    continue
                if n.func.attr == "append" and len(n.args) == 1 and not n.keywords:
                    a = _unmoved(n.args[0])
                    raw = A.dotted(a.func) if isinstance(a, ast.Call) else (local.get(a.id) if isinstance(a, ast.Name) else None)
                    elems.setdefault(attr, set()).add(raw)
                elif n.func.attr not in ("__len__", "__getitem__", "index", "count"):
                    bad.add(attr)
            elif isinstance(n, (ast.Subscript, ast.AugAssign)):
                t = n.value if isinstance(n, ast.Subscript) else n.target
                if isinstance(n, ast.AugAssign) or isinstance(n.ctx, (ast.Store, ast.Del)):
                    attr = _self_attr(t)
                    if attr is not None:
                        bad.add(attr)
    for attr, raws in elems.items():
        if len(raws) == 1 and None not in raws and attr not in bad and attr not in out:
            out[attr] = next(iter(raws))
    return {k: v for k, v in out.items() if k not in bad}


def _calls_own_method(fn: ast.AST, methods: Dict[str, V.FnFacts], cls_name: str) -> bool:
    """Does ``fn`` call a method ``m`` of its class that returns a value or
    back-propagates: ``self.<m>(...)``, or ``cls.<m>(...)`` / ``<Class>.<m>(...)``
    for one called without an instance (``fn`` itself is not: its recursion is assumed)."""
    own = {"self", cls_name}
    if _decorated(fn, "classmethod") and fn.args.args:  # type: ignore[attr-defined]
        own.add(fn.args.args[0].arg)  # type: ignore[attr-defined]
    for node in A.body_nodes(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in own:
            attr = node.func.attr
            if attr != fn.name and attr in methods and (methods[attr].returns_value or methods[attr].calls_backward):  # type: ignore[attr-defined]
                return True
    return False


def _fresh_from_own_method(value: ast.expr, methods: Dict[str, V.FnFacts]) -> bool:
    """``self.init_hidden(...)``: a method of the class whose result carries no
    graph and depends on no argument's (fresh zeros, say): a reset."""
    name = _self_attr(value.func) if isinstance(value, ast.Call) else None
    m = methods.get(name) if name is not None else None
    if m is None or not m.returns_value or m.ret is None:
        return False
    parts = (m.ret,) + tuple(m.returns or ())
    return not any(p.graph or p.params or p.derived for p in parts)


def _kept_resets(defs, kept) -> frozenset:
    """``ClassFacts.kept_resets``: the methods other than those keeping the state that
    assign one of its attributes (``self.h = None``, ``self.h = self.h.detach()``), cut
    it in place (``self.h.detach_()``), or call, on ``self``, a method that does."""
    attrs = {a for _, keys in kept for a in keys}
    keepers = {m for m, _ in kept}
    out: set = set()
    calls: Dict[str, set] = {}
    for fn in defs:
        own = calls.setdefault(fn.name, set())
        for n in A.body_nodes(fn):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if any(("self." + a) in attrs for x in ast.walk(t) if (a := _self_attr(x)) is not None):
                        out.add(fn.name)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if A.dotted(n.func.value) in attrs:
                    out.add(fn.name)  # self.h.detach_(), self.h.zero_(): whatever it does, not kept as it was
                name = _self_attr(n.func)
                if name is not None:
                    own.add(name)
    for _ in range(3):
        out |= {m for m, cs in calls.items() if cs & out}
    return frozenset(out - keepers - {"__init__"})


# in-place refills: the tensor keeps its autograd history (its grad_fn, what it was computed from)
_INPLACE_FILLS = frozenset({"zero_", "fill_", "uniform_", "normal_", "constant_", "zeros_", "ones_", "copy_"})


def _inplace_resets(defs, kind: str) -> frozenset:
    """``ClassFacts.inplace_resets`` (``kind`` "inplace") or ``dispatch_resets``
    ("dispatch"): the methods named like a reset (``K.STATE_RESET_CALLS``) whose body
    cuts nothing: no assignment to ``self``, no detach, no ``requires_grad_``, no
    ``register_buffer``, no call handing ``self`` away or of another own method, no
    other reset. "inplace": it refills tensors in place (``buffer.zero_()``,
    ``torch.nn.init.uniform_(buffer)``) and calls no reset; "dispatch": it calls the
    same method on other modules (``m.reset_states()``) and refills nothing."""
    out = set()
    by_name = {fn.name: fn for fn in defs}
    for fn in defs:
        if fn.name not in K.STATE_RESET_CALLS:
            continue
        fills = dispatch = False
        cut = False
        for n in A.body_nodes(fn):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
                if any(isinstance(x, ast.Attribute) for t in targets for x in ast.walk(t)):
                    cut = True  # self.v = ..., m.v = ..., x.data = ...
            elif isinstance(n, ast.Call):
                f = n.func
                last = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
                if any(isinstance(a, ast.Name) and a.id == "self" for a in [*n.args, *(k.value for k in n.keywords)]):
                    cut = True  # reset_net(self): whatever it does
                elif last in _INPLACE_FILLS:
                    fills = True
                elif last == fn.name and isinstance(f, ast.Attribute) and _self_attr(f) is None:
                    dispatch = True  # m.reset_states(), self.lif1.reset_states()
                elif last in _MODULE_QUERIES and _self_attr(f) is not None:
                    pass  # for buffer in self.buffers(), for m in self.modules()
                elif _self_attr(f) is not None:
                    # self.is_state_initialised(): a query of the object's own, unless it
                    # changes the object (or asks another method, which might)
                    cut = cut or not _queries_only(by_name.get(last))
                elif last in K.STATE_RESET_CALLS or last in K.GRAPH_CUT_METHODS or last in (
                        "requires_grad_", "register_buffer", "setattr", "apply", "__init__"):
                    cut = True
        if not cut and ((kind == "inplace" and fills and not dispatch) or (kind == "dispatch" and dispatch and not fills)):
            out.add(fn.name)
    return frozenset(out)


_MODULE_QUERIES = frozenset({"buffers", "named_buffers", "modules", "named_modules", "children", "named_children",
                             "parameters", "named_parameters"})


def _queries_only(fn) -> bool:
    """Does the method (of :func:`_inplace_resets`'s class) only read: no assignment
    to an attribute, no in-place op, no call of the object's own methods, no reset?"""
    if fn is None:
        return False
    for n in A.body_nodes(fn):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
            if any(isinstance(x, ast.Attribute) for t in targets for x in ast.walk(t)):
                return False
        elif isinstance(n, ast.Call):
            f = n.func
            last = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
            if (_self_attr(f) is not None and last not in _MODULE_QUERIES) or last.endswith("_") or last in K.STATE_RESET_CALLS \
                    or last in ("register_buffer", "setattr", "apply"):
                return False
    return True


def framework_loop(cls: ast.ClassDef, method: str, summary, _depth: int = 0) -> Optional[str]:
    """Is ``method`` of ``cls`` one a framework calls in a loop of its own
    (``K.FRAMEWORK_LOOP_METHODS``: ``training_step`` of a class deriving, directly or
    through classes of this file, from one named ``LightningModule``)? "auto" when the
    framework back-propagates what it returns and steps the optimizer after each call,
    "manual" when the class turns that off (``self.automatic_optimization = False``),
    None otherwise."""
    if _depth > 3:
        return None
    found = False
    for b in cls.bases:
        raw = A.dotted(b) or ""
        if method in K.FRAMEWORK_LOOP_METHODS.get(raw.rsplit(".", 1)[-1], ()):
            found = True
            break
        cf = summary.get("class:" + raw) if raw else None
        if isinstance(cf, V.ClassFacts) and _framework_base(cf, method, summary, _depth + 1):
            found = True
            break
    if not found:
        return None
    for n in ast.walk(cls):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is False and any(
                _self_attr(t) == K.MANUAL_OPTIMIZATION_ATTR for t in n.targets):
            return "manual"
    return "auto"


def _framework_base(cf: V.ClassFacts, method: str, summary, depth: int) -> bool:
    """:func:`framework_loop` through a base class of this file (by its facts)."""
    if depth > 3:
        return False
    for raw in cf.bases:
        if method in K.FRAMEWORK_LOOP_METHODS.get(raw.rsplit(".", 1)[-1], ()):
            return True
        inner = summary.get("class:" + raw)
        if isinstance(inner, V.ClassFacts) and _framework_base(inner, method, summary, depth + 1):
            return True
    return False


def _rebuilds_self_attr(fn: ast.AST) -> bool:
    """Does the method assign an attribute of ``self`` from an expression reading it
    (``out, self.h = self.lstm(x, self.h)``, ``self.v = 0.5 * self.v + x``)? The cheap
    test before :attr:`ClassFacts.kept` is looked for."""
    for node in A.body_nodes(fn):
        if node.__class__ is ast.Assign and node.value.__class__ is ast.Call:
            # (a call builds the graph: a module, a torch op; ``self.n = self.n + 1`` counts no state)
            attrs = {a for t in node.targets for n in ast.walk(t) if (a := _self_attr(n)) is not None}
            if attrs and any(_self_attr(n) in attrs for n in ast.walk(node.value)):
                return True
    return False


def _assigns_self(fn: ast.AST) -> bool:
    """Does the method assign to an attribute of ``self`` (``self.h = ...``), or copy
    into one in place (``self.h.copy_(...)``, a buffer updated in place)?"""
    for node in A.body_nodes(fn):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if any(_self_attr(n) is not None for n in A.walk_all(t)):
                    return True
        elif node.__class__ is ast.Call and isinstance(node.func, ast.Attribute) and node.func.attr == "copy_" \
                and _self_attr(node.func.value) is not None:
            return True
    return False


def _state_shape(v: V.Val, cls: V.ClassFacts) -> str:
    """"tuple" | "tensor" | "unknown": what the kept state is, for the code that detaches it."""
    if v.elems is not None and len(v.elems) >= 2:
        return "tuple"
    built = interp._built_by(v)
    attr = _self_attr(built.func) if isinstance(built, ast.Call) else None
    raw = cls.attr(attr) if attr is not None else None
    return V.state_shape(interp.Resolver.torch_class(interp.Resolver().qualify_raw(raw)) if raw else None)


def _a_list(defs, attr: str) -> bool:
    """Is ``self.<attr>`` only ever assigned a list (``[h0 for _ in range(n)]``)?
    A fix must keep it one (``self.states[i] = ...`` needs a list)."""
    seen = False
    for fn in defs:
        for node in A.body_nodes(fn):
            if isinstance(node, ast.Assign) and any(_self_attr(t) == attr for t in node.targets):
                if not isinstance(node.value, (ast.List, ast.ListComp)):
                    return False
                seen = True
    return seen


def _ever_none(defs, attr: str) -> bool:
    """Is ``self.<attr> = None`` written anywhere in the class (so the state
    is None before the first call)?"""
    for fn in defs:
        for node in A.body_nodes(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None:
                if any(_self_attr(t) == attr for t in node.targets):
                    return True
    return False


def _is_reset_value(value: ast.expr) -> bool:
    """None, a graph cut, or a fresh tensor (``torch.zeros(...)``, ``x.new_zeros(...)``,
    ``self.init_hidden(...)``-style calls are not assumed)."""
    if A.is_graph_cut(value):
        return True
    if isinstance(value, ast.Call):
        q = A.qualify(value.func)
        if q in K.TENSOR_FACTORIES:
            return not any(k.arg == "requires_grad" for k in value.keywords)
        if isinstance(value.func, ast.Attribute) and value.func.attr in K.FACTORY_METHODS:
            return True
    if isinstance(value, (ast.Tuple, ast.List)):
        return all(_is_reset_value(e) for e in value.elts)
    if isinstance(value, ast.Dict):  # self.state = {"h": None, "c": None}
        return None not in value.keys and all(_is_reset_value(e) for e in value.values)
    return False


# Methods a loop calls on an object that never step a state the object keeps
# (an optimizer's, a module's bookkeeping); any other (``policy.step(obs)``,
# ``agent.act(x)``) may run a method that keeps state on ``self``.
_NOT_STEPPING = frozenset({"__call__", "zero_grad", "parameters", "named_parameters", "train", "eval", "to",
                           "cuda", "cpu", "state_dict", "load_state_dict", "append", "extend", "item", "backward",
                           "update", "add", "log", "write", "add_scalar", "unscale_", "scale", "get", "items",
                           "keys", "values", "format", "size", "numel", "pop", "clear"})


def _loop_calls(stmt: ast.stmt) -> Iterable[Fact]:
    """Which objects are called inside back-propagating loops of this statement:
    ``(callee, raw ctor or "", methods called on it, attributes assigned on it)``.
    Lets a stateful module's forward (``self.hidden = ...``) know it is driven by
    a training loop, and whether that loop resets the state."""
    body = stmt.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else [stmt]
    if isinstance(stmt, ast.ClassDef):
        return []
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        A.body_nodes(stmt)  # the def's one walk, whose stretches the loops below (and later readers) reuse
    ctors, loops = backprop_loops(body)
    if not loops:
        return []
    entries: Dict[str, list] = {}
    for loop in loops:
        loop_call_sites(loop, entries)
    # Keep the fact coarse (units that read it are re-analysed when it changes): only plain names that the loop
    # invokes (an object called like a module), never builtins or dotted calls.
    # (a name's attributes also say, as ``"recurrent."``, which modules under it the loop
    # calls a method of or assigns on: ``model.recurrent.reinitialize_weight()``)
    under: Dict[str, set] = {}
    for name in entries:
        head, dot, rest = name.partition(".")
        if dot and rest:
            under.setdefault(head, set()).add(rest.split(".", 1)[0] + ".")
    value = frozenset(
        (callee, ctors.get(callee, ""), frozenset(ms), frozenset(ats | under.get(callee, set())))
        for callee, (_, ms, ats) in entries.items()
        if "." not in callee and callee not in _BUILTINS and ("__call__" in ms or "forward" in ms
                                                               or bool(ms - _NOT_STEPPING))
    )
    if not value:
        return []
    key = "loopcalls:" + (stmt.name if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else
                          ",".join(sorted(entries)))
    return [(key, value)]


def loop_call_sites(loop: ast.AST, entries: Dict[str, list]) -> Dict[str, list]:
    """What a loop body does to each object it names, into ``entries``:
    ``{dotted name: [its first call (or None), methods called on it (``__call__``
    for a call of the object itself), attributes assigned on it]}``."""
    for node in A.block_nodes(loop.body):  # type: ignore[attr-defined]
        if isinstance(node, ast.Call):
            name = A.dotted(node.func)
            if name is None:
                continue
            entry = entries.setdefault(name, [None, set(), set()])
            entry[1].add("__call__")
            if entry[0] is None or (node.lineno, node.col_offset) < (entry[0].lineno, entry[0].col_offset):
                entry[0] = node  # the first in the text
            if isinstance(node.func, ast.Attribute):
                recv = A.dotted(node.func.value)
                if recv is not None:
                    entries.setdefault(recv, [None, set(), set()])[1].add(node.func.attr)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute):
                    recv = A.dotted(t.value)
                    if recv is not None:
                        entries.setdefault(recv, [None, set(), set()])[2].add(t.attr)
    return entries


def backprop_loops(stmts) -> Tuple[Dict[str, str], list]:
    """(``name = Ctor(...)`` constructors, back-propagating loops) of a body."""
    ctors: Dict[str, str] = {}
    loops: list = []
    _visit_loops(stmts, ctors, loops)
    return ctors, loops


def _visit_loops(stmts, ctors: Dict[str, str], loops: list) -> None:
    """``name = Ctor(...)`` constructors, and the back-propagating loops (not
    looking inside them: their whole body is collected by the caller). A module
    function, not a recursive closure: a closure that calls itself is a
    reference cycle, left (with the AST it holds) for the cyclic collector."""
    for s in stmts:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            c = _ctor_name(s.value)
            if c:
                ctors[s.targets[0].id] = c
        if isinstance(s, A.LOOPS) and A.loop_backprops(s):
            loops.append(s)
            continue
        for block in A.child_blocks(s):
            _visit_loops(block, ctors, loops)


def _var_facts(stmt: ast.stmt) -> Iterable[Fact]:
    """``var:<name>``: the class a module-level name was made from (``Ctor(...)``,
    capitalised, so it reads as a class). ``inst:<name>``: any other bare name it
    was made by calling (``fMRI_LSTM(...)``), which only the facts of an imported
    class can tell apart from a function."""
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) == 1 and stmt.targets[0].__class__ in (ast.Tuple, ast.List) \
                and stmt.value.__class__ in (ast.Tuple, ast.List) \
                and len(stmt.targets[0].elts) == len(stmt.value.elts):
            # actor_local, critic_local = Actor(), Critic(): each name its own element
            for t, v in zip(stmt.targets[0].elts, stmt.value.elts):
                yield from _var_facts(ast.Assign(targets=[t], value=v))
            return
        wrapped = _wrapped_name(stmt.value)
        if wrapped is not None:
            # para_model = nn.DataParallel(model): the wrapper runs the wrapped model
            for t in stmt.targets:
                if isinstance(t, ast.Name) and t.id != wrapped:
                    yield "wrap:" + t.id, wrapped
            return
        ctor = _ctor_name(stmt.value)
        made = None if ctor else instance_of(stmt.value)
        for t in stmt.targets:
            if isinstance(t, ast.Name):
                if ctor:
                    yield "var:" + t.id, ctor
                elif made:
                    yield "inst:" + t.id, made
    elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
        for block in A.child_blocks(stmt):
            for s in block:
                yield from _var_facts(s)


# Wrappers whose call runs the module they wrap, as written at module level
# (raw dotted names: the summary does not see the import table).
_WRAPPER_CTORS = frozenset({
    "DataParallel", "nn.DataParallel", "torch.nn.DataParallel", "nn.parallel.DataParallel",
    "torch.nn.parallel.DataParallel", "DistributedDataParallel", "DDP", "nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.DistributedDataParallel", "parallel.DistributedDataParallel", "torch.compile",
})


def _wrapped_name(value: ast.expr) -> Optional[str]:
    """``nn.DataParallel(model)``, ``DDP(model, device_ids=[0])``,
    ``torch.compile(model)``, ``accelerator.prepare(model)`` (or either ``.to(dev)``):
    the module-level name of the model wrapped; None for anything else."""
    moved = _unmoved(value)
    if isinstance(moved, ast.Name) and moved is not value:
        return moved.id  # para_model = model.to(device): the same model
    value = moved
    if not (isinstance(value, ast.Call) and value.args):
        return None
    name = A.dotted(value.func)
    first = value.args[0].id if isinstance(value.args[0], ast.Name) else None
    if name in _WRAPPER_CTORS:
        return first
    if name and name.endswith(".prepare") and len(value.args) == 1 and not value.keywords:
        return first
    if name and name.endswith("DataParallel"):
        # a project's own balanced DataParallel: BalancedDataParallel(bsz, model, dim=1)
        return next((a.id for a in value.args if isinstance(a, ast.Name)), None)
    return None


def _call_args(stmt: ast.stmt) -> Iterable[Fact]:
    """``callargs:<method>``: where a statement list hands one method of an object
    what another method of the same object returned (edge-connect's ``outputs,
    gen_loss, dis_loss = edge_model.process(images, edges)`` then
    ``edge_model.backward(gen_loss, dis_loss)``): a set of ``(constructor or "",
    receiver, ((parameter position or keyword, source method, element or -1), ...))``.
    The method's own unit binds its parameters from them
    (:func:`caller_bindings`). Plain names in one statement list, not rebound in between;
    in a class, also an object it keeps on ``self`` (``self.edge_model =
    EdgeModel(config)``, then ``self.edge_model.process(...)`` in a method)."""
    if isinstance(stmt, ast.ClassDef):
        return _class_call_args(stmt)
    body = stmt.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else [stmt]
    if not any(s.__class__ is ast.Assign and s.value.__class__ is ast.Call and s.value.func.__class__ is ast.Attribute
               and s.value.func.value.__class__ is ast.Name for s in A.iter_statements(body)):
        return []  # no `x = obj.method(...)`: nothing handed from one method to another
    found: Dict[str, set] = {}
    _handed(body, {}, None, found)
    return [("callargs:" + m, frozenset(v)) for m, v in sorted(found.items())]


def _class_call_args(cls: ast.ClassDef) -> List[Fact]:
    """:func:`_call_args` of the methods of a class, for the objects it keeps on ``self``."""
    defs = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    handing = [fn for fn in defs if any(
        s.__class__ is ast.Assign and s.value.__class__ is ast.Call and s.value.func.__class__ is ast.Attribute
        and _self_attr(s.value.func.value) is not None for s in A.iter_statements(fn.body))]
    if not handing:
        return []  # no `x = self.obj.method(...)` (most classes)
    kept: Dict[str, Optional[str]] = {}
    for fn in defs:
        for n in A.body_nodes(fn):
            if n.__class__ is ast.Assign:
                for t in n.targets:
                    attr = _self_attr(t)
                    if attr is not None:
                        ctor = _ctor_name(n.value)
                        key = "self." + attr
                        kept[key] = ctor if (ctor and ctor != "?" and kept.get(key, ctor) == ctor) else None
    ctors = {k: v for k, v in kept.items() if v}
    if not ctors:
        return []
    found: Dict[str, set] = {}
    for fn in handing:
        _handed(fn.body, ctors, frozenset(ctors), found)
    return [("callargs:" + m, frozenset(v)) for m, v in sorted(found.items())]


def _handed(body, ctors: Dict[str, str], kept: Optional[frozenset], found: Dict[str, set]) -> None:
    """The scan of :func:`_call_args` over one body: receivers are plain names (their
    constructors learnt on the way), or, with ``kept``, those attributes of ``self``."""
    lists = [body] + [b for s in A.iter_statements(body) for b in A.child_blocks(s)]
    for block in lists:
        made: Dict[str, Tuple[str, str, int]] = {}
        for s in block:
            value = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
            recv = m = None
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
                if kept is None:
                    recv = value.func.value.id if isinstance(value.func.value, ast.Name) else None
                else:
                    d = _self_attr(value.func.value)
                    recv = "self." + d if d is not None and "self." + d in kept else None
                m = value.func.attr if recv is not None else None
            if recv is not None and m is not None and isinstance(value, ast.Call):
                bound: List[tuple] = []
                for i, a in enumerate(value.args):
                    src = made.get(a.id) if isinstance(a, ast.Name) else None
                    if src is not None and src[0] == recv:
                        bound.append((i, src[1], src[2]))
                for kw in value.keywords:
                    src = made.get(kw.value.id) if isinstance(kw.value, ast.Name) and kw.arg else None
                    if src is not None and src[0] == recv:
                        bound.append((kw.arg, src[1], src[2]))
                if bound:
                    found.setdefault(m, set()).add((ctors.get(recv, ""), recv, tuple(bound)))
            if isinstance(s, ast.Assign):
                if made:  # (nothing made yet: nothing to forget; most statement lists)
                    for t in s.targets:
                        if t.__class__ is ast.Name:
                            made.pop(t.id, None)
                            continue
                        for n in A.walk_all(t):
                            if isinstance(n, ast.Name):
                                made.pop(n.id, None)
                if len(s.targets) == 1 and recv is not None and m is not None:
                    t = s.targets[0]
                    if isinstance(t, ast.Name):
                        made[t.id] = (recv, m, -1)
                    elif isinstance(t, ast.Tuple):
                        for k, e in enumerate(t.elts):
                            if isinstance(e, ast.Name):
                                made[e.id] = (recv, m, k)
                if kept is None:
                    ctor = _ctor_name(s.value)
                    if ctor and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                        ctors[s.targets[0].id] = ctor
            elif not isinstance(s, ast.Expr) and made:
                for st in A.iter_statements([s]):  # what a compound statement may rebind
                    for target in _stmt_targets(st):
                        for n in A.walk_all(target):
                            if isinstance(n, ast.Name):
                                made.pop(n.id, None)


def _stmt_targets(st: ast.stmt) -> List[ast.AST]:
    if isinstance(st, ast.Assign):
        return list(st.targets)
    if isinstance(st, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        return [st.target]
    if isinstance(st, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in st.items if i.optional_vars is not None]
    if isinstance(st, ast.Delete):
        return list(st.targets)
    return []


def _method_run(cls: ast.ClassDef, name: str, resolver: interp.Resolver) -> Optional[V.FnFacts]:
    """The facts of method ``name`` of ``cls`` summarised with ``resolver`` (the file's)."""
    m = next((d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == name), None)
    if m is None:
        return None
    try:
        return function_facts(m, resolver, method=True, self_obj="user:" + cls.name)
    except RecursionError:
        return None


def caller_bindings(fn: ast.AST, cls_name: str, resolver: interp.Resolver,
                    cls: Optional[ast.ClassDef] = None) -> Dict[str, Tuple[str, frozenset]]:
    """A method's parameters as its callers in this file bind them (``callargs:``
    facts): ``{parameter: (source method, modules)}`` for each parameter handed
    what another method of the same object returned with a graph that saved the
    weights of ``self.<module>`` calls (RetPos.modules). A caller whose object is
    not surely of this class, or a source method whose result is not known, binds
    nothing: the parameter stays unknown."""
    got = resolver.summary.get("callargs:" + getattr(fn, "name", ""))
    cf = resolver.cls(cls_name)
    if not got or cf is None:
        return {}
    named, _ = A.parameters(fn, True)
    names = [a.arg for a in named]
    out: Dict[str, Tuple[str, frozenset]] = {}
    runs: Dict[str, Optional[V.FnFacts]] = {}
    for ctor, recv, bound in sorted(got, key=repr):
        obj = resolver.ctor_obj(ctor) if ctor else resolver.global_obj(recv)
        if obj != "user:" + cls_name:
            continue
        for key, src, elem in bound:
            facts = cf.method(src)
            if cls is not None and facts is not None and not facts.no_grad:
                # the class's summary reads its own chunk only: a module of another class of
                # the file it calls (RN's ``self.discriminator``) is none there. The method run
                # again with the file's resolver (the class is one chunk with ``fn``) says
                # which modules the graph it returns went through
                if src not in runs:
                    runs[src] = _method_run(cls, src, resolver)
                facts = runs[src] or facts
            if facts is None or facts.no_grad:
                continue
            if elem < 0:
                rp = facts.ret if facts.returns_value else None
            else:
                rp = facts.returns[elem] if facts.returns is not None and elem < len(facts.returns) else None
            if rp is None or not rp.graph or not rp.modules:
                continue
            idx = key if isinstance(key, int) else (names.index(key) if key in names else None)
            if idx is None or idx >= len(names):
                continue
            prev = out.get(names[idx])
            out[names[idx]] = (src, rp.modules | (prev[1] if prev else frozenset()))
    return out


_LIST_FILLS = ("append", "extend", "insert")


def sibling_filled(cls: ast.ClassDef, fn: ast.AST, resolver: interp.Resolver, self_obj: str) -> Dict[str, V.Val]:
    """The lists on ``self`` that another method of the same object fills with graphs
    (PPO's ``select_action()`` appending ``dist.log_prob(action)`` to ``self.logprobs``)
    and that ``fn`` reads without assigning first: ``{"self.<a>": what they hold}``, the
    graph tokens of that method's run (its append's call nodes), so ``update()`` stacking
    ``self.logprobs`` before its epochs reuses graphs built before its loop. Only where
    ``fn`` back-propagates in a loop (cheap tests first) and the filling method is no
    ``__init__`` and runs with grad; the class is one chunk with ``fn``, so reading its
    other methods keeps ``fn``'s findings cacheable."""
    loops = [n for n in A.body_nodes(fn) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))]
    if not loops or not any(isinstance(n, ast.Attribute) and n.attr == "backward"
                            for lp in loops for n in A.block_nodes(lp.body)):
        return {}
    read = {f"self.{n.attr}" for n in A.body_nodes(fn) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name) and n.value.id == "self"}
    if not read:
        return {}
    fillers = []
    for m in cls.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) or m is fn or m.name == "__init__" or any(
                isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod", "property") for d in m.decorator_list):
            continue
        keys: Set[str] = set()
        for n in A.body_nodes(m):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _LIST_FILLS:
                key = A.dotted(n.func.value)
                if key is not None and key in read:
                    keys.add(key)
        if keys:
            fillers.append((m, keys))
    if not fillers:
        return {}
    # (a key fn assigns before reading it, self.logprobs = [] first, is rebound in fn's own run)
    out: Dict[str, V.Val] = {}
    for m, keys in fillers:
        if A.is_no_grad_function(m, resolver.ctx):
            continue
        named, _ = A.parameters(m, True)
        env = {a.arg: V.Val(param=True) for a in named}
        for key in keys:
            env[key] = V.Val(kind="list")  # (what it held before this call is not this run's)
        g = interp.GraphFlow(resolver, self_obj=self_obj, find_carries=False)
        try:
            g.run(m.body, env)
        except RecursionError:
            continue
        final = getattr(g, "final", None) or {}
        for key in sorted(keys):
            v = final.get(key)
            toks = frozenset(t for t in v.taints if t[0] == "G" and (id(t[1]) in g.saving_calls or id(t[1]) in g.saved_weights)) \
                if v is not None else V.EMPTY
            if toks:
                old = out.get(key)
                out[key] = V.Val(toks | (old.taints if old is not None else V.EMPTY), kind="list")
    return out


# ``encodeinit:<Class>`` -- ``(attribute, parameter, (line, col, end_line, end_col) of the
# ``__init__`` statement, (line, col) of forward's first statement, the statement that computes it
# again there)``: see :func:`encode_again` (absolute lines: a positional fact)
ENCODE_AGAIN = "encodeinit:"


def _self_attr_of(t: ast.AST, me: str) -> Optional[str]:
    return t.attr if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me else None


def encode_again(cls: ast.ClassDef) -> List[Fact]:
    """A class whose ``__init__`` keeps ``self.<a> = <p>.<method>(...)`` (or ``<p>(...)``) of a
    parameter ``<p>`` (``ClassFacts.init_graphs``' shape: CITE's ``self.weights =
    model.encode_text(self.texts)``), where ``forward`` could compute it alike: the call reads
    only ``self``'s attributes set before it in ``__init__`` (and not set again), and
    constants; ``self.<p>`` is no name of the class; no method but ``forward`` reads
    ``self.<a>``. GG103's fix for a graph such a constructor keeps (keep ``<p>``, compute
    ``self.<a>`` at the top of ``forward``) is read from here."""
    defs = {d.name: d for d in cls.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init, fwd = defs.get("__init__"), defs.get("forward")
    if init is None or fwd is None or not init.args.args or not fwd.args.args or not fwd.body:
        return []
    me = init.args.args[0].arg
    if fwd.args.args[0].arg != me:
        return []  # (another name for self in forward: the arguments would need renaming)
    params = {a.arg for a in init.args.args[1:]}
    found = None
    for k, st in enumerate(init.body):
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.value, ast.Call)):
            continue
        t, v = st.targets[0], st.value
        f = v.func.value if isinstance(v.func, ast.Attribute) else v.func
        if _self_attr_of(t, me) is not None and isinstance(f, ast.Name) and f.id in params:
            found = (k, st, t.attr, f.id, v)  # type: ignore[attr-defined]
            break
    if found is None:
        return []
    k, st, attr, p, call = found
    before = {_self_attr_of(t, me) for x in init.body[:k] if isinstance(x, ast.Assign) for t in x.targets}
    for n in A.walk_all(call):
        if n is call.func or (isinstance(call.func, ast.Attribute) and n is call.func.value):
            continue
        if isinstance(n, ast.Name) and not (n.id == me and any(
                isinstance(a, ast.Attribute) and a.value is n and a.attr in before for a in A.walk_all(call))):
            return []  # reads a parameter or a global: forward may not see the same
    if any(getattr(d, "name", "") == p for d in cls.body) or any(
            isinstance(n, ast.Attribute) and n.attr == p for d in defs.values() for n in A.walk_all(d)):
        return []  # self.<p> is a name of the class already
    for name, d in defs.items():
        for n in A.walk_all(d):
            if isinstance(n, ast.Attribute) and n.attr == attr and n is not st.targets[0] and name != "forward":
                return []  # read or set elsewhere than forward (and this statement)
            if d is init and isinstance(n, ast.Attribute) and n.attr in before and isinstance(n.ctx, ast.Store) \
                    and n.lineno > st.lineno:
                return []  # an argument it reads changes later in __init__
    first = fwd.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        if len(fwd.body) < 2:
            return []
        first = fwd.body[1]  # (after a docstring)
    if st.end_lineno is None or st.end_col_offset is None:
        return []
    text = ast.unparse(call)
    head = ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else p
    again = f"{me}.{attr} = {me}.{p}{text[len(head):]}"
    return [(ENCODE_AGAIN + cls.name, (attr, p, (st.lineno, st.col_offset, st.end_lineno, st.end_col_offset),
                                       (first.lineno, first.col_offset), again))]


def summarize_graph_facts(stmt: ast.stmt, referenced: bool = True) -> Iterable[Fact]:
    try:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not referenced:  # ``fn:<name>`` is only read where <name> is used
                return list(_loop_calls(stmt)) + _requires_grad_facts(stmt) + list(_call_args(stmt))
            r = _FactResolver()
            r.current = stmt.name
            return [("fn:" + stmt.name, function_facts(stmt, r))] + list(_loop_calls(stmt)) \
                + _requires_grad_facts(stmt) + list(_call_args(stmt))
        if isinstance(stmt, ast.ClassDef):
            return [("class:" + stmt.name, class_facts(stmt))] + _requires_grad_facts(stmt) + _class_aliases(stmt) \
                + encode_again(stmt) \
                + _class_call_args(stmt) + _parametrized(stmt)
        return list(_var_facts(stmt)) + list(_loop_calls(stmt)) + _requires_grad_facts(stmt) + list(_call_args(stmt)) \
            + _hook_facts(stmt)
    except (RecursionError, ValueError, TypeError, AttributeError, KeyError, IndexError):
        # never let an odd construct take the whole file down; the rule then
        # simply knows less about this definition
        return []


def _parametrized(cls: ast.ClassDef) -> List[Fact]:
    """``parametrized:<Class>`` → True when a method of the class registers a
    parametrization on the module (``parametrize.register_parametrization(self, "weight",
    ...)``, ``parametrizations.orthogonal(self.lin)``): its call computes the parametrized
    tensor, once per ``parametrize.cached()`` block (``knowledge.PARAMETRIZE_CACHED``).
    (The class's breadth-first node list, the one :func:`_requires_grad_facts` made of
    the same statement just before: the same nodes in the same order, walked once.)"""
    for n in A.walk_all_list(cls):
        if isinstance(n, ast.Call):
            name = A.dotted(n.func) or ""
            last = name.rsplit(".", 1)[-1]
            if last in K.PARAMETRIZING_CALLS or K.PARAMETRIZATIONS_MODULE in name.split(".")[:-1]:
                return [("parametrized:" + cls.name, True)]
    return []


_HOOK_REGISTRATIONS = frozenset({"register_forward_hook"})


def _hook_facts(stmt: ast.stmt) -> List[Fact]:
    """``hook:<name>`` → the function of this file a module-level statement registers as a
    forward hook on ``name`` or a part of it (``student[0].register_forward_hook(keep)``):
    every call of ``name`` runs it on the part's output (:meth:`interp.GraphFlow.call`)."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in _HOOK_REGISTRATIONS and value.args and isinstance(value.args[0], ast.Name)):
        return []
    root = value.func.value
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    if not isinstance(root, ast.Name):
        return []
    return [("hook:" + root.id, value.args[0].id)]


def _class_aliases(stmt: ast.ClassDef) -> List[Fact]:
    """``alias:<cls>.<name>`` → ``<other>`` for ``class neuron: IFNode = IFNode``: a
    class used as a namespace, its attribute naming another definition of the file
    (``neuron.IFNode()`` then makes an ``IFNode``; :meth:`interp.Resolver.cls`)."""
    out: List[Fact] = []
    for s in stmt.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and isinstance(s.value, ast.Name) and s.value.id[:1].isupper():
            out.append((f"alias:{stmt.name}.{s.targets[0].id}", s.value.id))
    return out


def is_requires_grad_expr(e: Optional[ast.AST]) -> bool:
    """Syntactically a tensor made to require grad: ``f(..., requires_grad=True)``
    or ``....requires_grad_()``."""
    if not isinstance(e, ast.Call):
        return False
    if any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
           for k in e.keywords):
        return True
    if isinstance(e.func, ast.Attribute) and e.func.attr == "requires_grad_":
        return not e.args or (isinstance(e.args[0], ast.Constant) and e.args[0].value is True)
    return False


def _bound(target: ast.AST) -> List[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _bound(e)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def _requires_grad_facts(stmt: ast.stmt) -> List[Fact]:
    """Which tensors made to require grad reach which functions' parameters:

    - ``rg:global:<x>``: module-level ``x = <a tensor made to require grad>``;
    - ``rg:returns:<f>``: ``f`` returns such a tensor (made there, or bound to a name there);
    - ``rg:arg:<f>:<i|name>``: a call ``f(...)`` in this statement passes, as its i-th
      positional (or ``name=``) argument, such a tensor (``"rg"``), a module-level name
      (``"name:x"``, resolved through ``rg:global:``) or a call's result (``"call:g"``,
      resolved through ``rg:returns:``): :func:`requires_grad_argument`;

    and, from the same walk, what each call of a bare name passes (``pcall:``,
    :func:`_param_call_facts`).
    """
    is_fn = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    is_cls = isinstance(stmt, ast.ClassDef)
    out: List[Fact] = []
    rg_names: set = set()
    returns: List[ast.Return] = []
    calls: List[ast.Call] = []
    named_calls: List[ast.Call] = []  # (and the Name nodes: the call-site facts, from the same walk)
    names: list = []
    Call, Assign, Return, Name = ast.Call, ast.Assign, ast.Return, ast.Name
    for n in A.walk_all_list(stmt):  # ast.walk's order, without ctx nodes (one walk for both sources)
        cls = n.__class__  # (a parsed tree's nodes are of these exact classes: no isinstance chain per node)
        if cls is Name:
            names.append(n)
        elif cls is Call:
            if n.func.__class__ is Name and n.func.id not in _BUILTINS:  # type: ignore[attr-defined]
                named_calls.append(n)  # type: ignore[arg-type]
                if n.args or n.keywords:  # type: ignore[attr-defined]
                    calls.append(n)  # type: ignore[arg-type]
        elif cls is Assign:
            if is_requires_grad_expr(n.value):  # type: ignore[attr-defined]
                for t in n.targets:  # type: ignore[attr-defined]
                    rg_names.update(_bound(t))
        elif cls is Return and is_fn:
            returns.append(n)  # type: ignore[arg-type]
    if isinstance(stmt, ast.Assign) and is_requires_grad_expr(stmt.value):
        for t in stmt.targets:
            for name in _bound(t):
                out.append((f"rg:global:{name}", True))
    if any(is_requires_grad_expr(r.value) or (isinstance(r.value, ast.Name) and r.value.id in rg_names)
           for r in returns):
        out.append((f"rg:returns:{stmt.name}", True))  # type: ignore[attr-defined]
    for c in calls:
        pairs = [(str(i), a) for i, a in enumerate(c.args) if not isinstance(a, ast.Starred)]
        pairs += [(k.arg, k.value) for k in c.keywords if k.arg]
        for key, a in pairs:
            val = None
            if is_requires_grad_expr(a) or (isinstance(a, ast.Name) and a.id in rg_names):
                val = "rg"
            elif isinstance(a, ast.Name) and not (is_fn or is_cls):
                val = f"name:{a.id}"  # a module-level name: resolved through rg:global:
            elif isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and not a.func.id[:1].isupper() \
                    and a.func.id not in _BUILTINS:
                val = f"call:{a.func.id}"
            if val is not None:
                out.append((f"rg:arg:{c.func.id}:{key}", val))  # type: ignore[attr-defined]
            elif isinstance(a, ast.Constant) and isinstance(a.value, (bool, int, str)) and not is_fn and not is_cls:
                out.append((f"flag:{c.func.id}:{key}", bool(a.value)))  # type: ignore[attr-defined]
    if named_calls:
        out.extend(_param_call_facts(stmt, named_calls, names))
    return out


def argument_flag(summary, fn: str, i: int, name: str) -> Optional[bool]:
    """The truth of the constant a call at module level of function ``fn`` passes as
    its parameter ``i`` (called ``name``): ``train(..., False, ...)`` (``flag:`` facts).
    None when no such call is seen."""
    for key in (str(i), name):
        val = summary.get(f"flag:{fn}:{key}")
        if isinstance(val, bool):
            return val
    return None


def requires_grad_argument(summary, fn: str, i: int, name: str) -> bool:
    """Does some call of module-level function ``fn`` pass its parameter ``i``
    (called ``name``) a tensor that requires grad (``rg:arg:`` facts, resolved)?"""
    for key in (str(i), name):
        val = summary.get(f"rg:arg:{fn}:{key}")
        if val is None:
            continue
        if val == "rg" or (isinstance(val, str) and (
                (val.startswith("call:") and summary.get(f"rg:returns:{val[5:]}"))
                or (val.startswith("name:") and summary.get(f"rg:global:{val[5:]}")))):
            return True
    return False


def argument_class(summary, fn: str, i: int, name: str) -> Optional[str]:
    """The class of this file whose instance some call of module-level function ``fn``
    passes as its parameter ``i`` (called ``name``): a module-level name made by calling
    it (``model = SEWResNet()`` ... ``fit_one_epoch(model, ...)``: the ``rg:arg:`` fact
    ``name:model`` and the ``var:model`` fact), when that class's modules keep state of
    their own (``ClassFacts.members``). The trace of ``fn`` then starts that parameter as
    such an object, so its loop follows the state as a loop at module level would."""
    for key in (str(i), name):
        val = summary.get(f"rg:arg:{fn}:{key}")
        if not (isinstance(val, str) and val.startswith("name:")):
            continue
        raw = summary.get("var:" + val[5:])
        if not isinstance(raw, str):
            continue
        cf = summary.get("class:" + raw)
        if isinstance(cf, V.ClassFacts) and cf.members:
            return raw
    return None


def _param_call_facts(stmt: ast.stmt, calls: List[ast.Call], names: list) -> List[Fact]:
    """``pcall:<f>:<what>``: what each call ``f(...)`` of a bare name in this statement
    passes, argument by argument (``what``: the repr of the value, a
    ``(positional, keyword)`` pair of atoms): ``("n", x)`` a module-level name,
    ``("c", raw)`` a constructor call (``nn.MSELoss()``, or a name this statement binds
    exactly once to one, ``model = Net().to(dev)`` in ``main``), None anything else. A
    call spreading ``*args``/``**kw`` and a bare mention of ``f`` that is not a call
    (a callback) say ``"?"``: nothing known. One fact per distinct call shape, so the
    merged table holds every shape the file's call sites take
    (:func:`agreed_call_arguments`)."""
    Name = ast.Name
    funcs = {id(c.func) for c in calls}
    called = {c.func.id for c in calls}  # type: ignore[attr-defined]
    out: set = set()
    for n in names:  # f handed on as a value (map(f, ...), Thread(target=f)): calls we cannot see
        if n.id in called and id(n) not in funcs and n.ctx.__class__ is ast.Load:
            out.add((n.id, "?"))
    bound: Optional[Dict[str, list]] = None
    top_assign = stmt if stmt.__class__ is ast.Assign else None
    needed = {a.id for c in calls for a in list(c.args) + [k.value for k in c.keywords] if a.__class__ is Name}
    for c in calls:
        fname = c.func.id  # type: ignore[attr-defined]
        if any(a.__class__ is ast.Starred for a in c.args) or any(k.arg is None for k in c.keywords):
            out.add((fname, "?"))
            continue
        atoms = []
        for a in list(c.args) + [k.value for k in c.keywords]:
            atom = None
            if a.__class__ is Name:
                if bound is None:
                    bound = _bindings(stmt, top_assign, needed)
                got = bound.get(a.id)
                if got is None:
                    atom = ("n", a.id)
                elif len(got) == 1 and got[0] is not None:
                    atom = ("c", got[0])
            else:
                ctor = _ctor_name(a)
                if ctor and ctor != "?":
                    atom = ("c", ctor)
            atoms.append(atom)
        if not any(atoms):
            out.add((fname, "?"))
            continue
        k = len(c.args)
        what = (tuple(atoms[:k]), tuple(sorted((kw.arg, at) for kw, at in zip(c.keywords, atoms[k:]))))
        out.add((fname, what))
    return [(f"pcall:{f}:{what!r}", what) for f, what in sorted(out, key=repr)]


def _bindings(stmt: ast.stmt, top_assign: Optional[ast.stmt], needed: set) -> Dict[str, list]:
    """Each of the ``needed`` names ``stmt`` binds (anywhere inside, nested defs
    included): one entry per binding, the constructor's raw name for ``x = Ctor(...)``
    (moved or not), else None. The target of a plain top-level assignment is left
    out: its call reads the value from before."""
    out: Dict[str, list] = {}
    ctors: Dict[int, str] = {}  # id(target Name) -> the constructor assigned to it
    skip = {id(t) for t in top_assign.targets} if isinstance(top_assign, ast.Assign) else set()
    Name, Load, Assign, arg = ast.Name, ast.Load, ast.Assign, ast.arg
    for n in A.walk_all_list(stmt):
        cls = n.__class__
        if cls is Name:
            if n.id in needed and n.ctx.__class__ is not Load and id(n) not in skip:  # type: ignore[attr-defined]
                out.setdefault(n.id, []).append(ctors.get(id(n)))  # type: ignore[attr-defined]
        elif cls is Assign:
            t = n.targets[0] if len(n.targets) == 1 else None  # type: ignore[attr-defined]
            if t is not None and t.__class__ is Name and t.id in needed:
                ctor = _ctor_name(n.value)  # type: ignore[attr-defined]
                if ctor and ctor != "?":
                    ctors[id(t)] = ctor  # (walk_all visits an Assign before its targets)
        elif cls is arg:
            if n.arg in needed:  # type: ignore[attr-defined]
                out.setdefault(n.arg, []).append(None)  # type: ignore[attr-defined]
        elif cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            if n is not stmt and n.name in needed:  # type: ignore[attr-defined]
                out.setdefault(n.name, []).append(None)  # type: ignore[attr-defined]
        elif cls is ast.alias:
            out.setdefault((n.asname or n.name).split(".")[0], []).append(None)  # type: ignore[attr-defined]
        elif cls is ast.ExceptHandler:
            if n.name:  # type: ignore[attr-defined]
                out.setdefault(n.name, []).append(None)  # type: ignore[attr-defined]
        elif cls in (ast.Global, ast.Nonlocal):
            for name in n.names:  # type: ignore[attr-defined]
                out.setdefault(name, []).extend((None, None))
    return out


def _call_index(summary) -> Dict[str, list]:
    """``pcall:`` facts by function name, built once per table."""
    memo = getattr(summary, "_memo", None)
    if memo is not None:
        got = memo.get(_call_index)
        if got is not None:
            return got
    index: Dict[str, list] = {}
    for k in dict.keys(summary) if isinstance(summary, dict) else summary.keys():
        if k.startswith("pcall:"):
            index.setdefault(k[6:].partition(":")[0], []).append(dict.get(summary, k) if isinstance(summary, dict) else summary[k])
    if memo is not None:
        memo[_call_index] = index
    return index


def forwards_freeing_returned(summary) -> bool:
    """Does a class of the file have a ``forward`` that back-propagates the loss it returns
    (``FnFacts.frees_returned``)? Then one backward beside a call of it is a second one
    (GG103), and a method's parameter its own class hands such a model is bound to it
    (``rules.common._bind_from_own_calls``). A summary query."""
    return any(k.startswith("class:") and isinstance(v, V.ClassFacts)
               and any(name == "forward" and m.frees_returned for name, m in v.methods)
               for k, v in summary.items())


def agreed_call_arguments(summary, fn: str, names: Tuple[str, ...]) -> Tuple[Tuple[str, tuple], ...]:
    """The parameters (of ``names``, a module-level function ``fn``'s, in order) that
    every call site of ``fn`` in the file passes the same known thing
    (:func:`_param_call_facts`' atoms): ``((parameter, atom), ...)``. Empty when a
    call site is not known (a spread, a callback) or there is none. (A table query:
    memoised, and a unit depends on its answer.)"""
    shapes = _call_index(summary).get(fn)
    if not shapes or "?" in shapes:
        return ()
    out = []
    for i, name in enumerate(names):
        seen = set()
        for pos, kws in shapes:
            if i < len(pos):
                seen.add(pos[i])
            else:
                seen.add(dict(kws).get(name))
        if len(seen) == 1:
            (atom,) = seen
            if atom is not None:
                out.append((name, atom))
    return tuple(out)


def _fold_delegates_for_export(name: str, facts: dict, lookup) -> dict:
    """``FnFacts.delegates`` (and ``loop_delegates``) name functions of the *defining*
    module, which the importing file would look up among its own names: fold them
    where they are defined. A delegate that back-propagates makes the function
    back-propagate the parameters that reach it (in its own loop: ``loop_backward``).
    Method facts of a class likewise. The globals a loop back-propagates
    (``loop_backward_globals``) are the defining module's: not exported."""
    out = dict(facts)
    for prefix in ("fn", "class"):
        if prefix in out:
            out[prefix] = _fold_delegates(out[prefix], lookup, 0, frozenset({name}))
    fn = out.get("fn")
    if isinstance(fn, V.FnFacts) and (fn.loop_backward_globals or fn.backward_globals or fn.loop_calls):
        # names of the defining module's globals and functions: the importing file's names
        # of the same spelling are other variables
        out["fn"] = fn = replace(fn, loop_backward_globals=(), backward_globals=(), loop_calls=())
    if isinstance(fn, V.FnFacts) and fn.returns_share_via:
        out["fn"] = fn = replace(fn, returns_share_via=())  # the defining module's globals
    if isinstance(fn, V.FnFacts) and (fn.ret.globals_saving or any(p.globals_saving for p in fn.returns or ())):
        out["fn"] = fn = replace(fn, ret=replace(fn.ret, globals_saving=V.EMPTY), returns=tuple(  # (the same)
            replace(p, globals_saving=V.EMPTY) for p in fn.returns) if fn.returns is not None else None)

    if isinstance(fn, V.FnFacts) and any(e.appends and not e.saving and e.saving_via for e in fn.containers):
        out["fn"] = replace(fn, containers=tuple(_saving_where_defined(e, lookup) for e in fn.containers))
    for prefix in ("fn", "class"):
        if prefix in out:
            out[prefix] = _unnamed_receivers(out[prefix])
    made = out.get("fn")
    if isinstance(made, V.FnFacts) and made.makes and "class" not in out and not made.calls_backward:
        # def resnet32(): return ResNet(...): the importing file cannot see ResNet; it
        # sees resnet32 as that class, whose call makes one (Resolver.ctor_obj)
        cf = lookup(made.makes, True).get("class") if "." not in made.makes else None
        if isinstance(cf, V.ClassFacts) and _module_class(cf, lookup):
            out["class"] = cf
            out["fn"] = replace(made, makes=name)
    return out


def _saving_where_defined(eff: V.ContainerEffect, lookup) -> V.ContainerEffect:
    """``policy.saved_log_probs.append(m.log_prob(action))`` with ``probs = policy(state)``:
    whether the graph put there saved tensors hangs on ``policy`` being a module
    (``ContainerEffect.saving_via``), a module-level name of the defining module, which
    the importing file cannot look up: look it up here (``policy = Policy()``, a torch
    module class or a class of this module that is one)."""
    if not eff.appends or eff.saving or not eff.saving_via:
        return eff
    for name in eff.saving_via:
        raw = lookup(name, True).get("var")
        if not isinstance(raw, str):
            continue
        if raw.startswith(("nn.", "torch.nn.")):
            return replace(eff, saving=True, saving_via=())
        cf = lookup(raw, True).get("class") if "." not in raw else None
        if isinstance(cf, V.ClassFacts) and _module_class(cf, lookup):
            return replace(eff, saving=True, saving_via=())
    return eff


def _module_class(cf: V.ClassFacts, lookup, depth: int = 0) -> bool:
    """A class of the defining module that is a torch module: it has a ``forward``,
    or a base that is torch's or such a class of that module."""
    if cf.has_forward:
        return True
    for b in cf.bases:
        if b.startswith(("nn.", "torch.nn.")) or b in K.MODULE_BASES:
            return True
        if "." not in b and depth < 4:
            inner = lookup(b, True).get("class")
            if isinstance(inner, V.ClassFacts) and _module_class(inner, lookup, depth + 1):
                return True
    return False


def _unnamed_receivers(value: object) -> object:
    """The calls of methods of a module-level object (``FnFacts.calls`` with a receiver
    ``"@model.scheduler"``) name the defining module's globals: the importing file's
    ``model`` is another object, so they are exported unnamed (composed as unseen)."""
    if isinstance(value, V.ClassFacts):
        methods = tuple((n, _unnamed_receivers(m)) for n, m in value.methods)
        return value if all(a is b for (_, a), (_, b) in zip(methods, value.methods)) else replace(value, methods=methods)
    if isinstance(value, V.FnFacts) and any(c[0].startswith("@") and not c[0].startswith("@#") for c in value.calls):
        # (a parameter's, ``"@#1"``, is the caller's argument wherever the def is called: kept)
        return replace(value, calls=tuple(("@", *c[1:]) if c[0].startswith("@") and not c[0].startswith("@#") else c
                                          for c in value.calls))
    return value


def _fold_delegates(value: object, lookup, depth: int, seen: frozenset) -> object:
    if isinstance(value, V.ClassFacts) and any(m.delegates for _, m in value.methods):
        return replace(value, methods=tuple((n, _fold_delegates(m, lookup, depth, seen)) for n, m in value.methods))
    if not isinstance(value, V.FnFacts) or not (value.delegates or value.loop_delegates):
        return value
    calls_backward, bparams = value.calls_backward, set(value.backward_params)
    retains = value.backward_retains if calls_backward else True  # every backward so far retains
    loop_params = set(value.loop_backward)
    if not value.no_grad and depth < interp.DELEGATION_DEPTH:
        folded_by_name: Dict[str, V.FnFacts] = {}
        for callee, argsets, kwsets in value.delegates:
            if callee in seen:
                continue
            inner = lookup(callee).get("fn")
            if not isinstance(inner, V.FnFacts):
                continue
            folded = _fold_delegates(inner, lookup, depth + 1, seen | {callee})
            assert isinstance(folded, V.FnFacts)  # a function's facts fold into a function's facts
            inner = folded_by_name[callee] = folded
            if inner.calls_backward and not inner.no_grad:
                calls_backward = True
                retains = retains and inner.backward_retains
                named = dict(kwsets)
                for j in inner.backward_params:
                    bparams |= inner.argument(j, argsets, named, frozenset())
        # a callee its loop calls that back-propagates (without retaining) what it is
        # passed: those parameters reach a backward in the function's own loop
        for callee, argsets, kwsets in value.loop_delegates:
            got = folded_by_name.get(callee)
            if got is not None and got.calls_backward and not got.no_grad and not got.backward_retains:
                named = dict(kwsets)
                for j in got.backward_params:
                    loop_params |= got.argument(j, argsets, named, frozenset())
    return replace(value, calls_backward=calls_backward, backward_params=frozenset(bparams),
                   backward_retains=calls_backward and retains, delegates=(),
                   loop_backward=frozenset(loop_params), loop_delegates=())


# The facts of this module, as one source: GG101 and GG102 read them, and the
# interpreter itself (``fn:``/``class:`` facts of same-file definitions).
# ``loopcalls:<def>`` is only written for a loop that back-propagates.
def _callers(stmt: ast.stmt) -> List[Fact]:
    """``FactSource.callers``: what a statement of another file hands to the methods of
    an object it made (:func:`_call_args`)."""
    try:
        return list(_call_args(stmt))
    except (RecursionError, ValueError, TypeError, AttributeError, KeyError, IndexError):
        return []


def _fn_names_lines(fn: object) -> bool:
    """Does a def's facts hold lines of its body (``RetPos.stepped_after``: where a
    module was called and an optimizer stepped, which GG103 finds again by line)?"""
    if not isinstance(fn, V.FnFacts):
        return False
    return bool(fn.ret.stepped_after) or any(r.stepped_after for r in fn.returns or ())


def _names_lines(key: str, value: object) -> bool:
    """``FactSource.names_lines``: a def's or a class's facts that hold lines of the body."""
    if isinstance(value, V.ClassFacts):
        return any(_fn_names_lines(m) for _, m in value.methods)
    return _fn_names_lines(value)


GRAPH_FACTS = FactSource("graph", summarize_graph_facts, _fold_delegates_for_export, ("loopcalls:",),
                         callers=_callers, names_lines=_names_lines, positional=(ENCODE_AGAIN,))
