#!/usr/bin/env python
"""Machine alert rules (issue 19, MON2): one evaluation over 200 machines x 8 GPUs with the default rules.

    python benchmarks/bench_alert_rules.py [--machines 200] [--gpus 8] [--runs 500] [--name alert-rules]

Target (issue 19): one alert evaluation over 200 machines <= 50 ms.

The health window holds one snapshot per HealthMonitor.interval (15 s) over the longest default rule's interval
(300 s): 21 snapshots of 200 host readings and 1,600 device readings each, seeded random figures with a few
machines hot, busy or with ECC errors (so that rules hold and alerts are written). The rules are the five seeded
by migration 0014 (gpu-ecc-errors, gpu-temperature, cpu-busy, memory-full, disk-free-low), all due at once:

  * cold: ``evaluate`` with an empty value cache (every snapshot's per-machine values computed): the first
    evaluation after a start, the worst case;
  * steady: the leader's case: each evaluation brings one new snapshot and the cache holds the others;
  * leader: the whole evaluation as the leader runs it (health/alerting.py): read the enabled rules, evaluate
    (steady), and ``apply`` in one SQLite transaction (open or refresh the alerts of what holds, close the rest).

Prints medians and p99 in ms and writes benchmarks/results/<name>.json with the machine and the settings.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from ti_hub.db.session import make_engine, make_sessionmaker, sqlite_url, upgrade  # noqa: E402
from ti_hub.domain.readings import DeviceReading, FsReading, HostReading, Snapshot  # noqa: E402
from ti_hub.domain.healthrules import ValueCache, evaluate  # noqa: E402
from ti_hub.ops import alertrules  # noqa: E402

INTERVAL = 15.0
WINDOW = 300.0


def snapshot(at: float, machines: int, gpus: int, rng: random.Random) -> Snapshot:
    hosts, devices = [], []
    for i in range(machines):
        name = f"gpu-{i:03d}"
        busy = i % 50 == 7  # 4 machines: CPU and memory past their rules
        hosts.append(HostReading(name, cpu_count=64, cpu_percent=95.0 if busy else rng.uniform(5, 60),
                                 memory_total_bytes=512 << 30,
                                 memory_available_bytes=(40 << 30) if busy else int(rng.uniform(200, 400)) << 30,
                                 filesystems=(FsReading("/", size_bytes=1 << 40,
                                                        avail_bytes=(1 << 40) // (10 if i % 67 == 3 else 2)),)))
        for g in range(gpus):
            hot = i % 40 == 11 and g == 0
            devices.append(DeviceReading(name, "A100", g, name, utilization_percent=rng.uniform(0, 100),
                                         memory_used_bytes=int(rng.uniform(0, 80)) << 30,
                                         memory_total_bytes=80 << 30,
                                         ecc_uncorrectable=2 if (i == 123 and g == 5) else 0,
                                         temperature_c=92.0 if hot else rng.uniform(35, 75),
                                         power_watts=rng.uniform(60, 400)))
    return Snapshot(at, tuple(hosts), tuple(devices))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict:
    ms = [x * 1000 for x in xs]
    return {"runs": len(ms), "median_ms": round(statistics.median(ms), 3), "p99_ms": round(pct(ms, 99), 3),
            "max_ms": round(max(ms), 3)}


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {"cpu": cpu, "cores": len([1 for line in open("/proc/cpuinfo") if line.startswith("processor")]),
            "python": platform.python_version(), "loadavg": open("/proc/loadavg").read().split()[:3],
            "commit": commit.stdout.strip()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--machines", type=int, default=200)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--name", default="alert-rules")
    args = p.parse_args(argv)
    rng = random.Random(1)
    steps = int(WINDOW / INTERVAL) + 1
    total = steps + args.runs
    t0 = time.perf_counter()
    snaps = [snapshot(i * INTERVAL, args.machines, args.gpus, rng) for i in range(min(total, steps + 40))]
    built = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        url = sqlite_url(Path(tmp) / "ti.sqlite")
        upgrade(url)  # seeds the default rules
        engine = make_engine(url)
        maker = make_sessionmaker(engine)
        with maker.begin() as s:
            rules = alertrules.enabled(s)
        specs = [alertrules.spec(r) for r in rules]

        def window(k: int) -> tuple[list[Snapshot], float]:
            # the k-th evaluation: the snapshots (recycled) of the 300 s up to its time
            now = (steps - 1 + k) * INTERVAL
            return [Snapshot(now - (steps - 1 - j) * INTERVAL, snaps[(k + j) % len(snaps)].hosts,
                             snaps[(k + j) % len(snaps)].devices) for j in range(steps)], now

        cold, steady, leader = [], [], []
        held = 0
        for k in range(min(args.runs, 200)):
            w, now = window(k)
            t = time.perf_counter()
            held = len(evaluate(specs, w, now, ValueCache()))
            cold.append(time.perf_counter() - t)
        cache = ValueCache()
        w, now = window(0)
        evaluate(specs, w, now, cache)
        for k in range(1, args.runs + 1):
            w, now = window(k)
            t = time.perf_counter()
            evaluate(specs, w, now, cache)
            cache.forget(now - WINDOW - 1)
            steady.append(time.perf_counter() - t)
        for k in range(args.runs + 1, args.runs + 1 + min(args.runs, 200)):
            w, now = window(k)
            t = time.perf_counter()
            with maker.begin() as s:
                rules = alertrules.enabled(s)
            holdings = evaluate([alertrules.spec(r) for r in rules], w, now, cache)
            cache.forget(now - WINDOW - 1)
            with maker.begin() as s:
                alertrules.apply(s, rules, [r.id for r in rules], holdings, {}, dry_run=True)
            leader.append(time.perf_counter() - t)
        with maker.begin() as s:
            from sqlalchemy import func, select

            from ti_hub.db.monitoring import Alert
            open_alerts = s.scalar(select(func.count()).select_from(Alert)
                                   .where(Alert.cleared_at.is_(None)))
        engine.dispose()

    out = {"settings": {"machines": args.machines, "gpus_per_machine": args.gpus, "snapshots_in_window": steps,
                        "sample_interval_s": INTERVAL, "window_s": WINDOW, "rules": [r.name for r in rules],
                        "holding_per_evaluation": held, "open_alerts_at_end": open_alerts,
                        "snapshot_build_s": round(built, 2)},
           "cold": summary(cold), "steady": summary(steady), "leader": summary(leader), "machine": machine()}
    print(json.dumps(out, indent=2))
    res = HERE / "results" / f"{args.name}.json"
    res.parent.mkdir(exist_ok=True)
    res.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
