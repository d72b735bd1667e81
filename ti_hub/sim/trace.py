"""The simulator's native CSV formats and the job record every reader produces.

Jobs (one row per job; ``#`` lines are comments)::

    submit_s,duration_s,user,device_type,devices,instances,cpu,memory_mib,kind,pool,priority,preemptible,job_id

Required: ``submit_s`` (seconds, any epoch), ``duration_s`` (run time once started), ``user``, ``devices``
(whole devices per instance) and ``device_type`` when devices > 0. Defaults: instances 1, cpu 1, memory_mib
1024, kind ``single`` (``distributed`` when instances >= 2), pool ``default``, priority 100, preemptible
false, job_id the row number.

Nodes::

    name,pool,device_type,devices,cpu,memory_mib

A malformed file raises ``TraceError`` naming the file and the line (1 = the header).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..backends.base import NodeCapacity
from ..scheduler.model import Instance

KINDS = ("single", "distributed", "workspace")
CPU_TYPE = "cpu"  # the device type of a job with no devices (its queue's name)


class TraceError(ValueError):
    """A trace or node list that cannot be read: ``path:line: message``."""

    def __init__(self, path: str | Path, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = str(path), line, message


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_id: int
    submit_s: float
    duration_s: float
    user: str
    kind: str
    pool: str
    device_type: str
    instances: tuple[Instance, ...]
    priority: int = 100
    preemptible: bool = False

    @property
    def devices(self) -> int:
        return sum(i.devices for i in self.instances)


Row = dict[str, str]


def rows(path: str | Path, f: TextIO, required: tuple[str, ...], optional: tuple[str, ...],
         strict: bool = True) -> Iterator[tuple[int, Row]]:
    """(line number, row) for every data row; checks the header and the field count. ``strict``: unknown
    columns are an error (a typo would otherwise be silently ignored)."""
    lines = _Lines(f)
    reader = csv.reader(lines)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise TraceError(path, 1, "the file is empty (expected a header line)") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(path, lines.at, f"missing column{'s' if len(missing) > 1 else ''} "
                                         f"{', '.join(missing)} (header: {','.join(header)})")
    unknown = [c for c in header if c not in required and c not in optional]
    if strict and unknown:
        raise TraceError(path, lines.at, f"unknown column {unknown[0]!r} (known: {', '.join(required + optional)})")
    for values in reader:
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(header):
            raise TraceError(path, lines.at, f"{len(values)} fields, the header has {len(header)}")
        yield lines.at, {h: v.strip() for h, v in zip(header, values)}


class _Lines:
    """Feeds csv.reader, skipping ``#`` comments, and knows the physical line number of the last line it
    handed out (csv's own line_num would not count the comments)."""

    def __init__(self, f: TextIO):
        self.f = f
        self.at = 0

    def __iter__(self) -> Iterator[str]:
        for line in self.f:
            self.at += 1
            if not line.startswith("#"):
                yield line


def field(path: str | Path, line: int, row: Row, name: str, conv: Callable[[str], object], default=None,
          check: Callable[[object], bool] | None = None, want: str = ""):
    """One typed field: a missing or empty value takes ``default`` (None: required)."""
    raw = row.get(name, "")
    if raw == "":
        if default is None:
            raise TraceError(path, line, f"{name} is empty")
        return default
    try:
        v = conv(raw)
    except ValueError:
        what = _TYPE_NAMES.get(conv, want or conv.__name__)
        raise TraceError(path, line, f"{name} {raw!r} is not {what}") from None
    if check is not None and not check(v):
        raise TraceError(path, line, f"{name} {raw!r} must be {want}")
    return v


def boolean(raw: str) -> bool:
    low = raw.lower()
    if low in ("1", "true", "yes", "y"):
        return True
    if low in ("0", "false", "no", "n"):
        return False
    raise ValueError(raw)


_TYPE_NAMES: dict = {float: "a number", int: "a whole number", boolean: "true or false"}

JOB_REQUIRED = ("submit_s", "duration_s", "user", "devices")
JOB_OPTIONAL = ("device_type", "instances", "cpu", "memory_mib", "kind", "pool", "priority", "preemptible",
                "job_id", "name")


def read_jobs(path: str | Path) -> list[TraceJob]:
    """The native job CSV, sorted by submission (stable: equal times keep file order)."""
    out: list[TraceJob] = []
    seen: dict[int, int] = {}
    with open(path, newline="") as f:
        for line, row in rows(path, f, JOB_REQUIRED, JOB_OPTIONAL):
            nonneg = ("a number >= 0", lambda v: v >= 0)
            submit = field(path, line, row, "submit_s", float, check=nonneg[1], want=nonneg[0])
            duration = field(path, line, row, "duration_s", float, check=nonneg[1], want=nonneg[0])
            user = row["user"]
            if not user:
                raise TraceError(path, line, "user is empty")
            devices = field(path, line, row, "devices", int, check=lambda v: v >= 0, want="a whole number >= 0")
            dtype = row.get("device_type", "")
            if devices and not dtype:
                raise TraceError(path, line, f"device_type is empty but the job asks for {devices} devices")
            n = field(path, line, row, "instances", int, 1, lambda v: v >= 1, "a whole number >= 1")
            cpu = field(path, line, row, "cpu", float, 1.0, lambda v: v >= 0, "a number >= 0")
            mem = field(path, line, row, "memory_mib", int, 1024, lambda v: v >= 0, "a whole number >= 0")
            kind = row.get("kind") or ("distributed" if n >= 2 else "single")
            if kind not in KINDS:
                raise TraceError(path, line, f"kind {kind!r} must be one of {', '.join(KINDS)}")
            if kind == "distributed" and n < 2:
                raise TraceError(path, line, "a distributed job has at least 2 instances")
            if kind != "distributed" and n != 1:
                raise TraceError(path, line, f"a {kind} job has 1 instance, not {n}")
            prio = field(path, line, row, "priority", int, 100, lambda v: 1 <= v <= 1000, "1 to 1000")
            pre = field(path, line, row, "preemptible", boolean, False, want="true or false")
            jid = field(path, line, row, "job_id", int, len(out) + 1, lambda v: v >= 1, "a whole number >= 1")
            if jid in seen:
                raise TraceError(path, line, f"job_id {jid} repeats line {seen[jid]}")
            seen[jid] = line
            out.append(TraceJob(jid, submit, duration, user, kind, row.get("pool") or "default",
                                dtype if devices else CPU_TYPE, tuple(Instance(devices, cpu, mem) for _ in range(n)),
                                prio, pre))
    out.sort(key=lambda j: j.submit_s)
    return out


NODE_REQUIRED = ("name", "devices", "cpu", "memory_mib")
NODE_OPTIONAL = ("pool", "device_type")


def read_nodes(path: str | Path) -> list[NodeCapacity]:
    """The native node CSV."""
    out: list[NodeCapacity] = []
    seen: set[str] = set()
    with open(path, newline="") as f:
        for line, row in rows(path, f, NODE_REQUIRED, NODE_OPTIONAL):
            name = row["name"]
            if not name or name in seen:
                raise TraceError(path, line, f"node name {name!r} is empty or repeated")
            seen.add(name)
            devices = field(path, line, row, "devices", int, check=lambda v: v >= 0, want="a whole number >= 0")
            dtype = row.get("device_type", "")
            if devices and not dtype:
                raise TraceError(path, line, f"device_type is empty but the node has {devices} devices")
            cpu = field(path, line, row, "cpu", float, check=lambda v: v > 0, want="a number > 0")
            mem = field(path, line, row, "memory_mib", int, check=lambda v: v > 0, want="a whole number > 0")
            out.append(NodeCapacity(name, row.get("pool") or "default",
                                    {dtype: list(range(devices))} if devices else {}, cpu, mem))
    if not out:
        raise TraceError(path, 1, "no nodes")
    return out


def header_of(path: str | Path) -> list[str]:
    """The first non-comment line's column names (format detection)."""
    with open(path, newline="") as f:
        for line in f:
            if not line.startswith("#") and line.strip():
                return [h.strip() for h in next(csv.reader([line]))]
    return []
