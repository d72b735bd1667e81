"""The execution backend interface: what the ti service needs from local processes or Kubernetes.

The scheduler decides *what* runs *where*; a backend only makes it so, reports what it sees, and
cleans up. Everything a backend must remember about a launched job goes into the JSON it returns
from ``launch`` (stored as ``Job.backend_state``) so that a restarted ti service can re-adopt it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from traitlets.config import LoggingConfigurable


@dataclass(frozen=True)
class NodeCapacity:
    """One machine as the scheduler sees it: whole devices by type, cores and memory."""

    name: str
    pool: str
    devices: dict[str, list[int]]  # device type -> device indices on this node ("cpu" never appears)
    cpu: float
    memory_mib: int
    labels: dict[str, str] = field(default_factory=dict)
    schedulable: bool = True


# on the capacity nodes a machine is split into (the embedded platform's VC slices, backends/local/slices.py): the
# physical machine they are part of
MACHINE_LABEL = "ti-hub.io/machine"


def machine_of(node: NodeCapacity) -> str:
    """The physical machine of a capacity node: its own name unless it is a slice of one."""
    return node.labels.get(MACHINE_LABEL) or node.name


@dataclass(frozen=True)
class Mount:
    """A host directory made visible at ``mount_path``; read-only mounts are enforced, not advisory."""

    source: str
    mount_path: str
    read_only: bool
    kind: str = "filesystem"  # the storage kind, for messages
    volume_id: int | None = None  # which TiHub volume (Kubernetes mounts its claim, not a path)
    volume: str = ""  # "owner/name", for names and messages
    claim: str = ""  # Kubernetes: the claim to mount when it is not a volume's (a personal directory's)


@dataclass(frozen=True)
class InstanceSpec:
    """One process of a job (a worker or a parameter server)."""

    index: int  # 0..n-1 across the whole job
    role: str  # "worker" or "ps"
    role_index: int
    node: str
    devices: tuple[int, ...]  # device indices on the node (CUDA_VISIBLE_DEVICES)
    cpu: float
    memory_mib: int
    env: dict[str, str]  # the instance's own environment (RANK, TF_CONFIG, ...)


@dataclass(frozen=True)
class LaunchSpec:
    job_id: int
    owner: str
    name: str
    kind: str  # single | distributed
    strategy: str | None  # allreduce | ps | None
    command: str
    image: str
    env: dict[str, str]  # the user's environment, shared by all instances
    instances: tuple[InstanceSpec, ...]
    mounts: tuple[Mount, ...] = ()
    scratch_paths: tuple[str, ...] = ()  # local-kind volumes: fresh, node-local, gone at the end
    shm_mib: int = 64
    device_type: str = "cpu"
    pool: str = "default"
    uid: int | None = None  # the owner's Unix uid (the embedded platform runs their code as it)
    rdma: bool = False  # the plan's rdma: each pod asks for the RDMA device resource (Kubernetes only)
    # the job's secret environment entries, opened for this launch only (ops/secretenv.py): a backend puts them
    # where nobody reads them back (a per-job Secret on Kubernetes), never into anything it logs or returns
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)
    # the job's registry credential (server, username, password), opened for this launch only like secret_env:
    # Kubernetes pulls the image with it (a Secret of the job's own); the embedded platform runs no image
    registry_auth: tuple[str, str, str] | None = field(default=None, repr=False)
    # the jupyter endpoint (JOB2): {"port", "token" (opened like secret_env), "base_url" (the path the endpoint
    # proxy forwards with)}: instance 0 runs a Jupyter server beside its command; None: no such endpoint
    jupyter: dict[str, Any] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["secret_env"] = sorted(self.secret_env)  # names only: this is for logs and state
        out["registry_auth"] = self.registry_auth[0] if self.registry_auth else None  # the registry only
        out["jupyter"] = {**self.jupyter, "token": "***"} if self.jupyter else None
        return out


@dataclass(frozen=True)
class InstanceStatus:
    index: int
    state: str  # "starting" (reason: why it waits) | "running" | "exited" | "lost"
    exit_code: int | None = None
    reason: str = ""  # plain language: "out of memory", "killed by signal 9", ...


@dataclass(frozen=True)
class JobObservation:
    """What the backend sees of a job right now; ``ti_hub.backends.outcome`` turns it into a status."""

    instances: tuple[InstanceStatus, ...]


class ExecutionBackend(LoggingConfigurable):
    """Base class: launch, watch, logs, stop, capacity, re-adoption."""

    # True where a launched job's instances start later (pods wait for a node, an image): the job stays
    # "scheduling" until observe_job shows them all running, with the reason they wait meanwhile
    reports_start = False
    # whether plans with rdma mean something here (the backend gives pods an RDMA device); else they are refused
    supports_rdma = False
    # what this platform does with the image a user picks, said where they pick one (the panels, the spawn form,
    # GET /images) and in every answer that names one (ops/jobspec.py); None where images are run
    image_note: str | None = None
    # where the backend cannot make the kernel enforce plans' CPU and memory limits, a sentence saying so (the
    # plans page shows it; the service logs it at start); None where they are enforced
    limits_note: str | None = None

    # RES4: the device counts the backend's own config allows per device type (KubernetesBackend.device_types),
    # joined with TiService.device_count_rules; and the devices per node of types whose distributed jobs take
    # whole nodes (ops/jobspec.py checks both)
    @property
    def device_count_rules(self) -> dict[str, list[int]]:
        return {}

    @property
    def devices_per_node(self) -> dict[str, int]:
        return {}

    async def capacity(self) -> list[NodeCapacity]:
        raise NotImplementedError

    # RES2: machines owned by virtual clusters, (node, device type, device, VC id, VC name, draining) rows from
    # TiHub's database (ops/vcs.py assignments); the service sets them before reading capacity
    vc_assignments: list[tuple[str, str, int, int, str, bool]] = []
    # True where a VC owns whole machines (Kubernetes nodes), not devices of one machine (the embedded platform)
    vc_whole_nodes = False

    def set_vc_assignments(self, rows: list[tuple[str, str, int, int, str, bool]]) -> None:
        self.vc_assignments = list(rows)

    async def assign_machine(self, node: str, vc: str) -> None:
        """RES2: make a whole machine (node) part of a VC where the backend keeps that itself (Kubernetes labels
        the node); nothing to do on the embedded platform, whose capacity is split by ``vc_assignments``."""

    async def set_schedulable(self, node: str, schedulable: bool) -> None:
        """ADM3: cordon (False) or uncordon (True) a machine where the platform keeps that itself (Kubernetes:
        the node's spec.unschedulable); nothing to do on the embedded platform, whose capacity reads TiHub's
        cordoned machines (ops/capacity.py). Running work keeps running either way."""

    async def launch(self, spec: LaunchSpec) -> dict[str, Any]:
        """Start every instance of the job (all or none) and return its backend state (JSON)."""
        raise NotImplementedError

    async def observe_job(self, job_id: int, state: dict[str, Any]) -> JobObservation:
        # not `observe`: that name is HasTraits.observe, which traitlets calls while building any Configurable
        raise NotImplementedError

    async def stop(self, job_id: int, state: dict[str, Any], grace_seconds: float = 5.0) -> None:
        """Stop every instance (TERM, then KILL after the grace period) and free what it held."""
        raise NotImplementedError

    async def logs(self, job_id: int, state: dict[str, Any], instance: int = 0, offset: int = 0,
                   limit: int = 1 << 20) -> tuple[str, int]:
        """Log text of one instance from byte ``offset``; returns (text, next offset)."""
        raise NotImplementedError

    async def tail_lines(self, job_id: int, state: dict[str, Any], instance: int = 0,
                         n: int = 2000) -> tuple[str, int]:
        """The last ``n`` lines of one instance's log and the offset where its log ends now.

        Backends that can seek (files) override this; the default reads the log from the start.
        """
        text, end = await self.logs(job_id, state, instance, 0, 64 << 20)
        lines = text.splitlines(keepends=True)
        return "".join(lines[-n:]), end

    # True where every job shares this machine's network (the embedded local backend): a port then belongs to
    # one running job at a time, and the endpoints proxy refuses a job that declared a port another holds
    shares_host_network = False

    async def endpoint_address(self, job_id: int, state: dict[str, Any], instance: int, port: int | None = None
                               ) -> tuple[str, dict[int, int] | None]:
        """JOB6: where one instance's interactive ports answer, for the endpoints proxy: (host, port mapping),
        the mapping None when the job's ports are reached as they are. Raises LookupError when the instance
        is not running, or when ``port`` is given and is not served by that instance (the proxy answers 502)."""
        raise NotImplementedError

    async def metrics(self, job_id: int, state: dict[str, Any], devices: dict[int, list[int]]) -> list[Any]:
        """Resource use of each running instance now (``metrics.InstanceMetrics``); ``devices``: the device
        indices each instance holds (its placement)."""
        raise NotImplementedError

    async def usage_totals(self, states: dict[int, dict[str, Any]]) -> dict[int, list[Any]]:
        """What each running job (id -> its state) has used so far, per instance (``metrics.InstanceTotals``),
        for the Prometheus counters; raise NotImplementedError where the backend cannot tell."""
        raise NotImplementedError

    async def workspace_cpu_seconds(self, states: dict[int, dict[str, Any]]) -> dict[int, float]:
        """CPU seconds each running workspace (id -> its backend state) has used so far, for the idle policy; a
        workspace whose processes are not found is left out. NotImplementedError where the backend cannot tell."""
        raise NotImplementedError

    async def workspace_gone(self, state: dict[str, Any]) -> str | None:
        """Why a workspace that TiHub counts as running has no process any more (a reason), or None when it runs
        or when the spawner, not this backend, watches it (Kubernetes: the hub polls its pod)."""
        return None

    async def workspace_pull_secret(self, ws_id: int, owner: str, name: str, auth: tuple[str, str, str]
                                    ) -> str | None:
        """Make (or remake) the image pull Secret of a workspace from its registry credential ``auth`` (server,
        username, password) and return its name; None where images are not pulled (the embedded platform)."""
        return None

    async def drop_workspace_pull_secret(self, ws_id: int, owner: str, name: str) -> None:
        """Delete the workspace's image pull Secret, if it has one (its workspace stopped)."""
        return None

    def clear_workspace_state(self, owner: str, name: str) -> list[str]:
        """WS7 reset, blocking, for a stopped workspace: remove the state that is its alone (never a volume, never
        the owner's home) and say what went. None here: a workspace's pod starts from its image every time."""
        return []

    def job_pods(self, job_id: int) -> list[dict[str, str]]:
        """ADM2: the job's pods as the backend last saw them (name, phase, node), for the All jobs page; none
        where jobs are not pods."""
        return []

    async def cleanup(self, job_id: int, state: dict[str, Any]) -> None:
        """Release what outlives the processes (scratch space, ...); logs are kept."""
        raise NotImplementedError

    async def reconcile(self, known: dict[int, dict[str, Any]]) -> dict[int, bool]:
        """After a restart: which of the ``known`` running jobs (id -> state) are still alive here.

        Anything this backend finds running that is not in ``known`` is an orphan and is stopped.
        """
        raise NotImplementedError
