"""What workspaces and jobs use on Kubernetes (SPEC WS6, JOB6), read as TiHub reads a kubelet: through the API
server's node proxy (/metrics/resource, /metrics/cadvisor), and devices from DCGM's series in a real Prometheus.

FAKE kubelets: KWOK's Metric resources answer those paths for two nodes of this test, with each pod's usage taken
from its annotations (kubeletfake.py); a relay passes only those paths from the node's address to KWOK (the API
server will not proxy to 127.0.0.1). A real kubelet's answer is issue 33's test. GPU STAND-IN: no GPU here, so a
small exporter serves DCGM-named series with the job pod's labels, as dcgm-exporter does in Kubernetes mode.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import shutil
import socket
import subprocess
import threading
import time

import pytest
from hubproc import own_hub
from tihub_client import wait

from ti_hub.backends.k8s import KubernetesBackend
from ti_hub.backends.k8s import objects as ob
from ti_hub.backends.k8s.names import safe_name

from . import kubeletfake as kf
from .cluster import LocalCluster

NS, RAW_NS = "ti-usage", "ti-usage-raw"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
IDLE_TIME, GRACE = 3, 3
MIB = 1 << 20


@pytest.fixture(scope="module")
def kubelets(k8s_cluster):
    """The two usage nodes, their kubelet paths answering through the API server."""
    if not isinstance(k8s_cluster, LocalCluster) or not k8s_cluster.kwok_docs:
        pytest.skip("FAKE kubelet figures need the local test cluster's KWOK (kubeletfake.py)")
    address = kf.machine_address()
    if address is None:
        pytest.skip("this machine has no global address for the API server to proxy to")
    k8s_cluster.add_nodes([kf.RelayedNode(kf.RESOURCE_NODE, pool="usage-res", address=address),
                           kf.RelayedNode(kf.CADVISOR_NODE, pool="usage-cad", address=address, devices=2,
                                          device_type="UGPU")])
    node = json.loads(k8s_cluster.kubectl("get", "node", kf.RESOURCE_NODE, "-o", "json").stdout)
    pki = k8s_cluster.dir / "pki"
    relay = kf.Relay(address, node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"], pki / "apiserver.crt",
                     pki / "apiserver.key").start()
    try:
        yield k8s_cluster
    finally:
        relay.stop()


def raw_pod(name: str, node: str, **usage: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": RAW_NS, "annotations": {kf.ANN + k: v for k, v in usage.items()}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}, {"name": "side", "image": "y"}]}}


async def test_cpu_seconds_come_from_the_kubelet_through_the_api_server_and_unknown_is_left_out(kubelets):
    kubelets.namespace(RAW_NS, restricted=False)
    kubelets.apply([raw_pod("busy", kf.RESOURCE_NODE, cpu="1500m"), raw_pod("quiet", kf.RESOURCE_NODE),
                    raw_pod("elsewhere", "cpu-0", cpu="2")])  # cpu-0: 127.0.0.1, which the API server refuses
    wait(lambda: all(json.loads(kubelets.kubectl("get", "pod", p, "-n", RAW_NS, "-o", "json").stdout)["status"]
                     .get("phase") == "Running" for p in ("busy", "quiet", "elsewhere")), 60, "three running pods")
    b = KubernetesBackend(kubeconfig=str(kubelets.kubeconfig), namespace=RAW_NS, kubelet_ttl=0.5)
    try:
        states = {1: {"backend": "kubernetes", "namespace": RAW_NS, "pod": "busy"},
                  2: {"backend": "kubernetes", "namespace": RAW_NS, "pod": "quiet"},
                  3: {"backend": "kubernetes", "namespace": RAW_NS, "pod": "elsewhere"},
                  4: {"backend": "kubernetes", "namespace": RAW_NS, "pod": "no-such-pod"},
                  5: {"backend": "local", "pid": 1}}
        deadline = time.monotonic() + 30
        while True:  # KWOK's first answer for a node may not list its pods yet: unknown until it does
            first = await b.workspace_cpu_seconds(states)
            if set(first) == {1, 2} or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.6)
        # the node whose kubelet could not be read, a pod that does not exist: unknown (left out), never 0
        assert set(first) == {1, 2}, first
        asked = b._kubelet().requests
        again = await b.workspace_cpu_seconds(states)  # within kubelet_ttl: the same answer, no second request
        assert again == first and b._kubelet().requests == asked
        t0 = time.monotonic()
        await asyncio.sleep(2.5)
        later = await b.workspace_cpu_seconds(states)
        elapsed = time.monotonic() - t0
        busy, quiet = later[1] - first[1], later[2] - first[2]
        # two containers of 1.5 cores each: about 3 core-seconds a second; the quiet one 2 x 1m
        assert 2.0 * elapsed < busy < 3.6 * elapsed, (busy, elapsed)
        assert 0 <= quiet < 0.01 * elapsed, (quiet, elapsed)
        assert b._kubelet().failing == {("cpu-0", "metrics/resource"): b._kubelet().failing[("cpu-0",
                                                                                              "metrics/resource")]}
    finally:
        await b.close()
        kubelets.kubectl("delete", "pod", "-n", RAW_NS, "busy", "quiet", "elsewhere", "--wait=false")


class GpuStandIn:
    """GPU STAND-IN: DCGM-named series of the pods in ``pods`` (name -> utilization), labelled as dcgm-exporter
    labels them in Kubernetes mode (the pod that holds the device, its namespace and container)."""

    def __init__(self):
        self.pods: dict[str, int] = {}
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                lines = []
                for pod, util in sorted(stand_in.pods.items()):
                    labels = (f'gpu="1",UUID="GPU-stand-in-{pod}",device="nvidia1",modelName="STAND-IN",'
                              f'Hostname="{kf.CADVISOR_NODE}",container="main",namespace="{NS}",pod="{pod}"')
                    lines += [f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util}", f"DCGM_FI_DEV_FB_USED{{{labels}}} 1024",
                              f"DCGM_FI_DEV_FB_FREE{{{labels}}} 3072"]
                body = ("\n".join(lines) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    if not shutil.which(PROMETHEUS):
        pytest.skip("prometheus is not installed")
    gpus = GpuStandIn()
    d = tmp_path_factory.mktemp("prom")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: dcgm\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{gpus.port}']\n")
    log = open(d / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}", gpus
    finally:
        proc.terminate()
        proc.wait(10)
        gpus.server.shutdown()
        gpus.server.server_close()


@pytest.fixture(scope="module")
def uhub(kubelets, prometheus, tmp_path_factory):
    kubelets.namespace(NS)
    url, _ = prometheus
    gen = own_hub(tmp_path_factory, "uhub", (
        "import os\n"
        f"os.environ['KUBECONFIG'] = {str(kubelets.kubeconfig)!r}\n"
        "c.JupyterHub.spawner_class = 'ti_hub.spawner.kube.TiKubeSpawner'\n"
        f"c.KubeSpawner.namespace = {NS!r}\n"
        # KWOK pods never answer HTTP: the hub waits, and meanwhile TiHub counts the workspace as running
        "c.Spawner.http_timeout = 600\n"
        "c.TiService.backend_class = 'ti_hub.backends.k8s.KubernetesBackend'\n"
        f"c.KubernetesBackend.kubeconfig = {str(kubelets.kubeconfig)!r}\n"
        f"c.KubernetesBackend.namespace = {NS!r}\n"
        "c.KubernetesBackend.installation = 'usage-test'\n"
        "c.KubernetesBackend.kubelet_ttl = 0.5\n"
        "c.HealthMonitor.source_class = 'ti_hub.health.promsource.PrometheusHealthSource'\n"
        f"c.PrometheusHealthSource.url = {url!r}\nc.HealthMonitor.interval = 1\n"
        "c.AlertRules.builtin_ttl = 0.5\nc.TiService.scheduler_interval = 0.3\n"))
    hub = next(gen)
    admin = hub.admin
    admin.ok("POST", "/plans", json={"name": "usage-ws", "kinds": ["workspace"], "cpu": 2, "memory_mib": 1024,
                                     "pool": "usage-res"})
    admin.ok("POST", "/plans", json={"name": "usage-gpu", "kinds": ["single"], "device_type": "UGPU",
                                     "device_count": 1, "cpu": 1, "memory_mib": 1024, "pool": "usage-cad"})
    yield hub
    next(gen, None)


def pod_of(cluster, name: str) -> dict | None:
    out = cluster.kubectl("get", "pod", name, "-n", NS, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def test_the_idle_policy_reclaims_a_cpu_idle_workspace_pod_and_keeps_a_busy_one(uhub, kubelets):
    admin = uhub.admin
    rule = next(r for r in admin.ok("GET", "/alert-rules")["items"] if r["name"] == "workspace-idle")
    admin.ok("PATCH", f"/alert-rules/{rule['id']}", json={"enabled": True, "interval": IDLE_TIME, "grace": GRACE})
    idle_u, busy_u = uhub.person("kidle"), uhub.person("kbusy")
    for u, server in ((idle_u, "quiet-desk"), (busy_u, "hot-desk")):
        r = u.hub_api("POST", f"/users/{u.name}/servers/{server}", json={"plan": "usage-ws"})
        assert r.status_code in (201, 202), r.text
    hot_pod = safe_name("ti-ws", busy_u.name, "hot-desk")
    p = wait(lambda: (x := pod_of(kubelets, hot_pod)) and x["status"].get("phase") == "Running" and x, 60,
             "the busy workspace's pod")
    assert p["spec"]["nodeName"] == kf.RESOURCE_NODE
    # one of its plan's 2 CPUs busy: 50 %, far above the rule's 5 %
    kubelets.kubectl("annotate", "pod", "-n", NS, hot_pod, f"{kf.ANN}cpu=1", "--overwrite")
    quiet = wait(lambda: (j := idle_u.ok("GET", "/jobs/quiet-desk")) and j["status"] == "running" and j, 60,
                 "the quiet workspace running in TiHub")
    hot = wait(lambda: (j := busy_u.ok("GET", "/jobs/hot-desk")) and j["status"] == "running" and j, 60,
               "the busy workspace running in TiHub")
    since = time.monotonic()
    done = wait(lambda: (j := idle_u.ok("GET", f"/jobs/{quiet['id']}")) and j["status"] != "running" and j,
                IDLE_TIME + GRACE + 40, "the CPU-idle workspace reclaimed")
    assert "by ti-idle-policy: its CPU was idle (mean " in done["reason"], done
    assert "of 2 CPU, below 5.0 %" in done["reason"], done
    time.sleep(max(0.0, since + IDLE_TIME + GRACE + 2 - time.monotonic()))
    now = busy_u.ok("GET", f"/jobs/{hot['id']}")
    assert now["status"] == "running", now
    assert not [e for e in now["events"] if e["status"] == "alert" and e["message"].startswith("idle:")], now
    for u, server in ((idle_u, "quiet-desk"), (busy_u, "hot-desk")):
        u.hub_api("DELETE", f"/users/{u.name}/servers/{server}")


def test_a_jobs_disk_network_and_gpu_figures_come_from_the_kubelet_and_dcgm(uhub, kubelets, prometheus):
    _, gpus = prometheus
    u = uhub.person("kjob")
    j = u.ok("POST", "/jobs", json={"name": "figures", "plan": "usage-gpu", "image": "python-cpu",
                                    "command": "sleep 1000"})
    u.wait_job(j["id"], states=("running",), timeout=60)
    def job_pods():
        return json.loads(kubelets.kubectl("get", "pods", "-n", NS, "-l", f"{ob.LABEL_JOB_ID}={j['id']}", "-o",
                                           "json").stdout)["items"]
    pods = wait(lambda: (out := job_pods()) and out[0]["status"].get("phase") == "Running" and out, 60,
                "the job's running pod")
    pod = pods[0]["metadata"]["name"]
    assert pods[0]["spec"]["nodeName"] == kf.CADVISOR_NODE
    kubelets.kubectl("annotate", "pod", "-n", NS, pod, f"{kf.ANN}net-rx=1Mi", f"{kf.ANN}net-tx=256Ki",
                     f"{kf.ANN}disk-write=512Ki", f"{kf.ANN}disk-read=64Ki", "--overwrite")
    gpus.pods[pod] = 73
    try:
        def figures():
            (m,) = u.ok("GET", f"/jobs/{j['id']}/metrics")["instances"]
            d, n = m["disk"], m["network"]
            # usage is per container (two here): 2 x 512 KiB/s written, the pod's eth0 2 x 1 MiB/s in, 2 x 256
            # KiB/s out; lo (7 times as much) left out. The first rates may average over a window that began
            # before the annotations (zero then, about half the rate seen): the figures must settle on the rates
            ok = d and n and m["gpus"] and d["write_bytes"] >= MIB and n["rx_bytes"] >= 2 * MIB and \
                rate_near(n["rx_bytes_per_s"], 2 * MIB) and rate_near(d["write_bytes_per_s"], MIB)
            return m if ok else None
        m = wait(figures, 90, "disk, network and GPU figures in the job's metrics, at about 2 MiB/s received and "
                              "1 MiB/s written")
        assert m["network"]["rx_bytes"] / 5 < m["network"]["tx_bytes"] < m["network"]["rx_bytes"] / 3, m
        assert m["gpus"] == [{"index": 1, "utilization_percent": 73, "memory_used_mib": 1024,
                              "memory_total_mib": 4096}], m
        from ti_hub.magics.core import usage_lines
        (line,) = usage_lines(u.ok("GET", f"/jobs/{j['id']}/metrics"))
        assert "GPU1 73% 1024/4096 MiB" in line and " · disk read " in line and " · network in " in line, line

        # Prometheus counters, written with each health sample: disk and network; its CPU and memory are unknown
        # here (the /metrics/resource of its node is the other node's, kubeletfake.py): absent, not 0
        def scraped():
            got = {}
            for text_line in uhub.admin.api("GET", "/metrics").text.splitlines():
                if text_line.startswith("ti_job_") and f'job_id="{j["id"]}"' in text_line:
                    got[text_line.split("{", 1)[0]] = float(text_line.rsplit(" ", 1)[1])
            return got if got.get("ti_job_network_receive_bytes_total", 0) >= MIB else None
        got = wait(scraped, 60, "the job's counters in the Prometheus metrics")
        assert got["ti_job_disk_written_bytes_total"] > 0 and got["ti_job_network_transmit_bytes_total"] > 0, got
        assert "ti_job_cpu_seconds_total" not in got and "ti_job_memory_bytes" not in got, got
    finally:
        u.ok("POST", f"/jobs/{j['id']}/kill")
    u.wait_job(j["id"], states=("killed",), timeout=60)


def rate_near(rate: float, per_s: float) -> bool:
    """A rate from two readings of KWOK's integral (about per_s; readings come when asked, so it wobbles)."""
    return 0.5 * per_s <= rate <= 1.5 * per_s
