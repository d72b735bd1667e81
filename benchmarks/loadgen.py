#!/usr/bin/env python
"""A closed-loop HTTP load generator (aiohttp), run as its own process by bench_api.py.

    python benchmarks/loadgen.py spec.json > result.json

spec = {"duration": 15, "warmup": 2, "timeout": 30,
        "clients": [{"class": "user", "method": "GET", "url": "http://127.0.0.1:8000/...",
                     "headers": {...}, "submit": null | {"plan": ..., ...}}, ...]}

Every client is one coroutine with one keep-alive connection that sends its next request as soon as the
previous answer is read (so concurrency = number of clients). A client with "submit" POSTs that body
with a fresh unique "name" each time. Requests that *start* during the warm-up are not counted;
throughput is counted requests / measured seconds. Latency is from sending the request to having read
the whole body. Prints one JSON document: totals and per client class, latencies in milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import aiohttp


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def summarize(samples: list[tuple[float, int]], seconds: float) -> dict:
    lat = sorted(s[0] for s in samples)
    statuses: dict[str, int] = {}
    for _, code in samples:
        statuses[str(code)] = statuses.get(str(code), 0) + 1
    ok = sum(n for c, n in statuses.items() if c.startswith("2"))
    return {"requests": len(samples), "ok": ok, "errors": len(samples) - ok, "statuses": statuses,
            "rps": round(len(samples) / seconds, 1) if seconds else None,
            "p50_ms": _r(percentile(lat, 0.50)), "p95_ms": _r(percentile(lat, 0.95)),
            "p99_ms": _r(percentile(lat, 0.99)), "max_ms": _r(lat[-1] if lat else None),
            "mean_ms": _r(sum(lat) / len(lat) if lat else None)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


async def client(i: int, c: dict, session: aiohttp.ClientSession, t_measure: float, t_end: float,
                 out: list, errors: list, tag: str) -> None:
    seq = 0
    headers = c.get("headers", {})
    timeout = aiohttp.ClientTimeout(total=c.get("timeout", 30))
    while True:
        t0 = time.perf_counter()
        if t0 >= t_end:
            return
        kw = {}
        if c.get("submit") is not None:
            seq += 1
            kw["json"] = {**c["submit"], "name": f"{tag}-{i}-{seq}"}
        try:
            async with session.request(c.get("method", "GET"), c["url"], headers=headers, timeout=timeout,
                                       **kw) as r:
                body = await r.read()
                code = r.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            code, body = 599, repr(e).encode()
        t1 = time.perf_counter()
        if code >= 300 and len(errors) < 5:
            errors.append(f"{code} {c['url']}: {body[:300]!r}")
        if t0 >= t_measure:
            out.append((c.get("class", "all"), (t1 - t0) * 1000.0, code))


async def run(spec: dict) -> dict:
    clients = spec["clients"]
    conn = aiohttp.TCPConnector(limit=len(clients) + 4, limit_per_host=0, ttl_dns_cache=3600)
    out: list = []
    errors: list = []
    cpu0 = os.times()
    async with aiohttp.ClientSession(connector=conn) as session:
        t_start = time.perf_counter()
        t_measure = t_start + spec.get("warmup", 2.0)
        t_end = t_measure + spec["duration"]
        tag = spec.get("tag", f"b{int(time.time()) % 100000}")
        await asyncio.gather(*(client(i, c, session, t_measure, t_end, out, errors, tag)
                               for i, c in enumerate(clients)))
        t_done = time.perf_counter()
    cpu1 = os.times()
    seconds = spec["duration"]  # requests started in [t_measure, t_end)
    classes = sorted({cls for cls, _, _ in out})
    result = {"concurrency": len(clients), "seconds": seconds, "drain_s": round(t_done - t_end, 3),
              "loadgen_cpu_s": round((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system), 2),
              "total": summarize([(lat, code) for _, lat, code in out], seconds),
              "by_class": {cls: summarize([(lat, code) for c, lat, code in out if c == cls], seconds)
                           for cls in classes},
              "sample_errors": errors}
    return result


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    print(json.dumps(asyncio.run(run(spec))))


if __name__ == "__main__":
    main()
