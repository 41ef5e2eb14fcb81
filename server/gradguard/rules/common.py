"""Helpers the rules share (a rule never imports another rule)."""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import facts
from gradguard.analysis import interpreter as interp
from gradguard.analysis import knowledge as K
from gradguard.analysis import values as V
from gradguard.analysis.facts import requires_grad_argument
from gradguard.analysis.summary import query

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Callable, Dict, List, Optional, Tuple, TypeVar

    _Flow = TypeVar("_Flow", bound=interp.GraphFlow)

    from gradguard.analysis.context import ModuleContext, Unit


def unit_trace(unit: Unit, ctx: ModuleContext) -> Optional[interp.GraphFlow]:
    """The graph interpreter's run over ``unit``, once per unit whichever rules
    ask (GG101 reads its carries and self-state, GG103 its backward events and
    the calls that save tensors): where each graph is built, which backward
    frees it, what a loop carries into its next iteration. A unit too deeply
    nested to interpret raises RecursionError (for every rule that asks), which
    the engine records as "not analysed": never a silent "no finding". The
    same run whatever rules are enabled:
    loops that back-propagate are walked twice, and a method's ``self.x`` read
    before it is set is marked as state kept from the previous call."""
    if unit.trace is None:
        try:
            unit.trace = _run_trace(unit, ctx, False)
        except RecursionError:
            unit.trace = False
            raise
    if unit.trace is False:
        raise RecursionError("too deeply nested to interpret")
    return unit.trace


def unit_build_trace(unit: Unit, ctx: ModuleContext) -> Optional[interp.GraphFlow]:
    """A run of the interpreter over ``unit`` like :func:`unit_trace`'s that also
    records which statements built each value and whether an operation that built
    it saves tensors (``GraphFlow.build_stmts``: ``built_by``, ``saving_of``), the
    names' values at a call of a function whose loop back-propagates globals
    (``call_entries``) and what the unit leaves (``exit_env``). Asked by GG102 only
    for a unit it reports on (few do), so the shared run every unit pays carries none
    of it. Not cached here: the caller keeps it for the unit's check."""
    try:
        return _run_trace(unit, ctx, True)
    except RecursionError:
        return None


def _run_trace(unit: Unit, ctx: ModuleContext, build: bool) -> interp.GraphFlow:
    env, self_obj = unit_entry(unit)
    _seed_requires_grad_params(unit, ctx, env)
    _seed_module_params(unit, ctx, env)
    resolver = interp.Resolver(ctx)
    _bind_from_call_sites(unit, ctx, env, resolver)
    stateful = unit.kind == "function" and unit.node is not None
    flow = (interp.BuildFlow if build else interp.GraphFlow)(
        resolver, self_obj=self_obj, track_self_state=stateful,
        unverified=bool(getattr(ctx, "unverified", False)), methods=own_methods(unit))
    if unit.class_node is not None and unit.node is not None:
        _bind_from_callers(unit, resolver, env, flow)
        if query(ctx.summary, facts.forwards_freeing_returned):
            _bind_from_own_calls(unit, ctx, env, resolver)
        if unit.kind == "function" and self_obj is not None and unit.parents == (unit.class_node,):
            # lists another method of the object fills with graphs (PPO's self.logprobs)
            filled = facts.sibling_filled(unit.class_node, unit.node, resolver, self_obj)
            for key, v in filled.items():
                if build and v.graph_tokens():
                    v = V._with(v, taints=v.taints | {interp.SAVES})  # (a module call in that method built it)
                env.setdefault(key, v)
            flow.sibling_filled = filled
    flow.flags = _param_flags(unit, ctx)
    flow.module_evidence = lambda: A.module_names(unit)  # (asked lazily; dropped after the run: no cycle)
    flow.module_level = unit.kind == "module"
    if unit.class_node is not None and unit.node is not None and unit.kind == "function":
        flow.framework_loop = framework_loop_of(unit, ctx)
    out = flow.run(unit.body, env)
    if callable(flow.module_evidence):
        flow.module_evidence = None  # (a closure over the unit, which keeps this run)
    if build:
        flow.exit_env = out
    return flow


def framework_loop_of(unit: Unit, ctx: ModuleContext) -> Optional[str]:
    """"auto" / "manual" when a framework calls this method in a loop of its own
    (Lightning's ``training_step``: :func:`facts.framework_loop`), else None."""
    if unit.class_node is None or unit.node is None:
        return None
    name = getattr(unit.node, "name", "")
    if not any(name in ms for ms in K.FRAMEWORK_LOOP_METHODS.values()):
        return None
    return facts.framework_loop(unit.class_node, name, ctx.summary)


def run_own_flow(make: "Callable[..., _Flow]", unit: Unit, ctx: ModuleContext, bound: bool = False) -> "Optional[_Flow]":
    """A rule's own interpreter (a GraphFlow subclass: GG201's HistoryFlow, GG202's
    _DataFlow), ``make(resolver, self_obj=...)``, run over ``unit`` from its entry
    (:func:`unit_entry`); None when the unit is too deeply nested to interpret (that
    rule then reports nothing there, as it always has: unlike :func:`unit_trace`,
    not recorded as "not analysed"). ``bound``: give the flow's ``bound`` what the
    file's call sites pass the unit's parameters (:func:`call_site_objects`)."""
    env, self_obj = unit_entry(unit)
    resolver = interp.Resolver(ctx)
    flow = make(resolver, self_obj=self_obj)
    if bound:
        flow.bound = call_site_objects(unit, ctx, resolver)  # type: ignore[attr-defined]
    try:
        flow.run(unit.body, env)
    except RecursionError:
        return None
    return flow


def _module_function(unit: Unit) -> "Optional[Tuple[str, List[ast.arg]]]":
    """The name and positional parameters of ``unit`` when it is a module-level
    function (the units whose parameters the file's call sites bind), else None."""
    node = unit.node
    if unit.kind != "function" or node is None or unit.class_node is not None or unit.parents:
        return None
    return node.name, list(node.args.posonlyargs) + list(node.args.args)  # type: ignore[attr-defined]


def _seed_requires_grad_params(unit: Unit, ctx: ModuleContext, env: Dict[str, V.Val]) -> None:
    """A module-level function's parameter that some call site passes a tensor
    requiring grad (``fit(net, torch.randn(..., requires_grad=True))``, the
    ``rg:arg:`` facts) is such a leaf here, unless the function uses it as a
    module (``x.parameters()``, ``x.zero_grad()``)."""
    fn = _module_function(unit)
    if fn is None:
        return
    fname, params = fn
    seeded = [a.arg for i, a in enumerate(params) if requires_grad_argument(ctx.summary, fname, i, a.arg)]
    if not seeded:
        return
    modules = {n.value.id for n in A.unit_nodes(unit)
               if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
               and n.attr in ("parameters", "named_parameters", "zero_grad")}
    for name in seeded:
        if name not in modules and name in env:
            env[name] = V._with(env[name], taints=frozenset({("L", next(a for a in params if a.arg == name))}))


def _seed_module_params(unit: Unit, ctx: ModuleContext, env: Dict[str, V.Val]) -> None:
    """A module-level function's parameter that a call at module level passes an
    instance of a class of this file whose modules keep state of their own
    (:func:`facts.argument_class`: ``fit_one_epoch(model, ...)`` with ``model =
    SEWResNet()`` holding spiking neurons) starts as that object: the function's loop
    then follows what the neurons keep from one iteration into the next, and a reset
    of it (``functional.reset_net(model_train)``) empties it, as in a loop at module level."""
    fn = _module_function(unit)
    if fn is None:
        return
    fname, params = fn
    for i, a in enumerate(params):
        if a.arg not in env:
            continue
        cls = facts.argument_class(ctx.summary, fname, i, a.arg)
        if cls is not None:
            env[a.arg] = V._with(env[a.arg], obj="user:" + cls)


def _param_flags(unit: Unit, ctx: ModuleContext) -> Dict[str, bool]:
    """The truth of the constant a call at module level passes to each parameter of a
    module-level function (:func:`facts.argument_flag`): ``train(..., False, ...)``."""
    fn = _module_function(unit)
    if fn is None:
        return {}
    fname, params = fn
    out = {}
    for i, a in enumerate(params):
        got = facts.argument_flag(ctx.summary, fname, i, a.arg)
        if got is not None:
            out[a.arg] = got
    return out


def _bind_from_call_sites(unit: Unit, ctx: ModuleContext, env: Dict[str, V.Val], resolver: interp.Resolver) -> None:
    """A module-level function's parameter that every call site in the file passes
    the same module (``train(loader, model, criterion, optimizer)`` called as
    ``train(loader, net, nn.MSELoss(), opt)``, with ``net = Net()`` at module level
    or in the calling function): the parameter is that module here, as a read of
    the global would be (``facts.agreed_call_arguments``). Only modules (torch's, or
    a same-file class that is one): a plain object (a normaliser with ``__call__``),
    anything else, or call sites that disagree leave the parameter unknown. (A parameter
    :func:`_seed_module_params` already typed is left as it is.)"""
    for name, obj in call_site_objects(unit, ctx, resolver).items():
        if name in env and env[name].obj is None and (
                obj.startswith("inst:") or (obj.startswith("user:") and resolver.is_module_class(obj[5:])
                                            and not _trains_itself(unit, name, obj, resolver))):
            # (a same-file class keeps ``param``: a state threaded through its call is
            # read as before, see GraphFlow._apply)
            env[name] = V.Val(obj=obj, param=obj.startswith("user:"))


def call_site_objects(unit: Unit, ctx: ModuleContext, resolver: interp.Resolver) -> Dict[str, str]:
    """The parameters of module-level function ``unit`` that every call site in the file
    passes the same known object (``facts.agreed_call_arguments``), with what that object
    is (``"inst:torch.nn.CrossEntropyLoss"`` for ``validate(loader, model, nn.CrossEntropyLoss())``)."""
    fn = _module_function(unit)
    if fn is None:
        return {}
    named, _ = A.parameters(unit.node, False)  # type: ignore[arg-type]  # (a def: _module_function)
    if not named:
        return {}
    out: Dict[str, str] = {}
    for name, (kind, text) in query(ctx.summary, facts.agreed_call_arguments, fn[0], tuple(a.arg for a in named)):
        obj = resolver.global_obj(text) if kind == "n" else resolver.ctor_obj(text)
        if obj:
            out[name] = obj
    return out


def _trains_itself(unit: Unit, name: str, obj: str, resolver: interp.Resolver) -> bool:
    """Does the function call a method of parameter ``name`` (an instance of the
    same-file class ``obj``) that back-propagates (``model.training_step(batch)``
    running its own ``manual_backward``)? Such a model is followed, and reported, in
    its own method, as before: it is not bound from the call sites."""
    for n in A.unit_nodes(unit):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id == name:
            facts = resolver.method_facts(obj, n.func.attr)
            if facts is not None and (facts.calls_backward or facts.delegates):
                return True
    return False


def _bind_from_callers(unit: Unit, resolver, env: Dict[str, V.Val], flow: interp.GraphFlow) -> None:
    """Parameters the file's callers hand what another method of the same object
    returned (:func:`facts.caller_bindings`): each holds a graph built before the
    method runs, a ``("G", <the parameter>)`` token, which ``flow.entry_graphs``
    says was built by which method through which modules."""
    fn, cls = unit.node, unit.class_node
    if fn is None or cls is None:
        return
    binds = facts.caller_bindings(fn, cls.name, resolver, cls)
    if not binds:
        return
    named, _ = A.parameters(fn, True)
    for arg in named:
        got = binds.get(arg.arg)
        if got is None or arg.arg not in env:
            continue
        env[arg.arg] = V._with(env[arg.arg], taints=env[arg.arg].taints | {("G", arg)})
        flow.entry_graphs[id(arg)] = (arg.arg, got[0], got[1])


def _bind_from_own_calls(unit: Unit, ctx: ModuleContext, env: Dict[str, V.Val], resolver: interp.Resolver) -> None:
    """A method's parameter that every call of it on ``self`` in its class hands the same
    attribute (``self._training_step(self.model, inputs)``) holding a module of a class of
    the file (made in ``__init__``, or handed to the constructor: ``Trainer(model, opt)``
    with ``model = Net()`` at module level) is that module here. Asked only in a file with
    a ``forward`` that back-propagates the loss it returns, whose second backward hides
    behind such a parameter (a Trainer's ``_training_step``)."""
    cls, fn = unit.class_node, unit.node
    name = getattr(fn, "name", None)
    if cls is None or name is None:
        return
    named, _ = A.parameters(fn, True)  # type: ignore[arg-type]
    passed: Dict[str, set] = {}
    for m in cls.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        aliases: Dict[str, Optional[str]] = {}  # model = self.model in the calling method
        calls = []
        for n in ast.walk(m):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                calls.append(n)
            elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)):
                targets = n.targets if isinstance(n, ast.Assign) else [getattr(n, "target", None)]
                if isinstance(n, ast.With):
                    targets = [w.optional_vars for w in n.items]
                for t in targets:
                    for x in (A.walk_all(t) if t is not None else ()):
                        if isinstance(x, ast.Name):
                            value = n.value if isinstance(n, ast.Assign) and len(n.targets) == 1 and t is x else None
                            alias = A.dotted(value) if value is not None else None
                            aliases[x.id] = alias if x.id not in aliases else None
        for n in calls:
            kws = {k.arg: k.value for k in n.keywords}
            for i, a in enumerate(named):
                arg = n.args[i] if i < len(n.args) and not any(isinstance(x, ast.Starred) for x in n.args[:i + 1]) \
                    else kws.get(a.arg)
                text = A.dotted(arg) if arg is not None else None
                if isinstance(arg, ast.Name):
                    text = aliases.get(arg.id, text) if arg.id in aliases else text
                passed.setdefault(a.arg, set()).add(text)
    for pname, texts in passed.items():
        if len(texts) != 1 or pname not in env or env[pname].obj is not None:
            continue
        text = next(iter(texts))
        if not text or not text.startswith("self.") or text.count(".") != 1:
            continue
        obj = _own_attribute_obj(cls, text[5:], ctx, resolver)
        if obj is not None and obj.startswith("user:") and resolver.is_module_class(obj[5:]):
            env[pname] = V.Val(obj=obj, param=True)


def _own_attribute_obj(cls: ast.ClassDef, attr: str, ctx: ModuleContext, resolver: interp.Resolver) -> Optional[str]:
    """What ``self.<attr>`` of class ``cls`` holds: the object its ``__init__`` makes there,
    or the one every construction of the class in the file hands the ``__init__``
    parameter it is assigned from."""
    cf = resolver.cls(cls.name)
    raw = cf.attr(attr) if cf is not None else None
    if raw:
        made = resolver.ctor_obj(raw)
        if made is not None:
            return made
    init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is None:
        return None
    params = tuple(a.arg for a in A.parameters(init, True)[0])
    source = None
    for s in init.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and A.dotted(s.targets[0]) == "self." + attr:
            if source is not None or not isinstance(s.value, ast.Name) or s.value.id not in params:
                return None
            source = s.value.id
    if source is None:
        return None
    for pname, (kind, text) in query(ctx.summary, facts.agreed_call_arguments, cls.name, params):
        if pname == source and kind == "n":
            return resolver.global_obj(text)
    return None


def own_methods(unit) -> Dict[str, ast.AST]:
    """A method unit's class's defs (the class is one chunk with the unit, so
    reading them keeps the unit's findings cacheable): what a driver method runs
    in place when it calls them on ``self`` (``GraphFlow._inline``)."""
    cls = unit.class_node
    if cls is None or unit.kind != "function":
        return {}
    return {s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod", "property")
                        for d in s.decorator_list)}


def unit_entry(unit) -> Tuple[Dict[str, V.Val], Optional[str]]:
    """What a unit's flow starts from: its parameters (a function's) and the
    object ``self`` is (a method's), for every rule that interprets a unit."""
    env: Dict[str, V.Val] = {}
    if unit.kind == "function" and unit.node is not None:
        env = _param_env(unit.node, unit.class_node is not None)
    return env, ("user:" + unit.class_node.name if unit.class_node is not None else None)


def _param_env(fn: ast.AST, method: bool) -> Dict[str, V.Val]:
    named, defaults = A.parameters(fn, method)
    a: ast.arguments = fn.args  # type: ignore[attr-defined]
    env = {}
    for arg in named + [x for x in (a.vararg, a.kwarg) if x is not None]:
        dv = defaults.get(arg.arg)
        env[arg.arg] = V.Val(param=True, none=dv is None or (isinstance(dv, ast.Constant) and dv.value is None))
    return env


def loaded_names(expr: ast.AST) -> List[str]:
    """The names an expression reads (nested scopes not entered): an accumulation
    (``total = total + loss``) or a threaded state (``out, h = f(x, h)``) reads the
    name it assigns."""
    Name, Load = ast.Name, ast.Load
    return [n.id for n in A.iter_nodes(expr) if n.__class__ is Name and n.ctx.__class__ is Load]
