"""``GET /services/ti/api/v1/metrics``: the Prometheus text of the ti service (SPEC MON4; metrics/exporter.py renders
it). Authenticated like JupyterHub's own ``/hub/metrics``: a hub token with the scope ``read:metrics`` (a token may
hold only that scope: it needs no access to the service otherwise), or a TiHub admin. Anyone else: 403."""

from __future__ import annotations

from ..domain.errors import Forbidden
from ..metrics.exporter import READ_METRICS
from .base import APIHandler


class MetricsHandler(APIHandler):
    """Not a JSON route (not in web.ROUTES): the Prometheus text format."""

    @property
    def hub_scopes(self):
        # a token with read:metrics alone is let through the service's access check, as the hub does for
        # /hub/metrics; get() then decides
        return {*(self.hub_auth.access_scopes or ()), READ_METRICS}

    async def get(self) -> None:
        actor = self.actor
        if READ_METRICS not in actor.scopes and not actor.is_admin:
            raise Forbidden(f"metrics need a token with the scope {READ_METRICS!r} or a TiHub admin", field="scope")
        from prometheus_client import CONTENT_TYPE_LATEST

        text = await self.ti.metrics.scrape(self.ti)
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(text)
