"""The embedded proxy (``python -m ti_hub.launcher.proxy_main``) started alone, for tests of what it forwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import requests

TOKEN = "t" * 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proxy:
    url: str  # the public side
    api: str  # its routes API (…/api/routes), with ``auth`` headers
    auth: dict


@contextmanager
def running_proxy(*args: str) -> Iterator[Proxy]:
    """The proxy on free loopback ports with configurable-http-proxy's ``args`` (e.g. --default-target URL),
    once its API answers; stopped after."""
    port, api_port = free_port(), free_port()
    proxy = subprocess.Popen([sys.executable, "-m", "ti_hub.launcher.proxy_main", "--ip", "127.0.0.1", "--port", str(port),
                              "--api-ip", "127.0.0.1", "--api-port", str(api_port), *args],
                             env=dict(os.environ, CONFIGPROXY_AUTH_TOKEN=TOKEN),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    auth = {"Authorization": "token " + TOKEN}
    api = f"http://127.0.0.1:{api_port}/api/routes"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(api, timeout=1, headers=auth)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and proxy.poll() is None, "the proxy did not start"
                time.sleep(0.1)
        yield Proxy(f"http://127.0.0.1:{port}", api, auth)
    finally:
        proxy.terminate()
        proxy.wait(10)
