"""The embedded platform's proxy: the Python port of configurable-http-proxy, with room for many requests.

It forwards every request with tornado's shared ``AsyncHTTPClient``, whose default allows 10 requests at once
and queues the rest: ten slow requests in flight (spawns that wait until the server is up, spawn-progress
event streams, long log downloads) would hold up every other request through the proxy, to the hub and to
every workspace. Run as ``python -m ti_hub.proxy_main`` with configurable-http-proxy's own arguments.
"""

from __future__ import annotations

import os
import sys

from tornado.httpclient import AsyncHTTPClient

# requests the proxy forwards at once (each an open connection to its target; websockets are not counted)
DEFAULT_MAX_CLIENTS = 1000


def main() -> None:
    max_clients = int(os.environ.get("TI_HUB_PROXY_MAX_CLIENTS", DEFAULT_MAX_CLIENTS))
    AsyncHTTPClient.configure(None, max_clients=max_clients)
    from configurable_http_proxy.cli import main as chp

    sys.argv[0] = "configurable-http-proxy"
    sys.exit(chp())


if __name__ == "__main__":
    main()
