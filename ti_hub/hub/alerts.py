"""The hub's home page banner of a user's open TiHub alerts (MON2-3), filled on the hub's side.

The hub process cannot read TiHub's database (on Kubernetes it is another pod's), and a script on the hub's
page would need a ti service login the browser may not have yet. So the page's template asks, while it renders,
for ``ti_alerts.fetch()``: one GET /alerts?user=NAME from the hub to the ti service with the ti-spawner service's
token (the hub already holds it; the API lets that identity, and admins, name a user), with a short timeout. The
answer is rendered by Jinja with autoescaping: nothing of an alert's text becomes markup. Any failure (the ti
service restarting) shows no banner rather than delaying or breaking the hub's home page.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

log = logging.getLogger("ti_hub.hub.alerts")
TIMEOUT_S = 2.0
SHOWN = 5  # subjects listed on the banner; the count says how many in all


class HubAlerts:
    """A template variable (``c.JupyterHub.template_vars``): called with the page's user for every page the hub
    renders (cheap: nothing is fetched until a template awaits ``fetch()``)."""

    def __init__(self, api_url: str, token: str):
        self.api_url, self.token = api_url, token

    def __call__(self, user: Any) -> UserAlerts:
        return UserAlerts(self, getattr(user, "name", None))


class UserAlerts:
    def __init__(self, source: HubAlerts, name: str | None):
        self.source, self.name = source, name

    async def fetch(self) -> dict[str, Any] | None:
        """{"items": [...], "total": N} of the user's open alerts, or None (no user, or the ti service did not
        answer in time)."""
        if not self.name or not self.source.api_url:
            return None
        from ..spawner.client import call  # the hub's async client for the ti service

        query = urlencode({"user": self.name, "limit": SHOWN})
        try:
            return await call(self.source.api_url, self.source.token, "GET", f"/alerts?{query}", timeout=TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - a banner never breaks the home page
            log.warning("TiHub alerts banner: the ti service did not answer (%s)", e)
            return None
