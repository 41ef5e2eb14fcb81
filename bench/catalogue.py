"""The large-module cost: the fixture catalogue as one module (``python -m bench.catalogue``).

A user with a large notebook or a generated module pays one analysis of the whole
text on every keystroke. This benchmark builds such a module at run time -- every
fixture program of ``tests/fixtures``, one after another, as ``tests/seed_programs.
fixture_catalogue`` builds it for the tests (nothing is committed as data) -- and
measures one in-process ``check_source`` of it against an ``ast.parse`` of the same
text (the floor), each the least CPU time of ``--runs`` runs in a fresh process.

``--tree DIR`` (repeatable) measures other checkouts in the same run, the first one
given being the baseline of the ratios (``git worktree add --detach /tmp/base <commit>``
makes one); without it, this checkout alone. ``--instructions`` adds the instruction
count of one analysis under ``valgrind --tool=callgrind`` (slow; machines are noisy,
instructions are not). ``--profile FILE`` writes a cProfile of one analysis (this
checkout). The findings' count is printed with each tree: a speed change that changes
it is not a speed change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import ast, json, sys, time
text = open(sys.argv[1], encoding="utf-8").read()
what, runs = sys.argv[2], int(sys.argv[3])
from gradguard.engine import check_source
import gradguard.rules
gradguard.rules.all_rules()
best, found = float("inf"), None
for _ in range(runs):
    t = time.process_time()
    if what == "parse":
        ast.parse(text)
    else:
        found = len(check_source(text, "catalogue.py").findings)
    best = min(best, time.process_time() - t)
print(json.dumps({"cpu_s": best, "findings": found}))
"""


def catalogue_text(root: Path = ROOT) -> str:
    """The fixture programs of ``root`` as one module (``from __future__`` lines dropped:
    one may only open a file), as the tests' ``fixture_catalogue`` makes it."""
    fixtures = sorted((root / "tests" / "fixtures").glob("*.py"))
    return "\n\n".join(p.read_text(encoding="utf-8").replace("from __future__ import annotations\n", "")
                       for p in fixtures)


def _env(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree / "server")
    env["PYTHONHASHSEED"] = "0"
    env["OMP_NUM_THREADS"] = "1"
    return env


def measure(tree: Path, module: Path, what: str, runs: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(module), what, str(runs)], env=_env(tree),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def instructions(tree: Path, module: Path) -> Optional[float]:
    """Millions of instructions of one analysis (process start-up and imports included)."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg.out", sys.executable, "-c",
               _CHILD, str(module), "check", "1"]
        err = subprocess.run(cmd, env=_env(tree), capture_output=True, text=True).stderr
    for line in err.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1]) / 1e6
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.catalogue", description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", default=[], help="a checkout to measure (the first: the baseline)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--profile", metavar="FILE")
    args = ap.parse_args(argv)
    trees: List[Path] = [Path(t).resolve() for t in args.tree] or [ROOT]
    with tempfile.TemporaryDirectory() as d:
        module = Path(d) / "catalogue.py"
        text = catalogue_text()
        module.write_text(text, encoding="utf-8")
        print(f"catalogue: {text.count(chr(10)) + 1} lines, {len(list((ROOT / 'tests' / 'fixtures').glob('*.py')))} "
              f"fixture programs of {ROOT.name}")
        floor = measure(trees[0], module, "parse", max(args.runs, 5))["cpu_s"]
        base: Optional[dict] = None
        for tree in trees:
            got = measure(tree, module, "check", args.runs)
            if args.instructions:
                got["instructions_M"] = instructions(tree, module)
            base = base or got
            line = (f"{tree}: {got['cpu_s']:.2f} s CPU ({got['cpu_s'] / floor:.0f}x ast.parse), "
                    f"{got['cpu_s'] / base['cpu_s']:.2f}x the baseline, {got['findings']} findings")
            if got.get("instructions_M"):
                line += f"; {got['instructions_M']:,.0f} M instructions, " \
                        f"{got['instructions_M'] / base['instructions_M']:.2f}x the baseline"
            print(line, flush=True)
        if args.profile:
            import cProfile

            sys.path.insert(0, str(ROOT / "server"))
            from gradguard.engine import check_source

            cProfile.runctx("check_source(text, 'catalogue.py')", {"check_source": check_source, "text": text}, {},
                            args.profile)
            print(f"profile: {args.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
