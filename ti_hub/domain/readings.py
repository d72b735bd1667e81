"""One health sample: readings of devices and hosts, as plain frozen dataclasses (pure; JSON in and out).

A device reading names the device the way the scheduler places it (capacity node, device type, index), so
that a reading joins a job's placement directly; ``machine`` is the physical host it sits in (the embedded
platform splits one machine into a capacity node per VC slice; on Kubernetes node and machine are the same).
Every measured field may be None: not every source measures everything (demo devices measure nothing).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class DeviceReading:
    node: str  # capacity node, as in NodeCapacity.name and a job's placement
    device_type: str
    device: int  # index on the node, as in NodeCapacity.devices and placement "devices"
    machine: str = ""  # physical host ("" = same as node)
    uuid: str = ""
    utilization_percent: float | None = None  # DCGM_FI_DEV_GPU_UTIL
    memory_used_bytes: int | None = None  # DCGM_FI_DEV_FB_USED is MiB; bytes here, converted on export
    memory_total_bytes: int | None = None
    ecc_uncorrectable: int | None = None  # volatile double-bit errors (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)
    temperature_c: float | None = None  # DCGM_FI_DEV_GPU_TEMP
    power_watts: float | None = None  # DCGM_FI_DEV_POWER_USAGE

    @property
    def host(self) -> str:
        return self.machine or self.node


@dataclass(frozen=True)
class FsReading:
    mountpoint: str
    device: str = ""
    fstype: str = ""
    size_bytes: int = 0
    avail_bytes: int = 0

    @property
    def used_percent(self) -> float:
        return 0.0 if self.size_bytes <= 0 else 100.0 * (self.size_bytes - self.avail_bytes) / self.size_bytes


@dataclass(frozen=True)
class NetReading:
    device: str
    rx_bytes: int = 0  # counters since boot (node_network_receive_bytes_total)
    tx_bytes: int = 0


@dataclass(frozen=True)
class HostReading:
    machine: str
    address: str = ""  # the address users and admins reach it at (first non-loopback IPv4 here)
    cpu_count: int = 0
    cpu_percent: float | None = None  # busy share of all cores since the previous reading, 0-100
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # mode -> seconds, all cores (node_cpu_seconds_total)
    load1: float | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    filesystems: tuple[FsReading, ...] = ()
    network: tuple[NetReading, ...] = ()

    @property
    def memory_used_percent(self) -> float | None:
        if not self.memory_total_bytes or self.memory_available_bytes is None:
            return None
        return 100.0 * (self.memory_total_bytes - self.memory_available_bytes) / self.memory_total_bytes


@dataclass(frozen=True)
class Snapshot:
    at: float  # epoch seconds (the sampler's injected clock)
    hosts: tuple[HostReading, ...] = ()
    devices: tuple[DeviceReading, ...] = ()

    def device(self, node: str, device_type: str, index: int) -> DeviceReading | None:
        for d in self.devices:
            if d.node == node and d.device_type == device_type and d.device == index:
                return d
        return None

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "hosts": [asdict(h) for h in self.hosts], "devices": [asdict(d) for d in self.devices]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Snapshot:
        return cls(float(doc.get("at") or 0.0), tuple(host_from_json(h) for h in doc.get("hosts") or ()),
                   tuple(device_from_json(d) for d in doc.get("devices") or ()))


def _known(kind: type, doc: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in doc.items() if k in names}


def device_from_json(doc: dict[str, Any]) -> DeviceReading:
    return DeviceReading(**_known(DeviceReading, doc))


def host_from_json(doc: dict[str, Any]) -> HostReading:
    d = _known(HostReading, doc)
    d["filesystems"] = tuple(FsReading(**_known(FsReading, f)) for f in d.get("filesystems") or ())
    d["network"] = tuple(NetReading(**_known(NetReading, n)) for n in d.get("network") or ())
    d["cpu_seconds"] = {str(k): float(v) for k, v in (d.get("cpu_seconds") or {}).items()}
    return HostReading(**d)
