"""FAKE kubelet usage figures for KWOK nodes (no kubelet runs on them): KWOK's ``Metric`` resources answer the
kubelet's ``/metrics/resource`` and ``/metrics/cadvisor`` for the API server's node proxy, with CEL expressions
over each pod's usage, which a ``ClusterResourceUsage`` takes from the pod's annotations (per second; counters
are KWOK's integral of them since the node was first read). TiHub reads them as it reads a real kubelet.

KWOK serves a path of all its nodes from one route: a ``Metric`` named after a node serves that node's pods, so
one node answers ``/metrics/resource`` (RESOURCE_NODE) and another ``/metrics/cadvisor`` (CADVISOR_NODE); the
other path of each node answers with the other node's pods (none of the pods asked about). A real kubelet's
answer is issue 33's test (a real node).
"""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .cluster import FakeNode

RESOURCE_NODE, CADVISOR_NODE = "usage-res-0", "usage-cad-0"
ANN = "kwok.ti-hub.io/usage-"  # + cpu (cores), memory, net-rx, net-tx, disk-read, disk-write (bytes per second)
DEFAULTS = {"cpu": "1m", "memory": "64Mi", "net-rx": "0", "net-tx": "0", "disk-read": "0", "disk-write": "0"}

POD = [{"name": "namespace", "value": "pod.metadata.namespace"}, {"name": "pod", "value": "pod.metadata.name"}]
CONTAINER = [{"name": "container", "value": "container.name"}, *POD]


def _usage_expr(name: str) -> str:
    key = ANN + name
    return (f'"{key}" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["{key}"]) '
            f': Quantity("{DEFAULTS[name]}")')


def kwok_docs() -> list[dict]:
    """The KWOK configuration documents (LocalCluster's ``kwok_docs``)."""
    usage = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterResourceUsage",
             "metadata": {"name": "ti-test-usage"},
             "spec": {"usages": [{"usage": {n: {"expression": _usage_expr(n)} for n in DEFAULTS}}]}}
    resource = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Metric", "metadata": {"name": RESOURCE_NODE},
                "spec": {"path": "/metrics/resource", "metrics": [
                    {"name": "container_cpu_usage_seconds_total", "dimension": "container", "kind": "counter",
                     "help": "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
                     "labels": CONTAINER, "value": 'pod.CumulativeUsage("cpu", container.name)'},
                    {"name": "container_memory_working_set_bytes", "dimension": "container", "kind": "gauge",
                     "help": "[STABLE] Current working set of the container in bytes",
                     "labels": CONTAINER, "value": 'pod.Usage("memory", container.name)'},
                    {"name": "pod_cpu_usage_seconds_total", "dimension": "pod", "kind": "counter",
                     "help": "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
                     "labels": POD, "value": 'pod.CumulativeUsage("cpu")'},
                    {"name": "scrape_error", "dimension": "node", "kind": "gauge", "help": "[ALPHA] scrape error",
                     "value": "0"}]}}

    def net(name: str, resource: str, interface: str, factor: int = 1) -> dict:
        # pod-level (container="", the pod's cgroup), per interface, as cAdvisor gives them
        return {"name": name, "dimension": "pod", "kind": "counter", "help": "Cumulative count of bytes",
                "labels": [{"name": "container", "value": '""'}, {"name": "interface", "value": f'"{interface}"'},
                           *POD],
                "value": f'pod.CumulativeUsage("{resource}") * {factor}.0'}

    def fs(name: str, resource: str) -> dict:
        # per container and device (no pod-level series: the sum of the containers' is the pod's)
        return {"name": name, "dimension": "container", "kind": "counter", "help": "Cumulative count of bytes",
                "labels": [*CONTAINER, {"name": "device", "value": '"/dev/vda"'}],
                "value": f'pod.CumulativeUsage("{resource}", container.name)'}

    cadvisor = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Metric", "metadata": {"name": CADVISOR_NODE},
                "spec": {"path": "/metrics/cadvisor", "metrics": [
                    net("container_network_receive_bytes_total", "net-rx", "eth0"),
                    net("container_network_transmit_bytes_total", "net-tx", "eth0"),
                    # loopback traffic is not the pod's network use: TiHub leaves it out
                    net("container_network_receive_bytes_total", "net-rx", "lo", 7),
                    fs("container_fs_reads_bytes_total", "disk-read"),
                    fs("container_fs_writes_bytes_total", "disk-write")]}}
    return [usage, resource, cadvisor]


# -- the way from the API server to KWOK --------------------------------------------------------------------------
# The API server's node proxy refuses loopback addresses ("address not allowed"), and the test cluster's KWOK nodes
# have 127.0.0.1 (cluster.py). The usage nodes get this machine's own address instead, where a relay passes the two
# paths above, and nothing else (no exec, no logs), on to KWOK's server. The relay is plumbing: the figures are KWOK's.

def machine_address() -> str | None:
    """This machine's first global IPv4 address (None: it has none)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            return parts[parts.index("inet") + 1].split("/")[0]
    return None


@dataclass
class RelayedNode(FakeNode):
    address: str = ""

    def manifest(self) -> dict:
        m = super().manifest()
        # KWOK keeps the addresses a node has (its node-initialize stage adds only missing ones); the API server
        # goes to a node's Hostname first, which no DNS here resolves: the address as its host name
        m["status"]["addresses"] = [{"type": "InternalIP", "address": self.address},
                                    {"type": "Hostname", "address": self.address}]
        return m


class Relay:
    """HTTPS on ``address:port`` (the port KWOK gives every node as its kubelet's) to KWOK's server on
    127.0.0.1:port, for GET of RELAYED paths only."""

    RELAYED = ("/metrics/resource", "/metrics/cadvisor")

    def __init__(self, address: str, port: int, cert: Path, key: Path):
        target = f"https://127.0.0.1:{port}"
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE  # KWOK's cert (the test PKI's)
        relayed = self.RELAYED

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if self.path.split("?")[0] not in relayed:
                    self.send_error(404)
                    return
                try:
                    with urllib.request.urlopen(target + self.path, context=insecure, timeout=10) as r:
                        status, body, ctype = r.status, r.read(), r.headers.get("Content-Type", "text/plain")
                except urllib.error.HTTPError as e:
                    status, body, ctype = e.code, e.read(), "text/plain"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((address, port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Relay:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
