"""The hub's client for the ti service (ti_hub/spawner/client.py) against a real tornado server.

It keeps its connections open between calls (a spawn makes five or more on the hub's one loop), sends the
token and JSON body, and turns the service's error answers into TiServiceError with their field.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from ti_hub.spawner import client


class Echo(web.RequestHandler):
    def initialize(self, peers: set) -> None:
        self.peers = peers

    def _answer(self) -> None:
        self.peers.add(self.request.connection.stream.socket.getpeername())
        if self.request.path.endswith("/refused"):
            self.set_status(400)
            self.write({"status": 400, "detail": "plan: no such plan", "field": "plan"})
            return
        self.write({"method": self.request.method, "auth": self.request.headers.get("Authorization"),
                    "body": json.loads(self.request.body) if self.request.body else None})

    get = post = _answer


@contextlib.asynccontextmanager
async def serving():
    """(base URL, peers seen) of a real server for the test's calls; the client's session closes after."""
    peers: set = set()
    sock, port = bind_unused_port()
    server = HTTPServer(web.Application([(r"/api/.*", Echo, {"peers": peers})]))
    server.add_sockets([sock])
    try:
        yield f"http://127.0.0.1:{port}/api", peers
    finally:
        await client.close_sessions()
        server.stop()


def test_calls_reuse_one_connection_and_send_token_and_body():
    async def go():
        async with serving() as (base, peers):
            for i in range(20):
                out = await client.call(base, "secret-token", "POST", f"/w/{i}", {"n": i})
                assert out == {"method": "POST", "auth": "token secret-token", "body": {"n": i}}
            got = await client.call(base, "secret-token", "GET", "/w/0")
            assert got["method"] == "GET" and got["body"] is None
            assert len(peers) == 1  # 21 calls, one connection kept open
    asyncio.run(go())


def test_an_error_answer_becomes_ti_service_error_with_its_field():
    async def go():
        async with serving() as (base, _):
            with pytest.raises(client.TiServiceError) as err:
                await client.call(base, "t", "POST", "/refused", {})
            assert (err.value.status, err.value.detail, err.value.field) == (400, "plan: no such plan", "plan")
    asyncio.run(go())


def test_each_event_loop_has_its_own_session():
    async def one():
        async with serving() as (base, _):
            await client.call(base, "t", "GET", "/x")
            return client._sessions[asyncio.get_running_loop()]
    first = asyncio.run(one())
    second = asyncio.run(one())  # a new loop: a new session, not one bound to a closed loop
    assert first is not second
