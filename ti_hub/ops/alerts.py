"""MON2-3: the alert lifecycle that every alert goes through -- machine rules, jobs past their duration or their
estimated start, idle workspaces.

An alert opens (``fire``) when its condition starts to hold and closes (``clear``) when it stops; ``key`` names
the condition ("rule:7:machine:n1", "job:42:overrun", "workspace:9:idle") and at most one alert per key is open.
Firing an open key again refreshes its message and figures and opens nothing new. Notices go out when an alert
opens and again every reminder interval while it stays open (``due`` / ``mark_notified``: the leader's
notifier sends them). Who sees an alert: the users it names (a job's owner) and the admins.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db.monitoring import Alert
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, NotFound
from .common import iso, page, utcnow

KINDS = ("machine", "job", "workspace", "queue", "support")
# JOB4: a job's owner asking the admins for help (ops/support.py); open until an admin answers it (``answer``)
SUPPORT = "support"
SEVERITIES = ("info", "warning", "critical")
# alerts that tell of something that happened (work stopped because access was taken back, ops/revoke.py)
# rather than of a condition that holds: one notice, no reminders, closed EVENT_TTL after they fired
EVENT_RULES = frozenset({"revoked"})
EVENT_TTL = dt.timedelta(days=1)


def open_alert(session: Session, key: str) -> Alert | None:
    A = Alert
    return session.scalars(select(A).where(A.cleared_at.is_(None), A.key == key).limit(1)).first()


def fire(session: Session, key: str, kind: str, subject: str, message: str = "", *, rule: str = "",
         severity: str = "warning", users: Iterable[str] = (), job_id: int | None = None, machine: str = "",
         figures: dict[str, Any] | None = None, now: dt.datetime | None = None
         ) -> tuple[Alert, bool]:
    """Open the alert ``key`` or refresh the open one; returns (alert, opened now?)."""
    assert kind in KINDS and severity in SEVERITIES, (kind, severity)
    a = open_alert(session, key)
    if a is not None:
        a.subject, a.message, a.severity = subject[:255], message, severity
        a.figures = dict(figures or {})
        return a, False
    a = Alert(key=key[:255], kind=kind, rule=rule[:63], severity=severity, subject=subject[:255],
                           message=message, job_id=job_id, machine=machine[:255], users=sorted(set(users)),
                           figures=dict(figures or {}), fired_at=now or utcnow(), notices=0)
    session.add(a)
    session.flush()
    return a, True


def clear(session: Session, key: str, now: dt.datetime | None = None) -> bool:
    """Close the open alert ``key``; False if none was open."""
    a = open_alert(session, key)
    if a is None:
        return False
    a.cleared_at = now or utcnow()
    return True


def clear_missing(session: Session, prefix: str, still: set[str], now: dt.datetime | None = None) -> list[str]:
    """Close the open alerts whose key starts with ``prefix`` and is not in ``still`` (an evaluator that sees
    every condition of its kind at once clears those that no longer hold). Returns the closed keys."""
    A = Alert
    closed = []
    for a in session.scalars(select(A).where(A.cleared_at.is_(None), A.key.startswith(prefix, autoescape=True))):
        if a.key not in still:
            a.cleared_at = now or utcnow()
            closed.append(a.key)
    return closed


def due(session: Session, now: dt.datetime, reminder_s: float) -> list[Alert]:
    """Open alerts that need a notice now: never notified, or last notified ``reminder_s`` ago or more
    (``reminder_s`` <= 0: only the first notice)."""
    A = Alert
    cond = A.last_notified_at.is_(None)
    if reminder_s > 0:
        cond = or_(cond, (A.last_notified_at <= now - dt.timedelta(seconds=reminder_s))
                   & A.rule.not_in(sorted(EVENT_RULES)))
    # an answer closes its support request and goes out once, to its owner and the admins
    answered = A.answered_at.is_not(None) & or_(A.last_notified_at.is_(None), A.last_notified_at < A.answered_at)
    return list(session.scalars(select(A).where(or_(A.cleared_at.is_(None) & cond, answered)).order_by(A.id)))


def notice_users(a: Alert) -> list[str]:
    """The users a notice of ``a`` goes to besides the admins: a support request's reminders are the admins'
    alone (its owner had the first notice, and has the answer's)."""
    if a.kind == SUPPORT and a.notices and a.answered_at is None:
        return []
    return list(a.users or [])


def expire_events(session: Session, now: dt.datetime) -> int:
    """Close the event alerts (EVENT_RULES) fired EVENT_TTL ago or more; returns how many (the leader's loop)."""
    A = Alert
    old = list(session.scalars(select(A).where(A.cleared_at.is_(None), A.rule.in_(sorted(EVENT_RULES)),
                                               A.fired_at <= now - EVENT_TTL)))
    for a in old:
        a.cleared_at = now
    return len(old)


def mark_notified(session: Session, ids: Iterable[int], now: dt.datetime) -> None:
    A = Alert
    for a in session.scalars(select(A).where(A.id.in_(list(ids)))):
        a.last_notified_at = now
        a.notices += 1


def sees_all(actor: Actor) -> bool:
    # not view-all: every user holds it by default, and alerts name machines and other users' jobs
    return actor.can(S.MANAGE_ALL_JOBS) or actor.can(S.MANAGE_USERS)


def render(a: Alert) -> dict[str, Any]:
    return {"id": a.id, "key": a.key, "kind": a.kind, "rule": a.rule, "severity": a.severity,
            "subject": a.subject, "message": a.message, "job_id": a.job_id, "machine": a.machine,
            "users": list(a.users), "figures": a.figures, "fired_at": iso(a.fired_at),
            "last_notified_at": iso(a.last_notified_at), "notices": a.notices, "cleared_at": iso(a.cleared_at),
            "open": a.cleared_at is None, "answer": a.answer or "", "answered_by": a.answered_by or "",
            "answered_at": iso(a.answered_at)}


def list_alerts(session: Session, actor: Actor, *, open_only: bool = True, limit: int = 50, offset: int = 0
                ) -> dict[str, Any]:
    """Newest first: the caller's own alerts (those naming them), every alert for admins."""
    A = Alert
    stmt = select(A)
    if open_only:
        stmt = stmt.where(A.cleared_at.is_(None))
    rows = None
    if not sees_all(actor):
        # users is a small JSON list: filtered here, not in SQL (JSON containment differs per database)
        rows = [a for a in session.scalars(stmt.order_by(A.id.desc())) if actor.name in (a.users or [])]
    if rows is None:
        return page(session, stmt.order_by(A.id.desc()), limit, offset, render)
    return {"items": [render(a) for a in rows[offset:offset + limit]], "total": len(rows), "limit": limit,
            "offset": offset}


def answer(session: Session, actor: Actor, alert_id: int, text: str) -> dict[str, Any]:
    """JOB4: an admin answers a support request: the answer is kept on it, which closes it; its owner sees it in
    their alerts (cleared ones: ``open=false``) and has it by email or webhook with the admins."""
    if not sees_all(actor):
        raise Forbidden(f"answering support requests is for admins ({S.MANAGE_ALL_JOBS!r} or {S.MANAGE_USERS!r})",
                        field="id")
    text = v.text(text, "answer", v.MAX_TEXT, required=True)
    a = session.get(Alert, alert_id)
    if a is None:
        raise NotFound(f"alert {alert_id} does not exist", field="id")
    if a.kind != SUPPORT:
        raise Conflict(f"alert {alert_id} is a {a.kind} alert: only support requests are answered (it closes when "
                       "its condition ends)", field="id")
    if a.answered_at is not None:
        raise Conflict(f"alert {alert_id} was answered already, by {a.answered_by}; the owner may ask again",
                       field="id")
    now = utcnow()
    a.answer, a.answered_by, a.answered_at = text, actor.name, now
    if a.cleared_at is None:
        a.cleared_at = now
    return render(a)
