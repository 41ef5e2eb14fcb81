"""GG104 inplace-saved: an in-place edit of a tensor that autograd saved for
backward, before the backward that needs it ("one of the variables needed for
gradient computation has been modified by an inplace operation").

The walk (:mod:`.flow`) follows the unit's tensors by storage and marks the
ones an operation saves (the output of ``relu``/``sigmoid``/``tanh``/
``softmax``..., the input of a layer with weights or of a product); an edit in
place of a marked storage before a backward is reported on the editing
statement, with the saving operation as related information. Layers are known
from the class's ``__init__`` (``self.relu = nn.ReLU(inplace=True)``,
``nn.Sequential(...)``), from the unit's own assignments, and, for a module
class of the same file, from its fact (``gg104:class:``: does its forward
return a saved output). Reported in the methods of an nn.Module class (a model
is meant to be trained) and elsewhere only in a file that back-propagates.

Fixes (:mod:`.fixes`): the out-of-place spelling of the edit, preferred only
where no other name of the edited storage is read afterwards.
"""

from __future__ import annotations

import ast

from gradguard.analysis import ast_util as A
from gradguard.analysis import knowledge as K
from gradguard.analysis.context import unit_text, unit_words
from gradguard.analysis.summary import query
from gradguard.model.findings import Finding, Related, Severity
from gradguard.rules.base import Rule, Trigger
from gradguard.rules.catalog import INPLACE_EDIT_TEXT
from gradguard.rules.gg104_inplace_saved import fixes as X
from gradguard.rules.gg104_inplace_saved import flow as W
from gradguard.rules.gg104_inplace_saved import messages as M
from gradguard.rules.gg104_inplace_saved.facts import (CLASS, CLASS_FACTS, CTOR, EDITS, FN, GLOBAL, MADE, TAKES, buffer_edits,
                                                       class_layers, is_module_class, made_with, MethodShapes)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, List, Tuple


def _user_classes(summary) -> "Tuple[Tuple[str, object, bool], ...]":
    return tuple(sorted((k[len(CLASS):], v, bool(summary.get(TAKES + k[len(CLASS):])))
                        for k, v in summary.items() if k.startswith(CLASS)))


def _editing_callees(summary) -> "Tuple[Tuple[str, tuple], ...]":
    """The functions and module classes that edit in place what they are handed (or what they
    save of it), by name: ``gg104:edits:`` (:func:`.facts.callee_edits`)."""
    return tuple(sorted((k[len(EDITS):], v) for k, v in summary.items() if k.startswith(EDITS)))


def _editing_globals(summary, classes: "Tuple[str, ...]") -> "frozenset":
    """The module-level objects of those classes (``criterion = ResampleLoss()``), by name."""
    return frozenset(k[len(GLOBAL):] for k, v in summary.items()
                     if k.startswith(GLOBAL) and isinstance(v, str) and v.startswith("user:") and v[5:] in classes)


def _saving_functions(summary) -> "Dict[str, W.Saves]":
    """What a call saves, by the name called: ``_Fn.apply`` for a custom autograd.Function
    ``_Fn`` of the file, and the module-level names calling it (``softsplat = _Fn.apply``,
    ``def softsplat(tenIn, tenFlow): ... _Fn.apply(tenIn, tenFlow)``)."""
    facts = {k[len(FN):]: v for k, v in summary.items() if k.startswith(FN)}
    classes = {name: (v[1], v[2], ()) for name, v in facts.items()
               if isinstance(v, tuple) and len(v) == 3 and v[0] == "fn"}
    out: "Dict[str, W.Saves]" = {name + ".apply": v for name, v in classes.items()}
    for name, v in facts.items():
        if not isinstance(v, tuple) or len(v) < 2:
            continue
        if v[0] == "alias" and v[1] in classes:
            out[name] = classes[v[1]]
        elif v[0] == "wrap" and len(v) == 3:
            # the wrapper's parameters handed as a saved argument of some ``apply``
            saved: "set" = set()
            for cls, pos in v[1]:
                fn = classes.get(cls)
                if fn is not None:
                    saved.update(pos[i] for i in fn[0] if i < len(pos) and pos[i] >= 0)
            if saved:
                out[name] = (tuple(sorted(saved)), False, v[2])
    return out


def _constructions(summary, cls: str) -> "Tuple[object, ...]":
    prefix = CTOR + cls + ":"
    return tuple(v for k, v in sorted(summary.items()) if k.startswith(prefix))


def _held_layers(cls: ast.ClassDef, summary, user) -> "Dict[str, W.Layer]":
    """The modules an object of a plain class (not an nn.Module) keeps from its constructor
    (``self.actor = actor`` in ``__init__``), where every module-level construction of the
    class hands the same module-level layer (``policy = DDPGPolicy(actor, ...)`` with
    ``actor = Actor()``)."""
    init = next((d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"), None)
    if init is None or len(init.args.args) < 2:
        return {}
    ctors = query(summary, _constructions, cls.name)
    if not ctors:
        return {}
    me = init.args.args[0].arg
    params = [a.arg for a in init.args.args[1:]]
    out: "Dict[str, W.Layer]" = {}
    for n in A.body_nodes(init):
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        t, v = n.targets[0], n.value
        # ``self.actor = actor``, ``self.actor, self.actor_optim = actor, actor_optim``
        pairs = list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) \
            and len(t.elts) == len(v.elts) else [(t, v)]
        for tt, vv in pairs:
            if not (isinstance(tt, ast.Attribute) and isinstance(tt.value, ast.Name) and tt.value.id == me
                    and isinstance(vv, ast.Name) and vv.id in params):
                continue
            pos = params.index(vv.id)
            names = {args[pos] if pos < len(args) else dict(kws).get(vv.id) for args, kws in ctors}
            if len(names) != 1 or None in names:
                continue
            layer = _global_layer(summary, names.pop(), user)  # type: ignore[arg-type]
            if layer is not None and layer.kind == "user" and layer.out_saved:
                out["self." + tt.attr] = layer
    return out


# (the user classes' layers of the last file asked, with the query's answer they were made
# from: every unit of a file gets the same answer, and the layers are only read)
_LAST_USER: "Tuple[object, Dict[str, W.Layer]]" = ((), {})


def _user_layers(summary) -> "Dict[str, W.Layer]":
    global _LAST_USER
    classes = query(summary, _user_classes)
    last = _LAST_USER
    if last[0] is not classes:
        last = _LAST_USER = (classes, {name: _user_layer(shape, takes) for name, shape, takes in classes})
    return last[1]


def _user_layer(shape, takes: bool) -> W.Layer:
    layer = W.Layer("user", out_saved=(shape or None))
    layer.in_saved = takes
    return layer


def _class_layers(cls: ast.ClassDef, ctx, user: "Dict[str, W.Layer]") -> "Tuple[Dict[str, W.Layer], set]":
    """:func:`class_layers` of the unit's class, made once for all its methods (kept on
    the class with the import table and user layers it was made with): a copy each."""
    made = query(ctx.summary, _made, cls.name)
    kept = cls.__dict__.get("_gg104_layers")
    if kept is None or kept[0] is not ctx.imports or kept[1] is not user or kept[4] != made:
        layers, params = class_layers(cls, lambda e: A.qualify(e, ctx), user, made_with(cls, made))
        kept = cls._gg104_layers = (ctx.imports, user, layers, params, made)  # type: ignore[attr-defined]
    return dict(kept[2]), set(kept[3])


def _made(summary, cls: str) -> "Tuple[tuple, ...]":
    """What each module-level construction of ``cls`` gives it (``gg104:made:``), in line order."""
    prefix = MADE + cls + ":"
    return tuple(v for _, v in sorted(((int(k[len(prefix):]), v) for k, v in summary.items()
                                       if k.startswith(prefix)), key=lambda kv: kv[0]))


def _buffer_edits(cls: ast.ClassDef) -> "Tuple[frozenset, Dict[str, tuple]]":
    """:func:`buffer_edits` of the unit's class, made once for all its methods."""
    kept = cls.__dict__.get("_gg104_buffers")
    if kept is None:
        kept = cls._gg104_buffers = buffer_edits(cls)  # type: ignore[attr-defined]
    return kept


def _own_layers(body, qualify, user) -> "Dict[str, W.Layer]":
    """Layers the unit binds to a plain name (``relu = nn.ReLU(inplace=True)``,
    ``model = Net()``); a name bound twice is left out."""
    out: "Dict[str, W.Layer]" = {}
    seen: "Dict[str, int]" = {}
    for n in A.block_nodes(body):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for name in A.target_names(t):
                    seen[name] = seen.get(name, 0) + 1
            if len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                layer = W.layer_of_constructor(n.value, qualify, user)
                if layer is not None:
                    layer.name = n.targets[0].id
                    out[layer.name] = layer
    return {k: v for k, v in out.items() if seen.get(k) == 1}


# the in-place spellings a unit's own text shows: augmented assignments, index writes, ``x.add_(``,
# ``inplace=True`` (a layer built in place in ``__init__`` is seen through the class's layers)
_EDIT_TEXT = INPLACE_EDIT_TEXT  # (declared in the catalog: the engine reads it before importing the rules)


def _inplace_layer(layers) -> bool:
    return any(layer.inplace or layer.edits is not None or (layer.items is not None and _inplace_layer(layer.items))
               for layer in layers)


def _global_layer(summary, name: str, user) -> "W.Layer | None":
    """A module-level layer a function calls (``model = Net()``): a same-file module
    class by its fact, a torch.nn layer by its kind, else one that makes a graph."""
    kind = summary.get(GLOBAL + name)
    if not isinstance(kind, str):
        return None
    if kind.startswith("user:"):
        cls = user.get(kind[5:])
        shape = cls.out_saved if cls is not None else None
        if shape and shape[0] == "if":
            shape = None  # a forward that depends on how the module was built
        layer = W.Layer("user", out_saved=shape, weighted=True)
        layer.edits = cls.edits if cls is not None else None  # (an edit a setting chooses is left out)
        return layer
    if kind == "Sequential":
        return W.Layer("unknown", weighted=True)
    return W.Layer(kind)


class InplaceSaved(Rule):
    code = "GG104"
    name = "inplace-saved"
    default_severity = Severity.ERROR
    names_lines = True  # the message names the line of the saving operation
    # a model defined in a file of its own (which never back-propagates) is checked where its text
    # shows an in-place spelling: the edit fails the backward of whatever file trains it
    needs_backprop = True
    also_without_backprop = _EDIT_TEXT
    fact_sources = (CLASS_FACTS,)
    # (no text condition: a forward that only calls ``self.main(x)`` edits in place through
    # an ``inplace=True`` written in ``__init__``)
    trigger = Trigger(torch=True)
    title = M.TITLE
    explanation = M.EXPLANATION

    def check(self, unit, ctx):
        in_model = unit.class_node is not None and is_module_class(unit.class_node) and unit.kind == "function"
        edits = _EDIT_TEXT.search(unit_text(unit, ctx.index.lines)) is not None
        # functions and module classes of the file that edit in place what a call hands them
        callees = {name: v for name, v in query(ctx.summary, _editing_callees) if name not in ctx.imports}
        calls_editing = False
        if callees:
            words = unit_words(unit, ctx.index.lines)
            calls_editing = not words.isdisjoint(callees) or not words.isdisjoint(
                query(ctx.summary, _editing_globals, tuple(sorted(callees))))
        if not edits and not in_model and not calls_editing:
            return ()
        qualify = lambda e: A.qualify(e, ctx)  # noqa: E731
        user = _user_layers(ctx.summary)
        for name, layer in user.items():
            layer.edits = callees.get(name)
        layers: "Dict[str, W.Layer]" = {}
        params: "set" = set()
        buffers: "frozenset" = frozenset()
        self_edits: "Dict[str, tuple]" = {}
        if unit.class_node is not None and unit.kind == "function":
            layers, params = _class_layers(unit.class_node, ctx, user)
            if in_model:
                buffers, self_edits = _buffer_edits(unit.class_node)
                if self_edits and unit_words(unit, ctx.index.lines).isdisjoint(self_edits):
                    self_edits = {}
                if not edits and not self_edits:
                    buffers = frozenset()  # (the buffers count where something may edit one)
            if not edits and not calls_editing and not _inplace_layer(layers.values()) and not self_edits:
                return ()  # nothing in the unit's text nor in its class's layers edits in place
            if not in_model:
                layers.update(_held_layers(unit.class_node, ctx.summary, user))
        layers.update(_own_layers(unit.body, qualify, user))
        flow = W.Flow(qualify, layers, params, lambda c: A.is_backward_call(c, ctx))
        if buffers:
            flow.buffers, flow.self_edits = buffers, self_edits
        flow.functions = query(ctx.summary, _saving_functions)
        if calls_editing:
            flow.callees = {name: v for name, v in callees.items() if name not in user}
        if in_model and unit.node is not None and unit.node.args.args:
            flow.self_name = unit.node.args.args[0].arg
            flow.method_shape = MethodShapes(unit.class_node, qualify, layers, params, flow.functions,
                                              lambda c: A.is_backward_call(c, ctx))
        if unit.kind == "function":
            flow.global_layer = lambda name: _global_layer(ctx.summary, name, user)
            if unit.node is not None and A.is_no_grad_function(unit.node, ctx):
                flow.no_grad = 1  # ``@torch.no_grad()``: nothing is saved in it
        try:
            flow.enter(unit.node)
            flow.run(unit.body)
        except RecursionError:
            return ()
        if not flow.hits:
            return ()
        if in_model:
            hits = list(flow.hits.values())
        elif (any(v.tensor or any(i.tensor for i in v.items or ()) for v in flow.returns)
              and K.text_may_backprop("\n".join(ctx.index.lines))):
            # a helper returning a tensor hands its graph to a caller that may back-propagate it
            hits = list(flow.hits.values())
        else:
            # elsewhere an edit counts where a backward of the unit follows it (an evaluation
            # loop that never back-propagates breaks nothing)
            hits = [h for k, h in flow.hits.items() if k in flow.confirmed]
        out: "List[Finding]" = []
        for hit in sorted(hits, key=lambda h: (h.node.lineno, h.node.col_offset)):
            hit.escaped = bool(hit.stores & flow.escaped)
            if hit.escaped and hit.how == "augassign" and isinstance(hit.node, ast.AugAssign) \
                    and isinstance(hit.node.target, ast.Subscript):
                # a list element rebound out of place: what keeps it from later on sees the new value
                hit.escaped = W.escaped_before(flow, hit.stores & flow.escaped, hit.stmt, unit.body)
            out.append(self._finding(hit, unit, ctx, flow))
        return out

    def _finding(self, hit: W.Hit, unit, ctx, flow: W.Flow) -> Finding:
        node = hit.node
        target = X.text(hit.target, ctx)
        if hit.how == "augassign":
            op = f"{target} {X.AUG[type(node.op).__name__]}= ..."
            where = node
        elif hit.how == "index":
            op = X.text(node, ctx) + " = ..." if isinstance(node, ast.Subscript) else X.short(node, ctx)
            where = node
        elif hit.how == "inplace-layer":
            op = X.text(node.func, ctx) if isinstance(node, ast.Call) else "inplace"
            if hit.layer is not None and hit.layer.node is not None and hit.layer.kind != "user":
                op = X.text(hit.layer.node, ctx)
            where = node
        else:
            op = X.text(node.func, ctx) + "(...)" if isinstance(node, ast.Call) else X.short(node, ctx)
            where = node
        saver = X.short(hit.saver, ctx)
        via = hit.via if hit.how == "inplace-layer" and isinstance(node, ast.Call) and isinstance(hit.via, ast.Call) \
            and hit.via.lineno != node.lineno else None
        if hit.how in ("callee", "callee-inner") and hit.inside is not None:
            # the edit is inside a function (or module) of the file the unit calls
            call = X.short(node.func, ctx) + "(...)" if isinstance(node, ast.Call) else X.short(node, ctx)
            inside = X.short(hit.inside, ctx)  # type: ignore[arg-type]
            if hit.how == "callee":
                msg = M.callee_edits_argument(call, target, inside, hit.inside.lineno, X.short(hit.saver, ctx),
                                              hit.saver.lineno, hit.saved_what)
            else:
                msg = M.callee_edits_own(call, inside, hit.inside.lineno, X.short(hit.saver, ctx), hit.saver.lineno,
                                         hit.saved_what)
        elif via is not None:
            # an element of one Sequential edits what an element of another, called before, saved
            target = X.short(hit.target, ctx)
            msg = M.modified_saved(hit.how, op, target, X.short(via, ctx), via.lineno, hit.saved_what)
        elif hit.how == "inplace-layer" and hit.layer is not None and not hit.layer.name and isinstance(node, ast.Call):
            # an element of a Sequential edits what the element before it saved
            target = X.short(node.func, ctx)
            msg = M.modified_in_sequential(op, target, saver, hit.saver.lineno, hit.saved_what)
        else:
            msg = M.modified_saved(hit.how, op, target, saver, hit.saver.lineno, hit.saved_what)
        related = [Related(ctx.range(hit.saver), M.saved_here(hit.saved_what))]
        if hit.how == "inplace-layer" and hit.layer is not None and hit.layer.node is not None:
            related.append(Related(ctx.range(hit.layer.node), M.built_inplace_here()))
        if hit.inside is not None:
            related.append(Related(ctx.range(hit.inside), M.edited_inside_here()))
        fixes = X.fixes_for(hit, unit, ctx)
        return Finding(self.code, ctx.range(where), msg, self.default_severity, tuple(related), tuple(fixes),
                       {"variable": target, "saved": hit.saved_what, "saved_line": hit.saver.lineno})
