"""The slice of service configuration the operations need, as one plain object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..backends.base import NodeCapacity
from .unixids import UidPolicy


@dataclass
class OpsSettings:
    compute_defaults: dict[str, dict[str, Any]]
    storage_defaults: dict[str, int]
    device_rules: dict[str, list[int]] = field(default_factory=dict)
    max_workers: int = 64
    max_ps: int = 16
    nodes: list[NodeCapacity] = field(default_factory=list)
    uids: UidPolicy = field(default_factory=UidPolicy)
    # the service's Fernet (TiService.fernet): seals jobs' secret environment entries (ops/secretenv.py)
    secret_key: Any = None
    rdma: bool = False  # the backend gives pods of plans with rdma an RDMA device (ExecutionBackend.supports_rdma)
    # the backend's ExecutionBackend.image_note: images are not run (the embedded platform), told to every submitter
    image_note: str | None = None
    # the backend's ExecutionBackend.limits_note: plans' CPU and memory limits are best effort, said on the plans page
    limits_note: str | None = None
    # TiService.default_role: the TiHub role of a user who holds none (ops/grants.py)
    default_role: str = "user"
    # RES4: devices per node of types whose distributed jobs take whole nodes (validation.whole_nodes)
    devices_per_node: dict[str, int] = field(default_factory=dict)

    @property
    def device_types(self) -> list[str]:
        return sorted({t for n in self.nodes for t in n.devices})
