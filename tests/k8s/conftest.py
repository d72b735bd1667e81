"""The Kubernetes test control plane, started once per test session (see cluster.py), or any existing
cluster named by ``TI_TEST_KUBECONFIG`` (kind, k3d, a real one: its nodes must carry TiHub's labels)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from . import kubeletfake
from .cluster import FakeNode, LocalCluster, bin_dir

BASE_NODES = ([FakeNode(f"a100-{i}", devices=8, device_type="A100") for i in range(4)]
              + [FakeNode(f"t4-{i}", devices=4, device_type="T4", cpu="16", memory="64Gi") for i in range(2)]
              + [FakeNode("cpu-0", cpu="16", memory="64Gi")])


class ExistingCluster:
    """The same interface as LocalCluster for a cluster someone else runs."""

    def __init__(self, kubeconfig: str):
        self.kubeconfig = Path(kubeconfig)
        self.kubectl_bin = shutil.which("kubectl") or str(bin_dir() / "kubectl")

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        out = subprocess.run([self.kubectl_bin, "--kubeconfig", str(self.kubeconfig), *args],
                             capture_output=True, text=True, input=input)
        if check and out.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
        return out

    def namespace(self, name: str, restricted: bool = True) -> str:
        from ti_hub.backends.k8s.objects import POD_SECURITY_LABELS

        self.kubectl("create", "namespace", name)
        if restricted:
            self.kubectl("label", "namespace", name, *(f"{k}={v}" for k, v in POD_SECURITY_LABELS.items()))
        return name

    def add_nodes(self, nodes) -> None:
        pytest.skip("this test adds fake nodes, which only the local test cluster has")

    def stop(self) -> None:
        pass


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.k8s)
            if "real_node" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.realnode)


@pytest.fixture(scope="session")
def k8s_cluster(tmp_path_factory):
    if os.environ.get("TI_TEST_KUBECONFIG"):
        yield ExistingCluster(os.environ["TI_TEST_KUBECONFIG"])
        return
    c = LocalCluster(tmp_path_factory.mktemp("k8s"), kwok_docs=kubeletfake.kwok_docs())
    try:
        c.start()
        c.add_nodes(BASE_NODES)
        yield c
    finally:
        c.stop()


RDMA = "rdma/hca_shared_devices_a"


@pytest.fixture(scope="session")
def rdma_node(k8s_cluster):
    """A node whose (FAKE) RDMA shared device plugin advertises the resource, with a device type of its own so
    that no other test's capacity changes."""
    k8s_cluster.add_nodes([FakeNode("h100-ib-0", devices=8, device_type="H100", extended={RDMA: "100"})])
    return "h100-ib-0"


@pytest.fixture(scope="session")
def fake_provisioner(k8s_cluster):
    """A FAKE CSI provisioner/resizer (tests/k8s/provisioner.py) for StorageClasses whose provisioner is
    ``fake.csi.ti-hub.test``: the test cluster's fake nodes cannot run a real CSI driver."""
    from .provisioner import FakeProvisioner

    p = FakeProvisioner(str(k8s_cluster.kubeconfig)).start()
    try:
        yield p
    finally:
        p.stop()


# helm, the chart (alone and with z2jh) and throw-away namespaces, for test_helm_chart.py and test_isolation.py
from .helmkit import full_chart, helm, namespaces, own_chart  # noqa: E402, F401
# a real node (kubelet, containerd) beside its own control plane, and a registry with its test image (realnode.py)
from .realnode import node_registry, real_node, real_node_session  # noqa: E402, F401
