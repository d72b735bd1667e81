#!/usr/bin/env python
"""The NVML path of the health readings on a real GPU machine (issue 19): the one part CI cannot run.

    python benchmarks/check_nvml.py            # prints JSON; exit 0 = every check passed, 1 = one failed, 2 = no GPU

What it checks, through the same code the ti service runs (health/sources.py LocalHealthSource, nvml_read):
  1. the machine's GPUs are found (backends/local/devices.py detect_nvidia) and each gets a reading with
     utilization, memory, temperature and power measured (ECC may be unsupported on consumer cards: reported);
  2. with PyTorch (the examples extra) a few seconds of matrix products on the first GPU show as utilization above 50 %
     on that device in a reading taken meanwhile, and the idle reading before it is lower;
  3. the CPU time of one read (time.thread_time around read_now), the "read" column of docs/benchmarks.md's
     health sampling table, median of 20.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ti_hub.backends.base import NodeCapacity  # noqa: E402
from ti_hub.backends.local.devices import detect_nvidia  # noqa: E402
from ti_hub.health.sources import LocalHealthSource  # noqa: E402


def busy_gpu(index: int, seconds: float, started: threading.Event) -> None:
    import torch

    a = torch.randn(8192, 8192, device=f"cuda:{index}")
    started.set()
    end = time.time() + seconds
    while time.time() < end:
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()


def main() -> int:
    inventory = detect_nvidia()
    if not inventory:
        print(json.dumps({"gpus": 0, "note": "no NVIDIA GPU or driver here: nothing to check"}))
        return 2
    node = NodeCapacity("gpu-machine", "default", inventory, 1.0, 1024)
    src = LocalHealthSource(filesystems=["/"])
    out: dict = {"inventory": inventory, "checks": {}}
    snap = src.read_now([node])
    out["readings"] = [d.__dict__ for d in snap.devices]
    measured = all(d.utilization_percent is not None and d.memory_total_bytes and d.temperature_c is not None
                   and d.power_watts is not None for d in snap.devices)
    out["checks"]["every_gpu_measured"] = measured
    out["ecc_supported"] = [d.ecc_uncorrectable is not None for d in snap.devices]
    try:
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA's numbering = NVML's, as the backend assumes
        import torch
        if not torch.cuda.is_available():
            raise ImportError("this PyTorch has no CUDA")
        first = min(inventory.items())[1][0]
        idle = src.read_now([node]).device(node.name, min(inventory), first)
        started = threading.Event()
        t = threading.Thread(target=busy_gpu, args=(first, 8.0, started))
        t.start()
        started.wait(60)
        time.sleep(3.0)  # NVML's utilization is averaged over its last sample period (up to 1 s)
        busy = src.read_now([node]).device(node.name, min(inventory), first)
        t.join()
        out["idle_then_busy_percent"] = [idle.utilization_percent, busy.utilization_percent]
        out["checks"]["load_shows_as_utilization"] = (busy.utilization_percent or 0) > 50 and (
            (idle.utilization_percent or 0) < (busy.utilization_percent or 0))
    except ImportError:
        out["note"] = "no PyTorch: the load check was skipped (pip install '.[examples]')"
    cpu = []
    for _ in range(20):
        t0 = time.thread_time()
        src.read_now([node])
        cpu.append((time.thread_time() - t0) * 1000)
    out["read_cpu_ms_median"] = round(statistics.median(cpu), 2)
    print(json.dumps(out, indent=1, default=str))
    return 0 if all(out["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
