#!/usr/bin/env python
"""Sampling overhead of the embedded platform's health sampler (issue 19: <= 2 % of one core), in-process.

    python benchmarks/bench_health.py [--runs 5] [--samples 20] [--interval 15] [--name health]

One health sample on the leader is: the LocalHealthSource read (psutil and NVML, in its thread: ``read_now``),
the store of the latest snapshot (``store_latest``, for the API processes), and the cluster accounting
(``account_sample``: held devices, their readings, the hourly rows). Each part's CPU time is measured with
``time.thread_time`` around it in the thread that runs it, on a SQLite database in a temporary directory (as the
service's default), over ``--samples`` samples per run; a run's figure is the median sample, the report the
median of ``--runs`` runs. Overhead = CPU seconds per sample / interval, in percent of one core, at the default
interval (HealthMonitor.interval, 15 s).

Two settings:
* **local**: this machine as the embedded platform sees it: one capacity node with 8 demo devices (no NVIDIA
  driver here: NVML answers nothing, as on a CPU machine), 4 jobs holding 2 devices each;
* **200x8**: 200 machines x 8 GPUs through the TEST SOURCE's pure core (``snapshot_from_doc``: a reading per
  device, utilizations spread 0-99 %), 1,600 devices held by 400 jobs of 100 users (2 jobs per machine), so the
  accounting handles 1,600 bookings a sample and the stored snapshot holds 1,600 device readings. The test
  source's own read (a JSON file) stands in for NVML, whose cost per device on a GPU machine this cannot show.

Results to benchmarks/results/<name>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from ti_hub.backends.base import NodeCapacity  # noqa: E402
from ti_hub.db import models as m  # noqa: E402
from ti_hub.db.session import make_engine, make_sessionmaker, sqlite_url, upgrade  # noqa: E402
from ti_hub.health.monitor import store_latest  # noqa: E402
from ti_hub.health.sources import LocalHealthSource  # noqa: E402
from ti_hub.health.testsource import snapshot_from_doc  # noqa: E402
from ti_hub.tasks.accounting import account_sample  # noqa: E402

THRESHOLD = 5.0


def cpu(fn, *args):
    t = time.thread_time()
    out = fn(*args)
    return time.thread_time() - t, out


def seed_jobs(maker, placements: list[tuple[str, str, list[int]]]) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    with maker.begin() as s:
        s.add_all([m.Job(owner=owner, name=f"job{i}", kind="single", status="running", pool="default",
                         device_type="gpu", devices_per_instance=len(devs), cpu_per_instance=1.0,
                         memory_mib_per_instance=1024, spec={}, created_at=now, started_at=now,
                         placement={"instances": [{"node": node, "devices": devs, "cpu": 1.0, "memory_mib": 1024}]})
                   for i, (owner, node, devs) in enumerate(placements)])


def database(tmp: str, name: str):
    url = sqlite_url(Path(tmp) / f"{name}.sqlite")
    upgrade(url)
    engine = make_engine(url)
    return engine, make_sessionmaker(engine)


def run_local(maker, samples: int, interval: float) -> dict[str, float]:
    node = NodeCapacity(os.uname().nodename, "default", {"gpu": list(range(8))}, 16.0, 65536)
    src = LocalHealthSource()
    src.read_now([node])  # psutil's first cpu_percent() call primes its counter
    parts: dict[str, list[float]] = {"read": [], "store": [], "accounting": []}
    for _ in range(samples):
        time.sleep(0.05)  # psutil's cpu_percent reads since the previous call: leave it a moment
        c_read, snap = cpu(src.read_now, [node])
        with maker.begin() as s:
            c_store, _ = cpu(store_latest, s, snap)
        with maker.begin() as s:
            c_acc, _ = cpu(account_sample, s, snap, interval, [node], THRESHOLD, 35)
        parts["read"].append(c_read)
        parts["store"].append(c_store)
        parts["accounting"].append(c_acc)
    return {k: statistics.median(v) for k, v in parts.items()}


def big_cluster(machines: int = 200, per: int = 8):
    nodes = [NodeCapacity(f"m{i:03d}", "default", {"gpu": list(range(per))}, 64.0, 1 << 20) for i in range(machines)]
    doc = {"devices": [{"node": n.name, "device_type": "gpu", "device": d,
                        "utilization_percent": float((i * per + d) * 37 % 100), "temperature_c": 50.0,
                        "memory_used_bytes": 1 << 30, "memory_total_bytes": 80 << 30}
                       for i, n in enumerate(nodes) for d in range(per)],
           "hosts": [{"machine": n.name, "address": f"10.0.{i // 256}.{i % 256}", "cpu_percent": 20.0}
                     for i, n in enumerate(nodes)]}
    jobs = [(f"user{(2 * i + h) % 100:03d}", n.name, list(range(h * per // 2, (h + 1) * per // 2)))
            for i, n in enumerate(nodes) for h in range(2)]
    return nodes, doc, jobs


def run_big(maker, nodes, doc, samples: int, interval: float) -> dict[str, float]:
    parts: dict[str, list[float]] = {"read (test source)": [], "store": [], "accounting": []}
    text = json.dumps(doc)
    t0 = time.time()
    for k in range(samples):
        c_read, snap = cpu(lambda: snapshot_from_doc(json.loads(text), nodes, t0 + k * interval))
        with maker.begin() as s:
            c_store, _ = cpu(store_latest, s, snap)
        with maker.begin() as s:
            c_acc, _ = cpu(account_sample, s, snap, interval, nodes, THRESHOLD, 35)
        parts["read (test source)"].append(c_read)
        parts["store"].append(c_store)
        parts["accounting"].append(c_acc)
    return {k: statistics.median(v) for k, v in parts.items()}


def summarize(runs: list[dict[str, float]], interval: float) -> dict:
    keys = list(runs[0])
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    total = statistics.median(sum(r.values()) for r in runs)
    return {"cpu_ms_per_sample": {k: round(v * 1000, 3) for k, v in med.items()},
            "cpu_ms_per_sample_total": round(total * 1000, 3),
            "percent_of_one_core": round(100.0 * total / interval, 4),
            "runs_total_ms": [round(sum(r.values()) * 1000, 3) for r in runs]}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--samples", type=int, default=20, help="samples per run")
    p.add_argument("--interval", type=float, default=15.0, help="seconds between samples (HealthMonitor.interval)")
    p.add_argument("--name", default="health")
    a = p.parse_args(argv)
    from benchplatform import code_version, machine_info

    local_runs, big_runs = [], []
    nodes, doc, jobs = big_cluster()
    with tempfile.TemporaryDirectory(prefix="bench-health-") as tmp:
        for r in range(a.runs):
            engine, maker = database(tmp, f"local{r}")
            seed_jobs(maker, [(f"user{j}", os.uname().nodename, [2 * j, 2 * j + 1]) for j in range(4)])
            local_runs.append(run_local(maker, a.samples, a.interval))
            engine.dispose()
            engine, maker = database(tmp, f"big{r}")
            seed_jobs(maker, jobs)
            big_runs.append(run_big(maker, nodes, doc, a.samples, a.interval))
            engine.dispose()
            print(f"run {r + 1}/{a.runs}: local {sum(local_runs[-1].values()) * 1000:.2f} ms, "
                  f"200x8 {sum(big_runs[-1].values()) * 1000:.2f} ms per sample", file=sys.stderr)
    result = {"benchmark": "health sampling overhead", "interval_s": a.interval, "runs": a.runs,
              "samples_per_run": a.samples, "idle_threshold": THRESHOLD,
              "local": summarize(local_runs, a.interval), "200x8": summarize(big_runs, a.interval),
              "machine": machine_info(), "code": code_version(str(ROOT)),
              "loadavg": open("/proc/loadavg").read().split()[:3]}
    out = HERE / "results" / f"{a.name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("local", "200x8")}, indent=2))
    print(f"-> {out.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
