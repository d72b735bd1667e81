"""More than one API process: forked API processes ("followers") each listen on a socket of their own
(SO_REUSEPORT) and serve the API; the leader schedules and supervises jobs and serves no HTTP.

One Python process is bound by one core (docs/benchmarks.md). Followers serve the same API from the same
database; they tell the leader about submissions through a pipe so that admission still happens at once.
A follower is killed with the leader (PR_SET_PDEATHSIG), so a killed service never leaves a port held.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from ..plumbing.children import set_pdeathsig


def die_with_parent(leader: int) -> None:
    # SIGKILL: a follower must let go of the port before the hub starts the next service. Not Linux: followers
    # are still stopped by the leader on a clean exit
    if set_pdeathsig(signal.SIGKILL) and os.getppid() != leader:
        os.kill(os.getpid(), signal.SIGKILL)  # the leader died before the prctl: nobody would send it


def fork_followers(n: int, run: Callable[[int], None]) -> list[int]:
    pids = []
    leader = os.getpid()
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                die_with_parent(leader)
                run(i)
            except BaseException:  # noqa: BLE001 - a follower must never return into the leader's code
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    return pids


def stop_followers(pids: list[int], grace: float = 5.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    left = set(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        time.sleep(0.05)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def hold_instance_lock(path, log, wait: float = 15.0) -> int:
    """One ti service per database: two would admit the same queue twice.

    The lock is held (an flock, released by the kernel when the process dies) for the process's life; a
    service restarted by the hub waits here until its predecessor is gone. The fd is close-on-exec so
    that job supervisors, which outlive the service, never hold it."""
    import fcntl

    fd = os.open(str(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait
    waited = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise SystemExit(f"another ti service is running on this database (it holds {path}); "
                                 "stop it first") from None
            if not waited:
                log.info("waiting for the previous ti service to exit (%s)", path)
                waited = True
            time.sleep(0.1)
