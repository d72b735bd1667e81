"""The Alibaba GPU 2023 cluster trace ("openb", Weng et al., ATC '23) as simulator input.

Node list ``openb_node_list_all_node.csv``: ``sn,cpu_milli,memory_mib,gpu,model``. Pod lists
``openb_pod_list_*.csv``: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time`` (seconds). Mapping choices (docs/simulator.md explains why):

* one pool, ``default``; node device type: ``gpu`` for every GPU model (``--gpu-types any``, the default: the
  default pod list names no model, so any GPU will do) or the node's model (``--gpu-types model``);
  ``model`` is empty on CPU-only nodes: they hold no devices;
* a pod asks for ``num_gpu`` whole devices: TiHub allocates whole devices, so a pod sharing a GPU
  (``gpu_milli`` < 1000) gets one to itself; cores ``cpu_milli / 1000``, memory as is;
* submitted at ``creation_time``; runs for ``deletion_time - scheduled_time``, or for a pod never scheduled in
  the original cluster ``deletion_time - creation_time`` (the time it was wanted; ``skip_unscheduled`` drops
  those pods instead);
* ``qos`` BE (best effort) is preemptible; LS, Burstable and Guaranteed are not; every pod has priority 100;
* job ids: the pod's rank in the file (1 = first data row), skipped pods included;
* users: the trace has none. Pod i goes to ``user<k>`` with k drawn from a Zipf law, P(k) ~ 1 / (k+1)^skew
  over ``users`` users, by ``random.Random(seed)`` in file order: a few heavy users and a long tail,
  the same draw for the same seed.
"""

from __future__ import annotations

import random
from pathlib import Path

from ..backends.base import NodeCapacity
from ..scheduler.model import Instance
from .trace import CPU_TYPE, TraceError, TraceJob, field, rows

POOL = "default"
ANY_GPU = "gpu"
DEFAULT_USERS = 100
DEFAULT_SKEW = 1.0
DEFAULT_SEED = 1

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_REQUIRED = ("name", "cpu_milli", "memory_mib", "num_gpu", "creation_time", "deletion_time")
POD_OPTIONAL = ("gpu_milli", "gpu_spec", "qos", "pod_phase", "scheduled_time")

_NONNEG_INT = (lambda v: v >= 0, "a whole number >= 0")


def read_nodes(path: str | Path, gpu_types: str = "any") -> list[NodeCapacity]:
    out = []
    with open(path, newline="") as f:
        for line, row in rows(path, f, NODE_COLUMNS, (), strict=False):
            gpus = field(path, line, row, "gpu", int, check=_NONNEG_INT[0], want=_NONNEG_INT[1])
            cpu = field(path, line, row, "cpu_milli", int, check=lambda v: v > 0, want="a whole number > 0")
            mem = field(path, line, row, "memory_mib", int, check=lambda v: v > 0, want="a whole number > 0")
            model = row["model"]
            if gpus and not model:
                raise TraceError(path, line, f"model is empty but the node has {gpus} GPUs")
            dtype = ANY_GPU if gpu_types == "any" else model
            out.append(NodeCapacity(row["sn"], POOL, {dtype: list(range(gpus))} if gpus else {}, cpu / 1000, mem))
    if not out:
        raise TraceError(path, 1, "no nodes")
    return out


def zipf_users(n_pods: int, users: int, skew: float, seed: int) -> list[str]:
    """The seeded user of each pod, in file order."""
    rnd = random.Random(seed)
    names = [f"user{k}" for k in range(users)]
    weights = [1.0 / (k + 1) ** skew for k in range(users)]
    return rnd.choices(names, weights, k=n_pods)


def read_pods(path: str | Path, nodes: list[NodeCapacity], *, users: int = DEFAULT_USERS,
              skew: float = DEFAULT_SKEW, seed: int = DEFAULT_SEED, skip_unscheduled: bool = False
              ) -> list[TraceJob]:
    """Every pod as a job, sorted by creation time (see the module's mapping). ``nodes``: for
    ``--gpu-types model``, the device type of a pod is drawn (seeded) among its ``gpu_spec`` models, or
    among all models by their device counts when it names none."""
    models = sorted({t for n in nodes for t in n.devices})
    by_model = {m: sum(len(n.devices.get(m, ())) for n in nodes) for m in models}
    per_model = models != [ANY_GPU]
    pick = random.Random(seed + 1)  # a separate stream: the user draw does not depend on the mapping
    parsed = []
    with open(path, newline="") as f:
        for i, (line, row) in enumerate(rows(path, f, POD_REQUIRED, POD_OPTIONAL, strict=False)):
            gpus = field(path, line, row, "num_gpu", int, check=_NONNEG_INT[0], want=_NONNEG_INT[1])
            cpu = field(path, line, row, "cpu_milli", int, check=_NONNEG_INT[0], want=_NONNEG_INT[1])
            mem = field(path, line, row, "memory_mib", int, check=_NONNEG_INT[0], want=_NONNEG_INT[1])
            created = field(path, line, row, "creation_time", int, check=_NONNEG_INT[0], want=_NONNEG_INT[1])
            deleted = field(path, line, row, "deletion_time", int, check=_NONNEG_INT[0], want=_NONNEG_INT[1])
            sched = field(path, line, row, "scheduled_time", int, -1, _NONNEG_INT[0], _NONNEG_INT[1])
            began = sched if sched >= 0 else created
            if deleted < began:
                raise TraceError(path, line, f"deletion_time {deleted} is before "
                                             f"{'scheduled_time' if sched >= 0 else 'creation_time'} {began}")
            if sched < 0 and skip_unscheduled:
                continue
            dtype = CPU_TYPE
            if gpus:
                dtype = ANY_GPU
                if per_model:
                    spec = [m for m in row.get("gpu_spec", "").split("|") if m in by_model]
                    cands = spec or models
                    dtype = pick.choices(cands, [by_model[m] for m in cands])[0]
            qos = row.get("qos", "")
            parsed.append((i, created, deleted - began, dtype, Instance(gpus, cpu / 1000, mem), qos == "BE"))
    # one draw per pod of the file, skipped or not: a pod keeps its user whatever the options
    who = zipf_users(parsed[-1][0] + 1 if parsed else 0, users, skew, seed)
    jobs = [TraceJob(i + 1, float(created), float(dur), who[i], "single", POOL, dtype, (inst,), 100, pre)
            for i, created, dur, dtype, inst, pre in parsed]
    jobs.sort(key=lambda j: j.submit_s)
    return jobs


def is_node_list(header: list[str]) -> bool:
    return all(c in header for c in NODE_COLUMNS)


def is_pod_list(header: list[str]) -> bool:
    return all(c in header for c in POD_REQUIRED)


def default_node_list(pod_list: str | Path) -> Path:
    return Path(pod_list).with_name("openb_node_list_all_node.csv")
