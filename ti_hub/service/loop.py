"""The live loop: stop what was asked to stop, watch what runs, admit what fits.

All decisions come from the pure scheduler core; this module only reads the database, calls the
backend and writes the outcome back. Database work runs in the service's worker threads.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from ..backends.base import InstanceSpec, LaunchSpec, Mount, NodeCapacity
from ..backends.outcome import job_outcome, starting_reason
from ..backends.envs import instance_envs
from ..db import models as m
from ..domain import states as st
from ..domain.errors import HubUnavailable
from ..domain.endpoints import port_url
from ..metrics import process as metrics
from ..ops import alerts, images, jobrules, secretenv, unixids
from ..ops.jobspec import jupyter_port
from ..ops.jobs import KILL_AT_ONCE, STOP_REQUESTED, alert, killed, record
from ..scheduler import core, overrun
from ..scheduler.estimate import typical_durations
from ..domain import personal
from ..hubclient import api as hubapi
from ..ops import history, queueing
from ..ops.scoring import ScoreKeeper
from ..tasks.snapshots import Snapshots

WORKSPACE_CHECK_INTERVAL = 2.0  # seconds between checks that running workspaces still have a process
OVERRUN_CHECK_INTERVAL = 1.0  # seconds between checks of running jobs against their declared durations
EVENT_EXPIRY_INTERVAL = 60.0  # seconds between looks for event alerts to close (ops/alerts.expire_events)
# what the leader stops each cycle: kills and pauses asked for, preemption victims (a workspace is stopped by the
# hub, and only when killed). Narrowed to the statuses that hold something first, so that the status index
# answers it: as an OR of kinds and statuses it scanned every job ever run, each cycle (0.15 s at 200,000 jobs)
TO_STOP = select(m.Job.id, m.Job.kind, m.Job.owner, m.Job.name, m.Job.backend_state, m.Job.status,
                 m.Job.reason).where(
    m.Job.status.in_(sorted(st.HOLDING)),
    or_(m.Job.status == st.KILLING,
        and_(m.Job.kind != "workspace", or_(m.Job.status == st.PAUSING, m.Job.preempted_by.is_not(None)))))

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

    from ..health.alerting import AlertRules
    from ..ops.context import Capacity, Context

    class LeaderContext(Context, Capacity, Protocol):
        """What the scheduling leader reads of the service: TiService's traits of the same names (their help
        says what each does), its Fernet and the alert rules."""

        fernet: Fernet
        alert_rules: AlertRules
        compute_quota_defaults: dict[str, dict]
        leader_serves_http: bool
        scheduler_interval: float
        scheduler_min_interval: float
        scheduler_max_share: float
        scheduler_resync_interval: float
        scheduler_backfill: bool
        queue_status_interval: float
        launch_concurrency: int
        stop_grace_seconds: float
        history_refresh_interval: float
        usage_sample_interval: float
        usage_history_interval: float
        usage_history_retention: float


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
    def __init__(self, service: LeaderContext, clock: Callable[[], float] = time.time):
        self.svc = service
        self.log = service.log
        self.clock = clock  # wall clock (epoch seconds): scores, estimates and alerts use it
        self.scores = ScoreKeeper(service.usage_settling_time, service.usage_device_weights)
        self.typical: dict[tuple[str, ...], float] = {}
        self.typical_at = float("-inf")
        self.wake = asyncio.Event()
        self.cycles = 0
        # scheduling reads every queued and running job: do it only when something changed
        self.dirty = True
        self.last_nodes: list[NodeCapacity] | None = None
        self.last_schedule = 0.0
        self.last_status = float("-inf")  # when queued jobs' positions, reasons and estimates were last written
        self.phase_s: dict[str, float] = {}  # where the last admission's time went (for the slow-cycle log)
        self.last_history = float("-inf")  # when the last usage sample for the cluster page was taken
        self.last_ws_check = float("-inf")
        self.last_overrun_check = float("-inf")
        self.last_event_expiry = float("-inf")
        self.alerted_runs: set[tuple[int, Any]] = set()  # (job, its start): runs past their duration, alerted
        # killed workspaces whose stop the hub is working on (the tasks are kept: the loop holds only weak ones)
        self.ws_stopping: dict[int, asyncio.Future] = {}
        # jobs stopped gracefully (their grace may be long: never inside a cycle)
        self.graceful: dict[int, asyncio.Future] = {}
        # datasets whose copy the leader runs beside the cycles (a dataset's create pokes it too)
        self.snapshots = Snapshots(service) if service.volume_driver.snapshots_later else None

    def poke(self) -> None:
        """Something changed (a submission, a kill, a workspace stop, a dataset to copy): schedule at once."""
        self.dirty = True
        self.wake.set()
        if self.snapshots is not None:
            self.snapshots.poke()

    async def run_forever(self) -> None:
        await self.recover()
        copies = asyncio.ensure_future(self.snapshots.run_forever()) if self.snapshots is not None else None
        try:
            await self._cycles()
        finally:
            if copies is not None:
                copies.cancel()
                self.snapshots.stop()

    async def _cycles(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started, cpu0 = loop.time(), time.process_time()
            try:
                await self.step()
            except Exception:
                self.log.exception("scheduler cycle %d failed", self.cycles)
            # the share bounds CPU taken from the API, so count CPU: a cycle that mostly awaits the backend
            # (Kubernetes creates, process starts) must not push the next one out by its wall time
            spent = time.process_time() - cpu0
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=self.svc.scheduler_interval)
            except asyncio.TimeoutError:
                pass
            # a burst of pokes (many submissions) is served by one cycle, not one cycle each; and a cycle
            # made slow by a long queue spaces the next ones out, so that the API keeps most of the process
            share = self.svc.scheduler_max_share if self.svc.leader_serves_http else 1.0
            period = max(self.svc.scheduler_min_interval, spent / share)
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

        def load_scores(s: Session) -> str:
            holdings = [(j.owner, j.device_type, j.devices_per_instance * (j.workers + j.ps),
                         queueing.epoch(j.started_at))
                        for j in s.execute(select(m.Job.owner, m.Job.device_type, m.Job.devices_per_instance,
                                                  m.Job.workers, m.Job.ps, m.Job.started_at)
                                           .where(m.Job.status.in_(st.HOLDING)))]
            said = self.scores.load(s, holdings, self.clock())
            self.scores.save(s, self.clock())
            return said

        self.log.info(await self.svc.db(load_scores, scheduler=True))

    async def step(self) -> None:
        self.cycles += 1
        clock = asyncio.get_running_loop().time
        t = [clock()]
        self.phase_s = {}
        nodes = await self.svc.read_capacity(settle=True)
        self.svc.ops_settings.nodes = nodes
        if nodes != self.last_nodes:
            self.last_nodes, self.dirty = nodes, True
        if clock() - self.last_overrun_check >= OVERRUN_CHECK_INTERVAL:
            await self.watch_overruns()
        if await self.stop_requested():
            self.dirty = True
        t.append(clock())
        if await self.watch_running():
            self.dirty = True
        if clock() - self.last_ws_check >= WORKSPACE_CHECK_INTERVAL and await self.watch_workspaces():
            self.dirty = True
        t.append(clock())
        now = clock()
        if self.dirty or now - self.last_schedule >= self.svc.scheduler_resync_interval:
            self.dirty, self.last_schedule = False, now
            await self.schedule(nodes)
        elif self.clock() - (self.scores.last_saved or 0.0) >= self.svc.usage_sample_interval:
            await self.svc.db(self._save_scores, self.clock(), scheduler=True)
        if self.clock() - self.last_history >= self.svc.usage_history_interval:
            await self.sample_history(nodes)
        if clock() - self.last_event_expiry >= EVENT_EXPIRY_INTERVAL:
            self.last_event_expiry = clock()
            await self.svc.db(alerts.expire_events, queueing.from_epoch(self.clock()), scheduler=True)
        t.append(clock())
        metrics.cycle(t[-1] - t[0])
        if t[-1] - t[0] > 1.0:  # the phases of a slow cycle, for whoever wonders why admissions lag
            self.log.info("slow scheduler cycle %d: %.2fs (capacity and stops %.2fs, watch %.2fs, schedule %.2fs: %s)",
                          self.cycles, t[-1] - t[0], t[1] - t[0], t[2] - t[1], t[3] - t[2],
                          ", ".join(f"{k} {v:.2f}s" for k, v in self.phase_s.items()))

    async def sample_history(self, nodes: list[NodeCapacity]) -> None:
        """One usage sample for the cluster page's pictures; a failure only costs a point in them."""
        now = self.clock()
        self.last_history = now
        scores = dict(self.scores.scores.values) if self.scores.scores is not None else {}
        at = queueing.from_epoch(now)
        try:  # read outside the write lock, written under it
            rows = await self.svc.db(history.sample_of, at, scores, nodes, readonly=True, scheduler=True)
            await self.svc.db(history.store_sample, rows, at, self.svc.usage_history_retention, scheduler=True)
        except Exception:
            self.log.exception("taking a usage sample failed")

    def _save_scores(self, s: Session, now: float) -> None:
        self.scores.advance(now)
        self.scores.save(s, now)

    async def stop_requested(self) -> int:
        jobs = await self.svc.db(lambda s: s.execute(TO_STOP).all(), readonly=True, scheduler=True)
        done = 0
        for j in jobs:
            if j.kind == "workspace":
                if j.id not in self.ws_stopping:  # the hub may take a while: never hold up the cycle for it
                    self.ws_stopping[j.id] = asyncio.ensure_future(self._stop_workspace(j.id, j.owner, j.name))
                continue
            if j.backend_state and j.status == st.KILLING and j.reason.startswith(STOP_REQUESTED):
                if j.id not in self.graceful:
                    self.graceful[j.id] = asyncio.ensure_future(self._stop_gracefully(j.id, j.backend_state))
                continue
            if j.backend_state:
                if j.status == st.KILLING and j.reason.startswith(KILL_AT_ONCE):  # access taken back: no grace
                    await self.svc.backend.stop(j.id, j.backend_state, grace_seconds=0.0)
                else:
                    await self.svc.backend.stop(j.id, j.backend_state)
                await self.svc.backend.cleanup(j.id, j.backend_state)
            await self.svc.db(self._finish_stop, j.id, scheduler=True)
            done += 1
        return done

    async def _stop_workspace(self, job_id: int, owner: str, name: str) -> None:
        """A killed workspace: the hub owns its server, so the hub stops it; its spawner ends the process and
        reports the stop, which records the kill (ops/workspaces.stop) and frees the devices. Recorded here too,
        for a server the hub no longer had."""
        try:
            await hubapi.stop_server(self.svc.hub_auth(), owner, name)
            await self.svc.db(self._finish_stop, job_id, scheduler=True)
            self.poke()
        except HubUnavailable as e:
            self.log.warning("workspace %s/%s is still being killed: %s; asking again", owner, name, e)
        except Exception:
            self.log.exception("killing workspace %s/%s failed; asking again", owner, name)
        finally:
            self.ws_stopping.pop(job_id, None)

    async def _stop_gracefully(self, job_id: int, state: dict[str, Any]) -> None:
        """A requested stop: SIGTERM, the grace, then SIGKILL (the backend's stop), off the cycle."""
        try:
            await self.svc.backend.stop(job_id, state, grace_seconds=self.svc.stop_grace_seconds)
            await self.svc.backend.cleanup(job_id, state)
            await self.svc.db(self._finish_stop, job_id, scheduler=True)
            self.poke()
        except Exception:
            self.log.exception("stopping job %d failed; trying again", job_id)
        finally:
            self.graceful.pop(job_id, None)

    @staticmethod
    def _finish_stop(s: Session, job_id: int) -> None:
        j = s.get(m.Job, job_id)
        if j.preempted_by is not None and j.status in (st.RUNNING, st.SCHEDULING):
            queueing.requeue_preempted(s, job_id)
        elif j.status == st.KILLING:
            killed(s, j)
        elif j.status == st.PAUSING:
            j.placement = None
            j.backend_state = None
            record(s, j, st.PAUSED, "paused: resources released; resume to requeue")

    async def watch_overruns(self) -> None:
        """JOB2: running jobs past their declared duration are alerted about (once a run) or stopped, as their
        on_overrun says; stop_requested then stops them like any kill, on every backend."""
        self.last_overrun_check = asyncio.get_running_loop().time()
        now = self.clock()
        rule = (await self.svc.alert_rules.builtin(self.svc))[jobrules.OVERRUN]  # job-overrun, the Alerts page
        after = rule.threshold if rule.enabled else None
        rows = await self.svc.db(lambda s: s.execute(select(m.Job.id, m.Job.started_at, m.Job.estimated_duration,
                                                            m.Job.spec)
                                                     .where(m.Job.kind != "workspace", m.Job.status == st.RUNNING,
                                                            m.Job.estimated_duration.is_not(None),
                                                            m.Job.preempted_by.is_(None))).all(),
                                 readonly=True, scheduler=True)
        self.alerted_runs &= {(r.id, r.started_at) for r in rows}  # forget runs that ended
        due = [r.id for r in rows if (r.id, r.started_at) not in self.alerted_runs and
               overrun.decide(queueing.epoch(r.started_at), r.estimated_duration,
                              (r.spec or {}).get("on_overrun", overrun.ALERT), now, False, after) is not None]
        if due:  # the write lock only when there is something to write
            alerted = await self.svc.db(self._overruns, due, now, rule, scheduler=True)
            self.alerted_runs |= {(r.id, r.started_at) for r in rows if r.id in alerted}

    @staticmethod
    def _overruns(s: Session, due: list[int], now: float, rule: jobrules.Effective) -> set[int]:
        """Alert or stop; returns the jobs whose run has had its alert (it runs on, and is not read again)."""
        # an alert this run: one written since it started (a wait alert comes before the start); read here, not
        # only remembered, so that a restarted service does not alert twice
        alerted = set(s.scalars(select(m.JobEvent.job_id).join(m.Job, m.Job.id == m.JobEvent.job_id).where(
            m.JobEvent.job_id.in_(due), m.JobEvent.status == "alert", m.JobEvent.at >= m.Job.started_at)))
        for j in s.scalars(select(m.Job).where(m.Job.id.in_(due), m.Job.status == st.RUNNING)):
            what = overrun.decide(queueing.epoch(j.started_at), j.estimated_duration,
                                  j.spec.get("on_overrun", overrun.ALERT), now, j.id in alerted,
                                  rule.threshold if rule.enabled else None)
            if what is None:
                continue
            if what[0] == overrun.STOP:
                record(s, j, st.KILLING, f"kill requested: {what[1]}")
            else:
                alert(s, j.id, what[1], queueing.from_epoch(now), rule="overrun",
                      figures={"declared_s": j.estimated_duration,
                               "ran_s": int(now - queueing.epoch(j.started_at)),
                               "threshold_s": rule.threshold}, severity=rule.severity, notify_owner=rule.notify_owners)
                alerted.add(j.id)
        return alerted

    async def watch_workspaces(self) -> int:
        """Running workspaces whose process is gone (the hub died with them, a crash) are recorded stopped, so
        that TiHub never shows them running nor counts their devices; returns how many."""
        self.last_ws_check = asyncio.get_running_loop().time()
        rows = await self.svc.db(lambda s: s.execute(select(m.Job.id, m.Job.backend_state).where(
            m.Job.kind == "workspace", m.Job.status == st.RUNNING, m.Job.backend_state.is_not(None))).all(),
            readonly=True, scheduler=True)
        gone = [(r.id, why) for r in rows if (why := await self.svc.backend.workspace_gone(r.backend_state or {}))]
        if gone:
            await self.svc.db(self._workspaces_gone, gone, scheduler=True)
        return len(gone)

    @staticmethod
    def _workspaces_gone(s: Session, gone: list[tuple[int, str]]) -> None:
        for job_id, why in gone:
            j = s.get(m.Job, job_id)
            if j.status == st.RUNNING:
                j.placement = None
                record(s, j, st.STOPPED, why)

    async def watch_running(self) -> int:
        """Observe every launched job; returns how many ended. A job whose instances start later (Kubernetes) is
        "scheduling" until they all run, its reason saying why they wait; "running" from then on."""
        jobs = await self.svc.db(lambda s: s.execute(
            select(m.Job.id, m.Job.status, m.Job.reason, m.Job.strategy, m.Job.workers, m.Job.ps,
                   m.Job.backend_state).where(
                m.Job.kind != "workspace", m.Job.status.in_((st.SCHEDULING, st.RUNNING)),
                m.Job.backend_state.is_not(None), m.Job.preempted_by.is_(None))).all(),
            readonly=True, scheduler=True)
        ended: list[tuple[int, str, int | None, str]] = []
        started: list[tuple[int, str, str]] = []
        for j in jobs:
            if not j.backend_state:
                continue
            obs = await self.svc.backend.observe_job(j.id, j.backend_state)
            roles = ["ps"] * j.ps + ["worker"] * j.workers if j.strategy == "ps" else ["worker"] * (j.workers + j.ps)
            outcome = job_outcome(j.strategy, roles, obs)
            if outcome is None:
                if j.status == st.SCHEDULING:
                    why = starting_reason(roles, obs)
                    if why is None:
                        started.append((j.id, st.RUNNING, "running"))
                    elif why != j.reason:
                        started.append((j.id, st.SCHEDULING, why))
                continue
            # ps instances never exit by themselves; a failed gang leaves survivors: stop them all
            await self.svc.backend.stop(j.id, j.backend_state, grace_seconds=2.0)
            await self.svc.backend.cleanup(j.id, j.backend_state)
            ended.append((j.id, *outcome))
        if ended or started:  # one transaction for every change seen this cycle
            await self.svc.db(self._finish_runs, ended, started, scheduler=True)
        return len(ended)

    @staticmethod
    def _finish_runs(s: Session, ended: list[tuple[int, str, int | None, str]],
                     started: Sequence[tuple[int, str, str]] = ()) -> None:
        # one read for all of them: a get() each was a query and an autoflush per job, the leader's largest
        # database cost with thousands of short jobs (benchmarks/bench_vs_kueue.py's profile)
        ids = [x[0] for x in started] + [x[0] for x in ended]
        jobs = {j.id: j for i in range(0, len(ids), 500)
                for j in s.scalars(select(m.Job).where(m.Job.id.in_(ids[i:i + 500])))}
        for job_id, status, reason in started:
            j = jobs.get(job_id)
            if j is not None and j.status == st.SCHEDULING and j.preempted_by is None:  # a kill or pause raced us
                record(s, j, status, reason)
        for job_id, status, code, reason in ended:
            j = jobs.get(job_id)
            if j is None or j.status not in (st.RUNNING, st.SCHEDULING):
                continue  # a kill or pause raced us; that path records the end
            j.exit_code = code
            record(s, j, status, reason)

    async def schedule(self, nodes: list[NodeCapacity]) -> None:
        now = self.clock()
        if now - self.typical_at >= self.svc.history_refresh_interval:
            owners = await self.svc.db(lambda s: set(s.scalars(select(m.Job.owner).distinct().where(
                m.Job.status == st.QUEUED)).all()), readonly=True, scheduler=True)
            hist = await self.svc.db(queueing.history, owners, readonly=True, scheduler=True)
            self.typical, self.typical_at = typical_durations(hist), now
        scores = self.scores.advance(now)
        status_due = now - self.last_status >= self.svc.queue_status_interval
        wait = (await self.svc.alert_rules.builtin(self.svc))[jobrules.WAIT]  # job-wait, the Alerts page
        inp = queueing.Inputs(nodes, scores, self.typical, self.svc.compute_quota_defaults, now,
                              self.svc.scheduler_backfill, wait.threshold, status_due, wait_alert=wait.enabled,
                              wait_style=(wait.severity, wait.notify_owners))
        t0 = asyncio.get_running_loop().time()
        dec = await self.svc.db(queueing.decide, inp, readonly=True, scheduler=True)
        self.phase_s = {"decide": asyncio.get_running_loop().time() - t0}
        if dec.status_deferred:
            self.dirty = True  # come back for the refresh that was put off
        else:
            self.last_status = now
        # from now on the scores advance with what is held after this decision
        admitted_holdings = [(dec.full[a.job_id].owner, dec.full[a.job_id].device_type,
                              sum(len(x.devices) for x in a.placement), now) for a in dec.admitted]
        g = self.scores.g_of(dec.holdings + admitted_holdings)
        # (preempted victims leave g at the next decision, once they are stopped)
        # saved whenever g changes: the API brings saved scores forward exactly only while g is what was saved
        save = g != self.scores.g or now - (self.scores.last_saved or 0.0) >= self.svc.usage_sample_interval
        self.scores.g = g
        if dec.empty and not save:
            return
        parts = queueing.split(dec)
        admitted: set[int] = set()
        for i, part in enumerate(parts):
            admitted |= await self.svc.db(self._apply, part, save and i == len(parts) - 1, now, scheduler=True)
        self.phase_s["apply"] = asyncio.get_running_loop().time() - t0 - self.phase_s["decide"]
        metrics.scheduled(*metrics.decided(dec, now))
        if dec.preempt:
            self.log.info("preempting job(s) %s", ", ".join(f"{v} for {j}" for v, j in dec.preempt.items()))
            # victims release their devices before anything launches on them
            await self.stop_requested()
            self.dirty = True
        # the hub's spawner launches workspaces once it sees their placement
        # only what apply admitted: a job killed, paused or refused (ops/revoke.py) meanwhile is not launched
        todo = [(dec.full[a.job_id], a.placement) for a in dec.admitted
                if a.job_id in admitted and dec.full[a.job_id].kind != "workspace"]
        if todo:
            await self.launch_all(todo)

    def _apply(self, s: Session, dec: queueing.Decisions, save: bool, now: float) -> set[int]:
        admitted = queueing.apply(s, dec)
        if save:
            self.scores.save(s, now)
        return admitted

    def launch_spec(self, job: m.Job, placement: Sequence[core.Allocation], uid: int | None = None,
                    credentials: dict[int, tuple[str, str, bytes]] | None = None) -> LaunchSpec:
        """``credentials``: registry credentials by id (server, username, encrypted password), as
        ``images.registry_credentials`` loads them; the job's is opened here, for the backend only."""
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
        mounts, scratch = list(self.svc.volume_driver.personal_mounts(job.owner)), []
        for vol in job.spec.get("volumes", []):
            if vol["kind"] == "local":
                scratch.append(vol["mount_path"])
            else:
                mounts.append(Mount(str(self.svc.volume_driver.path(vol["volume_id"])), vol["mount_path"],
                                    vol["read_only"], vol["kind"], vol["volume_id"], vol.get("volume", "")))
        # opened here, for the backend only: the values live in memory for the launch and nowhere in clear after
        secret_env = secretenv.unseal(self.svc.ops_settings.secret_key, job.spec.get(secretenv.FIELD) or {})
        auth = None
        if job.spec.get("credential_id"):
            cred = (credentials or {}).get(int(job.spec["credential_id"]))
            if cred is None:
                raise LookupError(f"its registry credential {job.spec['credential_id']} was deleted")
            auth = images.opened_login(self.svc.fernet, cred)
        return LaunchSpec(job.id, job.owner, job.name, job.kind, job.strategy, job.command, job.image,
                          {**job.spec.get("env", {}), **personal.env(mounts)}, tuple(instances), tuple(mounts),
                          # a borrowed job runs on the lender's machines (issue 18): its pool selects them
                          tuple(scratch), job.shm_mib, job.device_type,
                          (job.placement or {}).get("lent_by") or job.pool, uid,
                          rdma=bool(job.spec.get("rdma")), secret_env=secret_env, registry_auth=auth,
                          jupyter=self._jupyter(job))

    def _jupyter(self, job: m.Job) -> dict[str, Any] | None:
        """The jupyter endpoint's server: its token opened for this launch; it serves under the path the endpoint
        proxy forwards to it (endpoints/proxy.py keeps the prefix for this port)."""
        if jupyter_port(job.spec) is None:
            return None
        rec = job.spec["jupyter"]
        token = secretenv.unseal(self.svc.ops_settings.secret_key, {"t": rec["token"]})["t"]
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/ti/")  # as TiService.make_app
        return {"port": rec["port"], "token": token, "base_url": port_url(prefix, job.id, 0, rec["port"])}

    async def launch_all(self, todo: Sequence[tuple[m.Job, Sequence[core.Allocation]]]) -> None:
        """Launch admitted jobs, up to ``launch_concurrency`` at once (a Kubernetes create is mostly waiting
        on the API server), then record every outcome in one transaction."""
        gate = asyncio.Semaphore(max(1, self.svc.launch_concurrency))
        uids = await self.svc.db(unixids.ensure, {j.owner for j, _ in todo}, self.svc.ops_settings.uids,
                                 scheduler=True)
        cred_ids = {int(j.spec["credential_id"]) for j, _ in todo if j.spec.get("credential_id")}
        creds = await self.svc.db(images.registry_credentials, cred_ids, readonly=True, scheduler=True) if cred_ids else {}

        async def one(job: m.Job, placement: Sequence[core.Allocation]) -> tuple[int, Any, str | None]:
            async with gate:
                try:
                    # STO8: the owner's personal directories exist before anything mounts them
                    await asyncio.to_thread(self.svc.volume_driver.ensure_personal, job.owner)
                    spec = self.launch_spec(job, placement, uids.get(job.owner), creds)
                    return job.id, await self.svc.backend.launch(spec), None
                except Exception as e:  # a launch failure is the job's error, never the loop's
                    self.log.exception("launching job %d failed", job.id)
                    return job.id, None, f"could not start: {e}"

        results = await asyncio.gather(*(one(j, p) for j, p in todo))
        await self.svc.db(self._launched_all, results, self.svc.backend.reports_start, scheduler=True)

    @classmethod
    def _launched_all(cls, s: Session, results: Sequence[tuple[int, Any, str | None]], later: bool) -> None:
        for job_id, state, error in results:
            if error is None:
                cls._launched(s, job_id, state, later)
            else:
                cls._launch_failed(s, job_id, error)

    @staticmethod
    def _launched(s: Session, job_id: int, state: dict[str, Any], later: bool = False) -> None:
        """``later``: its instances start later (watch_running records them running when they do)."""
        j = s.get(m.Job, job_id)
        j.backend_state = state
        if j.status == st.SCHEDULING and not later:
            record(s, j, st.RUNNING, "running")

    @staticmethod
    def _launch_failed(s: Session, job_id: int, reason: str) -> None:
        j = s.get(m.Job, job_id)
        j.placement = None
        record(s, j, st.ERROR, reason)

