"""Capacity from what the cluster reports: pure functions over raw Node and Pod objects.

A node offers its allocatable cpu, memory and devices minus what pods *not* started by TiHub request
(daemons, other workloads); TiHub's own pods are already counted by the scheduler from its placements.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from ..base import NodeCapacity
from .devicetypes import node_type
from .objects import LABEL_INSTALLATION, MANAGED_BY, KubeSettings
from .names import label_value

_SUFFIX = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("0.001"),
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPEmnu]?)$")


def parse_quantity(q: str | int | float | None) -> Decimal:
    """A Kubernetes quantity ("500m", "64Gi", "1e3", "8") as a number."""
    if q is None or q == "":
        return Decimal(0)
    if isinstance(q, (int, float)):
        return Decimal(str(q))
    m = _QTY.match(q.strip())
    if not m:
        raise ValueError(f"not a Kubernetes quantity: {q!r}")
    return Decimal(m.group(1)) * Decimal(_SUFFIX[m.group(2)])


def pod_requests(pod: dict[str, Any], device_resource: str) -> tuple[Decimal, Decimal, int]:
    """(cpu cores, memory bytes, devices) a pod holds on its node: app containers summed, init containers
    counted as their maximum (they run one at a time, before the app containers)."""
    spec = pod.get("spec") or {}

    def req(c: dict[str, Any], key: str) -> Decimal:
        res = c.get("resources") or {}
        r = (res.get("requests") or {}).get(key)
        if r is None:  # a limit without a request means request == limit
            r = (res.get("limits") or {}).get(key)
        return parse_quantity(r)

    totals = []
    for key in ("cpu", "memory", device_resource):
        app = sum((req(c, key) for c in spec.get("containers") or []), Decimal(0))
        init = max((req(c, key) for c in spec.get("initContainers") or []), default=Decimal(0))
        totals.append(max(app, init) + parse_quantity((spec.get("overhead") or {}).get(key)))
    return totals[0], totals[1], int(totals[2])


def holds_resources(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def is_ours(pod: dict[str, Any], installation_label: str) -> bool:
    """``installation_label``: ``label_value(installation)``, computed once by the caller (a hash per pod
    would cost more than the rest of the capacity pass)."""
    lab = (pod.get("metadata") or {}).get("labels") or {}
    return lab.get(MANAGED_BY) == "ti-hub" and lab.get(LABEL_INSTALLATION) == installation_label


def node_ready(node: dict[str, Any]) -> bool:
    conds = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _has(alloc: dict[str, Any], resource: str) -> bool:
    return parse_quantity(alloc.get(resource)) > 0


def capacity(nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]], s: KubeSettings) -> list[NodeCapacity]:
    """A node's devices are its allocatable of its device type's resource (``KubeSettings.device_types``, else
    ``device_resource``); its type is its device-type label, or the configured type whose resource it offers."""
    # every resource some type counts devices in: others' pods may hold any of them
    resources = sorted({s.device_resource, *(d.resource for d in s.device_types.values())})
    others: dict[str, list[Any]] = {}
    ours = label_value(s.installation)
    for pod in pods:
        if not holds_resources(pod) or is_ours(pod, ours):
            continue
        acc = others.setdefault(pod["spec"]["nodeName"], [Decimal(0), Decimal(0), {}])
        for res in resources:
            cpu, mem, dev = pod_requests(pod, res)
            acc[2][res] = acc[2].get(res, 0) + dev
        acc[0] += cpu
        acc[1] += mem
    out = []
    for node in nodes:
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        name = meta["name"]
        labels = meta.get("labels") or {}
        alloc = status.get("allocatable") or {}
        used = others.get(name, [Decimal(0), Decimal(0), {}])
        cpu = max(Decimal(0), parse_quantity(alloc.get("cpu")) - used[0])
        mem = max(Decimal(0), parse_quantity(alloc.get("memory")) - used[1])
        dtype = node_type(labels, alloc, s.device_types, s.device_type_label, _has)
        res = s.resource_of(dtype)
        free_dev = max(0, int(parse_quantity(alloc.get(res))) - int(used[2].get(res, 0)))
        devices = {dtype: list(range(free_dev))} if dtype and free_dev else {}
        out.append(NodeCapacity(
            name=name, pool=labels.get(s.pool_label) or "default", devices=devices,
            cpu=float(cpu), memory_mib=int(mem / (1 << 20)),
            labels={k: v for k, v in labels.items() if k in (s.device_type_label, s.pool_label)},
            schedulable=node_ready(node) and not spec.get("unschedulable", False),
        ))
    out.sort(key=lambda n: n.name)
    return out
