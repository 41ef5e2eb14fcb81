#!/usr/bin/env bash
# Builds client-vscode/gradguard-<version>.vsix offline:
#   1. the extension bundle (esbuild, minified);
#   2. a gradguard wheel from this repository in bundled/ — the "Install gradguard"
#      button installs it into the user's interpreter, so the extension and the server
#      it installs have the same version;
#   3. the .vsix (@vscode/vsce needs Node >= 22: it runs on the Node 24 from e2e-setup.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$here"
PY="${GRADGUARD_PYTHON:-$repo/.venv/bin/python}"
eval "$(bash scripts/e2e-setup.sh --node-only)"

node esbuild.mjs --production
rm -rf bundled && mkdir -p bundled
# --no-build-isolation: build with the venv's setuptools instead of downloading one; an old
# setuptools without a built-in bdist_wheel (< 70.1, no `wheel`) falls back to an isolated build.
"$PY" -m pip wheel -q --no-deps --no-build-isolation "$repo" -w bundled/ >bundled/.wheel.log 2>&1 \
  || "$PY" -m pip wheel -q --no-deps "$repo" -w bundled/ >>bundled/.wheel.log 2>&1 \
  || { cat bundled/.wheel.log >&2; exit 1; }
ls bundled/gradguard-*.whl >/dev/null
version="$(node -p 'require("./package.json").version')"
out="gradguard-$version.vsix"
rm -f "$out"
# README images and links resolve against the repository on the Marketplace page.
base="$(node -p 'require("./package.json").repository.url.replace(/\.git$/, "")')"
PATH="$NODE24_DIR/bin:$PATH" node node_modules/@vscode/vsce/vsce package --no-dependencies -o "$out" \
  --baseContentUrl "$base/blob/HEAD/client-vscode" --baseImagesUrl "$base/raw/HEAD/client-vscode" >/dev/null
# The package must hold the bundle, the wheel and the manifest, and nothing from src/ or node_modules/.
listing="$("$PY" -m zipfile -l "$out")"
for must in "extension/dist/extension.js" "extension/package.json" "extension/bundled/gradguard-"; do
  grep -q "$must" <<<"$listing" || { echo "package.sh: $out lacks $must" >&2; exit 1; }
done
if grep -qE "extension/(src|node_modules|test|e2e)/" <<<"$listing"; then
  echo "package.sh: $out contains sources or node_modules" >&2; exit 1
fi
echo "package.sh: built $here/$out ($(du -k "$out" | cut -f1) KiB)"
