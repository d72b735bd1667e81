"""MON2-3: what a notice of an alert says and whom it reaches (pure; the leader's notifier,
tasks/notifier.py, sends it by email and webhook).

Recipients: the users the alert names (a job's owner), by the email of their profile (ops/people.py), and the
admins: the configured addresses plus the profile emails of the users whose TiHub roles give them users:manage.
A user without a verified email in their profile gets no email (they still see the alert in the product): an
address a user set themselves is mailed only once they opened the link sent to it (ops/profile.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from .grants import People, Snapshot

SERVICE_PREFIX = "/services/ti/"


def role_admins(snap: Snapshot, people: People, default_role: str) -> set[str]:
    """The hub users whose TiHub roles (directly or through a group) give them users:manage."""
    return {u for u in people.users
            if S.MANAGE_USERS in snap.permissions(u, people.groups_of(u), default_role)}


def emails(session: Session, names: Iterable[str]) -> dict[str, str]:
    """user -> the email of their profile, for those who have a verified one (an admin set it, or they opened the
    link mailed to it: issue 31) and are not disabled."""
    names = sorted(set(names))
    if not names:
        return {}
    P = m.UserProfile
    return {p.name: p.email for p in session.scalars(select(P).where(P.name.in_(names)))
            if p.email and p.email_verified and p.enabled}


def recipients(users: Iterable[str], admins: Iterable[str], user_emails: Mapping[str, str],
               admin_emails: Collection[str]) -> list[str]:
    """The addresses one alert's notice goes to: its users' and the admins', each once, sorted."""
    out = {user_emails[u] for u in set(users) | set(admins) if user_emails.get(u)}
    out |= {e for e in admin_emails if e}
    return sorted(out, key=str.lower)


def link(a: Mapping[str, Any], base_url: str) -> str:
    """Where to look at what an alert is about: the job's detail view, or the cluster page for a machine."""
    base = base_url.rstrip("/") + SERVICE_PREFIX
    if a.get("job_id") is not None:
        return f"{base}jobs?job={a['job_id']}"
    if a.get("machine"):
        return f"{base}cluster"
    return base


def subject(a: Mapping[str, Any], prefix: str) -> str:
    """One line: what and where (the alert's own subject names the job or machine; a reminder says so)."""
    what = a["subject"]
    if a.get("machine") and a["machine"] not in what:
        what += f" on {a['machine']}"
    if a.get("answer"):
        what = f"Answered: {what}"
    elif a.get("notices"):
        what = f"Reminder: {what}"
    return f"{prefix.strip()} {what}".strip()


def body(a: Mapping[str, Any], base_url: str, reminder_s: float) -> str:
    """The plain-text email: the message, the figures, when it fired, how to look and how long it repeats."""
    lines = [a["subject"], ""]
    if a.get("answer"):  # a support request answered (JOB4): the answer first, then the request
        lines += [f"Answer from {a.get('answered_by') or 'the admins'}:", a["answer"], "", "The request:"]
    if a.get("message"):
        lines += [a["message"], ""]
    where = []
    if a.get("job_id") is not None:
        where.append(f"job {a['job_id']}")
    if a.get("machine"):
        where.append(f"machine {a['machine']}")
    lines.append(f"Severity: {a['severity']}" + (f"; rule: {a['rule']}" if a.get("rule") else "")
                 + (f"; about {', '.join(where)}" if where else ""))
    figures = a.get("figures") or {}
    if figures:
        lines.append("Figures:")
        for k, v in sorted(figures.items()):  # a multi-line figure (a support request's log tail) as a block
            lines += [f"  {k}:", *(f"    {x}" for x in v.splitlines())] if isinstance(v, str) and "\n" in v \
                else [f"  {k}: {v}"]
    lines.append(f"Fired at: {a['fired_at']}")
    if a.get("users"):
        lines.append(f"Concerns: {', '.join(a['users'])} (and the admins)")
    lines += ["", f"See: {link(a, base_url)}"]
    if a.get("job_id") is not None:
        lines.append(f"Or from a terminal: ti job show {a['job_id']}; every open alert: ti alert list")
    lines.append("")
    if a.get("answer") or a.get("kind") == "support":
        lines.append("Answered support requests: ti alert list --all" if a.get("answer") else
                     "A reminder goes to the admins until one of them answers (ti alert answer ID -m TEXT).")
    elif reminder_s > 0:
        lines.append(f"A reminder follows every {fmt_seconds(reminder_s)} until the condition clears"
                     f" (this is notice {int(a.get('notices') or 0) + 1}).")
    else:
        lines.append("No reminders follow; the alert stays open in TiHub until the condition clears.")
    return "\n".join(lines) + "\n"


def fmt_seconds(s: float) -> str:
    s = int(s)
    if s % 3600 == 0:
        return f"{s // 3600} h"
    if s % 60 == 0:
        return f"{s // 60} min"
    return f"{s} s"


def webhook_payload(a: Mapping[str, Any], to: list[str], base_url: str, prefix: str) -> dict[str, Any]:
    """The JSON a webhook receives: the alert's fields, its recipients, a one-line text and the link."""
    return {**a, "recipients": to, "reminder": bool(a.get("notices")), "text": subject(a, prefix),
            "link": link(a, base_url)}
