#!/usr/bin/env bash
# Start a REAL Kubernetes node on this machine, registered to a test API server (tests/k8s/cluster.py):
# Debian's containerd + runc (own root, state and socket under the run dir, never the system's), the CNI plugins
# bridge + host-local + portmap (+ loopback, which containerd adds itself) on a bridge and pod range of our own,
# the kubelet (cgroupfs driver, failCgroupV1: false: this VM has cgroup v1) and kube-proxy (iptables mode), with
# client certificates signed by the test control plane's CA. Pods get no default route: nothing is routed off
# the machine, and a rule of ours drops anything forwarded between the bridge and any other interface.
#
# Usage:
#   tests/k8s/node/start.sh --server https://127.0.0.1:PORT --pki DIR [--name NAME] [--owner PID] [--timeout S]
#     DIR: the control plane's pki dir (ca.crt, ca.key, admin.crt, admin.key; tests/k8s/pki.py writes them)
#     --owner: the process the node belongs to (default: the caller); while it lives, another start refuses
#       (exit 3); once it is gone, the next start removes the old node first (as after a crash)
#   tests/k8s/node/stop.sh   removes it all again (see lib.sh for the list)
#
# Prints NAME=, NODE_IP=, RUN= lines on stdout once the node is Ready. Needs root. Installs containerd, runc and
# containernetworking-plugins with apt when missing; builds kubelet and kube-proxy (../build-node.sh) and the
# images (images.sh) when not cached.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

SERVER="" PKI="" NAME="ti-real-node" OWNER="$PPID" TIMEOUT=120
while (($#)); do
  case "$1" in
    --server) SERVER="$2"; shift 2 ;;
    --pki) PKI="$(cd "$2" && pwd)"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    --owner) OWNER="$2"; shift 2 ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ -n "$SERVER" && -n "$PKI" ]] || die "--server and --pki are required (see --help)"
for f in ca.crt ca.key admin.crt admin.key; do [[ -f "$PKI/$f" ]] || die "no $PKI/$f"; done
[[ "$(id -u)" == 0 ]] || die "a real node needs root (containers, cgroups, network)"
T0=$(date +%s)

# ---- what the node runs: Debian's packages, our builds ---------------------------------------------------------
need=()
command -v containerd >/dev/null && command -v ctr >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/portmap && -x /usr/lib/cni/loopback ]] ||
  need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v openssl >/dev/null || need+=(openssl)
if ((${#need[@]})); then
  log "installing ${need[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
fi
NODE_BIN="$(bash "$HERE/../build-node.sh")" || die "building kubelet and kube-proxy failed"
NODE_BIN="$(tail -n 1 <<<"$NODE_BIN")"
KUBECTL="$(bash "$HERE/../build.sh" --print-bin)/kubectl" || die "the control plane is not built (tests/k8s/build.sh)"
IMAGES="$(bash "$HERE/images.sh")" || die "building the node's images failed"
# shellcheck source=/dev/null
source "$IMAGES/tags.env"
PAUSE_IMAGE="ti-hub.test/pause:$PAUSE_TAG"

# ---- one node at a time on this machine: its bridge, range and iptables chains are fixed ----------------------
mkdir -p "$(dirname "$RUN")"
exec 8>"$LOCK"
flock -w 300 8 || die "another start or stop of the node holds $LOCK"
if [[ -f "$RUN/state.env" ]]; then
  old="$(sed -n 's/^owner=//p' "$RUN/state.env")"
  if [[ -n "$old" && "$old" != "$OWNER" ]] && alive "$old"; then
    log "a node of process $old (still running: $(tr '\0' ' ' <"/proc/$old/cmdline" | cut -c1-100)) is up"
    exit 3
  fi
fi
log "removing what an earlier node left, if anything"
cleanup

# ---- the run directory, and what to put back on stop --------------------------------------------------------------
mkdir -p "$RUN"/{pki,containerd/certs.d,cni/net.d,cni/ipam,kubelet,pod-logs}
{
  echo "owner=$OWNER"
  echo "name=$NAME"
  for k in "${SYSCTLS[@]}"; do echo "sysctl.$k=$(sysctl -n "$k")"; done
  [[ -d /var/log/containers ]] || echo "made_dir=/var/log/containers"
  [[ -d "$SHIM_SOCKETS" ]] || echo "made_dir=$SHIM_SOCKETS"
  [[ -d /run/containerd ]] || echo "made_dir=/run/containerd"
} >"$RUN/state.env"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ---- certificates from the test CA ---------------------------------------------------------------------------------
# cert NAME CN ORG [SANS]: $RUN/pki/NAME.{crt,key}, EC P-256, two days, signed by the control plane's CA
cert() {
  local n="$RUN/pki/$1" ext="extendedKeyUsage=clientAuth"
  [[ -n "${4:-}" ]] && ext="extendedKeyUsage=serverAuth,clientAuth"$'\n'"subjectAltName=$4"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$n.key" \
    -subj "/O=$3/CN=$2" -out "$n.csr" 2>/dev/null
  openssl x509 -req -in "$n.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -CAserial "$RUN/pki/ca.srl" \
    -days 2 -out "$n.crt" -extfile <(printf '%s\n' "$ext") 2>/dev/null
  rm -f "$n.csr"
  chmod 600 "$n.key"
}
cert kubelet "system:node:$NAME" system:nodes              # the Node authorizer's identity for this node
cert kubelet-serving "$NAME" system:nodes "IP:$NODE_IP,IP:127.0.0.1,DNS:$NAME"
cert kube-proxy system:kube-proxy system:node-proxier       # bound to system:node-proxier by the bootstrap policy
cp "$PKI/ca.crt" "$RUN/pki/ca.crt"

# kubeconfig FILE CERT: a kubeconfig for $SERVER with the client certificate CERT
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "$SERVER", certificate-authority: "$RUN/pki/ca.crt"}}]
users: [{name: u, user: {client-certificate: "$2.crt", client-key: "$2.key"}}]
contexts: [{name: test, context: {cluster: test, user: u}}]
current-context: test
EOF
  chmod 600 "$1"
}
kubeconfig "$RUN/kubelet.kubeconfig" "$RUN/pki/kubelet"
kubeconfig "$RUN/kube-proxy.kubeconfig" "$RUN/pki/kube-proxy"
kubeconfig "$RUN/admin.kubeconfig" "$PKI/admin"

# ---- cgroups: /$CGROUP_NAME in every hierarchy; the daemons (and their shims) in daemons/ ----------------------
for m in $(cgroup_mounts); do
  for d in "$m/$CGROUP_NAME" "$m/$CGROUP_NAME/daemons"; do
    mkdir -p "$d"
    # a new cpuset has no cpus and no memory nodes: give it its parent's
    if [[ -f "$d/cpuset.cpus" && -z "$(cat "$d/cpuset.cpus")" ]]; then
      cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"
    fi
  done
done

# spawn NAME ARGV...: start a daemon detached, in cgroup daemons/, logging to $RUN/NAME.log
spawn() {
  local name="$1"
  shift
  command -v "$1" >/dev/null || die "no $1"
  readlink -f "$(command -v "$1")" >"$RUN/$name.exe"
  (
    for m in $(cgroup_mounts); do echo "$BASHPID" >"$m/$CGROUP_NAME/daemons/cgroup.procs"; done
    exec 8>&-  # the lock stays with this script, not with the daemons
    exec setsid "$@" >>"$RUN/$name.log" 2>&1 </dev/null
  ) &
  echo "$!" >"$RUN/$name.pid"
}

# wait_for WHAT COMMAND...: until COMMAND succeeds ($TIMEOUT s), while the daemons live
wait_for() {
  local what="$1" deadline=$(( $(date +%s) + TIMEOUT )) d
  shift
  until "$@" >/dev/null 2>&1; do
    for d in containerd kubelet kube-proxy; do
      if [[ -f "$RUN/$d.pid" ]] && ! pid_of "$d" >/dev/null; then
        tail -n 40 "$RUN/$d.log" >&2 || true
        die "$d exited while waiting for $what (log: $RUN/$d.log)"
      fi
    done
    (( $(date +%s) < deadline )) || die "$what not ready after ${TIMEOUT}s (logs in $RUN)"
    sleep 0.5
  done
}

# ---- the pod network: our bridge (its address is the node's), forwarding between it and elsewhere dropped ------
ip link add "$BRIDGE" type bridge
ip addr add "$NODE_IP/$POD_PREFIX" dev "$BRIDGE"
ip link set "$BRIDGE" up
# the service range leads into the bridge too (kube-proxy's DNAT picks the pod): from the host as from pods, an
# address without a service goes nowhere, never out through the default route
ip route add "$SERVICE_CIDR" dev "$BRIDGE" src "$NODE_IP"
# in mangle, which every forwarded packet passes before filter, where kube-proxy puts its ACCEPT rules first
ipt=(iptables -w 5 -t mangle)
"${ipt[@]}" -N TI-NODE-FORWARD
"${ipt[@]}" -A TI-NODE-FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP \
  -m comment --comment "ti-hub node: pods reach no other network"
"${ipt[@]}" -A TI-NODE-FORWARD -o "$BRIDGE" ! -i "$BRIDGE" -j DROP \
  -m comment --comment "ti-hub node: no other network reaches pods"
"${ipt[@]}" -I FORWARD 1 -j TI-NODE-FORWARD
# no default route in pods: only the pod range (on the bridge) and the service range (through the node) are routed
cat >"$RUN/cni/net.d/10-ti-hub-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "ti-hub-node",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "isDefaultGateway": false, "ipMasq": false,
     "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$RUN/cni/ipam",
              "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "$SERVICE_CIDR"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

# ---- containerd: everything under $RUN ------------------------------------------------------------------------------
# Without CAP_SYS_RESOURCE (this VM's root lacks it: CapBnd 000001fffeffffff) no process may lower an
# oom_score_adj, and runc fails every pod sandbox (the kubelet asks -998) with "failed to update
# /proc/self/oom_score_adj: Permission denied": containerd then keeps pods' scores at or above its own (0), and the
# kubelet and kube-proxy stay at 0 instead of -999.
RESTRICT_OOM=false OOM_ADJ=-999
if ! (( (0x$(awk '/^CapEff/ {print $2}' /proc/self/status) >> 24) & 1 )); then
  RESTRICT_OOM=true OOM_ADJ=0
  log "no CAP_SYS_RESOURCE here: containerd's restrict_oom_score_adj on, kubelet and kube-proxy at oom_score_adj 0"
fi
cat >"$RUN/containerd/config.toml" <<EOF
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  restrict_oom_score_adj = $RESTRICT_OOM
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "${TIHUB_NODE_RUNC:-$(command -v runc)}"
        Root = "$RUN/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$RUN/containerd/certs.d"
EOF
log "starting containerd ($(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1 {print $3}'))"
spawn containerd containerd --config "$RUN/containerd/config.toml"
wait_for "containerd" ctr --address "$SOCK" version
# the sandbox image is imported, never pulled
ctr --address "$SOCK" -n k8s.io images import --base-name ti-hub.test/pause "$IMAGES/pause.tar" >/dev/null
ctr --address "$SOCK" -n k8s.io images ls -q | grep -qx "$PAUSE_IMAGE" || die "$PAUSE_IMAGE not imported"

# ---- the kubelet -----------------------------------------------------------------------------------------------------
KUBELET_PORT="$(free_port)" HEALTHZ_PORT="$(free_port)"
cat >"$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# this VM has cgroup v1 only, which the kubelet refuses unless told (and there is no systemd to drive cgroups)
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_NAME
containerRuntimeEndpoint: unix://$SOCK
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $HEALTHZ_PORT
tlsCertFile: $RUN/pki/kubelet-serving.crt
tlsPrivateKeyFile: $RUN/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $RUN/pki/ca.crt}
authorization: {mode: Webhook}
podLogsDir: $RUN/pod-logs
volumePluginDir: $RUN/kubelet/volume-plugins
staticPodPath: ""
serializeImagePulls: false
# a shared test machine: neither its disk nor its memory use may evict or garbage-collect the tests' pods
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
makeIPTablesUtilChains: false
oomScoreAdj: $OOM_ADJ
clusterDomain: cluster.local
nodeStatusReportFrequency: 10s
EOF
log "starting the kubelet as node $NAME at $NODE_IP:$KUBELET_PORT"
spawn kubelet "$NODE_BIN/kubelet" --config="$RUN/kubelet.yaml" --kubeconfig="$RUN/kubelet.kubeconfig" \
  --root-dir="$RUN/kubelet" --hostname-override="$NAME" --node-ip="$NODE_IP" \
  --node-labels="ti-hub.io/real-node=true" --v=1
wait_for "the kubelet's healthz" curl -fsS "http://127.0.0.1:$HEALTHZ_PORT/healthz"

# ---- kube-proxy (iptables); it leaves the host's conntrack sysctls and route_localnet alone ------------------------
cat >"$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $RUN/kube-proxy.kubeconfig}
hostnameOverride: $NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false, masqueradeAll: false}
oomScoreAdj: $OOM_ADJ
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
log "starting kube-proxy (iptables)"
spawn kube-proxy "$NODE_BIN/kube-proxy" --config="$RUN/kube-proxy.yaml" --v=1

node_ready() {
  [[ "$("$KUBECTL" --kubeconfig "$RUN/admin.kubeconfig" get node "$NAME" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}
wait_for "node $NAME Ready" node_ready
log "node $NAME Ready in $(( $(date +%s) - T0 ))s (run dir $RUN)"
printf 'NAME=%s\nNODE_IP=%s\nRUN=%s\nPOD_CIDR=%s\n' "$NAME" "$NODE_IP" "$RUN" "$POD_CIDR"
