"""Whether the hub has a user or a group of a given name (volume shares name only existing ones).

A share with a name nobody holds yet would go to whoever signs up with that name later; so the ti service asks
the hub (its token's role "ti-service" has read:users and read:groups, ti_hub/hub/config.py). A name that
exists is remembered for ``ttl`` seconds (shares are rare; a user deleted meanwhile is as good as any user
deleted after being given a share); a name the hub does not know is asked again every time, so a user who has
just signed up can be given a share at once.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from ..domain.errors import HubUnavailable
from .api import hub_fetch

KINDS = {"user": "users", "group": "groups"}


class HubNames:
    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic, max_entries: int = 10_000):
        self.ttl, self.clock, self.max_entries = ttl, clock, max_entries
        self._known: OrderedDict[tuple[str, str], float] = OrderedDict()  # (kind, name) -> remembered until

    def remembered(self, kind: str, name: str) -> bool:
        until = self._known.get((kind, name))
        return until is not None and until > self.clock()

    def remember(self, kind: str, name: str) -> None:
        self._known.pop((kind, name), None)
        self._known[(kind, name)] = self.clock() + self.ttl
        while len(self._known) > self.max_entries:
            self._known.popitem(last=False)

    async def exists(self, hub_auth: Any, kind: str, name: str) -> bool:
        if self.remembered(kind, name):
            return True
        what = f"whether {kind} {name!r} exists"
        code = await hub_fetch(hub_auth, "GET", f"{KINDS[kind]}/{quote(name, safe='')}", what)
        if code == 404:
            return False
        if code == 403:
            raise HubUnavailable(f"the ti service's hub token may not read {KINDS[kind]}: give its role "
                                 f"'ti-service' the scope read:{KINDS[kind]}")
        if code >= 400:
            raise HubUnavailable(f"the hub did not answer {what}: HTTP {code}")
        self.remember(kind, name)
        return True
