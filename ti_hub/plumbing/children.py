"""Children that die with their parent, and a parent that notices at once when a child dies.

* ``die_with_parent_preexec``: the child asks the kernel (``PR_SET_PDEATHSIG``) for a signal when its parent
  dies, however it dies (kill -9 included). The setting survives exec but is tied to the parent *thread*
  that forked the child: a child forked from a worker thread would get the signal when that thread ends, so
  it is only set for children forked from the main thread (where the hub's event loop spawns). A parent
  killed between the fork and the prctl would be missed: the child compares getppid() with the parent's pid
  taken before the fork and signals itself if they differ.
* ``watch_exit``: a pidfd (Linux 5.3+) becomes readable when a child exits; the event loop calls back at once,
  where JupyterHub polls its managed services every 30 s.
* ``restart_delay``: a service that crashed is restarted at once; one that keeps dying right after its start
  is restarted less and less often.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux


def set_pdeathsig(sig: int) -> bool:
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def die_with_parent_preexec(sig: int = signal.SIGTERM, then: Callable[[], None] | None = None
                            ) -> Callable[[], None] | None:
    """A ``preexec_fn`` for Popen: the child gets ``sig`` when this process dies; ``then`` (another preexec_fn,
    e.g. JupyterHub's setuid for a service with a user) runs first: a change of user clears the setting.

    Built in the parent: the child, between fork and exec, only calls prctl, getppid and kill (no imports,
    no locks another thread may have held at the fork)."""
    prctl = _prctl()
    if prctl is None or threading.current_thread() is not threading.main_thread():
        return then
    parent = os.getpid()

    def preexec() -> None:
        if then is not None:
            then()
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl: nobody will send the signal
            os.kill(os.getpid(), sig)

    return preexec


def watch_exit(pid: int, callback: Callable[[], None]) -> Callable[[], None] | None:
    """Call ``callback`` once, on the running loop, when child ``pid`` exits (it stays a zombie until reaped).

    Returns a function that stops watching; None where pidfds are missing (then poll)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    loop = asyncio.get_running_loop()
    state = {"fd": fd}

    def cancel() -> None:
        fd = state.pop("fd", None)
        if fd is not None:
            loop.remove_reader(fd)
            os.close(fd)

    def fire() -> None:
        cancel()
        callback()

    loop.add_reader(fd, fire)
    return cancel


# a service that dies this soon after its start is failing to start (an import or config error, a port in use),
# not crashing: after one quick retry, wait before the next
QUICK_DEATH_S = 5.0
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 30.0  # JupyterHub's own poll interval: never slower than the hub was without this


def restart_delay(uptime: float, quick_deaths: int) -> tuple[float, int]:
    """Seconds to wait before restarting a service that died after ``uptime`` seconds, and the count of quick
    deaths in a row to pass next time (``quick_deaths``: the count so far, 0 at first)."""
    if uptime >= QUICK_DEATH_S:
        return 0.0, 0
    quick_deaths += 1
    if quick_deaths == 1:
        return 0.0, 1
    return min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (quick_deaths - 2)), quick_deaths
