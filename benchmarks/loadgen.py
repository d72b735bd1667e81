#!/usr/bin/env python
"""An HTTP load generator (aiohttp), run as its own process by bench_api.py.

    python benchmarks/loadgen.py spec.json > result.json

spec = {"duration": 15, "warmup": 2, "grace": 3, "series": false, "tag": "b1",
        "clients": [{"class": "user", "method": "GET", "url": "http://127.0.0.1:8000/...", "timeout": 30,
                     "headers": {...}, "rate": null | 7.8, "submit": null | {"plan": ..., ...}}, ...]}

Every client is one coroutine with one keep-alive connection (concurrency = number of clients).
Closed loop (default): a client sends its next request as soon as the previous answer is read; the result
is the server's saturation throughput. Paced ("rate": requests per second for that client): requests are
due at fixed times (start + phase + k / rate) and latency counts from when a request was *due*, not from
when it could be sent (no coordinated omission): if the server falls behind, the waiting shows; requests
still unsent `grace` seconds after the window are counted as "dropped". A client with "submit" POSTs that
body with a fresh unique "name" each time.

Latency samples: requests due (paced) or started (closed loop) inside the measured window, from then to
having read the whole body. Throughput: every completion inside the window / its length. Prints one JSON
document: totals and per client class, latencies in milliseconds ("series": worst latency per 100 ms).
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


def summarize(samples: list[tuple[float, int, float]], t_measure: float, seconds: float, dropped: int = 0,
              completions: list[float] | None = None) -> dict:
    """samples: (latency ms, status, completion time) of the requests due/started in the window.
    Throughput counts every completion inside the window (also of requests due before it)."""
    lat = sorted(s[0] for s in samples)
    statuses: dict[str, int] = {}
    for _, code, _ in samples:
        statuses[str(code)] = statuses.get(str(code), 0) + 1
    ok = sum(n for c, n in statuses.items() if c.startswith("2"))
    ends = completions if completions is not None else [t1 for _, _, t1 in samples]
    done_in_window = sum(1 for t1 in ends if t_measure <= t1 < t_measure + seconds)
    return {"requests": len(samples), "ok": ok, "errors": len(samples) - ok, "dropped": dropped,
            "statuses": statuses, "rps": round(done_in_window / seconds, 1) if seconds else None,
            "p50_ms": _r(percentile(lat, 0.50)), "p95_ms": _r(percentile(lat, 0.95)),
            "p99_ms": _r(percentile(lat, 0.99)), "max_ms": _r(lat[-1] if lat else None),
            "mean_ms": _r(sum(lat) / len(lat) if lat else None)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


async def client(i: int, c: dict, session: aiohttp.ClientSession, t_measure: float, t_end: float,
                 out: list, errors: list, dropped: dict, tag: str, grace: float, done: list) -> None:
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
        done.append((cls, t1))
        if t0 >= t_measure:
            out.append((cls, (t1 - t0) * 1000.0, code, t1))


async def run(spec: dict) -> dict:
    clients = spec["clients"]
    conn = aiohttp.TCPConnector(limit=len(clients) + 4, limit_per_host=0, ttl_dns_cache=3600)
    out: list = []
    errors: list = []
    dropped: dict = {}
    done: list = []
    cpu0 = os.times()
    async with aiohttp.ClientSession(connector=conn) as session:
        t_start = time.perf_counter()
        t_measure = t_start + spec.get("warmup", 2.0)
        t_end = t_measure + spec["duration"]
        tag = spec.get("tag", f"b{int(time.time()) % 100000}")
        await asyncio.gather(*(client(i, c, session, t_measure, t_end, out, errors, dropped, tag,
                                      spec.get("grace", 3.0), done) for i, c in enumerate(clients)))
        t_done = time.perf_counter()
    cpu1 = os.times()
    seconds = spec["duration"]
    classes = sorted({c.get("class", "all") for c in clients})
    result = {"concurrency": len(clients), "seconds": seconds, "drain_s": round(t_done - t_end, 3),
              "paced_rps": round(sum(c.get("rate") or 0 for c in clients), 1) or None,
              "loadgen_cpu_s": round((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system), 2),
              "total": summarize([s[1:] for s in out], t_measure, seconds, sum(dropped.values()),
                                 [t1 for _, t1 in done]),
              "by_class": {cls: summarize([s[1:] for s in out if s[0] == cls], t_measure, seconds,
                                          dropped.get(cls, 0), [t1 for c, t1 in done if c == cls])
                           for cls in classes},
              "sample_errors": errors}
    if spec.get("series"):
        # per 100 ms of due/start time: requests and worst latency (to line stalls up with server events)
        buckets: dict[int, list] = {}
        for _, lat, _, t1 in out:
            b = int((t1 - lat / 1000.0 - t_measure) * 10)
            buckets.setdefault(b, []).append(lat)
        result["series_100ms"] = [[b / 10, len(v), round(max(v), 1)] for b, v in sorted(buckets.items())]
        result["t_measure_wall"] = time.time() - (time.perf_counter() - t_measure)
    return result


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    print(json.dumps(asyncio.run(run(spec))))


if __name__ == "__main__":
    main()
