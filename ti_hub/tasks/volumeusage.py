"""Capacity of the volumes no file system caps (the local driver's directories), enforced by measuring them.

Every ``TiService.volume_usage_interval`` seconds the leader measures each volume in a worker thread (a walk of
its files as the volume owner's uid, never through a link: ``storage.userfs``; never on the event loop) and
records the bytes (``ops.volumes.record_usage``). A volume over its capacity is marked: it shows ``over_capacity``, jobs that would mount it read-write are refused at submission
and wait at admission (``domain.mounts.check_capacity``), and the jobs and workspaces writing it get an alert in
their history. Work already running is not stopped, and it can overshoot between two measurements; workspaces may
still mount the volume to clean it up. Drivers that cannot measure (Kubernetes: the claim's own size is the
limit there) answer None and nothing is recorded. A local volume that is a file system of its own (issue 30,
``storage/loopfs.py``) is capped by the kernel: its usage is read with one ``statvfs`` instead of a walk, and it
never goes over.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ..ops import userfiles, volumes
from ..ops.common import utcnow
from ..ops.context import Context
from ..storage.base import VolumeDriver



class UsageContext(Context, Protocol):
    volume_usage_interval: float  # seconds between two measurements


SCAN_FILES = 10_000_000  # a measurement that counts files stops here (the API's quick look stops sooner)


def measure(driver: VolumeDriver, targets: list[tuple[int, str]], who: dict[str, Any]) -> dict[int, int | None]:
    """Blocking: bytes in use per volume, each read as its owner (``who``)."""
    return {vid: driver.usage_bytes(vid, max_files=SCAN_FILES, who=who[owner]) for vid, owner in targets}


async def check(svc: Context) -> list[str]:
    """One measurement of every volume; the alerts it raised."""
    targets = await svc.db(volumes.usage_targets, readonly=True)
    who = await userfiles.readers(svc, {owner for _, owner in targets})
    measured = await asyncio.to_thread(measure, svc.volume_driver, targets, who)
    if all(b is None for b in measured.values()):
        return []
    alerts = await svc.db(volumes.record_usage, measured, utcnow())
    for alert in alerts:
        svc.log.warning("%s", alert)
    return alerts


async def watch(svc: UsageContext) -> None:
    while True:
        try:
            await check(svc)
        except Exception:
            svc.log.exception("measuring the volumes' usage failed")
        await asyncio.sleep(svc.volume_usage_interval)
