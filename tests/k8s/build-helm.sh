#!/usr/bin/env bash
# Build helm from its Go module (helm.sh/helm/v3/cmd/helm), cached by version
# outside the repository.
#
# Usage:
#   tests/k8s/build-helm.sh               build (instant no-op if cached), print the binary's path last
#   tests/k8s/build-helm.sh --print-bin   print the binary's path (exit 1 if not built)
#   tests/k8s/build-helm.sh --status      print the state of the cache
#
# Environment:
#   TIHUB_HELM_CACHE  cache root (default ${XDG_CACHE_HOME:-~/.cache}/ti-hub/helm)
#   TIHUB_K8S_NICE    nice level for the build (default 10)
#   GOTOOLCHAIN       passed through; `auto` lets go fetch a newer toolchain
#
# The binary lands in $TIHUB_HELM_CACHE/<version>/bin/helm, written atomically
# (installed into a temp dir, then renamed). Concurrent callers (e.g. two
# pytest workers) serialize on a lock file; the second finds the binary built.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE_ROOT="${TIHUB_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ti-hub/helm}"
DEST="$CACHE_ROOT/$HELM_VERSION"
BIN="$DEST/bin"
HELM="$BIN/helm"
NICE="${TIHUB_K8S_NICE:-10}"
# v3 and v4 live at different module paths
MAJOR="${HELM_VERSION%%.*}"
MODULE="helm.sh/helm/$MAJOR"

# shellcheck source=buildlib.sh
source "$HERE/buildlib.sh"

is_built() { [[ -x "$HELM" ]]; }

cmd_build() {
  if is_built; then echo "$HELM"; return 0; fi
  take_build_lock "$CACHE_ROOT" helm
  if is_built; then log "built by the other build"; echo "$HELM"; return 0; fi

  log "building helm $HELM_VERSION (go install $MODULE/cmd/helm@$HELM_VERSION)"
  log "$(go version); GOTOOLCHAIN=$(go env GOTOOLCHAIN); $(nproc) cpus"
  log "destination: $HELM"
  work="$(mktemp -d "$CACHE_ROOT/work.XXXXXX")"
  trap 'rm -rf "${work:-}"' EXIT

  local t gomod cgo kmaj kmin
  t=$(date +%s)
  log "downloading $MODULE@$HELM_VERSION ..."
  gomod="$(cd "$work" && GOFLAGS= go mod download -json "$MODULE@$HELM_VERSION" |
           sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "$gomod" ]] || die "could not download $MODULE@$HELM_VERSION"

  # The same ldflags as helm's Makefile: the version, and the Kubernetes version that
  # `helm template`/`helm lint` assume (.Capabilities.KubeVersion) taken from the
  # client-go it is built with (v0.X.Y -> 1.X); without them helm assumes v1.20.
  cgo="$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")"
  [[ "$cgo" =~ ^v0\.([0-9]+)\. ]] || die "no k8s.io/client-go version in $gomod"
  kmaj=1 kmin="${BASH_REMATCH[1]}"
  log "client-go $cgo: helm will assume Kubernetes v$kmaj.$kmin by default"
  local vpkg="$MODULE/internal/version" ld p
  ld="-s -w -X $vpkg.version=$HELM_VERSION -X $vpkg.gitTreeState=clean -X $vpkg.metadata="
  for p in pkg/lint/rules pkg/chartutil; do
    ld+=" -X $MODULE/$p.k8sVersionMajor=$kmaj -X $MODULE/$p.k8sVersionMinor=$kmin"
  done
  log "compiling (a few minutes on 2 cores; progress below is go's package list) ..."
  # -v prints each package as it is compiled: progress for a long cold build
  (cd "$work" && GOFLAGS= GOBIN="$work/bin" CGO_ENABLED=0 nice -n "$NICE" \
     go install -v -trimpath -ldflags="$ld" "$MODULE/cmd/helm@$HELM_VERSION" 2>&1 |
     awk '{ n++; if (n % 50 == 0) { printf "  ... %d packages (%s)\n", n, $0; fflush() } }' >&2) ||
    die "go install failed"
  [[ -x "$work/bin/helm" ]] || die "go install produced no helm binary"
  log "compiled in $(( $(date +%s) - t ))s ($(du -h "$work/bin/helm" | cut -f1))"
  "$work/bin/helm" version --short >&2 || die "the built helm does not run"

  mkdir -p "$DEST"
  rm -rf "$BIN.old"
  [[ -d "$BIN" ]] && mv "$BIN" "$BIN.old"
  mv "$work/bin" "$BIN"
  rm -rf "$BIN.old"
  log "done: $HELM (total $(( $(date +%s) - T0 ))s)"
  echo "$HELM"
}

case "${1:-}" in
  ""|--build) cmd_build ;;
  --print-bin) is_built && echo "$HELM" ;;
  --status) if is_built; then echo "built: $HELM"; else echo "not built ($HELM_VERSION)"; exit 1; fi ;;
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
esac
