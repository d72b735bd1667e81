#!/usr/bin/env python
"""A single queue of 5,000 with free capacity: how fast the live scheduling shell drains it (issue 3).

    python benchmarks/bench_drain.py [--jobs 5000] [--runs 3] [--db-url URL] [--name drain]

What runs is the leader's own code on a real database (SQLite WAL by default, or --db-url): each cycle is
``ops.queueing.decide`` (read queued and holding rows, quotas, run ``scheduler.core.cycle`` with usage
scores, positions, reasons, estimates) then ``queueing.apply`` (admissions written with their placement and
history event, plus every changed position), then each admitted job marked running as ``JobRunner._launched``
does. Process launching is left out: it is the backend's cost, not the queue's (the local backend starts a
supervisor process per instance; Kubernetes creates pods asynchronously). Cycles are spaced as the live loop
spaces them (``scheduler_min_interval`` 0.2 s, ``scheduler_max_share`` 0.15 of the leader's time), counted on
the clock, so the reported rate is what a real leader would sustain; the busy-only rate is reported beside it,
and so is the longest write transaction (admissions are written 500 at a time: API writes wait at most that).

The queue: 5,000 single-node 1-GPU jobs from 100 users in one queue (pool default, one device type), on 1,000
nodes of 8 devices (enough for all). Target: >= 50 admissions/s. Results to benchmarks/results/<name>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from sqlalchemy import func, insert, select  # noqa: E402

from ti_hub.backends.base import NodeCapacity  # noqa: E402
from ti_hub.db import models as m  # noqa: E402
from ti_hub.db.session import drop_tables, make_engine, make_sessionmaker, sqlite_url, upgrade  # noqa: E402
from ti_hub.domain import states as st  # noqa: E402
from ti_hub.ops.jobs import record  # noqa: E402
from ti_hub.scheduler.score import Scores  # noqa: E402
from ti_hub.ops import queueing  # noqa: E402
from ti_hub.service.app import DEFAULT_COMPUTE_QUOTAS  # noqa: E402
from ti_hub.ops.scoring import ScoreKeeper  # noqa: E402

DTYPE = "A100"


def seed(url: str, n: int, users: int) -> None:
    upgrade(url)
    engine = make_engine(url)
    now = dt.datetime.now(dt.timezone.utc)
    rows = [{"owner": f"user{i % users:03d}", "name": f"job-{i:05d}", "display_name": "", "description": "",
             "kind": "single", "strategy": None, "status": st.QUEUED, "reason": "waiting for the scheduler",
             "plan_id": None, "pool": "default", "device_type": DTYPE, "devices_per_instance": 1,
             "cpu_per_instance": 1.0, "memory_mib_per_instance": 4096, "shm_mib": 64, "workers": 1, "ps": 0,
             "image": "python-cpu", "command": "true", "spec": {"env": {}, "volumes": []}, "preemptible": False,
             "priority": 100, "created_at": now, "queued_at": now, "wait_alerted": False} for i in range(n)]
    with engine.begin() as conn:
        conn.execute(insert(m.Job), rows)
        # quotas stay in force (checked at admission) but high enough for a user's 50 queued jobs
        conn.execute(insert(m.Quota), [{"user": "*", "kind": "single", "device_type": "*", "devices": 10_000,
                                        "cpu": 10_000.0, "memory_mib": 1 << 40}])
    engine.dispose()


def mark_running(s, ids: list[int]) -> None:
    for j in s.scalars(select(m.Job).where(m.Job.id.in_(ids))):
        j.backend_state = {"bench": True}
        record(s, j, st.RUNNING, "running")


def drain(url: str, nodes: list[NodeCapacity], min_interval: float, max_share: float) -> dict:
    engine = make_engine(url)
    db = make_sessionmaker(engine)
    keeper = ScoreKeeper(6 * 3600.0)
    keeper.scores = Scores({}, time.time())
    cycles, busy, paced, admitted_total = 0, 0.0, 0.0, 0
    cycle_ms, write_ms = [], []
    while True:
        t0 = time.perf_counter()
        now = time.time()
        inp = queueing.Inputs(nodes, keeper.advance(now), {}, DEFAULT_COMPUTE_QUOTAS, now)
        with db() as s:
            dec = queueing.decide(s, inp)
        for part in queueing.split(dec):  # as the live loop writes it
            w0 = time.perf_counter()
            with db.begin() as s:
                queueing.apply(s, part)
            write_ms.append((time.perf_counter() - w0) * 1000)
        ids = [a.job_id for a in dec.admitted]
        if ids:
            with db.begin() as s:
                mark_running(s, ids)
        keeper.g = keeper.g_of(dec.holdings)
        spent = time.perf_counter() - t0
        cycles += 1
        busy += spent
        cycle_ms.append(spent * 1000)
        admitted_total += len(ids)
        if not ids:
            break
        paced += max(min_interval, spent / max_share)  # the live loop's spacing
    with db() as s:
        left = s.scalar(select(func.count()).select_from(m.Job).where(m.Job.status == st.QUEUED))
    engine.dispose()
    return {"admitted": admitted_total, "left_queued": left, "cycles": cycles, "busy_s": round(busy, 2),
            "paced_s": round(paced, 2), "rate_busy": round(admitted_total / busy, 1),
            "rate_paced": round(admitted_total / paced, 1) if paced else None,
            "cycle_ms_max": round(max(cycle_ms), 1), "cycle_ms_first": round(cycle_ms[0], 1),
            # the longest write transaction: how long API writes may wait behind the scheduler (SQLite)
            "write_ms_max": round(max(write_ms), 1)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--db-url", default="", help="a fresh database per run is made on SQLite; a given URL is "
                                                 "emptied first (its ti tables are dropped and recreated)")
    p.add_argument("--min-interval", type=float, default=0.2)
    p.add_argument("--max-share", type=float, default=0.15)
    p.add_argument("--name", default="drain")
    a = p.parse_args(argv)
    from benchplatform import code_version, machine_info

    nodes = [NodeCapacity(f"node{i:04d}", "default", {DTYPE: list(range(8))}, 64.0, 512 * 1024)
             for i in range(a.nodes)]
    runs = []
    for k in range(a.runs):
        with tempfile.TemporaryDirectory() as tmp:
            url = a.db_url or sqlite_url(Path(tmp) / "ti.sqlite")
            if a.db_url:
                drop_tables(url)
            seed(url, a.jobs, a.users)
            r = drain(url, nodes, a.min_interval, a.max_share)
            print(f"run {k + 1}: {json.dumps(r)}", file=sys.stderr)
            runs.append(r)
    med = statistics.median(r["rate_paced"] for r in runs)
    out = {"code": code_version(), "machine": machine_info(),
           "settings": {"jobs": a.jobs, "users": a.users, "nodes": a.nodes, "devices_per_node": 8,
                        "db": "given URL" if a.db_url else "SQLite (WAL)", "min_interval": a.min_interval,
                        "max_share": a.max_share, "runs": a.runs},
           "runs": runs, "median_rate_paced": med,
           "median_rate_busy": statistics.median(r["rate_busy"] for r in runs),
           "verdicts": {"drain_ge_50_per_s": med >= 50 and all(r["left_queued"] == 0 for r in runs)}}
    dest = HERE / "results" / f"{a.name}.json"
    dest.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("settings", "median_rate_paced", "median_rate_busy", "verdicts")},
                     indent=1))
    print("results:", dest)


if __name__ == "__main__":
    main()
