"""Table-driven tests of the pure helpers every backend shares: instance environments and outcomes."""

import json

import pytest

from ti_hub.backends.base import InstanceStatus, JobObservation
from ti_hub.backends.envs import instance_envs, instance_roles
from ti_hub.backends.outcome import exit_reason, instance_name, job_outcome

# ---- environments ------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy,workers", [(None, 1), ("allreduce", 1), ("allreduce", 3)])
def test_torchrun_env(strategy, workers):
    envs = instance_envs(strategy, workers, 0, "127.0.0.1", 29500)
    assert len(envs) == workers
    for i, env in enumerate(envs):
        assert env == {
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": str(workers),
            "RANK": str(i), "NODE_RANK": str(i), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            "TI_INSTANCE_INDEX": str(i), "TI_INSTANCE_ROLE": "worker", "TI_INSTANCE_ROLE_INDEX": str(i),
            "TI_NUM_INSTANCES": str(workers),
        }
        assert all(isinstance(v, str) for v in env.values())


def test_ps_env_tf_config():
    envs = instance_envs("ps", 2, 1, "127.0.0.1", None, ps_ports=[2222], worker_ports=[2223, 2224])
    cluster = {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]}
    expected = [("ps", 0), ("worker", 0), ("worker", 1)]
    assert len(envs) == 3
    for i, (env, (role, ri)) in enumerate(zip(envs, expected)):
        assert json.loads(env["TF_CONFIG"]) == {"cluster": cluster, "task": {"type": role, "index": ri}}
        assert env["TI_INSTANCE_INDEX"] == str(i)
        assert env["TI_INSTANCE_ROLE"] == role
        assert env["TI_NUM_INSTANCES"] == "3"
        assert "RANK" not in env


def test_ps_env_with_dns_hosts():
    hosts = ["job-7-ps-0.svc", "job-7-worker-0.svc"]
    envs = instance_envs("ps", 1, 1, "unused", None, ps_ports=[2222], worker_ports=[2222], hosts=hosts)
    cfg = json.loads(envs[1]["TF_CONFIG"])
    assert cfg["cluster"] == {"ps": ["job-7-ps-0.svc:2222"], "worker": ["job-7-worker-0.svc:2222"]}
    assert cfg["task"] == {"type": "worker", "index": 0}


@pytest.mark.parametrize("args,kwargs", [
    (("ps", 2, 0, "h", None), {"ps_ports": [], "worker_ports": [1, 2]}),  # ps strategy without ps
    (("allreduce", 2, 1, "h", 1), {}),  # ps without the ps strategy
    (("allreduce", 0, 0, "h", 1), {}),  # no worker
    (("ps", 1, 1, "h", None), {"ps_ports": [1], "worker_ports": []}),  # port count mismatch
    (("horovod", 1, 0, "h", 1), {}),  # unknown strategy
    (("allreduce", 2, 0, "h", None), {}),  # no master port
])
def test_env_rejects_inconsistent_input(args, kwargs):
    with pytest.raises(ValueError):
        instance_envs(*args, **kwargs)


def test_instance_roles():
    assert instance_roles("ps", 2, 2) == [("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]
    assert instance_roles(None, 1) == [("worker", 0)]


# ---- exit reasons ------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,reason", [
    ({"exit_code": 0}, "exited normally"),
    ({"exit_code": 3}, "exited with code 3"),
    ({"exit_code": -9}, "killed by signal 9 (SIGKILL)"),
    ({"signal": 11}, "killed by signal 11 (SIGSEGV)"),
    ({"exit_code": 137}, "exited with code 137 (killed by signal 9, SIGKILL)"),
    ({"exit_code": -9, "oom": True, "memory_limit_mib": 100}, "out of memory (limit 100 MiB)"),
    ({"exit_code": -9, "oom": True}, "out of memory"),
    ({"exit_code": -15, "stopped": True}, "stopped on request, killed by signal 15 (SIGTERM)"),
    ({"exit_code": 0, "stopped": True}, "stopped on request, exited normally"),
    ({"exit_code": 143, "stopped": True}, "stopped on request, exited with code 143 (killed by signal 15, SIGTERM)"),
    ({}, "ended for an unknown reason"),
])
def test_exit_reason(kwargs, reason):
    assert exit_reason(**kwargs) == reason


def test_instance_name():
    roles = ["ps", "ps", "worker", "worker"]
    assert [instance_name(roles, i) for i in range(4)] == ["ps 0", "ps 1", "worker 0", "worker 1"]
    assert instance_name(roles, 9) == "instance 9"


# ---- outcomes ----------------------------------------------------------------------------------

def run(i):
    return InstanceStatus(i, "running")


def ok(i):
    return InstanceStatus(i, "exited", 0, "exited normally")


def code(i, c):
    return InstanceStatus(i, "exited", c, exit_reason(c))


def oom(i):
    return InstanceStatus(i, "exited", -9, "out of memory (limit 100 MiB)")


def lost(i):
    return InstanceStatus(i, "lost", None, "the process disappeared (machine restart?)")


W2 = ["worker", "worker"]
PS = ["ps", "worker", "worker"]


@pytest.mark.parametrize("strategy,roles,instances,expected", [
    # single node
    (None, ["worker"], [run(0)], None),
    (None, ["worker"], [ok(0)], ("completed", 0, "the instance exited normally")),
    (None, ["worker"], [code(0, 2)], ("failed", 2, "worker 0 exited with code 2")),
    (None, ["worker"], [oom(0)], ("failed", -9, "worker 0 was killed: out of memory (limit 100 MiB)")),
    (None, ["worker"], [code(0, -9)], ("failed", -9, "worker 0 killed by signal 9 (SIGKILL)")),
    (None, ["worker"], [lost(0)],
     ("failed", None, "worker 0 was lost: the process disappeared (machine restart?)")),
    # allreduce: all must finish; the first failure fails the job at once
    ("allreduce", W2, [ok(0), run(1)], None),
    ("allreduce", W2, [ok(0), ok(1)], ("completed", 0, "all 2 instances exited normally")),
    ("allreduce", W2, [run(0), code(1, 3)], ("failed", 3, "worker 1 exited with code 3")),
    # the crash is blamed, not the peer killed by a signal because of it
    ("allreduce", W2, [code(0, -15), code(1, 3)], ("failed", 3, "worker 1 exited with code 3")),
    ("allreduce", W2, [lost(0), code(1, 1)], ("failed", 1, "worker 1 exited with code 1")),
    # ps: the workers decide; parameter servers never exit by themselves
    ("ps", PS, [run(0), ok(1), run(2)], None),
    ("ps", PS, [run(0), ok(1), ok(2)], ("completed", 0, "all 2 workers exited normally")),
    ("ps", PS, [code(0, -15), ok(1), ok(2)], ("completed", 0, "all 2 workers exited normally")),
    ("ps", PS, [code(0, 1), run(1), run(2)], ("failed", 1, "ps 0 exited with code 1")),
    ("ps", PS, [run(0), run(1), code(2, 4)], ("failed", 4, "worker 1 exited with code 4")),
    ("ps", PS, [lost(0), run(1), run(2)], ("failed", None, "ps 0 was lost: the process disappeared (machine restart?)")),
    ("ps", ["ps", "worker"], [ok(0), run(1)], None),  # a ps exiting 0 early is not a failure
    ("allreduce", W2, [], None),
])
def test_job_outcome(strategy, roles, instances, expected):
    assert job_outcome(strategy, roles, JobObservation(tuple(instances))) == expected


def test_outcome_reason_without_stored_reason():
    obs = JobObservation((InstanceStatus(0, "exited", 5, ""),))
    assert job_outcome(None, ["worker"], obs) == ("failed", 5, "worker 0 exited with code 5")
