"""A real Kubernetes control plane on 127.0.0.1 for tests and benchmarks: etcd, kube-apiserver (client-cert
and token auth, RBAC, Pod Security admission), kube-controller-manager, kube-scheduler and the KWOK controller,
whose fake nodes carry real capacity (cpu, memory, ``nvidia.com/gpu``) and TiHub's device-type and pool labels.

Binaries come from ``tests/k8s/build.sh`` (built from Go modules, cached by version). Only the nodes are
fake: no container ever runs, so KWOK stages move pods through their phases (see ``stages/``).

    python -m tests.k8s.cluster up      # start one by hand; prints the kubeconfig path, Ctrl-C stops it
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .pki import make_pki

HERE = Path(__file__).resolve().parent
DEVICE_TYPE_LABEL = "ti-hub.io/device-type"
POOL_LABEL = "ti-hub.io/pool"
GPU = "nvidia.com/gpu"
# Pods in these namespaces "run" what is exec'd in them on this machine (kwok's ClusterExec, as nobody when
# the tests run as root), and their port FORWARDED_POD_PORT leads to 127.0.0.1:<LocalCluster.forward_port>
# (ClusterPortForward): the SSH gateway's Kubernetes path is tested end to end through the API server.
EXEC_NAMESPACES = ("ti-ssh-k8s",)
FORWARDED_POD_PORT = 47001


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def bin_dir() -> Path:
    """The cached binaries; builds them (minutes when cold) if a background build is not already running."""
    script = HERE / "build.sh"
    out = subprocess.run(["bash", str(script), "--print-bin"], capture_output=True, text=True)
    if out.returncode == 0:
        return Path(out.stdout.strip())
    status = subprocess.run(["bash", str(script), "--status"], capture_output=True, text=True)
    if status.returncode == 2:  # a background build (scripts/test starts one) is under way
        subprocess.run(["bash", str(script), "--wait", "3600"], check=True)
    else:
        subprocess.run(["bash", str(script)], check=True)
    out = subprocess.run(["bash", str(script), "--print-bin"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


@dataclass
class FakeNode:
    name: str
    devices: int = 0
    device_type: str = ""
    pool: str = "default"
    cpu: str = "32"
    memory: str = "256Gi"
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    extended: dict[str, str] = field(default_factory=dict)  # more extended resources (e.g. an RDMA device)

    def manifest(self) -> dict:
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "type": "kwok", POOL_LABEL: self.pool, **self.labels}
        alloc = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods), **self.extended}
        taints = []
        if self.devices:
            labels[DEVICE_TYPE_LABEL] = self.device_type
            alloc[GPU] = str(self.devices)
            # as GPU clusters usually do: only pods that ask for devices (and so tolerate this) land here
            taints.append({"key": GPU, "value": "present", "effect": "NoSchedule"})
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": labels,
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": taints},
            "status": {"allocatable": alloc, "capacity": alloc, "phase": "Running"},
        }


class LocalCluster:
    """Start with ``start()``, stop with ``stop()``; ``kubeconfig`` is an admin's."""

    def __init__(self, workdir: Path | None = None, bin_path: Path | None = None, api_qps: int = 500,
                 terminated_pod_gc_threshold: int = 12500, exec_namespaces: tuple[str, ...] = EXEC_NAMESPACES,
                 kwok_docs: list[dict] | None = None):
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="ti-hub-k8s-"))
        self.bin = bin_path
        self.api_qps = api_qps
        # Kubernetes' default: past this many ended pods, the oldest are deleted (benchmarks keep them all)
        self.terminated_pod_gc_threshold = terminated_pod_gc_threshold
        self.procs: dict[str, subprocess.Popen] = {}
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.server = ""
        self.forward_port = _port()  # where FORWARDED_POD_PORT of pods in exec_namespaces leads
        self.exec_namespaces = tuple(exec_namespaces)
        # more KWOK configuration (kubeletfake.py's Metric resources; they make KWOK cache every pod: off for benchmarks)
        self.kwok_docs = list(kwok_docs or ())
        # a token for a user with no rights of its own (RBAC tests grant it roles)
        self.user_token = secrets.token_hex(16)

    # -- processes -------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def _check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                tail = (self.dir / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {p.returncode}:\n{tail}")

    def _wait(self, what: str, ok, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if ok():
                return
            time.sleep(0.2)
        raise TimeoutError(f"the test cluster's {what} was not ready after {timeout:.0f}s (logs in {self.dir})")

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        out = subprocess.run([str(self.bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                             capture_output=True, text=True, input=input)
        if check and out.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
        return out

    def apply(self, objects: list[dict]) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))

    def start(self) -> LocalCluster:
        self.bin = self.bin or bin_dir()
        pki = make_pki(self.dir / "pki")
        etcd_port, peer_port, api_port = _port(), _port(), _port()
        kwok_port, cm_port, sched_port = _port(), _port(), _port()
        self.server = f"https://127.0.0.1:{api_port}"
        (self.dir / "tokens.csv").write_text(f"{self.user_token},ti-test-user,ti-test-user-uid\n")
        self._write_kubeconfig(pki)

        self._spawn("etcd", [
            str(self.bin / "etcd"), "--name", "default", "--data-dir", str(self.dir / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--quota-backend-bytes", str(4 << 30), "--log-level", "warn"])
        self._spawn("kube-apiserver", [
            str(self.bin / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--tls-cert-file={pki['apiserver.crt']}", f"--tls-private-key-file={pki['apiserver.key']}",
            f"--client-ca-file={pki['ca.crt']}", f"--token-auth-file={self.dir / 'tokens.csv'}",
            f"--service-account-key-file={pki['sa.pub']}", f"--service-account-signing-key-file={pki['sa.key']}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=Node,RBAC",
            # as real clusters run it (kubeadm, managed ones): privileged pods pass validation, so that where
            # they are refused, Pod Security admission is what refuses them (tests/k8s/test_isolation.py)
            "--allow-privileged=true",
            f"--kubelet-client-certificate={pki['admin.crt']}", f"--kubelet-client-key={pki['admin.key']}",
            # a real node (node/start.sh) is reached at its address, never by a DNS lookup of its name (KWOK's
            # nodes have only an InternalIP anyway)
            "--kubelet-preferred-address-types=InternalIP",
            # APF's per-client fairness would throttle a benchmark's single client; nothing else shares it here
            "--enable-priority-and-fairness=false", "--max-requests-inflight=2000",
            "--max-mutating-requests-inflight=1000", "--profiling=false", "--event-ttl=10m", "--v=1"])
        self._wait("etcd and API server", lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0)
        common = [f"--kubeconfig={self.kubeconfig}", "--leader-elect=false", "--bind-address=127.0.0.1",
                  f"--kube-api-qps={self.api_qps}", f"--kube-api-burst={self.api_qps * 2}"]
        self._spawn("kube-controller-manager", [
            str(self.bin / "kube-controller-manager"), *common, f"--secure-port={cm_port}",
            f"--service-account-private-key-file={pki['sa.key']}", f"--root-ca-file={pki['ca.crt']}",
            "--use-service-account-credentials=false", "--controllers=*,-csrsigning,-csrapproving,-nodeipam",
            "--concurrent-job-syncs=50", "--concurrent-gc-syncs=50",
            f"--terminated-pod-gc-threshold={self.terminated_pod_gc_threshold}", "--v=1"])
        self._spawn("kube-scheduler", [str(self.bin / "kube-scheduler"), *common, f"--secure-port={sched_port}",
                                       "--v=1"])
        # what every fake container "printed", in the CRI log format the kubelet API serves
        (self.dir / "logs.txt").write_text("".join(f"2026-01-01T00:00:0{i}.000000000Z stdout F {line}\n" for i, line in
                                                   enumerate(("kwok fake container: started",
                                                              "kwok fake container: working"))))
        self._write_kwok_config()
        self._spawn("kwok", [
            str(self.bin / "kwok"), f"--kubeconfig={self.kubeconfig}", f"--config={self.dir / 'kwok.yaml'}",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--node-ip=127.0.0.1",
            f"--node-port={kwok_port}", f"--server-address=127.0.0.1:{kwok_port}",
            f"--tls-cert-file={pki['apiserver.crt']}", f"--tls-private-key-file={pki['apiserver.key']}",
            "--cidr=10.244.0.0/16", "--node-lease-duration-seconds=40", "--v=WARN"])

        def default_sa() -> bool:
            return self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0
        self._wait("service-account controller", default_sa)
        return self

    def _write_kubeconfig(self, pki: dict[str, Path]) -> None:
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "ti-test",
            "clusters": [{"name": "ti-test", "cluster": {"server": self.server,
                                                         "certificate-authority": str(pki["ca.crt"])}}],
            "users": [{"name": "admin", "user": {"client-certificate": str(pki["admin.crt"]),
                                                 "client-key": str(pki["admin.key"])}}],
            "contexts": [{"name": "ti-test", "context": {"cluster": "ti-test", "user": "admin"}}],
        }
        self.kubeconfig.write_text(json.dumps(cfg))
        self.kubeconfig.chmod(0o600)

    def user_kubeconfig(self, token: str, name: str = "user.kubeconfig") -> Path:
        cfg = json.loads(self.kubeconfig.read_text())
        cfg["users"] = [{"name": "admin", "user": {"token": token}}]
        p = self.dir / name
        p.write_text(json.dumps(cfg))
        p.chmod(0o600)
        return p

    def _write_kwok_config(self) -> None:
        # a pod's user is never root: as root, kwok runs exec'd commands as nobody (it cannot switch otherwise)
        nobody = {"securityContext": {"runAsUser": 65534, "runAsGroup": 65534}} if os.geteuid() == 0 else {}
        docs = [json.dumps({"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
                            "options": {"podPlayStageParallelism": 16, "nodePlayStageParallelism": 8,
                                        "nodeLeaseParallelism": 4, "enableDebuggingHandlers": True}}),
                json.dumps({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
                            "metadata": {"name": "ti-test-logs"},
                            "spec": {"logs": [{"logsFile": str(self.dir / "logs.txt"), "follow": False}]}}),
                json.dumps({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterExec",
                            "metadata": {"name": "ti-test-exec"},
                            "spec": {"selector": {"matchNamespaces": list(self.exec_namespaces)},
                                     "execs": [{"local": {"workDir": "/tmp", **nobody}}]}}),
                json.dumps({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterPortForward",
                            "metadata": {"name": "ti-test-forward"},
                            "spec": {"selector": {"matchNamespaces": list(self.exec_namespaces)},
                                     "forwards": [{"ports": [FORWARDED_POD_PORT],
                                                   "target": {"address": "127.0.0.1", "port": self.forward_port}}]}})]
        for f in sorted((self.bin / "kwok-stages").glob("*.yaml")) + sorted((HERE / "stages").glob("*.yaml")):
            text = f.read_text()
            if f.name == "pod-ready.yaml":  # a pod told to wait (stages/ti-pod-waiting.yaml) never gets ready
                assert "    matchExpressions:\n" in text, "KWOK's pod-ready stage changed shape"
                text = text.replace("    matchExpressions:\n", "    matchExpressions:\n"
                                    "    - key: '.spec.containers.[0].env.[] | "
                                    "select( .name == \"TI_FAKE_WAITING_REASON\" ) | .value'\n"
                                    "      operator: 'DoesNotExist'\n", 1)
            docs.append(text)
        docs += [json.dumps(d) for d in self.kwok_docs]
        (self.dir / "kwok.yaml").write_text("\n---\n".join(docs))

    # -- nodes and namespaces --------------------------------------------------------------------------------
    def add_nodes(self, nodes: list[FakeNode], timeout: float = 120.0) -> None:
        for i in range(0, len(nodes), 200):
            self.apply([n.manifest() for n in nodes[i:i + 200]])
        names = {n.name for n in nodes}

        def ready() -> bool:
            out = self.kubectl("get", "nodes", "-o", "json", check=False)
            if out.returncode:
                return False
            ok = {n["metadata"]["name"] for n in json.loads(out.stdout)["items"]
                  if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))}
            return names <= ok
        self._wait(f"{len(nodes)} fake node(s)", ready, timeout)

    def remove_nodes(self, names: list[str]) -> None:
        if names:
            self.kubectl("delete", "node", "--wait=false", *names, check=False)

    def namespace(self, name: str, restricted: bool = True) -> str:
        """A fresh namespace; ``restricted`` makes Pod Security admission enforce the restricted profile, with the
        labels the Helm chart gives the user namespace."""
        from ti_hub.backends.k8s.objects import POD_SECURITY_LABELS

        labels = dict(POD_SECURITY_LABELS) if restricted else {}
        self.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}])
        self._wait(f"namespace {name}", lambda: self.kubectl("get", "serviceaccount", "default", "-n", name,
                                                             check=False).returncode == 0)
        return name

    def stop(self) -> None:
        # one at a time, last started first: an API server whose etcd is already gone never ends its graceful
        # shutdown (SIGKILL after 10 s), and etcd takes seconds to end while the API server still holds it
        # (all at once took 17 s; in turn, 1.5 s)
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()


def main() -> None:
    if sys.argv[1:2] != ["up"]:
        print(__doc__)
        sys.exit(2)
    c = LocalCluster().start()
    c.add_nodes([FakeNode(f"gpu-{i}", devices=8, device_type="A100") for i in range(4)]
                + [FakeNode("cpu-0")])
    print(f"export KUBECONFIG={c.kubeconfig}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        c.stop()
        shutil.rmtree(c.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
