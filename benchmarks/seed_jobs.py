#!/usr/bin/env python
"""Fill a TiHub database with a realistic history: 10,000 users and 200,000 jobs (defaults).

    python benchmarks/seed_jobs.py --data-dir /tmp/tihub-bench/data          # SQLite: <data-dir>/ti.sqlite
    python benchmarks/seed_jobs.py --db-url postgresql+psycopg://...        # any SQLAlchemy URL

Seed *before* the ti service first starts on that database: the schema is created with
``ti_hub.db.session.upgrade`` (Alembic, as the service does), so the service's own migration at start is a
no-op, and the default plans and images are created here (the service only adds them when none exist).

The mix (all deterministic for a given --seed):
  * users ``user00001`` .. ``user10000`` in ti_users; job owners follow a log-normal skew (most users have
    a handful to a few dozen jobs, a few have hundreds); ``owner_counts()`` lets a benchmark pick users
    with a given number of jobs;
  * kinds: 72% single, 14% distributed (allreduce or ps), 14% workspace;
  * device types: cpu, A100-SXM4-80GB, V100-SXM2-32GB, demo-gpu;
  * statuses: mostly completed / failed / killed / error (jobs) and stopped (workspaces); ``--queued``
    queued and ``--running`` running rows (0.5% each by default), a few paused;
  * running rows hold placements: most on remote GPU nodes, and enough CPU jobs on *this* machine's node
    (the LocalBackend's node, named after the host name unless --local-node says otherwise) to fill it,
    so that the scheduler of the embedded platform admits nothing: seeded queued jobs and jobs submitted
    by a benchmark stay queued (a busy cluster) instead of being started as local processes. The fillers
    are never preemptible (the fair queue would preempt them for a benchmark's jobs and start real
    processes), and the benchmark's platform offers one CPU per core (benchmarks/hub_config_bench.py),
    which they fill (seed version 3);
  * 3-4 job events per job (created, queued, [running], final) unless --no-events.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import itertools
import os
import random
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import func, insert, select  # noqa: E402

from ti_hub.db import models as m  # noqa: E402
from ti_hub.db.session import make_engine, sqlite_url, upgrade  # noqa: E402

DEVICE_TYPES = [  # (device type, weight, plan name, devices per instance choices, cpu, memory)
    ("cpu", 40, "cpu-small", [0], 1.0, 4096),
    ("A100-SXM4-80GB", 30, "a100-x8", [1, 2, 4, 8], 8.0, 64 * 1024),
    ("V100-SXM2-32GB", 15, "v100-x4", [1, 2, 4], 6.0, 48 * 1024),
    ("demo-gpu", 15, "demo-gpu-1", [1], 1.0, 4096),
]
EXTRA_PLANS = [
    {"name": "a100-x8", "description": "up to 8 A100", "kinds": ["workspace", "single", "distributed"],
     "device_type": "A100-SXM4-80GB", "device_count": 8, "cpu": 8, "memory_mib": 64 * 1024},
    {"name": "v100-x4", "description": "up to 4 V100", "kinds": ["workspace", "single", "distributed"],
     "device_type": "V100-SXM2-32GB", "device_count": 4, "cpu": 6, "memory_mib": 48 * 1024},
]
FINAL_JOB = [("completed", 62), ("failed", 21), ("killed", 14), ("error", 3)]
COMMANDS = [
    "python train.py --epochs 90 --lr 0.1 --batch-size 256",
    "torchrun --nproc_per_node=8 train.py --config configs/resnet50.yaml",
    "python -m finetune --model llama-7b --data /mnt/data/sft.jsonl --out /mnt/ckpt",
    "bash run.sh",
    "python eval.py --checkpoint /mnt/ckpt/last.pt",
]
IMAGES = ["python-cpu", "pytorch-gpu", "registry.example.com/team/trainer:2.3", "quay.io/jupyter/pytorch-notebook"]


def user_name(i: int) -> str:
    return f"user{i:05d}"


def picker(rng: random.Random, pairs):
    """A fast weighted choice (random.choices re-sums the weights at every call)."""
    names, weights = zip(*pairs)
    cum = list(itertools.accumulate(weights))
    total, rand = cum[-1], rng.random
    return lambda: names[bisect.bisect_right(cum, rand() * total)]


def build_rows(n_users: int, n_jobs: int, n_queued: int, n_running: int, seed: int, local_node: str,
               local_cpu: float, events: bool, plan_ids: dict[str, int]):
    rng = random.Random(seed)
    # log-normal owner skew, normalised to n_jobs
    weights = [rng.lognormvariate(0.0, 0.9) for _ in range(n_users)]
    cum, acc = [], 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    owners = rng.choices(range(1, n_users + 1), cum_weights=cum, k=n_jobs)

    # which rows are active: spread over the newest 5% of ids (active work is recent)
    recent = list(range(int(n_jobs * 0.95), n_jobs))
    rng.shuffle(recent)
    queued = set(recent[:n_queued])
    running = set(recent[n_queued:n_queued + n_running])
    paused = set(recent[n_queued + n_running:n_queued + n_running + n_jobs // 2000])

    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    start = now - dt.timedelta(days=365)
    span = (now - start).total_seconds()
    local_cpu_left = local_cpu + 1  # over-fill by one core: nothing new fits on this node
    per_owner: dict[int, int] = {}
    job_rows, event_rows = [], []
    by_dtype = {d[0]: d for d in DEVICE_TYPES}
    rand = rng.random

    def randint(a: int, b: int) -> int:  # random.randint is slow; this is plenty random for a seed
        return a + int(rand() * (b - a + 1))

    def choice(seq):
        return seq[int(rand() * len(seq))]
    pick_kind = picker(rng, [("single", 72), ("distributed", 14), ("workspace", 14)])
    pick_dtype = picker(rng, [(d[0], d[1]) for d in DEVICE_TYPES])
    pick_strategy = picker(rng, [("allreduce", 80), ("ps", 20)])
    pick_final = picker(rng, FINAL_JOB)
    for idx in range(n_jobs):
        job_id = idx + 1
        owner_i = owners[idx]
        per_owner[owner_i] = per_owner.get(owner_i, 0) + 1
        owner = user_name(owner_i)
        kind = pick_kind()
        dtype = pick_dtype()
        _, _, plan, dev_choices, cpu, mem = by_dtype[dtype]
        devs = choice(dev_choices)
        strategy, workers, ps = None, 1, 0
        if kind == "distributed":
            strategy = pick_strategy()
            workers = choice([2, 2, 4, 4, 8, 16])
            ps = choice([1, 2]) if strategy == "ps" else 0
        created = start + dt.timedelta(seconds=span * idx / n_jobs + rand() * 30)
        queued_at = created + dt.timedelta(seconds=randint(0, 2))
        started_at = finished_at = exit_code = placement = backend_state = None
        filler = False
        instances = workers + ps
        if idx in queued:
            status, reason = "queued", f"waiting for {instances} x {devs} x {dtype} in pool default"
        elif idx in paused and kind != "workspace":
            status, reason = "paused", "paused: resources released; resume to requeue"
            started_at = queued_at + dt.timedelta(seconds=randint(1, 3600))
            finished_at = started_at + dt.timedelta(seconds=randint(60, 36000))
        elif idx in running or idx in paused:
            status, reason = "running", "running"
            started_at = queued_at + dt.timedelta(seconds=randint(1, 3600))
            if local_cpu_left > 0 and kind != "workspace":
                # fill this machine's node with CPU jobs so that the embedded scheduler admits nothing
                dtype, devs, cpu, mem, plan = "cpu", 0, 1.0, 4096, "cpu-small"
                kind, strategy, workers, ps, instances = "single", None, 1, 0, 1
                local_cpu_left -= cpu
                node = local_node
                filler = True
            else:
                node = f"gpu-node-{randint(1, 64):02d}"
            placement = {"instances": [{"node": node, "devices": list(range(devs)), "cpu": cpu,
                                        "memory_mib": mem} for _ in range(instances)]}
        else:
            started_at = queued_at + dt.timedelta(seconds=randint(1, 7200))
            finished_at = started_at + dt.timedelta(seconds=int(rng.expovariate(1 / 7200)) + 5)
            if kind == "workspace":
                status, reason = "stopped", "stopped by the user"
            else:
                status = pick_final()
                exit_code = {"completed": 0, "failed": choice([1, 2, 137]), "killed": -15,
                             "error": None}[status]
                reason = {"completed": "completed", "failed": f"instance 0 exited with {exit_code}",
                          "killed": "killed", "error": "could not start: image pull failed"}[status]
            node = f"gpu-node-{randint(1, 64):02d}" if dtype != "cpu" else f"cpu-node-{randint(1, 16):02d}"
            placement = {"instances": [{"node": node, "devices": list(range(devs)), "cpu": cpu,
                                        "memory_mib": mem} for _ in range(instances)]}
            backend_state = {"instances": [{"pid": randint(1000, 99999), "dir": f"jobs/{job_id}"}
                                           for _ in range(instances)]}
        if kind == "workspace":
            command, image = "", "python-cpu" if dtype == "cpu" else "pytorch-gpu"
            endpoints = ["jupyter"] + (["ssh"] if rand() < 0.3 else [])
        else:
            command, image = choice(COMMANDS), choice(IMAGES)
            endpoints = ["tensorboard"] if rand() < 0.2 else []
        image_addr = {"python-cpu": "quay.io/jupyter/scipy-notebook:latest",
                      "pytorch-gpu": "quay.io/jupyter/pytorch-notebook:cuda12-latest"}.get(image, image)
        spec = {"env": {"WANDB_PROJECT": f"proj-{owner_i % 97}", "SEED": str(idx % 1000)} if rand() < 0.6
                else {}, "volumes": [], "ports": [], "endpoints": endpoints, "warnings": [], "on_overrun": "alert"}
        if rand() < 0.25:
            spec["estimated_duration"] = choice([3600, 7200, 86400])
        name = f"{'ws' if kind == 'workspace' else 'job'}-{per_owner[owner_i]:04d}"
        job_rows.append({
            "id": job_id, "owner": owner, "name": name, "display_name": "", "description":
                "" if rand() < 0.7 else f"experiment {idx % 500}: sweep lr / batch size",
            "kind": kind, "strategy": strategy, "status": status, "reason": reason, "plan_id": plan_ids.get(plan),
            "pool": "default", "device_type": dtype, "devices_per_instance": devs, "cpu_per_instance": cpu,
            "memory_mib_per_instance": mem, "shm_mib": 64, "workers": workers, "ps": ps, "image": image_addr,
            "command": command, "spec": spec, "preemptible": rand() < 0.1 and not filler, "priority": 100,
            "placement": placement, "backend_state": backend_state, "exit_code": exit_code, "created_at": created,
            "queued_at": queued_at, "started_at": started_at, "finished_at": finished_at,
        })
        if events:
            event_rows.append({"job_id": job_id, "at": created, "status": "created", "message": "submitted"})
            event_rows.append({"job_id": job_id, "at": queued_at, "status": "queued",
                               "message": "waiting for the scheduler"})
            if started_at is not None:
                event_rows.append({"job_id": job_id, "at": started_at, "status": "running", "message": "running"})
            if finished_at is not None:
                event_rows.append({"job_id": job_id, "at": finished_at, "status": status, "message": reason})
    return job_rows, event_rows


def bulk_insert(conn, table, rows: list[dict], chunk: int = 50_000) -> None:
    """Core insert; on SQLite straight through the driver's executemany with SQLAlchemy's own bind
    processors (same stored values as the ORM writes, a few times faster than the generic path)."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        for i in range(0, len(rows), chunk):
            conn.execute(insert(table), rows[i:i + chunk])
        return
    from sqlalchemy import JSON

    cols = [c for c in table.columns if c.name in rows[0]]
    procs = [c.type._cached_bind_processor(conn.dialect) for c in cols]
    # a JSON column the application never set is SQL NULL (the ORM leaves it out of its INSERT); the JSON
    # type's processor would store None as the JSON text 'null', which `column IS NOT NULL` does not exclude
    procs = [(lambda f: (lambda v: None if v is None else f(v)))(p) if p and isinstance(c.type, JSON) else p
             for c, p in zip(cols, procs)]
    names = [c.name for c in cols]
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    pairs = list(zip(names, procs))
    data = [tuple(p(r[n]) if p else r[n] for n, p in pairs) for r in rows]
    conn.exec_driver_sql(sql, data)


def check(engine, n_jobs: int) -> None:
    """Read a few rows back through the ORM, as the service will."""
    from sqlalchemy.orm import Session

    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(m.Job)) == n_jobs
        for job in s.scalars(select(m.Job).order_by(m.Job.id.desc()).limit(3)):
            assert job.created_at.tzinfo is not None and isinstance(job.spec, dict), job


def seed(url: str, n_users: int = 10_000, n_jobs: int = 200_000, n_queued: int | None = None,
         n_running: int | None = None, seed_value: int = 42, local_node: str | None = None,
         local_cpu: float | None = None, events: bool = True, log=print) -> dict:
    t0 = time.monotonic()
    upgrade(url)
    engine = make_engine(url)
    n_queued = n_jobs // 200 if n_queued is None else n_queued
    n_running = n_jobs // 200 if n_running is None else n_running
    local_node = local_node or socket.gethostname()
    local_cpu = float(local_cpu or os.cpu_count() or 1)
    from ti_hub.service.app import DEFAULT_IMAGES, DEFAULT_PLANS

    now = dt.datetime.now(dt.timezone.utc)
    with engine.begin() as conn:
        if conn.scalar(select(func.count()).select_from(m.Job)):
            raise SystemExit(f"{url} already holds jobs; seed an empty database")
        for p in [*DEFAULT_PLANS, *EXTRA_PLANS]:
            conn.execute(insert(m.Plan), [{"created_at": now, "shm_mib": 64, "rdma": False, "pool": "default",
                                           "description": "", **p}])
        conn.execute(insert(m.Image), [{"created_at": now, "version": "", "description": "", "size_mib": None,
                                        **img} for img in DEFAULT_IMAGES])
        plan_ids = {name: pid for pid, name in conn.execute(select(m.Plan.id, m.Plan.name))}
    t_build = time.monotonic()
    jobs, events_rows = build_rows(n_users, n_jobs, n_queued, n_running, seed_value, local_node, local_cpu,
                                   events, plan_ids)
    log(f"built {len(jobs)} jobs and {len(events_rows)} events in {time.monotonic() - t_build:.1f} s")
    t_ins = time.monotonic()
    created = now - dt.timedelta(days=400)
    users = [{"name": user_name(i), "created_at": created, "quota_version": 0} for i in range(1, n_users + 1)]
    with engine.begin() as conn:
        for model, rows in ((m.User, users), (m.Job, jobs), (m.JobEvent, events_rows)):
            bulk_insert(conn, model.__table__, rows)
    log(f"inserted in {time.monotonic() - t_ins:.1f} s")
    if url.startswith("sqlite"):
        raw = engine.raw_connection()
        try:
            raw.driver_connection.execute("ANALYZE")
            raw.driver_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            raw.close()
    check(engine, len(jobs))
    engine.dispose()
    stats = {"url": url, "users": n_users, "jobs": len(jobs), "events": len(events_rows), "queued": n_queued,
             "running": n_running, "local_node": local_node, "seconds": round(time.monotonic() - t0, 2)}
    log(f"seeded {stats}")
    return stats


def owner_counts(url: str) -> dict[str, int]:
    """Jobs per owner in a seeded database (a benchmark picks its users from this)."""
    engine = make_engine(url)
    with engine.connect() as conn:
        out = dict(conn.execute(select(m.Job.owner, func.count()).group_by(m.Job.owner)).all())
    engine.dispose()
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", help="seed <data-dir>/ti.sqlite (created)")
    where.add_argument("--db-url", help="SQLAlchemy URL of an empty database")
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--queued", type=int, default=None, help="queued rows (default: 0.5%% of jobs)")
    p.add_argument("--running", type=int, default=None, help="running rows (default: 0.5%% of jobs)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--local-node", default=None, help="the LocalBackend node name (default: host name)")
    p.add_argument("--no-events", action="store_true", help="do not create job events")
    a = p.parse_args(argv)
    if a.data_dir:
        Path(a.data_dir).mkdir(parents=True, exist_ok=True)
        url = sqlite_url(Path(a.data_dir) / "ti.sqlite")
    else:
        url = a.db_url
    seed(url, a.users, a.jobs, a.queued, a.running, a.seed, a.local_node, None, not a.no_events)


if __name__ == "__main__":
    main()
