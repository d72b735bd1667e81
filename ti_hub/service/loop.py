"""The live loop: stop what was asked to stop, watch what runs, admit what fits.

All decisions come from the pure scheduler core; this module only reads the database, calls the
backend and writes the outcome back. Database work runs in the service's worker threads.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..backends.base import InstanceSpec, LaunchSpec, Mount, NodeCapacity
from ..db import models as m
from ..domain import states as st
from ..domain.errors import Conflict
from ..domain.mounts import HeldMount, MountRequest, check_conflicts
from ..ops.jobs import LIST_COLUMNS, record
from ..scheduler import core

if TYPE_CHECKING:
    from .app import TiService


# what admission reads: only the columns the cycle needs (queues can hold thousands of jobs)
QUEUE_COLUMNS = (m.Job.id, m.Job.owner, m.Job.kind, m.Job.pool, m.Job.device_type, m.Job.devices_per_instance,
                 m.Job.cpu_per_instance, m.Job.memory_mib_per_instance, m.Job.workers, m.Job.ps, m.Job.priority,
                 m.Job.reason)
HELD_COLUMNS = (m.Job.id, m.Job.owner, m.Job.name, m.Job.kind, m.Job.device_type, m.Job.placement, m.Job.spec)


def requests_of(jobs: Sequence[m.Job]) -> list[core.Request]:
    return [core.Request(j.id, j.owner, j.kind, j.pool, j.device_type,
                         tuple(core.Instance(j.devices_per_instance, j.cpu_per_instance, j.memory_mib_per_instance)
                               for _ in range(j.workers + j.ps)), j.priority, j.id) for j in jobs]


def allocations_of(jobs: Sequence[m.Job]) -> list[core.Allocation]:
    out = []
    for j in jobs:
        for a in (j.placement or {}).get("instances", []):
            out.append(core.Allocation(a["node"], j.device_type, tuple(a["devices"]), a["cpu"], a["memory_mib"]))
    return out


def placement_json(p: Sequence[core.Allocation]) -> dict[str, Any]:
    return {"instances": [{"node": a.node, "devices": list(a.devices), "cpu": a.cpu, "memory_mib": a.memory_mib}
                          for a in p]}


def held_mounts(jobs: Sequence[m.Job]) -> list[HeldMount]:
    return [HeldMount(vol["volume_id"], vol["read_only"],
                      f"{'workspace' if j.kind == 'workspace' else 'job'} {j.id} ({j.owner}/{j.name})")
            for j in jobs for vol in j.spec.get("volumes", [])]


def mount_requests(job: m.Job) -> list[MountRequest]:
    return [MountRequest(vol["volume_id"], vol["volume"], vol["kind"], vol["read_only"])
            for vol in job.spec.get("volumes", [])]


def _chunks(items: list, n: int):
    for i in range(0, len(items), n):
        yield items[i:i + n]


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


class JobRunner:
    def __init__(self, service: TiService):
        self.svc = service
        self.log = service.log
        self.wake = asyncio.Event()
        self.cycles = 0
        # scheduling reads every queued and running job: do it only when something changed
        self.dirty = True
        self.last_nodes: list[NodeCapacity] | None = None
        self.last_schedule = 0.0

    def poke(self) -> None:
        """Something changed (a submission, a kill, a workspace stop): schedule at once."""
        self.dirty = True
        self.wake.set()

    async def run_forever(self) -> None:
        await self.recover()
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.step()
            except Exception:
                self.log.exception("scheduler cycle %d failed", self.cycles)
            spent = loop.time() - started
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=self.svc.scheduler_interval)
            except asyncio.TimeoutError:
                pass
            # a burst of pokes (many submissions) is served by one cycle, not one cycle each; and a cycle
            # made slow by a long queue spaces the next ones out, so that the API keeps most of the process
            period = max(self.svc.scheduler_min_interval, spent / self.svc.scheduler_max_share)
            await asyncio.sleep(max(0.0, period - (loop.time() - started)))
            self.wake.clear()

    async def recover(self) -> None:
        """After a restart: re-adopt what still runs, requeue half-launched jobs, reap orphans."""

        def load(s: Session):
            rows = s.scalars(select(m.Job).where(m.Job.kind != "workspace", m.Job.status.in_(st.HOLDING))).all()
            known = {j.id: j.backend_state for j in rows if j.backend_state}
            for j in rows:
                if not j.backend_state and j.status == st.SCHEDULING:
                    j.placement = None
                    record(s, j, st.QUEUED, "requeued: the ti service restarted while launching it")
            return known

        known = await self.svc.db(load, scheduler=True)
        alive = await self.svc.backend.reconcile(known)
        self.log.info("re-adopted %d running job(s); %d ended while the service was down",
                      sum(alive.values()), len(alive) - sum(alive.values()))

    async def step(self) -> None:
        self.cycles += 1
        nodes = await self.svc.backend.capacity()
        self.svc.ops_settings.nodes = nodes
        if nodes != self.last_nodes:
            self.last_nodes, self.dirty = nodes, True
        if await self.stop_requested():
            self.dirty = True
        if await self.watch_running():
            self.dirty = True
        now = asyncio.get_running_loop().time()
        if self.dirty or now - self.last_schedule >= self.svc.scheduler_resync_interval:
            self.dirty, self.last_schedule = False, now
            await self.schedule(nodes)

    async def stop_requested(self) -> int:
        jobs = await self.svc.db(lambda s: s.execute(select(m.Job.id, m.Job.backend_state).where(
            m.Job.kind != "workspace", m.Job.status.in_((st.KILLING, st.PAUSING)))).all(), readonly=True,
            scheduler=True)
        for j in jobs:
            if j.backend_state:
                await self.svc.backend.stop(j.id, j.backend_state)
                await self.svc.backend.cleanup(j.id, j.backend_state)
            await self.svc.db(self._finish_stop, j.id, scheduler=True)
        return len(jobs)

    @staticmethod
    def _finish_stop(s: Session, job_id: int) -> None:
        j = s.get(m.Job, job_id)
        if j.status == st.KILLING:
            record(s, j, st.KILLED, j.reason.replace("kill requested", "killed") or "killed")
        elif j.status == st.PAUSING:
            j.placement = None
            j.backend_state = None
            record(s, j, st.PAUSED, "paused: resources released; resume to requeue")

    async def watch_running(self) -> int:
        """Observe every running job; returns how many ended."""
        from ..backends.outcome import job_outcome

        jobs = await self.svc.db(lambda s: s.execute(
            select(m.Job.id, m.Job.strategy, m.Job.workers, m.Job.ps, m.Job.backend_state).where(
                m.Job.kind != "workspace", m.Job.status == st.RUNNING, m.Job.backend_state.is_not(None))).all(),
            readonly=True, scheduler=True)
        ended = 0
        for j in jobs:
            if not j.backend_state:
                continue
            obs = await self.svc.backend.observe_job(j.id, j.backend_state)
            roles = ["ps"] * j.ps + ["worker"] * j.workers if j.strategy == "ps" else ["worker"] * (j.workers + j.ps)
            outcome = job_outcome(j.strategy, roles, obs)
            if outcome is None:
                continue
            status, code, reason = outcome
            # ps instances never exit by themselves; a failed gang leaves survivors: stop them all
            await self.svc.backend.stop(j.id, j.backend_state, grace_seconds=2.0)
            await self.svc.backend.cleanup(j.id, j.backend_state)
            await self.svc.db(self._finish_run, j.id, status, code, reason, scheduler=True)
            ended += 1
        return ended

    @staticmethod
    def _finish_run(s: Session, job_id: int, status: str, code: int | None, reason: str) -> None:
        j = s.get(m.Job, job_id)
        if j.status != st.RUNNING:
            return  # a kill or pause raced us; that path records the end
        j.exit_code = code
        record(s, j, status, reason)

    def _decide(self, s: Session, nodes: list[NodeCapacity]):
        """Read what scheduling needs and run the pure cycle, in the scheduler's thread."""
        holding = s.execute(select(*HELD_COLUMNS).where(m.Job.status.in_(st.HOLDING))).all()
        queued = s.execute(select(*QUEUE_COLUMNS).where(m.Job.status == st.QUEUED)).all()
        if not queued:
            return [], {}, {}
        result = core.cycle(nodes, allocations_of(holding), requests_of(queued))
        shown = {j.id: j.reason for j in queued}
        # only reasons that changed are written (most cycles: none, and then no write transaction at all)
        reasons = {p.job_id: p.reason for p in result.pending if shown[p.job_id] != p.reason}
        ids = [a.job_id for a in result.admitted]
        full = {r.id: r for r in s.execute(select(*LIST_COLUMNS).where(m.Job.id.in_(ids)))} if ids else {}
        held = held_mounts(holding)
        admitted = []
        for adm in result.admitted:
            job = full[adm.job_id]
            try:
                check_conflicts(mount_requests(job), held)
            except Conflict as e:
                if shown[job.id] != f"waiting: {e.detail}":
                    reasons[job.id] = f"waiting: {e.detail}"
                continue
            held.extend(held_mounts([job]))
            admitted.append(adm)
        return admitted, reasons, full

    async def schedule(self, nodes: list[NodeCapacity]) -> None:
        admitted, reasons, full = await self.svc.db(self._decide, nodes, readonly=True, scheduler=True)
        if not admitted and not reasons:
            return
        await self.svc.db(self._record_decisions, admitted, reasons, scheduler=True)
        for adm in admitted:
            job = full[adm.job_id]
            if job.kind == "workspace":
                continue  # the hub's spawner launches it once it sees the placement
            await self.launch(job, adm.placement)

    @staticmethod
    def _record_decisions(s: Session, admitted: list[core.Admit], reasons: dict[int, str]) -> None:
        ids = [a.job_id for a in admitted]
        jobs = {j.id: j for j in s.scalars(select(m.Job).where(m.Job.id.in_(ids)))} if ids else {}
        for adm in admitted:
            j = jobs[adm.job_id]
            if j.status != st.QUEUED:
                continue  # killed or paused while we decided
            j.placement = placement_json(adm.placement)
            record(s, j, st.SCHEDULING, "admitted: starting on " + ", ".join(sorted({a.node for a in adm.placement})))
        # `reasons` differ from what _decide read; re-read them under the write lock (a kill may have raced)
        changed = []
        for chunk in _chunks(list(reasons), 500):
            for job_id, status, reason in s.execute(select(m.Job.id, m.Job.status, m.Job.reason)
                                                    .where(m.Job.id.in_(chunk))):
                if status == st.QUEUED and reason != reasons[job_id]:
                    changed.append({"id": job_id, "reason": reasons[job_id]})
        if changed:
            s.execute(update(m.Job), changed)

    def launch_spec(self, job: m.Job, placement: Sequence[core.Allocation]) -> LaunchSpec:
        from ..backends.envs import instance_envs

        n = job.workers + job.ps
        master = free_ports(1)[0]
        ps_ports = free_ports(job.ps) if job.strategy == "ps" else []
        worker_ports = free_ports(job.workers) if job.strategy == "ps" else []
        envs = instance_envs(job.strategy, job.workers, job.ps, "127.0.0.1", master, ps_ports, worker_ports)
        roles = (["ps"] * job.ps + ["worker"] * job.workers) if job.strategy == "ps" else ["worker"] * n
        role_idx: dict[str, int] = {}
        instances = []
        for i, (alloc, env) in enumerate(zip(placement, envs)):
            r = roles[i]
            instances.append(InstanceSpec(i, r, role_idx.get(r, 0), alloc.node, alloc.devices, alloc.cpu,
                                          alloc.memory_mib, env))
            role_idx[r] = role_idx.get(r, 0) + 1
        mounts, scratch = [], []
        for vol in job.spec.get("volumes", []):
            if vol["kind"] == "local":
                scratch.append(vol["mount_path"])
            else:
                mounts.append(Mount(str(self.svc.volume_driver.path(vol["volume_id"])), vol["mount_path"],
                                    vol["read_only"], vol["kind"]))
        return LaunchSpec(job.id, job.owner, job.name, job.kind, job.strategy, job.command, job.image,
                          dict(job.spec.get("env", {})), tuple(instances), tuple(mounts), tuple(scratch),
                          job.shm_mib)

    async def launch(self, job: m.Job, placement: Sequence[core.Allocation]) -> None:
        try:
            spec = self.launch_spec(job, placement)
            state = await self.svc.backend.launch(spec)
        except Exception as e:  # a launch failure is the job's error, never the loop's
            self.log.exception("launching job %d failed", job.id)
            await self.svc.db(self._launch_failed, job.id, f"could not start: {e}", scheduler=True)
            return
        await self.svc.db(self._launched, job.id, state, scheduler=True)

    @staticmethod
    def _launched(s: Session, job_id: int, state: dict[str, Any]) -> None:
        j = s.get(m.Job, job_id)
        j.backend_state = state
        if j.status == st.SCHEDULING:
            record(s, j, st.RUNNING, "running")

    @staticmethod
    def _launch_failed(s: Session, job_id: int, reason: str) -> None:
        j = s.get(m.Job, job_id)
        j.placement = None
        record(s, j, st.ERROR, reason)
