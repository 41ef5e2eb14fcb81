"""The long fuzz run: mutated fixture programs through the analysis, the
incremental engine and the command line.

    python scripts/fuzz.py                    # 10,000 inputs, seed 0
    python scripts/fuzz.py -n 50000 --seed 7  # more, another sequence

Each input is a fixture program (tests/fixtures) with 1-4 mutations (see
tests/fuzz_mutations.py: line deletions, duplications and swaps, token
insertions, truncation, nesting 100/500/1,000 deep, unusual Unicode and line
ends). For every input: ``check_source`` must not raise and must report no
internal error; ``Document.update`` from the original to it and back must equal
a full analysis; every 10th input also goes through ``gradguard check`` (every
20th with ``--fix``), which must end with status 0, 1 or 2. An input that takes
longer than ``--hang`` seconds counts as a hang. Failures are written to
``--out`` (one JSON object per line: seed, index, operations, error) so that
any of them can be replayed. Exit status 1 if anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("GRADGUARD_STRICT", "1")  # a crash inside a rule is a failure, not a dropped unit

import fuzz_mutations as fm  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def run_cli(text: str, fix: bool, workdir: str) -> int:
    from gradguard import cli

    path = os.path.join(workdir, "fuzz_input.py")
    with open(path, "w", encoding="utf-8", errors="surrogatepass", newline="") as fh:
        fh.write(text)
    argv = ["check", "--no-cache", "--format", "json", "--jobs", "1", path] + (["--fix"] if fix else [])
    with redirect_stdout(StringIO()), redirect_stderr(StringIO()):
        code = cli.main(argv)
    if code not in (0, 1, 2):
        raise AssertionError(f"gradguard check ended with status {code}")
    return code


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=10_000, help="inputs (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hang", type=float, default=60.0, help="seconds after which an input counts as a hang")
    ap.add_argument("--out", default="fuzz-failures.jsonl")
    args = ap.parse_args(argv)

    sources = fm.fixture_sources()
    rng = random.Random(args.seed)
    counts = {"inputs": 0, "exceptions": 0, "mismatches": 0, "hangs": 0, "cli_runs": 0, "syntax_errors": 0,
              "not_analysed": 0}
    slowest = 0.0
    start = time.monotonic()
    signal.signal(signal.SIGALRM, _alarm)
    from gradguard.engine.document import check_source

    with tempfile.TemporaryDirectory() as workdir, open(args.out, "w", encoding="utf-8") as failures:
        for i in range(args.n):
            base = rng.choice(sources)
            ops = fm.random_ops(rng)
            text = fm.apply(base, ops)
            t0 = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, args.hang)
            kind = None
            try:
                fm.check_one(base, text)
                res = check_source(text, "fuzz.py")
                counts["syntax_errors"] += res.syntax_error is not None
                counts["not_analysed"] += bool(res.not_analysed)
                if i % 10 == 0:
                    run_cli(text, fix=i % 20 == 0, workdir=workdir)
                    counts["cli_runs"] += 1
            except Hang:
                kind, err = "hangs", f"over {args.hang} s"
            except AssertionError as e:
                kind, err = "mismatches", str(e)[:300]
            except BaseException as e:  # noqa: B036  (anything else escaping is what we look for)
                if isinstance(e, KeyboardInterrupt):
                    raise
                kind, err = "exceptions", "".join(traceback.format_exception(type(e), e, e.__traceback__))[-2000:]
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            slowest = max(slowest, time.monotonic() - t0)
            counts["inputs"] += 1
            if kind:
                counts[kind] += 1
                failures.write(json.dumps({"seed": args.seed, "index": i, "ops": ops, "kind": kind, "error": err},
                                          ensure_ascii=False) + "\n")
                failures.flush()
            if (i + 1) % 1000 == 0:
                print(f"{i + 1} inputs, {time.monotonic() - start:.0f} s: {counts}", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - start
    print(json.dumps(dict(counts, seconds=round(elapsed, 1), slowest_input_s=round(slowest, 2), seed=args.seed)))
    bad = counts["exceptions"] + counts["mismatches"] + counts["hangs"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
