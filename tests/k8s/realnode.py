"""A REAL node beside the test control plane: the kubelet and kube-proxy (built by build-node.sh), Debian's containerd
and runc, CNI bridge/host-local/portmap on a bridge and pod range of this machine alone (node/start.sh, node/stop.sh;
node/lib.sh lists everything it makes). Containers really run here, unlike on KWOK's fake nodes.

``RealNode(cluster).start()`` registers one node to a ``LocalCluster``; ``stop()`` removes it all. One node at a time
per machine: a start while another test session's node is up waits for it (start.sh exits 3 meanwhile).

The node's test images (node/images.sh: busybox and pause, OCI layouts built from Debian's binaries with umoci,
cached by the hash of their inputs) are pushed to a registry with ``push_layout``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NODE = HERE / "node"
# what the kubelet and the bridge plugin change while a node runs (node/lib.sh puts them back on stop)
NODE_SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
                "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward")
IN_USE = 3  # start.sh: another live process's node is up


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def node_bin_dir() -> Path:
    """kubelet and kube-proxy, built (minutes when cold) unless cached; waits for a background build."""
    script = str(HERE / "build-node.sh")
    status = _run(["bash", script, "--status"], 60)
    if status.returncode == 2:  # scripts/test starts one in the background
        subprocess.run(["bash", script, "--wait", "3600"], check=True, stdout=subprocess.DEVNULL)
    elif status.returncode:
        subprocess.run(["bash", script], check=True, stdout=subprocess.DEVNULL)
    return Path(_run(["bash", script, "--print-bin"], 60).stdout.strip())


def node_images() -> Path:
    """The cache dir of node/images.sh: ``busybox/`` and ``pause/`` OCI layouts, ``tags.env``."""
    out = subprocess.run(["bash", str(NODE / "images.sh")], capture_output=True, text=True, check=True, timeout=900)
    return Path(out.stdout.strip().splitlines()[-1])


def image_tags(images: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (images / "tags.env").read_text().split())


def sysctls() -> dict[str, str]:
    return {k: _run(["sysctl", "-n", k], 10).stdout.strip() for k in NODE_SYSCTLS}


@dataclass
class RealNode:
    cluster: object  # a started LocalCluster (its pki dir and server)
    name: str = "ti-real-node"
    info: dict[str, str] = field(default_factory=dict)  # NAME, NODE_IP, RUN, POD_CIDR (start.sh's last lines)
    up: bool = False
    sysctls_before: dict[str, str] = field(default_factory=dict)  # as they were before the session's first start

    @property
    def ip(self) -> str:
        return self.info["NODE_IP"]

    @property
    def run_dir(self) -> Path:
        return Path(self.info["RUN"])

    def start(self, wait_for_other: float = 900.0) -> RealNode:
        node_bin_dir()
        argv = ["bash", str(NODE / "start.sh"), "--server", self.cluster.server,
                "--pki", str(self.cluster.dir / "pki"), "--name", self.name, "--owner", str(os.getpid())]
        deadline = time.monotonic() + wait_for_other
        while True:
            out = _run(argv, 900)
            if out.returncode != IN_USE or time.monotonic() > deadline:
                break
            time.sleep(5)  # another session's node: this machine has room for one
        if out.returncode:
            if out.returncode != IN_USE:  # a half-started node goes at once (its logs stay in <run dir>.logs)
                self.stop()
            raise RuntimeError(f"node/start.sh failed ({out.returncode}):\n{out.stderr[-4000:]}")
        self.info = dict(line.split("=", 1) for line in out.stdout.split() if "=" in line)
        self.up = True
        return self

    def stop(self, check: bool = False) -> str:
        """Stops the node and removes what it made; with ``check``, raises listing anything left behind."""
        out = _run(["bash", str(NODE / "stop.sh"), *(["--check"] if check else [])], 300)
        self.up = False
        if out.returncode:
            raise RuntimeError(f"node/stop.sh failed ({out.returncode}):\n{out.stderr[-4000:]}")
        return out.stderr

    def leftovers(self) -> list[str]:
        """What a node made that is still on this machine (node/lib.sh ``leftovers``)."""
        out = _run(["bash", "-c", f"source {NODE / 'lib.sh'} && leftovers"], 60)
        return [line for line in out.stdout.splitlines() if line.strip()]

    def pids(self) -> dict[str, int]:
        """The daemons' pids (containerd, kubelet, kube-proxy)."""
        return {n: int((self.run_dir / f"{n}.pid").read_text()) for n in ("containerd", "kubelet", "kube-proxy")}

    def pod_processes(self) -> list[int]:
        """Processes in the kubelet's pod cgroups (containers and their pause processes)."""
        root = Path("/sys/fs/cgroup/pids/ti-hub-node/kubepods")
        return sorted({int(p) for f in root.rglob("cgroup.procs") for p in f.read_text().split()}) \
            if root.is_dir() else []


# ---- images into a registry ---------------------------------------------------------------------------------------
def push_layout(reg, layout: Path, tag: str, name: str, login: tuple[str, str] | None) -> str:
    """Pushes the image ``tag`` of an OCI layout to ``reg`` (tests/registrykit.Registry) as ``name:tag``, through
    the registry's HTTP API; returns its address."""
    import requests
    from registrykit import upload_blob

    index = json.loads((layout / "index.json").read_text())
    desc = next(m for m in index["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
    blob = lambda digest: (layout / "blobs" / Path(*digest.split(":", 1))).read_bytes()  # noqa: E731
    manifest = blob(desc["digest"])
    auth = reg.push_headers(name, login)
    doc = json.loads(manifest)
    for d in [doc["config"], *doc["layers"]]:
        upload_blob(reg, name, blob(d["digest"]), auth)
    r = requests.put(f"{reg.url}/v2/{name}/manifests/{tag}", data=manifest, timeout=30,
                     headers={**auth, "Content-Type": desc["mediaType"]})
    r.raise_for_status()
    return f"{reg.host}/{name}:{tag}"


def pull_secret(host: str, user: str, password: str, name: str, namespace: str) -> dict:
    """A kubernetes.io/dockerconfigjson Secret with one login for ``host``."""
    import base64

    login = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = json.dumps({"auths": {host: {"username": user, "password": password, "auth": login}}})
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()}}


# ---- fixtures (conftest.py imports them) ----------------------------------------------------------------------------
@dataclass
class NodeRegistry:
    registry: object  # registrykit.Registry, htpasswd logins
    busybox: str  # the busybox image's address in it
    user: str
    password: str


def _needs_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("a real node needs root (containers, cgroups, network)")
        pytest.skip("a real node needs root (containers, cgroups, network)")


@pytest.fixture(scope="session")
def real_node_session(tmp_path_factory):
    """The control plane (its own, without KWOK's fake nodes) and one real node, once per session; stopped at its
    end, failing the session's teardown if the node's stop leaves anything behind."""
    _needs_root()
    from .cluster import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("k8s-real"))
    node = RealNode(cluster)
    node.sysctls_before = sysctls()
    try:
        cluster.start()
        node.start()
        yield node
    finally:
        try:
            if node.up:
                node.stop(check=True)
        finally:
            cluster.stop()


@pytest.fixture
def real_node(real_node_session):
    """The session's real node, started again if a test stopped it."""
    if not real_node_session.up:
        real_node_session.start()
    return real_node_session


@pytest.fixture(scope="session")
def node_registry(tmp_path_factory):
    """Debian's docker-registry on 127.0.0.1 with an htpasswd login, holding node/images.sh's busybox image."""
    import secrets

    import registrykit

    if not registrykit.available() and not os.environ.get("CI"):
        pytest.skip("needs Debian's docker-registry (scripts/test installs it)")
    user, password = "puller", secrets.token_hex(12)
    reg = registrykit.Registry(tmp_path_factory.mktemp("node-registry"), users={user: password}).start()
    try:
        images = node_images()
        address = push_layout(reg, images / "busybox", image_tags(images)["BUSYBOX_TAG"], "tests/busybox",
                              (user, password))
        yield NodeRegistry(reg, address, user, password)
    finally:
        reg.stop()
