"""The machine's accelerators: NVIDIA GPUs found with NVML, grouped by a normalized model name."""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)


def normalize_gpu_name(name: str | bytes) -> str:
    """``NVIDIA A100-SXM4-80GB`` -> ``A100-SXM4-80GB``; ``Tesla V100-SXM2-16GB`` -> ``V100-SXM2-16GB``;
    ``NVIDIA H100 80GB HBM3`` -> ``H100-80GB-HBM3``: a device type usable in requests and URLs."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    name = re.sub(r"^(NVIDIA|Tesla)\s+", "", name.strip(), flags=re.IGNORECASE)
    name = re.sub(r"^(NVIDIA|Tesla)\s+", "", name, flags=re.IGNORECASE)  # "NVIDIA Tesla T4"
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")
    return name or "gpu"


def group_devices(names: list[str]) -> dict[str, list[int]]:
    """Device indices (NVML / PCI bus order) grouped by normalized model name."""
    groups: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        groups.setdefault(normalize_gpu_name(name), []).append(index)
    return groups


def detect_nvidia() -> dict[str, list[int]]:
    """NVIDIA GPUs on this machine; empty without the driver or without GPUs. Blocking: call in a thread."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...: no GPU here
        log.debug("NVML unavailable: %s", e)
        return {}
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    except Exception as e:
        log.warning("could not list NVIDIA GPUs: %s", e)
        return {}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return group_devices(names)
