"""GG208 unoptimized-params: gradients flow into parameters that no optimizer updates.

Two shapes, both silent at run time:

* **a network no optimizer owns, back-propagated through** (a DQN's TD target built
  from ``self.target_net(next_states)`` without ``.detach()`` or ``torch.no_grad()``):
  every ``backward()`` also runs through the target network and piles gradients
  into its parameters, which nothing reads or zeroes. Wasted compute and memory;
  the target is not the semi-gradient the algorithm means.
  Found in a method of a class that builds the network as ``self.T = Net(...)``
  (a same-file ``nn.Module`` class with parameters, or a torch layer), when the
  value of a call ``self.T(...)`` / ``self.T.forward(...)`` made with graph
  recording on reaches a ``backward()`` of the same method, the call's inputs carry
  no other module's graph, and the file shows where every optimizer's parameters
  come from and none of them is ``T``'s (``facts``); never when ``T`` is frozen,
  updated by hand, wrapped into another module or added to a container anywhere
  in the file. The fix detaches the call's result (the optimizer-owned
  parameters' gradients do not change: none flowed through it).
* **layers replaced after the optimizer was built** (``optimizer =
  optim.SGD(model.parameters())``, then ``model.fc = nn.Linear(...)`` or a
  same-file ``speedup(model)`` that assigns new layers to ``model``'s
  attributes): the new layers receive gradients but the optimizer still holds the
  old parameters, so they never train. Found in one block of a unit: the
  optimizer built from ``X.parameters()``, a later statement of the same block
  that replaces a layer of ``X``, and a later ``optimizer.step()``, with nothing
  re-creating the optimizer or adding a parameter group in between. The fix
  builds the optimizer again right after the replacement (the same statement),
  when nothing (a scheduler) holds the old one yet.

Also read (see each function): a layer left out of the parameter groups
(``_left_out_of_groups``), and layers kept in a plain list or dict attribute of a
module (``_plain_containers``, read in the module's ``__init__``).
"""

from __future__ import annotations

import ast
import re

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.quiet_facts import QUIET_FACTS, STEPS
from gradguard.analysis.context import unit_text
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Fix, Position, Range, Related, Severity, TextEdit
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.gg208_unoptimized_params import messages as M
from gradguard.rules.gg208_unoptimized_params.facts import (
    ALONE, CLASS, FED, MADE, OWNED, OWNED_BARE, OWNED_CLASS, OWNED_OPAQUE, OWNER_FACTS, REPLACES, STEPPED, GROUPS,
    SUBMODULES, fills_of,
    is_optimizer_call, parameter_owners,
    layer_with_parameters)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Optional, Set, Tuple, Union

# methods whose result carries no gradient back into what they are called on
_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train"})
_CUTS = K.GRAPH_CUT_METHODS | K.INTEGER_METHODS | frozenset({"size", "dim", "numel", "nelement"})


class UnoptimizedParams(Rule):
    code = "GG208"
    name = "unoptimized-params"
    default_severity = Severity.WARNING
    needs_backprop = True
    names_lines = True  # the message names the optimizer's line
    fact_sources = (OWNER_FACTS, QUIET_FACTS)  # (gg2:steps: a training function of the module)
    # ("= [" / "= {": a constructor that keeps layers in a plain list or dict, shape 4)
    # ("deepcopy": a copy of the model handed on with the original's optimizer, shape 5)
    trigger = Trigger(torch=True, text=(("backward", "step", "= [", "= {", "deepcopy"),))
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        out: "List[Finding]" = []
        if unit.class_node is not None and unit.kind == "function" and getattr(unit.node, "name", "") == "__init__":
            out.extend(_plain_containers(self, unit, ctx))
        text = unit_text(unit, ctx.index.lines)
        if unit.class_node is not None and unit.kind == "function" and "deepcopy" in text:
            out.extend(_copy_given_the_optimizer(self, unit, ctx))
        if unit.kind == "function" and '"params"' in text:
            out.extend(_dropped_group(self, unit, ctx))
        if "backward" not in text and "step" not in text:
            return out  # (met the trigger by its "= [" / "= {" alone)
        if unit.kind == "function" and unit.class_node is not None:
            out.extend(_unowned_calls(self, unit, ctx))
        elif unit.kind == "function" and not unit.parents:
            out.extend(_unowned_parameters(self, unit, ctx))
        elif unit.kind == "module":
            out.extend(_unowned_module_level(self, unit, ctx))
        out.extend(_replaced_after_optimizer(self, unit, ctx))
        out.extend(_left_out_of_groups(self, unit, ctx))
        return sorted(out, key=lambda f: (f.range.start.line, f.range.start.character))


# ---------------------------------------------------------------------------
# shape 1: a network no optimizer owns, back-propagated through
# ---------------------------------------------------------------------------
def _file_ownership(summary) -> "Tuple[bool, bool, bool]":
    """(some optimizer's parameters are opaque, some optimizer owns a bare name's
    parameters, the file builds an optimizer at all) -- a summary query."""
    opaque = bare = any_opt = False
    for key in summary:
        if key == OWNED_OPAQUE:
            opaque = True
        elif key.startswith(OWNED_BARE):
            bare = True
        if key.startswith("gg208:owned"):
            any_opt = True
    return opaque, bare, any_opt


def _is_module_class(cls: ast.ClassDef) -> bool:
    return any((A.dotted(b) or "").endswith("Module") for b in cls.bases)


def _networks(cls: ast.ClassDef, ctx) -> "Dict[str, ast.Call]":
    """``self.<name> = <constructor>(...)`` in the class's methods: attribute -> the call,
    for the attributes bound once, to a module with parameters the file can see."""
    seen: "Dict[str, List[ast.AST]]" = {}
    for n in A.walk_all(cls):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        seen.setdefault(e.attr, []).append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            t = n.target
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                seen.setdefault(t.attr, []).append(n)
    out: "Dict[str, ast.Call]" = {}
    for attr, values in seen.items():
        if len(values) != 1 or not isinstance(values[0], ast.Call):
            continue
        call = values[0]
        while (isinstance(call.func, ast.Attribute) and call.func.attr in _MOVES
               and isinstance(call.func.value, ast.Call)):
            call = call.func.value  # Net(...).to(device)
        if layer_with_parameters(call, ctx):
            out[attr] = call
            continue
        if isinstance(call.func, ast.Name):
            fact = ctx.summary.get(CLASS + call.func.id)
            if isinstance(fact, tuple) and fact[0] and fact[1] and (not fact[2] or (
                    not fact[3] and not ctx.summary.get(STEPPED + attr))):
                # (an optimizer the network builds for itself counts when something steps it: a
                # method of its class, or a ``.step()`` reached through this attribute)
                out[attr] = call
    return out


def _network_of(call: ast.AST, nets: "Dict[str, ast.Call]", bare: bool = False) -> "Optional[str]":
    """``self.T(...)`` or ``self.T.forward(...)`` -> ``T`` (``bare``: ``T(...)``, a parameter)."""
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "forward":
        f = f.value
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in nets:
        return f.attr
    if bare and isinstance(f, ast.Name) and f.id in nets:
        return f.id
    return None


class _Taint:
    """A forward walk of one method: which names hold a value computed from a call
    of a network (``T``), or from a call of another module of the object (``*``)."""

    def __init__(self, nets: "Dict[str, ast.Call]", ctx, bare: bool = False) -> None:
        self.nets = nets
        self.ctx = ctx
        self.bare = bare  # the networks are a function's parameters, called by name
        self.names: "Dict[str, Set[str]]" = {}
        self.calls: "Dict[str, List[ast.Call]]" = {}  # T -> its calls with graph recording on
        self.backwards: "List[Tuple[ast.Call, Set[str]]]" = []
        self.dirty_inputs: "Set[str]" = set()  # networks called on another module's graph

    def of(self, e: ast.AST, quiet: bool) -> "Set[str]":
        """The networks (and ``*``) whose graph the value of ``e`` carries."""
        if isinstance(e, ast.Name):
            return set(self.names.get(e.id, ()))
        if isinstance(e, (ast.Constant, ast.Compare, ast.Lambda, ast.JoinedStr)):
            return set()
        if isinstance(e, ast.Attribute):
            if e.attr in K.GRAPH_CUT_ATTRS or e.attr in K.NON_GRAPH_ATTRS or e.attr == "grad":
                return set()
            return self.of(e.value, quiet)
        if isinstance(e, ast.Subscript):
            v = e.value
            idx = e.slice
            # ``x.max(1)[1]``, ``torch.max(x, 1)[1]``: the indices carry no gradient
            if (isinstance(idx, ast.Constant) and idx.value == 1 and isinstance(v, ast.Call)
                    and _callee_name(v) in ("max", "min", "topk", "sort")):
                self.of(v, quiet)
                return set()
            self.of(idx, quiet)
            return self.of(v, quiet)
        if isinstance(e, ast.Call):
            f = e.func
            args = list(e.args) + [k.value for k in e.keywords]
            got: "Set[str]" = set()
            for a in args:
                got |= self.of(a.value if isinstance(a, ast.Starred) else a, quiet)
            if isinstance(f, ast.Attribute):
                recv = self.of(f.value, quiet)
                if f.attr in _CUTS:
                    return set()
                got |= recv
            net = _network_of(e, self.nets, self.bare)
            if net is not None:
                if quiet:
                    return set()
                if "*" in got:
                    self.dirty_inputs.add(net)
                self.calls.setdefault(net, []).append(e)
                return got | {net}
            q = A.qualify(f, self.ctx) or ""
            if q.startswith("torch.") and q.rsplit(".", 1)[-1] in K.INTEGER_METHODS:
                return set()
            if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self") \
                    or (isinstance(f, ast.Attribute) and f.attr == "forward"):
                got.add("*")  # another module of the object: its output carries a graph
            return got
        got = set()
        for child in A.child_nodes(e):
            if isinstance(child, ast.expr):
                got |= self.of(child, quiet)
        return got

    def block(self, stmts: "List[ast.stmt]", quiet: bool) -> None:
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    self.of(item.context_expr, quiet)
                self.block(s.body, quiet or A.is_no_grad_with(s, self.ctx))
                continue
            if isinstance(s, ast.Assign):
                val = self.of(s.value, quiet)
                for t in s.targets:
                    self._bind(t, val)
                continue
            if isinstance(s, (ast.AugAssign, ast.AnnAssign)):
                val = self.of(s.value, quiet) if s.value is not None else set()
                t = s.target
                if isinstance(t, ast.Name):
                    self.names[t.id] = (self.names.get(t.id, set()) | val) if isinstance(s, ast.AugAssign) else val
                continue
            if isinstance(s, (ast.For, ast.AsyncFor)):
                self._bind(s.target, self.of(s.iter, quiet))
            elif isinstance(s, ast.Expr):
                e = s.value
                if isinstance(e, ast.Call) and A.is_backward_call(e, self.ctx):
                    target = A.backward_target(e, self.ctx)
                    self.backwards.append((e, self.of(target, quiet) if target is not None else set()))
                    continue
                self.of(e, quiet)
                continue
            else:
                for child in A.child_nodes(s):
                    if isinstance(child, ast.expr):
                        self.of(child, quiet)
            for block in A.child_blocks(s):
                self.block(block, quiet)

    def _bind(self, t: ast.AST, val: "Set[str]") -> None:
        if isinstance(t, ast.Name):
            self.names[t.id] = set(val)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._bind(e.value if isinstance(e, ast.Starred) else e, val)
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
            self.names[t.value.id] = self.names.get(t.value.id, set()) | val  # x[mask] = v: x gains v


def _callee_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _left_alone(summary, name: str) -> bool:
    return bool(summary.get(ALONE + name)) or bool(summary.get(OWNED + name))


def _unowned_calls(rule, unit, ctx) -> "List[Finding]":
    if A.is_no_grad_function(unit.node, ctx):
        return []
    text_words = _words(unit, ctx)
    if "backward" not in text_words:
        return []
    cls = unit.class_node
    summary = ctx.summary
    opaque, bare, any_opt = query(summary, _file_ownership)
    if opaque or not any_opt:
        return []  # an optimizer whose parameters cannot be read may own anything
    module_class = _is_module_class(cls)
    if module_class and (bare or summary.get(OWNED_CLASS + cls.name)):
        return []  # ``optim.Adam(model.parameters())`` may own every network of the object
    nets = {k: v for k, v in _networks(cls, ctx).items() if k in text_words and not _left_alone(summary, k)}
    if not nets:
        return []
    taint = _Taint(nets, ctx)
    taint.block(unit.body, False)
    hits: "List[Tuple[str, ast.Call, ast.Call]]" = []
    for net, calls in sorted(taint.calls.items()):
        if net in taint.dirty_inputs:
            continue  # its inputs carry another module's graph: a gradient may flow through it on purpose
        bw = next((b for b, nets_in in taint.backwards if net in nets_in), None)
        if bw is None:
            continue
        hits.extend((net, call, bw) for call in calls)
    # a call inside another reported call's arguments (``critic_target([s2, actor_target(s2)])``):
    # detaching the outer one cuts both, one finding
    inside = {id(n) for _, call, _ in hits for a in call.args + [k.value for k in call.keywords]
              for n in A.walk_all(a)}
    return [_unowned_finding(rule, net, call, bw, ctx) for net, call, bw in hits if id(call) not in inside]


def _unowned_parameters(rule, unit, ctx) -> "List[Finding]":
    """The first shape in a module-level function handed the target network as an argument
    (minimalRL's ``train(q, q_target, memory, optimizer)``): a parameter every call site of
    the file passes the same module-level name, an instance of a same-file ``nn.Module`` class
    with parameters, that no optimizer owns, nothing freezes or wraps, and the file syncs from
    another network (``q_target.load_state_dict(q.state_dict())``: a target copy, never an
    optimized model). Its call's value reaching the function's backward is reported as in a
    method."""
    node = unit.node
    words = _words(unit, ctx)
    if "backward" not in words or A.is_no_grad_function(node, ctx):
        return []
    summary = ctx.summary
    opaque, _bare, any_opt = query(summary, _file_ownership)
    if opaque or not any_opt:
        return []
    params = tuple(a.arg for a in list(node.args.posonlyargs) + list(node.args.args))
    if not params:
        return []
    from gradguard.analysis.facts import agreed_call_arguments

    text: "Optional[str]" = None
    nets: "Dict[str, ast.Call]" = {}
    for pname, (kind, arg) in query(summary, agreed_call_arguments, node.name, params):
        if kind != "n" or not isinstance(arg, str) or "." in arg or pname not in words:
            continue
        if summary.get(OWNED_BARE + arg) or _left_alone(summary, arg):
            continue
        raw = summary.get("var:" + arg)
        fact = summary.get(CLASS + raw) if isinstance(raw, str) else None
        if not (isinstance(fact, tuple) and fact[0] and fact[1] and not fact[2]):
            continue
        if text is None:
            text = "\n".join(ctx.index.lines)
        if f"{arg}.load_state_dict(" not in text:
            continue
        nets[pname] = node  # (the networks' constructor calls are not read here)
    if not nets:
        return []
    taint = _Taint(nets, ctx, bare=True)
    taint.block(unit.body, False)
    out: "List[Finding]" = []
    for net, calls in sorted(taint.calls.items()):
        if net in taint.dirty_inputs:
            continue
        bw = next((b for b, nets_in in taint.backwards if net in nets_in), None)
        if bw is None:
            continue
        out.extend(_unowned_finding(rule, net, call, bw, ctx, "") for call in calls)
    return out


def _unowned_module_level(rule, unit, ctx) -> "List[Finding]":
    """The first shape in a script's own code: a module made once at module level (a torch
    layer or a same-file ``nn.Module`` class with parameters, no optimizer of its own), that no
    optimizer owns, nothing freezes, wraps or loads weights into, called with graph recording on
    in a loop whose ``backward()`` also runs through a module some optimizer owns (a
    ``.parameters()`` of a bare name). Called on such a module's output (openai-transformer-lm's
    ``clf_head(model(x))``), it is a layer left out of the optimizer: reported at the optimizer,
    with a fix that adds its parameters. Called on the data (FedAgg's ``teacher(x)``), it is a
    network meant to stay as it is: reported at the call, with ``.detach()``."""
    words = _words(unit, ctx)
    if "backward" not in words or "step" not in words or "parameters" not in words:
        return []
    summary = ctx.summary
    opaque, bare, any_opt = query(summary, _file_ownership)
    if opaque or not bare:
        return []
    made: "Dict[str, List[ast.AST]]" = {}
    for n in A.unit_nodes(unit):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for name in A.target_names(t):
                    made.setdefault(name, []).append(n)
    unowned: "Dict[str, ast.Call]" = {}
    owned: "Dict[str, ast.Call]" = {}
    text: "Optional[str]" = None
    for s in unit.body:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            continue
        name = s.targets[0].id
        if len(made.get(name, ())) != 1 or name not in words or not _module_with_parameters(s.value, ctx):
            continue
        if summary.get(OWNED_BARE + name):
            owned[name] = s.value  # type: ignore[assignment]
            continue
        if _left_alone(summary, name) or summary.get(STEPPED + name):
            continue
        if text is None:
            text = "\n".join(ctx.index.lines)
        if f"{name}.load_state_dict(" in text or f"{name}.requires_grad" in text or f"{name}.eval()" in text:
            continue  # weights loaded, frozen, or switched to evaluation: a network used as it is
        unowned[name] = s.value  # type: ignore[assignment]
    if not unowned or not owned:
        return []
    taint = _Taint({**unowned, **owned}, ctx, bare=True)
    taint.block(unit.body, False)
    calls = {k: list(v) for k, v in taint.calls.items()}
    loops = [s for s in A.iter_statements(unit.body) if isinstance(s, A.LOOPS)]
    out: "List[Finding]" = []
    for net in sorted(unowned):
        bw = next((b for b, nets_in in taint.backwards if net in nets_in and nets_in & set(owned)), None)
        if bw is None or net not in calls:
            continue
        # (in the loop that back-propagates: a graph built before it is GG102's stale graph)
        looped = [c for c in calls[net] if any(A.within(c, lp) and A.within(bw, lp) for lp in loops)]
        if not looped:
            continue
        feeding = set()
        for call in looped:
            for a in list(call.args) + [k.value for k in call.keywords]:
                feeding |= taint.of(a, False) & set(owned)
        if feeding:
            # a head trained against labels (``criterion(head(model(x)), y)``), not a critic or a
            # reward model whose output the loss maximises (adding it to the optimizer would be wrong)
            if _supervised(net, taint, unit, ctx) or _learned_loss(net, unowned[net], looped, taint):
                f = _left_out_finding(rule, net, sorted(feeding)[0], looped[0], bw, unit, ctx)
                if f is not None:
                    out.append(f)
        elif _KEPT_AS_IT_IS.search(net):
            out.extend(_unowned_finding(rule, net, call, bw, ctx, "") for call in looped)
    return out


# networks meant to stay as they are (a distillation teacher, a target or averaged copy)
_KEPT_AS_IT_IS = re.compile(r"teacher|target|ema|momentum|frozen|pretrain|reference|(^|_)ref(_|$)|(^|_)old(_|$)",
                            re.IGNORECASE)
_LOSS_FUNCTIONS = frozenset({"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                             "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"})


def _raw(node: ast.AST, ctx) -> str:
    """The node's source text as written (over several lines too)."""
    r = ctx.range(node)
    lines = [ctx.index.line(k) for k in range(r.start.line, r.end.line + 1)]
    lines[-1] = lines[-1][:r.end.character]
    lines[0] = lines[0][r.start.character:]
    return "\n".join(lines)


def _supervised(net: str, taint: "_Taint", unit, ctx) -> bool:
    """Does a loss of the unit compare something computed by ``net`` (its first argument)
    with a target no network computed (its second)?"""
    for n in A.unit_nodes(unit):
        if not (isinstance(n, ast.Call) and len(n.args) >= 2):
            continue
        q = A.qualify(n.func, ctx) or ""
        name = A.dotted(n.func) or ""
        raw = ctx.summary.get("var:" + name) if "." not in name else None
        if not (q.rsplit(".", 1)[-1] in _LOSS_FUNCTIONS and q.startswith("torch.nn.functional.")) and not (
                isinstance(raw, str) and raw.endswith("Loss")):
            continue
        if net in taint.of(n.args[0], False) and not (taint.of(n.args[1], False) - {"*"}):
            return True
    return False


def _learned_loss(net: str, made: ast.AST, calls: "List[ast.Call]", taint: "_Taint") -> bool:
    """Is ``net`` a loss with weights of its own (a same-file ``CenterLoss(...)``, whose class
    name ends with ``Loss``) that compares the model's output (its first argument) with a
    target no network computed (its second): pytorch-center-loss's ``criterion_cent(features,
    labels)``, whose centers get gradients from the summed loss."""
    if not (isinstance(made, ast.Call) and isinstance(made.func, ast.Name) and made.func.id.endswith("Loss")):
        return False
    return any(len(c.args) >= 2 and taint.of(c.args[0], False) - {"*"} and not (taint.of(c.args[1], False) - {"*"})
               for c in calls)


def _module_with_parameters(v: ast.AST, ctx) -> bool:
    """A torch layer with parameters, or a same-file ``nn.Module`` class with parameters and no
    optimizer of its own."""
    if layer_with_parameters(v, ctx):
        return True
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
        fact = ctx.summary.get(CLASS + v.func.id)
        return isinstance(fact, tuple) and bool(fact[0]) and bool(fact[1]) and not fact[2] and not fact[3]
    return False


def _left_out_finding(rule, net: str, base: str, call: ast.Call, bw: ast.Call, unit, ctx) -> "Optional[Finding]":
    """``net`` runs on ``base``'s output and is left out of the optimizer built from
    ``base.parameters()`` (the only optimizer of the unit's statements that owns ``base``)."""
    built = []
    for s in A.iter_statements(unit.body):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and is_optimizer_call(s.value, ctx):
            args = list(s.value.args[:1]) + [k.value for k in s.value.keywords if k.arg == "params"]  # type: ignore[attr-defined]
            if any(isinstance(n, ast.Name) and n.id == base for a in args for n in A.iter_nodes(a)):
                built.append((s, args))
    if len(built) != 1:
        return None
    stmt, args = built[0]
    opt = A.dotted(stmt.targets[0]) or "optimizer"
    related = (Related(ctx.range(call), M.called_on_output(net, base)), Related(ctx.line_range(bw), M.backward_here(net, "")))
    fixes: "Tuple[Fix, ...]" = ()
    arg = args[0] if len(args) == 1 else None
    if (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "parameters"
            and not arg.args and not arg.keywords and A.dotted(arg.func.value) == base):
        edit = TextEdit(ctx.range(arg), f"list({base}.parameters()) + list({net}.parameters())")
        fixes = (Fix(M.fix_add_parameters(net, opt), (edit,), preferred=True),)
    return Finding(rule.code, ctx.line_range(stmt), M.left_out_of_optimizer(net, base, opt, bw.lineno),
                   rule.default_severity, related, fixes, {"module": net, "optimizer": opt, "shape": "left-out"})


def _words(unit, ctx) -> "frozenset":
    from gradguard.analysis.context import unit_words

    return unit_words(unit, ctx.index.lines)


def _unowned_finding(rule, net: str, call: ast.Call, bw: ast.Call, ctx, prefix: str = "self.") -> Finding:
    text = _src(call, ctx)
    related = (Related(ctx.line_range(bw), M.backward_here(net, prefix)),)
    edit = TextEdit(ctx.range(call), f"{text}.detach()")
    fixes = (Fix(M.fix_detach(text), (edit,), preferred=True),)
    return Finding(rule.code, ctx.range(call), M.unowned(net, bw.lineno, prefix), rule.default_severity, related,
                   fixes, {"module": prefix + net, "shape": "unowned"})


def _src(node: ast.AST, ctx) -> str:
    r = ctx.range(node)
    if r.start.line != r.end.line:
        return ast.unparse(node)
    return ctx.index.line(r.start.line)[r.start.character:r.end.character]


# ---------------------------------------------------------------------------
# shape 2: layers replaced after the optimizer was built
# ---------------------------------------------------------------------------
def _optimizer_of(s: ast.stmt, ctx) -> "Optional[Tuple[str, str]]":
    """``opt = optim.X(M.parameters(), ...)`` -> (``opt``, ``M``)."""
    if not isinstance(s, ast.Assign) or len(s.targets) != 1:
        return None
    name = A.dotted(s.targets[0])
    call = s.value
    if name is None or not isinstance(call, ast.Call) or not is_optimizer_call(call, ctx) or not call.args:
        return None
    a = call.args[0]
    if (isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "parameters"
            and not a.args and not a.keywords):
        owner = A.dotted(a.func.value)
        if owner is not None:
            return name, owner
    return None


def _replacement(s: ast.stmt, owner: str, ctx, made: "Set[str]") -> "Optional[str]":
    """Does the statement put a new layer with parameters into ``owner``? The attribute
    (or the function) that does it."""
    if isinstance(s, ast.Assign):
        for tgt, val in A.assigned_pairs(s):
            if A.dotted(tgt) == owner and _new_module(val, ctx):
                return owner  # ``net = Net2()``: a new model under the old name
            d = A.dotted(tgt) if isinstance(tgt, ast.Attribute) else None
            if d is not None and d.startswith(owner + ".") and (
                    layer_with_parameters(val, ctx) or (isinstance(val, ast.Name) and val.id in made)):
                return d
        return None
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        call = s.value
        if isinstance(call.func, ast.Name):
            rep = ctx.summary.get(REPLACES + call.func.id)
            if isinstance(rep, tuple):
                for i in rep:
                    if i < len(call.args) and A.dotted(call.args[i]) == owner:
                        return call.func.id + "(...)"
    return None


def _new_module(v: ast.AST, ctx) -> bool:
    """A call that builds a module with parameters: a torch layer, or a same-file
    ``nn.Module`` class with parameters."""
    if layer_with_parameters(v, ctx):
        return True
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
        fact = ctx.summary.get(CLASS + v.func.id)
        return isinstance(fact, tuple) and bool(fact[0]) and bool(fact[1])
    return False


def _handed_on(nodes, name: str) -> bool:
    """Is ``name`` used otherwise than as the receiver of a method call (``opt.step()``)?
    A scheduler built on it, a list holding it: the old optimizer lives on there."""
    receivers = {id(n.func.value) for n in nodes
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    return any(A.dotted(n) == name and id(n) not in receivers for n in nodes
               if isinstance(n, (ast.Name, ast.Attribute)))


def _replaced_after_optimizer(rule, unit, ctx) -> "List[Finding]":
    words = _words(unit, ctx)
    if "parameters" not in words or "step" not in words:
        return []
    out: "List[Finding]" = []
    for block in _blocks(unit.body):
        made: "Set[str]" = set()
        for i, s in enumerate(block):
            if isinstance(s, ast.Assign) and layer_with_parameters(s.value, ctx):
                for t in s.targets:
                    made.update(A.target_names(t))
            got = _optimizer_of(s, ctx)
            if got is None:
                continue
            opt, owner = got
            for j in range(i + 1, len(block)):
                r = block[j]
                again = _optimizer_of(r, ctx)
                if again is not None and again[0] == opt:
                    break  # built again
                what = _replacement(r, owner, ctx, made)
                if what is None:
                    continue
                later = [n for t in block[j + 1:] for n in A.iter_nodes(t)]
                if not _steps_after(later, opt, owner, ctx) and not _steps_in_a_call(later, opt, owner, unit, ctx):
                    break
                out.append(_replaced_finding(rule, block, i, j, opt, owner, what, ctx))
                break
    return out


def _steps_after(nodes, opt: str, owner: str, ctx) -> bool:
    """A later ``opt.step()`` and backward, nothing re-building ``opt``, adding a group
    to it, or freezing ``owner``'s layers."""
    step = backward = False
    for n in nodes:
        if isinstance(n, ast.Assign) and any(A.dotted(t) == opt for t in n.targets):
            return False
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute):
            recv = A.dotted(f.value)
            if recv == opt and f.attr == "add_param_group":
                return False
            if f.attr == "requires_grad_" and recv is not None and (recv == owner or recv.startswith(owner + ".")):
                return False
            if recv == opt and f.attr == "step":
                step = True
        if A.is_backward_call(n, ctx):
            backward = True
    return step and backward


def _steps_in_a_call(nodes, opt: str, owner: str, unit, ctx) -> bool:
    """(module code) A later call of a module-level function that back-propagates and steps
    ``opt`` and calls ``owner``, both read as globals (``gg2:steps:``): char-rnn's
    ``train(category, line)`` run by the loop after ``rnn`` was made again."""
    if unit.kind != "module" or "." in opt or "." in owner:
        return False
    for n in nodes:
        if isinstance(n, ast.Assign) and any(opt in A.target_names(t) for t in n.targets):
            return False  # built again first
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_param_group":
            return False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            got = ctx.summary.get(STEPS + n.func.id)
            if isinstance(got, tuple) and opt in got[0] and owner in got[1]:
                return True
    return False


def _blocks(body: "List[ast.stmt]") -> "List[List[ast.stmt]]":
    out = [body]
    for s in A.iter_statements(body):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        out.extend(A.child_blocks(s))
    return out


def _replaced_finding(rule, block, i: int, j: int, opt: str, owner: str, what: str, ctx) -> Finding:
    opt_stmt, rep = block[i], block[j]
    msg = M.replaced(what, opt, owner, opt_stmt.lineno)
    related = (Related(ctx.line_range(opt_stmt), M.optimizer_built_here(opt)),)
    fixes: "Tuple[Fix, ...]" = ()
    between = [n for t in block[i + 1:j] for n in A.iter_nodes(t)]
    loaded = {A.dotted(n) for n in A.iter_nodes(opt_stmt.value) if isinstance(n, (ast.Name, ast.Attribute))}
    assigned = {d for t in block[i + 1:j] if isinstance(t, ast.Assign) for tg in t.targets
                for d in A.target_names(tg)}
    if not _handed_on(between, opt) and not (loaded & assigned):
        first, last = opt_stmt.lineno, opt_stmt.end_lineno or opt_stmt.lineno
        text = "\n".join(ctx.index.line(k - 1) for k in range(first, last + 1))
        end_line = (rep.end_lineno or rep.lineno)
        pos = Position(end_line, 0)
        if end_line < len(ctx.index.lines):
            fixes = (Fix(M.fix_rebuild(opt), (TextEdit(Range(pos, pos), text + "\n"),), preferred=True),)
    return Finding(rule.code, ctx.line_range(rep), msg, rule.default_severity, related, fixes,
                   {"module": owner, "optimizer": opt, "shape": "replaced"})


# ---------------------------------------------------------------------------
# shape 3: a layer of the model left out of every parameter group
# ---------------------------------------------------------------------------
def _instances(unit) -> "Dict[str, str]":
    """``model = Net(...)`` bound once in the unit: name -> class name."""
    seen: "Dict[str, List[str]]" = {}
    for n in A.unit_nodes(unit):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for name in A.target_names(t):
                    v = n.value
                    cls = v.func.id if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) else ""
                    seen.setdefault(name, []).append(cls)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0]}


def _fills(unit) -> "Dict[str, List[ast.AST]]":
    """What fills each name in the unit (the facts' own table, over the unit's nodes)."""
    return fills_of(A.unit_nodes(unit))


def _covered(arg: ast.AST, instances: "Dict[str, str]", fills, ctx) -> "Optional[Tuple[str, str, Set[str]]]":
    """(instance, its class, the attributes whose parameters the optimizer's argument takes),
    when every parameter it takes comes from attributes of one instance of a same-file class.
    ``fills()``: the unit's :func:`_fills` (made once for all its optimizers)."""
    if (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and isinstance(arg.func.value, ast.Name)
            and arg.func.value.id in instances):
        inst = arg.func.value.id
        got = ctx.summary.get(GROUPS + instances[inst] + "." + arg.func.attr)
        if isinstance(got, tuple):
            return inst, instances[inst], set(got)
        return None
    owners, opaque = parameter_owners(arg, fills())
    parts = [o.split(".") for o in owners]
    if opaque or not parts or any(len(p) != 2 for p in parts) or len({p[0] for p in parts}) != 1:
        return None
    inst = parts[0][0]
    if inst not in instances:
        return None
    return inst, instances[inst], {p[1] for p in parts}


def _left_out_of_groups(rule, unit, ctx) -> "List[Finding]":
    words = _words(unit, ctx)
    if "step" not in words or "backward" not in words:
        return []
    instances = _instances(unit)
    if not instances:
        return []
    nodes = A.unit_nodes(unit)
    table: "List[Dict[str, List[ast.AST]]]" = []

    def fills() -> "Dict[str, List[ast.AST]]":
        if not table:
            table.append(_fills(unit))
        return table[0]

    out: "List[Finding]" = []
    built = [s for s in A.iter_statements(unit.body) if isinstance(s, ast.Assign) and len(s.targets) == 1
             and isinstance(s.value, ast.Call) and is_optimizer_call(s.value, ctx)]
    for s in built:
        call = s.value
        opt = A.dotted(s.targets[0])
        arg = _params_argument(call, nodes) if isinstance(call, ast.Call) else None
        if opt is None or arg is None:
            continue
        got = _covered(arg, instances, fills, ctx)
        if got is None:
            continue
        inst, cls, covered = got
        if len(covered) < 2 or any(o is not s and inst in _words_of(o.value) for o in built):
            # one part picked on purpose (a GAN's generator optimizer), or several optimizers
            # sharing the model: only groups meant to cover the whole model are read
            continue
        subs = ctx.summary.get(SUBMODULES + cls)
        if not isinstance(subs, tuple):
            continue
        left = [a for a in subs if a not in covered and not _left_alone(ctx.summary, a)]
        if not left or not _steps_in(nodes, opt):
            continue
        listed = _weight_list(arg, nodes)
        if listed is not None:
            out.append(_left_out_of_list(rule, s, opt, inst, left, listed, ctx))
            continue
        out.append(Finding(rule.code, ctx.line_range(s), M.left_out([f"{inst}.{a}" for a in left], opt),
                           rule.default_severity, (), (), {"module": inst, "optimizer": opt, "shape": "groups"}))
    return out


def _weight_list(arg: ast.AST, nodes) -> "Optional[Tuple[Optional[ast.stmt], ast.List]]":
    """The optimizer's argument as a list of weights written out (``[snn.w1, snn.w2]``), or a
    name bound once to one: (the binding statement, or None when written in the call; the list)."""
    stmt = None
    if isinstance(arg, ast.Name):
        bound = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                 and arg.id in A.target_names(n.targets[0] if isinstance(n, ast.Assign) else n.target)]
        if len(bound) != 1 or not isinstance(bound[0], ast.Assign) or len(bound[0].targets) != 1:
            return None
        stmt, arg = bound[0], bound[0].value
    if not isinstance(arg, ast.List) or not arg.elts:
        return None
    if not all(isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) for e in arg.elts):
        return None
    return stmt, arg


def _left_out_of_list(rule, s: ast.stmt, opt: str, inst: str, left: "List[str]",
                      listed: "Tuple[Optional[ast.stmt], ast.List]", ctx) -> Finding:
    """Weights of ``inst`` its ``forward`` uses, missing from the list the optimizer is given:
    reported where the list is written, with a fix that adds them to it."""
    stmt, lst = listed
    names = [f"{inst}.{a}" for a in left]
    at = stmt if stmt is not None else s
    end = ctx.range(lst).end
    pos = Position(end.line, end.character - 1)
    edit = TextEdit(Range(pos, pos), "".join(f", {n}" for n in names))
    fixes = (Fix(M.fix_add_to_list(names), (edit,), preferred=True),)
    related = (Related(ctx.line_range(s), M.optimizer_built_here(opt)),) if stmt is not None else ()
    return Finding(rule.code, ctx.line_range(at), M.left_out_of_list(names, opt), rule.default_severity, related,
                   fixes, {"module": inst, "optimizer": opt, "shape": "groups"})


def _params_argument(call: ast.Call, nodes) -> "Optional[ast.AST]":
    """What an optimizer call is given as its parameters: its first argument, ``params=``,
    or the ``params`` of a dict unpacked into it (``Adam(**param_options)`` after
    ``param_options = dict(params=[...], lr=...)``, bound once in the unit)."""
    if call.args:
        return None if isinstance(call.args[0], ast.Starred) else call.args[0]
    for k in call.keywords:
        if k.arg == "params":
            return k.value
    spread = [k.value.id for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)]
    if len(spread) != 1:
        return None
    bound = [n.value for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             and spread[0] in A.target_names(n.targets[0] if isinstance(n, ast.Assign) else n.target)]
    if len(bound) != 1:
        return None
    v = bound[0]
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict" and not v.args:
        return next((k.value for k in v.keywords if k.arg == "params"), None)
    if isinstance(v, ast.Dict):
        return next((val for key, val in zip(v.keys, v.values)
                     if isinstance(key, ast.Constant) and key.value == "params"), None)
    return None


def _words_of(e: ast.AST) -> "Set[str]":
    return {n.id for n in A.walk_all(e) if isinstance(n, ast.Name)}


def _steps_in(nodes, opt: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"
               and A.dotted(n.func.value) == opt for n in nodes)


# ---------------------------------------------------------------------------
# shape 4: layers kept in a plain list (or dict) attribute of the module
# ---------------------------------------------------------------------------
def _optimized_class(summary, cls: str, depth: int = 0) -> bool:
    """Does an optimizer of the file own an instance of ``cls``: ``self.parameters()`` in
    it, or ``X.parameters()`` of an ``X`` bound to ``cls(...)`` (or to an object of a class
    that holds one as ``self.X``, two levels up) -- a summary query."""
    if summary.get(OWNED_CLASS + cls):
        return True
    prefix = MADE + cls + ":"
    for key in summary:
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        where = summary.get(key)
        if where and summary.get(OWNED_CLASS + where):
            return True
        if summary.get(OWNED_BARE + name) or summary.get(OWNED + name):
            return True
        if where and depth < 2 and _optimized_class(summary, where, depth + 1):
            return True
    return False


def _plain_item(v: ast.AST, ctx) -> "Optional[str]":
    """What a plain container's item is: ``"module"`` (a torch layer with parameters, or a
    same-file module class that has some), ``"parameter"`` (a trained ``nn.Parameter``)."""
    if not isinstance(v, ast.Call):
        return None
    last = (A.dotted(v.func) or "").rsplit(".", 1)[-1]
    if last == "Parameter":
        if any(k.arg == "requires_grad" for k in v.keywords) or len(v.args) > 1:
            return None
        return "parameter" if layer_with_parameters(v, ctx) else None
    return "module" if _new_module(v, ctx) else None


def _plain_kind(value: ast.AST, ctx) -> "Optional[Tuple[str, str]]":
    """(``"list"``/``"dict"``, the items' kind) of ``[nn.Linear(..), ...]``,
    ``[nn.Linear(..) for _ in ...]``, ``{"a": nn.Linear(..)}``, ``{k: nn.Linear(..) for ...}``
    (every item of one kind); ``("list", "")`` / ``("dict", "")`` for an empty one."""
    if isinstance(value, ast.List):
        items: "List[ast.AST]" = list(value.elts)
        shape = "list"
    elif isinstance(value, ast.ListComp):
        items, shape = [value.elt], "list"
    elif isinstance(value, ast.Dict):
        if any(k is None for k in value.keys):
            return None
        items, shape = list(value.values), "dict"
    elif isinstance(value, ast.DictComp):
        items, shape = [value.value], "dict"
    else:
        return None
    kinds = {_plain_item(e, ctx) for e in items}
    if not items:
        return shape, ""
    if len(kinds) != 1 or None in kinds:
        return None
    return shape, kinds.pop() or ""


_REGISTERS = frozenset({"add_module", "register_module", "register_parameter", "register_buffer", "setattr"})


def _plain_containers(rule, unit, ctx) -> "List[Finding]":
    """``self.X = [nn.Conv2d(...), ...]`` (or ``self.X = []`` filled by ``self.X.append(layer)``
    in ``__init__``) in an ``nn.Module`` whose ``forward`` reads ``self.X``: ``nn.Module``
    registers no layer held in a plain list or dict, so ``model.parameters()`` leaves them
    out, and the optimizer built from it never updates them (nor does ``.to(device)`` move
    them). Reported at the binding when an optimizer of the file is built from an instance's
    ``.parameters()``; fixed by ``nn.ModuleList`` / ``nn.ModuleDict`` / ``nn.ParameterList``."""
    cls = unit.class_node
    if not _is_module_class(cls):
        return []
    init = unit.node
    candidates: "Dict[str, Tuple[ast.Assign, str, str]]" = {}
    for s in A.iter_statements(init.body):
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Attribute)
                and isinstance(s.targets[0].value, ast.Name) and s.targets[0].value.id == "self"):
            got = _plain_kind(s.value, ctx)
            if got is not None and not (isinstance(s.value, ast.List) and len(s.value.elts) == 1):
                # (``self.vgg = [VGG()]``: a network hidden from ``.parameters()`` and ``state_dict()``
                # on purpose, a perceptual loss's)
                candidates[s.targets[0].attr] = (s, got[0], got[1])
    if not candidates:
        return []
    methods = {m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    fwd = methods.get("forward")
    if fwd is None:
        return []
    read = {n.attr for n in A.walk_all(fwd)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
    candidates = {a: c for a, c in candidates.items() if a in read}
    if not candidates:
        return []
    for n in A.walk_all(cls):
        if isinstance(n, (ast.Attribute, ast.Name)) and (n.attr if isinstance(n, ast.Attribute) else n.id) in (
                "requires_grad", "requires_grad_", "no_grad", "inference_mode"):
            return []  # the class freezes something, or runs some of it without a graph: maybe these layers
    bound: "Dict[str, int]" = {}
    nested: "Dict[str, List[Union[ast.List, ast.Tuple]]]" = {}
    for n in A.walk_all(cls):
        if isinstance(n, ast.Call):
            name = _callee_name(n)
            if name in _REGISTERS:
                return []  # the class registers something itself: maybe these layers
            f = n.func
            if isinstance(f, ast.Attribute) and A.dotted(f.value) in {"self." + a for a in candidates}:
                attr = f.value.attr  # type: ignore[attr-defined]
                if f.attr == "append" and candidates[attr][2] != "dict" and A.within(n, init) and len(n.args) == 1:
                    kind = _plain_item(n.args[0], ctx) or _appended_item(n.args[0], init, cls.name, ctx)
                    if isinstance(n.args[0], (ast.List, ast.Tuple)) and kind is not None:
                        # (``nn.ModuleList().append([...])`` fails: the pair is wrapped too)
                        nested.setdefault(attr, []).append(n.args[0])
                    if kind is None or candidates[attr][2] not in ("", kind):
                        bound[attr] = 99  # something else goes into it
                    else:
                        candidates[attr] = (candidates[attr][0], candidates[attr][1], kind)
                    continue
                if f.attr in ("append", "extend", "insert", "update", "__setitem__"):
                    bound[attr] = 99
            for arg in list(n.args) + [k.value for k in n.keywords]:
                d = A.dotted(arg.value if isinstance(arg, ast.Starred) else arg)
                if d is not None and d.startswith("self.") and d[5:] in candidates:
                    bound[d[5:]] = 99  # handed to a call (nn.ModuleList(self.X), nn.Sequential(*self.X))
        elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None:
                continue  # (``self._layers = None`` before ``self._layers = []``: not a second binding)
            for t in targets:
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    base = e.value if isinstance(e, ast.Subscript) else e
                    d = A.dotted(base)
                    if d is not None and d.startswith("self.") and d[5:] in candidates:
                        bound[d[5:]] = bound.get(d[5:], 0) + (1 if base is e else 99)
    summary = ctx.summary
    live = [a for a, c in candidates.items() if bound.get(a) == 1 and c[2] and not _left_alone(summary, a)]
    if not live or summary.get(OWNED_OPAQUE) or not query(summary, _optimized_class, cls.name):
        return []
    out = []
    prefix = _nn_prefix(cls)
    for a in sorted(live, key=lambda x: candidates[x][0].lineno):
        s, shape, kind = candidates[a]
        container = {("list", "module"): "ModuleList", ("dict", "module"): "ModuleDict",
                     ("list", "parameter"): "ParameterList", ("dict", "parameter"): "ParameterDict"}[(shape, kind)]
        fixes: "Tuple[Fix, ...]" = ()
        v = s.value
        if prefix is not None and all(_torch_module(x, ctx) for e in nested.get(a, ()) for x in e.elts) and (
                shape == "list" or (isinstance(v, ast.Dict) and all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in v.keys))):
            r = ctx.range(v)
            empty = isinstance(v, (ast.List, ast.Dict)) and not (v.elts if isinstance(v, ast.List) else v.keys)
            text = f"{prefix}{container}()" if empty else f"{prefix}{container}({_raw(v, ctx)})"
            edits = [TextEdit(r, text)] + [TextEdit(ctx.range(e), f"{prefix}ModuleList({_raw(e, ctx)})")
                                           for e in nested.get(a, ())]
            fixes = (Fix(M.fix_register(prefix + container), tuple(edits), preferred=True),)
        out.append(Finding(rule.code, ctx.line_range(s), M.plain_container(a, shape, kind, prefix or "nn.", container),
                           rule.default_severity, (), fixes, {"module": "self." + a, "shape": "plain-" + shape}))
    return out


def _torch_module(v: ast.AST, ctx) -> bool:
    """A construction an ``nn.ModuleList`` can hold: a torch layer (``nn.Tanh()``) or a module
    with parameters (a same-file class's); not a call that may return a function."""
    if not isinstance(v, ast.Call):
        return False
    q = A.qualify(v.func, ctx) or ""
    return (q.startswith("torch.nn.") and not q.startswith("torch.nn.functional.")
            and q.rsplit(".", 1)[-1][:1].isupper()) or _plain_item(v, ctx) == "module"


def _appended_item(v: ast.AST, init: ast.AST, cls: str, ctx) -> "Optional[str]":
    """``"module"`` for an item appended to a plain container that is a layer with parameters
    by its construction or its caller's: a list or tuple of calls, one of them such a layer
    (``[nn.Linear(h, h), nn.ReLU()]``, pytorch#715's pairs), or the loop variable of ``for
    layer in layers`` over a parameter of ``__init__`` that a construction of the class in
    the file fills with a list of layers (``Merge([nn.Linear(8, 4), ...])``, texar#72)."""
    if isinstance(v, (ast.List, ast.Tuple)):
        if not v.elts or not all(isinstance(e, ast.Call) for e in v.elts):
            return None
        kinds = [_plain_item(e, ctx) for e in v.elts]
        return "module" if "module" in kinds and "parameter" not in kinds else None
    if not isinstance(v, ast.Name) or not isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = [a.arg for a in init.args.args]
    for loop in A.walk_all(init):
        if (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and loop.target.id == v.id
                and isinstance(loop.iter, ast.Name) and loop.iter.id in params[1:]):
            p = loop.iter.id
            slot = str(params.index(p) - 1)
            if ctx.summary.get(FED + cls + ":" + slot) or ctx.summary.get(FED + cls + ":" + p):
                return "module"
    return None


# ---------------------------------------------------------------------------
# a parameter group filled and never added to the optimizer's list
# ---------------------------------------------------------------------------
def _params_of(n: ast.AST, group: str) -> bool:
    """``group["params"]``."""
    return (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == group
            and isinstance(n.slice, ast.Constant) and n.slice.value == "params")


def _dropped_group(rule, unit, ctx) -> "List[Finding]":
    """HVPNeT#5: ``params = {"lr": ...}``, ``params["params"] = []`` filled by
    ``params["params"].append(p)`` and then never read -- not appended to the list of
    groups, rebound to the next group or left at the function's end -- while the function
    builds an optimizer from a list of groups that other groups went into
    (``parameters.append(params)``): those parameters are in no group. Reported at the
    optimizer; statements of the function's own body only (no branch)."""
    body = unit.node.body
    opts = [s for s in body if isinstance(s, (ast.Assign, ast.Expr)) and isinstance(s.value, ast.Call)
            and is_optimizer_call(s.value, ctx) and s.value.args and isinstance(s.value.args[0], ast.Name)]
    if len(opts) != 1:
        return []
    opt_stmt = opts[0]
    groups = opt_stmt.value.args[0].id  # type: ignore[attr-defined]
    dropped: "List[Tuple[ast.stmt, str]]" = []
    handed = False  # some group went into the optimizer's list
    group: "Optional[str]" = None  # the name of the group being filled
    made: "Optional[ast.stmt]" = None
    last: "Optional[ast.stmt]" = None  # the last group made before the optimizer
    filled = used = False
    end = ast.Pass()  # (the end of the body: the last group is closed there)
    for s in list(body) + [end]:
        if s is end or (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                        and isinstance(s.value, ast.Dict)):
            if group is not None and made is not None and filled and not used and made.lineno < opt_stmt.lineno:
                dropped.append((made, group))
            if s is end:
                break
            group, made, filled, used = s.targets[0].id, s, False, False  # type: ignore[union-attr]
            if s.lineno < opt_stmt.lineno:
                last = s
            continue
        if group is None:
            continue
        nodes = list(A.walk_all(s))
        inside = {id(n.value) for n in nodes if isinstance(n, ast.Subscript) and _params_of(n, group)}
        for n in nodes:
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend")
                    and _params_of(n.func.value, group)):
                filled = True
            elif isinstance(n, ast.AugAssign) and _params_of(n.target, group):
                filled = True
            elif isinstance(n, ast.Name) and n.id == group and id(n) not in inside:
                used = True
                if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "append"
                       and A.dotted(c.func.value) == groups for c in nodes):
                    handed = True
    if not handed:
        return []
    out = []
    for m, name in dropped:
        fixes: "Tuple[Fix, ...]" = ()
        if m is last:  # (the name still holds it at the optimizer: append it there)
            at = ctx.range(opt_stmt).start
            text = f"{groups}.append({name})\n" + " " * at.character
            fixes = (Fix(M.fix_append_group(name, groups), (TextEdit(Range(at, at), text),), preferred=True),)
        out.append(Finding(rule.code, ctx.line_range(opt_stmt), M.dropped_group(groups, m.lineno), rule.default_severity,
                           (Related(ctx.line_range(m), M.group_made_here()),), fixes, {"shape": "dropped-group"}))
    return out


# ---------------------------------------------------------------------------
# shape 5: a deep copy of the model handed on with the original's optimizer
# ---------------------------------------------------------------------------
def _copy_given_the_optimizer(rule, unit, ctx) -> "List[Finding]":
    """``model = copy.deepcopy(self.model)`` then ``type(self)(model, ..., self._optimizer)``
    in a method of a class that steps ``self._optimizer`` (ART#1580's
    ``clone_for_refitting``): the new object trains the copy with the optimizer built from
    the original's parameters, which holds none of the copy's, so the copy never changes.
    Silent when the method builds an optimizer or reads the copy's ``.parameters()``."""
    cls = unit.class_node
    body = list(A.iter_statements(unit.node.body))
    copies: "Dict[str, ast.stmt]" = {}
    for s in body:
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and isinstance(s.value, ast.Call) and (A.dotted(s.value.func) or "").endswith("deepcopy")
                and len(s.value.args) == 1):
            copies[s.targets[0].id] = s
    if not copies:
        return []
    calls = [n for n in A.unit_nodes(unit) if isinstance(n, ast.Call)]
    for n in calls:
        f = n.func
        if is_optimizer_call(n, ctx) or (isinstance(f, ast.Attribute) and f.attr in ("parameters", "named_parameters")
                                         and A.dotted(f.value) in copies):
            return []  # an optimizer of its own for the copy (or its parameters read)
    stepped = {A.dotted(n.func.value) for n in A.walk_all(cls) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and n.func.attr == "step"}
    out = []
    for n in calls:
        f = n.func
        if not ((isinstance(f, ast.Call) and A.dotted(f.func) == "type" and len(f.args) == 1 and A.dotted(f.args[0]) == "self")
                or A.dotted(f) in ("self.__class__", cls.name)):
            continue
        args = list(n.args) + [k.value for k in n.keywords]
        copy = next((a.id for a in args if isinstance(a, ast.Name) and a.id in copies), None)
        opt = next((d for d in map(A.dotted, args) if d is not None and d.startswith("self.") and d.count(".") == 1
                    and "optim" in d.lower() and d in stepped), None)
        if copy is None or opt is None:
            continue
        related = (Related(ctx.line_range(copies[copy]), M.copy_made_here(copy)),)
        out.append(Finding(rule.code, ctx.line_range(n), M.copy_given_the_optimizer(copy, opt), rule.default_severity,
                           related, (), {"module": copy, "optimizer": opt, "shape": "copy-with-optimizer"}))
    return out


def _nn_prefix(cls: ast.ClassDef) -> "Optional[str]":
    """How the class spells ``torch.nn`` in its base (``nn.Module`` -> ``"nn."``), or None."""
    for b in cls.bases:
        d = A.dotted(b) or ""
        if d.endswith(".Module"):
            return d[:-len("Module")]
    return None
