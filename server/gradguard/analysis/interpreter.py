"""The graph-lifetime interpreter: :class:`GraphFlow` runs over one unit and
records where graphs are built, which backward frees them and what a loop carries
into its next iteration (GG101 and GG103 report from it; GG102 still has its own,
see ``rules/gg102_stale_graph/`` and ``tests/test_gg102_trace.py``). :class:`Resolver`
says what names mean.
"""

from __future__ import annotations

import ast
import re

from gradguard.analysis import knowledge as K
from gradguard.analysis.ast_util import DEFAULT_ALIASES, LOOPS, applies_cut, backward_target, block_nodes, dotted, has_create_graph, inplace_cut_target, is_graph_cut, keeps_graph, is_backward_call, is_no_grad_with, iter_nodes, iter_statements, qualify, surely_frees, target_names, child_blocks, parameters, is_no_grad_function
from gradguard.analysis.ast_util import frozen_by_loop, walk_all
from gradguard.analysis.summary import query
from gradguard.analysis.values import FREED, BackwardEvent, held_modules, _bound, CLEAN, CONST, CalleeLoop, Carry, ClassFacts, EMPTY, FnFacts, LoopFrame, NONE, RetPos, Val, _with, freed_set, join, join_env, globals_freed_by_call, meet_freed, plain, Source, tup, unsure
from gradguard.model.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (no typing import on the CLI's start-up path)
    from typing import Callable, Iterator, List, Mapping, Sequence, Any, Dict, FrozenSet, Iterable, Tuple, Optional as _Opt


_RECURRENT_SHORT = {q.rsplit(".", 1)[-1] for q in K.RECURRENT_MODULES | K.RECURRENT_CELLS}


class Resolver:
    """What names mean. The base class knows torch (through ``ctx`` import aliases
    or the default ones); :class:`gradguard.rules` subclass it to add same-file facts."""

    def __init__(self, ctx=None, summary: _Opt[Mapping[str, Any]] = None, local_aliases=None):
        self.ctx = ctx
        self.summary = summary if summary is not None else (getattr(ctx, "summary", None) or {})
        self.local_aliases = local_aliases or {}
        self._module_names: _Opt[FrozenSet[str]] = None

    def qualify(self, expr: ast.AST) -> _Opt[str]:
        return qualify(expr, self.ctx, self.local_aliases)

    def qualify_raw(self, raw: str) -> str:
        head, _, rest = raw.partition(".")
        imports = getattr(self.ctx, "imports", None) or {}
        full = imports.get(head) or self.local_aliases.get(head) or (DEFAULT_ALIASES.get(head) if head not in imports else None)
        if full is None:
            return raw
        return f"{full}.{rest}" if rest else full

    @staticmethod
    def torch_class(q: _Opt[str]) -> _Opt[str]:
        """Normalise a qualified class name to a torch.nn class, with a bare-name
        fallback for the recurrent ones (``GRU`` from an unseen import)."""
        if not q:
            return None
        if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper():
            return q
        if "." not in q and q in _RECURRENT_SHORT:
            return "torch.nn." + q
        return None

    def imported_module_names(self) -> FrozenSet[str]:
        """The last parts of the dotted ``fn:``/``class:`` names the summary holds
        (``repackage_hidden`` of ``fn:utils.repackage_hidden``): a cheap test before
        a method call is looked up as a module's function. A summary query."""
        names = self._module_names
        if names is None:
            names = self._module_names = query(self.summary, _dotted_def_names)
        return names

    def rebound(self, name: str) -> bool:
        return rebound(self.summary, name)

    # -- same-file facts ------------------------------------------------
    def fn(self, name: str) -> _Opt[FnFacts]:
        v = self.summary.get("fn:" + name)
        return v if isinstance(v, FnFacts) else None

    def cls(self, name: str) -> _Opt[ClassFacts]:
        v = self.summary.get("class:" + name)
        if v is None and "." in name:
            # neuron.IFNode where ``class neuron: IFNode = IFNode`` names a class of
            # this file in a namespace class (the ``alias:`` facts)
            alias = self.summary.get("alias:" + name)
            if isinstance(alias, str):
                v = self.summary.get("class:" + alias)
        return v if isinstance(v, ClassFacts) else None

    def global_obj(self, name: str, _depth: int = 0) -> _Opt[str]:
        """Object descriptor for a module-level name seen from a unit."""
        if self.cls(name) is not None:
            return "ucls:" + name
        if self.fn(name) is not None:
            return "fn:" + name
        raw = self.summary.get("var:" + name)
        if isinstance(raw, str):
            return self.ctor_obj(raw)
        wrapped = self.summary.get("wrap:" + name)
        if isinstance(wrapped, str) and wrapped != name and _depth < 4:
            # para_model = nn.DataParallel(model) at module level: calling the
            # wrapper runs the model (DataParallel, DDP, torch.compile, prepare)
            return self.global_obj(wrapped, _depth + 1)
        return None

    def ctor_obj(self, raw: str, _depth: int = 0) -> _Opt[str]:
        """What calling the (raw dotted) constructor ``raw`` gives."""
        q = self.qualify_raw(raw)
        tc = self.torch_class(q)
        if tc:
            return "inst:" + tc
        if self.cls(raw) is not None:  # a dotted name only when resolved from `import m`
            return "user:" + raw
        f = self.fn(raw)
        if f is not None and f.makes and f.makes != raw and not f.calls_backward and _depth < 3:
            # model = resnet32(): a function of this file that returns what a constructor made
            made = self.ctor_obj(f.makes, _depth + 1)
            return made if made is not None and made.startswith("user:") else None
        return None

    def is_module_class(self, name: str, _depth: int = 0) -> bool:
        cf = self.cls(name)
        if cf is None or _depth > 5:
            return False
        if cf.has_forward:
            return True
        for b in cf.bases:
            q = self.qualify_raw(b)
            if q in K.MODULE_BASES or (q.startswith("torch.nn.") and q[9:10].isupper()):
                return True
            if "." not in b and self.is_module_class(b, _depth + 1):
                return True
        return False

    def attr_obj(self, obj: _Opt[str], attr: str) -> _Opt[str]:
        if obj and obj.startswith("user:"):
            cf = self.cls(obj[5:])
            if cf is not None:
                raw = cf.attr(attr)
                if raw:
                    return self.ctor_obj(raw)
        return None

    def state_names(self, raw: str, keywords: FrozenSet[str]) -> Tuple[str, ...]:
        """The attributes in which a module made by the (raw dotted) constructor
        ``raw`` with these keywords given True keeps state between calls: a library
        neuron of the knowledge table (``snn.Leaky(..., init_hidden=True)``: mem), or
        a class of the user's whose forward rebuilds state on ``self`` from its input
        and its last value (``ClassFacts.keeps_input``). () for anything else."""
        q = self.qualify_raw(raw)
        on = K.STATEFUL_LIBRARY_MODULES.get(q, False)
        if on is not False:
            if on is None or on in keywords:
                return (K.STATE_ATTRIBUTES.get(q.split(".", 1)[0], "state"),)
            return ()
        cf = self.cls(raw)
        if cf is not None and cf.keeps_input and not cf.carried:
            return tuple(k[5:] for k in cf.keeps_input)
        return ()

    def member_states(self, raw: str, keywords: FrozenSet[str],
                      _depth: int = 0) -> Tuple[Tuple[str, bool, bool, str], ...]:
        """The states a module made by ``raw`` keeps between calls, as paths under it:
        ``(path, is the state's input built with a graph inside the module, does the
        module's input reach it, the constructor of the module holding it)``. Its own
        (:meth:`state_names`: ``mem``), or, for a class of the user's that keeps none
        itself, those of the modules it holds and calls (``ClassFacts.members``), one
        module deeper each (``lif.mem`` of a ``Block`` whose forward calls ``self.lif``)."""
        names = self.state_names(raw, keywords)
        if names:
            return tuple((n, False, True, raw) for n in names)
        cf = self.cls(raw) if _depth < 3 else None
        if cf is None:
            return ()
        out: List[Tuple[str, bool, bool, str]] = []
        if cf.cached:
            # a module it holds keeps a cache (``ClassFacts.cached``) that needs no flag of
            # its constructor: filled by the first call, handed back by every later one
            out.extend((key[5:], stored.graph, bool(stored.params), raw)
                       for key, stored, needs, _, _ in cf.cached if not needs)
        if not cf.members:
            return tuple(out)
        for attr, inner, kws_on, graph, params in cf.members:
            for path, built, through, holder in self.member_states(inner, kws_on, _depth + 1):
                out.append((f"{attr}.{path}", built or (graph and through), through and bool(params), holder))
        return tuple(out)

    def parametrized(self, raw: str) -> bool:
        """Does a call of a module made by ``raw`` (a class of this file) compute a
        parametrized tensor: its class, or a module it holds and calls, registers one
        (``parametrized:`` facts)?"""
        def short(name: str) -> str:
            return name.rsplit(".", 1)[-1]
        if self.summary.get("parametrized:" + short(raw)) is True:
            return True
        return any(self.summary.get("parametrized:" + short(m)) is True
                   for _, m in held_modules(lambda r: self.cls(short(r)), raw))

    def reset_keeps_graph(self, raw: str, method: str, _depth: int = 0) -> bool:
        """Does calling ``method`` (named like a reset) on an object of the same-file
        class ``raw`` leave the graphs its state holds attached? Yes when the method
        (the class's own, or the first base's of this file defining it) only refills
        tensors in place (``ClassFacts.inplace_resets``: ``buffer.zero_()``), or only
        calls the same method on the modules it holds (``dispatch_resets``) and every
        one of those that is a class of this file... does too, with none of another
        library's among them. An in-place op keeps a tensor's history (sinabs issue 5)."""
        cf = self.cls(raw) if _depth < 4 else None
        if cf is None:
            return False
        if cf.method(method) is None:
            for b in cf.bases:
                base = self.cls(b)
                if base is not None and (base.method(method) is not None or base.bases):
                    return self.reset_keeps_graph(b, method, _depth + 1)
            return False
        if method in cf.inplace_resets:
            return True
        if method not in cf.dispatch_resets:
            return False
        found = False
        for attr, ctor in cf.attrs:
            q = self.qualify_raw(ctor)
            if q.startswith("torch.") or ctor.startswith(("nn.", "torch.")):
                continue  # torch's own modules have no such method (an isinstance test skips them)
            sub = self.cls(ctor)
            if sub is None:
                return False  # another library's module: what its reset does is unknown
            if not self._defines(ctor, method):
                continue
            if not self.reset_keeps_graph(ctor, method, _depth + 1):
                return False
            found = True
        return found

    def holds_layer(self, name: str, _depth: int = 0) -> bool:
        """Does the user's class ``name`` (or a base of the user's) keep a layer
        (``self.fc = nn.Linear(...)``: a constructor named as a class, not a
        parameter and not a module that saves nothing), so that calling it saves tensors?"""
        cf = self.cls(name)
        if cf is None or _depth > 5:
            return False
        for _attr, raw in cf.attrs:
            last = raw.rsplit(".", 1)[-1]
            if last[:1].isupper() and not last.startswith("Parameter") and last not in K.NONSAVING_MODULES:
                return True
        return any("." not in b and self.holds_layer(b, _depth + 1) for b in cf.bases)

    def _defines(self, raw: str, method: str, _depth: int = 0) -> bool:
        cf = self.cls(raw) if _depth < 4 else None
        if cf is None:
            return False
        return cf.method(method) is not None or any(self._defines(b, method, _depth + 1) for b in cf.bases)

    def method_facts(self, obj: _Opt[str], name: str) -> _Opt[FnFacts]:
        if obj and obj.startswith("user:"):
            cf = self.cls(obj[5:])
            if cf is not None:
                got = cf.method(name)
                if got is None and cf.bases and name != "forward":
                    # a method a base class of the file defines (edge-connect's EdgeModel
                    # running BaseModel.backward()); forward keeps its own, older reading
                    got = self._inherited(cf, name, 0)
                return got
        return None

    def _inherited(self, cf: ClassFacts, name: str, depth: int) -> _Opt[FnFacts]:
        for b in cf.bases:
            base = self.cls(b) if "." not in b and depth < 4 else None
            if base is None:
                continue
            got = base.method(name) or (self._inherited(base, name, depth + 1) if base.bases else None)
            if got is not None:
                return got
        return None


def rebound(summary: Mapping[str, Any], name: str) -> bool:
    """Is the module-level ``name`` an object made by a call (``model =
    model.RNNModel(...)``), not the module it was imported as?"""
    return ("var:" + name) in summary or ("inst:" + name) in summary


def _hooked_names(summary) -> Dict[str, str]:
    """{module-level name: the function of this file registered as a forward hook on it
    or a part of it} over the ``hook:`` facts. A summary query."""
    return {k[5:]: v for k, v in summary.items() if k.startswith("hook:") and isinstance(v, str)}


def _dotted_def_names(summary) -> FrozenSet[str]:
    return frozenset(k.rpartition(".")[2] for k in summary
                     if "." in k and k.startswith(("fn:", "class:")))


# How deep summaries are composed through chains of helpers (FnFacts.delegates and
# loop_delegates): train_epoch -> train_step -> backward is depth 2.
DELEGATION_DEPTH = 4
# How deep a driver's own methods are run in place (GraphFlow._inline): a driver
# calling backward_G() calling self._gan_loss() is depth 2.
INLINE_DEPTH = 3


def _non_graph_library(name: _Opt[str]) -> bool:
    """A (qualified or conventionally aliased) name in a library that never
    returns a tensor with a graph (``numpy.roll``, ``np.roll``)."""
    if not name:
        return False
    root = name.split(".", 1)[0]
    return root in K.NON_GRAPH_LIBRARIES or root in K.NON_GRAPH_ALIASES


def _param_set(v: Val) -> FrozenSet[int]:
    """The parameters (``("P", i)`` tokens) a value carries, while summarising a def."""
    return frozenset(t[1] for t in v.taints if t[0] == "P")


_CLEAN_BUILTINS = frozenset(
    {"len", "range", "print", "isinstance", "issubclass", "int", "float", "bool", "str", "repr", "hasattr",
     "callable", "id", "type", "format", "open", "round", "hash", "divmod", "ord", "chr", "input", "super"}
)
_BUILTIN_NAMES = frozenset(dir(__import__("builtins")))
# GraphFlow._saves's tokens: an operation that built the value saves tensors for backward
# (one token for all), and the words of one that cannot be told, for a call, written out on demand
SAVES = ("K", None)
_CALL_WORDS = "<the call>"
_MODULE_WORDS = "<the module>"
# an operator's symbol, for GG102's words about it (``_saves``)
def _tensor_test(test: ast.expr) -> bool:
    """``isinstance(h, torch.Tensor)`` or ``torch.is_tensor(h)``."""
    if test.__class__ is not ast.Call:
        return False
    f = test.func
    args = test.args
    if f.__class__ is ast.Name and f.id == "isinstance":
        return len(args) == 2 and (dotted(args[1]) or "").rsplit(".", 1)[-1] == "Tensor"
    return len(args) == 1 and (dotted(f) or "").endswith("torch.is_tensor")


_OPS = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "Pow": "**", "MatMult": "@", "FloorDiv": "//", "Mod": "%"}
# the legacy typed tensor constructors: torch.FloatTensor, torch.cuda.LongTensor, torch.Tensor
_LEGACY_TENSOR_TYPE = re.compile(
    r"torch\.(?:cuda\.)?(?:Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool)?Tensor")
_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel",
                       "torch.nn.parallel.DataParallel", "torch.compile", "torch.jit.script"})
# callables handed a lambda that do not return what it makes of their data
_NOT_MAPPING = frozenset({"sorted", "sort", "min", "max", "filter", "register_hook", "register_forward_hook",
                          "register_forward_pre_hook", "register_full_backward_hook", "partial", "defaultdict",
                          "Thread", "Process", "add_done_callback", "LambdaLR", "MultiplicativeLR", "LambdaLayer",
                          "Lambda", "setdefault", "get", "groupby", "lru_cache", "cached", "apply_async"})
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "state_dict", "modules", "children", "buffers",
                             "zero_grad", "load_state_dict", "apply", "register_buffer", "flatten_parameters",
                             "named_modules", "register_forward_hook"})
_SELF_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half", "bfloat16",
                           "requires_grad_", "share_memory", "type"})


@record(frozen=False, eq=False)
class Unverified:
    """A value that may carry its graph into the next iteration's backward, on a
    path one link of which is unknown (``why``: the expression, ``kind``: see
    :meth:`GraphFlow._unsure`): no error can be proven, a note may be given."""

    loop: ast.stmt
    name: str
    site: ast.stmt
    why: ast.AST
    kind: str
    event: BackwardEvent


_NOT_INVARIANT = (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda,
                  ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _reads_unchanged(expr: ast.expr, changed: FrozenSet[str], self_attrs_fixed: bool) -> bool:
    """Does ``expr`` read only names and dotted attributes not in ``changed``, through
    no call but one of a plain name, and nothing that binds or defers (a walrus, a
    lambda, a comprehension)? With ``self_attrs_fixed``, an attribute of ``self`` not
    in ``changed`` is taken as it stands (its subtree is not looked into)."""
    todo: List[ast.AST] = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                return False
        elif isinstance(node, ast.Name):
            if node.id in changed:
                return False
        elif isinstance(node, ast.Attribute):
            d = dotted(node)
            if d is None or d in changed:
                return False
            if self_attrs_fixed and d.startswith("self."):
                continue
        elif isinstance(node, _NOT_INVARIANT):
            return False
        todo.extend(ast.iter_child_nodes(node))
    return True


class GraphFlow:
    """Run the taint interpreter over one unit.

    After :meth:`run`, ``carries`` lists GG101 candidates, ``events`` the backward
    events (outside loops too) and ``returns`` the returned values (for summaries)."""

    # token kinds a subclass marks containers with that a read of one element keeps
    # (:meth:`_own_element` gives only the element: GG201's accumulation marks say the
    # list was read)
    element_marks: FrozenSet[str] = EMPTY

    def __init__(self, resolver: Resolver, no_grad: bool = False, self_obj: _Opt[str] = None,
                 track_self_state: bool = False, find_carries: bool = True, unverified: bool = False,
                 methods: _Opt[Mapping[str, ast.AST]] = None):
        self.r = resolver
        # a module's top-level statements: a call of one of its functions back-propagates
        # the module-level names that function reads (``FnFacts.backward_globals``)
        self.module_level = False
        # also find the carries a link of which is unknown (U tokens: an unsummarised
        # callee's result, a part of a container whose parts differ): ``self.unverified``
        self.explain_unknown = unverified
        self.unverified: List[Unverified] = []
        # the node of a graph made unsure -> (the expression that made it so, why)
        self.unsure_why: Dict[Any, Tuple[ast.AST, str]] = {}
        self.unsure_at: Dict[int, Tuple[ast.AST, str]] = {}  # id(expression) -> (it, why)
        # the defs of the unit's own class (one chunk with the unit: reading them keeps
        # a unit's findings cacheable), run in place where a driver calls them (_inline)
        self.methods = methods or {}
        self._inlining: List[str] = []
        self._drives = False
        # (a class's summary) run the ``methods`` a forward calls on ``self`` in place, as a
        # driver's: what a ``self.build()`` stores on the object is forward's store
        # (``ClassFacts.cached`` filled lazily by another method)
        self.inline_setters = False
        # id(call) of a construction of a class of the user's whose ``__init__`` kept what
        # a trained module it was handed computed (``_user_object``): the object holds that graph
        self.made_holding: set = set()
        # id(call) of an own method run in place -> the attributes it left holding a
        # graph it built (``self.forward()`` -> ``("self.fake_B",)``), for messages
        self.sets_by_call: Dict[int, Tuple[str, ...]] = {}
        # id(parameter) -> (parameter, the method of the same object whose result the
        # file's callers pass in, the self.<module> calls that saved its weights in it)
        self.entry_graphs: Dict[int, Tuple[str, str, FrozenSet[str]]] = {}
        # id(call) of an own method run in place -> the self.<module> calls that built,
        # and saved tensors in, the graphs it left on self (``self.forward()`` -> netG)
        self.modules_by_call: Dict[int, FrozenSet[str]] = {}
        # ... per attribute it left: ((attribute, those modules, does a graph reach it from
        # elsewhere: their input, another operation), ...), sorted
        self.modules_by_attr: Dict[int, Tuple[Tuple[str, FrozenSet[str], bool], ...]] = {}
        # while summarising: parameters autograd.grad differentiates against as given
        self.grad_params: set = set()
        # summaries only need returns and backward events: one walk per loop body
        self.find_carries = find_carries
        # mark ``self.x`` read before any assignment with ("A", "self.x"): a value
        # the object kept from a previous call (stateful modules)
        self.track_self_state = track_self_state
        # record ("B", stmt) tokens: each statement that bound a value carrying a graph
        # (what GG102's fixes move, detach or wrap; GraphFlow.built_by)
        self.build_stmts = False  # (BuildFlow: True)
        # (build_stmts runs) the names the unit uses as modules (``ast_util.module_names``),
        # asked only where a call of a name it cannot type builds on a graph
        self.module_evidence: _Opt[Any] = None
        # (build_stmts runs) the names' values at a module-level call of a function whose
        # loop back-propagates globals it reads (FnFacts.loop_backward_globals), by id(call);
        # and what the unit leaves when it ends (rules.common.unit_trace sets it)
        self.call_entries: Dict[int, Dict[str, Val]] = {}
        self.exit_env: _Opt[Dict[str, Val]] = None
        self.no_grad = 1 if no_grad else 0
        self.self_obj = self_obj
        self.frames: List[LoopFrame] = []
        self.carries: List[Carry] = []
        self._carried_keys: set = set()
        self.events: List[BackwardEvent] = []
        # ids of ``obj.backward(loss)`` calls of a wrapper class of the user's whose own
        # ``backward`` method back-propagates its argument: spelled like a backward, run
        # like a helper (no ``retain_graph=`` can be added to the call)
        self.wrapper_backwards: set = set()
        # id(loop) -> what each name held when the loop was first entered: the graphs
        # built before it (GG102's question: which of them does a backward in it free?)
        self.loop_entries: Dict[int, Dict[str, Val]] = {}
        # a def nested in the body run, by name (a call of it is read by its summary), and
        # its summary once asked
        self.local_defs: Dict[str, ast.AST] = {}
        self._local_facts: Dict[int, FnFacts] = {}
        # ids of the calls whose graph node surely saves tensors for backward: module
        # forwards and the torch functions that save (GG103 needs certainty, not "may")
        self.saving_calls: set = set()
        # id(node) -> the leaf tokens ("L", where the leaf was made) that met at the op the graph ("G", node) starts at
        self.leaf_of: Dict[int, FrozenSet] = {}
        # ids of the calls whose ("G", call) is assumed, not proven: while summarising a
        # def, a callable or an attribute of an object it cannot see into
        # (``parser = ArgumentParser()``, ``self.clip_range(progress)``), which may be a
        # module whose output carries a graph, or any object at all; in a unit, the call
        # of a function whose summary says its graph is only that (``RetPos.assumed``).
        # :meth:`tensor_graphs` leaves them out. (A unit's own untyped callables are not
        # marked where the unit uses the name as a module, ``m.parameters()``.)
        self.opaque: set = set()
        self.opaque_via: Dict[int, str] = {}  # (summarising) id(call) of those that call a module-level name -> it
        # (summarising) id(call) of a call of a parameter on a graph built inside (``d(gz)``
        # with ``gz = g(z)``) -> that parameter's index: a module handed in there saved its
        # weights for the backward (RetPos.called)
        self.param_calls: Dict[int, int] = {}
        # (summarising) k -> the call of a module of another class's (``self.discriminator(x)``)
        # whose result is ("R", k, ...): FnFacts.calls[k]
        self.pending_nodes: Dict[int, ast.Call] = {}
        # ids of the calls of a method of the user's whose graph, by its summary, the modules
        # its object holds built (``RetPos.modules``: ``act()`` handing back
        # ``dist.log_prob(action)`` of its actor's output), or that left such a graph in a
        # container it reaches (``ContainerEffect.saving``: ``act(state, memory)``). GG102
        # takes a name holding only such graphs (not a module's forward) for a candidate of its own.
        self.kept_by_method: set = set()
        # ids of the calls whose ("G", call) is the graph a function (or a method) of the
        # user's built itself, by its summary, from nothing its arguments brought
        # (``get_lm_corpus(args.data)``, ``build_model(args)``, a loader a helper
        # returns): GG102 reads such a call as a carrier of its arguments, not as a
        # module's output (:meth:`carried_graphs`); the ones a method's object's modules
        # built (``kept_by_method``) are not among them
        self.fn_made: set = set()
        self._fn_leafy: set = set()  # (those of them a leaf handed in reaches: not marked)
        # calls whose result is a list every element of which holds a part of one graph that
        # saved tensors (RetPos.elems_share): a backward per element frees it for the next
        self.shared_elems: set = set()
        # calls of a function of the file whose graph, by its summary, an operation saving
        # tensors built from an argument or a module-level name requiring grad
        # (RetPos.derived_saving, globals_saving): GG103 counts them as saving_calls
        self.saving_helpers: set = set()
        # name -> the last ``name.requires_grad_(False)`` statement run while it held a graph
        # (not a leaf: the call raises there, and the graph stays)
        self.not_a_leaf: Dict[str, ast.stmt] = {}
        self.returns: List[Val] = []
        # while summarising a def: its ``return x`` statements (ids) that hand back only what is
        # neither a tensor nor a container (``ast_util.untensored_returns``): no graph
        self.untensored_returns: set = set()
        # while summarising a def: calls of module-level functions (FnFacts.delegates)
        self.delegates: List[tuple] = []
        # while summarising a def: calls of methods of classes not seen from here (FnFacts.calls)
        self.calls: List[tuple] = []
        # while summarising a def: which of ``delegates`` were called inside a loop
        self.loop_delegates: List[int] = []
        # calls of functions whose own loop back-propagates what is passed in (CalleeLoop)
        self.callee_loops: List[CalleeLoop] = []
        # ``self.<a>`` lists another method of the object fills with graphs, seeded at entry
        # (``facts.sibling_filled``): GG102 reads them as graphs built before the method
        self.sibling_filled: Dict[str, Val] = {}
        self._via_depth = 0
        self._targets: Tuple[str, ...] = ()  # names assigned by the statement being evaluated
        self._dotted_bases: set = set()
        self._stmt: _Opt[ast.stmt] = None
        self._unit_body: Sequence[ast.stmt] = ()
        self._training: Dict[Tuple[int, str], bool] = {}  # (id(statement), module) -> surely in training mode
        # the branches last taken on each simple condition (see _recall_branches)
        self._branches: Dict[tuple, list] = {}
        # id(last if of an else-less chain) -> names every branch binds (see _mark_invariant_chain)
        self._no_fallthrough: Dict[int, FrozenSet[str]] = {}
        # the truth of the constants the callers pass the unit's parameters (``flag:`` facts)
        self.flags: Dict[str, bool] = {}
        # "auto" / "manual": a framework runs this method in a loop of its own (Lightning's
        # training_step, rules.common.framework_loop_of); the loop the trace puts around
        # the body, and the backward of what it returns ("auto": Lightning's own)
        self.framework_loop: _Opt[str] = None
        self.framework_node: _Opt[ast.stmt] = None
        self.framework_call: _Opt[ast.Call] = None
        # ids of calls of a method whose result's graph saved the weights of modules its
        # object holds (RetPos.modules): an optimizer step changes what it saved
        self.saved_weights: set = set()
        # id(call) of those -> per returned position, the modules whose saved weights it holds
        # (RetPos.modules): which positions of one call share a module's saved tensors (GG103)
        self.returned_modules: Dict[int, Tuple[FrozenSet[str], ...]] = {}
        # ids of calls of one torch ``nn.Linear`` -> whether every walk of the call gave it
        # graph-free input (no taint at all): it then saves its input, not its weight
        self.data_layers: Dict[int, bool] = {}
        # with track_self_state: what each ``self.x`` was assigned, and which were
        # rebuilt from their own last value (see cached_states)
        self._stored: Dict[str, FrozenSet] = {}
        self._rebuilt: set = set()
        # calls of the object's own attributes (``self.lif1(cur)``): (attribute, taints
        # of the arguments), for the class's summary (ClassFacts.members)
        self.member_calls: List[Tuple[str, FrozenSet]] = []
        self._state_keys: set = set()  # the pseudo-variables of _neurons (and of _method_state)
        self._method_state_keys: set = set()  # those of _method_state: never a loop's carry
        # id(call) of a method that keeps state on its module (_method_state) -> the
        # pseudo-variable it leaves its graph in (``self.model.h``), for GG103's words
        self.state_built: Dict[int, str] = {}
        self._freed_keys: Dict[FrozenSet, FrozenSet] = {}  # the last freed set's graphs
        # (see _scan_peers) id(subscript) -> ("E", key, loop, conditioned) for a read of
        # every element of list ``key`` in each iteration of ``loop`` (``outputs[j]``),
        # ("O", key, loop, False) for its own element (``outputs[i]``); loops scanned
        self._peer_reads: Dict[int, Tuple[str, str, ast.stmt, bool]] = {}
        self._peer_scanned: set = set()
        # (_own_element) id(loop) -> the environment it was last entered with; a list's name
        # -> what its last ``append`` put in it
        self._entered: Dict[int, Dict[str, Val]] = {}
        self._appended: Dict[str, Val] = {}
        self._peer_tops: Dict[int, FrozenSet[int]] = {}  # per loop: its body's unconditional statements
        self._root: Sequence[ast.stmt] = ()  # the statements run() was given
        # (for j, peer in enumerate(outputs)) id(the target's ``peer``) -> its reads in the inner loop
        self._peer_names: Dict[int, Tuple[ast.Name, ...]] = {}
        self._peer_graphs: Dict[int, FrozenSet] = {}  # id(subscript) -> the saving graphs it read

    def _framework_loop_of(self, body: Sequence[ast.stmt]) -> ast.stmt:
        """The loop a framework runs the method in (``framework_loop``: Lightning's
        ``training_step``), as a ``while True:`` around its body, placed where the body
        is (a node of no file: only the trace sees it). With automatic optimisation each
        iteration ends with the backward of what the method returns (:meth:`_framework_step`),
        at the last ``return``, and the optimizer's step."""
        loop = ast.While(test=ast.Constant(True), body=list(body), orelse=[])
        ast.copy_location(loop, body[0])
        loop.end_lineno, loop.end_col_offset = body[-1].end_lineno, body[-1].end_col_offset
        self.framework_node = loop
        if self.framework_loop == "auto":
            rets = [s.value for s in iter_statements(body) if isinstance(s, ast.Return) and s.value is not None]
            if rets:
                last = rets[-1]
                call = ast.Call(func=ast.Attribute(value=last, attr="backward", ctx=ast.Load()), args=[], keywords=[])
                self.framework_call = ast.copy_location(call, last)
        return loop

    def _framework_step(self, loop: ast.stmt, n_returns: int, env: Dict[str, Val]) -> None:
        """The end of an iteration of the framework's loop: it back-propagates what the
        method returned on this walk (Lightning's ``loss.backward()``), then steps."""
        call = self.framework_call
        if loop is not self.framework_node or call is None:
            return
        rets = [r for r in self.returns[n_returns:] if r.taints]
        if not rets:
            return
        loss = plain(frozenset().union(*(r.taints for r in rets)))
        # (a training_step that back-propagated its loss itself: the framework's runs into it)
        self._event(call, loss, False, stale=self._stale(loss.taints, env))
        if self.frames and self.find_carries:
            _mark_freed(env, _reached(loss))

    # -- entry points ----------------------------------------------------
    def run(self, body: Sequence[ast.stmt], env: _Opt[Dict[str, Val]] = None) -> Dict[str, Val]:
        env = dict(env or {})
        self._unit_body = body
        if self.framework_loop and body:
            body = [self._framework_loop_of(body)]
        if self.self_obj:
            env.setdefault("self", Val(obj=self.self_obj))
        if self.methods and self.self_obj:
            self._drives = self._drives_own_methods(body)
        if self.track_self_state:
            for s in iter_statements(body):
                if isinstance(s, ast.Global):
                    for n in s.names:
                        env[n] = Val(frozenset({("A", n)}))
        self._root = body
        self.final = self.block(body, env)
        return self.final

    def call_carried_states(self) -> List[Tuple[str, Val, BackwardEvent]]:
        """After :meth:`run`: state kept between CALLS of this unit (``global h`` or
        ``self.h``, entered with an ("A", name) token) that is rebuilt here from its
        previous value with a graph, fed into this unit's own backward (which frees
        that graph), and kept for the next call: the next call's backward crashes."""
        out = []
        for key, v in (getattr(self, "final", None) or {}).items():
            tok = ("A", key)
            if tok not in v.taints:
                continue
            g = v.graph_tokens()
            if not g:
                continue
            for ev in self.events:
                if tok in ev.loss.taints and g & ev.loss.graph_tokens() and not ev.in_loop:
                    out.append((key, v, ev))
                    break
        return sorted(out, key=lambda kv: kv[0])

    def attr_loops(self) -> List[Tuple[str, str, Val]]:
        """After :meth:`run` over a method: the ``self.<a>`` it leaves holding a graph
        that another method of its class back-propagates in a loop of its own, never
        assigning it there (``FnFacts.loop_backward_attrs``): ``__init__`` building the
        targets ``fit`` trains against in every epoch. (attribute, method, value), sorted."""
        cf = self.r.cls(self.self_obj[5:]) if self.self_obj and self.self_obj.startswith("user:") else None
        final = getattr(self, "final", None)
        if cf is None or final is None:
            return []
        out = []
        for method, facts in cf.methods:
            for attr in facts.loop_backward_attrs:
                v = final.get("self." + attr)
                if v is not None and v.graph_tokens():
                    out.append(("self." + attr, method, v))
        return sorted(out, key=lambda x: (x[0], x[1]))

    def input_states(self) -> List[str]:
        """After :meth:`run` with ``track_self_state`` over a summarised forward:
        attributes ``self.x`` rebuilt from their own last value and a parameter
        (the input), on which what the unit returns depends."""
        returned: set = set()
        for r in self.returns:
            returned |= r.taints
        out = []
        for key, v in (getattr(self, "final", None) or {}).items():
            if key.startswith("self.") and ("A", key) in v.taints and any(t[0] == "P" for t in v.taints) \
                    and ("A", key) in returned:
                out.append(key)
        return sorted(out)

    def self_states(self) -> List[Tuple[str, Val]]:
        """After :meth:`run` with ``track_self_state``: attributes ``self.x`` that the
        unit reassigns from a graph built on their own previous value — state the
        object carries from one call into the next — when that graph also reaches
        what the unit returns (so the caller's backward frees it)."""
        out = []
        returned: set = set()
        for r in self.returns:
            returned |= r.taints
        for key, a in self._appended.items():
            if key.startswith("self."):
                # an A3C player's ``self.log_probs.append(...)``: handed to the caller
                # through the object's own list, as a return would
                returned |= a.taints
        for key, v in (getattr(self, "final", None) or {}).items():
            if not key.startswith("self.") or ("A", key) not in v.taints:
                continue
            g = v.graph_tokens()
            # the output depends on the previous call's state (so the caller's next
            # backward walks into it) and shares this call's graph (so this call's
            # backward frees it)
            if g and g & returned and ("A", key) in returned:
                out.append((key, v))
        return sorted(out, key=lambda kv: kv[0])

    def cached_states(self) -> List[Tuple[str, Val]]:
        """After :meth:`run` with ``track_self_state``: attributes ``self.x`` the unit
        may hand back as the previous call left them (``return self.cache``) and
        assigns here a value that may carry a graph, never rebuilt from their own
        last value (that is :meth:`self_states`' recurrence): a cache kept across
        calls. (key, what is stored.)"""
        returned: set = set()
        for r in self.returns:
            returned |= r.taints
        out = []
        for key, t in self._stored.items():
            if ("A", key) not in returned or key in self._rebuilt:
                continue
            if any(x[0] in ("G", "L", "P") for x in t):
                out.append((key, plain(frozenset(x for x in t if x[0] != "A"))))
        return sorted(out, key=lambda kv: kv[0])

    # -- statements ------------------------------------------------------
    @staticmethod
    def built_by(v: Val) -> List[ast.stmt]:
        """(``build_stmts`` runs) the statements that bound a value on the way to ``v``
        while it held a graph, in the text's order: what GG102's fixes move, detach or
        wrap in ``no_grad``."""
        return sorted((t[1] for t in v.taints if t[0] == "B"), key=lambda n: (n.lineno, n.col_offset))

    @staticmethod
    def saving_of(v: Val) -> Tuple[_Opt[bool], _Opt[str]]:
        """(``build_stmts`` runs) whether an operation that built ``v`` saves tensors for
        backward: True if one does, None if one cannot be told (with the words naming the
        last such operation), False if none does."""
        taints = v.taints
        if SAVES in taints:
            return True, None
        unknown = [t for t in taints if t[0] == "M"]
        if not unknown:
            return False, None
        _, node, words = max(unknown, key=lambda t: (t[1].end_lineno, t[1].end_col_offset, -t[1].lineno, -t[1].col_offset))
        if words is _CALL_WORDS:
            return None, f"`{ast.unparse(node.func)}()`"
        if words is _MODULE_WORDS:
            return None, f"`{ast.unparse(node.func)}`"
        return None, words

    def tensor_graphs(self, v: Val) -> FrozenSet:
        """The graphs ``v`` holds as a tensor carrying them: its G tokens less those
        the trace only assumed (``opaque``: the result of a callable it cannot see
        into, which may be a module's output or any object). An object a graph
        merely reached that way (an argument namespace, a data loader, a schedule
        a helper returns) holds none."""
        gs = v.graph_tokens()
        if not gs or not self.opaque:
            return gs
        opaque = self.opaque
        return frozenset([t for t in gs if id(t[1]) not in opaque])

    def carried_graphs(self, v: Val) -> FrozenSet:
        """The graphs ``v`` holds as GG102 reads a value reused by a loop:
        :meth:`tensor_graphs` less those a function of the user's built itself from
        nothing its arguments brought (``fn_made``): such a call carries its
        arguments' graphs, and its own is no graph the caller built."""
        gs = self.tensor_graphs(v)
        made = self.fn_made
        if not gs or not made:
            return gs
        return frozenset([t for t in gs if id(t[1]) not in made])

    def _own_element(self, e: ast.Subscript, i: str) -> _Opt[Val]:
        """``losses[i]`` in ``for i in range(n)`` whose body puts one value in ``losses``, as
        a statement before the one reading it, in every iteration (no ``break``/``continue``,
        nothing else edits the list or rebinds ``i``): ``losses[i] = loss`` (a slot per
        index), or ``losses.append(loss)`` with ``losses`` known empty where the loop was
        entered (``losses = []`` or ``losses.clear()`` before it). The element read is the
        one this iteration put there: what it put; None otherwise."""
        key = dotted(e.value)
        loop = next((fr.loop for fr in reversed(self.frames) if isinstance(fr.loop, ast.For)
                     and isinstance(fr.loop.target, ast.Name) and fr.loop.target.id == i), None)
        if key is None or loop is None or key not in self._appended:
            return None
        it = loop.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and not it.keywords and (len(it.args) == 1 or (
                    len(it.args) == 2 and isinstance(it.args[0], ast.Constant) and it.args[0].value == 0))):
            return None
        appends = stores = 0
        reader = None
        slot = None
        for k, st in enumerate(loop.body):
            if any(n is e for n in iter_nodes(st)):
                reader = k
                break
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute) \
                    and st.value.func.attr == "append" and dotted(st.value.func.value) == key:
                appends += 1
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Subscript) \
                    and dotted(st.targets[0].value) == key and isinstance(st.targets[0].slice, ast.Name) \
                    and st.targets[0].slice.id == i:
                stores += 1
                slot = st.targets[0]
        if reader is None or appends + stores != 1:
            return None
        if appends:
            held = self._entered.get(id(loop), {}).get(key)
            if held is None or held.elems != () or held.taints:
                return None
        tops = {id(st.value) for st in loop.body if isinstance(st, ast.Expr)}
        for n in block_nodes(loop.body):
            if isinstance(n, (ast.Break, ast.Continue)):
                return None
            if isinstance(n, ast.Name) and n.id == i and not isinstance(n.ctx, ast.Load):
                return None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and dotted(n.func.value) == key \
                    and (n.func.attr != "append" or id(n) not in tops):
                return None  # losses.pop(), losses.insert(...), an append under an if or in an inner loop
            if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == key and not isinstance(n.ctx, ast.Load):
                return None  # rebound in the body
            if isinstance(n, ast.Subscript) and dotted(n.value) == key and not isinstance(n.ctx, ast.Load) \
                    and n is not slot:
                return None  # another store into it
        return self._appended[key]

    def _module_obj(self, obj: _Opt[str]) -> bool:
        """An object of a torch module class (``inst:torch.nn.Linear``) or of a module class
        of the user's (``user:Net``)."""
        if not obj:
            return False
        if obj.startswith("inst:"):
            q = obj[5:]
            return q.startswith("torch.nn.") and not q.startswith(("torch.nn.parameter.", "torch.nn.utils.")) \
                and q != "torch.nn.Parameter"
        return obj.startswith("user:") and self.r.is_module_class(obj[5:])

    def built_from(self, v: Val, toks: FrozenSet) -> bool:
        """Was ``v`` computed from one of the tokens ``toks`` (a backward event's
        ``inputs``): it holds one, or a graph an op started on one of those leaves
        (an op takes a leaf's token into ``leaf_of``)? Then ``autograd.grad(out, x)``
        runs back through ``v``'s graph to ``x``."""
        if not toks:
            return False
        if not toks.isdisjoint(v.taints):
            return True
        return any(not toks.isdisjoint(self.leaf_of.get(id(t[1]), EMPTY)) for t in v.graph_tokens())

    def block(self, stmts: Sequence[ast.stmt], env: Dict[str, Val]) -> Dict[str, Val]:
        for s in stmts:
            env = self.stmt(s, env)
        return env

    def stmt(self, s: ast.stmt, env: Dict[str, Val]) -> Dict[str, Val]:
        self._stmt = s
        if isinstance(s, ast.Assign):
            self._targets = tuple(n for t in s.targets for n in target_names(t))
            v = self.eval(s.value, env)
            self._targets = ()
            for t in s.targets:
                self.bind(t, v, env, s)
            if len(s.targets) == 1 and isinstance(s.targets[0], ast.Attribute) \
                    and s.targets[0].attr == "requires_grad" and isinstance(s.value, ast.Constant) \
                    and s.value.value is True:
                self._requires_grad_set(s.targets[0], env)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self._targets = tuple(target_names(s.target))
                v = self.eval(s.value, env)
                self._targets = ()
                self.bind(s.target, v, env, s)
        elif isinstance(s, ast.AugAssign):
            cur = self.eval(s.target, env)
            v = self.eval(s.value, env)
            res = plain(cur.taints | v.taints)
            if not self.no_grad and "L" in {t[0] for t in res.taints}:
                self.leaf_of[id(s)] = frozenset(t for t in res.taints if t[0] == "L")
                res = plain(res.taints | {("G", s)})
            if self.build_stmts:
                res = self._saves(res, s, K.binop_saving(type(s.op).__name__), type(s.op).__name__)
            self.bind(s.target, res, env, s)
        elif isinstance(s, ast.Expr):
            name = inplace_cut_target(s)
            if name is not None:
                self._cut_in_place(s, name, env)
            else:
                self.eval(s.value, env)
                name = self._own_cut_call(s.value, env)
                if name is not None:  # dec_state.detach(): a method of the user's that cuts
                    env[name] = _with(env[name], taints=EMPTY, elems=None, site=s)
        elif isinstance(s, ast.If):
            self.eval(s.test, env)
            e1, e2 = dict(env), dict(env)
            self._narrow(s.test, e1, e2, s.body)
            key: Any = s.test.__dict__.get("_gg_cond", _NO_KEY)
            if key is _NO_KEY:  # (syntax: kept on the test node for every run and walk over it)
                key = s.test._gg_cond = _condition_key(s.test)  # type: ignore[attr-defined]
            if key is not None:
                self._recall_branches(key, env, e1, e2)
            before = env
            if self.frames and id(s) not in self._no_fallthrough:
                self._mark_invariant_chain(s)
            e1 = self.block(s.body, e1)
            if not s.orelse and self._no_fallthrough.get(id(s)):
                # the last test of an if/elif chain without else whose tests read nothing
                # the loop changes: every iteration takes a branch, or none ever does.
                # A name every branch binds is never last iteration's value here.
                for n in self._no_fallthrough[id(s)]:
                    if n in e1:
                        e2[n] = e1[n]
            e2 = self.block(s.orelse, e2)
            env = join_env(e1, e2)
            if key is not None:
                self._remember_branches(key, s.test, before, e1, e2, env)
        elif isinstance(s, LOOPS):
            name = inplace_cut_target(s)
            if name is not None:  # for s in state: s.detach_()
                env[name] = _with(env.get(name) or CLEAN, taints=EMPTY, elems=None, site=s)
            else:
                env = self.loop(s, env)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            env = self._with_block(s, env)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            freed_before = env.get(FREED)
            env = self.block(s.body, env)  # type: ignore[attr-defined]
            out = env
            for h in s.handlers:  # type: ignore[attr-defined]
                h_env = dict(env)
                if FREED in h_env:  # the handler may start before the body's backward ran
                    h_env[FREED] = meet_freed(freed_before, h_env[FREED])
                out = join_env(out, self.block(h.body, h_env))
            out = self.block(s.orelse, out)  # type: ignore[attr-defined]
            env = self.block(s.finalbody, out)  # type: ignore[attr-defined]
        elif isinstance(s, ast.Return):
            if s.value is not None and id(s) in self.untensored_returns:
                self.returns.append(CLEAN)
            elif s.value is not None:
                v = self.eval(s.value, env)
                if self.track_self_state and isinstance(s.value, ast.Attribute):
                    key = dotted(s.value)
                    if key is not None and key.count(".") == 1 and key.startswith("self.") and v.undef:
                        # assigned on some paths only: on the others it is what the
                        # previous call left (``if self.cache is None: self.cache = f(x)``)
                        v = _with(v, taints=v.taints | {("A", key)})
                self.returns.append(v)
            else:
                self.returns.append(NONE)
        elif isinstance(s, ast.Delete):
            self._delete(s, env)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env[s.name] = Val(obj="local")
            if not isinstance(s, ast.ClassDef):
                self.local_defs[s.name] = s
        elif type(s).__name__ == "Match":
            self.eval(s.subject, env)  # type: ignore[attr-defined]
            out = None
            for c in s.cases:  # type: ignore[attr-defined]
                e = self.block(c.body, dict(env))
                out = e if out is None else join_env(out, e)
            env = join_env(env, out) if out is not None else env
        elif isinstance(s, (ast.Raise, ast.Assert)):
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.eval(child, env)
        return env

    def _with_block(self, s: ast.stmt, env: Dict[str, Val]) -> Dict[str, Val]:
        ng = is_no_grad_with(s, self.r.ctx)
        cached = False
        for item in s.items:  # type: ignore[attr-defined]
            v = self.eval(item.context_expr, env)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, v, env, s)
            c = item.context_expr
            if isinstance(c, ast.Call) and self.r.qualify(c.func) == K.PARAMETRIZE_CACHED:
                cached = True
        if ng:
            self.no_grad += 1
        outer = env.get(K.PARAMETRIZE_CACHE_KEY)
        if cached:
            # parametrize.cached(): each parametrized tensor is computed by its first use
            # in the block and handed to every later one (see _parametrized_call)
            env[K.PARAMETRIZE_CACHE_KEY] = _with(NONE, site=s)
        env = self.block(s.body, env)  # type: ignore[attr-defined]
        if cached:
            if outer is None:
                env.pop(K.PARAMETRIZE_CACHE_KEY, None)
            else:
                env[K.PARAMETRIZE_CACHE_KEY] = outer
        if ng:
            self.no_grad -= 1
        return env

    def _requires_grad_set(self, target: ast.Attribute, env: Dict[str, Val]) -> None:
        """``x.requires_grad = True``: ``x`` is a leaf that requires grad from here on, as
        after ``x.requires_grad_()`` (torch raises on a tensor that is not a leaf: a value
        with a graph keeps what it has; a module's attribute is no tensor of ours)."""
        key = dotted(target.value)
        old = env.get(key) if key is not None else None
        if key is None or old is None or old.obj is not None or old.graph_tokens() or old.elems is not None \
                or old.kind is not None:
            return
        env[key] = _with(old, taints=old.taints | {("L", target)})

    def _delete(self, s: ast.Delete, env: Dict[str, Val]) -> None:
        for t in s.targets:
            for n in target_names(t):
                env.pop(n, None)
            if isinstance(t, ast.Subscript) and _whole_slice(t.slice):
                key = dotted(t.value)
                if key is not None:  # del policy.saved_log_probs[:]: the list is empty
                    self._set_container(env, key, Val(kind="list"))

    def _own_cut_call(self, call: ast.expr, env: Dict[str, Val]) -> _Opt[str]:
        """``state.detach()`` as a statement, ``state`` a local holding a graph and either
        an object of a class of the file whose method of that name rebinds the object's
        state cut (``ClassFacts.cuts``: ``self.hidden = tuple(h.detach() for h in
        self.hidden)``), or a value of no known class where every class of the file
        defining that method cuts in it (OpenNMT's ``DecoderState.detach()``, the state
        handed back in the model's returned tuple): the name, whose graph the call cut."""
        if not isinstance(call, ast.Call) or call.args or call.keywords:
            return None
        f = call.func
        if not isinstance(f, ast.Attribute) or not isinstance(f.value, ast.Name):
            return None
        name = f.value.id
        old = env.get(name)
        if old is None or not old.graph_tokens():
            return None
        obj = old.obj or ""
        if obj.startswith("user:"):
            cf = self.r.cls(obj[5:])
            return name if cf is not None and any(m == f.attr and attrs for m, attrs in cf.cuts) else None
        if obj:
            return None
        return name if f.attr in query(self.r.summary, cutting_methods) else None

    def _cut_in_place(self, s: ast.Expr, name: str, env: Dict[str, Val]) -> None:
        """``h.detach_()`` / ``h.requires_grad_(False)`` as a statement."""
        old = env.get(name)
        if old is not None and old.obj and old.obj.startswith(("inst:", "user:")):
            env[name] = _with(old, frozen=True)  # encoder.requires_grad_(False)
        elif old is not None and old.graph_tokens() and _method_name(s.value) == "requires_grad_":
            # y.requires_grad_(False) on a value with a graph raises at run time: it keeps
            # it (and a finding about y says so, at this statement)
            if not self._inlining:
                self.not_a_leaf[name] = s
        else:
            env[name] = _with(old or CLEAN, taints=EMPTY, elems=None, site=s)

    def _assigned_in_loop(self, loop: ast.stmt) -> FrozenSet[str]:
        """Names (and their roots: ``x`` of ``x.y``) the loop may rebind or mutate
        in place (``lst.append``), its target included."""
        got = loop.__dict__.get("_gg_assigned")
        if got is None:
            names: set = set()
            nodes = block_nodes(loop.body)  # type: ignore[attr-defined]
            if isinstance(loop, (ast.For, ast.AsyncFor)):
                nodes = nodes + list(iter_nodes(loop.target))
            for node in nodes:
                if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
                    d = dotted(node)
                    if d:
                        names.add(d)
                        names.add(d.split(".", 1)[0])
                elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                    d = dotted(node.value)
                    if d:
                        names.add(d.split(".", 1)[0])
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    d = dotted(node.func.value)
                    if d:  # x.append(...), cfg.update(...): may change what a test reads
                        names.add(d)
                        names.add(d.split(".", 1)[0])
                elif isinstance(node, (ast.Global, ast.Nonlocal)):
                    names.update(node.names)
            got = loop._gg_assigned = frozenset(names)  # type: ignore[attr-defined]  # (syntax: every run's)
        return got

    def _invariant(self, expr: ast.expr, loop: ast.stmt) -> bool:
        """Does ``expr`` read only names the loop never changes, through no call
        but one of a plain name on such names (``exists(n)``, ``len(xs)``)?"""
        return _reads_unchanged(expr, self._assigned_in_loop(loop), self_attrs_fixed=False)

    def _mark_invariant_chain(self, top: ast.If) -> None:
        """``if n == 2: spk, mem = net(x)`` / ``elif n == 3: spk, _, mem = net(x)``
        with no else, in a loop that never changes ``n``: each iteration takes the
        same branch, so a name bound by every branch never reaches this iteration
        from the last one through the chain (an iteration taking no branch finds
        it unbound, as the first did). Records the names on the chain's last if."""
        tests, bodies, node = [], [], top
        while True:
            tests.append(node.test)
            bodies.append(node.body)
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
                continue
            break
        if node.orelse:
            self._no_fallthrough[id(node)] = frozenset()
            return
        loop = self.frames[-1].loop
        if not all(self._invariant(t, loop) for t in tests):
            self._no_fallthrough[id(node)] = frozenset()
            return
        common: _Opt[set] = None
        for b in bodies:
            got = _definitely_bound(b)
            common = got if common is None else common & got
        if common and len(tests) == 1 and self.flags and _flag_test(tests[0], self.flags) is False:
            # ... but when the callers' constant says no iteration takes it, each finds
            # what the loop last bound elsewhere: `if random_iter: state = init()` before
            # `out, state = rnn(x, state)`, called with random_iter False (d2l's adjacent
            # sampling), carries the state on (an assignment of this loop's own, not of a
            # loop nested in it: that one's iterations are its own business)
            common -= _bound_beside(loop.body, top)  # type: ignore[attr-defined]
        self._no_fallthrough[id(node)] = frozenset(common or ())

    # ``if use_reg: penal = ...`` … ``if use_reg: loss = loss + penal``: the second
    # test takes the branch the first took, as long as nothing it reads changed in
    # between, so a value the first branch set is not also "last iteration's".
    def _remember_branches(self, key: tuple, test: ast.expr, before, e1, e2, merged) -> None:
        names = _condition_names(test)
        watched = {n: merged.get(n) for n in names}
        watched.update((n.split(".")[0], merged.get(n.split(".")[0])) for n in names)
        yes = {n: v for n, v in e1.items() if before.get(n) is not v}
        no = {n: v for n, v in e2.items() if before.get(n) is not v}
        kept = {n: merged.get(n) for n in set(yes) | set(no)}
        memos = self._branches.setdefault(key, [])
        memos.append((watched, yes, no, kept))
        del memos[:-8]  # the same test in both arms of another if leaves one each

    def _recall_branches(self, key: tuple, env, yes_env, no_env) -> None:
        best, hits = None, 0
        for memo in reversed(self._branches.get(key, ())):
            watched, _, _, kept = memo
            if any(env.get(n) is not v for n, v in watched.items()):
                continue  # what the test reads has changed since
            n_hits = sum(1 for n, v in kept.items() if env.get(n) is v)
            if n_hits > hits:
                best, hits = memo, n_hits
        if best is None:
            return
        _, yes, no, kept = best
        for side, values in ((yes_env, yes), (no_env, no)):
            for n, v in values.items():
                if env.get(n) is kept.get(n):  # untouched since that branch
                    side[n] = v

    @staticmethod
    def _narrow(test: ast.expr, yes: Dict[str, Val], no: Dict[str, Val], body: _Opt[list] = None) -> None:
        """``if h is not None:`` → on the other path h is None (carries nothing);
        ``if hasattr(h, "detach"):`` → on the other path h is not a tensor; so with
        ``if isinstance(h, torch.Tensor):`` (``torch.is_tensor(h)``) whose body binds ``h`` to a cut of it (a reporter's
        ``value = value.detach()``: what it keeps is meant to hold no graph; a helper whose
        tensor branch returns, and whose other branch handles a tuple of states, is left as it is);
        ``if x.requires_grad:`` → on the other path x has no graph."""
        if body and _tensor_test(test):
            name = dotted(test.args[0])  # type: ignore[attr-defined]
            if name is not None and any(
                    isinstance(b, ast.Assign) and len(b.targets) == 1 and dotted(b.targets[0]) == name
                    and is_graph_cut(b.value) for b in body):
                no[name] = CONST
            return
        if (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "hasattr"
            and len(test.args) == 2
            and isinstance(test.args[1], ast.Constant)
            and test.args[1].value == "detach"
        ):
            name = dotted(test.args[0])
            if name is not None:
                no[name] = CONST
            return
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            name = dotted(test.left)
            if name is None:
                return
            if isinstance(test.ops[0], ast.IsNot):
                no[name] = NONE
            elif isinstance(test.ops[0], ast.Is):
                yes[name] = NONE
            return
        # ``x.detach() if x.requires_grad else x``: a tensor that does not require grad has no graph
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        attr = test.operand if negated else test  # type: ignore[attr-defined]
        if isinstance(attr, ast.Attribute) and attr.attr == "requires_grad" and isinstance(attr.value, ast.Name):
            (yes if negated else no)[attr.value.id] = CONST

    def bind(self, target: ast.AST, v: Val, env: Dict[str, Val], s: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            starred = any(isinstance(e, ast.Starred) for e in elts)
            if v.elems is not None and len(v.elems) == len(elts) and not starred:
                for e, ev in zip(elts, v.elems):
                    self.bind(e, ev, env, s)
            else:
                # a result whose positions are not known one by one, from a function
                # returning tuples of different shapes (loss, mems / logits, mems / loss)
                part = self._unsure(v, s, "container") if v.mixed else plain(v.taints)
                pending = any(t[0] == "R" and t[2] == -1 for t in v.taints)
                for i, e in enumerate(elts):
                    if pending and not starred:
                        part = _nth_of_pending(v, i)
                    if isinstance(e, ast.Subscript):
                        # out, opt[0] = f(...) with f's outputs unknown: do not smear
                        # the whole result's graph over a container element
                        self.eval(e.slice, env)
                        continue
                    self.bind(e, part, env, s)
            return
        if isinstance(target, ast.Starred):
            self.bind(target.value, plain(v.taints), env, s)
            return
        name = dotted(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
        if name is not None:
            if self.build_stmts and v.taints and any(t[0] == "G" and id(t[1]) not in self.opaque for t in v.taints) \
                    and not isinstance(s, LOOPS):  # (a loop's target: bound by no statement that built it)
                v = _with(v, taints=v.taints | {("B", s)})
            env[name] = _bound(v, s)
            if self.track_self_state and name.startswith("self.") and name.count(".") == 1:
                self._stored[name] = self._stored.get(name, EMPTY) | v.taints
                if ("A", name) in v.taints:
                    self._rebuilt.add(name)
            if "." in name:
                self._dotted_bases.add(name.split(".", 1)[0])
                if self._state_keys and name not in self._state_keys:
                    # ``model.pos.built = False``: a flag of a module whose state (or cache)
                    # is followed may make its next call start afresh: no longer known
                    owner = name.rsplit(".", 1)[0] + "."
                    for k in [k for k in self._state_keys if k.startswith(owner) and k in env
                              and k.count(".") == name.count(".")]:
                        env[k] = Val(site=s)
            elif name in self._dotted_bases:
                # rebinding x invalidates x.attr entries (only scanned for names
                # that ever had one: keeps long straight-line code linear)
                prefix = name + "."
                for k in [k for k in env if k.startswith(prefix)]:
                    del env[k]
        elif isinstance(target, ast.Subscript):
            # x[i] = y: x now also holds y's graph
            base = dotted(target.value)
            self.eval(target.slice, env)
            if base is not None and base not in env and self.track_self_state and base.startswith("self.") \
                    and base.count(".") == 1:
                # self.states[i] = cell(x, self.states[i]): a list the object keeps
                env[base] = Val(frozenset({("A", base)}))
            if base is not None and base in env:
                old = env[base]
                # states[wid] = new_state: the container now holds it, and this is
                # the statement that last put a graph in it
                env[base] = _with(old, taints=old.taints | v.taints, elems=None,
                                  site=s if v.graph_tokens() else old.site)
                self._appended[base] = plain(v.taints)  # (what a later losses[i] of this iteration reads)

    # -- loops -----------------------------------------------------------
    def _bind_loop_target(self, loop: ast.stmt, env: Dict[str, Val]) -> None:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            it = self.eval(loop.iter, env)
            self.bind(loop.target, plain(it.taints), env, loop)
            if self._peer_reads and isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2 \
                    and id(loop.target.elts[1]) in self._peer_reads:
                # for j, peer in enumerate(outputs) (_scan_peers): ``peer`` is a marked read
                elem = loop.target.elts[1]
                env[elem.id] = self._peer_read(elem, self.eval(loop.iter.args[0], env))  # type: ignore[attr-defined]
            if it.obj and it.obj.startswith("list:") and isinstance(loop.target, ast.Name) and not it.taints:
                env[loop.target.id] = Val(obj=it.obj[5:], site=loop)  # for model in models: one of its modules
            self._type_layers(loop, env)
        else:
            self.eval(loop.test, env)  # type: ignore[attr-defined]

    def _type_layers(self, loop: ast.stmt, env: Dict[str, Val]) -> None:
        """``for layer in self.layers``, ``for attn, mem in zip(self.layers, mems)``,
        ``for i, cell in enumerate(self.cells)``: the loop variable is one of the
        container's modules, of the class every element was made from."""
        it, target = loop.iter, loop.target  # type: ignore[attr-defined]
        pos = None
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate") \
                and it.args and isinstance(target, ast.Tuple):
            if it.func.id == "zip":
                pos = next((j for j, a in enumerate(it.args) if isinstance(a, ast.Attribute)), None)
                it = it.args[pos] if pos is not None else None
            else:
                pos, it = 1, it.args[0]
            if pos is None or pos >= len(target.elts):
                return
            target = target.elts[pos]
        if not isinstance(it, ast.Attribute) or not isinstance(target, ast.Name):
            return
        base = self.eval(it.value, env)
        obj = self.r.attr_obj(base.obj, it.attr + "[]")
        if obj is not None:
            env[target.id] = Val(obj=obj, site=loop)

    @staticmethod
    def _freeze_loop(loop: ast.stmt, env: Dict[str, Val]) -> None:
        """``for p in enc.parameters(): p.requires_grad = False`` freezes ``enc``
        (``ast_util.frozen_by_loop``, the shape GG102 reads too)."""
        owner = frozen_by_loop(loop)
        if owner is not None and owner in env:
            env[owner] = _with(env[owner], frozen=True)

    def _resets_modules(self, loop: ast.stmt, env: Dict[str, Val]) -> None:
        """``for m in net.modules(): m.reset_mem()`` (or ``m.mem = m.mem.detach()``):
        every state :meth:`_neurons` follows under ``net`` is emptied."""
        it = loop.iter  # type: ignore[attr-defined]
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in ("modules", "children", "named_modules", "named_children")):
            return
        owner = dotted(it.func.value)
        if owner is None:
            return
        for n in block_nodes(loop.body):  # type: ignore[attr-defined]
            f = n.func if isinstance(n, ast.Call) else None
            if (isinstance(f, ast.Attribute) and f.attr in K.STATE_RESET_CALLS) or (
                    isinstance(n, ast.Assign) and is_graph_cut(n.value)):
                prefix = owner + "."
                for k in [k for k in self._state_keys if k.startswith(prefix) and k in env]:
                    env[k] = Val(site=loop)
                return

    def loop(self, loop: ast.stmt, env: Dict[str, Val]) -> Dict[str, Val]:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            if isinstance(loop, ast.For) and self.find_carries and id(loop) not in self._peer_scanned:
                self._scan_peers(loop)
            self._freeze_loop(loop, env)
            if self._state_keys:
                self._resets_modules(loop, env)
        entry = dict(env)
        self.loop_entries.setdefault(id(loop), entry)
        self._entered[id(loop)] = entry
        once = self._runs_at_least_once(loop)
        frame = LoopFrame(loop)
        self.frames.append(frame)
        e1 = dict(entry)
        self._bind_loop_target(loop, e1)
        n_returns = len(self.returns)
        e1 = self.block(loop.body, e1)  # type: ignore[attr-defined]
        if loop is self.framework_node:
            self._framework_step(loop, n_returns, e1)
        self.frames.pop()
        out = dict(e1) if once else join_env(entry, e1)
        freed_after = self._freed_after_loop(loop, entry, e1) if (FREED in e1 or FREED in entry) else None
        if frame.backprop and not self.no_grad and self.find_carries:
            seeds: Dict[str, Val] = {}
            lo, hi = loop.lineno, getattr(loop, "end_lineno", None) or loop.lineno
            for name, v in e1.items():
                if v is entry.get(name) or name in self._method_state_keys:
                    continue  # not reassigned by the loop (a graph built before it is GG102's business)
                g = v.graph_tokens()
                # built in this loop's body, and attached to a graph some backward of
                # the iteration traversed (and so freed)
                if (g & frame.reached and any(lo <= getattr(t[1], "lineno", 0) <= hi for t in g) and (
                        g & frame.freed or any(("F", t) in v.taints for t in g))) or (
                        loop is self.framework_node and self.framework_call is not None and name.startswith("self.")
                        and any((id(t[1]) in self.saving_calls or id(t[1]) in self.saved_weights)
                                and lo <= getattr(t[1], "lineno", 0) <= hi for t in g)):
                    # (or: kept on the module by Lightning's training_step, built by a call that saved
                    # weights the framework's optimizer step then changes in place)
                    # ... on the path that reaches the end of the iteration: a backward
                    # this path ran freed it (marked then), or a helper freed it inside.
                    # `if step % K == 0: loss.backward(); window = []` does not free the
                    # window the other path keeps filling (truncated BPTT every K steps)
                    seeds[name] = v
            e2_out: _Opt[Dict[str, Val]] = None
            again = self._freed_for_next(loop, entry, e1)
            if seeds or again is not None:
                e2 = dict(out)
                for name, v in seeds.items():
                    e2[name] = self._seed(name, loop, e2[name], v)
                frame2 = LoopFrame(loop, second=True)
                n_events = len(self.events)
                if again is not None:
                    e2[FREED] = again
                    frame2.stale_from = frozenset(t[1] for t in again.taints)
                self.frames.append(frame2)
                self._bind_loop_target(loop, e2)
                n_returns = len(self.returns)
                e2 = self.block(loop.body, e2)  # type: ignore[attr-defined]
                if loop is self.framework_node:
                    self._framework_step(loop, n_returns, e2)
                self.frames.pop()
                if seeds:
                    self._report(frame2, seeds, entry, e1)
                if again is not None:
                    self._stale_next(n_events)
                e2_out = join_env(out, self._strip(e2, loop))
            if self.explain_unknown:
                self._query_unknown(loop, frame, seeds, entry, e1, out)
            if e2_out is not None:
                out = e2_out
        if freed_after is not None:
            out[FREED] = freed_after
        # a loop's else: runs once after it
        orelse = getattr(loop, "orelse", None)
        if orelse:
            out = self.block(orelse, out)
        return out

    def _freed_for_next(self, loop: ast.stmt, entry: Dict[str, Val], e1: Dict[str, Val]) -> _Opt[Val]:
        """The graphs built before the loop (held at its entry, their node outside its
        body) that a backward of the body surely freed on every path to the end of an
        iteration: the next iteration starts with them freed (pix2pix-style critic
        iterations over ``self.fake_B`` built once by ``self.forward()``). None when
        there are none, or the body may leave early (``break``, ``continue``, ``return``)
        or surely runs once (``range(1)``)."""
        end = e1.get(FREED)
        if end is None or not end.taints or end is entry.get(FREED) or not isinstance(loop, LOOPS):
            return None
        before = {t[1] for t in freed_set(entry)}
        lo, hi = loop.lineno, getattr(loop, "end_lineno", None) or loop.lineno
        held: set = set()
        for n, v in entry.items():
            if v.taints and n != FREED:
                held.update(t for t in v.taints if t[0] == "G")
        got = [t for t in end.taints if t[1] not in before and t[1] in held
               and not lo <= getattr(t[1][1], "lineno", 0) <= hi]
        if not got:
            return None
        if any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in block_nodes(loop.body)):
            return None
        it = getattr(loop, "iter", None)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords:
            bounds = [a.value for a in it.args if isinstance(a, ast.Constant) and type(a.value) is int]
            if it.args and len(bounds) == len(it.args) and len(range(*bounds)) < 2:
                return None
        if isinstance(it, (ast.List, ast.Tuple)) and len(it.elts) < 2:
            return None
        return plain(got)

    def _stale_next(self, n_events: int) -> None:
        """A backward of the walk just done (the loop's next iteration, :meth:`_freed_for_next`)
        that reached a graph the previous iteration freed: the proof goes on the backward's
        first event (the one rules read), where the first walk found none."""
        first: Dict[int, BackwardEvent] = {}
        for ev in self.events[:n_events]:
            first.setdefault(id(ev.call), ev)
        for ev in self.events[n_events:]:
            if ev.stale:
                ev0 = first.get(id(ev.call))
                if ev0 is not None and not ev0.stale:
                    ev0.stale = ev.stale

    def _query_unknown(self, loop: ast.stmt, frame: LoopFrame, seeds: Dict[str, Val], entry: Dict[str, Val],
                       end: Dict[str, Val], start: Dict[str, Val]) -> None:
        """The carries GG101 does not report because a link is unknown: a value
        the loop rebuilds whose graph is only *maybe* one (U tokens, see
        :meth:`_unsure`), a backward of the iteration ran through, and which
        reaches the next iteration's backward. Found by one more walk of the body
        with those values marked (``("V", ...)`` tokens), isolated: what it adds
        to the flow (events, carries, remembered branches) is taken back, so the
        analysis is the one without it."""
        lo, hi = loop.lineno, getattr(loop, "end_lineno", None) or loop.lineno
        query: Dict[str, Val] = {}
        for name, v in end.items():
            if name in seeds or v is entry.get(name):
                continue
            u = frozenset(("G", t[1]) for t in v.taints if t[0] == "U")
            if u & frame.reached and not (v.graph_tokens() & frame.reached) and any(
                    lo <= getattr(t[1], "lineno", 0) <= hi for t in u):
                query[name] = v
        if not query:
            return
        saved = (self.frames, len(self.events), len(self.carries), set(self._carried_keys), set(self.saving_calls),
                 len(self.returns), len(self.delegates), len(self.calls),
                 {k: list(v) for k, v in self._branches.items()},
                 dict(self._no_fallthrough), dict(self.loop_entries),
                 dict(self._stored), set(self._rebuilt), len(self.member_calls), set(self._state_keys),
                 len(self.loop_delegates), len(self.callee_loops))
        env = dict(start)
        for name, v in query.items():
            cur = env.get(name, v)
            env[name] = _with(cur, taints=cur.taints | {("V", name, loop, -1)},
                              elems=tuple(_with(e, taints=e.taints | {("V", name, loop, i)})
                                          for i, e in enumerate(cur.elems)) if cur.elems is not None else None)
        frame3 = LoopFrame(loop, second=True)
        self.frames = [frame3]
        try:
            self._bind_loop_target(loop, env)
            self.block(loop.body, env)  # type: ignore[attr-defined]
        finally:
            (self.frames, n_events, n_carries, self._carried_keys, self.saving_calls, n_returns, n_delegates,
             n_calls, self._branches, self._no_fallthrough, self.loop_entries,
             self._stored, self._rebuilt, n_members, self._state_keys, n_loop_delegates, n_callee_loops) = saved
            del self.events[n_events:], self.carries[n_carries:], self.returns[n_returns:]
            del self.delegates[n_delegates:], self.calls[n_calls:], self.member_calls[n_members:]
            del self.loop_delegates[n_loop_delegates:], self.callee_loops[n_callee_loops:]
        done = {(u.site, u.name) for u in self.unverified}
        for tok, ev in sorted(frame3.hits.items(), key=lambda kv: kv[0][1]):
            name = tok[1]
            v = query[name]
            site = v.site
            if site is None or not lo <= site.lineno <= hi:
                # `mems[i] = ret[1:]` keeps the site of the list: the loop's last
                # statement that binds the name or one of its items
                site = next((x for x in reversed(list(iter_statements(loop.body)))  # type: ignore[attr-defined]
                             if isinstance(x, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                             and any(_binds(t, name) for t in (x.targets if isinstance(x, ast.Assign) else [x.target]))),
                            None)
            if site is None or (site, name) in done:
                continue
            why = self._why_unsure(name, v, site)
            if why is None:
                continue
            done.add((site, name))
            self.unverified.append(Unverified(loop, name, site, why[0], why[1], ev))

    def _runs_at_least_once(self, loop: ast.stmt) -> bool:
        """``for _ in range(4)``, ``for k in ("a", "b")``: the body runs. So does,
        for what the enclosing loop carries, ``for _ in range(n)`` with an ``n``
        that loop never changes: run zero times in one iteration, it runs zero
        times in every one, and binds nothing that could reach the next."""
        if not isinstance(loop, ast.For):
            return False
        it = loop.iter
        if isinstance(it, (ast.List, ast.Tuple)):
            return bool(it.elts) and not any(isinstance(e, ast.Starred) for e in it.elts)
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and it.args and not it.keywords and len(it.args) <= 3 and self.r.global_obj("range") is None):
            return False
        bounds = [a.value for a in it.args if isinstance(a, ast.Constant) and type(a.value) is int]
        if len(bounds) == len(it.args):
            return len(range(*bounds)) > 0
        return bool(self.frames) and self._invariant(it, self.frames[-1].loop)

    @staticmethod
    def _seed(name: str, loop: ast.stmt, cur: Val, end: Val) -> Val:
        if end.elems is not None:
            elems = tuple(
                _with(ce, taints=ce.taints | {("C", name, loop, i)})
                for i, ce in enumerate(cur.elems if cur.elems is not None and len(cur.elems) == len(end.elems) else end.elems)
            )
            return _with(cur, taints=frozenset().union(*(e.taints for e in elems)), elems=elems)
        return _with(cur, taints=cur.taints | {("C", name, loop, -1)})

    @staticmethod
    def _strip(env: Dict[str, Val], loop: ast.stmt) -> Dict[str, Val]:
        out = {}
        for k, v in env.items():
            if any(t[0] == "C" and t[2] is loop for t in v.taints):
                v = _with(v, taints=frozenset(t for t in v.taints if not (t[0] == "C" and t[2] is loop)), elems=None)
            out[k] = v
        return out

    def _report(self, frame: LoopFrame, seeds: Dict[str, Val], entry: Dict[str, Val], end: Dict[str, Val]) -> None:
        by_site: Dict[int, Dict[str, Any]] = {}
        for tok, ev in frame.hits.items():
            _, name, _, idx = tok
            v = seeds[name]
            site = v.site
            if site is None:
                continue
            key = (id(site), name)
            if key in self._carried_keys:
                continue
            g = by_site.setdefault(id(site), {"site": site, "names": [], "idx": {}, "event": ev, "val": v})
            if name not in g["names"]:
                g["names"].append(name)
            g["idx"].setdefault(name, set()).add(idx)
        for g in sorted(by_site.values(), key=lambda g: (g["site"].lineno, g["site"].col_offset)):
            order = {n: i for i, n in enumerate(_assigned_names(g["site"]))}
            names = tuple(sorted(g["names"], key=lambda n: (order.get(n, len(order)), n)))
            v = g["val"]
            missing: Tuple[int, ...] = ()
            arity = len(v.elems) if v.elems is not None else None
            if len(names) == 1 and arity:
                idx = sorted(i for i in g["idx"][names[0]] if i >= 0)
                if idx and len(idx) < arity:
                    missing = tuple(idx)
            for n in names:
                self._carried_keys.add((id(g["site"]), n))
            self.carries.append(
                Carry(frame.loop, names, g["site"], _built_by(v, frame.loop), g["event"], missing, arity, entry, end)
            )

    # -- graphs a backward surely freed (values.FREED) ----------------------
    def _stale_read(self, v: Val, env: Dict[str, Val]) -> Val:
        """A variable read whose graph is surely freed, whichever path bound it: every
        graph it may hold is in the freed set (a list holds every graph put in it, so
        one is enough). Marked ``("S", g)``: what is computed from it runs into them.
        A value joined from a freed graph and a fresh one (the last iteration's, or
        this one's) proves nothing."""
        fs = env[FREED].taints
        if not fs:
            return v
        keys = self._freed_keys.get(fs)
        if keys is None:
            keys = frozenset(t[1] for t in fs if t[1][0] == "G")
            self._freed_keys = {fs: keys}
        hit = v.taints & keys
        if not hit or (v.kind != "list" and any(t[0] == "G" and t not in hit for t in v.taints)):
            return v
        return _with(v, taints=v.taints | {("S", t) for t in hit})

    def _stale(self, taints: Iterable, env: Dict[str, Val], whole: bool = False) -> FrozenSet:
        """The graphs of ``taints`` that saved tensors and that a backward before this
        point surely freed: the ``("X", g, call)`` entries of the freed set, for the
        graphs read from a surely freed variable (``("S", g)``), or any (``whole``: the
        whole of a container a helper surely back-propagates). Only on a loop body's
        first walk (a second one runs with last iteration's values seeded)."""
        fs = env.get(FREED)
        if fs is None or not fs.taints:
            return EMPTY
        only = None
        for fr in self.frames:
            if fr.second:
                if fr.stale_from is None:
                    return EMPTY
                # the walk of a loop's next iteration: only what its previous one freed of
                # the graphs built before the loop (:meth:`_freed_for_next`)
                only = fr.stale_from if only is None else only & fr.stale_from
        by_g = {t[1]: t for t in fs.taints}
        if whole:
            gs = {t for t in taints if t[0] == "G"}
        else:
            gs = {t[1] for t in taints if t[0] == "S"}
        if only is not None:
            gs = {t for t in gs if t in only}
        return frozenset(by_g[t] for t in gs if t in by_g and id(t[1]) in self.saving_calls)

    def _free(self, env: Dict[str, Val], taints: Iterable, call: ast.Call) -> None:
        """A backward that surely frees its graph ran here: what ``taints`` reaches is
        freed (the parts that saved tensors: only they fail a second backward)."""
        saving = self.saving_calls
        gs = {t for t in taints if (t[0] == "G" and id(t[1]) in saving) or t[0] == "N"}
        if not gs:
            return
        old = env.get(FREED)
        kept = [t for t in old.taints if t[1] not in gs] if old is not None else []
        env[FREED] = plain(kept + [("X", g, call) for g in gs])

    def _freed_after_loop(self, loop: ast.stmt, entry: Dict[str, Val], e1: Dict[str, Val]) -> Val:
        """What is surely freed once the loop is done. Its body's set when the loop
        surely ran and left at the end of an iteration (no ``break``/``continue``);
        else what was freed before it too, or a graph whose every holder was unbound
        before the loop: after no trip at all, reading it raises NameError, so each
        path fails (an error is a proof, never a guess at the trip count)."""
        end = e1.get(FREED)
        if end is None or not end.taints:
            return CLEAN
        start = entry.get(FREED)
        if end is start:
            return end  # the body freed nothing new
        if _loop_jumps(loop):
            return meet_freed(start, end)
        if _literal_trips(loop) and self.r.global_obj("range") is None:
            return end
        before = {t[1] for t in freed_set(entry)}
        new = {t[1] for t in end.taints} - before
        proven = set(new)  # graphs every holder of which was unbound before the loop
        held: set = set()
        for n, v in e1.items():
            hit = v.taints & new if v.taints else None
            if hit:
                held |= hit
                if "." in n or n in entry:
                    proven -= hit
        proven &= held
        return plain(t for t in end.taints if t[1] in before or t[1] in proven)

    # -- every element of a list read in each iteration (deep mutual learning) --
    def _scan_peers(self, loop: ast.For) -> None:
        """``for i in range(n):`` whose body reads a list built before it (``outputs``,
        never changed in the loop) by another loop's index ranging over the same
        ``range(n)`` (``for j in range(n): if i != j: ... outputs[j] ...``), and by its
        own (``outputs[i]``). The own index names another element on each iteration;
        the other one names every element (all but ``outputs[i]`` under ``i != j``, which
        the own read covers) on each iteration. Marks those reads (``_peer_reads``);
        a backward that surely frees what they reach, on every iteration, frees the
        graph of every element for the next (``_peer_proof``). Syntax only, once per loop."""
        self._peer_scanned.add(id(loop))
        outer = _loop_index(loop)
        if outer is None or loop.orelse:
            return
        i, own_name, shape = outer
        tops: List[ast.stmt] = []
        todo: List[ast.stmt] = list(loop.body)
        while todo:  # the statements every iteration runs (``with`` bodies too)
            s = todo.pop()
            tops.append(s)
            if isinstance(s, (ast.With, ast.AsyncWith)):
                todo.extend(s.body)
        inners = [(inner, got) for inner in tops if isinstance(inner, ast.For) and not inner.orelse
                  for got in (_loop_index(inner),) if got is not None and got[0] != i]
        if not inners:
            return  # no inner loop to read the peers by (most loops): the walks below would find nothing
        if _loop_jumps(loop) or _rebinds(loop, i) or (own_name is not None and _rebinds(loop, own_name)):
            return
        changed = self._assigned_in_loop(loop)
        if not self._invariant_bound(loop.iter, changed):
            return
        found: Dict[int, Tuple[str, str, ast.stmt, bool]] = {}
        for inner, (j, elem, ishape) in inners:
            # the inner loop runs, in full, on every iteration
            if _loop_jumps(inner) or _rebinds(inner, j) or (elem is not None and _rebinds(inner, elem)):
                continue
            reads = list(_peer_subscripts(inner.body, i, j, False, elem))
            for node, cond in reads:
                if not isinstance(node, ast.Subscript):
                    continue
                key = dotted(node.value)
                if key is not None and key not in changed and key.split(".", 1)[0] not in changed \
                        and self._covers(ishape, shape, key, loop):
                    found[id(node)] = ("E", key, loop, cond)
            if elem is not None:
                # for j, peer in enumerate(outputs): each read of ``peer`` reads every element
                named = [node for node, _ in reads if isinstance(node, ast.Name)]
                key = ishape[1]
                if named and key not in changed and key.split(".", 1)[0] not in changed \
                        and len(named) == sum(1 for n in iter_nodes(list(inner.body))
                                              if isinstance(n, ast.Name) and n.id == elem) \
                        and self._covers(ishape, shape, key, loop):
                    target = inner.target.elts[1]  # type: ignore[attr-defined]
                    # (one token for every read of ``peer``: conditional if any read is, the weaker claim)
                    found[id(target)] = ("E", key, loop, any(c for node, c in reads if isinstance(node, ast.Name)))
                    self._peer_names[id(target)] = tuple(named)
        if not found:
            return
        keys = {v[1] for v in found.values()}
        for n in iter_nodes(list(loop.body)):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) \
                    and isinstance(n.slice, ast.Name) and n.slice.id == i:
                own = dotted(n.value)
                if own is not None and own in keys:
                    found[id(n)] = ("O", own, loop, False)
        if own_name is not None and shape[1] in keys:  # for i, out in enumerate(outputs): ``out`` is outputs[i]
            found[id(loop.target.elts[1])] = ("O", shape[1], loop, False)  # type: ignore[attr-defined]
        self._peer_reads.update(found)
        self._peer_tops[id(loop)] = frozenset(id(s) for s in tops)

    def _invariant_bound(self, expr: ast.expr, changed: FrozenSet[str]) -> bool:
        """:meth:`_invariant` for a loop's range, where an attribute of ``self``
        (``range(self.model_num)``) counts as unchanged unless the loop assigns it:
        a call of a method of ``self`` in the loop (``self.loss_ce(...)``) is not
        taken to change the number of models."""
        return _reads_unchanged(expr, changed, self_attrs_fixed=True)

    def _covers(self, inner: Tuple[str, str], outer: Tuple[str, str], key: str, loop: ast.For) -> bool:
        """Does an inner loop over ``inner`` (:func:`_index_range`) name, with its index, every
        element of ``key`` that the outer loop's own index may name? The same range
        (``range(n)`` and ``range(0, n)`` alike); ``range(len(outputs))`` for the list read
        (every index ``outputs[i]`` may take); ``range(len(models))`` where ``outputs`` was
        filled, right before the loop, with one element per model."""
        if inner == outer:
            return True
        if inner[0] != "len":
            return False
        return inner[1] == key or self._filled_from(key, inner[1], loop) \
            or (outer[0] == "len" and self._filled_from(key, outer[1], loop) and inner[1] == outer[1])

    def _filled_from(self, key: str, source: str, loop: ast.For) -> bool:
        """``outputs = []`` then ``for model in models: outputs.append(model(x))`` (one
        append, unconditional, no ``break``) in the statements just before ``loop``, and
        nothing else changing ``outputs`` in between: it has one element per model."""
        block = _block_of(self._root, loop)
        if block is None:
            return False
        at = next(k for k, s in enumerate(block) if s is loop)
        for k in range(at - 1, 0, -1):
            fill, start = block[k], block[k - 1]
            if isinstance(fill, ast.For) and dotted(fill.iter) == source and not fill.orelse \
                    and len(fill.body) == 1 and isinstance(fill.body[0], ast.Expr) \
                    and _appends_to(fill.body[0].value, key) \
                    and isinstance(start, ast.Assign) and len(start.targets) == 1 \
                    and dotted(start.targets[0]) == key and isinstance(start.value, ast.List) and not start.value.elts:
                return all(key not in self._assigned_in_stmt(s) for s in block[k + 1:at])
            if key in self._assigned_in_stmt(block[k]):
                return False
        return False

    @staticmethod
    def _assigned_in_stmt(st: ast.stmt) -> FrozenSet[str]:
        names: set = set()
        for node in iter_nodes([st]):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
                d = dotted(node)
                if d:
                    names.add(d)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                d = dotted(node.func.value)
                if d:
                    names.add(d)
            elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                d = dotted(node.value)
                if d:
                    names.add(d)
        return frozenset(names)

    def _peer_read(self, e: ast.expr, base: Val) -> Val:
        """A marked read (``_scan_peers``) of a list whose every element holds a graph
        that saved tensors, on its loop's first walk: its value says so."""
        kind, key, loop, cond = self._peer_reads[id(e)]
        saving = self.saving_calls
        gs = frozenset(t for t in base.taints if t[0] == "G" and id(t[1]) in saving)
        if not gs or base.mixed or any(t[0] == "U" for t in base.taints) \
                or not any(fr.loop is loop for fr in self.frames) or any(fr.second for fr in self.frames):
            return plain(base.taints)
        if kind == "O":
            return plain(base.taints | {("O", key, loop)})
        self._peer_graphs[id(e)] = gs
        return plain(base.taints | {("E", e, loop, cond, key)})

    def _peer_proof(self, ev: BackwardEvent, loss: Val) -> None:
        """A backward that surely frees its graph, run on every iteration of the loop
        whose reads reach its loss: if they read every element (``outputs[j]`` without
        a condition, or under ``i != j`` beside ``outputs[i]``), the first iteration
        frees each element's graph and the second runs into one of them."""
        found = []
        for t in loss.taints:
            if t[0] != "E":
                continue
            _, node, loop, cond, key = t
            if id(self._stmt) not in self._peer_tops.get(id(loop), EMPTY):
                continue
            if cond and ("O", key, loop) not in loss.taints:
                continue
            for g in self._peer_graphs.get(id(node), EMPTY):
                for read in self._peer_names.get(id(node), (node,)):
                    found.append((read, g[1], loop, key))
        if found:
            ev.peers = tuple(sorted(found, key=lambda p: (getattr(p[0], "lineno", 0), getattr(p[0], "col_offset", 0))))

    def _set_container(self, env: Dict[str, Val], key: str, v: Val) -> None:
        env[key] = v
        if "." in key:
            self._dotted_bases.add(key.split(".", 1)[0])

    def _unsure(self, v: Val, why: ast.AST, kind: str) -> Val:
        """``unsure(v)``, remembering for each graph it holds the expression that
        made it unknown and why: "imported" (a function of a module nobody
        summarised), "container" (a part of a container whose parts differ),
        "layer" (a container's module of a class that cannot be told)."""
        for t in v.taints:
            if t[0] in ("G", "U"):
                self.unsure_why.setdefault(t[1], (why, kind))
        self.unsure_at[id(why)] = (why, kind)
        return unsure(v)

    def _why_unsure(self, name: str, v: Val, site: _Opt[ast.stmt]) -> _Opt[Tuple[ast.AST, str]]:
        """The expression that made ``v`` (bound to ``name`` by ``site``) unknown: one
        inside that statement (``loss, mems = ret[0], ret[1:]``: the part bound to
        ``name``), else the first one recorded for a graph it may hold."""
        scope: _Opt[ast.AST] = getattr(site, "value", None)
        if isinstance(site, ast.Assign) and len(site.targets) == 1 and isinstance(site.targets[0], ast.Tuple) \
                and isinstance(site.value, ast.Tuple) and len(site.value.elts) == len(site.targets[0].elts):
            for target, value in zip(site.targets[0].elts, site.value.elts):
                if _binds(target, name):
                    scope = value
        if scope is not None:
            for node in iter_nodes(scope):
                if id(node) in self.unsure_at and self.unsure_at[id(node)][0] is node:
                    return self.unsure_at[id(node)]
        return next((self.unsure_why[t[1]] for t in sorted(
            v.taints, key=lambda t: (getattr(t[1], "lineno", 0), getattr(t[1], "col_offset", 0)))
            if t[0] == "U" and t[1] in self.unsure_why), None)

    # -- backward events ---------------------------------------------------
    def _event(self, call: ast.Call, loss: Val, retain: bool, freed: Iterable = (), stale: FrozenSet = EMPTY) -> None:
        ev = BackwardEvent(call, loss, retain, bool(self.frames), stale)
        self.events.append(ev)
        if self.no_grad:
            pass  # backward under no_grad still runs; graph-less values simply carry no tokens
        for fr in self.frames:
            fr.backprop = True
            if fr.second:
                for t in loss.taints:
                    if t[0] in ("C", "V") and t[2] is fr.loop and t not in fr.hits:
                        fr.hits[t] = ev
            else:
                fr.reached.update(t if t[0] == "G" else ("G", t[1]) for t in loss.taints if t[0] in ("G", "U"))
                fr.reached.update(freed)
                fr.freed.update(freed)

    # -- expressions -----------------------------------------------------
    def eval(self, e: ast.AST, env: Dict[str, Val]) -> Val:  # noqa: C901  (one dispatch over expression kinds)
        if isinstance(e, ast.Constant):
            return NONE if e.value is None else CONST
        if isinstance(e, ast.Name):
            v = env.get(e.id)
            if v is not None:
                return self._stale_read(v, env) if v.taints and FREED in env else v
            obj = self.r.global_obj(e.id)
            return Val(obj=obj) if obj else CLEAN
        if isinstance(e, ast.Call):  # (the kinds are disjoint: the most frequent are tested first)
            return self.call(e, env)
        if isinstance(e, ast.Attribute):
            key = dotted(e)
            if key is not None and key in env:
                v = env[key]
                if v.undef and self.track_self_state and key.count(".") == 1 and key.startswith("self.") \
                        and isinstance(e.value, ast.Name):
                    # assigned on some paths only: on the others it is what the previous call
                    # left (``if self._cached is None: self._cached = f(adj)`` then ``self._cached @ h``)
                    v = _with(v, taints=v.taints | {("A", key)})
                return self._stale_read(v, env) if v.taints and FREED in env else v
            if e.attr.endswith("Tensor"):
                q = self.r.qualify(e)
                if q is not None and _LEGACY_TENSOR_TYPE.fullmatch(q):
                    # `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`:
                    # a tensor type; calling it makes data, not a module's output
                    return Val(obj="tfac:" + q)
            if e.attr in K.GRAPH_CUT_ATTRS:
                self.eval(e.value, env)
                return CLEAN
            if e.attr in K.NON_GRAPH_ATTRS:
                base = self.eval(e.value, env)
                if not (base.obj or "").startswith(("user:", "pending:")):
                    return CLEAN  # B, T = x.shape: integers
            base = self.eval(e.value, env)
            obj = self.r.attr_obj(base.obj, e.attr)
            if obj is None and base.obj and base.obj.startswith("user:"):
                # self.fc, model.encoder: an unknown attribute of a module is a submodule or a parameter
                if self.track_self_state and key is not None and key.count(".") == 1 and key.startswith("self."):
                    return Val(frozenset({("A", key)}), obj="inst:?")
                return Val(obj="inst:?")
            if obj in _PARAMETER_OBJS:
                return plain({("L", e)})  # model.gain, where the class sets self.gain = nn.Parameter(...)
            if obj is not None:
                return Val(obj=obj)
            if (base.obj or "").startswith(("inst:torch.nn.", "layer:")) and not base.frozen \
                    and K.is_parameter_attr(e.attr):
                return plain(base.taints | {("L", e)})  # lin.weight, rnn.weight_hh_l0, model[0].weight: a parameter
            return plain(base.taints) if base.taints else CLEAN
        if isinstance(e, ast.Subscript):
            base = self.eval(e.value, env)
            index = self.eval(e.slice, env)
            if base.obj is not None and base.obj.startswith("inst:") and base.obj[5:] in _CONTAINER_CLASSES:
                # model[0] of an nn.Sequential: a layer, whose parameters are leaves that
                # require grad (``model[0].weight``); what calling it builds is not typed here
                return Val(obj="layer:" + base.obj[5:], frozen=base.frozen)
            if base.elems is not None:
                idx = e.slice
                if isinstance(idx, ast.Constant) and isinstance(idx.value, int) and -len(base.elems) <= idx.value < len(base.elems):
                    return base.elems[idx.value]
                bounds = _constant_slice(idx)
                if bounds is not None:
                    # ret[1:] of `[loss] + new_mems`: the parts it takes, not the whole
                    return _with(tup(list(base.elems[slice(*bounds)])), kind=base.kind)
            if base.obj is not None and base.obj.startswith(("list:", "dict:")) and not base.taints \
                    and not isinstance(e.slice, ast.Slice):
                return Val(obj=base.obj[5:], site=base.site)  # models[i]: one of the list's modules
            if base.mixed:
                return self._unsure(base, e, "container")
            idx = e.slice
            if isinstance(idx, ast.Constant) and type(idx.value) is int and idx.value >= 0 and any(
                    t[0] == "R" and t[2] == -1 for t in base.taints):
                return _nth_of_pending(base, idx.value)
            if base.kind is None and base.elems is None and not base.obj and any(t[0] == "L" for t in base.taints):
                sliced = self._op(e, base.taints)  # X[:, 0] of a tensor that requires grad: a graph (SliceBackward)
                return self._saves(sliced, e, self._index_saving(e.slice, index), "indexing") if self.build_stmts else sliced
            if self._peer_reads and id(e) in self._peer_reads:
                return self._peer_read(e, base)
            if base.kind == "list" and base.taints and isinstance(idx, ast.Name) and self.frames:
                own = self._own_element(e, idx.id)
                if own is not None:
                    marks = self.element_marks
                    return plain(own.taints | {t for t in base.taints if t[0] in marks}) if marks else own
            if self.build_stmts and base.kind is None and base.elems is None and not base.obj:
                return self._saves(plain(base.taints), e, self._index_saving(e.slice, index), "indexing")
            return plain(base.taints)
        if isinstance(e, ast.Tuple):
            return tup([self.eval(x, env) for x in e.elts])
        if isinstance(e, ast.List):
            return _with(tup([self.eval(x, env) for x in e.elts]), kind="list")
        if isinstance(e, ast.Starred):
            return self.eval(e.value, env)
        if isinstance(e, ast.BinOp):
            a = self.eval(e.left, env)
            b = self.eval(e.right, env)
            if isinstance(e.op, ast.Add) and (a.kind == "list" or isinstance(e.left, (ast.List, ast.ListComp))
                                              or b.kind == "list" or isinstance(e.right, (ast.List, ast.ListComp))):
                # [loss] + new_mems: a list (Python adds a list only to a list), not tensors
                if a.elems is not None and b.elems is not None:
                    return _with(tup(list(a.elems) + list(b.elems)), kind="list")
                return _with(plain(a.taints | b.taints), kind="list",
                             mixed=a.mixed or b.mixed or (bool(a.graph_tokens()) and _graph_free(b))
                             or (bool(b.graph_tokens()) and _graph_free(a)))
            if isinstance(e.op, ast.Mult) and (isinstance(e.left, ast.List) or isinstance(e.right, ast.List)):
                return _with(plain(a.taints | b.taints), kind="list")  # [None] * n: a list
            if self.build_stmts:
                op = type(e.op).__name__
                return self._saves(self._op(e, a.taints | b.taints), e, K.binop_saving(op), f"`{_OPS.get(op, op)}`")
            return self._op(e, a.taints | b.taints)
        if isinstance(e, ast.UnaryOp):
            return self._op(e, self.eval(e.operand, env).taints)
        if isinstance(e, ast.BoolOp):
            v = CLEAN
            for x in e.values:
                v = join(v, self.eval(x, env))
            return _with(v, site=None)
        if isinstance(e, ast.Compare):
            self.eval(e.left, env)
            for c in e.comparators:
                self.eval(c, env)
            return CLEAN
        if isinstance(e, ast.IfExp):
            self.eval(e.test, env)
            yes, no = dict(env), dict(env)
            self._narrow(e.test, yes, no)
            if _tensor_test(e.test) and is_graph_cut(e.body):
                # ``v.item() if torch.is_tensor(v) else v``: on the other branch v is no tensor
                name = dotted(e.test.args[0])  # type: ignore[attr-defined]
                if name is not None and any(dotted(n) == name for n in walk_all(e.body) if n.__class__ in (ast.Name, ast.Attribute)):
                    no[name] = CONST
            return join(self.eval(e.body, yes), self.eval(e.orelse, no))
        if isinstance(e, ast.ListComp):
            v = _with(plain(self._comp(e, [e.elt], env)), kind="list")
            if isinstance(e.elt, ast.Call) and not v.taints and isinstance(e.elt.func, (ast.Name, ast.Attribute)):
                # [nn.Sequential(...) for _ in range(n)]: a list of modules, each of that class
                tc = Resolver.torch_class(self.r.qualify(e.elt.func))
                if tc is not None and not tc.startswith(("torch.nn.parameter.", "torch.nn.utils.")) \
                        and tc != "torch.nn.Parameter" and self.r.global_obj(dotted(e.elt.func) or "") is None:
                    return _with(v, obj="list:inst:" + tc)
                made = self.eval(e.elt.func, env).obj or ""
                if made.startswith("fn:"):  # [resnet32() for _ in range(n)]: a helper that returns a module
                    got = self.r.ctor_obj(made[3:]) or ""
                    made = "ucls:" + got[5:] if got.startswith("user:") else ""
                if made.startswith("ucls:") and self.r.is_module_class(made[5:]):
                    return _with(v, obj="list:user:" + made[5:])
            return v
        if isinstance(e, (ast.GeneratorExp, ast.SetComp)):
            return plain(self._comp(e, [e.elt], env))
        # a dict holds what its values hold: its keys are evaluated, and are names,
        # numbers or strings (`{k: repackage(v) for k, v in state.items()}` detaches)
        if isinstance(e, ast.DictComp):
            return _with(plain(self._comp(e, [e.value], env, side=(e.key,))), kind="dict")
        if isinstance(e, ast.Dict):
            t: set = set()
            for k in e.keys:
                if k is not None:
                    self.eval(k, env)
            objs = set()
            for x in e.values:
                xv = self.eval(x, env)
                t |= xv.taints
                objs.add(xv.obj)
            held = _with(plain(t), kind="dict")
            if len(objs) == 1 and not t and e.keys and None not in e.keys:
                one = objs.pop()
                if one is not None and one.startswith("user:"):
                    # {"loss": AverageMeter(), ...}: stats["loss"] is one of those objects
                    held = _with(held, obj="dict:" + one)
            return held
        if isinstance(e, ast.Set):
            t = set()
            for x in e.elts:
                t |= self.eval(x, env).taints
            return plain(t)
        if isinstance(e, ast.NamedExpr):
            v = self.eval(e.value, env)
            self.bind(e.target, v, env, self._stmt)  # type: ignore[arg-type]
            return v
        if isinstance(e, (ast.Await, ast.YieldFrom)):
            return self.eval(e.value, env)
        if isinstance(e, ast.Yield):
            if e.value is not None:
                self.returns.append(self.eval(e.value, env))
            return CLEAN
        if isinstance(e, ast.JoinedStr):
            for x in e.values:
                self.eval(x, env)
            return CLEAN
        if isinstance(e, ast.FormattedValue):
            self.eval(e.value, env)
            return CLEAN
        if isinstance(e, ast.Slice):
            for x in (e.lower, e.upper, e.step):  # type: ignore[assignment]
                if x is not None:
                    self.eval(x, env)
            return CLEAN
        return CLEAN  # Lambda and anything exotic

    def _saves(self, v: Val, node: ast.AST, saving: _Opt[bool], label: str) -> Val:
        """``v`` (a value ``node`` computed) with what that operation says about saving
        tensors for backward (``build_stmts`` runs only): ``SAVES`` when it saves (one
        token for all: a value's taints do not grow with every saving operation),
        ``("M", node, label)`` when that cannot be told (``label`` names it in GG102's
        words, or is ``_CALL_WORDS`` / ``_MODULE_WORDS``: the call's text, written out only
        when a finding asks); nothing when it saves nothing. Only a value holding a
        graph is marked."""
        if saving is False or not v.taints or self.no_grad or not any(t[0] == "G" for t in v.taints):
            return v
        tok = SAVES if saving else ("M", node, label)
        if v.elems is not None:  # z, loss = model(x): each part with a graph was built by it
            return _with(v, taints=v.taints | {tok}, elems=tuple(self._saves(e, node, saving, label) for e in v.elems))
        return _with(v, taints=v.taints | {tok})

    def _used_as_module(self, name: str) -> bool:
        got = self.module_evidence
        if callable(got):
            got = self.module_evidence = got()
        return got is not None and name in got

    def _method_saves(self, call: ast.Call, func: ast.Attribute, recv: Val, v: Val) -> Val:
        """:meth:`_saves` for a method call: a tensor's method by the method's answer
        (``knowledge.method_saving``), a method of anything else cannot be told."""
        if any(t[0] in ("G", "L") for t in recv.taints):
            return self._saves(v, call, K.method_saving(func.attr), f"`.{func.attr}()`")
        return self._saves(v, call, None, _CALL_WORDS)

    def _index_saving(self, sl: ast.AST, index: Val) -> _Opt[bool]:
        """Basic indexing (ints, slices) saves nothing; a tensor index saves (what
        GG102 says of ``x[i]``)."""
        parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        result: _Opt[bool] = False
        for p in parts:
            if isinstance(p, (ast.Slice, ast.Constant)) or (isinstance(p, ast.UnaryOp) and isinstance(p.operand, ast.Constant)):
                continue
            if isinstance(p, (ast.Compare, ast.List)) or (isinstance(p, ast.Call) and (self.r.qualify(p.func) or "") in K.TENSOR_FACTORIES):
                return True
            if any(t[0] in ("G", "L") for t in index.taints) and (len(parts) == 1 or isinstance(p, ast.Name)):
                return True
            result = None
        return result

    def _op(self, node: ast.AST, taints: FrozenSet) -> Val:
        if self.no_grad:
            return CLEAN
        if any(t[0] == "L" for t in taints):
            self.leaf_of[id(node)] = frozenset(t for t in taints if t[0] == "L")
            taints = frozenset(t for t in taints if t[0] != "L") | {("G", node)}
            if _saving_op(node):
                self.saving_calls.add(id(node))  # `x ** 2`, `2 * t`, `x.pow(2)`: the graph it starts saves tensors
        elif _saving_op(node) or id(node) in self.saving_calls:
            # `(output - target).pow(2)`: the graph began at the subtraction (which saves
            # nothing), the power of that fresh value saves it. The graph's start stands for
            # the graph (its token), so it is marked: only a start inside the operand's own
            # expression, which no other value can hold (a named `d` may be read elsewhere)
            saving = self.saving_calls
            cand = [t[1] for t in taints if t[0] == "G" and id(t[1]) not in saving]
            if cand:
                fresh = _fresh_starts(node)
                marked = False
                for n in cand:
                    if id(n) in fresh:
                        saving.add(id(n))
                        marked = True
                if not marked and self.r.ctx is not None and len(cand) == len([t for t in taints if t[0] == "G"]) \
                        and all(id(n) in self.leaf_of for n in cand):
                    # `y = torch.mul(a, b)` of named values (`a = w + x`, `b = w + 1`)
                    # whose graphs, begun at leaves, save nothing: the saving starts here, a
                    # graph of its own (a second backward through `y` fails, one through `a`
                    # does not). Not for a graph only assumed (what an unseen callable made)
                    saving.add(id(node))
                    taints = taints | {("G", node)}
        if self.r.ctx is None:
            # summarising a def: an op computed this from parameter i (("Q", i)), so
            # a caller passing a tensor that requires grad gets a new graph back
            derived = [("Q", t[1]) for t in taints if t[0] == "P"]
            if derived:
                if _saving_op(node) or id(node) in self.saving_calls:
                    derived += [("QS", t[1]) for t in taints if t[0] == "P"]  # (RetPos.derived_saving)
                taints = taints | frozenset(derived)
        return plain(taints)

    def _comp(self, e, elts, env, side=()) -> FrozenSet:
        inner = dict(env)
        for gen in e.generators:
            it = self.eval(gen.iter, inner)
            if self._binds_parameters(gen, inner):
                continue
            part = plain(it.taints)
            if self.build_stmts and (it.obj or "").startswith(("list:inst:", "list:user:")) \
                    and isinstance(gen.target, ast.Name):
                # [m(x) for m in models], models a list of modules: m is one (for the
                # saving question only; its calls stay an untyped callable's)
                part = _with(part, kind="module")
            if it.elems is not None:
                v = CLEAN
                for x in it.elems:
                    v = join(v, x)
                part = plain(v.taints)
            self.bind(gen.target, part, inner, self._stmt)  # type: ignore[arg-type]
            for cond in gen.ifs:
                self.eval(cond, inner)
        for x in side:
            self.eval(x, inner)
        t: FrozenSet = EMPTY
        for elt in elts:  # (not `x`: above, x is a Val)
            t = t | self.eval(elt, inner).taints
        return t

    def _binds_parameters(self, gen: ast.comprehension, env: Dict[str, Val]) -> bool:
        """``for p in model.parameters()`` / ``for n, p in model.named_parameters()`` in a
        comprehension (``sum(p.pow(2).sum() for p in model.parameters())``), over a module
        not frozen: ``p`` is a parameter, a leaf that requires grad."""
        it, target = gen.iter, gen.target
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args and not it.keywords
                and it.func.attr in ("parameters", "named_parameters")):
            return False
        owner = self.eval(it.func.value, env)
        if not (owner.obj or "").startswith(("inst:torch.nn.", "user:", "layer:")) or owner.frozen:
            return False
        name: ast.expr
        if it.func.attr == "parameters" and isinstance(target, ast.Name):
            name = target
        elif isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(x, ast.Name) for x in target.elts):
            self.bind(target.elts[0], CONST, env, self._stmt)  # type: ignore[arg-type]
            name = target.elts[1]
        else:
            return False
        self.bind(name, plain({("L", it)}), env, self._stmt)  # type: ignore[arg-type]
        for cond in gen.ifs:
            self.eval(cond, env)
        return True

    # -- calls -------------------------------------------------------------
    def _args(self, call: ast.Call, env) -> Tuple[List[Val], Dict[str, Val]]:
        pos = [self.eval(a, env) for a in call.args]
        kws = {}
        for kw in call.keywords:
            v = self.eval(kw.value, env)
            kws[kw.arg or "**"] = v
        return pos, kws

    def call(self, call: ast.Call, env: Dict[str, Val]) -> Val:
        func = call.func
        ctx = self.r.ctx
        if self._state_keys:
            self._reset_states(call, env)
        # backward() and friends
        if is_backward_call(call, ctx):
            tgt = backward_target(call, ctx)
            recv = self.eval(func.value, env) if isinstance(func, ast.Attribute) else None
            pos, kws = self._args(call, env)
            if recv is not None and call.args and isinstance(func, ast.Attribute):
                facts = self.r.method_facts(recv.obj, func.attr)
                if facts is not None and facts.calls_backward:
                    # optimizer.backward(loss1) on a wrapper of this file (a mixed-precision
                    # optimizer's own backward(loss) calling loss.backward()): its facts say
                    # which argument reaches the backward, never the receiver
                    self.wrapper_backwards.add(id(call))
                    return self._apply_facts(call, facts, pos, kws, env, func.attr)
            if recv is not None and isinstance(func, ast.Attribute) and tgt is func.value:
                loss = recv  # model.encode(x).sum().backward(): the receiver, run once (a call may step a state)
            else:
                loss = self.eval(tgt, env) if tgt is not None else CLEAN
            grad_inputs = None
            if qualify(func, ctx) in K.BACKWARD_FUNCTIONS:
                # torch.autograd.grad(outputs, inputs): only the outputs are back-propagated;
                # a parameter differentiated against as given (not made a leaf that requires
                # grad here) must keep its graph: a caller must not detach it (FnFacts.grad_params)
                given = pos[1] if len(pos) > 1 else kws.get("inputs", CLEAN)
                if not any(t[0] == "L" for t in given.taints):
                    self.grad_params.update(t[1] for t in given.taints if t[0] == "P")
                if len(pos) > 1 or "inputs" in kws:
                    grad_inputs = frozenset(t for t in given.taints if t[0] in ("G", "L"))
            if not has_create_graph(call):
                self._event(call, loss, keeps_graph(call), stale=self._stale(loss.taints, env))
                if grad_inputs is not None:
                    self.events[-1].inputs = grad_inputs
                if self._peer_reads and surely_frees(call, ctx):
                    self._peer_proof(self.events[-1], loss)
                if self.frames and self.find_carries:
                    # (a retained graph is marked too: the step after it changes what it saved)
                    _mark_freed(env, _reached(loss))
                if surely_frees(call, ctx):
                    self._free(env, loss.taints, call)
                return CLEAN
            if not keeps_graph(call):
                # backward(create_graph=True, retain_graph=False): the explicit False wins,
                # the graph is freed
                self._event(call, loss, False)
                if self.frames and self.find_carries:
                    _mark_freed(env, _reached(loss))
            else:
                # MAML's loss.backward() then autograd.grad(loss, w, create_graph=True): the
                # call keeps the graph, but runs into one a backward before it surely freed
                stale = self._stale(loss.taints, env)
                if stale:
                    self._event(call, loss, True, stale=stale)
            if qualify(func, ctx) in K.BACKWARD_FUNCTIONS and not self.no_grad:
                # autograd.grad(outputs, inputs, create_graph=True): the gradients are built
                # from the graph of outputs and inputs (a gradient penalty carries it on)
                inputs = pos[1] if len(pos) > 1 else kws.get("inputs", CLEAN)
                return plain(loss.taints | inputs.taints)
            return CLEAN
        if (call.args or call.keywords) and applies_cut(call):
            self._args(call, env)
            return CLEAN
        if len(self._targets) >= 2 and self._rewraps(call, env):  # (its first test, before the call: a hot path)
            self.eval(func, env)
            self._args(call, env)
            return CLEAN
        if call.args and _has_lambda(call.args):  # (_maps_a_function's first test, likewise)
            mapped = self._maps_a_function(call, env)
            if mapped is not None:
                return mapped
        if isinstance(func, ast.Attribute):
            return self._method_call(call, func, env)
        callee = self.eval(func, env)
        pos, kws = self._args(call, env)
        args_taints = frozenset().union(*(v.taints for v in pos), *(v.taints for v in kws.values())) if (pos or kws) else EMPTY
        q = self.r.qualify(func) if isinstance(func, ast.Name) else None
        if isinstance(func, ast.Name) and func.id in env and callee.obj is None:
            q = None  # a local callable shadows any import
        res = self._apply(call, callee, q, pos, kws, args_taints, env)
        if isinstance(func, ast.Name) and (callee.obj or "").startswith(("inst:", "user:")) and self.r.ctx is not None:
            hook = query(self.r.summary, _hooked_names).get(func.id)
            if hook is not None:
                self._run_hook(call, hook, callee, args_taints, res, env)
        return res

    def _run_hook(self, call: ast.Call, hook: str, callee: Val, args_taints: FrozenSet, res: Val,
                  env: Dict[str, Val]) -> None:
        """``student(images)`` where ``student[0].register_forward_hook(keep)`` at module
        level: ``keep(module, input, output)`` runs on the call, and what it puts in the
        module-level lists it fills (``fmaps.append(output)``, ``FnFacts.containers``) is
        this call's graph (the part's output is on it) and its input's."""
        facts = self.r.fn(hook)
        if facts is None or facts.no_grad:
            return
        out = res if not res.graph_tokens() else plain(res.taints | {("G", call)})

        def argval(i: int) -> Val:
            return (callee, plain(args_taints), out)[i] if i < 3 else CLEAN

        for eff in facts.containers:
            if not eff.path.startswith("#") and "." not in eff.path:
                self._fill(call, eff.path, eff, argval, env)

    def _maps_a_function(self, call: ast.Call, env: Dict[str, Val]) -> _Opt[Val]:
        """``map_structure(batch, lambda x: x.to(device))``, ``nest.map(lambda t:
        t[1:], batch)``, ``tree_map(f, state)``: a helper handed a function (a
        lambda) and data gives back what the function makes of the data. It is
        not a module: whatever graph comes back, the lambda's body built it (or
        the data held it). None when the call is not of that shape (torch's own
        higher-order functions, a module's methods, a lambda given as a key,
        a same-file helper that back-propagates)."""
        lams = [a for a in call.args if isinstance(a, ast.Lambda)]
        if len(lams) != 1 or not lams[0].args.args or any(isinstance(k.value, ast.Lambda) for k in call.keywords):
            return None
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name is None or name in _NOT_MAPPING:
            return None
        q = self.r.qualify(func)
        if q and (q.startswith("torch.") or q in _WRAPPERS):
            return None
        if isinstance(func, ast.Attribute):
            key = dotted(func.value)
            recv = env.get(key) if key is not None else None
            if recv is not None and (recv.obj or "").startswith(("user:", "inst:")):
                return None  # model.apply(lambda m: ...): a module's own method
        elif isinstance(func, ast.Name) and func.id not in env:
            facts = self.r.fn(func.id)
            if facts is not None and (facts.calls_backward or facts.delegates):
                return None
        lam = lams[0]
        data: FrozenSet = EMPTY
        for a in call.args:
            if a is not lam:
                v = self.eval(a, env)
                data = data | v.taints
        for k in call.keywords:
            data = data | self.eval(k.value, env).taints
        inner = dict(env)
        for p in lam.args.args:
            inner[p.arg] = plain(data)
        out = self.eval(lam.body, inner)
        return plain(out.taints)

    def _method_call(self, call: ast.Call, func: ast.Attribute, env) -> Val:  # noqa: C901  (one dispatch over method kinds)
        m = func.attr
        ctx = self.r.ctx
        q = None
        key = dotted(func.value)
        base_known = key is not None and (key in env or key.split(".")[0] in env)
        if not base_known:
            q = self.r.qualify(func)
            if key is not None and m in self.r.imported_module_names() and not self.r.rebound(key):
                # `utils.repackage_hidden(h)`, `models.Seq2Seq(...)`: a function or class of
                # a module of the project imported whole, known by its dotted name
                obj = self.r.global_obj(f"{key}.{m}")
                if obj is not None:
                    pos, kws = self._args(call, env)
                    return self._apply(call, Val(obj=obj), None, pos, kws, _union(pos, kws), env)
        if q and (q.startswith("torch.") or q in _WRAPPERS):
            pos, kws = self._args(call, env)
            t = frozenset().union(*(v.taints for v in pos), *(v.taints for v in kws.values())) if (pos or kws) else EMPTY
            return self._torch_call(call, q, pos, kws, t)
        if not base_known and _non_graph_library(q or key):
            self._args(call, env)
            return CLEAN  # np.roll(img, 1, -1), scipy.ndimage.zoom(x, 2): arrays, no graph
        recv = self.eval(func.value, env)
        if m in _ENVIRONMENT_METHODS and _environment_name(key) and (
                recv.obj is None or (recv.obj.startswith("user:") and not self.r._defines(recv.obj[5:], m))):
            # next_state, reward, done, _ = env.step(action): an environment whose step the
            # trace cannot see (gym.make(...), a registry's class, a wrapper of gym's) hands
            # back observations and rewards of its own -- numbers and arrays, not the graph
            # of the action it is given
            self._args(call, env)
            return CLEAN
        if m in K.GRAPH_CUT_METHODS or m in K.FACTORY_METHODS or m in K.INTEGER_METHODS or (
            m in ("to", "type") and any(qualify(a, ctx) in K.INTEGER_DTYPES
                                        for a in list(call.args) + [k.value for k in call.keywords])
        ):
            self._args(call, env)
            if m == "detach_" and key is not None:
                env[key] = _with(env.get(key, CLEAN), taints=EMPTY, elems=None)
            return CLEAN
        pos, kws = self._args(call, env)
        if m == "requires_grad_":
            if call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value is False:
                if key is not None:
                    if recv.obj and recv.obj.startswith(("inst:", "user:")):
                        env[key] = _with(recv, frozen=True)  # encoder.requires_grad_(False)
                        return env[key]
                    if recv.graph_tokens():
                        return recv  # on a value with a graph it raises at run time: the graph stays
                    env[key] = _with(env.get(key, CLEAN), taints=EMPTY, elems=None)
                return CLEAN
            if key is not None:
                env[key] = _with(env.get(key, CLEAN), taints=env.get(key, CLEAN).taints | {("L", call)})
            return plain(recv.taints | {("L", call)})
        if self.r.ctx is None and key is not None and "." not in key and recv.param and recv.obj is None \
                and not self.no_grad and m not in _MODULE_METHODS and m not in _SELF_METHODS:
            who = _param_set(recv)
            if len(who) == 1 and any(t[0] == "P" and t[1] not in who for t in _union(pos, kws)):
                # while summarising: ``meter.update(losses)`` on a parameter, handed what another
                # parameter brings (FnFacts.calls, receiver "@#i"): what the object's method keeps
                # of it is its class's answer where the def is called (GG201's meter helpers)
                self.calls.append((f"@#{next(iter(who))}", m, tuple(_param_set(v) for v in pos),
                                   tuple((kw, _param_set(v)) for kw, v in kws.items() if kw != "**")))
        if m == "append" and self.track_self_state and key is not None and key.startswith("self.") and key.count(".") == 1:
            # self.log_probs.append(x): handed to the caller through the object's own list,
            # as a return would (self_states reads it)
            self._appended[key] = plain(_union(pos, kws))
        if key == "self" and self.self_obj is not None and recv.obj == self.self_obj:
            self.member_calls.append((m, _union(pos, kws)))  # self.lif1(cur): for ClassFacts.members
        if recv.obj and recv.obj.startswith("pending:"):
            return self._pending_call(recv.obj[8:], m, pos, kws)
        if m in K.DISTRIBUTION_NONDIFF_METHODS and recv.obj and recv.obj.startswith("dist:"):
            return CLEAN  # a = dist.sample(): drawn without a graph (rsample() keeps one)
        if m == "copy_" and self.track_self_state and recv.obj == "inst:?" and ("A", key) in recv.taints:
            # self.v.copy_(0.5 * self.v + x) on a buffer: the state now also holds what is
            # copied in, on top of its own history (an in-place op keeps it)
            env[key] = Val(recv.taints | _union(pos, kws), site=self._stmt)
            return env[key]
        if recv.obj is None and recv.param and self.r.ctx is not None and not self.no_grad:
            # criterion.forward_reg(model, sample, optimizer) on a parameter of unknown type,
            # where one class of the file alone defines a method of that name that
            # back-propagates the loss it returns (FnFacts.frees_returned_saving): that method
            owner = query(self.r.summary, returned_freers).get(m)
            if owner is not None:
                facts = self.r.method_facts("user:" + owner, m)
                if facts is not None:
                    return self._apply_facts(call, facts, pos, kws, env, m)
        if recv.obj and recv.obj.startswith(("user:", "inst:")):
            if m in _SELF_METHODS:
                return recv
            if self._state_keys and key is not None and m not in _MODULE_METHODS and m != "forward":
                self._method_resets(recv, key, m, env)
            if (self._drives or self.inline_setters) and key == "self" and recv.obj == self.self_obj:
                fn = self.methods.get(m)
                if fn is not None and m not in self._inlining and len(self._inlining) < INLINE_DEPTH:
                    return self._inline(call, fn, pos, kws, env)
            facts = self.r.method_facts(recv.obj, m)
            if facts is not None:
                res = self._apply_facts(call, facts, pos, kws, env, m)
                if m == "forward" and not recv.frozen:
                    return self._kept(call, recv, key, CLEAN if self.no_grad else res, pos, kws, env)
                self._clears(recv, key, m, env)
                if key is not None and key != "self" and recv.obj.startswith("user:"):
                    res = self._method_state(call, recv, key, m, res, env)
                return res
            if m == "forward":
                return self._apply(call, recv, None, pos, kws, _union(pos, kws), env)
            sub = self.r.attr_obj(recv.obj, m)
            if sub is None and recv.obj.startswith("user:") and m not in _MODULE_METHODS:
                sub = "inst:?"  # self.fc(x): an attribute we cannot see is a submodule
                if not self.build_stmts and self.r.ctx is not None and not self.r.is_module_class(recv.obj[5:]):
                    # self.clip_range(p) of a class that is no module (a PPO agent): what the
                    # attribute holds (a schedule, any callable) is not typed by the class's
                    # facts, so its result only may hold a graph (the shared run's mark)
                    self.opaque.add(id(call))
            if sub is not None:
                return self._apply(call, Val(obj=sub), None, pos, kws, _union(pos, kws), env)
            return CLEAN if m in _MODULE_METHODS else plain(_union(pos, kws))
        if recv.obj and recv.obj.startswith("ucls:"):
            # Model.repackage_hidden(h): a static or class method of a class of this file,
            # called through the class, returns what its facts say (a detached state)
            cf = self.r.cls(recv.obj[5:])
            facts = self.r.method_facts("user:" + recv.obj[5:], m) if cf is not None and m in cf.unbound else None
            if facts is not None:
                return self._apply_facts(call, facts, pos, kws, env, m)
        if m in K.SHAPE_ARGUMENT_METHODS:
            # y.view_as(other): `other` lends a shape, not its graph
            got = self._op(call, recv.taints) if recv.taints else CLEAN
            return self._method_saves(call, func, recv, got) if self.build_stmts else got
        t = recv.taints | _union(pos, kws)
        if not self.no_grad and self._threads_state(call, recv, unknown_ok=True):
            # out, h = obj.step(x, h) / h = model.cell(x, h) on an object we cannot see
            self._threaded_by_unknown(call, None, t)
            return plain(t | {("G", call)})
        if m in ("append", "extend", "insert", "add", "update") and key is None and func.value.__class__ is ast.Subscript:
            # self.scalars[tag].append(v): a dict (or list) of lists now holds v's graph (and
            # self.stats[phase][name].update(v), a dict of dicts of meters, the outer dict)
            inner = func.value.value
            while inner.__class__ is ast.Subscript and m == "update":
                inner = inner.value
            base = dotted(inner)
            if base is not None and base in env:
                added = _union(pos, kws)
                if added:
                    old = env[base]
                    env[base] = _with(old, taints=old.taints | added, elems=None, site=self._stmt)
                return NONE
        if m in ("append", "extend", "insert", "add", "update") and key is not None and key in env:
            # list.append(x): the list now holds x's graph
            old = env[key]
            added = _union(pos, kws)
            obj = old.obj
            if m == "append" and len(pos) == 1 and not added and not old.taints and old.kind == "list" \
                    and obj in (None, "list:" + (pos[0].obj or "")) and self._module_obj(pos[0].obj):
                # models.append(Net()): a list of modules of that class (models[i] is one of them)
                obj = "list:" + pos[0].obj  # type: ignore[operator]
            if self.build_stmts and any(t[0] in ("G", "L") for t in added):
                added = added | {("B", self._stmt)}
            env[key] = _with(old, taints=old.taints | added, elems=None,
                             site=self._stmt if added else old.site, obj=obj)
            if m == "append":
                self._appended[key] = plain(added)
            return NONE
        if m in ("append", "extend", "insert") and key is None and isinstance(func.value, ast.Subscript):
            # episode["prob"].append(prob): the dict (or list of lists) now holds prob's graph
            base = dotted(func.value.value)
            added = _union(pos, kws)
            if base is not None and base in env and added:
                env[base] = _with(env[base], taints=env[base].taints | added, elems=None)
            return NONE
        if m == "clear" and not call.args and key is not None and key in env and env[key].obj is None:
            self._set_container(env, key, Val(elems=(), kind="list"))  # saved_log_probs.clear(): empty now
            return NONE
        if m in ("copy_",) and key is not None and key in env:
            old = env[key]
            env[key] = _with(old, taints=old.taints | _union(pos, kws), elems=None)
            return env[key]
        if self.r.ctx is None and not base_known and key is not None and "." in key and not self.no_grad \
                and recv.obj is None and not recv.taints and _global_receiver(key, self.r):
            # while summarising: ``model.scheduler.step(out, t, x)`` on an object of a module-level
            # name (not seen from here): recorded as a call of that object's method
            # (FnFacts.calls, its receiver "@model.scheduler"), composed where the function is
            # called, with what the object's class does to the containers it keeps
            res = self._op(call, t) if t else CLEAN
            k = len(self.calls)
            self.calls.append(("@" + key, m, tuple(_param_set(v) for v in pos),
                               tuple((kw, _param_set(v)) for kw, v in kws.items() if kw != "**")))
            return plain(res.taints | {("R", k, -1)})
        got = self._op(call, t) if t else CLEAN
        return self._method_saves(call, func, recv, got) if self.build_stmts else got

    def _call_saves(self, call: ast.Call, callee: Val, q: _Opt[str], res: Val) -> Val:
        """:meth:`_saves` for a call of a callable (not a tensor's method): a module's call
        saves; a builtin combining its arguments (``max``, ``abs``), a function of the
        user's or a callable the trace cannot see cannot be told; ``sum``, ``list``,
        ``zip``... save nothing; a torch function was marked by ``_torch_call``."""
        obj = callee.obj or ""
        if obj.startswith("user:"):
            # a module class of the user's saves when it keeps a layer; otherwise cannot be told
            return self._saves(res, call, True if self.r.holds_layer(obj[5:]) else None, _MODULE_WORDS)
        if id(call) in self.saving_calls or callee.kind == "module" or (
                isinstance(call.func, ast.Name) and ("G", call) in res.taints and self._used_as_module(call.func.id)):
            return self._saves(res, call, True, "")
        if q is not None and (q.startswith("torch.") or q in _WRAPPERS):
            return res
        func = call.func
        if isinstance(func, ast.Name) and func.id in _BUILTIN_NAMES and callee.obj is None:
            if func.id in ("abs", "max", "min", "pow", "divmod", "round"):
                return self._saves(res, call, None, f"`{func.id}()`")
            return res
        return self._saves(res, call, None, _CALL_WORDS)

    def _apply(self, call, callee: Val, q: _Opt[str], pos, kws, args_taints, env) -> Val:
        obj = callee.obj
        if q == "collections.defaultdict" and obj is None and len(pos) == 1 and (pos[0].obj or "").startswith("ucls:"):
            # defaultdict(AverageMeter): each value it hands out is an object of that class
            return Val(obj="dict:user:" + pos[0].obj[5:], kind="dict")
        if q is not None and obj is None:
            if q in _CLEAN_BUILTINS or ("." in q and _non_graph_library(q)):
                return CLEAN
            if q.startswith("torch.") or q in _WRAPPERS:
                return self._torch_call(call, q, pos, kws, args_taints)
            tc = Resolver.torch_class(q)
            if tc:
                return Val(obj="cls:" + tc)
            if q in _BUILTIN_NAMES and isinstance(call.func, ast.Name) and self.r.global_obj(q) is None:
                # min(max(k, 0), 1), abs(x), sum(losses): a builtin hands back (a combination
                # of) its arguments and builds no graph of its own, so it steps no state
                return plain(args_taints)
        if obj is not None:
            if obj.startswith("tfac:"):
                return CLEAN  # Tensor(n, 1): a new tensor, no graph
            if obj.startswith("cls:"):
                return self._construct(obj[4:], pos)
            if obj.startswith("ucls:"):
                return self._user_object(call, obj[5:], pos, kws)
            if obj.startswith("fn:"):
                facts = self.r.fn(obj[3:])
                if facts is not None and facts.makes:
                    made = self.r.ctor_obj(obj[3:])
                    if made is not None:
                        return Val(obj=made)
                if facts is not None:
                    return self._apply_facts(call, facts, pos, kws, env, obj[3:])
            if obj.startswith("inst:"):
                tq = obj[5:]
                if self.no_grad:
                    return CLEAN
                res = self._module_result(call, tq, args_taints, graph=not callee.frozen)
                return self._sequence_state(call, callee, res, env) if tq == "torch.nn.Sequential" else res
            if obj.startswith("pending:"):
                if self.no_grad:
                    return CLEAN
                self.pending_nodes[len(self.calls)] = call  # (RetPos.stepped_after)
                return self._pending_call(obj[8:], "forward", pos, kws)
            if obj.startswith("user:"):
                key = dotted(call.func)
                if self.no_grad:
                    return self._kept(call, callee, key, CLEAN, pos, kws, env)
                if callee.frozen:
                    return self._kept(call, callee, key, plain(args_taints), pos, kws, env)
                self.saving_calls.add(id(call))
                if callee.param and self._threads_state(call, callee, unknown_ok=True):
                    # a parameter bound from its call sites (rules.common._bind_from_call_sites):
                    # a state threaded through it (``pred, mems = model(x, mems)``) is read as
                    # the unbound parameter's was, whatever the class's summarised forward says
                    return plain(args_taints | {("G", call)})
                facts = self.r.method_facts(obj, "forward")
                if facts is not None:
                    res = self._apply_facts(call, facts, pos, kws, env, "forward", graph_node=call)
                    return self._kept(call, callee, key, res, pos, kws, env)
                return plain(args_taints | {("G", call)})
        # unknown callable
        if self.no_grad:
            return CLEAN
        summarising = self.r.ctx is None  # (see opaque)
        name = func_name = call.func.id if isinstance(call.func, ast.Name) else None
        targets = self._targets
        argnames = [dotted(a) for a in call.args]
        if self.r.ctx is None and name is not None and name in env and not callee.param and callee.obj is None \
                and isinstance(callee.site, (ast.For, ast.AsyncFor)):
            # for attn, ff in self.layers: x, mem = attn(x, mem): one of a container's
            # modules whose class the summary cannot tell (the typed ones are user: or
            # pending:): what it makes of x, and whether it cuts what it returns, is unknown
            return self._unsure(plain(args_taints), call, "layer")
        if self._threads_state(call, callee, unknown_ok=True):
            self._threaded_by_unknown(call, name, args_taints)
            return plain(args_taints | {("G", call)})
        if (
            name is not None
            and len(call.args) == 1
            and not call.keywords
            and len(targets) == 1
            and argnames[0] == targets[0]
            and (callee.obj is None or callee.obj == "local")
            and not callee.param
        ):
            # h = repackage(h) with a helper we cannot see: a state-cutting helper by shape.
            return CLEAN
        fn = self.local_defs.get(name) if callee.obj == "local" and name is not None else None
        facts = None
        if fn is not None:
            # def p(*shape): return nn.Parameter(...) in the body: what a call of it hands
            # back is its summary's answer (leaves, a graph, what its arguments bring)
            facts = self._local_facts.get(id(fn))
            if facts is None and SUMMARISE_DEF is not None:
                facts = self._local_facts[id(fn)] = SUMMARISE_DEF(fn, self.r)
        if fn is not None and facts is not None:
            made = self.r.ctor_obj(facts.makes) if facts.makes else None
            if made is not None and made.startswith("user:"):
                return Val(obj=made)  # net = build(): what a constructor of the user's made
            return self._apply_facts(call, facts, pos, kws, env, name)
        if name is not None and (name in env or (self.r.ctx is None and name not in _BUILTIN_NAMES)) and (
            callee.obj in (None, "local") or callee.param
        ) and name not in ("tuple", "list"):
            # model(x) where `model` is a parameter / a local we cannot type (or, while
            # summarising a def, a module-level name we cannot see): assume a module
            if summarising:
                self.opaque.add(id(call))
                self._note_param_call(call, callee, args_taints)
            elif not self.build_stmts and not any(t[0] == "L" for t in args_taints) \
                    and not self._used_as_module(name):
                # norm(x) of a parameter or a local the unit never uses as a module (no
                # norm.parameters(), norm.zero_grad(): ast_util.module_names): it may be any
                # callable (a plain normaliser object), so its result only may hold a graph
                # (the shared run's mark, read by tensor_graphs; on leaves it is an op that
                # surely builds one). A name used as a module (``m`` of ``[m(x) for m in
                # models]`` beside ``m.parameters()``) stays a module's output.
                self.opaque.add(id(call))
            if name not in env and self.r.ctx is None:
                # a module-level function, maybe: its facts are composed where this def is called
                # (and whether its graph is only assumed is that function's answer: RetPos.assumed_via)
                self.opaque_via[id(call)] = name
                k = len(self.delegates)
                if self.frames:
                    self.loop_delegates.append(k)
                self.delegates.append((name, tuple(_param_set(v) for v in pos),
                                       tuple((kw, _param_set(v)) for kw, v in kws.items() if kw != "**")))
                return plain(args_taints | {("G", call), ("D", k)})
            return plain(args_taints | {("G", call)})
        if func_name in ("tuple", "list", "sorted", "reversed", "zip", "enumerate", "iter", "next", "dict", "set"):
            if func_name in ("tuple", "list") and len(pos) == 1:
                v = pos[0]
                return v if v.elems is not None else plain(v.taints)
            return plain(args_taints)
        imports = getattr(self.r.ctx, "imports", None) or {}
        if func_name is not None and func_name in imports and func_name not in env and args_taints \
                and not imports[func_name].startswith("torch"):
            # correlation_based_update(ts, lin, w.detach(), state): a function imported
            # from a module nobody summarised: whether what it returns holds its
            # arguments' graphs is unknown, not proven
            return self._unsure(plain(args_taints), call, "imported")
        return self._op(call, args_taints) if args_taints else CLEAN

    def _user_object(self, call: ast.Call, cls: str, pos=(), kws=None) -> Val:
        """``Model(...)``: an object of a class of the user's; frozen where its ``__init__``
        surely freezes its parameters (``Vgg16(requires_grad=False)``, ``ClassFacts.init_freezes``).
        Where its ``__init__`` keeps what a module it is handed computes (``ClassFacts.init_graphs``)
        and the module handed trains (a module of the user's or torch's, not frozen), the
        object holds the graph built then (``("G", call)``, saving): every call of it reads it."""
        cf = self.r.cls(cls)
        if cf is not None and cf.init_freezes and _init_frozen(call, cf.init_freezes):
            return Val(obj="user:" + cls, frozen=True)
        if cf is not None and cf.init_graphs and not self.no_grad and self.r.ctx is not None:
            for _, i, name, method in cf.init_graphs:
                if i < 0:
                    # a module of the file the constructor builds itself: it trains unless its
                    # method runs under no_grad
                    own = self.r.cls(name)
                    module = own is not None and (own.has_forward or any(
                        b.rsplit(".", 1)[-1] == "Module" for b in own.bases))
                    facts = own.method(method) if own is not None and module else None
                    if facts is None or facts.no_grad or own is None or own.init_freezes:
                        continue
                    self.saving_calls.add(id(call))
                    self.made_holding.add(id(call))
                    return Val(frozenset({("G", call)}), obj="user:" + cls)
                arg = pos[i] if i < len(pos) else (kws or {}).get(name)
                if arg is None or arg.frozen or not (arg.obj or "").startswith(("inst:", "user:")) \
                        or (arg.obj or "").startswith("inst:?"):
                    continue
                facts = self.r.method_facts(arg.obj, method) if arg.obj.startswith("user:") else None
                if facts is not None and facts.no_grad:
                    continue  # (``@torch.no_grad() def encode_text``)
                if self._frozen_in_part(call, i, name):
                    continue
                self.saving_calls.add(id(call))
                self.made_holding.add(id(call))
                return Val(frozenset({("G", call)}), obj="user:" + cls)
        return Val(obj="user:" + cls)

    def _frozen_in_part(self, call: ast.Call, i: int, name: str) -> bool:
        """Does the file freeze something of the module handed at position ``i`` (or keyword
        ``name``) of ``call`` (``clip_model.transformer.requires_grad_(False)``, a loop setting
        ``requires_grad`` over its parameters)? Any line naming it beside ``requires_grad``."""
        arg = call.args[i] if i < len(call.args) else next((k.value for k in call.keywords if k.arg == name), None)
        held = dotted(arg) if arg is not None else None
        lines = getattr(getattr(self.r.ctx, "index", None), "lines", None)
        if held is None or lines is None:
            return True
        return any("requires_grad" in line and held + "." in line for line in lines)

    def _threaded_by_unknown(self, call: ast.Call, name: _Opt[str], args_taints) -> None:
        """``out, h = step(x, h)`` (or ``obj.step(x, h)``, ``name`` None) of a callable the
        trace cannot see: while summarising, its graph is only assumed (``opaque``); in a
        unit, unless it is used as a module or a leaf is handed in, GG102 reads it as a
        carrier of what it is handed (``fn_made``)."""
        if self.r.ctx is None:
            self.opaque.add(id(call))
        elif not any(t[0] == "L" for t in args_taints) and (name is None or not self._used_as_module(name)):
            self.fn_made.add(id(call))

    def _kept(self, call: ast.Call, callee: Val, key: _Opt[str], res: Val, pos, kws, env: Dict[str, Val]) -> Val:
        """A call of a module of the user's whose forward keeps a cache on the object
        (``ClassFacts.cached``): the cache is the pseudo-variable ``<callee>.<attr>``
        of ``env``. A call that may find it empty fills it (with what forward stores:
        this call's graph, or the graphs of the arguments it keeps); every call may
        hand back what it holds. So a cache filled with a graph in one iteration of a
        back-propagating loop and handed back in the next is a carried value like any
        other (GG101). Followed only where the state is known: the object made in this
        unit (so the cache starts empty) or the cache already followed, and the
        constructor arguments the caching path needs seen to be true."""
        obj = callee.obj or ""
        if callee.taints and obj.startswith("user:") and not self.no_grad:
            # built holding a graph (``_user_object``: what its ``__init__`` kept of a module
            # it was handed): every call reads it
            held = frozenset(t for t in callee.taints if t[0] == "G" and isinstance(t[1], ast.Call)
                             and (dotted(t[1].func) or "").rsplit(".", 1)[-1] == obj[5:])
            if held:
                # (with what says a backward surely freed it: ``("S", g)``, _stale_read)
                res = _tainted(res, held | frozenset(t for t in callee.taints if t[0] == "S" and t[1] in held))
        if K.PARAMETRIZE_CACHE_KEY in env and obj.startswith("user:"):
            res = self._parametrized_call(call, callee, res, env)
        if key is None or not obj.startswith("user:"):
            return res
        cf = self.r.cls(obj[5:])
        if cf is not None and key == "self" and self.track_self_state and obj == self.self_obj \
                and (cf.keeps_input or cf.carried):
            res = self._own_state(call, cf, res, env)
        if cf is not None and cf.kept and key != "self":
            res = self._method_state(call, callee, key, "forward", res, env)
        if cf is not None and cf.keeps_input and not cf.carried and not cf.members and key != "self" \
                and "." not in key:
            res = self._input_state(call, callee, key, cf, res, pos, kws, env)
        if cf is None or not (cf.cached or cf.members):
            return res
        fwd = cf.method("forward")
        if cf.members:
            res = self._neurons(call, callee, key, cf, fwd, res, pos, kws, env)
        made = _construction(callee, obj[5:]) if cf.cached else None
        for attr, stored, needs, _, _ in cf.cached:
            k = key + attr[4:]  # self.cache -> text_encoder.cache
            old = env.get(k)
            if old is None and made is None:
                continue  # made elsewhere: whether it is empty is unknown
            if needs and not _flags_on(made, needs, key, env):
                continue
            if old is None:
                old = NONE
            if old.none or old.undef:  # may be empty: this call fills it
                new: set = set()
                if fwd is not None and not fwd.no_grad and not self.no_grad:
                    if stored.graph and not callee.frozen:
                        new.add(("G", call))
                    for i in stored.params:
                        new |= fwd.argument(i, pos, kws, CLEAN).taints
                env[k] = Val(frozenset(old.taints | new), site=self._stmt)
            if old.taints:
                res = _tainted(res, old.taints)  # what an earlier call kept
        return res

    def _parametrized_call(self, call: ast.Call, callee: Val, res: Val, env: Dict[str, Val]) -> Val:
        """A call, inside ``with parametrize.cached():``, of a module of the user's that
        computes a parametrized tensor (``Resolver.parametrized``): the first such call of
        the block computes it, on this call's graph, and every call hands it back. The
        block's cache is the pseudo-variable ``knowledge.PARAMETRIZE_CACHE_KEY``: a training
        loop inside the block carries it from one iteration into the next (GG101)."""
        if self.no_grad or callee.frozen or not self.r.parametrized((callee.obj or "")[5:]):
            return res
        old = env[K.PARAMETRIZE_CACHE_KEY]
        if old.none or old.undef:  # may be empty: this call fills it
            env[K.PARAMETRIZE_CACHE_KEY] = Val(frozenset(old.taints | {("G", call)}), site=self._stmt)
        if old.taints:
            res = _tainted(res, old.taints)  # what an earlier call computed
        return res

    def _own_state(self, call: ast.Call, cf: ClassFacts, res: Val, env: Dict[str, Val]) -> Val:
        """``prediction = self(x)`` in a method of a module whose forward rebuilds state
        on ``self`` from its last value (``ClassFacts.keeps_input`` / ``carried``: a
        recurrent step keeping ``self.hidden``), a ``train_it()`` that forwards,
        back-propagates and steps: after the call ``self.<x>`` holds this call's graph on
        top of what the previous call left (its ``("A", key)`` token), and the result
        depends on both, as if forward's body were written here. The unit's
        :meth:`call_carried_states` then sees the state the next call's backward reaches.
        Not for a state a method of the class other than ``__init__`` resets or detaches:
        a caller may call it between calls, which this unit cannot see."""
        keys = tuple(cf.keeps_input) + tuple(k for k, _, _ in cf.carried)
        for key in keys:
            if cf.methods_cutting(key) - {"__init__"}:
                continue
            old = env.get(key)
            new = set(old.taints) if old is not None else {("A", key)}
            if not self.no_grad:
                new.add(("G", call))
            env[key] = Val(frozenset(new), site=self._stmt)
            res = _tainted(res, frozenset(new))
        return res

    def _method_state(self, call: ast.Call, recv: Val, key: str, method: str, res: Val, env: Dict[str, Val]) -> Val:
        """``self.model.forward_cnnlstm(s)`` (or ``self.model(s)``) where that method
        rebuilds state on its object from its own last value (``ClassFacts.kept``: ``out,
        self.h = self.lstm(f, self.h)``): the state is the pseudo-variable
        ``<receiver>.<attr>`` (``self.model.h``), the name an assignment of it here
        binds; each call leaves it holding this call's graph on top of what the last
        call left, and what it returns depends on that. Two calls with a backward
        between: the second's graph runs into what the backward freed (the value is
        read as any other, :meth:`_stale_read`), a proof for GG103. The state of an
        object the unit has not called yet is unknown, so nothing: a first call starts
        it. Not a carry of a loop (GG101 reports state kept on a module where it is
        kept, in forward): only the freed-graph proof reads it."""
        obj = recv.obj or ""
        cf = self.r.cls(obj[5:]) if obj.startswith("user:") else None
        attrs = cf.kept_by(method) if cf is not None else ()
        if not attrs:
            return res
        frozen = recv.frozen or self.no_grad
        if not frozen:
            self.saving_calls.add(id(call))  # (the state's graph surely saved tensors: ClassFacts.kept)
        for attr in attrs:
            k = key + attr[4:]  # self.h -> self.model.h
            old = env.get(k)
            new: set = set()
            if not frozen:
                new.add(("G", call))
                if old is not None and old.taints:
                    new |= old.taints
                    if FREED in env:
                        # computed from what the last call left: when a backward surely freed
                        # it, the proof (S tokens) and only it (the last call's graph is not
                        # this result's own: computing the result again builds on it again)
                        gone = frozenset(t for t in self._stale_read(old, env).taints if t[0] == "S")
                        if gone:
                            res = _tainted(res, gone)
            env[k] = Val(frozenset(new), site=self._stmt)
            self._state_keys.add(k)
            self._method_state_keys.add(k)
            if not frozen:
                self.state_built[id(call)] = k
            self._dotted_bases.add(key.split(".", 1)[0])
        return res

    def _input_state(self, call: ast.Call, callee: Val, key: str, cf: ClassFacts, res: Val, pos, kws,
                     env: Dict[str, Val]) -> Val:
        """``lif(lin(x))`` where ``lif`` (a name of the unit or the module) is a module of
        the user's whose forward rebuilds state on itself from its input and its last
        value (``ClassFacts.keeps_input``: ``self.v_mem = 0.5 * self.v_mem + x``, a
        registered buffer reassigned): the state is the pseudo-variable
        ``<callee>.<attr>`` (``lif.v_mem``), as :meth:`_neurons` follows one held by
        another module; with a graph in the input it holds this call's graph on top of
        what the last call left, and what the call returns depends on it. A reset that
        cuts (``lif.v_mem = lif.v_mem.detach()``, a reset the class's body does not
        show to keep the graph) empties it."""
        args = _union(pos, kws)
        graph = any(t[0] in ("G", "L") for t in args) and not callee.frozen and not self.no_grad
        for attr in cf.keeps_input:
            k = key + attr[4:]  # self.v_mem -> lif.v_mem
            old = env.get(k)
            new: set = set()
            if graph:
                new.add(("G", call))
                new |= args
            if old is not None and not self.no_grad:
                new |= old.taints
            env[k] = Val(frozenset(new), site=self._stmt)
            self._state_keys.add(k)
            self._dotted_bases.add(key)
            if new and not (attr in cf.eval_read and self._in_training(key)):
                res = _tainted(res, frozenset(new))
        return res

    def _note_param_call(self, call: ast.Call, callee: Val, args_taints: FrozenSet) -> None:
        """(summarising) ``d(gz)``: a call of a parameter on a graph built inside (GraphFlow.param_calls)."""
        if callee.param and any(t[0] in ("G", "L") for t in args_taints):
            got = [t[1] for t in callee.taints if t[0] == "P"]
            if len(got) == 1:
                self.param_calls[id(call)] = got[0]

    def _sequence_state(self, call: ast.Call, callee: Val, res: Val, env: Dict[str, Val]) -> Val:
        """``model = nn.Sequential(nn.Linear(4, 6), IFNode(), ...)`` bound in this unit, holding
        a neuron of the file that rebuilds state on itself from its input and its last value
        (``ClassFacts.keeps_input``) behind a layer with parameters: each call leaves its graph
        in the pseudo-variable ``model.<i>.<attr>`` and hands back what the last call left on
        top of its own, so two forwards before one reset share a graph (spikingjelly's
        ``out = model(x); out_2 = model(x2)``). A reset (``reset_net(model)``) empties it. Not
        a loop's carry: a loop calling the model without a reset is reported by GG101's own
        reading of the container."""
        site = callee.site
        if not isinstance(site, ast.Assign) or callee.frozen or not isinstance(call.func, ast.Name):
            return res
        made = site.value
        if not isinstance(made, ast.Call) or len(site.targets) != 1 or not isinstance(site.targets[0], ast.Name) \
                or site.targets[0].id != call.func.id:
            return res
        layer = False
        for i, it in enumerate(made.args):
            if not isinstance(it, ast.Call):
                continue
            name = dotted(it.func)
            cf = self.r.cls(name) if name else None
            if cf is None or not cf.keeps_input or cf.carried:
                q = self.r.qualify(it.func) or ""
                layer = layer or (q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] not in K.PARAMETERLESS_MODULES)
                continue
            if not layer:
                continue
            for attr in cf.keeps_input:
                k = f"{call.func.id}.{i}{attr[4:]}"
                old = env.get(k)
                new = {("G", call)} | (old.taints if old is not None else EMPTY)
                env[k] = Val(frozenset(new), site=self._stmt)
                self._state_keys.add(k)
                self._method_state_keys.add(k)
                self._dotted_bases.add(call.func.id)
                if old is not None and old.taints:
                    res = _tainted(res, old.taints)
        return res

    def _neurons(self, call: ast.Call, callee: Val, key: str, cf: ClassFacts, fwd: _Opt[FnFacts], res: Val,
                 pos, kws, env: Dict[str, Val]) -> Val:
        """A call of a module of the user's that holds modules keeping state of their
        own (``ClassFacts.members``: a stateful neuron in ``self.lif1`` or in
        ``self.net = nn.Sequential(...)``): each one's state is the pseudo-variable
        ``<callee>.<member>.<state>`` (``net.lif1.mem``), rebuilt by every call from
        its last value and its input (a graph when a layer with parameters feeds it),
        and what the call returns depends on it. A reset (``utils.reset(net)``,
        ``functional.reset_net(net)``, ``net.lif1.reset_mem()``) empties it."""
        for attr, raw, kws_on, graph, params in cf.members:
            for nm, built, through, holder in self.r.member_states(raw, kws_on):
                k = f"{key}.{attr}.{nm}"
                unread = self._unread_in_training(holder, nm, key)
                old = env.get(k)
                new: set = set()
                if not self.no_grad:
                    if (built or (graph and through)) and not callee.frozen:
                        new.add(("G", call))
                    if fwd is not None and through:
                        for i in params:
                            new |= fwd.argument(i, pos, kws, CLEAN).taints
                    if old is not None:
                        new |= old.taints
                env[k] = Val(frozenset(new), site=self._stmt)
                self._state_keys.add(k)
                self._dotted_bases.add(key.split(".", 1)[0])
                if new and not unread:  # what the call returns is computed from the state it leaves
                    res = _tainted(res, frozenset(new))
        return res

    def _unread_in_training(self, holder: str, path: str, module: str) -> bool:
        """Is the state ``path`` of a module made by ``holder`` one its class reads only
        in eval mode (``ClassFacts.eval_read``: a batch norm's running statistics), and
        does the current statement surely run in training mode (:meth:`_in_training`)?
        Then what the call returns is not computed from it."""
        cf = self.r.cls(holder)
        if cf is None or not cf.eval_read or "self." + path.rsplit(".", 1)[-1] not in cf.eval_read:
            return False
        return self._in_training(module)

    def _in_training(self, module: str) -> bool:
        """Does the current statement, inside the unit's loops, surely run with ``module``
        (a dotted name) in training mode? Yes when a ``<m>.train()`` statement, ``<m>``
        that module or one holding it, runs before it on
        every way in (a statement of the body of one of its loops, or of the unit's
        body, before the one holding it) and nothing after that ``train()`` up to the
        loop's end (the next iteration) or the statement's end may switch a module's mode
        (no ``.eval()``, ``.train(<anything but True>)``, ``.training =``, no call or
        mention of a function or method of the file, which might); or, in a module's
        top-level code, when nothing of it before the loop's end may (modules start in
        training mode). Anything else: unknown (False)."""
        stmt = self._stmt
        if stmt is None or not self.frames:
            return False
        got = self._training.get((id(stmt), module))
        if got is None:
            got = self._training[(id(stmt), module)] = self._surely_training(stmt.lineno, module)
        return got

    def _surely_training(self, line: int, module: str) -> bool:
        lines = self.r.ctx.index.lines
        own = query(self.r.summary, own_callables)
        # every way into the statement from a loop's next iteration (or the unit's next
        # call) passes the train() of the body holding it: only what runs after it
        # (up to the end of that body's statement holding this one) may switch again
        for body in [fr.loop.body for fr in reversed(self.frames)] + [self._unit_body]:  # type: ignore[attr-defined]
            t, holding = _train_before(body, line, module)
            if t is not None and holding is not None:
                return _no_mode_switch(lines, (t.end_lineno or t.lineno) + 1, holding.end_lineno or 0, own)
        if not self.module_level:
            return False  # a function: its caller may have switched the mode
        last = self.frames[0].loop.end_lineno or 0
        return all(_no_mode_switch(lines, s.lineno, s.end_lineno or s.lineno, own) for s in self._unit_body
                   if s.lineno <= last and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))

    def _reset_states(self, call: ast.Call, env: Dict[str, Val]) -> None:
        """``utils.reset(net)``, ``functional.reset_net(net)``, ``net.lif1.reset_mem()``,
        ``net.detach_hidden()``: the states :meth:`_neurons` follows under that object
        are emptied (a call named like a reset, as the knowledge table lists them)."""
        f = call.func
        last = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else None)
        owners: List[_Opt[str]] = []
        if last in K.STATE_RESET_CALLS:
            owners = [dotted(a) for a in call.args]
            if isinstance(f, ast.Attribute) and not self._keeps_graph_reset(f, last, env):
                owners.append(dotted(f.value))
        elif not (self.r.qualify(f) or "").startswith("torch."):
            # the object itself handed to a function not of torch's (``log_spikes(net)``,
            # a library's helper): what it does to the states is unknown, not kept
            owners = [dotted(a) for a in call.args if isinstance(a, (ast.Name, ast.Attribute))]
            owners += [dotted(k.value) for k in call.keywords if isinstance(k.value, (ast.Name, ast.Attribute))]
        for o in owners:
            if o is None:
                continue
            prefix = o + "."
            for k in [k for k in self._state_keys if k.startswith(prefix) and k in env]:
                env[k] = Val(site=self._stmt)

    def _keeps_graph_reset(self, f: ast.Attribute, method: str, env: Dict[str, Val]) -> bool:
        """``model.reset_states()`` whose body only zeroes the state in place
        (:meth:`Resolver.reset_keeps_graph`): no reset of what the state's graph holds."""
        key = dotted(f.value)
        v = env.get(key) if key is not None else None
        obj = (v.obj if v is not None else None) or ""
        return obj.startswith("user:") and self.r.reset_keeps_graph(obj[5:], method)

    def _method_resets(self, recv: Val, key: str, method: str, env: Dict[str, Val]) -> None:
        """``net.reset_()`` whose body resets what the modules keep
        (``ClassFacts.resetting``), or a method the class's facts do not show (a base
        class's, a library's): the states :meth:`_neurons` follows under ``net`` are
        emptied -- what an unseen method does to them is unknown, not kept."""
        obj = recv.obj or ""
        cf = self.r.cls(obj[5:]) if obj.startswith("user:") else None
        if cf is not None and cf.method(method) is not None and method not in cf.resetting and not (
                cf.kept and method in cf.kept_resets):
            return
        if cf is not None and (cf.inplace_resets or cf.dispatch_resets or cf.method(method) is None) \
                and self.r.reset_keeps_graph(obj[5:], method):
            return  # model.reset_states() zeroing the buffers in place: the graphs stay
        # ``self.loss_fn(...)``: a module the object holds (its class's attrs), not a method
        # that could reset the state a method of another module it holds keeps
        sub = cf is not None and cf.attr(method) is not None
        prefix = key + "."
        for k in [k for k in self._state_keys if k.startswith(prefix) and k in env]:
            if not (sub and k in self._method_state_keys):
                env[k] = Val(site=self._stmt)

    def _clears(self, recv: Val, key: _Opt[str], method: str, env: Dict[str, Val]) -> None:
        """``encoder.clear_cache()``: a method of the class that resets a cache the
        interpreter follows (``ClassFacts.cuts``) empties it."""
        obj = recv.obj or ""
        if key is None or not obj.startswith("user:"):
            return
        cf = self.r.cls(obj[5:])
        if cf is None or not cf.cached:
            return
        for attr, _, _, _, _ in cf.cached:
            k = key + attr[4:]
            if k in env and method in cf.methods_cutting(attr):
                env[k] = _with(NONE, site=self._stmt)
    # -- a driver's own methods, run in place -------------------------------
    def _drives_own_methods(self, body: Sequence[ast.stmt]) -> bool:
        """Does this method call, on ``self``, one of its class's methods that
        back-propagates (pix2pix's ``optimize_parameters()`` calling ``forward()``,
        ``backward_D()``, ``optimizer_D.step()``, ``backward_G()``)? Then the own
        methods it calls are run in place (:meth:`_inline`), in order: what one
        sets on ``self`` is what the next reads."""
        for node in block_nodes(body):  # (a def's body: the stretch of its one walk)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                    and node.func.attr in self.methods:
                facts = self.r.method_facts(self.self_obj, node.func.attr)
                if facts is not None and facts.calls_backward:
                    return True
        return False

    def _inline(self, call: ast.Call, fn: ast.AST, pos, kws, env: Dict[str, Val]) -> Val:
        """``self.backward_D()`` in a driver: the method's body run here, on the
        driver's ``self.*`` values and the call's arguments. The attributes it sets
        come back; graphs built inside are seen as built by the call (one node of
        the driver), and its backward calls as one backward at the call, reaching
        what their losses reached. Carries of the method's own loops are its own
        unit's business (not looked for here)."""
        named, defaults = parameters(fn, True)
        inner: Dict[str, Val] = {k: v for k, v in env.items() if k == "self" or k.startswith("self.")}
        if FREED in env:
            inner[FREED] = env[FREED]  # (what an earlier method left freed on the object: _left_freed)
        for i, arg in enumerate(named):
            if i < len(pos):
                v = pos[i]
            elif arg.arg in kws:
                v = kws[arg.arg]
            else:
                d = defaults.get(arg.arg)
                v = (NONE if d.value is None else CONST) if isinstance(d, ast.Constant) else CLEAN
            inner[arg.arg] = v
        a: ast.arguments = fn.args  # type: ignore[attr-defined]
        for extra in (a.vararg, a.kwarg):
            if extra is not None:
                inner[extra.arg] = CLEAN
        saved = (self.returns, self._targets, self._stmt, self.frames, self.find_carries)
        n_events = len(self.events)
        self.returns, self._targets, self.frames, self.find_carries = [], (), [], False
        self._inlining.append(getattr(fn, "name", "?"))
        ng = 1 if is_no_grad_function(fn, self.r.ctx) else 0  # @torch.no_grad() def evaluate(self)
        self.no_grad += ng
        try:
            out = self.block(fn.body, dict(inner))  # type: ignore[attr-defined]
            rets = self.returns
        finally:
            self.no_grad -= ng
            self._inlining.pop()
            self.returns, self._targets, self._stmt, self.frames, self.find_carries = saved
        inner_events = self.events[n_events:]
        del self.events[n_events:]
        lo, hi = fn.lineno, getattr(fn, "end_lineno", None) or fn.lineno  # type: ignore[attr-defined]
        saves = [False]

        def anchor(v: Val) -> Val:  # (not calling itself: a closure that does is a reference cycle)
            return _anchored(v, call, lo, hi, self.saving_calls, saves)

        freed_inside = self._freed_inside(out, fn, lo, hi)
        built = []
        modules: set = set()
        by_attr: List[Tuple[str, FrozenSet[str], bool]] = []
        for k, v in out.items():
            if k.startswith("self.") and v is not inner.get(k):
                gone = self._left_freed(v, freed_inside)
                if gone:
                    # ``self.pred_real = self.netD(real_B)`` then ``self.loss_D.backward()``
                    # in ``backward_D()``: the method leaves on the object a graph its own
                    # backward surely freed. Kept under its own nodes (not the call's, which
                    # also stands for what the method built and kept alive) and marked freed
                    # here, so a later method reading it (``backward_G()``) runs into it
                    env[k] = _bound(v, v.site) if v.site is not None else v
                    old = env.get(FREED)
                    kept_x = [t for t in old.taints if t[1] not in gone] if old is not None else []
                    env[FREED] = plain(kept_x + [freed_inside[g] for g in gone])
                    continue
                env[k] = anchor(v)
                if ("G", call) in env[k].taints:
                    built.append(k)
                    inside = [t for t in v.taints if t[0] == "G" and lo <= getattr(t[1], "lineno", -1) <= hi]
                    mine = frozenset(m for m in (_self_module(t[1]) for t in inside
                                                 if id(t[1]) in self.saving_calls) if m)
                    modules.update(mine)
                    # does a graph reach it from before those modules' calls (their input)?
                    before = any(t[0] == "L" or (t[0] == "G" and t not in inside) for t in v.taints)
                    by_attr.append((k, mine, before))
        if built and not self._inlining:
            self.sets_by_call[id(call)] = tuple(sorted(built))
            self.modules_by_call[id(call)] = frozenset(modules)
            self.modules_by_attr[id(call)] = tuple(sorted(by_attr))
        ret = CLEAN
        values = [r for r in rets if not (r.none and not r.taints and r.elems is None)]
        for r in values:
            ret = anchor(r) if ret is CLEAN else join(ret, anchor(r))
        if inner_events:
            loss: set = set()
            sure: set = set()
            always = _unconditional_calls(fn.body)  # type: ignore[attr-defined]
            for ev in inner_events:
                t = anchor(ev.loss).taints
                loss |= t
                if id(ev.call) in always and not ev.retain and (ev.sure is None or ev.sure):
                    sure |= {x for x in t if x[0] == "G"} if ev.sure is None else {
                        ("G", call) if lo <= getattr(x[1], "lineno", -1) <= hi else x for x in ev.sure}
            if saves[0]:
                self.saving_calls.add(id(call))
            # a backward inside that runs into a graph built before the call, which an
            # earlier backward (inside, or before the call) surely freed: the driver's
            # ``outputs`` handed to ``self._on_backward(inputs, outputs, loss)``, whose
            # ``loss.backward()`` frees it before its adversarial loop back-propagates
            # ``outputs`` again (ark-nlp's PGD). Only graphs built outside the method:
            # one built inside is the method's own unit's business
            stale = frozenset(t for ev in inner_events for t in ev.stale
                              if not lo <= getattr(t[1][1], "lineno", -1) <= hi)
            if len(inner_events) > 1:
                stale |= self._freed_twice_inside(inner_events, always, lo, hi)
            self._event(call, plain(loss), all(ev.retain for ev in inner_events),
                        {("G", call)} & loss, stale=stale)
            self.events[-1].sure = frozenset(sure)
            # what it surely frees of the graphs built before the call (``self.fake_B`` that
            # ``self.forward()`` left, back-propagated undetached by ``backward_D()``) is freed
            # here: a later backward through it (the next critic iteration's) runs into it
            outside = {x for x in sure if x != ("G", call) and not lo <= getattr(x[1], "lineno", -1) <= hi}
            if outside:
                self._free(env, outside, call)
            if self.frames and self.find_carries:
                _mark_freed(env, _reached(plain(loss)))
        elif saves[0]:
            self.saving_calls.add(id(call))
        return ret

    def _freed_twice_inside(self, inner_events, always: set, lo: int, hi: int) -> FrozenSet:
        """An own method run in place that back-propagates two losses of one graph built
        before the call (AGIS-Net's ``backward_G()``: ``loss_B.backward()`` then
        ``loss_G.backward()``, both through the ``self.fake_B`` that ``forward()`` left):
        its first backward, run whenever the method runs and keeping nothing, surely freed
        the graph's saving parts, and a later one reaches them. The ``("X", g, call)``
        entries of those graphs (as :data:`FREED` has them), for the call's event. The
        losses here are whole values (the second built before the first backward ran
        reaches the graph all the same), which a read of a freed variable cannot show."""
        saving = self.saving_calls
        first: Dict[tuple, ast.Call] = {}
        out = []
        for ev in inner_events:
            outside = [t for t in ev.loss.taints if t[0] == "G" and id(t[1]) in saving
                       and not lo <= getattr(t[1], "lineno", -1) <= hi]
            for t in outside:
                if t in first:
                    out.append(("X", t, first[t]))
            if ev.sure is None and not ev.retain and ev.inputs is None and id(ev.call) in always \
                    and isinstance(ev.call, ast.Call) and surely_frees(ev.call, self.r.ctx):
                for t in outside:
                    first.setdefault(t, ev.call)
        return frozenset(out)

    def _freed_inside(self, out: Dict[str, Val], fn: ast.AST, lo: int, hi: int) -> Dict[tuple, tuple]:
        """After an own method ran in place (:meth:`_inline`): the graphs built inside it
        (lines ``lo``..``hi``) that a backward of its own, run whenever the method runs,
        surely freed: ``{("G", node): ("X", ("G", node), backward call)}``. Empty on a
        loop's second walk (the freed set is read on first walks only)."""
        fin = out.get(FREED)
        if fin is None or not fin.taints or any(fr.second for fr in self.frames):
            return {}
        always = None
        got: Dict[tuple, tuple] = {}
        for x in fin.taints:
            g = x[1]
            if g[0] != "G" or not lo <= getattr(g[1], "lineno", -1) <= hi:
                continue
            if always is None:
                always = _unconditional_calls(fn.body)  # type: ignore[attr-defined]
            if id(x[2]) in always:
                got[g] = x
        return got

    @staticmethod
    def _left_freed(v: Val, freed_inside: Dict[tuple, tuple]) -> FrozenSet:
        """The graphs of ``v`` (an attribute an inlined method set) when every graph it
        may hold is one ``freed_inside`` lists, else nothing: a value also holding a
        fresh graph, or one built before the method, proves nothing."""
        if not freed_inside or v.elems is not None:
            return EMPTY
        gs = v.graph_tokens()
        if not gs or any(t[0] == "U" for t in v.taints) or not all(g in freed_inside for g in gs):
            return EMPTY
        return gs

    def _pending_call(self, cls: str, method: str, pos, kws) -> Val:
        """While summarising: ``self.core.forward(embed, state)`` on a class not
        seen from here. Recorded (``FnFacts.calls``) with the parameters flowing
        into each argument; the result is what the k-th such call returns,
        composed where the summarised function is called."""
        k = len(self.calls)
        self.calls.append((cls, method, tuple(_param_set(v) for v in pos),
                           tuple((kw, _param_set(v)) for kw, v in kws.items() if kw != "**")))
        return plain({("R", k, -1)})

    def _via(self, call, node, facts: FnFacts, via, argval, env) -> FrozenSet:
        """The taints of what a summarised function returns through calls of other
        classes' methods (``RetPos.via``), from those classes' facts as seen here.
        A class or method not seen here adds nothing: unknown, not a graph."""
        out: set = set()
        if self._via_depth >= DELEGATION_DEPTH:
            return frozenset(out)
        for k, i in sorted(via):
            if k >= len(facts.calls):
                continue
            cls, method, argsets, kwsets = facts.calls[k]
            recv_key = None
            if cls.startswith("@#"):
                continue  # a parameter's method (GG201 reads those), never returned through
            if cls.startswith("@"):
                # a method of a module-level object (``model.scheduler``): its class, seen from here
                recv_key = cls[1:]
                obj = self._global_path_obj(recv_key) if recv_key else None  # ("@": another file's object)
                cf = self.r.cls(obj[5:]) if obj is not None and obj.startswith("user:") else None
            else:
                cf = self.r.cls(cls)
            inner = cf.method(method) if cf is not None else None
            if inner is None:
                continue
            ivals = [plain(frozenset().union(*(argval(j).taints for j in ps))) for ps in argsets]
            ikws = {kw: plain(frozenset().union(*(argval(j).taints for j in ps))) for kw, ps in kwsets}
            self._via_depth += 1
            try:
                r = self._apply_facts(call, inner, ivals, ikws, env, method, graph_node=node, recv_key=recv_key)
            finally:
                self._via_depth -= 1
            part = r.elems[i] if (i >= 0 and r.elems is not None and i < len(r.elems)) else r
            out |= part.taints
        return frozenset(out)

    def _apply_delegates(self, call, node, facts: FnFacts, argval, seen: set, depth: int, env=None) -> None:
        """The backward calls a function makes through the module-level functions
        it calls (``FnFacts.delegates``), each composed from the callee's own
        facts, as if it were in the body: an event at ``call`` back-propagating
        the arguments that reach the callee's backward; the graphs it returns
        were built inside and are freed by it."""
        for name, argsets, kwsets in facts.delegates:
            if name in seen or depth >= DELEGATION_DEPTH:
                continue
            inner = self.r.fn(name)
            if inner is None or inner.no_grad:
                continue
            vals = [plain(frozenset().union(*(argval(i).taints for i in ps))) for ps in argsets]
            named = {kw: plain(frozenset().union(*(argval(i).taints for i in ps))) for kw, ps in kwsets}

            def inner_arg(j: int, _vals=vals, _named=named, _inner=inner) -> Val:
                return _inner.argument(j, _vals, _named, CLEAN)

            # what it puts in containers reached from module-level names (a parameter's are not
            # named here); whether the delegate runs on every path is not known, so what it
            # back-propagates of them is not counted
            effects = [(e.path, e) for e in inner.containers if not e.path.startswith("#")] \
                if env is not None and not inner.no_grad else []
            if inner.calls_backward:
                loss_t: set = set()
                for j in inner.backward_params:
                    loss_t |= inner_arg(j).taints
                if self.module_level and env is not None:
                    for g in inner.backward_globals:  # (the module's globals the delegate reads)
                        held = env.get(g)
                        if held is not None:
                            loss_t |= held.taints
                self._event(call, plain(loss_t), inner.backward_retains, {("G", node)})
                if env is not None and self.frames and self.find_carries:
                    _mark_freed(env, _reached(plain(loss_t)))
            for key, eff in effects:
                self._fill(node, key, eff, inner_arg, env)
            if inner.delegates:
                self._apply_delegates(call, node, inner, inner_arg, seen | {name}, depth + 1, env)

    @staticmethod
    def _container_keys(call: ast.Call, facts: FnFacts, recv_key: _Opt[str] = None) -> List[Tuple[str, Any]]:
        """Each container effect of ``facts`` with the name it has here: the module-level
        path as it is, a parameter's attribute through the argument (``trainer.buf``)."""
        out = []
        for eff in facts.containers:
            key = GraphFlow._container_key(call, facts, eff.path, recv_key)
            if key is not None:
                out.append((key, eff))
        return out

    @staticmethod
    def _container_key(call: ast.Call, facts: FnFacts, path: str, recv_key: _Opt[str] = None) -> _Opt[str]:
        """The name here of a container ``facts`` reaches from outside (``path``), or None.
        ``recv_key``: the method's object, when not the receiver of ``call`` (a helper's call
        of ``model.scheduler.step(...)`` composed at the helper's call, ``_via``)."""
        root, _, attr = path.partition(".")
        if root == "#self":
            # the method's own object: the receiver of the call (agent.remember(...))
            base = recv_key if recv_key is not None else (
                dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None)
            return f"{base}.{attr}" if base is not None else None
        if root.startswith("#"):
            i = int(root[1:])
            if any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
                return None
            expr = call.args[i] if i < len(call.args) else next(
                (k.value for k in call.keywords if i < len(facts.params) and k.arg == facts.params[i]), None)
            base = dotted(expr) if expr is not None else None
            return f"{base}.{attr}" if base is not None else None
        return path

    def _fill(self, node: ast.AST, key: str, eff: Any, argval, env: Dict[str, Val]) -> None:
        """After a call: what it left in a container it reaches (cleared, filled)."""
        old = env.get(key)
        cur = Val(kind="list") if (eff.clears or old is None) else old
        added: set = set()
        if eff.appends and not self.no_grad:
            if eff.saving or any((self.r.global_obj(n) or "").startswith(("user:", "inst:")) for n in eff.saving_via):
                added.add(("G", node))
                self.saving_calls.add(id(node))  # log_prob of a Categorical over a module's output
                self.kept_by_method.add(id(node))
            else:  # built by callables the summary could only guess were modules: unproven
                added.add(("U", node))
        for i in eff.appends_params:
            added |= argval(i).taints
        if eff.clears or added:
            self._set_container(env, key, _with(cur, taints=cur.taints | added, elems=None,
                                                site=self._stmt if added else cur.site))

    def _callee_loop(self, call: ast.Call, facts: FnFacts, argval, env: Dict[str, Val]) -> None:
        """``train(model, X, Y)`` where ``train`` loops and back-propagates through its
        ``y`` (``FnFacts.loop_backward``), or calls in its loop a function that does
        (``loop_delegates``, composed from that function's facts as seen here): what the
        arguments bring into that loop's backward, with the names' values at the call."""
        params = set(facts.loop_backward)
        for name, argsets, kwsets in facts.loop_delegates:
            inner = self.r.fn(name)
            if inner is None or inner.no_grad or not inner.calls_backward or inner.backward_retains:
                continue
            named = dict(kwsets)
            for j in inner.backward_params:
                params |= inner.argument(j, argsets, named, EMPTY)
        taints: FrozenSet = EMPTY
        for i in params:
            taints = taints | argval(i).taints
        if env is not None and facts.loop_backward:
            # update(memory) stacking memory.logprobs before its epochs: what the lists it
            # back-propagates of an argument hold here (filled by act(state, memory))
            for key, eff in self._container_keys(call, facts):
                if eff.backprops and eff.path.startswith("#") and eff.path[1:].partition(".")[0].isdigit() \
                        and int(eff.path[1:].partition(".")[0]) in facts.loop_backward and key in env:
                    taints = taints | env[key].taints
        if any(t[0] == "G" for t in taints):
            self.callee_loops.append(CalleeLoop(call, plain(taints), dict(env) if env is not None else {}))

    def _threads_state(self, call: ast.Call, callee: Val, unknown_ok: bool) -> bool:
        """The shape of a recurrent step through a callable we cannot see:
        ``out, h = f(x, h)`` / ``out, (h, c) = f(x, (h, c))`` (the result unpacked
        into a name that is also an argument), or ``h = f(x, h)`` with two or more
        arguments when ``f`` is an object (a parameter, an attribute, a module).
        Assuming a graph there is the unsafe-for-silence choice only when the
        callee detaches internally, which a same-file model's facts would show."""
        targets = self._targets
        if not targets:
            return False
        argnames = _arg_names(call)
        if len(targets) >= 2 and argnames & set(targets):
            return True
        if len(targets) == 1 and len(call.args) >= 2 and targets[0] in argnames:
            return unknown_ok or callee.param or (callee.obj or "").startswith(("inst:", "user:"))
        return False

    def _rewraps(self, call: ast.Call, env: Dict[str, Val]) -> bool:
        """``model, optimizer, loader = engine.make_private(module=model, ...)``,
        ``model, opt = accelerator.prepare(model, opt)``: a statement handing a
        module or an optimizer it holds to a call and taking the result back in
        its place wraps the training objects; it steps no state, whatever a
        summary of the callee (a library's own code, say) makes of its insides.
        A module's own call wraps nothing: ``out, dec_state = model(src, tgt, dec_state)``
        threads a state object (``DecoderState(...)``) through the model's forward."""
        s = self._stmt
        if len(self._targets) < 2 or not isinstance(s, ast.Assign) or s.value is not call:
            return False
        for n in _arg_names(call) & set(self._targets):
            obj = (env.get(n) or CLEAN).obj
            if obj and obj.startswith(("user:", "inst:")):
                if self._module_obj(self._callee_obj(call.func, env)):
                    return False
                q = self.r.qualify(call.func)
                return not (q and (q.startswith("torch.") or q in _WRAPPERS))  # torch's wrappers keep what they wrap
        return False

    def _callee_obj(self, func: ast.expr, env: Dict[str, Val]) -> _Opt[str]:
        """What the trace knows ``func`` is, without evaluating it: a local's or a
        module-level name's object (``model``), or an attribute of one (``self.model``)."""
        if isinstance(func, ast.Name):
            v = env.get(func.id)
            return v.obj if v is not None else self.r.global_obj(func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            v = env.get(func.value.id + "." + func.attr)
            if v is not None and v.obj:
                return v.obj
            base = env.get(func.value.id)
            return self.r.attr_obj(base.obj if base is not None else self.r.global_obj(func.value.id), func.attr)
        return None

    def _torch_call(self, call, q: str, pos, kws, args_taints) -> Val:
        if q in _WRAPPERS:
            return pos[0] if pos else CLEAN
        tc = Resolver.torch_class(q)
        if tc:
            if tc in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                return plain({("L", call)})
            return self._construct(tc, pos)
        if q in K.NONDIFF_FUNCTIONS or q.startswith(K.OPTIMIZER_PREFIXES):
            # (an optimizer or scheduler holds its parameters to update them: reading it,
            # optimizer.step(), is no read of their graph)
            return CLEAN
        if q in K.TENSOR_FACTORIES or q in K.VARIABLE_CONSTRUCTORS:
            if q in K.VARIABLE_CONSTRUCTORS and not any(
                    kw.arg == "requires_grad" and isinstance(kw.value, ast.Constant) and kw.value.value is True
                    for kw in call.keywords):
                return self._op(call, args_taints)  # Variable(x): x itself, as before
            for kw in call.keywords:
                if kw.arg == "requires_grad" and not (isinstance(kw.value, ast.Constant) and not kw.value.value):
                    return plain({("L", call)})
            return CLEAN
        if self.no_grad:
            return CLEAN
        if q in K.SAVING_FUNCTIONS or K.saving_distribution(q, call):
            self.saving_calls.add(id(call))
        if K.is_distribution_class(q):
            # Categorical(logits=l): its graph is its parameters'; dist.sample() has none
            v = self._op(call, args_taints)
            return _with(v, obj="dist:" + q)
        got = self._op(call, args_taints)
        return self._saves(got, call, K.function_saving(q), f"`{q}`") if self.build_stmts else got

    def _construct(self, tq: str, pos) -> Val:
        if tq in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return plain({("L", None)})
        return Val(obj="inst:" + tq)

    def _module_result(self, call: ast.Call, tq: str, args_taints, graph: bool = True) -> Val:
        if graph:
            self.saving_calls.add(id(call))
            if tq in K.ONE_INPUT_SAVING_LAYERS:
                self.data_layers[id(call)] = self.data_layers.get(id(call), True) and not args_taints
            if tq == "?" and self.r.ctx is None:  # self.fc(x): an attribute of a module we cannot see
                self.opaque.add(id(call))
        g = args_taints | {("G", call)} if graph else args_taints
        if self.build_stmts and graph:
            last = tq.rsplit(".", 1)[-1]
            sv = K.parameterless_module_saving(last) if last in K.PARAMETERLESS_MODULES else True
            g = self._saves(plain(g), call, sv, _MODULE_WORDS).taints
        one = _with(plain(g), kind="tensor")  # a state tensor: h, or c
        if tq in K.RECURRENT_MODULES:
            state = tup([one, one]) if tq in K.LSTM_LIKE else one
            return tup([plain(g), state])
        if tq in K.RECURRENT_CELLS:
            return tup([one, one]) if tq in K.LSTM_LIKE else one
        return plain(g)

    def _global_path_obj(self, key: str) -> _Opt[str]:
        """What the module-level dotted name ``key`` (``model.scheduler``) is, through the
        constructors the file's facts know (``var:model``, the class's ``self.scheduler =``)."""
        root, *attrs = key.split(".")
        obj = self.r.global_obj(root)
        for a in attrs:
            obj = self.r.attr_obj(obj, a)
            if obj is None:
                return None
        return obj

    def _mark_freed_parts(self, call: ast.Call, node: ast.AST, facts: FnFacts, got: Val) -> Val:
        """The positions of ``got`` (a helper's tuple) its own backward freed carry that
        graph, which saved tensors where the call's did (read by GG103 as a helper's)."""
        if not facts.frees_positions or self.no_grad or got.elems is None:
            return got
        part = _part_node(call)
        if id(node) in self.saved_weights or id(node) in self.saving_calls or id(node) in self.saving_helpers:
            self.saving_helpers.add(id(part))
        return tup([_with(e, taints=e.taints | {("G", part)}) if k in facts.frees_positions else e
                    for k, e in enumerate(got.elems)])

    def _global_held(self, name: str, env: Dict[str, Val]) -> FrozenSet:
        """What the module-level ``name`` holds where a function reading it is called: its
        value in the module's own trace (in a function's unit, the module's names are not
        in the environment: nothing)."""
        v = env.get(name) if self.module_level else None
        return v.taints if v is not None else EMPTY

    def _frees_returned(self, call: ast.Call, node: ast.AST, facts: FnFacts, loss_t: set) -> None:
        """A call of a def whose own backward frees graphs it returns (``FnFacts.frees_returned``,
        ``frees_positions``): those graphs are part of the call's backward ((loss, logits) = model(x)
        of a forward calling loss.backward()); where a part of it saved tensors
        (``frees_returned_saving``), what it hands back already ran into freed saved tensors (a
        second backward of it fails)."""
        loss_t |= _freed_returned(call, node, facts)
        if facts.frees_returned_saving:
            self.saving_helpers.add(id(node))

    def _apply_facts(self, call, facts: FnFacts, pos, kws, env, fname, graph_node=None, recv_key=None) -> Val:
        node = graph_node or call

        def argval(i: int) -> Val:
            return facts.argument(i, pos, kws, CLEAN)

        made, leafy = self.fn_made, self._fn_leafy

        def posval(rp: RetPos) -> Val:
            t: set = set()
            if rp.graph and rp.leaves and not facts.no_grad and not self.no_grad:
                t.add(("L", node))  # params = get_params(): leaves made in the callee
            elif rp.graph and not facts.no_grad and not self.no_grad:
                t.add(("G", node))
                if graph_node is None and not rp.modules and id(node) not in leafy:
                    made.add(id(node))  # (see fn_made; unless a leaf it is handed reaches it)
                if rp.modules:
                    self.saved_weights.add(id(node))
                    if id(node) not in self.returned_modules:
                        self.returned_modules[id(node)] = tuple(p.modules for p in (facts.returns or (facts.ret,)))
                    self.kept_by_method.add(id(node))
            elif rp.derived and not facts.no_grad and not self.no_grad and any(
                    tok[0] in ("G", "L") for i in rp.derived for tok in argval(i).taints):
                t.add(("G", node))  # h = cell(x, h, params) written out by hand: W @ h builds a graph
            if rp.elems_share and ("G", node) in t:
                self.shared_elems.add(id(node))
            if (rp.derived_saving or rp.globals_saving) and not facts.no_grad and not self.no_grad and (
                    any(tok[0] in ("G", "L") for i in rp.derived_saving for tok in argval(i).taints)
                    or any(tok[0] in ("G", "L") for n in rp.globals_saving for tok in self._global_held(n, env))):
                # Q(X, c) of a functional model reading module-level weights (X @ Wxh): the call
                # builds a graph that saved tensors, whatever it is handed (kept apart from
                # saving_calls, which GG102 reads as a module's call: GG103 reads both)
                t.add(("G", node))
                self.saving_helpers.add(id(node))
            for i in rp.params:
                t |= argval(i).taints
            if id(node) in made and any(x[0] == "L" for x in t):
                leafy.add(id(node))  # mine = encode(w): built from a leaf, a graph the caller made
            if rp.via and not facts.no_grad and not self.no_grad:
                t |= self._via(call, node, facts, rp.via, argval, env)
            if rp.reads and not facts.no_grad and not self.no_grad:
                for path in rp.reads:  # what earlier calls kept in a container it reads
                    key = self._container_key(call, facts, path, recv_key)
                    held = env.get(key) if key is not None else None
                    if held is not None:
                        t |= held.taints
            v = plain(t)
            if rp.arity:
                v = tup([plain(t)] * rp.arity)
            elif rp.mixed:
                v = _with(v, kind="list", mixed=True)
            elif rp.kind == "tensor":
                v = _with(v, kind="tensor")  # the state a recurrent module of the callee handed back
            elif rp.kind == "dist":
                v = _with(v, obj="dist:")  # dist, value = model(state): dist.sample() has no graph
            return v

        effects = self._container_keys(call, facts, recv_key) if facts.containers and not facts.no_grad else ()
        freed = set()
        if facts.calls_backward:
            loss_t: set = set()
            for i in facts.backward_params:
                loss_t |= argval(i).taints
            if self.module_level:
                # train_step() reading the module's ``features``: this call frees their graph
                for g in globals_freed_by_call(self.r.fn, facts):
                    held = env.get(g)
                    if held is not None:
                        loss_t |= held.taints
            surely: set = set()  # what it surely back-propagates (and frees) of the containers it reaches
            for key, eff in effects:
                held = env.get(key) if eff.frees else None  # (one that may not: no proof either way)
                if held is not None:
                    loss_t |= held.taints
                    surely |= held.taints
                elif eff.backprops and eff.path.startswith("#self."):
                    # learn() reading its own object's replay memory on some paths (a
                    # batch sampled from it): what the memory holds may be back-propagated
                    got = env.get(key)
                    if got is not None:
                        loss_t |= got.taints
            # graphs it returns were built (and back-propagated) inside
            freed.add(("G", node))
            if not self.no_grad:
                self._frees_returned(call, node, facts, loss_t)
            self._event(call, plain(loss_t), facts.backward_retains, freed, stale=self._stale(surely, env, whole=True))
            if self.frames and self.find_carries:
                _mark_freed(env, _reached(plain(loss_t)))
            self._free(env, surely, call)
        for key, eff in effects:
            self._fill(node, key, eff, argval, env)
        if facts.delegates and not facts.no_grad:
            self._apply_delegates(call, node, facts, argval, {fname}, 0, env)
        if (facts.loop_backward or facts.loop_delegates) and not facts.no_grad and self.r.ctx is not None:
            self._callee_loop(call, facts, argval, env)
        if self.build_stmts and self.module_level and env is not None and not facts.no_grad \
                and (facts.loop_backward_globals or facts.loop_calls):
            self.call_entries[id(call)] = dict(env)
        if graph_node is None and not self.no_grad and not facts.no_grad and _assumed_graph(facts, self.r):
            self.opaque.add(id(node))  # the graph it returns is only assumed (RetPos.assumed): so is ("G", call)
        if facts.returns is not None:
            if (facts.returns_share or any((self.r.global_obj(n) or "").startswith(("user:", "inst:"))
                                           for n in facts.returns_share_via)) and not facts.no_grad and not self.no_grad:
                self.saving_calls.add(id(node))  # the positions share a part that saved tensors
            got = self._mark_freed_parts(call, node, facts, tup([posval(rp) for rp in facts.returns]))
        else:
            got = posval(facts.ret) if facts.returns_value else CLEAN
        if id(node) in leafy:
            made.discard(id(node))
        return got


# How a def is summarised (``facts.function_facts``, which runs this interpreter): set by
# the facts module when it loads (it imports this one, so this one does not import it);
# asked for a def nested in the body being run (``GraphFlow.local_defs``)
SUMMARISE_DEF: _Opt[Callable[[ast.AST, Resolver], FnFacts]] = None


# (a framework's hook, Lightning's ``training_step``, is back-propagated by the framework: GG103
# reports a backward inside it at its return, and a loop of the file standing in for the
# framework's is none of the user's second backward)
_FRAMEWORK_HOOKS = frozenset().union(*K.FRAMEWORK_LOOP_METHODS.values())


def returned_freers(summary) -> Dict[str, str]:
    """{method name: class} for the methods (not ``forward``, nor a name two classes of
    the file define) that surely back-propagate a loss they return, through a part that
    saved tensors (``FnFacts.frees_returned_saving``). A summary query."""
    seen: Dict[str, _Opt[str]] = {}
    for k, v in summary.items():
        if k.startswith("class:") and isinstance(v, ClassFacts):
            for name, m in v.methods:
                if name in seen:
                    seen[name] = None  # two classes define it: the receiver's class is not known
                elif name != "forward" and not name.startswith("__") and name not in _FRAMEWORK_HOOKS:
                    seen[name] = k[6:] if m.frees_returned_saving else None
    return {n: c for n, c in seen.items() if c is not None}


def _init_frozen(call: ast.Call, freezes) -> bool:
    """Does this constructor call surely take ``__init__``'s path freezing the object's
    parameters (:attr:`ClassFacts.init_freezes`): always, or its flag given as a falsy
    constant (by keyword or position) or left to a falsy default?"""
    for flag, i, falsy in freezes:
        if not flag:
            return True
        given = next((k.value for k in call.keywords if k.arg == flag), None)
        if given is None and any(k.arg is None for k in call.keywords):
            return False  # (**kwargs: unknown)
        if given is None and i < len(call.args):
            if any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
                return False
            given = call.args[i]
        if given is None:
            return falsy
        return isinstance(given, ast.Constant) and not given.value
    return False


def _assumed_graph(facts: FnFacts, r: Resolver, depth: int = 0) -> bool:
    """Does every position of what the function returns that holds a graph built
    inside hold one only assumed (``RetPos.assumed``), none computed from an argument?
    A module-level function it calls by name (``RetPos.assumed_via``) answers for
    its own result: one that builds a real graph makes this one real."""
    poss = facts.returns if facts.returns is not None else (facts.ret,)
    if not any(rp.graph for rp in poss) or any(rp.derived or not rp.assumed for rp in poss if rp.graph or rp.derived):
        return False
    for rp in poss:
        for name in rp.assumed_via:
            callee = r.fn(name)
            if callee is not None and (depth >= 4 or not _assumed_graph(callee, r, depth + 1)):
                return False
    return True


_ENVIRONMENT_METHODS = frozenset({"step", "reset"})


def _environment_name(key: _Opt[str]) -> bool:
    """Is ``key`` (``env``, ``self.train_env``, ``envs``) named as a reinforcement-learning
    environment: its last part ``env``/``envs``/``environment``, or ending in ``_env``/``_envs``."""
    if not key:
        return False
    last = key.rsplit(".", 1)[-1].lower()
    return last in ("env", "envs", "environment", "environments") or last.endswith(("_env", "_envs"))


def _global_receiver(key: str, r: Resolver) -> bool:
    """While summarising: is ``key`` (``model.scheduler``) an attribute path of a name the
    def does not bind and that is no builtin, torch or a library never the user's?"""
    root = key.split(".", 1)[0]
    if root in _BUILTIN_NAMES or root in ("self", "cls") or _non_graph_library(root):
        return False
    q = r.qualify_raw(root)
    return q == root


def _self_module(node: ast.AST) -> _Opt[str]:
    """``self.netG(x)`` → ``netG``; None for anything else (a helper, an own method)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == "self":
        return node.func.attr
    return None


def _unconditional_calls(body: Sequence[ast.stmt]) -> set:
    """ids of the calls in the statements a def runs whenever it runs: its direct
    statements (``with`` bodies inline) up to the first that may leave it early
    (a ``return`` or ``raise`` inside a compound statement)."""
    out: set = set()
    for s in body:
        if isinstance(s, (ast.With, ast.AsyncWith)):
            out |= _unconditional_calls(s.body)
            continue
        if child_blocks(s):
            if any(isinstance(n, (ast.Return, ast.Raise)) for n in iter_nodes([s])):
                break
            continue
        out.update(id(n) for n in walk_all(s) if isinstance(n, ast.Call))
        if isinstance(s, (ast.Return, ast.Raise)):
            break
    return out


_CONTAINER_CLASSES = frozenset("torch.nn." + c for c in K.CONTAINER_MODULES)
_PARAMETER_OBJS = frozenset({"inst:torch.nn.Parameter", "inst:torch.nn.parameter.Parameter"})


_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train", "eval"})


def _tainted(v: Val, taints: FrozenSet) -> Val:
    """``v`` that may also hold ``taints`` (every element of a tuple too)."""
    elems = tuple(_tainted(e, taints) for e in v.elems) if v.elems is not None else None
    return _with(v, taints=v.taints | taints, elems=elems)


def _construction(callee: Val, cls: str) -> _Opt[ast.Call]:
    """``enc = Encoder(...)`` (or ``Encoder(...).to(dev)``) that bound ``callee``
    in this unit: the call that made it, else None."""
    site = callee.site
    if not isinstance(site, ast.Assign) or len(site.targets) != 1:
        return None
    v = site.value
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _MOVES:
        v = v.func.value
    if isinstance(v, ast.Call) and dotted(v.func) == cls:
        return v
    return None


def _flags_on(made: _Opt[ast.Call], needs, key: str, env: Dict[str, Val]) -> bool:
    """Are the constructor arguments a cache needs (``cache_feature=True``) surely
    true for the object ``made`` built? Given as a constant, or left to a true
    default, and the attribute not set again since (``enc.cache_feature = False``)."""
    if made is None:
        return False
    for attr, pname, idx, default in needs:
        if f"{key}.{attr}" in env:
            return False
        given: _Opt[ast.expr] = None
        for kw in made.keywords:
            if kw.arg == pname:
                given = kw.value
            elif kw.arg is None:
                return False  # **options: unknown
        if given is None and idx < len(made.args):
            if any(isinstance(a, ast.Starred) for a in made.args[: idx + 1]):
                return False
            given = made.args[idx]
        if given is None:
            if not default:
                return False
            continue
        if not (isinstance(given, ast.Constant) and given.value):
            return False
    return True


def _method_name(call: ast.AST) -> _Opt[str]:
    return call.func.attr if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None


def _graph_free(v: Val) -> bool:
    """Surely no graph: no token that is, or may become, one (a parameter's, a
    call's composed later, an unproven one)."""
    return all(t[0] in ("F", "B") for t in v.taints)


def _nth_of_pending(v: Val, i: int) -> Val:
    """Element ``i`` of a value holding what a call not seen from here returns:
    its ``("R", k, -1)`` tokens become ``("R", k, i)``."""
    return plain(frozenset(("R", t[1], i) if t[0] == "R" and t[2] == -1 else t for t in v.taints))


def _saving_op(node: ast.AST) -> bool:
    """Does this operation save tensors for backward, by its spelling: a binary operator of
    ``SAVING_BINOPS`` (``x ** 2``, ``2 * t``) or a tensor method of ``SAVING_METHODS``
    (``x.pow(2)``, ``d.exp()``; a torch function is marked where ``_torch_call`` reads it)."""
    if isinstance(node, ast.BinOp):
        return type(node.op).__name__ in K.SAVING_BINOPS
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in K.SAVING_METHODS and not node.func.attr.endswith("_")


def _fresh_starts(node: ast.AST) -> set:
    """The ids of the sub-expressions an operation reads through its operands' own
    expression (operators, tensor methods' receivers, torch functions' arguments) down to
    a name: values computed only for this expression, which no other value holds."""
    out: set = set()
    todo: List[ast.AST] = [node]
    while todo:
        e = todo.pop()
        if e is not node:
            if not (isinstance(e, (ast.BinOp, ast.UnaryOp)) or (
                    isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and _torch_op(e.func))):
                continue  # (not a call of a function or module: its graph may be only assumed)
            out.add(id(e))
        if isinstance(e, ast.BinOp):
            todo.append(e.left)
            todo.append(e.right)
        elif isinstance(e, ast.UnaryOp):
            todo.append(e.operand)
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            root = e.func.value
            todo.append(root)
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in ("torch", "F"):
                todo.extend(a for a in e.args if not isinstance(a, ast.Starred))
    return out


def _torch_op(func: ast.Attribute) -> bool:
    """``d.pow`` (a tensor method the tables know) or ``torch.exp`` / ``F.relu``."""
    if K.method_saving(func.attr) is not None:
        return True
    root = func.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in ("torch", "F")


def _has_lambda(args: Sequence[ast.expr]) -> bool:
    """Is one of a call's positional arguments a lambda? (Most calls hand none.)"""
    for a in args:
        if a.__class__ is _Lambda:
            return True
    return False


_Lambda = ast.Lambda


def _reached(loss: Val) -> FrozenSet:
    """The graphs a backward of ``loss`` may run through: its G tokens, and
    those of its U tokens (a graph it may hold)."""
    return frozenset(t if t[0] == "G" else ("G", t[1]) for t in loss.taints if t[0] in ("G", "U"))


def _constant_slice(idx: ast.AST) -> _Opt[Tuple[_Opt[int], _Opt[int], _Opt[int]]]:
    """``(start, stop, step)`` of a slice written with integer literals (``1:``, ``:-1``, ``::2``)."""
    if not isinstance(idx, ast.Slice):
        return None
    out: List[_Opt[int]] = []
    for part in (idx.lower, idx.upper, idx.step):
        if part is None:
            out.append(None)
            continue
        neg = isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.USub)
        lit = part.operand if neg else part  # type: ignore[attr-defined]
        if not (isinstance(lit, ast.Constant) and type(lit.value) is int):
            return None
        out.append(-lit.value if neg else lit.value)
    if out[2] == 0:
        return None
    return out[0], out[1], out[2]


def _binds(target: ast.AST, name: str) -> bool:
    """Does the assignment target bind ``name``, or an item of it (``mems[i]``)?"""
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_binds(e, name) for e in target.elts)
    if isinstance(target, ast.Starred):
        return _binds(target.value, name)
    if isinstance(target, ast.Subscript):
        return dotted(target.value) == name
    return dotted(target) == name


def _anchored(v: Val, call: ast.Call, lo: int, hi: int, saving_calls, saves: list) -> Val:
    """GraphFlow._inline's anchor: ``v`` with every graph an inlined method (lines
    ``lo``..``hi``) built re-anchored at the ``call`` that ran it; ``saves[0]`` set
    when one of them saved tensors. A module function, not a closure calling itself:
    that is a reference cycle, which keeps the flow and the unit's tree alive until the
    cyclic collector runs."""
    changed = False
    t: set = set()
    for tok in v.taints:
        node = tok[1] if tok[0] in ("G", "U") else (tok[1][1] if tok[0] == "F" else None)
        if node is not None and lo <= getattr(node, "lineno", -1) <= hi:
            changed = True
            if tok[0] == "G" and id(node) in saving_calls:
                saves[0] = True
            t.add((tok[0], call) if tok[0] != "F" else ("F", ("G", call)))
        else:
            t.add(tok)
    elems = tuple(_anchored(e, call, lo, hi, saving_calls, saves) for e in v.elems) if v.elems is not None else None
    if not changed and (elems is None or all(x is y for x, y in zip(elems, v.elems or ()))):
        return v
    return _with(v, taints=frozenset(t), elems=elems)


def _mark_freed(env: Dict[str, Val], gs: FrozenSet) -> None:
    """A backward on this path freed the graphs ``gs``: every value of ``env``
    holding one of them gets an ``("F", g)`` mark, which follows it through joins
    and copies, so the loop can tell a value freed on the path that reaches the
    end of an iteration from one another path kept."""
    if not gs:
        return
    # (``gs`` holds graph tokens only, _reached's: a value shares one with it exactly
    # when its graph tokens do, without building the set of them for every value)
    for k, v in list(env.items()):
        if not gs.isdisjoint(v.taints):
            env[k] = _marked(v, gs)


def _marked(v: Val, gs: FrozenSet) -> Val:
    hit = gs & v.taints  # (graph tokens: see _mark_freed)
    if not hit:
        return v
    elems = tuple(_marked(e, gs) for e in v.elems) if v.elems is not None else None
    return _with(v, taints=v.taints | {("F", t) for t in hit}, elems=elems)


def _whole_slice(sl: ast.AST) -> bool:
    """``[:]``: no bounds, no step."""
    return isinstance(sl, ast.Slice) and sl.lower is None and sl.upper is None and sl.step is None


def _jumps(body: Sequence[ast.stmt]) -> bool:
    """A ``break`` or ``continue`` of this loop (not of a loop nested in it)."""
    stack: List[ast.AST] = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Break, ast.Continue)):
            return True
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            stack.extend(n.orelse)  # its else: belongs to this loop's iteration
            continue
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.expr)):
            continue
        stack.extend(ast.iter_child_nodes(n))
    return False


def _loop_jumps(loop: ast.stmt) -> bool:
    """:func:`_jumps` of a loop's body, kept on the loop node: a question of syntax
    alone, asked again by every interpreter run over the loop (a def's summary, the
    unit's trace, the rules' own flows) and by each walk of its body."""
    got = loop.__dict__.get("_gg_jumps")
    if got is None:
        got = loop._gg_jumps = _jumps(loop.body)  # type: ignore[attr-defined]
    return got


def _rebinds(loop: ast.stmt, name: str) -> bool:
    """Does the loop's body assign ``name`` (nested defs aside)? The names it
    assigns are gathered once per loop node (syntax: every run's, as :func:`_loop_jumps`)."""
    got = loop.__dict__.get("_gg_rebound")
    if got is None:
        names = set()
        for node in iter_nodes(list(loop.body)):  # type: ignore[attr-defined]
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                names.add(node.id)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                names.update(node.names)
        got = loop._gg_rebound = frozenset(names)  # type: ignore[attr-defined]
    return name in got


def _peer_subscripts(body: Sequence[ast.stmt], i: str, j: str, cond: bool,
                     elem: _Opt[str] = None) -> Iterator[Tuple[ast.expr, bool]]:
    """The reads ``x[j]`` (and of the name ``elem``, the element an ``enumerate`` binds) a
    loop body makes whenever it runs, or only under ``if i != j:`` (then ``cond``): simple
    statements, ``with`` blocks and that ``if``'s body."""
    for s in body:
        if isinstance(s, ast.If):
            t = s.test
            if (not cond and isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.NotEq)
                    and isinstance(t.left, ast.Name) and isinstance(t.comparators[0], ast.Name)
                    and {t.left.id, t.comparators[0].id} == {i, j}):
                yield from _peer_subscripts(s.body, i, j, True, elem)
            continue
        if isinstance(s, (ast.With, ast.AsyncWith)):
            yield from _peer_subscripts(s.body, i, j, cond, elem)
            continue
        if not isinstance(s, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        for node in walk_all(s):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                    and isinstance(node.slice, ast.Name) and node.slice.id == j:
                yield node, cond
            elif elem is not None and isinstance(node, ast.Name) and node.id == elem and isinstance(node.ctx, ast.Load):
                yield node, cond


def _loop_index(loop: ast.For) -> _Opt[Tuple[str, _Opt[str], Tuple[str, str]]]:
    """A loop's index, the name it binds to the element (``for j, peer in enumerate(xs)``)
    or None, and the indices it takes (:func:`_index_range`; ``enumerate(xs)`` takes every
    index of ``xs``); None when it is no such loop."""
    t = loop.target
    if isinstance(t, ast.Name):
        shape = _index_range(loop.iter)
        return (t.id, None, shape) if shape is not None else None
    it = loop.iter
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 \
            and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" \
            and len(it.args) == 1 and not it.keywords:
        a, b = t.elts
        d = dotted(it.args[0])
        if d is not None and isinstance(a, ast.Name) and isinstance(b, ast.Name) and a.id != b.id:
            return (a.id, b.id, ("len", d))
    return None


def _index_range(it: ast.expr) -> _Opt[Tuple[str, str]]:
    """What indices a loop over ``it`` takes, comparable between loops: ``range(n)``
    and ``range(0, n)`` → ``("n", dump of n)``; ``range(len(xs))`` → ``("len", "xs")``
    (dotted); None for anything else."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and not it.keywords and 1 <= len(it.args) <= 2):
        return None
    if len(it.args) == 2:
        if not (isinstance(it.args[0], ast.Constant) and it.args[0].value == 0 and type(it.args[0].value) is int):
            return None
    n = it.args[-1]
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" and len(n.args) == 1 \
            and not n.keywords:
        d = dotted(n.args[0])
        if d is not None:
            return ("len", d)
    return ("n", ast.dump(n))


def _block_of(body: Sequence[ast.stmt], stmt: ast.stmt) -> _Opt[Sequence[ast.stmt]]:
    """The statement list holding ``stmt`` (nested defs aside)."""
    todo: List[Sequence[ast.stmt]] = [body]
    while todo:
        block = todo.pop()
        for s in block:
            if s is stmt:
                return block
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                todo.extend(child_blocks(s))
    return None


def _appends_to(value: ast.expr, key: str) -> bool:
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "append" \
        and dotted(value.func.value) == key and len(value.args) == 1 and not value.keywords


def _literal_trips(loop: ast.stmt) -> bool:
    """``for _ in range(4)``, ``for k in ("a", "b")``: the body surely runs, by its text alone."""
    if not isinstance(loop, ast.For):
        return False
    it = loop.iter
    if isinstance(it, (ast.List, ast.Tuple)):
        return bool(it.elts) and not any(isinstance(e, ast.Starred) for e in it.elts)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
            and it.args and not it.keywords and len(it.args) <= 3:
        bounds = [a.value for a in it.args if isinstance(a, ast.Constant) and type(a.value) is int]
        return len(bounds) == len(it.args) and len(range(*bounds)) > 0
    return False


def _flag_test(test: ast.expr, flags: Mapping[str, bool]) -> _Opt[bool]:
    """``flag`` / ``not flag`` with ``flag`` a parameter whose callers' constant is known."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _flag_test(test.operand, flags)
        return None if inner is None else not inner
    if isinstance(test, ast.Name):
        return flags.get(test.id)
    return None


def _bound_beside(stmts: Sequence[ast.stmt], skip: ast.stmt) -> set:
    """Plain names assigned by the statements of a loop body other than ``skip``
    (and what is in it), not looking into nested loops or defs."""
    out: set = set()
    stack = list(stmts)
    while stack:
        st = stack.pop()
        if st is skip or isinstance(st, (LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        out.update(n for n in _assigned_names(st) if "." not in n)
        for b in child_blocks(st):
            stack.extend(b)
    return out


def _definitely_bound(stmts: Sequence[ast.stmt]) -> set:
    """Names a statement list binds on every path through it that completes
    (plain and tuple assignments, ``with`` bodies, if/else where both arms bind)."""
    out: set = set()
    for st in stmts:
        if isinstance(st, ast.Assign):
            for t in st.targets:
                out.update(n for n in target_names(t) if "." not in n)
        elif isinstance(st, (ast.AnnAssign, ast.AugAssign)) and getattr(st, "value", None) is not None:
            out.update(n for n in target_names(st.target) if "." not in n)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            out |= _definitely_bound(st.body)
        elif isinstance(st, ast.If) and st.orelse:
            out |= _definitely_bound(st.body) & _definitely_bound(st.orelse)
    return out


def _union(pos, kws) -> FrozenSet:
    if not pos and not kws:
        return EMPTY
    return frozenset().union(*(v.taints for v in pos), *(v.taints for v in kws.values()))


def _assigned_names(stmt: ast.AST) -> List[str]:
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in target_names(t)]
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return target_names(stmt.target)
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return target_names(stmt.target)
    return []


_NO_KEY = object()


def _train_before(body: Sequence[ast.stmt], line: int, module: str) -> Tuple[_Opt[ast.stmt], _Opt[ast.stmt]]:
    """The last ``<m>.train()`` (or ``.train(True)``) statement of ``body``, ``<m>`` the
    dotted name ``module`` or one holding it (``model`` for ``model.bn``), before the
    statement of ``body`` holding ``line``, and that statement; Nones when there is
    none (or none holds it)."""
    found = None
    for s in body:
        if s.lineno <= line <= (s.end_lineno or s.lineno):
            return found, s
        v = s.value if isinstance(s, ast.Expr) else None
        if not isinstance(v, ast.Call) or not isinstance(v.func, ast.Attribute) or v.func.attr != "train":
            continue
        recv = dotted(v.func.value)
        if recv is not None and (module == recv or module.startswith(recv + ".")) and not v.keywords and (
                not v.args or (len(v.args) == 1 and isinstance(v.args[0], ast.Constant) and v.args[0].value is True)):
            found = s
    return None, None


# a module's mode switched by the text: ``.eval()``, ``.train(<anything but nothing or True>)``,
# an assignment of ``.training``
_MODE_SWITCH = re.compile(r"\.eval\s*\(|\.train\s*\((?!\s*(?:True\s*)?\))|\.training\s*=(?!=)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _no_mode_switch(lines: Sequence[str], first: int, last: int, own: FrozenSet[str]) -> bool:
    """Do the source lines ``first``..``last`` (1-based) neither switch a module's mode
    (:data:`_MODE_SWITCH`) nor name a function or method of the file (``own``: it might)?"""
    text = "\n".join(lines[first - 1:last])
    return not _MODE_SWITCH.search(text) and own.isdisjoint(_WORD.findall(text))


# (the summary queries below are memoised per fact table by ``summary.query``)
_ENTRY_METHODS = ("forward", "__init__", "__call__")


def cutting_methods(summary) -> FrozenSet[str]:
    """The names of methods that every class of the file defining one cuts state in
    (``ClassFacts.cuts``, a non-empty set of attributes), ``forward``, ``__init__`` and
    ``__call__`` aside. (A summary query.)"""
    cutting: set = set()
    other: set = set()
    for value in summary.values():
        if isinstance(value, ClassFacts):
            cuts = {m for m, attrs in value.cuts if attrs}
            for m, _ in value.methods:
                if m not in _ENTRY_METHODS:
                    (cutting if m in cuts else other).add(m)
    return frozenset(cutting - other)


def own_callables(summary) -> FrozenSet[str]:
    """The names of the file's functions and of its classes' methods (a class's
    ``forward``, ``__init__`` and ``__call__`` aside): a call of one may switch a
    module's mode, which the caller cannot see. (A summary query.)"""
    names = set()
    for key, value in summary.items():
        if key.startswith("fn:"):
            names.add(key[3:])
        elif isinstance(value, ClassFacts):
            names.update(n for n, _ in value.methods if n not in _ENTRY_METHODS)
    return frozenset(names)


def _part_node(call: ast.Call) -> ast.AST:
    """The node standing for the graphs of the positions a helper's own backward freed
    (``FnFacts.frees_positions``): the callee's name (``model.process``) in the call."""
    return call.func


def _freed_returned(call: ast.Call, node: ast.AST, facts: FnFacts) -> set:
    """What of a helper's result its own backward freed: the call's graph (``(loss, logits)
    = model(x)`` of a forward calling ``loss.backward()``), or, where only some positions
    were (``FnFacts.frees_positions``), theirs, a graph of its own: the other positions'
    graphs, ``("G", node)``, were not back-propagated."""
    if facts.frees_returned:
        return {("G", node)}
    if facts.frees_positions and facts.returns is not None:
        return {("G", _part_node(call))}
    return set()




def _condition_key(test: ast.expr) -> _Opt[tuple]:
    """A key for a test simple enough that evaluating it twice in a row gives
    the same answer while the names it reads keep their values: names and
    attributes, constants, ``not``/``and``/``or``, comparisons, ``bool(...)``
    (the same text gives the same key). None for anything else."""
    key: list = []
    for node in walk_all(test):
        if isinstance(node, ast.Name):
            key.append(node.id)
        elif isinstance(node, ast.Attribute):
            key.append("." + node.attr)
        elif isinstance(node, ast.Constant):
            key.append((type(node.value).__name__, repr(node.value)))
        elif isinstance(node, ast.BoolOp):
            key.append((type(node.op).__name__, len(node.values)))
        elif isinstance(node, ast.Compare):
            key.append(("cmp",) + tuple(type(o).__name__ for o in node.ops))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            key.append("not")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool" \
                and len(node.args) == 1 and not node.keywords:
            key.append("bool()")
        elif not isinstance(node, (ast.expr_context, ast.boolop, ast.cmpop, ast.unaryop)):
            return None
    return tuple(key)


def _condition_names(test: ast.expr) -> set:
    names = set()
    for node in walk_all(test):
        if isinstance(node, (ast.Name, ast.Attribute)):
            n = dotted(node)
            if n:
                names.add(n)
    return names


def _arg_names(call: ast.Call) -> set:
    """The dotted names a call is given (inside a tuple or list argument too)."""
    names = set()
    for a in list(call.args) + [k.value for k in call.keywords]:
        for e in (a.elts if isinstance(a, (ast.Tuple, ast.List)) else (a,)):
            n = dotted(e)
            if n:
                names.add(n)
    return names


def _built_by(v: Val, loop: _Opt[ast.AST] = None) -> _Opt[ast.AST]:
    """Where the carried value's graph is built: a graph-building node on the
    assigning statement if any, else the first one inside the loop, else any."""
    nodes = [t[1] for t in v.taints if t[0] == "G" and hasattr(t[1], "lineno")]
    if not nodes:
        return None
    site = v.site
    if site is not None:
        lo, hi = site.lineno, getattr(site, "end_lineno", site.lineno) or site.lineno
        on_site = [n for n in nodes if lo <= n.lineno <= hi]
        if on_site:
            nodes = on_site
    if loop is not None and site is None:
        lo, hi = loop.lineno, getattr(loop, "end_lineno", loop.lineno) or loop.lineno  # type: ignore[attr-defined]
        inside = [n for n in nodes if lo <= n.lineno <= hi]
        nodes = inside or nodes
    return min(nodes, key=lambda n: (not isinstance(n, ast.Call), n.lineno, n.col_offset))


# ---------------------------------------------------------------------------
# where a graph starts (a finding's words)


def graph_sources(flow: GraphFlow, v: Val, entry: Mapping[str, Val], body: Sequence[ast.stmt],
                  qualify) -> _Opt[List[Source]]:
    """Where the graphs ``v`` holds start, in the order of the unit's text: each
    graph an op on leaves began (``("G", node)`` with ``flow.leaf_of``) names those
    leaves (a parameter of the unit a caller passes a tensor requiring grad, a
    module's parameter ``lin.weight`` or ``model.parameters()``, a tensor made to
    require grad where it is built); each graph a module call began names the
    module. ``entry``: the environment ``v`` was read in (a loop's entry), for the
    name a module has there (``first`` after ``first = model[0]`` is ``model``).
    ``body``: the unit's statements; ``qualify``: an expression's torch name. None
    where a graph starts at something else (the caller then says it otherwise)."""
    made: _Opt[Dict[int, ast.stmt]] = None
    out: Dict[Tuple[_Opt[str], str], Source] = {}
    for t in sorted(v.graph_tokens(), key=lambda t: (getattr(t[1], "lineno", 0), getattr(t[1], "col_offset", 0))):
        leaves = flow.leaf_of.get(id(t[1]))
        if leaves is None:
            src = _module_source(t[1], entry)
            if src is None:
                return None
            out.setdefault((src.name, src.kind), src)
            continue
        if made is None:
            made = _made_by(body)
        for leaf in sorted(leaves, key=lambda l: (getattr(l[1], "lineno", 0), getattr(l[1], "col_offset", 0))):
            src = _leaf_source(leaf[1], made, entry, qualify)
            if src is None:
                return None
            out.setdefault((src.name, src.kind), src)
    return sorted(out.values(), key=lambda s: (getattr(s.stmt or s.node, "lineno", 0),
                                               getattr(s.stmt or s.node, "col_offset", 0)))


def held_names(flow: GraphFlow, name: str, entry: Mapping[str, Val], qualify, summary) -> Tuple[str, ...]:
    """The named tensors carrying a graph that the container or object ``name`` holds in
    ``entry`` (a loop's entry): ``loader = DataLoader(TensorDataset(feats, y))`` holds
    ``feats``, ``pair = (h, c)`` holds ``h`` and ``c``, an object an untyped call made of
    them (``prepare(feats)``, read as a carrier, ``GraphFlow.fn_made``) holds them too;
    a name's own value built by an operation (``feats * 2``, ``model(feats)``, a tensor's
    method) holds none of them by name. What a finding about reusing the container is
    about. Read off the statement that bound it (``Val.site``), through the names it
    reads that hold a graph there (``carried_graphs``), each named by what it holds in
    turn; () where the value is a tensor of its own (the finding names ``name``).
    ``summary``: the file's summary, for the arguments a function of the user's hands
    back (``RetPos.params``)."""
    return tuple(_held(flow, name, entry, qualify, summary, set()))


_CARRIER_BUILTINS = frozenset({"list", "tuple", "zip", "reversed", "sorted", "enumerate", "iter", "next"})


def _held(flow: GraphFlow, name: str, entry: Mapping[str, Val], qualify, summary, seen: set) -> List[str]:
    v = entry.get(name)
    site = v.site if v is not None else None
    if name in seen or not isinstance(site, ast.Assign) or len(site.targets) != 1 \
            or dotted(site.targets[0]) != name:
        return []
    seen.add(name)
    return _held_expr(flow, site.value, entry, qualify, summary, seen)


def _held_expr(flow: GraphFlow, e: ast.AST, entry: Mapping[str, Val], qualify, summary, seen: set) -> List[str]:
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        args: List[ast.expr] = list(e.elts)
    elif isinstance(e, ast.Call):
        got = _carried_args(flow, e, entry, qualify, summary)
        if got is None:
            return []
        args = got
    else:
        return []
    out: List[str] = []
    for a in args:
        if isinstance(a, ast.Starred):
            a = a.value
        if isinstance(a, ast.Name) or (isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)):
            key = dotted(a)
            av = entry.get(key) if key else None
            names = (_held(flow, key, entry, qualify, summary, seen) or [key]) \
                if key and av is not None and flow.carried_graphs(av) else []
        else:
            names = _held_expr(flow, a, entry, qualify, summary, seen)
        for n in names:
            if n not in out:
                out.append(n)
    return out


def _carried_args(flow: GraphFlow, call: ast.Call, entry: Mapping[str, Val], qualify, summary) -> _Opt[List[ast.expr]]:
    """The arguments whose tensors ``call``'s result holds as they are (a container, a
    carrier), or None where it computes a tensor of its own from them (a torch
    operation, a module's call, a tensor's method)."""
    if applies_cut(call) or id(call) in flow.saving_calls:
        return None
    func = call.func
    q = qualify(func) or ""
    if q.startswith("torch."):
        return list(call.args) + [k.value for k in call.keywords] if q.startswith("torch.utils.") else None
    if isinstance(func, ast.Name) and func.id not in entry and func.id in _BUILTIN_NAMES:
        return list(call.args) + [k.value for k in call.keywords] if func.id in _CARRIER_BUILTINS else None
    base = func.value if isinstance(func, ast.Attribute) else func
    bv = entry.get(dotted(base) or "") if isinstance(base, (ast.Name, ast.Attribute)) else None
    if bv is not None and (bv.graph_tokens() or bv.has_grad() or (bv.obj or "").startswith(("inst:", "user:"))):
        return None  # a tensor's method, a module's call
    name = dotted(func)
    ff = summary.get("fn:" + name) if name and summary is not None and (
        isinstance(func, ast.Name) or name.split(".", 1)[0] not in entry) else None
    if isinstance(ff, FnFacts):
        if ff.no_grad or ff.detaches or not ff.returns_value:
            return None
        flows = set(ff.ret.params)
        pos = [a for a in call.args if not isinstance(a, ast.Starred)]
        got: List[ast.expr] = [a for i, a in enumerate(pos) if i in flows]
        names = list(ff.params)
        got += [k.value for k in call.keywords if k.arg in names and names.index(k.arg) in flows]
        return got
    return list(call.args) + [k.value for k in call.keywords]


def _made_by(body: Sequence[ast.stmt]) -> Dict[int, ast.stmt]:
    """id(value) → the assignment or expression statement whose value it is."""
    out: Dict[int, ast.stmt] = {}
    for st in iter_statements(body):
        if isinstance(st, (ast.Assign, ast.AnnAssign, ast.Expr)) and st.value is not None:
            out[id(st.value)] = st
    return out


def _keyword(call: ast.Call, name: str) -> _Opt[ast.keyword]:
    return next((k for k in call.keywords if k.arg == name), None)


def _leaf_source(n, made: Dict[int, ast.stmt], entry: Mapping[str, Val], qualify) -> _Opt[Source]:
    """The source a leaf token's node stands for: a parameter of the function a caller
    hands a tensor that requires grad, a module's parameter (``lin.weight``,
    ``model.parameters()``), or a tensor made to require grad where it is built."""
    if isinstance(n, ast.arg):
        return Source(n.arg, "data", None, n, None)
    if isinstance(n, ast.Attribute):
        base = dotted(n.value)
        if base:
            return Source(f"{_module_named(base, entry)}.{n.attr}", "param", None, n, None)
        return Source(f"{n.value.id}.{n.attr}" if isinstance(n.value, ast.Name) else None, "param", None, n, None)
    if not isinstance(n, ast.Call):
        return None
    func = n.func
    if isinstance(func, ast.Attribute) and func.attr in ("parameters", "named_parameters"):
        return Source(f"{ast.unparse(func.value)}.{func.attr}()", "param", None, n, None)
    st = made.get(id(n))
    removal: _Opt[tuple]
    if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":
        removal = ("method", n)
        kind = "data"
        if isinstance(st, ast.Expr) and isinstance(func.value, ast.Name):  # X.requires_grad_()
            return Source(func.value.id, kind, st, n, removal)
    else:
        q = qualify(func) or ""
        kind = "param" if q in _PARAMETER_CLASSES else "data"
        k = _keyword(n, "requires_grad")
        removal = ("kw", k, n) if kind == "data" and k is not None else None
    if isinstance(st, (ast.Assign, ast.AnnAssign)):
        target = st.targets[0] if isinstance(st, ast.Assign) else st.target
        name = target.id if isinstance(target, ast.Name) else (
            f"{target.value.id}.{target.attr}" if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            else None)
        if name:
            return Source(name, kind, st, n, removal)
    return Source(None, kind, None, n, removal)


_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _module_named(name: str, entry: Mapping[str, Val], depth: int = 0) -> str:
    """The name of the module a name holds: ``first`` after ``first = model[0]`` (or
    ``first = model``) is ``model``, as the statement that bound it says."""
    held = entry.get(name)
    st = held.site if held is not None else None
    if depth > 5 or not isinstance(st, ast.Assign) or len(st.targets) != 1 or dotted(st.targets[0]) != name:
        return name
    value = st.value.value if isinstance(st.value, ast.Subscript) else st.value
    other = dotted(value)
    return _module_named(other, entry, depth + 1) if other and other != name else name


def _module_source(node, entry: Mapping[str, Val]) -> _Opt[Source]:
    """The module whose call ``node`` began a graph, by the name it has in ``entry``."""
    if not isinstance(node, ast.Call):
        return None
    name = dotted(node.func)
    if name is None:
        return None
    name = _module_named(name, entry)
    held = entry.get(name)
    site = held.site if held is not None else None
    return Source(name, "module", site if isinstance(site, (ast.Assign, ast.AnnAssign)) else None, node.func)


class BuildFlow(GraphFlow):
    """A :class:`GraphFlow` run that also records how each value was built
    (``build_stmts``: the ``("B", stmt)``, ``("K", None)`` and ``("M", node, words)``
    tokens read by ``GraphFlow.built_by`` / ``saving_of``, ``call_entries``). A
    subclass, so that the run every unit shares pays nothing for it: only ``_apply``
    differs, marking what a callable's call returns (:meth:`GraphFlow._call_saves`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.build_stmts = True

    def _apply(self, call, callee: Val, q: _Opt[str], pos, kws, args_taints, env) -> Val:
        res = super()._apply(call, callee, q, pos, kws, args_taints, env)
        return self._call_saves(call, callee, q, res) if res.taints else res
