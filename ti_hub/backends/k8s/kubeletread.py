"""Reading the kubelets' usage figures through the API server's node proxy (the I/O shell of kubeletstats.py).

``GET /api/v1/nodes/{node}/proxy/metrics/resource`` and ``.../metrics/cadvisor`` (RBAC: ``get`` on
``nodes/proxy``). Each node's answer is kept ``ttl`` seconds, so that the idle policy and the job usage counters of
one health sample (and a burst of metrics requests) read each node once; concurrent readers of one node share one
request. A request is bounded by ``timeout``; the text is parsed off the event loop (a busy node's cAdvisor text
runs to megabytes). A node that does not answer gives nothing: its pods' figures are unknown, never 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kubernetes_asyncio import client as k8s

from . import kubeletstats as ks
from .client import checked

RESOURCE, CADVISOR = "metrics/resource", "metrics/cadvisor"
PARSERS = {RESOURCE: ks.resource_usage, CADVISOR: ks.cadvisor_usage}
Usage = dict[ks.PodKey, ks.PodUsage]


class KubeletReader:
    def __init__(self, api: Callable[[], Awaitable[k8s.ApiClient]], *, timeout: float, ttl: float, concurrency: int,
                 log: logging.Logger, clock: Callable[[], float] = time.monotonic):
        self.api = api
        self.timeout = timeout
        self.ttl = ttl
        self.log = log
        self.clock = clock
        self.limit = asyncio.Semaphore(max(1, concurrency))
        self.cache: dict[tuple[str, str], tuple[float, asyncio.Future]] = {}  # (node, path) -> (asked at, answer)
        self.failing: dict[tuple[str, str], str] = {}  # the last error said per (node, path): said once
        self.requests = 0  # requests made so far, for tests

    async def _get(self, node: str, path: str) -> bytes:
        api = await self.api()
        # the path stays in the URL as it is: the generated connect_get_node_proxy_with_path quotes its "/"
        resp = await checked(await api.call_api(
            f"/api/v1/nodes/{{name}}/proxy/{path}", "GET", path_params={"name": node},
            header_params={"Accept": "text/plain"}, auth_settings=["BearerToken"], _return_http_data_only=True,
            _preload_content=False, _request_timeout=self.timeout))
        try:
            return await resp.read()
        finally:
            resp.release()

    async def _fetch(self, node: str, path: str) -> Usage | None:
        async with self.limit:
            self.requests += 1
            try:
                body = await asyncio.wait_for(self._get(node, path), self.timeout)
                asked = int(time.time() * 1000)
                usage = await asyncio.to_thread(PARSERS[path], body.decode(errors="replace"))
            except Exception as e:  # noqa: BLE001 - unknown figures, said once per node until it answers again
                why = f"{type(e).__name__}: {getattr(e, 'status', '')} {getattr(e, 'reason', '') or e}".strip()
                if self.failing.get((node, path)) != why:
                    self.log.warning("reading /%s of node %s through the API server failed (%s): its pods' usage "
                                     "is unknown (RBAC: get on nodes/proxy)", path, node, why)
                self.failing[(node, path)] = why
                return None
        if self.failing.pop((node, path), None) is not None:
            self.log.info("node %s answers /%s again", node, path)
        # figures without the kubelet's timestamp are as of this answer (a cached answer keeps its time: no rate
        # is made of one answer read twice)
        return {k: u if u.at_ms is not None else dataclasses.replace(u, at_ms=asked) for k, u in usage.items()}

    def _node(self, node: str, path: str) -> asyncio.Future:
        now = self.clock()
        got = self.cache.get((node, path))
        if got is not None and now - got[0] < self.ttl:
            return got[1]
        fut = asyncio.ensure_future(self._fetch(node, path))
        self.cache[(node, path)] = (now, fut)
        return fut

    async def read(self, nodes: Iterable[str], path: str) -> Usage:
        """The figures of every pod on ``nodes`` (by (namespace, pod)); a node that did not answer adds none."""
        nodes = sorted(set(n for n in nodes if n))
        out: Usage = {}
        for usage in await asyncio.gather(*(asyncio.shield(self._node(n, path)) for n in nodes)):
            out.update(usage or {})
        now = self.clock()
        for key in [k for k, (at, fut) in self.cache.items() if now - at >= self.ttl and fut.done()]:
            del self.cache[key]  # nodes gone, pods moved: nothing kept past its time
        return out

    def forget(self) -> None:
        for _, fut in self.cache.values():
            fut.cancel()
        self.cache.clear()


def merged(resource: Usage, cadvisor: Usage) -> Usage:
    """One PodUsage per pod from the two endpoints' figures."""
    out: Usage = {}
    for key in set(resource) | set(cadvisor):
        r, c = resource.get(key) or ks.PodUsage(), cadvisor.get(key) or ks.PodUsage()
        out[key] = ks.PodUsage(r.cpu_seconds, r.memory_bytes, c.network, c.disk, c.at_ms)
    return out


def pod_node(pod: dict[str, Any] | None) -> str:
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")
