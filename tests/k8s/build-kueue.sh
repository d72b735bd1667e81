#!/usr/bin/env bash
# Build Kueue's scheduler performance tools from its Go module (sigs.k8s.io/kueue),
# cached by version outside the repository, for benchmarks/bench_vs_kueue.py (issue 20).
#
# Usage:
#   tests/k8s/build-kueue.sh               build (instant no-op if cached), print the bin dir last
#   tests/k8s/build-kueue.sh --print-bin   print the bin dir (exit 1 if not built)
#   tests/k8s/build-kueue.sh --print-src   print the module source dir (exit 1 if not built)
#   tests/k8s/build-kueue.sh --status      print the state of the cache
#
# Environment:
#   TIHUB_KUEUE_CACHE cache root (default ${XDG_CACHE_HOME:-~/.cache}/ti-hub/kueue)
#   TIHUB_K8S_NICE    nice level for the build (default 10)
#   GOTOOLCHAIN       passed through; `auto` lets go fetch a newer toolchain
#
# Layout under $TIHUB_KUEUE_CACHE/<version>/:
#   src/  a writable copy of the whole module (Kueue's performance runner must run
#         from inside it: its test utilities look upward for the Makefile, and it
#         reads config/components/crd/bases and test/performance/scheduler/configs)
#   bin/  minimalkueue                    (test/performance/scheduler/minimalkueue)
#         performance-scheduler-runner    (test/performance/scheduler/runner)
#         performance-scheduler-checker.test  (go test -c ./test/performance/scheduler/checker)
#         jobkueue  (benchmarks/kueue/jobkueue.go, TiHub's: Kueue's scheduler and core controllers with
#                   the batch/Job integration and a settable client QPS; rebuilt alone when that file
#                   changes, keyed by its hash in bin/jobkueue.sha256)
# Both are written atomically (built into a temp dir, then renamed). Concurrent
# callers serialize on a lock file; the second finds everything built.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JOBKUEUE_GO="$HERE/../../benchmarks/kueue/jobkueue.go"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE_ROOT="${TIHUB_KUEUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ti-hub/kueue}"
MODULE=sigs.k8s.io/kueue
DEST="$CACHE_ROOT/$KUEUE_VERSION"
SRC="$DEST/src"
BIN="$DEST/bin"
NICE="${TIHUB_K8S_NICE:-10}"
BINARIES=(minimalkueue performance-scheduler-runner performance-scheduler-checker.test jobkueue)

# shellcheck source=buildlib.sh
source "$HERE/buildlib.sh"

is_built() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
  [[ -f "$SRC/Makefile" && -f "$SRC/go.mod" ]] && jobkueue_current
}

jobkueue_sum() { sha256sum "$JOBKUEUE_GO" | cut -d' ' -f1; }
jobkueue_current() { [[ -x "$BIN/jobkueue" && "$(cat "$BIN/jobkueue.sha256" 2>/dev/null)" == "$(jobkueue_sum)" ]]; }

# jobkueue is built inside the module copy (its go.mod pins every dependency), into $1
build_jobkueue() {
  local out="$1" sum
  sum="$(jobkueue_sum)"
  mkdir -p "$SRC/cmd/tihub-jobkueue"
  cp "$JOBKUEUE_GO" "$SRC/cmd/tihub-jobkueue/main.go"
  GOFLAGS=-buildvcs=false go_progress jobkueue build -v -trimpath -ldflags="-s -w" \
    -o "$out/jobkueue.tmp" ./cmd/tihub-jobkueue
  mv "$out/jobkueue.tmp" "$out/jobkueue"
  echo "$sum" > "$out/jobkueue.sha256"
}

# go build / go test -c with progress: -v prints each package as it is compiled
go_progress() { # what, then the go command's arguments
  local what="$1" t; shift
  t=$(date +%s)
  log "building $what ..."
  (cd "$SRC" && nice -n "$NICE" go "$@" 2>&1 |
     awk '{ n++; if ($0 ~ /^(#|[^ ]+\.go:[0-9]+)/ || n % 50 == 0) { printf "  ... %d: %s\n", n, $0; fflush() } }' >&2
   exit "${PIPESTATUS[0]}") || die "building $what failed (go $*)"
  log "built $what in $(( $(date +%s) - t ))s"
}

cmd_build() {
  if is_built; then log "already built: $BIN"; echo "$BIN"; return 0; fi
  take_build_lock "$CACHE_ROOT" kueue
  if is_built; then log "built by the other build"; echo "$BIN"; return 0; fi
  local b only_jobkueue=1
  for b in "${BINARIES[@]}"; do [[ $b == jobkueue || -x "$BIN/$b" ]] || only_jobkueue=0; done
  if [[ $only_jobkueue == 1 && -f "$SRC/go.mod" ]]; then
    log "benchmarks/kueue/jobkueue.go changed: rebuilding jobkueue only"
    build_jobkueue "$BIN"
    log "done: $BIN (total $(( $(date +%s) - T0 ))s)"
    echo "$BIN"; return 0
  fi

  log "building kueue $KUEUE_VERSION ($MODULE) performance tools"
  log "$(go version); GOTOOLCHAIN=$(go env GOTOOLCHAIN); $(nproc) cpus"
  log "destination: $DEST/{src,bin}"
  work="$(mktemp -d "$CACHE_ROOT/work.XXXXXX")"
  trap 'chmod -R u+w "${work:-/nonexistent}" 2>/dev/null; rm -rf "${work:-}"' EXIT

  # ---- module source ----------------------------------------------------------
  local t moddir gover
  t=$(date +%s)
  log "downloading $MODULE@$KUEUE_VERSION ..."
  moddir="$(cd "$work" && GOFLAGS= go mod download -json "$MODULE@$KUEUE_VERSION" |
            sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$moddir/go.mod" ]] || die "could not download $MODULE@$KUEUE_VERSION"
  gover="$(awk '$1 == "go" {print $2; exit}' "$moddir/go.mod")"
  log "$MODULE $KUEUE_VERSION needs go $gover; copying the module (read-only in the module cache) ..."
  cp -r "$moddir" "$work/src"
  chmod -R u+w "$work/src"
  # Build inside the copy: it is the main module, so its go.mod/go.sum (and any
  # replace directives) apply as in Kueue's own Makefile.
  SRC="$work/src"
  log "downloading the module graph ..."
  (cd "$SRC" && GOFLAGS= nice -n "$NICE" go mod download) || die "go mod download failed"
  log "modules ready in $(( $(date +%s) - t ))s"

  # ---- binaries (as Kueue's Makefile-test.mk builds them) ---------------------
  mkdir -p "$work/bin"
  local vpkg=$MODULE/pkg/version ld
  ld="-s -w -X '$vpkg.GitVersion=$KUEUE_VERSION' -X '$vpkg.GitCommit=module-proxy'"
  ld+=" -X '$vpkg.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)'"
  export GOFLAGS=-buildvcs=false
  go_progress minimalkueue build -v -trimpath -ldflags="$ld" \
    -o "$work/bin/minimalkueue" ./test/performance/scheduler/minimalkueue
  go_progress performance-scheduler-runner build -v -trimpath -ldflags="$ld" \
    -o "$work/bin/performance-scheduler-runner" ./test/performance/scheduler/runner
  # The checker is a Go test (`make test-performance-scheduler-once` runs it with
  # --summary/--cmdStats/--range); compiled once here so that no go is needed later.
  go_progress performance-scheduler-checker.test test -c -v -trimpath \
    -o "$work/bin/performance-scheduler-checker.test" ./test/performance/scheduler/checker
  build_jobkueue "$work/bin"
  for b in "${BINARIES[@]}"; do
    [[ -x "$work/bin/$b" ]] || die "no $b was produced"
    log "  $b $(du -h "$work/bin/$b" | cut -f1)"
  done

  # ---- publish atomically ----------------------------------------------------
  SRC="$DEST/src"
  mkdir -p "$DEST"
  rm -rf "$SRC.old" "$BIN.old"
  [[ -d "$SRC" ]] && mv "$SRC" "$SRC.old"
  [[ -d "$BIN" ]] && mv "$BIN" "$BIN.old"
  mv "$work/src" "$SRC"
  mv "$work/bin" "$BIN"
  rm -rf "$SRC.old" "$BIN.old"
  log "done: $BIN, source $SRC (total $(( $(date +%s) - T0 ))s)"
  echo "$BIN"
}

case "${1:-}" in
  ""|--build) cmd_build ;;
  --print-bin) is_built && echo "$BIN" ;;
  --print-src) is_built && echo "$SRC" ;;
  --status) if is_built; then echo "built: $BIN"; else echo "not built ($KUEUE_VERSION)"; exit 1; fi ;;
  -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
esac
