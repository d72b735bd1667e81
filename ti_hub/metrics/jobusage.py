"""Per-job resource use as Prometheus counters and gauges (pure): what each running instance has used so far
(CPU seconds, disk bytes read and written, network bytes received and sent) and its memory now. Rates are
PromQL's ``rate()`` of the counters, as for the node exporter's. Sampled by the leader with each health sample
(``metrics/exporter.py``); a counter can fall back (a process that ended with no parent in the job to inherit
its counts), which Prometheus takes as a reset. Network: the job's own namespace, on instance 0 only (the
embedded platform; on Kubernetes each pod's). A figure the backend could not measure is left out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .text import Family
from .text import render as render_text

LABELS = ["job_id", "owner", "name", "instance"]


def job_usage_text(rows: Iterable[tuple[int, str, str, Sequence[Any]]]) -> str:
    """``rows``: (job id, owner, name, its instances' ``InstanceTotals``)."""
    cpu = Family("ti_job_cpu_seconds_total", "CPU time the job's processes used (user + system)", LABELS,
                 "counter")
    mem = Family("ti_job_memory_bytes", "Resident memory of the job's processes (summed RSS)", LABELS)
    read = Family("ti_job_disk_read_bytes_total", "Bytes the job's processes made the kernel read from storage",
                  LABELS, "counter")
    written = Family("ti_job_disk_written_bytes_total", "Bytes the job's processes made the kernel send to storage",
                     LABELS, "counter")
    rx = Family("ti_job_network_receive_bytes_total", "Bytes received on the job's network namespace (loopback "
                "excepted; on instance 0, for the instances that share it)", LABELS, "counter")
    tx = Family("ti_job_network_transmit_bytes_total", "Bytes sent from the job's network namespace (loopback "
                "excepted; on instance 0, for the instances that share it)", LABELS, "counter")
    for job_id, owner, name, instances in rows:
        for t in instances:
            labels = [str(job_id), owner, name, str(t.instance)]
            if t.cpu_seconds is not None:  # not measured (Kubernetes: a kubelet that did not say): absent, never 0
                cpu.add(labels, float(t.cpu_seconds))
            if t.memory_bytes is not None:
                mem.add(labels, int(t.memory_bytes))
            if t.disk is not None:
                read.add(labels, int(t.disk[0]))
                written.add(labels, int(t.disk[1]))
            if t.network is not None:
                rx.add(labels, int(t.network[0]))
                tx.add(labels, int(t.network[1]))
    return render_text((cpu, mem, read, written, rx, tx))
