"""What tests that watch TiHub's notices start: a real SMTP server's inbox (aiosmtpd) and a webhook receiver."""

from __future__ import annotations

import email
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Inbox:
    """aiosmtpd handler: keeps every message delivered, with its envelope recipients."""

    def __init__(self):
        self.messages: list[tuple[list[str], email.message.Message]] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.content)
        with self.lock:
            self.messages.append((list(envelope.rcpt_tos), msg))
        return "250 OK"

    def to(self, addr: str, key: str = "") -> list[email.message.Message]:
        """Messages to ``addr`` (about the alert ``key``, when given)."""
        with self.lock:
            return [m for rcpt, m in self.messages if addr in rcpt and (not key or m["X-TiHub-Alert"] == key)]


@contextmanager
def smtp_server() -> Iterator[tuple[object, Inbox]]:
    """A real SMTP server on 127.0.0.1: (its controller, with ``.port``; the inbox)."""
    from aiosmtpd.controller import Controller

    inbox = Inbox()
    ctl = Controller(inbox, hostname="127.0.0.1", port=free_port())
    ctl.start()
    try:
        yield ctl, inbox
    finally:
        ctl.stop()


class Hooks:
    """A webhook receiver: every notice the hub's notifier posts, as JSON."""

    def __init__(self):
        self.posts: list[dict] = []
        hooks = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                hooks.posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
