"""One Unix uid per TiHub user: the embedded platform runs each user's workspaces, jobs, SSH sessions and
TensorBoards as that uid, so the kernel keeps users apart (files, /proc, signals, SO_REUSEPORT groups).

A uid is allocated the first time the user's code is about to run, from ``UidPolicy.first..last``, skipping
uids this machine's accounts already use, and stored on the user's row: it stays the same across restarts and
is never given to anyone else (the row is never deleted, its files may outlive it). The group id is the same
number.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Iterable
from dataclasses import dataclass

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


def _host_has(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def ensure(session: Session, names: Iterable[str], policy: UidPolicy,
           host_has: Callable[[int], bool] = _host_has) -> dict[str, int]:
    """Each name's uid, allocating the missing ones (in a savepoint each: two processes racing for the same
    number make one of them take the next)."""
    out: dict[str, int] = {}
    for name in sorted(set(names)):
        user = ensure_user(session, name, utcnow())
        if user.unix_uid is None:
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
