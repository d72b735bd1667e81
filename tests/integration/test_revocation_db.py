"""Issue 30, finding 6 against real databases (ops/revoke.py): whose access a job mounts with (its owner's groups
kept at submission, renames followed, leaving a group through TiHub dropping it), what a share removed or made
read-only stops, the admission check that fails queued work instead of launching it, the resume refused, a
disabled user's work, and the owner's notice (one, no reminders, closed a day later). tests/e2e/test_revocation.py
runs the same against real jobs."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.backends.base import NodeCapacity
from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict
from ti_hub.ops import alerts, jobs, people, revoke, volumes
from ti_hub.ops.common import utcnow
from ti_hub.ops import queueing

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
NODE = NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2, 3]}, 16.0, 65536)


def user(name: str, *groups: str) -> Actor:
    return Actor(name, frozenset(S.USER_SCOPES), groups=groups)


@pytest.fixture
def shared(seeded, tmp_path):
    """alice's filesystem volume "data"; returns the database."""
    from ti_hub.storage.local import LocalVolumeDriver

    with seeded.begin() as s:
        volumes.create(s, user("alice"), {"name": "data", "kind": "filesystem", "capacity_gib": 1},
                       LocalVolumeDriver(root_dir=str(tmp_path), disk_limits="off"), {"filesystem": 10})
    return seeded


def submit(db, settings, who: Actor, name: str, read_only: bool = False) -> int:
    with db.begin() as s:
        return jobs.submit(s, who, {"name": name, "plan": "demo-gpu-1", "image": "python-cpu", "command": "true",
                                    "volumes": [{"volume": "alice/data", "mount_path": "/mnt/d",
                                                 "read_only": read_only}]}, settings)["id"]


def put(db, job_id: int, status: str) -> None:
    with db.begin() as s:
        jobs.record(s, s.get(m.Job, job_id), status, status)


def status(db, job_id: int) -> tuple[str, str]:
    with db.begin() as s:
        j = s.get(m.Job, job_id)
        return j.status, j.reason


def share_id(db, grantee: str) -> int:
    with db.begin() as s:
        return s.scalar(select(m.VolumeShare.id).where(m.VolumeShare.grantee == grantee))


def test_a_group_share_taken_back_stops_the_members_with_no_other_access(shared, settings):
    db = shared
    alice, bob, carol = user("alice"), user("bob", "team"), user("carol", "team")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"group": "team", "mode": "rw"})
        volumes.share(s, alice, "data", {"user": "carol", "mode": "ro"})
    b = submit(db, settings, bob, "bob-w")
    c = submit(db, settings, carol, "carol-r", read_only=True)
    a = submit(db, settings, alice, "alice-own")
    with db.begin() as s:
        assert s.get(m.Job, b).spec[revoke.GROUPS] == ["team"]  # kept at submission, never shown
        assert revoke.GROUPS not in jobs.show(s, bob, b)
    for j in (a, b, c):
        put(db, j, st.RUNNING)
    team = share_id(db, "team")
    with db.begin() as s:
        out = volumes.unshare(s, alice, "data", team)
    # bob had access through the group only; carol still has her own read-only share; alice owns it
    assert [w["id"] for w in out["stopped"]] == [b]
    assert status(db, b) == (st.KILLING, f"{jobs.KILL_AT_ONCE}: access to volume alice/data was revoked by alice")
    assert status(db, c)[0] == st.RUNNING and status(db, a)[0] == st.RUNNING
    with db.begin() as s:
        entry = s.scalars(select(m.AuditEntry).where(m.AuditEntry.action == "volume.unshare")).one()
        assert (entry.actor, entry.target, entry.detail["grantee"], entry.detail["stopped"]) == \
            ("alice", "alice/data", "team", [b])
        # the leader's kill ends it as the history says
        jobs.killed(s, s.get(m.Job, b))
    assert status(db, b) == (st.KILLED, "killed at once: access to volume alice/data was revoked by alice")


def test_read_write_made_read_only_stops_the_writers_only(shared, settings):
    db = shared
    alice, bob = user("alice"), user("bob")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"user": "bob", "mode": "rw"})
    w = submit(db, settings, bob, "writer")
    r = submit(db, settings, bob, "reader", read_only=True)
    put(db, w, st.RUNNING)
    put(db, r, st.RUNNING)
    with db.begin() as s:
        out = volumes.share(s, alice, "data", {"user": "bob", "mode": "ro"})
        again = volumes.share(s, alice, "data", {"user": "bob", "mode": "ro"})  # no change: nothing stops
    assert [x["id"] for x in out["stopped"]] == [w] and again["stopped"] == []
    assert "write access to volume alice/data was revoked by alice" in status(db, w)[1]
    assert status(db, r)[0] == st.RUNNING


def test_queued_work_fails_at_admission_and_is_not_launched(shared, settings):
    db = shared
    alice, bob = user("alice"), user("bob")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"user": "bob", "mode": "rw"})
    q = submit(db, settings, bob, "queued")
    bobs = share_id(db, "bob")
    with db.begin() as s:
        assert volumes.unshare(s, alice, "data", bobs)["stopped"] == []  # queued: not yet
    assert status(db, q)[0] == st.QUEUED
    inp = queueing.Inputs([NODE], None, {}, settings.compute_defaults, 1_800_000_000.0)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    assert [a.job_id for a in dec.admitted] == [q]  # the core does not know: apply checks
    with db.begin() as s:
        assert queueing.apply(s, dec) == set()
    assert status(db, q) == (st.FAILED, "not started: access to volume alice/data was revoked by alice")
    with db.begin() as s:
        a = alerts.open_alert(s, f"job:{q}:revoked")
        assert a is not None and a.users == ["bob"] and "did not start" in a.subject


def test_a_paused_job_is_stopped_and_its_resume_refused(shared, settings):
    db = shared
    alice, bob = user("alice"), user("bob")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"user": "bob", "mode": "ro"})
    p = submit(db, settings, bob, "paused", read_only=True)
    put(db, p, st.PAUSED)
    bobs = share_id(db, "bob")
    with db.begin() as s:
        assert [w["id"] for w in volumes.unshare(s, alice, "data", bobs)["stopped"]] == [p]
    with pytest.raises(Conflict) as e, db.begin() as s:
        jobs.resume(s, bob, p, settings)
    assert "access to volume alice/data was revoked by alice" in e.value.detail
    # a paused job the sweep could not see (a share lost with the hub's groups): its resume checks again
    with db.begin() as s:
        volumes.share(s, alice, "data", {"group": "team", "mode": "ro"})
    p2 = submit(db, settings, user("bob", "team"), "paused-2", read_only=True)
    put(db, p2, st.PAUSED)
    with pytest.raises(Conflict) as e, db.begin() as s:
        jobs.resume(s, bob, p2, settings)  # bob's token says he is in no group now
    assert f"job {p2} cannot resume: access to volume alice/data was revoked" in e.value.detail
    assert status(db, p2)[0] == st.PAUSED


def test_groups_follow_renames_and_leaving_a_group(shared, settings):
    db = shared
    alice, bob = user("alice"), user("bob", "team")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"group": "team", "mode": "rw"})
    j = submit(db, settings, bob, "via-group")
    put(db, j, st.RUNNING)
    with db.begin() as s:
        people.rename_group_references(s, ADMIN, "team", "crew", 1)
    with db.begin() as s:
        assert s.get(m.Job, j).spec[revoke.GROUPS] == ["crew"]
        assert revoke.lost(s, s.get(m.Job, j)) is None  # the share moved with the group: still allowed
    with db.begin() as s:
        people.remove_members(s, ADMIN, "crew", ["bob"])
    assert status(db, j) == (st.KILLING, f"{jobs.KILL_AT_ONCE}: access to volume alice/data was revoked by root1")
    # a group deleted takes its shares, and what its members mounted through them, along
    k = submit(db, settings, user("carol", "crew"), "via-crew")
    put(db, k, st.RUNNING)
    with db.begin() as s:
        people.forget_group(s, ADMIN, "crew", 1)
    assert status(db, k) == (st.KILLING, f"{jobs.KILL_AT_ONCE}: access to volume alice/data was revoked by root1")
    with db.begin() as s:
        entry = s.scalars(select(m.AuditEntry).where(m.AuditEntry.action == "group.delete")).one()
        assert entry.detail["jobs_stopped"] == [k]


def test_work_submitted_before_groups_were_kept_loses_user_shares_only(shared, settings):
    db = shared
    alice, bob = user("alice"), user("bob", "team")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"group": "team", "mode": "rw"})
        volumes.share(s, alice, "data", {"user": "bob", "mode": "rw"})
    j = submit(db, settings, bob, "old-job")
    with db.begin() as s:
        job = s.get(m.Job, j)
        job.spec = {k: val for k, val in job.spec.items() if k != revoke.GROUPS}
    put(db, j, st.RUNNING)
    mine, team = share_id(db, "bob"), share_id(db, "team")
    with db.begin() as s:
        assert volumes.unshare(s, alice, "data", mine)["stopped"] == []  # the group may still give it
        assert volumes.unshare(s, alice, "data", team)["stopped"][0]["id"] == j


def test_disabling_stops_everything_of_theirs(shared, settings):
    db = shared
    bob = user("bob")
    ids = [submit(db, settings, user("alice"), f"dis-{i}") for i in range(4)]
    with db.begin() as s:
        for j in ids:
            s.get(m.Job, j).owner = "bob"
    put(db, ids[1], st.RUNNING)
    put(db, ids[2], st.PAUSED)
    put(db, ids[3], st.COMPLETED)
    revoked = {"tokens": 1, "servers_stopped": [], "servers_starting": []}
    with db.begin() as s:
        people.set_enabled(s, ADMIN, bob.name, False, revoked=revoked)
    assert revoked["jobs_stopped"] == ids[:3]
    assert status(db, ids[0]) == (st.KILLED, "killed: your account was disabled")
    assert status(db, ids[1]) == (st.KILLING, f"{jobs.KILL_AT_ONCE}: your account was disabled")
    assert status(db, ids[2]) == (st.KILLED, "killed: your account was disabled")
    assert status(db, ids[3])[0] == st.COMPLETED
    with db.begin() as s:
        entry = s.scalars(select(m.AuditEntry).where(m.AuditEntry.action == "user.disable")).one()
        assert entry.detail["revoked"]["jobs_stopped"] == ids[:3]


def test_the_notice_is_sent_once_and_closes_a_day_later(shared, settings):
    db = shared
    alice, bob = user("alice"), user("bob")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"user": "bob", "mode": "rw"})
    j = submit(db, settings, bob, "noticed")
    put(db, j, st.RUNNING)
    bobs = share_id(db, "bob")
    with db.begin() as s:
        volumes.unshare(s, alice, "data", bobs)
    now = utcnow()
    with db.begin() as s:
        due = alerts.due(s, now, 60.0)
        assert [a.key for a in due] == [f"job:{j}:revoked"] and due[0].users == ["bob"]
        assert "was stopped: access to volume alice/data was revoked by alice" in due[0].subject
        alerts.mark_notified(s, [due[0].id], now)
    with db.begin() as s:
        assert alerts.due(s, now + dt.timedelta(hours=2), 60.0) == []  # no reminder: it happened, it is over
        assert alerts.expire_events(s, now + dt.timedelta(hours=1)) == 0
        assert alerts.expire_events(s, now + alerts.EVENT_TTL + dt.timedelta(seconds=1)) == 1
        assert alerts.open_alert(s, f"job:{j}:revoked") is None


def test_admission_refuses_a_disabled_owner_and_a_resume_a_deleted_volume(shared, settings, tmp_path):
    """What the sweeps could not see (a profile disabled without them, a paused job's volume deleted, which a
    paused job does not hold): admission and resume still say no."""
    from ti_hub.storage.local import LocalVolumeDriver

    db = shared
    alice, bob = user("alice"), user("bob")
    with db.begin() as s:
        volumes.share(s, alice, "data", {"user": "bob", "mode": "rw"})
    q = submit(db, settings, bob, "dis-queued")
    p = submit(db, settings, bob, "del-paused")
    put(db, p, st.PAUSED)
    with db.begin() as s:
        s.add(m.UserProfile(name="bob", nickname="", email="", phone="", enabled=False, changed_at=utcnow()))
    inp = queueing.Inputs([NODE], None, {}, settings.compute_defaults, 1_800_000_000.0)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    with db.begin() as s:
        assert queueing.apply(s, dec) == set()
    assert status(db, q) == (st.FAILED, "not started: your account was disabled")
    with db.begin() as s:
        assert alerts.open_alert(s, f"job:{q}:revoked") is None  # an admin's act: no notice to a disabled user
        s.get(m.UserProfile, "bob").enabled = True
        volumes.delete(s, alice, "data", LocalVolumeDriver(root_dir=str(tmp_path), disk_limits="off"))
    with pytest.raises(Conflict) as e, db.begin() as s:
        jobs.resume(s, bob, p, settings)
    assert e.value.detail == f"job {p} cannot resume: volume alice/data was deleted"
