#!/usr/bin/env python
"""End-to-end API benchmark of the real embedded platform (hub + proxy + ti service + local backend).

    python benchmarks/bench_api.py                       # everything, 3 runs each, results/api.json
    python benchmarks/bench_api.py --only list --runs 5  # one phase: cold | list | submit
    python benchmarks/bench_api.py --profile             # also a py-spy profile of the ti service

Targets (issue): with 200,000 job rows and 10,000 users on 2 cores,
  * GET job lists >= 500 req/s at 64 concurrent clients with p99 <= 50 ms,
  * POST job submit with quota check p99 <= 100 ms,
  * platform cold start <= 5 s.

What it does:
  1. seeds a template database once (benchmarks/seed_jobs.py; kept in --workdir and reused while the
     seed parameters are the same), then copies it into a fresh data dir for every platform start;
  2. cold start: times ``start_hub`` (tests/hubproc.py: launches ``ti-hub start`` and polls
     ``/services/ti/api/v1/openapi.json`` through the public proxy until it answers) on an empty data
     dir and on the seeded one;
  3. starts one platform on the seeded data, creates hub users for benchmark clients that own a few
     dozen seeded jobs (admin hub API), one API token each;
  4. list: 64 closed-loop clients (60 users with ``GET /jobs?limit=50``, 4 admins with ``all=1``) for
     --duration seconds, alternately through the public proxy port and directly against the ti
     service's port, --runs times each;
  5. submit: --submit-clients clients POST ``/jobs`` (unique name, plan cpu-small, image python-cpu,
     command ``true``); the seeded running jobs fill this machine's node, so every submission passes the
     quota check and then stays queued (nothing is launched), as on a busy cluster; the benchmark users'
     cpu quota is raised first so that their growing queues never hit it;
  6. prints a table and writes JSON to benchmarks/results/<--name>.json.

The load generator (benchmarks/loadgen.py, aiohttp) runs in its own process. Everything talks to
127.0.0.1 only. Figures are medians over the runs; every run is in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import seed_jobs  # noqa: E402
from hubproc import ADMIN, ADMIN_PASSWORD  # noqa: E402
from tihub_client import Hub  # noqa: E402

import benchplatform  # noqa: E402
from benchplatform import API, Platform, code_version, loadavg, machine_info  # noqa: E402
from report import TARGETS, med, summarize_runs, table, verdicts  # noqa: E402


# ---- data ----------------------------------------------------------------------------------------
def ensure_template(workdir: Path, users: int, jobs: int, queued: int | None, running: int | None) -> Path:
    tdir = workdir / f"template-{users}-{jobs}-{queued}-{running}"
    params = {"users": users, "jobs": jobs, "queued": queued, "running": running, "seed_version": 3}
    meta = tdir / "seed.json"
    db = tdir / "ti.sqlite"
    if db.exists() and meta.exists() and json.loads(meta.read_text()).get("params") == params:
        return db
    shutil.rmtree(tdir, ignore_errors=True)
    tdir.mkdir(parents=True)
    stats = seed_jobs.seed(seed_jobs.sqlite_url(db), users, jobs, queued, running)
    meta.write_text(json.dumps({"params": params, "stats": stats}))
    return db


def fresh_data_dir(workdir: Path, name: str, template: Path | None) -> Path:
    base = workdir / name
    shutil.rmtree(base, ignore_errors=True)
    data = base / "data"
    data.mkdir(parents=True)
    if template is not None:
        shutil.copyfile(template, data / "ti.sqlite")
    return data


def pick_users(db: Path, n: int, lo: int = 24, hi: int = 60, skip: int = 0) -> list[tuple[str, int]]:
    counts = seed_jobs.owner_counts(seed_jobs.sqlite_url(db))
    cands = sorted((u, c) for u, c in counts.items() if lo <= c <= hi)
    if len(cands) < n + skip:
        raise SystemExit(f"only {len(cands)} users own {lo}-{hi} jobs; seed more")
    return cands[skip:skip + n]


# ---- hub setup -----------------------------------------------------------------------------------
def hub_tokens(hub: Hub, admin, names: list[str]) -> dict[str, str]:
    r = admin.hub_api("POST", "/users", json={"usernames": names})
    if r.status_code not in (201, 409):
        raise RuntimeError(f"creating hub users: {r.status_code} {r.text[:300]}")
    out = {}
    for name in names:
        r = admin.hub_api("POST", f"/users/{name}/tokens", json={"note": "benchmark"})
        r.raise_for_status()
        out[name] = r.json()["token"]
    return out


# ---- load ----------------------------------------------------------------------------------------
def run_load(spec: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        r = subprocess.run([sys.executable, str(HERE / "loadgen.py"), path], capture_output=True, text=True,
                           timeout=spec["duration"] + spec.get("warmup", 2) + 120)
    finally:
        os.unlink(path)
    if r.returncode:
        raise RuntimeError(f"loadgen failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def measured(plat: Platform, spec: dict) -> dict:
    """One load run with the platform's CPU use over it (seconds of CPU per process)."""
    c0, la0 = plat.cpu(), loadavg()
    res = run_load(spec)
    c1 = plat.cpu()
    res["server_cpu_s"] = {k: round(c1[k] - c0[k], 2) for k in c1 if k in c0}
    res["loadavg_before"] = la0
    return res


def list_spec(base: str, user_tokens: dict[str, str], admin_token: str, n_admin: int, duration: float,
              warmup: float, rate: float | None = None) -> dict:
    clients = [{"class": "user", "method": "GET", "url": f"{base}{API}/jobs?limit=50",
                "headers": {"Authorization": f"token {tok}"}} for tok in user_tokens.values()]
    clients += [{"class": "admin_all", "method": "GET", "url": f"{base}{API}/jobs?limit=50&all=1",
                 "headers": {"Authorization": f"token {admin_token}"}} for _ in range(n_admin)]
    if rate:
        for c in clients:
            c["rate"] = rate / len(clients)
    return {"duration": duration, "warmup": warmup, "clients": clients}


def submit_spec(base: str, tokens: dict[str, str], duration: float, warmup: float, tag: str,
                rate: float | None = None) -> dict:
    """Closed loop, or paced at ``rate`` submissions/s in all (spread over the clients)."""
    body = {"plan": "cpu-small", "image": "python-cpu", "command": "true"}
    clients = [{"class": "submit", "method": "POST", "url": f"{base}{API}/jobs", "submit": body,
                "headers": {"Authorization": f"token {tok}"}, "rate": rate / len(tokens) if rate else None}
               for tok in tokens.values()]
    return {"duration": duration, "warmup": warmup, "clients": clients, "tag": tag}


# ---- phases --------------------------------------------------------------------------------------
def phase_cold(workdir: Path, template: Path, runs: int, log) -> dict:
    out = {}
    for mode in ("empty", "seeded"):
        samples = []
        for i in range(runs):
            data = fresh_data_dir(workdir, f"cold-{mode}", template if mode == "seeded" else None)
            plat = Platform(data)
            samples.append({"ready_s": round(plat.ready_s, 2), "self_reported_s": plat.self_reported_ready_s(),
                            "timeline": plat.timeline()})
            plat.stop()
            log(f"cold start ({mode}) run {i + 1}: {plat.ready_s:.2f} s (ti-hub says "
                f"{samples[-1]['self_reported_s']} s); timeline {samples[-1]['timeline']}")
        keys = samples[0]["timeline"].keys()
        out[mode] = {"median_s": med([s["ready_s"] for s in samples]),
                     "median_self_reported_s": med([s["self_reported_s"] for s in samples]),
                     "median_timeline": {k: med([s["timeline"].get(k) for s in samples]) for k in keys},
                     "runs": samples}
    return out


def hub_roundtrip_ms(plat: Platform, token: str, n: int = 30) -> dict:
    """What one HubAuth cache miss costs: GET /hub/api/user straight at the hub."""
    url = f"http://127.0.0.1:{plat.ports['hub']}/hub/api/user"
    s = requests.Session()
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = s.get(url, headers={"Authorization": f"token {token}"}, timeout=10)
        lat.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
    lat.sort()
    return {"p50_ms": round(lat[len(lat) // 2], 2), "max_ms": round(lat[-1], 2)}


def idle_cpu(plat: Platform, seconds: float = 10) -> dict:
    """CPU the platform burns with no requests at all (the scheduler loop, mostly)."""
    c0 = plat.cpu()
    time.sleep(seconds)
    c1 = plat.cpu()
    return {k: round((c1[k] - c0[k]) / seconds * 100, 1) for k in c1 if k in c0}


def profile_service(plat: Platform, spec: dict, raw: Path, log) -> dict:
    """py-spy samples the ti service, leader and API processes (only the thread holding the GIL: each
    process is GIL-bound), during one more load run; returns where the CPU goes."""
    spy = shutil.which("py-spy")
    if not spy:
        log("py-spy not installed (pip install py-spy): no profile")
        return {}
    dur = int(spec["duration"] + spec["warmup"])
    p = subprocess.Popen([spy, "record", "--pid", str(plat.pids["service"]), "--duration", str(dur),
                          "--rate", "250", "--format", "raw", "--output", str(raw), "--nonblocking", "--gil",
                          "--subprocesses"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    res = run_load(spec)
    p.wait(60)
    prof = summarize_profile(raw)
    log(f"profile ({prof.get('samples')} samples): {prof.get('by_category_pct')}")
    return {"load": res["total"], **prof}


# (label, frame substring): a sample goes to the first category of this list found anywhere in its stack
# (most specific first), so e.g. JSON decoding inside ORM loading counts as JSON decoding
CATEGORIES = [
    ("BEGIN / BEGIN IMMEDIATE (transaction start)", "_sqlite_begin (ti_hub/db/session.py"),
    ("SQLite executing queries (in the driver)", "do_execute (sqlalchemy/engine/default.py"),
    ("SQLite executing queries (in the driver)", "do_executemany (sqlalchemy/engine/default.py"),
    ("row decoding: JSON columns", "_SQliteJson"),
    ("row decoding: JSON columns", "json/decoder.py"),
    ("row decoding: datetimes", "DATETIME"),
    ("row decoding: datetimes", "UTCDateTime"),
    ("row decoding: datetimes", "_strings.py"),
    ("row decoding: datetimes", "str_to_datetime"),
    ("fetching rows (driver, building row tuples)", "fetchall (sqlalchemy/engine/cursor.py"),
    ("fetching rows (driver, building row tuples)", "fetchone (sqlalchemy/engine/cursor.py"),
    ("ORM: building Job objects", "sqlalchemy/orm/loading.py"),
    ("render() of jobs to dicts", "render (ti_hub/ops/jobs.py"),
    ("json.dumps of responses", "json/encoder.py"),
    ("HubAuth (token check, cache, background-thread hop)", "jupyterhub/services/auth.py"),
    ("scheduler: Python in the loop / scheduler core (requests_of, core.cycle: on the event loop thread)",
     "ti_hub/service/loop.py"),
    ("scheduler: Python in the loop / scheduler core (requests_of, core.cycle: on the event loop thread)",
     "ti_hub/scheduler/"),
    ("SQLAlchemy: statement compile / cache", "sqlalchemy/sql/"),
    ("SQLAlchemy: session / connection / pool", "sqlalchemy/"),
    ("tornado: HTTP parsing and handler machinery", "tornado/"),
    ("asyncio: event loop, thread-pool hand-offs", "asyncio/"),
    ("asyncio: event loop, thread-pool hand-offs", "concurrent/futures/"),
    ("asyncio: event loop, thread-pool hand-offs", "threading.py"),
]
OWNERS = [  # inclusive: who asked for the work
    ("scheduler loop (ti_hub/service/loop.py)", ("ti_hub/service/loop.py", "ti_hub/scheduler/")),
    ("HubAuth", ("jupyterhub/services/auth.py",)),
    ("list_jobs", ("list_jobs (ti_hub/ops/jobs.py",)),
    ("submit", ("submit (ti_hub/ops/jobs.py",)),
]


def summarize_profile(raw: Path) -> dict:
    """py-spy's collapsed stacks -> share of the GIL-holding samples per category (exclusive, by the
    leaf-most recognised frame) and per requester (inclusive), and the top ti_hub functions."""
    if not raw.exists():
        return {}
    total = 0
    cat: dict[str, int] = {}
    owner: dict[str, int] = {}
    fn_incl: dict[str, int] = {}
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        n = int(n)
        frames = stack.split(";")
        total += n
        label = next((lab for lab, key in CATEGORIES if any(key in f for f in frames)), "other")
        cat[label] = cat.get(label, 0) + n
        who = next((lab for lab, keys in OWNERS if any(k in f for f in frames for k in keys)), "other")
        owner[who] = owner.get(who, 0) + n
        for f in set(frames):
            if "ti_hub/" in f:
                fn_incl[f] = fn_incl.get(f, 0) + n

    def pct(d):
        return {k: round(100 * v / total, 1) for k, v in sorted(d.items(), key=lambda kv: -kv[1])} if total else {}

    top = sorted(fn_incl.items(), key=lambda kv: -kv[1])[:25]
    return {"samples": total, "by_category_pct": pct(cat), "by_requester_pct": pct(owner),
            "top_ti_hub_functions_pct": [[f, round(100 * c / total, 1)] for f, c in top] if total else []}


def phase_load(workdir: Path, template: Path, a, log) -> dict:
    data = fresh_data_dir(workdir, "load", template)
    user_list = pick_users(template, a.concurrency - a.admin_clients)
    submitters = pick_users(template, a.submit_clients, skip=a.concurrency)
    plat = Platform(data)
    out: dict = {"ports": plat.ports, "list_users": [[u, c] for u, c in user_list]}
    try:
        admin = plat.hub.login(ADMIN, ADMIN_PASSWORD)
        tokens = hub_tokens(plat.hub, admin, [u for u, _ in user_list])
        sub_tokens = hub_tokens(plat.hub, admin, [u for u, _ in submitters])
        for u, _ in submitters:  # their queues grow with every submission: never let the quota refuse one
            admin.ok("PUT", "/quotas", json={"user": u, "kind": "single", "device_type": "cpu", "devices": 0,
                                              "cpu": 1_000_000, "memory_mib": 1 << 40})
        out["idle_cpu_pct"] = idle_cpu(plat)
        log(f"idle CPU %: {out['idle_cpu_pct']}")
        out["hub_auth_roundtrip"] = hub_roundtrip_ms(plat, next(iter(tokens.values())))
        bases = {"proxy": f"http://127.0.0.1:{plat.ports['port']}",
                 "direct": f"http://127.0.0.1:{plat.ports['service']}"}
        if "list" in a.only:
            floor = []
            for i in range(a.runs):
                spec = list_spec(bases["direct"], tokens, admin.token, 0, a.floor_duration, a.warmup)
                for c in spec["clients"]:
                    c["url"], c["class"] = f"{bases['direct']}{API}/", "floor"
                res = measured(plat, spec)
                floor.append(res)
                t = res["total"]
                log(f"floor (GET {API}/, auth only) run {i + 1}: {t['rps']} req/s p50 {t['p50_ms']} "
                    f"p99 {t['p99_ms']} ms, errors {t['errors']}, server CPU {res['server_cpu_s']}")
            out["floor"] = {"total": summarize_runs(floor), "runs": floor}
            runs: dict[str, list] = {"proxy": [], "direct": []}
            for i in range(a.runs):
                for via in (("direct", "proxy") if i % 2 == 0 else ("proxy", "direct")):
                    spec = list_spec(bases[via], tokens, admin.token, a.admin_clients, a.duration, a.warmup)
                    res = measured(plat, spec)
                    runs[via].append(res)
                    t = res["total"]
                    log(f"list {via:6s} run {i + 1}: {t['rps']} req/s p50 {t['p50_ms']} p95 {t['p95_ms']} "
                        f"p99 {t['p99_ms']} ms, errors {t['errors']}, server CPU {res['server_cpu_s']}")
            out["list"] = {via: {"total": summarize_runs(r), "user": summarize_runs(r, "user"),
                                 "admin_all": summarize_runs(r, "admin_all"), "runs": r} for via, r in runs.items()}
            paced: dict[str, list] = {}
            sat = summarize_runs(runs["direct"])["rps"] or 0
            for i in range(a.runs):
                for rate in a.rates:
                    if i and rate > 1.5 * sat:
                        continue  # far beyond saturation: one run shows it, repeats only cost time
                    spec = list_spec(bases["direct"], tokens, admin.token, a.admin_clients, a.paced_duration,
                                     a.warmup, rate)
                    res = measured(plat, spec)
                    paced.setdefault(str(rate), []).append(res)
                    t = res["total"]
                    log(f"list direct paced at {rate} req/s run {i + 1}: got {t['rps']} req/s p50 {t['p50_ms']} "
                        f"p95 {t['p95_ms']} p99 {t['p99_ms']} ms, errors {t['errors']}, "
                        f"not sent in time {t['dropped']}")
            out["list_paced"] = {rate: {"total": summarize_runs(r), "user": summarize_runs(r, "user"),
                                        "admin_all": summarize_runs(r, "admin_all"), "runs": r}
                                 for rate, r in paced.items()}
        if "submit" in a.only:
            sruns = []
            for i in range(a.runs):
                spec = submit_spec(bases["direct"], sub_tokens, a.submit_duration, a.warmup, f"s{i}")
                res = measured(plat, spec)
                sruns.append(res)
                t = res["total"]
                log(f"submit direct run {i + 1}: {t['rps']} req/s p50 {t['p50_ms']} p95 {t['p95_ms']} "
                    f"p99 {t['p99_ms']} ms, errors {t['errors']} {res['sample_errors'][:1]}")
            spec = submit_spec(bases["proxy"], sub_tokens, a.submit_duration, a.warmup, "sp")
            proxy_res = measured(plat, spec)
            log(f"submit proxy  run 1: {proxy_res['total']['rps']} req/s p99 {proxy_res['total']['p99_ms']} ms")
            spaced: dict[str, list] = {}
            for rate in [float(r) for r in a.submit_rates.split(",") if r]:
                for i in range(a.runs):
                    spec = submit_spec(bases["direct"], sub_tokens, a.submit_duration, a.warmup, f"sr{rate:g}{i}",
                                       rate)
                    res = measured(plat, spec)
                    spaced.setdefault(f"{rate:g}", []).append(res)
                    t = res["total"]
                    log(f"submit direct paced at {rate:g}/s run {i + 1}: got {t['rps']} req/s p50 {t['p50_ms']} "
                        f"p95 {t['p95_ms']} p99 {t['p99_ms']} ms, errors {t['errors']}, dropped {t['dropped']}")
            queued = admin.ok("GET", "/queue?all=1&limit=1")["total"]
            out["submit"] = {"direct": {"total": summarize_runs(sruns), "runs": sruns},
                             "proxy": {"total": summarize_runs([proxy_res]), "runs": [proxy_res]},
                             "queued_after": queued}
            out["submit_paced"] = {rate: {"total": summarize_runs(r), "runs": r} for rate, r in spaced.items()}
        if a.profile:
            spec = list_spec(bases["direct"], tokens, admin.token, a.admin_clients, a.duration, a.warmup)
            out["profile_list"] = profile_service(plat, spec, workdir / f"{a.name}-list.collapsed", log)
            if "submit" in a.only:
                spec = submit_spec(bases["direct"], sub_tokens, a.submit_duration, a.warmup, "sprof")
                out["profile_submit"] = profile_service(plat, spec, workdir / f"{a.name}-submit.collapsed", log)
    finally:
        plat.stop()
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "tihub-bench"),
                   help="data dirs and the seeded template live here (default: %(default)s)")
    p.add_argument("--name", default="api", help="results file: benchmarks/results/<name>.json")
    p.add_argument("--only", default="cold,list,submit", help="comma-separated phases: cold,list,submit")
    p.add_argument("--runs", type=int, default=3, help="runs per measurement (medians are reported)")
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--queued", type=int, default=None, help="seeded queued jobs (default 0.5%% of --jobs)")
    p.add_argument("--running", type=int, default=None, help="seeded running jobs (default 0.5%% of --jobs)")
    p.add_argument("--concurrency", type=int, default=64, help="list clients")
    p.add_argument("--floor-duration", type=float, default=4,
                   help="seconds per run of GET /api/v1/ (authenticated, no database): the per-request floor")
    p.add_argument("--admin-clients", type=int, default=4, help="of the list clients: admins with all=1")
    p.add_argument("--duration", type=float, default=15, help="seconds per closed-loop list run")
    p.add_argument("--rates", default="500,100",
                   help="paced list runs at these total request rates, 64 connections (empty: none)")
    p.add_argument("--paced-duration", type=float, default=10, help="seconds per paced list run")
    p.add_argument("--submit-clients", type=int, default=8)
    p.add_argument("--submit-duration", type=float, default=10, help="seconds per submit run")
    p.add_argument("--submit-rates", default="50",
                   help="paced submit runs: comma-separated total submissions/s over the submit clients")
    p.add_argument("--warmup", type=float, default=2, help="seconds of load not counted at each run's start")
    p.add_argument("--profile", action="store_true", help="py-spy the ti service during extra runs")
    p.add_argument("--db-threads", type=int, default=None,
                   help="experiment: c.TiService.db_threads (the service's default is 1)")
    p.add_argument("--api-processes", type=int, default=None,
                   help="experiment: c.TiService.api_processes (the service's default is 1)")
    p.add_argument("--hub-without-rfc3987", action="store_true",
                   help="experiment: keep jsonschema's optional rfc3987_syntax out of the hub process (a "
                        "sitecustomize in the workdir, on the hub's PYTHONPATH)")
    p.add_argument("--code-root", default=str(ROOT),
                   help="directory holding the ti_hub package to run (default: this checkout), e.g. an older "
                        "commit unpacked with `git archive <commit> ti_hub | tar -x -C DIR` for a before/after")
    a = p.parse_args(argv)
    a.only = set(a.only.split(","))
    benchplatform.CODE_ROOT = str(Path(a.code_root).resolve())
    if a.db_threads:
        benchplatform.SERVICE_ENV["TI_HUB_BENCH_DB_THREADS"] = str(a.db_threads)
    if a.api_processes:
        benchplatform.SERVICE_ENV["TI_HUB_BENCH_API_PROCESSES"] = str(a.api_processes)
    if a.hub_without_rfc3987:
        site = Path(a.workdir) / "no-rfc3987"
        site.mkdir(parents=True, exist_ok=True)
        (site / "sitecustomize.py").write_text(
            "import sys\nsys.modules['rfc3987_syntax'] = None  # jsonschema then skips its IRI format check\n")
        benchplatform.EXTRA_PYTHONPATH.append(str(site))
    a.rates = [float(x) if "." in x else int(x) for x in a.rates.split(",") if x]
    t0 = time.monotonic()

    def log(msg):
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", flush=True)

    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    res: dict = {"name": a.name, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "code": code_version(),
                 "machine": machine_info(),
                 "loadavg_start": loadavg(),
                 "settings": {"users": a.users, "jobs": a.jobs, "concurrency": a.concurrency, "paced_rates": a.rates,
                              "paced_duration_s": a.paced_duration,
                              "admin_clients": a.admin_clients, "duration_s": a.duration, "warmup_s": a.warmup,
                              "submit_clients": a.submit_clients, "submit_duration_s": a.submit_duration, "submit_rates": a.submit_rates,
                              "runs": a.runs, "db": "SQLite (WAL) in the data dir", "targets": TARGETS,
                              "seed_queued": a.queued, "seed_running": a.running,
                              "db_threads": a.db_threads or "service default (4)",
                              "hub_without_rfc3987": a.hub_without_rfc3987}}
    log("seeding the template database (reused when already there)")
    template = ensure_template(workdir, a.users, a.jobs, a.queued, a.running)
    res["seed"] = json.loads((template.parent / "seed.json").read_text())["stats"]
    if "cold" in a.only:
        res["cold_start"] = phase_cold(workdir, template, a.runs, log)
    if a.only & {"list", "submit"}:
        res["load"] = phase_load(workdir, template, a, log)
    res["loadavg_end"] = loadavg()
    if code_version()["commit"] != res["code"]["commit"]:
        res["code_changed_during_run"] = code_version()  # platforms started after the change ran new code
    res["wall_s"] = round(time.monotonic() - t0, 1)
    res["verdicts"] = verdicts(res)
    out = HERE / "results" / f"{a.name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(table(res))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
