"""What the scheduling leader stops each cycle (``service.loop.TO_STOP``): kills and pauses asked for and
preemption victims, never a finished job, and read through the status index rather than by scanning every job
ever run (it runs every cycle; the scan cost 0.15 s at 200,000 jobs)."""

from __future__ import annotations

from sqlalchemy import text

from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.ops.common import utcnow
from ti_hub.service.loop import TO_STOP

CASES = [  # (name, kind, status, preempted_by, stopped?)
    ("kill-job", "single", st.KILLING, None, True),
    ("kill-ws", "workspace", st.KILLING, None, True),
    ("pause-job", "single", st.PAUSING, None, True),
    ("pause-ws", "workspace", st.PAUSING, None, False),  # the hub stops a workspace; only a kill is ordered
    ("victim-running", "distributed", st.RUNNING, 1, True),
    ("victim-scheduling", "single", st.SCHEDULING, 1, True),
    ("victim-ws", "workspace", st.RUNNING, 1, False),
    ("running", "single", st.RUNNING, None, False),
    ("queued", "single", st.QUEUED, None, False),
    ("done-once-preempted", "single", st.COMPLETED, 1, False),  # ended: nothing left to stop
    ("failed", "single", st.FAILED, None, False),
]


def test_the_leader_stops_kills_pauses_and_victims_only(db):
    now = utcnow()
    with db.begin() as s:
        for name, kind, status, by, _ in CASES:
            s.add(m.Job(owner="ann", name=name, kind=kind, status=status, device_type="cpu", devices_per_instance=0,
                        cpu_per_instance=1.0, memory_mib_per_instance=512, spec={}, created_at=now,
                        preempted_by=by))
    with db.begin() as s:
        got = {r.name for r in s.execute(TO_STOP)}
    assert got == {name for name, *_, stopped in CASES if stopped}


def test_what_to_stop_is_read_through_the_status_index(db):
    with db.begin() as s:
        if s.bind.dialect.name != "sqlite":
            return  # PostgreSQL plans by its statistics: an empty table is scanned whatever the indexes
        sql = str(TO_STOP.compile(s.bind, compile_kwargs={"literal_binds": True}))
        plan = [row[-1] for row in s.execute(text("EXPLAIN QUERY PLAN " + sql))]
    assert any("USING INDEX ix_ti_jobs_status_id" in p for p in plan), plan
    assert not any(p.startswith("SCAN ti_jobs") for p in plan), plan
