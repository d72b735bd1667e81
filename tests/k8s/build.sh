#!/usr/bin/env bash
# Build a real Kubernetes test control plane (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, kwok) from Go
# modules, cached by version outside the repository.
#
# Usage:
#   tests/k8s/build.sh                 build in the foreground (no-op if cached)
#   tests/k8s/build.sh --background    start the build detached, log to build.log
#   tests/k8s/build.sh --wait [SECS]   wait for a background build (default 3600)
#   tests/k8s/build.sh --print-bin     print the bin dir (exit 1 if not built)
#   tests/k8s/build.sh --status        print the state of the cache / build
#
# Environment:
#   TIHUB_K8S_CACHE   cache root (default ${XDG_CACHE_HOME:-~/.cache}/ti-hub/k8s)
#   TIHUB_K8S_NICE    nice level for the build (default 10)
#   GOTOOLCHAIN       passed through; `auto` lets go fetch a newer toolchain
#
# Binaries land in $TIHUB_K8S_CACHE/<k8s>-etcd<etcd>-kwok<kwok>/bin, written
# atomically (built into a temp dir, then renamed). Go's module and build
# caches stay at their defaults (outside the repository as well).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE_ROOT="${TIHUB_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ti-hub/k8s}"
KEY="${K8S_VERSION}-etcd${ETCD_VERSION}-kwok${KWOK_VERSION}"
DEST="$CACHE_ROOT/$KEY"
BIN="$DEST/bin"
LOG="$CACHE_ROOT/build.log"
PIDFILE="$CACHE_ROOT/build.pid"
RCFILE="$CACHE_ROOT/build.rc"
NICE="${TIHUB_K8S_NICE:-10}"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

# shellcheck source=buildlib.sh
source "$HERE/buildlib.sh"  # gen_staging_replaces, k8s_wrapper_module
T0=$(date +%s)
log() { printf '[%s +%4ss] %s\n' "$(date -u +%H:%M:%S)" "$(( $(date +%s) - T0 ))" "$*"; }
die() { log "ERROR: $*"; exit 1; }

is_built() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
  [[ -f "$BIN/kwok-stages/pod-ready.yaml" ]] || return 1
}

running_pid() {
  local pid
  [[ -f "$PIDFILE" ]] || return 1
  pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

cmd_background() {
  mkdir -p "$CACHE_ROOT"
  if is_built; then echo "already built: $BIN"; return 0; fi
  local pid
  if pid="$(running_pid)"; then echo "build already running (pid $pid), log: $LOG"; return 0; fi
  rm -f "$RCFILE"
  # setsid + nohup: survives the caller's shell/session ending.
  setsid nohup bash -c '"$1" --foreground; echo $? > "$2"' _ "$HERE/build.sh" "$RCFILE" \
    >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  echo "build started in background (pid $!), log: $LOG"
}

cmd_wait() {
  local limit="${1:-3600}" start now pid
  start=$(date +%s)
  while :; do
    if is_built; then echo "built: $BIN"; return 0; fi
    if ! pid="$(running_pid)"; then
      if [[ -f "$RCFILE" ]]; then
        echo "background build exited with status $(cat "$RCFILE"); tail of $LOG:" >&2
      else
        echo "no build running and binaries missing; tail of $LOG:" >&2
      fi
      tail -n 30 "$LOG" >&2 2>/dev/null || true
      return 1
    fi
    now=$(date +%s)
    if (( now - start >= limit )); then
      echo "timed out after ${limit}s waiting for build (pid $pid); log: $LOG" >&2
      return 124
    fi
    sleep 5
  done
}

cmd_status() {
  if is_built; then echo "built: $BIN"; return 0; fi
  local pid
  if pid="$(running_pid)"; then echo "building (pid $pid): $(tail -n 1 "$LOG" 2>/dev/null)"; return 2; fi
  echo "not built (key $KEY)"; return 1
}

build_one() { # name pkg [extra ldflags]
  local name="$1" pkg="$2" ld="${3:-}" t
  t=$(date +%s)
  log "building $name ($pkg) ..."
  nice -n "$NICE" go build -trimpath -ldflags="-s -w $ld" -o "$STAGE/$name" "$pkg"
  log "built $name in $(( $(date +%s) - t ))s ($(du -h "$STAGE/$name" | cut -f1))"
}

cmd_foreground() {
  if is_built; then log "already built: $BIN"; return 0; fi
  command -v go >/dev/null || die "go not found in PATH"
  mkdir -p "$CACHE_ROOT"
  log "versions: kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION"
  log "$(go version); GOTOOLCHAIN=$(go env GOTOOLCHAIN); $(nproc) cpus"
  log "destination: $BIN"

  # Global (not local): the EXIT trap runs after this function returns.
  work="$(mktemp -d "$CACHE_ROOT/work.XXXXXX")"
  WORK_DIR="$work"
  STAGE="$work/bin"
  mkdir -p "$STAGE"
  trap 'rm -rf "${WORK_DIR:-}"' EXIT
  export GOFLAGS=-mod=mod

  # ---- kubernetes -----------------------------------------------------------
  local t
  t=$(date +%s)
  k8s_wrapper_module "$work/k8s" kube-apiserver kube-controller-manager kube-scheduler kubectl
  log "kubernetes modules ready in $(( $(date +%s) - t ))s"
  local gover="$K8S_GOVER" vld="$K8S_VERSION_LDFLAGS"
  build_one kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$vld"
  build_one kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$vld"
  build_one kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$vld"
  build_one kubectl k8s.io/kubernetes/cmd/kubectl "$vld"

  # ---- etcd -----------------------------------------------------------------
  # In etcd 3.5+/3.6 the etcd main package is the root of go.etcd.io/etcd/server/v3
  # (server/main.go wraps server/v3/etcdmain). Own wrapper module: its
  # dependency versions (grpc, otel, ...) differ from kubernetes'.
  mkdir -p "$work/etcd" && cd "$work/etcd"
  t=$(date +%s)
  printf 'module tihub.local/etcd-build\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$gover" "$ETCD_VERSION" >go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
  log "resolving etcd $ETCD_VERSION module graph ..."
  nice -n "$NICE" go mod tidy -e >/dev/null 2>"$work/tidy.err" || { cat "$work/tidy.err"; die "go mod tidy (etcd) failed"; }
  # go.mod's go line may have been raised by tidy; that is fine.
  log "etcd modules ready in $(( $(date +%s) - t ))s"
  build_one etcd go.etcd.io/etcd/server/v3

  # ---- kwok -----------------------------------------------------------------
  # kwok's go.mod has no replace directives, so `go install pkg@version` works.
  t=$(date +%s)
  log "building kwok (go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION) ..."
  cd "$work"
  GOFLAGS= GOBIN="$STAGE" nice -n "$NICE" go install -trimpath -ldflags="-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  log "built kwok in $(( $(date +%s) - t ))s ($(du -h "$STAGE/kwok" | cut -f1))"
  # kwok's own stage definitions (node and pod lifecycles) travel with the binary: the test
  # cluster uses them as released, adding only TiHub's completion stages (tests/k8s/stages/)
  local kwok_src
  kwok_src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  mkdir -p "$STAGE/kwok-stages"
  cp "$kwok_src/node/fast/node-initialize.yaml" "$kwok_src/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "$kwok_src"/pod/fast/pod-{ready,delete}.yaml \
     "$STAGE/kwok-stages/"

  # ---- publish atomically ---------------------------------------------------
  "$STAGE/kubectl" version --client 2>/dev/null | sed 's/^/  /' || true
  "$STAGE/etcd" --version 2>/dev/null | head -n 1 | sed 's/^/  /' || true
  mkdir -p "$DEST"
  rm -rf "$BIN.old"
  [[ -d "$BIN" ]] && mv "$BIN" "$BIN.old"
  mv "$STAGE" "$BIN"
  rm -rf "$BIN.old" "$work"
  log "done: $BIN (total $(( $(date +%s) - T0 ))s)"
}

case "${1:-}" in
  ""|--foreground) cmd_foreground ;;
  --background) cmd_background ;;
  --wait) cmd_wait "${2:-3600}" ;;
  --status) cmd_status ;;
  --print-bin) is_built && echo "$BIN" ;;
  -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
esac
