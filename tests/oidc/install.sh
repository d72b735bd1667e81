#!/usr/bin/env bash
# Installs the test OpenID Connect provider's packages (tests/oidc/node_modules) exactly as package-lock.json
# pins them. Keyed by the hash of package.json + package-lock.json: an installed tree with the same key is kept
# (no npm at all), a warm machine copies the tree from ~/.cache/ti-hub/oidc/<key>, a cold one runs `npm ci`
# (npm's own cache helps). scripts/test runs it before pytest; tests/browser/test_oidc.py runs it too, so that
# a plain `pytest` on a machine with npm works as well.
set -euo pipefail
cd "$(dirname "$0")"
CACHE="${TI_HUB_CACHE:-$HOME/.cache/ti-hub}/oidc"
key=$(cat package.json package-lock.json | sha256sum | cut -c1-16)
if [ "$(cat node_modules/.ti-key 2>/dev/null)" = "$key" ]; then
  echo "test OIDC provider: installed ($key)"
  exit 0
fi
if [ -f "$CACHE/$key/.ti-key" ]; then
  rm -rf node_modules && cp -r "$CACHE/$key" node_modules
  echo "test OIDC provider: copied from the cache ($key)"
  exit 0
fi
command -v npm >/dev/null || { echo "test OIDC provider: npm is needed (install Node.js 20+)" >&2; exit 1; }
echo "test OIDC provider: npm ci ($key)"
npm ci --prefer-offline --no-audit --no-fund --loglevel=error
echo "$key" > node_modules/.ti-key
mkdir -p "$CACHE"
tmp="$CACHE/$key.tmp.$$"
rm -rf "$tmp" && cp -r node_modules "$tmp"
if [ -d "$CACHE/$key" ]; then
  rm -rf "$tmp"  # another run cached the same key meanwhile: keep theirs
else
  mv "$tmp" "$CACHE/$key"
fi
echo "test OIDC provider: installed and cached ($key)"
