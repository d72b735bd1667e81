"""Schemas of the alerts API (MON2-3): GET /alerts, the alerts naming the caller (every alert for admins)."""

from __future__ import annotations

from ..contract import Param
from ...domain.validation import MAX_TEXT
from .common import ANY_OBJECT, BOOL, COUNT, ID, MAYBE_TIME, STR, TIME, USERNAME, answer, array, enum, flag, nullable, \
    obj, page, page_of, text

ALERT = answer({
    "id": ID, "key": STR, "kind": enum(("machine", "job", "workspace", "queue", "support")),
    "rule": STR, "severity": enum(("info", "warning", "critical")), "subject": STR, "message": STR,
    "job_id": nullable(ID), "machine": STR, "users": array(STR), "figures": ANY_OBJECT, "fired_at": TIME,
    "last_notified_at": MAYBE_TIME, "notices": COUNT, "cleared_at": MAYBE_TIME, "open": BOOL,
    "answer": {**STR, "description": "an admin's answer to a support request (empty: none yet)"},
    "answered_by": STR, "answered_at": MAYBE_TIME},
    title="Alert", description="a condition that held (a job past its duration, a hot GPU): open until it clears")
ALERT_PAGE = page_of(ALERT)
ANSWER = obj({"answer": text(MAX_TEXT, filled=True, description="the answer; it closes the request")}, ["answer"])
ALERT_QUERY = {"open": flag("only open alerts (default true); false: cleared ones too"),
               "user": Param(USERNAME, "the alerts naming this user (the hub's home page banner, admins)"),
               **page()}
