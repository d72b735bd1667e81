"""HubOAuth whose login state travels sealed in the state parameter instead of one process's memory.

With several API processes (TiService.api_processes) a browser's OAuth callback may reach another process
than the one that sent it to the hub; HubOAuth keeps the state (next URL, PKCE code verifier) in memory.
Sealing it with the service's Fernet key lets any process finish the login, and the verifier stays secret.

It also asks the hub once for a token that many requests bring at the same moment (see
``_check_hub_authorization``), and forgets every cached answer of the hub when tokens were revoked (a user
disabled: ``announce_revocation``), in all of the service's processes.
"""

from __future__ import annotations

import asyncio
import json
import os

from cryptography.fernet import InvalidToken
from jupyterhub.services.auth import HubOAuth
from traitlets import Any, Integer, Unicode

STATE_TTL = 600


def revocations_file(data_dir: str) -> str:
    """Grown when a user's tokens are revoked (``announce_revocation``): every process of the service then forgets
    the hub's cached answers."""
    return os.path.join(data_dir, "ti.tokens-revoked")


def announce_revocation(path: str) -> None:
    """Tell every process of this service that the hub revoked tokens: each forgets the hub's answers it cached
    (HubAuth keeps one per token for ``cache_max_age``, 5 minutes, and would accept a revoked token that long)
    before it reads its cache again. The file grows by one byte per revocation: its size only ever changes."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, b".")
    finally:
        os.close(fd)


def revocation_mark(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size


class SealedStateHubOAuth(HubOAuth):
    state_key = Any(help="The Fernet that seals OAuth state.")
    state_ttl = Integer(STATE_TTL, help="Seconds a login may take between leaving and coming back.")
    revocations = Unicode("", help="The file ``announce_revocation`` grows; empty: none (the cache only expires).")

    def generate_state(self, next_url=None, **extra_state):
        state = {"next_url": next_url, **extra_state}
        return self.state_key.encrypt(json.dumps(state).encode()).decode()

    def _decode_state(self, state_id, /):
        if not state_id:
            return {}
        try:
            return json.loads(self.state_key.decrypt(state_id.encode(), ttl=self.state_ttl))
        except (InvalidToken, ValueError, TypeError):
            return {}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._lookups: dict = {}  # (loop, cache key) -> the lookup under way
        self._revocation_seen: object = ()  # revocation_mark() when the cache was last known good

    def forget_if_revoked(self) -> None:
        """The hub's cached answers go when tokens were revoked since they were cached (one stat per lookup)."""
        if not self.revocations:
            return
        mark = revocation_mark(self.revocations)
        if mark != self._revocation_seen:
            self.cache.clear()
            self._lookups.clear()  # a lookup under way may answer for a token revoked meanwhile: ask again
            self._revocation_seen = mark

    def clear_oauth_state(self, state_id):
        pass  # nothing is kept; the hub accepts each code once and the seal expires

    async def _check_hub_authorization(self, url, api_token, cache_key=None, use_cache=True):
        """One hub round trip for concurrent requests with the same token (and session).

        HubAuth's cache only helps once an answer is in: a burst of spawns sends a hundred requests with the
        spawner's token at once, and each missed the cache and asked the hub, which hashes a configured token
        16,384 times per lookup on its one event loop (a tenth of its CPU in a burst of 100, docs/benchmarks.md).
        Later callers wait for the first caller's answer, which is what the cache would have given them. An
        error reaches every waiter and is not kept: the next request asks again.
        """
        if use_cache:
            self.forget_if_revoked()
        if not use_cache or cache_key is None or cache_key in self.cache:
            return await super()._check_hub_authorization(url, api_token, cache_key, use_cache)
        loop = asyncio.get_running_loop()
        key = (loop, cache_key)  # HubAuth's synchronous path runs on a loop of its own thread
        pending = self._lookups.get(key)
        if pending is None:
            pending = loop.create_task(self._lookup(url, api_token, cache_key))
            self._lookups[key] = pending
            pending.add_done_callback(lambda t: self._lookup_done(key, t))
        # shielded: one cancelled request must not cancel the lookup the others wait for
        return await asyncio.shield(pending)

    async def _lookup(self, url, api_token, cache_key):
        """The hub's answer, cached unless tokens were revoked while the hub was asked (it may predate that)."""
        seen = self._revocation_seen
        data = await super()._check_hub_authorization(url, api_token, cache_key, True)
        if self.revocations and revocation_mark(self.revocations) != seen:
            self.cache.pop(cache_key, None)
        return data

    def _lookup_done(self, key, task: asyncio.Task) -> None:
        if self._lookups.get(key) is task:
            self._lookups.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here: every waiter may have gone (no "never retrieved" warning)
