"""Health readings (pure): JSON round trip, the test source's matching, the local source's devices, the window."""

from __future__ import annotations

import asyncio
import json

from ti_hub.backends.base import NodeCapacity
from ti_hub.health.monitor import HealthMonitor
from ti_hub.domain.readings import FsReading, HostReading, Snapshot
from ti_hub.health.sources import LocalHealthSource, device_readings
from ti_hub.health.testsource import TestReadingsSource, snapshot_from_doc

NODES = [NodeCapacity("m1", "default", {"demo-gpu": [0, 1]}, 8, 1024),
         NodeCapacity("m1@vc2", "team", {"demo-gpu": [2]}, 4, 512, labels={"ti-hub.io/machine": "m1"})]


def test_a_snapshot_survives_json_and_finds_a_device():
    snap = snapshot_from_doc({"devices": [{"node": "m1", "device_type": "demo-gpu", "device": 1,
                                           "utilization_percent": 3.5, "ecc_uncorrectable": 2}],
                              "hosts": [{"machine": "m1", "cpu_percent": 95.0, "memory_total_bytes": 100,
                                         "memory_available_bytes": 10,
                                         "filesystems": [{"mountpoint": "/", "size_bytes": 100, "avail_bytes": 15}]}]},
                             NODES, 1000.0)
    back = Snapshot.from_json(json.loads(json.dumps(snap.to_json())))
    assert back == snap
    assert back.device("m1", "demo-gpu", 1).utilization_percent == 3.5
    assert back.device("m1", "demo-gpu", 0).utilization_percent is None  # listed nowhere: nothing measured
    assert back.device("m1@vc2", "demo-gpu", 2).machine == "m1"
    (host,) = back.hosts
    assert host.machine == "m1" and host.memory_used_percent == 90.0
    assert host.filesystems[0].used_percent == 85.0


def test_an_entry_without_node_applies_to_every_node_with_that_device():
    snap = snapshot_from_doc({"devices": [{"device_type": "demo-gpu", "device": 2, "temperature_c": 91}]}, NODES, 1)
    assert snap.device("m1@vc2", "demo-gpu", 2).temperature_c == 91
    assert snap.device("m1", "demo-gpu", 0).temperature_c is None


def test_devices_without_nvml_are_listed_with_nothing_measured():
    out = device_readings(NODES, lambda idx: {})
    assert [(d.node, d.device, d.machine, d.utilization_percent) for d in out] == [
        ("m1", 0, "m1", None), ("m1", 1, "m1", None), ("m1@vc2", 2, "m1", None)]
    found = device_readings(NODES, lambda idx: {i: {"utilization_percent": 10.0 * i} for i in idx})
    assert [d.utilization_percent for d in found] == [0.0, 10.0, 20.0]


def test_the_local_source_reads_this_host():
    snap = LocalHealthSource(filesystems=["/"]).read_now(NODES, 5.0)
    (host,) = snap.hosts
    assert host.machine == "m1" and host.cpu_count >= 1 and host.memory_total_bytes > 0
    assert host.cpu_seconds["idle"] > 0 and isinstance(host.filesystems[0], FsReading)
    assert len(snap.devices) == 3


def test_the_monitor_keeps_a_window_and_feeds_subscribers(tmp_path):
    path = tmp_path / "readings.json"
    path.write_text(json.dumps({"devices": [{"device_type": "demo-gpu", "device": 0, "utilization_percent": 1}]}))
    now = [100.0]
    mon = HealthMonitor(clock=lambda: now[0], window=60.0, source=TestReadingsSource(path=str(path)))
    seen = []

    async def sub(snap):
        seen.append(snap.at)

    mon.subscribe("t", sub)

    class Svc:
        async def db(self, fn, *a, **k):
            return None  # storing is covered by the e2e tests; here only the window

    async def go():
        for t in (100.0, 130.0, 170.0, 200.0):
            now[0] = t
            await mon.sample(Svc(), NODES)

    asyncio.run(go())
    assert seen == [100.0, 130.0, 170.0, 200.0]
    assert [s.at for s in mon.recent] == [170.0, 200.0]  # 60 s window
    assert [s.at for s in mon.since(40.0)] == [170.0, 200.0] and mon.latest.at == 200.0
    assert mon.latest.device("m1", "demo-gpu", 0).utilization_percent == 1
    assert isinstance(mon.latest.hosts[0], HostReading)
