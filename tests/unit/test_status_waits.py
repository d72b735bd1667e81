"""Long polls on job status (ops/statuswait.py): waiters wake when their job leaves the status, one read
answers every waiter of an interval, nobody waiting means no reads, and a failed read only delays."""

from __future__ import annotations

import asyncio
import time

from ti_hub.ops.statuswait import StatusWaits


class Statuses:
    """The database's answer, as the service's read gives it: a dict the test changes, and the reads it saw."""

    def __init__(self, **now: str):
        self.now = {int(k.lstrip("j")): v for k, v in now.items()}
        self.asked: list[list[int]] = []
        self.fail = 0

    async def __call__(self, ids: list[int]) -> dict[int, str]:
        self.asked.append(list(ids))
        if self.fail:
            self.fail -= 1
            raise OSError("database is locked")
        return {i: self.now[i] for i in ids if i in self.now}


async def one_waiter(db: Statuses, job_id: int) -> tuple[StatusWaits, asyncio.Task]:
    """A wait of up to 5 s on ``job_id`` leaving "queued", under way when this returns."""
    waits = StatusWaits(db, interval=0.01)
    task = asyncio.ensure_future(waits.until_not(job_id, "queued", 5))
    await asyncio.sleep(0.03)
    return waits, task


def test_a_waiter_wakes_once_its_job_leaves_the_status_and_others_keep_waiting():
    async def main():
        db = Statuses(j1="queued", j2="queued")
        waits = StatusWaits(db, interval=0.01)
        one = asyncio.ensure_future(waits.until_not(1, "queued", 5))
        two = asyncio.ensure_future(waits.until_not(2, "queued", 0.3))
        await asyncio.sleep(0.05)
        assert not one.done() and not two.done()
        t0 = time.monotonic()
        db.now[1] = "scheduling"
        assert await one is True
        assert time.monotonic() - t0 < 0.2
        assert await two is False  # its own timeout: still queued
        await asyncio.sleep(0.05)
        return db, waits

    db, waits = asyncio.run(main())
    assert waits.waiting == 0
    # one read per interval for every waiter together, never one per waiter
    assert all(ids in ([1, 2], [2]) for ids in db.asked) and [1, 2] in db.asked, db.asked


def test_a_deleted_job_wakes_its_waiter():
    async def main():
        db = Statuses(j7="queued")
        _, task = await one_waiter(db, 7)
        assert not task.done()
        del db.now[7]
        return await task

    assert asyncio.run(main()) is True


def test_no_reads_while_nobody_waits_and_reads_again_for_a_new_waiter():
    async def main():
        db = Statuses(j3="queued")
        waits = StatusWaits(db, interval=0.01)
        assert await waits.until_not(3, "queued", 0.05) is False
        await asyncio.sleep(0.05)  # the reader notices nobody waits and ends
        reads = len(db.asked)
        await asyncio.sleep(0.1)
        idle_reads = len(db.asked) - reads
        db.now[3] = "running"
        woke = await waits.until_not(3, "queued", 1)
        return idle_reads, woke

    idle_reads, woke = asyncio.run(main())
    assert idle_reads == 0
    assert woke is True


def test_a_failed_read_is_retried_at_the_next_interval():
    async def main():
        db = Statuses(j4="scheduling")
        db.fail = 2
        waits = StatusWaits(db, interval=0.01)
        woke = await waits.until_not(4, "queued", 2)
        return woke, db

    woke, db = asyncio.run(main())
    assert woke is True and len(db.asked) >= 3  # two failures, then the answer


def test_a_cancelled_waiter_leaves_no_trace():
    async def main():
        waits, task = await one_waiter(Statuses(j5="queued"), 5)
        task.cancel()
        await asyncio.sleep(0.03)
        return waits

    assert asyncio.run(main()).waiting == 0
