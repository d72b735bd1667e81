"""The ti service asks the hub once for a token that concurrent requests bring (hubclient/oauth.py).

A real tornado server stands in for the hub's GET /hub/api/user (the one endpoint HubAuth calls) and counts
the requests it answers; each answer is held back so that the requests overlap.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from cryptography.fernet import Fernet
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from ti_hub.hubclient.oauth import SealedStateHubOAuth


class FakeHubUser(web.RequestHandler):
    def initialize(self, seen: list, delay: float, fail: set) -> None:
        self.seen, self.delay, self.fail = seen, delay, fail

    async def get(self) -> None:
        token = self.request.headers["Authorization"].split()[-1]
        self.seen.append(token)
        await asyncio.sleep(self.delay)
        if token in self.fail:
            raise web.HTTPError(500)
        self.write(json.dumps({"name": f"user-of-{token}", "kind": "user", "scopes": []}))


@pytest.fixture
def hub():
    async def start(delay=0.2, fail=()):
        seen: list[str] = []
        sock, port = bind_unused_port()
        app = web.Application([("/hub/api/user", FakeHubUser, {"seen": seen, "delay": delay, "fail": set(fail)})])
        server = HTTPServer(app)
        server.add_sockets([sock])
        auth = SealedStateHubOAuth(api_url=f"http://127.0.0.1:{port}/hub/api", api_token="service-token",
                                   state_key=Fernet(Fernet.generate_key()), cache_max_age=300)
        return server, auth, seen
    return start


def test_concurrent_requests_with_one_token_ask_the_hub_once(hub):
    async def go():
        server, auth, seen = await hub()
        try:
            models = await asyncio.gather(*(auth.user_for_token("tok-a", sync=False) for _ in range(20)),
                                          *(auth.user_for_token("tok-b", sync=False) for _ in range(5)))
            assert [m["name"] for m in models] == ["user-of-tok-a"] * 20 + ["user-of-tok-b"] * 5
            assert sorted(seen) == ["tok-a", "tok-b"]  # one lookup per token, not 25
            again = await auth.user_for_token("tok-a", sync=False)  # now from HubAuth's cache
            assert again["name"] == "user-of-tok-a" and len(seen) == 2
            assert not auth._lookups  # nothing left pending
        finally:
            server.stop()
    asyncio.run(go())


def test_a_failed_lookup_reaches_every_waiter_and_is_not_kept(hub):
    async def go():
        server, auth, seen = await hub(fail={"tok-bad"})
        try:
            results = await asyncio.gather(*(auth.user_for_token("tok-bad", sync=False) for _ in range(4)),
                                           return_exceptions=True)
            assert len(seen) == 1 and all(isinstance(r, Exception) for r in results)
            with pytest.raises(Exception):
                await auth.user_for_token("tok-bad", sync=False)
            assert len(seen) == 2  # asked again, not answered from a kept error
        finally:
            server.stop()
    asyncio.run(go())


def test_one_cancelled_request_does_not_cancel_the_others(hub):
    async def go():
        server, auth, seen = await hub(delay=0.3)
        try:
            first = asyncio.ensure_future(auth.user_for_token("tok-c", sync=False))
            second = asyncio.ensure_future(auth.user_for_token("tok-c", sync=False))
            await asyncio.sleep(0.1)
            first.cancel()
            model = await second
            assert model["name"] == "user-of-tok-c" and seen == ["tok-c"]
        finally:
            server.stop()
    asyncio.run(go())


def test_a_revocation_anywhere_empties_every_processs_cache(hub, tmp_path):
    """Issue 30: when a user is disabled, the process that did it grows the revocations file; every process
    forgets the hub's cached answers before its next lookup, and an answer the hub gave while the revocation
    happened is not kept (it may be for a token revoked meanwhile)."""
    from ti_hub.hubclient.oauth import announce_revocation

    async def go():
        server, auth, seen = await hub(delay=0.05)
        auth.revocations = str(tmp_path / "ti.tokens-revoked")
        try:
            await auth.user_for_token("tok-a", sync=False)
            await auth.user_for_token("tok-a", sync=False)
            assert seen == ["tok-a"]  # cached
            announce_revocation(auth.revocations)  # as another API process would
            await auth.user_for_token("tok-a", sync=False)
            assert seen == ["tok-a", "tok-a"]  # asked again
            await auth.user_for_token("tok-a", sync=False)
            assert len(seen) == 2  # and cached again
            # a revocation while the hub is being asked: the answer serves that request, it is not kept
            lookup = asyncio.ensure_future(auth.user_for_token("tok-b", sync=False))
            await asyncio.sleep(0.01)
            announce_revocation(auth.revocations)
            await auth.user_for_token("tok-c", sync=False)  # this process has seen the revocation meanwhile
            assert (await lookup)["name"] == "user-of-tok-b"
            await auth.user_for_token("tok-b", sync=False)
            assert seen.count("tok-b") == 2
            assert (tmp_path / "ti.tokens-revoked").stat().st_mode & 0o777 == 0o600
        finally:
            server.stop()
    asyncio.run(go())
