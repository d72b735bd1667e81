"""Machine alert rules and cordons on the database (ops/alertrules.py, ops/cordons.py): the seeded defaults,
alerts opened and closed by an evaluation, cordoning (and its dry run), an admin's uncordon, the owners told,
audit entries, and capacity made unschedulable where a machine is cordoned."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.backends.base import NodeCapacity
from ti_hub.db import models as m
from ti_hub.db.alertrules import AlertRule
from ti_hub.db.monitoring import Alert
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, Forbidden, NotFound, ValidationError
from ti_hub.domain.readings import DeviceReading, Snapshot
from ti_hub.domain.healthrules import evaluate
from ti_hub.ops import alertrules, cordons
from ti_hub.ops.common import utcnow
from ti_hub.ops.capacity import without_cordoned

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
USER = Actor("owner1", frozenset(S.USER_SCOPES))
NODES = [NodeCapacity("g1", "default", {"demo-gpu": [0, 1]}, 8, 1024),
         NodeCapacity("g1@vc2", "team", {"demo-gpu": [2]}, 4, 512, labels={"ti-hub.io/machine": "g1"}),
         NodeCapacity("g2", "default", {"demo-gpu": [0]}, 8, 1024)]
NODE_MACHINE = {"g1": "g1", "g1@vc2": "g1", "g2": "g2"}


def ecc_snaps(errors: int) -> list[Snapshot]:
    devs = (DeviceReading("g1@vc2", "demo-gpu", 2, "g1", ecc_uncorrectable=errors),
            DeviceReading("g2", "demo-gpu", 0, "g2", ecc_uncorrectable=0))
    return [Snapshot(100.0, (), devs)]


def run(db, rule_names: tuple[str, ...], snaps, dry_run: bool) -> list[str]:
    with db.begin() as s:
        rules = [r for r in alertrules.enabled(s) if r.name in rule_names]
    specs = [alertrules.spec(r) for r in rules]
    with db.begin() as s:
        return alertrules.apply(s, rules, [r.id for r in specs], evaluate(specs, snaps, 100.0), NODE_MACHINE,
                                dry_run)


def open_alerts(db) -> list[tuple[str, str, list, str]]:
    A = Alert
    with db.begin() as s:
        return [(a.rule, a.machine, list(a.users), (a.figures or {}).get("cordon", ""))
                for a in s.scalars(select(A).where(A.cleared_at.is_(None)).order_by(A.id))]


def audit(db) -> list[tuple[str, str, str]]:
    with db.begin() as s:
        return [(e.actor, e.action, e.target) for e in s.scalars(select(m.AuditEntry).order_by(m.AuditEntry.id))
                if e.action.startswith("machine.")]


def test_the_defaults_are_seeded_once(db):
    with db.begin() as s:
        rules = {r["name"]: r for r in alertrules.list_rules(s, ADMIN)["items"]}
    assert {n for n, r in rules.items() if not r["builtin"]} == {"gpu-ecc-errors", "gpu-temperature", "cpu-busy",
                                                                "memory-full", "disk-free-low"}
    assert {n for n, r in rules.items() if r["builtin"]} == {"job-overrun", "job-wait", "workspace-idle"}
    ecc = rules["gpu-ecc-errors"]
    assert (ecc["metric"], ecc["op"], ecc["threshold"], ecc["cordon"], ecc["notify_owners"]) == \
        ("gpu_ecc", ">", 0.0, True, True)
    assert (rules["disk-free-low"]["metric"], rules["disk-free-low"]["op"], rules["disk-free-low"]["threshold"]) == \
        ("disk_free", "<", 20.0)
    assert rules["cpu-busy"]["threshold"] == 90.0 and rules["memory-full"]["threshold"] == 80.0
    assert rules["gpu-temperature"]["threshold"] == 85.0


def test_ecc_errors_open_an_alert_and_cordon_the_machine_until_an_admin_puts_it_back(db):
    with db.begin() as s:  # an owner with a job on the machine's VC slice hears of it
        j = m.Job(owner="owner1", name="train", kind="single", status=st.RUNNING, device_type="demo-gpu",
                  devices_per_instance=1, workers=1, ps=0, cpu_per_instance=1, memory_mib_per_instance=512,
                  image="x", command="true", spec={}, pool="team", created_at=utcnow(),
                  placement={"instances": [{"node": "g1@vc2", "devices": [2], "cpu": 1, "memory_mib": 512}]})
        s.add(j)
    assert run(db, ("gpu-ecc-errors",), ecc_snaps(2), dry_run=False) == ["g1"]
    assert open_alerts(db) == [("gpu-ecc-errors", "g1", ["owner1"], "cordoned")]
    assert audit(db) == [("ti-alerts", "machine.cordon", "g1")]
    with db.begin() as s:
        assert cordons.cordoned_names(s) == {"g1"}
    flags = {n.name: n.schedulable for n in without_cordoned(NODES, {"g1"})}
    assert flags == {"g1": False, "g1@vc2": False, "g2": True}

    # the admin puts it back while the errors are still counted: their word stands, the alert stays open
    with db.begin() as s:
        row, changed = cordons.uncordon(s, ADMIN, "g1", NODES)
    assert changed and row == {"machine": "g1", "cordoned": False, "at": None, "by": "", "rule": "", "reason": ""}
    assert run(db, ("gpu-ecc-errors",), ecc_snaps(2), dry_run=False) == []
    assert open_alerts(db)[0][3].startswith("not cordoned again")
    assert audit(db)[-1] == ("root1", "machine.uncordon", "g1")

    # the errors clear: the alert closes; when they come back the machine is cordoned again
    assert run(db, ("gpu-ecc-errors",), ecc_snaps(0), dry_run=False) == []
    assert open_alerts(db) == []
    assert run(db, ("gpu-ecc-errors",), ecc_snaps(3), dry_run=False) == ["g1"]


def test_a_dry_run_only_says_it_would_cordon(db):
    assert run(db, ("gpu-ecc-errors",), ecc_snaps(2), dry_run=True) == []
    (alert,) = open_alerts(db)
    assert alert[3].startswith("would cordon")
    with db.begin() as s:
        assert cordons.cordoned_names(s) == set()
    assert audit(db) == []
    # dry run turned off while the alert is open: the machine is cordoned at the next evaluation
    assert run(db, ("gpu-ecc-errors",), ecc_snaps(2), dry_run=False) == ["g1"]


def test_disabling_or_deleting_a_rule_closes_its_alerts_and_changes_are_checked(db):
    run(db, ("gpu-ecc-errors",), ecc_snaps(2), dry_run=True)
    with db.begin() as s:
        rid = s.scalar(select(AlertRule.id).where(AlertRule.name == "gpu-ecc-errors"))
        shown = alertrules.get(s, ADMIN, rid)
    assert [f["machine"] for f in shown["firing"]] == ["g1"]
    with db.begin() as s:
        out = alertrules.update(s, ADMIN, rid, {"enabled": False}, 3600)
    assert out["enabled"] is False and out["firing"] == [] and open_alerts(db) == []
    with pytest.raises(ValidationError) as e, db.begin() as s:
        alertrules.update(s, ADMIN, rid, {"description": "changed", "metric": "gpu_temperature", "threshold": 900},
                          3600)
    assert e.value.field == "threshold" and "degrees C" in e.value.detail
    with db.begin() as s:
        assert alertrules.get(s, ADMIN, rid)["metric"] == "gpu_ecc"  # nothing stored
    with pytest.raises(Conflict), db.begin() as s:
        alertrules.update(s, ADMIN, rid, {"name": "cpu-busy"}, 3600)
    with pytest.raises(Forbidden), db.begin() as s:
        alertrules.create(s, USER, {"name": "mine", "metric": "cpu", "op": ">", "threshold": 1}, 3600)
    with db.begin() as s:
        alertrules.update(s, ADMIN, rid, {"enabled": True}, 3600)
    run(db, ("gpu-ecc-errors",), ecc_snaps(2), dry_run=True)
    assert len(open_alerts(db)) == 1
    with db.begin() as s:
        alertrules.delete(s, ADMIN, rid)
    assert open_alerts(db) == []
    with db.begin() as s:
        actions = [e.action for e in s.scalars(select(m.AuditEntry).order_by(m.AuditEntry.id))]
    assert actions == ["alert_rule.change", "alert_rule.change", "alert_rule.delete"]


def test_admins_cordon_by_machine_or_slice_name_and_unknown_machines_are_refused(db):
    with db.begin() as s:
        row, changed = cordons.cordon(s, ADMIN, "g1@vc2", {"reason": "fan"}, NODES)
    assert changed and row["machine"] == "g1" and row["by"] == "root1" and row["reason"] == "fan"
    with db.begin() as s:
        again, changed = cordons.cordon(s, ADMIN, "g1", {}, NODES)
    assert not changed and again["reason"] == "fan"
    with pytest.raises(NotFound) as e, db.begin() as s:
        cordons.cordon(s, ADMIN, "nowhere", {}, NODES)
    assert e.value.field == "machine" and "g1, g2" in e.value.detail
    with pytest.raises(Forbidden), db.begin() as s:
        cordons.cordon(s, USER, "g2", {}, NODES)
    with db.begin() as s:
        assert [c["machine"] for c in cordons.list_cordons(s, ADMIN)["items"]] == ["g1"]
        row, changed = cordons.uncordon(s, ADMIN, "g2", NODES)
    assert not changed and row["cordoned"] is False
    assert audit(db) == [("root1", "machine.cordon", "g1")]
