#!/usr/bin/env bash
# The real-VS-Code end-to-end test, from nothing:
#   bash client-vscode/scripts/e2e.sh
# Installs Node 24 + code-server into client-vscode/.e2e-cache on first use (minutes;
# then cached), builds the .vsix unless GRADGUARD_VSIX names one, and drives code-server
# with Debian's chromium. Screenshots go to client-vscode/media/ (E2E_MEDIA to change,
# E2E_MEDIA= to skip). E2E_KEEP=1 keeps the run folder (logs, profiles) even on success.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$here"

chromium="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$chromium" ]; then
  echo "e2e: Debian's chromium is needed (apt-get install chromium; the repo's bootstrap does it)" >&2
  exit 1
fi
python="${GRADGUARD_PYTHON:-$repo/.venv/bin/python}"
"$python" -c 'import gradguard' || { echo "e2e: gradguard is not importable by $python (run make test's bootstrap)" >&2; exit 1; }

[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund
t0=$(date +%s)
eval "$(bash scripts/e2e-setup.sh)"
echo "e2e: tools ready in $(( $(date +%s) - t0 )) s"

if [ -z "${GRADGUARD_VSIX:-}" ]; then
  bash scripts/package.sh
  GRADGUARD_VSIX="$here/gradguard-$(node -p 'require("./package.json").version').vsix"
fi

export CODE_SERVER_BIN NODE24_DIR GRADGUARD_VSIX CHROMIUM="$chromium" GRADGUARD_PYTHON="$python"
export E2E_MEDIA="${E2E_MEDIA-$here/media}"
# Its own process group: everything it starts is killed with it (the test also kills
# each code-server's group itself).
exec setsid -w node e2e/run.mjs
