"""Resource use of a running job's instances: what GET /jobs/{id}/metrics answers and the monitors show.

Pure parts (CPU rates from two samples, Kubernetes usage quantities, the JSON shape) and one thin reader of
NVIDIA's NVML for the devices an instance holds. CPU is given as cores in use (1.5 = one and a half cores
busy), measured over a short window; memory as resident bytes (the local backend sums its processes' RSS,
counting shared pages more than once; Kubernetes gives the containers' working set). Disk I/O and network as
totals (bytes so far) and rates (bytes/s over the same window): disk as the kernel's per-process storage
accounting (``/proc/PID/io``), network as the counters of the job's own network namespace (the embedded
platform; its instances share one, so instance 0 carries it); on Kubernetes both are each pod's, from its kubelet's
cAdvisor (backends/k8s/usage.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization_percent: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None


@dataclass(frozen=True)
class Traffic:
    """Bytes one way and the other: so far, and per second over the sampling window."""

    read_bytes: int  # disk: read from storage; network: received
    write_bytes: int  # disk: sent to storage; network: sent
    read_rate: float
    write_rate: float

    def disk_json(self) -> dict[str, Any]:
        return {"read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
                "read_bytes_per_s": round(self.read_rate, 1), "write_bytes_per_s": round(self.write_rate, 1)}

    def net_json(self) -> dict[str, Any]:
        return {"rx_bytes": self.read_bytes, "tx_bytes": self.write_bytes,
                "rx_bytes_per_s": round(self.read_rate, 1), "tx_bytes_per_s": round(self.write_rate, 1)}


@dataclass(frozen=True)
class InstanceMetrics:
    instance: int
    cpu_cores: float | None = None
    memory_bytes: int | None = None
    gpus: tuple[GpuSample, ...] | None = None  # None: not measurable here (no NVML, or no devices)
    note: str = ""
    disk: Traffic | None = None  # None: not measured by this backend
    network: Traffic | None = None  # None: not measured (a network shared with the host, or another instance's)

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance,
                "cpu_cores": None if self.cpu_cores is None else round(self.cpu_cores, 3),
                "memory_bytes": self.memory_bytes,
                "gpus": None if self.gpus is None else [g.__dict__ for g in self.gpus],
                "disk": None if self.disk is None else self.disk.disk_json(),
                "network": None if self.network is None else self.network.net_json(),
                "note": self.note}


@dataclass(frozen=True)
class InstanceTotals:
    """What a running instance has used so far, for Prometheus counters (its rates are PromQL's ``rate()``)."""

    instance: int
    cpu_seconds: float | None  # None (here and below): not measured (a kubelet that did not report it)
    memory_bytes: int | None
    disk: tuple[int, int] | None  # read, written
    network: tuple[int, int] | None  # received, sent


def traffic(before: tuple[int, int] | None, after: tuple[int, int], seconds: float) -> Traffic:
    """Totals from the second sample, rates from the difference (a drop, when a process that counted ended
    without a parent in the job to inherit its counts, is clamped to 0)."""
    before = before or after
    rate = (lambda a, b: max(0, b - a) / seconds) if seconds > 0 else (lambda a, b: 0.0)
    return Traffic(after[0], after[1], rate(before[0], after[0]), rate(before[1], after[1]))


def parse_proc_io(text: str) -> tuple[int, int]:
    """(read_bytes, write_bytes) of /proc/PID/io: what the process (with its reaped children) made the kernel read
    from or send to storage; page-cache hits and writes to tmpfs count nothing."""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields.get("read_bytes", 0)), int(fields.get("write_bytes", 0))


def parse_net_dev(text: str) -> tuple[int, int]:
    """(received, sent) bytes summed over the interfaces of /proc/PID/net/dev except the loopback."""
    rx = tx = 0
    for line in text.splitlines()[2:]:  # two header lines
        name, sep, rest = line.partition(":")
        cols = rest.split()
        if not sep or name.strip() == "lo" or len(cols) < 9:
            continue
        rx, tx = rx + int(cols[0]), tx + int(cols[8])
    return rx, tx


def cpu_cores(ticks_before: int, ticks_after: int, seconds: float, clk_tck: int = CLK_TCK) -> float:
    """Cores busy between two samples of summed CPU time (clock ticks); processes that ended in between take
    their ticks with them, so a drop is clamped to 0."""
    if seconds <= 0:
        return 0.0
    return max(0, ticks_after - ticks_before) / clk_tck / seconds


def kube_instance_metrics(index: int, pod_metrics: dict[str, Any] | None, container: str) -> InstanceMetrics:
    """One instance from its pod's PodMetrics (metrics.k8s.io): the named container's usage."""
    from .k8s.capacity import parse_quantity

    if not pod_metrics:
        return InstanceMetrics(index, note="no usage reported for this pod yet (metrics-server samples every 15 s "
                                           "or so)")
    for c in pod_metrics.get("containers") or []:
        if c.get("name") == container:
            usage = c.get("usage") or {}
            cpu, mem = usage.get("cpu"), usage.get("memory")
            return InstanceMetrics(index, float(parse_quantity(cpu)) if cpu else None,
                                   int(parse_quantity(mem)) if mem else None,
                                   note="averaged by metrics-server over its last window")
    return InstanceMetrics(index, note=f"no usage for container {container!r}")


def nvml_samples(indices: list[int]) -> tuple[GpuSample, ...] | None:
    """Utilization and memory of these devices, or None where NVML cannot be read (no NVIDIA driver, or
    devices that are not this machine's NVML indices: the embedded platform's configured demo devices)."""
    if not indices:
        return None
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound and friends: no NVIDIA driver here
        return None
    try:
        count = pynvml.nvmlDeviceGetCount()
        out = []
        for i in indices:
            if not 0 <= i < count:
                return None
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out.append(GpuSample(i, int(util.gpu), int(mem.used) >> 20, int(mem.total) >> 20))
        return tuple(out)
    except Exception:  # noqa: BLE001 - a device that went away mid-read
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def size(n: float) -> str:
    """Bytes in the largest unit that keeps a number >= 1: ``812 B``, ``3.4 KiB``, ``12.0 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def summary(m: dict[str, Any]) -> str:
    """One instance's metrics in a line: ``CPU 1.52 cores · memory 812 MiB · GPU0 87% 10240/40960 MiB · disk read
    0 B/s write 1.2 MiB/s · network in 3.4 KiB/s out 812 B/s``."""
    parts = []
    if m.get("cpu_cores") is not None:
        parts.append(f"CPU {m['cpu_cores']:.2f} cores")
    if m.get("memory_bytes") is not None:
        parts.append(f"memory {int(m['memory_bytes']) >> 20} MiB")
    for g in m.get("gpus") or []:
        util = "?" if g.get("utilization_percent") is None else f"{g['utilization_percent']}%"
        parts.append(f"GPU{g['index']} {util} {g.get('memory_used_mib', '?')}/{g.get('memory_total_mib', '?')} MiB")
    if m.get("disk"):
        d = m["disk"]
        parts.append(f"disk read {size(d['read_bytes_per_s'])}/s write {size(d['write_bytes_per_s'])}/s")
    if m.get("network"):
        n = m["network"]
        parts.append(f"network in {size(n['rx_bytes_per_s'])}/s out {size(n['tx_bytes_per_s'])}/s")
    return " · ".join(parts) or (m.get("note") or "no metrics")
