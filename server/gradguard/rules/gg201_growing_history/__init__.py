"""GG201 growing-history: a tensor with a graph is accumulated across the
iterations of a loop (``total_loss += loss``, an EMA of a loss, ``losses.append(loss)``)
and never back-propagated, so every iteration's graph stays alive.

Nothing fails: the program trains, and memory grows with every step (PyTorch's
FAQ, "Don't accumulate history across your training loop"). The evaluation
variant is a loop that never back-propagates, run without ``torch.no_grad()``,
whose outputs or losses are kept.

Detection runs the graph interpreter of :mod:`gradguard.analysis.interpreter` over the
unit, with one more kind of token: an accumulation statement in a loop (an
augmented assignment, ``x = f(x, ...)``, ``xs.append(...)`` on a name bound
before the loop) whose new value gains a graph built in the loop marks the
accumulator with ``("H", statement)``. A mark that is still on the name at the
end of the iteration is *kept*; a kept mark that reaches a ``backward()`` (the
accumulation is the loss: gradient accumulation on purpose, or a recurrent
state), a ``return``/``yield`` (the caller decides) or an attribute (another
method may back-propagate it) is not a leak. The loop is walked once more with
the marks carried in, so that an accumulator read by the next iteration's loss
(``out, h = rnn(x, h)``) counts as back-propagated.
"""

from __future__ import annotations

import ast
import os
import re

from gradguard.analysis.context import unit_name_says, unit_text, unit_words
from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis import interpreter as interp
from gradguard.analysis import values as V
from gradguard.model.findings import Finding, Fix, Related, Severity, TextEdit
from gradguard.analysis.facts import GRAPH_FACTS
from gradguard.analysis.quiet_facts import EVAL_NAME, EVALLOOP, FLAGCALL, LOOPCALL, LOOPIN, NOGRAD, QUIET_FACTS, RETLOSS
from gradguard.analysis.summary import query
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.catalog import EVAL_CALL_TEXT
from gradguard.rules.common import loaded_names, run_own_flow
from gradguard.rules.gg201_growing_history import messages as M

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Optional, Tuple

_ACC_METHODS = frozenset({"append", "extend", "insert"})
_METADATA = frozenset({"shape", "size", "dtype", "device", "ndim", "is_cuda", "requires_grad", "grad_fn", "layout"})
_METADATA_METHODS = frozenset({"size", "dim", "numel", "nelement", "element_size", "asscalar", "asnumpy",
                               "get_device", "is_contiguous", "data_ptr", "stride"})
# an evaluation phase by name: the function, or what the loop iterates over
_EVAL_FUNCTION = EVAL_NAME
# (a returned total or collection) a later part of the name says it too: ``batch_predict``, ``run_evaluation``
_EVAL_PART = re.compile(r"_(eval|evaluate|evaluation|validate|validation|predict|inference|infer)(_|$)", re.IGNORECASE)
_EVAL_ITERABLE = re.compile(r"(^|_)(val|valid|validation|eval|test|dev)(_|$|loader|set|data)", re.IGNORECASE)


# ---------------------------------------------------------------------------
# the interpreter, with accumulation marks
# ---------------------------------------------------------------------------
class _Site:
    __slots__ = ("stmt", "name", "kind", "frame", "loops", "kept", "carried", "value", "init", "fresh", "untargeted",
                 "returned", "evaluation_total", "container")

    def __init__(self, stmt, name, kind, frame, loops, value, init):
        self.stmt = stmt
        self.name = name
        self.kind = kind  # "aug" | "assign" | "append"
        self.frame = frame  # the innermost loop's frame
        self.loops = loops  # enclosing loop frames, outermost first
        self.kept = False  # still marked at the end of the iteration
        self.carried = False  # and read by the same statement in the next one
        self.value = value  # the expression added (aug/append) or the right-hand side
        self.init = init  # the accumulator's value before the loop
        self.fresh: set = set()  # the graphs of module outputs the statement adds (graph tokens)
        # built from nothing the loop iterates over (a ``range`` loop on a fixed batch, modules
        # made in a loop, a best score): kept only when what it adds was back-propagated
        self.untargeted = True
        self.returned = False  # also returned or handed on (a record of numbers, once back-propagated)
        self.evaluation_total = False  # returned by an evaluation function (_evaluation_total)
        # (append) a name holding a dict, list or tuple display (``out = {"loss": loss, ...}``):
        # no ``.detach()`` of it
        self.container = False


class HistoryFlow(interp.GraphFlow):
    """:class:`gradguard.analysis.interpreter.GraphFlow` that also marks accumulators."""

    element_marks = frozenset({"H"})  # losses[i].backward(): the accumulation is read

    def __init__(self, resolver, self_obj=None, step_appends=()):
        super().__init__(resolver, self_obj=self_obj, find_carries=False)
        # (a step method called once per loop iteration) its appends to an attribute of its
        # object, by statement id -> the appended expression; and what each appended
        # (the statement, the expression, its graph tokens)
        self.step_appends: Dict[int, ast.expr] = dict(step_appends)
        self.step_kept: List[Tuple[ast.stmt, ast.expr, frozenset]] = []
        self.sites: Dict[int, _Site] = {}
        # calls of a module (or of a model handed in as a parameter): what an
        # accumulation must hold a graph of (not a helper's unknown return value)
        self.model_calls: set = set()
        self.model_call_lines: List[int] = []
        self.loop_no_grad: Dict[int, bool] = {}  # was each loop walked with graph recording off?
        # marks handed to a function or method of the project (its facts are known):
        # the callee consumes the list (transformer-XL's _update_mems(hids, mems))
        self.handed: set = set()
        # parameter -> the object every call site of the unit passes it (common.call_site_objects)
        self.bound: Dict[str, str] = {}
        # lines of the module calls made with graph recording off (``with torch.no_grad():
        # output = model(x)``), and of those made with it on that build no graph (a loss of
        # graph-free values: ``criterion(output, target)`` after that block)
        self.quiet_call_lines: List[int] = []
        self.graph_free_lines: List[int] = []
        self.indexed_call_lines: List[int] = []
        self.method_call_lines: List[int] = []
        # (meters) the call statement being walked, and what its method keeps on its object:
        # (the attribute's dotted name, its value before, the arguments kept)
        self._fill_call: Optional[ast.Call] = None
        self._fills: Optional[list] = None
        # the attributes (``replay.buffer``) a plain store's method appends its arguments to: an
        # object of a same-file class that is no module and never back-propagates (a replay
        # buffer's ``push(x, logp, reward)``): what it keeps is history, whatever the loop reads
        self.store_keys: set = set()
        # calls of a function of the project that back-propagates what it returns (_apply_facts)
        self.backprop_calls: set = set()

    def eval(self, e, env):
        if isinstance(e, ast.Attribute) and e.attr in _METADATA:
            super().eval(e.value, env)
            return V.CLEAN  # x.shape, x.size, x.device: metadata never carries a graph
        return super().eval(e, env)

    def _method_call(self, call, func, env):
        if func.attr in _METADATA_METHODS:
            super().eval(func.value, env)
            self._args(call, env)
            return V.CLEAN  # x.size(0), x.numel(), x.asscalar()
        if func.value.__class__ is ast.Name and func.attr != "forward":
            self._module_method(call, func, env)
        return super()._method_call(call, func, env)

    def _module_method(self, call, func, env) -> None:
        """``model.infer(x)``: a method (not ``forward``) of a module class of the file, on a
        name holding one (or a parameter every call site passes one), that returns its
        layers' graph: an evaluation loop's forward (for :func:`_evaluation_hints`), and a
        module's output an accumulation may keep (``total_loss += agent.loss(mb)``)."""
        recv = env.get(func.value.id)
        obj = getattr(recv, "obj", None) or self.bound.get(func.value.id, "")
        if not obj.startswith("user:") or not self.r.is_module_class(obj[5:]):
            return
        facts = self.r.method_facts(obj, func.attr)
        if facts is None or not facts.ret.graph or facts.no_grad or facts.calls_backward:
            return
        (self.quiet_call_lines if self.no_grad else self.method_call_lines).append(call.lineno)
        if not self.no_grad:
            # loss = agent.loss(batch): what it returns is the module's graph, as its call's is
            self.model_calls.add(id(call))

    def _apply(self, call, callee, q, pos, kws, args_taints, env):
        obj = callee.obj or ""
        if not obj and not self.no_grad and call.func.__class__ is ast.Subscript \
                and call.func.value.__class__ is ast.Attribute:
            # self.model["generator"](x): a module held in a container on an object (which the
            # loop-less evaluation hint may name as its first forward, when it has another)
            self.indexed_call_lines.append(call.lineno)
        if callee.param or obj.startswith(("inst:", "user:")):
            if self.no_grad:
                self.quiet_call_lines.append(call.lineno)
            else:
                self.model_calls.add(id(call))
                self.model_call_lines.append(call.lineno)
                if self._builds_no_graph(call, callee, args_taints):
                    self.graph_free_lines.append(call.lineno)
        return super()._apply(call, callee, q, pos, kws, args_taints, env)

    def _builds_no_graph(self, call, callee, args_taints) -> bool:
        """A torch module without parameters (a loss, an activation: a global, an attribute,
        or a parameter every call site passes one) called on values without a graph
        (``criterion(output, target)`` after ``with torch.no_grad(): output = model(x)``):
        it records nothing, it is not the model the loop runs."""
        obj = callee.obj or ""
        if callee.param and isinstance(call.func, ast.Name):
            obj = self.bound.get(call.func.id, obj)
        if not obj.startswith("inst:") or obj.rpartition(".")[2] not in K.PARAMETERLESS_MODULES:
            return False
        return not any(t[0] in ("G", "L", "U", "C") for t in args_taints)

    def _apply_facts(self, call, facts, pos, kws, env, fname, graph_node=None, recv_key=None):
        if (facts.calls_backward and not facts.backward_retains and not self.no_grad and facts.ret.graph
                and (RETLOSS + fname.rsplit(".", 1)[-1]) in self.r.summary):
            # a training step of the project that back-propagates and returns (its loss,
            # ``tr_loss += training_step(model, inputs)``): what it returns is a module's graph the
            # step's own backward already went through -- a record of numbers, kept as a graph
            node = graph_node or call
            self.model_calls.add(id(node))
            self.backprop_calls.add(id(node))
        elif (not self.no_grad and facts.ret.graph and not facts.calls_backward and not facts.no_grad
              and _EVAL_FUNCTION.match(fname.rsplit(".", 1)[-1])):
            # an evaluation step of the project that runs the model with graph recording on and
            # returns its outputs (skorch's ``validation_step(Xi, yi)``): a module's output
            self.model_calls.add(id(graph_node or call))
        for v in list(pos) + list(kws.values()):
            self.handed.update(t for t in v.taints if t[0] == "H")
        fills = self._fills
        if fills is not None and self._fill_call is not None and call is self._fill_call and facts.containers \
                and not facts.no_grad:
            # ``meter.update(loss)`` whose method keeps what it is handed on its object
            # (``self.sum += val``: ContainerEffect.appends_params): the object's attribute
            # accumulates like a list or a running total
            named = {k.arg: k.value for k in call.keywords if k.arg}
            if recv_key is None and isinstance(call.func, ast.Attribute) and _keyed_receiver(call.func.value):
                recv_key = ast.unparse(call.func.value)  # stats["loss"].update(loss): that meter
            for key, eff in self._container_keys(call, facts, recv_key):
                if not (eff.appends_params or eff.appends) or not eff.path.startswith("#self.") or "." not in key:
                    continue
                args = [facts.argument(i, call.args, named) for i in sorted(eff.appends_params)
                        if facts.argument(i, pos, kws, V.CLEAN).graph_tokens()]
                args = [a for a in args if isinstance(a, ast.expr) and not isinstance(a, ast.Starred)]
                # (eff.appends: a graph the method builds, kept on its object -- a model's
                # training_step appending its log to self.training_step_outputs: no argument
                # to detach here, the fix belongs in the method)
                if not args and eff.appends and facts.calls_backward and not facts.backward_retains:
                    continue  # a step method keeping what its own backward went through: reported in it
                if args or eff.appends:
                    fills.append((key, env.get(key) or V.CLEAN, args))
                    if args and eff.appends_params and self._plain_store(call, env):
                        self.store_keys.add(key)
        if fills is not None and self._fill_call is not None and call is self._fill_call and facts.calls \
                and call.func.__class__ is ast.Name and not facts.no_grad:
            self._param_meters(call, facts, pos, kws, env, fills)
        return super()._apply_facts(call, facts, pos, kws, env, fname, graph_node, recv_key)

    def _param_meters(self, call, facts, pos, kws, env, fills: list) -> None:
        """``update_meter(report, meter)``: a function of the project that hands what one
        parameter brings to a method of another (``meter.update(losses)``, ``FnFacts.calls``
        with receiver ``"@#i"``); the object passed there keeps it when its class's method
        keeps its argument on it (``Meter.update``: ``self.meters[k].update(v)``). (No fix:
        the values travel through the helper, a dict of losses maybe: _cut_edits.)"""
        for recv, method, argsets, kwsets in facts.calls:
            if not recv.startswith("@#"):
                continue
            i = int(recv[2:])
            if i >= len(call.args) or any(a.__class__ is ast.Starred for a in call.args[:i + 1]):
                continue
            name = A.dotted(call.args[i])
            held = env.get(name) if name is not None else None
            obj = getattr(held, "obj", None) or ""
            inner = self.r.method_facts(obj, method) if obj.startswith("user:") else None
            if inner is None or inner.no_grad or not inner.containers:
                continue
            named = {k.arg: k.value for k in call.keywords if k.arg}

            def brought(ps, _named=named) -> frozenset:
                return frozenset().union(*(facts.argument(j, pos, kws, V.CLEAN).taints for j in ps)) if ps else frozenset()

            ivals = [V.plain(brought(ps)) for ps in argsets]
            ikws = {kw: V.plain(brought(ps)) for kw, ps in kwsets}
            for eff in inner.containers:
                if not eff.appends_params or not eff.path.startswith("#self."):
                    continue
                added = frozenset().union(*(inner.argument(j, ivals, ikws, V.CLEAN).taints for j in eff.appends_params))
                if not any(t[0] == "G" for t in added):
                    continue
                key = f"{name}.{eff.path[6:]}"
                old = env.get(key) or V.CLEAN
                handed = [a for j, a in enumerate(call.args) if j != i and a.__class__ is not ast.Starred
                          and j < len(pos) and pos[j].graph_tokens()]
                fills.append((key, old, handed))
                env[key] = V._with(old, taints=old.taints | added)

    def _plain_store(self, call, env) -> bool:
        """Is the receiver of ``call`` an object of a same-file class that is not a module
        (no base but ``object``, no ``forward``) and none of whose methods back-propagates?"""
        recv = call.func.value if isinstance(call.func, ast.Attribute) else None
        v = env.get(recv.id) if isinstance(recv, ast.Name) else None
        obj = getattr(v, "obj", None) or ""
        if not obj.startswith("user:"):
            return False
        cf = self.r.cls(obj[5:])
        return (cf is not None and not cf.has_forward and set(cf.bases) <= {"object"}
                and not V.describes_backward(cf))

    def stmt(self, s, env):
        if self.step_appends and id(s) in self.step_appends and not self.no_grad:
            arg = self.step_appends[id(s)]
            tokens = frozenset(super().eval(arg, env).graph_tokens())
            if tokens:
                self.step_kept.append((s, arg, tokens))
        cand = self._candidates(s) if self.frames and not self.no_grad else ()
        # (an attribute not yet read holds nothing yet: ``self.history`` before its first append)
        before = {n: env.get(n) or (V.CLEAN if "." in n else None) for n, _, _ in cand}
        for n, kind, _ in cand:
            if kind == "append" and "." in n and n not in env:
                env = dict(env)
                env[n] = V.Val(kind="list")  # (so that the append is followed: the list it fills)
        meter = (self.frames and not self.no_grad and s.__class__ in (ast.Expr, ast.Assign)
                 and s.value.__class__ is ast.Call
                 and ((isinstance(s.value.func, ast.Attribute) and s.value.func.attr not in _ACC_METHODS
                       and dotted_receiver(s.value.func.value))
                      or s.value.func.__class__ is ast.Name))  # (a helper handed a meter: _param_meters)
        outer = (self._fill_call, self._fills)
        if meter:
            self._fill_call, self._fills = s.value, []
        try:
            env = super().stmt(s, env)
            fills = self._fills if meter else None
        finally:
            self._fill_call, self._fills = outer
        if fills:
            cand = list(cand)
            for key, old, args in fills:
                if key not in before:
                    before[key] = old
                    cand.append((key, "meter", args))
        for name, kind, value in cand:
            old, new = before[name], env.get(name)
            if old is None or new is None:
                continue
            mark = ("H", id(s))
            site = self.sites.get(id(s))
            if site is not None and mark in old.taints and mark in new.taints:
                site.carried = True  # the last iteration's accumulation flows on into this one's
            frame = self.frames[-1]
            fresh = new.graph_tokens() - old.graph_tokens()
            if (s.__class__ is ast.AugAssign and s.target.__class__ is ast.Subscript) or kind == "meter":
                # epoch_loss[key] += loss[key] in a loop over the keys: the totals grow across the
                # loop that builds the graph (the innermost one around a fresh graph); so does a
                # meter handed each value of a dict of losses (``for k, v in losses.items():
                # writer.add_scalar(k, v, it)``) across the loop that builds them
                frame = next((fr for fr in reversed(self.frames) if any(
                    A.within(t[1], fr.loop) for t in fresh if hasattr(t[1], "lineno"))), frame)
            if not any(A.within(t[1], frame.loop) for t in fresh if hasattr(t[1], "lineno")):
                continue
            if not any(id(t[1]) in self.model_calls or id(t[1]) in self.saving_calls for t in fresh):
                continue  # no module's output in it: a helper's value of unknown kind
            fors = [fr.loop for fr in self.frames if isinstance(fr.loop, (ast.For, ast.AsyncFor))]
            # built from nothing the loop iterates over (modules made in a loop, a best score) is
            # kept only when a backward of the loop ran through it (see _backpropagated)
            untargeted = bool(fors) and not any(("T", id(lp)) in new.taints for lp in fors)
            if site is None:
                depth = next(i for i, fr in enumerate(self.frames) if fr is frame)
                loops = tuple(self.frames[:depth + 1])
                site = self.sites[id(s)] = _Site(s, name, kind, frame, loops, value, old)
                if kind == "append" and value.__class__ is ast.Name:
                    held = env.get(value.id)
                    site.container = held is not None and (held.kind in ("dict", "list") or held.elems is not None)
            site.untargeted = site.untargeted and untargeted
            site.fresh.update(t for t in fresh if id(t[1]) in self.model_calls or id(t[1]) in self.saving_calls)
            env[name] = V._with(new, taints=new.taints | {mark})
        return env

    def _candidates(self, s) -> List[Tuple[str, str, ast.expr]]:
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
            return [(s.target.id, "aug", s.value)]
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Subscript) and isinstance(s.target.value, ast.Name):
            return [(s.target.value.id, "aug", s.value)]  # epoch_loss[key] += loss[key]: a dict of totals
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            names = [n for n in A.target_names(s.targets[0]) if "." not in n]
            if names:
                read = set(loaded_names(s.value))
                return [(n, "assign", s.value) for n in names if n in read]
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if isinstance(f, ast.Attribute) and f.attr in _ACC_METHODS and isinstance(f.value, ast.Name) and s.value.args:
                return [(f.value.id, "append", s.value.args[-1])]
            if (isinstance(f, ast.Attribute) and f.attr in _ACC_METHODS and s.value.args
                    and isinstance(f.value, ast.Attribute) and isinstance(f.value.value, ast.Name)):
                # self.history.append(loss): a list kept on an object (reported only when what it
                # adds was back-propagated in the loop: else another method may back-propagate it)
                return [(f.value.value.id + "." + f.value.attr, "append", s.value.args[-1])]
            if (isinstance(f, ast.Attribute) and f.attr in _ACC_METHODS and s.value.args
                    and f.value.__class__ is ast.Subscript and f.value.value.__class__ is ast.Name
                    and f.value.slice.__class__ is ast.Constant):
                # stat_col["loss"].append(loss): a list kept under a key of a dict of statistics
                return [(f.value.value.id, "append", s.value.args[-1])]
        return []

    def _bind_loop_target(self, loop, env):
        super()._bind_loop_target(loop, env)
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            mark = ("T", id(loop))  # what the loop iterates over: its data
            for n in A.target_names(loop.target):
                v = env.get(n)
                if v is not None:
                    env[n] = V._with(v, taints=v.taints | {mark})

    def loop(self, loop, env):
        self.loop_no_grad.setdefault(id(loop), bool(self.no_grad))
        out = super().loop(loop, env)
        mine = [site for site in self.sites.values() if site.frame.loop is loop and not site.kept]
        kept = [site for site in mine if ("H", id(site.stmt)) in (out.get(site.name) or V.CLEAN).taints]
        if kept:
            for site in kept:
                site.kept = True
            # once more with the marks carried in: the next iteration may read them
            frame = V.LoopFrame(loop, second=True)
            self.frames.append(frame)
            e2 = dict(out)
            self._bind_loop_target(loop, e2)
            e2 = self.block(loop.body, e2)
            self.frames.pop()
            out = V.join_env(out, e2)
        return out


# ---------------------------------------------------------------------------
# the rule
# ---------------------------------------------------------------------------
class GrowingHistory(Rule):
    code = "GG201"
    name = "growing-history"
    default_severity = Severity.WARNING
    needs_backprop = True
    # an inference script (nothing back-propagates) that says it evaluates: ``model.eval()``
    also_without_backprop = EVAL_CALL_TEXT  # ``.eval()`` (declared in the catalog)
    fact_sources = (GRAPH_FACTS, QUIET_FACTS)  # the interpreter's fn:/class: facts, and the no_grad call sites
    # no loop, nothing accumulates across iterations (cheap: the unit's words); or a loop-less evaluation
    # (or a method that back-propagates, called once per iteration of a loop: _step_method_appends;
    # or a loop-less helper named for evaluation, ``_eval_step``, called in an evaluation loop)
    trigger = Trigger(torch=True, words_or_name=(("for", "while", "eval", "backward"),))
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        words = unit_words(unit, ctx.index.lines)
        if "for" in words or "while" in words or "eval" in words:
            accumulates = _worth_running(unit, ctx)
            evaluates = _may_evaluate(unit, ctx) and _some_evaluation_loop(unit, ctx)
            once = not evaluates and _loopless_evaluation(unit, ctx)
        elif unit_name_says(unit, ("eval",)):
            accumulates = evaluates = False
            once = _loopless_evaluation(unit, ctx)
        else:
            accumulates = evaluates = once = False
        step_appends = _step_method_appends(unit, ctx) if not accumulates else ()
        flagged = _flag_guarded_loops(unit, ctx) if "backward" in words and ("for" in words or "while" in words) else ()
        if not accumulates and not evaluates and not once and not step_appends and not flagged:
            return ()
        if unit.kind == "function" and A.is_no_grad_function(unit.node, ctx):
            return ()
        if unit.kind == "function" and unit.node is not None and (NOGRAD + unit.node.name) in ctx.summary:
            return ()  # called with graph recording off
        if step_appends:
            flow = run_own_flow(lambda r, self_obj=None: HistoryFlow(r, self_obj=self_obj, step_appends=step_appends),
                                unit, ctx, bound=True)
        else:
            flow = run_own_flow(HistoryFlow, unit, ctx, bound=True)
        if flow is None:
            return ()
        kept = [s for s in flow.sites.values() if s.kept and s.carried]
        out: List[Finding] = []
        if flow.step_kept:
            out.extend(_step_findings(self, flow, unit, ctx))
        used, returned = _escaping_marks(flow)
        returned_only = {t for r in flow.returns for t in r.taints if t[0] == "H"}  # (not handed on)
        leaks = []
        for s in kept:
            mark = ("H", id(s.stmt))
            if mark in used:
                continue
            s.returned = mark in returned
            kept_on_object = s.kind == "append" and "." in s.name  # self.history.append(loss)
            # a replay buffer's push() from a loop whose data come from nothing it iterates over
            # (an environment, a sampler): kept whether or not what it adds was back-propagated
            stored = s.kind == "meter" and s.untargeted and not s.returned and s.name in flow.store_keys
            if stored and not _in_tests(unit, ctx):
                pass
            elif (s.untargeted or s.returned or kept_on_object) and (not _backpropagated(s, flow) or _in_tests(unit, ctx)):
                # (a unit test's chunks, kept to compare with a whole pass: gone with the test)
                if not (s.returned and not s.untargeted and not kept_on_object and mark in returned_only
                        and _evaluation_total(s, flow, unit, ctx)):
                    continue
            leaks.append(s)
        if leaks:
            out.extend(_findings(self, leaks, flow, unit, ctx))
        if evaluates:
            out.extend(_evaluation_hints(self, flow, unit, ctx, out))
        if once and not out:
            out.extend(_evaluation_call_hint(self, flow, unit, ctx))
        if flagged:
            out.extend(_flag_guarded_hints(self, flow, flagged, unit, ctx, out))
        return out


def _step_method_appends(unit, ctx) -> Tuple[Tuple[int, ast.expr], ...]:
    """A trainer's step method (stylegan2_pytorch's ``Trainer.step()``), called once per
    iteration of a loop of the file (``gg2:loopcall:``), that spells a backward and appends a
    name to a list kept on its object, outside any loop of its own (``self.stats["G_loss"]
    .append(g_loss)``): (statement id, appended name) of each such append (cheap: the def's
    statements; the flow then asks whether the name was back-propagated)."""
    node = unit.node
    if unit.kind != "function" or unit.class_node is None or node is None or node.name.startswith("test_"):
        return ()
    if LOOPCALL + node.name not in ctx.summary or "append" not in unit_words(unit, ctx.index.lines):
        return ()
    out: List[Tuple[int, ast.expr]] = []
    backward = False
    todo = list(node.body)
    while todo:
        t = todo.pop()
        if isinstance(t, A.LOOPS) or isinstance(t, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(t, ast.Expr) and isinstance(t.value, ast.Call):
            call = t.value
            if A.is_backward_call(call):
                backward = True
            f = call.func
            if (isinstance(f, ast.Attribute) and f.attr == "append" and len(call.args) == 1 and not call.keywords
                    and _plain_reference(call.args[0]) and _self_attribute(f.value)):
                out.append((id(t), call.args[0]))
        for block in A.child_blocks(t):
            todo.extend(block)
    if not backward or _in_tests(unit, ctx):
        return ()
    return tuple(out)


def _plain_reference(e: ast.expr) -> bool:
    """``loss``, ``out[mask]``, ``outs.logits``: names, attributes and subscripts, no call (the
    flow evaluates it once more before the statement)."""
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        if isinstance(e, ast.Subscript) and any(isinstance(n, ast.Call) for n in ast.walk(e.slice)):
            return False
        e = e.value
    return isinstance(e, ast.Name)


def _self_attribute(e: ast.expr) -> bool:
    """``self.x`` or ``self.x[key]``."""
    if isinstance(e, ast.Subscript):
        e = e.value
    return isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"


def _step_findings(rule, flow: HistoryFlow, unit, ctx) -> List[Finding]:
    """Each append of :func:`_step_method_appends` whose value a backward of the method, not
    retaining its graph, went through: a record of numbers kept as a graph on the object, one
    per call of the method, that nothing can differentiate again."""
    freed: set = set()
    for ev in flow.events:
        if not ev.retain:
            freed |= ev.loss.graph_tokens()
    out: List[Finding] = []
    for stmt, arg, tokens in flow.step_kept:
        if not tokens & freed:
            continue
        call = stmt.value  # type: ignore[attr-defined]
        name = _src(call.func.value, ctx)
        related = (Related(ctx.line_range(unit.node), M.step_called_in_a_loop(unit.node.name)),)
        fixes = (Fix(M.fix_accumulate(".detach()"), (_wrap(arg, "detach", ctx),), preferred=True),)
        out.append(Finding(rule.code, ctx.line_range(stmt), M.history(M.accumulated("step", name)),
                           rule.default_severity, related, fixes, {"variable": name, "evaluation": False}))
    return out


def _loopless_evaluation(unit, ctx) -> bool:
    """A function named for evaluation (``evaluate``, ``validate``) whose own statements, no
    loop among them, spell no backward and either call ``<module>.eval()`` (in a training file:
    a full-batch evaluation, a graph network's ``evaluate(model, features, labels, mask)``; in
    any file when a loop of the file runs it per batch: MT-DNN's ``predict``), or are run once
    per batch by a loop that follows a ``.eval()`` and spells no backward (a trainer's
    ``_eval_step`` called by ``_eval_epoch``): it may run the model with graph recording on
    (cheap: the def's statements, then the ``LOOPIN``/``EVALLOOP`` facts). Never when a def
    whose loop runs it is itself run under no_grad (``with torch.no_grad(): eval_model(...)``)."""
    node = unit.node
    if unit.kind != "function" or node is None or not _EVAL_FUNCTION.match(node.name) or node.name.startswith("test_"):
        return False
    said = False
    for n in A.body_nodes(node):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.GeneratorExp, ast.Lambda,
                          ast.FunctionDef, ast.AsyncFunctionDef, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(n, ast.Call):
            if A.is_backward_call(n):
                return False
            if isinstance(n.func, ast.Attribute) and n.func.attr == "eval" and not n.args and not n.keywords:
                said = True
    if _in_tests(unit, ctx, evaluation=True):
        return False
    callers = query(ctx.summary, _loop_callers, node.name)
    if any(NOGRAD + c in ctx.summary for c, _ in callers if c):
        return False  # run per batch by a helper that runs under no_grad
    if said:
        return _file_backprops(ctx) or bool(callers)
    return any(evaluates for _, evaluates in callers)


_GRAD_MODE_WORDS = ("no_grad", "set_grad_enabled", "inference_mode", "enable_grad")


def _flag_guarded_loops(unit, ctx) -> Tuple[Tuple[ast.stmt, ast.If, str], ...]:
    """The loops of a def whose every backward sits under ``if P:`` (or ``if P is not None:``),
    ``P`` a parameter of the def, while the file calls the def with ``P`` left out (its default
    ``None``/``False``) or handed ``None``/``False``, after a ``.eval()`` or when the def itself calls
    ``.eval()``: a train-or-evaluate function (``run_epoch(data, model, loss, optimizer=None)``,
    ``train_and_valid(..., is_train)``) run for evaluation with graph recording on. Nothing when the
    def names a grad mode itself (``torch.set_grad_enabled(is_train)``, ``torch.no_grad()``)
    (cheap first: its statements, then the ``FLAGCALL`` facts)."""
    node = unit.node
    if unit.kind != "function" or node is None or node.name not in query(ctx.summary, _flag_call_names):
        return ()
    text = unit_text(unit, ctx.index.lines)
    if any(w in text for w in _GRAD_MODE_WORDS):
        return ()
    args = node.args
    positional = [a.arg for a in list(args.posonlyargs) + list(args.args)]
    if unit.class_node is not None and positional and not any(
            A.dotted(d) == "staticmethod" for d in node.decorator_list):
        positional = positional[1:]
    defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    params = set(positional) | {a.arg for a in args.kwonlyargs}
    out = []
    for loop in A.iter_statements(node.body):
        if not isinstance(loop, A.LOOPS):
            continue
        guards: List[ast.If] = []
        if _guarded_backwards(loop.body, guards, ctx) and guards:
            names = {_guard_parameter(g.test) for g in guards}
            param = names.pop() if len(names) == 1 else None
            if param is not None and param in params and _evaluated_without(ctx, node, param, positional, defaults):
                out.append((loop, guards[0], param))
    return tuple(out)


def _guarded_backwards(block, guards: List[ast.If], ctx) -> bool:
    """Does every backward of ``block`` sit in the body of an ``if`` of :func:`_guard_parameter`
    (collected in ``guards``), with none in its ``else``? (nested loops and defs: not read)"""
    for s in block:
        if not any(isinstance(n, ast.Call) and A.is_backward_call(n, ctx) for n in A.iter_nodes(s)):
            continue
        if isinstance(s, ast.If) and _guard_parameter(s.test) is not None:
            if any(isinstance(n, ast.Call) and A.is_backward_call(n, ctx) for n in A.iter_nodes(s.orelse)):
                return False
            guards.append(s)
            continue
        if isinstance(s, (ast.With, ast.AsyncWith, ast.Try)):
            if not all(_guarded_backwards(b, guards, ctx) for b in A.child_blocks(s)):
                return False
            continue
        return False  # a backward that runs in every iteration, or under some other condition
    return True


def _guard_parameter(test: ast.expr) -> Optional[str]:
    """``P`` of ``if P:`` or ``if P is not None:``."""
    if isinstance(test, ast.Name):
        return test.id
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        return test.left.id
    return None


def _evaluated_without(ctx, node, param: str, positional: List[str], defaults: Dict[str, ast.expr]) -> bool:
    """Does a call of the def in the file leave ``param`` out (its default ``None``/``False``) or
    hand it ``None``/``False``, after a ``.eval()`` of its caller or when the def calls ``.eval()``?"""
    default = defaults.get(param)
    falsy_default = isinstance(default, ast.Constant) and (default.value is None or default.value is False)
    index = positional.index(param) if param in positional else None
    evals = None
    for npos, falsy_pos, named, falsy_kw, evaled in query(ctx.summary, _flag_calls, node.name):
        if param in falsy_kw or (index is not None and index in falsy_pos):
            pass
        elif not (falsy_default and (index is None or index >= npos) and param not in named):
            continue
        if not evaled:
            if evals is None:
                evals = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "eval"
                            and not n.args and not n.keywords for n in A.body_nodes(node))
            if not evals:
                continue
        return True
    return False


def _flag_call_names(summary) -> frozenset:
    """The names the ``FLAGCALL`` facts record calls of (a summary query: one scan per file)."""
    n = len(FLAGCALL)
    return frozenset(k[n:].partition("|")[0] for k in summary if k.startswith(FLAGCALL))


def _flag_calls(summary, name: str) -> Tuple[Tuple[int, Tuple[int, ...], Tuple[str, ...], Tuple[str, ...], bool], ...]:
    """The shapes of the calls of ``name`` the ``FLAGCALL`` facts record (a summary query)."""
    prefix = f"{FLAGCALL}{name}|"
    out = []
    for k in summary:
        if k.startswith(prefix):
            npos, pos, named, kw, evaled = k[len(prefix):].split("|")
            out.append((int(npos), tuple(int(i) for i in pos.split(",") if i), tuple(x for x in named.split(",") if x),
                        tuple(x for x in kw.split(",") if x), evaled == "1"))
    return tuple(sorted(out))


def _flag_guarded_hints(rule, flow, flagged, unit, ctx, already: List[Finding]) -> List[Finding]:
    """A hint on the first forward of each loop of :func:`_flag_guarded_loops` made with graph
    recording on outside the backward's guard (no fix: the grad mode to set is the caller's choice)."""
    reported = {f.range.start.line for f in already}
    quiet = set(flow.quiet_call_lines) | set(flow.graph_free_lines)
    out: List[Finding] = []
    for loop, guard, param in flagged:
        lo, hi = loop.lineno, loop.end_lineno or loop.lineno
        glo, ghi = guard.lineno, guard.end_lineno or guard.lineno
        lines = sorted(ln for ln in flow.model_call_lines + flow.method_call_lines
                       if lo <= ln <= hi and not glo <= ln <= ghi and ln not in quiet)
        if not lines or any(lo - 1 <= line <= hi - 1 for line in reported):
            continue
        stmt = next((s for s in A.iter_statements(loop.body) if s.lineno <= lines[0] <= (s.end_lineno or s.lineno)
                     and not A.child_blocks(s)), None)
        if stmt is None:
            continue
        test = ast.unparse(guard.test)
        msg = M.flag_guarded_evaluation(unit.node.name, param, test)
        fixes: Tuple[Fix, ...] = ()
        torch_name = _torch_alias(ctx)
        line = ctx.index.line(stmt.lineno - 1)
        indent = ctx.indent_of(stmt.lineno)
        if (torch_name and stmt.lineno == stmt.end_lineno and line[:len(indent)] == indent
                and stmt.col_offset == len(indent.encode()) and stmt.end_col_offset == len(line.rstrip().encode())):
            from gradguard.model.findings import Position, Range

            step = "    " if "\t" not in indent else "\t"
            text = f"{indent}with {torch_name}.set_grad_enabled({test}):\n{indent}{step}{line.strip()}\n"
            edit = TextEdit(Range(Position(stmt.lineno - 1, 0), Position(stmt.lineno, 0)), text)
            fixes = (Fix(M.fix_set_grad_enabled(test), (edit,), preferred=True),)
        out.append(Finding(rule.code, ctx.line_range(stmt), msg, Severity.HINT,
                           (Related(ctx.line_range(guard), M.backpropagates_only_here()),), fixes,
                           {"variable": "", "evaluation": True}))
    return out


def _loop_callers(summary, name: str) -> Tuple[Tuple[str, bool], ...]:
    """(def, after ``.eval()`` and without a backward?) for each def of the file (``""``: the
    module's code) a loop of which calls the evaluation helper ``name`` (``LOOPIN``, ``EVALLOOP``)."""
    prefix = f"{LOOPIN}{name}:"
    return tuple(sorted((k[len(prefix):], f"{EVALLOOP}{name}:{k[len(prefix):]}" in summary)
                        for k in summary if k.startswith(prefix)))


def _evaluation_call_hint(rule, flow, unit, ctx) -> List[Finding]:
    """A hint at the first module call, with graph recording on, of a loop-less evaluation
    function (:func:`_loopless_evaluation`) that back-propagates and returns nothing of what it
    builds: the one forward builds an autograd graph and keeps the activations of the whole
    batch for nothing. The fix decorates the function with ``@torch.no_grad()``."""
    if flow.events or _reached(flow):
        return []
    node = unit.node
    eval_call = next((n for n in A.body_nodes(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                      and n.func.attr == "eval" and not n.args and not n.keywords), None)
    quiet = set(flow.quiet_call_lines) | set(flow.graph_free_lines)
    start = eval_call.lineno if eval_call is not None else node.lineno
    lines = sorted(ln for ln in flow.model_call_lines if ln not in quiet and ln >= start)
    if not lines:
        return []
    lines = sorted(set(lines) | {ln for ln in flow.indexed_call_lines if ln >= start})
    stmt = next((s for s in A.iter_statements(node.body) if s.lineno <= lines[0] <= (s.end_lineno or s.lineno)
                 and not A.child_blocks(s)), None)
    if stmt is None:
        return []
    torch_name = _torch_alias(ctx)
    fixes: Tuple[Fix, ...] = ()
    if torch_name:
        at = min([node.lineno] + [d.lineno for d in node.decorator_list])
        from gradguard.model.findings import Position, Range

        pos = Position(at - 1, 0)
        edit = TextEdit(Range(pos, pos), f"{ctx.indent_of(at)}@{torch_name}.no_grad()\n")
        fixes = (Fix(M.fix_no_grad_decorator(node.name), (edit,), preferred=True),)
    if eval_call is not None:
        msg = M.evaluation_call(node.name, _src(eval_call.func, ctx))
    else:
        caller = next(c for c, evaluates in query(ctx.summary, _loop_callers, node.name) if evaluates)
        msg = M.evaluation_step_call(node.name, caller)
    return [Finding(rule.code, ctx.line_range(stmt), msg, Severity.HINT, (), fixes,
                    {"variable": "", "evaluation": True})]


def _may_evaluate(unit, ctx) -> bool:
    """A loop in a unit that says it evaluates (cheap: words of the text)."""
    words = unit_words(unit, ctx.index.lines)
    if "for" not in words and "while" not in words:
        return False
    return any(w.startswith(("eval", "val", "test", "predict", "infer", "dev")) for w in words)


def _some_evaluation_loop(unit, ctx) -> bool:
    """Is there a loop :func:`_evaluation_hints` could report, by what the text
    alone tells (no backward spelled in it, and the code says it evaluates)? If
    not, the unit need not be interpreted for that hint (cheap: most loops of a
    training file spell their backward)."""
    return any(isinstance(loop, A.LOOPS) and not _backward_spelled(loop) and _evaluation_phase(unit, loop, ctx)
               for loop in A.iter_statements(unit.body))


def _evaluation_hints(rule, flow, unit, ctx, already: List[Finding]) -> List[Finding]:
    """A hint for each evaluation loop (by ``_evaluation_phase``) that calls a
    module with graph recording on and back-propagates nothing of what it builds:
    every iteration's graph is built for nothing (nothing accumulates: that would
    be the warning above)."""
    reached = _reached(flow)
    reported = {f.range.start.line for f in already}
    out: List[Finding] = []
    done: List[ast.stmt] = []
    torch_name = _torch_alias(ctx)
    for loop in A.iter_statements(unit.body):
        if not isinstance(loop, A.LOOPS) or flow.loop_no_grad.get(id(loop), True):
            continue
        if any(A.within(loop, d) for d in done):
            continue
        lo, hi = loop.lineno, loop.end_lineno or loop.lineno
        calls = [ln for ln in flow.model_call_lines + flow.method_call_lines if lo <= ln <= hi]
        if calls and any(lo <= ln <= hi for ln in flow.quiet_call_lines):
            # the model runs under no_grad in it (the fix already made, around the model
            # call only): a loss of its outputs after the block records nothing
            calls = [ln for ln in calls if ln not in flow.graph_free_lines]
        if not calls:
            continue  # no module called in it (with graph recording on)
        if any(A.within(ev.call, loop) for ev in flow.events) or _backward_spelled(loop):
            continue
        if any(A.within(t[1], loop) for t in reached if hasattr(t[1], "lineno")):
            continue  # what it builds is back-propagated or returned
        if any(lo - 1 <= line <= hi - 1 for line in reported) or not _evaluation_phase(unit, loop, ctx):
            continue
        done.append(loop)
        eval_call = _eval_call_before(unit, loop, ctx)
        msg = M.evaluation_loop(_src(eval_call.func, ctx) if eval_call is not None else None)
        fixes: Tuple[Fix, ...] = ()
        wrap = _wrap_edit(loop, ctx, torch_name) if torch_name else None
        if wrap is not None:
            fixes = (Fix(M.fix_no_grad(),
                         (wrap,), preferred=True),)
        out.append(Finding(rule.code, ctx.line_range(loop), msg, Severity.HINT, (), fixes,
                           {"variable": "", "evaluation": True}))
    return out


def _worth_running(unit, ctx) -> bool:
    """A loop holding an accumulation statement that is not obviously a number
    (one pass over the unit's statements, loops nested or not)."""
    evaluates: List[bool] = []

    def says_eval() -> bool:
        if not evaluates:
            words = unit_words(unit, ctx.index.lines)
            evaluates.append(any(w.startswith(("eval", "val", "test", "predict", "infer")) for w in words))
        return evaluates[0]

    return _accumulates_in_a_loop(unit.body, False, says_eval, _meter_methods(ctx))


def _meter_methods(ctx) -> frozenset:
    """The names of the methods of the classes the file knows (its own, imported) that
    add an argument to an attribute of their object (``AverageMeter.update``:
    ``self.sum += val * n``). (The last context's answer is remembered.)"""
    if _METERS[0] is not ctx:
        names = set()
        for key, facts in ctx.summary.items():
            methods = getattr(facts, "methods", None) if key.startswith("class:") else None
            for name, fn in methods if isinstance(methods, tuple) else ():
                if any((e.appends_params or e.appends) and e.path.startswith("#self.")
                       for e in getattr(fn, "containers", ())):
                    names.add(name)
        # a function handing what a parameter brings to such a method of another parameter
        # (``update_meter(report, meter)``: ``meter.update(losses)``, HistoryFlow._param_meters)
        for key, facts in ctx.summary.items():
            calls = getattr(facts, "calls", None) if key.startswith("fn:") else None
            if calls and any(c[0].startswith("@#") and c[1] in names for c in calls):
                names.add(key[3:])
        _METERS[:] = [ctx, frozenset(names)]
    return _METERS[1]


_METERS: list = [None, frozenset()]


def _accumulates_in_a_loop(stmts, in_loop: bool, says_eval, meters: frozenset = frozenset()) -> bool:
    """(A module function, not a closure calling itself: that is a reference
    cycle, which keeps the unit and its tree alive until the cyclic collector runs.)"""
    for t in stmts:
        if in_loop and _accumulation_shaped(t, says_eval, meters):
            return True
        inner = in_loop or isinstance(t, A.LOOPS)
        for block in A.child_blocks(t):
            if _accumulates_in_a_loop(block, inner, says_eval, meters):
                return True
    return False


def _accumulation_shaped(t, says_eval, meters: frozenset = frozenset()) -> bool:
    if isinstance(t, ast.AugAssign):
        # (w -= lr * w.grad is an update, not a history)
        target = t.target.value if isinstance(t.target, ast.Subscript) else t.target
        return isinstance(target, ast.Name) and not A.is_graph_cut(t.value) and not _reads_grad(t.value)
    if isinstance(t, ast.Assign):
        if len(t.targets) != 1 or A.is_graph_cut(t.value):
            return False
        if isinstance(t.value, ast.Call) and isinstance(t.value.func, ast.Attribute) and t.value.func.attr in meters:
            return True  # log = model.training_step(batch): a method keeping what it builds on its object
        names = set(A.target_names(t.targets[0])) & set(loaded_names(t.value))
        if not names:
            return False
        # arithmetic (a running sum, an EMA); a state threaded through a call only
        # matters in an evaluation loop, and such code says "eval" somewhere
        return any(_graph_leaves(t.value, n) for n in names) or says_eval()
    if isinstance(t, ast.Expr) and isinstance(t.value, ast.Call) and isinstance(t.value.func, ast.Name):
        return t.value.func.id in meters and len(t.value.args) > 1  # update_meter(report, meter)
    if isinstance(t, ast.Expr) and isinstance(t.value, ast.Call) and isinstance(t.value.func, ast.Attribute):
        if t.value.func.attr in meters and (t.value.args or t.value.keywords):
            return True  # meter.update(loss): a method keeping its argument on its object
        return t.value.func.attr in _ACC_METHODS and bool(t.value.args) and not A.is_graph_cut(t.value.args[-1])
    return False


def _reads_grad(e: ast.AST) -> bool:
    return any(n.__class__ is ast.Attribute and n.attr == "grad" for n in A.iter_nodes(e))


def _escaping_marks(flow: HistoryFlow) -> Tuple[set, set]:
    """The marks that reach a backward or an attribute; and those that reach a
    return/yield or a function of the project they are handed to (its caller, or the
    callee, decides what becomes of them)."""
    used: set = set()
    for ev in flow.events:
        used |= ev.loss.taints
    own = {("H", k): site.name for k, site in flow.sites.items() if "." in site.name}
    for key, v in (getattr(flow, "final", None) or {}).items():
        if "." in key:
            # (a meter's own attribute is where its accumulation lives, not where it escapes to;
            # so are its other attributes when it is one of a dict of meters, ``stats[k].sum`` and
            # ``stats[k].sq_sum``; an object's other lists may be read back by another method
            # of it, a rollout memory's ``sample_memory()``, and count as escaping)
            base = key.rpartition(".")[0]
            used |= {t for t in v.taints if own.get(t) != key
                     and not ("[" in base and own.get(t, "").rpartition(".")[0] == base)}
    returned: set = set(flow.handed)
    for r in flow.returns:
        returned |= r.taints
    return {t for t in used if t[0] == "H"}, {t for t in returned if t[0] == "H"}


def dotted_receiver(e: ast.expr) -> bool:
    """``meter`` or ``xp.Train_loss``: a name, or attributes of one (a meter kept on a logger);
    or one of a dict of meters under a constant key (``stats["loss"]``)."""
    if _keyed_receiver(e):
        return True
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name)


def _keyed_receiver(e: ast.expr) -> bool:
    """``stats["loss"]``: a name subscripted by a string constant; or by a name (``stats[k]``
    in a loop over the keys of a dict of losses: one meter per key)."""
    return (e.__class__ is ast.Subscript and e.value.__class__ is ast.Name
            and ((e.slice.__class__ is ast.Constant and isinstance(e.slice.value, str))
                 or e.slice.__class__ is ast.Name))


def _backpropagated(site: _Site, flow: HistoryFlow) -> bool:
    """Did a backward of the site's loop, not retaining its graph, run through what
    the site adds (``loss.backward(); total_loss += loss``)? Then the accumulation
    is no loss anyone can differentiate again (a second backward through it would
    fail): returned, it is a record of numbers kept as a graph, and made from nothing
    the loop iterates over (a ``range`` loop on a fixed batch), still one graph per
    iteration."""
    if not site.fresh:
        return False
    if any(id(t[1]) in flow.backprop_calls for t in site.fresh):
        return True  # the loss a training-step function returned after its own backward
    loop = site.frame.loop
    for ev in flow.events:
        if ev.retain or not A.within(ev.call, loop):
            continue
        if site.fresh & ev.loss.graph_tokens():
            return True
    if "." in site.name or len(site.loops) < 2:
        return False
    # an enclosing loop the accumulator outlives (never rebound in it: metta#1139's experience
    # list, appended the recurrent state per step of a rollout loop, the update's backward
    # after that loop): a backward of it that ran through what the site adds
    for fr in site.loops[:-1]:
        outer = fr.loop
        if _rebound_in(site.name, outer, site.stmt):
            break  # (and in every loop inside it)
        for ev in flow.events:
            if not ev.retain and A.within(ev.call, outer) and site.fresh & ev.loss.graph_tokens():
                return True
    return False


def _rebound_in(name: str, loop, site_stmt) -> bool:
    """Is ``name`` bound (or cleared) in ``loop``'s body anywhere but at the site?"""
    for n in A.block_nodes(loop.body):
        if n is site_stmt:
            continue
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.Delete)):
            targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [
                getattr(n, "target", None)] if not isinstance(n, ast.With) else [i.optional_vars for i in n.items]
            for t in targets:
                if t is not None and name in A.target_names(t):
                    return True
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("clear", "pop")
              and isinstance(n.func.value, ast.Name) and n.func.value.id == name):
            return True
    return False


# ---------------------------------------------------------------------------
# findings and fixes
# ---------------------------------------------------------------------------
def _findings(rule, leaks, flow, unit, ctx) -> List[Finding]:
    out: List[Finding] = []
    torch_name = _torch_alias(ctx)
    groups: Dict[int, List[_Site]] = {}
    quiet_of: Dict[int, Optional[ast.stmt]] = {}
    for site in sorted(leaks, key=lambda s: (s.stmt.lineno, s.stmt.col_offset)):
        quiet = quiet_of[id(site)] = _quiet_loop(site, flow)  # the outermost enclosing loop that never back-propagates
        if quiet is not None:
            groups.setdefault(id(quiet), []).append(site)
    done: set = set()
    for site in sorted(leaks, key=lambda s: (s.stmt.lineno, s.stmt.col_offset)):
        quiet = quiet_of[id(site)]
        if quiet is not None and not _evaluation_phase(unit, quiet, ctx):
            continue  # a loop that builds something without back-propagating, and says nothing of evaluation
        threaded = site.kind == "assign" and not _graph_leaves(site.value, site.name)
        if threaded and (quiet is None or _eval_call_before(unit, quiet, ctx) is None):
            # a state threaded through a call (``out, h = rnn(x, h)``, ``best = max(acc, best)``) is
            # reported in an evaluation loop only: in a training loop its graph is back-propagated
            # (or it is GG101's crash) by ways the analysis may not follow (a state detached in place
            # through an index, a distributed backward), and a sampling loop's growth ends with it
            continue
        if quiet is not None:
            if id(quiet) in done:
                continue  # one finding per evaluation loop, at its first accumulation
            done.add(id(quiet))
        out.append(_finding(rule, site, quiet, groups.get(id(quiet), [site]), unit, ctx, torch_name))
    return out


def _reached(flow: HistoryFlow, returns: bool = True) -> set:
    """The graph tokens a backward or (``returns``) a return of the unit reaches:
    graphs that are built for something."""
    reached: set = set()
    for ev in flow.events:
        reached |= ev.loss.graph_tokens()
    for r in flow.returns if returns else ():
        reached |= r.graph_tokens()
    return reached


def _evaluation_total(site: _Site, flow: HistoryFlow, unit, ctx) -> bool:
    """A total an evaluation function returns (OpenNMT's ``validate()``: ``model.eval()``,
    then ``total_loss = total_loss + loss`` over the validation batches, ``return
    total_loss / n_words``): the function says twice that it evaluates (its name and
    the ``.eval()`` call before a loop where nothing back-propagates), so what it returns
    is a score, and the loop keeps every batch's graph until the caller drops it."""
    name = getattr(unit.node, "name", "") if unit.kind == "function" else ""
    if not name or not (_EVAL_FUNCTION.match(name) or _EVAL_PART.search(name)) or _in_tests(unit, ctx, evaluation=True):
        return False
    site.evaluation_total = True
    quiet = _quiet_loop(site, flow)
    site.evaluation_total = quiet is not None and _eval_call_before(unit, quiet, ctx) is not None
    return site.evaluation_total


def _quiet_loop(site: _Site, flow: HistoryFlow) -> Optional[ast.stmt]:
    """The outermost loop around the site in which nothing back-propagates and
    whose graphs reach no backward and no return (but the site's own, when it is an
    evaluation's returned total: ``_evaluation_total``): it can run under no_grad."""
    reached = _reached(flow, returns=not site.evaluation_total)
    for fr in site.loops:
        if fr.backprop:
            continue
        loop = fr.loop
        if any(A.within(t[1], loop) for t in reached if hasattr(t[1], "lineno")):
            continue
        if _backward_spelled(loop):
            continue
        return loop
    return None


def _backward_spelled(loop) -> bool:
    for n in A.block_nodes(loop.body):
        if isinstance(n, ast.Call) and A.is_backward_call(n):
            return True
    return False


def _torch_alias(ctx) -> Optional[str]:
    for alias, full in (ctx.imports or {}).items():
        if full == "torch":
            return alias
    return None


def _src(node, ctx) -> str:
    """The node's own source text (as written), or its unparsed form without a context."""
    if ctx is None:
        return ast.unparse(node)
    r = ctx.range(node)
    if r.start.line == r.end.line:
        return ctx.index.line(r.start.line)[r.start.character:r.end.character]
    lines = [ctx.index.line(i) for i in range(r.start.line, r.end.line + 1)]
    lines[-1] = lines[-1][:r.end.character]
    lines[0] = lines[0][r.start.character:]
    return "\n".join(lines)


def _finding(rule, site: _Site, quiet, group, unit, ctx, torch_name) -> Finding:
    name = site.name
    kind = "kept" if site.kind == "meter" and (not site.value or _built_inside(site)) else site.kind
    what = M.accumulated(kind, name)
    plural = quiet is not None and len({s.name for s in group}) > 1
    if plural:
        names = sorted({s.name for s in group}, key=[s.name for s in group].index)
        what = M.accumulated_names(names)
    loop = site.frame.loop
    related = [Related(ctx.line_range(loop), M.loop_accumulated_across())]
    eval_call = _eval_call_before(unit, quiet or loop, ctx)
    fixes: List[Fix] = []
    if quiet is not None:
        msg = M.quiet_loop(what, plural, _src(eval_call.func, ctx) if eval_call is not None else None)
        if eval_call is not None:
            related.append(Related(ctx.range(eval_call), M.eval_does_not_stop_recording()))
        wrap = _wrap_edit(quiet, ctx, torch_name) if torch_name else None
        if wrap is not None:
            fixes.append(Fix(M.fix_no_grad(), (wrap,), preferred=True))
    else:
        msg = M.history(what)
    cut = _cut_edits(site, unit, ctx)
    if cut is not None:
        method, edits = cut
        fixes.append(Fix(M.fix_accumulate(method), tuple(edits), preferred=not fixes))
    return Finding(rule.code, ctx.line_range(site.stmt), msg, rule.default_severity, tuple(related), tuple(fixes),
                   {"variable": name, "evaluation": quiet is not None})


def _evaluation_phase(unit, loop, ctx) -> bool:
    """Does the code say the loop evaluates? A ``.eval()`` call before it, a
    function named for evaluation (``evaluate``, ``validate_epoch``,
    ``predict``), or an iterable named for it (``val_loader``, ``test_data``).
    Never in a test suite (a test checks a forward pass; its graph dies with it)."""
    if _in_tests(unit, ctx, evaluation=True):
        return False  # a unit test's forward pass
    name = getattr(unit.node, "name", "") if unit.kind == "function" else ""
    if _eval_call_before(unit, loop, ctx) is not None:
        return True
    if not _file_backprops(ctx):
        return False  # an inference script: only its own ``model.eval()`` says it evaluates
    if name and not name.startswith("test_") and _EVAL_FUNCTION.match(name):
        return True
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        it = loop.iter
        while isinstance(it, ast.Call) and it.args and isinstance(it.func, ast.Name):
            it = it.args[0]  # enumerate(val_loader), tqdm(val_loader)
        label = A.dotted(it) or ""
        if _EVAL_ITERABLE.search(label.rsplit(".", 1)[-1]):
            return True
    return False


def _in_tests(unit, ctx, evaluation: bool = False) -> bool:
    """A test suite's file (``test_*.py``, ``*_test.py``), function (``test_*``) or class (``Test*``).
    (``evaluation``: asked of an evaluation, a file so named is a suite only when it holds a test,
    :func:`_test_suite_file`: a script that runs the test set is evaluation code.)"""
    base = os.path.basename((getattr(ctx, "path", None) or "").replace("\\", "/"))
    if (base.startswith("test_") or base.endswith("_test.py")) and (not evaluation or _test_suite_file(ctx)):
        return True
    name = getattr(unit.node, "name", "") if unit.kind == "function" else ""
    return name.startswith("test_") or (unit.class_node is not None and unit.class_node.name.startswith("Test"))


def _test_suite_file(ctx) -> bool:
    """Does a file named like a test suite hold one: a ``def test_...`` (a method of a ``Test`` class too) or
    an import of pytest or unittest? (SlowFast's ``tools/test_net.py`` is a script that runs
    the test set, not a suite.) (The last context's answer is remembered.)"""
    if _SUITE[0] is not ctx:
        text = "\n".join(ctx.index.lines)
        suite = bool(_SUITE_TEXT.search(text))
        _SUITE[:] = [ctx, suite]
    return bool(_SUITE[1])


_SUITE: list = [None, None]
_SUITE_TEXT = re.compile(r"^\s*(async\s+def\s+test_|def\s+test_)|^\s*(import|from)\s+(pytest|unittest)\b",
                         re.MULTILINE)


def _file_backprops(ctx) -> bool:
    """Can anything in the file back-propagate (as the engine tests it: its text, or a
    fact it reads of a function or class that calls a backward)? If not, it is analysed
    only for its ``.eval()`` (``also_without_backprop``). (The last context's answer is
    remembered.)"""
    if _BACKPROPS[0] is not ctx:
        known = K.text_may_backprop("\n".join(ctx.index.lines)) or any(
            V.describes_backward(v) for v in ctx.summary.values())
        _BACKPROPS[:] = [ctx, known]
    return bool(_BACKPROPS[1])


_BACKPROPS: list = [None, None]


def _eval_call_before(unit, loop, ctx) -> Optional[ast.Call]:
    """The last ``<module>.eval()`` call of the unit before the loop (or at its top)."""
    best = None
    for n in A.unit_nodes(unit):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "eval"
                and not n.args and not n.keywords and n.lineno <= loop.lineno + 1):
            if best is None or n.lineno > best.lineno:
                best = n
    return best


def _wrap_edit(loop, ctx, torch_name) -> Optional[TextEdit]:
    """Indent the loop one level under ``with torch.no_grad():``."""
    first, last = loop.lineno, loop.end_lineno or loop.lineno
    lines = [ctx.index.line(i - 1) for i in range(first, last + 1)]
    indent = ctx.indent_of(first)
    if lines[0][: len(indent)] != indent or lines[0].strip() == "" or not lines[0].lstrip().startswith(("for", "while", "async")):
        return None
    step = "    " if "\t" not in indent else "\t"
    body = [indent + f"with {torch_name}.no_grad():"] + [(step + ln) if ln.strip() else ln for ln in lines]
    from gradguard.model.findings import Position, Range

    rng = Range(Position(first - 1, 0), Position(last - 1, len(lines[-1])))
    return TextEdit(rng, "\n".join(body))


def _scalar_like(expr: ast.expr) -> bool:
    """A loss (by name) or a reduction: ``.item()`` is safe on it."""
    text = _src(expr, None).lower()
    if "loss" in text or "损失" in text:
        return True
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("mean", "sum")


def _later_uses(unit, site: _Site) -> Tuple[List[ast.Call], bool]:
    """Later ``name.item()`` calls, and whether the name is used as a tensor otherwise."""
    items, tensor_use = [], False
    for n in A.unit_nodes(unit):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == site.name:
            if (n.lineno, n.col_offset) <= (site.stmt.lineno, site.stmt.col_offset):
                continue
            if n.attr == "item":
                items.append(n)
            else:
                tensor_use = True
        elif isinstance(n, ast.Call) and any(isinstance(a, ast.Name) and a.id == site.name for a in n.args):
            q = A.dotted(n.func) or ""
            if q.startswith(("torch.", "np.", "numpy.")):
                tensor_use = True
    calls = []
    for n in A.unit_nodes(unit):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func in items and not n.args:
            calls.append(n)
    return calls, tensor_use


def _wrap(expr: ast.expr, method: str, ctx) -> TextEdit:
    r = ctx.range(expr)
    text = _src(expr, ctx)
    atom = isinstance(expr, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
    return TextEdit(r, f"{text}.{method}()" if atom else f"({text}).{method}()")


def _cut_edits(site: _Site, unit, ctx) -> Optional[Tuple[str, List[TextEdit]]]:
    if site.kind == "append":
        if isinstance(site.value, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
            return None  # outputs.append({"loss": loss, ...}): no .detach() of a dict
        if site.container:
            return None  # out = {"loss": loss, ...}; outputs.append(out): nor of a name holding one
        return ".detach()", [_wrap(site.value, "detach", ctx)]
    if site.kind == "meter":
        if not site.value or _built_inside(site):
            return None  # the graph is built inside the method: the fix belongs there
        call = site.stmt.value if isinstance(site.stmt, (ast.Expr, ast.Assign)) else None
        if isinstance(call, ast.Call) and (isinstance(call.func, ast.Name) or (
                isinstance(call.func, ast.Attribute) and A.dotted(call.func.value) == "self")):
            # self._update_stats(stats, n), update_meter(report, meter): a helper that files what
            # it is handed (a dict of losses, each into its meter): no .detach() of what it takes
            return None
        if any(isinstance(e, (ast.Dict, ast.List, ast.Tuple, ast.Set)) for e in site.value):
            return None  # metric.update((y_pred, y)): no .detach() of a tuple
        # (the meter may do tensor arithmetic with what it is handed: a tensor it stays)
        return ".detach()", [_wrap(e, "detach", ctx) for e in site.value]
    items, tensor_use = _later_uses(unit, site)
    number = site.init is not None and site.init.const and not site.init.taints and not tensor_use
    if site.kind == "aug":
        leaves = [site.value]
    else:
        leaves = _graph_leaves(site.value, site.name)
        if not leaves:
            return None
    # (returned: the caller may read it as a tensor, ``train(...).item()``)
    method = "item" if number and not site.returned and all(_scalar_like(e) for e in leaves) else "detach"
    edits = [_wrap(e, method, ctx) for e in leaves]
    if method == "item":
        for call in items:
            edits.append(TextEdit(ctx.range(call), site.name))
    return f".{method}()", edits


def _built_inside(site: _Site) -> bool:
    """Does the meter site's method keep a graph it builds itself (the call's own token)?"""
    call = site.stmt.value if isinstance(site.stmt, (ast.Expr, ast.Assign)) else None
    return any(t[1] is call for t in site.fresh)


def _graph_leaves(expr: ast.expr, name: str) -> List[ast.expr]:
    """The operands of an arithmetic expression that do not read the accumulator
    and are not constants: ``0.1 * loss`` in ``0.9 * running + 0.1 * loss``."""
    out: List[ast.expr] = []
    try:
        _leaves_into(expr, name, out)
    except ValueError:
        return []
    return out


def _leaves_into(e: ast.expr, name: str, out: List[ast.expr]) -> None:
    """(A module function, not a closure calling itself: see _accumulates_in_a_loop.)"""
    if isinstance(e, ast.BinOp):
        _leaves_into(e.left, name, out)
        _leaves_into(e.right, name, out)
    elif isinstance(e, ast.UnaryOp):
        _leaves_into(e.operand, name, out)
    elif isinstance(e, ast.IfExp):
        # ``loss if running is None else 0.9 * running + 0.1 * loss``: the test only reads
        _leaves_into(e.body, name, out)
        _leaves_into(e.orelse, name, out)
    elif isinstance(e, ast.Constant):
        return
    elif name in loaded_names(e):
        if isinstance(e, ast.Name):
            return
        raise ValueError  # the accumulator inside a call: no simple edit
    else:
        out.append(e)
