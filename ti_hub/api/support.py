"""POST /jobs/{id}/support (JOB4: ask the admins about a finished job of mine) and POST /alerts/{id}/answer (an
admin answers it): ops/support.py, ops/alerts.py."""

from __future__ import annotations

from ..domain import validation as v
from ..ops import alerts, support
from .base import APIHandler


class JobSupportHandler(APIHandler):
    async def post(self, ref: str):
        body = self.body()
        facts = await self.ti.db(support.facts, self.actor, ref, self.ti.ops_settings, readonly=True)
        tail = "" if facts["readable"] else support.NO_SCRUB
        if facts["backend_state"]:
            # the last lines of instance 0 (backend I/O, outside any transaction); a log that cannot be read any
            # more (cleaned up) is said so, and the request still goes
            try:
                text, _ = await self.ti.backend.tail_lines(facts["id"], facts["backend_state"], 0,
                                                           support.LOG_LINES)
                tail = support.scrub(text, facts["secrets"])
            except Exception as e:
                self.log.warning("support request about job %s: its log cannot be read (%s)", facts["id"],
                                 type(e).__name__)
                tail = "(the log cannot be read any more)"
        out = await self.op(support.ask, self.actor, ref, body.get("message"), tail)
        self.send(out, 201)


class AlertAnswerHandler(APIHandler):
    async def post(self, alert_id: str):
        body = self.body()
        self.send(await self.op(alerts.answer, self.actor, v.db_id(alert_id), body.get("answer")))
