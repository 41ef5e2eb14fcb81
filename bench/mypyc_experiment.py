"""The mypyc experiment (issue 11): does compiling the analysis floor bring the cold CLI
on the large file under 1.6x the bare parse process?

    .venv/bin/python -m bench.mypyc_experiment          # build, check, measure, write its BENCHMARKS.md part
    .venv/bin/python -m bench.mypyc_experiment --runs 5 --no-write

Nothing is built in the repository: the package is copied to a temporary directory,
the few changes mypyc needs are applied to the copy (each listed below with the error
that asks for it), ``gradguard/model``, ``gradguard/analysis`` and ``gradguard/rules``
are compiled there with ``mypyc`` (it comes with mypy, in the ``test`` extra; it needs
a C compiler), and a launcher puts that copy first on ``sys.path``. The compiled CLI
must print byte-identical JSON to the pure one on the large file and on the project
before anything is timed. Then, interleaved in one run (medians, ratios to the floor):
the floor process, pure and compiled ``gradguard check --no-cache`` on the large file
(``--jobs`` default and 1), a one-line file (start-up), the 300-file project, the
in-process ``check_source`` of the large file, and ``-X importtime`` of what a check
imports.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from bench import corpus
from bench.__main__ import OUT, PY, ROOT, _commit, _median_runs, _tool

HEADING = "### mypyc on model, analysis and rules: the reproducible build"
COMPILED = ("model", "analysis", "rules")  # the floors below the engine (docs/architecture.md)
# mypyc cannot compile it: FrozenError subclasses AttributeError ("Inheriting from most
# builtin types is unimplemented"), and the module builds classes at run time (type(), exec)
NOT_COMPILED = ("model/record.py",)

# (file, old, new, the error that asks for it) -- applied to the temporary copy only.
# The pure package keeps its idioms: they exist for its start-up time.
PATCHES: List[Tuple[str, str, str, str]] = [
    ("model/text.py", "index = cls.__new__(cls)", 'index = cls("")',
     "a native class has no `__new__` to call: internal compiler error KeyError \"'LineIndex' has no attribute "
     "'__new__'\""),
    ("analysis/summary.py",
     "\n    Fact = Tuple[str, object]\n    Summarizer = Callable[[ast.stmt, bool], Iterable[Fact]]  # (statement, "
     "referenced)\nelse:\n    Fact = Summarizer = object  # annotation names only\n",
     "\n    pass\nFact = Tuple[str, object]\nSummarizer = Callable[[ast.stmt, bool], Iterable[Fact]]\n",
     "the `else:` of `if TYPE_CHECKING:` is unreachable to mypy, and mypyc compiles it as such: "
     "RuntimeError \"Reached allegedly unreachable code!\" at import"),
    ("model/record.py", "def Factory(make: Callable[[], _T]) -> _T:", "def Factory(make: Callable[[], _T]) -> Any:",
     "mypyc checks a class attribute's default against its declared type at import, and `Factory(set)` is "
     "typed as the set it will make: TypeError \"set object expected; got _Factory\""),
]
# What the first build met and the source now avoids (plain typing fixes, no cost to the pure package)
FIXED_IN_SOURCE = [
    "`analysis/facts.py` and `rules/common.py`, the parameter helpers: `zip(reversed(...), reversed(a.defaults))` "
    "with `a` untyped stopped the compiler (internal error \"AssertionError: Any\"); `a` is now an "
    "`ast.arguments`",
    "`analysis/interpreter.py`, `_comp`: one loop variable held a `Val`, then AST nodes; mypy did not see it "
    "(the nodes came untyped), the compiled code checks it: TypeError \"Val object expected; got ast.Call\" "
    "on most training loops. The second loop has its own name",
    "`rules/gg102_stale_graph.py`: a per-analysis cache kept in `self.__dict__` (a native instance has none: "
    "AttributeError); it is now an attribute set in `__init__`",
]
TYPING_NOTE = ("a `@record` class is a non-native class to mypyc (an unknown class decorator), and mypyc "
               "builds its `__annotations__` at import from the module's globals, where the names imported "
               "only under `if TYPE_CHECKING:` are missing: KeyError 'Mapping'. So every compiled module "
               "imports its `typing` names at run time")


def build(dest: Path) -> dict:
    """Copy the package to ``dest``, patch, compile. Returns what happened."""
    src = dest / "server"
    shutil.copytree(ROOT / "server" / "gradguard", src / "gradguard",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")  # the mypy configuration
    pkg = src / "gradguard"
    applied, failed = [], []
    for rel, old, new, why in PATCHES:
        p = pkg / rel
        text = p.read_text(encoding="utf-8")
        if old not in text:
            failed.append(f"{rel}: patch no longer applies ({why[:60]})")
            continue
        p.write_text(text.replace(old, new, 1), encoding="utf-8")
        applied.append(f"{rel}: {why}")
    targets = [p for part in COMPILED for p in sorted((pkg / part).glob("*.py"))
               if str(p.relative_to(pkg)) not in NOT_COMPILED]
    for p in targets:
        text = p.read_text(encoding="utf-8")
        m = re.search(r"^if TYPE_CHECKING:.*\n    (from typing import [^\n]+)\n", text, re.M)
        if m:
            p.write_text(text[:m.start()] + m.group(1) + "\n" + text[m.start():], encoding="utf-8")
    t0 = time.perf_counter()
    r = subprocess.run([PY, "-m", "mypyc", *[str(p.relative_to(dest)) for p in targets]], cwd=dest,
                       capture_output=True, text=True)
    out = {"seconds": time.perf_counter() - t0, "returncode": r.returncode, "patches": applied,
           "patch_failures": failed, "modules": [str(p.relative_to(src)) for p in targets],
           "not_compiled": list(NOT_COMPILED),
           "extension_bytes": sum(f.stat().st_size for f in src.rglob("*.so"))}
    log = r.stdout + r.stderr
    out["errors"] = [ln for ln in log.splitlines() if re.search(r":\d+: (error:|\w*Error\b)", ln)][:20]
    out["warnings"] = sorted({ln.split(": warning: ", 1)[1] for ln in log.splitlines() if ": warning: " in ln})
    launcher = dest / "gradguard-mypyc"
    launcher.write_text(f"#!{PY}\nimport sys\nsys.path.insert(0, {str(src)!r})\nfrom gradguard.cli import run\n"
                        "sys.exit(run())\n", encoding="utf-8")
    launcher.chmod(0o755)
    out["launcher"] = str(launcher)
    out["src"] = str(src)
    return out


def _same_output(a: List[str], b: List[str]) -> bool:
    """Same exit code, stdout and stderr; a rule that raises in either is an error (no silent unit)."""
    env = dict(os.environ, GRADGUARD_STRICT="1")
    ra = subprocess.run(a, capture_output=True, env=env)
    rb = subprocess.run(b, capture_output=True, env=env)
    return (ra.returncode, ra.stdout, ra.stderr) == (rb.returncode, rb.stdout, rb.stderr) and ra.returncode in (0, 1)


_INPROC = """
import ast, gc, sys, time
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
import gradguard.analysis.interpreter as I
assert I.__file__.endswith('.so') == bool(sys.argv[1]), I.__file__
from gradguard.engine import check_source
gc.set_threshold(200_000, 100, 100)
text = open(sys.argv[2], encoding='utf-8').read()
check_source(text, 'large.py')
bp = bc = 1e9
for _ in range(5):
    t0 = time.perf_counter(); ast.parse(text); bp = min(bp, time.perf_counter() - t0)
    t0 = time.perf_counter(); check_source(text, 'large.py'); bc = min(bc, time.perf_counter() - t0)
print(bp, bc)
"""

_IMPORTS = "import gradguard.cli, gradguard.engine.parallel, gradguard.rules as R; R.all_rules()"


def _importtime(src: str) -> Tuple[float, float, bool]:
    """(all imports, gradguard's own modules, typing imported?) in ms, self times summed."""
    pre = f"import sys; sys.path.insert(0, {src!r}); " if src else ""
    r = subprocess.run([PY, "-X", "importtime", "-c", pre + _IMPORTS], capture_output=True, text=True)
    tot = own = 0
    typing = False
    for line in r.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if m:
            tot += int(m[1])
            own += int(m[1]) if m[2].startswith("gradguard") or m[2].endswith("__mypyc") else 0
            typing = typing or m[2] == "typing"
    return tot / 1e3, own / 1e3, typing


def measure(b: dict, runs: int) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    gg, ggc = _tool("gradguard"), b["launcher"]
    large = OUT / "large_training.py"
    large.write_text(corpus.training_file(1800, seed=3), encoding="utf-8")
    tiny = OUT / "tiny.py"
    tiny.write_text("x = 1\n", encoding="utf-8")
    proj = OUT / "mypyc_project"
    if proj.exists():
        shutil.rmtree(proj)
    files = corpus.write_project(proj, 300)
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": _commit(),
                 "mypy": _mypy_version(), "large_lines": len(large.read_text(encoding="utf-8").splitlines()), "project_files": len(files)}
    j = ["--format", "json", "--no-cache"]
    res["identical_large"] = _same_output([gg, "check", str(large), *j], [ggc, "check", str(large), *j])
    res["identical_project"] = _same_output([gg, "check", str(proj), *j], [ggc, "check", str(proj), *j])
    if not (res["identical_large"] and res["identical_project"]):
        return res
    parse = "import ast,sys; ast.parse(open(sys.argv[1]).read())"
    res["large"] = _median_runs({
        "floor": [PY, "-c", parse, str(large)],
        "pure": [gg, "check", str(large), *j], "mypyc": [ggc, "check", str(large), *j],
        "pure_jobs1": [gg, "check", str(large), *j, "--jobs", "1"],
        "mypyc_jobs1": [ggc, "check", str(large), *j, "--jobs", "1"]}, runs)
    res["tiny"] = _median_runs({"floor": [PY, "-c", parse, str(tiny)], "pure": [gg, "check", str(tiny), *j],
                                "mypyc": [ggc, "check", str(tiny), *j]}, runs)
    listing = OUT / "mypyc_project_files.txt"
    listing.write_text("\n".join(str(p) for p in files), encoding="utf-8")
    loop = "import ast,sys\nfor f in open(sys.argv[1]).read().split('\\n'):\n    ast.parse(open(f).read())"
    res["project"] = _median_runs({"floor": [PY, "-c", loop, str(listing)],
                                   "pure": [gg, "check", str(proj), *j, "--jobs", "2"],
                                   "mypyc": [ggc, "check", str(proj), *j, "--jobs", "2"]},
                                  max(3, runs * 2 // 3), no_warmup=("pure", "mypyc"))
    inproc: Dict[str, List[Tuple[float, float]]] = {"pure": [], "mypyc": []}
    imports: Dict[str, List[Tuple[float, float, bool]]] = {"pure": [], "mypyc": []}
    _importtime(""), _importtime(b["src"])  # warm-up: bytecode caches
    for _ in range(max(3, runs // 2)):
        for kind, src in (("pure", ""), ("mypyc", b["src"])):
            r = subprocess.run([PY, "-c", _INPROC, src, str(large)], capture_output=True, text=True, check=True)
            p, c = map(float, r.stdout.split())
            inproc[kind].append((p, c))
            imports[kind].append(_importtime(src))
    res["in_process"] = {k: {"parse_s": min(p for p, _ in v), "check_s": min(c for _, c in v)}
                         for k, v in inproc.items()}
    res["imports"] = {k: {"all_ms": statistics.median(t for t, _, _ in v),
                          "own_ms": statistics.median(o for _, o, _ in v), "typing": any(t for _, _, t in v)}
                      for k, v in imports.items()}
    return res


def render(b: dict, m: dict) -> str:
    L = [HEADING, ""]
    L += [f"Generated by `python -m bench.mypyc_experiment` on {m.get('date', '?')}, gradguard commit "
          f"`{m.get('commit', '?')}` (mypyc from mypy {m.get('mypy', '?')}). The question (issue 11): compiled with mypyc, as black and mypy ship themselves, "
          "does the analysis floor bring the cold CLI on the large file under 1.6× the bare parse process? "
          "The hand-measured build above compiled four analysis modules; this one compiles every module of "
          "the three floors below the engine that mypyc accepts, and can be rerun.", "",
          f"Built in a temporary copy (nothing in the repository): {len(b['modules'])} modules of "
          f"`gradguard/{{{','.join(COMPILED)}}}` compiled, {b['extension_bytes'] / 1e6:.1f} MB of extension "
          f"modules, {b['seconds']:.0f} s. Before timing, the compiled CLI printed byte-identical JSON to the pure "
          f"one on the large file ({'yes' if m.get('identical_large') else '**no**'}) and the project "
          f"({'yes' if m.get('identical_project') else '**no**'}).", ""]
    if "large" not in m:
        return "\n".join(L + ["The compiled build did not match; nothing was timed.", ""])
    lg, tn, pj = m["large"], m["tiny"], m["project"]

    def row(name: str, d: dict, k: str, floor: float) -> str:
        v, c, cf = d[k]["median"], d[k]["cpu_median"], d["floor"]["cpu_median"]
        return f"| {name} | {1e3 * v:.1f} ms | {v / floor:.2f}× | {1e3 * c:.1f} ms | {c / cf:.2f}× |"

    fl, ft, fp = lg["floor"]["median"], tn["floor"]["median"], pj["floor"]["median"]
    L += [f"Whole process, interleaved runs, medians; ratios to the floor of the same run. (a) the large file "
          f"({m['large_lines']} lines, the file of section 1); a one-line file (start-up and imports); "
          f"(b) the {m['project_files']}-file project, `--jobs 2`. CPU time is user + sys of every process of "
          "the run: on a machine shared with other work, the wall times of the longer runs vary more than "
          "the CPU they use.", "",
          "| run | wall | ratio to floor | CPU | CPU ratio |", "|---|---|---|---|---|",
          row("(a) ast.parse process (floor)", lg, "floor", fl),
          row("(a) gradguard check --no-cache, pure Python", lg, "pure", fl),
          row("(a) gradguard check --no-cache, **mypyc**", lg, "mypyc", fl),
          row("(a) … --jobs 1, pure Python", lg, "pure_jobs1", fl),
          row("(a) … --jobs 1, **mypyc**", lg, "mypyc_jobs1", fl),
          row("one-line file: ast.parse process (floor)", tn, "floor", ft),
          row("one-line file: gradguard check, pure Python", tn, "pure", ft),
          row("one-line file: gradguard check, **mypyc**", tn, "mypyc", ft),
          row("(b) ast.parse loop (floor)", pj, "floor", fp),
          row("(b) gradguard check --no-cache, pure Python", pj, "pure", fp),
          row("(b) gradguard check --no-cache, **mypyc**", pj, "mypyc", fp), ""]
    ip, im = m["in_process"], m["imports"]
    sp = ip["pure"]["check_s"] / ip["mypyc"]["check_s"]
    L += [f"In process (best of several, large file): `ast.parse` {1e3 * ip['pure']['parse_s']:.1f} ms; "
          f"`check_source` pure {1e3 * ip['pure']['check_s']:.1f} ms "
          f"({ip['pure']['check_s'] / ip['pure']['parse_s']:.1f}× parse), compiled "
          f"{1e3 * ip['mypyc']['check_s']:.1f} ms ({ip['mypyc']['check_s'] / ip['mypyc']['parse_s']:.1f}× parse): "
          f"the compiled analysis is {sp:.2f}× as fast.", "",
          f"Imports of a check (`python -X importtime`, self times summed, median): pure {im['pure']['all_ms']:.1f} ms "
          f"of which gradguard's own modules {im['pure']['own_ms']:.1f} ms; compiled {im['mypyc']['all_ms']:.1f} ms, "
          f"of which gradguard's modules and the shared extension {im['mypyc']['own_ms']:.1f} ms; "
          f"`typing` imported: pure {'yes' if im['pure']['typing'] else 'no'}, compiled "
          f"{'yes' if im['mypyc']['typing'] else 'no'}.", ""]
    ratio = lg["mypyc"]["median"] / fl
    L += [f"**Verdict: {'under' if ratio < 1.6 else 'not under'} 1.6× ({ratio:.2f}×).**", ""]
    if ratio >= 1.6:
        budget = 1.6 * fl
        start_c = tn["mypyc"]["median"]  # the one-line compiled process: start-up and imports
        parse_extra = fl - ft  # what the floor spends on the large file beyond its own start-up
        left = budget - start_c - parse_extra
        spent_p = lg["pure"]["median"] - tn["pure"]["median"]
        spent_c = lg["mypyc"]["median"] - tn["mypyc"]["median"]
        tot, bare, part = _annotation_counts()
        L += [f"Why not. 1.6× the floor of this run is {1e3 * budget:.0f} ms. The compiled process on a one-line "
              f"file already takes {1e3 * start_c:.0f} ms, and reading and parsing the large file costs the floor "
              f"{1e3 * parse_extra:.0f} ms; that leaves {1e3 * left:.0f} ms for the analysis and the output, where "
              f"the pure package spends {1e3 * spent_p:.0f} ms and the compiled one {1e3 * spent_c:.0f} ms. "
              + (f"The analysis would have to be {spent_p / max(left, 1e-3):.0f}× faster than pure Python; mypyc "
                 f"made it {sp:.2f}× (in process), {spent_p / spent_c:.2f}× (whole process). " if left > 0 else
                 "Start-up and parsing alone exceed the budget. ")
              + f"Start-up does not improve: the imports of a check take {im['mypyc']['all_ms']:.0f} ms compiled "
              f"against {im['pure']['all_ms']:.0f} ms pure (the compiled modules load a "
              f"{b['extension_bytes'] / 1e6:.1f} MB extension and must import `typing`, which the pure package "
              "avoids). The analysis gains little because "
              "the code is not the kind mypyc speeds up: its value types (`Val`, the findings, the loop frames) "
              "are `@record` classes, which mypyc leaves as ordinary Python classes (a class decorator it does "
              "not know), so every field read stays a dictionary-and-descriptor lookup; "
              f"{bare + part} of the {tot} functions of the three packages have parameters without annotations, "
              "which compiled code handles as `object` with generic operations; and most of the work is reading "
              "`ast` nodes (attributes and `isinstance` on CPython's own node objects), which compiles to the same "
              "C API calls the interpreter makes. Making the records native classes and annotating every "
              "parameter would be a rewrite of the value layer, and what fully typed native code gains (mypy reports "
              "about 4× for itself, black up to 2×) is still short of the factor needed here.", ""]
    L += ["What mypyc could not compile, or compiled differently from CPython, and what the temporary copy "
          "changes for it:", "",
          "- `gradguard/model/record.py` is not compiled: its `FrozenError(AttributeError)` stops the build "
          "(\"Inheriting from most builtin types is unimplemented\"), and it builds classes at run time "
          "(`type()`, one `exec` per class), which compiled code cannot speed up."]
    L += [f"- {p}" for p in b["patches"]]
    L += [f"- fixed in the source (found by the first build): {p}." for p in FIXED_IN_SOURCE]
    L += [f"- every compiled module: {TYPING_NOTE}."]
    if b["patch_failures"] or b["errors"]:
        L += [f"- build problems: {'; '.join(b['patch_failures'] + b['errors'])}"]
    if b["warnings"]:
        L += [f"- mypyc warnings: {'; '.join(b['warnings'])}"]
    L.append("")
    return "\n".join(L)


def _annotation_counts() -> Tuple[int, int, int]:
    """(functions, without any annotation, with some parameter unannotated) in the compiled packages."""
    import ast

    tot = bare = part = 0
    for part_name in COMPILED:
        for p in (ROOT / "server" / "gradguard" / part_name).glob("*.py"):
            for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    tot += 1
                    a = n.args
                    params = [x for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                    annotated = [x for x in params if x.annotation is not None]
                    if not annotated and n.returns is None:
                        bare += 1
                    elif len(annotated) < len(params):
                        part += 1
    return tot, bare, part


def _mypy_version() -> str:
    try:
        import mypy.version

        return mypy.version.__version__
    except ImportError:
        return "?"


def write_section(section: str) -> None:
    """Replace (or add) this experiment's part of the "## Experiments" section of BENCHMARKS.md,
    which ``python -m bench`` keeps when it rewrites the file."""
    path = ROOT / "BENCHMARKS.md"
    path.write_text(splice_section(path.read_text(encoding="utf-8"), section), encoding="utf-8")


BEGIN = "<!-- bench.mypyc_experiment: begin (python -m bench.mypyc_experiment) -->"
END = "<!-- bench.mypyc_experiment: end -->"


def splice_section(text: str, section: str) -> str:
    """``text`` with this experiment's part (between its markers) replaced, or added at the end of
    the "## Experiments" section (before the next section or another generator's part)."""
    block = BEGIN + "\n\n" + section.strip("\n") + "\n\n" + END + "\n"
    if BEGIN in text and END in text:
        i, j = text.index(BEGIN), text.index(END) + len(END)
        return text[:i] + block.rstrip("\n") + text[j:]
    if "\n## Experiments" not in text:
        text = (text.rstrip("\n") + "\n\n## Experiments\n\n"
                "Measured outside `python -m bench` (which keeps this section when it rewrites the file).\n")
    exp = text.index("\n## Experiments")
    ends = [k for k in (text.find("\n## ", exp + 1), text.find("\n<!-- bench.", exp + 1)) if k >= 0]
    if not ends:
        return text.rstrip("\n") + "\n\n" + block
    k = min(ends)
    return text[:k].rstrip("\n") + "\n\n" + block + "\n" + text[k + 1:]


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mypyc_experiment", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    ap.add_argument("--keep", action="store_true", help="keep the temporary build and print its path")
    ap.add_argument("--render-only", action="store_true", help="rewrite the section from bench/out/mypyc.json")
    args = ap.parse_args(argv)
    if args.render_only:
        d = json.loads((OUT / "mypyc.json").read_text(encoding="utf-8"))
        write_section(render(d["build"], d["measure"]))
        return 0
    dest = Path(tempfile.mkdtemp(prefix="gg-mypyc-"))
    try:
        b = build(dest)
        print(f"[mypyc] built in {b['seconds']:.0f} s, rc {b['returncode']}", file=sys.stderr, flush=True)
        if b["returncode"] != 0:
            print("\n".join(b["errors"]), file=sys.stderr)
            return 1
        m = measure(b, args.runs)
        (OUT / "mypyc.json").write_text(json.dumps({"build": b, "measure": m}, indent=1), encoding="utf-8")
        section = render(b, m)
        print(section)
        if not args.no_write:
            write_section(section)
        return 0
    finally:
        if args.keep:
            print(f"[mypyc] build kept in {dest}", file=sys.stderr)
        else:
            shutil.rmtree(dest, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
