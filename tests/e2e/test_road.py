"""The whole road of issue 2, as one person would walk it:

sign up -> an admin authorizes -> start a workspace from a plan -> from the workspace, submit a distributed
training job with the CLI -> follow its logs -> it finishes -> quota usage returns to zero.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tihub_client import processes_with_env

pytestmark = [pytest.mark.e2e, pytest.mark.torch]

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "ddp_mnist_like" / "train.py"


def used(session, kind: str) -> tuple[int, float]:
    rows = [c for c in session.ok("GET", "/quota")["compute"] if c["kind"] == kind]
    return sum(c["used"]["devices"] for c in rows), sum(c["used"]["cpu"] for c in rows)


def instance_logs(session, job: str) -> str:
    """Every instance's log tail: the followed output shows instance 0 only, and a failure is often elsewhere."""
    out = []
    for i in range(session.ok("GET", f"/jobs/{job}")["instances"]):
        r = session.api("GET", f"/jobs/{job}/logs", params={"instance": i, "tail": 40})
        out.append(f"\n--- instance {i} ---\n" + (r.json()["text"] if r.ok else r.text))
    return "".join(out)


def test_the_whole_road(hub, tmp_path):
    pytest.importorskip("torch", reason="the road trains the DDP example: pip install -e .[examples]")
    admin = hub.admin
    # the admin's first step: plans that fit this 2-core machine next to each other (the demo machine offers 2
    # CPUs per core); a training instance gets a whole core: with half of one, importing PyTorch alone took
    # twice as long
    for plan in ({"name": "road-ws", "kinds": ["workspace"], "device_type": "demo-gpu", "device_count": 1,
                  "cpu": 0.25, "memory_mib": 1024},
                 {"name": "road-train", "kinds": ["distributed"], "device_type": "demo-gpu", "device_count": 1,
                  "cpu": 1, "memory_mib": 2048}):
        admin.ok("POST", "/plans", json=plan)

    # 1. sign up; nothing works until an admin authorizes the account
    hub.signup("roadrunner", "road-pass-4321")
    with pytest.raises(PermissionError):
        hub.login("roadrunner", "road-pass-4321")
    admin.authorize("roadrunner")
    user = hub.login("roadrunner", "road-pass-4321")

    # 2. start a workspace from a plan
    r = user.hub_api("POST", "/users/roadrunner/servers/road-lab", json={"plan": "road-ws"})
    try:
        assert r.status_code in (201, 202), r.text
        user.wait_server("road-lab", timeout=90)
        assert used(user, "workspace") == (1, 0.25)
        ws_env = next(iter(processes_with_env(JUPYTERHUB_USER="roadrunner", TI_WORKSPACE="road-lab").values()))

        # 3. from inside the workspace (its own token and TI_API_URL), submit a 2-instance DDP job with the CLI
        vol = user.ok("POST", "/volumes", json={"name": "road-out", "kind": "filesystem", "capacity_gib": 1})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TI_", "JUPYTERHUB_"))}
        env.update(TI_API_URL=ws_env["TI_API_URL"], JUPYTERHUB_API_TOKEN=ws_env["JUPYTERHUB_API_TOKEN"],
                   TI_CONFIG=str(tmp_path / "none.json"))
        cli = [sys.executable, "-m", "ti_hub.cli.main"]
        sub = subprocess.run(cli + ["job", "submit", "--name", "road-ddp", "--kind", "distributed", "--workers", "2",
                                    "--plan", "road-train", "--image", "python-cpu", "--volume", "road-out:/mnt/output",
                                    "--env", "OUTPUT_DIR=/mnt/output", "--follow", "--",
                                    sys.executable, hub.put_in_home("roadrunner", TRAIN), "--epochs", "3"],
                             env=env, capture_output=True, text=True, timeout=300)
        # 4. the followed logs show training; the command exits 0 because the job completed
        assert sub.returncode == 0, sub.stdout + sub.stderr + instance_logs(user, "road-ddp")
        losses = [float(x) for x in re.findall(r"^epoch=\d+ loss=([0-9.eE+-]+)", sub.stdout, re.M)]
        assert len(losses) == 3 and losses[-1] < losses[0], sub.stdout
        job = user.ok("GET", "/jobs/road-ddp")
        assert job["status"] == "completed" and job["instances"] == 2
        devices = sorted(d for inst in job["placement"]["instances"] for d in inst["devices"])
        assert len(devices) == 2 and len(set(devices)) == 2  # each instance had a device of its own
        metrics = json.loads((hub.data_dir / "volumes" / str(vol["id"]) / "metrics.json").read_text())
        assert metrics["loss"][-1] < metrics["loss"][0]

        # 5. the job's resources are released at once; the workspace still holds its own
        assert used(user, "distributed") == (0, 0)
        assert used(user, "workspace") == (1, 0.25)
    finally:
        # stopped even when a step fails: a workspace left running holds this shared hub's CPU and would
        # keep the later tests' workspaces and jobs queued
        user.hub_api("DELETE", "/users/roadrunner/servers/road-lab")
    deadline = time.monotonic() + 30
    while used(user, "workspace") != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert used(user, "workspace") == (0, 0)
