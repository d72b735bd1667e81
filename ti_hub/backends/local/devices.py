"""The machine's accelerators: NVIDIA GPUs found with NVML, grouped by a normalized model name; and which of
their device nodes a sandbox gets (``binding``: only those of the devices its work holds)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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


def _read_nvml(read: Callable[[Any], Any], what: str) -> Any:
    """``read(pynvml)`` between NVML's init and shutdown; None without the driver or without GPUs."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...: no GPU here
        log.debug("NVML unavailable: %s", e)
        return None
    try:
        return read(pynvml)
    except Exception as e:
        log.warning("could not read %s: %s", what, e)
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def detect_nvidia() -> dict[str, list[int]]:
    """NVIDIA GPUs on this machine; empty without the driver or without GPUs. Blocking: call in a thread."""
    names = _read_nvml(lambda nv: [nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i))
                                   for i in range(nv.nvmlDeviceGetCount())], "the NVIDIA GPUs")
    return group_devices(names) if names else {}


# what every CUDA process needs besides its GPUs' own nodes (/dev/nvidiaN): the control device, unified memory,
# mode setting and MIG capabilities; bound only into sandboxes that hold at least one GPU
SHARED_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")


def nvidia_nodes() -> dict[int, dict[str, object]]:
    """NVML index -> {"minor": the N of /dev/nvidiaN, "uuid": "GPU-..."}; empty without GPUs or driver.
    Blocking. The minor number is the driver's, not the index (PCI bus order): they may differ."""
    def read(nv: Any) -> dict[int, dict[str, object]]:
        out: dict[int, dict[str, object]] = {}
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            uuid = nv.nvmlDeviceGetUUID(h)
            out[i] = {"minor": int(nv.nvmlDeviceGetMinorNumber(h)),
                      "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid)}
        return out

    return _read_nvml(read, "the NVIDIA GPUs' device numbers") or {}


def binding(held: Sequence[int], known: Mapping[int, Mapping[str, object]], dev_dir: str = "/dev",
            exists: Callable[[str], bool] = os.path.exists) -> tuple[tuple[tuple[str, str], ...], str]:
    """(device nodes to bind: (host path, path inside), CUDA_VISIBLE_DEVICES) for a sandbox holding the GPUs
    ``held`` (NVML indices). Only the held GPUs' nodes (and the shared ones, when any is held) are bound, so code
    in the sandbox cannot open the others. ``known``: ``nvidia_nodes()`` (empty for configured devices: each
    index is then its own minor number). CUDA_VISIBLE_DEVICES names real GPUs by UUID, which CUDA resolves
    whatever the numbering of the devices the sandbox can open; configured (demo) devices keep their indices."""
    if not held:
        return (), ""
    nodes: list[tuple[str, str]] = []
    for name in SHARED_NODES:
        if exists(os.path.join(dev_dir, name)):
            nodes.append((os.path.join(dev_dir, name), "/dev/" + name))
    for index in held:
        minor = int(known.get(index, {}).get("minor", index))  # type: ignore[call-overload]
        path = os.path.join(dev_dir, f"nvidia{minor}")
        if exists(path):
            nodes.append((path, f"/dev/nvidia{minor}"))
    uuids = [str(known[i]["uuid"]) for i in held if i in known and known[i].get("uuid")]
    visible = ",".join(uuids) if len(uuids) == len(held) else ",".join(str(i) for i in held)
    return tuple(nodes), visible
