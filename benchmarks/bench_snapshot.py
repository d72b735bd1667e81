"""Issue 30: a dataset snapshot as the user (``storage.userfs.copy``: a worker that drops to the owner's uid and
walks by descriptor without following links) against the root copy it replaced (``shutil.copytree`` with
``symlinks=True``), on the same generated tree, in alternating rounds.

    python benchmarks/bench_snapshot.py [--rounds 5] [--big 64] [--small 4000] [--dir /var/tmp]

The tree: ``--big`` files of 4 MiB and ``--small`` files of 16 KiB in 40 directories, plus a few links. Each
round copies it once each way into a fresh directory, with the page cache warm (a first untimed copy reads it
in), and the worker as uid 65534 when run as root. Prints JSON: median seconds and MiB/s of each, and the
ratio (user / root throughput; the target is >= 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
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

from ti_hub.storage import userfs  # noqa: E402


def make_tree(root: Path, big: int, small: int) -> int:
    total = 0
    for d in range(40):
        (root / f"d{d:02d}").mkdir(parents=True)
    chunk = os.urandom(1 << 20)
    for i in range(big):
        p = root / f"d{i % 40:02d}" / f"big{i}.bin"
        with open(p, "wb") as f:
            for _ in range(4):
                f.write(chunk)
        total += 4 << 20
    blob = os.urandom(16 << 10)
    for i in range(small):
        (root / f"d{i % 40:02d}" / f"small{i}.txt").write_bytes(blob)
        total += 16 << 10
    for i in range(10):
        os.symlink(f"d{i:02d}", root / f"link{i}")
    os.chmod(root, 0o755)
    for dirpath, dirs, files in os.walk(root):
        for n in dirs:
            os.chmod(os.path.join(dirpath, n), 0o755)
        for n in files:
            os.chmod(os.path.join(dirpath, n), 0o644)
    return total


def as_root(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)


def as_user(src: Path, dst: Path, who) -> None:
    userfs.make_exclusive(str(dst), who)

    async def go():
        async for answer in userfs.copy(str(src), str(dst), who):
            if "error" in answer:
                raise RuntimeError(answer["error"])
    asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--big", type=int, default=64, help="files of 4 MiB")
    ap.add_argument("--small", type=int, default=4000, help="files of 16 KiB")
    ap.add_argument("--dir", default="/var/tmp", help="where the trees go (one file system for both)")
    args = ap.parse_args()
    who = userfs.As(65534, 65534) if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="ti-bench-snap-", dir=args.dir))
    os.chmod(base, 0o755)
    try:
        src = base / "src"
        total = make_tree(src, args.big, args.small)
        as_root(src, base / "warm")  # the page cache holds the source for every timed copy
        shutil.rmtree(base / "warm")
        times = {"root": [], "user": []}
        for r in range(args.rounds):
            order = ("root", "user") if r % 2 == 0 else ("user", "root")
            for how in order:
                dst = base / f"{how}{r}"
                t0 = time.perf_counter()
                as_root(src, dst) if how == "root" else as_user(src, dst, who)
                os.sync()  # what was copied is on disk, for both alike
                times[how].append(time.perf_counter() - t0)
                shutil.rmtree(dst)
        mib = total / (1 << 20)
        out = {"machine": {"cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()},
               "settings": vars(args) | {"worker_uid": who.uid if who else None, "tree_mib": round(mib, 1),
                                         "files": args.big + args.small},
               "seconds": {k: [round(t, 3) for t in v] for k, v in times.items()},
               "median_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
               "median_mib_s": {k: round(mib / statistics.median(v), 1) for k, v in times.items()}}
        out["ratio_user_to_root"] = round(out["median_mib_s"]["user"] / out["median_mib_s"]["root"], 2)
        out["target_met"] = out["ratio_user_to_root"] >= 0.8
        print(json.dumps(out, indent=2))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
