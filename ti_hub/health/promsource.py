"""Health readings from Prometheus (Kubernetes): NVIDIA's DCGM exporter for the GPUs and the node exporter for the
hosts, read through Prometheus's HTTP API instead of sampling (the issue: "on Kubernetes TiHub reads those
exporters through Prometheus").

Two instant queries per sample (one for the DCGM series, one for the node exporter's), non-blocking (tornado's
AsyncHTTPClient). A series names its machine by a label: DCGM's ``Hostname`` and the node exporter's ``instance``
by default (``host:port``: the port is dropped), or any label the site's relabeling sets (e.g. ``node``); that
name is matched against each capacity node's machine (backends: the node's name, or its ti-hub.io/machine
label). A DCGM series' ``gpu`` is the device index on its machine, as the scheduler counts them.

What Prometheus does not have is not measured (None), as with every source; Prometheus unreachable is logged and
the sample has nothing measured.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from traitlets import Float, Unicode

from ..backends.base import NodeCapacity, machine_of
from ..backends.metrics import GpuSample
from ..domain.readings import DeviceReading, FsReading, HostReading, NetReading, Snapshot
from .sources import HealthSource

MIB = 1 << 20
DCGM_QUERY = '{__name__=~"DCGM_FI_DEV_(GPU_UTIL|FB_USED|FB_FREE|GPU_TEMP|POWER_USAGE|ECC_DBE_VOL_TOTAL)"}'
NODE_QUERY = ('{__name__=~"node_(cpu_seconds_total|memory_MemTotal_bytes|memory_MemAvailable_bytes|'
              'filesystem_size_bytes|filesystem_avail_bytes|network_receive_bytes_total|'
              'network_transmit_bytes_total|load1)"}')
IDLE_MODES = ("idle", "iowait")
POD_GPU_NAMES = "DCGM_FI_DEV_(GPU_UTIL|FB_USED|FB_FREE)"


def host_name(labels: dict[str, str], label: str) -> str:
    v = labels.get(label, "")
    if label == "instance" and v.count(":") == 1:  # host:port (an IPv6 address keeps its colons)
        v = v.rsplit(":", 1)[0]
    return v


def devices_from(result: Iterable[dict[str, Any]], nodes: list[NodeCapacity], host_label: str,
                 gpu_label: str) -> list[DeviceReading]:
    """Pure: DCGM series (Prometheus's instant-query result) -> a reading for every device of ``nodes``."""
    found: dict[tuple[str, int], dict[str, Any]] = defaultdict(dict)
    for s in result:
        labels, value = s["metric"], float(s["value"][1])
        try:
            key = (host_name(labels, host_label), int(labels.get(gpu_label, "")))
        except ValueError:
            continue
        f = found[key]
        name = labels.get("__name__", "")
        if name == "DCGM_FI_DEV_GPU_UTIL":
            f["utilization_percent"] = value
        elif name == "DCGM_FI_DEV_FB_USED":
            f["used"] = value
        elif name == "DCGM_FI_DEV_FB_FREE":
            f["free"] = value
        elif name == "DCGM_FI_DEV_GPU_TEMP":
            f["temperature_c"] = value
        elif name == "DCGM_FI_DEV_POWER_USAGE":
            f["power_watts"] = value
        elif name == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":
            f["ecc_uncorrectable"] = int(value)
        if labels.get("UUID"):
            f["uuid"] = labels["UUID"]
    out = []
    for n in nodes:
        machine = machine_of(n)
        for t, devs in sorted(n.devices.items()):
            for i in devs:
                f = dict(found.get((machine, i), {}))
                used, free = f.pop("used", None), f.pop("free", None)
                if used is not None:
                    f["memory_used_bytes"] = int(used * MIB)
                    if free is not None:
                        f["memory_total_bytes"] = int((used + free) * MIB)
                out.append(DeviceReading(node=n.name, device_type=t, device=i, machine=machine, **f))
    return out


def hosts_from(result: Iterable[dict[str, Any]], machines: Iterable[str], host_label: str,
               previous: dict[str, HostReading] | None = None) -> list[HostReading]:
    """Pure: node exporter series -> a reading per machine. CPU seconds are summed over the cores (the count of
    distinct ``cpu`` labels is cpu_count); cpu_percent is the busy share since ``previous`` (None at first)."""
    cpu: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    cores: dict[str, set[str]] = defaultdict(set)
    scalar: dict[str, dict[str, float]] = defaultdict(dict)
    fs: dict[str, dict[tuple[str, str, str], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    net: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for s in result:
        labels, value = s["metric"], float(s["value"][1])
        m, name = host_name(labels, host_label), labels.get("__name__", "")
        if name == "node_cpu_seconds_total":
            cpu[m][labels.get("mode", "")] += value
            cores[m].add(labels.get("cpu", ""))
        elif name in ("node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes", "node_load1"):
            scalar[m][name] = value
        elif name.startswith("node_filesystem_"):
            key = (labels.get("mountpoint", ""), labels.get("device", ""), labels.get("fstype", ""))
            fs[m][key][name] = value
        elif name.startswith("node_network_"):
            net[m][labels.get("device", "")][name] = value
    out = []
    for m in sorted(set(machines)):
        sc = scalar.get(m, {})
        seconds = dict(cpu.get(m, {}))
        percent = None
        before = (previous or {}).get(m)
        if before is not None and before.cpu_seconds and seconds:
            total = sum(seconds.values()) - sum(before.cpu_seconds.values())
            idle = sum(seconds.get(k, 0.0) - before.cpu_seconds.get(k, 0.0) for k in IDLE_MODES)
            if total > 0:
                percent = max(0.0, min(100.0, 100.0 * (total - idle) / total))
        mem_total, mem_avail = sc.get("node_memory_MemTotal_bytes"), sc.get("node_memory_MemAvailable_bytes")
        out.append(HostReading(
            machine=m, cpu_count=len(cores.get(m, ())) if "all" not in cores.get(m, ()) else 0,
            cpu_percent=percent, cpu_seconds=seconds, load1=sc.get("node_load1"),
            memory_total_bytes=None if mem_total is None else int(mem_total),
            memory_available_bytes=None if mem_avail is None else int(mem_avail),
            filesystems=tuple(FsReading(mp, dev, fst, int(v.get("node_filesystem_size_bytes", 0)),
                                        int(v.get("node_filesystem_avail_bytes", 0)))
                              for (mp, dev, fst), v in sorted(fs.get(m, {}).items())),
            network=tuple(NetReading(d, int(v.get("node_network_receive_bytes_total", 0)),
                                     int(v.get("node_network_transmit_bytes_total", 0)))
                          for d, v in sorted(net.get(m, {}).items()))))
    return out


def pod_gpu_query(namespace: str, pods: Iterable[str], pod_label: str, namespace_label: str) -> str:
    """DCGM's utilization and framebuffer series of these pods (dcgm-exporter in Kubernetes mode labels a device's
    series with the pod that holds it). Pod names are DNS labels: only ``.`` needs escaping in the regex."""
    alt = "|".join(sorted(p.replace(".", "\\\\.") for p in pods))
    return (f'{{__name__=~"{POD_GPU_NAMES}",{namespace_label}={json.dumps(namespace)},'
            f'{pod_label}=~"{alt}"}}')


def pod_gpus_from(result: Iterable[dict[str, Any]], pod_label: str, namespace_label: str,
                  gpu_label: str) -> dict[tuple[str, str], list[GpuSample]]:
    """Pure: DCGM series with pod labels -> per (namespace, pod) its devices' samples, by DCGM's device index."""
    found: dict[tuple[str, str], dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for s in result:
        labels = s["metric"]
        try:
            key, gpu, value = (labels[namespace_label], labels[pod_label]), int(labels[gpu_label]), float(s["value"][1])
        except (KeyError, ValueError):
            continue
        found[key][gpu][labels.get("__name__", "")] = value
    out = {}
    for key, devs in found.items():
        samples = []
        for i, f in sorted(devs.items()):
            util, used, free = (f.get(f"DCGM_FI_DEV_{n}") for n in ("GPU_UTIL", "FB_USED", "FB_FREE"))
            samples.append(GpuSample(i, None if util is None else int(util), None if used is None else int(used),
                                     None if used is None or free is None else int(used + free)))
        out[key] = samples
    return out


class PrometheusHealthSource(HealthSource):
    """Readings of DCGM's and the node exporter's series through Prometheus's HTTP API (Kubernetes)."""

    reads_prometheus = True  # the ti service's /metrics does not export these readings again

    url = Unicode("", config=True, help="Prometheus's base URL, e.g. http://prometheus-server.monitoring:9090")
    bearer_token_file = Unicode(
        "", config=True, help="A file holding a bearer token for Prometheus (e.g. behind an authenticating "
                              "proxy); empty: none.")
    gpu_host_label = Unicode("Hostname", config=True,
                             help="The label of DCGM's series that names the machine (DCGM: Hostname; a site's "
                                  "relabeling may set another, e.g. node).")
    gpu_index_label = Unicode("gpu", config=True, help="The label of DCGM's series with the GPU's index.")
    gpu_pod_label = Unicode("pod", config=True,
                            help="The label of DCGM's series naming the pod that holds the device (dcgm-exporter "
                                 "in Kubernetes mode); 'exported_pod' where Prometheus's scrape renamed it (its "
                                 "own pod label won: honor_labels off).")
    gpu_namespace_label = Unicode("namespace", config=True,
                                  help="The label of DCGM's series with that pod's namespace ('exported_namespace' "
                                       "where the scrape renamed it).")
    host_label = Unicode("instance", config=True,
                         help="The label of the node exporter's series that names the machine; 'instance' drops "
                              "its :port. Often 'node' where relabeling sets it.")
    timeout = Float(10.0, config=True, help="Seconds a query to Prometheus may take.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.previous: dict[str, HostReading] = {}

    async def query(self, promql: str) -> list[dict[str, Any]]:
        from tornado.httpclient import AsyncHTTPClient

        headers = {}
        if self.bearer_token_file:
            headers["Authorization"] = "Bearer " + Path(self.bearer_token_file).read_text().strip()
        r = await AsyncHTTPClient().fetch(f"{self.url.rstrip('/')}/api/v1/query?{urlencode({'query': promql})}",
                                          headers=headers, request_timeout=self.timeout)
        doc = json.loads(r.body)
        if doc.get("status") != "success":
            raise RuntimeError(f"Prometheus answered {doc.get('status')}: {doc.get('error')}")
        return doc["data"]["result"]

    async def pod_gpus(self, namespace: str, pods: Iterable[str]) -> dict[tuple[str, str], list[GpuSample]]:
        """Per pod of ``namespace`` (of ``pods``), its devices' use now, from DCGM's series with pod labels; a pod
        Prometheus has no series of is absent. Raises when Prometheus cannot be read."""
        pods = set(pods)
        if not pods:
            return {}
        result = await self.query(pod_gpu_query(namespace, pods, self.gpu_pod_label, self.gpu_namespace_label))
        return pod_gpus_from(result, self.gpu_pod_label, self.gpu_namespace_label, self.gpu_index_label)

    async def read(self, nodes: list[NodeCapacity], now: float) -> Snapshot:
        try:
            gpus, hosts = await self.query(DCGM_QUERY), await self.query(NODE_QUERY)
        except Exception as e:  # noqa: BLE001 - a sample with nothing measured, said once per sample
            self.log.warning("reading health from Prometheus at %s failed: %s", self.url, e)
            gpus, hosts = [], []
        readings = hosts_from(hosts, (machine_of(n) for n in nodes), self.host_label, self.previous)
        self.previous = {h.machine: h for h in readings}
        return Snapshot(now, tuple(readings), tuple(devices_from(gpus, nodes, self.gpu_host_label,
                                                                 self.gpu_index_label)))
