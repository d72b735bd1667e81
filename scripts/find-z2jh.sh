#!/usr/bin/env bash
# Where scripts/test finds the zero-to-jupyterhub chart that the whole-chart Helm tests (tests/k8s/test_helm_chart.py)
# need: no package registry here serves it, so a copy is vendored beside the checkout. First found wins:
#   1. $TIHUB_Z2JH_CHART     the chart itself, a directory or .tgz (as helm/fetch-deps.sh takes it)
#   2. $TI_HUB_VENDOR_DIR    a vendor directory holding z2jh-<version>/jupyterhub
#   3. $TI_HUB_SHARED        a directory holding vendor/z2jh-<version>/jupyterhub
#   4. ../shared/vendor      beside the checkout (the default layout)
#   5. the copy helm/fetch-deps.sh cached from an earlier run
# <version> is Z2JH_VERSION of tests/k8s/versions.env. Relative paths are taken from the current directory.
#
# Prints the chart's absolute path (exit 0). Exit 2: a location named by 1-3 has no such chart (a mistake to fix);
# exit 3: nothing found (the tests then try `helm pull`, which needs the network). Either way stderr says what is
# missing and every place looked at.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^Z2JH_VERSION=//p' "$ROOT/tests/k8s/versions.env")"
SUB="z2jh-$VERSION/jupyterhub"
CACHED="${TIHUB_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ti-hub/helm}/$SUB"

say() { printf '%s\n' "$*" >&2; }
absolute() { realpath -m -- "$1"; }
is_chart() { [[ -f "$1/Chart.yaml" || ( -f "$1" && "$1" == *.tgz ) ]]; }
# what a vendor directory holds instead, to make a version mismatch plain
holds() {
  local l
  l="$(cd "$1" 2>/dev/null && ls -d z2jh-* 2>/dev/null | tr '\n' ' ')" || true
  echo "${l:-no z2jh-* at all}"
}

given() { # variable, the path it names, the vendor directory under it ("" when it names the chart itself)
  local var="$1" path vendor want
  path="$(absolute "$2")"
  vendor="${3:+$path/$3}"
  vendor="${vendor%/.}"
  want="${vendor:+$vendor/$SUB}"
  want="${want:-$path}"
  if is_chart "$want"; then
    printf '%s\n' "$want"
    exit 0
  fi
  if [[ ! -e "$path" ]]; then
    say "$var=$2: $path does not exist"
  elif [[ -n "$vendor" ]]; then
    say "$var=$2 has no zero-to-jupyterhub chart $VERSION: $want is missing ($vendor holds: $(holds "$vendor"))"
  else
    say "$var=$2 is neither a chart directory (no Chart.yaml) nor a .tgz"
  fi
  say "(the version is Z2JH_VERSION in tests/k8s/versions.env; ../shared/vendor/README.md says what is vendored)"
  exit 2
}

[[ -n "${TIHUB_Z2JH_CHART:-}" ]] && given TIHUB_Z2JH_CHART "$TIHUB_Z2JH_CHART" ""
[[ -n "${TI_HUB_VENDOR_DIR:-}" ]] && given TI_HUB_VENDOR_DIR "$TI_HUB_VENDOR_DIR" "."
[[ -n "${TI_HUB_SHARED:-}" ]] && given TI_HUB_SHARED "$TI_HUB_SHARED" "vendor"

VENDOR="$(absolute "$ROOT/../shared/vendor")"
if is_chart "$VENDOR/$SUB"; then
  printf '%s\n' "$VENDOR/$SUB"
  exit 0
fi
if is_chart "$CACHED"; then
  say "not vendored at $VENDOR/$SUB; using the copy helm/fetch-deps.sh cached: $CACHED"
  printf '%s\n' "$CACHED"
  exit 0
fi
say "MISSING: the zero-to-jupyterhub chart $VERSION that the whole-chart Helm tests need."
if [[ -d "$VENDOR" ]]; then there="that directory holds: $(holds "$VENDOR")"; else there="no such directory"; fi
say "  looked at: $VENDOR/$SUB ($there)"
say "  and at the cache: $CACHED"
say "  give it with TI_HUB_SHARED=<dir with vendor/>, TI_HUB_VENDOR_DIR=<vendor dir>"
say "  or TIHUB_Z2JH_CHART=<chart dir or .tgz>;"
say "  without it those tests try \`helm pull\` (network) and skip, saying so, when that fails."
exit 3
