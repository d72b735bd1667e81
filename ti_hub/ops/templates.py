"""JOB7: saved job configurations with scope user (mine) or team (a group of mine)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, TiError
from . import jobspec
from .common import iso, utcnow
from .settings import OpsSettings
from .templatelookup import find, visible

# what a template may carry: a submission without its name
TEMPLATE_SPEC_FIELDS = ("description", "kind", "strategy", "workers", "ps", "plan", "image", "command", "env",
                        "volumes", "ports", "endpoints", "credential", "preemptible", "estimated_duration",
                        "on_overrun")


def render(t: m.Template) -> dict[str, Any]:
    return {"id": t.id, "name": t.name, "owner": t.owner, "scope": t.scope, "group": t.group, "spec": t.spec,
            "created_at": iso(t.created_at)}


def list_templates(session: Session, actor: Actor) -> dict[str, Any]:
    rows = session.scalars(select(m.Template).where(visible(actor)).order_by(m.Template.name)).all()
    return {"items": [render(t) for t in rows], "total": len(rows), "limit": len(rows), "offset": 0}


def save(session: Session, actor: Actor, data: dict[str, Any], settings: OpsSettings) -> dict[str, Any]:
    v.check_fields(data, ("name", "scope", "group", "spec"))
    name = v.name(data.get("name"))
    scope = v.choice(data.get("scope", "user"), "scope", ("user", "team"))
    group = None
    if scope == "team":
        group = v.text(data.get("group"), "group", 255, required=True)
        if group not in actor.groups:
            raise Forbidden(f"you are not a member of group {group!r}", field="group")
    elif data.get("group"):
        raise v.ValidationError("group applies to team templates only", field="group")
    spec = data.get("spec")
    if not isinstance(spec, dict):
        raise v.ValidationError("spec must be an object with job fields", field="spec")
    spec = {k: val for k, val in spec.items() if k != "name"}
    if "secret_env" in spec:  # a template is kept in clear and may be shared with a team
        raise v.ValidationError("spec.secret_env: templates never hold secret values; give them with each "
                                "submission", field="spec.secret_env")
    v.check_fields(spec, TEMPLATE_SPEC_FIELDS, "spec")
    # checked as a submission is (a plan that exists and runs here, worker counts, volumes of mine, ...): a
    # template must not store what no submission could use
    try:
        jobspec.parse_job(session, actor, spec, settings, partial=True)
    except TiError as e:
        e.field = f"spec.{e.field}" if e.field else "spec"
        raise
    if session.scalar(select(m.Template.id).where(m.Template.owner == actor.name, m.Template.name == name)):
        raise Conflict(f"you already have a template named {name!r}", field="name")
    t = m.Template(owner=actor.name, name=name, scope=scope, group=group, spec=spec, created_at=utcnow())
    session.add(t)
    session.flush()
    return render(t)


def delete(session: Session, actor: Actor, ref: Any) -> None:
    t = find(session, actor, ref)
    if t.owner != actor.name:
        raise Forbidden(f"only {t.owner} can delete template {t.name!r}", field="id")
    session.delete(t)
