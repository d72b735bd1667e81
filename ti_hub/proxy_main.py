"""The embedded platform's proxy: the Python port of configurable-http-proxy, with room for many requests.

It forwards every request with tornado's shared ``AsyncHTTPClient``, whose defaults do not suit a proxy:
* 10 requests at once, the rest queued: ten slow requests in flight (spawns that wait until the server is up,
  spawn-progress event streams, long log downloads) would hold up every request through the proxy;
* a 20-second limit on every request (the port passes no timeout of its own unless given ``--proxy-timeout``):
  a spawn-progress stream, a followed log or a large download would be cut with a 503.
Run as ``python -m ti_hub.proxy_main`` with configurable-http-proxy's own arguments.
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


def main() -> None:
    max_clients = int(os.environ.get("TI_HUB_PROXY_MAX_CLIENTS", DEFAULT_MAX_CLIENTS))
    AsyncHTTPClient.configure(None, max_clients=max_clients, defaults={
        "request_timeout": REQUEST_TIMEOUT_S, "connect_timeout": CONNECT_TIMEOUT_S})
    # the proxy logs every request's URI too: a ?token= must not reach the log from here either
    from .service import accesslog

    accesslog.install()
    keep_escaped_slashes()
    forward_every_known_method()
    from configurable_http_proxy.cli import main as chp

    sys.argv[0] = "configurable-http-proxy"
    sys.exit(chp())


if __name__ == "__main__":
    main()
