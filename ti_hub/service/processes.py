"""More than one API process: forked followers share the listening socket; the leader alone schedules.

One Python process is bound by one core (docs/benchmarks.md). Followers serve the same API from the same
database; they tell the leader about submissions through a pipe so that admission still happens at once.
A follower is killed with the leader (PR_SET_PDEATHSIG), so a killed service never leaves a port held.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    try:
        # SIGKILL: a follower must let go of the port before the hub starts the next service
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: followers are still stopped by the leader on a clean exit


def fork_followers(n: int, run: Callable[[int], None]) -> list[int]:
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                die_with_parent()
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
