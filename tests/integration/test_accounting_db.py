"""MON1 booked/idle device-hours in the database: samples add to hourly rows, old hours are pruned, the past days
sum per VC, user and machine; GET /cluster/usage's answer (idle now from the stored snapshot, visibility)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select

from ti_hub.domain import scopes as S
from ti_hub.backends.base import NodeCapacity
from ti_hub.db import models as m
from ti_hub.db.accounting import DeviceHours
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.health.monitor import store_latest
from ti_hub.domain.readings import DeviceReading, HostReading, Snapshot
from ti_hub.ops import jobs
from ti_hub.tasks.accounting import account_sample, hour_of, hours_since, prune
from ti_hub.tasks.clusterusage import cluster_usage

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc).timestamp()
NODES = [NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2, 3]}, 16.0, 65536)]
ANN = Actor("ann", frozenset(S.USER_SCOPES) - {S.VIEW_ALL_JOBS})


def held(db, settings, who: str, name: str, devices: list[int]) -> int:
    with db.begin() as s:
        jid = jobs.submit(s, Actor(who, frozenset(S.USER_SCOPES)),
                          {"name": name, "plan": "demo-gpu-1", "image": "python-cpu", "command": "true"},
                          settings)["id"]
        j = s.get(m.Job, jid)
        j.status, j.started_at = st.RUNNING, dt.datetime.fromtimestamp(T0, dt.timezone.utc)
        j.placement = {"instances": [{"node": "n1", "devices": devices, "cpu": 1, "memory_mib": 1024}]}
    return jid


def snap(at: float, utils: dict[int, float | None]) -> Snapshot:
    return Snapshot(at, (HostReading("n1", address="10.0.0.7"),),
                    tuple(DeviceReading("n1", "demo-gpu", i, utilization_percent=u) for i, u in utils.items()))


def test_samples_add_to_hours_and_old_hours_are_pruned(seeded, settings):
    db = seeded
    held(db, settings, "ann", "idle", [0])
    held(db, settings, "bob", "busy", [1, 2])
    for k in range(4):  # 4 samples of 15 s: ann's device at 2 %, bob's at 90 % and unmeasured
        with db.begin() as s:
            account_sample(s, snap(T0 + 15 * k, {0: 2.0, 1: 90.0, 2: None}), 15.0, NODES, 5.0, 35)
    with db.begin() as s:
        assert s.scalar(select(func.count()).select_from(DeviceHours)) == 2  # a row per user (one machine, one hour)
        sums = {u: (b, i, x) for _p, u, _m, _t, b, i, x in hours_since(s, hour_of(T0))}
    assert sums == {"ann": (60.0, 60.0, 0.0), "bob": (120.0, 0.0, 60.0)}
    # 40 days later: a new hour's row; the old ones are past 35 days and go
    later = T0 + 40 * 86400
    with db.begin() as s:
        account_sample(s, snap(later, {0: 2.0, 1: 2.0, 2: 2.0}), 15.0, NODES, 5.0, 35)
        assert s.scalar(select(func.count()).select_from(DeviceHours)) == 2
        assert s.scalar(select(func.min(DeviceHours.hour))) == hour_of(later)
        assert prune(s, later + 36 * 86400, 35) == 2


def test_cluster_usage_idle_now_hours_and_visibility(seeded, settings):
    db = seeded
    a = held(db, settings, "ann", "notebook", [0])
    held(db, settings, "bob", "train", [1, 2])
    with db.begin() as s:
        for k in range(4):
            account_sample(s, snap(T0 + 15 * k, {0: 2.0, 1: 90.0, 2: None}), 15.0, NODES, 5.0, 35)
        store_latest(s, snap(T0 + 45, {0: 2.0, 1: 90.0, 2: None}))
    now = T0 + 50
    with db.begin() as s:
        mine = cluster_usage(s, ANN, NODES, 30, 5.0, 60.0, now=now)
        admin = cluster_usage(s, Actor("root", frozenset(S.ADMIN_SCOPES)), NODES, 30, 5.0, 60.0, now=now)
        stale = cluster_usage(s, ANN, NODES, 30, 5.0, 60.0, now=now + 3600)
    assert mine["measuring"] and not stale["measuring"]
    (vc,) = mine["vcs"]
    assert (vc["vc"], vc["total"], vc["used"], vc["free"], vc["idle"], vc["unmeasured"]) == (
        "default", 4, 3, 1, 1, 1)
    assert vc["booked_hours"] == round(180 / 3600, 4) and vc["idle_percent"] == round(100 * 60 / 180, 1)
    assert [u["user"] for u in mine["users"]] == ["ann"]  # others' rows need view-all
    assert mine["users"][0]["idle"] == 1 and mine["users"][0]["idle_percent"] == 100.0
    assert [(u["user"], u["idle"], u["unmeasured"]) for u in admin["users"]] == [("ann", 1, 0), ("bob", 0, 1)]
    (mc,) = mine["machines"]
    assert mc["address"] == "10.0.0.7" and (mc["used"], mc["idle"], mc["free"]) == (3, 1, 1)
    assert [(r["id"], r["name"], r["owner"], r["devices"]) for r in mc["running"]] == [
        (a, "notebook", "ann", [0]), (None, None, None, [1, 2])]  # bob's job, unnamed for ann
    assert [r["owner"] for r in admin["machines"][0]["running"]] == ["ann", "bob"]
    # a stale snapshot measures nothing now: unmeasured, not idle; the hours stay
    assert stale["vcs"][0]["idle"] == 0 and stale["vcs"][0]["unmeasured"] == 3
    assert stale["vcs"][0]["booked_hours"] == vc["booked_hours"]
