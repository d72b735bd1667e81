"""ADM3 on Kubernetes: cordoning a machine cordons its node (spec.unschedulable, what `kubectl cordon` does),
capacity reports it unschedulable, and uncordoning puts it back."""

from __future__ import annotations

import json

import pytest

from ti_hub.backends.k8s import KubernetesBackend

from .cluster import FakeNode
from .test_backend import until

NS = "ti-cordon"
NODE = "cordon-0"


@pytest.fixture(scope="module")
async def backend(k8s_cluster):
    # a node (and device type) of its own: the other tests' capacity stays as it is
    k8s_cluster.add_nodes([FakeNode(NODE, devices=2, device_type="L4")])
    k8s_cluster.namespace(NS)
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="cordon-test")
    yield b
    await b.close()


def unschedulable(k8s_cluster) -> bool:
    node = json.loads(k8s_cluster.kubectl("get", "node", NODE, "-o", "json").stdout)
    return bool(node["spec"].get("unschedulable"))


async def test_cordon_and_uncordon_a_node(backend, k8s_cluster):
    async def mine():
        return {n.name: n for n in await backend.capacity()}.get(NODE)

    assert (await until(mine, lambda n: n is not None and n.schedulable, "the node")).schedulable
    assert not unschedulable(k8s_cluster)
    await backend.set_schedulable(NODE, False)
    assert unschedulable(k8s_cluster)
    assert not (await until(mine, lambda n: not n.schedulable, "capacity to see the cordon")).schedulable
    await backend.set_schedulable(NODE, False)  # again: no change, no error
    await backend.set_schedulable(NODE, True)
    assert not unschedulable(k8s_cluster)
    assert (await until(mine, lambda n: n.schedulable, "capacity to see the uncordon")).schedulable
