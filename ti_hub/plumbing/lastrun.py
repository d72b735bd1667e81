"""An earlier `ti-hub start` on the same data dir: refuse while it runs, stop what it left once it is gone.

* Owner: ``ti-hub.pid`` names the `ti-hub start` that owns the data dir, which holds an flock on it for its
  life. The kernel releases the lock however that process dies; the fd is close-on-exec, so the hub never
  inherits it (a hub outliving its `ti-hub start` must not look like a live owner).
* Leftovers: the hub (``jupyterhub.pid``), its managed services (``service-NAME.pid``, written by
  ti_hub/hub/main.py) and the proxy (``proxy.pid``), each recognized by its start time (ti_hub/plumbing/pidfile.py).
  Children die with their parent (PR_SET_PDEATHSIG, ti_hub/plumbing/children.py); what this stops is what could not:
  a stopped or hung process, a run of an older TiHub, a platform without prctl. Nothing is adopted: a hub's
  hold on its children (their Popen objects, its polls) dies with it, so a new hub cannot take them over.
  Workspaces and job supervisors are not touched: the new hub and ti service find and keep them.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import pidfile
from .pidfile import Record

OWNER = "ti-hub.pid"
HUB = "jupyterhub.pid"
PROXY = "proxy.pid"
SERVICE_PREFIX = "service-"  # + the service's name + ".pid"
# the hub stops its workspaces, services and proxy itself on SIGTERM: give it the time that takes
HUB_GRACE_S = 20.0
GRACE_S = 5.0


class DataDirBusy(Exception):
    """Another live `ti-hub start` owns the data dir."""


@dataclass(frozen=True)
class Leftover:
    what: str
    file: str
    record: Record

    def __str__(self) -> str:
        return f"{self.what} (pid {self.record.pid})"


def describe(file: str) -> str:
    if file == HUB:
        return "the hub"
    if file == PROXY:
        return "the proxy"
    name = file.removeprefix(SERVICE_PREFIX).removesuffix(".pid")
    return "the ti service" if name == "ti" else f"service {name}"


def stop_order(files: list[str]) -> list[list[str]]:
    """Groups stopped one after the other: the hub first (alive, it would restart services stopped under it,
    and on SIGTERM it stops them itself), then the services, then the proxy (the last to let go of a port
    users reach)."""
    groups = [[f for f in files if f == HUB],
              sorted(f for f in files if f.startswith(SERVICE_PREFIX) and f.endswith(".pid")),
              [f for f in files if f == PROXY]]
    return [g for g in groups if g]


def busy_message(data: Path, record: Record | None, boot_time: float, ticks_per_s: int) -> str:
    who = "another `ti-hub start`"
    if record is not None:
        since = pidfile.started_at(record, boot_time, ticks_per_s)
        when = f", running since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}" if since else ""
        who += f" (pid {record.pid}{when})"
        how = f"stop it first (Ctrl-C where it runs, or kill {record.pid})"
    else:
        how = "stop it first"
    return f"{who} is running on {data}; {how}, or use another --data-dir."


def claim(data: Path) -> int:
    """Own ``data`` for the life of this process; returns the fd to keep open. Raises DataDirBusy."""
    path = data / OWNER
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirBusy(busy_message(data, pidfile.read(path), pidfile.boot_time(), pidfile.ticks_per_s())
                          ) from None
    # written in place, never replaced: the lock is on this inode
    record = pidfile.record_of(os.getpid()) or Record(os.getpid())
    os.ftruncate(fd, 0)
    os.pwrite(fd, record.text().encode(), 0)
    return fd


def owner(data: Path) -> Record | None:
    """The live `ti-hub start` that owns ``data``, or None. The flock says whether one lives; the record
    names it (never a pid alone: the kernel may have given it to another process since)."""
    path = data / OWNER
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        record = pidfile.read(path)
        return record if record is not None and pidfile.running(record) else None
    finally:
        os.close(fd)  # releases a lock taken here
    return None


def find(data: Path) -> list[Leftover]:
    """Live processes the pid files of ``data`` name, in stop order; files naming none are removed (left,
    JupyterHub would signal whatever process has their pid now)."""
    found = []
    for group in stop_order([p.name for p in data.glob("*.pid")]):
        for file in group:
            record = pidfile.alive(data / file)
            if record is None:
                pidfile.remove_if(data / file, pidfile.read(data / file))
            else:
                found.append(Leftover(describe(file), file, record))
    return found


def _signal(record: Record, sig: int) -> None:
    if not pidfile.running(record):
        return  # gone, or the pid already names another process
    try:
        os.kill(record.pid, sig)
        if sig != signal.SIGKILL:
            os.kill(record.pid, signal.SIGCONT)  # a stopped process handles SIGTERM only once it runs
    except (ProcessLookupError, PermissionError):
        pass  # another user's process: reported as left running


def stop(data: Path, leftovers: list[Leftover], clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep) -> tuple[list[Leftover], list[Leftover]]:
    """SIGTERM each group in turn, SIGKILL what is still there after its grace; returns those killed and
    those still running (another user's, or stuck in the kernel)."""
    killed, stuck = [], []
    by_file = {lo.file: lo for lo in leftovers}
    for group in stop_order(list(by_file)):
        left = [by_file[f] for f in group if pidfile.running(by_file[f].record)]
        grace = HUB_GRACE_S if group == [HUB] else GRACE_S
        for lo in left:
            _signal(lo.record, signal.SIGTERM)
        deadline = clock() + grace
        while left and clock() < deadline:
            sleep(0.1)
            left = [lo for lo in left if pidfile.running(lo.record)]
        for lo in left:
            _signal(lo.record, signal.SIGKILL)
            killed.append(lo)
        deadline = clock() + 2.0
        while left and clock() < deadline:  # SIGKILL is quick, but not synchronous
            sleep(0.05)
            left = [lo for lo in left if pidfile.running(lo.record)]
        stuck += left
        for file in group:
            if not pidfile.running(by_file[file].record):
                pidfile.remove_if(data / file, pidfile.read(data / file))
    return [lo for lo in killed if lo not in stuck], stuck


def sweep(data: Path, say: Callable[[str], None], why: str = "an earlier run",
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
          ) -> list[Leftover]:
    """Find and stop what ``why`` left in ``data``, saying what it found; returns what it found."""
    found = find(data)
    if not found:
        return found
    t0 = clock()
    say(f"TiHub: {why} left {', '.join(map(str, found))} running in {data}; "
        f"stopping {'it' if len(found) == 1 else 'them'} ...")
    killed, stuck = stop(data, found, clock, sleep)
    how = f" (killed after the grace period: {', '.join(map(str, killed))})" if killed else ""
    if stuck:
        say(f"TiHub: could not stop {', '.join(map(str, stuck))}{how}; if the start fails, stop "
            f"{'it' if len(stuck) == 1 else 'them'} by hand.")
    else:
        say(f"TiHub: stopped in {clock() - t0:.1f} s{how}.")
    return found
