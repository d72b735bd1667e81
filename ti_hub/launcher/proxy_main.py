"""The embedded platform's proxy: the Python port of configurable-http-proxy, with room for many requests.

It forwards every request with tornado's shared ``AsyncHTTPClient``, whose defaults do not suit a proxy:
* 10 requests at once, the rest queued: ten slow requests in flight (spawns that wait until the server is up,
  spawn-progress event streams, long log downloads) would hold up every request through the proxy;
* a 20-second limit on every request (the port passes no timeout of its own unless given ``--proxy-timeout``):
  a spawn-progress stream, a followed log or a large download would be cut with a 503.
And the port holds a whole response until its target has sent all of it: the spawn page's event stream arrived in
one piece when the spawn had ended (so the page said nothing while a workspace waited). ``stream_responses``
passes responses on as they arrive.
Run as ``python -m ti_hub.launcher.proxy_main`` with configurable-http-proxy's own arguments.
"""

from __future__ import annotations

import os
import re
import sys
import urllib.parse

from tornado.httpclient import AsyncHTTPClient

# requests the proxy forwards at once (each an open connection to its target; websockets are not counted)
DEFAULT_MAX_CLIENTS = 1000
# a forwarded request may last this long (event streams, downloads); connecting to the target stays quick
REQUEST_TIMEOUT_S = 24 * 3600.0
CONNECT_TIMEOUT_S = 20.0
ESCAPED_SLASH = re.compile("%2F", re.IGNORECASE)


def keep_escaped_slashes() -> None:
    """Forward an escaped slash (``%2F``) as the client wrote it.

    The port routes on the decoded path and quotes it again for the target, so ``/jobs/alice%2Fmnist`` (a job
    named OWNER/NAME, docs/api.md) would reach the ti service as ``/jobs/alice/mnist``, another route."""
    from configurable_http_proxy.handlers import ProxyHandler

    original = ProxyHandler.get_target_url

    async def get_target_url(self, path):
        url = await original(self, path)
        raw = self.request.path  # as received, still escaped
        if url is None or not ESCAPED_SLASH.search(raw):
            return url
        sent = urllib.parse.quote(path)
        if not path.startswith("/"):  # the port's route pattern takes the leading "/" off
            raw = raw[1:]
        kept = "%2F".join(urllib.parse.quote(urllib.parse.unquote(part)) for part in ESCAPED_SLASH.split(raw))
        if not self.proxy.include_prefix:  # the route's prefix (no escapes in it) is not forwarded
            cut = len(urllib.parse.quote(self.target["prefix"]))
            sent, kept = sent[cut:], kept[cut:]
        parts = urllib.parse.urlsplit(url)
        if not parts.path.endswith(sent):
            return url
        return urllib.parse.urlunsplit(parts._replace(path=parts.path[:len(parts.path) - len(sent)] + kept))

    ProxyHandler.get_target_url = get_target_url


# a response goes out as it arrives when it is an event stream or has no length (its target streams it), or once
# this many bytes of it have come; a smaller one goes out whole, with its Content-Length, as the port sent it
STREAM_AFTER_BYTES = 64 * 1024
# headers of the target's response the proxy does not pass on (as the port): its own framing replaces them
FRAMING_HEADERS = ("content-length", "transfer-encoding", "content-encoding", "connection")


class _ClientGone(Exception):
    """The client closed its connection: the proxy stops reading the target's response."""


def stream_responses() -> None:
    """Replace the port's forwarding (``ProxyHandler.call_proxy``) by one that writes the target's response to the
    client as it arrives (configurable-http-proxy (node) pipes it)."""
    from configurable_http_proxy.handlers import ProxyHandler
    from tornado import httputil

    def _apply_headers(self, code: int, headers: httputil.HTTPHeaders) -> None:
        self.set_status(code)
        existing = {h[0].lower() for h in self._headers.get_all()}
        for key, val in headers.get_all():
            if key.lower() in FRAMING_HEADERS:
                continue
            if key.lower() in existing:  # the target's Server, Content-Type, Date replace the proxy's
                self.set_header(key, val)
            else:
                self.add_header(key, val)

    def _client_gone(self) -> bool:
        stream = getattr(self.request.connection, "stream", None)
        return stream is not None and stream.closed()

    def _send(self) -> None:
        fut = self.flush()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # a client gone: nothing to report

    async def call_proxy(self, path=None):
        url = await self.get_target_url(path)
        if url is None:
            return
        req = self._get_proxy_request(url)
        head: dict = {"code": None, "headers": httputil.HTTPHeaders(), "streaming": False, "held": []}

        def on_header(line: str) -> None:
            if line.startswith("HTTP/"):
                head["code"] = httputil.parse_response_start_line(line.strip()).code
                head["headers"] = httputil.HTTPHeaders()
            elif line.strip():
                head["headers"].parse_line(line)
            elif head["code"] is not None:  # the end of the headers (tornado gives them in one go)
                headers = head["headers"]
                _apply_headers(self, head["code"], headers)
                head["streaming"] = (headers.get("Content-Type", "").startswith("text/event-stream")
                                     or "Content-Length" not in headers)

        def on_chunk(chunk: bytes) -> None:
            if _client_gone(self):
                raise _ClientGone()
            if not head["streaming"]:
                head["held"].append(chunk)
                if sum(map(len, head["held"])) < STREAM_AFTER_BYTES:
                    return
                head["streaming"] = True
                chunk = b"".join(head["held"])
                head["held"] = []
            self.write(chunk)
            _send(self)

        req.header_callback, req.streaming_callback = on_header, on_chunk
        try:
            await AsyncHTTPClient().fetch(req, raise_error=False)
        except _ClientGone:
            return
        except Exception as err:
            if self._headers_written:  # part of the response is out: end the connection, the client sees a cut
                self.proxy.log.error(f"{self.request.method} {self.request.path}: the target's response broke "
                                     f"off: {err}")
                self.request.connection.close()
                return
            self.clear()
            await self.handle_proxy_error(503, err)
            return
        body = b"".join(head["held"])
        if body:
            self.write(body)
            self.set_header("Content-Length", len(body))
        self.finish()

    ProxyHandler.call_proxy = call_proxy


# methods configurable-http-proxy (node) forwards like any other and its Python port answers itself, with a 405 that
# names no allowed method (tornado's default): forwarded here too, so the target says what the path allows (the
# ti service: a 405 with Allow)
FORWARDED_TOO = ("TRACE", "QUERY")


def forward_every_known_method() -> None:
    """TRACE and QUERY reach the target; a method no one knows is the proxy's 501 (RFC 9110 15.6.2), not a 405
    without the Allow header that a 405 must carry."""
    from configurable_http_proxy.handlers import ProxyHandler

    ProxyHandler.SUPPORTED_METHODS = (*ProxyHandler.SUPPORTED_METHODS, *FORWARDED_TOO)
    ProxyHandler.trace = ProxyHandler.query = ProxyHandler._proxy_method
    original = ProxyHandler.write_error

    def write_error(self, status_code, **kwargs):
        if status_code == 405 and self.request.method not in self.SUPPORTED_METHODS:
            status_code = 501
            self.set_status(status_code)
        return original(self, status_code, **kwargs)

    ProxyHandler.write_error = write_error


STARTING_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>TiHub is starting</title></head>
<body style="font-family: sans-serif; margin: 3em"><h1>TiHub is starting</h1>
<p>The hub is not answering yet. This page reloads by itself in a moment.</p></body></html>
"""


def answer_while_starting() -> None:
    """Before the hub has added its route (the first second of a start, or while it restarts), a request matches
    nothing: the port answered a bare 404, as if the page did not exist. Say what is going on instead: 503 with
    Retry-After, and a page that reloads by itself."""
    from configurable_http_proxy.handlers import ProxyHandler

    original = ProxyHandler.handle_proxy_error

    async def handle_proxy_error(self, code, err):
        if code != 404 or self.ws_connection or self.proxy.target_for_req(None, "/") is not None:
            return await original(self, code, err)
        self.set_status(503)
        self.set_header("Retry-After", "2")
        self.set_header("Cache-Control", "no-store")
        if "text/html" in self.request.headers.get("Accept", ""):
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(STARTING_PAGE)
        else:
            self.set_header("Content-Type", "application/json")
            self.finish('{"error": "starting", "detail": "TiHub is starting; try again in a moment"}')

    ProxyHandler.handle_proxy_error = handle_proxy_error


def main() -> None:
    max_clients = int(os.environ.get("TI_HUB_PROXY_MAX_CLIENTS", DEFAULT_MAX_CLIENTS))
    AsyncHTTPClient.configure(None, max_clients=max_clients, defaults={
        "request_timeout": REQUEST_TIMEOUT_S, "connect_timeout": CONNECT_TIMEOUT_S})
    # the proxy logs every request's URI too: a ?token= must not reach the log from here either
    from ..service import accesslog

    accesslog.install()
    keep_escaped_slashes()
    forward_every_known_method()
    stream_responses()
    answer_while_starting()
    from .proxy_websockets import pass_websockets

    pass_websockets()  # subprotocols, binary frames and closes reach the other side (issue 31)
    from configurable_http_proxy.cli import main as chp

    sys.argv[0] = "configurable-http-proxy"
    sys.exit(chp())


if __name__ == "__main__":
    main()
