"""The cold CLI of two (or more) checkouts of gradguard, on the same file, in one run.

    python -m bench.trees [--runs N] [--jobs J] [--file PATH] TREE [TREE ...]

Each TREE is a checkout of this repository (``git worktree add /tmp/old <commit>``);
the first is the baseline. Every tree's ``server/`` is byte-compiled first (a
session with PYTHONDONTWRITEBYTECODE would otherwise recompile it in every
process), then ``gradguard check FILE --no-cache --jobs 1 --format json`` (``--jobs``) runs in
a fresh process per tree, the trees interleaved run by run (so that drift on a
shared machine hits them alike), with this interpreter and ``PYTHONPATH`` set to
the tree's ``server/``. Printed per tree: the median whole-process CPU time (user
+ sys: wall time varied two to three times on a loaded two-core machine) and
the median of the run-by-run ratios to the baseline; and whether its output is
the baseline's, byte for byte.

FILE defaults to the benchmark's generated training file (``python -m bench``'s
section 1, written to bench/out/large_training.py by this tree's corpus).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent


def _env(tree: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = str(tree / "server")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(tree: Path, path: Path, jobs: int = 1) -> Tuple[float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-m", "gradguard", "check", str(path), "--no-cache", "--jobs", str(jobs),
                        "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tree))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"{tree}: exit {r.returncode}: {r.stderr.decode(errors='replace')[-800:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), r.stdout


def compare(trees: Sequence[Path], path: Path, runs: int, jobs: int = 1) -> List[dict]:
    for t in trees:
        compileall.compile_dir(str(t / "server"), quiet=1)
    outputs = {t: _run(t, path, jobs)[1] for t in trees}  # warm-up (file cache), and the output compared
    cpu: Dict[Path, List[float]] = {t: [] for t in trees}
    for _ in range(runs):
        for t in trees:
            cpu[t].append(_run(t, path, jobs)[0])
    base = trees[0]
    return [{"tree": str(t), "cpu_ms": statistics.median(cpu[t]) * 1000,
             "ratio": statistics.median(c / b for c, b in zip(cpu[t], cpu[base])),
             "same_output": outputs[t] == outputs[base]} for t in trees]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trees", description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path, help="checkouts of gradguard; the first is the baseline")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--jobs", type=int, default=1, help="gradguard's --jobs (CPU time counts every process)")
    ap.add_argument("--file", type=Path, default=None,
                    help="the file (or directory) checked (default: the benchmark's large file)")
    args = ap.parse_args(argv)
    path = args.file
    if path is None:
        from bench import corpus

        path = ROOT / "bench" / "out" / "large_training.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(corpus.training_file(1800, seed=3), encoding="utf-8")
    rows = compare([t.resolve() for t in args.trees], path, args.runs, args.jobs)
    size = f"{len(path.read_text(encoding='utf-8').splitlines())} lines" if path.is_file() else "a directory"
    print(f"{path} ({size}), --jobs {args.jobs}, {args.runs} interleaved runs, CPU time of the whole process "
          "(user + sys)")
    for r in rows:
        print(f"  {r['tree']}: {r['cpu_ms']:.1f} ms, {r['ratio']:.3f}x the first"
              f"{'' if r['same_output'] else ' (output differs from the first)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
