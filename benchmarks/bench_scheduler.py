#!/usr/bin/env python
"""The fair queue's pure core under load (issue 3 targets), in-process.

    python benchmarks/bench_scheduler.py [--repeat 30] [--name scheduler]

* cycle: 10,000 pending jobs in ~200 queues (8 pools x 8 device types x 3 kinds), 1,000 users, on the
  Alibaba 2023 node list (1,523 nodes; ../shared/data/alibaba-gpu-2023; node i goes to pool i mod 8), with
  running jobs holding ~90% of every node's devices first, so that most queue heads are blocked and every
  pending job gets a reason: the expensive case. Users are drawn log-normally (a few heavy users), usage
  scores are set for every (user, device type), ~5% of jobs pinned. Target: p99 <= 100 ms.
* scores: one usage-score update for 1,000 users x 8 device types. Target: <= 50 ms.
* drain: one queue of 5,000 single-node jobs (1-8 devices, 1,000 users, usage scores) on 2,000 free 8-device
  nodes (one pool, one type): cycle() is run, the admitted leave the queue and their allocations are held
  (passed as ``held`` to the next cycle, as the live loop does), until the queue is empty. Reports
  admissions/s of the pure core (the live loop's own drain, with its database and launches, is measured
  apart). Target: >= 50 admissions/s.

Seeded (--seed); results to benchmarks/results/<name>.json with the machine and commit. ``--code-root DIR``
runs another tree's ``ti_hub`` (e.g. a copy of the previous commit) for a same-session before/after.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _code_root(argv: list[str]) -> str:
    """--code-root must be known before ti_hub is imported."""
    for i, a in enumerate(argv):
        if a == "--code-root" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--code-root="):
            return a.split("=", 1)[1]
    return str(ROOT)


sys.path.insert(0, str(HERE))
sys.path.insert(0, _code_root(sys.argv[1:]))

import ti_hub  # noqa: E402
from ti_hub.backends.base import NodeCapacity  # noqa: E402
from ti_hub.scheduler.core import cycle  # noqa: E402
from ti_hub.scheduler.model import Allocation, Instance, Request, Running  # noqa: E402
from ti_hub.scheduler.score import Scores, update  # noqa: E402

NODE_LIST = ROOT.parent / "shared" / "data" / "alibaba-gpu-2023" / "openb_node_list_all_node.csv"
POOLS = 8
KINDS = ("workspace", "single", "distributed")


def load_nodes(path: Path) -> list[NodeCapacity]:
    out = []
    with open(path) as f:
        for i, row in enumerate(csv.DictReader(f)):
            gpus = int(row["gpu"])
            devices = {row["model"]: list(range(gpus))} if gpus and row["model"] else {}
            out.append(NodeCapacity(row["sn"], f"pool{i % POOLS}", devices, int(row["cpu_milli"]) / 1000,
                                    int(row["memory_mib"])))
    return out


def busy_cluster(nodes: list[NodeCapacity], rnd: random.Random, fill: float):
    held, running = [], []
    jid = 10_000_000
    for n in nodes:
        for dtype, devs in n.devices.items():
            k = int(len(devs) * fill + rnd.random())
            if k:
                jid += 1
                a = Allocation(n.name, dtype, tuple(devs[:k]), 1.0, 4096)
                held.append(a)
                running.append(Running(jid, f"user{rnd.randrange(1000)}", "single", n.pool, dtype, 100,
                                       rnd.random() < 0.2, float(jid), (a,)))
    return held, running


def pending_jobs(nodes: list[NodeCapacity], rnd: random.Random, n: int, users: int) -> list[Request]:
    dtypes = sorted({d for x in nodes for d in x.devices}) + ["cpu"]
    weights = [rnd.lognormvariate(0, 1.2) for _ in range(users)]
    owners = rnd.choices([f"user{i}" for i in range(users)], weights, k=n)
    out = []
    for i in range(n):
        dtype = rnd.choice(dtypes)
        kind = rnd.choice(KINDS)
        gpus = 0 if dtype == "cpu" else rnd.choice([1, 1, 1, 2, 4, 8])
        count = rnd.choice([2, 2, 4, 8]) if kind == "distributed" else 1
        out.append(Request(i + 1, owners[i], kind, f"pool{rnd.randrange(POOLS)}", dtype,
                           tuple(Instance(gpus, 2.0, 8192) for _ in range(count)), rnd.choice([100] * 9 + [500]),
                           i + 1, pinned_at=float(i) if rnd.random() < 0.05 else None,
                           user_rank=rnd.random(), preemptible=rnd.random() < 0.3))
    return out


def drain(rnd: random.Random, n: int, users: int, nodes_n: int) -> dict:
    """Admit a queue of ``n`` until it is empty, holding every admission's allocations."""
    nodes = [NodeCapacity(f"d{i:05d}", "pool0", {"A100": list(range(8))}, 96.0, 1 << 20) for i in range(nodes_n)]
    owners = [f"user{rnd.randrange(users)}" for _ in range(n)]
    queue = [Request(i + 1, owners[i], "single", "pool0", "A100", (Instance(rnd.choice([1, 1, 1, 2, 4, 8]), 2.0,
                                                                             8192),), order=i + 1)
             for i in range(n)]
    scores = Scores({(f"user{u}", "A100"): rnd.uniform(0, 8) for u in range(users)}, 0.0)
    held: list[Allocation] = []
    cycles, t0 = 0, time.perf_counter()
    while queue:
        res = cycle(nodes, held, queue, scores=scores, now=1e6)
        cycles += 1
        if not res.admitted:
            raise SystemExit(f"drain stuck with {len(queue)} queued: {res.pending[0].reason}")
        done = {a.job_id for a in res.admitted}
        held.extend(x for a in res.admitted for x in a.placement)
        queue = [r for r in queue if r.job_id not in done]
    wall = time.perf_counter() - t0
    return {"seconds": wall, "cycles": cycles, "admissions_per_s": n / wall}


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--pending", type=int, default=10_000)
    p.add_argument("--users", type=int, default=1_000)
    p.add_argument("--fill", type=float, default=0.9, help="share of every node's devices held by running jobs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--name", default="scheduler")
    p.add_argument("--drain", type=int, default=5_000, help="jobs in the drain phase's queue (0: skip)")
    p.add_argument("--drain-repeat", type=int, default=5)
    p.add_argument("--code-root", default=str(ROOT), help="import ti_hub from here (default: this checkout)")
    a = p.parse_args(argv)
    from benchplatform import code_version, machine_info

    rnd = random.Random(a.seed)
    nodes = load_nodes(NODE_LIST)
    held, running = busy_cluster(nodes, rnd, a.fill)
    reqs = pending_jobs(nodes, rnd, a.pending, a.users)
    dtypes = sorted({r.device_type for r in reqs})
    scores = Scores({(f"user{u}", d): rnd.uniform(0, 8) for u in range(a.users) for d in dtypes}, 0.0)
    queues = len({r.queue for r in reqs})

    times, res = [], None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        res = cycle(nodes, held, reqs, running=running, scores=scores, now=1e6)
        times.append((time.perf_counter() - t0) * 1000)
    held_now = {(f"user{u}", d): float(rnd.randrange(9)) for u in range(a.users) for d in dtypes}
    stimes = []
    for k in range(a.repeat):
        t0 = time.perf_counter()
        update(scores, held_now, 60.0 * (k + 1))
        stimes.append((time.perf_counter() - t0) * 1000)
    drains = [drain(random.Random(a.seed + k), a.drain, a.users, 2_000) for k in range(a.drain_repeat)] \
        if a.drain else []
    out = {
        "code": code_version(), "code_root": a.code_root, "ti_hub_measured": ti_hub.__file__,
        "machine": machine_info(),
        "settings": {"nodes": len(nodes), "pending": len(reqs), "queues": queues, "users": a.users,
                     "device_types": len(dtypes), "fill": a.fill, "running_jobs": len(running),
                     "repeat": a.repeat, "seed": a.seed},
        "cycle_ms": {"p50": round(statistics.median(times), 1), "p99": round(pct(times, 0.99), 1),
                     "max": round(max(times), 1), "runs": [round(t, 1) for t in times]},
        "cycle_outcome": {"admitted": len(res.admitted), "pending": len(res.pending),
                          "preempted": len(res.preempted)},
        "score_update_ms": {"entries": len(scores.values), "p50": round(statistics.median(stimes), 2),
                            "p99": round(pct(stimes, 0.99), 2)},
        "drain": {"jobs": a.drain, "nodes": 2_000,
                  "admissions_per_s_median": round(statistics.median(d["admissions_per_s"] for d in drains)),
                  "cycles": [d["cycles"] for d in drains],
                  "seconds": [round(d["seconds"], 3) for d in drains]} if drains else None,
    }
    out["verdicts"] = {"cycle_p99_le_100ms": out["cycle_ms"]["p99"] <= 100,
                       "score_update_le_50ms": out["score_update_ms"]["p99"] <= 50}
    if drains:
        out["verdicts"]["drain_ge_50_per_s"] = out["drain"]["admissions_per_s_median"] >= 50
    dest = HERE / "results" / f"{a.name}.json"
    dest.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("settings", "cycle_outcome", "score_update_ms", "drain", "verdicts")},
                     indent=1))
    print("cycle ms: p50", out["cycle_ms"]["p50"], "p99", out["cycle_ms"]["p99"], "max", out["cycle_ms"]["max"])
    print("results:", dest)


if __name__ == "__main__":
    main()
