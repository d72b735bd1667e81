"""``GET /services/ti/api/v1/health``: which run of `ti-hub start` this ti service belongs to, nothing else.

`ti-hub start` passes a random id to everything it starts (TI_HUB_RUN_ID) and prints "ready" only once
this route echoes its own: an orphan of an earlier run answering on the same port echoes another. The id
grants nothing and says nothing about users or jobs; the route needs no login so that it answers before
anyone has one. Empty when the service was not started by `ti-hub start` (e.g. on Kubernetes).
"""

from __future__ import annotations

import os

from tornado import web

from ..api.base import MethodsAllowed


class HealthHandler(MethodsAllowed, web.RequestHandler):
    def get(self):
        self.set_header("Cache-Control", "no-store")
        self.finish({"run": os.environ.get("TI_HUB_RUN_ID", "")})
