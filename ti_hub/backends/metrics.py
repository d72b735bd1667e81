"""Resource use of a running job's instances: what GET /jobs/{id}/metrics answers and the monitors show.

Pure parts (CPU rates from two samples, Kubernetes usage quantities, the JSON shape) and one thin reader of
NVIDIA's NVML for the devices an instance holds. CPU is given as cores in use (1.5 = one and a half cores
busy), measured over a short window; memory as resident bytes (the local backend sums its processes' RSS,
counting shared pages more than once; Kubernetes gives the containers' working set).
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
class InstanceMetrics:
    instance: int
    cpu_cores: float | None = None
    memory_bytes: int | None = None
    gpus: tuple[GpuSample, ...] | None = None  # None: not measurable here (no NVML, or no devices)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance,
                "cpu_cores": None if self.cpu_cores is None else round(self.cpu_cores, 3),
                "memory_bytes": self.memory_bytes,
                "gpus": None if self.gpus is None else [g.__dict__ for g in self.gpus],
                "note": self.note}


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


def summary(m: dict[str, Any]) -> str:
    """One instance's metrics in a line: ``CPU 1.52 cores · memory 812 MiB · GPU0 87% 10240/40960 MiB``."""
    parts = []
    if m.get("cpu_cores") is not None:
        parts.append(f"CPU {m['cpu_cores']:.2f} cores")
    if m.get("memory_bytes") is not None:
        parts.append(f"memory {int(m['memory_bytes']) >> 20} MiB")
    for g in m.get("gpus") or []:
        util = "?" if g.get("utilization_percent") is None else f"{g['utilization_percent']}%"
        parts.append(f"GPU{g['index']} {util} {g.get('memory_used_mib', '?')}/{g.get('memory_total_mib', '?')} MiB")
    return " · ".join(parts) or (m.get("note") or "no metrics")
