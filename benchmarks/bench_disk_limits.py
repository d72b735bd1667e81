"""Issue 30 (finding 7): what a volume that is a loop-mounted ext4 of its own costs (``storage/loopfs.py``), against
the plain directory it replaces, through ``LocalVolumeDriver`` itself (root only).

    python benchmarks/bench_disk_limits.py [--runs 15] [--rounds 5] [--mib 1024] [--files 20000] [--dir /var/tmp]

* **create**: ``LocalVolumeDriver.create`` of a 10 GiB volume (``disk_limits`` 'loop': sparse image, mkfs.ext4,
  mount, ACL on its root; 'off': a directory and its ACL), and of 1 GiB and 1 TiB ones with 'loop';
  ``--runs`` each, alternating; each is deleted (timed too) before the next;
* **write**: ``--mib`` MiB written in 16 MiB blocks into a file of a volume, then ``fsync``; alternating loop and
  plain, ``--rounds`` each, MiB/s from the wall time of write + fsync;
* **usage**: ``usage_bytes`` of a volume holding ``--files`` files of 4 KiB: ``statvfs`` for a loop volume, the
  ``fsworker`` walk for a plain one (as root here; the service walks as the owner's uid);
* **grow**: ``expand`` of an idle 1 GiB loop volume to 2 GiB (online with CAP_SYS_RESOURCE, else offline:
  unmount, resize2fs, mount).

Prints JSON: the machine, the settings, every time and the medians; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ti_hub.storage import loopfs  # noqa: E402
from ti_hub.storage.local import LocalVolumeDriver  # noqa: E402

GIB = loopfs.GIB


def ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


def med(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def create_delete(d: LocalVolumeDriver, vid: int, gib: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    d.create(vid, "filesystem", capacity_gib=gib)
    made = ms(t0)
    t0 = time.perf_counter()
    d.delete(vid)
    return made, ms(t0)


def write(path: Path, mib: int) -> float:
    """MiB/s of writing ``mib`` MiB and fsync."""
    block = os.urandom(16 << 20)  # not zeros: nothing on the way may skip them
    t0 = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        for _ in range(mib // 16):
            f.write(block)
        os.fsync(f.fileno())
    s = time.perf_counter() - t0
    os.unlink(path)
    return round(mib / s, 1)


def fill_files(path: Path, n: int) -> None:
    blob = os.urandom(4096)
    for i in range(n):
        sub = path / f"d{i % 100:02d}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}").write_bytes(blob)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="creates of each kind")
    ap.add_argument("--rounds", type=int, default=5, help="writes of each kind")
    ap.add_argument("--mib", type=int, default=1024, help="MiB per write")
    ap.add_argument("--files", type=int, default=20_000, help="files in the usage measurement")
    ap.add_argument("--dir", default="/var/tmp", help="where the data dirs go (one file system for both)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()
    tools, missing, root, loop_control = loopfs.usable()
    if not (tools and root and loop_control):
        raise SystemExit(f"needs root, /dev/loop-control and e2fsprogs (missing: {missing})")
    base = Path(tempfile.mkdtemp(prefix="ti-bench-disk-", dir=args.dir))
    loop = LocalVolumeDriver(root_dir=str(base / "loop"), disk_limits="loop")
    plain = LocalVolumeDriver(root_dir=str(base / "plain"), disk_limits="off")
    out: dict = {"machine": {"cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                             "grows_online": loopfs.grows_online()},
                 "settings": vars(args) | {"mkfs": " ".join(loopfs.MKFS_OPTIONS), "mount": loopfs.MOUNT_OPTIONS}}
    try:
        create: dict[str, list[float]] = {"loop_10g": [], "off_10g": [], "loop_1g": [], "loop_1t": []}
        delete: dict[str, list[float]] = {k: [] for k in create}
        vid = 1
        for r in range(args.runs):
            order = [("loop_10g", loop, 10), ("off_10g", plain, 10), ("loop_1g", loop, 1), ("loop_1t", loop, 1024)]
            for name, d, gib in (order if r % 2 == 0 else order[::-1]):
                made, gone = create_delete(d, vid, gib)
                create[name].append(made)
                delete[name].append(gone)
                vid += 1
        out["create_ms"], out["delete_ms"] = create, delete
        out["create_median_ms"] = {k: med(v) for k, v in create.items()}
        out["delete_median_ms"] = {k: med(v) for k, v in delete.items()}

        cap = args.mib // 1024 + 2
        loop.create(1000, "filesystem", capacity_gib=cap)
        plain.create(1000, "filesystem", capacity_gib=cap)
        speed: dict[str, list[float]] = {"loop": [], "plain": []}
        for r in range(args.rounds):
            for name in (("loop", "plain") if r % 2 == 0 else ("plain", "loop")):
                d = loop if name == "loop" else plain
                speed[name].append(write(d.path(1000) / "w.bin", args.mib))
        out["write_mib_s"] = speed
        out["write_median_mib_s"] = {k: med(v) for k, v in speed.items()}
        out["write_ratio_loop_to_plain"] = round(med(speed["loop"]) / med(speed["plain"]), 2)

        usage: dict[str, list[float]] = {"loop_statvfs": [], "plain_walk": []}
        for d in (loop, plain):
            fill_files(d.path(1000), args.files)
        for _ in range(5):
            for name, d in (("loop_statvfs", loop), ("plain_walk", plain)):
                t0 = time.perf_counter()
                d.usage_bytes(1000, max_files=10_000_000)
                usage[name].append(ms(t0))
        out["usage_ms"], out["usage_median_ms"] = usage, {k: med(v) for k, v in usage.items()}

        grow = []
        for i in range(5):
            loop.create(2000 + i, "filesystem", capacity_gib=1)
            t0 = time.perf_counter()
            loop.expand(2000 + i, "bench/grow", 2)
            grow.append(ms(t0))
            loop.delete(2000 + i)
        out["grow_1_to_2_gib_ms"], out["grow_median_ms"] = grow, med(grow)
        loop.delete(1000)
        print(json.dumps(out, indent=2))
        if args.out:
            Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    finally:
        with open("/proc/self/mountinfo") as f:
            left = [p for p in loopfs.mount_sources(f.read()) if p.startswith(str(base) + "/")]
        for p in sorted(left, key=len, reverse=True):
            loopfs.umount(p, loopfs.MNT_DETACH)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
