"""gradguard's GG2xx rules next to torch-preflight, program by program.

    python -m bench.quiet [--runs N] [--all]

Runs both tools, one process per file, on the fixture catalogue's GG2xx programs
and their silent twins (``--all``: every fixture), and prints a Markdown table:
what each tool reports on each program (torch-preflight's graph- and gradient-
lifetime codes, TG001 TG002 TG003 TG011 TG014; its other codes are counted
apart), against the program's label (which was obtained by running it under
torch), and the time per file as a ratio to a floor measured in the same run (a
``python -c "import ast; ast.parse(...)"`` process on the same file). Each time
is the median of ``--runs`` runs.

Both tools are installed from the ``bench`` extra next to the pinned torch.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURES = REPO / "tests" / "fixtures"
# programs for the comparison only: a finding without a quick fix (the fixture
# catalogue proves fixes), and shapes the other tool has a rule for
EXTRA = HERE / "quiet_programs"
sys.path.insert(0, str(REPO / "tests"))

import torch_harness as th  # noqa: E402

PY = sys.executable
LIFETIME = ("TG001", "TG002", "TG003", "TG011", "TG014")
# which gradguard rule answers the same question as each torch-preflight code
COUNTERPART = {"TG001": "GG201", "TG002": "GG201", "TG003": "GG205", "TG014": "GG205", "TG011": "GG206"}


def _tool(name: str) -> str:
    exe = Path(PY).parent / name
    return str(exe) if exe.exists() else (shutil.which(name) or name)


def _timed(cmd) -> tuple:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    return time.perf_counter() - t0, p.stdout


def _gradguard(path: Path) -> list:
    out = []
    _, text = _timed([_tool("gradguard"), "check", str(path), "--format", "json", "--no-cache", "--jobs", "1"])
    for f in json.loads(text or "[]"):
        out.append((f["code"], f["line"], f.get("severity")))
    return out


def _preflight(path: Path) -> list:
    _, text = _timed([_tool("torch-preflight"), "check", str(path), "--format", "json", "--jobs", "1", "--no-color"])
    data = json.loads(text or "{}")
    return [(d["code"], d["line"], d.get("severity")) for d in data.get("diagnostics", [])]


def _median_time(cmd, runs: int) -> float:
    return statistics.median(_timed(cmd)[0] for _ in range(runs))


def programs(everything: bool) -> list:
    out = []
    for p in th.fixture_paths():
        spec = th.parse_header(p.read_text(encoding="utf-8"), str(p))
        quiet = any(c.startswith("GG2") for c in spec.codes)
        twin = p.name.startswith("ok_") and any(k in p.name for k in (
            "history", "accumulated", "evaluation", "rnn_state_detached", "data_parameter", "zeroing",
            "input_gradients", "state_reset", "sampling", "detach"))
        if everything or quiet or twin:
            out.append((p, spec))
    for p in th.fixture_paths(EXTRA):
        out.append((p, th.parse_header(p.read_text(encoding="utf-8"), str(p))))
    return out


BEGIN = "<!-- bench.quiet: begin (python -m bench.quiet --write) -->"
END = "<!-- bench.quiet: end -->"


def write_section(body: str, path: Path) -> None:
    """Replace this benchmark's section of ``path`` in place, or append it at the
    end, after "## Experiments", which ``python -m bench`` keeps when it rewrites
    the file."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{BEGIN}\n{body.rstrip()}\n{END}"
    if BEGIN in old and END in old:
        new = old[:old.index(BEGIN)] + block + old[old.index(END) + len(END):]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(new, encoding="utf-8")


def main(argv) -> int:
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else 3
    rows = []
    totals = {"floor": [], "gradguard": [], "preflight": []}
    for path, spec in programs("--all" in argv):
        gg = _gradguard(path)
        tp = _preflight(path)
        floor = _median_time([PY, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", str(path)], runs)
        t_gg = _median_time([_tool("gradguard"), "check", str(path), "--format", "json", "--no-cache", "--jobs", "1"],
                            runs)
        t_tp = _median_time([_tool("torch-preflight"), "check", str(path), "--format", "json", "--jobs", "1"], runs)
        totals["floor"].append(floor)
        totals["gradguard"].append(t_gg)
        totals["preflight"].append(t_tp)
        rows.append((path.name, spec, gg, tp, floor, t_gg, t_tp))
    table = _render(rows, totals, runs)
    if "--write" in argv:
        write_section(_section(table, runs), REPO / "BENCHMARKS.md")
    print(table)
    return 0


def _section(table: str, runs: int) -> str:
    import platform

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    version = subprocess.run([_tool("torch-preflight"), "--version"], capture_output=True, text=True).stdout.strip()
    return "\n".join([
        "## 6. The GG2xx rules next to torch-preflight",
        "",
        f"Generated by `python -m bench.quiet --write` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} — "
        f"Python {platform.python_version()}, gradguard commit `{commit}`, {version}. One process per file and "
        f"tool; each time is the median of {runs} runs, as a ratio to an `ast.parse` process on the same file "
        "measured in the same run. torch-preflight's graph- and gradient-lifetime codes are shown (TG001 tensor "
        "stored with its graph, TG002 evaluation without `no_grad`, TG003 `backward()` in a loop without "
        "`zero_grad()`, TG011 `eval()` without `train()`, TG014 accumulation without dividing the loss); its "
        "other codes are listed apart. The programs are the fixture catalogue's GG2xx programs and silent "
        "twins (labelled by running them under torch) and `bench/quiet_programs/`.",
        "",
        table,
    ])


def _fmt(findings, codes=None) -> str:
    items = [f"{c}@{line}" + ("(hint)" if sev in ("hint", "note") and c.startswith("GG") else "")
             for c, line, sev in findings if codes is None or c in codes]
    return " ".join(items) or "—"


def _render(rows, totals, runs) -> str:
    lines = [
        "| program | label (torch) | expected | gradguard | torch-preflight (lifetime codes) | other TG | "
        "gradguard / floor | torch-preflight / floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, spec, gg, tp, floor, t_gg, t_tp in rows:
        expected = " ".join(f"{c}@{n}" for c, n in sorted(spec.expect)) or "none"
        other = sorted({c for c, _, _ in tp if c not in LIFETIME})
        lines.append(f"| `{name}` | {spec.runtime} | {expected} | {_fmt(gg)} | {_fmt(tp, LIFETIME)} | "
                     f"{' '.join(other) or '—'} | {t_gg / floor:.2f}× | {t_tp / floor:.2f}× |")
    f, g, t = (statistics.median(totals[k]) for k in ("floor", "gradguard", "preflight"))
    lines.append("")
    lines.append(f"Median per file over {len(rows)} programs ({runs} runs each): floor {f * 1000:.1f} ms, "
                 f"gradguard {g * 1000:.1f} ms ({g / f:.2f}×), torch-preflight {t * 1000:.1f} ms ({t / f:.2f}×); "
                 f"torch-preflight / gradguard = {t / g:.2f}×.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
