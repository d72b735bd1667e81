"""GET /jobs/{id}/metrics on the embedded platform: a real job's CPU and memory, through the API, the CLI and the
notebook monitor (the widget in-process, polling a real hub)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tihub_client import wait

pytestmark = pytest.mark.e2e

# one busy core and 96 MiB resident, for a minute
BURN = ("python3 -c \"import time; b = bytearray(96 << 20); b[::4096] = b'x' * len(b[::4096]); "
        "t = time.time()\nwhile time.time() - t < 60: pass\"")


def test_a_running_jobs_cpu_and_memory_through_api_cli_and_monitor(hub, new_user, tmp_path):
    u, other = new_user("metrics"), new_user("metricso")
    j = u.ok("POST", "/jobs", json={"name": "burn", "plan": "cpu-small", "image": "python-cpu", "command": BURN})
    u.wait_job(j["id"], states=("running",))

    def busy():
        doc = u.ok("GET", f"/jobs/{j['id']}/metrics")
        (m,) = doc["instances"]
        return m if (m["cpu_cores"] or 0) > 0.5 and (m["memory_bytes"] or 0) >= 96 << 20 else None
    m = wait(busy, 30, "the job to show one busy core and 96 MiB")
    assert m["instance"] == 0 and m["cpu_cores"] < 1.6  # cpu-small holds one core (cgroup or affinity)
    assert m["gpus"] is None  # no devices

    # who may read them: whoever may read the job's log -- its owner and admins (SPEC JOB5: others never see a
    # running job of someone else, view-all or not: 404, as for a job that does not exist)
    assert other.api("GET", f"/jobs/{j['id']}/metrics").status_code == 404
    assert other.api("GET", "/jobs/no-such-job/metrics").status_code == 404
    assert hub.admin.api("GET", f"/jobs/{j['id']}/metrics").status_code == 200

    env = {"TI_API_URL": hub.url, "TI_TOKEN": u.token, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "ti_hub.cli.main", "job", "metrics", "burn"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()[:2]
    assert header.split()[:3] == ["INST", "CPU", "(cores)"] and row.split()[0] == "0" and "MiB" in row

    # the notebook monitor shows the same, live
    pytest.importorskip("ipywidgets")
    from ti_hub.cli.client import TiClient
    from ti_hub.magics.monitor import JobMonitor

    mon = JobMonitor(TiClient(hub.url, u.token), j["id"], interval=0.5)
    try:
        # the thread reads the metrics, then alerts and the log, then redraws: wait for the redraw
        wait(lambda: "usage</span> now: CPU " in mon._info.value, 20, "the monitor's first metrics")
        assert " MiB" in mon._info.value
    finally:
        mon.close()

    u.ok("POST", f"/jobs/{j['id']}/kill")
    u.wait_job(j["id"], states=("killed",))
    done = u.ok("GET", f"/jobs/{j['id']}/metrics")
    assert done["instances"] == [] and done["note"] == "the job is killed: metrics exist while it runs"
