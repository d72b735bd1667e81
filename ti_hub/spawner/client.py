"""The hub's HTTP client for the ti service (async, never blocks the hub's event loop)."""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any
from urllib.parse import quote

import aiohttp

from ..domain.personal import DEFAULT_WORKSPACE

# One session per event loop, keeping its connections to the ti service open: tornado's client opened a new
# connection (and resolved the address in a thread) for every call, about 1.1 ms of the hub's CPU per call
# against 0.3 ms here (docs/benchmarks.md), and a spawn makes five or more calls on the hub's one loop.
MAX_CONNECTIONS = 256
DEFAULT_NAME = DEFAULT_WORKSPACE  # the TiHub name of a user's default (unnamed) server
_sessions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        # trust_env off: the ti service is local to the hub, never reached through an HTTP(S)_PROXY
        session = _sessions[loop] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS), trust_env=False)
    return session


async def close_sessions() -> None:
    """Close this loop's session (the hub's shutdown): its open connections, and no warning at exit."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


class TiServiceError(Exception):
    def __init__(self, status: int, detail: str, field: str | None = None):
        super().__init__(detail)
        self.status, self.detail, self.field = status, detail, field


async def call(base: str, token: str, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
    data = None if body is None and method == "GET" else json.dumps(body or {})
    async with _session().request(method, base.rstrip("/") + path, data=data, headers={
            "Authorization": f"token {token}", "Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        raw = await resp.read()
    if resp.status >= 400:
        detail, field = f"HTTP {resp.status}: {resp.reason}", None
        try:
            err = json.loads(raw)
            detail, field = err.get("detail", detail), err.get("field")
        except (ValueError, AttributeError):
            pass
        raise TiServiceError(resp.status, detail, field)
    return json.loads(raw) if raw else None


def ws_path(owner: str, name: str, suffix: str = "") -> str:
    return f"/workspaces/{quote(owner, safe='')}/{quote(name, safe='')}{suffix}"
