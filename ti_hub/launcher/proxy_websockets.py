"""WebSockets through the embedded proxy (``ti_hub.launcher.proxy_main``) as configurable-http-proxy (node) passes them.

The Python port ends each WebSocket at the proxy and opens a second one to the target, and in between it lost
(issue 31, "a WebSocket console error when a notebook opens"):
* the subprotocol: JupyterLab 4 asks for ``v1.kernel.websocket.jupyter.org`` on a kernel's channels, the target
  chose it, and the port's side of the handshake answered without it; Chromium then refuses the socket ("Error
  during WebSocket handshake: Sent non-empty 'Sec-WebSocket-Protocol' header but no response was received") and
  JupyterLab retries without a subprotocol, on the legacy JSON protocol: an error on every notebook opened;
* the kind of frame: a binary frame from the client went on to the target as a text frame (the v1 kernel protocol
  is binary, a text frame of it is not valid UTF-8 and the target drops the connection);
* the close: when the target closed, the client's socket stayed open, and its close code was lost;
* the target's first messages: those that came before the client's side was open were dropped.
And it forwarded the client's compression offer (``Sec-WebSocket-Extensions``), which belongs to the client's hop
only: a target that accepted it was refused by the port's client ("unsupported extension").
"""

from __future__ import annotations

import urllib.parse

# headers of the client's handshake that describe its own hop, not the proxy's hop to the target
PER_HOP_HEADERS = ("sec-websocket-extensions",)
# close codes that a close frame must not carry (RFC 6455 7.4.1): the client's side then closes without a code
UNSENDABLE_CLOSE_CODES = (1005, 1006, 1015)


def _quiet(fut) -> None:
    """A frame to a socket that closed meanwhile: nothing to report (its close is handled on its own)."""
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())


def pass_websockets() -> None:
    """Replace the port's WebSocket relay (``ProxyHandler.start_ws_client``, ``on_message``) by one that keeps the
    target's subprotocol, each frame's kind, the target's close and its first messages."""
    from configurable_http_proxy.handlers import ProxyHandler, apply_timeout
    from tornado.httpclient import HTTPClientError
    from tornado.websocket import WebSocketClosedError, websocket_connect

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        # called once the target has answered (start_ws_client runs first): the client gets the target's choice
        chosen = self.ws_client.selected_subprotocol if self.ws_client else None
        return chosen if chosen in subprotocols else None

    def touch(self) -> None:
        prefix = self.target["prefix"] if self.target else ""
        if prefix:
            self.proxy.update_last_activity(prefix)

    def to_client(self, msg) -> None:
        if self.closed:
            return
        if msg is None:  # the target closed: so does the client's side, with the target's code and reason
            code = self.ws_client.close_code if self.ws_client else None
            if code in UNSENDABLE_CLOSE_CODES:
                code = None
            self.close(code, self.ws_client.close_reason if code else None)
            return
        touch(self)
        try:
            _quiet(self.write_message(msg, binary=isinstance(msg, bytes)))
        except WebSocketClosedError:
            pass  # the client went: on_close closes the target's side

    def from_target(self, msg) -> None:
        if self.ws_held is not None:  # the client's side is not open yet: held until it is (opened below)
            self.ws_held.append(msg)
        else:
            to_client(self, msg)

    def opened(self, *args, **kwargs) -> None:
        held, self.ws_held = self.ws_held or [], None
        for msg in held:
            to_client(self, msg)

    async def start_ws_client(self, path=None):
        self.closed = False
        self.ws_held = []
        url = await self.get_target_url(path)
        if url is None:
            return
        parts = urllib.parse.urlparse(url)
        req = self._get_proxy_request(parts._replace(scheme=parts.scheme.replace("http", "ws")).geturl())
        req.headers = {k: v for k, v in req.headers.items() if k.lower() not in PER_HOP_HEADERS}
        try:
            self.ws_client = await apply_timeout(
                self.proxy.timeout, websocket_connect(req, on_message_callback=lambda m: from_target(self, m)))
        except HTTPClientError as err:  # the target refused the handshake: the client gets its status
            self.set_status(err.code)
            self.write(err.message)
            self.finish()
        except Exception as err:
            await self.handle_proxy_error(503, err)
            raise

    def on_message(self, message) -> None:
        if self.ws_client:
            touch(self)
            try:
                _quiet(self.ws_client.write_message(message, binary=isinstance(message, bytes)))
            except WebSocketClosedError:
                pass  # the target went: its close reaches to_client

    ProxyHandler.select_subprotocol = select_subprotocol
    ProxyHandler.open = opened
    ProxyHandler.start_ws_client = start_ws_client
    ProxyHandler.on_message = on_message
