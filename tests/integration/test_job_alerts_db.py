"""Job alerts in the alert lifecycle (MON2-3, JOB2, Q6) on SQLite and PostgreSQL: a wait past the estimate and a
run past the declared duration open an alert naming the owner, with figures; the job's leaving the state ends
it (admitted, killed); the alert event stays in the job's history."""

from __future__ import annotations

from sqlalchemy import select

from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.ops import alerts, jobs
from ti_hub.ops import queueing

from test_live_queue import ADMIN, NOW, decide, make_running, row, submit, user


def open_keys(db) -> list[str]:
    with db.begin() as s:
        return [a["key"] for a in alerts.list_alerts(s, ADMIN)["items"]]


def test_a_wait_past_the_estimate_opens_an_alert_that_admission_clears(seeded, settings):
    db = seeded
    holder = submit(db, settings, "cid", "holder", estimated_duration=50)
    make_running(db, holder, [0, 1, 2, 3], NOW - 10)
    waiting = submit(db, settings, "dee", "late-one")
    decide(db, settings)
    shown = queueing.epoch(row(db, waiting).estimated_start)
    decide(db, settings, now=shown + 61)
    with db.begin() as s:
        mine = alerts.list_alerts(s, user("dee"))["items"]
        assert [a["key"] for a in mine] == [f"job:{waiting}:wait"]
        a = mine[0]
        assert a["users"] == ["dee"] and a["rule"] == "wait" and a["job_id"] == waiting and a["kind"] == "job"
        assert a["subject"] == f"Job {waiting} (dee/late-one) is waiting longer than estimated"
        assert a["figures"]["estimated_start"] and "late_s" in a["figures"] and a["figures"]["owner"] == "dee"
        assert alerts.list_alerts(s, user("cid"))["total"] == 0
    with db.begin() as s:  # the holder ends: the waiting job is admitted, its wait is over
        jobs.record(s, s.get(m.Job, holder), st.COMPLETED, "done")
    decide(db, settings, now=shown + 70)
    assert row(db, waiting).status == st.SCHEDULING
    assert open_keys(db) == []
    with db.begin() as s:
        events = s.scalars(select(m.JobEvent.status).where(m.JobEvent.job_id == waiting)).all()
        assert "alert" in events  # the history keeps it


def test_a_run_past_its_duration_opens_an_alert_that_a_kill_clears(seeded, settings):
    db = seeded
    j = submit(db, settings, "eve", "overran", estimated_duration=10)
    other = submit(db, settings, "eve", "quiet")
    make_running(db, j, [0], NOW - 100)
    make_running(db, other, [1], NOW - 100)
    with db.begin() as s:
        jobs.alert(s, j, "running longer than declared", queueing.from_epoch(NOW), rule="overrun",
                   figures={"declared_s": 10, "ran_s": 100})
        jobs.alert(s, j, "again", queueing.from_epoch(NOW + 5), rule="overrun",
                   figures={"declared_s": 10, "ran_s": 105})
    with db.begin() as s:
        (a,) = alerts.list_alerts(s, user("eve"))["items"]
        assert a["key"] == f"job:{j}:overrun" and a["figures"]["ran_s"] == 105  # one alert, refreshed
        assert a["fired_at"] == queueing.from_epoch(NOW).isoformat().replace("+00:00", "Z")
    with db.begin() as s:  # the other job's end touches nothing
        jobs.record(s, s.get(m.Job, other), st.KILLING, "kill requested")
    assert open_keys(db) == [f"job:{j}:overrun"]
    with db.begin() as s:
        jobs.record(s, s.get(m.Job, j), st.KILLING, "kill requested")
    assert open_keys(db) == []


def test_a_volume_over_its_capacity_opens_an_alert_until_it_is_back_under(seeded, settings, tmp_path):
    from ti_hub.domain.mounts import GIB
    from ti_hub.ops import quotas, volumes
    from ti_hub.storage.local import LocalVolumeDriver

    db = seeded
    driver = LocalVolumeDriver(root_dir=str(tmp_path), disk_limits="off")
    with db.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "gil", "kind": "filesystem", "capacity_gib": 10})
        vid = volumes.create(s, user("gil"), {"name": "fullvol", "kind": "filesystem", "capacity_gib": 1},
                             driver, {})["id"]
    t = queueing.from_epoch(NOW)
    with db.begin() as s:
        volumes.record_usage(s, {vid: 2 * GIB}, t)
    with db.begin() as s:
        (a,) = alerts.list_alerts(s, user("gil"))["items"]
        assert a["key"] == f"volume:{vid}:capacity" and a["subject"] == "Volume gil/fullvol is over its capacity"
        assert a["figures"]["used_bytes"] == 2 * GIB and a["figures"]["capacity_gib"] == 1
        volumes.record_usage(s, {vid: 3 * GIB}, t)  # still over: the same alert
    assert open_keys(db) == [f"volume:{vid}:capacity"]
    with db.begin() as s:
        volumes.record_usage(s, {vid: GIB // 2}, t)
    assert open_keys(db) == []
