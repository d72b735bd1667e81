"""Readings from Prometheus's answers (pure parts of ti_hub/health/promsource.py): DCGM's and the node exporter's
series mapped onto capacity nodes."""

from __future__ import annotations

from ti_hub.backends.base import NodeCapacity
from ti_hub.health.promsource import devices_from, host_name, hosts_from
from ti_hub.domain.readings import HostReading


def series(name, value, **labels):
    return {"metric": {"__name__": name, **labels}, "value": [1.0, str(value)]}


def test_dcgm_series_become_device_readings_of_the_capacity_nodes():
    nodes = [NodeCapacity("n1", "default", {"A100": [0, 1]}, 8, 1000)]
    gpu0 = {"Hostname": "n1", "gpu": "0", "UUID": "GPU-a"}
    result = [series("DCGM_FI_DEV_GPU_UTIL", 37, **gpu0), series("DCGM_FI_DEV_FB_USED", 1024, **gpu0),
              series("DCGM_FI_DEV_FB_FREE", 3072, **gpu0), series("DCGM_FI_DEV_GPU_TEMP", 61, **gpu0),
              series("DCGM_FI_DEV_POWER_USAGE", 250.5, **gpu0), series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 2, **gpu0),
              series("DCGM_FI_DEV_GPU_UTIL", 99, Hostname="elsewhere", gpu="0")]
    d0, d1 = devices_from(result, nodes, "Hostname", "gpu")
    assert (d0.node, d0.device_type, d0.device, d0.uuid) == ("n1", "A100", 0, "GPU-a")
    assert d0.utilization_percent == 37 and d0.memory_used_bytes == 1 << 30 and d0.memory_total_bytes == 4 << 30
    assert d0.temperature_c == 61 and d0.power_watts == 250.5 and d0.ecc_uncorrectable == 2
    # no series for GPU 1: nothing measured, not zeros
    assert (d1.device, d1.utilization_percent, d1.memory_used_bytes) == (1, None, None)


ROOT_FS = {"mountpoint": "/", "device": "sda", "fstype": "ext4"}


def test_node_exporter_series_become_host_readings():
    per_core = [series("node_cpu_seconds_total", v, instance="n1:9100", cpu=c, mode=mode)
                for c in ("0", "1") for mode, v in (("idle", 100.0), ("user", 50.0))]
    result = [*per_core, series("node_memory_MemTotal_bytes", 8e9, instance="n1:9100"),
              series("node_memory_MemAvailable_bytes", 6e9, instance="n1:9100"),
              series("node_filesystem_size_bytes", 1000, instance="n1:9100", **ROOT_FS),
              series("node_filesystem_avail_bytes", 400, instance="n1:9100", **ROOT_FS),
              series("node_network_receive_bytes_total", 5, instance="n1:9100", device="eth0"),
              series("node_network_transmit_bytes_total", 7, instance="n1:9100", device="eth0"),
              series("node_load1", 1.5, instance="n1:9100")]
    before = HostReading("n1", cpu_seconds={"idle": 150.0, "user": 50.0})
    (h,) = hosts_from(result, ["n1"], "instance", {"n1": before})
    assert h.cpu_seconds == {"idle": 200.0, "user": 100.0} and h.cpu_count == 2
    assert h.cpu_percent == 50.0  # 100 s passed, 50 of them busy
    assert (h.memory_total_bytes, h.memory_available_bytes, h.load1) == (8_000_000_000, 6_000_000_000, 1.5)
    assert [(f.mountpoint, f.size_bytes, f.avail_bytes) for f in h.filesystems] == [("/", 1000, 400)]
    assert [(n.device, n.rx_bytes, n.tx_bytes) for n in h.network] == [("eth0", 5, 7)]
    (first,) = hosts_from(result, ["n1"], "instance")
    assert first.cpu_percent is None  # no earlier reading: no rate
    (unknown,) = hosts_from(result, ["n2"], "instance")
    assert unknown.memory_total_bytes is None and unknown.filesystems == ()


def test_instance_loses_its_port_only():
    assert host_name({"instance": "n1:9100"}, "instance") == "n1"
    assert host_name({"instance": "fe80::1"}, "instance") == "fe80::1"
    assert host_name({"node": "n1:x"}, "node") == "n1:x"
