#!/usr/bin/env python
"""A closed-loop HTTP load generator (aiohttp), run as its own process by bench_api.py.

    python benchmarks/loadgen.py spec.json > result.json

spec = {"duration": 15, "warmup": 2, "timeout": 30,
        "clients": [{"class": "user", "method": "GET", "url": "http://127.0.0.1:8000/...",
                     "headers": {...}, "submit": null | {"plan": ..., ...}}, ...]}

Every client is one coroutine with one keep-alive connection. Closed loop (default): it sends its next
request as soon as the previous answer is read, so concurrency = number of clients and the result is the
server's saturation throughput. Paced ("rate": requests per second for that client): requests are due at
fixed times (start + phase + k / rate) and latency is measured from the time a request was *due*, not
from when it could be sent (no coordinated omission): if the server falls behind, the waiting shows. A client with "submit" POSTs that body
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


def summarize(samples: list[tuple[float, int, float]], t_measure: float, seconds: float, dropped: int = 0) -> dict:
    """samples: (latency ms, status, completion time). Throughput counts completions inside the window."""
    lat = sorted(s[0] for s in samples)
    statuses: dict[str, int] = {}
    for _, code, _ in samples:
        statuses[str(code)] = statuses.get(str(code), 0) + 1
    ok = sum(n for c, n in statuses.items() if c.startswith("2"))
    done_in_window = sum(1 for _, _, t1 in samples if t_measure <= t1 < t_measure + seconds)
    return {"requests": len(samples), "ok": ok, "errors": len(samples) - ok, "dropped": dropped,
            "statuses": statuses, "rps": round(done_in_window / seconds, 1) if seconds else None,
            "p50_ms": _r(percentile(lat, 0.50)), "p95_ms": _r(percentile(lat, 0.95)),
            "p99_ms": _r(percentile(lat, 0.99)), "max_ms": _r(lat[-1] if lat else None),
            "mean_ms": _r(sum(lat) / len(lat) if lat else None)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


async def client(i: int, c: dict, session: aiohttp.ClientSession, t_measure: float, t_end: float,
                 out: list, errors: list, dropped: dict, tag: str, grace: float) -> None:
    seq = 0
    cls = c.get("class", "all")
    headers = c.get("headers", {})
    timeout = aiohttp.ClientTimeout(total=c.get("timeout", 30))
    rate = c.get("rate")
    k = 0
    t_first = time.perf_counter() + (i * 0.6180339887 % 1.0) / rate if rate else 0.0  # spread the phases
    while True:
        if rate:
            due = t_first + k / rate
            k += 1
            now = time.perf_counter()
            if due >= t_end:
                return
            if now >= t_end + grace:
                # hopelessly behind: what was due in the window and never sent counts as dropped
                missed = int((t_end - max(due, t_measure)) * rate) + 1
                dropped[cls] = dropped.get(cls, 0) + max(missed, 0)
                return
            if due > now:
                await asyncio.sleep(due - now)
            t0 = due
        else:
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
            out.append((cls, (t1 - t0) * 1000.0, code, t1))


async def run(spec: dict) -> dict:
    clients = spec["clients"]
    conn = aiohttp.TCPConnector(limit=len(clients) + 4, limit_per_host=0, ttl_dns_cache=3600)
    out: list = []
    errors: list = []
    dropped: dict = {}
    cpu0 = os.times()
    async with aiohttp.ClientSession(connector=conn) as session:
        t_start = time.perf_counter()
        t_measure = t_start + spec.get("warmup", 2.0)
        t_end = t_measure + spec["duration"]
        tag = spec.get("tag", f"b{int(time.time()) % 100000}")
        await asyncio.gather(*(client(i, c, session, t_measure, t_end, out, errors, dropped, tag,
                                      spec.get("grace", 3.0)) for i, c in enumerate(clients)))
        t_done = time.perf_counter()
    cpu1 = os.times()
    seconds = spec["duration"]
    classes = sorted({c.get("class", "all") for c in clients})
    result = {"concurrency": len(clients), "seconds": seconds, "drain_s": round(t_done - t_end, 3),
              "paced_rps": round(sum(c.get("rate") or 0 for c in clients), 1) or None,
              "loadgen_cpu_s": round((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system), 2),
              "total": summarize([s[1:] for s in out], t_measure, seconds, sum(dropped.values())),
              "by_class": {cls: summarize([s[1:] for s in out if s[0] == cls], t_measure, seconds,
                                          dropped.get(cls, 0)) for cls in classes},
              "sample_errors": errors}
    return result


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    print(json.dumps(asyncio.run(run(spec))))


if __name__ == "__main__":
    main()
