"""What runs in place of Jupyter in a workspace started with ``jupyter: false`` (an SSH-only workspace).

The hub still needs an HTTP server at the workspace's address to call it started, and a browser that opens the
workspace's URL should learn how to reach it; so this answers every request with one page saying so. It holds
nothing of the user's and runs in the workspace's sandbox as its user, like the Jupyter server it replaces; the
SSH gateway (ti_hub/ssh) enters that sandbox as for any workspace. Only the standard library: it starts at once,
and on Kubernetes (ti_hub/spawner/kube.py) it runs from its source text with the image's ``python3``, which needs
no TiHub in the image; there it is the container's first process, which the gateway's sessions join.
"""

from __future__ import annotations

import html
import os
import signal
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


def page(owner: str, workspace: str) -> bytes:
    login = html.escape(f"{owner}+{workspace}")
    name = html.escape(workspace)
    return (f"<!doctype html><meta charset=utf-8><title>{name}: SSH only</title>"
            f"<h1>Workspace {name} runs without Jupyter</h1>"
            f"<p>It was started with SSH access only. Reach it through TiHub's SSH gateway as <code>{login}</code>: "
            f"<code>ti ssh-command {name}</code> prints the whole command (your keys are on the account page).</p>"
            f"<p>To use Jupyter, stop it and start it again with Jupyter.</p>").encode()


def main() -> None:
    body = page(os.environ.get("JUPYTERHUB_USER", ""), os.environ.get("TI_WORKSPACE", ""))
    where = urlsplit(os.environ["JUPYTERHUB_SERVICE_URL"])  # where the hub expects the server (JupyterHub >= 2)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_HEAD = do_GET

        def log_message(self, format: str, *args) -> None:
            pass  # the hub's readiness checks would fill the workspace's log

    if os.getpid() == 1:
        # the container's first process (Kubernetes): the kernel gives it no default SIGTERM, so a stop would wait
        # out the pod's grace period; and processes that SSH sessions leave behind become its children to reap
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    host = where.hostname or "127.0.0.1"

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET  # the hub may bind to "::"

    Server((host, where.port or 8888), Handler).serve_forever()


if __name__ == "__main__":
    main()
