"""Pid files that name one process, not just a number: its pid, its start time and the boot it ran in.

After a crash a pid file outlives its process, and the kernel hands its pid to some later process: a pid
alone may name a stranger. A record here is ``PID START BOOT`` (START: clock ticks after boot, field 22 of
/proc/PID/stat; BOOT: /proc/sys/kernel/random/boot_id), and a process is the one recorded only if both
match. JupyterHub's own files (jupyterhub.pid, proxy.pid) hold a pid only: such a process must have started
before the file was written (its mtime); a process that took the pid over later started after it.

The cores (parsing, ``same_process``, ``started_at``) are pure; the rest reads /proc (Linux only: elsewhere
no process is ever recognized, and callers treat every pid file as stale).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# JupyterHub writes its pid files just after the process starts; the boot time in /proc/stat has a 1 s grain
MTIME_SLACK_S = 2.0


@dataclass(frozen=True)
class Proc:
    """One live process as /proc/PID/stat shows it."""
    pid: int
    ppid: int
    state: str  # R, S, D, T, Z, ...
    start: int  # clock ticks after boot


@dataclass(frozen=True)
class Record:
    """What a pid file says; ``start``/``boot`` are None in a file that holds only a pid (JupyterHub's)."""
    pid: int
    start: int | None = None
    boot: str | None = None

    def text(self) -> str:
        if self.start is None:
            return f"{self.pid}\n"
        return f"{self.pid} {self.start} {self.boot or '-'}\n"


def parse_stat(pid: int, text: str) -> Proc:
    # ti_hub/backends/local/procs.py reads the same fields for jobs; `ti-hub start` does not import a backend
    # the command name (field 2) is in parentheses and may hold spaces and ')': split after the last one
    fields = text.rsplit(")", 1)[1].split()
    return Proc(pid=pid, state=fields[0], ppid=int(fields[1]), start=int(fields[19]))


def parse_record(text: str) -> Record | None:
    parts = text.split()
    if not parts or not parts[0].isdigit() or int(parts[0]) <= 0:
        return None
    if len(parts) >= 3 and parts[1].isdigit():
        return Record(int(parts[0]), int(parts[1]), None if parts[2] == "-" else parts[2])
    return Record(int(parts[0]))


def same_process(record: Record, proc: Proc | None, boot: str, written_s: float | None, ticks_per_s: int) -> bool:
    """Whether ``proc`` (None: no process has that pid) is the process ``record`` names.

    ``written_s``: when the pid file was written, in seconds after this boot (negative: before it; None:
    unknown), used only for a record without a start time. A zombie counts as gone: it holds no port, no
    lock, and its parent (or init) reaps it."""
    if proc is None or proc.pid != record.pid or proc.state in ("Z", "X"):
        return False
    if record.start is not None:
        return record.start == proc.start and record.boot in (None, boot)
    if written_s is None or written_s < 0:
        return False
    return proc.start / ticks_per_s <= written_s + MTIME_SLACK_S


def started_at(record: Record, boot_time: float, ticks_per_s: int) -> float | None:
    """The wall-clock start of a recorded process (seconds since the epoch), for messages."""
    return None if record.start is None else boot_time + record.start / ticks_per_s


# ---- the thin I/O shell ----

def ticks_per_s() -> int:
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_proc(pid: int, root: Path = PROC) -> Proc | None:
    try:
        return parse_stat(pid, (root / str(pid) / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def boot_id(root: Path = PROC) -> str:
    try:
        return (root / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def boot_time(root: Path = PROC) -> float:
    try:
        for line in (root / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def record_of(pid: int) -> Record | None:
    """The record naming the live process ``pid`` now (None if there is none)."""
    proc = read_proc(pid)
    return Record(pid, proc.start, boot_id()) if proc else None


def write(path: Path, pid: int) -> Record | None:
    """Record ``pid`` in ``path``; the file appears whole or not at all (written aside, then renamed)."""
    record = record_of(pid) or Record(pid)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(record.text())
        os.replace(tmp, path)
    except OSError:
        os.unlink(tmp)
        raise
    return record


def read(path: Path) -> Record | None:
    try:
        return parse_record(path.read_text())
    except OSError:
        return None


def alive(path: Path) -> Record | None:
    """The process ``path`` names, if it still runs: a full record (with its start time, also for a file
    that held only a pid), which stays valid after the file is gone; else None."""
    record = read(path)
    if record is None:
        return None
    try:
        written = path.stat().st_mtime - boot_time()
    except OSError:
        written = None
    proc, boot = read_proc(record.pid), boot_id()
    if not same_process(record, proc, boot, written, ticks_per_s()):
        return None
    return Record(record.pid, proc.start, boot) if record.start is None else record


def running(record: Record) -> bool:
    """Whether the process a full record names still runs."""
    return same_process(record, read_proc(record.pid), boot_id(), None, ticks_per_s())


def remove_if(path: Path, record: Record | None) -> None:
    """Remove ``path`` if it still names ``record``: a successor may have written its own meanwhile."""
    if record is not None and read(path) == record:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
