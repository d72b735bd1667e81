"""The live queue against real databases: decide/apply, estimates and alerts, preemption and requeue,
scores saved and caught up, the owner's order, quotas at admission (SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.backends.base import NodeCapacity
from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, Forbidden, NotFound, ValidationError
from ti_hub.ops import jobs, queue, quotas
from ti_hub.ops import queueing
from ti_hub.ops.scoring import ScoreKeeper, list_scores

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
NOW = 1_800_000_000.0  # the injected clock
NODE = NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2, 3]}, 16.0, 65536)


def user(name: str) -> Actor:
    return Actor(name, frozenset(S.USER_SCOPES))


def submit(db, settings, who: str, name: str, **kw) -> int:
    with db.begin() as s:
        return jobs.submit(s, user(who), {"name": name, "plan": "demo-gpu-1", "image": "python-cpu",
                                          "command": "true", **kw}, settings)["id"]


def make_running(db, job_id: int, devices: list[int], started: float, preemptible: bool = False) -> None:
    with db.begin() as s:
        j = s.get(m.Job, job_id)
        j.status, j.preemptible = st.RUNNING, preemptible
        j.started_at = queueing.from_epoch(started)
        j.placement = {"instances": [{"node": "n1", "devices": devices, "cpu": j.cpu_per_instance,
                                      "memory_mib": j.memory_mib_per_instance}]}


def decide(db, settings, *, scores=None, typical=None, now=NOW, grace=60.0, apply=True, status_due=True):
    inp = queueing.Inputs([NODE], scores, typical or {}, settings.compute_defaults, now, alert_grace_s=grace,
                          status_due=status_due)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    if apply:
        with db.begin() as s:
            queueing.apply(s, dec)
    return dec


def row(db, job_id: int) -> m.Job:
    with db.begin() as s:
        j = s.get(m.Job, job_id)
        s.expunge(j)
        return j


def test_a_long_queue_is_admitted_every_cycle_and_its_positions_rewritten_when_due(seeded, settings, monkeypatch):
    db = seeded
    monkeypatch.setattr(queueing, "SMALL_QUEUE", 3)  # stands for thousands of queued jobs
    ids = [submit(db, settings, "ann", f"long{i}") for i in range(6)]
    dec = decide(db, settings, status_due=False)
    assert len(dec.admitted) == 4 and dec.status_deferred
    assert dec.changes == {}  # admission did not wait for the positions of the rest
    waiting = [row(db, i) for i in ids if i not in {a.job_id for a in dec.admitted}]
    assert [j.queue_position for j in waiting] == [None, None]
    dec = decide(db, settings, status_due=False)  # 2 queued: a short queue is always refreshed
    assert not dec.status_deferred
    assert [row(db, j.id).queue_position for j in waiting] == [1, 2]


def test_positions_reasons_and_estimates_from_declared_durations(seeded, settings):
    db = seeded
    big = [submit(db, settings, "ann", f"run{i}", estimated_duration=300) for i in range(4)]
    for i, jid in enumerate(big):
        make_running(db, jid, [i], NOW - 100 * (i + 1))  # they end at NOW+200, +100, 0, -100 (overdue)
    a = submit(db, settings, "bea", "wait-a", estimated_duration=60)
    b = submit(db, settings, "bea", "wait-b")  # no declared duration, no history: unknown
    c = submit(db, settings, "bea", "wait-c")
    dec = decide(db, settings)
    assert not dec.admitted
    ja, jb, jc = row(db, a), row(db, b), row(db, c)
    assert (ja.queue_position, jb.queue_position, jc.queue_position) == (1, 2, 3)
    assert ja.reason == ("waiting for 1 x 1 x demo-gpu in pool default: 0 demo-gpu free; "
                         "behind other users' work, holding 4 of 4 demo-gpu")
    assert jb.reason.startswith(f"behind job {a} in queue default/demo-gpu/single (1 job ahead)")
    # the overdue job counts as ending now: a starts now, b at the next end (NOW), c at NOW+100
    assert queueing.epoch(ja.estimated_start) == pytest.approx(NOW)
    assert queueing.epoch(jb.estimated_start) == pytest.approx(NOW)
    assert queueing.epoch(jc.estimated_start) == pytest.approx(NOW + 100)
    # a second decision with nothing changed writes nothing
    assert decide(db, settings, apply=False).changes == {}
    # the running jobs' owner's history stands in for durations they did not declare
    d = submit(db, settings, "bea", "wait-d")
    dec = decide(db, settings, typical={("bea", "single", "demo-gpu"): 1000.0}, apply=False)
    # d waits for the 4th device to free: a (60 s, from NOW) ends first -> NOW + 60
    assert queueing.epoch(dec.changes[d]["estimated_start"]) == pytest.approx(NOW + 60)


def test_wait_past_the_estimate_raises_one_alert(seeded, settings):
    db = seeded
    holder = submit(db, settings, "cid", "holder", estimated_duration=50)
    make_running(db, holder, [0, 1, 2, 3], NOW - 10)  # the whole node, due to end at NOW + 40
    waiting = submit(db, settings, "dee", "late-one")
    decide(db, settings)
    shown = queueing.epoch(row(db, waiting).estimated_start)
    assert shown == pytest.approx(NOW + 40)
    decide(db, settings, now=shown + 30)  # past the estimate, but within the grace
    assert not row(db, waiting).wait_alerted
    dec = decide(db, settings, now=shown + 61)
    assert list(dec.alerts) == [waiting] and "waiting longer than estimated" in dec.alerts[waiting]
    assert row(db, waiting).wait_alerted
    with db.begin() as s:
        alerts = s.scalars(select(m.JobEvent).where(m.JobEvent.job_id == waiting, m.JobEvent.status == "alert")).all()
        assert len(alerts) == 1
    assert decide(db, settings, now=shown + 500, apply=False).alerts == {}


def test_preemption_marks_the_victim_and_requeues_it_keeping_its_place(seeded, settings):
    db = seeded
    old = submit(db, settings, "eve", "old-pre", preemptible=True)
    new = submit(db, settings, "eve", "new-pre", preemptible=True)
    other = submit(db, settings, "fay", "plain")
    make_running(db, old, [0, 1], NOW - 500, preemptible=True)
    make_running(db, new, [2, 3], NOW - 100, preemptible=True)
    make_running(db, other, [], NOW - 100)  # holds no device: never a useful victim
    boss = submit(db, settings, "gus", "boss")
    dec = decide(db, settings)
    assert [a.job_id for a in dec.admitted] == [boss] and dec.preempt == {new: boss}
    j = row(db, new)
    assert j.preempted_by == boss and j.status == st.RUNNING and "being preempted" in j.reason
    assert row(db, boss).status == st.SCHEDULING
    with db.begin() as s:
        queueing.requeue_preempted(s, new)
    j = row(db, new)
    assert (j.status, j.preempted_by, j.placement, j.started_at) == (st.QUEUED, None, None, None)
    assert j.reason == f"preempted by job {boss}: back in its queue"
    assert row(db, old).status == st.RUNNING
    # still counted against the owner's quota while queued (it asked for the devices again)
    with db.begin() as s:
        assert quotas.compute_usage(s, "eve", "single", "demo-gpu").devices == 2


def test_scores_are_saved_caught_up_after_a_restart_and_rebuilt_on_first_run(seeded):
    db = seeded
    T = 3600.0
    holdings = [("hal", "demo-gpu", 2, NOW - 1800.0), ("ivy", "demo-gpu", 1, NOW - 60.0)]
    k = ScoreKeeper(T)
    with db.begin() as s:
        assert k.load(s, holdings, NOW).startswith("usage scores rebuilt")
        k.save(s, NOW)
    assert k.scores.of("hal", "demo-gpu") == pytest.approx(2 * (1 - math.exp(-0.5)), abs=1e-9)
    # a restart 2 hours later, hal still holding 2: one exact catch-up step
    k2 = ScoreKeeper(T)
    with db.begin() as s:
        assert "caught up over 7200 s" in k2.load(s, holdings, NOW + 7200)
    s0 = 2 * (1 - math.exp(-0.5))
    assert k2.scores.of("hal", "demo-gpu") == pytest.approx(2 + (s0 - 2) * math.exp(-2.0), abs=1e-9)
    # what the API shows is brought forward to now from the saved row with its g
    with db.begin() as s:
        k.advance(NOW, holdings)
        k.save(s, NOW)
        shown = list_scores(s, user("hal"), {}, T, now=queueing.from_epoch(NOW + 3600))["items"]
        assert [x["user"] for x in shown] == ["hal"]
        assert shown[0]["score"] == pytest.approx(2 + (s0 - 2) * math.exp(-1.0), abs=1e-6)
        with pytest.raises(Forbidden):
            list_scores(s, Actor("nobody", frozenset({S.SUBMIT})), {"all": "1"}, T)
        assert len(list_scores(s, ADMIN, {"all": "1"}, T)["items"]) == 2


def test_the_owners_order_never_jumps_another_users_job(seeded, settings):
    db = seeded
    # a job holding the whole node, so that everything below waits
    make_running(db, submit(db, settings, "jay", "hogger"), [0, 1, 2, 3], NOW)
    a1 = submit(db, settings, "kim", "kim-first")
    b1 = submit(db, settings, "lee", "lee-first")
    a2 = submit(db, settings, "kim", "kim-second")
    with db.begin() as s:
        queue.move(s, user("kim"), a2, {"to": "top"})
    decide(db, settings)
    assert [row(db, i).queue_position for i in (a2, b1, a1)] == [1, 2, 3]
    with db.begin() as s:
        queue.move(s, user("kim"), a2, {"after": a1})
    decide(db, settings)
    assert [row(db, i).queue_position for i in (a1, b1, a2)] == [1, 2, 3]
    # before another user's job: what the queue holds decides (409); the rest is bad input
    bad = [({"to": "top"}, user("lee"), Forbidden), ({"before": b1}, user("kim"), Conflict),
           ({}, user("kim"), ValidationError), ({"to": "up"}, user("kim"), ValidationError),
           ({"to": "top", "nope": 1}, user("kim"), ValidationError)]
    for body, who, exc in bad:
        with pytest.raises(exc), db.begin() as s:
            queue.move(s, who, a2, body)
    with pytest.raises(NotFound), db.begin() as s:
        queue.pin(s, ADMIN, 10**9, True)
    with pytest.raises(Conflict), db.begin() as s:
        queue.pin(s, ADMIN, row(db, a1).id, False)  # not pinned
    assert [row(db, i).queue_order for i in (a1, b1, a2)] == [a1, None, a2]


def test_a_lowered_quota_holds_queued_work_with_a_quota_reason(seeded, settings):
    db = seeded
    first = submit(db, settings, "max", "max-one")
    second = submit(db, settings, "max", "max-two")
    make_running(db, first, [0], NOW)
    with db.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "max", "kind": "single", "device_type": "demo-gpu", "devices": 1,
                                    "cpu": 64, "memory_mib": 1 << 20})
    dec = decide(db, settings)
    assert not dec.admitted
    assert row(db, second).reason == "quota: single-node demo-gpu devices 1/1, this job needs 1"


def test_priority_and_pin_validation(seeded, settings):
    db = seeded
    jid = submit(db, settings, "ned", "prio-me")
    for body in ({"priority": 0}, {"priority": 1001}, {"priority": True}, {}, {"priority": 5, "x": 1}):
        with pytest.raises(ValidationError), db.begin() as s:
            queue.set_priority(s, ADMIN, jid, body)
    with pytest.raises(Forbidden), db.begin() as s:
        queue.set_priority(s, user("ned"), jid, {"priority": 900})
    with pytest.raises(Forbidden), db.begin() as s:
        queue.pin(s, user("ned"), jid, True)
    with db.begin() as s:
        assert queue.set_priority(s, ADMIN, jid, {"priority": 1000})["priority"] == 1000
        assert queue.pin(s, ADMIN, jid, True)["queue"]["pinned"] is True
    assert row(db, jid).pinned_at is not None
    assert row(db, jid).priority == 1000
    with db.begin() as s:
        queue.cancel(s, user("ned"), jid)
    with pytest.raises(Conflict), db.begin() as s:
        queue.pin(s, ADMIN, jid, True)
    assert dt.datetime.now(dt.timezone.utc) > row(db, jid).pinned_at


def test_a_burst_is_written_in_parts_with_the_same_outcome(seeded, settings):
    db = seeded
    ids = [submit(db, settings, f"bu{i:02d}", f"burst-{i}") for i in range(7)]
    inp = queueing.Inputs([NodeCapacity("big", "default", {"demo-gpu": list(range(5))}, 64.0, 1 << 20)], None,
                          {}, settings.compute_defaults, NOW)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    parts = queueing.split(dec, 2)
    assert [len(p.admitted) for p in parts] == [2, 2, 1] and parts[-1].changes == dec.changes
    for p in parts:
        with db.begin() as s:
            queueing.apply(s, p)
    statuses = [row(db, i).status for i in ids]
    assert statuses == [st.SCHEDULING] * 5 + [st.QUEUED] * 2
    assert [row(db, i).queue_position for i in ids[5:]] == [1, 2]


def test_a_pool_that_shrinks_under_a_queued_gang_takes_it_out_of_line(seeded, settings):
    """Issue 17, item 8: a machine loses devices while a 4-instance gang waits: it can never fit any more, so
    it fails with the reason instead of blocking the job behind it forever."""
    db = seeded
    holder = submit(db, settings, "ann", "holder")
    make_running(db, holder, [0], NOW - 10)
    gang = submit(db, settings, "ann", "gang4", kind="distributed", workers=4)
    small = submit(db, settings, "ann", "small", kind="distributed", workers=2)
    decide(db, settings)
    assert row(db, gang).reason.startswith("waiting for 4 x 1 x demo-gpu") and row(db, small).status == st.QUEUED
    shrunk = NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2]}, 16.0, 65536)  # a device is gone
    inp = queueing.Inputs([shrunk], None, {}, settings.compute_defaults, NOW)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    with db.begin() as s:
        queueing.apply(s, dec)
    g = row(db, gang)
    assert g.status == st.FAILED and g.queue_position is None, (g.status, g.reason)
    assert g.reason == ("can never fit: 4 instances of 1 x demo-gpu, 1 CPU, 4096 MiB each; the machines of pool "
                        "default hold at most 3 at once (its largest machine has 3 x demo-gpu, 16 CPU, 65536 MiB)")
    assert [a.job_id for a in dec.admitted] == [small]  # nothing blocked it
    # a cordoned machine is expected back: the gang waits out of line, blocking nothing, and is not failed
    gang2 = submit(db, settings, "bea", "gang4b", kind="distributed", workers=4)
    cordoned = NodeCapacity("n2", "default", {"demo-gpu": [0, 1, 2, 3]}, 16.0, 65536, schedulable=False)
    inp = queueing.Inputs([shrunk, cordoned], None, {}, settings.compute_defaults, NOW)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    with db.begin() as s:
        queueing.apply(s, dec)
    assert row(db, gang2).status == st.QUEUED and row(db, gang2).reason.startswith("waiting out of line")


def test_a_gang_its_pool_can_never_hold_at_once_is_refused_at_submission(seeded, settings):
    with pytest.raises(Conflict) as e:  # the pool's machines decide: 409
        submit(seeded, settings, "ann", "gang5", kind="distributed", workers=5)
    assert e.value.field == "workers" and "at most 4 at once" in str(e.value.detail), e.value.detail
    with seeded.begin() as s:
        assert s.scalar(select(m.Job.id).where(m.Job.name == "gang5")) is None


def test_queue_actions_answer_with_the_new_position(seeded, settings):
    """Issue 17, item 10: move, pin and priority answer with the position after the change, the same that
    GET /queue shows right after (before the scheduler's next cycle), not the one from before."""
    db = seeded
    make_running(db, submit(db, settings, "jay", "hog-all"), [0, 1, 2, 3], NOW)
    a1, a2, b1 = (submit(db, settings, w, n) for w, n in (("kim", "kim-1"), ("kim", "kim-2"), ("lee", "lee-1")))
    decide(db, settings)
    assert [row(db, i).queue_position for i in (a1, a2, b1)] == [1, 2, 3]

    def view(who):
        with db.begin() as s:
            return {j["id"]: j["queue"]["position"] for j in queue.queue_view(s, who, {"all": "1"})["items"]}

    with db.begin() as s:
        assert queue.move(s, user("kim"), a2, {"to": "top"})["queue"]["position"] == 1
    assert view(user("kim")) == {a2: 1, a1: 2, b1: 3}
    with db.begin() as s:
        assert queue.pin(s, ADMIN, b1, True)["queue"]["position"] == 1
    assert view(ADMIN) == {b1: 1, a2: 2, a1: 3}
    with db.begin() as s:
        queue.pin(s, ADMIN, b1, False)
        assert queue.set_priority(s, ADMIN, a1, {"priority": 500})["queue"]["position"] == 1
    assert view(ADMIN) == {a1: 1, a2: 2, b1: 3}
    decide(db, settings)  # the scheduler agrees
    assert view(ADMIN) == {a1: 1, a2: 2, b1: 3}


def test_quota_usage_of_fractional_cores_is_not_float_noise(seeded, settings):
    """Issue 17, item 13: /quota showed "cpu": 0.30000000000000004 for jobs of 0.1 and 0.2 cores."""
    from ti_hub.ops import plans

    db = seeded
    with db.begin() as s:
        for name, cpu in (("tenth-core", 0.1), ("fifth-core", 0.2)):
            plans.create(s, ADMIN, {"name": name, "kinds": ["single"], "device_type": "cpu", "device_count": 0,
                                    "cpu": cpu, "memory_mib": 256}, settings.device_rules)
    for plan in ("tenth-core", "fifth-core"):
        submit(db, settings, "fay", f"run-{plan}", plan=plan)
    with db.begin() as s:
        doc = quotas.my_quota(s, user("fay"), None, settings.compute_defaults, settings.storage_defaults, [])
    used = next(c["used"] for c in doc["compute"] if (c["kind"], c["device_type"]) == ("single", "cpu"))
    assert used["cpu"] == 0.3, used


def test_a_wait_names_the_owners_own_blocker_and_never_estimates_the_past(seeded, settings):
    """Issue 17, item 19: on a 2-core machine the owner's workspace holds a core and their 2-instance job waits
    for ever: the reason names the workspace (others' work only as "other users' work"), and the estimate is
    not a time borrowed from the owner's job history that slides into the past."""
    db = seeded
    two_cores = NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2, 3]}, 2.0, 65536)
    ws = submit(db, settings, "gus", "dev-box", plan="cpu-small")
    with db.begin() as s:
        s.get(m.Job, ws).kind = "workspace"
    make_running(db, ws, [], NOW - 100)
    ddp = submit(db, settings, "gus", "ddp-run", plan="cpu-small", kind="distributed", workers=2)
    typical = {("gus",): 50.0, ("gus", "single", "cpu"): 50.0}  # gus's jobs take 50 s: not his workspace
    inp = queueing.Inputs([two_cores], None, typical, settings.compute_defaults, NOW)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    with db.begin() as s:
        queueing.apply(s, dec)
    j = row(db, ddp)
    assert j.reason == ("waiting for 2 x (1 CPU, 4096 MiB) in pool default: 1 CPU free; "
                        "behind your workspace dev-box, holding 1 of 2 CPUs"), j.reason
    assert j.estimated_start is None  # a workspace runs until stopped: "?" rather than a made-up time
    with db.begin() as s:
        queue.cancel(s, user("gus"), ddp)
    other = submit(db, settings, "hal", "hal-ddp", plan="cpu-small", kind="distributed", workers=2)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    with db.begin() as s:
        queueing.apply(s, dec)
    assert row(db, other).reason.endswith("; behind other users' work, holding 1 of 2 CPUs"), row(db, other).reason
    # an estimate the clock has overtaken (rewritten only when it moves by a minute) reads now, not the past
    with db.begin() as s:
        s.get(m.Job, other).estimated_start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=30)
    before = dt.datetime.now(dt.timezone.utc)
    with db.begin() as s:
        shown = jobs.render(s.get(m.Job, other))["queue"]["estimated_start"]
        listed = queue.queue_view(s, user("hal"), {})["items"][0]["queue"]["estimated_start"]
    for t in (shown, listed):
        assert dt.datetime.fromisoformat(t.replace("Z", "+00:00")) >= before - dt.timedelta(seconds=1), t
