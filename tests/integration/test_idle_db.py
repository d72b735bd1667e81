"""The idle policy's database side (ops/idle.py) on SQLite and PostgreSQL: warnings, lease renewals, reclaims."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, NotFound
from ti_hub.ops import alerts, idle, jobs
from ti_hub.ops.jobs import record

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
OWNER = Actor("owner1", frozenset(S.USER_SCOPES))
OTHER = Actor("other1", frozenset(S.USER_SCOPES))
PLACED = {"instances": [{"node": "n1", "devices": [0], "cpu": 1, "memory_mib": 4096}]}
FIGURES = {"devices": ["n1/demo-gpu/0"], "threshold_percent": 5.0, "mean_utilization": 0.5, "max_utilization": 1.0,
           "samples": 9, "idle_since": "2026-11-01T00:00:00+00:00", "idle_seconds": 120.0,
           "reclaim_at": "2026-11-01T00:03:00+00:00"}


def workspace(db, settings, name: str, plan: str = "demo-gpu-1", placement=PLACED) -> int:
    """A running workspace of OWNER's (made as a job, then turned into one: admission is the spawner's)."""
    with db.begin() as s:
        jid = jobs.submit(s, OWNER, {"name": name, "plan": plan, "image": "python-cpu", "command": "true"},
                          settings)["id"]
    with db.begin() as s:
        j = s.get(m.Job, jid)
        j.kind, j.placement = "workspace", placement
        record(s, j, st.RUNNING, "running", T0)
    return jid


def history(db, jid: int) -> list[tuple[str, str]]:
    with db.begin() as s:
        return [(e.status, e.message) for e in s.scalars(select(m.JobEvent).where(m.JobEvent.job_id == jid)
                                                         .order_by(m.JobEvent.id))]


def audit_of(s) -> list[m.AuditEntry]:
    return list(s.scalars(select(m.AuditEntry).where(m.AuditEntry.target == "owner1/desk").order_by(m.AuditEntry.id)))


def test_warn_renew_then_reclaim(seeded, settings):
    db = seeded
    jid = workspace(db, settings, "desk")
    cpu = workspace(db, settings, "cpu-desk", plan="cpu-small",
                    placement={"instances": [{"node": "n1", "devices": [], "cpu": 1, "memory_mib": 1}]})
    with db.begin() as s:
        held, cpu_only = sorted(idle.running_workspaces(s), key=lambda w: w.id != jid)
        assert (held.id, held.devices, held.renewed_at, held.warned_at) == (jid, (("n1", "demo-gpu", 0),), None, None)
        assert (cpu_only.id, cpu_only.devices, cpu_only.cpus) == (cpu, (), 1.0)  # judged by its CPU alone
        assert idle.warn(s, jid, FIGURES, T0 + dt.timedelta(seconds=120))
    with db.begin() as s:
        assert not idle.warn(s, jid, FIGURES, T0 + dt.timedelta(seconds=135))  # it stands: refreshed, not again
        (held,) = [w for w in idle.running_workspaces(s) if w.id == jid]
        assert held.warned_at == T0 + dt.timedelta(seconds=120)
        (a,) = alerts.list_alerts(s, OWNER)["items"]
        assert (a["key"], a["kind"], a["rule"], a["users"], a["job_id"]) == (f"workspace:{jid}:idle", "workspace",
                                                                             "idle", ["owner1"], jid)
        assert a["figures"] == {"owner": "owner1", "workspace": "desk", **FIGURES}
        assert "ti workspace renew desk" in a["message"]
    assert [st_ for st_, msg in history(db, jid)].count("alert") == 1

    with db.begin() as s:
        with pytest.raises(NotFound):  # another user does not even see it
            idle.renew(s, OTHER, "owner1", "desk")
    with db.begin() as s:
        lease = idle.renew(s, OWNER, "owner1", "desk", T0 + dt.timedelta(seconds=150))
        assert lease["renewed_at"] == "2026-11-01T00:02:30Z" and lease["devices"] == ["n1/demo-gpu/0"]
        assert lease["cleared_alert"]["figures"]["mean_utilization"] == 0.5 and not lease["cleared_alert"]["open"]
    with db.begin() as s:
        assert alerts.list_alerts(s, OWNER)["total"] == 0
        (held,) = [w for w in idle.running_workspaces(s) if w.id == jid]
        assert held.renewed_at == T0 + dt.timedelta(seconds=150) and held.warned_at is None
        assert audit_of(s) == []  # the owner's own renewal is their history alone
        assert idle.renew(s, ADMIN, "owner1", "desk", T0 + dt.timedelta(seconds=160))["cleared_alert"] is None
    assert history(db, jid)[-2:] == [("lease", "lease renewed"), ("lease", "lease renewed by root1")]

    with db.begin() as s:
        idle.warn(s, jid, FIGURES, T0 + dt.timedelta(seconds=300))
    with db.begin() as s:
        assert idle.reclaim(s, jid, FIGURES, T0 + dt.timedelta(seconds=400))
        assert not idle.reclaim(s, jid, FIGURES, T0 + dt.timedelta(seconds=401))  # being stopped already
    with db.begin() as s:
        j = s.get(m.Job, jid)
        assert j.status == st.KILLING and j.reason.startswith("stop requested by ti-idle-policy: its devices were idle")
        assert alerts.list_alerts(s, ADMIN)["total"] == 0
        entries = audit_of(s)
        assert [(e.actor, e.action, e.target) for e in entries] == [("root1", "job.renew", "owner1/desk"),
                                                                   ("ti-idle-policy", "job.reclaim", "owner1/desk")]
        assert entries[-1].detail["figures"] == {"owner": "owner1", "workspace": "desk", **FIGURES}
        jobs.killed(s, j)  # the hub stopped its server; the spawner's report ends it so
    with db.begin() as s:
        j = s.get(m.Job, jid)
        assert j.status == st.STOPPED and j.reason.startswith("stopped by ti-idle-policy") and j.placement is None
        assert [w.id for w in idle.running_workspaces(s)] == [cpu]
        with pytest.raises(Conflict, match="only a running workspace has a lease"):
            idle.renew(s, OWNER, "owner1", "desk")


CPU_FIGURES = {"cpus": 1.0, "cpu_threshold_percent": 5.0, "mean_cpu_percent": 0.4, "max_cpu_percent": 1.1,
               "idle_since": "2026-11-01T00:00:00+00:00", "idle_seconds": 120.0,
               "reclaim_at": "2026-11-01T00:03:00+00:00"}


def test_a_workspace_without_devices_is_warned_renewed_and_reclaimed_by_its_cpu(seeded, settings):
    db = seeded
    jid = workspace(db, settings, "cpu-box", plan="cpu-small",
                    placement={"instances": [{"node": "n1", "devices": [], "cpu": 1, "memory_mib": 1}]})
    with db.begin() as s:
        assert idle.warn(s, jid, CPU_FIGURES, T0 + dt.timedelta(seconds=120))
        (a,) = alerts.list_alerts(s, OWNER)["items"]
        assert a["subject"] == "workspace owner1/cpu-box is idle: its CPU will be reclaimed"
        assert "its CPU below 5.0 % of its 1 CPU (mean 0.4 %)" in a["message"]
    assert history(db, jid)[-1][1].startswith("idle: CPU below 5.0 % since")
    with db.begin() as s:
        lease = idle.renew(s, OWNER, "owner1", "cpu-box", T0 + dt.timedelta(seconds=130))
        assert lease["devices"] == [] and not lease["cleared_alert"]["open"]
    with db.begin() as s:
        assert idle.reclaim(s, jid, CPU_FIGURES, T0 + dt.timedelta(seconds=400))
        assert s.get(m.Job, jid).reason == ("stop requested by ti-idle-policy: its CPU was idle (mean 0.4 % of 1 CPU, "
                                            "below 5.0 % since 2026-11-01T00:00:00+00:00); lease not renewed")


def test_training_jobs_have_no_lease_and_stale_alerts_close(seeded, settings):
    db = seeded
    a = workspace(db, settings, "gpu-a")
    with db.begin() as s:
        jobs.submit(s, OWNER, {"name": "train", "plan": "demo-gpu-1", "image": "python-cpu", "command": "true"},
                    settings)
        with pytest.raises(NotFound, match="is a training job"):  # a training job has no lease
            idle.renew(s, OWNER, "owner1", "train")
    with db.begin() as s:
        idle.warn(s, a, FIGURES, T0)
        alerts.fire(s, "workspace:999:idle", "workspace", "gone", rule="idle", now=T0)
        alerts.fire(s, "job:7:overrun", "job", "not ours", now=T0)
    with db.begin() as s:
        assert idle.clear_others(s, {a}, T0) == ["workspace:999:idle"]
    with db.begin() as s:
        assert sorted(x["key"] for x in alerts.list_alerts(s, ADMIN)["items"]) == ["job:7:overrun",
                                                                                   f"workspace:{a}:idle"]
