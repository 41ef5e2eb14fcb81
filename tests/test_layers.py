"""The package is a house of floors, and nothing imports upward.

    floor 1  gradguard.model      value types, text maths, noqa, i18n
    floor 2  gradguard.analysis   AST predicates, values, interpreter, summaries, facts, resolve
    floor 3  gradguard.rules      base, common helpers, the rule modules, the registry
    floor 4  gradguard.engine     document, parallel, config, notebook, the fix loop
    floor 5  front ends           cli, output, cache, lsp (its features/ package included) (and __main__)

Every import is read from the source with :mod:`ast`, including imports inside
functions and under ``if TYPE_CHECKING:``: a lazy import is still a dependency,
and the cycles this test exists to prevent (``Finding.name`` asking the
registry) were all function-local. Also checked: no cycle among the package's
modules, the rule modules never import the registry nor each other (shared
helpers live in ``rules/common.py``; a rule kept as a package imports only its
own parts), floors 1-2 never import the LSP
libraries, and the CLI imports the language server only to ``serve``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "server" / "gradguard"

FLOORS = {
    "gradguard.model": 1,
    "gradguard.analysis": 2,
    "gradguard.rules": 3,
    "gradguard.engine": 4,
    "gradguard.cli": 5,
    "gradguard.cli_io": 5,
    "gradguard.flake8_plugin": 5,
    "gradguard.output": 5,
    "gradguard.cache": 5,
    "gradguard.lsp": 5,
    "gradguard.__main__": 5,
}


def _modules() -> dict:
    """Dotted module name → source path, for every module of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def floor_of(module: str):
    """The floor of a module of ours; ``gradguard`` itself (version, docs URL) is
    the ground everyone may stand on (None)."""
    for prefix, floor in FLOORS.items():
        if module == prefix or module.startswith(prefix + "."):
            return floor
    if module == "gradguard":
        return None
    raise AssertionError(f"{module}: a module on no floor; add it to FLOORS in {__file__}")


def _resolve_relative(module: str, is_pkg: bool, level: int, target) -> str:
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(module: str, path: Path):
    """(imported module, line, inside a function) for every import statement
    of ``module``. ``from pkg import name`` counts as importing ``pkg.name``
    when that is a module of ours, else ``pkg``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    found.append((a.name, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = _resolve_relative(module, is_pkg, child.level, child.module)
                for a in child.names:
                    sub = f"{base}.{a.name}"
                    found.append((sub if sub in MODULES else base, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return found


def _our_imports():
    out = {}
    for mod, path in MODULES.items():
        out[mod] = [(m, line, fn) for m, line, fn in imports_of(mod, path)
                    if m == "gradguard" or m.startswith("gradguard.")]
    return out


OURS = _our_imports()


def test_every_module_is_on_a_floor():
    for mod in MODULES:
        floor_of(mod)  # raises for a module on no floor


def test_nothing_imports_upward():
    bad = []
    for mod, imports in OURS.items():
        mine = floor_of(mod)
        for target, line, _ in imports:
            theirs = floor_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                bad.append(f"{MODULES[mod].relative_to(PKG.parent)}:{line}: {mod} (floor {mine}) imports "
                           f"{target} (floor {theirs})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycle():
    graph = {mod: sorted({t for t, _, _ in imports if t in MODULES and t != mod}) for mod, imports in OURS.items()}
    # Tarjan's strongly connected components: any component of two or more
    # modules (or a module importing itself) is a cycle
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []
    counter = [0]

    def strongconnect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strongconnect(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _rule_of(module: str):
    """``gradguard.rules.gg102_stale_graph`` for that rule's module and for the
    parts of a rule kept as a package (``gradguard.rules.gg102_stale_graph.messages``);
    None for anything else."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["gradguard", "rules"] and parts[2] not in ("base", "common", "catalog"):
        return ".".join(parts[:3])
    return None


def test_rule_modules_import_neither_the_registry_nor_each_other():
    """A rule builds on rules/base.py and rules/common.py (and reads what
    rules/catalog.py declares of it); only the engine (and the front ends above
    it) ask the registry which rules exist.

    A rule kept as a package (``rules/gg102_stale_graph/``: the analysis and the
    Rule in ``__init__.py``, its ``messages``, ``fixes``, ...) imports its own
    parts, and the parts import each other; a part never imports the package
    itself (the analysis reads the messages and the fixes, never the other way)."""
    shared = {"gradguard.rules.base", "gradguard.rules.common", "gradguard.rules.catalog"}
    bad = []
    for mod, imports in OURS.items():
        if floor_of(mod) in (1, 2, 3) and mod != "gradguard.rules":
            for target, line, _ in imports:
                if not target.startswith("gradguard.rules") or target in shared or target == mod:
                    continue
                own_part = _rule_of(target) == _rule_of(mod) is not None and target != _rule_of(target)
                if not own_part:
                    bad.append(f"{mod}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_a_rule_may_import_its_own_parts_only():
    """The checker's exception is exactly a rule's own parts."""
    assert _rule_of("gradguard.rules.gg102_stale_graph.messages") == "gradguard.rules.gg102_stale_graph"
    assert _rule_of("gradguard.rules.gg102_stale_graph") == "gradguard.rules.gg102_stale_graph"
    assert _rule_of("gradguard.rules.common") is None and _rule_of("gradguard.rules") is None
    assert _rule_of("gradguard.rules.catalog") is None
    assert _rule_of("gradguard.analysis.facts") is None


@pytest.mark.parametrize("floor", [1, 2])
def test_lower_floors_never_import_the_language_server_libraries(floor):
    bad = []
    for mod, path in MODULES.items():
        if floor_of(mod) == floor:
            for target, line, _ in imports_of(mod, path):
                if target.split(".")[0] in ("pygls", "lsprotocol"):
                    bad.append(f"{mod}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_cli_imports_the_language_server_only_to_serve():
    tree = ast.parse(MODULES["gradguard.cli"].read_text(encoding="utf-8"))
    where = []  # (enclosing function, line) of every import of gradguard.lsp

    def visit(node, fn):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith("gradguard.lsp"):
                where.append((fn, child.lineno))
            elif isinstance(child, ast.Import) and any(a.name.startswith("gradguard.lsp") for a in child.names):
                where.append((fn, child.lineno))
            visit(child, child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn)

    visit(tree, None)
    assert where, "the CLI no longer starts the server?"
    assert all(fn == "cmd_serve" for fn, _ in where), where


def test_the_scanner_sees_function_local_and_type_checking_imports(tmp_path):
    """The checker itself: a lazy import and a TYPE_CHECKING one are found."""
    src = tmp_path / "m.py"
    src.write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from gradguard.rules import Rule\n"
                   "def f():\n    from gradguard.engine import check_source\n", encoding="utf-8")
    got = imports_of("gradguard.model.m", src)
    assert ("gradguard.rules", 3, False) in got
    assert ("gradguard.engine", 5, True) in got
