"""The embedded platform's proxy (``python -m ti_hub.launcher.proxy_main``): many slow requests at once get through.

tornado's shared HTTP client, which the Python configurable-http-proxy forwards with, allows 10 requests in
flight by default and queues the rest. The target here holds every request until 30 have arrived at once:
through a proxy limited to 10 none would ever be answered.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
from proxykit import running_proxy

from ti_hub.launcher import proxy_main

AT_ONCE = 30


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
    try:
        with running_proxy("--default-target", f"http://127.0.0.1:{target.server_address[1]}") as proxy:
            with ThreadPoolExecutor(AT_ONCE) as pool:
                codes = list(pool.map(lambda i: requests.get(f"{proxy.url}/user/u{i}/", timeout=60)
                                      .status_code, range(AT_ONCE)))
        assert codes == [200] * AT_ONCE
    finally:
        target.shutdown()
    # and no forwarded request is cut at tornado's default of 20 s
    assert proxy_main.REQUEST_TIMEOUT_S >= 3600
