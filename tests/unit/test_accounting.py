"""Booked and idle device time (MON1), the pure core: which booked device is idle, busy or unmeasured, how many
seconds one sample stands for, and the hourly sums a sample adds to."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from ti_hub.backends.base import NodeCapacity
from ti_hub.domain.readings import DeviceReading, Snapshot
from ti_hub.tasks.accounting import (BUSY, IDLE, UNMEASURED, accumulate, bookings, hour_of, running,
                                       sample_seconds, state_of)

T0 = dt.datetime(2030, 1, 1, 10, tzinfo=dt.timezone.utc).timestamp()
NODES = {n.name: n for n in [
    NodeCapacity("m1", "default", {"gpu": [0, 1, 2, 3]}, 16, 65536),
    NodeCapacity("m1@team", "team", {"gpu": [4, 5]}, 8, 32768, labels={"ti-hub.io/machine": "m1"}),
    NodeCapacity("m2", "default", {"gpu": [0, 1]}, 8, 32768)]}


def job(id: int, owner: str, *instances: tuple[str, list[int]], pool: str = "default", device_type: str = "gpu",
        kind: str = "single"):
    return SimpleNamespace(id=id, owner=owner, name=f"j{id}", kind=kind, pool=pool, device_type=device_type,
                           started_at=dt.datetime.fromtimestamp(T0, dt.timezone.utc),
                           placement={"instances": [{"node": n, "devices": d, "cpu": 1} for n, d in instances]})


def snap(at: float, utils: dict[tuple[str, int], float | None]) -> Snapshot:
    return Snapshot(at, (), tuple(DeviceReading(node, "gpu", i, machine=NODES[node].labels.get("ti-hub.io/machine", ""),
                                                utilization_percent=u) for (node, i), u in utils.items()))


def test_state_of_threshold_and_unmeasured():
    assert state_of(2.0, 5.0) == IDLE
    assert state_of(5.0, 5.0) == BUSY  # under the threshold is idle; at it, busy
    assert state_of(0.0, 5.0) == IDLE
    assert state_of(None, 5.0) == UNMEASURED  # no reading is never idle


def test_sample_seconds():
    assert sample_seconds(None, T0, 15) == 15  # the first sample stands for one interval
    assert sample_seconds(T0, T0 + 16.5, 15) == 16.5  # a late sample loses no time
    assert sample_seconds(T0, T0 + 3600, 15) == 15  # a service that was down books nothing for the gap
    assert sample_seconds(T0, T0, 15) == 15


def test_hour_of():
    assert hour_of(T0 + 3599.9) == dt.datetime(2030, 1, 1, 10, tzinfo=dt.timezone.utc)
    assert hour_of(T0 + 3600) == dt.datetime(2030, 1, 1, 11, tzinfo=dt.timezone.utc)


def test_bookings_name_machine_and_vc_of_the_slice():
    books = bookings([job(1, "ann", ("m1", [0, 1]), ("m1@team", [4])), job(2, "bob", ("gone", [7]), pool="p9")],
                     NODES)
    assert [(b.owner, b.pool, b.node, b.machine, b.device) for b in books] == [
        ("ann", "default", "m1", "m1", 0), ("ann", "default", "m1", "m1", 1), ("ann", "team", "m1@team", "m1", 4),
        ("bob", "p9", "gone", "gone", 7)]  # a node no longer known: the job's pool, the node's name
    runs = running([job(1, "ann", ("m1", [0, 1]), ("m1@team", [4])), job(3, "cid", ("m2", []), device_type="cpu")],
                   NODES)
    assert [(r.machine, r.owner, r.devices) for r in runs] == [("m1", "ann", (0, 1, 4)), ("m2", "cid", ())]


def test_accumulate_splits_booked_seconds_by_reading():
    books = bookings([job(1, "ann", ("m1", [0, 1, 2])), job(2, "bob", ("m1@team", [4]), ("m2", [0]))], NODES)
    s = snap(T0 + 60, {("m1", 0): 2.0, ("m1", 1): 90.0, ("m1", 2): None, ("m1@team", 4): 1.0})  # m2 not read at all
    totals = accumulate(books, s, 15.0, 5.0)
    h = hour_of(T0)
    assert totals == {(h, "default", "ann", "m1", "gpu"): [45.0, 15.0, 15.0],
                      (h, "team", "bob", "m1", "gpu"): [15.0, 15.0, 0.0],
                      (h, "default", "bob", "m2", "gpu"): [15.0, 0.0, 15.0]}


def test_accumulate_over_samples_sums_and_crosses_hours():
    books = bookings([job(1, "ann", ("m1", [0]))], NODES)
    totals: dict = {}
    prev = None
    for k in range(8):  # every 15 s, utilization 2 % then 90 %, crossing 11:00 after the 4th sample
        at = T0 + 3540 + 15 * k
        totals = accumulate(books, snap(at, {("m1", 0): 2.0 if k % 2 == 0 else 90.0}), sample_seconds(prev, at, 15),
                            5.0, totals)
        prev = at
    ten, eleven = hour_of(T0), hour_of(T0 + 3600)
    assert totals[(ten, "default", "ann", "m1", "gpu")] == [60.0, 30.0, 0.0]
    assert totals[(eleven, "default", "ann", "m1", "gpu")] == [60.0, 30.0, 0.0]


def test_rows_stay_few_with_200_machines_of_8_gpus():
    nodes = {f"m{i:03d}": NodeCapacity(f"m{i:03d}", "default", {"gpu": list(range(8))}, 64, 1 << 20)
             for i in range(200)}
    books = bookings([job(i, f"u{i % 50}", (f"m{i:03d}", list(range(8)))) for i in range(200)], nodes)
    s = Snapshot(T0, (), tuple(DeviceReading(f"m{i:03d}", "gpu", d, utilization_percent=float(d))
                               for i in range(200) for d in range(8)))
    totals = accumulate(books, s, 15.0, 5.0)
    assert len(books) == 1600 and len(totals) == 200  # a row per user and machine, not per device
    assert sum(t[0] for t in totals.values()) == 1600 * 15.0
    assert sum(t[1] for t in totals.values()) == 200 * 5 * 15.0  # devices 0-4 read under 5 %
