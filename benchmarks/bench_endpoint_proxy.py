"""Issue 30: what a job's network of its own costs its endpoint, against jobs on the host's network, in one run.

    python benchmarks/bench_endpoint_proxy.py [--target endpoint|tensorboard] [--requests 400] [--rounds 3]
        [--out results/endpoint-proxy.json]

Two platforms from this checkout, run as root: one with ``LocalBackend.network_namespaces`` (the default: the
proxy reaches the job through its portal, backends/local/portal.py), one without (the job on the host's network,
the proxy checking who holds the port). Each runs one job that serves a 2 KiB page on a declared port; the
owner GETs it through ``/services/ti/endpoints/JOB/0/PORT/`` one request at a time, ``--requests`` per round,
the two platforms alternating round by round. Reports p50 and p99 per side and the ratio (target <= 1.2).

``--target tensorboard``: the same for the TensorBoard the platform starts for a job's log directory (its own
namespace, reached through its portal, against one on the host's loopback): GETs of ``data/runs`` through
``/services/ti/endpoints/JOB/tensorboard/KEY/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from benchplatform import loadavg, machine_info  # noqa: E402
from hubproc import ADMIN, ADMIN_PASSWORD, start_hub, stop_hub  # noqa: E402

SERVE = ("python3 -c \"import http.server as h\nclass H(h.BaseHTTPRequestHandler):\n def do_GET(self):\n"
         "  b = b'x' * 2048; self.send_response(200); self.send_header('Content-Length', str(len(b)));"
         " self.end_headers(); self.wfile.write(b)\n def log_message(self, *a): pass\n"
         "print('up', flush=True); h.ThreadingHTTPServer(('127.0.0.1', {port}), H).serve_forever()\"")


def platform(tmp: Path, name: str, own_network: bool, target: str = "endpoint"):
    data = tmp / name / "data"
    data.mkdir(parents=True)
    config = tmp / name / "jupyterhub_config.py"
    config.write_text("from ti_hub.hub.config import configure\nconfigure(c)\n"
                      f"c.LocalBackend.network_namespaces = {own_network}\n")
    proc, hub, _ports = start_hub(data, config=str(config))
    admin = hub.login(ADMIN, ADMIN_PASSWORD)
    admin.ok("POST", "/plans", json={"name": "bench-ep", "kinds": ["single"], "device_type": "cpu",
                                     "device_count": 0, "cpu": 1, "memory_mib": 512})
    if target == "tensorboard":
        admin.ok("POST", "/volumes", json={"name": "tb-bench", "kind": "filesystem", "capacity_gib": 1})
        job = admin.ok("POST", "/jobs", json={"name": "tb-bench", "plan": "bench-ep", "image": "python-cpu",
                                              "command": "mkdir -p /mnt/out/tb && echo made > /mnt/out/tb/x",
                                              "volumes": [{"volume": "tb-bench", "mount_path": "/mnt/out"}],
                                              "endpoints": ["tensorboard"]})
        admin.wait_job(job["id"], timeout=120)
        tb = admin.ok("POST", f"/jobs/{job['id']}/tensorboard", json={"logdir": "/mnt/out/tb"})
        url = f"{hub.url}{tb['url']}data/runs"
    else:
        port = 40000 + (7 if own_network else 8)
        job = admin.ok("POST", "/jobs", json={"name": "ep-bench", "plan": "bench-ep", "image": "python-cpu",
                                              "command": SERVE.format(port=port), "ports": [port]})
        admin.wait_job(job["id"], states=("running",), timeout=120)
        url = f"{hub.url}/services/ti/endpoints/{job['id']}/0/{port}/"
    deadline = time.monotonic() + 60
    while admin.http.get(url, timeout=10).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: the endpoint never answered")
        time.sleep(0.5)
    return proc, admin, url


def round_ms(admin, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = admin.http.get(url, timeout=30)
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200 and r.content, r.status_code
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=("endpoint", "tensorboard"), default="endpoint",
                    help="a job's own server (a 2 KiB page), or the TensorBoard the platform starts for a job")
    ap.add_argument("--requests", type=int, default=400, help="requests per round and side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "endpoint-proxy.json"))
    args = ap.parse_args()
    # a job's namespace stays pinned until its portal sees it empty: leave what cannot be removed yet
    with tempfile.TemporaryDirectory(prefix="ti-bench-ep-", dir="/var/tmp", ignore_cleanup_errors=True) as tmp:
        sides = {"host_network": platform(Path(tmp), "host", False, args.target),
                 "own_network": platform(Path(tmp), "own", True, args.target)}
        try:
            times: dict[str, list[float]] = {k: [] for k in sides}
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for side in order:
                    _proc, admin, url = sides[side]
                    round_ms(admin, url, 20)  # warm the connections
                    times[side] += round_ms(admin, url, args.requests)
                    print(f"round {r + 1} {side}: p50 {statistics.median(times[side]):.2f} ms", flush=True)
        finally:
            for proc, _admin, _url in sides.values():
                stop_hub(proc)  # the platform and its jobs
    what = ("GET of a job's 2 KiB page through the endpoint proxy" if args.target == "endpoint" else
            "GET of data/runs of a job's TensorBoard through the endpoint proxy")
    res = {"what": what + ", one at a time", "machine": machine_info(),
           "load_after": loadavg(), "settings": vars(args)}
    for side, ms in times.items():
        res[side] = {"n": len(ms), "p50_ms": round(statistics.median(ms), 2), "p99_ms": round(pct(ms, 0.99), 2)}
    res["ratio_p50"] = round(res["own_network"]["p50_ms"] / res["host_network"]["p50_ms"], 3)
    res["ratio_p99"] = round(res["own_network"]["p99_ms"] / res["host_network"]["p99_ms"], 3)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({k: res[k] for k in ("host_network", "own_network", "ratio_p50", "ratio_p99")}, indent=1))


if __name__ == "__main__":
    main()
