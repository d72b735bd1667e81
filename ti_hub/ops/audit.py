"""ADM1: the audit log -- every change an operator makes (who, what, when), readable by admins.

Operations that change shared configuration (plans, quotas, images, virtual clusters, people, groups, roles,
other users' jobs) call ``record`` inside their own transaction, so an entry exists exactly when the change
was stored. ``detail`` says what changed; callers never put a secret in it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from .common import Clock, iso, page, utcnow

FILTERS = ("actor", "action", "target")


def record(session: Session, actor: Actor, action: str, target: str, detail: dict[str, Any] | None = None,
           clock: Clock = utcnow) -> None:
    session.add(m.AuditEntry(at=clock(), actor=actor.name, action=action, target=target[:255],
                             detail=detail or {}))


def render(e: m.AuditEntry) -> dict[str, Any]:
    return {"id": e.id, "at": iso(e.at), "actor": e.actor, "action": e.action, "target": e.target,
            "detail": e.detail}


def list_entries(session: Session, actor: Actor, filters: dict[str, str], limit: int, offset: int) -> dict[str, Any]:
    """Newest first. ``action`` matches a whole action or its object (``vc`` matches ``vc.create``)."""
    actor.need(S.MANAGE_USERS, "reading the audit log")  # it shows who changed what, people included
    stmt = select(m.AuditEntry)
    if filters.get("actor"):
        stmt = stmt.where(m.AuditEntry.actor == v.text(filters["actor"], "actor", 255))
    if filters.get("action"):
        action = v.text(filters["action"], "action", 63)
        stmt = stmt.where((m.AuditEntry.action == action) | m.AuditEntry.action.startswith(action + ".",
                                                                                             autoescape=True))
    if filters.get("target"):
        stmt = stmt.where(m.AuditEntry.target == v.text(filters["target"], "target", 255))
    return page(session, stmt.order_by(m.AuditEntry.id.desc()), limit, offset, render)
