"""ti_hub.hub.main: the hub notices a starting server within a quarter second of it answering."""

from __future__ import annotations

import asyncio
import socket
import time

from tornado import httpserver, web


def test_hub_polls_a_starting_server_at_least_every_quarter_second():
    import ti_hub.hub.main  # noqa: F401  (patches jupyterhub.utils)
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


def test_shutdown_stops_workspaces_before_the_services_and_only_once(monkeypatch):
    """JupyterHub.cleanup stops the managed services first: the ti service could not record a workspace's stop."""
    import logging

    from jupyterhub.app import JupyterHub

    from ti_hub.hub import main as hub_main

    assert JupyterHub.cleanup is hub_main._cleanup_once
    order: list[str] = []

    async def stock_cleanup(self):  # stands for JupyterHub's own: services, then the proxy
        order.append("services")

    monkeypatch.setattr(hub_main, "_cleanup", stock_cleanup)

    class Spawner:
        active = True
        _log_name = "u/ws"

    class User:
        spawners = {"ws": Spawner()}

        async def stop(self, name):
            await asyncio.sleep(0.2)
            order.append(f"workspace {name}")
            self.spawners[name].active = False

    class Hub:
        cleanup_servers = True
        users = {1: User()}
        log = logging.getLogger("test")

    async def two_signals():  # Ctrl-C reaches the hub from the terminal and from `ti-hub start`
        hub = Hub()
        await asyncio.gather(hub_main._cleanup_once(hub), hub_main._cleanup_once(hub))

    asyncio.run(two_signals())
    assert order == ["workspace ws", "services"]
