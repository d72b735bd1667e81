"""The embedded platform's proxy (``python -m ti_hub.launcher.proxy_main``) passes responses on as they arrive
(issue 31).

The Python configurable-http-proxy held each response until its target had sent all of it: the spawn page's
event stream reached the browser in one piece once the spawn had ended. A real target here sends an event stream
slowly, a compressed stream, a large body and a small one.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from proxykit import running_proxy

BIG = os.urandom(3 << 20)


class Target(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        if self.path in ("/events", "/gzip-events"):
            zipped = self.path == "/gzip-events"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            if zipped:
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            # one gzip stream flushed after each event, as tornado's compress_response writes it
            z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            for i in range(3):
                data = f"data: {i}\n\n".encode()
                self._chunk(z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH) if zipped else data)
                time.sleep(1)
            if zipped:
                self._chunk(z.flush())
            self.wfile.write(b"0\r\n\r\n")
            return
        body = BIG if self.path == "/big" else b"small and whole"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def proxied():
    target = ThreadingHTTPServer(("127.0.0.1", 0), Target)
    target.daemon_threads = True
    threading.Thread(target=target.serve_forever, daemon=True).start()
    try:
        with running_proxy("--default-target", f"http://127.0.0.1:{target.server_address[1]}") as proxy:
            yield proxy.url
    finally:
        target.shutdown()


@pytest.mark.parametrize("path", ["/events", "/gzip-events"])
def test_an_event_stream_arrives_event_by_event(proxied, path):
    t0, seen = time.monotonic(), []
    with requests.get(proxied + path, stream=True, timeout=30) as r:
        assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
        for line in r.iter_lines(chunk_size=1):
            if line.startswith(b"data:"):
                seen.append((line.decode(), time.monotonic() - t0))
    assert [s for s, _ in seen] == ["data: 0", "data: 1", "data: 2"]
    assert seen[0][1] < 0.9 and seen[2][1] > 1.5, seen  # the first came before the target had sent the last


def test_bodies_arrive_whole_small_ones_with_their_length(proxied):
    r = requests.get(proxied + "/small", timeout=30)
    assert r.content == b"small and whole" and r.headers["Content-Length"] == "15"
    r = requests.get(proxied + "/big", timeout=30)
    assert r.status_code == 200 and r.content == BIG
