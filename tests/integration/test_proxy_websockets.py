"""WebSockets through the embedded proxy (``python -m ti_hub.launcher.proxy_main``) as JupyterLab's kernel channels use
them (issue 31, "a WebSocket console error when a notebook opens"; ti_hub/launcher/proxy_websockets.py).

The target is a real tornado WebSocket server, as jupyter-server is: it chooses JupyterLab 4's kernel subprotocol,
greets on open, says which kind of frame it got and echoes it, and closes with a code of its own when asked."""

from __future__ import annotations

import asyncio
import threading

import pytest
from proxykit import running_proxy
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application
from tornado.websocket import WebSocketHandler, websocket_connect

KERNEL_PROTOCOL = "v1.kernel.websocket.jupyter.org"  # what JupyterLab 4 asks for on /api/kernels/ID/channels


class Channels(WebSocketHandler):
    def select_subprotocol(self, subprotocols):
        return KERNEL_PROTOCOL if KERNEL_PROTOCOL in subprotocols else None

    def open(self):
        self.write_message("hello")  # at once, as a kernel's replayed messages are

    def on_message(self, message):
        if message == "close please":
            self.close(4001, "asked to")
            return
        kind = "binary" if isinstance(message, bytes) else "text"
        self.write_message(f"{kind}:{len(message)}")
        self.write_message(message, binary=isinstance(message, bytes))


class Compressing(Channels):
    def get_compression_options(self):
        return {}  # accepts permessage-deflate when it is offered


@pytest.fixture(scope="module")
def proxied():
    loop = asyncio.new_event_loop()
    sockets = bind_sockets(0, "127.0.0.1")
    port = sockets[0].getsockname()[1]

    def serve():
        asyncio.set_event_loop(loop)
        server = HTTPServer(Application([("/channels", Channels), ("/deflate", Compressing)]))
        server.add_sockets(sockets)
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()
    try:
        with running_proxy("--default-target", f"http://127.0.0.1:{port}") as proxy:
            yield proxy.url.replace("http://", "ws://")
    finally:
        loop.call_soon_threadsafe(loop.stop)


async def connect(url: str, subprotocols=None, headers=None):
    from tornado.httpclient import HTTPRequest

    return await asyncio.wait_for(websocket_connect(HTTPRequest(url, headers=headers or {}),
                                                    subprotocols=subprotocols), 10)


async def read(ws):
    return await asyncio.wait_for(ws.read_message(), 10)


async def test_the_targets_subprotocol_reaches_the_client(proxied):
    ws = await connect(proxied + "/channels", subprotocols=["other.example", KERNEL_PROTOCOL])
    assert ws.selected_subprotocol == KERNEL_PROTOCOL
    assert await read(ws) == "hello"  # sent before the proxy's side was open: held, not dropped
    ws.close()
    plain = await connect(proxied + "/channels")  # asked for none: none chosen, and it works
    assert plain.selected_subprotocol is None and await read(plain) == "hello"
    plain.close()


async def test_frames_keep_their_kind_both_ways(proxied):
    ws = await connect(proxied + "/channels", subprotocols=[KERNEL_PROTOCOL])
    assert await read(ws) == "hello"
    data = bytes(range(256)) * 4  # not UTF-8: a text frame of it would be refused
    await ws.write_message(data, binary=True)
    assert await read(ws) == f"binary:{len(data)}"
    assert await read(ws) == data
    await ws.write_message("some text")
    assert await read(ws) == "text:9" and await read(ws) == "some text"
    ws.close()


async def test_the_targets_close_reaches_the_client_with_its_code(proxied):
    ws = await connect(proxied + "/channels")
    assert await read(ws) == "hello"
    await ws.write_message("close please")
    assert await read(ws) is None
    assert (ws.close_code, ws.close_reason) == (4001, "asked to")


async def test_a_target_that_compresses_is_reached(proxied):
    # a browser offers compression to the proxy; that offer is the browser's hop only
    offer = {"Sec-WebSocket-Extensions": "permessage-deflate; client_max_window_bits"}
    ws = await connect(proxied + "/deflate", subprotocols=[KERNEL_PROTOCOL], headers=offer)
    assert ws.selected_subprotocol == KERNEL_PROTOCOL and await read(ws) == "hello"
    await ws.write_message(b"\xff" * 10_000, binary=True)
    assert await read(ws) == "binary:10000" and await read(ws) == b"\xff" * 10_000
    ws.close()
