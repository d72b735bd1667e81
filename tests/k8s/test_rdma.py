"""A plan's rdma on the control plane: every pod of the job asks for the RDMA device resource, so the
kube-scheduler puts it only where a (FAKE: KWOK) node advertises it, and says so where none does."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ti_hub.backends.k8s import KubernetesBackend

from .conftest import RDMA
from .test_backend import pods_of, spec, until

NS = "ti-rdma"


@pytest.fixture(scope="module")
async def backend(k8s_cluster, rdma_node):
    k8s_cluster.namespace(NS)
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="rdma-test",
                          install_pin_policy=True)
    yield b
    await b.close()


async def test_every_pod_of_an_rdma_job_gets_an_rdma_device(backend, k8s_cluster, rdma_node):
    sp = dataclasses.replace(spec(501, [rdma_node], strategy="allreduce", workers=3, device_type="H100"), rdma=True)
    state = await backend.launch(sp)
    obs = await until(lambda: backend.observe_job(501, state),
                      lambda o: [i.state for i in o.instances] == ["running"] * 3, "3 running pods")
    assert obs
    pods = pods_of(k8s_cluster, 501, NS)
    assert len(pods) == 3
    for p in pods:
        res = p["spec"]["containers"][0]["resources"]
        assert res["limits"][RDMA] == res["requests"][RDMA] == "1" and p["spec"]["nodeName"] == rdma_node
    await backend.stop(501, state, grace_seconds=1)


async def test_an_rdma_job_placed_where_no_rdma_is_waits_saying_why(backend, k8s_cluster):
    sp = dataclasses.replace(spec(502, ["a100-1"]), rdma=True)
    state = await backend.launch(sp)
    obs = await until(lambda: backend.observe_job(502, state),
                      lambda o: "place" in o.instances[0].reason, "the scheduler's refusal")
    assert obs.instances[0].state == "starting" and f"Insufficient {RDMA}" in obs.instances[0].reason, obs
    assert json.dumps(pods_of(k8s_cluster, 502, NS)[0]["spec"]["containers"][0]["resources"]).count(RDMA) == 2
    await backend.stop(502, state, grace_seconds=1)
