"""The built-in rules about jobs and workspaces on the database (ops/jobrules.py, migration 0016): seeded once
with their defaults, listed with the machine rules, refused a second creation and a deletion, their fixed fields
refused by name, changes audited and read back as the leader's effective values; disabling one closes its alerts;
job-wait and job-overrun decide whether and when their alerts open, with the rule's severity and owners."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from ti_hub.db import models as m
from ti_hub.domain.errors import Conflict, Forbidden
from ti_hub.ops import alertrules, alerts, jobrules
from ti_hub.ops import queueing
from ti_hub.service.loop import JobRunner as Runner

from test_live_queue import ADMIN, NODE, NOW, make_running, row, submit, user

WINDOW = 3600.0


def by_name(db) -> dict[str, dict]:
    with db.begin() as s:
        return {r["name"]: r for r in alertrules.list_rules(s, ADMIN)["items"]}


def change(db, name: str, data: dict) -> dict:
    rid = by_name(db)[name]["id"]
    with db.begin() as s:
        return alertrules.update(s, ADMIN, rid, data, WINDOW)


def test_the_three_rules_are_seeded_with_the_old_defaults(db):
    rules = by_name(db)
    over, wait, idle = rules["job-overrun"], rules["job-wait"], rules["workspace-idle"]
    assert all(r["builtin"] for r in (over, wait, idle)) and not rules["cpu-busy"]["builtin"]
    assert (over["metric"], over["threshold"], over["enabled"], over["grace"]) == ("job_overrun", 0.0, True, None)
    assert (wait["metric"], wait["threshold"], wait["enabled"]) == ("job_wait", 60.0, True)
    assert (idle["metric"], idle["threshold"], idle["interval"], idle["grace"], idle["enabled"]) == \
        ("workspace_idle", 5.0, 3600, 1800, False)
    assert rules["cpu-busy"]["grace"] is None
    with db.begin() as s:
        eff = jobrules.effective(s)
    assert eff == jobrules.DEFAULTS
    with db.begin() as s:  # the machine evaluator never sees them
        assert {r.metric for r in alertrules.enabled(s)} <= {"gpu_ecc", "gpu_temperature", "cpu", "memory",
                                                             "disk_free"}


def test_built_in_rules_are_not_created_twice_nor_deleted(db):
    with db.begin() as s, pytest.raises(Conflict) as e:
        alertrules.create(s, ADMIN, {"name": "late2", "metric": "job_wait", "op": ">", "threshold": 5}, WINDOW)
    assert e.value.field == "metric" and "built in (job-wait)" in str(e.value)
    rid = by_name(db)["workspace-idle"]["id"]
    with db.begin() as s, pytest.raises(Conflict) as e:
        alertrules.delete(s, ADMIN, rid)
    assert "workspace-idle is built in and cannot be deleted" in str(e.value)
    assert "workspace-idle" in by_name(db)
    with db.begin() as s, pytest.raises(Forbidden):
        alertrules.update(s, user("dee"), rid, {"enabled": True}, WINDOW)


def test_changes_are_checked_stored_audited_and_effective(db):
    for data, fld in (({"op": "<"}, "op"), ({"cordon": True}, "cordon"), ({"grace": 5}, "grace"),
                      ({"threshold": -3}, "threshold"), ({"name": "late"}, "name")):
        with db.begin() as s, pytest.raises(Conflict) as e:  # fine for another rule: 409
            alertrules.update(s, ADMIN, by_name(db)["job-wait"]["id"], data, WINDOW)
        assert e.value.field == fld and "job-wait" in str(e.value)
    assert by_name(db)["job-wait"]["threshold"] == 60.0  # nothing stored
    out = change(db, "job-wait", {"threshold": 120, "severity": "critical"})
    assert (out["threshold"], out["severity"], out["op"]) == (120.0, "critical", ">")
    assert by_name(db)["workspace-idle"]["cpu_threshold"] == 5.0  # migration 0020's
    assert by_name(db)["job-wait"]["cpu_threshold"] is None
    with db.begin() as s, pytest.raises(Conflict) as e:  # a percent of the workspace's CPUs
        alertrules.update(s, ADMIN, by_name(db)["workspace-idle"]["id"], {"cpu_threshold": 150}, WINDOW)
    assert e.value.field == "cpu_threshold" and "between 0 and 100" in str(e.value)
    with db.begin() as s, pytest.raises(Conflict) as e:  # only workspace-idle has one
        alertrules.update(s, ADMIN, by_name(db)["job-wait"]["id"], {"cpu_threshold": 5}, WINDOW)
    assert e.value.field == "cpu_threshold"
    out = change(db, "workspace-idle", {"enabled": True, "threshold": 10, "interval": 600, "grace": 60,
                                        "notify_owners": False, "cpu_threshold": 12.5})
    assert (out["enabled"], out["threshold"], out["interval"], out["grace"], out["cpu_threshold"]) == (
        True, 10.0, 600, 60, 12.5)
    with db.begin() as s:
        eff = jobrules.effective(s)
        actions = [(e.action, e.target) for e in s.scalars(select(m.AuditEntry).order_by(m.AuditEntry.id))]
    assert eff[jobrules.WAIT] == jobrules.Effective(True, 120.0, 0.0, 0.0, "critical", True)
    assert eff[jobrules.IDLE] == jobrules.Effective(True, 10.0, 600.0, 60.0, "warning", False, 12.5)
    assert ("alert_rule.change", "job-wait") in actions and ("alert_rule.change", "workspace-idle") in actions


def decide(db, settings, now: float, rule: jobrules.Effective) -> queueing.Decisions:
    inp = queueing.Inputs([NODE], None, {}, settings.compute_defaults, now, alert_grace_s=rule.threshold,
                          wait_alert=rule.enabled, wait_style=(rule.severity, rule.notify_owners))
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    with db.begin() as s:
        queueing.apply(s, dec)
    return dec


def test_job_wait_decides_whether_when_and_how_the_wait_alert_opens(seeded, settings):
    db = seeded
    holder = submit(db, settings, "cid", "holder", estimated_duration=50)
    make_running(db, holder, [0, 1, 2, 3], NOW - 10)
    waiting = submit(db, settings, "dee", "late-one")
    # (small figures: past the holder's own estimate, the shown start moves more than ESTIMATE_SLACK_S later on)
    on = jobrules.Effective(True, 20.0, severity="critical", notify_owners=False)
    decide(db, settings, NOW, on)
    shown = queueing.epoch(row(db, waiting).estimated_start)
    off = jobrules.Effective(False, 20.0)
    assert not decide(db, settings, shown + 10, on).alerts  # enabled, within its threshold
    assert not decide(db, settings, shown + 30, off).alerts  # disabled: no alert
    assert list(decide(db, settings, shown + 30, on).alerts) == [waiting]  # enabled again, past it
    with db.begin() as s:
        (a,) = alerts.list_alerts(s, ADMIN)["items"]
        assert (a["key"], a["severity"], a["users"]) == (f"job:{waiting}:wait", "critical", [])
        assert alerts.list_alerts(s, user("dee"))["total"] == 0  # not told: notify_owners off
    change(db, "job-wait", {"enabled": False})  # disabling closes its open alerts
    with db.begin() as s:
        assert alerts.list_alerts(s, ADMIN, open_only=True)["total"] == 0


def test_job_overrun_alerts_only_when_enabled_and_past_its_threshold(seeded, settings):
    db = seeded
    j = submit(db, settings, "eve", "overran", estimated_duration=10)
    stop = submit(db, settings, "eve", "stopper", estimated_duration=10, on_overrun="stop")
    make_running(db, j, [0], NOW - 100)
    make_running(db, stop, [1], NOW - 100)
    off = jobrules.Effective(False, 0.0)
    with db.begin() as s:  # disabled: no alert; the stop is the user's choice and happens anyway
        assert Runner._overruns(s, [j, stop], NOW, off) == set()
    assert row(db, stop).status == "killing" and row(db, j).status == "running"
    late = jobrules.Effective(True, 300.0, severity="info")
    with db.begin() as s:  # 90 s past the declared 10 s: within the threshold of 300 s
        assert Runner._overruns(s, [j], NOW, late) == set()
    with db.begin() as s:
        assert Runner._overruns(s, [j], NOW + 300, late) == {j}
    with db.begin() as s:
        (a,) = alerts.list_alerts(s, user("eve"))["items"]
        assert (a["key"], a["severity"], a["figures"]["threshold_s"]) == (f"job:{j}:overrun", "info", 300.0)
    with db.begin() as s:  # once per run
        assert Runner._overruns(s, [j], NOW + 400, late) == {j}
        assert len(alerts.list_alerts(s, ADMIN)["items"]) == 1
