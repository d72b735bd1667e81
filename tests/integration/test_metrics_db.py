"""The database side of a metrics scrape (ti_hub/metrics/db.py) on SQLite and PostgreSQL: grouped counts, the
active jobs through the status index, placements, and usage scores read again only after a save."""

from __future__ import annotations

import datetime as dt

from ti_hub.db import models as m
from ti_hub.metrics.db import read_figures


def job(name, status, kind="single", owner="ann", dtype="demo-gpu", devs=1, workers=1, pool="default",
        placement=None, queued_at=None):
    now = dt.datetime.now(dt.timezone.utc)
    return m.Job(owner=owner, name=name, kind=kind, status=status, pool=pool, device_type=dtype,
                 devices_per_instance=devs, workers=workers, cpu_per_instance=1.0, memory_mib_per_instance=512,
                 spec={}, created_at=now, queued_at=queued_at, placement=placement)


def test_figures_of_a_scrape(db):
    t0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    with db.begin() as s:
        s.add_all([
            job("q1", "queued", queued_at=t0), job("q2", "queued", queued_at=t0 + dt.timedelta(minutes=5)),
            job("w1", "queued", kind="workspace", owner="bob", queued_at=t0),
            job("r1", "running", owner="bob", workers=2, devs=2,
                placement={"instances": [{"node": "n1", "devices": [0, 1]}, {"node": "n2", "devices": [3, 4]}]}),
            job("c1", "completed"), job("c2", "completed"), job("cpu1", "running", dtype="cpu", devs=0)])
        s.add(m.UsageScore(user="bob", device_type="demo-gpu", score=4.5, held=4.0, updated_at=t0))
    with db.begin() as s:
        fig = read_figures(s)
    assert sorted(fig.states) == [("completed", 2), ("queued", 3), ("running", 2)]
    assert sorted(fig.jobs) == [("queued", "single", "default", 2), ("queued", "workspace", "default", 1),
                                ("running", "single", "default", 2)]
    queues = {(p, t, k): (n, oldest) for p, t, k, n, oldest in fig.queues}
    assert queues[("default", "demo-gpu", "single")] == (2, t0)
    assert sorted(fig.user_jobs) == [("ann", "queued", 2), ("ann", "running", 1), ("bob", "queued", 1),
                                     ("bob", "running", 1)]
    assert fig.user_devices == [("bob", "default", "demo-gpu", 4)]  # 2 workers x 2 devices; cpu jobs hold none
    ((pool, dtype, placement),) = fig.placements
    assert (pool, dtype, placement["instances"][1]["devices"]) == ("default", "demo-gpu", [3, 4])
    assert fig.scores == [("bob", "demo-gpu", 4.5)]

    with db.begin() as s:  # nothing saved since: the caller keeps what it rendered
        assert read_figures(s, fig.scores_sig).scores is None
    with db.begin() as s:  # the scheduler saves again (all rows, a new time)
        s.query(m.UsageScore).delete()
        s.add(m.UsageScore(user="bob", device_type="demo-gpu", score=5.0, held=4.0,
                           updated_at=t0 + dt.timedelta(seconds=30)))
    with db.begin() as s:
        assert read_figures(s, fig.scores_sig).scores == [("bob", "demo-gpu", 5.0)]
