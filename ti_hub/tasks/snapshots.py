"""Datasets filled after their create is stored: the leader copies each one outside any transaction.

``POST /volumes`` stores a dataset of a driver that ``snapshots_later`` as ``copying`` and answers at once;
this loop (leader only) finds such datasets, copies each as its owner's uid (``VolumeDriver.snapshot``,
``storage.userfs``), records the progress every ``PROGRESS_EVERY`` seconds, and ends the dataset ``ready``
or ``failed`` with the reason. A copy cut short by a restart starts again from scratch at the next start: its
state is in the database, not in a thread. Nothing here holds the write lock for longer than one row's update.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from ..ops import volumes
from ..storage.userfs import WorkerFailed
from ..ops import userfiles

if TYPE_CHECKING:
    from ..ops.context import Context

PROGRESS_EVERY = 1.0
MAX_AT_ONCE = 2  # copies are disk-bound: more at once only share the same disk


class Snapshots:
    def __init__(self, svc: Context):
        self.svc = svc
        self.wake = asyncio.Event()
        self.running: dict[int, asyncio.Task] = {}

    def poke(self) -> None:
        self.wake.set()

    async def run_forever(self, interval: float = 5.0) -> None:
        while True:
            try:
                await self.start_waiting()
            except Exception:
                self.svc.log.exception("starting dataset copies failed")
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=interval)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()

    async def start_waiting(self) -> None:
        todo = await self.svc.db(volumes.copying, readonly=True)
        for vid, source_id, owner in todo:
            if vid in self.running or len(self.running) >= MAX_AT_ONCE:
                continue
            task = asyncio.ensure_future(self.copy(vid, source_id, owner))
            self.running[vid] = task
            task.add_done_callback(lambda _t, vid=vid: (self.running.pop(vid, None), self.wake.set()))

    async def copy(self, vid: int, source_id: int, owner: str) -> None:
        svc, error, copied = self.svc, None, None
        total, done, last = None, 0, time.monotonic()
        try:
            who = (await userfiles.readers(svc, {owner}))[owner]
            svc.log.info("dataset %d: copying volume %d as %s", vid, source_id, who or "the platform's user")
            async for answer in svc.volume_driver.snapshot(vid, source_id, who):
                if "total" in answer:
                    total = int(answer["total"])
                    await svc.db(volumes.copy_progress, vid, total, 0)
                elif "done" in answer:
                    done = int(answer["done"])
                    if time.monotonic() - last >= PROGRESS_EVERY:
                        last = time.monotonic()
                        await svc.db(volumes.copy_progress, vid, None, done)
                elif "error" in answer:
                    error = f"the copy failed: {answer['error']}"
                elif "ok" in answer:
                    copied = int(answer["bytes"])
        except asyncio.CancelledError:
            raise  # the service stops: the next leader copies it again
        except (WorkerFailed, OSError) as e:
            svc.log.error("dataset %d: the copy of volume %d failed: %s", vid, source_id, e)
            error = "the copy failed (the administrator's log says why)"
        if error is None and copied is None:
            error = "the copy ended without finishing"
        await svc.db(volumes.copy_ended, vid, error, copied)
        svc.log.info("dataset %d: %s", vid, error or f"ready ({copied} bytes)")

    def stop(self) -> None:
        for task in list(self.running.values()):
            task.cancel()
