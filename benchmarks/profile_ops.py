#!/usr/bin/env python
"""In-process cost of the operations behind the benchmarked routes, piece by piece, on a seeded database.

    python benchmarks/profile_ops.py [--db PATH] [--name ops]

No server, no HTTP: one thread calls the same functions the ti service runs in its worker threads, so the
figures are CPU (and SQLite) time per call. Alongside each piece it times the cheaper variant a fix would
use (same output), so that a proposed change comes with a number. Results: benchmarks/results/<name>.json.
Each figure is the median of --repeat batches.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from sqlalchemy import func, select  # noqa: E402
from sqlalchemy.orm import defer  # noqa: E402

from ti_hub.api.base import _default  # noqa: E402
from ti_hub.db import models as m  # noqa: E402
from ti_hub.db.session import make_engine, make_sessionmaker, sqlite_url  # noqa: E402
from ti_hub.domain import states as st  # noqa: E402
from ti_hub.domain.actor import Actor  # noqa: E402
from ti_hub.ops import jobs, quotas  # noqa: E402
from ti_hub.ops.common import iso, page  # noqa: E402
from ti_hub.service import loop as loop_mod  # noqa: E402
from ti_hub.service.app import DEFAULT_COMPUTE_QUOTAS  # noqa: E402
from ti_hub.ops.settings import OpsSettings  # noqa: E402
from ti_hub.scheduler import core  # noqa: E402


def timeit(fn, n: int, repeat: int) -> float:
    """Median ms per call over `repeat` batches of n calls."""
    fn()
    batches = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t0) / n * 1000)
    return round(statistics.median(batches), 3)


COLS = [c for c in m.Job.__table__.columns if c.name != "backend_state"]


def render_row(r) -> dict:
    """jobs.render() from a Core row (what the list needs, no ORM object)."""
    spec = r.spec
    return {
        "id": r.id, "name": r.name, "display_name": r.display_name, "owner": r.owner, "kind": r.kind,
        "strategy": r.strategy, "status": r.status, "reason": r.reason, "plan_id": r.plan_id, "pool": r.pool,
        "device_type": r.device_type, "devices_per_instance": r.devices_per_instance,
        "cpu_per_instance": r.cpu_per_instance, "memory_mib_per_instance": r.memory_mib_per_instance,
        "workers": r.workers, "ps": r.ps, "instances": r.workers + r.ps, "shm_mib": r.shm_mib, "image": r.image,
        "command": r.command, "description": r.description, "env": spec.get("env", {}),
        "volumes": spec.get("volumes", []), "ports": spec.get("ports", []), "endpoints": spec.get("endpoints", []),
        "estimated_duration": spec.get("estimated_duration"), "warnings": spec.get("warnings", []),
        "preemptible": r.preemptible, "priority": r.priority, "exit_code": r.exit_code, "placement": r.placement,
        "created_at": iso(r.created_at), "queued_at": iso(r.queued_at), "started_at": iso(r.started_at),
        "finished_at": iso(r.finished_at),
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default=None, help="a seeded ti.sqlite (default: bench_api's template in --workdir)")
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "tihub-bench"))
    p.add_argument("--name", default="ops")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    src = Path(a.db) if a.db else Path(a.workdir) / "template-10000-200000-None-None" / "ti.sqlite"
    if not src.exists():
        raise SystemExit(f"{src} does not exist: run benchmarks/bench_api.py once or give --db")
    tmp = Path(tempfile.mkdtemp(prefix="tihub-ops-"))
    db = tmp / "ti.sqlite"
    shutil.copyfile(src, db)
    url = sqlite_url(db)
    engine = make_engine(url)
    sm = make_sessionmaker(engine)
    R = a.repeat
    out: dict = {"db": str(src)}

    with sm.begin() as s:
        counts = dict(s.execute(select(m.Job.owner, func.count()).group_by(m.Job.owner)).all())
    users = sorted(u for u, c in counts.items() if 24 <= c <= 60)[:60]
    out["list_user_jobs_median"] = statistics.median(counts[u] for u in users)
    actors = [Actor(name=u, scopes=frozenset({"custom:ti:jobs:submit"})) for u in users]
    admin = Actor(name="admin", scopes=frozenset({"custom:ti:jobs:view-all", "custom:ti:jobs:manage-all"}))
    it = iter(range(10 ** 9))

    def actor():
        return actors[next(it) % len(actors)]

    def txn(fn, *args):
        with sm.begin() as s:
            return fn(s, *args)

    # ---- GET /jobs?limit=50 (a user with a few dozen jobs) ----------------------------------------
    lj = {}
    lj["list_jobs (as served: ORM, BEGIN IMMEDIATE)"] = timeit(lambda: txn(jobs.list_jobs, actor(), {"limit": "50"}),
                                                              200, R)
    sample = txn(jobs.list_jobs, actors[0], {"limit": "50"})
    lj["json.dumps of the response"] = timeit(lambda: json.dumps(sample, allow_nan=False, default=_default), 500, R)
    try:
        import orjson

        lj["orjson.dumps of the response (alternative)"] = timeit(lambda: orjson.dumps(sample), 500, R)
    except ImportError:
        pass

    def parts(s, act):
        stmt = select(m.Job).where(m.Job.owner == act.name).order_by(m.Job.id.desc())
        return stmt

    lj["  of which COUNT(*) for total"] = timeit(lambda: txn(lambda s: s.scalar(select(func.count()).select_from(
        parts(s, actor()).order_by(None).subquery()))), 500, R)
    lj["  of which SELECT + ORM objects (50 max)"] = timeit(lambda: txn(lambda s: s.scalars(
        parts(s, actor()).limit(50)).all()), 200, R)
    rows = txn(lambda s: s.scalars(parts(s, actors[0]).limit(50)).all())
    lj["  of which render() (per response)"] = timeit(lambda: [jobs.render(r) for r in rows], 500, R)
    lj["  of which empty transaction (BEGIN IMMEDIATE/COMMIT, session)"] = timeit(lambda: txn(lambda s: None), 1000, R)

    def core_list(s, act):
        stmt = select(*COLS).where(m.Job.owner == act.name).order_by(m.Job.id.desc()).limit(50)
        total = s.scalar(select(func.count()).select_from(m.Job).where(m.Job.owner == act.name))
        return {"items": [render_row(r) for r in s.execute(stmt)], "total": total, "limit": 50, "offset": 0}

    assert core_list_equal(txn(core_list, actors[0]), sample), "core variant renders differently"
    lj["alternative: Core rows (no ORM objects, no backend_state) + same render"] = timeit(
        lambda: txn(core_list, actor()), 200, R)

    def deferred_list(s, act):
        stmt = select(m.Job).options(defer(m.Job.backend_state)).where(m.Job.owner == act.name) \
            .order_by(m.Job.id.desc())
        return page(s, stmt, 50, 0, jobs.render)

    lj["alternative: ORM with defer(backend_state)"] = timeit(lambda: txn(deferred_list, actor()), 200, R)
    out["GET /jobs?limit=50 (user), ms per call"] = lj

    # ---- GET /jobs?limit=50&all=1 (admin) -----------------------------------------------------------
    la = {}
    la["list_jobs all=1 (as served)"] = timeit(lambda: txn(jobs.list_jobs, admin, {"limit": "50", "all": "1"}), 30, R)
    la["  of which COUNT(*) over all jobs"] = timeit(lambda: txn(lambda s: s.scalar(
        select(func.count()).select_from(select(m.Job).subquery()))), 30, R)
    la["  COUNT(*) straight on the table (no subquery)"] = timeit(lambda: txn(lambda s: s.scalar(
        select(func.count()).select_from(m.Job))), 30, R)
    la["  of which SELECT + ORM objects + render (50 rows)"] = timeit(lambda: txn(lambda s: [jobs.render(j) for j in s.scalars(
        select(m.Job).order_by(m.Job.id.desc()).limit(50))]), 30, R)
    out["GET /jobs?limit=50&all=1 (admin), ms per call"] = la

    # ---- POST /jobs (submit with quota check) -------------------------------------------------------
    settings = OpsSettings(dict(DEFAULT_COMPUTE_QUOTAS), {}, {}, 64, 16)
    settings.nodes = [loop_mod.NodeCapacity(name="bench", pool="default", devices={}, cpu=2.0, memory_mib=16000,
                                            labels={})]
    body = {"plan": "cpu-small", "image": "python-cpu", "command": "true"}
    subs = [Actor(name=u, scopes=frozenset({"custom:ti:jobs:submit"})) for u in users[:8]]
    with sm.begin() as s:
        for u in users[:8]:
            s.add(m.Quota(user=u, kind="single", device_type="cpu", devices=0, cpu=1e6, memory_mib=1 << 40))
    k = iter(range(10 ** 9))

    def submit():
        i = next(k)
        return txn(jobs.submit, subs[i % 8], {**body, "name": f"ops-{i}"}, settings)

    sb = {"submit (as served, incl. quota check, insert, 2 events, queue position)": timeit(submit, 100, R)}
    sb["  of which quota check (limit + usage)"] = timeit(lambda: txn(lambda s: quotas.check_compute(
        s, users[0], "single", "cpu", quotas.Limits(0, 1, 4096), settings.compute_defaults)), 300, R)
    last = txn(lambda s: s.scalars(select(m.Job).order_by(m.Job.id.desc()).limit(1)).one())
    sb["  of which queue_position (COUNT over the queue)"] = timeit(lambda: txn(lambda s: jobs.queue_position(
        s, s.get(m.Job, last.id))), 300, R)
    out["POST /jobs, ms per call"] = sb

    # ---- the scheduler loop's cycle (runs every second and after every submission) ----------------
    sc = {}
    with sm.begin() as s:
        n_q = s.scalar(select(func.count()).select_from(m.Job).where(m.Job.status == st.QUEUED))
        n_h = s.scalar(select(func.count()).select_from(m.Job).where(m.Job.status.in_(st.HOLDING)))
    sc["queued rows"], sc["holding rows"] = n_q, n_h

    def load(s):
        holding = s.scalars(select(m.Job).where(m.Job.status.in_(st.HOLDING))).all()
        queued = s.scalars(select(m.Job).where(m.Job.status == st.QUEUED)).all()
        return holding, queued

    sc["load holding + queued as ORM objects (ms)"] = timeit(lambda: txn(load), 3, R)
    holding, queued = txn(load)
    import socket

    nodes = [loop_mod.NodeCapacity(name=socket.gethostname(), pool="default", devices={"demo-gpu": [0, 1, 2, 3]},
                                   cpu=float(os.cpu_count()), memory_mib=16000, labels={})]
    result = core.cycle(nodes, loop_mod.allocations_of(holding), loop_mod.requests_of(queued))
    sc["core.cycle (pure scheduling, ms)"] = timeit(lambda: core.cycle(nodes, loop_mod.allocations_of(holding),
                                                                        loop_mod.requests_of(queued)), 3, R)
    reasons = {pnd.job_id: pnd.reason for pnd in result.pending}
    txn(loop_mod.JobRunner._record_decisions, [], reasons)  # first time writes the reasons
    sc["_record_decisions, nothing changed (one SELECT per pending job, under the write lock) (ms)"] = timeit(
        lambda: txn(loop_mod.JobRunner._record_decisions, [], reasons), 3, R)
    sc["watch_running's load of running rows (ms)"] = timeit(lambda: txn(lambda s: s.scalars(select(m.Job).where(
        m.Job.kind != "workspace", m.Job.status == st.RUNNING)).all()), 3, R)
    ids = list(reasons)

    def record_bulk(s):  # the same check in one query: only rows whose reason differs are touched
        cur = dict(s.execute(select(m.Job.id, m.Job.reason).where(m.Job.id.in_(ids))).all())
        return [i for i in ids if cur.get(i) != reasons[i]]

    sc["alternative: _record_decisions as one SELECT id, reason WHERE id IN (...) (ms)"] = timeit(
        lambda: txn(record_bulk), 3, R)
    out["scheduler cycle pieces"] = sc
    engine.dispose()
    shutil.rmtree(tmp, ignore_errors=True)

    res_path = HERE / "results" / f"{a.name}.json"
    res_path.parent.mkdir(exist_ok=True)
    res_path.write_text(json.dumps(out, indent=1))
    for section, vals in out.items():
        if isinstance(vals, dict):
            print(section)
            for k2, v in vals.items():
                print(f"  {v:>10}  {k2}")
        else:
            print(f"{section}: {vals}")
    print(f"results: {res_path}")


def core_list_equal(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True, default=_default) == json.dumps(b, sort_keys=True, default=_default)


if __name__ == "__main__":
    main()
