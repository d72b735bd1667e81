"""The spawner's HTTP client for the ti service (async, never blocks the hub's event loop)."""

from __future__ import annotations

import json
import weakref
from typing import Any
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.ioloop import IOLoop

# tornado's shared client allows 10 requests at once and queues the rest: with a hundred spawns asking for
# admission and polling the queue, each call would wait behind the others. One client of our own per loop.
MAX_CLIENTS = 256
DEFAULT_NAME = "default"  # the TiHub name of a user's default (unnamed) server
_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _client() -> AsyncHTTPClient:
    loop = IOLoop.current()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = AsyncHTTPClient(force_instance=True, max_clients=MAX_CLIENTS)
    return client


class TiServiceError(Exception):
    def __init__(self, status: int, detail: str, field: str | None = None):
        super().__init__(detail)
        self.status, self.detail, self.field = status, detail, field


async def call(base: str, token: str, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
    req = HTTPRequest(base.rstrip("/") + path, method=method, headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"},
        body=None if body is None and method == "GET" else json.dumps(body or {}), request_timeout=timeout)
    try:
        resp = await _client().fetch(req)
    except HTTPClientError as e:
        detail, field = str(e), None
        if e.response is not None and e.response.body:
            try:
                err = json.loads(e.response.body)
                detail, field = err.get("detail", detail), err.get("field")
            except ValueError:
                pass
        raise TiServiceError(e.code, detail, field) from None
    return json.loads(resp.body) if resp.body else None


def ws_path(owner: str, name: str, suffix: str = "") -> str:
    return f"/workspaces/{quote(owner, safe='')}/{quote(name, safe='')}{suffix}"
