"""IMG3: image lists show each image's version, size and creation time as its registry says them, read through
the OCI distribution API (reader.py) with the viewer's saved credential for that registry when there is one.

Reads are remembered briefly (per image address and credential: one person's login never answers another's
list), run at most once at a time per key, and bounded in time; a list waits for them only ``list_wait`` seconds
and says "pending" for the rest, which fill the cache for the next list. A registry that cannot be read makes
its images say why, never the list fail.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from tornado.httpclient import AsyncHTTPClient
from traitlets import Enum, Float, List, Unicode, default
from traitlets.config import LoggingConfigurable

from . import oci
from .oci import Facts, RegistryError
from .reader import MAX_BODY, Reader

# a saved credential as ops/images.py registry_credentials loads it: (id, server, username, encrypted password)
Login = tuple[int, str, str, bytes]
Key = tuple[str, int | None]


class ImageRegistries(LoggingConfigurable):
    """Reads images' facts from their registries for the image lists (SPEC IMG3)."""

    timeout = Float(
        10.0, config=True,
        help="Seconds one image's registry read may take (manifest, token, config together); past it the image "
             "says 'unreachable: no answer within N s'.")
    list_wait = Float(
        4.0, config=True,
        help="Seconds an image list waits for registries; images still being read say 'pending' and are read on, "
             "for the next list.")
    cache_seconds = Float(
        300.0, config=True, help="Seconds an image's facts, once read, are shown before they are read again.")
    failure_cache_seconds = Float(
        30.0, config=True, help="Seconds a failed read is shown before the registry is tried again.")
    insecure_registries = List(
        Unicode(), config=True,
        help="Registry hosts (host[:port]) read over plain HTTP; loopback ones (localhost, 127.0.0.1) always are.")
    reach = Enum(
        ("all", "loopback", "none"), "all", config=True,
        help="Which registries are read: all, loopback (only registries on this machine: what the test suite "
             "uses, so that no test reaches off the machine) or none (lists show what is stored and say so). "
             "Default from $TI_HUB_REGISTRY_REACH, else all.")

    @default("reach")
    def _reach_default(self) -> str:
        env = os.environ.get("TI_HUB_REGISTRY_REACH", "")
        return env if env in ("all", "loopback", "none") else "all"

    platform = Unicode(
        "linux/amd64", config=True,
        help="The platform (os/arch) whose image a multi-platform image's size and creation time are read from.")

    def __init__(self, clock: Callable[[], float] = time.monotonic, **kwargs):
        super().__init__(**kwargs)
        self.clock = clock
        self._cache: dict[Key, tuple[float, Facts | RegistryError]] = {}
        self._inflight: dict[Key, asyncio.Task] = {}
        self._client: AsyncHTTPClient | None = None

    def reader(self) -> Reader:
        if self._client is None:  # made on the loop that uses it (each API process has its own)
            self._client = AsyncHTTPClient(force_instance=True, max_clients=16, max_body_size=MAX_BODY)
        return Reader(self._client, self.timeout, frozenset(self.insecure_registries), self.platform)

    def cached(self, key: Key) -> Facts | RegistryError | None:
        hit = self._cache.get(key)
        return hit[1] if hit and hit[0] > self.clock() else None

    def _remember(self, key: Key, value: Facts | RegistryError) -> None:
        now = self.clock()
        if len(self._cache) > 2000:  # forget what expired before growing further
            self._cache = {k: hit for k, hit in self._cache.items() if hit[0] > now}
        ttl = self.cache_seconds if isinstance(value, Facts) else self.failure_cache_seconds
        self._cache[key] = (now + ttl, value)

    async def _read(self, key: Key, ref: oci.Reference, login: Login | None,
                    opener: Callable[[Login], tuple[str, str]]) -> None:
        try:
            try:
                opened = opener(login) if login else None
            except Exception:  # a key replaced since it was saved (TiService.secret_file)
                raise RegistryError("denied", f"your saved credential for {login[1]} cannot be opened any more: "
                                              "save it again") from None
            value: Facts | RegistryError = await asyncio.wait_for(self.reader().facts(ref, opened), self.timeout)
        except RegistryError as e:
            value = e
        except asyncio.TimeoutError:
            value = RegistryError("unreachable", f"no answer within {self.timeout:g} s")
        except Exception as e:  # a bug of ours or an odd answer: the image says so, the list still comes
            self.log.warning("reading %s from its registry failed: %s", key[0], type(e).__name__, exc_info=True)
            value = RegistryError("unreadable", type(e).__name__)
        self._remember(key, value)

    def _start(self, key: Key, ref: oci.Reference, login: Login | None,
               opener: Callable[[Login], tuple[str, str]]) -> asyncio.Task:
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._read(key, ref, login, opener))
            self._inflight[key] = task
            task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        return task

    async def annotate(self, items: Iterable[dict[str, Any]], logins: list[Login],
                       opener: Callable[[Login], tuple[str, str]]) -> list[dict[str, Any]]:
        """``items`` (rendered images, with an ``address``) with their registry facts (oci.fields). ``opener``
        gives a login's (username, password), called only when the registry is read."""
        items = list(items)
        keys: list[Key | None] = []
        pending: list[asyncio.Task] = []
        for item in items:
            try:
                ref = oci.parse_reference(item["address"])
            except RegistryError as e:
                item.update(oci.fields(item["address"], e))
                keys.append(None)
                continue
            if self.reach == "none" or (self.reach == "loopback" and not oci.is_loopback(ref.registry)):
                which = "no registries" if self.reach == "none" else "only registries on this machine"
                item.update(oci.fields(item["address"], RegistryError(
                    "not read", f"this platform reads {which} (ImageRegistries.reach)")))
                keys.append(None)
                continue
            login = next((c for c in logins if oci.same_registry(c[1], ref)), None)
            key = (item["address"], login[0] if login else None)
            keys.append(key)
            if self.cached(key) is None:
                pending.append(self._start(key, ref, login, opener))
        if pending and self.list_wait > 0:
            await asyncio.wait(pending, timeout=self.list_wait)
        for item, key in zip(items, keys):
            if key is not None:
                item.update(oci.fields(item["address"], self.cached(key)))
        return items
