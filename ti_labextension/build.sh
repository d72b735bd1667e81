#!/usr/bin/env bash
# Builds the prebuilt lab extension (TypeScript -> ti_labextension/labextension) once per source version.
# The output is cached under ~/.cache/ti-hub/labextension/<hash of the sources and the lock file>, so a
# fresh clone on a warm machine copies it in seconds; a cold one runs `npm install` (npm's own cache helps).
set -euo pipefail
cd "$(dirname "$0")"
CACHE="${TI_HUB_CACHE:-$HOME/.cache/ti-hub}/labextension"
OUT=ti_labextension/labextension
key=$(cat package.json package-lock.json tsconfig.json src/*.ts style/* | sha256sum | cut -c1-16)
if [ -f "$CACHE/$key/static/style.js" ]; then
  echo "lab extension: cached build $key"
  rm -rf "$OUT" && mkdir -p "$(dirname "$OUT")" && cp -r "$CACHE/$key" "$OUT"
  exit 0
fi
command -v npm >/dev/null || { echo "lab extension: npm is needed to build it (install Node.js 18+)" >&2; exit 1; }
echo "lab extension: building $key (npm install, TypeScript, bundle)"
# npm ci refuses lock files without every platform's optional rspack binding (an npm bug); install honours the lock
npm install --prefer-offline --no-audit --no-fund --loglevel=error
npm run --silent build:prod
test -f "$OUT/static/style.js"
mkdir -p "$CACHE" && rm -rf "$CACHE/$key.tmp" && cp -r "$OUT" "$CACHE/$key.tmp" && mv "$CACHE/$key.tmp" "$CACHE/$key"
echo "lab extension: built and cached as $key"
