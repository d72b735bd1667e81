#!/usr/bin/env bash
# Installs code-server (VS Code in the browser, from npm) for the workspaces' "VS Code" launcher.
#
#   scripts/install-code-server.sh [DEST]     prints the code-server executable's path on its last line
#
# DEST defaults to ~/.cache/ti-hub/code-server-VERSION; an install already there is reused (nothing is
# downloaded again). Needs Node.js 20 and npm (code-server 4.99 builds its native modules for Node 20) and, on
# Debian, the build packages below (installed when run as root). Two things npm's install would fetch from
# outside a package registry are taken from Debian instead: ripgrep (VS Code's search), whose postinstall
# otherwise downloads a release binary, is handed the distribution's `rg` through its download cache.
set -euo pipefail

VERSION="${TI_HUB_CODE_SERVER_VERSION:-4.99.4}"
# the @vscode/ripgrep version code-server VERSION's shrinkwrap pins, and the ripgrep release tag it asks for
RIPGREP_PKG="1.15.11"
RIPGREP_TAG="v13.0.0-10"
DEST="${1:-${HOME}/.cache/ti-hub/code-server-${VERSION}}"
BIN="${DEST}/node_modules/code-server/out/node/entry.js"
LAUNCHER="${DEST}/bin/code-server"

if [ -x "${LAUNCHER}" ] && [ -f "${BIN}" ]; then
  echo "code-server ${VERSION} already installed in ${DEST}" >&2
  echo "${LAUNCHER}"
  exit 0
fi

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "${node_major}" != "20" ]; then
  echo "code-server ${VERSION} needs Node.js 20 (found: ${node_major}); set TI_HUB_CODE_SERVER_VERSION to one" \
    "that matches your Node.js (npm view code-server engines)" >&2
  exit 1
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  need=()
  for p in build-essential pkg-config python3 libkrb5-dev libxkbfile-dev libsecret-1-dev ripgrep; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if [ "${#need[@]}" -gt 0 ]; then
    echo "installing build packages: ${need[*]}" >&2
    apt-get install -y -q "${need[@]}" >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
  fi
fi
RG=$(command -v rg) || { echo "ripgrep (rg) is needed: install Debian's ripgrep" >&2; exit 1; }

case "$(uname -m)" in
  x86_64) target=x86_64-unknown-linux-musl ;;
  aarch64) target=aarch64-unknown-linux-musl ;;
  *) echo "code-server's ripgrep: unsupported machine $(uname -m)" >&2; exit 1 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
# @vscode/ripgrep looks for its release archive in $TMPDIR/vscode-ripgrep-cache-PKG before downloading it
mkdir -p "${work}/tmp/vscode-ripgrep-cache-${RIPGREP_PKG}" "${work}/rg"
cp "${RG}" "${work}/rg/rg"
tar czf "${work}/tmp/vscode-ripgrep-cache-${RIPGREP_PKG}/ripgrep-${RIPGREP_TAG}-${target}.tar.gz" -C "${work}/rg" rg

stage="${DEST}.partial"
rm -rf "${stage}"
mkdir -p "${stage}"
echo "installing code-server ${VERSION} with npm (builds native modules: a few minutes)" >&2
# npm_config_yes: a build step runs `npx node-gyp`, which would otherwise stop to ask
if ! TMPDIR="${work}/tmp" npm_config_yes=true npm install --prefix "${stage}" "code-server@${VERSION}" --unsafe-perm --no-audit \
    --no-fund --loglevel=error >"${work}/npm.log" 2>&1; then
  tail -40 "${work}/npm.log" >&2
  echo "npm could not install code-server ${VERSION} (the log's end is above)" >&2
  exit 1
fi
mkdir -p "${stage}/bin"
# a launcher that runs code-server with the Node.js it was built for, wherever DEST ends up
cat >"${stage}/bin/code-server" <<EOF
#!/bin/sh
exec "$(command -v node)" "\$(dirname "\$0")/../node_modules/code-server/out/node/entry.js" "\$@"
EOF
chmod 0755 "${stage}/bin/code-server"
rm -rf "${DEST}"
mv "${stage}" "${DEST}"
echo "code-server ${VERSION} installed in ${DEST}" >&2
echo "${LAUNCHER}"
