"""Each instance's own environment for a distributed job: pure functions, no I/O.

Shared by every backend: the local backend passes ``127.0.0.1`` and local ports; a Kubernetes
backend passes per-instance DNS names (``hosts=``) and one fixed port.

Instances are numbered ``0..n-1``. For ``allreduce`` (PyTorch DDP) and single-node jobs
(strategy ``None``) every instance is a worker and gets the torchrun environment (one process per
instance, so ``LOCAL_RANK=0`` and ``LOCAL_WORLD_SIZE=1``; a user who wants several processes per
instance runs ``torchrun --nproc-per-node`` inside it). For ``ps`` (TensorFlow parameter server)
instances ``0..ps-1`` are parameter servers, then come the workers; each gets ``TF_CONFIG``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

STRATEGIES = (None, "allreduce", "ps")


def instance_roles(strategy: str | None, workers: int, ps: int = 0) -> list[tuple[str, int]]:
    """(role, role_index) of each instance in index order: parameter servers first, then workers."""
    _check_counts(strategy, workers, ps)
    if strategy == "ps":
        return [("ps", i) for i in range(ps)] + [("worker", i) for i in range(workers)]
    return [("worker", i) for i in range(workers)]


def instance_envs(strategy: str | None, workers: int, ps: int, master_addr: str, master_port: int | None,
                  ps_ports: Sequence[int] | None = None, worker_ports: Sequence[int] | None = None, *,
                  hosts: Sequence[str] | None = None) -> list[dict[str, str]]:
    """The environment of each instance (index order), all values strings.

    ``master_addr``/``master_port``: the rendezvous of rank 0 (allreduce and single-node).
    ``ps_ports``/``worker_ports``: one port per ps/worker for ``TF_CONFIG`` (ps strategy only).
    ``hosts``: optional host of each instance (index order) for ``TF_CONFIG``; defaults to
    ``master_addr`` for all of them, which is right when everything runs on one machine.
    """
    roles = instance_roles(strategy, workers, ps)
    n = len(roles)
    common = [{"TI_INSTANCE_INDEX": str(i), "TI_INSTANCE_ROLE": role, "TI_INSTANCE_ROLE_INDEX": str(ri),
               "TI_NUM_INSTANCES": str(n)} for i, (role, ri) in enumerate(roles)]
    if hosts is not None and len(hosts) != n:
        raise ValueError(f"hosts has {len(hosts)} entries for {n} instances")

    if strategy != "ps":
        if master_port is None:
            raise ValueError("master_port is required for single-node and allreduce jobs")
        for i, env in enumerate(common):
            env.update({
                "MASTER_ADDR": master_addr, "MASTER_PORT": str(int(master_port)),
                "WORLD_SIZE": str(n), "RANK": str(i), "NODE_RANK": str(i),
                "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            })
        return common

    ps_ports = list(ps_ports or ())
    worker_ports = list(worker_ports or ())
    if len(ps_ports) != ps or len(worker_ports) != workers:
        raise ValueError(f"the ps strategy needs {ps} ps ports and {workers} worker ports, "
                         f"got {len(ps_ports)} and {len(worker_ports)}")
    host_of = list(hosts) if hosts is not None else [master_addr] * n
    cluster = {
        "ps": [f"{host_of[i]}:{int(port)}" for i, port in enumerate(ps_ports)],
        "worker": [f"{host_of[ps + i]}:{int(port)}" for i, port in enumerate(worker_ports)],
    }
    for env, (role, ri) in zip(common, roles):
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": role, "index": ri}},
                                      separators=(",", ":"))
    return common


def _check_counts(strategy: str | None, workers: int, ps: int) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected allreduce, ps or none")
    if workers < 1:
        raise ValueError("a job needs at least one worker")
    if strategy == "ps":
        if ps < 1:
            raise ValueError("the ps strategy needs at least one parameter server")
    elif ps:
        raise ValueError(f"parameter servers need the ps strategy, not {strategy or 'single-node'}")
