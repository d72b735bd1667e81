"""What code below the process shell may reach of the running ti service, as narrow interfaces.

The service process's application object (``service/app.py``'s TiService) is the one place that knows every part;
the handlers, pages, tasks, health and operations receive it typed as one of these protocols, never by its class,
so that their imports point down (issue 32; JupyterHub's handlers likewise see ``self.settings``, never the
``JupyterHub`` application). Each protocol names only what its users read; a new need is a new attribute here,
which makes the dependency visible.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar

if TYPE_CHECKING:
    from jupyterhub.services.auth import HubAuth

    from ..backends.base import ExecutionBackend, NodeCapacity
    from ..storage.base import VolumeDriver
    from .settings import OpsSettings

T = TypeVar("T")


class Db(Protocol):
    """The database runner: ``fn(session, *args, **kwargs)`` in a worker thread, in one transaction committed on
    success. ``readonly`` transactions never take SQLite's write lock; ``scheduler`` ones run on the scheduler's
    own thread."""

    async def db(self, fn: Callable[..., T], *args: Any, readonly: bool = False, scheduler: bool = False,
                 **kwargs: Any) -> T: ...


class Context(Db, Protocol):
    """What every operation may use: the database, the settings value, the execution backend and volume driver,
    the hub's API (with the service's own token) and the scheduler's wake-up."""

    log: logging.Logger
    data_dir: str  # where the service keeps its state (files beside the database)
    ops_settings: OpsSettings
    backend: ExecutionBackend
    volume_driver: VolumeDriver
    default_role: str  # the TiHub role of a user who holds none (ops/grants.py)

    def poke(self) -> None:
        """Something changed: schedule now (a follower process tells the leader)."""

    def hub_auth(self) -> HubAuth:
        """The service's client of the hub: its API URL and token, and the OAuth of its handlers."""


class Capacity(Protocol):
    """Reading the machines' capacity, as the process shell does it (through the virtual clusters' labels)."""

    async def read_capacity(self, settle: bool = False) -> list[NodeCapacity]: ...


class Mailer(Protocol):
    """The notifier's SMTP side, as the email verification uses it (tasks/notifier.py)."""

    base_url: str
    email_link_lifetime: float

    def send_text(self, to: str, subject: str, text: str, headers: dict[str, str] | None = None) -> None: ...


class Verification(Context, Protocol):
    """Email verification links (ops/verifymail.py): signed with the service's link key, mailed by the notifier."""

    link_key: bytes
    hub_public_url: str
    notifier: Mailer
