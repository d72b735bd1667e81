"""MON2-3, JOB2, WS6: the built-in alert rules about jobs and workspaces, managed with the machine rules.

Three rows of ti_alert_rules (seeded by migration 0016) are built in: ``job-overrun`` (a running job past its
declared duration), ``job-wait`` (a queued job past its estimated start) and ``workspace-idle`` (the device-aware
idle policy). Admins enable, disable and change their thresholds in the Alerts page, the API (PATCH
/alert-rules/{id}) and ``ti admin alert-rule update``; they cannot be created a second time nor deleted, and the
fields that mean nothing for them are fixed (``FIXED``). The leader reads their effective values (``Effective``)
through ``RuleCache`` at most every few seconds: the overrun check (service/loop.py), the wait alert
(ops/queueing.py) and the idle policy (tasks/idlepolicy.py) follow them without a restart.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.alertrules import AlertRule
from ..db.monitoring import Alert
from ..domain import validation as v
from ..domain.errors import Conflict
from . import alerts
from .common import iso, utcnow

OVERRUN, WAIT, IDLE = "job_overrun", "job_wait", "workspace_idle"
# metric -> what it is about (the API's, the CLI's and the page's help)
METRICS: dict[str, str] = {
    OVERRUN: "a running job past its declared duration (on_overrun 'alert'): threshold = seconds past it",
    WAIT: "a queued job past its estimated start: threshold = seconds past it",
    IDLE: "a running workspace's devices (if any) below threshold % GPU utilization and its CPU below "
          "cpu_threshold % of its plan's CPUs for interval seconds: warned, then stopped grace seconds later unless "
          "its lease is renewed",
}
NAMES = {OVERRUN: "job-overrun", WAIT: "job-wait", IDLE: "workspace-idle"}
# the ``rule`` of the alerts each opens (ops/jobs.py ALERT_SUBJECTS, ops/idle.py): unchanged from before the rules
ALERT_RULE = {OVERRUN: "overrun", WAIT: "wait", IDLE: "idle"}
ALERT_KIND = {OVERRUN: "job", WAIT: "job", IDLE: "workspace"}
MAX_S = 30 * 86400
# threshold bounds per metric (the rule, said in the 400)
THRESHOLDS: dict[str, tuple[float, float, str]] = {
    OVERRUN: (0, MAX_S, "seconds past the declared duration"),
    WAIT: (0, MAX_S, "seconds past the estimated start"),
    IDLE: (0, 100, "a GPU utilization percent"),
}
# fields an admin may change, per metric; every other field is fixed, for the reason said in FIXED
CHANGEABLE = {
    OVERRUN: {"description", "threshold", "severity", "enabled", "notify_owners"},
    WAIT: {"description", "threshold", "severity", "enabled", "notify_owners"},
    IDLE: {"description", "threshold", "interval", "grace", "cpu_threshold", "severity", "enabled",
           "notify_owners"},
}
FIXED = {
    "name": "the built-in rules keep their names (the docs and scripts find them by name)",
    "metric": "a built-in rule keeps its metric",
    "op": "its comparison is fixed",
    "percent": "it judges each job or workspace as a whole, not a share of samples",
    "step": "it is checked at every scheduling cycle or health sample",
    "cordon": "it is about jobs and workspaces, not machines",
    "interval": "it has no look-back window (only workspace-idle's interval, the idle time, is set)",
    "grace": "only workspace-idle has a grace (seconds from the warning to the reclaim)",
    "cpu_threshold": "only workspace-idle has a CPU threshold (a percent of a workspace's CPUs)",
}


@dataclass(frozen=True)
class Effective:
    """What the running code uses of a built-in rule."""

    enabled: bool
    threshold: float
    interval: float = 0.0  # workspace_idle: the idle time
    grace: float = 0.0  # workspace_idle: seconds from the warning to the reclaim
    severity: str = "warning"
    notify_owners: bool = True
    cpu_threshold: float = 5.0  # workspace_idle: a percent of the workspace's plan CPUs


# migration 0016's values: used only if a row is missing (it cannot be deleted through TiHub)
DEFAULTS = {OVERRUN: Effective(True, 0.0), WAIT: Effective(True, 60.0),
            IDLE: Effective(False, 5.0, 3600.0, 1800.0)}


def is_builtin(metric: str) -> bool:
    return metric in METRICS


def refuse_create(metric: Any) -> None:
    if isinstance(metric, str) and metric in METRICS:
        raise Conflict(f"a {metric} rule is built in ({NAMES[metric]}): there is exactly one; change it with "
                       f"PATCH /alert-rules/{{id}} or `ti admin alert-rule update {NAMES[metric]}`", field="metric")


def refuse_delete(r: AlertRule) -> None:
    if r.metric in METRICS:
        raise Conflict(f"alert rule {r.name} is built in and cannot be deleted: disable it instead "
                       f"(`ti admin alert-rule update {r.name} --no-enabled`)", field="id")


def parse_change(r: AlertRule, data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The change asked of the built-in rule ``r``, checked. A fixed field given with another value than its own is
    refused with a 400 naming it and why; given with its own value, it is ignored."""
    v.check_fields(data, fields)
    metric = r.metric
    out: dict[str, Any] = {}
    for k, val in data.items():
        if k in CHANGEABLE[metric]:
            continue
        current = getattr(r, k)
        if val != current and not (isinstance(current, float) and isinstance(val, (int, float))
                                   and not isinstance(val, bool) and float(val) == current):
            raise Conflict(f"{k} of the built-in rule {r.name} cannot be changed: {FIXED[k]}", field=k)
    if "description" in data:
        out["description"] = v.text(data["description"], "description", 1000)
    if "threshold" in data:
        lo, hi, what = THRESHOLDS[metric]
        thr = v.number(data["threshold"], "threshold", -1e12, 1e12)
        if not lo <= thr <= hi:
            raise Conflict(f"threshold of the rule {r.name} is {what}: between {lo:g} and {hi:g}",
                           field="threshold")
        out["threshold"] = thr
    if metric == IDLE:
        if "interval" in data:
            out["interval"] = v.integer(data["interval"], "interval", 1, MAX_S)
        if data.get("grace") is not None:  # null: unchanged, as for the other rules
            out["grace"] = v.integer(data["grace"], "grace", 0, MAX_S)
        if data.get("cpu_threshold") is not None:
            cpu = v.number(data["cpu_threshold"], "cpu_threshold", -1e12, 1e12)
            if not 0 <= cpu <= 100:
                raise Conflict(f"cpu_threshold of the rule {r.name} is a percent of a workspace's CPUs: between 0 "
                               f"and 100", field="cpu_threshold")
            out["cpu_threshold"] = cpu
    if "severity" in data:
        out["severity"] = v.choice(data["severity"], "severity", alerts.SEVERITIES)
    for flag in ("enabled", "notify_owners"):
        if flag in data:
            out[flag] = v.boolean(data[flag], flag)
    return out


def close_alerts(session: Session, metric: str) -> list[str]:
    """A built-in rule was disabled: its open alerts close (as a disabled machine rule's do)."""
    A = Alert
    closed = []
    for a in session.scalars(select(A).where(A.cleared_at.is_(None), A.kind == ALERT_KIND[metric],
                                             A.rule == ALERT_RULE[metric])):
        a.cleared_at = utcnow()
        closed.append(a.key)
    return closed


def firing(session: Session) -> dict[str, list[dict[str, Any]]]:
    """The open alerts of each built-in rule, by metric (the list shows where each fires now)."""
    A = Alert
    by_rule = {(ALERT_KIND[k], ALERT_RULE[k]): k for k in METRICS}
    out: dict[str, list[dict[str, Any]]] = {}
    for a in session.scalars(select(A).where(A.cleared_at.is_(None), A.rule.in_(list(ALERT_RULE.values())))
                             .order_by(A.id)):
        metric = by_rule.get((a.kind, a.rule))
        if metric is not None:
            out.setdefault(metric, []).append({"alert": a.id, "machine": a.machine, "fired_at": iso(a.fired_at),
                                               "subject": a.subject, "figures": a.figures})
    return out


def effective(session: Session) -> dict[str, Effective]:
    """The built-in rules' values now, by metric."""
    R = AlertRule
    out = dict(DEFAULTS)
    for r in session.scalars(select(R).where(R.metric.in_(list(METRICS))).order_by(R.id)):
        idle = r.metric == IDLE  # interval and grace mean something for workspace-idle only
        out[r.metric] = Effective(bool(r.enabled), float(r.threshold), float(r.interval) if idle else 0.0,
                                  float(r.grace if idle and r.grace is not None else DEFAULTS[r.metric].grace),
                                  r.severity, bool(r.notify_owners),
                                  float(r.cpu_threshold if idle and r.cpu_threshold is not None
                                        else DEFAULTS[r.metric].cpu_threshold))
    return out


class RuleCache:
    """The leader's copy of the built-in rules, re-read at most every ``ttl`` seconds (an admin's change reaches
    the overrun check, the wait alert and the idle policy within that, without a restart), or at the next read
    after ``invalidate`` (a change made in the leader's own process)."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self.clock = clock
        self.values: dict[str, Effective] | None = None
        self.at = float("-inf")

    def invalidate(self) -> None:
        self.at = float("-inf")

    async def get(self, read: Callable[[], Awaitable[dict[str, Effective]]]) -> dict[str, Effective]:
        now = self.clock()
        if self.values is None or now - self.at >= self.ttl:
            self.values = await read()
            self.at = now
        return self.values
