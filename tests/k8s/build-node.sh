#!/usr/bin/env bash
# Build the node binaries of the test cluster's real node (tests/k8s/node/): kubelet and kube-proxy of
# K8S_VERSION, from the same k8s.io/kubernetes wrapper module as build.sh builds the control plane with, cached
# by version under a key of their own (the control plane's cache stays valid).
#
# Usage:
#   tests/k8s/build-node.sh                 build in the foreground (no-op if cached); prints the bin dir last
#   tests/k8s/build-node.sh --background    start the build detached (after build.sh's, if one is running)
#   tests/k8s/build-node.sh --wait [SECS]   wait for a background build (default 3600; 124 = timed out)
#   tests/k8s/build-node.sh --print-bin     print the bin dir (exit 1 if not built)
#   tests/k8s/build-node.sh --status        built / building / not built
#
# Environment:
#   TIHUB_K8S_CACHE   cache root (default ${XDG_CACHE_HOME:-~/.cache}/ti-hub/k8s), shared with build.sh
#   TIHUB_K8S_NICE    nice level for the build (default 10)
#   GOTOOLCHAIN       passed through; `auto` lets go fetch a newer toolchain
#
# Binaries land in $TIHUB_K8S_CACHE/node-<k8s>/bin/{kubelet,kube-proxy}, written atomically. containerd, runc
# and the CNI plugins are Debian's (tests/k8s/node/start.sh installs them).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE_ROOT="${TIHUB_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ti-hub/k8s}"
KEY="node-${K8S_VERSION}"
DEST="$CACHE_ROOT/$KEY"
BIN="$DEST/bin"
LOG="$CACHE_ROOT/build-node.log"
PIDFILE="$CACHE_ROOT/build-node.pid"
RCFILE="$CACHE_ROOT/build-node.rc"
NICE="${TIHUB_K8S_NICE:-10}"
BINARIES=(kubelet kube-proxy)

# shellcheck source=buildlib.sh
source "$HERE/buildlib.sh"  # log, die, take_build_lock, k8s_wrapper_module

is_built() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}

running_pid() {
  local pid
  [[ -f "$PIDFILE" ]] || return 1
  pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

cmd_build() {
  if is_built; then echo "$BIN"; return 0; fi
  take_build_lock "$CACHE_ROOT/node-lock" "kubelet and kube-proxy"
  if is_built; then log "built by the other build"; echo "$BIN"; return 0; fi
  # the control plane's build compiles most of the same packages: let it fill Go's build cache first
  if [[ "$(bash "$HERE/build.sh" --status 2>/dev/null | head -c 8)" == building ]]; then
    log "waiting for the control plane's build (build.sh) to finish first ..."
    bash "$HERE/build.sh" --wait 3600 >&2 || log "the control plane's build failed; building the node anyway"
  fi
  log "building kubelet and kube-proxy $K8S_VERSION"
  log "$(go version); GOTOOLCHAIN=$(go env GOTOOLCHAIN); $(nproc) cpus"
  log "destination: $BIN"
  work="$(mktemp -d "$CACHE_ROOT/work-node.XXXXXX")"
  trap 'rm -rf "${work:-}"' EXIT
  export GOFLAGS=-mod=mod

  local t name
  t=$(date +%s)
  k8s_wrapper_module "$work/k8s" kubelet kube-proxy
  log "kubernetes modules ready in $(( $(date +%s) - t ))s"
  mkdir -p "$work/bin"
  for name in "${BINARIES[@]}"; do
    t=$(date +%s)
    log "building $name ..."
    nice -n "$NICE" go build -trimpath -ldflags="-s -w $K8S_VERSION_LDFLAGS" -o "$work/bin/$name" \
      "k8s.io/kubernetes/cmd/$name" || die "go build $name failed"
    log "built $name in $(( $(date +%s) - t ))s ($(du -h "$work/bin/$name" | cut -f1))"
    "$work/bin/$name" --version >&2 || die "the built $name does not run"
  done

  mkdir -p "$DEST"
  rm -rf "$BIN.old"
  [[ -d "$BIN" ]] && mv "$BIN" "$BIN.old"
  mv "$work/bin" "$BIN"
  rm -rf "$BIN.old"
  log "done: $BIN (total $(( $(date +%s) - T0 ))s)"
  echo "$BIN"
}

cmd_background() {
  mkdir -p "$CACHE_ROOT"
  if is_built; then echo "already built: $BIN"; return 0; fi
  local pid
  if pid="$(running_pid)"; then echo "node build already running (pid $pid), log: $LOG"; return 0; fi
  rm -f "$RCFILE"
  setsid nohup bash -c 'bash "$1" >/dev/null; echo $? > "$2"' _ "$HERE/build-node.sh" "$RCFILE" \
    >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  echo "node build started in background (pid $!), log: $LOG"
}

cmd_wait() {
  local limit="${1:-3600}" start pid
  start=$(date +%s)
  while :; do
    if is_built; then echo "$BIN"; return 0; fi
    if ! pid="$(running_pid)"; then
      echo "no node build running and binaries missing (rc $(cat "$RCFILE" 2>/dev/null || echo -)); tail of $LOG:" >&2
      tail -n 30 "$LOG" >&2 2>/dev/null || true
      return 1
    fi
    if (( $(date +%s) - start >= limit )); then
      echo "timed out after ${limit}s waiting for the node build (pid $pid); log: $LOG" >&2
      return 124
    fi
    sleep 5
  done
}

case "${1:-}" in
  ""|--build) cmd_build ;;
  --background) cmd_background ;;
  --wait) cmd_wait "${2:-3600}" ;;
  --print-bin) is_built && echo "$BIN" ;;
  --status)
    if is_built; then echo "built: $BIN"
    elif pid="$(running_pid)"; then echo "building (pid $pid): $(tail -n 1 "$LOG" 2>/dev/null)"; exit 2
    else echo "not built (key $KEY)"; exit 1; fi ;;
  -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
esac
