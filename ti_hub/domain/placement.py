"""A job's placement as stored (``Job.placement``, written by ``ops.queueing.placement_json``), read in one
place: the accounting, the status page, metrics, alerts, virtual clusters and the idle check all walk it. (The
scheduler's own reading, ``ops.queueing.placement_of``, stays on the JSON: it reads every holding job's
placement every cycle.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Placed(NamedTuple):
    """One instance's share of a node."""

    node: str
    devices: tuple[int, ...]
    cpu: float
    memory_mib: int


def placed(placement: Mapping[str, Any] | None) -> list[Placed]:
    """Each instance's node, devices, cores and memory, in instance order; none for a job not placed."""
    return [Placed(inst.get("node", ""), tuple(int(d) for d in inst.get("devices") or ()), float(inst.get("cpu", 0)),
                   int(inst.get("memory_mib", 0)))
            for inst in (placement or {}).get("instances") or ()]
