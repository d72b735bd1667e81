"""Job metrics (ti_hub/backends/metrics.py): CPU rates, Kubernetes usage, NVML reads, and how monitors show them."""

from __future__ import annotations

import sys
import types

import pytest

from ti_hub.backends import metrics as mx
from ti_hub.backends.local import procs
from ti_hub.magics import core


def test_cpu_cores_from_two_samples():
    assert mx.cpu_cores(100, 150, 0.5, clk_tck=100) == pytest.approx(1.0)
    assert mx.cpu_cores(100, 400, 1.0, clk_tck=100) == pytest.approx(3.0)
    # a process that ended between the samples took its ticks along: never negative
    assert mx.cpu_cores(500, 100, 1.0, clk_tck=100) == 0.0 and mx.cpu_cores(1, 2, 0.0) == 0.0


def test_proc_stat_reads_cpu_time():
    line = "42 (python3 (x) y) R 1 42 42 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 1 0 987 1000 300 0 0"
    st = procs.parse_stat(line)
    assert (st.pid, st.cpu_ticks, st.start_time, st.rss_bytes) == (42, 1290, 987, 300 * procs.PAGE_SIZE)


def test_kubernetes_usage_of_the_main_container():
    pm = {"containers": [{"name": "sidecar", "usage": {"cpu": "2", "memory": "1Gi"}},
                         {"name": "main", "usage": {"cpu": "1523400000n", "memory": "524288Ki"}}]}
    m = mx.kube_instance_metrics(3, pm, "main")
    assert (m.instance, m.cpu_cores, m.memory_bytes, m.gpus) == (3, pytest.approx(1.5234), 512 << 20, None)
    assert mx.kube_instance_metrics(0, {"containers": [{"name": "main", "usage": {"cpu": "250m"}}]},
                                    "main").cpu_cores == pytest.approx(0.25)
    assert "metrics-server" in mx.kube_instance_metrics(0, None, "main").note
    assert "no usage for container" in mx.kube_instance_metrics(0, pm, "trainer").note


def test_nvml_reads_the_instances_devices(monkeypatch):
    """A FAKE pynvml (no GPU on the machines that run the tests): the calls and what is made of them."""
    calls = []

    class Info:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    fake = types.SimpleNamespace(
        nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlDeviceGetUtilizationRates=lambda h: Info(gpu={"h0": 87, "h1": 3}[h], memory=10),
        nvmlDeviceGetMemoryInfo=lambda h: Info(used=10 << 30, total=40 << 30, free=30 << 30))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    got = mx.nvml_samples([1, 0])
    assert got == (mx.GpuSample(1, 3, 10240, 40960), mx.GpuSample(0, 87, 10240, 40960))
    assert calls == ["init", "shutdown"]
    assert mx.nvml_samples([5]) is None  # not one of this machine's devices (a demo device)
    assert mx.nvml_samples([]) is None

    def no_driver():
        raise RuntimeError("NVML Shared Library Not Found")
    monkeypatch.setattr(fake, "nvmlInit", no_driver)
    assert mx.nvml_samples([0]) is None


def test_monitor_lines_and_html():
    doc = {"instances": [mx.InstanceMetrics(0, 1.234, 52 << 20, (mx.GpuSample(0, 87, 1024, 40960),)).to_json()]}
    assert core.usage_lines(doc) == ("now: CPU 1.23 cores · memory 52 MiB · GPU0 87% 1024/40960 MiB",)
    many = {"instances": [mx.InstanceMetrics(i, 0.5, 1 << 20).to_json() for i in range(10)]}
    lines = core.usage_lines(many)
    assert lines[0] == "instance 0: CPU 0.50 cores · memory 1 MiB" and lines[-1] == "... and 2 more instances"
    assert core.usage_lines(many, instance=4) == ("now: CPU 0.50 cores · memory 1 MiB",)
    assert core.usage_lines({"instances": [mx.InstanceMetrics(0, note="not running").to_json()]}) == (
        "now: not running",)
    running = core.view_of({"id": 1, "name": "x", "status": "running"}, usage=doc)
    assert "usage</span> now: CPU 1.23 cores" in core.render_info(running)
    # an ended job shows no stale usage
    assert core.view_of({"id": 1, "status": "completed"}, usage=doc).usage == ()


NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  900000     100    0    0    0     0          0         0   900000     100    0    0    0     0       0          0
  tap0: 2097152    1500    0    0    0     0          0         0  1048576     800    0    0    0     0       0          0
  eth1:    1000      10    0    0    0     0          0         0       24       1    0    0    0     0       0          0
"""


def test_disk_and_network_counters_and_rates():
    io = "rchar: 6976\nwchar: 10\nsyscr: 10\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 8392704\ncancelled_write_bytes: 0\n"
    assert mx.parse_proc_io(io) == (4096, 8392704)
    assert mx.parse_net_dev(NET_DEV) == (2097152 + 1000, 1048576 + 24)  # the loopback is not the job's traffic
    t = mx.traffic((1000, 0), (3000, 500), 0.5)
    assert (t.read_bytes, t.write_bytes, t.read_rate, t.write_rate) == (3000, 500, 4000.0, 1000.0)
    # a counter that dropped (a process ended with no parent in the job to inherit its counts): rate 0, not < 0
    assert mx.traffic((5000, 5000), (10, 6000), 1.0).read_rate == 0.0
    assert mx.traffic(None, (7, 8), 0.25).read_rate == 0.0 and mx.traffic((0, 0), (7, 8), 0).write_rate == 0.0
    m = mx.InstanceMetrics(0, 0.5, 1 << 20, disk=mx.traffic((0, 0), (0, 3 << 20), 2.0),
                           network=mx.traffic((0, 0), (2048, 100), 1.0)).to_json()
    assert m["disk"] == {"read_bytes": 0, "write_bytes": 3 << 20, "read_bytes_per_s": 0.0,
                         "write_bytes_per_s": 1572864.0}
    assert m["network"] == {"rx_bytes": 2048, "tx_bytes": 100, "rx_bytes_per_s": 2048.0, "tx_bytes_per_s": 100.0}
    assert core.usage_lines({"instances": [m]}) == (
        "now: CPU 0.50 cores · memory 1 MiB · disk read 0 B/s write 1.5 MiB/s · network in 2.0 KiB/s out 100 B/s",)
    assert mx.InstanceMetrics(1).to_json()["network"] is None  # not measured: null, never a 0
    assert [mx.size(n) for n in (0, 1023, 1024, 5 << 30)] == ["0 B", "1023 B", "1.0 KiB", "5.0 GiB"]


def _fs_type(path: str) -> str:
    best, kind = "", ""
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            _dev, where, fstype = line.split()[:3]
            if (path == where or path.startswith(where.rstrip("/") + "/")) and len(where) >= len(best):
                best, kind = where, fstype
    return kind


def test_a_process_tree_reads_its_own_disk_and_network(tmp_path):
    """The readers on this machine's /proc: a child that wrote and fsynced 1 MiB, reaped by its parent, still
    counts in the parent's /proc/PID/io; a namespace is read through a process in it (and only then)."""
    import os
    import subprocess

    f = tmp_path / "x"
    code = ("import os, subprocess, sys, time\n"
            f"subprocess.run([sys.executable, '-c', \"import os; f = open({str(f)!r}, 'wb'); f.write(b'x' * (1 << 20));"
            " f.flush(); os.fsync(f.fileno())\"])\n"
            "print('done', flush=True); time.sleep(30)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "done"
        if not os.path.exists(f"/proc/{p.pid}/io"):
            pytest.skip("this kernel keeps no per-process I/O accounting")
        if _fs_type(str(tmp_path)) == "tmpfs":
            pytest.skip("the temporary directory is in memory (tmpfs): writes there reach no storage")
        assert procs.io_bytes({p.pid})[1] >= 1 << 20
        assert procs.netns_bytes({p.pid}, f"/proc/{os.getpid()}/ns/net") is not None  # the same (host) namespace
        assert procs.netns_bytes({p.pid}, str(tmp_path / "no-ns")) is None
        assert procs.io_bytes({1 << 30}) == (0, 0)  # no such process: nothing, no error
    finally:
        p.kill()
        p.wait()


def test_job_usage_as_prometheus_counters():
    from ti_hub.metrics.jobusage import job_usage_text

    text = job_usage_text([(7, "alice", "train", [mx.InstanceTotals(0, 12.5, 1 << 20, (4096, 8 << 20), (300, 20)),
                                                  mx.InstanceTotals(1, 3.0, 2048, (0, 0), None)])])
    assert '# TYPE ti_job_disk_written_bytes_total counter' in text
    assert 'ti_job_disk_written_bytes_total{job_id="7",owner="alice",name="train",instance="0"} 8388608' in text
    assert 'ti_job_cpu_seconds_total{job_id="7",owner="alice",name="train",instance="1"} 3.0' in text
    assert 'ti_job_network_receive_bytes_total{job_id="7",owner="alice",name="train",instance="0"} 300' in text
    assert 'instance="1"} ' not in text.split("# HELP ti_job_network_receive_bytes_total")[1]  # not measured: absent
