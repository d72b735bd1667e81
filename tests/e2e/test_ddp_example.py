"""The real training example (examples/ddp_mnist_like/train.py) submitted through the `ti` CLI.

A PyTorch MLP trained with DistributedDataParallel over 2 instances of a distributed job (gloo on the
CPU, plan cpu-small), writing TensorBoard logs, a checkpoint and metrics.json to a filesystem volume.
Checks that the job completed, both instances trained, the loss went down (in the logs and in
metrics.json), the files are in the volume, and the distributed quota is free again afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.torch]

try:
    import torch
except Exception as e:  # noqa: BLE001 - a broken install is as good as none here
    pytest.skip(f"PyTorch is not importable ({type(e).__name__}: {e}); install it with "
                "`pip install -e .[examples]` (torch==2.15.0, tensorboard) to run the DDP example",
                allow_module_level=True)

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "ddp_mnist_like" / "train.py"
EPOCHS = 3
EPOCH_RE = re.compile(r"^epoch=(\d+) loss=([0-9.eE+-]+)", re.M)


def ti(hub, session, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs the real CLI in a subprocess, logged in as `session` through the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTERHUB_API_TOKEN", "TI_API_URL", "TI_TOKEN")}
    env.update(TI_API_URL=hub.api_url, TI_TOKEN=session.token, TI_CONFIG=str(cwd / "ti-config.json"),
               PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH", "")) if p))  # this checkout's CLI
    return subprocess.run([sys.executable, "-m", "ti_hub.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def epoch_losses(log: str) -> list[float]:
    found = [(int(n), float(x)) for n, x in EPOCH_RE.findall(log)]
    assert [n for n, _ in found] == list(range(1, EPOCHS + 1)), f"epoch lines missing or repeated:\n{log}"
    return [x for _, x in found]


def test_ddp_example_trains_over_two_instances(hub, new_user, tmp_path):
    user = new_user("ddp")
    vol = user.ok("POST", "/volumes", json={"name": "ddp-out", "kind": "filesystem", "capacity_gib": 1})
    name = "ddp-example"

    started = time.monotonic()
    sub = ti(hub, user, "job", "submit", "--name", name, "--kind", "distributed", "--workers", "2",
             "--plan", "cpu-small", "--image", "python-cpu", "--volume", f"{vol['name']}:/mnt/output",
             "--env", "OUTPUT_DIR=/mnt/output", "--wait", "--wait-timeout", "240",
             "--", sys.executable, hub.put_in_home(user.name, TRAIN), "--epochs", str(EPOCHS), cwd=tmp_path,
             timeout=300)
    elapsed = time.monotonic() - started
    assert sub.returncode == 0 or user.api("GET", f"/jobs/{name}").status_code == 200, \
        f"submit exit {sub.returncode}:\n{sub.stdout}\n{sub.stderr}"
    job = user.ok("GET", f"/jobs/{name}")
    logs = {i: ti(hub, user, "job", "logs", name, "--instance", str(i), cwd=tmp_path) for i in (0, 1)}
    diagnosis = (f"submit exit {sub.returncode} after {elapsed:.1f} s\nstdout:\n{sub.stdout}\n"
                 f"stderr:\n{sub.stderr}\njob: {json.dumps(job, indent=1)}\n"
                 + "".join(f"--- instance {i} log (exit {r.returncode}):\n{r.stdout}{r.stderr}\n"
                           for i, r in logs.items()))
    assert sub.returncode == 0, diagnosis
    assert f"submitted job {job['id']} {name}" in sub.stdout, diagnosis
    assert job["status"] == "completed", diagnosis
    assert job["kind"] == "distributed" and job["workers"] == 2, diagnosis

    # both instances ran, as ranks 0 and 1 of one gloo world, and saw the same (all-reduced) losses
    per_rank = {}
    for i, r in logs.items():
        assert r.returncode == 0, diagnosis
        assert f"rank={i} world_size=2 backend=gloo device=cpu" in r.stdout, diagnosis
        assert f"done rank={i}" in r.stdout, diagnosis
        per_rank[i] = epoch_losses(r.stdout)
    assert per_rank[0] == per_rank[1], diagnosis
    losses = per_rank[0]
    assert losses[-1] < losses[0], f"the loss did not go down: {losses}\n{diagnosis}"

    # rank 0's files, as the API shows them: checkpoint, metrics and TensorBoard logs in the volume
    root = {e["name"]: e for e in user.ok("GET", f"/volumes/{vol['id']}/files", params={"path": ""})["entries"]}
    assert root.get("checkpoint.pt", {}).get("type") == "file" and root["checkpoint.pt"]["size"] > 0, root
    assert root.get("metrics.json", {}).get("type") == "file", root
    assert root.get("tb", {}).get("type") == "dir", root
    tb = [e["name"] for e in user.ok("GET", f"/volumes/{vol['id']}/files", params={"path": "tb"})["entries"]]
    if importlib.util.find_spec("tensorboard") is not None:
        assert any(n.startswith("events.out.tfevents.") for n in tb), tb
    else:
        assert "metrics.csv" in tb, tb

    # ... and their contents, read from the volume's directory (the embedded driver's layout)
    vol_dir = hub.data_dir / "volumes" / str(vol["id"])
    metrics = json.loads((vol_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["backend"] == "gloo", metrics
    assert metrics["loss"] == pytest.approx(losses, abs=1e-6), (metrics["loss"], losses)
    assert metrics["loss"][-1] < metrics["loss"][0], metrics
    assert metrics["seconds"] < 60, f"training took {metrics['seconds']:.1f} s (should be well under 60)"

    # the checkpoint is a usable model: it loads and classifies held-out data well above chance (10%)
    spec = importlib.util.spec_from_file_location("ddp_example_train", TRAIN)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    ckpt = torch.load(vol_dir / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert ckpt["epoch"] == EPOCHS and ckpt["losses"] == pytest.approx(losses, abs=1e-6)
    model = train.MLP()
    model.load_state_dict(ckpt["model"])
    _, val = train.make_dataset(ckpt["args"]["samples"], ckpt["args"]["seed"])
    assert train.evaluate(model, val, torch.device("cpu")) > 0.5

    # nothing of the job is still counted against the user's distributed-job quota
    quota = user.ok("GET", "/quota")
    distributed = [q for q in quota["compute"] if q["kind"] == "distributed"]
    assert distributed, quota
    for q in distributed:
        assert q["used"]["devices"] == 0 and q["used"]["cpu"] == 0, quota


def test_example_runs_alone_and_writes_through_a_linked_mount(tmp_path):
    """Without bubblewrap the local backend links a volume into the job's working directory
    (./mnt/output) instead of mounting it at /mnt/output: the example must write there. Run by hand,
    with no torchrun environment, it trains as a world of one."""
    work, vol = tmp_path / "work", tmp_path / "volume"
    (work / "mnt").mkdir(parents=True)
    vol.mkdir()
    (work / "mnt" / "output").symlink_to(vol)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(OUTPUT_DIR="/mnt/output", CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, str(TRAIN), "--epochs", "2", "--samples", "2048"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank=0 world_size=1 backend=gloo device=cpu" in r.stdout, r.stdout
    assert len(EPOCH_RE.findall(r.stdout)) == 2, r.stdout
    metrics = json.loads((vol / "metrics.json").read_text())
    assert metrics["world_size"] == 1 and len(metrics["loss"]) == 2 and metrics["loss"][1] < metrics["loss"][0]
    assert (vol / "checkpoint.pt").is_file() and (vol / "tb").is_dir()
