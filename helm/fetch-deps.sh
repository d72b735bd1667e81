#!/usr/bin/env bash
# Vendor the zero-to-jupyterhub chart (chart `jupyterhub`, version Z2JH_VERSION of
# tests/k8s/versions.env) into helm/ti-hub/charts/jupyterhub, which git ignores.
#
# Usage:
#   helm/fetch-deps.sh            vendor it (instant when cached)
#   helm/fetch-deps.sh --status   say whether it is vendored / cached
#
# Where the chart comes from, first found wins:
#   1. $TIHUB_Z2JH_CHART: a chart directory or .tgz you provide, e.g. from
#      `helm pull jupyterhub --repo https://hub.jupyter.org/helm-chart/ --version 4.4.0`
#      on a machine that reaches the chart repository, or the jupyterhub/ directory of a
#      checkout of the zero-to-jupyterhub-k8s repository at tag 4.4.0;
#   2. the cache, $TIHUB_HELM_CACHE/z2jh-<version>/jupyterhub (default ~/.cache/ti-hub/helm);
#   3. `helm pull` from the chart's official repository (Chart.yaml's `repository`).
# What 1 or 3 found is copied into the cache. A git checkout's Chart.yaml carries a chartpress
# placeholder version and values.yaml placeholder image tags: the copy gets the release's.
#
# Exit status: 0 vendored; 3 no source could provide it (offline and nothing given or
# cached: the message says how to provide it); 1 any other error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=../tests/k8s/versions.env
source "$ROOT/tests/k8s/versions.env"

CHART_DIR="$HERE/ti-hub"
DEST="$CHART_DIR/charts/jupyterhub"
CACHE_ROOT="${TIHUB_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ti-hub/helm}"
CACHED="$CACHE_ROOT/z2jh-$Z2JH_VERSION/jupyterhub"
REPO_URL="$(awk '/- name: jupyterhub/ {f=1} f && /repository:/ {print $2; exit}' "$CHART_DIR/Chart.yaml")"

log() { printf '[fetch-deps] %s\n' "$*" >&2; }
die() { log "ERROR: $1"; exit "${2:-1}"; }

chart_field() { # file field
  awk -v k="$2:" '$1 == k {v=$2; gsub(/"/, "", v); print v; exit}' "$1"
}

# the chart in $1 (a directory) is z2jh's at Z2JH_VERSION, or a checkout of it: make it so
normalize() {
  local dir="$1" name version
  [[ -f "$dir/Chart.yaml" ]] || die "$dir has no Chart.yaml"
  name="$(chart_field "$dir/Chart.yaml" name)"
  [[ "$name" == jupyterhub ]] || die "$dir is chart '$name', not jupyterhub"
  version="$(chart_field "$dir/Chart.yaml" version)"
  if [[ "$version" == *chartpress* ]]; then
    log "  a git checkout (version '$version'): setting version $Z2JH_VERSION and the image tags"
    sed -i -E "s/^version:.*/version: $Z2JH_VERSION/" "$dir/Chart.yaml"
    sed -i -E "s/^(appVersion:.*)chartpress.*/appVersion: \"$Z2JH_VERSION\"/" "$dir/Chart.yaml"
    # images this chart builds itself (k8s-hub, k8s-image-awaiter, ...) are tagged with its version
    sed -i -E "s/^([[:space:]]*tag:[[:space:]]*)\"?set-by-chartpress\"?/\1\"$Z2JH_VERSION\"/" "$dir/values.yaml"
    version="$Z2JH_VERSION"
  fi
  [[ "$version" == "$Z2JH_VERSION" ]] || die "$dir is jupyterhub $version, expected $Z2JH_VERSION (Z2JH_VERSION)"
}

# copy a chart (directory or .tgz) into the cache
cache_from() {
  local src="$1" tmp
  mkdir -p "$CACHE_ROOT"
  tmp="$(mktemp -d "$CACHE_ROOT/z2jh.XXXXXX")"
  trap 'rm -rf "${tmp:-}"' RETURN
  if [[ -d "$src" ]]; then
    cp -a "$src" "$tmp/jupyterhub"
  elif [[ -f "$src" && "$src" == *.tgz ]]; then
    tar -xzf "$src" -C "$tmp"
    [[ -d "$tmp/jupyterhub" ]] || die "$src does not unpack to jupyterhub/"
  else
    die "$src is neither a chart directory nor a .tgz"
  fi
  rm -rf "$tmp/jupyterhub/.git"
  normalize "$tmp/jupyterhub"
  rm -rf "$CACHED"
  mkdir -p "$(dirname "$CACHED")"
  mv "$tmp/jupyterhub" "$CACHED"
}

helm_bin() {
  "$ROOT/tests/k8s/build-helm.sh" --print-bin 2>/dev/null || "$ROOT/tests/k8s/build-helm.sh" | tail -n 1
}

cmd_fetch() {
  if [[ -n "${TIHUB_Z2JH_CHART:-}" ]]; then
    log "jupyterhub $Z2JH_VERSION from TIHUB_Z2JH_CHART=$TIHUB_Z2JH_CHART"
    cache_from "$TIHUB_Z2JH_CHART"
  elif [[ -f "$CACHED/Chart.yaml" ]]; then
    log "jupyterhub $Z2JH_VERSION from the cache $CACHED"
  else
    local helm tmp
    helm="$(helm_bin)"
    tmp="$(mktemp -d)"
    log "jupyterhub $Z2JH_VERSION: helm pull from $REPO_URL ..."
    if timeout 120 "$helm" pull jupyterhub --repo "$REPO_URL" --version "$Z2JH_VERSION" \
         --destination "$tmp" >"$tmp/pull.log" 2>&1; then
      cache_from "$tmp/jupyterhub-$Z2JH_VERSION.tgz"
      rm -rf "$tmp"
    else
      log "  helm pull failed: $(tail -n 1 "$tmp/pull.log")"
      rm -rf "$tmp"
      die "no source for the jupyterhub chart $Z2JH_VERSION: give one with TIHUB_Z2JH_CHART=<chart dir or .tgz> (see the top of $0)" 3
    fi
  fi
  normalize "$CACHED"
  mkdir -p "$CHART_DIR/charts"
  rm -rf "$DEST.new"
  cp -a "$CACHED" "$DEST.new"
  rm -rf "$DEST"
  mv "$DEST.new" "$DEST"
  log "vendored: $DEST (jupyterhub $Z2JH_VERSION)"
}

case "${1:-}" in
  "") cmd_fetch ;;
  --status)
    if [[ -f "$DEST/Chart.yaml" ]]; then echo "vendored: $DEST ($(chart_field "$DEST/Chart.yaml" version))"
    elif [[ -f "$CACHED/Chart.yaml" ]]; then echo "cached, not vendored: $CACHED"
    else echo "not available (jupyterhub $Z2JH_VERSION)"; exit 3; fi ;;
  -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
esac
