"""The leader's shell around the alert rules (MON2, ADM3): on each health sample, the rules that are due
(each at most every ``step`` seconds) are evaluated over the recent snapshots (domain/healthrules.py, pure), their
alerts opened and closed (ops/alertrules.py apply), and machines cordoned where a cordon rule fires -- unless
``cordon_dry_run`` (the default), where the alert only says "would cordon".

Another part of TiHub sends the notices of the alerts (email, webhook); this one only opens and closes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from traitlets import Bool, Float
from traitlets.config import LoggingConfigurable

from ..backends.base import machine_of
from ..ops import alertrules, jobrules
from ..domain.readings import Snapshot
from ..domain.healthrules import StepClock, ValueCache, evaluate

if TYPE_CHECKING:
    from .context import HealthContext


async def platform_cordon(svc: HealthContext, machine: str, schedulable: bool) -> None:
    """After a cordon or uncordon is stored: the platform's own cordon (Kubernetes: the node), then a scheduling
    cycle. A platform that refuses is logged: TiHub's table alone already decides where it places work."""
    try:
        await svc.backend.set_schedulable(machine, schedulable)
    except Exception:
        svc.log.exception("%s %s on the platform failed (TiHub's own placement follows its table anyway)",
                          "uncordoning" if schedulable else "cordoning", machine)
    svc.poke()


class AlertRules(LoggingConfigurable):
    """Evaluates the machine alert rules that admins manage (GET /alert-rules) on the leader."""

    cordon_dry_run = Bool(
        True, config=True,
        help="Dry run of automatic cordoning (SPEC MON2: on by default): a rule with cordon that fires opens its "
             "alert saying the machine 'would cordon' and changes nothing. False: the machine is taken out of "
             "scheduling at once (embedded platform: its devices; Kubernetes: the node is cordoned) until an "
             "admin puts it back (ti admin machine uncordon, the Alerts page). Running jobs keep running.")

    builtin_ttl = Float(
        5.0, config=True,
        help="Seconds the leader reuses its copy of the built-in rules about jobs and workspaces (job-overrun, "
             "job-wait, workspace-idle: the Alerts page) before reading them again: an admin's change takes "
             "effect within this, without a restart.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.builtin_cache = jobrules.RuleCache(self.builtin_ttl)
        self.steps = StepClock()
        self.cache = ValueCache()
        self.evaluations = 0

    async def builtin(self, svc: HealthContext) -> dict[str, jobrules.Effective]:
        """The built-in job and workspace rules' values now (re-read at most every builtin_ttl seconds)."""
        return await self.builtin_cache.get(lambda: svc.db(jobrules.effective, readonly=True, scheduler=True))

    def start(self, svc: HealthContext) -> None:
        """Evaluate on every health sample (the leader only: HealthMonitor samples there)."""
        self.svc = svc
        svc.health.subscribe("alert-rules", self.on_sample)

    async def on_sample(self, snap: Snapshot) -> None:
        svc = self.svc
        now = snap.at
        rules = await svc.db(alertrules.enabled, readonly=True)
        specs = [alertrules.spec(r) for r in rules]
        self.steps.keep_only(s.id for s in specs)
        due = self.steps.due(specs, now)
        if not due:
            return
        longest = max(s.interval for s in specs)
        snaps = svc.health.since(longest, now)
        node_machine = {n.name: machine_of(n) for n in svc.ops_settings.nodes or []}
        dry_run = self.cordon_dry_run
        sample_interval = svc.health.interval

        def run(session):
            # evaluated in the worker thread too: the event loop never waits for it
            holdings = evaluate(due, snaps, now, self.cache, sample_interval)
            self.cache.forget(now - longest - 1)
            return alertrules.apply(session, rules, [s.id for s in due], holdings, node_machine, dry_run)

        cordoned = await svc.db(run, scheduler=True)
        self.steps.done(due, now)
        self.evaluations += 1
        for machine in cordoned:
            self.log.warning("machine %s cordoned by an alert rule: no new work is placed there until an admin "
                             "uncordons it (running work keeps running)", machine)
            await platform_cordon(svc, machine, False)
