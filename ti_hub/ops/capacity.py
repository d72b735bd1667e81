"""What the ti service offers: device-count rules joined from its config and the backend's device types, and the
backend's capacity with the machines that virtual clusters own split off (RES2, RES4)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from traitlets import TraitError

from ..backends.base import ExecutionBackend, NodeCapacity, machine_of
from ..domain.validation import join_device_rules

if TYPE_CHECKING:
    from .context import Context


def device_rules(configured: dict[str, list[int]], backend: ExecutionBackend) -> dict[str, list[int]]:
    """RES4: one rule per device type, whether set in TiService.device_count_rules (``configured``) or in the
    backend's device types (one function, domain.validation.device_count, checks plans and submissions against
    it)."""
    try:
        return join_device_rules(configured, backend.device_count_rules)
    except ValueError as e:
        raise TraitError(f"TiService.device_count_rules: {e}") from None


def join_per_node(configured: dict[str, int], backend: dict[str, int]) -> dict[str, int]:
    """Devices per node by type from both places; a type both name must agree (ValueError naming it)."""
    out = {k: int(n) for k, n in configured.items()}
    for k, n in backend.items():
        if k in out and out[k] != int(n):
            raise ValueError(f"devices per node of device type {k!r} differ: TiService says {out[k]}, the "
                             f"backend's device_types say {n}; set them in one place")
        out[k] = int(n)
    return out


def devices_per_node(configured: dict[str, int], backend: ExecutionBackend) -> dict[str, int]:
    """RES4: TiService.devices_per_node (``configured``) joined with the backend's device types'."""
    try:
        return join_per_node(dict(configured), dict(backend.devices_per_node))
    except ValueError as e:
        raise TraitError(f"TiService.devices_per_node: {e}") from None


async def read_capacity(svc: Context, settle: bool = False) -> list[NodeCapacity]:
    """The backend's capacity with the machines virtual clusters own split off (RES2, ops/vcs.py).
    ``settle`` (the leader): first move draining machines that nothing holds any more to their next VC."""
    from . import cordons, vcs

    rows, cordoned = await svc.db(lambda s: (vcs.assignments(s), cordons.cordoned_names(s)), readonly=True)
    if settle and any(r[5] for r in rows):
        moved = await svc.db(vcs.settle, scheduler=True)
        for node, device, vc in moved:
            if device < 0:  # a whole node (Kubernetes): its label is the assignment
                try:
                    await svc.backend.assign_machine(node, vc)
                except Exception:
                    svc.log.exception("labelling node %s for virtual cluster %s failed", node, vc)
        if moved:
            rows = await svc.db(vcs.assignments, readonly=True)
    svc.backend.set_vc_assignments(rows)
    return without_cordoned(await svc.backend.capacity(), cordoned)


def without_cordoned(nodes: list[NodeCapacity], cordoned: set[str]) -> list[NodeCapacity]:
    """ADM3: a cordoned machine's capacity nodes (its VC slices too) take no new work; what runs keeps running."""
    if not cordoned:
        return nodes
    return [dataclasses.replace(n, schedulable=False)
            if n.schedulable and (n.name in cordoned or machine_of(n) in cordoned) else n for n in nodes]
