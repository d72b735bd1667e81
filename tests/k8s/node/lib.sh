# Shared by start.sh and stop.sh (sourced): where the real node lives, and how everything it made is removed.
#
# Everything the node makes is named here, so that a stop (or the next start, after a crash) finds all of it:
#   $RUN (TIHUB_NODE_RUN, default /var/tmp/ti-hub-node): containerd's root, state, socket and config, the
#     kubelet's root dir and pod logs, the CNI config and IP allocations, certificates, logs, pid files, and
#     state.env (the caller that owns the node; the sysctls as they were before it started)
#   cgroup /$CGROUP_NAME in every cgroup hierarchy: the daemons (and so containerd's shims) in daemons/, the pods in
#     kubepods/ (the kubelet's cgroupRoot)
#   the bridge $BRIDGE with the pod range $POD_CIDR (the gateway $NODE_IP is the node's address)
#   iptables chains KUBE-* (kubelet, kube-proxy), CNI-* (portmap) and TI-NODE-* (ours), in every table, v4 and v6
#   symlinks in /var/log/containers into $RUN (the kubelet's fixed legacy log links)
#   shim sockets in /run/containerd/s (named by a hash of our containerd socket and the container id)
# shellcheck shell=bash

RUN="${TIHUB_NODE_RUN:-/var/tmp/ti-hub-node}"
LOCK="$RUN.lock"
CGROUP_NAME="${TIHUB_NODE_CGROUP:-ti-hub-node}"
BRIDGE="${TIHUB_NODE_BRIDGE:-ti-node0}"
# a range no route on this machine leads to; only this machine's bridge has it (never routed anywhere)
POD_CIDR="${TIHUB_NODE_POD_CIDR:-10.244.200.0/24}"
NODE_IP="${POD_CIDR%.*}.1"
POD_PREFIX="${POD_CIDR#*/}"
SERVICE_CIDR="${TIHUB_NODE_SERVICE_CIDR:-10.96.0.0/16}"  # the test API server's --service-cluster-ip-range
SOCK="$RUN/containerd/containerd.sock"
SHIM_SOCKETS=/run/containerd/s
# the sysctls the kubelet (setupKernelTunables) or the bridge plugin (isGateway) change; put back on stop
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
         kernel.keys.root_maxbytes net.ipv4.ip_forward)

log() { printf '[node %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# the stop removes $RUN whole: a directory of its own, never / or a system directory
[[ "$RUN" =~ ^/[^/]+/.+[^/]$ && "$RUN" != *..* ]] || die "TIHUB_NODE_RUN must be a directory of its own (got $RUN)"

# every cgroup hierarchy (v1 controllers, name=systemd, the hybrid cgroup2 one): their mount points
cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/mounts; }

# the pids of every process in our cgroups
cgroup_pids() {
  local m
  for m in $(cgroup_mounts); do
    if [[ -d "$m/$CGROUP_NAME" ]]; then find "$m/$CGROUP_NAME" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
  done | sort -un
}

# pid_of NAME: the pid in $RUN/NAME.pid if that process still runs the binary it was started as
pid_of() {
  local pid exe
  pid="$(cat "$RUN/$1.pid" 2>/dev/null)" || return 1
  exe="$(cat "$RUN/$1.exe" 2>/dev/null)" || return 1
  [[ -n "$pid" && "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]] && echo "$pid"
}

# alive PID: running (a zombie is not: this machine's init reaps orphans only now and then)
alive() { [[ -r "/proc/$1/stat" && "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }

# stop_daemons SECS NAME...: SIGTERM to all, then SIGKILL to those still running after SECS
stop_daemons() {
  local secs="$1" name pid i left
  shift
  local -A pids=()
  for name in "$@"; do
    if pid="$(pid_of "$name")"; then pids[$name]="$pid"; kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for ((i = 0; i < secs * 10; i++)); do
    left=0
    for name in "${!pids[@]}"; do if alive "${pids[$name]}"; then left=1; fi; done
    ((left)) || return 0
    sleep 0.1
  done
  for name in "${!pids[@]}"; do
    if alive "${pids[$name]}"; then
      log "$name (pid ${pids[$name]}) did not stop on SIGTERM in ${secs}s; SIGKILL"
      kill -KILL "${pids[$name]}" 2>/dev/null || true
    fi
  done
}

# iptables_clean CMD: remove every jump to, and every chain named KUBE-*, CNI-*, TI-NODE-* in every table
iptables_clean() {
  local ipt="$1" t rule chain
  command -v "$ipt" >/dev/null || return 0
  for t in filter nat mangle raw; do
    "$ipt" -w 5 -t "$t" -S >/dev/null 2>&1 || continue
    # rules in the other chains that jump to ours (-A X ... -j KUBE-FOO  ->  -D X ... -j KUBE-FOO)
    while read -r rule; do
      eval "\"$ipt\" -w 5 -t \"$t\" -D ${rule#-A }" 2>/dev/null || true
    done < <("$ipt" -w 5 -t "$t" -S 2>/dev/null |
             grep -E '^-A [^ ]+ .*-j (KUBE-|CNI-|TI-NODE-)' | grep -Ev '^-A (KUBE-|CNI-|TI-NODE-)')
    for chain in $("$ipt" -w 5 -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-|CNI-|TI-NODE-)/ {print $2}'); do
      "$ipt" -w 5 -t "$t" -F "$chain" 2>/dev/null || true
    done
    for chain in $("$ipt" -w 5 -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-|CNI-|TI-NODE-)/ {print $2}'); do
      "$ipt" -w 5 -t "$t" -X "$chain" 2>/dev/null || log "could not delete $ipt -t $t chain $chain"
    done
  done
}

# containerd's shim socket for a container: /run/containerd/s/<sha256 of "<containerd socket>/<namespace>/<id>">
# (containerd 1.6 runtime/v2/shim.SocketAddress)
shim_socket() { printf '%s/%s' "$SHIM_SOCKETS" "$(printf '%s' "$SOCK/k8s.io/$1" | sha256sum | cut -d' ' -f1)"; }

# cleanup: what stop.sh does, and what start.sh does first (a crashed run leaves everything behind)
cleanup() {
  local pid i m d mnt

  # 1. the node agents first, so that nothing restarts a pod while it is removed
  stop_daemons 10 kubelet kube-proxy
  # 2. containers through containerd while it answers: their shims exit and remove their sockets
  if pid_of containerd >/dev/null && [[ -S "$SOCK" ]]; then
    local ctr=(timeout 20 ctr --address "$SOCK" -n k8s.io) ids
    ids="$("${ctr[@]}" tasks ls -q 2>/dev/null || true)"
    for i in $ids; do "${ctr[@]}" tasks kill -s SIGKILL "$i" >/dev/null 2>&1 || true; done
    for i in $ids; do "${ctr[@]}" tasks rm -f "$i" >/dev/null 2>&1 || true; done
    ids="$("${ctr[@]}" containers ls -q 2>/dev/null || true)"
    [[ -z "$ids" ]] || "${ctr[@]}" containers rm $ids >/dev/null 2>&1 || true
  fi
  stop_daemons 15 containerd
  # 3. whatever still runs in our cgroups (shims of a crashed containerd, container processes)
  for ((i = 0; i < 50; i++)); do
    pid="$(cgroup_pids)"
    [[ -n "$pid" ]] || break
    # shellcheck disable=SC2086
    kill -KILL $pid 2>/dev/null || true
    sleep 0.2
  done
  [[ -z "$(cgroup_pids)" ]] || log "WARNING: processes left in cgroup $CGROUP_NAME: $(cgroup_pids | tr '\n' ' ')"
  # 4. shim sockets of our containers (the ids are the task directories containerd kept in its state)
  if [[ -d "$RUN/containerd/state/io.containerd.runtime.v2.task/k8s.io" ]]; then
    for d in "$RUN/containerd/state/io.containerd.runtime.v2.task/k8s.io"/*; do
      rm -f "$(shim_socket "$(basename "$d")")"
    done
  fi
  # 5. mounts under $RUN, deepest first: rootfs overlays, netns and shm mounts, volumes, the kubelet's rshared root
  for ((i = 0; i < 5; i++)); do
    mnt="$(awk -v run="$RUN/" 'index($2 "/", run) == 1 {print $2}' /proc/self/mounts | awk '{print length, $0}' |
           sort -rn | cut -d' ' -f2-)"
    [[ -n "$mnt" ]] || break
    while read -r m; do
      m="$(printf '%b' "$m")"  # /proc/mounts escapes spaces as \040
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done <<<"$mnt"
  done
  # 6. network: the pods' veths (gone with their namespaces, unless a namespace is still held), the bridge,
  #    the iptables rules
  for d in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$d" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  iptables_clean iptables
  iptables_clean ip6tables
  # 7. the kubelet's links in /var/log/containers (a fixed path), and the directory if the node made it
  if [[ -d /var/log/containers ]]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$RUN/*" -delete 2>/dev/null || true
  fi
  # 8. cgroups, deepest first
  for m in $(cgroup_mounts); do
    [[ -d "$m/$CGROUP_NAME" ]] || continue
    find "$m/$CGROUP_NAME" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    if [[ -d "$m/$CGROUP_NAME" ]]; then log "WARNING: cgroup $m/$CGROUP_NAME not removed"; fi
  done
  # 9. sysctls and directories as they were before the node started
  if [[ -f "$RUN/state.env" ]]; then
    local k v
    while IFS='=' read -r k v; do
      case "$k" in
        sysctl.*) [[ "$(sysctl -n "${k#sysctl.}" 2>/dev/null)" == "$v" ]] || sysctl -q -w "${k#sysctl.}=$v" || true ;;
        made_dir) rmdir "$v" 2>/dev/null || true ;;
      esac
    done <"$RUN/state.env"
  fi
  # 10. the run directory; its logs are kept beside it (the last run's only) for a post-mortem
  if [[ -d "$RUN" ]]; then
    rm -rf "$RUN.logs" && mkdir -p "$RUN.logs"
    cp "$RUN"/*.log "$RUN/state.env" "$RUN.logs/" 2>/dev/null || true
    rm -rf "$RUN" 2>/dev/null || {
      sleep 1
      rm -rf "$RUN" || log "WARNING: $RUN not removed: $(grep -c " $RUN" /proc/self/mounts) mounts left"
    }
  fi
}

# what is left of a node on this machine (nothing, after cleanup): one line per thing, for tests
leftovers() {
  local m
  if [[ -e "$RUN" ]]; then echo "dir $RUN"; fi
  awk -v run="$RUN/" 'index($2 "/", run) == 1 {print "mount " $2}' /proc/self/mounts
  for m in $(cgroup_pids); do echo "process $m $(tr '\0' ' ' <"/proc/$m/cmdline" 2>/dev/null | cut -c1-80)"; done
  for m in $(cgroup_mounts); do if [[ -d "$m/$CGROUP_NAME" ]]; then echo "cgroup $m/$CGROUP_NAME"; fi; done
  ip link show "$BRIDGE" >/dev/null 2>&1 && echo "bridge $BRIDGE"
  ip -o link show type veth 2>/dev/null | grep -F "master $BRIDGE " | awk -F': ' '{print "veth " $2}'
  ip -o addr show 2>/dev/null | grep -F " ${NODE_IP}/" | awk '{print "address " $2 " " $4}'
  ip route show 2>/dev/null | grep -F "${POD_CIDR}" | sed 's/^/route /'
  for m in iptables ip6tables; do
    command -v "$m" >/dev/null || continue
    for t in filter nat mangle raw; do
      "$m" -w 5 -t "$t" -S 2>/dev/null | grep -E 'KUBE-|CNI-|TI-NODE-|'"${POD_CIDR%/*}" | sed "s/^/$m -t $t /"
    done
  done
  find /var/log/containers -maxdepth 1 -type l -lname "$RUN/*" 2>/dev/null | sed 's/^/log-link /'
  return 0
}
