"""JOB4 "ask support": a job's owner sends the admins a message with the job's facts attached.

The request is an alert of kind ``support`` (ops/alerts.py): admins see it with every alert and are notified
of it as of any other (email, webhook; reminders until answered); its owner sees it among their own alerts. An
admin answers it (``alerts.answer``), which closes it; the owner then sees the answer. One open request per job:
a second one while the first waits is refused (409), and the owner may ask again once it is answered.

Facts attached: id, name, kind, state, plain-language reason, exit code, plan, image, and the last LOG_LINES lines
of its log (instance 0) with every secret environment value scrubbed. The log is read by the API handler between
``facts`` and ``ask`` (backend I/O outside any transaction); ``scrub`` is pure.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import states as st
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden
from . import alerts, secretenv
from .jobs import find
from .settings import OpsSettings

LOG_LINES = 50
MAX_LINE = 400  # characters kept of one log line: the tail rides in every notice
MASK = "[secret]"
NO_SCRUB = ("(the log is left out: its secret environment values cannot be opened to scrub them -- the service's "
            "secret key changed since the job was submitted)")


def key_of(job_id: int) -> str:
    return f"job:{job_id}:support"


def facts(session: Session, actor: Actor, ref: Any, settings: OpsSettings) -> dict[str, Any]:
    """What a request is about, checked: the caller's own finished job with no request waiting. Carries the
    backend state to read the log with and the secret values to scrub from it (never shown, never stored)."""
    job = find(session, actor, ref)
    if job.owner != actor.name:
        raise Forbidden(f"job {job.id} is {job.owner}'s: only its owner asks support about it", field="id")
    if job.kind == "workspace":
        raise Conflict("support requests are about jobs, not workspaces", field="id")
    if job.status not in st.FINAL:
        raise Conflict(f"job {job.id} is {job.status}: support requests are about finished jobs (failed, error, "
                       "killed, stopped, completed)", field="id")
    waiting = alerts.open_alert(session, key_of(job.id))
    if waiting is not None:
        raise Conflict(f"your support request about job {job.id} (alert {waiting.id}) waits for an answer",
                       field="id")
    try:
        secrets = sorted(secretenv.unseal(settings.secret_key, job.spec.get(secretenv.FIELD) or {}).values())
        readable = True
    except secretenv.UnsealError:
        secrets, readable = [], False
    return {"id": job.id, "backend_state": job.backend_state if readable else None, "secrets": secrets,
            "readable": readable}


def scrub(text: str, secrets: list[str]) -> str:
    """The last LOG_LINES lines of ``text``, each secret value replaced by MASK (longest first: a value that
    contains another is masked whole), lines cut at MAX_LINE characters after masking."""
    for value in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(value, MASK)
    lines = text.splitlines()[-LOG_LINES:]
    return "\n".join(x if len(x) <= MAX_LINE else x[:MAX_LINE] + " [...]" for x in lines)


def ask(session: Session, actor: Actor, ref: Any, message: Any, log_tail: str) -> dict[str, Any]:
    """Open the request (the checks of ``facts`` again, in the write transaction: two at once make one)."""
    message = v.text(message, "message", v.MAX_TEXT, required=True)
    job = find(session, actor, ref)
    if job.owner != actor.name or job.status not in st.FINAL or job.kind == "workspace":
        raise Conflict(f"job {job.id} changed while its log was read; ask again", field="id")
    if alerts.open_alert(session, key_of(job.id)) is not None:
        raise Conflict(f"your support request about job {job.id} waits for an answer", field="id")
    plan = session.scalar(select(m.Plan.name).where(m.Plan.id == job.plan_id)) if job.plan_id else None
    figures = {"job": job.id, "name": job.name, "owner": job.owner, "kind": job.kind, "state": job.status,
               "reason": job.reason, "exit_code": job.exit_code, "plan": plan or job.plan_id, "image": job.image,
               "log_tail": log_tail}
    a, _ = alerts.fire(session, key_of(job.id), alerts.SUPPORT,
                       f"Support request from {job.owner} about job {job.id} ({job.name}, {job.status})", message,
                       rule=alerts.SUPPORT, severity="info", users=[job.owner], job_id=job.id, figures=figures)
    return alerts.render(a)
