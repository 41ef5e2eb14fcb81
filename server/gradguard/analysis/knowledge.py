"""What gradguard knows about torch, in one place.

Rules ask questions of these tables (by *qualified* name, after import
aliases are resolved by ``ModuleContext.qualify``); nothing else in the code
base hard-codes torch API names. Add knowledge here, not in a rule.
"""

from __future__ import annotations

import re

from gradguard.model.text import fold_identifiers

# Recurrent modules: calling one returns (output, state); the state carries a graph.
RECURRENT_MODULES = frozenset(
    {
        "torch.nn.RNN", "torch.nn.GRU", "torch.nn.LSTM",
        "torch.nn.modules.rnn.RNN", "torch.nn.modules.rnn.GRU", "torch.nn.modules.rnn.LSTM",
    }
)
# Cells: calling one returns the state itself (LSTMCell: a (h, c) tuple).
RECURRENT_CELLS = frozenset(
    {
        "torch.nn.RNNCell", "torch.nn.GRUCell", "torch.nn.LSTMCell",
        "torch.nn.modules.rnn.RNNCell", "torch.nn.modules.rnn.GRUCell", "torch.nn.modules.rnn.LSTMCell",
    }
)
# Modules whose state is a (h, c) pair.
LSTM_LIKE = frozenset({"torch.nn.LSTM", "torch.nn.LSTMCell", "torch.nn.modules.rnn.LSTM", "torch.nn.modules.rnn.LSTMCell"})

# Libraries whose functions never return a tensor with an autograd graph (they
# work on arrays: ``img = np.roll(img, 1, -1)`` is no recurrent step; not
# ``random``, whose choice() hands back a tensor it is given). By the
# qualified module, and by the conventional alias when no import table is known.
NON_GRAPH_LIBRARIES = frozenset({"numpy", "scipy", "math", "cv2", "PIL", "pandas", "sklearn",
                                 "matplotlib", "skimage", "imageio"})
NON_GRAPH_ALIASES = frozenset({"np", "pd", "plt", "sp"})

# Base classes that make a user class an nn.Module.
MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "pytorch_lightning.LightningModule",
                          "lightning.LightningModule", "lightning.pytorch.LightningModule"})

# Tensor methods / functions that return a value with NO graph.
GRAPH_CUT_METHODS = frozenset({"detach", "detach_", "item", "tolist", "numpy", "cpu_detach"})
GRAPH_CUT_ATTRS = frozenset({"data"})
# Attributes of a tensor that are plain data, never a graph: its shape and sizes
# (``B, T = x.shape``), dtype, device, flags. (``x.T``, ``x.real``, ``x.grad`` are tensors.)
NON_GRAPH_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "is_leaf", "requires_grad",
                             "layout", "is_sparse", "is_quantized", "is_meta"})
# Statement-level in-place cuts: ``h.detach_()``, ``h.requires_grad_(False)``.
INPLACE_CUT_METHODS = frozenset({"detach_", "requires_grad_"})  # legacy: x.data (works, but hides bugs)
# Context managers under which no graph is recorded.
NO_GRAD_CONTEXTS = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
     "torch.autograd.grad_mode.inference_mode", "torch.set_grad_enabled"}  # set_grad_enabled(False) only
)
NO_GRAD_DECORATORS = NO_GRAD_CONTEXTS

# Backward entry points. Method names on any receiver:
BACKWARD_METHODS = frozenset({"backward", "manual_backward"})  # loss.backward(), self.manual_backward(loss), accelerator.backward(loss)
# Receivers whose ``.backward(x)`` takes the LOSS as argument (``accelerator.backward(loss)``);
# on any other receiver ``t.backward(g)`` back-propagates ``t`` (``g`` is a gradient).
BACKWARD_OWNERS = frozenset({"accelerator", "fabric", "self", "trainer", "engine", "model_engine", "deepspeed",
                             "amp", "accelerate", "optimizer"})
# Functions (qualified):
BACKWARD_FUNCTIONS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})

# Methods returning a NEW tensor without a graph (x.new_zeros(...)).
FACTORY_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "size", "dim",
                             "numel", "nelement", "argmax", "argmin", "eq", "ne", "lt", "gt", "le", "ge",
                             "isnan", "isinf", "nonzero", "any", "all", "zero_"})

# Methods that read only the *shape or dtype* of their tensor argument (x.view_as(other)): the
# result's graph is the receiver's alone; `other` is not part of it (checked with torch 2.13:
# `a.view_as(b).grad_fn` reaches a, never b).
SHAPE_ARGUMENT_METHODS = frozenset({"view_as", "reshape_as", "expand_as", "type_as"})

# Methods whose result is an integer/bool tensor: no graph (x.long(), x.argmax()).
# (Not bernoulli/poisson: sampling from a tensor that requires grad keeps a grad_fn.)
INTEGER_METHODS = frozenset({"long", "int", "short", "bool", "byte", "char", "argmax", "argmin", "argsort",
                             "multinomial"})
INTEGER_DTYPES = frozenset({"torch.long", "torch.int", "torch.int64", "torch.int32", "torch.int16", "torch.int8",
                            "torch.uint8", "torch.bool", "torch.short"})
# Functions whose result carries no graph whatever the inputs (sampling, indices).
NONDIFF_FUNCTIONS = frozenset({"torch.multinomial", "torch.argmax", "torch.argmin", "torch.argsort",
                               "torch.searchsorted", "torch.bucketize", "torch.randint_like", "torch.eq", "torch.ne", "torch.gt", "torch.lt", "torch.ge",
                               "torch.le", "torch.isnan", "torch.isinf", "torch.isfinite", "torch.nonzero",
                               "torch.count_nonzero"})

# Tensor factories; with requires_grad=True they make *leaves* (safe to reuse).
TENSOR_FACTORIES = frozenset(
    {"torch.tensor", "torch.rand", "torch.randn", "torch.zeros", "torch.ones", "torch.empty", "torch.full",
     "torch.arange", "torch.linspace", "torch.randint", "torch.normal", "torch.eye", "torch.rand_like",
     "torch.randn_like", "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.full_like",
     "torch.from_numpy", "torch.as_tensor"}
)
# Tensor methods that do not change graph-ness: result has a graph iff the receiver has one.
PASSTHROUGH_METHODS = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "long", "int", "view", "reshape", "squeeze", "unsqueeze",
     "permute", "transpose", "contiguous", "expand", "flatten", "clone", "t", "type", "sum", "mean"}
)

# Which operations SAVE tensors for backward (a stale graph through them
# crashes the second time) vs which do not (no crash: gradients silently keep
# flowing into the leaf). Binary operators by ast node type name:
# (Checked with torch 2.x, tests/test_gg102.py::test_knowledge_tables_match_torch: `x * 2` and `x / 2` save
# too -- the Python number is wrapped as a tensor. `//` has no derivative at all and `%` saves nothing for
# its left operand, so neither is listed.)
SAVING_BINOPS = frozenset({"Mult", "Div", "Pow", "MatMult"})
NONSAVING_BINOPS = frozenset({"Add", "Sub"})
SAVING_FUNCTIONS = frozenset(
    {"torch.matmul", "torch.mm", "torch.bmm", "torch.mul", "torch.div", "torch.pow", "torch.tanh", "torch.sigmoid",
     "torch.exp", "torch.log", "torch.sin", "torch.cos", "torch.relu", "torch.softmax", "torch.log_softmax",
     "torch.nn.functional.relu", "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
     "torch.nn.functional.linear", "torch.nn.functional.conv2d", "torch.einsum", "torch.sqrt", "torch.abs",
     "torch.norm", "torch.prod", "torch.max", "torch.min", "torch.nn.functional.mse_loss",
     "torch.nn.functional.cross_entropy", "torch.nn.functional.gelu", "torch.nn.functional.dropout"}
)
SAVING_METHODS = frozenset(
    {"matmul", "mm", "bmm", "mul", "div", "pow", "tanh", "sigmoid", "exp", "log", "sin", "cos", "relu", "softmax",
     "log_softmax", "sqrt", "abs", "norm", "prod", "max", "min", "mul_", "div_", "pow_"}
)
NONSAVING_FUNCTIONS = frozenset({"torch.add", "torch.sub", "torch.cat", "torch.stack", "torch.sum", "torch.mean"})
NONSAVING_METHODS = frozenset({"add", "sub", "add_", "sub_", "sum", "mean", "view", "reshape", "__getitem__", "squeeze",
                               "unsqueeze", "permute", "transpose", "flatten", "expand", "clone", "t", "contiguous"})


# Does an operation save tensors for backward? Tri-state: True (it saves: a stale graph
# through it crashes the second time), False (it saves nothing: gradients keep flowing
# into the leaf), None (not known here). By the tables above, for one operation; a
# value's answer joins those of the operations that built it (True wins, then None).
def binop_saving(opname: str) -> bool | None:
    """A binary operator, by its ast class name (``"Mult"``)."""
    return True if opname in SAVING_BINOPS else False if opname in NONSAVING_BINOPS else None


def method_saving(meth: str) -> bool | None:
    """A tensor method (``x.exp()``); views and copies (``PASSTHROUGH_METHODS``) save nothing."""
    if meth in SAVING_METHODS:
        return True
    return False if meth in PASSTHROUGH_METHODS or meth in NONSAVING_METHODS else None


def inplace_method_saving(meth: str) -> bool | None:
    """An in-place tensor method (``x.mul_(2)``), by itself or by its out-of-place name."""
    base = meth[:-1] if meth.endswith("_") else meth
    if base in SAVING_METHODS or meth in SAVING_METHODS:
        return True
    return False if meth in NONSAVING_METHODS or base in NONSAVING_METHODS else None


def function_saving(q: str) -> bool | None:
    """A torch function, by its qualified name (``"torch.matmul"``)."""
    return True if q in SAVING_FUNCTIONS else False if q in NONSAVING_FUNCTIONS else None


def parameterless_module_saving(name: str) -> bool | None:
    """A ``torch.nn`` module without parameters (``PARAMETERLESS_MODULES``), by its class name."""
    return None if name in CONFIG_DEPENDENT_MODULES else name not in NONSAVING_MODULES


# torch.distributions whose construction (or the parameter they cache on first use) saves tensors: two
# losses from one such distribution, back-propagated one after the other, fail on the second (checked with
# torch 2.13). Normal, Laplace, Beta... compute their log-prob afresh on each call and share only views.
SAVING_DISTRIBUTIONS = frozenset({"Categorical", "OneHotCategorical"})  # probs= or logits=: normalised once
SAVING_DISTRIBUTIONS_FROM_PROBS = frozenset({"Bernoulli", "Binomial"})  # the logits, cached from probs
SAVING_DISTRIBUTIONS_FROM_LOGITS = frozenset({"Geometric"})  # the probs, cached from logits


# Methods of a torch.distributions object whose result carries no graph: sample() draws
# under no_grad (rsample() is the differentiable one).
DISTRIBUTION_NONDIFF_METHODS = frozenset({"sample", "sample_n"})


# torch.distributions classes by the bare name ``from torch.distributions import Categorical``
# binds: what such a name means while a definition is summarised alone, without the file's
# imports (at a unit's analysis the imports decide). ``dist.sample()`` of one has no graph.
SUMMARY_ALIASES = {name: "torch.distributions." + name for name in (
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Dirichlet", "Exponential", "Gamma", "Geometric",
    "Gumbel", "Laplace", "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT", "TransformedDistribution", "Uniform",
)}


def is_distribution_class(qualname) -> bool:
    """``torch.distributions.Categorical`` (and the ``torch.distributions.normal.Normal``
    spelling): a class of torch.distributions, by its qualified name."""
    return bool(qualname) and qualname.startswith("torch.distributions.") and qualname.rpartition(".")[2][:1].isupper()


def saving_distribution(qualname, call) -> bool:
    """``Categorical(logits=l)``, ``Bernoulli(p)``: a distribution whose graph from its
    parameters saves tensors that every log_prob()/entropy() then shares."""
    if not qualname or not qualname.startswith("torch.distributions."):
        return False
    cls = qualname.rpartition(".")[2]
    if cls in SAVING_DISTRIBUTIONS:
        return True
    kws = {kw.arg for kw in call.keywords}
    if cls in SAVING_DISTRIBUTIONS_FROM_PROBS:
        return "probs" in kws or (bool(call.args) and "logits" not in kws)
    if cls in SAVING_DISTRIBUTIONS_FROM_LOGITS:
        return "logits" in kws
    return False


# Objects that have .zero_grad(): any nn.Module and any optimizer (a tensor does not).
OPTIMIZER_PREFIXES = ("torch.optim.",)


def is_parameter_attr(attr: str) -> bool:
    """The parameter attributes of torch's layers: ``weight``, ``bias``,
    ``weight_ih_l0``, ``bias_hh_l1``, ... (read off a module, a leaf that requires grad)."""
    return attr in ("weight", "bias") or attr.startswith(("weight_", "bias_"))


def is_recurrent(qualname: str | None) -> bool:
    return bool(qualname) and (qualname in RECURRENT_MODULES or qualname in RECURRENT_CELLS)


# nn modules without parameters (calling one builds a graph only from its input).
PARAMETERLESS_MODULES = frozenset(
    {"Identity", "Flatten", "Unflatten", "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
     "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softplus", "Hardtanh", "Hardswish", "Hardsigmoid", "Dropout",
     "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
     "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "Upsample",
     "PixelShuffle", "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
     "SmoothL1Loss", "HuberLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance"}
)
# ...of which these save nothing for backward (a stale graph through them does not crash), and these
# depend on their configuration (AdaptiveAvgPool2d(1) is a mean and saves nothing; other output sizes
# save the input). Checked with torch 2.x by tests/test_gg102.py::test_knowledge_tables_match_torch.
# one layer whose weight's gradient needs only its input: applied to input without a
# graph, its backward saves that input and not the weight (an optimizer step then
# changes nothing its graph saved)
ONE_INPUT_SAVING_LAYERS = frozenset({"torch.nn.Linear", "torch.nn.modules.linear.Linear"})
NONSAVING_MODULES = frozenset({"Identity", "Flatten", "Unflatten", "Upsample", "PixelShuffle"})
CONFIG_DEPENDENT_MODULES = frozenset({"AdaptiveAvgPool1d", "AdaptiveAvgPool2d"})
# Containers: trainable iff one of their children is.
# Calls whose result is ONE tensor (never a tuple, list or dict): a carried state
# built by one of them is cut with `.detach()` (GG101's fix); a state whose shape
# is not known this way is cut by a helper that keeps every container.
ONE_TENSOR_METHODS = frozenset(
    {"clone", "softmax", "log_softmax", "sigmoid", "tanh", "relu", "exp", "log", "abs", "sqrt", "neg", "float",
     "double", "half", "contiguous", "view", "reshape", "squeeze", "unsqueeze", "transpose", "permute", "flatten",
     "sum", "mean", "matmul", "mm", "bmm", "mul", "add", "sub", "div", "pow", "clamp", "t", "bernoulli"}
)
ONE_TENSOR_FUNCTIONS = frozenset(
    {"torch." + n for n in ("bernoulli", "sigmoid", "tanh", "relu", "softmax", "log_softmax", "exp", "log", "abs",
                            "sqrt", "cat", "stack", "matmul", "mm", "bmm", "add", "mul", "sub", "div", "pow",
                            "where", "clamp", "einsum", "mean", "sum", "lerp")}
    | {"torch.nn.functional." + n for n in ("relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "linear",
                                            "dropout", "normalize", "gumbel_softmax", "layer_norm", "elu", "silu")}
)
# torch.nn classes whose forward returns more than one tensor (besides the recurrent ones)
MULTI_OUTPUT_MODULES = frozenset({"torch.nn.MultiheadAttention", "torch.nn.AdaptiveLogSoftmaxWithLoss",
                                  "torch.nn.MaxPool1d", "torch.nn.MaxPool2d", "torch.nn.MaxPool3d"})

CONTAINER_MODULES = frozenset({"Sequential", "ModuleList", "ModuleDict"})

# Tensor operations whose result is a view of their input (it shares the input's storage
# and saves nothing for backward): a view of a parameter sees the optimizer's in-place
# updates (a tied projection ``emb.weight.t()``), so reusing it across steps is sound.
VIEW_METHODS = frozenset({"t", "view", "view_as", "transpose", "permute", "unsqueeze", "squeeze", "expand",
                          "expand_as", "narrow", "select", "unflatten", "movedim", "swapaxes", "swapdims"})
VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "weight", "bias", "data"})

# Conversions to integer/bool dtypes: the result has no graph at all.
INTEGER_CASTS = frozenset({"long", "int", "short", "char", "byte", "bool"})
# Tensor methods returning non-tensors or tensors without a graph (shape queries, comparisons, argmax...).
NON_TENSOR_METHODS = frozenset(
    {"size", "dim", "ndimension", "numel", "nelement", "element_size", "stride", "storage_offset", "is_contiguous",
     "data_ptr", "get_device", "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf",
     "isfinite", "nonzero", "sign", "round", "floor", "ceil", "any", "all", "__len__"}
) | INTEGER_CASTS
# torch functions whose result has no graph.
GRAPHLESS_FUNCTIONS = frozenset(
    {"torch.argmax", "torch.argmin", "torch.argsort", "torch.eq", "torch.ne", "torch.lt", "torch.le", "torch.gt",
     "torch.ge", "torch.isnan", "torch.isinf", "torch.isfinite", "torch.nonzero", "torch.sign", "torch.round",
     "torch.floor", "torch.ceil", "torch.numel", "torch.is_tensor", "torch.equal", "torch.allclose",
     "torch.no_grad", "torch.manual_seed", "torch.save", "torch.load", "torch.set_grad_enabled"}
)
# Tensor attributes that are not (graph-carrying) tensors.
GRAPHLESS_ATTRS = frozenset({"data", "shape", "grad", "dtype", "device", "requires_grad", "is_leaf", "ndim", "grad_fn"})
# Module methods that return the module itself.
MODULE_SELF_METHODS = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "type"})
# Legacy leaf constructors taking requires_grad= like the factories.
VARIABLE_CONSTRUCTORS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


# Other frameworks with a backward() and detach() of their own. A file that imports
# one of them and not torch (d2l's mxnet.py and paddle.py, side by side with its
# torch.py) is not a torch program: its graphs live by other rules, and no torch
# error can be proven there.
OTHER_FRAMEWORKS = frozenset({"mxnet", "paddle", "tensorflow", "jax", "mindspore", "oneflow", "jittor",
                              "megengine", "chainer", "keras", "flax", "mlx", "tinygrad"})


def imports_torch(imports) -> bool:
    """Does an import table (local name → qualified name) import torch or a part
    of it? (Asked of every unit, mostly with the module's table: the last answer
    is kept.)"""
    global _LAST_TORCH
    last = _LAST_TORCH  # (one read, one rebinding below: safe on several threads)
    if last[0] is imports:
        return last[1]
    answer = any(q == "torch" or q.startswith("torch.") for q in imports.values())
    _LAST_TORCH = (imports, answer)
    return answer


_LAST_TORCH: tuple = (None, False)  # (the import table last asked about, its answer); a table is never changed once made


def other_framework_only(imports) -> bool:
    """``imports``: local name → qualified name (``ModuleContext.imports``).
    Asked by several rules of every unit with the same table: the last answer is kept."""
    global _LAST_IMPORTS
    last = _LAST_IMPORTS  # (one read, one rebinding below: safe on several threads)
    if last[0] is imports:
        return last[1]
    roots = {q.split(".", 1)[0] for q in imports.values()}
    answer = bool(roots & OTHER_FRAMEWORKS) and "torch" not in roots
    _LAST_IMPORTS = (imports, answer)
    return answer


_LAST_IMPORTS: tuple = (None, False)  # (the import table last asked about, its answer); a table is never changed once made


# Library neurons and cells that keep their state on the module between calls
# (issue 12, shape 1): qualified class -> the keyword that turns that on (None:
# always). snntorch's neurons keep ``mem``/``syn`` inside only with
# ``init_hidden=True`` (else they take and return it, an ordinary recurrence);
# spikingjelly's neurons always keep ``v``.
STATEFUL_LIBRARY_MODULES = {
    **{f"snntorch.{n}": "init_hidden" for n in (
        "Leaky", "Synaptic", "Alpha", "Lapicque", "RLeaky", "RSynaptic", "SLSTM", "SConv2dLSTM", "LeakyParallel")},
    **{f"spikingjelly.{clock}.neuron.{n}": None
       for clock in ("activation_based", "clock_driven")
       for n in ("IFNode", "LIFNode", "ParametricLIFNode", "QIFNode", "EIFNode", "IzhikevichNode", "KLIFNode",
                 "MultiStepIFNode", "MultiStepLIFNode", "MultiStepParametricLIFNode")},
}
# Their class names: while a class is summarised (no import table yet) a member made
# by one of them is a known kind of module -- its output carries its input's graph --
# not a class of the user's whose facts are composed later.
STATEFUL_LIBRARY_NAMES = frozenset(q.rsplit(".", 1)[-1] for q in STATEFUL_LIBRARY_MODULES)
# The attribute that state lives in, by library (the name GG101's findings give it).
STATE_ATTRIBUTES = {"snntorch": "mem", "spikingjelly": "v"}
# What resets or cuts that state, by the last part of the name called: snntorch's
# ``utils.reset(net)`` / ``neuron.reset_mem()`` / ``detach_hidden()``,
# spikingjelly's ``functional.reset_net(net)`` / ``neuron.reset()``, and the
# same words on a model of the user's.
STATE_RESET_CALLS = frozenset({"reset", "reset_net", "reset_mem", "reset_hidden", "reset_state", "reset_states",
                               "detach_hidden", "init_leaky", "init_synaptic", "detach_states", "detach_state",
                               "repackage_hidden", "init_hidden", "init_state", "zero_state", "detach_net",
                               "zero_states", "reset_neurons"})


# Frameworks that call a method of the user's module in a loop of their own: the last part
# of the base class's name -> those methods. With automatic optimisation (PyTorch
# Lightning's default) the framework back-propagates what the method returns and steps the
# optimizer after each call, so state the method keeps on ``self`` from one call to the next
# is carried across iterations of that loop (held-out c34: a pseudo ground truth kept for
# the next ``training_step``). ``self.automatic_optimization = False`` leaves the backward
# and the step to the method (``self.manual_backward(loss)``).
FRAMEWORK_LOOP_METHODS = {"LightningModule": frozenset({"training_step"})}

# Every way to back-propagate that the rules know spells one of these words in
# the file: ``loss.backward()``, ``scaler.scale(l).backward()``,
# ``accelerator.backward(l)``, ``self.manual_backward(l)``,
# ``torch.autograd.backward/grad(...)``, and an alias of those (``from
# torch.autograd import grad as g``) on its import line. Whole words, so
# ``x.grad`` counts (it only errs on the side of analysing) and ``autograd``
# or ``grad_norm`` do not. And the methods a framework back-propagates the result
# of (``training_step``, ``FRAMEWORK_LOOP_METHODS``).
BACKPROP_WORD = re.compile(r"\b(?:backward|manual_backward|grad|"
                           + "|".join(sorted({m for ms in FRAMEWORK_LOOP_METHODS.values() for m in ms})) + r")\b")


def text_may_backprop(text: str) -> bool:
    """Does the text spell a backward (identifiers NFKC-folded, as Python folds them:
    ``ｂａｃｋｗａｒｄ`` *is* ``backward``)? The engine's test of a file
    (``engine.may_backprop``, with the facts of other files), and GG201's."""
    return BACKPROP_WORD.search(fold_identifiers(text)) is not None
MANUAL_OPTIMIZATION_ATTR = "automatic_optimization"


# ``with torch.nn.utils.parametrize.cached():`` computes each parametrized tensor once, on its
# first use inside the block, and hands the same tensor (on the graph of that first use) to
# every later use: a training loop inside the block back-propagates that graph again
# (pytorch issue 72041). The pseudo-variable of the trace that holds it, and the calls that
# register a parametrization on a module (by their last name, or the module they come from).
PARAMETRIZE_CACHED = "torch.nn.utils.parametrize.cached"
PARAMETRIZE_CACHE_KEY = "<parametrize.cached>"
PARAMETRIZING_CALLS = frozenset({"register_parametrization"})
PARAMETRIZATIONS_MODULE = "parametrizations"


# --------------------------------------------------------------------------
# WHICH tensor an operation saves for backward (GG104: an in-place edit of a
# saved tensor fails the backward with "one of the variables needed for gradient
# computation has been modified by an inplace operation"). Checked with torch 2.13
# by tests/test_gg104.py::test_operand_tables_match_torch. By the last name of the
# function, method or torch.nn class.
#
# Saves its OUTPUT (when its input requires grad): editing the result in place fails.
SAVES_OUTPUT_FUNCTIONS = frozenset({"sigmoid", "tanh", "exp", "relu", "softmax", "log_softmax", "sqrt", "rsqrt",
                                    "reciprocal"})
SAVES_OUTPUT_MODULES = frozenset({"ReLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax"})
# Saves its INPUT because of its weight (the weight requires grad): editing the input fails,
# whether or not the input requires grad. torch.nn layers with parameters.
SAVES_INPUT_WEIGHTED_MODULES = frozenset(
    {"Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
     "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "LSTM", "GRU", "RNN", "LSTMCell",
     "GRUCell", "RNNCell"})
# Functions saving their first argument when their weight (second argument) requires grad.
SAVES_INPUT_WEIGHTED_FUNCTIONS = frozenset({"linear", "conv1d", "conv2d", "conv3d", "bilinear"})
# Save their input when it requires grad (their own derivative is computed from it).
SAVES_INPUT_MODULES = frozenset({"LeakyReLU", "ELU", "GELU", "SiLU", "Softplus", "Hardtanh", "ReLU6", "Mish",
                                 "CELU", "SELU", "Hardswish", "MaxPool1d", "MaxPool2d", "MaxPool3d"})
SAVES_INPUT_FUNCTIONS = frozenset({"leaky_relu", "elu", "gelu", "silu", "softplus", "log", "sin", "cos", "abs",
                                   "pow", "hardtanh", "relu6", "mish", "log1p"})
# Binary products: each operand is saved when the OTHER requires grad (``a @ w``: ``a`` for
# ``w``'s gradient). Division saves the divisor for the dividend's gradient, and both for
# the divisor's.
PRODUCT_FUNCTIONS = frozenset({"matmul", "mm", "bmm", "mul", "multiply", "mv"})
# Save nothing of their operands: an in-place edit of the input or output never fails here.
SAVES_NOTHING_FUNCTIONS = frozenset({"add", "sub", "cat", "stack", "sum", "mean", "neg", "clone", "flatten",
                                     "reshape", "dropout"})
SAVES_NOTHING_MODULES = frozenset({"Identity", "Flatten", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                                   "AlphaDropout", "AvgPool1d", "AvgPool2d", "AvgPool3d"})
# Activations with an ``inplace`` switch (constructor argument / functional keyword, and the
# ``name_`` spellings): in place they edit their input; those listed here then save their
# result (``relu_`` saves its output), the dropouts save nothing.
INPLACE_SWITCH_MODULES = frozenset({"ReLU", "LeakyReLU", "ELU", "ReLU6", "Hardtanh", "SELU", "CELU", "SiLU",
                                    "Hardswish", "Mish", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                                    "AlphaDropout", "Threshold"})
INPLACE_SAVES_RESULT = frozenset({"ReLU", "LeakyReLU", "ELU", "SELU", "CELU", "relu", "leaky_relu", "elu", "selu",
                                  "celu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt"})
INPLACE_SWITCH_FUNCTIONS = frozenset({"relu", "leaky_relu", "elu", "relu6", "hardtanh", "selu", "celu", "silu",
                                      "hardswish", "mish", "dropout", "dropout1d", "dropout2d", "dropout3d",
                                      "alpha_dropout", "threshold"})
# Position of the ``inplace`` argument when given positionally, for the torch.nn classes
# (``nn.ReLU(True)``, ``nn.LeakyReLU(0.2, True)``, ``nn.Dropout(0.5, True)``).
INPLACE_POSITION = {"ReLU": 0, "SELU": 0, "SiLU": 0, "Hardswish": 0, "Mish": 0, "ReLU6": 0, "LeakyReLU": 1,
                    "ELU": 1, "CELU": 1, "Dropout": 1, "Dropout1d": 1, "Dropout2d": 1, "Dropout3d": 1,
                    "AlphaDropout": 1, "Hardtanh": 2, "Threshold": 2}
# Tensor methods that edit their receiver in place (the trailing-underscore spellings
# autograd tracks; ``requires_grad_``/``detach_``/``share_memory_`` change no values).
INPLACE_TENSOR_METHODS = frozenset(
    {"add_", "sub_", "mul_", "div_", "pow_", "clamp_", "clamp_min_", "clamp_max_", "clip_", "relu_", "sigmoid_",
     "tanh_", "exp_", "log_", "sqrt_", "rsqrt_", "abs_", "neg_", "zero_", "fill_", "copy_", "normal_", "uniform_",
     "bernoulli_", "masked_fill_", "masked_scatter_", "index_add_", "index_copy_", "index_fill_", "scatter_",
     "scatter_add_", "addcmul_", "addcdiv_", "lerp_", "floor_", "ceil_", "round_", "sign_", "exponential_",
     "fmod_", "remainder_", "reciprocal_", "sin_", "cos_"})
