"""Rendered JSON of jobs that can no longer change, so that job lists stop rebuilding them.

A listing reads each job's (id, status, finished_at) first and takes the cached JSON only when both still
match: a job reaches a final state only through ``jobs.record``, which stamps ``finished_at``, and a
workspace that is started again leaves its final state, so a stale entry can never be served. Each
process keeps its own cache; nothing is shared, nothing needs invalidating.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable

import orjson


class RenderCache:
    """A bounded LRU map job id -> (version key, JSON fragment). Thread-safe (API worker threads)."""

    def __init__(self, max_entries: int = 20_000) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[int, tuple[Hashable, orjson.Fragment]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, job_id: int, key: Hashable) -> orjson.Fragment | None:
        with self._lock:
            entry = self._items.get(job_id)
            if entry is None or entry[0] != key:
                self.misses += 1
                return None
            self._items.move_to_end(job_id)
            self.hits += 1
            return entry[1]

    def put(self, job_id: int, key: Hashable, doc: dict[str, Any]) -> orjson.Fragment:
        fragment = orjson.Fragment(orjson.dumps(doc))
        if self.max_entries <= 0:
            return fragment
        with self._lock:
            self._items[job_id] = (key, fragment)
            self._items.move_to_end(job_id)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return fragment

    def __len__(self) -> int:
        return len(self._items)
