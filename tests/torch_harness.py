"""Run fixture programs under real torch and record what torch does with them.

This is the *runtime* half of gradguard's proof: every fixture under
``tests/fixtures`` declares in its header what torch does with it
(``# runtime: crash`` or ``# runtime: train``) and which findings gradguard
must report (``# expect: GG101@42``). This module parses those headers and
runs many programs in ONE process (``import torch`` costs seconds), each in a
fresh ``__main__`` namespace, seeded, single-threaded, stdout silenced.

While a program runs, the first *outermost* backward call is observed: when it
returns, the ``.grad`` of every parameter of every ``nn.Module`` created so far
(in creation order) is snapshotted (for ``torch.autograd.grad``, which fills no
``.grad``, the gradients it returns are). Comparing the snapshot of an original
program with that of its fixed version proves a fix does not change what the
first iteration learns.

Header format (comment lines at the top of the file, any order)::

    # gradguard-fixture
    # runtime: crash | train
    # expect: GG101@42 GG101@77        (1-based lines; or "expect: none")
    # severity: GG102@12=warning       (optional; default is the rule's)
    # error: modified by an inplace operation   (optional; for runtime: crash,
    #        the substring torch's error must contain instead of the default)
    # holds-graph: total_loss losses   (optional; module-level names that hold
    #        an autograd graph when the program ends (a tensor with a grad_fn,
    #        or a list/tuple/dict holding one) and no longer do once fixed:
    #        the runtime proof of a leak that never crashes, GG201)
    # reference: saved-copies        (optional, crash only: the first backward fails (an
    #        in-place edit of a saved tensor); the fix's gradients are compared with a run of
    #        the original with every saved tensor copied when saved)
    # expect-later: GG103@40         (optional, crash only: a finding the program
    #        should get and does not yet; it must not be reported today)
    # source: https://...              (where the program comes from; required
    #        for the rebuilt bug reports under reports/)
    # shape: tag -- words              (the shape of the bug, for the recall
    #        tables of docs/bug-reports.md)
    # fix-later: why                   (optional: the preferred fix is known not
    #        to hold yet -- it is missing, still reported, or the fixed program
    #        does not train with the same first gradients; a test checks the
    #        gap is still there)

Command line::

    python tests/torch_harness.py [FILES or DIRS ...]      # label check + summary
    python tests/torch_harness.py --manifest jobs.json     # used by the tests; JSON out

The module does not import torch at import time, so the analysis tests can
import :func:`parse_header` without torch installed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import runpy
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"

DEFAULT_ERROR = "Trying to backward through the graph a second time"
HEADER_MARK = "gradguard-fixture"

_HEADER_LINE = re.compile(r"^#\s*([a-z-]+)\s*:\s*(.*?)\s*$")
_EXPECT_ITEM = re.compile(r"^(GG\d{3})@(\d+)$")
_SEVERITY_ITEM = re.compile(r"^(GG\d{3})@(\d+)=(error|warning|info|hint)$")


class HeaderError(ValueError):
    pass


@dataclass(frozen=True)
class FixtureSpec:
    path: str
    runtime: str  # "crash" | "train"
    expect: frozenset  # {(code, line1)}
    severity: Dict[Tuple[str, int], str] = field(default_factory=dict, hash=False, compare=False)
    error: str = DEFAULT_ERROR
    holds: Tuple[str, ...] = ()
    # findings wanted and not reported yet (a known gap), {(code, line1)}
    later: frozenset = field(default_factory=frozenset)
    source: str = ""
    shape: str = ""
    fix_later: str = ""
    # "saved-copies": the original fails in its first backward (an in-place edit of a tensor
    # autograd saved, GG104), so its gradients are those of a run with every saved tensor copied
    # when saved (torch.autograd.graph.saved_tensors_hooks): what it computes when no in-place edit
    # can reach a saved tensor, the reference a fix must match
    reference: str = ""
    # "resets: <why>": a GG101 fix that empties a kept container (REINFORCE's log-probs emptied
    # after each update, as the example does) instead of detaching it: the next loss no longer
    # reads what the original kept, so its value differs by design
    resets: str = ""

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def codes(self) -> Set[str]:
        return {c for c, _ in self.expect}

    @property
    def label(self) -> str:
        """A coarse label kind, for coverage accounting."""
        codes = "+".join(sorted(self.codes)) or "none"
        extra = "" if self.error == DEFAULT_ERROR else "/alt-error"
        return f"{self.runtime}:{codes}{extra}"


def parse_header(source: str, path: str = "<fixture>") -> FixtureSpec:
    lines = source.splitlines()
    if not lines or HEADER_MARK not in lines[0]:
        raise HeaderError(f"{path}: first line must be '# {HEADER_MARK}'")
    fields: Dict[str, str] = {}
    for ln in lines[1:]:
        if not ln.startswith("#"):
            break
        m = _HEADER_LINE.match(ln)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if key in fields:
            raise HeaderError(f"{path}: duplicate header {key!r}")
        fields[key] = value
    runtime = fields.get("runtime")
    if runtime not in ("crash", "train"):
        raise HeaderError(f"{path}: 'runtime:' must be crash or train, got {runtime!r}")
    if "expect" not in fields:
        raise HeaderError(f"{path}: missing 'expect:'")
    expect: Set[Tuple[str, int]] = set()
    if fields["expect"].strip().lower() != "none":
        for item in fields["expect"].split():
            m = _EXPECT_ITEM.match(item)
            if not m:
                raise HeaderError(f"{path}: bad expect item {item!r} (want GG101@42)")
            expect.add((m.group(1), int(m.group(2))))
        if not expect:
            raise HeaderError(f"{path}: empty 'expect:' (write 'expect: none')")
    severity: Dict[Tuple[str, int], str] = {}
    for item in fields.get("severity", "").split():
        m = _SEVERITY_ITEM.match(item)
        if not m:
            raise HeaderError(f"{path}: bad severity item {item!r} (want GG102@12=warning)")
        key = (m.group(1), int(m.group(2)))
        if key not in expect:
            raise HeaderError(f"{path}: severity for {item!r} which is not expected")
        severity[key] = m.group(3)
    error = fields.get("error", DEFAULT_ERROR)
    if "error" in fields and runtime != "crash":
        raise HeaderError(f"{path}: 'error:' only makes sense with runtime: crash")
    holds = tuple(fields.get("holds-graph", "").split())
    if holds and runtime != "train":
        raise HeaderError(f"{path}: 'holds-graph:' only makes sense with runtime: train")
    later: Set[Tuple[str, int]] = set()
    for item in fields.get("expect-later", "").split():
        m = _EXPECT_ITEM.match(item)
        if not m:
            raise HeaderError(f"{path}: bad expect-later item {item!r} (want GG103@40)")
        later.add((m.group(1), int(m.group(2))))
    if later and runtime != "crash":
        raise HeaderError(f"{path}: 'expect-later:' only makes sense with runtime: crash")
    if later & expect:
        raise HeaderError(f"{path}: {sorted(later & expect)} both expected and expected later")
    shape = fields.get("shape", "").split("--")[0].strip()
    if "fix-later" in fields and not expect:
        raise HeaderError(f"{path}: 'fix-later:' without a finding to fix")
    return FixtureSpec(path, runtime, frozenset(expect), severity, error, holds=holds, later=frozenset(later),
                       source=fields.get("source", ""), shape=shape, fix_later=fields.get("fix-later", ""),
                       reference=fields.get("reference", ""), resets=fields.get("resets", ""))


REPORTS = "reports"  # programs rebuilt from public bug reports, beside the others


def fixture_paths(root: Path = FIXTURES) -> List[Path]:
    """The programs in ``root`` and in its ``reports/`` folder (rebuilt bug
    reports: the same header plus ``source:`` and ``shape:``)."""
    found = list(root.glob("*.py")) + list((root / REPORTS).glob("*.py"))
    return sorted(p for p in found if p.read_text(encoding="utf-8").startswith(f"# {HEADER_MARK}"))


def project_fixture_paths(root: Path = FIXTURES / "projects") -> List[Path]:
    """Programs of several files: each file of ``projects/<folder>/`` with the
    header is a program; the files without it are the modules they import."""
    return sorted(p for p in root.glob("*/*.py") if p.read_text(encoding="utf-8").startswith(f"# {HEADER_MARK}"))


# --------------------------------------------------------------------------
# Running programs (needs torch)
# --------------------------------------------------------------------------


@dataclass
class RunResult:
    status: str  # "train" | "crash"
    error_type: Optional[str] = None
    error: Optional[str] = None
    seconds: float = 0.0
    backward_calls: int = 0
    # [(key, grad or None, optimizer-owned)] after the first backward
    first_grads: Optional[list] = None
    # values differentiated by the first two backward calls
    roots: list = field(default_factory=list)
    # for each asked module-level name: does it hold an autograd graph at the end?
    holds: Dict[str, bool] = field(default_factory=dict)
    second_grads: Optional[list] = None
    # [(key, grad, True)] of the parameters the first optimizer.step() updates, as it starts
    step_grads: Optional[list] = None
    # outermost backward calls run while a module whose parameters an optimizer updates
    # was in evaluation mode (GG206: trained in eval mode)
    eval_backwards: int = 0
    # optimizer steps that found every gradient of their parameters None or zero (GG207)
    steps: int = 0
    empty_steps: int = 0
    # optimizer.zero_grad() calls that erased gradients a backward gave its parameters
    # since its last step, unused by any step (GG207: zeroing inside an accumulation loop)
    discarded: int = 0
    # per optimizer (creation order): the gradients its first two steps apply
    step_log: Dict[int, list] = field(default_factory=dict)
    # parameters of the program's modules that hold a gradient when it ends and that no
    # optimizer holds (GG208: gradients into parameters nothing updates)
    unowned_grads: int = 0

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "error_type": self.error_type,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "backward_calls": self.backward_calls,
            "captured": self.first_grads is not None,
            "holds": self.holds,
            "eval_backwards": self.eval_backwards,
            "steps": self.steps,
            "empty_steps": self.empty_steps,
            "unowned_grads": self.unowned_grads,
            "discarded": self.discarded,
        }


def _module_parameters(modules: list):
    """``(key, parameter)`` of the modules' own parameters, in creation order; the key numbers
    only the modules that hold parameters of their own, so that a fix adding a container
    (``nn.ModuleList()``, GG208) does not renumber the layers made after it."""
    i = 0
    for mod in modules:
        own = list(mod.named_parameters(recurse=False))
        if not own:
            continue
        for name, p in own:
            yield f"module#{i}.{name}", p
        i += 1


class _Recorder:
    """Tracks nn.Modules created during a run and the first backward's grads."""

    def __init__(self, torch, program: str = ""):
        self.torch = torch
        self.program = program  # the running file, to find its globals
        self.modules: list = []
        self.optimizers: list = []
        self.depth = 0
        self.calls = 0
        self.first_grads: Optional[list] = None
        self.second_grads: Optional[list] = None  # the same, after the second backward
        self.step_grads: Optional[list] = None
        self.eval_backwards = 0
        self.steps = 0
        self.empty_steps = 0
        self.discarded = 0
        self.unstepped: set = set()  # ids of optimizers a backward gave gradients since their last step
        self.step_log: Dict[int, list] = {}
        self.stepped: set = set()  # ids of the optimizers whose step() ran
        # values of what the first two outermost backward calls differentiate
        # (recorded on entry, so the call that crashes is recorded too)
        self.roots: list = []

    def unowned_grads(self) -> int:
        """Parameters of the modules created so far that hold a gradient and that no
        optimizer that ever stepped holds (only when some optimizer stepped)."""
        stepped = [opt for opt in self.optimizers if id(opt) in self.stepped]
        if not stepped:
            return 0
        # (an optimizer a network builds for itself and nobody steps updates nothing either)
        owned = {id(p) for opt in stepped for g in opt.param_groups for p in g["params"]}
        seen: set = set()
        n = 0
        for mod in self.modules:
            for p in mod.parameters(recurse=False):
                if id(p) in seen:
                    continue
                seen.add(id(p))
                if p.grad is not None and id(p) not in owned:
                    n += 1
        return n

    def root_value(self, args, kwargs):
        torch = self.torch
        root = args[0] if args else (kwargs.get("tensors") or kwargs.get("outputs"))
        if isinstance(root, (list, tuple)):
            root = root[0] if root else None
        if isinstance(root, torch.Tensor):
            return root.detach().clone()
        return None

    def snapshot(self) -> list:
        """[(key, grad or None, owned)] for every parameter of every module
        created so far (creation order), then every optimizer-owned tensor
        that belongs to no module; ``owned``: some optimizer updates it."""
        owned = {id(p) for opt in self.optimizers for g in opt.param_groups for p in g["params"]}
        out = []
        seen = set()

        def grab(p):
            return None if p.grad is None else p.grad.detach().clone()

        for key, p in _module_parameters(self.modules):
            if id(p) in seen:
                continue
            seen.add(id(p))
            out.append((key, grab(p), id(p) in owned))
        for k, opt in enumerate(self.optimizers):
            for gi, group in enumerate(opt.param_groups):
                for j, p in enumerate(group["params"]):
                    if id(p) not in seen:
                        seen.add(id(p))
                        out.append((f"optimizer#{k}.group{gi}[{j}]", grab(p), True))
        if not out:  # hand-written SGD on plain tensors: the program's own global leaves
            out = self.global_leaves(grab)
        return out

    def global_leaves(self, grab) -> list:
        """[("global:<name>", grad, False)] for the program's module-level
        tensors that require grad and are leaves (``W``, ``b`` of a loop that
        updates them by hand), found in the running program's frame."""
        frame = sys._getframe()
        while frame is not None and not (
            frame.f_code.co_filename == self.program and frame.f_globals.get("__name__") == "__main__"
        ):
            frame = frame.f_back
        if frame is None:
            return []
        g = frame.f_globals
        return [
            (f"global:{name}", grab(v), False)
            for name, v in sorted(g.items())
            if isinstance(v, self.torch.Tensor) and v.is_leaf and v.requires_grad
        ]

    @contextlib.contextmanager
    def installed(self):
        torch = self.torch
        nn = torch.nn
        rec = self
        orig_init = nn.Module.__init__
        orig_tensor_backward = torch.Tensor.backward
        orig_autograd_backward = torch.autograd.backward
        orig_autograd_grad = torch.autograd.grad

        orig_opt_init = torch.optim.Optimizer.__init__
        orig_zero_grad = torch.optim.Optimizer.zero_grad

        def module_init(self, *args, **kwargs):
            rec.modules.append(self)
            return orig_init(self, *args, **kwargs)

        orig_setstate = nn.Module.__setstate__

        def module_setstate(self, state):
            # a module made by copy.deepcopy (or unpickled) runs no __init__: a copy trained with
            # the original's optimizer (GG208) is a module of the program too
            rec.modules.append(self)
            return orig_setstate(self, state)

        def optimizer_init(self, *args, **kwargs):
            rec.optimizers.append(self)
            return orig_opt_init(self, *args, **kwargs)

        def in_eval_mode() -> bool:
            owned = {id(p) for opt in rec.optimizers for g in opt.param_groups for p in g["params"]}
            return any(not m.training and any(id(p) in owned for p in m.parameters(recurse=False))
                       for m in rec.modules)

        def wrap(fn, returns_grads=False):
            def wrapper(*args, **kwargs):
                if rec.depth == 0 and len(rec.roots) < 2:
                    rec.roots.append(rec.root_value(args, kwargs))
                if rec.depth == 0 and not returns_grads and in_eval_mode():
                    rec.eval_backwards += 1
                rec.depth += 1
                try:
                    result = fn(*args, **kwargs)
                finally:
                    rec.depth -= 1
                if rec.depth == 0:
                    rec.calls += 1
                    if not returns_grads:
                        rec.unstepped.update(id(o) for o in rec.optimizers)
                    if rec.first_grads is not None and rec.second_grads is None and not returns_grads:
                        rec.second_grads = rec.snapshot()
                    if rec.first_grads is None:
                        if returns_grads:  # torch.autograd.grad: the gradients are its result
                            rec.first_grads = [
                                (f"grad[{k}]", None if g is None else g.detach().clone(), True)
                                for k, g in enumerate(result)
                            ]
                        else:
                            rec.first_grads = rec.snapshot()
                return result

            wrapper.__wrapped__ = fn
            return wrapper

        def zero_grad(self, *args, **kwargs):
            if id(self) in rec.unstepped and any(
                    p.grad is not None and bool(p.grad.any()) for g in self.param_groups for p in g["params"]):
                rec.discarded += 1
            rec.unstepped.discard(id(self))
            return orig_zero_grad(self, *args, **kwargs)

        def step_pre_hook(optimizer, args, kwargs):
            rec.stepped.add(id(optimizer))
            rec.unstepped.discard(id(optimizer))
            if rec.depth == 0:
                rec.steps += 1
                grads = [p.grad for g in optimizer.param_groups for p in g["params"]]
                if all(gr is None or not bool(gr.any()) for gr in grads):
                    rec.empty_steps += 1
                k = next((i for i, o in enumerate(rec.optimizers) if o is optimizer), -1)
                log = rec.step_log.setdefault(k, [])
                if len(log) < 2:
                    log.append([None if gr is None else gr.detach().clone() for gr in grads])
            # the gradients the first step applies: a fix may change gradients that no
            # step uses (a GAN's generator gradients from the discriminator's loss,
            # zeroed before the generator steps), never these
            if rec.step_grads is None and rec.depth == 0:
                mine = {id(p) for g in optimizer.param_groups for p in g["params"]}
                keys = {}
                for key, p in _module_parameters(rec.modules):
                    keys.setdefault(id(p), key)
                rec.step_grads = [
                    (keys.get(id(p), f"step.group{gi}[{j}]"), None if p.grad is None else p.grad.detach().clone(), True)
                    for gi, g in enumerate(optimizer.param_groups) for j, p in enumerate(g["params"]) if id(p) in mine
                ]

        from torch.optim.optimizer import register_optimizer_step_pre_hook

        hook = register_optimizer_step_pre_hook(step_pre_hook)
        nn.Module.__init__ = module_init
        nn.Module.__setstate__ = module_setstate
        torch.optim.Optimizer.__init__ = optimizer_init
        torch.optim.Optimizer.zero_grad = zero_grad
        torch.Tensor.backward = wrap(orig_tensor_backward)
        torch.autograd.backward = wrap(orig_autograd_backward)
        torch.autograd.grad = wrap(orig_autograd_grad, returns_grads=True)
        try:
            yield self
        finally:
            hook.remove()
            nn.Module.__init__ = orig_init
            nn.Module.__setstate__ = orig_setstate
            torch.optim.Optimizer.__init__ = orig_opt_init
            torch.optim.Optimizer.zero_grad = orig_zero_grad
            torch.Tensor.backward = orig_tensor_backward
            torch.autograd.backward = orig_autograd_backward
            torch.autograd.grad = orig_autograd_grad


class ProgramTimeout(Exception):
    pass


def _alarm(signum, frame):  # pragma: no cover - only on a hanging program
    raise ProgramTimeout("program exceeded its time budget")


def holds_graph(value, torch, depth: int = 0) -> bool:
    """Does ``value`` keep an autograd graph alive: a tensor with a ``grad_fn``,
    or a list/tuple/dict or a plain object's attributes (a few levels deep) holding one?"""
    if isinstance(value, torch.Tensor):
        return value.grad_fn is not None
    if depth < 3 and isinstance(value, (list, tuple)):
        return any(holds_graph(v, torch, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return any(holds_graph(v, torch, depth + 1) for v in value.values())
    if depth < 3 and hasattr(value, "__dict__") and not isinstance(value, (type, torch.nn.Module)):
        return any(holds_graph(v, torch, depth + 1) for v in vars(value).values())  # a replay buffer's lists
    return False


def run_program(path: str, seed: int = 0, timeout: int = 60, holds: Tuple[str, ...] = (),
                copy_saved: bool = False) -> RunResult:
    """Run one program as ``__main__`` in a fresh namespace; never raises
    for the program's own exceptions. A program that runs longer than
    ``timeout`` seconds is stopped and reported as a ProgramTimeout crash."""
    import signal

    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    import random

    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except Exception:  # pragma: no cover - numpy optional
        pass
    rec = _Recorder(torch, path)
    t0 = time.perf_counter()
    status, etype, emsg = "train", None, None
    held: Dict[str, bool] = {}
    old_argv = sys.argv
    sys.argv = [path]
    # as `python path` does: the script's folder first on the path, so that a
    # program of several files imports its own modules (dropped again after)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    modules_before = set(sys.modules)
    can_alarm = hasattr(signal, "SIGALRM")
    if can_alarm:
        old_handler = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(timeout)
    try:
        with rec.installed(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            copies = (torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t) if copy_saved
                      else contextlib.nullcontext())
            with torch.enable_grad(), copies:
                namespace = runpy.run_path(path, run_name="__main__")
            held = {n: holds_graph(namespace.get(n), torch) for n in holds}
    except BaseException as e:  # noqa: BLE001 - a program may raise anything, even SystemExit
        if isinstance(e, KeyboardInterrupt):
            raise
        status, etype, emsg = "crash", type(e).__name__, str(e)
    finally:
        sys.argv = old_argv
        if folder in sys.path:
            sys.path.remove(folder)
        for name in set(sys.modules) - modules_before:
            mod_file = getattr(sys.modules.get(name), "__file__", None)
            if mod_file and os.path.dirname(os.path.abspath(mod_file)) == folder:
                del sys.modules[name]  # the next program's `seq_model` is its own
        if can_alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old_handler)
    result = RunResult(status, etype, emsg, time.perf_counter() - t0, rec.calls, rec.first_grads, rec.roots, held,
                       rec.second_grads)
    result.step_grads = rec.step_grads
    result.eval_backwards, result.steps, result.empty_steps = rec.eval_backwards, rec.steps, rec.empty_steps
    result.discarded = rec.discarded
    result.step_log = rec.step_log
    result.unowned_grads = rec.unowned_grads()
    return result


def crash_matches(result: RunResult, expected_error: str) -> bool:
    return result.status == "crash" and result.error_type == "RuntimeError" and expected_error in (result.error or "")


def compare_grads(a: Optional[list], b: Optional[list]) -> Tuple[bool, str]:
    """Equal first-iteration gradients of what the program learns? (ok, why-not)

    When the original creates optimizers, only the tensors they update are
    compared (a fix may stop gradients from reaching a frozen backbone that
    no optimizer steps); without optimizers (hand-written SGD), every module
    parameter is."""
    import torch

    if a is None or b is None:
        return False, f"no backward observed (original={a is not None}, fixed={b is not None})"
    if not a:
        return False, "no parameters were created"
    if a[0][0].startswith("grad["):  # torch.autograd.grad results
        keys_a = [e[0] for e in a]
    elif a[0][0].startswith("global:"):
        # plain tensors updated by hand: those that require grad in both runs (a
        # fix that stops a trained tensor requiring grad makes its own update
        # crash, which the "fixed program trains" test sees)
        names_b = {e[0] for e in b}
        keys_a = [e[0] for e in a if e[0] in names_b]
        if not keys_a:
            return False, "no tensor requires grad in both runs"
    elif any(e[2] for e in a):
        keys_a = [e[0] for e in a if e[2]]
    else:
        keys_a = [e[0] for e in a]
    ga = {e[0]: e[1] for e in a}
    gb = {e[0]: e[1] for e in b}
    for key in keys_a:
        if key not in gb:
            return False, f"{key}: missing from the fixed run"
        g, h = ga[key], gb[key]
        if (g is None) != (h is None):
            return False, f"{key}: grad is None in only one run"
        if g is not None and (g.shape != h.shape or not torch.allclose(g, h, rtol=1e-5, atol=1e-7)):
            return False, f"{key}: gradients differ"
    return True, ""


def compare_roots(a: list, b: list) -> Tuple[bool, str]:
    """Do the first two backward calls of two runs differentiate equal values?
    (For a carried-state bug: the original computes its second loss before
    the second backward raises; a fix that keeps the state gives the same
    second loss, a fix that resets it does not.)"""
    import torch

    if len(a) < 2 or len(b) < 2:
        return False, f"fewer than two backward calls observed (original={len(a)}, fixed={len(b)})"
    for k, (x, y) in enumerate(zip(a[:2], b[:2]), 1):
        if x is None or y is None or x.shape != y.shape or not torch.allclose(x, y, rtol=1e-5, atol=1e-7):
            return False, f"backward call #{k} differentiates a different value: {x} vs {y}"
    return True, ""


def compare_accumulation(orig_first: Optional[list], orig_second: Optional[list],
                         fixed_second: Optional[list]) -> Tuple[bool, str]:
    """Does the original accumulate gradients across iterations while the fix
    does not? Both runs take the same first step, so their second iterations
    start from the same parameters and compute the same fresh gradient; the
    original's ``.grad`` after the second backward must then equal its first
    gradient plus the fixed run's second one (and differ from the latter)."""
    import torch

    if orig_first is None or orig_second is None or fixed_second is None:
        return False, "fewer than two backward calls observed"
    first = {e[0]: e[1] for e in orig_first}
    fixed = {e[0]: e[1] for e in fixed_second}
    differ = False
    for key, g2 in ((e[0], e[1]) for e in orig_second):
        g1, f2 = first.get(key), fixed.get(key)
        if g2 is None or g1 is None or f2 is None:
            continue
        if not torch.allclose(g2, g1 + f2, rtol=1e-4, atol=1e-6):
            return False, f"{key}: the original's second gradient is not the sum of the first two"
        differ = differ or not torch.allclose(g2, f2, rtol=1e-4, atol=1e-6)
    return differ, "" if differ else "the fixed run's second gradient equals the original's"


def _same_parameters(a: list, b: list) -> bool:
    """Do two steps' gradient lists stand for the same parameters (as many, of the same shapes)?
    Not when a fix gave the optimizer more to hold (GG208: layers moved out of a plain list)."""
    return len(a) == len(b) and all(x is None or y is None or x.shape == y.shape for x, y in zip(a, b))


def compare_step_accumulation(orig: Dict[int, list], fixed: Dict[int, list]) -> Tuple[bool, str]:
    """The same question per optimizer step, for loops with several backward
    passes and optimizers (a GAN): does the second step of some optimizer in the
    original apply its first step's gradients plus the fixed run's second, while
    every other optimizer's second step is the fixed run's?"""
    import torch

    def close(a, b):
        return all((x is None) == (y is None) and (x is None or torch.allclose(x, y, rtol=1e-4, atol=1e-6))
                   for x, y in zip(a, b))

    grows = []
    for k, log in sorted(orig.items()):
        other = fixed.get(k, [])
        if len(log) < 2 or len(other) < 2:
            return False, f"optimizer #{k}: fewer than two steps"
        first, second, fresh = log[0], log[1], other[1]
        if not _same_parameters(first, fresh):
            continue  # the fix changed what this optimizer holds (GG208): nothing to compare
        summed = [None if (a is None or b is None) else a + b for a, b in zip(first, fresh)]
        if close(second, fresh):
            continue
        if not close(second, summed):
            return False, f"optimizer #{k}: its second step is neither the fixed run's nor the sum of the first two"
        grows.append(k)
    return bool(grows), "" if grows else "no optimizer's second step differs from the fixed run's"


def compare_step_leak(orig: Dict[int, list], fixed: Dict[int, list]) -> Tuple[bool, str]:
    """For a GAN whose generator's backward leaves gradients in the discriminator after
    the discriminator's zeroing: every optimizer's first step is the fixed run's (the
    parameters are the same when the leak happens), and some optimizer's second step
    differs from the fixed run's (it applies what the other loss left behind)."""
    import torch

    def close(a, b):
        return all((x is None) == (y is None) and (x is None or torch.allclose(x, y, rtol=1e-4, atol=1e-6))
                   for x, y in zip(a, b))

    differ = False
    for k, log in sorted(orig.items()):
        other = fixed.get(k, [])
        if len(log) < 2 or len(other) < 2:
            return False, f"optimizer #{k}: fewer than two steps"
        if not _same_parameters(log[0], other[0]):
            return False, f"optimizer #{k}: the fix changed the parameters it holds"
        if not close(log[0], other[0]):
            return False, f"optimizer #{k}: its first step is not the fixed run's"
        differ = differ or not close(log[1], other[1])
    return differ, "" if differ else "every optimizer's second step is the fixed run's"


def run_manifest(jobs: List[dict]) -> List[dict]:
    """jobs: [{"name", "original", "fixed" (path or None), "seed"}] → results."""
    out = []
    for job in jobs:
        seed = int(job.get("seed", 0))
        holds = tuple(job.get("holds", ()))
        orig = run_program(job["original"], seed, holds=holds)
        entry = {"name": job["name"], "original": orig.to_json()}
        if job.get("copy_saved"):
            # the original fails in its first backward: its gradients are those of the run with
            # every saved tensor copied when saved (what no in-place edit can reach)
            orig = run_program(job["original"], seed, holds=holds, copy_saved=True)
            entry["reference"] = orig.to_json()
        if job.get("fixed"):
            fixed = run_program(job["fixed"], seed, holds=holds)
            if job.get("fixed_owned") and orig.first_grads is not None and fixed.first_grads is not None:
                # GG208: the fix changes which parameters the optimizers hold (or stops gradients
                # reaching a network none holds); the first backward's gradients of what the
                # fixed program's optimizers update must be the original's
                owned = {e[0] for e in fixed.first_grads if e[2]}
                ok, why = compare_grads([(k, g, k in owned) for k, g, _ in orig.first_grads], fixed.first_grads)
            elif orig.step_grads is not None and not job.get("first_grads"):
                # what the first optimizer step applies (the original reaches it before it crashes)
                ok, why = compare_grads(orig.step_grads, fixed.step_grads)
            else:
                ok, why = compare_grads(orig.first_grads, fixed.first_grads)
            entry["fixed"] = fixed.to_json()
            entry["grads_equal"] = ok
            entry["grads_why"] = why
            ok, why = compare_roots(orig.roots, fixed.roots)
            entry["losses_equal"] = ok
            entry["losses_why"] = why
            ok, why = compare_accumulation(orig.first_grads, orig.second_grads, fixed.second_grads)
            entry["accumulates"] = ok
            entry["accumulates_why"] = why
            ok, why = compare_step_accumulation(orig.step_log, fixed.step_log)
            entry["step_accumulates"] = ok
            entry["step_accumulates_why"] = why
            ok, why = compare_step_leak(orig.step_log, fixed.step_log)
            entry["step_leaks"] = ok
            entry["step_leaks_why"] = why
        out.append(entry)
    return out


def _main(argv: List[str]) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if argv[:1] == ["--manifest"]:
        jobs = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        results = run_manifest(jobs)
        sys.stdout.write(json.dumps(results))
        return 0
    targets: List[Path] = []
    for a in argv or [str(FIXTURES)]:
        p = Path(a)
        targets.extend(fixture_paths(p) if p.is_dir() else [p])
    bad = 0
    counts: Dict[str, int] = {}
    t0 = time.perf_counter()
    for p in targets:
        spec = parse_header(p.read_text(encoding="utf-8"), str(p))
        counts[spec.label] = counts.get(spec.label, 0) + 1
        res = run_program(str(p), holds=spec.holds)
        if spec.runtime == "crash":
            ok = crash_matches(res, spec.error)
        else:
            ok = res.status == "train" and all(res.holds.values())
        bad += not ok
        detail = "" if res.status == "train" else f"{res.error_type}: {(res.error or '').splitlines()[0][:90]}"
        print(f"{'ok ' if ok else 'BAD'} {spec.runtime:5} -> {res.status:5} {res.seconds:5.2f}s bw={res.backward_calls:<3} {p.name} {detail}")
    print(f"\n{len(targets)} programs, {bad} mislabelled, {time.perf_counter() - t0:.1f}s")
    for k in sorted(counts):
        print(f"  {counts[k]:3}  {k}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
