"""WS6: TiHub's idle policy, on the leader: at every health sample, each running workspace is judged from its
devices' idle runs and its CPU's (ti_hub/domain/idle.py; the CPU seconds its processes used, read from the backend
off the event loop); an idle one is warned (an alert and a history line), then reclaimed after the grace unless its
owner renews its lease (POST /workspaces/{owner}/{name}/lease). Whether it runs, the GPU and CPU thresholds, the
idle time and the grace are the built-in alert rule ``workspace-idle`` that
admins manage in the Alerts page (ops/jobrules.py), re-read every few seconds; the exempt users and groups are site
policy and stay traits here.

Activity-based culling (no browser or kernel activity) is jupyterhub-idle-culler's, a hub service
(ti_hub/hub/config.py configure_culler); this policy judges the devices and the CPU, which the culler cannot see.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from traitlets import Float, Set, Unicode
from traitlets.config import LoggingConfigurable

from ..db import models as m
from ..domain.errors import HubUnavailable
from ..domain import idle
from ..domain.readings import Snapshot
from ..metrics import process as process_metrics
from ..ops import idle as ops
from ..ops import jobrules
from ..hubclient import api as hubapi
from ..ops import queueing

if TYPE_CHECKING:
    from ..health.alerting import AlertRules
    from ..health.context import HealthContext

    class IdleContext(HealthContext, Protocol):
        alert_rules: AlertRules  # the built-in rules' thresholds (workspace-idle)


class IdlePolicy(LoggingConfigurable):
    """Warns about, then reclaims, workspaces whose devices sit idle (SPEC WS6, MON3)."""

    exempt_users = Set(
        Unicode(), default_value=set(), config=True,
        help="Users whose workspaces are never warned nor reclaimed.")
    exempt_groups = Set(
        Unicode(), default_value=set(), config=True,
        help="Hub groups whose members' workspaces are never warned nor reclaimed (membership as the hub says, "
             "re-read every `groups_ttl` seconds).")
    groups_ttl = Float(
        60.0, config=True, help="Seconds the hub's group membership is reused before it is read again.")

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs):
        super().__init__(**kwargs)
        self.clock = clock
        self.svc: IdleContext | None = None
        self._members: dict[str, set[str]] = {}
        self._members_at = float("-inf")
        self.warned: set[int] = set()  # the workspaces warned at the last sample
        self.first = True
        self.reclaims = 0
        self.runs: idle.IdleRuns | None = None  # made at the first sample the rule is enabled
        self.cpu: idle.CpuRuns | None = None  # likewise
        self.enabled = False

    def start(self, svc: IdleContext) -> None:
        """On the leader only (serve()): judge every health sample while the rule workspace-idle is enabled."""
        self.svc = svc
        if svc.health.interval <= 0:
            self.log.warning("idle policy: HealthMonitor.interval is 0 (no health samples): no workspace will be "
                             "warned nor reclaimed, whatever the rule workspace-idle says")
            return
        svc.health.subscribe("idle", self.evaluate)

    def follow(self, rule: jobrules.Effective, sample_interval: float) -> idle.IdleRuns:
        """The idle runs for the rule's values now: a new threshold starts them afresh."""
        keep = rule.interval + rule.grace + 2 * max(sample_interval, 1.0)
        if self.runs is None or self.runs.threshold != rule.threshold:
            self.runs = idle.IdleRuns(rule.threshold, keep)
        self.runs.keep = keep
        if self.cpu is None or self.cpu.threshold != rule.cpu_threshold:
            self.cpu = idle.CpuRuns(rule.cpu_threshold, keep)
        self.cpu.keep = keep
        if not self.enabled:
            self.log.info("idle policy (rule workspace-idle): workspaces with devices below %.1f %% and CPU below "
                          "%.1f %% for %.0f s are warned, then reclaimed after %.0f s", rule.threshold,
                          rule.cpu_threshold, rule.interval, rule.grace)
        self.enabled = True
        return self.runs

    async def exempt_groups_members(self) -> dict[str, set[str]]:
        """The exempt groups' members as the hub says (the last answer when the hub does not answer)."""
        if not self.exempt_groups:
            return {}
        now = self.clock()
        if now - self._members_at >= self.groups_ttl:
            try:
                groups, _ = await hubapi.hub_list(self.svc.hub_auth(), "groups")
                self._members = {g["name"]: set(g.get("users") or ()) for g in groups
                                 if g.get("name") in self.exempt_groups}
                self._members_at = now
            except HubUnavailable as e:
                self.log.warning("idle policy: the hub's groups could not be read (%s); exempting the last known "
                                 "members", e)
        return self._members

    async def evaluate(self, snapshot: Snapshot) -> None:
        svc = self.svc
        rule = (await svc.alert_rules.builtin(svc))[jobrules.IDLE]
        if not rule.enabled:
            await self.disabled()
            return
        runs = self.follow(rule, svc.health.interval)
        held = await svc.db(ops.running_workspaces, readonly=True, scheduler=True)
        runs.add(snapshot)
        self.cpu.add(snapshot.at, await self.cpu_sample(held) if held else {})
        members = await self.exempt_groups_members() if held else {}
        warn, reclaim, warned = [], [], set()
        for w in held:
            groups = [g for g, users in members.items() if w.owner in users]
            if idle.exempt(w.owner, groups, self.exempt_users, self.exempt_groups):
                continue
            v = idle.decide(runs, w.devices, now=snapshot.at, idle_time=rule.interval,
                            grace=rule.grace, started_at=queueing.epoch(w.started_at),
                            renewed_at=queueing.epoch(w.renewed_at), warned_at=queueing.epoch(w.warned_at),
                            cpu=self.cpu, job=w.id, cpus=w.cpus)
            if v.state == idle.WARN:
                warned.add(w.id)
                if v.figures:  # a new warning (one given already stands as it was)
                    warn.append((w.id, v.figures))
            elif v.state == idle.RECLAIM:
                reclaim.append((w.id, v.figures))
        # the write lock only when there is something to write: a warning or a reclaim, or alerts to close (of
        # workspaces warned at the last sample and not now, or, at the first sample, left by an earlier run)
        if not (warn or reclaim or (self.warned - warned) or self.first):
            self.warned = warned
            return
        now = queueing.from_epoch(snapshot.at)

        def write(s):
            for job_id, figures in warn:
                if ops.warn(s, job_id, figures, now, severity=rule.severity, notify_owner=rule.notify_owners):
                    self.log.info("idle policy: workspace %d warned: %s", job_id, figures)
            done = [job_id for job_id, figures in reclaim if ops.reclaim(s, job_id, figures, now)]
            ops.clear_others(s, warned, now)
            return [(j.id, j.pool, j.device_type) for j in (s.get(m.Job, i) for i in done) if j is not None]

        done = await svc.db(write, scheduler=True)
        self.first = False
        self.warned = warned
        if done:
            self.reclaims += len(done)
            for _id, pool, device_type in done:
                process_metrics.reclaimed(pool, device_type)  # ti_workspace_reclaims_total
            self.log.info("idle policy: workspaces %s reclaimed (their devices were idle)", [d[0] for d in done])
            svc.poke()  # the loop has the hub stop them now, and their devices go to the queue

    async def cpu_sample(self, held: list[ops.Held]) -> dict[int, tuple[float, float]] | None:
        """Each workspace's CPU seconds so far and its CPUs; None where the backend cannot tell (the devices alone
        judge); {} when reading failed (logged: no workspace is idle by its CPU this time)."""
        try:
            used = await self.svc.backend.workspace_cpu_seconds({w.id: w.state for w in held if w.state})
        except NotImplementedError:
            return None
        except Exception:
            self.log.exception("idle policy: reading the workspaces' CPU use")
            return {}
        cpus = {w.id: w.cpus for w in held}
        return {i: (seconds, cpus[i]) for i, seconds in used.items() if i in cpus}

    async def disabled(self) -> None:
        """The rule is disabled: nobody is warned nor reclaimed, and the warnings left open close (once)."""
        if self.enabled:
            self.log.info("idle policy: the rule workspace-idle is disabled: no workspace is warned nor reclaimed")
        self.enabled = False
        self.runs = self.cpu = None  # an idle spell counts from when the rule is enabled again
        if self.warned or self.first:
            await self.svc.db(ops.clear_others, set(), scheduler=True)
            self.warned, self.first = set(), False
