"""MON1 data behind the cluster and pools pages: usage samples written, pruned and read back as series;
per pool, user and node overviews."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select

from ti_hub.domain import scopes as S
from ti_hub.backends.base import NodeCapacity
from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.ops import jobs
from ti_hub.ops.history import read_history, take_sample
from ti_hub.ops.status import cluster_overview, pools_overview

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
NODES = [NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2, 3]}, 16.0, 65536)]


def submit(db, settings, who: str, name: str) -> int:
    with db.begin() as s:
        return jobs.submit(s, Actor(who, frozenset(S.USER_SCOPES)),
                           {"name": name, "plan": "demo-gpu-1", "image": "python-cpu", "command": "true"},
                           settings)["id"]


def run_on(db, job_id: int, devices: list[int], preemptible: bool = False) -> None:
    with db.begin() as s:
        j = s.get(m.Job, job_id)
        j.status, j.preemptible = st.RUNNING, preemptible
        j.placement = {"instances": [{"node": "n1", "devices": devices, "cpu": 1, "memory_mib": 1024}]}


def test_samples_are_written_read_back_and_pruned(seeded, settings):
    db = seeded
    a = submit(db, settings, "ann", "held")
    submit(db, settings, "bob", "waits")
    run_on(db, a, [0])
    for i in range(5):  # one sample a minute
        with db.begin() as s:
            take_sample(s, T0 + dt.timedelta(minutes=i), {("ann", "demo-gpu"): 0.5 + i / 10}, NODES, 150)
    with db.begin() as s:
        # retention 2.5 minutes: at minute 4, the samples of minutes 0 and 1 are gone
        assert s.scalar(select(func.min(m.UsageSample.at))) == T0 + dt.timedelta(minutes=2)
        h = read_history(s, T0, 60.0)
    assert h["samples"] == 3
    assert [v for _, v in h["pools"]["default/demo-gpu"]] == [1, 1, 1]
    assert [v for _, v in h["queues"]["default/demo-gpu"]] == [1, 1, 1]
    assert [v for _, v in h["users"]["ann"]] == [1, 1, 1] and [v for _, v in h["users"]["bob"]] == [0, 0, 0]
    assert [v for _, v in h["scores"]["ann/demo-gpu"]] == [0.7, 0.8, 0.9]
    assert h["device_hours"] == {"ann": 0.05, "bob": 0.0}  # 3 samples x 1 device x 60 s
    with db.begin() as s:
        long = read_history(s, T0, 60.0, max_points=2)  # a long window reads spaced samples, the last included
    assert [t for t, _ in long["pools"]["default/demo-gpu"]][-1] == h["pools"]["default/demo-gpu"][-1][0]
    assert len(long["pools"]["default/demo-gpu"]) == 2 and long["device_hours"] == h["device_hours"]


def test_overviews_per_pool_user_and_node(seeded, settings):
    db = seeded
    a, b = submit(db, settings, "ann", "first"), submit(db, settings, "bob", "second")
    submit(db, settings, "bob", "queued")
    run_on(db, a, [0])
    run_on(db, b, [1], preemptible=True)
    nodes = NODES + [NodeCapacity("n2", "train", {"demo-gpu": [0, 1]}, 8.0, 1024, schedulable=False)]
    with db.begin() as s:
        o = cluster_overview(s, nodes)
        p = pools_overview(s, nodes)
    assert o["pools"] == [
        {"pool": "default", "device_type": "demo-gpu", "total": 4, "unschedulable": 0, "used": 2,
         "preemptible_used": 1, "available": 2, "active_jobs": 3},
        {"pool": "train", "device_type": "demo-gpu", "total": 2, "unschedulable": 2, "used": 0,
         "preemptible_used": 0, "available": 0, "active_jobs": 0}]
    assert o["users"] == [{"user": "ann", "devices": 1, "preemptible": 0, "running": 1, "queued": 0, "gap": 0},
                          {"user": "bob", "devices": 1, "preemptible": 1, "running": 1, "queued": 1, "gap": 1}]
    n1 = next(n for n in o["nodes"] if n["name"] == "n1")
    assert (n1["used"], n1["preemptible_used"], n1["available"], n1["jobs"], n1["status"]) == (2, 1, 2, 2, "ready")
    assert next(n for n in o["nodes"] if n["name"] == "n2")["status"] == "unschedulable"
    default = next(x for x in p["pools"] if x["pool"] == "default")
    assert default["devices"] == {"demo-gpu": 4} and default["queues"]["default/demo-gpu/single"] == {
        "queued": 1, "running": 2}
    assert {x["name"] for x in default["plans"]} == {"cpu-small", "demo-gpu-1"}
    train = next(x for x in p["pools"] if x["pool"] == "train")
    assert train["schedulable"] == 0 and train["plans"] == []
