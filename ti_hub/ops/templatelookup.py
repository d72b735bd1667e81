"""JOB7: finding a saved template the caller may use -- the part a submission (``ops/jobspec.merge_template``)
needs; ``ops/templates`` (saving, which validates with jobspec) builds on it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import NotFound


def visible(actor: Actor):
    """The templates ``actor`` may use: their own, and team templates of their groups."""
    return or_(m.Template.owner == actor.name,
               (m.Template.scope == "team") & m.Template.group.in_(list(actor.groups) or [""]))


def find(session: Session, actor: Actor, ref: Any, field: str = "id") -> m.Template:
    q = select(m.Template).where(visible(actor))
    t = None
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):  # an id: 7, or 7.0 (db_id)
        t = session.scalar(q.where(m.Template.id == v.db_id(ref, field)))
    elif isinstance(ref, str) and ref:
        t = session.scalar(q.where(m.Template.name == ref).order_by((m.Template.owner != actor.name), m.Template.id))
        if t is None and (tid := v.id_in(ref)) is not None:
            t = session.scalar(q.where(m.Template.id == tid))
    if t is None:
        raise NotFound(f"template {ref!r} does not exist or is not shared with you", field=field)
    return t
