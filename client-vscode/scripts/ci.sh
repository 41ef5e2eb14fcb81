#!/usr/bin/env bash
# CI for the VS Code client (called by the root `make test`): from nothing to a tested .vsix.
#   npm ci → tsc --noEmit → eslint → unit tests (node --test) → esbuild bundle → .vsix
#   → the real-VS-Code end-to-end test (code-server + chromium; see scripts/e2e.sh).
# Needs: Node >= 20 with npm, the npm registry, Debian's chromium, and the repo's .venv
# with gradguard installed (both set up by scripts/bootstrap.sh). Node 24 and code-server
# come from the npm registry into .e2e-cache (kept between runs).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
step() { printf '\n== client-vscode: %s (%ss)\n' "$1" "$SECONDS"; }

step "npm ci"
npm ci --no-audit --no-fund --loglevel=error
step "type-check"
npx tsc --noEmit -p .
step "eslint"
npx eslint src test e2e esbuild.mjs
step "unit tests"
node esbuild.mjs --tests
node --test out/test/
step "bundle + .vsix"
bash scripts/package.sh
step "end-to-end test in code-server"
# Screenshots of a CI run go to the run folder, not over the committed README images.
GRADGUARD_VSIX="$here/gradguard-$(node -p 'require("./package.json").version').vsix" \
  E2E_MEDIA="${E2E_MEDIA-$here/.e2e-run/screenshots}" bash scripts/e2e.sh
step "done"
