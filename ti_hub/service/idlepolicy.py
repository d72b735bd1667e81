"""WS6: TiHub's device-aware idle policy, on the leader: at every health sample, each running workspace that holds
devices is judged from its devices' idle runs (ti_hub/health/idle.py); an idle one is warned (an alert and a history
line), then reclaimed after the grace unless its owner renews its lease (POST /workspaces/{owner}/{name}/lease).

Activity-based culling (no browser or kernel activity) is jupyterhub-idle-culler's, a hub service
(ti_hub/hub_config.py configure_culler); this policy judges the devices, which the culler cannot see.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from traitlets import Float, Set, Unicode
from traitlets.config import LoggingConfigurable

from ..db import models as m
from ..domain.errors import HubUnavailable
from ..health import idle
from ..health.readings import Snapshot
from ..metrics import process as process_metrics
from ..ops import idle as ops
from . import hubapi, queueing

if TYPE_CHECKING:
    from .app import TiService


class IdlePolicy(LoggingConfigurable):
    """Warns about, then reclaims, workspaces whose devices sit idle (SPEC WS6, MON3)."""

    idle_time = Float(
        0.0, config=True,
        help="Seconds a running workspace's devices must all stay below `threshold` percent utilization, in every "
             "health sample, before its owner is warned. 0 (the default): the policy is off. The health sampler "
             "(HealthMonitor.interval) must run.")
    grace = Float(
        1800.0, config=True,
        help="Seconds between the warning and the reclaim (the workspace is stopped and its devices go back to the "
             "queue), unless its owner renews the lease or the devices get busy again.")
    threshold = Float(
        5.0, config=True,
        help="Utilization percent below which a device counts as idle. A reading that measures no utilization "
             "(demo devices, a source that cannot tell) never counts as idle.")
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
        self.svc: TiService | None = None
        self._members: dict[str, set[str]] = {}
        self._members_at = float("-inf")
        self.warned: set[int] = set()  # the workspaces warned at the last sample
        self.first = True
        self.reclaims = 0
        self.runs = idle.IdleRuns(self.threshold, 0.0)

    def start(self, svc: TiService) -> None:
        """On the leader only (serve()): judge every health sample."""
        self.svc = svc
        self.runs = idle.IdleRuns(self.threshold, self.idle_time + self.grace + 2 * max(svc.health.interval, 1.0))
        if self.idle_time > 0 and svc.health.interval <= 0:
            self.log.warning("idle policy: IdlePolicy.idle_time is set but HealthMonitor.interval is 0 (no health "
                             "samples): no workspace will be warned nor reclaimed")
        elif self.idle_time > 0:
            self.log.info("idle policy: workspaces with devices below %.1f %% for %.0f s are warned, then "
                          "reclaimed after %.0f s", self.threshold, self.idle_time, self.grace)
            svc.health.subscribe("idle", self.evaluate)

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
        held = await svc.db(ops.holding_devices, readonly=True, scheduler=True)
        self.runs.add(snapshot)
        members = await self.exempt_groups_members() if held else {}
        warn, reclaim, warned = [], [], set()
        for w in held:
            groups = [g for g, users in members.items() if w.owner in users]
            if idle.exempt(w.owner, groups, self.exempt_users, self.exempt_groups):
                continue
            v = idle.decide(self.runs, w.devices, now=snapshot.at, idle_time=self.idle_time,
                            grace=self.grace, started_at=queueing.epoch(w.started_at),
                            renewed_at=queueing.epoch(w.renewed_at), warned_at=queueing.epoch(w.warned_at))
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
                if ops.warn(s, job_id, figures, now):
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
