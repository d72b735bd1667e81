"""Long polls on a job's status: requests wait here for their jobs to leave a status (a queued workspace, until
the scheduler admits it), and one query per interval answers all of them.

The hub's spawner used to ask again and again whether a workspace was admitted; each ask cost the hub's one
event loop a request and an answer to parse, and the ti service an authenticated read, and an admission reached
the spawner only at its next ask. Now one ask waits (``GET /workspaces/{owner}/{name}?wait=S``).

Each API process has its own waits: the scheduler runs in another process, so they read the database (one
read-only query of the waiting ids per ``interval``, and none while nobody waits).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

ReadStatuses = Callable[[list[int]], Awaitable[dict[int, str]]]


class StatusWaits:
    def __init__(self, read: ReadStatuses, interval: float, log: logging.Logger | None = None):
        self.read = read  # ids -> {id: status}; a job not in the answer is gone
        self.interval = interval
        self.log = log or logging.getLogger(__name__)
        self._waiting: dict[int, list[tuple[str, asyncio.Future]]] = {}
        self._task: asyncio.Task | None = None

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiting.values())

    async def until_not(self, job_id: int, status: str, timeout: float) -> bool:
        """Return once job ``job_id`` is no longer in ``status`` (True), or after ``timeout`` seconds (False)."""
        fut = asyncio.get_running_loop().create_future()
        entry = (status, fut)
        self._waiting.setdefault(job_id, []).append(entry)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            left = [w for w in self._waiting.get(job_id, []) if w is not entry]
            if left:
                self._waiting[job_id] = left
            else:
                self._waiting.pop(job_id, None)

    async def _run(self) -> None:
        while self._waiting:
            await asyncio.sleep(self.interval)
            ids = sorted(self._waiting)
            if not ids:  # the last waiter left during the sleep
                break
            try:
                now = await self.read(ids)
            except Exception:  # the next interval tries again; a waiter's own timeout still ends its wait
                self.log.warning("reading the status of %d waiting job(s) failed", len(ids), exc_info=True)
                continue
            self._wake(ids, now)

    def _wake(self, ids: Iterable[int], now: dict[int, str]) -> None:
        for job_id in ids:
            for status, fut in self._waiting.get(job_id, []):
                if now.get(job_id) != status and not fut.done():
                    fut.set_result(None)
