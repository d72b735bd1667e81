#!/usr/bin/env python
"""Concurrent workspace spawns on the KWOK test cluster (issue 4): 500 at once, concurrent_spawn_limit 100.

    python benchmarks/bench_k8s_spawns.py [--spawns 500] [--limit 100] [--runs 1] [--spawner tihub|plain]
                                          [--db-url URL] [--name k8s-spawns]

Every user asks for a server at the same moment through the hub's REST API (``POST /users/<u>/server``). The
hub throttles beyond ``concurrent_spawn_limit`` with 429 and a ``Retry-After`` (JupyterHub's default range,
30-60 s), and the client retries as told. (1-3 s was tried: 400 clients retrying that often kept the hub busy
answering 429s.) Each
spawn goes the whole way: TiHub's admission (quota, queue, placement), KubeSpawner's pod, the pod running on
a KWOK node, the hub's check that the server answers, and the proxy route.

FAKE stand-in, named as such: KWOK pods run no process, so nothing would answer the hub's check that a server
is up. ``FakeAnswerKubeSpawner`` (written into the config below) creates the real pod through TiKubeSpawner and
KubeSpawner, waits for it to run, and then hands the hub the address of a FAKE workspace server in this process
(HTTP 200 to anything): the hub's check and the proxy route go there instead of to the pod's address.

``--spawner plain`` runs the same spawns through JupyterHub's own KubeSpawner, with no TiHub admission (same
pod resources and security context, same FAKE server): the floor that any JupyterHub pays on the machine, so
that what TiHub adds can be told from what the hub itself costs.

Measured per spawn, on one clock (this machine): the accepted request (``t_req``), the pod's creation and its
Running phase as a watch in this process sees them, and the POST's answer, which the hub sends once the route
is in the proxy (``slow_spawn_timeout`` is raised so that it always waits). The time the hub adds is
(pod created - request) + (answer - pod running): everything except what Kubernetes spends scheduling the pod
and KWOK spends starting it.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import signal
import statistics
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import aiohttp
import k8sbench as kb
from benchplatform import code_version, machine_info
from hubproc import ADMIN, ADMIN_PASSWORD

from tests.k8s.cluster import FakeNode
from ti_hub.db.session import drop_tables, make_engine, sqlite_url

CONFIG = """
import os
os.environ["KUBECONFIG"] = {kubeconfig!r}
from kubespawner import KubeSpawner
from ti_hub.spawner.kube import TiKubeSpawner


class FakeAnswerKubeSpawner(TiKubeSpawner):
    \"\"\"FAKE (benchmark only): the pod is real; the server that answers for it is the benchmark's stand-in.\"\"\"

    async def launch(self, ws):
        await super().launch(ws)
        return os.environ["TI_HUB_BENCH_FAKE_SERVER"]


class FakeAnswerPlainKubeSpawner(KubeSpawner):
    \"\"\"The floor (--spawner plain): JupyterHub's KubeSpawner with no TiHub admission, the same pod resources and
    the same FAKE answering server; labelled so that the benchmark's pod watch sees its pods.\"\"\"

    async def start(self):
        self.extra_labels = {{"ti-hub.io/kind": "workspace"}}
        self.extra_annotations = {{"ti-hub.io/owner": self.user.name}}
        # the namespace enforces the restricted Pod Security Standard, as for TiHub's pods
        self.uid, self.gid, self.fs_gid = 1000, 100, 100
        self.allow_privilege_escalation = False
        self.container_security_context = {{"capabilities": {{"drop": ["ALL"]}}, "runAsNonRoot": True,
                                           "seccompProfile": {{"type": "RuntimeDefault"}}}}
        self.pod_security_context = {{"seccompProfile": {{"type": "RuntimeDefault"}}, "runAsNonRoot": True}}
        await super().start()
        return os.environ["TI_HUB_BENCH_FAKE_SERVER"]


c.JupyterHub.spawner_class = {spawner_class}
c.KubeSpawner.namespace = {namespace!r}
c.KubeSpawner.cpu_limit = c.KubeSpawner.cpu_guarantee = 1.0
c.KubeSpawner.mem_limit = c.KubeSpawner.mem_guarantee = "1024M"
c.TiKubeSpawner.installation = "bench"
c.JupyterHub.concurrent_spawn_limit = {limit}
c.JupyterHub.tornado_settings.update({{"slow_spawn_timeout": 600}})
c.Spawner.start_timeout = 600
c.Spawner.http_timeout = 60
c.TiService.compute_quota_defaults = {{"workspace": {{"devices": 0, "cpu": 4, "memory_mib": 8192}}}}
"""


class FakeServer:
    """FAKE workspace server: answers every request with 200 (the hub only checks that something answers)."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()


async def watch_pods(kubeconfig: str, seen: dict[str, dict[str, float]], stop: asyncio.Event) -> None:
    """owner -> {"created": t, "running": t}: when this process saw each workspace pod appear and run."""
    from kubernetes_asyncio import client, config, watch

    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        core = client.CoreV1Api(api)
        w = watch.Watch()
        rv = (await core.list_namespaced_pod(kb.NAMESPACE)).metadata.resource_version
        while not stop.is_set():
            async for ev in w.stream(core.list_namespaced_pod, kb.NAMESPACE, resource_version=rv,
                                     timeout_seconds=30, label_selector="ti-hub.io/kind=workspace"):
                now = time.time()
                pod = ev["object"]
                rv = pod.metadata.resource_version
                owner = (pod.metadata.annotations or {}).get("ti-hub.io/owner")
                if not owner:
                    continue
                rec = seen.setdefault(owner, {})
                rec.setdefault("created", now)
                if pod.status and pod.status.phase == "Running":
                    rec.setdefault("running", now)
                if stop.is_set():
                    break


async def spawn_one(http: aiohttp.ClientSession, hub: str, user: str, out: dict) -> None:
    retries = 0
    while True:
        t_req = time.time()
        async with http.post(f"{hub}/hub/api/users/{user}/server", json={"plan": "ws-bench"}) as r:
            text = await r.text()
            if r.status == 429:
                retries += 1
                await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            out[user] = {"t_req": t_req, "status": r.status, "t_answer": time.time(), "retries": retries,
                         "error": None if r.status in (201, 202) else text[:5000]}
            break
    # 202: still pending after slow_spawn_timeout (should not happen here); wait for ready like a browser would
    while out[user]["status"] == 202:
        async with http.get(f"{hub}/hub/api/users/{user}") as r:
            srv = (await r.json()).get("servers", {}).get("")
        if srv and srv.get("ready"):
            out[user]["t_answer"] = time.time()
            break
        if not srv or not srv.get("pending"):
            out[user]["error"] = f"spawn failed: {srv}"
            break
        await asyncio.sleep(0.2)


async def spawn_all(hub: str, token: str, users: list[str], kubeconfig: str) -> tuple[dict, dict, float]:
    seen: dict[str, dict[str, float]] = {}
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_pods(kubeconfig, seen, stop))
    await asyncio.sleep(1.0)  # the watch is open before the first pod
    out: dict[str, dict] = {}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, headers={"Authorization": f"token {token}"},
                                     timeout=aiohttp.ClientTimeout(total=900)) as http:
        t0 = time.time()
        await asyncio.gather(*(spawn_one(http, hub, u, out) for u in users))
        wall = time.time() - t0
    await asyncio.sleep(1.0)
    stop.set()
    watcher.cancel()
    try:
        await watcher
    except (asyncio.CancelledError, Exception):
        pass
    return out, seen, wall


def one_run(a, workdir: Path) -> dict:
    nodes = [FakeNode(f"cpu-{i}", cpu="32", memory="128Gi", pods=110) for i in range(a.nodes)]
    cluster = kb.start_cluster(nodes, workdir / "k8s", a.api_qps)
    fake = FakeServer()
    platform = None
    try:
        spawner = "FakeAnswerPlainKubeSpawner" if a.spawner == "plain" else "FakeAnswerKubeSpawner"
        extra = CONFIG.format(kubeconfig=str(cluster.kubeconfig), namespace=kb.NAMESPACE, limit=a.limit,
                              spawner_class=spawner)
        if a.db_url:  # TiHub's database on PostgreSQL (no write lock), emptied first
            drop_tables(a.db_url)
            extra += f"c.TiService.db_url = {a.db_url!r}\n"
        platform = kb.start_platform(workdir / "data", cluster, extra, {"TI_HUB_BENCH_FAKE_SERVER": fake.url})
        admin = platform.hub.login(ADMIN, ADMIN_PASSWORD)
        admin.ok("POST", "/plans", json={"name": "ws-bench", "kinds": ["workspace"], "device_type": "cpu",
                                         "device_count": 0, "cpu": 1, "memory_mib": 1024})
        users = [f"u{i:04d}" for i in range(a.spawns)]
        r = admin.hub_api("POST", "/users", json={"usernames": users})
        assert r.status_code == 201, r.text
        pids = kb.all_pids(platform, cluster)
        sampler = kb.CpuSampler(pids).start()
        spy = None
        if a.profile:  # where the hub's time goes (py-spy, if installed)
            spy = subprocess.Popen(["py-spy", "record", "-p", str(pids[a.profile_process]), "-o", a.profile,
                                    "-f", "raw", "-r", "100", "--nonblocking", *(["--idle"] if a.profile_idle else []),
                                    *(["--gil"] if a.profile_gil else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out, seen, wall = asyncio.run(spawn_all(platform.hub.url, admin.token, users, str(cluster.kubeconfig)))
        cpu = sampler.stop()
        cluster_view = admin.ok("GET", "/cluster")  # what TiHub saw of the nodes, for a post-mortem
        if spy:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        ti_times = ti_records(a.db_url or sqlite_url(workdir / "data" / "ti.sqlite"))
        failures = {u: (o["status"], _title(o["error"]), ti_times.get(u, (None,) * 4)[2:])
                    for u, o in out.items() if o["error"]}
        to_pod, to_route, added, total, to_ti, to_admit, admit_to_pod = [], [], [], [], [], [], []
        for u, o in out.items():
            p = seen.get(u, {})
            if o["error"] or "created" not in p or "running" not in p:
                continue
            a1, a2 = p["created"] - o["t_req"], o["t_answer"] - p["running"]
            to_pod.append(a1)
            to_route.append(a2)
            added.append(a1 + a2)
            total.append(o["t_answer"] - o["t_req"])
            if u in ti_times and ti_times[u][1] is not None:
                created, admitted = ti_times[u][:2]
                to_ti.append(created - o["t_req"])
                to_admit.append(admitted - created)
                admit_to_pod.append(p["created"] - admitted)

        def pct(v):
            return {"p50": _r(kb.percentile(v, 50)), "p95": _r(kb.percentile(v, 95)), "max": _r(max(v) if v else None)}
        return {"spawns": len(users), "succeeded": len(added), "failures": len(failures),
                "failure_examples": list(failures.items())[:3],
                "cluster_seen_by_tihub": cluster_view if failures else None,
                "throttled_429": sum(o["retries"] for o in out.values()), "wall_s": round(wall, 1),
                "hub_added_s": pct(added), "request_to_pod_created_s": pct(to_pod),
                "pod_running_to_route_added_s": pct(to_route),
                "parts_of_request_to_pod_created_s": {
                    "request_to_ti_record": pct(to_ti), "ti_record_to_admitted": pct(to_admit),
                    "admitted_to_pod_created": pct(admit_to_pod)}, "request_to_ready_s": pct(total), "cpu": cpu}
    finally:
        if platform:
            platform.stop()
        fake.stop()
        cluster.stop()


def ti_records(url: str) -> dict[str, tuple]:
    """owner -> (TiHub recorded the workspace, TiHub's scheduler admitted it (epoch seconds), status, reason)."""
    from sqlalchemy import select

    from ti_hub.db import models as m
    from ti_hub.db.session import make_sessionmaker

    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as s:
            admitted = dict(s.execute(select(m.JobEvent.job_id, m.JobEvent.at)
                                      .where(m.JobEvent.status == "scheduling")).all())
            rows = s.execute(select(m.Job.id, m.Job.owner, m.Job.created_at, m.Job.status, m.Job.reason)
                             .where(m.Job.kind == "workspace"))
            return {owner: (kb.epoch(created), kb.epoch(admitted.get(jid)), status, reason)
                    for jid, owner, created, status, reason in rows}
    finally:
        engine.dispose()


def _title(text: str) -> str:
    """What an error answer says: an HTML page's title and heading, else the text's end."""
    found = re.findall(r"<(?:title|h1)[^>]*>\s*([^<]+?)\s*<", text or "")
    return " | ".join(found) if found else (text or "")[-200:]


def _r(x):
    return None if x is None else round(x, 3)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spawns", type=int, default=500)
    p.add_argument("--limit", type=int, default=100, help="JupyterHub.concurrent_spawn_limit")
    p.add_argument("--nodes", type=int, default=20, help="fake CPU nodes of 32 cores and 110 pods each")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--db-url", default="",
                   help="TiHub's database, e.g. postgresql+psycopg://USER@HOST/DB (its tables are dropped before "
                        "each run); default: SQLite in the run's data directory")
    p.add_argument("--spawner", choices=("tihub", "plain"), default="tihub",
                   help="plain: JupyterHub's KubeSpawner without TiHub's admission (the floor TiHub adds to)")
    p.add_argument("--profile", default="", help="write a py-spy profile (raw) of one process during the spawns")
    p.add_argument("--profile-process", default="hub", help="which: hub, ti-leader, ti-api-1, ...")
    p.add_argument("--profile-idle", action="store_true",
                   help="count threads waiting (on a lock, a disk write, a socket) too, not only those on a CPU")
    p.add_argument("--profile-gil", action="store_true",
                   help="count only samples holding the GIL: the process's Python CPU, not its threads' waits")
    kb.add_cluster_args(p, timeout=1800)
    p.add_argument("--name", default="k8s-spawns")
    a = p.parse_args(argv)
    runs = kb.run_many(a, one_run, "ti-bench-spawns-")
    med = statistics.median
    def added(r: dict, q: str) -> float:  # no spawn succeeded: no figure, and no target met
        return math.inf if r["hub_added_s"][q] is None else r["hub_added_s"][q]

    out = {"code": code_version(), "machine": machine_info(),
           "settings": {"spawns": a.spawns, "spawner": a.spawner, "database": "postgresql" if a.db_url else "sqlite",
                        "concurrent_spawn_limit": a.limit, "nodes": f"{a.nodes} x 32 cores",
                        "kube_api_qps": a.api_qps, "runs": a.runs},
           "runs": runs,
           "median_hub_added_p50_s": med(added(r, "p50") for r in runs),
           "median_hub_added_p95_s": med(added(r, "p95") for r in runs),
           "verdicts": {"zero_failures": all(r["failures"] == 0 and r["succeeded"] == r["spawns"] for r in runs),
                        "hub_added_p50_le_0.5s": all(added(r, "p50") <= 0.5 for r in runs),
                        "hub_added_p95_le_2s": all(added(r, "p95") <= 2.0 for r in runs)}}
    kb.write_results(a.name, out, ("median_hub_added_p50_s", "median_hub_added_p95_s"))


if __name__ == "__main__":
    main()
