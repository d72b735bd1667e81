"""Browser pages of the ti service, reached through the hub's OAuth (docs/admin-guide.md, "Pages").

One module per concept: ``base`` (layout, nav, login, scope checks, forms), ``queue``, ``admin`` (plans,
quotas, pools), ``people`` (users, groups, roles), ``cluster`` (status and pictures), ``account``; ``html``
and ``charts`` are the pure builders (escaping, SVG).
"""

from __future__ import annotations

from .account import AccountPageHandler, VerifyEmailPageHandler
from .alerts import AlertsPageHandler
from .audit import AuditPageHandler
from .admin import PlansPageHandler, QuotasPageHandler
from .base import PAGES, PageHandler
from .cluster import ClusterPageHandler
from .home import HomeHandler
from .jobs import JobsPageHandler
from .people import PeoplePageHandler
from .queue import QueuePageHandler
from .roles import RolesPageHandler
from .vcs import VCPageHandler

HANDLERS: dict[str, type[PageHandler]] = {
    "": HomeHandler, "queue": QueuePageHandler, "cluster": ClusterPageHandler, "plans": PlansPageHandler,
    "pools": VCPageHandler, "quotas": QuotasPageHandler, "people": PeoplePageHandler,
    "audit": AuditPageHandler, "account": AccountPageHandler, "roles": RolesPageHandler,
    "jobs": JobsPageHandler, "alerts": AlertsPageHandler,
}
assert set(HANDLERS) == {p.name for p in PAGES}, "every page in the nav has a handler"


def page_routes(service_prefix: str) -> list[tuple[str, type[PageHandler]]]:
    """Routes /services/ti/<name> (the home page also answers without its trailing slash)."""
    routes: list[tuple[str, type[PageHandler]]] = [(service_prefix.rstrip("/") + "/?", HomeHandler)]
    routes += [(service_prefix + name, handler) for name, handler in HANDLERS.items() if name]
    routes.append((service_prefix + VerifyEmailPageHandler.page.name, VerifyEmailPageHandler))  # not in the nav
    return routes


__all__ = ["HANDLERS", "HomeHandler", "QueuePageHandler", "page_routes"]
