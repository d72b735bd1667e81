"""Schemas of alert rules (machine rules, and the built-in job and workspace rules) and cordoned machines (MON2,
ADM3)."""

from __future__ import annotations

from ...health.rules import METRICS, OPS
from ...ops.jobrules import METRICS as JOB_METRICS
from ...ops.alerts import SEVERITIES
from ..contract import Param
from .common import (ANY_OBJECT, BOOL, ID, MAYBE_TIME, NAME, NUM, STR, TEXT, TIME, answer, array, enum, integer,
                     nullable, number, obj, string)

ALL_METRICS = {**METRICS, **JOB_METRICS}

RULE_FIELDS = {
    "name": NAME, "description": TEXT,
    "metric": enum(ALL_METRICS, "what is measured: " + "; ".join(f"{k}: {d}" for k, d in ALL_METRICS.items()) +
                   " (job_overrun, job_wait and workspace_idle are built in: one rule each, not created nor "
                   "deleted)"),
    "op": enum(OPS, "how a sample compares with the threshold"),
    "threshold": number(description="the value compared with (a percent for cpu, memory and disk_free; degrees C; "
                                    "an error count)"),
    "step": integer(1, 86400, "seconds between two evaluations"),
    "interval": integer(1, None, "seconds looked back (at most HealthMonitor.window)"),
    "percent": number(description="fires when at least this percent of the machine's samples in the interval "
                                  "match (0.1-100)"),
    "severity": enum(SEVERITIES), "enabled": BOOL,
    "notify_owners": BOOL, "cordon": BOOL,
    "grace": nullable(integer(0, None, "workspace-idle only: seconds from the warning to the reclaim")),
}
NEW_RULE = obj(RULE_FIELDS, ["name", "metric", "op", "threshold"], title="NewAlertRule")
RULE_CHANGE = obj(RULE_FIELDS, description="the fields to change")
FIRING = answer({"alert": ID, "machine": STR, "fired_at": TIME, "subject": STR, "figures": ANY_OBJECT},
                title="RuleFiring", description="an open alert of the rule: where it fires now")
RULE = answer({"id": ID, "name": STR, "description": STR, "metric": STR, "op": STR, "threshold": NUM,
               "step": integer(1), "interval": integer(1), "percent": NUM, "severity": STR, "enabled": BOOL,
               "notify_owners": BOOL, "cordon": BOOL,
               "grace": nullable(integer(0, None, "workspace-idle: seconds from the warning to the reclaim; null "
                                         "for the other rules")),
               "builtin": {**BOOL, "description": "a built-in rule about jobs or workspaces (job-overrun, "
                           "job-wait, workspace-idle): one each, never created nor deleted; op, percent, step "
                           "and cordon fixed"},
               "created_at": TIME, "updated_at": TIME,
               "firing": array(FIRING)}, title="AlertRule")
RULE_PAGE = answer({"items": array(RULE), "total": integer(0), "limit": integer(0), "offset": integer(0)})
CORDON = answer({"machine": STR, "cordoned": BOOL, "at": MAYBE_TIME, "by": STR, "rule": STR, "reason": STR},
                title="Cordon", description="whether a machine is out of scheduling, since when, by whom and why")
CORDON_PAGE = answer({"items": array(CORDON), "total": integer(0), "limit": integer(0), "offset": integer(0)})
CORDON_BODY = obj({"reason": string(1000, description="why (shown on the Alerts page and in the audit log)")},
                  title="CordonReason")
MACHINE_PARAM = Param(string(255, 1, "a machine (Kubernetes: a node) by name"), "the machine")
