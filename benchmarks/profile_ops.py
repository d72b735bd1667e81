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

from ti_hub.handlers.refusals import json_default as _default  # noqa: E402
from ti_hub.db import models as m  # noqa: E402
from ti_hub.db.session import make_engine, make_sessionmaker, sqlite_url  # noqa: E402
from ti_hub.domain import states as st  # noqa: E402
from ti_hub.domain.actor import Actor  # noqa: E402
from ti_hub.ops import jobs, quotas  # noqa: E402
from ti_hub.ops.common import iso, page  # noqa: E402
from ti_hub.ops.settings import OpsSettings  # noqa: E402
from ti_hub.service import loop as loop_mod  # noqa: E402
from ti_hub.service.app import DEFAULT_COMPUTE_QUOTAS  # noqa: E402


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
    from benchplatform import code_version, machine_info

    out: dict = {"db": str(src), "code": code_version(), "machine": machine_info()}

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
    lj["list_jobs (as served)"] = timeit(lambda: txn(jobs.list_jobs, actor(), {"limit": "50"}),
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
    lj["  for comparison: SELECT as ORM Job objects (the code before c289113)"] = timeit(
        lambda: txn(lambda s: s.scalars(parts(s, actor()).limit(50)).all()), 200, R)
    rows = txn(lambda s: s.scalars(parts(s, actors[0]).limit(50)).all())
    lj["  render() of 50 ORM jobs (per response)"] = timeit(lambda: [jobs.render(r) for r in rows], 500, R)
    lj["  of which empty transaction (BEGIN IMMEDIATE/COMMIT, session)"] = timeit(lambda: txn(lambda s: None), 1000, R)

    def core_list(s, act):
        stmt = select(*COLS).where(m.Job.owner == act.name).order_by(m.Job.id.desc()).limit(50)
        total = s.scalar(select(func.count()).select_from(m.Job).where(m.Job.owner == act.name))
        return {"items": [render_row(r) for r in s.execute(stmt)], "total": total, "limit": 50, "offset": 0}

    # a historical variant (before c289113's render): timed only while it still renders what is served
    if core_list_equal(txn(core_list, actors[0]), sample):
        lj["for comparison: Core rows + a plain dict render"] = timeit(lambda: txn(core_list, actor()), 200, R)

    # finished jobs never change: a per-job cache of the rendered JSON leaves the query for ids and the count
    frag: dict[int, bytes] = {}

    def cached_list(s, act):
        ids = s.execute(select(m.Job.id, m.Job.status).where(m.Job.owner == act.name)
                        .order_by(m.Job.id.desc()).limit(50)).all()
        total = s.scalar(select(func.count()).select_from(m.Job).where(m.Job.owner == act.name))
        missing = [i for i, status in ids if i not in frag or status not in st.FINAL]
        if missing:
            for j in s.scalars(select(m.Job).where(m.Job.id.in_(missing))):
                frag[j.id] = json.dumps(jobs.render(j), default=_default).encode()
        return b'{"items": [' + b", ".join(frag[i] for i, _ in ids) + \
            f'], "total": {total}, "limit": 50, "offset": 0}}'.encode()

    if json.loads(txn(cached_list, actors[0])) != json.loads(json.dumps(sample, default=_default)):
        print("note: the cached-list variant no longer renders what is served (timed all the same)")
    for act in actors:
        txn(cached_list, act)
    lj["alternative: ids query + cached JSON of finished jobs (incl. serialization)"] = timeit(
        lambda: txn(cached_list, actor()), 500, R)

    # the same page with statements built once (bind parameters): no per-call construction and cache-key work
    from sqlalchemy import bindparam

    list_cols = getattr(jobs, "LIST_COLUMNS", COLS)
    page_stmt = select(*list_cols).where(m.Job.owner == bindparam("owner")).order_by(m.Job.id.desc()) \
        .limit(bindparam("lim")).offset(bindparam("off"))
    count_stmt = select(func.count()).select_from(m.Job).where(m.Job.owner == bindparam("owner"))
    render_fn = jobs.render if hasattr(jobs, "LIST_COLUMNS") else render_row

    def prebuilt_session(s, act):
        total = s.scalar(count_stmt, {"owner": act.name})
        rows = s.execute(page_stmt, {"owner": act.name, "lim": 50, "off": 0}).all()
        return {"items": [render_fn(r) for r in rows], "total": total, "limit": 50, "offset": 0}

    def prebuilt_connection(act):
        with engine.connect() as c:
            total = c.execute(count_stmt, {"owner": act.name}).scalar()
            rows = c.execute(page_stmt, {"owner": act.name, "lim": 50, "off": 0}).all()
            c.rollback()
        return {"items": [render_fn(r) for r in rows], "total": total, "limit": 50, "offset": 0}

    assert core_list_equal(prebuilt_connection(actors[0]), sample), "prebuilt variant renders differently"
    lj["alternative: statements built once with bindparam() (ORM session)"] = timeit(
        lambda: txn(prebuilt_session, actor()), 300, R)
    lj["alternative: statements built once, plain Core connection (no ORM session)"] = timeit(
        lambda: prebuilt_connection(actor()), 300, R)

    def deferred_list(s, act):
        stmt = select(m.Job).options(defer(m.Job.backend_state)).where(m.Job.owner == act.name) \
            .order_by(m.Job.id.desc())
        return page(s, stmt, 50, 0, jobs.render)

    lj["alternative: ORM with defer(backend_state)"] = timeit(lambda: txn(deferred_list, actor()), 200, R)
    out["GET /jobs?limit=50 (user), ms per call"] = lj

    # the service runs list_jobs in TiService.db_threads (default 4) worker threads: what the GIL makes of it
    import threading

    def spin(seconds: float, counts: list, i: int) -> None:
        k, t_end = 0, time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            txn(jobs.list_jobs, actors[(i * 7 + k) % len(actors)], {"limit": "50"})
            k += 1
        counts[i] = k

    th = {}
    for n in (1, 2, 4, 8):
        counts = [0] * n
        threads = [threading.Thread(target=spin, args=(3.0, counts, i)) for i in range(n)]
        c0, t0 = time.process_time(), time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        th[f"{n} thread(s): calls/s, CPU ms per call"] = [round(sum(counts) / wall), round(cpu / sum(counts) * 1000, 2)]
    out["list_jobs from N threads at once (GIL contention)"] = th

    # ---- GET /jobs?limit=50&all=1 (admin) -----------------------------------------------------------
    la = {}
    la["list_jobs all=1 (as served)"] = timeit(lambda: txn(jobs.list_jobs, admin, {"limit": "50", "all": "1"}), 30, R)
    la["  of which COUNT(*) over all jobs"] = timeit(lambda: txn(lambda s: s.scalar(
        select(func.count()).select_from(select(m.Job).subquery()))), 30, R)
    la["  COUNT(*) straight on the table (no subquery)"] = timeit(lambda: txn(lambda s: s.scalar(
        select(func.count()).select_from(m.Job))), 30, R)
    la["  of which SELECT + ORM objects + render (50 rows)"] = timeit(lambda: txn(lambda s: [
        jobs.render(j) for j in s.scalars(select(m.Job).order_by(m.Job.id.desc()).limit(50))]), 30, R)
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

    cols = getattr(jobs, "LIST_COLUMNS", None)

    def load(s):  # as JobRunner.schedule loads them (rows since c289113, ORM objects before)
        if cols is not None:
            return (s.execute(select(*cols).where(m.Job.status.in_(st.HOLDING))).all(),
                    s.execute(select(*cols).where(m.Job.status == st.QUEUED)).all())
        return (s.scalars(select(m.Job).where(m.Job.status.in_(st.HOLDING))).all(),
                s.scalars(select(m.Job).where(m.Job.status == st.QUEUED)).all())

    sc["load holding + queued as the loop does (ms)"] = timeit(lambda: txn(load), 3, R)
    sched_cols = (m.Job.id, m.Job.owner, m.Job.kind, m.Job.pool, m.Job.device_type, m.Job.devices_per_instance,
                  m.Job.cpu_per_instance, m.Job.memory_mib_per_instance, m.Job.workers, m.Job.ps, m.Job.priority)
    sc["alternative: queued rows with only the 11 columns scheduling reads (ms)"] = timeit(lambda: txn(
        lambda s: s.execute(select(*sched_cols).where(m.Job.status == st.QUEUED)).all()), 3, R)
    import socket

    from ti_hub.ops import queueing

    nodes = [loop_mod.NodeCapacity(name=socket.gethostname(), pool="default", devices={"demo-gpu": [0, 1, 2, 3]},
                                   cpu=float(os.cpu_count()), memory_mib=16000, labels={})]

    def inputs(status_due: bool):
        return queueing.Inputs(nodes, None, {}, dict(DEFAULT_COMPUTE_QUOTAS), time.time(), status_due=status_due)

    # the leader's read-only decision (read queued + holding, quotas, the pure cycle, what changed)
    sc["queueing.decide, positions and reasons due (ms)"] = timeit(lambda: txn(queueing.decide, inputs(True)), 3, R)
    sc["queueing.decide, admission only (ms)"] = timeit(lambda: txn(queueing.decide, inputs(False)), 3, R)
    out["scheduler cycle pieces"] = sc
    engine.dispose()

    # ---- cold start pieces ---------------------------------------------------------------------------
    import subprocess

    def run_s(code: str) -> float:
        vals = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir())
            vals.append(time.perf_counter() - t0)
        return round(statistics.median(vals), 2)

    cs = {"python -c pass": run_s("pass"),
          "import jupyterhub.app (the hub process)": run_s("import jupyterhub.app"),
          "import jupyterhub.app without rfc3987_syntax (jsonschema's optional IRI checker)": run_s(
              "import sys; sys.modules['rfc3987_syntax'] = None; import jupyterhub.app"),
          "import rfc3987_syntax alone": run_s("import rfc3987_syntax"),
          "import ti_hub.service.app (the ti service process)": run_s("import ti_hub.service.app")}
    from ti_hub.db.session import upgrade

    t0 = time.perf_counter()
    upgrade(url)
    cs["alembic upgrade on the seeded database (no-op)"] = round(time.perf_counter() - t0, 2)
    out["cold start pieces, seconds"] = cs
    shutil.rmtree(tmp, ignore_errors=True)

    res_path = HERE / "results" / f"{a.name}.json"
    res_path.parent.mkdir(exist_ok=True)
    res_path.write_text(json.dumps(out, indent=1))
    for section, vals in out.items():
        if section in ("code", "machine"):
            print(f"{section}: {json.dumps(vals)}")
        elif isinstance(vals, dict):
            print(section)
            for k2, v in vals.items():
                print(f"  {str(v):>12}  {k2}")
        else:
            print(f"{section}: {vals}")
    print(f"results: {res_path}")


def core_list_equal(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True, default=_default) == json.dumps(b, sort_keys=True, default=_default)


if __name__ == "__main__":
    main()
