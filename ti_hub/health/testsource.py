"""A TEST SOURCE of health readings: the figures come from a JSON file that the tests (or a demo) write.

This is how CI, which has no GPU, drives everything that consumes device readings (idle reclamation, alert
rules, cluster status, metrics) through the same interface as the NVML source. It is never a default: a site
sets ``c.HealthMonitor.source_class = "ti_hub.health.testsource.TestReadingsSource"`` explicitly, and the
service logs a warning at start that its readings are not measured.

File format (re-read at every sample; a missing or unreadable file reads as "nothing measured")::

    {"devices": [{"node": "n1", "device_type": "demo-gpu", "device": 0, "utilization_percent": 3.0, ...}],
     "hosts": [{"machine": "n1", "cpu_percent": 95.0, "memory_total_bytes": ..., "memory_available_bytes": ...}]}

A device entry without "node" applies to that device type and index on every node. Every capacity node's
devices get a reading (unlisted ones with nothing measured), as with NVML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traitlets import Unicode

from ..backends.base import NodeCapacity, machine_of
from ..domain.readings import DeviceReading, HostReading, Snapshot, device_from_json, host_from_json
from .sources import HealthSource


def snapshot_from_doc(doc: dict[str, Any], nodes: list[NodeCapacity], now: float) -> Snapshot:
    """Pure: the readings ``doc`` gives for these nodes."""
    given: dict[tuple[str, str, int], dict[str, Any]] = {}
    for d in doc.get("devices") or ():
        given[(str(d.get("node", "*")), str(d.get("device_type")), int(d.get("device", 0)))] = d
    devices = []
    for n in nodes:
        for t, devs in sorted(n.devices.items()):
            for i in devs:
                d = given.get((n.name, t, i)) or given.get(("*", t, i)) or {}
                devices.append(device_from_json({**d, "node": n.name, "device_type": t, "device": i,
                                                 "machine": machine_of(n)}))
    hosts_given = {str(h.get("machine")): h for h in doc.get("hosts") or ()}
    hosts = [host_from_json(hosts_given.get(m, {"machine": m})) for m in sorted({machine_of(n) for n in nodes})]
    return Snapshot(now, tuple(hosts), tuple(devices))


class TestReadingsSource(HealthSource):
    """TEST SOURCE: readings from a JSON file the tests write (see the module's docstring)."""

    __test__ = False  # not a pytest class
    path = Unicode("", config=True, help="The JSON file with the readings (TEST SOURCE: see testsource.py).")

    async def read(self, nodes: list[NodeCapacity], now: float) -> Snapshot:
        try:
            doc = json.loads(Path(self.path).read_text())
        except (OSError, ValueError):
            doc = {}
        return snapshot_from_doc(doc if isinstance(doc, dict) else {}, nodes, now)


__all__ = ["TestReadingsSource", "snapshot_from_doc", "DeviceReading", "HostReading"]
