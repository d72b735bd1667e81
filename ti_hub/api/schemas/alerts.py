"""Schemas of the alerts API (MON2-3): GET /alerts, the alerts naming the caller (every alert for admins)."""

from __future__ import annotations

from ..contract import Param
from .common import ANY_OBJECT, BOOL, COUNT, ID, MAYBE_TIME, STR, TIME, USERNAME, answer, array, enum, flag, nullable, \
    page, page_of

ALERT = answer({
    "id": ID, "key": STR, "kind": enum(("machine", "job", "workspace", "queue")),
    "rule": STR, "severity": enum(("info", "warning", "critical")), "subject": STR, "message": STR,
    "job_id": nullable(ID), "machine": STR, "users": array(STR), "figures": ANY_OBJECT, "fired_at": TIME,
    "last_notified_at": MAYBE_TIME, "notices": COUNT, "cleared_at": MAYBE_TIME, "open": BOOL},
    title="Alert", description="a condition that held (a job past its duration, a hot GPU): open until it clears")
ALERT_PAGE = page_of(ALERT)
ALERT_QUERY = {"open": flag("only open alerts (default true); false: cleared ones too"),
               "user": Param(USERNAME, "the alerts naming this user (the hub's home page banner, admins)"),
               **page()}
