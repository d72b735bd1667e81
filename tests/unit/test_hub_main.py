"""ti_hub.hub_main: the hub notices a starting server within a quarter second of it answering."""

from __future__ import annotations

import asyncio
import socket
import time

from tornado import httpserver, web


def test_hub_polls_a_starting_server_at_least_every_quarter_second():
    import ti_hub.hub_main  # noqa: F401  (patches jupyterhub.utils)
    from jupyterhub import utils

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    class Ok(web.RequestHandler):
        def get(self):
            self.write("ok")

    async def scenario() -> float:
        async def serve_later():
            await asyncio.sleep(1.6)  # unpatched, the back-off would next try at ~3.0 s (0.2+0.4+0.8+1.6)
            server = httpserver.HTTPServer(web.Application([(r"/.*", Ok)]))
            server.listen(port, "127.0.0.1")
            return server, time.monotonic()

        task = asyncio.ensure_future(serve_later())
        await utils.wait_for_http_server(f"http://127.0.0.1:{port}/", timeout=10)
        seen = time.monotonic()
        server, up = await task
        server.stop()
        return seen - up

    lag = asyncio.run(scenario())
    assert lag < 0.5, f"the hub noticed the server {lag:.2f} s after it answered"
