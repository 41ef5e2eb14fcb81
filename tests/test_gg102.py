"""GG102 stale-graph: behaviour on realistic snippets.

Which operations crash (saved tensors) and which only leak gradient was
measured with torch itself; the runnable counterparts of these snippets live in
tests/fixtures (gg102_*, ok_*) and are executed by tests/test_fixtures.py.
"""

from __future__ import annotations

import os
import random
import textwrap
from pathlib import Path

import pytest

from gradguard.engine import Position, Range, Severity, check_source
from gradguard.model.text import apply_text_edits
from gradguard.rules import get_rule
from seed_programs import REGRESSION_SEED



def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def gg102(source: str):
    return [f for f in check_source(source).findings if f.code == "GG102"]


def only(source: str):
    found = gg102(source)
    assert len(found) == 1, [(f.range.start.line + 1, f.message_in("en")) for f in found]
    return found[0]


def line_of(source: str, needle: str) -> int:
    """0-based line of the first line containing ``needle``."""
    for i, line in enumerate(source.splitlines()):
        if needle in line:
            return i
    raise AssertionError(needle)


def apply(source: str, fix) -> str:
    return apply_text_edits(source, fix.edits)


def fix_titled(f, word: str):
    for fx in f.fixes:
        if word in fx.title_in("en"):
            return fx
    raise AssertionError(f"no fix with {word!r}: {[x.title_in('en') for x in f.fixes]}")


def assert_fixed(source: str, fix, variable: str):
    """The fix removes the finding for ``variable``, and fixing again is a no-op."""
    fixed = apply(source, fix)
    assert fixed != source
    assert not [f for f in gg102(fixed) if f.data["variable"] == variable], fixed
    compile(fixed, "<fixed>", "exec")
    return fixed


SEED = REGRESSION_SEED


# ---------------------------------------------------------------------------
# the seed program


def test_seed_finding_range_severity_data_messages():
    f = only(SEED)
    y_line = line_of(SEED, "Y = torch.matmul")
    assert f.range == Range(Position(y_line, 0), Position(y_line, len("Y = torch.matmul(X,true_w) + true_b")))
    assert f.severity is Severity.ERROR
    assert dict(f.data) == {"variable": "Y", "source": "X", "certain": True}
    en, zh = f.message_in("en"), f.message_in("zh")
    assert "`Y`" in en and "`X`" in en and "second time" in en
    assert "`Y`" in zh and "`X`" in zh and "循环" in zh
    assert en.count(". ") == 0 and en.endswith(".")  # one sentence
    # related: where the graph starts, and the backward that fails
    x_line = line_of(SEED, "X = torch.rand")
    bw_line = line_of(SEED, "l.sum().backward()")
    assert [r.range.start.line for r in f.related] == [x_line, bw_line]
    assert "requires_grad=True" in f.related[0].message_in("en")
    assert "requires_grad=True" in f.related[0].message_in("zh")
    bw = f.related[1]
    assert SEED.splitlines()[bw_line][bw.range.start.character:bw.range.end.character] == "l.sum().backward()"
    assert "next iteration" in bw.message_in("en") and "下一轮" in bw.message_in("zh")


def test_seed_preferred_fix_removes_requires_grad_cleanly():
    f = only(SEED)
    assert [fx.preferred for fx in f.fixes] == [True, False, False]
    fixed = assert_fixed(SEED, f.preferred_fix, "Y")
    assert "X = torch.rand(size = (2,5))\n" in fixed
    assert fixed.replace("X = torch.rand(size = (2,5))", "X = torch.rand(size = (2,5),requires_grad = True)") == SEED
    assert "去掉" in f.preferred_fix.title_in("zh")
    # idempotent: nothing left to fix
    assert gg102(fixed) == []


def test_seed_detach_fix_inserts_after_last_building_statement():
    f = only(SEED)
    fixed = assert_fixed(SEED, fix_titled(f, "Detach"), "Y")
    lines = fixed.splitlines()
    i = line_of(fixed, "Y += torch.rand")
    assert lines[i + 1] == "Y = Y.detach()"
    assert gg102(fixed) == []


def test_seed_no_grad_fix_wraps_and_reindents():
    f = only(SEED)
    fixed = assert_fixed(SEED, fix_titled(f, "no_grad"), "Y")
    assert "with torch.no_grad():\n    Y = torch.matmul(X,true_w) + true_b\n    Y += torch.rand(size=(Y.shape))\nlinear1" in fixed


def test_seed_with_requires_grad_false_on_non_leaf_is_still_reported_with_a_note():
    source = SEED.replace("linear1 = nn.Linear(5,1)", "Y.requires_grad_(False)\nlinear1 = nn.Linear(5,1)")
    f = only(source)
    notes = [r for r in f.related if "requires_grad_(False)" in r.message_in("en")]
    assert len(notes) == 1 and "detach" in notes[0].message_in("en") and "叶子" in notes[0].message_in("zh")


def test_the_note_is_at_the_requires_grad_false_run_while_the_value_held_a_graph():
    """The note is the trace's (GraphFlow.not_a_leaf): at the last such statement on
    the stale value, none where ``requires_grad_(False)`` switched a leaf off (that
    one is legal) or where the value was rebuilt by then."""
    source = SEED.replace("linear1 = nn.Linear(5,1)", "X.requires_grad_(False)\nlinear1 = nn.Linear(5,1)")
    assert not [r for r in only(source).related if "raises here" in r.message_in("en")]
    twice = SEED.replace("linear1 = nn.Linear(5,1)",
                         "Y.requires_grad_(False)\nY.requires_grad_(False)\nlinear1 = nn.Linear(5,1)")
    notes = [r for r in only(twice).related if "raises here" in r.message_in("en")]
    assert [n.range.start.line for n in notes] == [line_of(twice, "linear1 = nn.Linear") - 1]


@pytest.mark.parametrize("framework", ["from mxnet import autograd, np", "import paddle"])
def test_a_file_of_another_framework_is_not_a_torch_program(framework):
    """Declared with the rule's trigger (``Trigger(not_other_framework=True)``): the
    seed's loop under another framework's import alone is not reported; with torch
    imported too, it is."""
    body = SEED.replace("import torch\nfrom torch import nn\n", "")
    assert "import" not in body and "torch." in body
    assert gg102(framework + "\n" + body) == []
    assert len(gg102(framework + "\nimport torch\nfrom torch import nn\n" + body)) == 1


# ---------------------------------------------------------------------------
# requires_grad removal: keyword surgery


@pytest.mark.parametrize(
    "before, after",
    [
        ("torch.rand(size = (2,5),requires_grad = True)", "torch.rand(size = (2,5))"),
        ("torch.rand(2, 5, requires_grad=True)", "torch.rand(2, 5)"),
        ("torch.rand(2, 5, requires_grad=True, dtype=torch.float64)", "torch.rand(2, 5, dtype=torch.float64)"),
        ("torch.rand(requires_grad=True, size=(2, 5))", "torch.rand(size=(2, 5))"),
        ("torch.randn(2, 5, requires_grad=True,)", "torch.randn(2, 5,)"),
        ("torch.ones(2, 5).requires_grad_()", "torch.ones(2, 5)"),
        ("torch.ones(2, 5).requires_grad_(True)", "torch.ones(2, 5)"),
        ("torch.randn(\n    2, 5,\n    requires_grad=True,\n)", "torch.randn(\n    2, 5,\n)"),
    ],
)
def test_remove_requires_grad_variants(before, after):
    source = (
        "import torch\n"
        f"X = {before}\n"
        "Y = X * 3.0\n"
        "lin = torch.nn.Linear(5, 1)\n"
        "for _ in range(3):\n"
        "    ((lin(X) - Y[:, :1]) ** 2).sum().backward()\n"
    )
    f = only(source)
    assert f.severity is Severity.ERROR
    fixed = apply(source, f.preferred_fix)
    assert fixed == source.replace(before, after)
    assert gg102(fixed) == []


def test_grad_read_keeps_requires_grad_and_prefers_another_fix():
    source = SEED + "print(X.grad)\n"
    f = only(source)
    assert not any("requires_grad" in fx.title_in("en") for fx in f.fixes)
    assert f.preferred_fix is not None
    assert_fixed(source, f.preferred_fix, "Y")


def test_optimizer_over_data_tensor_keeps_requires_grad():
    source = src(
        """
        import torch
        X = torch.randn(4, 3, requires_grad=True)
        target = X @ torch.ones(3, 1)
        lin = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD([X] + list(lin.parameters()), lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            ((lin(X) - target) ** 2).mean().backward()
            opt.step()
        """
    )
    f = only(source)
    assert not any("requires_grad" in fx.title_in("en") for fx in f.fixes)
    fixed = assert_fixed(source, f.preferred_fix, "target")
    assert "Recompute" in f.preferred_fix.title_in("en")
    assert "    target = X @ torch.ones(3, 1)\n" in fixed


# ---------------------------------------------------------------------------
# functions, aliases, loops


def test_function_with_aliases_and_while_loop():
    source = src(
        """
        import torch as T
        from torch import rand, nn

        def train():
            X = rand(8, 5, requires_grad=True)
            w = T.ones(5, 1)
            Y = X @ w
            Y = Y.reshape(-1)
            model = nn.Linear(5, 1)
            opt = T.optim.SGD(model.parameters(), lr=0.1)
            epoch = 0
            while epoch < 10:
                opt.zero_grad()
                loss = ((model(X).squeeze(1) - Y) ** 2).mean()
                loss.backward()
                opt.step()
                epoch += 1
        """
    )
    f = only(source)
    assert f.range.start.line == line_of(source, "Y = X @ w")
    assert f.range.start.character == 4
    assert f.severity is Severity.ERROR and f.data["certain"] is True
    assert [r.range.start.line for r in f.related] == [line_of(source, "X = rand"), line_of(source, "loss.backward()")]
    assert "rand(8, 5)\n" in apply(source, f.preferred_fix)
    detach = apply(source, fix_titled(f, "Detach"))
    assert "\n    Y = Y.reshape(-1)\n    Y = Y.detach()\n    model" in detach
    ng = fix_titled(f, "no_grad")
    assert ng.title_in("en") == "Build `Y` under `T.no_grad()`"
    wrapped = apply(source, ng)
    assert "\n    with T.no_grad():\n        Y = X @ w\n        Y = Y.reshape(-1)\n    model" in wrapped
    for fx in f.fixes:
        assert_fixed(source, fx, "Y")


def test_no_torch_module_name_means_no_no_grad_fix():
    source = src(
        """
        from torch import rand, nn
        X = rand(4, 3, requires_grad=True)
        Y = X * 2
        lin = nn.Linear(3, 1)
        for _ in range(3):
            (lin(X) - Y[:, :1]).pow(2).sum().backward()
        """
    )
    f = only(source)
    assert not any("no_grad" in fx.title_in("en") for fx in f.fixes)
    assert sum(fx.preferred for fx in f.fixes) == 1


def test_module_output_before_loop_prefers_recompute_inside_loop():
    source = src(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        encoder = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
        head = nn.Linear(16, 1)
        X = torch.randn(32, 10)
        y = torch.randn(32, 1)
        opt = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()))
        feats = encoder(X)
        for step in range(100):
            opt.zero_grad()
            loss = F.mse_loss(head(feats), y)
            loss.backward()
            opt.step()
        """
    )
    f = only(source)
    assert f.severity is Severity.ERROR
    assert dict(f.data) == {"variable": "feats", "source": "encoder", "certain": True}
    assert "module `encoder`" in f.message_in("en") and "模块 `encoder`" in f.message_in("zh")
    assert f.related[0].range.start.line == line_of(source, "encoder = nn.Sequential")
    assert f.preferred_fix.title_in("en") == "Recompute `feats` inside the loop"
    fixed = assert_fixed(source, f.preferred_fix, "feats")
    assert "for step in range(100):\n    feats = encoder(X)\n    opt.zero_grad()\n" in fixed
    assert "\nfeats = encoder(X)\n" not in fixed
    assert gg102(fixed) == []


def test_user_module_class_attribute_parameter():
    source = src(
        """
        import torch
        import torch.nn as nn

        class Scaler(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.gain = nn.Parameter(torch.ones(dim))
                self.size = dim

        def main():
            scaler = Scaler(4)
            model = nn.Linear(4, 1)
            data = torch.randn(8, 4)
            n = scaler.size * 2
            scaled = data * scaler.gain
            opt = torch.optim.SGD(list(model.parameters()) + list(scaler.parameters()), lr=0.01)
            for epoch in range(3):
                opt.zero_grad()
                loss = model(scaled).sum() / n
                loss.backward()
                opt.step()
        """
    )
    f = only(source)
    assert f.data["variable"] == "scaled" and f.data["source"] == "scaler.gain"
    assert "parameter `scaler.gain`" in f.message_in("en")
    assert_fixed(source, f.preferred_fix, "scaled")


def test_parameter_derived_values_error_vs_warning():
    source = src(
        """
        import torch
        from torch import nn
        w = nn.Parameter(torch.randn(3, 3))
        w2 = w * 2
        w3 = w + 1
        x = torch.randn(4, 3)
        opt = torch.optim.SGD([w], lr=0.1)
        for i in range(5):
            opt.zero_grad()
            (x @ w2).sum().backward()
            opt.step()
        for i in range(5):
            opt.zero_grad()
            (x * w3).sum().backward()
            opt.step()
        """
    )
    by_var = {f.data["variable"]: f for f in gg102(source)}
    assert set(by_var) == {"w2", "w3"}
    assert by_var["w2"].severity is Severity.ERROR and by_var["w2"].data["certain"] is True
    assert by_var["w3"].severity is Severity.WARNING and by_var["w3"].data["certain"] is False
    assert "does not crash" in by_var["w3"].message_in("en")
    assert "never recomputed" in by_var["w3"].message_in("en")
    assert "不会报错" in by_var["w3"].message_in("zh")
    assert by_var["w2"].range.start.line == line_of(source, "w2 = w * 2")
    for var, f in by_var.items():
        assert_fixed(source, f.preferred_fix, var)


def test_nonsaving_graph_is_a_warning_that_says_so():
    source = src(
        """
        import torch
        X = torch.randn(4, 3, requires_grad=True)
        Y = X[:, :1] + 1
        Y = Y.view(-1)
        lin = torch.nn.Linear(3, 1)
        for i in range(3):
            loss = (lin(X.detach()).view(-1) - Y).abs().sum()
            loss.backward()
        """
    )
    f = only(source)
    assert f.severity is Severity.WARNING and f.data["certain"] is False
    assert "does not crash" in f.message_in("en") and "flowing into `X`" in f.message_in("en")
    assert "悄悄" in f.message_in("zh")
    assert "every iteration" in f.related[-1].message_in("en")
    assert gg102(apply(source, f.preferred_fix)) == []


def test_unknown_operation_is_a_warning_naming_it():
    source = src(
        """
        import torch
        def featurize(t):
            return t * 2
        X = torch.randn(4, 3, requires_grad=True)
        Y = featurize(X)
        lin = torch.nn.Linear(3, 1)
        for i in range(3):
            ((lin(X) - Y[:, :1]) ** 2).sum().backward()
        """
    )
    f = only(source)
    assert f.severity is Severity.WARNING
    assert "`featurize()`" in f.message_in("en") and "crashes if" in f.message_in("en")


def test_a_helper_handing_back_its_argument_builds_no_graph():
    # featurize(X) is X itself, a leaf: each iteration's Y[:, :1] builds a new graph
    # from it, and the loop trains (run under torch: three iterations, no error)
    source = src(
        """
        import torch
        def featurize(t):
            return t
        X = torch.randn(4, 3, requires_grad=True)
        Y = featurize(X)
        lin = torch.nn.Linear(3, 1)
        for i in range(3):
            ((lin(X) - Y[:, :1]) ** 2).sum().backward()
        """
    )
    assert gg102(source) == []


@pytest.mark.parametrize(
    "expr, certain",
    [
        ("X @ w", True), ("torch.matmul(X, w)", True), ("X * 2", True), ("X / 2", True), ("X ** 2", True),
        ("torch.tanh(X)", True), ("torch.sigmoid(X)", True), ("X.exp()", True), ("X[:, torch.tensor([0])]", True),
        ("X[X > 0.5]", True), ("X + 1", False), ("X - w.T", False), ("X[:, 0:2]", False), ("X[:, 0]", False),
        ("X.view(-1)", False), ("X.sum(1)", False), ("X.mean(0)", False), ("-X", False),
        ("torch.cat([X, X])", False), ("X.clone()", False), ("X.float()", False),
    ],
)
def test_saving_and_nonsaving_operations(expr, certain):
    source = (
        "import torch\n"
        "X = torch.randn(4, 3, requires_grad=True)\n"
        "w = torch.ones(4, 3)\n"
        f"Y = {expr}\n"
        "lin = torch.nn.Linear(3, 1)\n"
        "for i in range(3):\n"
        "    (lin(X).sum() - Y.sum()).backward()\n"
    )
    f = only(source)
    assert f.data["certain"] is certain
    assert f.severity is (Severity.ERROR if certain else Severity.WARNING)


def test_inner_loop_uses_value_built_in_outer_loop():
    source = src(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                return self.fc(x)

        def run(data):
            enc = Net()
            head = nn.Linear(2, 1)
            opt = torch.optim.SGD(head.parameters(), lr=0.1)
            for epoch in range(3):
                z = enc(data)
                for b in range(4):
                    opt.zero_grad()
                    out = head(z)
                    out.mean().backward()
                    opt.step()
        """
    )
    f = only(source)
    assert f.range.start.line == line_of(source, "z = enc(data)")
    fixed = assert_fixed(source, f.preferred_fix, "z")
    assert "        for b in range(4):\n            z = enc(data)\n" in fixed


def test_stale_value_reported_once_for_nested_loops():
    source = src(
        """
        import torch
        X = torch.randn(4, 3, requires_grad=True)
        Y = X * 3
        lin = torch.nn.Linear(3, 1)
        for epoch in range(2):
            for i in range(3):
                ((lin(X) - Y[:, :1]) ** 2).sum().backward()
        """
    )
    only(source)


def test_value_reaching_backward_through_a_list_and_a_criterion():
    source = src(
        """
        import torch
        X = torch.randn(4, 3, requires_grad=True)
        Y = X @ torch.ones(3, 1)
        lin = torch.nn.Linear(3, 1)
        crit = torch.nn.MSELoss()
        for i in range(3):
            losses = []
            losses.append(crit(lin(X), Y))
            total = sum(losses)
            total.backward()
        """
    )
    assert only(source).data["variable"] == "Y"


def test_iterating_over_a_stale_tensor():
    source = src(
        """
        import torch
        X = torch.randn(4, 3, requires_grad=True)
        Y = torch.sigmoid(X)
        lin = torch.nn.Linear(3, 3)
        for row in Y:
            lin(row).sum().backward()
        """
    )
    assert only(source).data["variable"] == "Y"


def test_retain_graph_on_one_backward_only_still_crashes():
    source = src(
        """
        import torch
        X = torch.randn(4, 3, requires_grad=True)
        Y = X @ torch.ones(3, 1)
        lin = torch.nn.Linear(1, 1)
        for i in range(3):
            l = ((lin(torch.ones(4, 1)) - Y) ** 2).sum()
            l.backward(retain_graph=True)
            l2 = ((lin(torch.ones(4, 1)) - Y) ** 2).sum()
            l2.backward()
        """
    )
    f = only(source)
    assert f.related[-1].range.start.line == line_of(source, "l2.backward()")


def test_arguments_receiving_requires_grad_tensors_from_callers():
    source = src(
        """
        import torch
        from torch import nn

        def make_dataset(n=20):
            x = torch.linspace(-1, 1, n).unsqueeze(1).requires_grad_()
            return x

        def fit(model, x, epochs=4):
            y = torch.sin(3 * x) * 0.5
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(epochs):
                loss = ((model(x) - y) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        def train(x, epochs=4):
            target = x.sum(dim=1, keepdim=True) - 1.0
            model = nn.Linear(x.size(1), 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            for _ in range(epochs):
                opt.zero_grad()
                (model(x) - target).pow(2).mean().backward()
                opt.step()

        if __name__ == "__main__":
            fit(nn.Linear(1, 1), make_dataset())
            train(torch.randn(10, 3, requires_grad=True))
        """
    )
    by_var = {f.data["variable"]: f for f in gg102(source)}
    assert set(by_var) == {"y", "target"}
    assert by_var["y"].severity is Severity.ERROR
    assert by_var["target"].severity is Severity.WARNING
    rel = by_var["y"].related[0]
    assert rel.range.start.line == line_of(source, "def fit(")
    assert "caller" in rel.message_in("en")
    # the caller's tensor is in another function: detach here
    assert by_var["y"].preferred_fix.title_in("en").startswith("Detach")
    assert_fixed(source, by_var["y"].preferred_fix, "y")
    # without a requires-grad caller, the same function is silent
    quiet = source.replace("make_dataset())", "torch.linspace(-1, 1, 20).unsqueeze(1))").replace(
        "torch.randn(10, 3, requires_grad=True)", "torch.randn(10, 3)")
    assert gg102(quiet) == []


def test_chinese_identifiers_and_comments_on_flagged_line():
    source = src(
        """
        import torch as T
        from torch import rand, nn


        def fit(epochs):
            # 数据：带梯度的输入
            输入 = rand(4, 3, requires_grad=True)
            标签 = T.tanh(输入).sum(1, keepdim=True)  # 标签在循环前构建
            模型 = nn.Linear(3, 1)
            优化器 = T.optim.SGD(模型.parameters(), lr=0.1)
            while epochs > 0:
                优化器.zero_grad()
                损失 = ((模型(输入) - 标签) ** 2).mean()
                损失.backward()
                优化器.step()
                epochs -= 1
        """
    )
    f = only(source)
    n = line_of(source, "标签 = T.tanh")
    stmt = "标签 = T.tanh(输入).sum(1, keepdim=True)"
    assert f.range == Range(Position(n, 4), Position(n, 4 + len(stmt)))  # code points, comment excluded
    assert dict(f.data) == {"variable": "标签", "source": "输入", "certain": True}
    assert "`标签`" in f.message_in("zh") and "`输入`" in f.message_in("zh")
    bw = f.related[-1]
    line = source.splitlines()[bw.range.start.line]
    assert line[bw.range.start.character:bw.range.end.character] == "损失.backward()"
    fixed = apply(source, f.preferred_fix)
    assert "    输入 = rand(4, 3)\n" in fixed
    detach = apply(source, fix_titled(f, "Detach"))
    assert f"    {stmt}  # 标签在循环前构建\n    标签 = 标签.detach()\n" in detach
    wrapped = apply(source, fix_titled(f, "no_grad"))
    assert f"    with T.no_grad():\n        {stmt}  # 标签在循环前构建\n" in wrapped
    for fx in f.fixes:
        assert_fixed(source, fx, "标签")


# ---------------------------------------------------------------------------
# must stay silent


SILENT = {
    "built_under_no_grad": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        with torch.no_grad():
            Y = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            ((lin(X) - Y) ** 2).sum().backward()
        """,
    "detached": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Y = (X @ torch.ones(5, 1)).detach()
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            ((lin(X) - Y) ** 2).sum().backward()
        """,
    "detached_then_requires_grad_false": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Y = X @ torch.ones(5, 1)
        Y = Y.detach()
        Y.requires_grad_(False)
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            ((lin(X) - Y) ** 2).sum().backward()
        """,
    "seed_fixed_by_the_note": """
        import torch
        from torch import nn
        X = torch.rand(size = (2,5))
        true_w = torch.tensor([1,2,3,4,5.]).reshape((X.shape[1],-1))
        true_b = torch.zeros(X.shape[0]).reshape((-1,1))
        Y = torch.matmul(X,true_w) + true_b
        Y += torch.rand(size=(Y.shape))
        Y.requires_grad_(False)
        linear1 = nn.Linear(5,1)
        for i in range(10):
            l = (linear1(X)-Y)**2
            linear1.zero_grad()
            l.sum().backward()
        """,
    "cnn_seed": """
        import torch
        from torch import nn


        def corr2d(X, K):
            h, w = K.shape
            Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
            for i in range(Y.shape[0]):
                for j in range(Y.shape[1]):
                    Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
            return Y


        X = torch.ones((6, 8))
        X[:, 2:6] = 0
        K = torch.tensor([[1.0, -1.0]])
        Y = corr2d(X, K)
        conv2d = nn.Conv2d(in_channels=1, out_channels=1, kernel_size=(1, 2), bias=False)
        X = X.reshape((1, 1, 6, 8))
        Y = Y.reshape((1, 1, 6, 7))
        lr = 3e-2

        for i in range(10):
            Y_hat = conv2d(X)
            l = (Y_hat - Y) ** 2
            conv2d.zero_grad()
            l.sum().backward()
            conv2d.weight.data[:] -= lr * conv2d.weight.grad
        """,
    "leaf_factory_used_directly": """
        import torch
        w = torch.randn(3, 1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        x = torch.randn(8, 3)
        for i in range(10):
            loss = ((x @ w + b) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
                w.grad.zero_()
        """,
    "parameter_used_directly": """
        import torch
        from torch import nn
        P = nn.Parameter(torch.ones(5, 1))
        X = torch.randn(4, 5)
        opt = torch.optim.SGD([P], lr=0.1)
        for i in range(10):
            opt.zero_grad()
            (X @ P).sum().backward()
            opt.step()
        """,
    "graph_rebuilt_inside_loop": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Y = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            Y = X @ torch.ones(5, 1)
            ((lin(X) - Y) ** 2).sum().backward()
        """,
    "backward_once_after_loop": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        S = X * 2
        lin = torch.nn.Linear(5, 1)
        tot = 0
        for i in range(10):
            tot = tot + (lin(X) - S[:, :1]).pow(2).sum()
        tot.backward()
        """,
    "item_and_tolist": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        V = (X * 3).sum().item()
        L = (X * 3).tolist()
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            (lin(X).sum() * V + L[0][0]).backward()
        """,
    "tensor_from_data": """
        import torch
        D = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]])
        E = D * 3
        F = torch.as_tensor([[1.0]]) @ D
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            ((lin(D) - E.sum() - F.sum()) ** 2).sum().backward()
        """,
    "retain_graph_true": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        R = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            ((lin(X) - R) ** 2).sum().backward(retain_graph=True)
        """,
    "create_graph_true": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        R = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        for i in range(3):
            ((lin(X) - R) ** 2).sum().backward(create_graph=True)
        """,
    "eval_loop_under_no_grad": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Q = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        with torch.no_grad():
            for i in range(3):
                print(((lin(X) - Q) ** 2).sum())
        """,
    "no_grad_decorated_function": """
        import torch
        @torch.no_grad()
        def evaluate(model, X):
            Q = model(X)
            for i in range(3):
                print(Q.sum())
        """,
    "frozen_feature_extractor": """
        import torch
        from torch import nn
        backbone = nn.Linear(8, 4)
        for p in backbone.parameters():
            p.requires_grad = False
        head = nn.Linear(4, 1)
        x = torch.randn(16, 8)
        feats = backbone(x)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        for i in range(5):
            opt.zero_grad()
            head(feats).sum().backward()
            opt.step()
        """,
    "frozen_module_requires_grad_false": """
        import torch
        from torch import nn
        backbone = nn.Linear(8, 4).requires_grad_(False)
        head = nn.Linear(4, 1)
        feats = backbone(torch.randn(16, 8))
        for i in range(5):
            head(feats).sum().backward()
        """,
    "autograd_grad_wrt_parameters_only": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Y = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(1, 1)
        for i in range(3):
            l = ((lin(torch.ones(2, 1)) - Y) ** 2).sum()
            g = torch.autograd.grad(l, list(lin.parameters()))
        """,
    "stale_value_used_only_in_no_grad_block": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Y = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        for i in range(3):
            lin(X).sum().backward()
            with torch.no_grad():
                err = (lin(X) - Y).abs().mean()
        """,
    "loop_body_runs_once": """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Y = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        for i in range(10):
            ((lin(X) - Y) ** 2).sum().backward()
            break
        """,
    "module_attribute_that_is_not_a_parameter": """
        import torch
        from torch import nn
        model = nn.Linear(3, 1)
        n = model.in_features * 2
        x = torch.randn(4, 3)
        for i in range(3):
            (model(x).sum() / n).backward()
        """,
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(name):
    assert gg102(src(SILENT[name])) == []


# ---------------------------------------------------------------------------
# robustness, explanation, speed


def test_bad_input_never_crashes():
    for text in ["for i in range(:\n", "X = torch.rand(2, requires_grad=True\n", "\x00", "", "Y = (((((" * 50]:
        check_source(text)


def test_explanation_sections_in_both_languages():
    rule = get_rule("GG102")
    assert rule.name == "stale-graph"
    from rule_pages import assert_sections

    assert_sections("GG102")
    en, zh = rule.explain("en"), rule.explain("zh")
    for text in (en, zh):
        assert "retain_graph=True" in text and "zero_grad()" in text and "Conv2d" in text
    assert "leaf" in en.lower() and "叶子" in zh


def test_long_method_chains_and_large_units_stay_fast():
    chain = "X" + ".view(-1).reshape(2, 12).contiguous().float()" * 40
    big = ["import torch", "X = torch.randn(2, 12, requires_grad=True)", f"Y = {chain}"]
    big += [f"a{i} = torch.randn(3) * {i}" for i in range(3000)]
    big += ["lin = torch.nn.Linear(12, 1)", "for i in range(3):", "    (lin(X).sum() - Y.sum()).backward()"]
    # Speed is measured by `python -m bench`, not here; this checks the result on a large unit.
    found = gg102("\n".join(big) + "\n")
    assert [f.data["variable"] for f in found] == ["Y"]


def test_docs_page_is_the_explanation():
    from rule_pages import assert_docs_page_is_the_explanation

    assert_docs_page_is_the_explanation("GG102")


# ---------------------------------------------------------------------------
# across units: globals read by a training function, tensors passed to one


CROSS_UNIT = src(
    """
    import torch
    from torch import nn

    X = torch.rand(8, 5, requires_grad=True)
    Y = X @ torch.ones(5, 1)
    Z = X @ torch.ones(5, 1)
    model = nn.Linear(5, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)


    def train(epochs):
        for _ in range(epochs):
            opt.zero_grad()
            ((model(X) - Y) ** 2).mean().backward()
            opt.step()


    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()


    def fit(m, x, y, epochs=3):
        for _ in range(epochs):
            m.zero_grad()
            ((m(x) - y) ** 2).mean().backward()


    def main():
        A = torch.rand(8, 5, requires_grad=True)
        B = torch.tanh(A).sum(1, keepdim=True)
        fit(nn.Linear(5, 1), A, B)
        C = A.detach() * 2
        fit(nn.Linear(5, 1), A, C[:, :1])


    if __name__ == "__main__":
        train(3)
        for i in range(3):
            step(X, Z)
        main()
    """
)


def test_global_stale_tensor_used_by_training_function():
    by_var = {f.data["variable"]: f for f in gg102(CROSS_UNIT)}
    assert set(by_var) == {"Y", "Z", "B"}
    y = by_var["Y"]
    assert y.range.start.line == line_of(CROSS_UNIT, "Y = X @")
    assert y.related[-1].range.start.line == line_of(CROSS_UNIT, "    train(3)")
    assert "`train()`" in y.related[-1].message_in("en") and "`train()`" in y.message_in("en")
    assert "`train()`" in y.message_in("zh")
    # a per-iteration helper called in a loop
    z = by_var["Z"]
    assert z.related[-1].range.start.line == line_of(CROSS_UNIT, "step(X, Z)")
    # a tensor passed into a function that loops over it
    b = by_var["B"]
    assert b.range.start.line == line_of(CROSS_UNIT, "B = torch.tanh")
    assert b.related[-1].range.start.line == line_of(CROSS_UNIT, "fit(nn.Linear(5, 1), A, B)")
    for var, f in by_var.items():
        assert_fixed(CROSS_UNIT, fix_titled(f, "Detach"), var)
    fixed = apply(CROSS_UNIT, by_var["Y"].preferred_fix)  # removes requires_grad from X: Y and Z are clean
    assert {f.data["variable"] for f in gg102(fixed)} == {"B"}


def test_incremental_edits_agree_with_a_full_check():
    from gradguard.engine import Document

    doc = Document(CROSS_UNIT)
    edited = CROSS_UNIT.replace("X = torch.rand(8, 5, requires_grad=True)", "X = torch.rand(8, 5)")
    assert doc.update(edited).findings == check_source(edited).findings
    back = doc.update(CROSS_UNIT).findings
    assert back == check_source(CROSS_UNIT).findings
    assert {f.data["variable"] for f in back if f.code == "GG102"} == {"Y", "Z", "B"}
    # the callee changes: it no longer loops, so B is no longer reused
    no_loop = CROSS_UNIT.replace("    for _ in range(epochs):\n        m.zero_grad()\n        ((m(x) - y) ** 2)",
                                 "    if epochs:\n        m.zero_grad()\n        ((m(x) - y) ** 2)")
    assert no_loop != CROSS_UNIT
    got = doc.update(no_loop).findings
    assert got == check_source(no_loop).findings
    assert {f.data["variable"] for f in got if f.code == "GG102"} == {"Y", "Z"}


def test_user_module_certainty_depends_on_holding_a_layer():
    template = src(
        """
        import torch
        import torch.nn as nn

        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                BODY

            def forward(self, x):
                return FORWARD

        enc = Enc()
        head = nn.Linear(4, 1)
        feats = enc(torch.randn(3, 4))
        for i in range(3):
            head(feats).sum().backward()
        """
    )
    with_layer = template.replace("BODY", "self.fc = nn.Linear(4, 4)").replace("FORWARD", "self.fc(x)")
    f = only(with_layer)
    assert f.severity is Severity.ERROR and f.data["certain"] is True
    bias_only = template.replace("BODY", "self.shift = nn.Parameter(torch.zeros(4))").replace("FORWARD", "x + self.shift")
    f = only(bias_only)
    assert f.severity is Severity.WARNING and f.data["certain"] is False
    assert "`enc`" in f.message_in("en") and "crashes if" in f.message_in("en")


def test_legacy_variable_with_requires_grad():
    source = src(
        """
        import torch
        from torch.autograd import Variable
        x = Variable(torch.randn(4, 3), requires_grad=True)
        y = x.pow(2)
        lin = torch.nn.Linear(3, 3)
        for i in range(3):
            ((lin(x) - y) ** 2).sum().backward()
        """
    )
    f = only(source)
    assert "Variable(torch.randn(4, 3))" in apply(source, f.preferred_fix)


def test_recompute_fix_is_not_offered_when_the_value_is_needed_outside_the_loop():
    source = src(
        """
        import torch
        from torch import nn

        def probe(backbone, head, x, y):
            feats = backbone(x)
            opt = torch.optim.SGD(head.parameters(), lr=0.1)
            for _ in range(3):
                opt.zero_grad()
                nn.functional.mse_loss(head(feats), y).backward()
                opt.step()
            return feats
        """
    )
    # backbone is a module by evidence only when its parameters are used somewhere
    assert gg102(source) == []
    source = source.replace("lr=0.1)", "lr=0.1)\n    n = sum(p.numel() for p in backbone.parameters())")
    f = only(source)
    assert not any("Recompute" in fx.title_in("en") for fx in f.fixes)
    assert f.preferred_fix.title_in("en").startswith("Detach")
    assert_fixed(source, f.preferred_fix, "feats")


# ---------------------------------------------------------------------------
# the torch facts behind "certain": checked against torch itself

_TABLE_CHECK = r'''
import json, torch, torch.nn as nn, torch.nn.functional as F
from gradguard.analysis import knowledge as K

def reuse(build, retain=False, create=False):
    """Build Y from a requires-grad leaf once, then back-propagate through it twice."""
    X = torch.rand(4, 4, requires_grad=True)
    Y = build(X)
    if isinstance(Y, tuple):
        Y = Y[0]
    if not Y.requires_grad:
        return "nograph"
    try:
        for _ in range(2):
            (Y.float().sum() * 1.0).backward(retain_graph=True if retain else None, create_graph=create)
        return "ok"
    except RuntimeError as e:
        return "crash" if "second time" in str(e) else "error"

W = torch.rand(4, 4) + 0.5
special = {
    "torch.einsum": lambda X: torch.einsum("ij,jk->ik", X, W),
    "torch.nn.functional.cross_entropy": lambda X: F.cross_entropy(X, torch.tensor([0, 1, 2, 3])),
    "torch.nn.functional.mse_loss": lambda X: F.mse_loss(X, W),
    "torch.nn.functional.dropout": lambda X: F.dropout(X, 0.5, training=True),
    "torch.nn.functional.conv2d": lambda X: F.conv2d(X.view(1, 1, 4, 4), W.view(1, 1, 4, 4)),
    "torch.nn.functional.linear": lambda X: F.linear(X, W),
    "torch.softmax": lambda X: torch.softmax(X, 1), "torch.log_softmax": lambda X: torch.log_softmax(X, 1),
    "torch.nn.functional.softmax": lambda X: F.softmax(X, 1),
    "torch.nn.functional.log_softmax": lambda X: F.log_softmax(X, 1),
    "torch.cat": lambda X: torch.cat([X, X]), "torch.stack": lambda X: torch.stack([X, X]),
    "torch.max": lambda X: torch.max(X, 1), "torch.min": lambda X: torch.min(X, 1),
    "torch.bmm": lambda X: torch.bmm(X.view(1, 4, 4), W.view(1, 4, 4)),
}
binary = {"torch.matmul", "torch.mm", "torch.mul", "torch.div", "torch.add", "torch.sub", "torch.pow"}

def fn(q):
    if q in special:
        return special[q]
    f = eval(q.replace("torch.nn.functional", "F"))
    return (lambda X: f(X, W)) if q in binary else (lambda X: f(X))

margs = {"matmul": (W,), "mm": (W,), "mul": (W,), "div": (W,), "pow": (2,), "softmax": (1,), "log_softmax": (1,),
         "add": (W,), "sub": (W,), "view": (16,), "reshape": (16,), "unsqueeze": (0,), "permute": (1, 0),
         "transpose": (0, 1), "expand": (4, 4), "mul_": (W,), "div_": (W,), "pow_": (2,), "add_": (W,),
         "sub_": (W,), "__getitem__": (0,)}

def meth(m):
    a = margs.get(m, ())
    if m == "bmm":
        return lambda X: X.view(1, 4, 4).bmm(W.view(1, 4, 4))
    if m.endswith("_") and not m.startswith("__"):
        return lambda X: getattr(X.clone(), m)(*a)
    return lambda X: getattr(X, m)(*a)

ops = {"Mult": lambda X: X * 2, "Div": lambda X: X / 2, "Pow": lambda X: X ** 2, "MatMult": lambda X: X @ W,
       "Add": lambda X: X + 1, "Sub": lambda X: X - W}
out = {}
for q in K.SAVING_FUNCTIONS | K.NONSAVING_FUNCTIONS:
    out["f:" + q] = reuse(fn(q))
for m in (K.SAVING_METHODS | K.NONSAVING_METHODS | K.PASSTHROUGH_METHODS) - {"to", "cuda", "cpu", "type"}:
    out["m:" + m] = reuse(meth(m))
for m in K.INTEGER_CASTS:
    out["cast:" + m] = reuse(lambda X, m=m: getattr(X, m)())
for b in K.SAVING_BINOPS | K.NONSAVING_BINOPS:
    out["b:" + b] = reuse(ops[b])
for name in K.PARAMETERLESS_MODULES:
    mod = getattr(nn, name)
    try:
        x4 = lambda X: X.view(1, 1, 4, 4)
        if name in ("Softmax", "LogSoftmax", "PixelShuffle") or name.startswith("Adaptive"):
            inst = mod(1)
        elif name.startswith(("MaxPool", "AvgPool")):
            inst = mod(2)
        elif name == "Upsample":
            inst = mod(scale_factor=2)
        elif name == "Unflatten":
            inst = mod(1, (2, 2))
        else:
            inst = mod()
        if name.endswith("Loss") or name in ("CosineSimilarity", "PairwiseDistance"):
            if name in ("CrossEntropyLoss", "NLLLoss"):
                build = lambda X: inst(X, torch.tensor([0, 1, 2, 3]))
            elif name.startswith("BCE"):
                build = lambda X: inst(X.sigmoid() if name == "BCELoss" else X, W / 2)
            else:
                build = lambda X: inst(X, W)
        elif name.endswith(("1d",)):
            build = lambda X: inst(X.view(1, 4, 4))
        elif name.endswith(("2d",)) or name in ("Upsample", "PixelShuffle"):
            build = lambda X: inst(x4(X))
        elif name.endswith("3d"):
            build = lambda X: inst(X.view(1, 1, 2, 2, 4))
        else:
            build = lambda X: inst(X)
        out["mod:" + name] = reuse(build)
    except Exception as e:  # a module this harness cannot call: report it
        out["mod:" + name] = "harness:" + type(e).__name__
out["retain_graph"] = reuse(lambda X: X @ W, retain=True)
out["create_graph"] = reuse(lambda X: X @ W, create=True)
print(json.dumps(out))
'''


def test_knowledge_tables_match_torch():
    """Every 'saves tensors' claim behind an error is checked by running torch: a
    graph built once and back-propagated twice crashes exactly for the saving ops."""
    import importlib.util
    import json
    import subprocess
    import sys

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed")
    from gradguard.analysis import knowledge as K

    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _TABLE_CHECK], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # the tri-state answers the analysis asks (knowledge.function_saving, ...), from the tables
    outcome = {True: "crash", False: "ok"}
    wrong = []
    for q in K.SAVING_FUNCTIONS | K.NONSAVING_FUNCTIONS:
        wrong += [] if got["f:" + q] == outcome[K.function_saving(q)] else [("f:" + q, got["f:" + q])]
    for m in (K.SAVING_METHODS | K.NONSAVING_METHODS | K.PASSTHROUGH_METHODS) - {"to", "cuda", "cpu", "type"} \
            - K.INTEGER_CASTS:
        wrong += [] if got["m:" + m] == outcome[K.method_saving(m)] else [("m:" + m, got["m:" + m])]
    for m in K.INTEGER_CASTS:
        wrong += [] if got["cast:" + m] == "nograph" else [("cast:" + m, got["cast:" + m])]
    for b in K.SAVING_BINOPS | K.NONSAVING_BINOPS:
        wrong += [] if got["b:" + b] == outcome[K.binop_saving(b)] else [("b:" + b, got["b:" + b])]
    for name in K.PARAMETERLESS_MODULES - K.CONFIG_DEPENDENT_MODULES:
        want = outcome[K.parameterless_module_saving(name)]
        wrong += [] if got["mod:" + name] == want else [("mod:" + name, got["mod:" + name])]
    assert all(K.parameterless_module_saving(n) is None for n in K.CONFIG_DEPENDENT_MODULES)
    # an in-place method answers as its out-of-place form; unknown operations say so
    assert K.inplace_method_saving("mul_") is True and K.inplace_method_saving("exp_") is True
    assert K.inplace_method_saving("add_") is False and K.inplace_method_saving("clamp_") is None
    assert K.method_saving("clamp") is None and K.function_saving("torch.where") is None
    assert K.binop_saving("FloorDiv") is None
    assert got["retain_graph"] == "ok" and got["create_graph"] == "ok"
    assert not wrong, wrong


def test_explicit_retain_graph_false_wins_over_create_graph():
    source = src(
        """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        R = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(5, 1)
        for i in range(3):
            ((lin(X) - R) ** 2).sum().backward(retain_graph=False, create_graph=True)
        """
    )
    assert only(source).severity is Severity.ERROR
    assert gg102(source.replace("retain_graph=False, ", "")) == []
    assert gg102(source.replace("retain_graph=False", "retain_graph=None")) == []


@pytest.mark.parametrize(
    "args, keeps",
    [
        ("", False),
        ("retain_graph=True", True),
        ("retain_graph=False", False),
        ("retain_graph=None", False),
        ("retain_graph=keep", True),  # not a constant: may keep
        ("create_graph=True", True),  # retain_graph defaults to create_graph
        ("create_graph=False", False),
        ("retain_graph=False, create_graph=True", False),  # the explicit False wins (as torch does)
        ("retain_graph=None, create_graph=True", True),
        ("retain_graph=0", False),
    ],
)
def test_the_shared_answer_to_does_this_backward_keep_its_graph(args, keeps):
    """analysis.ast_util.keeps_graph: what the shared interpreter records on a
    backward event and what GG102's loop taint asks; without create_graph it is
    has_retain_graph's answer."""
    import ast

    from gradguard.analysis import ast_util as A

    call = ast.parse(f"loss.backward({args})").body[0].value
    assert A.keeps_graph(call) is keeps
    if "create_graph" not in args:
        assert A.has_retain_graph(call) is keeps


def test_stale_tensor_wrapped_in_a_dataset_is_reported_where_it_is_built():
    source = src(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        def main():
            backbone = nn.Sequential(nn.Linear(12, 8), nn.ReLU())
            head = nn.Linear(8, 3)
            images = torch.randn(12, 12)
            labels = torch.randint(0, 3, (12,))
            features = backbone(images)
            loader = DataLoader(TensorDataset(features, labels), batch_size=4, shuffle=False)
            pairs = list(zip(features, labels))
            optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
            for epoch in range(2):
                for feats, y in loader:
                    loss = nn.functional.cross_entropy(head(feats), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            for f, y in pairs:
                head(f).sum().backward()
        """
    )
    f = only(source)
    assert f.data["variable"] == "features"
    assert f.range.start.line == line_of(source, "features = backbone(images)")
    # the loader is read between the build and the loop: no move; detach right after the build
    assert f.preferred_fix.title_in("en").startswith("Detach")
    fixed = assert_fixed(source, f.preferred_fix, "features")
    assert "features = backbone(images)\n    features = features.detach()\n    loader" in fixed
    assert gg102(fixed) == []


def test_autograd_grad_counts_where_its_inputs_name_a_source_of_the_stale_graph():
    """``autograd.grad(l, inputs)`` runs only the part of the graph leading to its
    inputs: with the stale value's source among them (the source the finding names,
    ``interpreter.graph_sources``) the second call fails (checked with torch); with
    only the layer's parameters it never enters that graph (the silent case
    ``autograd_grad_wrt_parameters_only``)."""
    source = src(
        """
        import torch
        X = torch.rand(2, 5, requires_grad=True)
        Y = X @ torch.ones(5, 1)
        lin = torch.nn.Linear(1, 1)
        for i in range(3):
            l = ((lin(torch.ones(2, 1)) - Y) ** 2).sum()
            g = torch.autograd.grad(l, [X])
        """
    )
    f = only(source)
    assert f.data["variable"] == "Y" and f.data["source"] == "X"
    assert gg102(source.replace("[X]", "list(lin.parameters())")) == []


def test_pinn_style_input_differentiated_on_purpose_is_silent_unless_it_crashes():
    source = src(
        """
        import torch
        from torch import nn
        net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        x = torch.linspace(0, 1, 50, requires_grad=True).unsqueeze(1)
        opt = torch.optim.Adam(net.parameters())
        for step in range(100):
            u = net(x)
            du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
            loss = ((du - 1.0) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    )
    assert gg102(source) == []
    crashing = source.replace(".unsqueeze(1)", ".unsqueeze(1) * 2")
    f = only(crashing)
    assert f.severity is Severity.ERROR and f.data["variable"] == "x"


def test_method_of_a_module_class_with_self_attributes():
    source = src(
        """
        import torch
        import torch.nn as nn


        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(8, 4)
                self.head = nn.Linear(4, 1)

            def fit(self, x, y, steps=3):
                self.feats = self.backbone(x)
                opt = torch.optim.SGD(self.head.parameters(), lr=0.1)
                for _ in range(steps):
                    opt.zero_grad()
                    loss = ((self.head(self.feats) - y) ** 2).mean()
                    loss.backward()
                    opt.step()

            def fit_frozen(self, x, y, steps=3):
                with torch.no_grad():
                    feats = self.backbone(x)
                opt = torch.optim.SGD(self.head.parameters(), lr=0.1)
                for _ in range(steps):
                    opt.zero_grad()
                    ((self.head(feats) - y) ** 2).mean().backward()
                    opt.step()

            def fit_fresh(self, x, y, steps=3):
                self.feats = self.backbone(x)
                for _ in range(steps):
                    self.feats = self.backbone(x)
                    ((self.head(self.feats) - y) ** 2).mean().backward()
        """
    )
    f = only(source)
    assert f.range.start.line == line_of(source, "self.feats = self.backbone(x)")
    assert dict(f.data) == {"variable": "self.feats", "source": "self.backbone", "certain": True}
    fixed = assert_fixed(source, f.preferred_fix, "self.feats")
    assert "for _ in range(steps):\n            self.feats = self.backbone(x)\n            opt.zero_grad()" in fixed
    detach = apply(source, fix_titled(f, "Detach"))
    assert "        self.feats = self.feats.detach()\n" in detach


def test_mangled_programs_never_crash_the_rule():
    """Every fixture, cut short and with lines dropped or duplicated at random
    (a fixed seed), analyses without an exception."""
    fixtures = sorted((Path(__file__).resolve().parent / "fixtures").glob("*.py"))
    rng = random.Random(102)
    texts = [SEED, CROSS_UNIT] + [p.read_text(encoding="utf-8") for p in fixtures]
    for text in texts:
        lines = text.splitlines()
        for _ in range(6):
            cut = lines[: rng.randrange(1, len(lines) + 1)]
            i = rng.randrange(len(cut))
            variant = cut[:i] + cut[i + 1:] if rng.random() < 0.5 else cut[:i] + [cut[i]] + cut[i:]
            check_source("\n".join(variant) + "\n")


def test_leaf_replaced_by_a_view_of_itself():
    source = src(
        """
        import torch
        X = torch.rand(4, 3, requires_grad=True)
        X = X.reshape(3, 4)
        lin = torch.nn.Linear(4, 1)
        for i in range(3):
            lin(X).sum().backward()
        """
    )
    f = only(source)
    assert f.severity is Severity.WARNING
    assert "from a tensor created with `requires_grad=True`" in f.message_in("en")
    assert "from `X`" not in f.message_in("en")
    assert "X = torch.rand(4, 3)\n" in apply(source, f.preferred_fix)


def test_helper_functions_returning_no_graph():
    source = src(
        """
        import torch
        import torch.nn as nn

        @torch.no_grad()
        def make_targets(inputs, weight):
            return torch.tanh(inputs @ weight)

        def make_labels(inputs, weight):
            return torch.tanh(inputs @ weight).detach()

        def make_graph_labels(inputs, weight):
            return torch.tanh(inputs @ weight)

        def main():
            inputs = torch.randn(10, 4, requires_grad=True)
            weight = torch.randn(4, 2)
            targets = make_targets(inputs, weight)
            labels = make_labels(inputs, weight)
            stale = make_graph_labels(inputs, weight)
            model = nn.Linear(4, 2)
            for epoch in range(4):
                loss = nn.functional.mse_loss(model(inputs), targets) + nn.functional.mse_loss(model(inputs), labels)
                loss = loss + nn.functional.mse_loss(model(inputs), stale)
                loss.backward()
        """
    )
    f = only(source)
    assert f.data["variable"] == "stale" and "`make_graph_labels()`" in f.message_in("en")


def test_containers_of_leaves_hold_no_graph():
    source = src(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        data = torch.randn(16, 4, requires_grad=True)
        labels = torch.randn(16, 1)
        loader = DataLoader(TensorDataset(data, labels), batch_size=4)
        params = (torch.zeros(4, 1, requires_grad=True), torch.zeros(1, requires_grad=True))
        for epoch in range(3):
            for x, y in loader:
                loss = ((x @ params[0] + params[1] - y) ** 2).mean()
                loss.backward()
        """
    )
    assert gg102(source) == []


def test_no_grad_fix_never_wraps_a_def_between_module_statements():
    source = src(
        """
        import torch
        X = torch.rand(4, 3, requires_grad=True)
        Y = X @ torch.ones(3, 1)
        def helper():
            return 1
        Y += torch.rand(4, 1)
        lin = torch.nn.Linear(3, 1)
        for i in range(3):
            ((lin(X) - Y) ** 2).sum().backward()
        """
    )
    f = only(source)
    assert not any("no_grad" in fx.title_in("en") for fx in f.fixes)
    assert "Y += torch.rand(4, 1)\nY = Y.detach()\n" in apply(source, fix_titled(f, "Detach"))


# ---------------------------------------------------------------------------
# self.<attr> graphs built in __init__ and reused by another method's training loop

TRAINER = src(
    """
    import torch
    import torch.nn as nn


    class Regression:
        def __init__(self, n=10, d=4):
            self.X = torch.randn(n, d, requires_grad=True)
            self.w_true = torch.randn(d, 1)
            self.Y = self.X @ self.w_true + 0.01
            self.model = nn.Linear(d, 1)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)

        def fit(self, epochs=4):
            for epoch in range(epochs):
                loss = ((self.model(self.X) - self.Y) ** 2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
    """
)


def with_method(source: str, method: str) -> str:
    """``source`` (ending in a class) with one more method appended to that class."""
    return source + "\n" + textwrap.indent(src(method), "    ")


def test_init_attribute_graph_reused_by_fit_loop():
    f = only(TRAINER)
    assert f.severity is Severity.ERROR
    assert f.range.start.line == line_of(TRAINER, "self.Y = self.X @")
    assert f.data["variable"] == "self.Y" and f.data["source"] == "self.X"
    msg = f.message_in("en")
    assert "`__init__()`" in msg and "`fit()`" in msg and "a second time" in msg
    assert "`__init__()`" in f.message_in("zh")
    # related: where the graph starts, and the backward() in fit() that frees it
    starts = [r for r in f.related if r.range.start.line == line_of(TRAINER, "self.X = torch.randn")]
    assert starts
    bw = [r for r in f.related if "`fit()`" in r.message["en"]]
    assert len(bw) == 1
    line = line_of(TRAINER, "loss.backward()")
    text = TRAINER.splitlines()[line]
    assert bw[0].range == Range(Position(line, text.index("loss")), Position(line, len(text)))
    # preferred fix: drop requires_grad from the data (nothing reads self.X.grad); silent and idempotent after
    fixed = apply(TRAINER, f.preferred_fix)
    assert "self.X = torch.randn(n, d)\n" in fixed
    assert gg102(fixed) == []
    # the other fixes work too
    detached = apply(TRAINER, fix_titled(f, "Detach"))
    assert "self.Y = self.X @ self.w_true + 0.01\n        self.Y = self.Y.detach()\n" in detached
    assert gg102(detached) == []
    assert gg102(apply(TRAINER, fix_titled(f, "no_grad"))) == []


def test_init_attribute_whose_grad_is_read_is_detached_not_stripped():
    source = with_method(TRAINER, """
        def input_saliency(self):
            return self.X.grad.abs()
        """)
    f = only(source)
    assert "Detach" in f.preferred_fix.title_in("en")
    assert not any("Remove" in fx.title_in("en") for fx in f.fixes)
    assert gg102(apply(source, f.preferred_fix)) == []
    # recomputing in fit()'s loop is offered too (self.X then gets a fresh gradient every iteration)
    recompute = fix_titled(f, "Recompute")
    assert not recompute.preferred and gg102(apply(source, recompute)) == []


def test_init_attribute_handed_to_an_optimizer_counts_as_trained():
    # self.X is trained (handed to the optimizer): self.Y (built with + only) goes stale as self.X changes
    source = TRAINER.replace("self.Y = self.X @ self.w_true + 0.01", "self.Y = self.X + 0.01").replace(
        "torch.optim.SGD(self.model.parameters(), lr=0.05)", "torch.optim.SGD([self.X], lr=0.05)")
    f = only(source)
    assert f.severity is Severity.WARNING
    assert "never recomputed when `self.X` changes" in f.message_in("en")
    assert not any("Remove" in fx.title_in("en") for fx in f.fixes)
    # a trained source: self.Y follows it when rebuilt in every iteration
    assert f.preferred_fix.title_in("en") == "Recompute `self.Y` in every iteration of `fit()`'s loop"
    assert gg102(apply(source, f.preferred_fix)) == []
    assert gg102(apply(source, fix_titled(f, "Detach"))) == []


def test_init_attribute_non_saving_build_is_a_warning():
    source = TRAINER.replace("self.Y = self.X @ self.w_true + 0.01", "self.Y = self.X[:, :1] + 0.01")
    f = only(source)
    assert f.severity is Severity.WARNING and f.data["variable"] == "self.Y"


@pytest.mark.parametrize(
    "edit",
    [
        # rebuilt inside the loop: each iteration has its own graph
        ("            loss = ((self.model",
         "            self.Y = self.X @ self.w_true + 0.01\n            loss = ((self.model"),
        # built under no_grad in __init__
        ("        self.Y = self.X @ self.w_true + 0.01",
         "        with torch.no_grad():\n            self.Y = self.X @ self.w_true + 0.01"),
        # detached
        ("self.Y = self.X @ self.w_true + 0.01", "self.Y = (self.X @ self.w_true + 0.01).detach()"),
        # detached afterwards, in __init__
        ("        self.model = nn.Linear(d, 1)",
         "        self.Y = self.Y.detach()\n        self.model = nn.Linear(d, 1)"),
        # a leaf used directly: that is how parameters work
        ("self.Y = self.X @ self.w_true + 0.01", "self.Y = torch.randn(n, 1, requires_grad=True)"),
        ("self.Y = self.X @ self.w_true + 0.01", "self.Y = nn.Parameter(torch.randn(n, 1))"),
        # the loop body runs once
        ("            self.opt.step()", "            self.opt.step()\n            break"),
        # the loop keeps the graph on purpose
        ("loss.backward()", "loss.backward(retain_graph=True)"),
        # the method with the loop is a static method: no instance, no self.Y
        ("    def fit(self, epochs=4):", "    @staticmethod\n    def fit(self, epochs=4):"),
    ],
)
def test_init_attribute_silences(edit):
    old, new = edit
    assert TRAINER.count(old) == 1, old
    source = TRAINER.replace(old, new)
    assert gg102(source) == [], source


def test_eval_only_methods_under_no_grad_are_not_training_loops():
    source = TRAINER.replace("    def fit(self, epochs=4):", "    @torch.no_grad()\n    def fit(self, epochs=4):")
    assert gg102(source) == []
    # fit() trains on a detached copy; the evaluation loops reuse self.Y without recording a graph
    evaluate = TRAINER.replace("- self.Y) ** 2", "- self.Y.detach()) ** 2")
    assert evaluate != TRAINER
    evaluate = with_method(evaluate, """
        @torch.no_grad()
        def evaluate(self):
            total = 0.0
            for i in range(3):
                total += ((self.model(self.X) - self.Y) ** 2).mean().item()
                ((self.model(self.X) - self.Y) ** 2).mean().backward()  # never runs with grad: not a training loop
            return total

        def evaluate_block(self):
            with torch.no_grad():
                for i in range(3):
                    ((self.model(self.X) - self.Y) ** 2).mean().backward()
        """)
    assert gg102(evaluate) == []


def test_init_attribute_reported_once_when_init_also_trains():
    source = TRAINER.replace(
        "        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)\n",
        "        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)\n"
        "        for _ in range(2):\n"
        "            ((self.model(self.X) - self.Y) ** 2).mean().backward()\n",
    )
    assert source != TRAINER
    f = only(source)
    assert f.range.start.line == line_of(source, "self.Y = self.X @")


def test_init_attribute_in_module_class_with_chinese_text():
    source = src(
        """
        import torch
        import torch.nn as nn


        class 回归(nn.Module):  # 线性回归
            def __init__(self):
                super().__init__()
                self.输入 = torch.randn(8, 3, requires_grad=True)  # 输入数据
                self.目标 = torch.tanh(self.输入.sum(dim=1, keepdim=True))  # 目标
                self.层 = nn.Linear(3, 1)

            def 训练(self):
                优化器 = torch.optim.Adam(self.parameters())
                for 轮 in range(3):
                    优化器.zero_grad()
                    损失 = ((self.层(self.输入) - self.目标) ** 2).mean()
                    损失.backward()  # 反向传播
                    优化器.step()
        """
    )
    f = only(source)
    assert f.severity is Severity.ERROR and f.data["variable"] == "self.目标"
    assert f.range.start.line == line_of(source, "self.目标 = torch.tanh")
    line = line_of(source, "损失.backward()")
    text = source.splitlines()[line]
    bw = [r for r in f.related if "`训练()`" in r.message["en"]]
    assert bw and bw[0].range == Range(Position(line, text.index("损失")), Position(line, text.index("  #")))
    fixed = apply(source, f.preferred_fix)
    assert "self.输入 = torch.randn(8, 3)  # 输入数据" in fixed and gg102(fixed) == []


def test_init_attribute_findings_survive_incremental_edits():
    from gradguard.engine import Document

    doc = Document(TRAINER)
    steps = [
        # lines inserted above the class, and a new top-level def: module facts change, the class chunk
        # is reused and re-analysed with its cached facts (the backward's position must follow)
        TRAINER.replace("import torch.nn as nn\n", "import torch.nn as nn\n\n\ndef helper(v):\n    return v * 2\n\n"),
        # the loop now rebuilds self.Y: silent
        TRAINER.replace("            loss = ((self.model",
                        "            self.Y = self.X @ self.w_true\n            loss = ((self.model"),
        TRAINER,
        # a line added inside fit only (the class chunk changes, __init__'s text does not)
        TRAINER.replace("            self.opt.step()", "            self.opt.step()\n            print(epoch)"),
        "# 注释\n" * 3 + TRAINER,
    ]
    for text in steps:
        got = doc.update(text).findings
        assert got == check_source(text).findings, text
        for f in got:
            if f.code == "GG102":
                bw = [r for r in f.related if "`fit()`" in r.message["en"]][0]
                assert "loss.backward()" in text.splitlines()[bw.range.start.line]
    assert [f.data["variable"] for f in doc.result().findings if f.code == "GG102"] == ["self.Y"]


HELPER_TRAINER = src(
    """
    import torch
    import torch.nn as nn


    class Regression:
        def __init__(self, n=10, d=4):
            self.X = torch.randn(n, d, requires_grad=True)
            self.model = nn.Linear(d, 1)
            self._make_targets(d)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)

        def _make_targets(self, d):
            w_true = torch.randn(d, 1)
            self.Y = self.X @ w_true + 0.01

        def fit(self, epochs=4):
            for epoch in range(epochs):
                loss = ((self.model(self.X) - self.Y) ** 2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
    """
)


def test_attribute_built_by_a_helper_that_init_calls():
    # checked with torch: crashes on fit()'s second epoch; the detach fix trains with the same first gradients
    f = only(HELPER_TRAINER)
    assert f.severity is Severity.ERROR and f.data["variable"] == "self.Y"
    assert f.range.start.line == line_of(HELPER_TRAINER, "self.Y = self.X @ w_true")
    assert "`_make_targets()` (called from `__init__()`)" in f.message_in("en")
    # the leaf is made in another method: the fix detaches where the graph is built
    assert f.preferred_fix.title_in("en").startswith("Detach")
    fixed = apply(HELPER_TRAINER, f.preferred_fix)
    assert "self.Y = self.X @ w_true + 0.01\n        self.Y = self.Y.detach()\n" in fixed
    assert gg102(fixed) == []  # nothing left to fix


@pytest.mark.parametrize(
    "old, new",
    [
        # the helper is not called by __init__
        ("        self._make_targets(d)\n", ""),
        # called under no_grad
        ("        self._make_targets(d)\n", "        with torch.no_grad():\n            self._make_targets(d)\n"),
        # __init__ replaces what the helper built
        ("        self._make_targets(d)\n", "        self._make_targets(d)\n        self.Y = self.Y.detach()\n"),
        # the data does not require grad
        ("torch.randn(n, d, requires_grad=True)", "torch.randn(n, d)"),
        # the helper makes its own plain data
        ("        w_true = torch.randn(d, 1)\n", "        w_true = torch.randn(d, 1)\n        self.X = torch.randn(10, d)\n"),
    ],
)
def test_attribute_built_by_a_helper_silences(old, new):
    assert HELPER_TRAINER.count(old) == 1, old
    source = HELPER_TRAINER.replace(old, new)
    assert gg102(source) == [], source


def test_a_second_class_of_the_same_name_keeps_its_own_facts():
    other = src(
        """


        class Regression:
            def __init__(self):
                self.lin = nn.Linear(4, 1)

            def train(self, X):
                for i in range(3):
                    ((self.lin(X) - self.Y) ** 2).sum().backward()
        """
    )
    # an unrelated class of the same name first: the trainer (last, its fact wins) is reported as usual
    first = TRAINER.replace("class Regression:", other.strip() + "\n\n\nclass Regression:")
    f = only(first)
    assert f.range.start.line == line_of(first, "self.Y = self.X @")
    assert any("`fit()`" in r.message["en"] for r in f.related)
    # the unrelated class last: its loop facts are not applied to the trainer's __init__ (no wrong locations)
    last = TRAINER + other
    assert not [f for f in gg102(last) if any("`train()`" in r.message["en"] for r in f.related)]


PARAM_TRAINER = src(
    """
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 1))
            self.w2 = self.w * 2
            self.X = torch.randn(16, 4, requires_grad=True)
            self.feats = torch.tanh(self.X)
            self.loader = DataLoader(TensorDataset(self.feats, torch.randn(16, 1)), batch_size=4)

        def fit(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in self.loader:
                    loss = ((x @ self.w2 - y) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
    """
)


def test_init_attribute_from_a_parameter_is_recomputed_in_the_loop():
    # checked with torch: crashes; with both preferred fixes it trains with the same first-iteration gradients
    # (detaching self.w2 instead would leave the loss without a graph)
    found = {f.data["variable"]: f for f in gg102(PARAM_TRAINER)}
    assert set(found) == {"self.w2", "self.feats"}  # the loader is reported through the tensor it holds
    w2 = found["self.w2"]
    assert w2.severity is Severity.ERROR and w2.range.start.line == line_of(PARAM_TRAINER, "self.w2 = self.w * 2")
    assert w2.preferred_fix.title_in("en") == "Recompute `self.w2` in every iteration of `fit()`'s loop"
    fixed = apply(PARAM_TRAINER, w2.preferred_fix)
    assert "            for x, y in self.loader:\n                self.w2 = self.w * 2\n                loss" in fixed
    assert "        self.w2 = self.w * 2\n        self.X" in fixed  # __init__ keeps its own copy
    assert [f.data["variable"] for f in gg102(fixed)] == ["self.feats"]
    feats = found["self.feats"]
    assert feats.range.start.line == line_of(PARAM_TRAINER, "self.feats = torch.tanh")
    assert feats.preferred_fix.title_in("en").startswith("Remove")
    both = apply_text_edits(PARAM_TRAINER, list(w2.preferred_fix.edits) + list(feats.preferred_fix.edits))
    assert gg102(both) == []


def test_recompute_in_another_method_needs_no_locals():
    # the build reads a local of __init__ (scale): it cannot be copied into fit(), so detach is offered
    source = PARAM_TRAINER.replace("        self.w2 = self.w * 2\n", "        scale = 2\n        self.w2 = self.w * scale\n")
    f = [f for f in gg102(source) if f.data["variable"] == "self.w2"][0]
    assert not any("Recompute" in fx.title_in("en") for fx in f.fixes)
    assert f.preferred_fix.title_in("en").startswith("Detach")


@pytest.mark.parametrize("view", [
    "emb.weight.t()", "emb.weight.T", "emb.weight.view(4, 10)", "emb.weight[0]", "emb.weight[:, 1:3]",
    "emb.weight.transpose(0, 1)", "emb.weight.unsqueeze(0)",
])
def test_a_view_of_a_parameter_before_the_loop_is_silent(view):
    """A tied projection (`out_proj = emb.weight.t()`) shares the parameter's storage:
    the optimizer's in-place updates show through it and its gradient is the one
    wanted. Nothing to report (it used to be a warning)."""
    source = src(f"""
        import torch
        import torch.nn as nn
        emb = nn.Embedding(10, 4)
        proj = {view}
        opt = torch.optim.SGD(emb.parameters(), lr=0.1)
        for step in range(3):
            loss = (emb(torch.tensor([1, 2])).sum() + proj.sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    assert [f for f in check_source(source).findings if f.code == "GG102"] == []


@pytest.mark.parametrize("built, severity", [
    ("emb.weight * 2", "error"),  # a product saves tensors
    ("emb.weight.t() * 2", "error"),
])
def test_what_is_not_a_view_is_still_reported(built, severity):
    source = src(f"""
        import torch
        import torch.nn as nn
        emb = nn.Embedding(10, 4)
        proj = {built}
        opt = torch.optim.SGD(emb.parameters(), lr=0.1)
        for step in range(3):
            loss = proj.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    [f] = [f for f in check_source(source).findings if f.code == "GG102"]
    assert f.severity.value == severity


def test_a_penalty_comprehension_over_parameters_before_the_loop_is_reported():
    source = src("""
        import torch
        import torch.nn as nn
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        l2 = sum(p.pow(2).sum() for p in model.parameters())
        norms = {n: p.norm() for n, p in model.named_parameters()}
        for step in range(3):
            loss = model(torch.randn(5, 4)).mean() + l2 + norms["0.weight"]
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    found = {f.data["variable"]: f for f in gg102(source)}
    assert set(found) == {"l2", "norms"}
    assert found["l2"].severity is Severity.ERROR
    fixed = apply_text_edits(source, found["l2"].preferred_fix.edits)
    assert "    l2 = sum(p.pow(2).sum() for p in model.parameters())\n" in fixed


def test_a_comprehension_over_another_files_model_outputs_is_not_followed():
    """fast_neural_style: `gram_style = [gram_matrix(y) for y in vgg(style)]` with a
    Vgg16(requires_grad=False) defined in another file: whether it is frozen is not
    known here, so nothing is claimed."""
    source = src("""
        import torch
        from vgg import Vgg16
        from utils import gram_matrix
        vgg = Vgg16(requires_grad=False)
        net = torch.nn.Linear(4, 4)
        opt = torch.optim.Adam(net.parameters())
        gram_style = [gram_matrix(y) for y in vgg(torch.randn(2, 4))]
        for step in range(3):
            loss = sum(((gram_matrix(f) - g) ** 2).mean() for f, g in zip(vgg(net(torch.randn(2, 4))), gram_style))
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    assert gg102(source) == []



LIST_OF_OUTPUTS = src("""
    import torch
    import torch.nn as nn

    net = nn.Linear(3, 3)
    x = torch.randn(4, 3)
    outputs = [net(x[k:k + 2]) for k in (0, 2)]
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(3):
        loss = (outputs[0] * outputs[1]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
""")
COMPREHENSION = "outputs = [net(x[k:k + 2]) for k in (0, 2)]"


@pytest.mark.parametrize("build", [
    COMPREHENSION,
    "outputs = [net(x[:2]), net(x[2:])]",
    "outputs = []\nfor k in (0, 2):\n    outputs.append(net(x[k:k + 2]))",
])
def test_no_one_line_detach_fix_for_a_container(build):
    # `outputs = outputs.detach()` on a list raises AttributeError: never offer it
    source = LIST_OF_OUTPUTS.replace(COMPREHENSION, build)
    found = gg102(source)
    titles = [fx.title_in("en") for f in found for fx in f.fixes]
    assert not any("outputs.detach()" in t for t in titles), titles
    assert all(".detach()\n" not in e.new_text for f in found for fx in f.fixes for e in fx.edits)


def test_the_comprehension_is_reported_and_a_tensor_still_gets_the_one_line_detach_fix():
    assert only(LIST_OF_OUTPUTS).fixes  # reported, with the recompute / no_grad fixes
    tensor = LIST_OF_OUTPUTS.replace(COMPREHENSION, "outputs = net(x)").replace("outputs[0] * outputs[1]", "outputs * outputs")
    f = only(tensor)
    assert any("outputs = outputs.detach()" in fx.title_in("en") for fx in f.fixes)


# ---------------------------------------------------------------------------
# a preferred fix keeps what the loop learns (fixes that hold)


def test_the_loss_the_backward_is_called_on_is_never_detached():
    """`loss` built once before the loop and back-propagated in it: `loss.detach()`
    leaves the backward nothing to differentiate ("element 0 of tensors does not
    require grad"); the forward is rebuilt in the loop, copied there when a
    statement before the loop looks at the first value (`print(loss.item())`)."""
    source = src(
        """
        import torch
        w = torch.randn(3, 1, requires_grad=True)
        x, y = torch.randn(5, 3), torch.randn(5, 1)
        err = x @ w - y
        loss = (err ** 2).mean()
        print("first", loss.item())
        for i in range(3):
            w.grad = None
            loss.backward()
            w.data -= 0.1 * w.grad
        """
    )
    f = only(source)
    assert [fx.title_in("en") for fx in f.fixes] == ["Recompute `loss` inside the loop"]
    fixed = assert_fixed(source, f.preferred_fix, "loss")
    assert fixed.count("loss = (err ** 2).mean()") == 2 and "print(\"first\", loss.item())" in fixed
    # a statement before the loop that keeps the value elsewhere: a copy would leave the
    # loop reading the old one, so no recompute; and no detach: no fix at all
    kept = source.replace('print("first", loss.item())', "history = [loss]")
    f = only(kept)
    assert f.fixes == ()
    # the loop changes what the loss is built from (`x` each iteration): no recompute either
    moving = source.replace("    w.grad = None", "    x = x + 1\n    w.grad = None")
    assert only(moving).fixes == ()


def test_detaching_what_the_optimizer_trains_is_never_preferred():
    """The value comes from a layer this unit's optimizer updates (through a list
    of parameters built beforehand): a detach keeps the program running but the
    layer learns nothing through it, so it is offered only as an alternative; a
    layer no optimizer here updates (a frozen backbone) keeps the detach preferred."""
    source = src(
        """
        import torch
        from torch import nn
        emb = nn.Embedding(4, 3)
        lin = nn.Linear(3, 2)
        params = list(emb.parameters()) + list(lin.parameters())
        opt = torch.optim.SGD(params, lr=0.1)
        rows = emb(torch.arange(4))
        first = {"rows": rows}
        for step in range(3):
            loss = lin(torch.randn(4, 3) + rows).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    )
    f = only(source)
    assert not any("Recompute" in fx.title_in("en") for fx in f.fixes)  # `first` keeps the value built before
    assert f.fixes and f.preferred_fix is None
    frozen = source.replace("params = list(emb.parameters()) + list(lin.parameters())", "params = list(lin.parameters())")
    f = only(frozen)
    assert f.preferred_fix is not None and f.preferred_fix.title_in("en").startswith("Detach")


def test_a_value_built_under_a_switch_is_rebuilt_under_it_in_the_loop():
    source = src(
        """
        import torch
        from torch import nn
        use_pos = True
        pos = nn.Embedding(4, 3)
        lin = nn.Linear(3, 2)
        opt = torch.optim.SGD([*pos.parameters(), *lin.parameters()], lr=0.1)
        if use_pos:
            ids = torch.arange(4)
            table = pos(ids)
        for step in range(3):
            h = torch.randn(4, 3)
            if use_pos:
                h = h + table
            loss = lin(h).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    )
    f = only(source)
    assert f.preferred_fix.title_in("en") == "Recompute `table` inside the loop"
    fixed = assert_fixed(source, f.preferred_fix, "table")
    assert "for step in range(3):\n    if use_pos:\n        ids = torch.arange(4)\n        table = pos(ids)\n" in fixed
    assert fixed.count("table = pos(ids)") == 1
    # an `if` that also does something else (prints) does not move
    noisy = source.replace("    table = pos(ids)", "    table = pos(ids)\n    print(table.shape)")
    assert not any("Recompute" in fx.title_in("en") for fx in only(noisy).fixes)


# -- graphs only the shared trace holds (issue 11: the trace is the source of candidates) --

_ROLLOUT = """
import torch
import torch.nn as nn
from torch.distributions import Categorical
{imports}

class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 3)

    def act(self, obs):  # 动作
        dist = Categorical(logits=self.body(obs))
        action = dist.sample()
        return action, {logp}


class Storage:
    def __init__(self):
        self.logp = []

    def add(self, logp):
        self.logp.append(logp)


policy = Policy()
opt = torch.optim.SGD(policy.parameters(), lr=0.1)
storage = Storage()
for t in range(4):
    {act}
    storage.add(logp)
logps = {stack}
for epoch in range(3):
    loss = -logps.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "imports, logp, act, stack, reported",
    [
        # a method of the user's model builds the graph; the storage keeps it; every epoch reuses it
        ("", "dist.log_prob(action)", "action, logp = policy.act(torch.randn(4))", "torch.stack(storage.logp)", True),
        # twins: detached where it is made, where it is stacked, or sampled without a graph
        ("", "dist.log_prob(action).detach()", "action, logp = policy.act(torch.randn(4))",
         "torch.stack(storage.logp)", False),
        ("", "dist.log_prob(action)", "action, logp = policy.act(torch.randn(4))",
         "torch.stack(storage.logp).detach()", False),
        ("", "dist.log_prob(action)", "with torch.no_grad():\n        action, logp = policy.act(torch.randn(4))",
         "torch.stack(storage.logp)", False),
        # an imported helper the trace cannot see made the value: it only may hold a graph
        ("from helpers import rollout_logp", "dist.log_prob(action)", "logp = rollout_logp(policy)",
         "torch.stack(storage.logp)", False),
    ],
)
def test_a_graph_a_method_of_the_users_built_and_an_object_kept(imports, logp, act, stack, reported):
    source = _ROLLOUT.format(imports=imports, logp=logp, act=act, stack=stack)
    found = gg102(source)
    assert bool(found) is reported, [f.message_in("en") for f in found]
    if reported:
        (f,) = found
        assert f.range.start.line == line_of(source, "logps = ")
        assert f.severity == Severity.ERROR  # a Linear's call built it: it saves its input
        assert "`logps`" in f.message_in("en") and "`logps`" in f.message_in("zh")
        assert not f.fixes  # a method's result kept in an object: no text edit re-evaluates the policy


_HANDED = """
import torch
import torch.nn as nn


class Batch(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


class Agent:
    def __init__(self):
        self.model = nn.Linear(4, 2)
        self.optim = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def collect(self, memory):
        obs = torch.randn(3, 4)
        memory.obs.append(obs)
        memory.logp.append(torch.log_softmax(self.model(obs), -1)[:, 0])
        return Batch(obs=obs, logp=torch.log_softmax(self.model(obs), -1)[:, 0], ret=torch.randn(3))

    def learn(self, memory, batch):
        old = torch.cat({stacked})
        for _ in range(2):
            loss = -(old * {read}).mean() + self.model(batch.obs).pow(2).mean()
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()


class Memory:
    def __init__(self):
        self.obs, self.logp = [], []


agent = Agent()
memory = Memory()
batch = agent.collect(memory)
agent.learn(memory, batch)
"""


@pytest.mark.parametrize(
    "stacked, read, reported",
    [
        ("memory.logp", "batch.ret", True),  # the loop back-propagates the kept log-probs (PPO-PyTorch#3)
        ("memory.logp).detach(", "batch.ret", False),
        # the loop reads the list without a graph; the batch holds a graph in .logp, but the
        # loop reads only its .obs and .ret (tianshou#397's answer)
        ("memory.obs", "batch.ret", False),
    ],
)
def test_an_argument_whose_attributes_the_callees_loop_back_propagates(stacked, read, reported):
    """``learn(memory, batch)`` whose loop back-propagates ``memory.logp``: the trace
    alone holds the graph ``collect()`` appended there, and the callee's summary says
    the loop reads that attribute of the argument (``FnFacts.containers``). A batch the
    callee reads by attribute is never taken whole (its ``logp`` is not read)."""
    source = _HANDED.format(stacked=stacked, read=read)
    found = gg102(source)
    assert [f.data["variable"] for f in found] == (["memory.logp"] if reported else []), \
        [f.message_in("en") for f in found]
    if reported:
        assert found[0].range.start.line == line_of(source, "batch = agent.collect(memory)")
        assert found[0].severity == Severity.ERROR  # a log-softmax over a Linear's output, kept
        assert not found[0].fixes


def test_a_loader_a_helper_of_the_file_returns_is_no_candidate():
    """``train_loader = get_data_loader(train_data, ...)`` (pytorch-sentiment-analysis):
    the helper's summary gives its result a graph (the collate function a nested def
    makes), which no module of an object of the user's built. Only a method's graph
    built by its object's modules is taken from the trace alone (the 51 checkouts' false
    alarms when any graph a summary computed was)."""
    source = src("""
        import torch
        import torch.nn as nn
        import datasets


        def get_collate_fn(pad_index):
            def collate_fn(batch):
                batch_ids = [i["ids"] for i in batch]
                batch_ids = nn.utils.rnn.pad_sequence(batch_ids, padding_value=pad_index, batch_first=True)
                return {"ids": batch_ids}

            return collate_fn


        def get_data_loader(dataset, batch_size, pad_index, shuffle=False):
            collate_fn = get_collate_fn(pad_index)
            data_loader = torch.utils.data.DataLoader(
                dataset=dataset, batch_size=batch_size, collate_fn=collate_fn, shuffle=shuffle)
            return data_loader


        train_data = datasets.load_dataset("imdb", split="train").map(lambda x: x)
        train_data_loader = get_data_loader(train_data, 8, 0, shuffle=True)
        model = nn.Linear(4, 2)
        opt = torch.optim.Adam(model.parameters())
        for epoch in range(3):
            for batch in train_data_loader:  # 批次
                loss = model(batch["ids"]).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
    """)
    assert gg102(source) == []
