"""Helpers shared by the operations modules."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain.errors import NotFound

Clock = Callable[[], dt.datetime]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def estimate_iso(value: dt.datetime | None) -> str | None:
    """Q6: an estimated start as shown. The stored one may lag the clock (it is rewritten only when it moves
    by a minute, and the wait alert compares against it): one already passed reads "now", never the past."""
    return iso(max(value, utcnow())) if value else None


def page(session: Session, stmt, limit: int, offset: int, render: Callable[[Any], dict],
         rows: bool = False) -> dict[str, Any]:
    """One page and the total. ``rows``: the statement selects columns (Core rows, no ORM objects)."""
    total = session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery()))
    paged = stmt.limit(limit).offset(offset)
    rows = session.execute(paged).all() if rows else session.scalars(paged).all()
    return {"items": [render(r) for r in rows], "total": total, "limit": limit, "offset": offset}


def ensure_user(session: Session, name: str, now: dt.datetime, lock: bool = False) -> m.User:
    """A user's row, made on first use. Two first requests of one user at once (PostgreSQL) both find no row:
    the loser's insert fails in its savepoint and it reads (and locks) the winner's row instead."""
    stmt = select(m.User).where(m.User.name == name)
    user = session.scalar(stmt.with_for_update() if lock else stmt)
    if user is None:
        try:
            with session.begin_nested():
                user = m.User(name=name, created_at=now, quota_version=0)
                session.add(user)
                session.flush()
        except IntegrityError:
            user = session.scalar(stmt.with_for_update() if lock else stmt)
            if user is None:
                raise
    return user


def lock_user(session: Session, name: str, now: dt.datetime) -> m.User:
    """Serialize one user's quota-checked writes: a row lock on PostgreSQL, the write lock on SQLite."""
    user = ensure_user(session, name, now, lock=True)
    user.quota_version += 1
    session.flush()
    return user


def get_or_404(session: Session, model, ident: int, what: str):
    obj = session.get(model, ident)
    if obj is None:
        raise NotFound(f"{what} {ident} does not exist", field="id")
    return obj


def page_list(items: list[dict[str, Any]], limit: int, offset: int) -> dict[str, Any]:
    """Pagination for short lists that are built in memory (plans, keys, templates, ...)."""
    return {"items": items[offset:offset + limit], "total": len(items), "limit": limit, "offset": offset}
