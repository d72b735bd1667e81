"""MON2, ADM3: machine alert rules that admins manage, and what an evaluation of them does.

Rules (db/alertrules.py) are changed through the API, the CLI and the Alerts page (custom:ti:vc:manage, like
plans: they are about the cluster's machines). SPEC MON2's defaults are seeded by migration 0015; the three
built-in rules about jobs and workspaces (job-overrun, job-wait, workspace-idle: ops/jobrules.py) by 0016. The leader
evaluates them (domain/healthrules.py, pure) on each health sample and ``apply`` turns what holds into alerts
(ops/alerts.py: one open alert per rule and machine, key ``rule:<id>:machine:<machine>``), closes those that no
longer hold, and cordons the machine when a cordon rule's alert opens (unless AlertRules.cordon_dry_run).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..db.alertrules import AlertRule
from ..db.monitoring import Alert
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict
from ..domain.placement import placed
from ..domain.healthrules import METRICS, OPS, Holding, RuleSpec
from . import alerts, audit, cordons, jobrules
from .common import get_or_404, iso, utcnow
from .jobrules import MAX_S

FIELDS = ("name", "description", "metric", "op", "threshold", "step", "interval", "percent", "severity", "enabled",
          "notify_owners", "cordon", "grace", "cpu_threshold")
# the values a threshold may take per metric (the rule, said in the 400)
THRESHOLDS: dict[str, tuple[float, float, str]] = {
    "gpu_ecc": (0, 1e9, "an error count"),
    "gpu_temperature": (-50, 200, "degrees C"),
    "cpu": (0, 100, "a percent"),
    "memory": (0, 100, "a percent"),
    "disk_free": (0, 100, "a percent"),
}
MAX_STEP = 86400
# what a cordon rule did to the machine (the alert's figures["cordon"])
CORDONED = "cordoned"
WOULD = "would cordon (dry run: AlertRules.cordon_dry_run)"
PUT_BACK = "not cordoned again: an admin put the machine back while this alert stays open"
PREFIX = "rule:"


def key(rule_id: int, machine: str) -> str:
    return f"{PREFIX}{rule_id}:machine:{machine}"


def parse(data: dict[str, Any], max_interval: float, current: AlertRule | None = None
          ) -> dict[str, Any]:
    """The fields given, checked (``current``: a change; fields it lacks keep the rule's values)."""
    v.check_fields(data, FIELDS)
    if data.get("grace") is not None and (current is None or data["grace"] != current.grace):
        # a machine rule has none: the schema says so for a new rule; a change is refused for what the rule is
        raise (Conflict if current is not None else v.ValidationError)(f"grace: {jobrules.FIXED['grace']}",
                                                                      field="grace")
    if data.get("cpu_threshold") is not None and (current is None or data["cpu_threshold"] != current.cpu_threshold):
        raise (Conflict if current is not None else v.ValidationError)(
            f"cpu_threshold: {jobrules.FIXED['cpu_threshold']}", field="cpu_threshold")
    out: dict[str, Any] = {}
    partial = current is not None
    if not partial or "name" in data:
        out["name"] = v.name(data.get("name"), "name")
    if "description" in data:
        out["description"] = v.text(data["description"], "description", 1000)
    if not partial or "metric" in data:
        out["metric"] = v.choice(data.get("metric"), "metric", METRICS)
    if not partial or "op" in data:
        out["op"] = v.choice(data.get("op"), "op", OPS)
    metric = out.get("metric", current.metric if current else "")
    if not partial or "threshold" in data or "metric" in data:
        lo, hi, what = THRESHOLDS[metric]
        raw = data.get("threshold", current.threshold if current else None)
        thr = v.number(raw, "threshold", -1e12, 1e12)
        if not lo <= thr <= hi:  # the metric given bounds it (the schema says so), else the rule's own (409)
            raise (v.ValidationError if not partial or "metric" in data else Conflict)(
                f"threshold of a {metric} rule is {what}: between {lo:g} and {hi:g}", field="threshold")
        out["threshold"] = thr
    if not partial or "step" in data:
        out["step"] = v.integer(data.get("step", 60), "step", 1, MAX_STEP)
    if not partial or "interval" in data:
        out["interval"] = v.integer(data.get("interval", 300), "interval", 1, MAX_S if partial else int(max_interval))
        if out["interval"] > max_interval:  # a change's bound is the workspace-idle rule's; a machine rule's is this
            raise Conflict(f"interval of a machine rule is at most HealthMonitor.window ({int(max_interval)} s): "
                           "the samples it looks back on", field="interval")
    if not partial or "percent" in data:
        out["percent"] = v.number(data.get("percent", 100), "percent", 0.1, 100)
    if not partial or "severity" in data:
        out["severity"] = v.choice(data.get("severity", "warning"), "severity", alerts.SEVERITIES)
    for flag, default in (("enabled", True), ("notify_owners", False), ("cordon", False)):
        if not partial or flag in data:
            out[flag] = v.boolean(data.get(flag, default), flag)
    return out


def firing(session: Session, rule_id: int | None = None) -> dict[int, list[dict[str, Any]]]:
    """Where rules fire now: their open alerts by rule id."""
    A = Alert
    prefix = PREFIX if rule_id is None else f"{PREFIX}{rule_id}:"
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for a in session.scalars(select(A).where(A.cleared_at.is_(None), A.key.startswith(prefix, autoescape=True))
                             .order_by(A.id)):
        rid = a.key.split(":")[1]
        if rid.isdigit():
            out[int(rid)].append({"alert": a.id, "machine": a.machine, "fired_at": iso(a.fired_at),
                                  "subject": a.subject, "figures": a.figures})
    return out


def render(r: AlertRule, where: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": r.id, "name": r.name, "description": r.description, "metric": r.metric, "op": r.op,
            "threshold": r.threshold, "step": r.step, "interval": r.interval, "percent": r.percent,
            "severity": r.severity, "enabled": r.enabled, "notify_owners": r.notify_owners, "cordon": r.cordon,
            "grace": r.grace, "cpu_threshold": r.cpu_threshold, "builtin": jobrules.is_builtin(r.metric),
            "created_at": iso(r.created_at), "updated_at": iso(r.updated_at), "firing": list(where or [])}


def _firing_of(session: Session, r: AlertRule) -> list[dict[str, Any]]:
    if jobrules.is_builtin(r.metric):
        return jobrules.firing(session).get(r.metric, [])
    return firing(session, r.id).get(r.id, [])


def list_rules(session: Session, actor: Actor) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "reading alert rules")
    R = AlertRule
    now = firing(session)
    builtin = jobrules.firing(session)
    items = [render(r, builtin.get(r.metric) if jobrules.is_builtin(r.metric) else now.get(r.id))
             for r in session.scalars(select(R).order_by(R.id))]
    return {"items": items, "total": len(items), "limit": len(items), "offset": 0}


def get(session: Session, actor: Actor, rule_id: int) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "reading alert rules")
    r = get_or_404(session, AlertRule, rule_id, "alert rule")
    return render(r, _firing_of(session, r))


def _unique(session: Session, name: str, rule_id: int | None = None) -> None:
    R = AlertRule
    other = session.scalar(select(R.id).where(R.name == name))
    if other is not None and other != rule_id:
        raise Conflict(f"an alert rule named {name!r} exists already", field="name")


def create(session: Session, actor: Actor, data: dict[str, Any], max_interval: float) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "defining alert rules")
    jobrules.refuse_create(data.get("metric") if isinstance(data, dict) else None)
    fields = parse(data, max_interval)
    _unique(session, fields["name"])
    now = utcnow()
    r = AlertRule(created_at=now, updated_at=now, **{"description": "", **fields})
    session.add(r)
    session.flush()
    audit.record(session, actor, "alert_rule.create", r.name, fields)
    return render(r)


def update(session: Session, actor: Actor, rule_id: int, data: dict[str, Any], max_interval: float
           ) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "changing alert rules")
    r = get_or_404(session, AlertRule, rule_id, "alert rule")
    builtin = jobrules.is_builtin(r.metric)
    fields = jobrules.parse_change(r, data, FIELDS) if builtin else parse(data, max_interval, r)
    if "name" in fields:
        _unique(session, fields["name"], r.id)
    for k, val in fields.items():
        setattr(r, k, val)
    r.updated_at = utcnow()
    if not r.enabled:  # a disabled rule fires nowhere
        if builtin:
            jobrules.close_alerts(session, r.metric)
        else:
            alerts.clear_missing(session, f"{PREFIX}{r.id}:", set())
    session.flush()
    audit.record(session, actor, "alert_rule.change", r.name, fields)
    return render(r, _firing_of(session, r))


def delete(session: Session, actor: Actor, rule_id: int) -> None:
    actor.need(S.MANAGE_VC, "deleting alert rules")
    r = get_or_404(session, AlertRule, rule_id, "alert rule")
    jobrules.refuse_delete(r)
    alerts.clear_missing(session, f"{PREFIX}{r.id}:", set())
    audit.record(session, actor, "alert_rule.delete", r.name)
    session.delete(r)


# -- evaluation (the leader) ---------------------------------------------------------------------------------
def enabled(session: Session) -> list[AlertRule]:
    R = AlertRule
    # the machine rules only: the built-in job and workspace rules are read by their own code (ops/jobrules.py)
    rules = list(session.scalars(select(R).where(R.enabled.is_(True), R.metric.in_(list(METRICS)))
                                 .order_by(R.id)))
    session.expunge_all()  # read-only snapshots for the evaluator, outside the transaction
    return rules


def spec(r: AlertRule) -> RuleSpec:
    return RuleSpec(r.id, r.name, r.metric, r.op, r.threshold, float(r.interval), r.percent, float(r.step))


def owners_by_machine(session: Session, node_machine: dict[str, str]) -> dict[str, set[str]]:
    """Owners of the work that holds devices (or cores) on each machine now."""
    out: dict[str, set[str]] = defaultdict(set)
    for owner, placement in session.execute(select(m.Job.owner, m.Job.placement)
                                            .where(m.Job.status.in_(st.HOLDING))):
        for a in placed(placement):
            out[node_machine.get(a.node, a.node.split("@")[0])].add(owner)
    return out


def describe(h: Holding, name: str) -> str:
    r = h.rule
    return (f"{name} on {h.machine}: {r.metric} {r.op} {r.threshold:g} in {h.matching} of {h.samples} samples "
            f"of the last {r.interval:g} s (worst {h.worst:g}, latest {h.latest:g})")


def apply(session: Session, rules: Iterable[AlertRule], evaluated: Iterable[int],
          holdings: Iterable[Holding], node_machine: dict[str, str], dry_run: bool) -> list[str]:
    """Open or refresh the alerts of what holds, close those of the ``evaluated`` rules that no longer hold (and
    every alert of rules that are gone or disabled), cordon where a cordon rule's alert opened. Returns the
    machines cordoned now (the shell cordons them on Kubernetes too)."""
    by_id = {r.id: r for r in rules}
    holdings = list(holdings)
    evaluated = set(evaluated)
    A = Alert
    was_open = {a.key: a for a in session.scalars(
        select(A).where(A.cleared_at.is_(None), A.key.startswith(PREFIX, autoescape=True)))}
    # what stays open: what holds now, and the alerts of enabled rules that were not due this time
    still = {k for k in was_open if _rule_id(k) in by_id and _rule_id(k) not in evaluated}
    owners = None
    if any(by_id[h.rule.id].notify_owners for h in holdings if h.rule.id in by_id):
        owners = owners_by_machine(session, node_machine)
    cordoned = cordons.cordoned_names(session)
    now_cordoned: list[str] = []
    for h in holdings:
        r = by_id.get(h.rule.id)
        if r is None:
            continue
        k = key(r.id, h.machine)
        still.add(k)
        figures = h.figures()
        subject = describe(h, r.name)
        message = f"Alert rule {r.name!r} ({METRICS[r.metric]}) holds on machine {h.machine}."
        if r.cordon:
            was = was_open.get(k)
            if h.machine in cordoned:
                figures["cordon"] = CORDONED
            elif dry_run:
                figures["cordon"] = WOULD
            elif was is not None and (was.figures or {}).get("cordon") in (CORDONED, PUT_BACK):
                # an admin put the machine back while the alert stays open: their word stands until it clears
                figures["cordon"] = PUT_BACK
            else:
                cordons.add(session, cordons.AUTO, h.machine, subject, rule=r.name)
                cordoned.add(h.machine)
                now_cordoned.append(h.machine)
                figures["cordon"] = CORDONED
            message += " Machine: " + figures["cordon"] + "."
        users = sorted(owners.get(h.machine, ())) if owners is not None and r.notify_owners else []
        alerts.fire(session, k, "machine", subject, message, rule=r.name, severity=r.severity, users=users,
                    machine=h.machine, figures=figures)
    # closes what no longer holds, and the alerts of rules deleted or disabled meanwhile (the API clears those
    # too; this catches any left)
    alerts.clear_missing(session, PREFIX, still)
    return now_cordoned


def _rule_id(alert_key: str) -> int | None:
    rid = alert_key.split(":")[1] if alert_key.count(":") >= 1 else ""
    return int(rid) if rid.isdigit() else None
