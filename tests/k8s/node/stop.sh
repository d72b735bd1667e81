#!/usr/bin/env bash
# Stop the real node that start.sh started and remove everything it made: its processes (kubelet, kube-proxy,
# containerd, shims, every container), mounts, network namespaces, veths, the bridge, iptables rules and chains,
# cgroups, the kubelet's log links, shim sockets; the sysctls the kubelet and the bridge plugin changed are put
# back as they were. Removes what a crashed node left, too (start.sh runs the same cleanup first).
# The last run's logs stay in $TIHUB_NODE_RUN.logs (default /var/tmp/ti-hub-node.logs).
#
# Usage: tests/k8s/node/stop.sh [--check]   --check: then list anything left (exit 1 if something is)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"
[[ "$(id -u)" == 0 ]] || die "needs root"

mkdir -p "$(dirname "$RUN")"
exec 8>"$LOCK"
flock -w 300 8 || die "another start or stop of the node holds $LOCK"
T0=$(date +%s)
# the Node object goes too, if its API server still answers (a test cluster being torn down may not)
if [[ -f "$RUN/admin.kubeconfig" && -f "$RUN/state.env" ]]; then
  name="$(sed -n 's/^name=//p' "$RUN/state.env")"
  kubectl="$(bash "$HERE/../build.sh" --print-bin 2>/dev/null)/kubectl" || true
  if [[ -n "$name" && -x "$kubectl" ]]; then
    timeout 10 "$kubectl" --kubeconfig "$RUN/admin.kubeconfig" --request-timeout=5s delete node "$name" \
      --wait=false >/dev/null 2>&1 || true
  fi
fi
cleanup
log "stopped and removed in $(( $(date +%s) - T0 ))s"
if [[ "${1:-}" == --check ]]; then
  left="$(leftovers)"
  if [[ -n "$left" ]]; then printf 'left behind:\n%s\n' "$left" >&2; exit 1; fi
  log "nothing left"
fi
