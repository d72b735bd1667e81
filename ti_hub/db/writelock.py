"""One SQLite writer at a time across the API processes, handed over without sleeping.

SQLite lets one transaction write at a time. When two processes collide, the loser's busy handler sleeps
1, 2, 5, ... up to 100 ms between tries, however soon the lock is free again: with two API processes
that made the p99 of job submissions ~1 s (docs/benchmarks.md). Writers queue on an ``flock`` instead,
which the kernel hands to a waiter the moment it is released; SQLite's own lock then never has to wait.
PostgreSQL needs none of this (row locks, no file lock).
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path


class WriteLock:
    """A lock shared by this process's threads (a mutex) and by forked processes (an flock on ``path``).

    ``flock`` belongs to an open file description, which a fork shares: each process opens its own."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._mutex = threading.Lock()
        self._fd: int | None = None
        self._pid = 0

    def _file(self) -> int:
        if self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._pid = os.getpid()
        return self._fd  # type: ignore[return-value]

    def __enter__(self) -> WriteLock:
        self._mutex.acquire()
        try:
            fcntl.flock(self._file(), fcntl.LOCK_EX)
        except BaseException:
            self._mutex.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)  # type: ignore[arg-type]
        finally:
            self._mutex.release()

