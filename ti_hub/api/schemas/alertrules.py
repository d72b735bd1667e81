"""Schemas of alert rules (machine rules, and the built-in job and workspace rules) and cordoned machines (MON2,
ADM3)."""

from __future__ import annotations

from ...domain.healthrules import METRICS, OPS
from ...ops.alertrules import MAX_STEP, THRESHOLDS
from ...ops.jobrules import MAX_S
from ...ops.jobrules import METRICS as JOB_METRICS
from ...ops.alerts import SEVERITIES
from ..contract import Param
from .common import (ANY_OBJECT, BOOL, ID, MAYBE_TIME, NAME, NUM, STR, TIME, answer, array, enum, integer, limited,
                     nullable, number, obj, string, text)

ALL_METRICS = {**METRICS, **JOB_METRICS}

RULE_FIELDS = {
    "name": NAME, "description": text(1000),
    "metric": enum(ALL_METRICS, "what is measured: " + "; ".join(f"{k}: {d}" for k, d in ALL_METRICS.items()) +
                   " (job_overrun, job_wait and workspace_idle are built in: one rule each, not created nor "
                   "deleted)"),
    "op": enum(OPS, "how a sample compares with the threshold"),
    "threshold": number(-1e12, 1e12, "the value compared with (a percent for cpu, memory and disk_free; degrees C; "
                                     "an error count; for the built-in rules, seconds or a percent)"),
    "step": integer(1, MAX_STEP, "seconds between two evaluations"),
    "interval": limited(integer(1, description="seconds looked back (at most HealthMonitor.window)"),
                        "HealthMonitor.window"),
    "percent": number(0.1, 100, "fires when at least this percent of the machine's samples in the interval match"),
    "severity": enum(SEVERITIES), "enabled": BOOL,
    "notify_owners": BOOL, "cordon": BOOL,
    "grace": nullable(integer(0, MAX_S, "workspace-idle only: seconds from the warning to the reclaim")),
    "cpu_threshold": nullable(number(0, 100, "workspace-idle only: a workspace is idle when it also uses under this "
                                             "percent of its plan's CPUs")),
}
# a machine metric bounds its threshold: said when the metric is given (a change without one: the rule's, 409)
THRESHOLD_RULES = [{"if": {"properties": {"metric": {"const": metric}}, "required": ["metric"]},
                    "then": {"properties": {"threshold": number(lo, hi, f"{what}, for a {metric} rule")}}}
                   for metric, (lo, hi, what) in THRESHOLDS.items()]
NEW_RULE = obj({**RULE_FIELDS, "grace": {"type": "null", "description": "machine rules have none"},
                "cpu_threshold": {"type": "null", "description": "machine rules have none"}},
               ["name", "metric", "op", "threshold"], title="NewAlertRule", allOf=THRESHOLD_RULES,
               description="a machine rule (a built-in metric has its one rule already: 409)")
RULE_CHANGE = obj({**RULE_FIELDS, "interval": integer(1, MAX_S, "seconds looked back: at most HealthMonitor.window "
                                                                "for a machine rule (409), 30 days for "
                                                                "workspace-idle's idle time")},
                  description="the fields to change; a built-in rule's fixed fields, and grace but on "
                                           "workspace-idle, are refused with 409 unless they keep its value",
                  allOf=THRESHOLD_RULES)
FIRING = answer({"alert": ID, "machine": STR, "fired_at": TIME, "subject": STR, "figures": ANY_OBJECT},
                title="RuleFiring", description="an open alert of the rule: where it fires now")
RULE = answer({"id": ID, "name": STR, "description": STR, "metric": STR, "op": STR, "threshold": NUM,
               "step": integer(1), "interval": integer(1), "percent": NUM, "severity": STR, "enabled": BOOL,
               "notify_owners": BOOL, "cordon": BOOL,
               "grace": nullable(integer(0, None, "workspace-idle: seconds from the warning to the reclaim; null "
                                         "for the other rules")),
               "cpu_threshold": nullable(number(0, 100, "workspace-idle: the percent of a workspace's CPUs under "
                                                        "which its CPU is idle; null for the other rules")),
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
