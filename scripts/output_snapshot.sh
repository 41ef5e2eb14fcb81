#!/usr/bin/env bash
# The CLI's output on the whole corpus, to hold "no finding changes" across a refactor:
#
#   bash scripts/output_snapshot.sh /tmp/before      # on the old commit
#   ... change things ...
#   bash scripts/output_snapshot.sh /tmp/after && diff -r /tmp/before /tmp/after
#
# Corpus: every fixture (tests/fixtures), every multi-file project (as a directory and
# file by file), the examples, and pytorch/examples when GRADGUARD_PYTORCH_EXAMPLES
# points at a checkout (git clone https://github.com/pytorch/examples; commit in
# docs/pytorch-examples.md). Output: JSON (en and zh), --diff (the fix loop), SARIF,
# text with --statistics, and the rule listing, each with its exit status and stderr.
# GG="python -m gradguard" with PYTHONPATH=<other checkout>/server snapshots another tree.
set -u
out=${1:?usage: output_snapshot.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
GG=${GG:-.venv/bin/python -m gradguard}
export OMP_NUM_THREADS=1 GRADGUARD_LANG=
run() { local name=$1; shift; "$@" > "$out/$name" 2> "$out/$name.err"; echo "rc=$?" >> "$out/$name"; }
files=$(ls tests/fixtures/*.py)
run fixtures.json $GG check --no-cache -j 1 --format json $files
run fixtures.zh.json $GG check --no-cache -j 1 --format json --lang zh $files
run fixtures.diff $GG check --no-cache -j 1 --diff $files
for p in tests/fixtures/projects/*/; do
  n=$(basename "$p")
  run "proj-$n.json" $GG check --no-cache -j 1 --format json "$p"
  run "proj-$n.diff" $GG check --no-cache -j 1 --diff "$p"
  for f in "$p"*.py; do run "proj-$n-$(basename "$f").json" $GG check --no-cache -j 1 --format json "$f"; done
done
run examples.json $GG check --no-cache -j 1 --format json examples
run examples.zh.json $GG check --no-cache -j 1 --format json --lang zh examples
run examples.diff $GG check --no-cache -j 1 --diff examples
run examples.sarif $GG check --no-cache -j 1 --format sarif examples
run examples.text $GG check --no-cache -j 1 --statistics examples
run rules.txt $GG rule --all
run rule-GG101.json $GG rule GG101 --format json
if [ -n "${GRADGUARD_PYTORCH_EXAMPLES:-}" ]; then
  run pytorch-examples.json $GG check --no-cache --format json "$GRADGUARD_PYTORCH_EXAMPLES"
  run pytorch-examples.diff $GG check --no-cache --diff "$GRADGUARD_PYTORCH_EXAMPLES"
fi
