"""What one scheduling cycle reads and returns: plain values, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

WORKSPACE = "workspace"


@dataclass(frozen=True, slots=True)
class Instance:
    devices: int
    cpu: float
    memory_mib: int


@dataclass(frozen=True, slots=True)
class Request:
    """A queued job. Order inside its queue (Q2): a pin (a later pin first) > priority > the owner's usage
    score for the device type (lower first) > the owner's own order > creation order."""

    job_id: int
    owner: str
    kind: str
    pool: str
    device_type: str
    instances: tuple[Instance, ...]
    priority: int = 100
    order: int = 0  # creation order: the job id does
    pinned_at: float | None = None
    user_rank: float = 0.0  # the owner's own order among their queued jobs (lower first)
    preemptible: bool = False
    duration_s: float | None = None  # declared run time: backfill uses it

    @property
    def queue(self) -> tuple[str, str, str]:
        return (self.pool, self.device_type, self.kind)


@dataclass(frozen=True, slots=True)
class Allocation:
    """What one instance of a running job holds on a node."""

    node: str
    device_type: str
    devices: tuple[int, ...]
    cpu: float
    memory_mib: int


@dataclass(frozen=True, slots=True)
class Running:
    """A running job as preemption and backfill see it (its allocations are also in ``held``)."""

    job_id: int
    owner: str
    kind: str
    pool: str
    device_type: str
    priority: int
    preemptible: bool
    started_at: float
    placement: tuple[Allocation, ...]
    ends_at: float | None = None  # started + declared duration, when declared
    # the VC whose idle devices it runs on, when borrowed (its placement is on that pool's nodes): reclaimed
    # (preempted, requeued) as soon as that VC's own jobs need the devices
    lent_by: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """Devices, cores and memory, for quotas (per user x kind x device type)."""

    devices: int = 0
    cpu: float = 0.0
    memory_mib: int = 0

    def plus(self, other: Usage) -> Usage:
        return Usage(self.devices + other.devices, self.cpu + other.cpu, self.memory_mib + other.memory_mib)


@dataclass(frozen=True, slots=True)
class Admit:
    job_id: int
    placement: tuple[Allocation, ...]  # one per instance, in instance order
    preempts: tuple[int, ...] = ()  # running jobs that make room for it (they go back to their queue)
    backfilled: bool = False
    lent_by: str = ""  # placed on idle devices of this VC of the same cohort (borrowed, reclaimable)


@dataclass(frozen=True, slots=True)
class Pending:
    job_id: int
    reason: str
    # a queue's head waiting for capacity: what is short in its pool ("devices", "cpu" or "memory"), so that
    # the service can name who holds it (the core knows no job names)
    short: str = ""


@dataclass(frozen=True, slots=True)
class Position:
    queue: tuple[str, str, str]
    position: int  # 1 = head
    ahead: int


@dataclass
class CycleResult:
    admitted: list[Admit] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    positions: dict[int, Position] = field(default_factory=dict)  # every queued job, in its queue's order
    # jobs no machine of their pool could hold, cordoned machines included: "can never fit: ..." (they block
    # nothing; the service takes them out of the queue)
    unfit: dict[int, str] = field(default_factory=dict)
