"""The alert lifecycle (ops/alerts.py) on SQLite and PostgreSQL: one open alert per key, reminders, visibility."""

from __future__ import annotations

import datetime as dt

from ti_hub.domain import scopes as S
from ti_hub.domain.actor import Actor
from ti_hub.ops import alerts

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
ADMIN = Actor("boss", frozenset(S.ADMIN_SCOPES))
ALICE = Actor("alice", frozenset(S.USER_SCOPES))
BOB = Actor("bob", frozenset(S.USER_SCOPES))


def test_one_open_alert_per_key_reminders_and_clearing(db):
    with db.begin() as s:
        a, new = alerts.fire(s, "job:1:overrun", "job", "job 1 overran", users=["alice"], job_id=1,
                             figures={"ran_s": 100}, now=T0)
        assert new
        b, new2 = alerts.fire(s, "job:1:overrun", "job", "job 1 overran more", users=["alice"], job_id=1,
                              figures={"ran_s": 200}, now=T0 + dt.timedelta(seconds=5))
        assert not new2 and b.id == a.id and b.figures == {"ran_s": 200}
    with db.begin() as s:
        assert [x.key for x in alerts.due(s, T0, 600)] == ["job:1:overrun"]
        alerts.mark_notified(s, [a.id], T0)
    with db.begin() as s:
        assert alerts.due(s, T0 + dt.timedelta(seconds=599), 600) == []
        assert len(alerts.due(s, T0 + dt.timedelta(seconds=600), 600)) == 1
        assert alerts.due(s, T0 + dt.timedelta(days=9), 0) == []  # no reminders
    with db.begin() as s:
        assert alerts.list_alerts(s, ALICE)["total"] == 1
        assert alerts.list_alerts(s, BOB)["total"] == 0  # not bob's job
        assert alerts.list_alerts(s, ADMIN)["items"][0]["figures"] == {"ran_s": 200}
        assert alerts.clear(s, "job:1:overrun", T0 + dt.timedelta(hours=1))
        assert not alerts.clear(s, "job:1:overrun")
    with db.begin() as s:
        assert alerts.list_alerts(s, ALICE)["total"] == 0
        assert alerts.list_alerts(s, ALICE, open_only=False)["items"][0]["open"] is False
        _, again = alerts.fire(s, "job:1:overrun", "job", "again", users=["alice"], now=T0 + dt.timedelta(hours=2))
        assert again  # the condition holds again later: a new alert


def test_clear_missing_closes_what_an_evaluator_no_longer_sees(db):
    with db.begin() as s:
        for node in ("n1", "n2", "n3"):
            alerts.fire(s, f"rule:1:machine:{node}", "machine", f"{node} hot", machine=node, now=T0)
        alerts.fire(s, "rule:10:machine:n1", "machine", "other rule", machine="n1", now=T0)
    with db.begin() as s:
        assert alerts.clear_missing(s, "rule:1:", {"rule:1:machine:n2"}, T0) == ["rule:1:machine:n1",
                                                                                 "rule:1:machine:n3"]
    with db.begin() as s:
        assert sorted(a["key"] for a in alerts.list_alerts(s, ADMIN)["items"]) == ["rule:10:machine:n1",
                                                                                   "rule:1:machine:n2"]
