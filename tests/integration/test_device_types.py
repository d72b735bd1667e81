"""RES4 at submission: a plan's device count follows its type's rules when work is submitted (rules may change
after the plan was made), and a distributed job of a whole-node type takes nodes x per_node devices."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from ti_hub.domain import scopes as S
from ti_hub.backends.base import NodeCapacity
from ti_hub.backends.k8s import KubernetesBackend
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, ValidationError
from ti_hub.domain.validation import join_device_rules
from ti_hub.ops import jobs, plans, workspaces

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
SPAWNER = Actor("ti-spawner", frozenset({S.ADMIT_WORKSPACES}), kind="service")
ALICE = Actor("alice", frozenset(S.USER_SCOPES))
NPU = {"ascend910": {"resource": "huawei.com/Ascend910", "node_selector": {"kubernetes.io/arch": "arm64"},
                     "counts": [0, 1, 2, 4, 8], "per_node": 8}}


@pytest.fixture
def npu(seeded, settings):
    """Rules as TiService joins them from a KubernetesBackend configured with an NPU type; two NPU nodes of 8."""
    backend = KubernetesBackend(device_types=NPU)
    settings.device_rules = join_device_rules(settings.device_rules, backend.device_count_rules)
    settings.devices_per_node = dict(backend.devices_per_node)
    settings.nodes = [*settings.nodes, *(NodeCapacity(f"npu-{i}", "default", {"ascend910": list(range(8))}, 192.0,
                                                      1 << 20) for i in range(2))]
    with seeded.begin() as s:
        for n in (4, 8):
            plans.create(s, ADMIN, {"name": f"npu-{n}", "kinds": ["workspace", "single", "distributed"],
                                    "device_type": "ascend910", "device_count": n, "cpu": 8, "memory_mib": 8192},
                         settings.device_rules)
        # made before the rule (no rules then): its count is now refused at submission
        plans.create(s, ADMIN, {"name": "npu-3", "kinds": ["workspace", "single", "distributed"],
                                "device_type": "ascend910", "device_count": 3, "cpu": 8, "memory_mib": 8192}, {})
    return seeded


def job(name: str, plan: str, **kw) -> dict:
    return {"name": name, "plan": plan, "image": "python-cpu", "command": "true", **kw}


def count_jobs(db) -> int:
    with db.begin() as s:
        return s.scalar(select(func.count()).select_from(m.Job))


def test_plans_of_the_backends_types_follow_its_counts(npu, settings):
    with npu.begin() as s, pytest.raises(ValidationError) as err:
        plans.create(s, ADMIN, {"name": "npu-6", "kinds": ["single"], "device_type": "ascend910", "device_count": 6,
                                "cpu": 1, "memory_mib": 1024}, settings.device_rules)
    assert err.value.field == "device_count" and "0, 1, 2, 4, 8" in err.value.detail


def test_a_count_the_rules_refuse_is_refused_at_submission_naming_the_plan(npu, settings):
    before = count_jobs(npu)
    with npu.begin() as s, pytest.raises(Conflict) as err:  # the plan and the cluster's rules decide: 409
        jobs.submit(s, ALICE, job("three", "npu-3"), settings)
    assert err.value.field == "plan" and "devices_per_instance" in err.value.detail
    assert "0, 1, 2, 4, 8" in err.value.detail
    with npu.begin() as s, pytest.raises(Conflict) as err:
        workspaces.start(s, SPAWNER, "alice", "desk", [], {"plan": "npu-3", "image": "python-cpu"}, settings,
                         scopes=S.USER_SCOPES)
    assert err.value.field == "plan"
    assert count_jobs(npu) == before
    with npu.begin() as s:
        assert jobs.submit(s, ALICE, job("four", "npu-4"), settings)["devices_per_instance"] == 4


def test_a_distributed_npu_job_takes_whole_nodes(npu, settings):
    before = count_jobs(npu)
    with npu.begin() as s, pytest.raises(Conflict) as err:
        jobs.submit(s, ALICE, job("half", "npu-4", kind="distributed", workers=2), settings)
    assert err.value.field == "plan" and "2 x 8 = 16" in err.value.detail
    assert count_jobs(npu) == before
    with npu.begin() as s:
        out = jobs.submit(s, ALICE, job("whole", "npu-8", kind="distributed", workers=2), settings)
    assert out["devices_per_instance"] == 8 and out["workers"] == 2  # 2 nodes x 8
