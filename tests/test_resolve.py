"""Cross-file resolution: facts about names imported from the user's other modules."""

from __future__ import annotations

import os
import textwrap
import time

import pytest

from gradguard.engine import check_source
from gradguard.analysis import resolve
from gradguard.engine.document import resolve_external_facts

UTILS = textwrap.dedent('''\
    import torch


    def repackage_hidden(h):
        """Detach hidden states from their history."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)


    def passthrough(h):
        return h
''')

MODEL = textwrap.dedent('''\
    import torch.nn as nn


    class RNNModel(nn.Module):
        def __init__(self, ntoken, nhid):
            super().__init__()
            self.encoder = nn.Embedding(ntoken, nhid)
            self.rnn = nn.GRU(nhid, nhid)
            self.decoder = nn.Linear(nhid, ntoken)

        def forward(self, x, hidden):
            out, hidden = self.rnn(self.encoder(x), hidden)
            return self.decoder(out), hidden
''')

TRAIN = textwrap.dedent('''\
    import torch
    from model import RNNModel
    from utils import repackage_hidden as detach_all, passthrough


    def train(data, targets):
        model = RNNModel(10, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        hidden = torch.zeros(1, 4, 8)
        for x, y in zip(data, targets):
            hidden = detach_all(hidden)
            out, hidden = model(x, hidden)
            loss = (out - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
''')


@pytest.fixture(autouse=True)
def _fresh_cache():
    resolve.clear_cache()
    yield
    resolve.clear_cache()


def _project(tmp_path, **files):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return tmp_path


def test_two_file_project_facts_are_renamed_to_the_local_alias(tmp_path):
    root = _project(tmp_path, **{"utils.py": UTILS, "model.py": MODEL, "train.py": TRAIN})
    facts = resolve_external_facts(TRAIN, str(root / "train.py"), str(root))
    assert "class:RNNModel" in facts
    assert "fn:detach_all" in facts  # `as` alias, not the defining name
    assert "fn:repackage_hidden" not in facts
    assert "fn:passthrough" not in facts  # imported but never used
    fn = facts["fn:detach_all"]
    # same facts the summarizer gives the definition in its own file
    own = {k: v for k, v in check_source_facts(UTILS).items()}
    assert fn == own["fn:repackage_hidden"]
    assert fn.detaches
    cls = facts["class:RNNModel"]
    # raw constructor names are qualified with the *defining* file's aliases
    assert dict(cls.attrs)["rnn"] == "torch.nn.GRU"
    assert cls.bases == ("torch.nn.Module",)
    assert resolve.stats()["jedi_calls"] == 0  # local modules are found by path


def check_source_facts(src):
    import ast

    from gradguard.analysis.summary import summarize
    from gradguard.engine.document import fact_sources

    out = {}
    for stmt in ast.parse(src).body:
        out.update(dict(summarize(stmt, True, fact_sources())))
    return out


def test_facts_change_the_findings_like_a_same_file_definition(tmp_path):
    """A detaching helper from another file silences GG101 exactly like a local one;
    a passthrough helper does not."""
    root = _project(tmp_path, **{"utils.py": UTILS, "model.py": MODEL, "train.py": TRAIN})
    facts = resolve_external_facts(TRAIN, str(root / "train.py"), str(root))
    with_facts = check_source(TRAIN, str(root / "train.py"), external_facts=facts).findings
    assert [f.code for f in with_facts if f.code == "GG101"] == []

    buggy = TRAIN.replace("hidden = detach_all(hidden)", "hidden = passthrough(hidden)")
    facts2 = resolve_external_facts(buggy, str(root / "train.py"), str(root))
    assert "fn:passthrough" in facts2 and "fn:detach_all" not in facts2
    inline = buggy.replace("from utils import repackage_hidden as detach_all, passthrough\n", "") + "\n\n" + \
        "def passthrough(h):\n    return h\n"
    # the same program with the helper pasted in gives the same GG101 verdict
    want = [f.code for f in check_source(inline, "inline.py").findings if f.code == "GG101"]
    got = [f.code for f in check_source(buggy, str(root / "train.py"), external_facts=facts2).findings
           if f.code == "GG101"]
    assert got == want == ["GG101"]
    # without the facts the in-file pass cannot know what `passthrough` does
    assert [f.code for f in check_source(buggy, str(root / "train.py")).findings if f.code == "GG101"] == []


def test_package_relative_and_reexport(tmp_path):
    root = _project(tmp_path, **{
        "pkg/__init__.py": "from .nets import RNNModel\nfrom .helpers import *\n",
        "pkg/nets.py": MODEL,
        "pkg/helpers.py": UTILS,
        "pkg/train.py": "from .nets import RNNModel as M\n\nm = M(1, 2)\n",
        "main.py": "from pkg import RNNModel, repackage_hidden\n\nRNNModel(1, 2)\nrepackage_hidden(None)\n",
    })
    facts = resolve_external_facts((root / "pkg/train.py").read_text(), str(root / "pkg/train.py"), str(root))
    assert "class:M" in facts
    facts = resolve_external_facts((root / "main.py").read_text(), str(root / "main.py"), str(root))
    assert "class:RNNModel" in facts and "fn:repackage_hidden" in facts


def test_a_module_imported_whole_is_read_by_its_dotted_names(tmp_path):
    """``import utils`` / ``import pkg.nets as nets`` / ``from pkg import helpers``:
    the names read off the module get facts under their dotted spelling; names the
    module does not define, and modules that are not the user's, get none."""
    root = _project(tmp_path, **{
        "utils.py": UTILS,
        "pkg/__init__.py": "",
        "pkg/nets.py": MODEL,
        "pkg/helpers.py": UTILS,
    })
    src = textwrap.dedent('''\
        import os, utils  # 工具
        import torch.nn as nn
        import pkg.nets as nets
        import pkg.nets
        from pkg import helpers as H

        net = nets.RNNModel(10, 8)
        other = pkg.nets.RNNModel(10, 8)
        h = utils.repackage_hidden(None)
        h = H . passthrough(h)
        utils.no_such_name
        os.path.join("a", "b")
        nn.GRU(1, 2)
    ''')
    facts = resolve_external_facts(src, str(root / "train.py"), str(root))
    assert {k for k in facts if k.startswith(("fn:", "class:"))} == {
        "class:nets.RNNModel", "class:pkg.nets.RNNModel", "fn:utils.repackage_hidden", "fn:H.passthrough"}
    assert facts["fn:utils.repackage_hidden"].detaches
    assert not facts["fn:H.passthrough"].detaches
    assert dict(facts["class:nets.RNNModel"].attrs)["rnn"] == "torch.nn.GRU"
    assert resolve.stats()["jedi_calls"] == 0


def test_a_helper_read_off_an_imported_module_changes_the_findings(tmp_path):
    """`hidden = utils.repackage_hidden(hidden)` cuts the graph as the helper pasted
    in would; `utils.passthrough` does not. Before, every call read off a module was
    an unknown callable whose result kept its argument's graph: a false report."""
    root = _project(tmp_path, **{"utils.py": UTILS, "model.py": MODEL})
    train = TRAIN.replace("from utils import repackage_hidden as detach_all, passthrough\n", "import utils\n")
    train = train.replace("from model import RNNModel\n", "import model as models\n")
    train = train.replace("RNNModel(10, 8)", "models.RNNModel(10, 8)")
    ok = train.replace("detach_all(hidden)", "utils.repackage_hidden(hidden)")
    bad = train.replace("detach_all(hidden)", "utils.passthrough(hidden)")
    path = str(root / "train.py")
    for text, want in ((ok, []), (bad, ["GG101"])):
        facts = resolve_external_facts(text, path, str(root))
        assert "class:models.RNNModel" in facts
        assert [f.code for f in check_source(text, path, external_facts=facts).findings] == want
    # without the facts the helper is an unknown call that keeps the graph
    assert [f.code for f in check_source(ok, path).findings] == ["GG101"]


def test_gg102_reads_a_label_helper_off_an_imported_module(tmp_path):
    """GG102 asks the helper's facts by its dotted name too: labels a module's
    helper makes under no_grad carry no graph (silent, where the unknown call was
    reported); labels it makes with autograd on still carry X's graph."""
    helpers = textwrap.dedent('''\
        import torch


        def true_labels(X, w):
            with torch.no_grad():
                return X @ w


        def noisy_labels(X, w):
            return X @ w + 0.01
    ''')
    root = _project(tmp_path, **{"make_data.py": helpers})
    program = textwrap.dedent('''\
        import torch
        import make_data

        X = torch.rand(8, 3, requires_grad=True)
        w = torch.ones(3, 1)
        Y = make_data.HELPER(X, w)
        lin = torch.nn.Linear(3, 1)
        for i in range(3):
            loss = ((lin(X) - Y) ** 2).mean()
            loss.backward()
    ''')
    path = str(root / "train.py")
    for helper, want in (("true_labels", []), ("noisy_labels", [("GG102", 5)])):
        text = program.replace("HELPER", helper)
        facts = resolve_external_facts(text, path, str(root))
        assert f"fn:make_data.{helper}" in facts
        got = [(f.code, f.range.start.line) for f in check_source(text, path, external_facts=facts).findings]
        assert got == want, helper
        # a local variable of that name is not the module
        shadowed = text.replace("Y = make_data.", "make_data = object()\nY = make_data.")
        assert [f.code for f in check_source(shadowed, path, external_facts=facts).findings] == ["GG102"]


def test_torch_stdlib_and_installed_names_never_reach_jedi(tmp_path):
    src = ("import os\nfrom torch import nn\nfrom collections import OrderedDict\nfrom pygls import uris\n"
           "from torch.nn import GRU\nx = nn.GRU(1, 2)\nGRU\nOrderedDict()\nuris\n")
    root = _project(tmp_path, **{"a.py": src})
    assert resolve_external_facts(src, str(root / "a.py"), str(root)) == {}
    st = resolve.stats()
    assert st["jedi_calls"] == 0 and st["jedi_files"] == 0


def test_jedi_fallback_finds_what_paths_cannot(tmp_path):
    """A module reachable only through the project's sys.path (here: a `lib/`
    folder that is neither next to the file nor the root) goes to jedi."""
    root = _project(tmp_path, **{
        "lib/helpers_x.py": UTILS,
        "app/train.py": "import sys\nsys.path.insert(0, '../lib')\nfrom helpers_x import repackage_hidden\n"
                        "repackage_hidden(None)\n",
    })
    src = (root / "app/train.py").read_text()
    jedi = pytest.importorskip("jedi")
    orig = jedi.Project

    def project_with_lib(path, **kw):
        kw.setdefault("added_sys_path", [str(root / "lib")])
        return orig(path, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(jedi, "Project", project_with_lib)
    try:
        facts = resolve_external_facts(src, str(root / "app/train.py"), str(root))
    finally:
        mp.undo()
    assert "fn:repackage_hidden" in facts
    assert resolve.stats()["jedi_calls"] >= 1 and resolve.stats()["jedi_files"] == 1


def test_cache_per_content_and_dependency_mtime(tmp_path):
    root = _project(tmp_path, **{"utils.py": UTILS, "model.py": MODEL, "train.py": TRAIN})
    path, r = str(root / "train.py"), str(root)
    first = resolve_external_facts(TRAIN, path, r)
    assert resolve_external_facts(TRAIN, path, r) == first
    assert resolve.stats()["cache_hits"] == 1
    # the dependency changes: the cache must not answer
    new_utils = UTILS.replace("return h.detach()", "return h")
    (root / "utils.py").write_text(new_utils, encoding="utf-8")
    st = os.stat(root / "utils.py")
    os.utime(root / "utils.py", ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    second = resolve_external_facts(TRAIN, path, r)
    assert resolve.stats()["cache_hits"] == 1
    assert second["fn:detach_all"] != first["fn:detach_all"]
    # the file's own content changes: a new key
    resolve_external_facts(TRAIN + "\n# 注释\n", path, r)
    assert resolve.stats()["cache_hits"] == 1


def test_bad_input_never_raises(tmp_path):
    root = _project(tmp_path, **{"utils.py": "def broken(:\n", "model.py": MODEL})
    bad_src = "from utils import broken\nfrom model import RNNModel\nbroken(\nRNNModel(\n"
    facts = resolve_external_facts(bad_src, str(root / "x.py"), str(root))  # syntax error: import lines still tell
    assert "class:RNNModel" in facts and "fn:broken" not in facts
    assert resolve_external_facts("", None, None) == {}
    assert resolve_external_facts("from nowhere_at_all import x\nx()\n", str(root / "x.py"), str(root),
                                  use_jedi=False) == {}
    assert resolve_external_facts("\x00", str(root / "x.py"), "/does/not/exist") == {}
    assert resolve_external_facts(None, None, None) == {}  # type: ignore[arg-type]


def test_time_budget(tmp_path):
    root = _project(tmp_path, **{"utils.py": UTILS, "train.py": TRAIN})
    t0 = time.monotonic()
    facts = resolve_external_facts(TRAIN, str(root / "train.py"), str(root), budget=0.0)
    assert time.monotonic() - t0 < 1.0
    assert facts == {}
    assert resolve.stats()["timeouts"] == 1


def test_importing_resolve_does_not_import_jedi():
    import subprocess
    import sys

    code = "import sys, gradguard.analysis.resolve; print('jedi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_package_absolute_import_without_a_root(tmp_path):
    """`proj/pkg3/mod.py` importing `proj.pkg1.models`: found from the package
    layout even when the caller passes the file's own directory as the root."""
    root = _project(tmp_path, **{
        "proj/__init__.py": "", "proj/pkg1/__init__.py": "", "proj/pkg3/__init__.py": "",
        "proj/pkg1/models.py": MODEL,
        "proj/pkg3/mod.py": "from proj.pkg1.models import RNNModel\n\nRNNModel(1, 2)\n",
    })
    path = root / "proj/pkg3/mod.py"
    facts = resolve_external_facts(path.read_text(), str(path), str(path.parent))
    assert "class:RNNModel" in facts
    assert resolve.stats()["jedi_calls"] == 0


def test_multiline_parenthesised_import_and_unused_names(tmp_path):
    root = _project(tmp_path, **{"utils.py": UTILS, "model.py": MODEL})
    src = ("from utils import (  # helpers\n    repackage_hidden,\n    passthrough as pt,\n)\n"
           "from model import RNNModel\n\ndef f(h):\n    return pt(repackage_hidden(h))\n")
    facts = resolve_external_facts(src, str(root / "t.py"), str(root))
    assert {"fn:repackage_hidden", "fn:pt"} <= set(facts)
    assert not any(k.endswith(":RNNModel") for k in facts)  # imported, never used


def test_jedi_asked_once_per_unknown_module(tmp_path):
    """A package of another environment (unknown here, not local): jedi's
    sys.path search is paid once per process, not in every file importing it."""
    pytest.importorskip("jedi")
    root = _project(tmp_path, **{"a.py": "", "b.py": ""})
    for name in ("a.py", "b.py", "a.py"):
        src = f"from some_pkg_nowhere_xyz import thing\nthing()\n# {name}\n"
        assert resolve_external_facts(src, str(root / name), str(root)) == {}
    assert resolve.stats()["jedi_calls"] == 1


STEPS = textwrap.dedent('''\
    def train_step(model, opt, x, y, hidden):
        out, hidden = model(x, hidden)
        loss = (out - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return hidden


    class Trainer:
        def __init__(self, model, opt):
            self.model, self.opt = model, opt

        def step(self, x, y, hidden):
            out, hidden = self.model(x, hidden)
            self.opt.zero_grad()
            (out - y).pow(2).mean().backward()
            self.opt.step()
            return hidden


    def evaluate(model, x, hidden):
        return model(x, hidden)


    def run_batch(model, opt, batch, hidden):
        x, y = batch
        return train_step(model, opt, x, y, hidden)
''')

# backward() happens only inside the imported helper: this file never spells it
LOOP = textwrap.dedent('''\
    import torch
    from model import RNNModel
    from steps import train_step  # 训练一步


    def main(batches):
        model = RNNModel(10, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        hidden = torch.zeros(1, 4, 8)
        for x, y in batches:
            hidden = train_step(model, opt, x, y, hidden)
''')


def test_a_file_whose_only_backward_is_in_an_imported_helper_is_analysed(tmp_path):
    from gradguard.engine.document import may_backprop

    root = _project(tmp_path, **{"steps.py": STEPS, "model.py": MODEL, "train.py": LOOP})
    assert not may_backprop(LOOP)
    facts = resolve_external_facts(LOOP, str(root / "train.py"), str(root))
    assert facts["fn:train_step"].calls_backward and may_backprop(LOOP, facts)
    found = check_source(LOOP, str(root / "train.py"), external_facts=facts).findings
    assert [(f.code, f.range.start.line) for f in found] == [("GG101", 10)]
    # a class whose method back-propagates counts too; a helper that does not, does not
    via_class = LOOP.replace("from steps import train_step", "from steps import Trainer").replace(
        "hidden = train_step(model, opt, x, y, hidden)", "hidden = Trainer(model, opt).step(x, y, hidden)")
    facts = resolve_external_facts(via_class, str(root / "train.py"), str(root))
    assert may_backprop(via_class, facts)
    assert [f.code for f in check_source(via_class, str(root / "train.py"), external_facts=facts).findings] \
        == ["GG101"]
    inference = LOOP.replace("train_step", "evaluate").replace("(model, opt, x, y, hidden)", "(model, x, hidden)")
    facts = resolve_external_facts(inference, str(root / "train.py"), str(root))
    assert "fn:evaluate" in facts and not may_backprop(inference, facts)
    assert check_source(inference, str(root / "train.py"), external_facts=facts).findings == ()
    # and the CLI, which resolves the imports itself, reports the carried hidden state
    from gradguard.cli import main as cli_main

    import contextlib
    import io
    import json

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli_main(["check", "--format", "json", "--no-cache", str(root / "train.py")])
    assert [(i["code"], i["line"]) for i in json.loads(out.getvalue())] == [("GG101", 11)]


def test_an_imported_helper_that_delegates_its_backward_is_folded_where_it_is_defined(tmp_path):
    """run_batch() back-propagates through train_step() of its own module. The
    importing file gets facts that say so, never a reference to a name it would
    look up among its own (here it has a train_step of its own that does not)."""
    loop = LOOP.replace("from steps import train_step", "from steps import run_batch").replace(
        "hidden = train_step(model, opt, x, y, hidden)", "hidden = run_batch(model, opt, (x, y), hidden)")
    loop += "\n\ndef train_step(*args):\n    return None\n"
    root = _project(tmp_path, **{"steps.py": STEPS, "model.py": MODEL, "train.py": loop})
    facts = resolve_external_facts(loop, str(root / "train.py"), str(root))
    fn = facts["fn:run_batch"]
    assert fn.calls_backward and fn.backward_params == frozenset({2, 3}) and fn.delegates == ()
    assert not any(k.startswith("gg102:bwcalls:") for k in facts)  # names of steps.py, not of train.py
    found = check_source(loop, str(root / "train.py"), external_facts=facts).findings
    assert [(f.code, f.range.start.line) for f in found] == [("GG101", 10)]


TRAINUTIL = textwrap.dedent('''\
    def step(model, opt, x, y):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


    def train(model, opt, x, y, epochs=5):
        for _ in range(epochs):
            step(model, opt, x, y)
''')

STALE_LABEL = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    from trainutil import train

    X = torch.rand(8, 3, requires_grad=True)
    Y = X @ torch.tensor([[1.0], [2.0], [3.0]])  # 标签带着 X 的计算图
    model = nn.Linear(3, 1)
    train(model, torch.optim.SGD(model.parameters(), lr=0.1), X, Y)


    def step(*args):  # a step of this file's own, which does not back-propagate
        return None
''')


def test_an_imported_training_loop_that_back_propagates_through_its_helper(tmp_path):
    """GG102 across files: train()'s loop back-propagates through step() of its
    own module; the importing file gets train()'s facts with that composed
    (``loop_backward``), never the names it was composed from (``loop_delegates``)."""
    root = _project(tmp_path, **{"trainutil.py": TRAINUTIL, "main.py": STALE_LABEL})
    facts = resolve_external_facts(STALE_LABEL, str(root / "main.py"), str(root))
    train = facts["fn:train"]
    assert {2, 3} <= train.loop_backward and train.loop_delegates == () and train.loop_backward_globals == ()
    found = check_source(STALE_LABEL, str(root / "main.py"), external_facts=facts).findings
    assert [(f.code, f.range.start.line) for f in found] == [("GG102", 5)]
    assert check_source(STALE_LABEL, str(root / "main.py")).findings == ()  # nothing known without the facts


@pytest.mark.parametrize("ch", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\u2029"])
def test_imported_names_are_read_on_pythons_lines_not_splitlines(ch):
    """A comment runs to the end of the line, and Python ends lines only at \\n,
    \\r\\n or \\r: a form feed or U+2028 inside the comment does not end it, so
    the name after it is part of the comment, not an imported name."""
    source = f"from helpers import (make,  # 工厂{ch} forget\n    build)\n"
    names = [(mod, name) for mod, _, name, _, _, _ in resolve._imports_of(source)]
    assert names == [("helpers", "make"), ("helpers", "build")]


def test_one_list_of_libraries_that_are_never_the_users():
    """The CLI's cheap test (does this file need a look-up at all?) and the
    resolver (is this module followed into the user's files?) read the same list:
    a file importing only from those libraries is not looked up, and the resolver
    would not follow any of its imports either; a user's module is followed by both."""
    from gradguard.analysis.libraries import NEVER_USERS
    from gradguard.analysis.resolve import _is_external_module
    from gradguard.cli import resolve_needed

    for name in sorted(NEVER_USERS):
        assert _is_external_module(f"{name}.sub", 0), name
        assert not resolve_needed(f"import {name}\nfrom {name}.sub import x  # 注释\n"), name
    for src, user in (("import wandb, einops\nimport os", False), ("from 模型 import 网络", True),
                      ("import torch\nimport utils", True), ("from .models import Net", True)):
        assert resolve_needed(src) is user, src
    assert not _is_external_module("utils", 0) and not _is_external_module("torch", 1)


GLOBAL_TRAIN = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    X = torch.rand(8, 3)
    Y = torch.rand(8, 1)
    model = nn.Linear(3, 1)


    def train(epochs=3):
        for _ in range(epochs):
            ((model(X) - Y) ** 2).mean().backward()
''')

STALE_GLOBAL = textwrap.dedent('''\
    import torch
    from trainglobal import train

    X = torch.rand(8, 3, requires_grad=True)
    Y = X @ torch.ones(3, 1)  # 这个 Y 不是 trainglobal 的 Y
    train()
''')


def test_the_globals_an_imported_loop_back_propagates_are_its_own_modules(tmp_path):
    """train()'s loop back-propagates its own module's X and Y; the importing file's
    X and Y are other variables: no GG102 there (it trains: train() never reads them)."""
    root = _project(tmp_path, **{"trainglobal.py": GLOBAL_TRAIN, "main.py": STALE_GLOBAL})
    facts = resolve_external_facts(STALE_GLOBAL, str(root / "main.py"), str(root))
    assert facts["fn:train"].calls_backward and facts["fn:train"].loop_backward_globals == ()
    assert [f.code for f in check_source(STALE_GLOBAL, str(root / "main.py"), external_facts=facts).findings] == []
    same_file = GLOBAL_TRAIN.replace("X = torch.rand(8, 3)", "X = torch.rand(8, 3, requires_grad=True)").replace(
        "Y = torch.rand(8, 1)", "Y = X @ torch.ones(3, 1)") + "\n\ntrain()\n"
    assert [(f.code, f.data["variable"]) for f in check_source(same_file, "t.py").findings] == [("GG102", "Y")]


# --------------------------------------------------------------------------
# what a helper of another module makes, and what a filler there puts in a list

PEERS = textwrap.dedent('''\
    import torch.nn as nn


    class TinyNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(10, 4)

        def forward(self, x):
            return self.fc(x).tanh()


    def tiny():
        net = TinyNet()
        return net
''')

MUTUAL_TRAIN = textwrap.dedent('''\
    import torch
    import torch.nn.functional as F
    from peers import tiny


    def mutual(batches, n=2):
        models = [tiny() for _ in range(n)]
        opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
        for x, y in batches:
            outputs = []
            for model in models:
                outputs.append(model(x))
            for i in range(n):
                kl = 0
                for j in range(n):
                    if i != j:
                        kl += F.kl_div(F.log_softmax(outputs[i], dim=1), F.softmax(outputs[j], dim=1))
                loss = F.cross_entropy(outputs[i], y) + kl
                opts[i].zero_grad()
                loss.backward()
                opts[i].step()
''')


def _gg103_with(tmp_path, files, main):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    path = tmp_path / "train.py"
    path.write_text(main, encoding="utf-8")
    facts = resolve_external_facts(main, str(path), str(tmp_path))
    return [f for f in check_source(main, str(path), external_facts=facts).findings if f.code == "GG103"], facts


def test_a_helper_of_another_module_making_a_module_is_that_class(tmp_path):
    found, facts = _gg103_with(tmp_path, {"peers.py": PEERS}, MUTUAL_TRAIN)
    assert [f.range.start.line + 1 for f in found] == [20]  # loss.backward(): the peers' graphs freed
    assert facts["fn:tiny"].makes == "tiny" and facts["class:tiny"].has_forward


@pytest.mark.parametrize("old, new", [
    ("    net = TinyNet()\n    return net", "    return TinyNet() if nn else None"),  # not surely the class
    ("class TinyNet(nn.Module):", "class TinyNet:"),  # a plain object: its calls save nothing known
])
def test_a_helper_of_another_module_not_surely_making_a_module_tells_nothing(tmp_path, old, new):
    assert old in PEERS
    src = PEERS.replace(old, new)
    if new == "class TinyNet:":
        src = src.replace("        super().__init__()\n", "").replace("    def forward(self, x)", "    def __call__(self, x)")
    found, facts = _gg103_with(tmp_path, {"peers.py": src}, MUTUAL_TRAIN)
    assert found == [] and "class:tiny" not in facts


AGENT = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    from torch.distributions import Categorical


    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            self.saved_log_probs = []

        def forward(self, x):
            return self.fc(x).softmax(-1)


    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)


    def select_action(state):
        m = Categorical(policy(state))
        action = m.sample()
        policy.saved_log_probs.append(m.log_prob(action))
        return action.item()


    def finish_episode():
        loss = -torch.stack(policy.saved_log_probs).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
''')

EPISODES = textwrap.dedent('''\
    import torch
    from agent import finish_episode, select_action

    for episode in range(3):
        for t in range(5):
            select_action(torch.randn(4))
        finish_episode()
        finish_episode()
''')


def test_a_list_filled_by_a_helper_of_another_module_is_followed(tmp_path):
    found, facts = _gg103_with(tmp_path, {"agent.py": AGENT}, EPISODES)
    assert [f.range.start.line + 1 for f in found] == [8]  # the second finish_episode()
    [eff] = [e for e in facts["fn:select_action"].containers if e.appends]
    assert eff.saving and eff.saving_via == ()


_CLEAR = ("    return action.item()\n", "    return action.item()\n\n\ndef clear():\n    del policy.saved_log_probs[:]\n")


def _episodes(new_tail: str) -> str:
    old = "    finish_episode()\n    finish_episode()\n"
    assert old in EPISODES
    return EPISODES.replace("import finish_episode,", "import clear, finish_episode,").replace(old, new_tail)


@pytest.mark.parametrize("agent, episodes", [
    # once per episode, the list cleared after it: trains
    (AGENT.replace(*_CLEAR), _episodes("    finish_episode()\n    clear()\n")),
    # two rounds of acting and learning per episode, the list cleared after each: trains
    (AGENT.replace(*_CLEAR), _episodes("    finish_episode()\n    clear()\n    for t in range(5):\n"
                                       "        select_action(torch.randn(4))\n    finish_episode()\n    clear()\n")),
    (AGENT.replace("policy = Policy()", "policy = make_policy()"), EPISODES),  # what policy is: not known
])
def test_a_list_filled_in_another_module_silent_without_a_proof(tmp_path, agent, episodes):
    assert agent != AGENT
    found, _ = _gg103_with(tmp_path, {"agent.py": agent}, episodes)
    assert found == []


# --------------------------------------------------------------------------
# the other way: a method's parameters bound by callers in the files importing its class

EDGE_MODELS = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class EdgeModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.generator = nn.Linear(6, 6)
            self.discriminator = nn.Linear(6, 1)
            self.gen_optimizer = torch.optim.Adam(self.generator.parameters())
            self.dis_optimizer = torch.optim.Adam(self.discriminator.parameters())

        def process(self, images, edges):
            outputs = self.generator(images)
            dis_loss = self.discriminator(edges).mean() - self.discriminator(outputs.detach()).mean()
            gen_loss = -self.discriminator(outputs).mean()
            return outputs, gen_loss, dis_loss

        def backward(self, gen_loss=None, dis_loss=None):
            dis_loss.backward()
            self.dis_optimizer.step()
            gen_loss.backward()  # 判别器已被更新
            self.gen_optimizer.step()
''')

EDGE_CONNECT = textwrap.dedent('''\
    import torch
    from models import EdgeModel as Edges


    class EdgeConnect:
        def __init__(self):
            self.edge_model = Edges().to("cpu")

        def train(self):
            for it in range(3):
                outputs, gen_loss, dis_loss = self.edge_model.process(torch.randn(4, 6), torch.randn(4, 6))
                self.edge_model.backward(gen_loss, dis_loss)
''')


def _check_models(tmp_path, trainer, where="edge_connect.py"):
    """edge-connect's layout (src/models.py, src/edge_connect.py): the method's file is
    checked with what resolution finds, its callers included. Under torch the same
    program in one file crashes (fixtures/gg103_loss_handed_by_a_trainer_keeping_the_model.py)."""
    (tmp_path / "models.py").write_text(EDGE_MODELS, encoding="utf-8")
    if trainer is not None:
        target = tmp_path / where
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(trainer, encoding="utf-8")
    path = tmp_path / "models.py"
    facts = resolve_external_facts(EDGE_MODELS, str(path), str(tmp_path))
    found = [f for f in check_source(EDGE_MODELS, str(path), external_facts=facts).findings if f.code == "GG103"]
    return found, facts


def test_a_method_bound_by_callers_in_the_file_importing_its_class(tmp_path):
    found, facts = _check_models(tmp_path, EDGE_CONNECT)
    assert [f.range.start.line + 1 for f in found] == [22]  # gen_loss.backward()
    assert "`process()`" in found[0].message["en"] and "`self.discriminator`" in found[0].message["en"]
    [(ctor, recv, _)] = facts["callargs:backward"]
    assert (ctor, recv) == ("EdgeModel", "self.edge_model")  # named as the defining file names it
    # the caller edited: the next resolution sees it (its file is a dependency of the result)
    time.sleep(0.01)
    fixed = EDGE_CONNECT.replace("            self.edge_model.backward(gen_loss, dis_loss)",
                                 "                gen_loss = gen_loss.detach()\n"
                                 "            self.edge_model.backward(gen_loss, dis_loss)")
    assert fixed != EDGE_CONNECT
    (tmp_path / "edge_connect.py").write_text(fixed, encoding="utf-8")
    os.utime(tmp_path / "edge_connect.py", ns=(time.time_ns(), time.time_ns() + 10_000_000))
    again = resolve_external_facts(EDGE_MODELS, str(tmp_path / "models.py"), str(tmp_path))
    assert [f for f in check_source(EDGE_MODELS, str(tmp_path / "models.py"), external_facts=again).findings
            if f.code == "GG103"] == []


@pytest.mark.parametrize("trainer, where", [
    (None, "edge_connect.py"),  # no caller: the parameters are unknown
    (EDGE_CONNECT.replace("            self.edge_model.backward(gen_loss, dis_loss)",
                          "                gen_loss = gen_loss.detach()\n                self.edge_model.backward(gen_loss, dis_loss)"),
     "edge_connect.py"),  # the caller cuts it first
    (EDGE_CONNECT.replace("from models import EdgeModel as Edges", "from other import EdgeModel as Edges"),
     "edge_connect.py"),  # another module's class of that name
    (EDGE_CONNECT.replace("self.edge_model.backward(gen_loss", "self.other.backward(gen_loss"), "edge_connect.py"),
    (EDGE_CONNECT, "deeper/edge_connect.py"),  # a caller below the file's folder is not looked for (a miss)
])
def test_callers_in_other_files_silent_without_a_proof(tmp_path, trainer, where):
    assert trainer is None or trainer != EDGE_CONNECT or where != "edge_connect.py"
    found, _ = _check_models(tmp_path, trainer, where)
    assert found == []


def test_only_a_file_whose_methods_back_propagate_their_parameters_looks_for_callers():
    from gradguard.cli import resolve_needed

    assert resolve.may_be_called(EDGE_MODELS) and resolve_needed(EDGE_MODELS)
    assert not resolve.may_be_called(EDGE_MODELS.replace("gen_loss.backward()", "gen_loss.sum().item()")
                                     .replace("dis_loss.backward()", "dis_loss.sum().item()"))
    assert not resolve.may_be_called(MODEL) and not resolve_needed("import torch\n" + MODEL.split("\n", 1)[1])


def test_a_list_filled_by_a_module_imported_whole(tmp_path):
    """``import agent`` then ``agent.select_action(...)``, ``agent.finish_episode()``
    twice: the same container, the same proof."""
    episodes = EPISODES.replace("from agent import finish_episode, select_action", "import agent").replace(
        "select_action(torch", "agent.select_action(torch").replace("    finish_episode()", "    agent.finish_episode()")
    assert episodes.count("agent.finish_episode()") == 2
    found, _ = _gg103_with(tmp_path, {"agent.py": AGENT}, episodes)
    assert [f.range.start.line + 1 for f in found] == [8]
    once = episodes.replace("    agent.finish_episode()\n    agent.finish_episode()\n",
                            "    agent.finish_episode()\n    del agent.policy.saved_log_probs[:]\n")
    assert once != episodes
    found, _ = _gg103_with(tmp_path, {"agent.py": AGENT}, once)
    assert found == []
