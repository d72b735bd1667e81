"""One Unix uid per TiHub user: the embedded platform runs each user's workspaces, jobs, SSH sessions and
TensorBoards as that uid, so the kernel keeps users apart (files, /proc, signals, SO_REUSEPORT groups).

A uid is allocated the first time the user's code is about to run, from ``UidPolicy.first..last``, skipping
uids this machine already uses (its accounts, and the owners of its running processes: another TiHub's users,
a container's), and stored on the user's row: it stays the same across restarts and is never given to anyone
else (the row is never deleted, its files may outlive it). The group id is the same number. Two TiHub instances
on one host never share a range (``ops/uidranges.py``, checked at the service's start).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain.errors import Forbidden
from .common import ensure_user, utcnow


@dataclass(frozen=True)
class UidPolicy:
    first: int = 900_000
    last: int = 999_999
    # False when the platform cannot switch uids (it is not root) and no admin allowed sharing its own
    separate: bool = True
    shared_allowed: bool = False


def _in_passwd(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def process_uids(proc: str | os.PathLike = "/proc") -> set[int]:
    """Every uid a process of this host runs as (real, effective, saved, file system: the ``Uid:`` line of each
    ``/proc/PID/status``); processes that end while being read are skipped. Only what this process may see:
    a PID namespace hides the rest."""
    out: set[int] = set()
    try:
        entries = list(os.scandir(proc))
    except OSError:
        return out
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            with open(Path(entry.path) / "status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        out.update(int(x) for x in line.split()[1:])
                        break
        except (OSError, ValueError):
            continue
    return out


class HostUids:
    """``host_has`` of one allocation: a uid this host uses, as an account (passwd, NSS) or as the owner of a
    running process. /proc is read once, at the first question."""

    def __init__(self, proc: str | os.PathLike = "/proc", in_passwd: Callable[[int], bool] = _in_passwd):
        self.proc, self.in_passwd = proc, in_passwd
        self._running: set[int] | None = None

    def __call__(self, uid: int) -> bool:
        if self.in_passwd(uid):
            return True
        if self._running is None:
            self._running = process_uids(self.proc)
        return uid in self._running


def ensure(session: Session, names: Iterable[str], policy: UidPolicy,
           host_has: Callable[[int], bool] | None = None) -> dict[str, int]:
    """Each name's uid, allocating the missing ones (in a savepoint each: two processes racing for the same
    number make one of them take the next). ``host_has``: whether this host already uses a uid (default:
    ``HostUids``, read afresh at each call)."""
    out: dict[str, int] = {}
    for name in sorted(set(names)):
        user = ensure_user(session, name, utcnow())
        if user.unix_uid is None:
            if host_has is None:
                host_has = HostUids()
            _allocate(session, user, policy, host_has)
        out[name] = int(user.unix_uid)
    return out


def _allocate(session: Session, user: m.User, policy: UidPolicy, host_has: Callable[[int], bool]) -> None:
    for _attempt in range(20):
        top = session.scalar(select(func.max(m.User.unix_uid)))
        candidate = max(policy.first, (top or 0) + 1)
        while candidate <= policy.last and host_has(candidate):
            candidate += 1
        if candidate > policy.last:
            raise Forbidden(f"no Unix uid is left in {policy.first}-{policy.last} for {user.name}: an administrator "
                            "must widen TiService.unix_uid_range", field="owner")
        try:
            with session.begin_nested():
                user.unix_uid = candidate
                session.flush()
            return
        except IntegrityError:
            session.refresh(user)
            if user.unix_uid is not None:
                return
    raise RuntimeError(f"could not allocate a Unix uid for {user.name}")


def check_may_run(session: Session, name: str, policy: UidPolicy) -> None:
    """Unprivileged platform: every user's code would run as the platform's own uid, so only one TiHub user
    (the first to run anything) may run code, unless an administrator allowed sharing."""
    if policy.separate or policy.shared_allowed:
        return
    if session.scalar(select(m.User.unix_uid).where(m.User.unix_uid.is_not(None)).limit(1)) is None:
        ensure(session, [name], policy)  # the first user to run code claims the machine
    first = session.scalar(select(m.User.name).where(m.User.unix_uid.is_not(None))
                           .order_by(m.User.unix_uid).limit(1))
    if first is not None and first != name:
        raise Forbidden(f"this TiHub runs without root and cannot keep users apart, and {first} already runs "
                        "code on it: ask an administrator to run it as root, or to allow sharing with "
                        "c.TiService.allow_shared_unix_user = True", field="owner")
