"""The host's registry of TiHub instances' Unix uid ranges (issue 30).

Each TiHub instance that runs as root on the embedded platform gives its users uids from
``TiService.unix_uid_range`` (``ops/unixids.py``), and every instance has the same default range. Two of them on
one host would give the same uid to different people, who could then read and signal each other's files and
processes. So at its start the ti service registers its range here, keyed by its data directory, and refuses to
start when the range of another instance overlaps it.

The registry is a small JSON file (``TiService.unix_uid_registry``, default ``/var/lib/ti-hub/uid-ranges.json``;
the environment variable TI_HUB_UID_REGISTRY overrides it), changed only under an exclusive ``flock`` of a lock
file beside it, and replaced atomically. An entry whose data directory no longer exists is dropped: that
instance is gone, and so are the records of its uids. An instance's own entry is simply replaced (a restart, a
new range).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..plumbing.secretfile import replace

DEFAULT_PATH = "/var/lib/ti-hub/uid-ranges.json"
ENV = "TI_HUB_UID_REGISTRY"
SETTING = "c.TiService.unix_uid_range"


class RangeTaken(Exception):
    """Another instance's registered range overlaps ours (or the registry cannot be read): a plain message."""


@dataclass(frozen=True)
class Entry:
    data_dir: str
    first: int
    last: int

    def overlaps(self, first: int, last: int) -> bool:
        return self.first <= last and first <= self.last


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise RangeTaken(f"cannot read the registry of uid ranges {path}: {e}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
        instances = data["instances"]
        if not isinstance(instances, dict):
            raise TypeError("instances is not an object")
        for r in instances.values():
            if not isinstance(r, dict) or not all(isinstance(r.get(k), int) for k in ("first", "last")):
                raise TypeError(f"an entry is not {{'first': uid, 'last': uid}}: {r!r}")
    except (ValueError, KeyError, TypeError) as e:
        raise RangeTaken(f"the registry of uid ranges {path} is damaged ({e}): fix it, or remove it if no other "
                         "TiHub instance runs on this host") from None
    return instances


def _write(path: Path, instances: dict[str, Any]) -> None:
    # not a secret (0644): which data directories use which uids
    text = json.dumps({"version": 1, "instances": instances}, indent=1, sort_keys=True) + "\n"
    replace(path, text.encode(), 0o644, sync=True)


@contextmanager
def _locked(path: Path):
    """An exclusive flock of ``PATH.lock`` (never of the JSON file itself: it is replaced, not rewritten)."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def entries(path: str | os.PathLike) -> list[Entry]:
    """What the registry holds now (read without the lock: a replaced file is whole)."""
    return [Entry(d, int(r["first"]), int(r["last"])) for d, r in sorted(_read(Path(path)).items())]


def register(path: str | os.PathLike, data_dir: str | os.PathLike, first: int, last: int, *,
             exists: Callable[[str], bool] = os.path.isdir, setting: str = SETTING,
             now: Callable[[], float] | None = None) -> list[Entry]:
    """Record that the instance of ``data_dir`` gives out uids ``first..last``; RangeTaken, changing nothing,
    when a live instance (its data directory exists) already registered an overlapping range. Entries whose data
    directory is gone are dropped. Returns the entries dropped."""
    path = Path(path)
    ours = os.path.realpath(data_dir)
    with _locked(path):
        instances = _read(path)
        dropped, others = [], []
        for d, r in list(instances.items()):
            if d == ours:
                continue
            e = Entry(d, int(r["first"]), int(r["last"]))
            if not exists(d):
                dropped.append(e)
                del instances[d]
            else:
                others.append(e)
        for e in others:
            if e.overlaps(first, last):
                raise RangeTaken(
                    f"another TiHub instance on this host, with data directory {e.data_dir}, gives its users the "
                    f"Unix uids {e.first}-{e.last}, which overlap this instance's {first}-{last} (data directory "
                    f"{ours}): two people would share a uid and could read each other's files. Give this instance "
                    f"a range of its own with {setting} = [first, last] (free: {free_hint(others, first, last)}), "
                    f"or, if that instance is gone for good, remove its data directory or its entry in {path}")
        instances[ours] = {"first": int(first), "last": int(last), "pid": os.getpid(),
                           "registered_at": int((now or time.time)())}
        _write(path, instances)
    return dropped


def free_hint(others: list[Entry], first: int, last: int) -> str:
    """A range as wide as ``first..last`` that no one else registered, above every registered one."""
    width = last - first
    start = max([first, *(e.last + 1 for e in others)])
    return f"[{start}, {start + width}]"

