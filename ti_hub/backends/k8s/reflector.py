"""A local copy of one kind of Kubernetes object, kept current by one long watch.

One LIST at start, then a WATCH resumed from the last resourceVersion (bookmarks keep it fresh); a LIST
again only when the API server says that version is gone (410). So a steady cluster costs no periodic
LISTs, unlike re-listing on every watch timeout. Objects stay raw dicts: parsing thousands of pods into
client models would cost more than the rest of a scheduling cycle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from kubernetes_asyncio.client.exceptions import ApiException

from .client import checked, json_of

Lister = Callable[..., Awaitable[Any]]
Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], None]


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): list again."""


def key_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class Reflector:
    def __init__(self, kind: str, lister: Lister, *, log: logging.Logger, on_event: Handler | None = None,
                 watch_timeout: int = 300):
        self.kind = kind
        self.lister = lister
        self.log = log
        self.on_event = on_event
        self.watch_timeout = watch_timeout
        self.items: dict[str, dict[str, Any]] = {}
        self.resource_version: str | None = None
        self.synced = asyncio.Event()
        self.lists = 0  # how many LISTs so far (tests and benchmarks check it stays at 1)
        self.watches = 0
        self.events = 0
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        await self._list()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    async def _list(self) -> None:
        data = await json_of(await self.lister(_preload_content=False))
        old = self.items
        self.items = {key_of(o): o for o in data.get("items") or []}
        self.resource_version = data["metadata"]["resourceVersion"]
        self.lists += 1
        if self.on_event:
            # a relist after a gap: report what changed while we were not watching
            for k, o in old.items():
                if k not in self.items:
                    self.on_event("DELETED", o, o)
            for k, o in self.items.items():
                self.on_event("MODIFIED" if k in old else "ADDED", o, old.get(k))
        self.synced.set()

    async def _run(self) -> None:
        delay = 0.2
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                await self._watch()
                delay = 0.2
            except asyncio.CancelledError:
                raise
            except Gone:
                self.log.info("%s watch: resourceVersion expired; listing again", self.kind)
                self.resource_version = None
            except ApiException as e:
                if e.status == 410:
                    self.resource_version = None
                    continue
                self.log.warning("%s watch failed (%s %s); retrying in %.1fs", self.kind, e.status, e.reason, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
            except Exception as e:  # network trouble: resume from the same version
                self.log.warning("%s watch failed (%s); retrying in %.1fs", self.kind, e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _watch(self) -> None:
        resp = await checked(await self.lister(
            watch=True, resource_version=self.resource_version, allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout, _preload_content=False, _request_timeout=self.watch_timeout + 30))
        self.watches += 1
        buf = b""
        try:
            async for chunk in resp.content.iter_any():
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        break
                    line, buf = buf[:nl], buf[nl + 1:]
                    if line.strip():
                        self._event(orjson.loads(line))
        finally:
            resp.release()

    def _event(self, ev: dict[str, Any]) -> None:
        kind, obj = ev.get("type"), ev.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiException(status=obj.get("code"), reason=f"{obj.get('reason')}: {obj.get('message')}")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        self.events += 1
        k = key_of(obj)
        if kind == "DELETED":
            old = self.items.pop(k, None)
        else:
            old = self.items.get(k)
            self.items[k] = obj
        if rv:
            self.resource_version = rv
        if self.on_event:
            self.on_event(kind, obj, old)
