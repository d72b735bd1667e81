"""The embedded platform's proxy (``python -m ti_hub.proxy_main``): many slow requests at once get through.

tornado's shared HTTP client, which the Python configurable-http-proxy forwards with, allows 10 requests in
flight by default and queues the rest. The target here holds every request until 30 have arrived at once:
through a proxy limited to 10 none would ever be answered.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from ti_hub import proxy_main

AT_ONCE = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_proxy_forwards_more_than_ten_slow_requests_at_once(tmp_path):
    barrier = threading.Barrier(AT_ONCE, timeout=20)

    class Held(BaseHTTPRequestHandler):
        def do_GET(self):
            try:
                barrier.wait()  # every request is answered only once AT_ONCE are in flight together
                code = 200
            except threading.BrokenBarrierError:
                code = 504
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    target = ThreadingHTTPServer(("127.0.0.1", 0), Held)
    target.daemon_threads = True
    threading.Thread(target=target.serve_forever, daemon=True).start()
    port, api_port = free_port(), free_port()
    env = dict(os.environ, CONFIGPROXY_AUTH_TOKEN="t" * 32)
    proxy = subprocess.Popen([sys.executable, "-m", "ti_hub.proxy_main", "--ip", "127.0.0.1", "--port", str(port),
                              "--api-ip", "127.0.0.1", "--api-port", str(api_port),
                              "--default-target", f"http://127.0.0.1:{target.server_address[1]}"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"http://127.0.0.1:{api_port}/api/routes", timeout=1,
                             headers={"Authorization": "token " + "t" * 32})
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and proxy.poll() is None, "the proxy did not start"
                time.sleep(0.1)
        with ThreadPoolExecutor(AT_ONCE) as pool:
            codes = list(pool.map(lambda i: requests.get(f"http://127.0.0.1:{port}/user/u{i}/", timeout=60)
                                  .status_code, range(AT_ONCE)))
        assert codes == [200] * AT_ONCE
    finally:
        proxy.terminate()
        proxy.wait(10)
        target.shutdown()
    # and no forwarded request is cut at tornado's default of 20 s
    assert proxy_main.REQUEST_TIMEOUT_S >= 3600
