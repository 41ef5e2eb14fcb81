"""The interpreter's values and the facts it writes into module summaries.

:class:`Val` is an abstract value (where its autograd graph comes from);
:class:`FnFacts` / :class:`ClassFacts` are the hashable per-definition facts the
summarizers store (``fn:<name>``, ``class:<name>``); :class:`BackwardEvent`,
:class:`LoopFrame` and :class:`Carry` are what a :class:`~gradguard.analysis.interpreter.GraphFlow`
run records. Pure data: nothing here walks a tree.
"""

from __future__ import annotations

import ast
from operator import attrgetter

from gradguard.analysis import knowledge as K
from gradguard.model.record import Factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Mapping, Sequence, Any, Dict, FrozenSet, Iterable, Tuple, Optional as _Opt


# ---------------------------------------------------------------------------
# Graph taint interpreter
# ---------------------------------------------------------------------------
# A small abstract interpreter over one unit. Each value is a :class:`Val`: a
# set of *tokens* saying where its autograd graph comes from, plus its tuple
# structure (LSTM ``(h, c)``) and, for objects, what it is (a module, a
# function). Tokens:
#
#   ("G", node)                 graph built by ``node`` (a module call, an op on a leaf) in this unit
#   ("L", node)                 a leaf that requires grad (nn.Parameter, requires_grad=True), made
#                               at ``node`` (the call, the ``lin.weight`` attribute, the parameter's
#                               ``ast.arg``; None for a parameter a summary constructs): where a
#                               graph starts, for a finding's words (``GraphFlow.leaf_of``)
#   ("P", i)                    flows from parameter ``i`` (function summaries)
#   ("C", name, loop, idx)      carried into ``loop``'s next iteration by ``name``
#                               (element ``idx`` of a tuple state, or -1)
#   ("V", name, loop, idx)      as "C", for a value whose graph is unproven (U tokens): only in
#                               the isolated walk that finds paths to note as unverified
#   ("U", node)                 may hold the graph built by ``node``, or may not: unproven
#                               (no rule counts it as a graph; a backward counts it as reached)
#   ("F", ("G", node))          a backward on this path reached that graph (GG101's seeds)
#   ("R", k, i)                 (summaries) element i (or -1: all) of what the k-th call of a
#                               method of a class not seen from here returns (FnFacts.calls)
#   ("N", path)                 (summaries) what a container reached from outside the def held
#                               when it was called (FnFacts.containers)
#   ("X", token, call)          only in the FREED entry: ``call`` surely freed ``token``'s graph
#   ("B", stmt)                 (rules' runs, ``GraphFlow.build_stmts``) ``stmt`` bound the value
#                               while it held a graph: the statements that built it (``built_by``)
#   ("K", None)                 (rules' runs) an operation that built it saves tensors for backward
#   ("M", node, words)          (rules' runs) whether the operation at ``node`` that built it saves
#                               tensors cannot be told (``GraphFlow.saving_of``: GG102's words)
#
# It is linear in the unit's size except that a back-propagating loop body is
# walked twice (once to learn what an iteration leaves behind, once with those
# values carried in), so nested loops cost 2^depth walks of the inner body.

EMPTY: FrozenSet = frozenset()


@record(frozen=False, eq=False)  # immutable by convention: never assigned after creation (hot: a plain init)
class Val:
    """Abstract value. ``taints`` of a tuple is the union of its elements'."""

    taints: FrozenSet = EMPTY
    elems: _Opt[Tuple["Val", ...]] = None
    obj: _Opt[str] = None  # "inst:torch.nn.GRU", "user:Model", "ucls:Model", "cls:torch.nn.GRU", "fn:name"
    none: bool = False  # may be None
    undef: bool = False  # may be unbound
    param: bool = False  # comes from a function parameter (unknown caller value)
    site: _Opt[ast.stmt] = None  # statement that assigned it (for reporting)
    const: bool = False  # may be a plain Python number/str constant (not a tensor)
    frozen: bool = False  # a module whose parameters were all set requires_grad=False
    # "list" / "dict" for a Python list or dict (fixes keep it one); "tensor" for one tensor a
    # torch recurrent module hands back as its state (GG101's fix detaches it with .detach())
    kind: _Opt[str] = None
    # a Python container whose elements do not all hold the same graphs, and which
    # are not known one by one (``[loss] + new_mems``): an element taken out of it
    # has an unproven graph (its G tokens become U tokens)
    mixed: bool = False

    def graph_tokens(self) -> FrozenSet:
        taints = self.taints
        if not taints:
            return EMPTY  # (half the values asked hold nothing)
        return frozenset([t for t in taints if t[0] == "G"])

    def has_grad(self) -> bool:
        return any(t[0] in ("G", "L") for t in self.taints)


CLEAN = Val()
NONE = Val(none=True)
CONST = Val(const=True)


def tup(elems: Sequence[Val]) -> Val:
    taints: FrozenSet = frozenset().union(*(e.taints for e in elems)) if elems else EMPTY
    return Val(taints, tuple(elems))


def plain(taints: Iterable) -> Val:
    t = frozenset(taints)
    return Val(t) if t else CLEAN


def join(a: _Opt[Val], b: _Opt[Val]) -> Val:
    if a is None:
        return Val(undef=True) if b is None else _with(b, undef=True)
    if b is None:
        return _with(a, undef=True)
    if a is b:
        return a
    elems = None
    if a.elems is not None and b.elems is not None and len(a.elems) == len(b.elems):
        elems = tuple(join(x, y) for x, y in zip(a.elems, b.elems))
    elif a.elems is not None and b.none and not b.taints:
        elems = a.elems
    elif b.elems is not None and a.none and not a.taints:
        elems = b.elems
    site = a.site
    if b.site is not None and (site is None or (b.graph_tokens() and not a.graph_tokens())):
        site = b.site
    return Val(
        a.taints | b.taints,
        elems,
        a.obj if a.obj == b.obj else (a.obj or b.obj),
        a.none or b.none,
        a.undef or b.undef,
        a.param or b.param,
        site,
        a.const or b.const,
        a.frozen and b.frozen,
        a.kind if a.kind == b.kind else None,
        a.mixed or b.mixed,
    )


def _with(v: Val, **kw) -> Val:
    # a copy made from every field positionally, then the changed ones set (Val is
    # not frozen): about half the time of building a keyword dict (a hot path: every
    # assignment the interpreter binds)
    new = Val(*_VAL_FIELDS(v))
    for k, x in kw.items():
        setattr(new, k, x)
    return new


def _bound(v: Val, site: ast.stmt) -> Val:
    """``_with(v, site=site, undef=False, param=False)``: the value a name holds once
    a statement assigned it (every binding of the interpreter: no keyword dict)."""
    new = Val(*_VAL_FIELDS(v))
    new.site = site
    new.undef = False
    new.param = False
    return new


_VAL_FIELDS = attrgetter(*Val._fields)  # type: ignore[attr-defined]  # a record's fields, in order


def unsure(v: Val) -> Val:
    """What may hold ``v``'s graphs, or may not: its G tokens become U tokens
    (no rule counts them as a graph; a backward still counts them as reached)."""
    if not any(t[0] == "G" for t in v.taints):
        return plain(v.taints)
    return plain(frozenset(("U", t[1]) if t[0] == "G" else t for t in v.taints))


def join_env(a: Dict[str, Val], b: Dict[str, Val]) -> Dict[str, Val]:
    out: Dict[str, Val] = {}
    for k in a.keys() | b.keys():
        va, vb = a.get(k), b.get(k)
        out[k] = va if va is vb and va is not None else join(va, vb)
    if FREED in out:
        out[FREED] = meet_freed(a.get(FREED), b.get(FREED))
    return out


# The graphs a backward surely freed on every path to here (one entry of each
# environment, under a key no name can spell): ``("X", token, call)`` says the
# last graph ``token`` stands for (``("G", node)``, or ``("N", path)``: what a
# container reached from outside a summarised function held when it was called)
# was back-propagated, without retain_graph, by ``call``. Two paths meet on the
# graphs both freed. A backward whose loss reaches a graph of the set runs
# through freed saved tensors: a proof, not a suspicion (BackwardEvent.stale).
# Tokens name nodes, not runs of them: executing ``node`` again would build a
# fresh graph. That never happens where the set is read: it is read on a loop
# body's first walk only, where each node runs once, and a loop's exit takes the
# set its first walk left (the seeded second walk re-runs nodes, reads nothing).
FREED = "<freed>"


def freed_set(env: Mapping[str, Val]) -> FrozenSet:
    v = env.get(FREED)
    return v.taints if v is not None else EMPTY


def meet_freed(a: _Opt[Val], b: _Opt[Val]) -> Val:
    if a is None or b is None or not a.taints or not b.taints:
        return CLEAN
    if a is b:
        return a
    keep = {t[1] for t in b.taints}
    return plain(t for t in a.taints if t[1] in keep)


@record
class RetPos:
    """One returned position of a function: does it carry a graph built inside,
    which parameters flow into it, and its tuple arity when known (LSTM state: 2)."""

    graph: bool = False
    params: FrozenSet[int] = EMPTY
    arity: _Opt[int] = None
    # parameters it is computed from by an operation (not merely handed back): an
    # argument that requires grad or has a graph makes a new graph in the call
    derived: FrozenSet[int] = EMPTY
    mixed: bool = False  # a list mixing elements with and without a graph (Val.mixed)
    # what it holds of a call of another class's method (FnFacts.calls): (k, element
    # or -1), composed where the function is called, from the facts seen there
    via: FrozenSet[Tuple[int, int]] = EMPTY
    kind: _Opt[str] = None  # "tensor": one torch recurrent module's state tensor (Val.kind); "dist": a distribution
    # (methods) the modules held on ``self`` whose calls built part of its graph and
    # saved their weights for the backward (``self.discriminator``): ``discriminator``
    modules: FrozenSet[str] = EMPTY
    # the containers reached from outside (``ContainerEffect.path``) whose content on
    # entry flows into it: a scheduler's ``step()`` combining the model outputs earlier
    # calls kept in ``self.ets`` hands back their graphs (read where it is called)
    reads: FrozenSet[str] = EMPTY
    # its graph is only assumed: every graph it holds was made by a callable the
    # summary could not see into (``parser = ArgumentParser(...)``, a loader a helper
    # builds), which may be a module's output or any object (GraphFlow.opaque)
    assumed: bool = False
    # the module-level functions (called by name) whose own result decides whether
    # that graph is real: they are composed where the function is called
    assumed_via: FrozenSet[str] = EMPTY
    # it holds leaves only, made inside or reached (``return [w, b]`` of tensors made to
    # require grad, ``nn.Parameter(...)``, ``model.parameters()``): the call hands back
    # leaves, not a graph (a leaf token at the call), so reusing them is no reuse of a graph
    leaves: bool = False
    # the parameters called as modules on a graph built inside whose calls built part of
    # its graph (``dgz = d(g(z))`` of ``def losses(d, g, x)``): the module a caller hands
    # there saved its weights for this position's backward (GraphFlow.param_calls)
    called: FrozenSet[int] = EMPTY
    # (methods) ``(module, optimizer, call line, step line)``: a ``self.<module>`` call that
    # built part of its graph and saved its weights ran before ``<optimizer>.step()``, a
    # statement of the def's body (as written: ``self.D_optimizer``): what it hands back is
    # stale when that optimizer trains the module (a loss module stepping its discriminator
    # inside ``forward``)
    stepped_after: FrozenSet[Tuple[str, str, int, int]] = EMPTY
    # the parameters of ``derived`` that an operation saving tensors computed it from
    # (``h @ W`` of a ``W`` handed in): an argument that requires grad makes a graph that
    # saved tensors in the call (a second backward through it fails)
    derived_saving: FrozenSet[int] = EMPTY
    # (module-level functions) the module's names the function reads and never binds that
    # an operation saving tensors computed it from (a functional model's weights, ``X @ Wxh``
    # of a module-level ``Wxh`` requiring grad): the defining module's, not exported
    globals_saving: FrozenSet[str] = EMPTY
    # a list filled in a loop (or a comprehension) of the def whose elements all hold a part
    # of the graph built once before it that saved tensors (a feedback network's ``outs``,
    # each step's output computed from ``fea = self.fea_in(x)``): one element's backward
    # frees what the next element's needs
    elems_share: bool = False


@record
class ContainerEffect:
    """What a function does to a container it reaches from outside: an attribute of a
    module-level object (``policy.saved_log_probs``) or of a parameter (``"#0.buf"``:
    attribute ``buf`` of parameter 0). REINFORCE keeps its log-probs this way:
    ``select_action()`` appends, ``finish_episode()`` back-propagates and clears."""

    path: str
    appends: bool = False  # puts a graph built inside the function into it
    appends_params: FrozenSet[int] = EMPTY  # ... or what these parameters hold
    saving: bool = False  # the graph it puts there surely saved tensors (a torch op that saves)
    # ... or was built by calling these module-level names (a module there saves)
    saving_via: Tuple[str, ...] = ()
    backprops: bool = False  # a backward inside may run through what it held on entry
    frees: bool = False  # ... does, on every path through the function, without retain_graph
    clears: bool = False  # what it held on entry is gone when the function returns
    # it puts a tuple, list, dict or set display in (``memory.append((s, log_prob, r))``): an
    # element is no tensor, ``[s.detach() for s in memory]`` would fail on it
    displays: bool = False


@record
class FnFacts:
    """Coarse, hashable facts about a same-file function or method.

    ``params`` excludes ``self``/``cls`` for methods. ``returns`` is the per-position
    summary when every ``return`` returns a tuple of the same length, else None;
    ``ret`` is the whole returned value. ``backward_params``: parameters whose value
    reaches a backward() inside. ``detaches``: takes arguments and returns none of
    their graphs nor a new one (a ``repackage_hidden``-style helper, by its body)."""

    params: Tuple[str, ...] = ()
    ret: RetPos = RetPos()
    returns: _Opt[Tuple[RetPos, ...]] = None
    calls_backward: bool = False
    backward_params: FrozenSet[int] = EMPTY
    backward_retains: bool = False  # every backward() it makes passes retain_graph=True
    # parameters an autograd.grad() inside differentiates against as given (not made a
    # leaf that requires grad first): handed a detached tensor, that call fails
    grad_params: FrozenSet[int] = EMPTY
    detaches: bool = False
    no_grad: bool = False
    returns_value: bool = False
    # Calls of module-level functions the summary could not see into (facts are
    # per definition): ``(name, parameters flowing into each positional argument,
    # ((keyword, parameters), ...))``. Where the function is called, the callee's
    # own facts are looked up and composed (``GraphFlow._apply_delegates``), so
    # a loop calling ``train_epoch(...)`` that calls ``train_step(...)`` that
    # calls ``loss.backward()`` sees that backward.
    delegates: Tuple[Tuple[str, Tuple[FrozenSet[int], ...], Tuple[Tuple[str, FrozenSet[int]], ...]], ...] = ()
    vararg: bool = False  # the last of ``params`` is ``*args``
    # Calls of methods of classes the summary could not see (``self.core.forward(embed,
    # state)``, ``self.wm.training_step(obs, state)``, a layer of ``self.layers``):
    # ``(class, method, parameters flowing into each positional argument, ((keyword,
    # parameters), ...))``. What they return is composed where the function is
    # called, from the class's own facts (``GraphFlow._via``): the cut three calls down.
    calls: Tuple[Tuple[str, str, Tuple[FrozenSet[int], ...], Tuple[Tuple[str, FrozenSet[int]], ...]], ...] = ()
    # containers reached from outside that it fills, back-propagates or clears
    containers: Tuple[ContainerEffect, ...] = ()
    # Parameters the function never rebinds that reach a backward (not retaining its
    # graph) made in a loop of its own: a graph passed in is freed by the first
    # iteration and reached again by the next (``train(model, x, y)`` looping over
    # ``loss(model(x), y).backward()`` with a ``y`` built from a tensor requiring grad).
    loop_backward: FrozenSet[int] = EMPTY
    # the calls of module-level functions made in such a loop (as ``delegates``, with
    # only the parameters never rebound), composed where the function is called: the
    # loop of ``train`` calling ``step(model, opt, x, y)``, which back-propagates
    loop_delegates: Tuple[Tuple[str, Tuple[FrozenSet[int], ...], Tuple[Tuple[str, FrozenSet[int]], ...]], ...] = ()
    # (methods) the attributes ``self.<a>`` the method never assigns that reach a backward
    # (not retaining its graph) in a loop of its own: a graph another method (``__init__``)
    # left there is freed by the first iteration and reached again by the next
    loop_backward_attrs: Tuple[str, ...] = ()
    # (module-level functions) the module-level names the function reads and never binds
    # that reach a backward (not retaining its graph) in a loop of its own: a graph the
    # module built there before the call is freed by the first iteration and reached by
    # the next (``train(epochs)`` looping over ``loss(model(X), Y).backward()``)
    loop_backward_globals: Tuple[str, ...] = ()
    # (module-level functions) the same names reaching any backward of the function (not
    # retaining its graph), in a loop or not: a call of it inside a loop (of the module, or
    # of another function: ``loop_calls``) frees a global graph the next call reaches again
    backward_globals: Tuple[str, ...] = ()
    # (module-level functions) the same-module functions called by name inside the
    # function's own loops: with their ``backward_globals``, what a call of this function
    # back-propagates of the module's globals in a loop (composed where it is called)
    loop_calls: Tuple[str, ...] = ()
    # (module-level functions) the raw dotted constructor of the object every ``return``
    # hands back (``def resnet32(): return ResNet(BasicBlock, [5, 5, 5])``, or a name bound
    # once to it before the returns): a call of the function makes one, as the constructor
    # would. Exported to another file with the class's own facts (``class:<function>``).
    makes: _Opt[str] = None
    # every returned position that carries a graph built inside shares a part of it
    # that saved tensors (``act = self.actor(obs)`` fed to both critics of ``return
    # critic1(cat(obs, act)), critic2(cat(obs, act))``): a backward through one of them
    # frees what the next through another needs (the caller's tuple has one graph)
    returns_share: bool = False
    # ... or (module-level functions) they all hold the graph of a call of one of these
    # module-level names, which the summary cannot see (``act = actor(obs)`` with a global
    # ``actor``): shared and saving where the name is a module (looked up where it is called)
    returns_share_via: Tuple[str, ...] = ()
    # the optimizers the def steps (``optim.step()``, ``scaler.step(optim)``, analysis/steps.py),
    # as written (a parameter's name, ``self.optimizer``), each with whether every run of
    # the def steps it (a statement of its own body, not under a branch or a loop)
    steps: Tuple[Tuple[str, bool], ...] = ()
    # the modules whose parameters the def edits in place outside an optimizer (``for p in
    # model.parameters(): p.add_(e)`` under no_grad, SAM's ``first_step()``), as written
    param_edits: Tuple[str, ...] = ()
    # every backward() it makes passes ``retain_graph=<this parameter>``, whose default
    # keeps no graph (``def update_params(optim, net, loss, retain_graph=False)``): a call
    # retains the graph only when it hands that parameter a value (``backward_retains``
    # answers for every call, not knowing what each hands it)
    retain_param: _Opt[int] = None
    # for each position of ``returns``: where the graph built inside it was made, as
    # ``(line, column, callee)`` of each graph-building node (callee: the dotted name
    # called, ``self.q``, or ""). Two positions with no site in common hold separate
    # graphs (``forward`` returning ``q = self.q(cat(x, a))`` and ``q_pi = self.q(cat(x,
    # pi))``): a backward through one frees nothing the other needs
    returns_sites: Tuple[Tuple[Tuple[int, int, str], ...], ...] = ()
    # a backward it makes whenever it runs (a statement of its own body, keeping no graph)
    # reaches part of a graph built inside that it returns (a ``forward`` that calls
    # ``loss.backward()`` and returns ``(loss, logits)``): the caller's value is freed
    frees_returned: bool = False
    # ... or, where it returns a tuple and such a backward reaches the graphs of only some
    # of its positions, those positions (RN's ``process()`` returning the discriminator's
    # loss it back-propagated beside the generator's it did not)
    frees_positions: Tuple[int, ...] = ()
    # ... and the part of the returned graph that backward reaches saved tensors inside (a
    # ``F.cross_entropy`` of the def's own): a second backward of the returned value surely
    # fails (R-Drop's ``forward_reg`` running ``optimizer.backward(loss)`` and returning ``loss``)
    frees_returned_saving: bool = False

    def argument(self, i: int, positional: Sequence, keywords: Mapping, default: Any = None) -> Any:
        """What a call passes for parameter ``i``: its i-th positional argument,
        else the keyword argument of that parameter's name, else ``default``.
        For the ``*args`` parameter (``vararg``), all the positional arguments from there on."""
        if self.vararg and i == len(self.params) - 1:
            rest = list(positional[i:])
            if not rest:
                return default
            if all(isinstance(v, Val) for v in rest):
                return plain(frozenset().union(*(v.taints for v in rest)))
            return frozenset().union(*rest) if all(isinstance(v, frozenset) for v in rest) else rest[0]
        if i < len(positional):
            return positional[i]
        if i < len(self.params) and self.params[i] in keywords:
            return keywords[self.params[i]]
        return default


@record
class ClassFacts:
    """Facts about a same-file class: raw dotted base names, ``self.<attr> = Ctor(...)``
    constructors (raw dotted names), method facts, and a few derived flags."""

    bases: Tuple[str, ...] = ()
    attrs: Tuple[Tuple[str, str], ...] = ()
    methods: Tuple[Tuple[str, FnFacts], ...] = ()
    has_forward: bool = False
    has_init_hidden: bool = False
    forward_detaches_hidden: bool = False
    # (method, attrs it resets or detaches: self.x = None / zeros / self.x.detach())
    cuts: Tuple[Tuple[str, FrozenSet[str]], ...] = ()
    # state forward keeps on the module from one call into the next, still on the
    # call's graph (``out, self.hidden = self.lstm(x, self.hidden)``):
    # (``"self.hidden"``, shape: "tuple" | "tensor" | "unknown", may it be None)
    carried: Tuple[Tuple[str, str, bool], ...] = ()
    # state forward keeps on the module from what it is given and its own last value,
    # and returns (``self.mem = self.beta * self.mem + x; return spike(self.mem)``):
    # with a graph in its input, that graph reaches the next call (a stateful neuron)
    keeps_input: Tuple[str, ...] = ()
    # ... those of them no method reads in training mode (only under ``if not
    # self.training:`` or its else, besides their own update): a batch norm's running
    # statistics. A loop running the module in training mode gets nothing from them
    eval_read: Tuple[str, ...] = ()
    # state forward keeps on the module across calls and hands back as it is on a
    # later call (a cache: ``if self.cache is not None: return self.cache ...
    # self.cache = x``), still on the graph of the call that stored it:
    # (``"self.cache"``, what is stored (graph built inside / parameters it holds),
    # the constructor arguments the caching path needs true: ((attribute, parameter,
    # index, default true?), ...), is it None before the first call, its shape for a
    # detach: "tensor" | "tuple" | "unknown")
    cached: Tuple[Tuple[str, RetPos, Tuple[Tuple[str, str, int, bool], ...], bool, str], ...] = ()
    # modules kept on the object that keep state of their own between calls (a
    # stateful neuron: ``self.lif1 = snn.Leaky(beta=.9, init_hidden=True)``, or one
    # inside ``self.net = nn.Sequential(...)``), called by forward: (attribute, raw
    # constructor, its keyword arguments given as True, is its input built with a
    # graph here (a layer with parameters before it), forward's parameters that
    # flow into its input). Which constructors keep state is the knowledge table's
    # (or the class's own facts), asked where the import table is known.
    members: Tuple[Tuple[str, str, FrozenSet[str], bool, FrozenSet[int]], ...] = ()
    # methods that reset or detach the state of the modules it holds (a call named
    # like a reset, ``functional.reset_net(self)`` in ``def reset_(self)``)
    resetting: FrozenSet[str] = EMPTY
    # (method, ("self.h", ...)): state a method (forward or any other) rebuilds on the
    # object from its own last value with a graph that surely saved tensors and that
    # reaches what it returns (``out, self.h = self.lstm(f, self.h)`` in
    # ``forward_cnnlstm``): a second call of it on the same object runs into the first
    # call's graph (``GraphFlow._method_state``)
    kept: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    # methods that may reset or replace that state (assign it, cut it in place, or
    # call a method of the class that does): a call of one between two calls forgets it
    kept_resets: FrozenSet[str] = EMPTY
    # methods named like a reset (``reset_states``) that only refill state in place
    # (``buffer.zero_()``, ``nn.init.uniform_(buffer)``): an in-place op keeps the
    # tensor's history, so the graph the state held stays attached (sinabs issue 5)
    inplace_resets: FrozenSet[str] = EMPTY
    # ... and those that only call the same method on other modules (``for m in
    # self.modules(): m.reset_states()``): they keep the graph when every module's does
    dispatch_resets: FrozenSet[str] = EMPTY
    # methods called without an instance (``@staticmethod``, ``@classmethod``): a call
    # through the class (``Model.repackage(h)``) hands its arguments to their parameters
    unbound: FrozenSet[str] = EMPTY
    # ``__init__`` freezing the object's own parameters (``for p in self.parameters():
    # p.requires_grad = False``), as a statement it always runs (("", -1, False)) or
    # under ``if not <flag>:`` of a parameter of its: (flag, its position after
    # ``self``, is its default falsy). A constructor call that surely takes that path
    # (``Vgg16(requires_grad=False)``) makes a frozen module
    init_freezes: Tuple[Tuple[str, int, bool], ...] = ()
    # ``__init__`` keeping on the object what a module it was handed computes
    # (``self.weights = model.encode_text(self.texts)``, ``model`` a parameter, or
    # ``self.clip = model`` first), at its top level and outside ``no_grad``, an
    # attribute forward reads and no other method stores: (attribute, the parameter's
    # position after ``self``, its name, the method called: "forward" for a call of the
    # module itself; position -1 and the class's name for a module ``__init__`` builds
    # itself, ``self.clip = TextTower()``); none where ``__init__`` freezes anything
    # itself. A construction handing a module that trains
    # there builds, once, a graph every call of the object reads (lang-seg, CITE)
    init_graphs: Tuple[Tuple[str, int, str, str], ...] = ()

    def kept_by(self, method: str) -> Tuple[str, ...]:
        for m, keys in self.kept:
            if m == method:
                return keys
        return ()

    def methods_cutting(self, attr: str) -> FrozenSet[str]:
        return frozenset(m for m, attrs in self.cuts if attr in attrs)

    def attr(self, name: str) -> _Opt[str]:
        for k, v in self.attrs:
            if k == name:
                return v
        return None

    def method(self, name: str) -> _Opt[FnFacts]:
        for k, v in self.methods:
            if k == name:
                return v
        return None


@record(frozen=False)
class BackwardEvent:
    call: ast.Call  # the backward() (or the call of a helper that back-propagates)
    loss: Val
    retain: bool
    in_loop: bool = False  # inside a loop of the unit (then the loop analysis owns it)
    # graphs the loss reaches that a backward before it surely freed on every path
    # (and that saved tensors): ``("X", ("G", node), call)`` as in :data:`FREED`
    stale: FrozenSet = EMPTY
    # a call of an own method run in place (GraphFlow._inline): the graph tokens its
    # backward calls surely free whenever it runs (those that run unconditionally and
    # keep no graph); None for a backward() itself (its loss, unless it retains)
    sure: _Opt[FrozenSet] = None
    # (deep mutual learning) the graphs of a list built before the loop this backward
    # runs in, every element of which its loss reads in each iteration: ((the read of
    # an element by another loop's index, ``outputs[j]``; the node that built the
    # elements' graph; the loop), ...). The first iteration's backward frees them all,
    # the second's runs into them.
    # (``for j, peer in enumerate(outputs)``: each read of ``peer``), and the list's dotted name
    peers: Tuple[Tuple[ast.AST, ast.AST, ast.stmt, str], ...] = ()
    # ``torch.autograd.grad(outputs, inputs)``: the graph and leaf tokens of ``inputs``
    # (only the part of the graph between the outputs and them is run); None otherwise
    inputs: _Opt[FrozenSet] = None


@record(frozen=False)
class CalleeLoop:
    """A call of a function whose own loop back-propagates (``FnFacts.loop_backward``,
    ``loop_delegates``): ``loss`` holds what the arguments passed there bring into that
    loop's backward; ``entry`` is what each name held at the call (the graphs built
    before the loop, as ``GraphFlow.loop_entries`` has them for a loop of the unit)."""

    call: ast.Call
    loss: Val
    entry: Dict[str, Val]


@record(frozen=False)
class LoopFrame:
    loop: ast.stmt
    second: bool = False  # pass 2: carried values seeded
    backprop: bool = False
    reached: set = Factory(set)  # G tokens some backward traversed (pass 1)
    freed: set = Factory(set)  # G tokens of graphs a helper built and back-propagated inside
    hits: Dict[Tuple, BackwardEvent] = Factory(dict)  # C token → first event
    # (pass 2 of a loop whose previous iteration freed graphs built before it) the freed
    # graph tokens the walk may prove stale; None: no staleness proof on this pass
    stale_from: _Opt[FrozenSet] = None


@record(frozen=False)
class Carry:
    """A value carried into the next iteration of ``loop`` that reaches a backward."""

    loop: ast.stmt
    names: Tuple[str, ...]  # variables (several when a tuple is unpacked: h, c)
    site: ast.stmt  # the assignment that leaves it with a graph
    built_by: _Opt[ast.AST]  # where that graph is built
    event: BackwardEvent  # the backward that fails
    missing: Tuple[int, ...]  # tuple state: the elements still attached (() = whole value)
    arity: _Opt[int]  # tuple arity of the carried state, if known
    entry: Dict[str, Val]  # values before the loop (for fixes)
    end: Dict[str, Val]  # values at the end of an iteration


def describes_backward(value: object) -> bool:
    """Does a fact value say its code back-propagates: a :class:`FnFacts` that
    calls a backward, or a :class:`ClassFacts` with such a method? (The engine asks
    it of imported facts, GG201 of the file's own.)"""
    if getattr(value, "calls_backward", False):  # FnFacts
        return True
    methods = getattr(value, "methods", None)  # ClassFacts
    return isinstance(methods, tuple) and any(getattr(m, "calls_backward", False) for _, m in methods)


def state_shape(torch_class: _Opt[str]) -> str:
    """"tuple" | "tensor" | "unknown": the state a torch module of this class
    returns beside its output (an LSTM's ``(h, c)``, a GRU's ``h``)."""
    if torch_class in K.LSTM_LIKE:
        return "tuple"
    return "tensor" if torch_class and K.is_recurrent(torch_class) else "unknown"


def loop_globals_of(lookup, facts: FnFacts, depth: int = 0) -> FrozenSet[str]:
    """The module-level names a call of the function described by ``facts``
    back-propagates in a loop: its own loops' (``loop_backward_globals``), and every
    global a function its loops call back-propagates (``backward_globals``), through
    such calls three deep. ``lookup(name)``: a same-module function's facts or None."""
    out = set(facts.loop_backward_globals)
    if depth < 3:
        for name in facts.loop_calls:
            inner = lookup(name)
            if isinstance(inner, FnFacts) and not inner.no_grad:
                out.update(inner.backward_globals)
                out |= loop_globals_of(lookup, inner, depth + 1)
    return frozenset(out)


def held_modules(lookup, ctor: str, depth: int = 3) -> Tuple[Tuple[str, str], ...]:
    """The user's modules an instance of ``ctor`` holds and its ``forward`` calls
    (``ClassFacts.members``, which leaves out a member forward resets), through the
    modules they hold in turn, ``depth`` deep: ``(path under the instance, raw
    constructor)``, ``("recurrent", "EvolveGCNO")`` for a ``RecurrentGCN`` whose forward
    calls ``self.recurrent(x, adj)``. ``lookup(raw)``: a class's facts or None."""
    out: list = []
    seen = {ctor}
    todo = [("", ctor)]
    for _ in range(depth):
        nxt = []
        for prefix, raw in todo:
            cf = lookup(raw)
            if not isinstance(cf, ClassFacts):
                continue
            for attr, member, _, _, _ in cf.members:
                if member in seen:
                    continue
                seen.add(member)
                path = prefix + attr
                out.append((path, member))
                nxt.append((path + ".", member))
        todo = nxt
        if not todo:
            break
    return tuple(out)


def globals_freed_by_call(lookup, facts: FnFacts) -> FrozenSet[str]:
    """The module-level names a call of the function described by ``facts`` frees the
    graph of: those its own backward calls reach (``backward_globals``) and those its
    loops back-propagate (:func:`loop_globals_of`). ``lookup`` as there."""
    if not facts.backward_globals and not facts.loop_calls:
        return EMPTY
    return frozenset(facts.backward_globals) | loop_globals_of(lookup, facts)


@record(compare=("name", "kind"))
class Source:
    """Where a graph starts, in a finding's words: a leaf that requires grad or a
    module whose call began the graph (:func:`gradguard.analysis.interpreter.graph_sources`).
    Two sources of one name and kind are one (compared by ``name`` and ``kind``)."""

    name: _Opt[str]  # "X", "w", "encoder", "lin.weight", "model.parameters()"; None for an inline factory call
    kind: str  # "data" (a tensor made to require grad), "param" (a module's parameter), "module"
    stmt: _Opt[ast.stmt] = None  # the statement that made it
    node: _Opt[ast.AST] = None  # where it was made (the call, the attribute, the function's parameter)
    # how to drop requires_grad from a data leaf: ("kw", keyword node, call node), or
    # ("method", call node) for a ``.requires_grad_()`` suffix; None where it cannot be
    removal: _Opt[tuple] = None
    order: int = 0
