"""Where readings come from. A source turns the scheduler's view of the machines (capacity nodes) into one
Snapshot; the sampler (monitor.py) calls ``read`` from the leader, once per ``HealthMonitor.interval``.

``LocalHealthSource`` (the embedded platform) reads this machine: the host through psutil, the devices through
NVIDIA's NVML, where a device index is the NVML index (that is how the local backend finds GPUs). Demo devices
and machines without the NVIDIA driver give device readings with nothing measured (None), never made-up numbers.
Reading blocks (NVML and /proc): it runs in a thread.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from traitlets import List, Unicode
from traitlets.config import LoggingConfigurable

from ..backends.base import NodeCapacity, machine_of
from ..domain.readings import DeviceReading, FsReading, HostReading, NetReading, Snapshot

class HealthSource(LoggingConfigurable):
    """Base class: one snapshot of the given capacity nodes."""

    async def read(self, nodes: list[NodeCapacity], now: float) -> Snapshot:
        raise NotImplementedError


def nvml_read(indices: Iterable[int]) -> dict[int, dict[str, Any]]:
    """NVML readings by device index; {} without the driver. Only this function touches NVML (it cannot run in
    CI: no GPU there), so it stays thin; everything that uses its figures is tested with the test source."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ImportError: no GPU here
        return {}
    out: dict[int, dict[str, Any]] = {}
    try:
        count = pynvml.nvmlDeviceGetCount()
        for i in sorted(set(indices)):
            if not 0 <= i < count:
                continue
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            r: dict[str, Any] = {}
            for key, read in (
                    ("uuid", lambda: pynvml.nvmlDeviceGetUUID(h)),
                    ("utilization_percent", lambda: float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)),
                    ("memory_used_bytes", lambda: int(pynvml.nvmlDeviceGetMemoryInfo(h).used)),
                    ("memory_total_bytes", lambda: int(pynvml.nvmlDeviceGetMemoryInfo(h).total)),
                    ("ecc_uncorrectable", lambda: int(pynvml.nvmlDeviceGetTotalEccErrors(
                        h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))),
                    ("temperature_c", lambda: float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))),
                    ("power_watts", lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0)):
                try:
                    value = read()
                    r[key] = value.decode() if isinstance(value, bytes) else value
                except Exception:  # noqa: BLE001 - NVMLError_NotSupported (no ECC on consumer cards, ...)
                    pass
            out[i] = r
    except Exception:  # noqa: BLE001 - a device that went away mid-read: what was read so far stands
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return out


def primary_address() -> str:
    """The first non-loopback IPv4 address of this machine ("" if none): where admins find it."""
    try:
        import psutil
        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family == socket.AF_INET and not a.address.startswith("127."):
                    return a.address
    except Exception:  # noqa: BLE001
        pass
    return ""


def host_reading(machine: str, filesystems: Iterable[str] = ("/",)) -> HostReading:
    """This machine through psutil (blocking, cheap: a few /proc reads)."""
    import psutil

    times = psutil.cpu_times()
    mem = psutil.virtual_memory()
    fss = []
    for path in filesystems:
        try:
            du = psutil.disk_usage(path)
            fss.append(FsReading(path, size_bytes=int(du.total), avail_bytes=int(du.free)))
        except OSError:
            pass
    nets = tuple(NetReading(name, int(c.bytes_recv), int(c.bytes_sent))
                 for name, c in sorted(psutil.net_io_counters(pernic=True).items()) if name != "lo")
    return HostReading(
        machine=machine, address=primary_address(), cpu_count=psutil.cpu_count() or 1,
        cpu_percent=float(psutil.cpu_percent(interval=None)),  # since the previous call: one sampling interval
        cpu_seconds={k: float(v) for k, v in times._asdict().items()},
        load1=float(psutil.getloadavg()[0]),
        memory_total_bytes=int(mem.total), memory_available_bytes=int(mem.available),
        filesystems=tuple(fss), network=nets)


def device_readings(nodes: list[NodeCapacity], nvml: Callable[[Iterable[int]], dict[int, dict[str, Any]]]
                    ) -> list[DeviceReading]:
    wanted = [i for n in nodes for devs in n.devices.values() for i in devs]
    found = nvml(wanted) if wanted else {}
    return [DeviceReading(node=n.name, device_type=t, device=i, machine=machine_of(n), **found.get(i, {}))
            for n in nodes for t, devs in sorted(n.devices.items()) for i in devs]


class LocalHealthSource(HealthSource):
    """This machine: the host through psutil, its devices through NVML (embedded platform)."""

    filesystems = List(
        Unicode(), ["/"], config=True,
        help="Mount points whose size and free space are read (node_filesystem_* series; the disk alert rules).")

    async def read(self, nodes: list[NodeCapacity], now: float) -> Snapshot:
        return await asyncio.to_thread(self.read_now, nodes, now)

    def read_now(self, nodes: list[NodeCapacity], now: float | None = None) -> Snapshot:
        machines = sorted({machine_of(n) for n in nodes}) or [socket.gethostname()]
        # one physical machine on the embedded platform: every slice shares its host reading
        host = host_reading(machines[0], self.filesystems)
        hosts = tuple([host] + [HostReading(**{**host.__dict__, "machine": m}) for m in machines[1:]])
        return Snapshot(time.time() if now is None else now, hosts, tuple(device_readings(nodes, nvml_read)))
