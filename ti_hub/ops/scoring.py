"""Q3 usage scores in the live service: kept by the scheduling leader, saved for the API and restarts.

The leader advances the scores at every scheduling decision with what was held since the last one (held
devices only change at decisions and at job ends, which trigger a decision), and at least every sample
interval. Saved rows carry the score, the g it was advancing with, and the time: API processes bring a
score forward to "now" exactly (g is constant until the next decision), and a restarted leader catches up
over the whole gap with one update. An empty table (a fresh database) is rebuilt from the running jobs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Forbidden
from .queue import scores_now
from ..scheduler.score import Key, Scores, held_devices, rebuild, update
from .queueing import epoch, from_epoch

Holding = tuple[str, str, int, float | None]  # (user, device type, devices, started at)


class ScoreKeeper:
    def __init__(self, settling_s: float, weights: Mapping[str, float] | None = None):
        self.settling_s = settling_s
        self.weights = dict(weights or {})
        self.scores: Scores | None = None
        self.g: dict[Key, float] = {}  # what is held since the last advance
        self.last_saved: float | None = None

    def g_of(self, holdings: Iterable[Holding]) -> dict[Key, float]:
        return held_devices(((u, d, n) for u, d, n, _ in holdings), self.weights)

    def load(self, s: Session, holdings: list[Holding], now: float) -> str:
        """Catch up from the saved scores, or rebuild from what runs; returns what it did (for the log)."""
        self.g = self.g_of(holdings)
        rows = s.execute(select(m.UsageScore.user, m.UsageScore.device_type, m.UsageScore.score,
                                m.UsageScore.updated_at)).all()
        if rows:
            since = max(epoch(r.updated_at) for r in rows)
            self.scores = update(Scores({(r.user, r.device_type): r.score for r in rows}, since), self.g, now,
                                 self.settling_s)
            return f"usage scores caught up over {max(0.0, now - since):.0f} s ({len(rows)} saved)"
        self.scores = rebuild(((u, d, n * self.weights.get(d, 1.0), started if started is not None else now)
                               for u, d, n, started in holdings), now, self.settling_s)
        return f"usage scores rebuilt from {len(holdings)} running job(s)"

    def advance(self, now: float, holdings: list[Holding] | None = None) -> Scores:
        """Bring scores to ``now`` with what was held until now; then hold ``holdings`` from now on."""
        assert self.scores is not None, "load() first"
        self.scores = update(self.scores, self.g, now, self.settling_s)
        if holdings is not None:
            self.g = self.g_of(holdings)
        return self.scores

    def save(self, s: Session, now: float) -> None:
        assert self.scores is not None
        at = from_epoch(self.scores.updated_at if self.scores.updated_at is not None else now)
        keys = set(self.scores.values) | set(self.g)
        s.execute(delete(m.UsageScore))
        if keys:
            s.execute(insert(m.UsageScore), [
                {"user": u, "device_type": d, "score": self.scores.values.get((u, d), 0.0),
                 "held": self.g.get((u, d), 0.0), "updated_at": at} for u, d in sorted(keys)])
        self.last_saved = now


def list_scores(session: Session, actor: Actor, args: dict[str, str], settling_s: float,
                weights: Mapping[str, float] | None = None, now: dt.datetime | None = None) -> dict[str, Any]:
    """Q3: my scores; everyone's for those who view all jobs (?all=1 or ?user=). The exact value now: the
    scheduler saves whenever what someone holds changes, so the closed form from the saved row is exact.
    ``held`` is weighted (what the score moves towards), ``held_devices`` the devices themselves."""
    v.check_fields(args, ("all", "user", "device_type", "limit", "offset"))
    limit, offset = v.pagination(args, 200, 10000)
    everyone = args.get("all") in ("1", "true", "yes")
    user = args.get("user")
    conds = []
    if everyone or (user and user != actor.name):
        if not (actor.can(S.VIEW_ALL_JOBS) or actor.can(S.MANAGE_ALL_JOBS) or actor.can(S.MANAGE_USERS)):
            raise Forbidden("seeing other users' usage scores needs "
                              f"{S.VIEW_ALL_JOBS!r}", field="all" if everyone else "user")
        if user:
            conds.append(m.UsageScore.user == user)
    else:
        conds.append(m.UsageScore.user == actor.name)
    if args.get("device_type"):
        conds.append(m.UsageScore.device_type == args["device_type"])
    weights = weights or {}
    items = []
    for r, score in scores_now(session, settling_s, now or dt.datetime.now(dt.timezone.utc), *conds):
        items.append({"user": r.user, "device_type": r.device_type, "score": round(score, 6),
                      "held": r.held, "held_devices": round(r.held / weights.get(r.device_type, 1.0)),
                      "saved_at": r.updated_at.isoformat().replace("+00:00", "Z")})
    items.sort(key=lambda x: (-x["score"], x["user"], x["device_type"]))
    return {"items": items[offset:offset + limit], "total": len(items), "limit": limit, "offset": offset,
            "settling_time_s": settling_s}
