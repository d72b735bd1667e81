"""Device and host health of one Snapshot in the series names of NVIDIA's DCGM exporter and the Prometheus node
exporter (pure), so that dashboards and rules written for those exporters read TiHub's embedded platform too.

Only measured values become samples: a reading's None (not measured: demo devices, a failed NVML call) is no
sample at all, never a 0. Labels as DCGM's (gpu, UUID, Hostname, modelName) plus TiHub's node and device_type;
node exporter series carry ``machine`` (the instance), as a scrape of one exporter per machine would.
"""

from __future__ import annotations

from collections.abc import Iterator

from .text import Family, render

from ..domain.readings import Snapshot

MIB = 1 << 20
DCGM_LABELS = ["gpu", "UUID", "Hostname", "modelName", "node", "device_type"]


def dcgm_families(snap: Snapshot) -> Iterator[Family]:
    util = Family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels=DCGM_LABELS)
    used = Family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels=DCGM_LABELS)
    free = Family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels=DCGM_LABELS)
    temp = Family("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", labels=DCGM_LABELS)
    power = Family("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", labels=DCGM_LABELS)
    # DCGM's exporter types it a counter without the _total suffix; a gauge keeps the name exactly
    ecc = Family("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
                            labels=DCGM_LABELS)
    for d in snap.devices:
        labels = [str(d.device), d.uuid, d.host, d.device_type, d.node, d.device_type]
        if d.utilization_percent is not None:
            util.add(labels, d.utilization_percent)
        if d.memory_used_bytes is not None:
            used.add(labels, d.memory_used_bytes / MIB)
            if d.memory_total_bytes is not None:
                free.add(labels, max(0, d.memory_total_bytes - d.memory_used_bytes) / MIB)
        if d.temperature_c is not None:
            temp.add(labels, d.temperature_c)
        if d.power_watts is not None:
            power.add(labels, d.power_watts)
        if d.ecc_uncorrectable is not None:
            ecc.add(labels, d.ecc_uncorrectable)
    yield from (util, used, free, temp, power, ecc)


def node_families(snap: Snapshot) -> Iterator[Family]:
    cpu = Family("node_cpu_seconds_total", "Seconds the CPUs spent in each mode, summed over all the "
                              "machine's cores (cpu=\"all\"; the node exporter has one series per core).",
                              labels=["machine", "cpu", "mode"], type_="counter")
    mem_total = Family("node_memory_MemTotal_bytes", "Memory information field MemTotal_bytes.",
                                  labels=["machine"])
    mem_avail = Family("node_memory_MemAvailable_bytes", "Memory information field "
                                  "MemAvailable_bytes.", labels=["machine"])
    fs_labels = ["machine", "mountpoint", "device", "fstype"]
    fs_size = Family("node_filesystem_size_bytes", "Filesystem size in bytes.", labels=fs_labels)
    fs_avail = Family("node_filesystem_avail_bytes", "Filesystem space available to non-root users in "
                                 "bytes.", labels=fs_labels)
    rx = Family("node_network_receive_bytes_total", "Network device statistic receive_bytes.",
                             labels=["machine", "device"], type_="counter")
    tx = Family("node_network_transmit_bytes_total", "Network device statistic transmit_bytes.",
                             labels=["machine", "device"], type_="counter")
    load1 = Family("node_load1", "1m load average.", labels=["machine"])
    for h in snap.hosts:
        for mode, seconds in sorted(h.cpu_seconds.items()):
            cpu.add([h.machine, "all", mode], seconds)
        if h.memory_total_bytes is not None:
            mem_total.add([h.machine], h.memory_total_bytes)
        if h.memory_available_bytes is not None:
            mem_avail.add([h.machine], h.memory_available_bytes)
        for f in h.filesystems:
            labels = [h.machine, f.mountpoint, f.device, f.fstype]
            fs_size.add(labels, f.size_bytes)
            fs_avail.add(labels, f.avail_bytes)
        for n in h.network:
            rx.add([h.machine, n.device], n.rx_bytes)
            tx.add([h.machine, n.device], n.tx_bytes)
        if h.load1 is not None:
            load1.add([h.machine], h.load1)
    yield from (cpu, mem_total, mem_avail, fs_size, fs_avail, rx, tx, load1)


def health_text(snap: Snapshot) -> str:
    """The exposition text of one snapshot's health series (the exporter keeps it until the next sample)."""
    return render([*dcgm_families(snap), *node_families(snap)])
