"""Issue 30: two TiHub instances on one host, both with the default uid range, would hand the same uid to different
people. The ti service registers its range in the host's registry at start and the second instance refuses to
start, naming the first's data directory, its range and the setting to change (ti_hub/ops/uidranges.py). The
services run alone here (no hub): the check happens before they serve anything."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hubproc import free_port

from ti_hub.ops import uidranges as R

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(os.geteuid() != 0, reason="only a root service switches uids and registers")]
REPO = str(Path(__file__).resolve().parents[2])


def service(tmp_path: Path, name: str, registry: Path, uid_range: tuple[int, int] | None = None) -> subprocess.Popen:
    """`python -m ti_hub.service` as the hub starts it, with data in tmp_path/name."""
    data = tmp_path / name
    args = [sys.executable, "-m", "ti_hub.service"]
    if uid_range:
        config = tmp_path / f"{name}_config.py"
        config.write_text(f"c.TiService.unix_uid_range = {list(uid_range)}\n")
        args.append(f"--TiService.config_file={config}")
    env = {**os.environ, "PYTHONPATH": REPO, "TI_HUB_DATA_DIR": str(data), "TI_HUB_UID_REGISTRY": str(registry),
           "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{free_port()}"}
    log = open(tmp_path / f"{name}.log", "wb")
    return subprocess.Popen(args, env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait_serving(proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while b"listening on" not in log.read_bytes():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def test_a_second_instance_with_an_overlapping_range_refuses_to_start(tmp_path):
    registry = tmp_path / "uid-ranges.json"
    first = service(tmp_path, "first", registry)
    running = [first]
    try:
        wait_serving(first, tmp_path / "first.log")
        assert R.entries(registry) == [R.Entry(str(tmp_path / "first"), 900_000, 999_999)]

        # the default range again, while the first instance's data directory exists: refused, plainly
        second = service(tmp_path, "second", registry)
        running.append(second)
        assert second.wait(90) != 0
        said = (tmp_path / "second.log").read_text()
        assert "TiHub: not started: another TiHub instance on this host, with data directory " \
               f"{tmp_path / 'first'}, gives its users the Unix uids 900000-999999" in said, said
        assert "c.TiService.unix_uid_range = [first, last]" in said and "Traceback" not in said, said
        assert "listening on" not in said
        assert [e.data_dir for e in R.entries(registry)] == [str(tmp_path / "first")]

        # a range of its own: it starts
        third = service(tmp_path, "third", registry, (1_000_000, 1_000_999))
        running.append(third)
        wait_serving(third, tmp_path / "third.log")
        stop(third)

        # the first instance is gone for good (its data directory removed): its entry goes, the range is free
        stop(first)
        shutil.rmtree(tmp_path / "first")
        again = service(tmp_path, "second", registry)
        running.append(again)
        wait_serving(again, tmp_path / "second.log")
        assert R.entries(registry) == [R.Entry(str(tmp_path / "second"), 900_000, 999_999),
                                       R.Entry(str(tmp_path / "third"), 1_000_000, 1_000_999)]
    finally:
        for proc in running:
            if proc.poll() is None:
                stop(proc)
