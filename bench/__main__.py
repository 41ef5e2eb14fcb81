"""gradguard's performance proof: ``python -m bench`` (or ``make bench``).

Every figure is a ratio against a baseline measured in the same run, from
medians of several runs (machines are noisy). Sections:

1. ``cli``     whole-process ``gradguard check`` vs a bare ``ast.parse`` process
               (the floor), TorchFix and ruff: one ~1,800-line training file and
               a 300-file project;
2. ``scaling`` in-process analysis of 100 … 20,000-line files vs ``ast.parse``
               (bench/scaling.png);
3. ``server``  ``gradguard serve`` over stdio: didChange → publishDiagnostics
               latency for 500 single-character edits in a 2,000-line file
               (debounce 0), syntax-error edits separately, RSS over 1,000
               open/edit/close cycles;
4. ``jedi``    how much of (1) and (3) goes to cross-file resolution / jedi;
5. ``profile`` where the large-file time goes (start-up, parse, summarizers, rules).

Writes bench/out/results.json and BENCHMARKS.md. ``--quick`` for a smoke run,
``--only SECTION[,SECTION]`` to run part of it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from bench import corpus

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PY = sys.executable
BIN = Path(PY).parent


def _tool(name: str) -> Optional[str]:
    p = BIN / name
    if p.exists():
        return str(p)
    return shutil.which(name)


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env.pop("PYTHONPATH", None)
    # measure what users get: bytecode caches written by the warm-up run and used
    # afterwards (a session with PYTHONDONTWRITEBYTECODE would recompile every
    # recently edited module in every process)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


_LAST_CPU = [0.0]  # CPU seconds (user + sys) of the last _wall run, its child processes included


def _wall(argv: Sequence[str], cwd: Optional[str] = None) -> float:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=_env())
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _LAST_CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"{argv[:3]}... exited {r.returncode}: {r.stderr.decode(errors='replace')[-800:]}")
    return dt


def _median_runs(cmds: Dict[str, Sequence[str]], runs: int, cwd: Optional[str] = None,
                 runs_for: Optional[Dict[str, int]] = None, no_warmup: Sequence[str] = ()) -> Dict[str, dict]:
    """Interleaved runs of several commands (so drift hits them alike); medians.
    One unmeasured warm-up run each (file cache, .pyc), except for ``no_warmup``."""
    times: Dict[str, List[float]] = {k: [] for k in cmds}
    cpu: Dict[str, List[float]] = {k: [] for k in cmds}
    errors: Dict[str, str] = {}
    for k, argv in cmds.items():
        if k in no_warmup:
            continue
        try:
            _wall(argv, cwd)
        except Exception as e:  # a tool that cannot run is reported, not fatal
            errors[k] = str(e)
    for i in range(runs):
        for k, argv in cmds.items():
            if k in errors or i >= (runs_for or {}).get(k, runs):
                continue
            try:
                times[k].append(_wall(argv, cwd))
                cpu[k].append(_LAST_CPU[0])
            except Exception as e:
                errors[k] = str(e)
    out = {}
    for k in cmds:
        if k in errors and not times[k]:
            out[k] = {"error": errors[k]}
        else:
            out[k] = {"median": statistics.median(times[k]), "runs": times[k],
                      "cpu_median": statistics.median(cpu[k]), "cpu_runs": cpu[k]}
    return out


# ---------------------------------------------------------------- 1. CLI
def bench_cli(runs: int, quick: bool) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    large = OUT / "large_training.py"
    large.write_text(corpus.training_file(1800, seed=3), encoding="utf-8")
    proj = OUT / "project"
    if proj.exists():
        shutil.rmtree(proj)
    files = corpus.write_project(proj, 300)
    cores = os.cpu_count() or 1
    gg = _tool("gradguard")
    tf = _tool("torchfix")
    rf = _tool("ruff")
    pf = _tool("pyflakes")
    missing = [n for n, t in (("torchfix", tf), ("ruff", rf), ("pyflakes", pf)) if not t]
    res: dict = {"missing_tools": missing, "cores": cores, "large_lines": len(large.read_text().splitlines()),
                 "project_files": len(files), "project_lines": sum(len(p.read_text().splitlines()) for p in files)}

    floor_one = [PY, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", str(large)]
    # "gradguard" is a cold run (--no-cache: every file analysed); "gradguard_warm" re-checks
    # an unchanged file, served from the result cache its warm-up run filled.
    warm_cache = OUT / "warm_cache"
    if warm_cache.exists():
        shutil.rmtree(warm_cache)
    cmds = {"floor": floor_one, "gradguard": [gg, "check", str(large), "--format", "json", "--no-cache"],
            "gradguard_jobs1": [gg, "check", str(large), "--format", "json", "--no-cache", "--jobs", "1"],
            "gradguard_warm": [gg, "check", str(large), "--format", "json", "--cache-dir", str(warm_cache)]}
    # The generated file's run_* functions are never called, so a one-shot check skips
    # their by-name facts (summary.unreferenced_defs). The same file with a main()
    # calling every one of them shows the cost when nothing can be skipped.
    import re as _re

    text = large.read_text(encoding="utf-8")
    runs_called = _re.findall(r"^def (run_\w+)\(\)", text, _re.M)
    called = OUT / "large_training_called.py"
    called.write_text(text + "\n\ndef main():\n" + "".join(f"    {n}()\n" for n in runs_called)
                      + "\n\nif __name__ == \"__main__\":\n    main()\n", encoding="utf-8")
    cmds["floor_called"] = [PY, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", str(called)]
    cmds["gradguard_called"] = [gg, "check", str(called), "--format", "json", "--no-cache"]
    if rf:
        cmds["ruff"] = [rf, "check", "--no-cache", "--isolated", "--exit-zero", str(large)]
    if pf:  # calibration: a pure-Python AST linter doing one pass of name binding, on one core
        cmds["pyflakes"] = [pf, str(large)]
    if tf:
        cmds["torchfix"] = [tf, "--jobs", "1", str(large)]
    res["large"] = _median_runs(cmds, runs, runs_for={"torchfix": 3}, no_warmup=("torchfix",))
    res["called_functions"] = len(runs_called)

    listing = OUT / "project_files.txt"
    listing.write_text("\n".join(str(p) for p in files), encoding="utf-8")
    floor_loop = [PY, "-c", "import ast,sys\nfor f in open(sys.argv[1]).read().split('\\n'):\n"
                            "    ast.parse(open(f).read())", str(listing)]
    cmds = {
        "floor": floor_loop,
        "gradguard": [gg, "check", str(proj), "--format", "json", "--jobs", str(cores), "--no-cache"],
        "gradguard_jobs1": [gg, "check", str(proj), "--format", "json", "--jobs", "1", "--no-cache"],
        "gradguard_noresolve": [gg, "check", str(proj), "--format", "json", "--jobs", str(cores), "--no-resolve",
                                "--no-cache"],
        "gradguard_warm": [gg, "check", str(proj), "--format", "json", "--jobs", str(cores), "--cache-dir",
                           str(warm_cache)],
    }
    if rf:
        cmds["ruff"] = [rf, "check", "--no-cache", "--isolated", "--exit-zero", str(proj)]
    if pf:
        cmds["pyflakes"] = [pf, str(proj)]
    if tf:
        cmds["torchfix"] = [tf, "--jobs", str(cores), str(proj)]
    prj_runs = max(3, runs // 2)
    if quick:
        cmds.pop("torchfix", None)  # minutes per run
    # the floor's warm-up run fills the file cache for everyone; the long runs get none
    res["project"] = _median_runs(cmds, prj_runs, runs_for={"torchfix": 1},
                                  no_warmup=("torchfix", "gradguard", "gradguard_jobs1", "gradguard_noresolve"))
    lib = _library_tree()
    if lib is not None:
        lib_dir, lib_files = lib
        lib_listing = OUT / "library_files.txt"
        lib_listing.write_text("\n".join(str(p) for p in lib_files), encoding="utf-8")
        texts = [p.read_text(encoding="utf-8", errors="replace") for p in lib_files]
        res["library_files"] = len(lib_files)
        res["library_lines"] = sum(len(t.splitlines()) for t in texts)
        from gradguard.engine.document import may_backprop

        res["library_backprop_files"] = sum(1 for t in texts if may_backprop(t))
        cmds = {"floor": [PY, "-c", floor_loop[2], str(lib_listing)],
                "gradguard": [gg, "check", str(lib_dir), "--format", "json", "--jobs", str(cores), "--no-cache"]}
        if rf:
            cmds["ruff"] = [rf, "check", "--no-cache", "--isolated", "--exit-zero", str(lib_dir)]
        if pf:
            cmds["pyflakes"] = [pf, str(lib_dir)]
        res["library"] = _median_runs(cmds, prj_runs)
    return res


# Real code that is not a training script: the installed torch wheel's own
# modules, copied so that paths (and the project root) do not depend on the venv.
_LIBRARY_PARTS = ("nn", "optim", "autograd", "utils/data", "distributions")


def _library_tree():
    """(directory, files) of the library corpus, or None without torch."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    src = Path(spec.origin).parent
    dest = OUT / "library"
    if dest.exists():
        shutil.rmtree(dest)
    for part in _LIBRARY_PARTS:
        if (src / part).is_dir():
            shutil.copytree(src / part, dest / "torch" / part, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "pyproject.toml").write_text("[project]\nname = 'library-corpus'\n", encoding="utf-8")
    files = sorted(dest.rglob("*.py"))
    return (dest, files) if files else None


# ---------------------------------------------------------------- 2. scaling
def _best_of(fn: Callable[[], object], k: int) -> float:
    """The fastest of ``k`` runs: on a shared machine noise only ever adds time."""
    ts = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def bench_scaling(quick: bool) -> dict:
    import gc

    import gradguard.rules

    gradguard.rules.all_rules()
    sizes = corpus.sizes() if not quick else (100, 1000, 5000)
    # the collector thresholds `gradguard check` runs with (cli.cmd_check), for both
    # sides: with the defaults, full collections over the growing heap make even
    # ast.parse's per-line cost grow ~1.8x from 1k to 20k lines
    saved = gc.get_threshold()
    gc.set_threshold(200_000, 100, 100)
    try:
        return _scaling_rows(sizes)
    finally:
        gc.set_threshold(*saved)


def _scaling_rows(sizes) -> dict:
    import ast

    from gradguard.engine import check_source

    rows = []
    for n in sizes:
        text = corpus.training_file(n, seed=n)
        lines = len(text.splitlines())
        k = 7 if lines <= 2000 else (5 if lines <= 5000 else 3)
        check_source(text, "scale.py")  # warm
        # interleaved, so that a slow moment of the machine hits both sides alike
        t_parse = t_ours = float("inf")
        for _ in range(k):
            t_parse = min(t_parse, _best_of(lambda text=text: ast.parse(text), 1))
            t_ours = min(t_ours, _best_of(lambda text=text: check_source(text, "scale.py"), 1))
        rows.append({"lines": lines, "parse_s": t_parse, "ours_s": t_ours, "ratio": t_ours / t_parse,
                     "us_per_line": 1e6 * t_ours / lines})
    # linearity: least squares of time on lines; and per-line cost, largest vs mid size
    xs = [r["lines"] for r in rows]
    ys = [r["ours_s"] for r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    icpt = my - slope * mx
    ss_res = sum((y - (icpt + slope * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-12
    big = [r for r in rows if r["lines"] >= 1000]
    per_line_growth = big[-1]["us_per_line"] / big[0]["us_per_line"] if len(big) >= 2 else 1.0
    out = {"rows": rows, "slope_us_per_line": slope * 1e6, "r2": 1 - ss_res / ss_tot,
           "per_line_cost_growth": per_line_growth}
    try:
        _plot(rows, ROOT / "bench" / "scaling.png")
        out["plot"] = "bench/scaling.png"
    except Exception as e:  # matplotlib missing: the numbers still stand
        out["plot_error"] = str(e)
    return out


def _plot(rows: List[dict], dest: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["lines"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.plot(xs, [1e3 * r["ours_s"] for r in rows], "o-", label="gradguard check_source")
    a1.plot(xs, [1e3 * r["parse_s"] for r in rows], "s--", label="ast.parse")
    a1.set_xlabel("lines")
    a1.set_ylabel("ms per file")
    a1.set_title("analysis time vs file size")
    a1.legend()
    a1.grid(alpha=0.3)
    a2.plot(xs, [r["ratio"] for r in rows], "o-", color="C2")
    a2.set_xscale("log")
    a2.set_xlabel("lines (log)")
    a2.set_ylabel("× ast.parse")
    a2.set_title("cost relative to ast.parse (flat = linear)")
    a2.set_ylim(bottom=0)
    a2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(dest, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------- 3. server
def _pct(xs: List[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    i = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return s[i]


def _rss(pid: int) -> int:
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss
    except ImportError:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    return 0


def bench_server(n_edits: int, n_cycles: int) -> dict:
    import ast

    from bench.lspclient import LspClient

    OUT.mkdir(parents=True, exist_ok=True)
    text = corpus.training_file(2000, seed=11)
    path = OUT / "server_doc.py"
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    t_parse = _best_of(lambda: ast.parse(text), 9)

    gg = _tool("gradguard")
    client = LspClient([gg, "serve"], env=_env(), cwd=str(OUT))
    out: dict = {"lines": len(text.splitlines()), "parse_s": t_parse}
    try:
        client.initialize(OUT.as_uri(), {"debounce": 0})
        t_open = client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        t_first, _ = client.wait_diagnostics(uri, 1, timeout=120)
        out["open_s"] = t_first - t_open
        version = 1

        def change(line: int, col: int, end_col: int, new: str) -> float:
            nonlocal version
            version += 1
            t0 = client.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                              "end": {"line": line, "character": end_col}}, "text": new}]})
            t1, _ = client.wait_diagnostics(uri, version, timeout=60)
            return t1 - t0

        # valid edits: type into an identifier and into a comment, then delete what was typed
        id_line, id_col = corpus.edit_target_line(text)
        c_line, c_col = corpus.comment_target_line(text)
        lat: List[float] = []
        word = "abcdefghij"
        per = max(1, n_edits // 4)
        # a comment to type into
        change(c_line, c_col, c_col, "  # ")
        c_col += 4
        for phase in range(4):
            for i in range(per):
                if phase == 0:  # identifier grows: loss → lossabc…
                    lat.append(change(id_line, id_col + i, id_col + i, word[i % len(word)]))
                elif phase == 1:  # and shrinks back
                    j = per - 1 - i
                    lat.append(change(id_line, id_col + j, id_col + j + 1, ""))
                elif phase == 2:  # typing a (Chinese) comment
                    lat.append(change(c_line, c_col + i, c_col + i, "梯度x"[i % 3]))
                else:
                    j = per - 1 - i
                    lat.append(change(c_line, c_col + j, c_col + j + 1, ""))
        out["valid_edits"] = {"n": len(lat), "p50_s": _pct(lat, 50), "p95_s": _pct(lat, 95), "max_s": max(lat),
                              "mean_s": statistics.fmean(lat)}

        # syntax errors: an unclosed bracket in the middle, then its removal
        # (and, in between, typing inside the open bracket and deleting it again:
        # every one of those keystrokes meets a text that does not parse)
        bad: List[float] = []
        rec: List[float] = []
        inside: List[float] = []
        for i in range(max(5, n_edits // 20)):
            bad.append(change(id_line, id_col, id_col, "("))
            for k, ch in enumerate("x, 1"):
                inside.append(change(id_line, id_col + 1 + k, id_col + 1 + k, ch))
            for k in range(3, -1, -1):
                inside.append(change(id_line, id_col + 1 + k, id_col + 2 + k, ""))
            rec.append(change(id_line, id_col, id_col + 1, ""))
        out["syntax_error_edits"] = {"n": len(bad), "p50_s": _pct(bad, 50), "p95_s": _pct(bad, 95), "max_s": max(bad)}
        out["inside_error_edits"] = {"n": len(inside), "p50_s": _pct(inside, 50), "p95_s": _pct(inside, 95),
                                     "max_s": max(inside)}
        out["recovery_edits"] = {"n": len(rec), "p50_s": _pct(rec, 50), "p95_s": _pct(rec, 95), "max_s": max(rec)}
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

        # memory: open / edit / close cycles on distinct documents
        small = [corpus.training_file(60, seed=100 + k) for k in range(10)]
        rss: Dict[int, int] = {}
        t0 = time.perf_counter()
        for k in range(1, n_cycles + 1):
            u = (OUT / f"cycle_{k}.py").as_uri()
            src = small[k % len(small)] + f"\n# cycle {k}\n"
            client.notify("textDocument/didOpen", {"textDocument": {"uri": u, "languageId": "python", "version": 1,
                                                                    "text": src}})
            client.wait_diagnostics(u, 1, timeout=60)
            client.notify("textDocument/didChange", {"textDocument": {"uri": u, "version": 2}, "contentChanges": [
                {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "#\n"}]})
            client.wait_diagnostics(u, 2, timeout=60)
            client.notify("textDocument/didClose", {"textDocument": {"uri": u}})
            if k in (10, n_cycles):
                time.sleep(0.5)
                client.drain()
                rss[k] = _rss(client.proc.pid)
            elif k % 50 == 0:
                client.drain()
        out["cycles"] = {"n": n_cycles, "rss_after_10": rss.get(10), "rss_after_n": rss.get(n_cycles),
                         "growth": (rss[n_cycles] / rss[10] - 1) if rss.get(10) else None,
                         "seconds": time.perf_counter() - t0}
    finally:
        client.shutdown()
    return out


# ---------------------------------------------------------------- 4. jedi
def bench_jedi() -> dict:
    """Which modules the CLI process loads, and what resolution costs in (1)/(3)."""
    out: dict = {}
    large = OUT / "large_training.py"
    proj = OUT / "project"
    probe = ("import sys\nfrom gradguard.cli import main\nimport contextlib, io\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main(sys.argv[1:])\n"
             "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'jedi', 'parso', 'pygls', 'lsprotocol', "
             "'torch', 'cattrs', 'attrs', 'json', 'asyncio'})\nprint(','.join(heavy))\n")
    for name, target in (("large", large), ("project", proj)):
        if target.exists():
            r = subprocess.run([PY, "-c", probe, "check", str(target), "--format", "json", "--jobs", "1"],
                               capture_output=True, text=True, env=_env())
            out[f"cli_modules_{name}"] = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]
    # in-process: resolution over the 300-file project vs analysis
    from gradguard.engine import check_source
    from gradguard.analysis import resolve

    files = sorted(proj.rglob("*.py")) if proj.exists() else []
    resolve.clear_cache()
    t_res = 0.0
    t_chk = 0.0
    n_needed = 0
    for p in files:
        src = p.read_text(encoding="utf-8")
        t0 = time.perf_counter()
        facts = resolve.resolve_external_facts(src, str(p), str(proj))
        t1 = time.perf_counter()
        check_source(src, str(p), external_facts=facts)
        t2 = time.perf_counter()
        t_res += t1 - t0
        t_chk += t2 - t1
        n_needed += 1 if facts else 0
    st = resolve.stats()
    out["project"] = {"files": len(files), "files_with_facts": n_needed, "resolve_s": t_res, "check_s": t_chk,
                      "resolve_share": t_res / (t_res + t_chk) if files else 0.0,
                      "jedi_files": st["jedi_files"], "jedi_calls": st["jedi_calls"],
                      "jedi_s": st["jedi_seconds"]}
    # a cached second pass (the server's case: same content)
    t0 = time.perf_counter()
    for p in files:
        resolve.resolve_external_facts(p.read_text(encoding="utf-8"), str(p), str(proj))
    out["project"]["cached_pass_s"] = time.perf_counter() - t0
    # the server document (3)
    doc = OUT / "server_doc.py"
    if doc.exists():
        resolve.clear_cache()
        src = doc.read_text(encoding="utf-8")
        t0 = time.perf_counter()
        resolve.resolve_external_facts(src, str(doc), str(OUT))
        out["server_doc"] = {"resolve_s": time.perf_counter() - t0, "jedi_calls": resolve.stats()["jedi_calls"]}
    # what jedi costs when it *is* consulted (a name only jedi can find)
    out["jedi_fallback"] = _jedi_fallback_cost()
    out["server_calls_resolve"] = _server_uses_resolve()
    return out


def _jedi_fallback_cost() -> dict:
    import tempfile

    from gradguard.analysis import resolve

    d = Path(tempfile.mkdtemp(prefix="gg-jedi-"))
    (d / "lib").mkdir()
    (d / "lib" / "helpers_x.py").write_text("def repackage(h):\n    return h.detach()\n", encoding="utf-8")
    (d / "app").mkdir()
    src = "from helpers_x import repackage\nrepackage(None)\n"
    (d / "app" / "train.py").write_text(src, encoding="utf-8")
    resolve.clear_cache()
    t0 = time.perf_counter()
    facts = resolve.resolve_external_facts(src, str(d / "app" / "train.py"), str(d))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    resolve.resolve_external_facts(src, str(d / "app" / "train.py"), str(d))
    cached = time.perf_counter() - t0
    st = resolve.stats()
    shutil.rmtree(d, ignore_errors=True)
    return {"first_s": first, "cached_s": cached, "jedi_calls": st["jedi_calls"], "jedi_s": st["jedi_seconds"],
            "found": bool(facts)}


def _server_uses_resolve() -> str:
    lsp_dir = ROOT / "server" / "gradguard" / "lsp"
    try:
        text = "".join(p.read_text(encoding="utf-8") for p in sorted(lsp_dir.rglob("*.py")))
    except OSError:
        return "no server"
    if not text:
        return "no server"
    return "yes" if "resolve_external_facts" in text else "no"


# ---------------------------------------------------------------- 5. where the time goes
def bench_profile(runs: int) -> dict:
    """Breakdown of the large-file CLI run: process start-up + imports (a one-line
    file), then in process: parse, each summarizer, each rule."""
    import ast

    OUT.mkdir(parents=True, exist_ok=True)
    tiny = OUT / "tiny.py"
    tiny.write_text("x = 1\n", encoding="utf-8")
    gg = _tool("gradguard")
    st = _median_runs({"floor": [PY, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", str(tiny)],
                       "gradguard": [gg, "check", str(tiny), "--format", "json", "--no-cache"]}, max(5, runs))
    out: dict = {"startup": {k: v.get("median") for k, v in st.items()}}

    from gradguard.engine import check_source
    from gradguard.analysis import summary
    import gradguard.rules

    rules = gradguard.rules.all_rules()
    large = OUT / "large_training.py"
    if not large.exists():
        large.write_text(corpus.training_file(1800, seed=3), encoding="utf-8")
    text = large.read_text(encoding="utf-8")
    tree = ast.parse(text)
    k = 5
    out["parse_s"] = _best_of(lambda: ast.parse(text), k)
    out["check_s"] = _best_of(lambda: check_source(text, str(large)), 3)
    per_sum = {}
    unref = summary.unreferenced_defs(text, tree.body)  # as a one-shot check calls them
    from gradguard.engine.document import fact_sources

    for fn in [src.summarize for src in fact_sources()]:
        per_sum[f"{fn.__module__}.{fn.__name__}"] = _best_of(
            lambda fn=fn: [list(fn(s, getattr(s, "name", None) not in unref)) for s in tree.body], 3)
    out["summarizers_s"] = per_sum
    per_rule = {r.code: 0.0 for r in rules}
    originals = {}
    for r in rules:
        originals[r.code] = r.check

        def timed(unit, ctx, _orig=r.check, _code=r.code):
            t0 = time.perf_counter()
            res = list(_orig(unit, ctx))
            per_rule[_code] += time.perf_counter() - t0
            return res

        r.check = timed  # type: ignore[method-assign]
    best = {code: float("inf") for code in per_rule}
    try:
        for _ in range(3):  # per rule, the least of three whole analyses (one pause would skew one run)
            for code in per_rule:
                per_rule[code] = 0.0
            check_source(text, str(large))
            for code, t in per_rule.items():
                best[code] = min(best[code], t)
    finally:
        for r in rules:
            r.check = originals[r.code]  # type: ignore[method-assign]
    out["rules_s"] = best
    return out


# ---------------------------------------------------------------- report
def _ms(s: Optional[float]) -> str:
    return "—" if s is None else f"{1e3 * s:.1f} ms"


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    if not a or not b:
        return "—"
    return f"{a / b:.2f}×"


def _med(d: dict, k: str, field: str = "median") -> Optional[float]:
    v = d.get(k) or {}
    return v.get(field)


def render(results: dict) -> str:
    L: List[str] = []
    meta = results["meta"]
    L += ["# gradguard benchmarks", "",
          f"Generated by `python -m bench` on {meta['date']} — Python {meta['python']}, {meta['cores']} cores, "
          f"{meta['machine']}, gradguard commit `{meta['commit']}`. Every figure is a median of several runs; "
          "every ratio is against a baseline measured in the same run (machines are noisy: read the ratios, "
          "not the absolute times).", ""]
    budgets: List[tuple] = []
    cli = results.get("cli")
    if cli:
        lg, pj = cli["large"], cli["project"]
        L += ["## 1. Whole-process CLI", "",
              f"(a) one generated training file, {cli['large_lines']} lines (fixture programs, loops inside functions); "
              f"(b) a generated project of {cli['project_files']} files / {cli['project_lines']} lines, "
              f"`--jobs {cli['cores']}`. Floor: a bare `python -c \"import ast; ast.parse(...)\"` process "
              "(for (b) one process looping over the files).", "",
              "Wall time is what the budgets are about; CPU time (user + sys, every process of the run) shows what "
              "the parallel runs spend on both cores (a single file is split across the cores, see "
              "`server/gradguard/engine/parallel.py`).", "",
              "| tool | (a) large file | ratio to floor | (a) CPU | CPU ratio | (b) project | ratio to floor | (b) CPU | CPU ratio |",
              "|---|---|---|---|---|---|---|---|---|"]
        names = [("floor", "ast.parse process (floor)"), ("gradguard", "gradguard check (cold, --no-cache)"),
                 ("gradguard_warm", "gradguard check, unchanged files (result cache)"),
                 ("gradguard_jobs1", "gradguard check --jobs 1 (cold, one core)"),
                 ("gradguard_noresolve", "gradguard check --no-resolve"),
                 ("ruff", "ruff check"), ("pyflakes", "pyflakes (pure Python, one core; calibration)"),
                 ("torchfix", "TorchFix")]
        for k, label in names:
            a, b = _med(lg, k), _med(pj, k)
            if a is None and b is None:
                continue
            ca, cb = _med(lg, k, "cpu_median"), _med(pj, k, "cpu_median")
            L.append(f"| {label} | {_ms(a)} | {_ratio(a, _med(lg, 'floor'))} | {_ms(ca)} | "
                     f"{_ratio(ca, _med(lg, 'floor', 'cpu_median'))} | {_ms(b)} | {_ratio(b, _med(pj, 'floor'))} | "
                     f"{_ms(cb)} | {_ratio(cb, _med(pj, 'floor', 'cpu_median'))} |")
        gc_, fc_ = _med(lg, "gradguard_called"), _med(lg, "floor_called")
        if gc_ and fc_:
            L.append(f"\nThe generated file's {cli.get('called_functions', '?')} `run_*` functions are never called, "
                     "so a one-shot check skips their by-name facts. The same file with a `main()` that calls every "
                     f"one of them: {_ms(gc_)} against its own floor of {_ms(fc_)} ({gc_ / fc_:.2f}×).")
        if cli.get("missing_tools"):
            L.append(f"\nNot installed, so not compared: {', '.join(cli['missing_tools'])} "
                     "(`pip install -e '.[bench]' torch==2.13.0`).")
        for k in ("torchfix", "ruff"):
            for part, d in (("large", lg), ("project", pj)):
                if "error" in (d.get(k) or {}):
                    L.append(f"\n{k} ({part}) could not run: `{d[k]['error'][:200]}`")
        lb = cli.get("library")
        if lb:
            fl, gl, rl = _med(lb, "floor"), _med(lb, "gradguard"), _med(lb, "ruff")
            L += ["", f"(c) real code that is mostly not training loops: {cli['library_files']} files / "
                  f"{cli['library_lines']} lines of the installed torch wheel's own modules "
                  f"(`{'`, `'.join(_LIBRARY_PARTS)}`), `--jobs {cli['cores']}`. "
                  f"{cli['library_backprop_files']} of the files spell a backward (or read `.grad`) and are analysed; "
                  "the others are only parsed, since neither rule can report where nothing back-propagates.", "",
                  "| tool | (c) library tree | ratio to floor |", "|---|---|---|",
                  f"| ast.parse loop (floor) | {_ms(fl)} | 1.00× |",
                  f"| gradguard check (cold, --no-cache) | {_ms(gl)} | {_ratio(gl, fl)} |"]
            if rl:
                L.append(f"| ruff check | {_ms(rl)} | {_ratio(rl, fl)} |")
            pl = _med(lb, "pyflakes")
            if pl:
                L.append(f"| pyflakes (one core) | {_ms(pl)} | {_ratio(pl, fl)} |")
        L.append("")
        ga, fa, ta = _med(lg, "gradguard"), _med(lg, "floor"), _med(lg, "torchfix")
        gb, fb = _med(pj, "gradguard"), _med(pj, "floor")
        if ga and fa:
            budgets.append(("CLI, large file ≤ 1.5× floor", f"{ga / fa:.2f}×", ga / fa <= 1.5))
        if ga and ta:
            budgets.append(("CLI, large file ≥ 50× faster than TorchFix", f"{ta / ga:.1f}× faster", ta / ga >= 50))
        if gb and fb:
            budgets.append((f"CLI, 300-file project (--jobs {cli['cores']}) ≤ 1.5× floor", f"{gb / fb:.2f}×",
                            gb / fb <= 1.5))
        wa, wb = _med(lg, "gradguard_warm"), _med(pj, "gradguard_warm")
        if wa and fa:
            budgets.append(("(not a budget: re-check of an unchanged large file, result cache) vs floor",
                            f"{wa / fa:.2f}×", None))
        if wb and fb:
            budgets.append(("(not a budget: re-check of an unchanged project, result cache) vs floor",
                            f"{wb / fb:.2f}×", None))
    sc = results.get("scaling")
    if sc:
        L += ["## 2. In-process analysis vs file size", "",
              "`check_source` (fresh, nothing cached) vs `ast.parse` of the same text, both with the garbage "
              "collector thresholds `gradguard check` sets.", "",
              "| lines | ast.parse | gradguard | ratio | µs/line |", "|---|---|---|---|---|"]
        for r in sc["rows"]:
            L.append(f"| {r['lines']} | {_ms(r['parse_s'])} | {_ms(r['ours_s'])} | {r['ratio']:.1f}× | {r['us_per_line']:.1f} |")
        big = [r for r in sc["rows"] if r["lines"] >= 1000]
        parse_growth = ""
        pg = None
        if len(big) >= 2:
            pg = (big[-1]["parse_s"] / big[-1]["lines"]) / (big[0]["parse_s"] / big[0]["lines"])
            parse_growth = f" (`ast.parse`'s own per-line cost over the same range: {pg:.2f}×)"
        growth = sc["per_line_cost_growth"]
        L += ["", f"Least-squares fit: {sc['slope_us_per_line']:.1f} µs/line, r² = {sc['r2']:.4f}; per-line cost at the "
              f"largest size vs 1,000 lines: {growth:.2f}×{parse_growth}. ![scaling](bench/scaling.png)", "",
              "A large heap makes every Python pass slower per line on this machine, `ast.parse` included, and by "
              "a different amount from run to run; so linearity is judged against `ast.parse` of the same texts: "
              "the ratio to it at the largest size over the ratio at 1,000 lines.", ""]
        if pg:
            rel = growth / pg
            budgets.append(("analysis grows linearly (ratio to ast.parse at 20k lines ≤ 1.5× the ratio at 1k)",
                            f"{rel:.2f}× (own per-line growth {growth:.2f}×, ast.parse's {pg:.2f}×), r² {sc['r2']:.3f}",
                            rel <= 1.5))
    sv = results.get("server")
    if sv:
        v, se, rc, cy = sv["valid_edits"], sv["syntax_error_edits"], sv["recovery_edits"], sv["cycles"]
        L += ["## 3. Language server latency (stdio, debounce 0)", "",
              f"A raw JSON-RPC client edits a {sv['lines']}-line file: single-character edits in the middle "
              "(typing into an identifier and into a comment, then deleting), timed from `didChange` sent to the "
              "`publishDiagnostics` of that version. Baseline: in-process `ast.parse` of the file, the fastest "
              f"of 9 runs, = {_ms(sv['parse_s'])}. First analysis after `didOpen`: {_ms(sv['open_s'])}.", "",
              "| edits | n | p50 | p95 | max | p95 / ast.parse |", "|---|---|---|---|---|---|",
              f"| valid (identifier, comment) | {v['n']} | {_ms(v['p50_s'])} | {_ms(v['p95_s'])} | {_ms(v['max_s'])} | {v['p95_s'] / sv['parse_s']:.2f}× |",
              f"| introduces a syntax error | {se['n']} | {_ms(se['p50_s'])} | {_ms(se['p95_s'])} | {_ms(se['max_s'])} | {se['p95_s'] / sv['parse_s']:.2f}× |",
              f"| fixes it again | {rc['n']} | {_ms(rc['p50_s'])} | {_ms(rc['p95_s'])} | {_ms(rc['max_s'])} | {rc['p95_s'] / sv['parse_s']:.2f}× |",
              *[f"| typing and deleting inside the open bracket (the text does not parse) | {ie['n']} | "
                f"{_ms(ie['p50_s'])} | {_ms(ie['p95_s'])} | {_ms(ie['max_s'])} | {ie['p95_s'] / sv['parse_s']:.2f}× |"
                for ie in [sv.get("inside_error_edits")] if ie],
              "", "While the text does not parse, an edit re-reads it from the first top-level statement it touches "
              "(or the first that does not parse on its own) to the end; the statements above it stay parsed. "
              "Closing the bracket re-parses that statement alone.",
              "", f"Memory: RSS after 10 open/edit/close cycles {cy['rss_after_10'] / 2**20:.1f} MiB, after "
              f"{cy['n']} {cy['rss_after_n'] / 2**20:.1f} MiB (growth {100 * cy['growth']:.1f} %).", ""]
        budgets.append(("server p95 edit→diagnostics ≤ in-process ast.parse of the file",
                        f"{_ms(v['p95_s'])} vs {_ms(sv['parse_s'])}", v["p95_s"] <= sv["parse_s"]))
        broken = [(se, "breaks the text"), (rc, "mends it")]
        if sv.get("inside_error_edits"):
            broken.append((sv["inside_error_edits"], "types inside the open bracket"))
        for row, what in broken:
            budgets.append((f"(the same budget read strictly) p95 of an edit that {what} ≤ ast.parse",
                            f"{_ms(row['p95_s'])} vs {_ms(sv['parse_s'])}", row["p95_s"] <= sv["parse_s"]))
        budgets.append((f"RSS growth over {cy['n']} cycles < 10 %", f"{100 * cy['growth']:.1f} %", cy["growth"] < 0.10))
    jd = results.get("jedi")
    if jd:
        pj = jd.get("project", {})
        L += ["## 4. Cross-file resolution and jedi's share", "",
              f"- CLI process, large file: heavy modules loaded: `{jd.get('cli_modules_large') or 'none'}`; "
              f"project: `{jd.get('cli_modules_project') or 'none'}` (jedi/parso/pygls/lsprotocol/torch would be listed).",
              f"- 300-file project, in process: {pj.get('files_with_facts')} of {pj.get('files')} files got facts from "
              f"other modules; resolution {_ms(pj.get('resolve_s'))} vs analysis {_ms(pj.get('check_s'))} "
              f"({100 * pj.get('resolve_share', 0):.1f} % of the total); jedi consulted on {pj.get('jedi_files')} files "
              f"({pj.get('jedi_calls')} calls, {_ms(pj.get('jedi_s'))}) — local modules are found by path. "
              f"Second (cached) pass: {_ms(pj.get('cached_pass_s'))}.",
              ]
        if jd.get("server_doc"):
            L.append(f"- Server document (3): resolution {_ms(jd['server_doc']['resolve_s'])}, "
                     f"jedi calls {jd['server_doc']['jedi_calls']}; the server calls resolution: "
                     f"{jd.get('server_calls_resolve')} (off the keystroke path by design).")
        jf = jd.get("jedi_fallback") or {}
        L.append(f"- When jedi *is* consulted (a module neither local by path nor installed; here one that "
                 "nothing can find, the worst case: jedi searches every sys.path entry): first call "
                 f"{_ms(jf.get('first_s'))} ({jf.get('jedi_calls')} jedi call, {_ms(jf.get('jedi_s'))} in jedi), "
                 f"cached {_ms(jf.get('cached_s'))}; found: {jf.get('found')}.")
        L.append("")
        heavy_large = jd.get("cli_modules_large") or ""
        heavy_proj = jd.get("cli_modules_project") or ""
        budgets.append(("jedi never loaded by the CLI (large file; 300-file project)",
                        f"loaded: {heavy_large or '-'}; {heavy_proj or '-'} (of jedi, parso, pygls, lsprotocol, torch, "
                        "asyncio, json)", "jedi" not in heavy_large and "jedi" not in heavy_proj))
        pj = jd.get("project", {})
        budgets.append(("jedi consulted only when a module is neither local nor installed",
                        f"{pj.get('jedi_files')} of {pj.get('files')} project files", pj.get("jedi_files") == 0))
    pf = results.get("profile")
    if pf:
        su = pf["startup"]
        p = pf["parse_s"]
        L += ["## 5. Where the time goes (large file)", "",
              f"- Process start-up + imports, one-line file (analysed, not cached): gradguard check {_ms(su.get('gradguard'))} vs floor "
              f"{_ms(su.get('floor'))} ({_ratio(su.get('gradguard'), su.get('floor'))}).",
              f"- In process: `ast.parse` {_ms(p)}; `check_source` {_ms(pf['check_s'])} ({pf['check_s'] / p:.1f}× parse), of which (each the best of three runs; the "
              "summarizers as a one-shot check calls them):"]
        for name, t in sorted(pf["summarizers_s"].items(), key=lambda kv: -kv[1]):
            L.append(f"  - summarizer `{name}`: {_ms(t)} ({t / p:.1f}× parse)")
        for code, t in sorted(pf["rules_s"].items(), key=lambda kv: -kv[1]):
            L.append(f"  - rule {code} `check`: {_ms(t)} ({t / p:.1f}× parse)")
        L.append("")
    L += ["## Budgets", "", "| budget | measured | met |", "|---|---|---|"]
    for name, val, ok in budgets:
        L.append(f"| {name} | {val} | {'—' if ok is None else ('yes' if ok else '**no**')} |")
    L += ["", "Reproduce: `make bench` (or `.venv/bin/python -m bench`; `--quick` for a smoke run). "
          "Raw numbers: `bench/out/results.json`.", ""]
    if results.get("notes"):
        L += ["## Notes", ""] + [f"- {n}" for n in results["notes"]] + [""]
    return "\n".join(L)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip() or "?"
    except OSError:
        return "?"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs / edits / cycles (smoke test)")
    ap.add_argument("--only", default="cli,scaling,server,jedi,profile")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--no-write", action="store_true", help="do not rewrite BENCHMARKS.md")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite BENCHMARKS.md from bench/out/results.json without measuring")
    args = ap.parse_args(argv)
    if args.render_only:
        results = json.loads((OUT / "results.json").read_text(encoding="utf-8"))
        _write_report(render(results))
        return 0
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    runs = args.runs or (3 if args.quick else 9)
    OUT.mkdir(parents=True, exist_ok=True)
    prev = OUT / "results.json"
    results: dict = {}
    if prev.exists() and only != {"cli", "scaling", "server", "jedi", "profile"}:
        try:
            results = json.loads(prev.read_text())  # keep the other sections of the last run
        except ValueError:
            results = {}
    results["meta"] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
                       "cores": os.cpu_count(), "machine": platform.machine(), "commit": _commit()}
    steps = [("cli", lambda: bench_cli(runs, args.quick)), ("scaling", lambda: bench_scaling(args.quick)),
             ("server", lambda: bench_server(100 if args.quick else 500, 100 if args.quick else 1000)),
             ("jedi", bench_jedi), ("profile", lambda: bench_profile(runs))]
    for name, fn in steps:
        if name not in only:
            continue
        t0 = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        results[name] = fn()
        print(f"[bench] {name} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        prev.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    text = render(results)
    if not args.no_write:
        _write_report(text)
    print(text)
    return 0


EXPERIMENTS = "\n## Experiments"


def _write_report(text: str) -> None:
    """Write BENCHMARKS.md, keeping its hand-written "## Experiments" section
    (measurements made outside this harness) at the end."""
    path = ROOT / "BENCHMARKS.md"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    kept = old[old.index(EXPERIMENTS):] if EXPERIMENTS in old else ""
    path.write_text(text.rstrip("\n") + "\n" + kept if kept else text, encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
