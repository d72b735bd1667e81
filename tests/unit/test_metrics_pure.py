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
