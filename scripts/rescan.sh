#!/usr/bin/env bash
# The real-code rescan: clone every repository of docs/scan-repos.txt at its commit into DIR
# (default /tmp/gg-scan; an existing checkout is reused), then run
#
#   gradguard check --format json --no-cache .
#
# at DIR's root and print the JSON (the count of findings goes to stderr). Run it before and after
# a change and diff the two outputs: every finding that comes or goes needs a verdict.
#
#   bash scripts/rescan.sh /tmp/gg-scan > after.json
#   GG="python -m gradguard" PYTHONPATH=/path/to/other/checkout/server bash scripts/rescan.sh /tmp/gg-scan > before.json
#
# Needs git and network access to github.com. Nothing fetched is imported or run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
scan=${1:-/tmp/gg-scan}
list=${REPOS:-$here/docs/scan-repos.txt}
GG=${GG:-gradguard}
mkdir -p "$scan"
grep -v -e '^#' -e '^[[:space:]]*$' "$list" | while read -r repo commit; do
  dir="$scan/${repo%%/*}+${repo##*/}"
  if [ ! -d "$dir/.git" ]; then
    git clone -q "https://github.com/$repo" "$dir" >&2
  fi
  git -C "$dir" checkout -q "$commit" >&2
done
cd "$scan"
set +e
$GG check --format json --no-cache . > "$scan/.rescan.json"
rc=$?
set -e
if [ "$rc" -gt 1 ] && ! [ -s "$scan/.rescan.json" ]; then
  echo "rescan.sh: gradguard exited $rc" >&2
  exit "$rc"
fi
cat "$scan/.rescan.json"
python3 -c 'import json, sys; print(f"{len(json.load(open(sys.argv[1])))} findings", file=sys.stderr)' "$scan/.rescan.json"
rm -f "$scan/.rescan.json"
