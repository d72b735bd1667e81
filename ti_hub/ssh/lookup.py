"""What the gateway asks at each login: the ti service (keys, targets) and the hub's database (the account).

- The ti service's API, with the gateway's own hub service token, whose only TiHub scope is
  ``custom:ti:ssh:gateway`` (``/ssh/keys/{user}``, ``/ssh/targets/{user}``).
- JupyterHub's database, read-only: does the account still exist, and has an admin not taken back its approval
  (NativeAuthenticator's ``users_info.is_authorized``)? The hub's REST API does not say the latter.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from typing import Any
from urllib.parse import quote, urlencode

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

log = logging.getLogger("ti_hub.ssh")


class LookupFailed(Exception):
    """The ti service or the hub's database did not answer: the login is refused, and the reason logged."""


class TiAPI:
    def __init__(self, url: str, token: str, timeout: float = 10.0):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout
        self.http = AsyncHTTPClient()

    async def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        url = self.url + path + ("?" + urlencode(params) if params else "")
        req = HTTPRequest(url, headers={"Authorization": f"token {self.token}"}, request_timeout=self.timeout)
        try:
            resp = await self.http.fetch(req)
        except HTTPClientError as e:
            detail = e.response.body[:300].decode(errors="replace") if e.response is not None else ""
            raise LookupFailed(f"GET {path}: {e.code} {detail}") from None
        except OSError as e:
            raise LookupFailed(f"GET {path}: {e}") from None
        return json.loads(resp.body)

    async def keys(self, user: str) -> list[dict[str, Any]]:
        return (await self._get(f"/ssh/keys/{quote(user, safe='')}"))["items"]

    async def targets(self, user: str, name: str | None) -> list[dict[str, Any]]:
        params = {"name": name} if name else None
        return (await self._get(f"/ssh/targets/{quote(user, safe='')}", params))["items"]


class HubAccounts:
    """Read-only look-ups in JupyterHub's database; ``url`` empty: every account passes."""

    def __init__(self, url: str):
        self.url = url
        self._engine = None
        if url:
            u = make_url(url)
            if u.get_backend_name() == "sqlite":
                path = u.database or ""
                # a fresh read-only connection per check (the "sqlite://" URL would get SQLAlchemy's
                # per-thread pool for in-memory databases, which closes connections other threads still use)
                self._engine = create_engine(
                    "sqlite://", poolclass=NullPool,
                    creator=lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10))
            else:
                self._engine = create_engine(url, pool_pre_ping=True, pool_size=2)

    def _refusal_sync(self, user: str) -> str | None:
        assert self._engine is not None
        try:
            with self._engine.connect() as db:
                if db.execute(text("SELECT 1 FROM users WHERE name = :n"), {"n": user}).first() is None:
                    return "no such account in the hub"
        except DBAPIError as e:
            raise LookupFailed(f"the hub's database: {e.orig}") from None
        try:
            with self._engine.connect() as db:
                row = db.execute(text("SELECT is_authorized FROM users_info WHERE username = :n"),
                                 {"n": user}).first()
        except DBAPIError:
            return None  # no NativeAuthenticator table: accounts need no approval here
        if row is not None and not row[0]:
            return "the account is not authorized in the hub (an admin took its approval back)"
        return None

    async def refusal(self, user: str) -> str | None:
        """Why ``user`` may not log in now (None: they may)."""
        if self._engine is None:
            return None
        return await asyncio.to_thread(self._refusal_sync, user)
