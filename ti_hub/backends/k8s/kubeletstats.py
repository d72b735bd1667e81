"""What the kubelet says each pod has used, from its Prometheus text (pure; the reading is kubeletread.py).

Two of the kubelet's endpoints, read through the API server's node proxy:

- ``/metrics/resource`` (what metrics-server reads): ``container_cpu_usage_seconds_total`` and
  ``container_memory_working_set_bytes`` per ``{namespace, pod, container}``; a pod's CPU seconds are the sum
  over its containers (a container that restarted starts its counter again: the sum drops, which the idle
  policy and Prometheus take as a reset).
- ``/metrics/cadvisor``: ``container_network_{receive,transmit}_bytes_total`` per interface of the pod's network
  namespace, found on the pod-level series (``container=""``, the pod's cgroup; ``container="POD"``, the pause
  container, where a runtime reports that instead), and ``container_fs_{reads,writes}_bytes_total`` per device,
  the pod-level series where there is one, else the sum of its containers'.

A pod or figure the text does not have is absent from the result (unknown), never 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

PodKey = tuple[str, str]  # (namespace, pod)

CPU = "container_cpu_usage_seconds_total"
MEMORY = "container_memory_working_set_bytes"
NET_RX, NET_TX = "container_network_receive_bytes_total", "container_network_transmit_bytes_total"
FS_READ, FS_WRITE = "container_fs_reads_bytes_total", "container_fs_writes_bytes_total"
RESOURCE_NAMES = (CPU, MEMORY)
CADVISOR_NAMES = (NET_RX, NET_TX, FS_READ, FS_WRITE)
POD_LEVEL = ("", "POD")  # the pod's own cgroup; the pause container (dockershim, some CRI runtimes)

@dataclass(frozen=True)
class PodUsage:
    """One pod's figures; None: the kubelet did not report it."""

    cpu_seconds: float | None = None
    memory_bytes: int | None = None
    network: tuple[int, int] | None = None  # received, sent
    disk: tuple[int, int] | None = None  # read, written
    at_ms: int | None = None  # the kubelet's timestamp of the cAdvisor figures (for rates), when it gave one


def samples(text: str, names: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str], float, int | None]]:
    """(name, labels, value, timestamp in ms or None) of every sample of the families ``names`` in Prometheus
    text, read by prometheus_client's parser; other lines are skipped without being parsed (a busy node's
    cAdvisor text runs to megabytes), and so is a line the parser cannot read."""
    for line in text.splitlines():
        if not line.startswith(names):
            continue
        try:
            found = [s for family in text_string_to_metric_families(line) for s in family.samples]
        except ValueError:
            continue
        for sample in found:
            if sample.name in names:
                at = None if sample.timestamp is None else round(float(sample.timestamp) * 1000)
                yield sample.name, sample.labels, float(sample.value), at


def _key(labels: dict[str, str]) -> PodKey | None:
    ns, pod = labels.get("namespace"), labels.get("pod")
    return (ns, pod) if ns and pod else None


def resource_usage(text: str) -> dict[PodKey, PodUsage]:
    """Per pod: CPU seconds and working-set bytes summed over its containers (``/metrics/resource``)."""
    cpu: dict[PodKey, float] = defaultdict(float)
    mem: dict[PodKey, float] = defaultdict(float)
    for name, labels, value, _ in samples(text, RESOURCE_NAMES):
        key = _key(labels)
        if key is None or labels.get("container", "") in POD_LEVEL:
            continue
        (cpu if name == CPU else mem)[key] += value
    return {k: PodUsage(cpu_seconds=cpu.get(k), memory_bytes=None if k not in mem else int(mem[k]))
            for k in set(cpu) | set(mem)}


def cadvisor_usage(text: str) -> dict[PodKey, PodUsage]:
    """Per pod: network bytes (its pod-level series, loopback excepted) and disk bytes (pod-level, else its
    containers' summed) from ``/metrics/cadvisor``."""
    # (pod, family) -> container -> (interface or device) -> value; a series per (container, interface/device)
    seen: dict[tuple[PodKey, str], dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    stamp: dict[PodKey, int] = {}
    for name, labels, value, at in samples(text, CADVISOR_NAMES):
        key = _key(labels)
        if key is None:
            continue
        container = labels.get("container", "")
        if name in (NET_RX, NET_TX):
            if container not in POD_LEVEL or labels.get("interface") == "lo":
                continue
            where = labels.get("interface", "")
        else:
            where = labels.get("device", "")
        seen[(key, name)][container][where] = value
        if at is not None:
            stamp[key] = max(stamp.get(key, 0), at)

    def net(key: PodKey, name: str) -> float | None:
        by = seen.get((key, name))
        if not by:
            return None
        got = by.get("") or by.get("POD")  # one network namespace: the pod cgroup's view, else the pause's
        return None if got is None else sum(got.values())

    def disk(key: PodKey, name: str) -> float | None:
        by = seen.get((key, name))
        if not by:
            return None
        if "" in by:
            return sum(by[""].values())
        return sum(sum(v.values()) for c, v in by.items() if c != "POD")

    out = {}
    for key in {k for k, _ in seen}:
        rx, tx = net(key, NET_RX), net(key, NET_TX)
        rd, wr = disk(key, FS_READ), disk(key, FS_WRITE)
        out[key] = PodUsage(network=None if rx is None or tx is None else (int(rx), int(tx)),
                            disk=None if rd is None or wr is None else (int(rd), int(wr)), at_ms=stamp.get(key))
    return out


def pod_cpu_seconds(usage: dict[PodKey, PodUsage], pods: dict[int, PodKey]) -> dict[int, float]:
    """``pods``: id -> its pod; the ids whose pod's CPU seconds were reported (the others are unknown)."""
    return {i: u.cpu_seconds for i, key in pods.items()
            if (u := usage.get(key)) is not None and u.cpu_seconds is not None}
