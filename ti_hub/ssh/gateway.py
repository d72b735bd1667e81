"""The gateway's shared state: settings, look-ups, the login limiter, connection counts, and target resolution."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from .authkeys import RegisteredKey, registered
from .local import LocalTarget
from .logins import Hints, Login, choose
from .lookup import HubAccounts, TiAPI
from .places import KubePod, place_of
from .ratelimit import LoginLimiter
from .settings import TiSSHGateway

log = logging.getLogger("ti_hub.ssh")


class Gateway:
    def __init__(self, settings: TiSSHGateway, api: TiAPI, accounts: HubAccounts,
                 limiter: LoginLimiter | None = None):
        self.settings, self.api, self.accounts = settings, api, accounts
        self.limiter = limiter or LoginLimiter(
            settings.failed_logins_per_source, settings.failed_logins_per_user, settings.failed_login_refill_seconds,
            per_account=settings.failed_logins_per_account, known_seconds=settings.known_source_days * 86400)
        self.hints = Hints(settings.hub_url, settings.shown_host(), settings.shown_port())
        self.connections = 0
        self.per_user: Counter[str] = Counter()
        self._kube_api: Any = None

    # -- logins ----------------------------------------------------------------------------------------
    async def keys_of(self, user: str) -> list[RegisteredKey]:
        return registered(await self.api.keys(user))

    async def account_refusal(self, user: str) -> str | None:
        return await self.accounts.refusal(user)

    def login_failed(self, source: str, user: str | None, reason: str) -> None:
        self.limiter.failed(source, user)
        log.warning("ssh login failed: user=%s source=%s reason=%s", user or "-", source, reason)

    # -- targets ---------------------------------------------------------------------------------------
    async def resolve(self, login: Login):
        """The running workspace or job instance this login reaches (LocalTarget or KubeTarget); TargetError with
        a message for the user otherwise."""
        docs = await self.api.targets(login.user, login.target)
        doc = choose(login, docs, self.hints)
        place = place_of(doc, login.instance or 0, self.settings.workspace_container, self.settings.job_container)
        if isinstance(place, KubePod):
            from .kube import KubeTarget

            plain, ws = await self.kube_api()
            return await KubeTarget.resolve(place, plain, ws)
        return await LocalTarget.resolve(place)

    async def kube_api(self) -> tuple[Any, Any]:
        """(ApiClient for reads, WsApiClient for exec and port-forward streams), made on first use."""
        if self._kube_api is None:
            from kubernetes_asyncio.stream import WsApiClient

            from ..backends.k8s.client import new_api_client

            plain = await new_api_client(self.settings.kubeconfig)
            self._kube_api = (plain, WsApiClient(plain.configuration))
        return self._kube_api
