"""RES2 on the embedded platform: the machine's devices split into one capacity node per virtual cluster.

A VC owns some devices of this machine (the assignment is TiHub's, in its database); the scheduler sees one
node per VC slice: the VC's devices, and a share of the machine's cores and memory in proportion to the devices
it owns (3 of 4 GPUs: 3/4 of the cores and of the memory). The slice of "default" keeps the node's own name,
the devices no VC owns and the rest of the cores and memory. A device taken away with drain belongs to no slice
(no new placement there) until its work ends; its VC's slice keeps its share of cores and memory meanwhile.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from ..base import MACHINE_LABEL, NodeCapacity



def slice_name(node: str, vc_id: int, vc_name: str) -> str:
    # by id, not name: a renamed VC's running jobs keep their placement's node
    return f"{node}@vc{vc_id}"


def split(node: NodeCapacity, assigned: Iterable[tuple[str, str, int, int, str, bool]]) -> list[NodeCapacity]:
    """``assigned``: (node, device type, device, VC id, VC name, draining) rows; those of other nodes and whole-node
    rows (device -1) are ignored. Returns the default slice first, then one per VC, by VC id."""
    mine = [a for a in assigned if a[0] == node.name and a[2] >= 0 and a[2] in node.devices.get(a[1], ())]
    if not mine:
        return [node]
    total = sum(len(d) for d in node.devices.values())
    taken: set[tuple[str, int]] = set()
    per_vc: dict[tuple[int, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    share: dict[tuple[int, str], int] = defaultdict(int)
    live: dict[tuple[int, str], int] = defaultdict(int)
    for _, dtype, dev, vc_id, vc_name, draining in mine:
        taken.add((dtype, dev))
        share[(vc_id, vc_name)] += 1
        per_vc[(vc_id, vc_name)].setdefault(dtype, [])
        if not draining:
            per_vc[(vc_id, vc_name)][dtype].append(dev)
            live[(vc_id, vc_name)] += 1
    labels = {**node.labels, MACHINE_LABEL: node.name}
    out = []
    cpu_left, mem_left = node.cpu, node.memory_mib
    for key in sorted(per_vc):
        vc_id, vc_name = key
        frac = share[key] / total if total else 0.0
        cpu = math.floor(node.cpu * frac * 100) / 100
        mem = int(node.memory_mib * frac)
        cpu_left, mem_left = cpu_left - cpu, mem_left - mem
        out.append(NodeCapacity(slice_name(node.name, vc_id, vc_name), vc_name,
                                {t: sorted(d) for t, d in per_vc[key].items() if d}, cpu, mem, dict(labels),
                                node.schedulable and live[key] > 0))
    rest = {t: [d for d in devs if (t, d) not in taken] for t, devs in node.devices.items()}
    default = NodeCapacity(node.name, node.pool, {t: d for t, d in rest.items() if d}, round(max(cpu_left, 0.0), 2),
                           max(mem_left, 0), dict(labels), node.schedulable)
    return [default, *out]


def split_all(nodes: Sequence[NodeCapacity], assigned: Sequence[tuple[str, str, int, int, str, bool]]
              ) -> list[NodeCapacity]:
    return [s for n in nodes for s in split(n, assigned)]
