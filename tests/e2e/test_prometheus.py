"""Prometheus metrics (SPEC MON4) against a real Prometheus: Debian's ``prometheus``, started here with a
config that scrapes a live ti service's /metrics with a bearer token; every PromQL query of every Grafana
dashboard in the chart must return at least one series, and PrometheusHealthSource (the Kubernetes source) reads
the health series back through Prometheus's API. Device and host health come from the TEST SOURCE of
readings (health/testsource.py), and a job holds a demo-gpu so that allocation series are not all 0."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests
from hubproc import free_port, own_hub, readings_config
from prometheus_client.parser import text_string_to_metric_families
from tihub_client import wait

from ti_hub.backends.base import NodeCapacity
from ti_hub.health.promsource import PrometheusHealthSource
from ti_hub.backends.base import MACHINE_LABEL

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "helm/ti-hub/files/grafana").glob("*.json"))
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


@pytest.fixture(scope="module")
def readings(tmp_path_factory):
    return tmp_path_factory.mktemp("readings") / "readings.json"


@pytest.fixture(scope="module")
def mhub(tmp_path_factory, readings):
    yield from own_hub(tmp_path_factory, "promhub",
                       readings_config(readings) + "c.MetricsExporter.cache_seconds = 0.5\n")


def metrics_token(hub) -> str:
    """A token of the admin's with read:metrics only, as one would give Prometheus."""
    r = hub.admin.hub_api("POST", f"/users/{hub.admin.name}/tokens",
                          json={"note": "prometheus", "scopes": ["read:metrics"]})
    assert r.status_code == 201, r.text
    return r.json()["token"]


def parse(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_metrics_need_read_metrics_or_an_admin(mhub):
    url = mhub.api_url + "/metrics"
    assert requests.get(url, timeout=10).status_code == 401
    u = mhub.person("promuser")
    r = u.api("GET", "/metrics")
    assert r.status_code == 403 and "read:metrics" in r.json()["detail"], r.text
    ok = requests.get(url, headers={"Authorization": f"Bearer {metrics_token(mhub)}"}, timeout=10)
    assert ok.status_code == 200 and ok.headers["Content-Type"].startswith("text/plain"), ok.text[:300]
    assert "ti_jobs" in parse(ok.text)
    assert mhub.admin.api("GET", "/metrics").status_code == 200  # a TiHub admin's ordinary token


def substitute(expr: str, values: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: values[m.group(1) or m.group(2)], expr)


def test_every_dashboard_query_returns_series_from_a_real_prometheus(mhub, readings, tmp_path):
    assert DASHBOARDS and {p.stem for p in DASHBOARDS} >= {"cluster", "vc", "user", "node", "queue"}
    token = metrics_token(mhub)
    url = mhub.api_url + "/metrics"

    def scrape() -> dict[str, list]:
        r = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert r.status_code == 200, r.text
        return parse(r.text)

    (node,) = scrape()["ti_node_info"]
    machine = node.labels["machine"]
    mib = 1 << 20
    readings.write_text(json.dumps({
        "devices": [{"device_type": "demo-gpu", "device": i, "uuid": f"GPU-test-{i}", "utilization_percent": u,
                     "memory_used_bytes": 1000 * mib, "memory_total_bytes": 16000 * mib, "temperature_c": 41.0,
                     "power_watts": 70.5, "ecc_uncorrectable": 0} for i, u in ((0, 3.0), (1, 3.0))],
        "hosts": [{"machine": machine, "cpu_count": 4, "cpu_percent": 12.0, "load1": 0.7,
                   "cpu_seconds": {"user": 100.0, "system": 20.0, "idle": 900.0},
                   "memory_total_bytes": 8 << 30, "memory_available_bytes": 6 << 30,
                   "filesystems": [{"mountpoint": "/", "device": "/dev/test0", "fstype": "ext4",
                                    "size_bytes": 100 << 30, "avail_bytes": 60 << 30}],
                   "network": [{"device": "eth0", "rx_bytes": 1000, "tx_bytes": 2000}]}]}))

    u = mhub.person("promjob")
    job = u.ok("POST", "/jobs", json={"name": "holds-gpu", "plan": "demo-gpu-1", "image": "python-cpu",
                                      "command": "sleep 300"})
    u.wait_job(job["id"], states=("running",))
    found = wait(lambda: (lambda f: f if "DCGM_FI_DEV_GPU_UTIL" in f and any(
        s.value > 0 for s in f.get("ti_devices_allocated", ())) else None)(scrape()), 30,
        "health readings and the job's device in the metrics")
    assert any(s.value == 1 and s.labels["device_type"] == "demo-gpu" for s in found["ti_devices_idle"])
    assert any(s.labels["user"] == u.name and s.value == 1 for s in found["ti_user_devices_allocated"])
    # counted by the leader, which serves no HTTP here (api_processes 2): an API process reports them
    assert any(s.value >= 1 for s in found["ti_admissions"] if s.name == "ti_admissions_total")
    assert any(s.value >= 1 for s in found["ti_scheduler_cycle_seconds"] if s.name.endswith("_count"))
    assert any(s.labels.get("route") == "/jobs/{id}" for s in found["ti_api_request_duration_seconds"])

    port = free_port()
    config = tmp_path / "prometheus.yml"
    target = mhub.url.split("://", 1)[1]
    config.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ti
    metrics_path: /services/ti/api/v1/metrics
    authorization:
      credentials: {token}
    static_configs:
      - targets: ["{target}"]
""")
    log = open(tmp_path / "prometheus.log", "wb")
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    api = f"http://127.0.0.1:{port}/api/v1"

    def query(expr: str) -> list:
        r = requests.get(api + "/query", params={"query": expr}, timeout=10)
        assert r.status_code == 200 and r.json()["status"] == "success", f"{expr}: {r.text}"
        return r.json()["data"]["result"]

    try:
        def scraped():
            try:
                up = query('count_over_time(up{job="ti"}[1m])')
                return up and float(up[0]["value"][1]) >= 5 and query('up{job="ti"}')[0]["value"][1] == "1"
            except requests.RequestException:
                return False
        wait(scraped, 60, "Prometheus to scrape the ti service five times")
        values = {"vc": "default", "user": u.name, "machine": machine, "node": node.labels["node"],
                  "datasource": "prometheus"}
        empty = []
        for board in DASHBOARDS:
            doc = json.loads(board.read_text())
            for var in doc["templating"]["list"]:  # the variables' own queries find values too
                q = var.get("query")
                if isinstance(q, dict) and q.get("query", "").startswith("label_values("):
                    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", q["query"]).groups()
                    got = {s["metric"].get(label) for s in query(metric)}
                    assert values[var["name"]] in got, (board.name, var["name"], got)
            for p in doc["panels"]:
                for t in p["targets"]:
                    expr = substitute(t["expr"], values)
                    if not query(expr):
                        empty.append(f"{board.name} / {p['title']}: {expr}")
        assert not empty, "queries without series:\n" + "\n".join(empty)

        # the Kubernetes source reads the same series back through Prometheus (here: ours, named as DCGM's and
        # the node exporter's; the machine in the label `machine`)
        src = PrometheusHealthSource(url=f"http://127.0.0.1:{port}", host_label="machine")
        cap = [NodeCapacity(node.labels["node"], "default", {"demo-gpu": [0, 1]}, 4, 8000,
                            labels={MACHINE_LABEL: machine})]
        snap = asyncio.run(src.read(cap, time.time()))
        (h,) = snap.hosts
        assert (h.machine, h.load1, h.memory_total_bytes, h.memory_available_bytes) == (machine, 0.7, 8 << 30, 6 << 30)
        assert h.cpu_seconds == {"user": 100.0, "system": 20.0, "idle": 900.0}
        assert [(f.mountpoint, f.size_bytes, f.avail_bytes) for f in h.filesystems] == [("/", 100 << 30, 60 << 30)]
        assert [(n.device, n.rx_bytes, n.tx_bytes) for n in h.network] == [("eth0", 1000, 2000)]
        assert [(d.device, d.uuid, d.utilization_percent, d.temperature_c, d.power_watts, d.ecc_uncorrectable,
                 d.memory_used_bytes, d.memory_total_bytes) for d in snap.devices] == [
            (i, f"GPU-test-{i}", 3.0, 41.0, 70.5, 0, 1000 * mib, 16000 * mib) for i in (0, 1)]
    finally:
        prom.terminate()
        prom.wait(20)
        u.api("POST", f"/jobs/{job['id']}/kill")
