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
import sys

from tornado.httpclient import AsyncHTTPClient

# requests the proxy forwards at once (each an open connection to its target; websockets are not counted)
DEFAULT_MAX_CLIENTS = 1000
# a forwarded request may last this long (event streams, downloads); connecting to the target stays quick
REQUEST_TIMEOUT_S = 24 * 3600.0
CONNECT_TIMEOUT_S = 20.0


def main() -> None:
    max_clients = int(os.environ.get("TI_HUB_PROXY_MAX_CLIENTS", DEFAULT_MAX_CLIENTS))
    AsyncHTTPClient.configure(None, max_clients=max_clients, defaults={
        "request_timeout": REQUEST_TIMEOUT_S, "connect_timeout": CONNECT_TIMEOUT_S})
    # the proxy logs every request's URI too: a ?token= must not reach the log from here either
    from .service import accesslog

    accesslog.install()
    from configurable_http_proxy.cli import main as chp

    sys.argv[0] = "configurable-http-proxy"
    sys.exit(chp())


if __name__ == "__main__":
    main()
