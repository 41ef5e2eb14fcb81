#!/usr/bin/env bash
# Idempotent set-up of everything gradguard's demo and tests need, from nothing:
# a venv in .venv with the package (editable), the test tools and the pinned
# CPU build of torch; Debian's neovim and chromium for the editor tests.
# Re-running is cheap: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
want=${1:-test}   # "demo": the package only; "test": + test tools, torch, editors

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=.venv/.gradguard-$want-$(cat pyproject.toml scripts/bootstrap.sh | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  if [ "$want" = demo ]; then
    .venv/bin/python -m pip install -q -e .
  else
    # torch is pinned: an unpinned torch could pull a multi-GB CUDA build.
    .venv/bin/python -m pip install -q -e '.[test]' torch==2.13.0
  fi
  touch "$stamp"
fi

if [ "$want" = test ]; then
  need=()
  command -v nvim >/dev/null 2>&1 || need+=(neovim)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" libkrb5-dev pkg-config) >/dev/null
    else
      echo "bootstrap: please install: ${need[*]} (needs root)" >&2
    fi
  fi
fi
