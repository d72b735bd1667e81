"""The operators' job actions against real databases (ops/jobadmin.py): reset clears every stuck state and
frees the devices, requeue keeps the job and checks its quota, stop and requeue end as asked once the processes
are gone (``jobs.killed``, which the loop and the spawner's stop report both call), and each one on another
user's job is audited."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, Forbidden, QuotaExceeded
from ti_hub.ops import jobadmin, jobs, quotas
from ti_hub.ops.jobs import record

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
OWNER = Actor("owner1", frozenset(S.USER_SCOPES))
PLACED = {"instances": [{"node": "n1", "devices": [0], "cpu": 1, "memory_mib": 4096}]}


def submit(db, settings, name: str) -> int:
    with db.begin() as s:
        return jobs.submit(s, OWNER, {"name": name, "plan": "demo-gpu-1", "image": "python-cpu",
                                      "command": "sleep 60"}, settings)["id"]


def put(db, job_id: int, status: str, **kw) -> None:
    with db.begin() as s:
        j = s.get(m.Job, job_id)
        for k, val in kw.items():
            setattr(j, k, val)
        record(s, j, status, status)


def audit_actions(db, target: str) -> list[str]:
    with db.begin() as s:
        return list(s.scalars(select(m.AuditEntry.action).where(m.AuditEntry.target == target)
                              .order_by(m.AuditEntry.id)))


@pytest.mark.parametrize("stuck", [st.ERROR, st.SCHEDULING, st.KILLING, st.PAUSING])
def test_reset_clears_a_stuck_job_and_frees_its_devices(seeded, settings, stuck):
    db = seeded
    jid = submit(db, settings, f"stuck-{stuck}")
    put(db, jid, stuck, placement=PLACED, backend_state={"instances": [{"pid": 1}]})
    with db.begin() as s:
        with pytest.raises(Forbidden):  # the owner may not: the operators' action
            jobadmin.reset(s, OWNER, jid)
    with db.begin() as s:
        out, old = jobadmin.reset(s, ADMIN, jid)
    assert out["status"] == st.FAILED and out["placement"] is None and old == {"instances": [{"pid": 1}]}
    assert out["reason"].startswith(f"reset by {ADMIN.name} (was {stuck}")
    with db.begin() as s:
        j = s.get(m.Job, jid)
        assert j.backend_state is None and j.finished_at is not None and j.status not in st.ACTIVE
        # its devices count for nobody: the quota in use is back to zero
        assert quotas.compute_usage(s, OWNER.name, "single", "demo-gpu").devices == 0
    assert audit_actions(db, f"{OWNER.name}/stuck-{stuck}") == ["job.reset"]
    with db.begin() as s, pytest.raises(Conflict):
        jobadmin.reset(s, ADMIN, jid)


def test_requeue_keeps_the_job_and_checks_its_quota(seeded, settings):
    db = seeded
    jid = submit(db, settings, "rq-fail")
    put(db, jid, st.RUNNING, placement=PLACED)
    put(db, jid, st.FAILED, exit_code=3)
    with db.begin() as s:
        out = jobadmin.requeue(s, ADMIN, jid, settings)
    assert out["id"] == jid and out["status"] == st.QUEUED and out["exit_code"] is None
    assert out["placement"] is None and out["started_at"] is None
    with db.begin() as s, pytest.raises(Conflict):  # queued already
        jobadmin.requeue(s, ADMIN, jid, settings)
    # a running one is stopped first, then back in its queue (what the loop does once its processes are gone)
    put(db, jid, st.RUNNING, placement=PLACED, backend_state={"x": 1})
    with db.begin() as s:
        assert jobadmin.requeue(s, ADMIN, jid, settings)["status"] == st.KILLING
    with db.begin() as s:
        jobs.killed(s, s.get(m.Job, jid))
    with db.begin() as s:
        j = s.get(m.Job, jid)
        assert j.status == st.QUEUED and j.backend_state is None and j.placement is None
        assert j.reason == f"requeued by {ADMIN.name}: back to its queue once stopped"
    # over quota now (a cap of 0 devices): refused, nothing changed
    put(db, jid, st.FAILED)
    with db.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": OWNER.name, "kind": "single", "device_type": "demo-gpu", "devices": 0,
                                    "cpu": 0, "memory_mib": 0})
    with db.begin() as s, pytest.raises(QuotaExceeded):
        jobadmin.requeue(s, ADMIN, jid, settings)
    with db.begin() as s:
        assert s.get(m.Job, jid).status == st.FAILED
    assert audit_actions(db, f"{OWNER.name}/rq-fail") == ["job.requeue", "job.requeue"]


def test_stop_ends_stopped_and_the_owners_own_is_not_audited(seeded, settings):
    db = seeded
    jid = submit(db, settings, "stop-me")
    put(db, jid, st.RUNNING, placement=PLACED)
    with db.begin() as s:
        assert jobadmin.stop(s, OWNER, jid)["status"] == st.KILLING
    with db.begin() as s, pytest.raises(Conflict):  # already being stopped
        jobadmin.stop(s, ADMIN, jid)
    with db.begin() as s:
        jobs.killed(s, s.get(m.Job, jid))
    with db.begin() as s:
        j = s.get(m.Job, jid)
        assert j.status == st.STOPPED and j.reason == "stopped" and j.placement is None
    queued = submit(db, settings, "stop-queued")
    with db.begin() as s:
        out = jobadmin.stop(s, ADMIN, queued)
    assert out["status"] == st.STOPPED and out["reason"] == f"stopped by {ADMIN.name} before it started"
    assert audit_actions(db, f"{OWNER.name}/stop-me") == []
    assert audit_actions(db, f"{OWNER.name}/stop-queued") == ["job.stop"]


def test_a_kill_overrides_a_stop_under_way(seeded, settings):
    """A job that ignores SIGTERM need not wait out the grace: a kill turns the stop into a kill (the loop then
    stops it with the kill's short grace) and it ends killed."""
    db = seeded
    jid = submit(db, settings, "stop-then-kill")
    put(db, jid, st.RUNNING, placement=PLACED)
    with db.begin() as s:
        jobadmin.stop(s, ADMIN, jid)
    with db.begin() as s:
        assert jobs.kill(s, ADMIN, jid)["reason"] == f"kill requested by {ADMIN.name}"
    with db.begin() as s:
        jobs.killed(s, s.get(m.Job, jid))
    with db.begin() as s:
        j = s.get(m.Job, jid)
        assert (j.status, j.reason) == (st.KILLED, f"killed by {ADMIN.name}")
    assert audit_actions(db, f"{OWNER.name}/stop-then-kill") == ["job.stop", "job.kill"]


def test_queue_actions_on_others_jobs_are_audited_and_the_owners_are_not(seeded, settings):
    """ADM1: pause, resume, pin, unpin, priority and cancel on another user's job are operators' changes."""
    from ti_hub.ops import queue

    db = seeded
    jid = submit(db, settings, "held")
    with db.begin() as s:
        jobs.pause(s, OWNER, jid)
    with db.begin() as s:
        jobs.resume(s, OWNER, jid, settings)
    assert audit_actions(db, f"{OWNER.name}/held") == []  # the owner's own: their history alone
    with db.begin() as s:
        jobs.pause(s, ADMIN, jid)
    with db.begin() as s:
        jobs.resume(s, ADMIN, jid, settings)
    with db.begin() as s:
        queue.pin(s, ADMIN, jid, True)
    with db.begin() as s:
        queue.pin(s, ADMIN, jid, False)
    with db.begin() as s:
        queue.set_priority(s, ADMIN, jid, {"priority": 500})
    with db.begin() as s:
        queue.cancel(s, ADMIN, jid)
    assert audit_actions(db, f"{OWNER.name}/held") == ["job.pause", "job.resume", "job.pin", "job.unpin",
                                                       "job.priority", "job.cancel"]
    with db.begin() as s:
        e = s.scalars(select(m.AuditEntry).where(m.AuditEntry.action == "job.priority")).one()
        assert e.actor == ADMIN.name and e.detail["priority"] == [100, 500] and e.detail["id"] == jid
