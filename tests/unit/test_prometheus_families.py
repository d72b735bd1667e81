"""The metrics a scrape exports, built from rows and a health snapshot (pure: ti_hub/metrics/families.py, health.py)."""

from __future__ import annotations

import datetime as dt

from prometheus_client.parser import text_string_to_metric_families

from ti_hub.backends.base import NodeCapacity
from ti_hub.domain.readings import DeviceReading, FsReading, HostReading, NetReading, Snapshot
from ti_hub.backends.base import MACHINE_LABEL
from ti_hub.metrics import process
from ti_hub.metrics.db import Figures, with_health
from ti_hub.metrics.families import device_use, render
from ti_hub.metrics.health import health_text

NOW = 1_800_000_000.0


def samples(text: bytes) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text.decode()) for s in f.samples}


def value(found, name, **labels):
    return found[(name, frozenset(labels.items()))]


NODES = [NodeCapacity("n1", "default", {"demo-gpu": [0, 1]}, 8, 16000),
         NodeCapacity("n2", "vc-a", {"demo-gpu": [0, 1, 2, 3]}, 8, 16000, labels={MACHINE_LABEL: "box"})]


def figures(snapshot=None) -> Figures:
    queued_at = dt.datetime.fromtimestamp(NOW - 90, dt.timezone.utc)
    fig = Figures(
        states=[("queued", 3), ("running", 1), ("completed", 7)],
        jobs=[("queued", "single", "default", 3), ("running", "workspace", "vc-a", 1)],
        queues=[("default", "demo-gpu", "single", 3, queued_at)],
        user_jobs=[("ann", "queued", 3), ("bob", "running", 1)],
        user_devices=[("bob", "vc-a", "demo-gpu", 3)],
        scores=[("bob", "demo-gpu", 12.5)],
        placements=[("vc-a", "demo-gpu", {"instances": [{"node": "n2", "devices": [0, 1, 2]}]})])
    return with_health(fig, snapshot)


SNAP = Snapshot(NOW - 5, hosts=(
    HostReading("box", cpu_seconds={"user": 10.0, "idle": 90.0}, load1=0.5, memory_total_bytes=1 << 30,
                memory_available_bytes=1 << 29, filesystems=(FsReading("/", "/dev/sda1", "ext4", 1000, 400),),
                network=(NetReading("eth0", 5, 7),)),
    HostReading("n1")),  # nothing measured
    devices=(DeviceReading("n2", "demo-gpu", 0, "box", "GPU-0", utilization_percent=2.0,
                           memory_used_bytes=1 << 30, memory_total_bytes=4 << 30, temperature_c=50.0,
                           power_watts=100.0, ecc_uncorrectable=0),
             DeviceReading("n2", "demo-gpu", 1, "box", utilization_percent=80.0),
             DeviceReading("n2", "demo-gpu", 2, "box")))  # allocated, unmeasured: not idle


def test_state_families_from_rows():
    found = samples(render(figures(), NODES, NOW, 10.0))
    assert value(found, "ti_jobs", state="completed") == 7
    assert value(found, "ti_active_jobs", state="queued", kind="single", pool="default") == 3
    assert value(found, "ti_queue_length", pool="default", device_type="demo-gpu", kind="single") == 3
    assert value(found, "ti_queue_oldest_wait_seconds", pool="default", device_type="demo-gpu", kind="single") == 90
    # a queue the capacity offers but nobody waits in is a 0, not missing
    assert value(found, "ti_queue_length", pool="vc-a", device_type="demo-gpu", kind="workspace") == 0
    assert value(found, "ti_queue_length", pool="vc-a", device_type="cpu", kind="single") == 0
    assert value(found, "ti_devices_total", pool="vc-a", device_type="demo-gpu") == 4
    assert value(found, "ti_devices_allocated", pool="vc-a", device_type="demo-gpu") == 3
    assert value(found, "ti_devices_allocated", pool="default", device_type="demo-gpu") == 0
    assert value(found, "ti_node_devices_allocated", node="n2", machine="box", pool="vc-a",
                 device_type="demo-gpu") == 3
    assert value(found, "ti_node_info", node="n2", machine="box", pool="vc-a", schedulable="true") == 1
    assert value(found, "ti_user_devices_allocated", user="bob", pool="vc-a", device_type="demo-gpu") == 3
    assert value(found, "ti_user_usage_score", user="bob", device_type="demo-gpu") == 12.5
    assert value(found, "ti_user_jobs", user="ann", state="queued") == 3
    # no snapshot: no health series at all, never zeros
    assert not [k for k in found if k[0].startswith(("DCGM", "node_", "ti_health"))]


def test_idle_is_allocated_and_measured_under_the_threshold():
    allocated, idle = device_use(figures(SNAP), NODES, 10.0)
    assert allocated == {("n2", "demo-gpu"): 3}
    assert idle == {("n2", "demo-gpu"): 1}  # device 0 (2%); not 1 (80%), not 2 (unmeasured)
    found = samples(render(figures(SNAP), NODES, NOW, 10.0, health=health_text(SNAP).encode()))
    assert value(found, "ti_devices_idle", pool="vc-a", device_type="demo-gpu") == 1
    assert device_use(figures(SNAP), NODES, 90.0)[1] == {("n2", "demo-gpu"): 2}


def test_health_in_dcgm_and_node_exporter_names():
    found = samples(render(figures(SNAP), NODES, NOW, 10.0, health=health_text(SNAP).encode()))
    gpu0 = dict(gpu="0", UUID="GPU-0", Hostname="box", modelName="demo-gpu", node="n2", device_type="demo-gpu")
    assert value(found, "DCGM_FI_DEV_GPU_UTIL", **gpu0) == 2.0
    assert value(found, "DCGM_FI_DEV_FB_USED", **gpu0) == 1024
    assert value(found, "DCGM_FI_DEV_FB_FREE", **gpu0) == 3072
    assert value(found, "DCGM_FI_DEV_GPU_TEMP", **gpu0) == 50.0
    assert value(found, "DCGM_FI_DEV_POWER_USAGE", **gpu0) == 100.0
    assert value(found, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", **gpu0) == 0
    # only measured values: device 1 has utilization only, device 2 nothing
    assert len([k for k in found if k[0] == "DCGM_FI_DEV_GPU_UTIL"]) == 2
    assert len([k for k in found if k[0] == "DCGM_FI_DEV_GPU_TEMP"]) == 1
    assert value(found, "node_cpu_seconds_total", machine="box", cpu="all", mode="idle") == 90.0
    assert value(found, "node_memory_MemAvailable_bytes", machine="box") == 1 << 29
    assert value(found, "node_filesystem_avail_bytes", machine="box", mountpoint="/", device="/dev/sda1",
                 fstype="ext4") == 400
    assert value(found, "node_network_transmit_bytes_total", machine="box", device="eth0") == 7
    assert value(found, "node_load1", machine="box") == 0.5
    assert ("node_load1", frozenset({("machine", "n1")})) not in found
    assert value(found, "ti_health_sample_age_seconds") == 5


def test_route_patterns_never_raw_paths():
    class Route:
        path = "/jobs/{id}"

    class H:
        route = Route()

    class Other:
        pass

    assert process.route_of(H()) == "/jobs/{id}"
    assert process.route_of(Other()) == "Other"


def test_decisions_counted_with_the_wait_of_each_admitted_job():
    from types import SimpleNamespace as NS

    queued = dt.datetime.fromtimestamp(NOW - 30, dt.timezone.utc)
    dec = NS(admitted=[NS(job_id=1), NS(job_id=2)], preempt={9: 1},
             full={1: NS(pool="p", device_type="g", kind="single", queued_at=queued),
                   2: NS(pool="p", device_type="g", kind="workspace", queued_at=None)})
    admitted, preempted = process.decided(dec, NOW)
    assert admitted == [("p", "g", "single", 30.0), ("p", "g", "workspace", None)]
    assert preempted == [("p", "g")]


def test_label_values_and_numbers_are_written_as_the_format_says():
    from ti_hub.metrics.text import Family, render as render_text

    f = Family("t_x", "a help\nwith a newline", ["a"])
    for v, x in (('q"uote\\back\nline', 1.5), ("plain", 3), ("nan", float("nan")), ("inf", float("inf"))):
        f.add([v], x)
    (fam,) = text_string_to_metric_families(render_text([f]))
    got = {s.labels["a"]: s.value for s in fam.samples}
    assert got['q"uote\\back\nline'] == 1.5 and got["plain"] == 3 and got["inf"] == float("inf")
    assert got["nan"] != got["nan"] and fam.documentation == "a help\nwith a newline"


def test_events_of_every_process_add_up_without_touching_the_environment(tmp_path):
    from prometheus_client import values

    before = values.ValueClass
    directory = process.setup(tmp_path)
    try:
        events_add_up(directory, before)
    finally:
        process.reset()


def events_add_up(directory, before):
    import os

    from prometheus_client import values

    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ and values.ValueClass is before
    process.scheduled([("p", "g", "single", 12.0)], [("p", "g")])
    pid = os.fork()
    if pid == 0:  # an API process forked from the leader: files of its own
        try:
            process.scheduled([("p", "g", "workspace", None)], [])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    found = samples(render(figures(), NODES, NOW, 10.0, directory))
    assert value(found, "ti_admissions_total", pool="p", device_type="g", kind="single") == 1
    assert value(found, "ti_admissions_total", pool="p", device_type="g", kind="workspace") == 1
    assert value(found, "ti_preemptions_total", pool="p", device_type="g") == 1
    assert value(found, "ti_workspace_starts_total", pool="p", device_type="g") == 1
    assert value(found, "ti_workspace_reclaims_total", pool="p", device_type="g") == 0  # shown from 0
    assert value(found, "ti_queue_wait_seconds_count", pool="p", device_type="g", kind="single") == 1
    assert value(found, "ti_queue_wait_seconds_bucket", pool="p", device_type="g", kind="single", le="15.0") == 1


def test_readings_from_prometheus_are_not_exported_again(tmp_path):
    from pathlib import Path

    from traitlets.config import Configurable

    from ti_hub.health.monitor import HealthMonitor
    from ti_hub.metrics.exporter import MetricsExporter

    try:
        for source, exported in (("ti_hub.health.testsource.TestReadingsSource", True),
                                 ("ti_hub.health.promsource.PrometheusHealthSource", False)):
            parent = Configurable()
            parent.health = HealthMonitor(source_class=source)
            exp = MetricsExporter(parent=parent, multiprocess_dir=str(tmp_path / source))
            assert [name for name, _ in parent.health.subscribers] == ["metrics"]
            exp.write_health(SNAP)
            text = (Path(exp.directory) / "health.prom").read_bytes()
            assert (b"DCGM_FI_DEV_GPU_UTIL{" in text) is exported
            _, util, at, _ = exp._read_health()
            assert util == {("n2", "demo-gpu", 0): 2.0, ("n2", "demo-gpu", 1): 80.0} and at == SNAP.at
    finally:
        process.reset()
