"""JOB6: SSH turned on and off for a running job (POST /jobs/{id}/ssh, `ti job ssh`), through the real gateway
with Debian's OpenSSH client."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("ssh"), reason="needs OpenSSH's client (scripts/test installs it)")]


def _ssh(hub, login: str, key: Path, *command: str) -> subprocess.CompletedProcess:
    opts = ["-F", "/dev/null", "-i", str(key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "LogLevel=ERROR",
            "-o", "ConnectTimeout=20"]
    return subprocess.run(["ssh", "-p", str(hub.ssh_port), *opts, f"{login}@127.0.0.1", *command],
                          capture_output=True, text=True, timeout=60)


def _cli(hub, user, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"TI_API_URL": hub.url, "TI_TOKEN": user.token, "HOME": str(home), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "ti_hub.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_owner_turns_ssh_on_and_off_while_the_job_runs(hub, new_user, tmp_path):
    u, other = new_user("sshon"), new_user("sshono")
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    u.ok("POST", "/keys", json={"name": "laptop", "key": (tmp_path / "id_ed25519.pub").read_text()})
    job = u.ok("POST", "/jobs", json={"name": "late-ssh", "plan": "cpu-small", "image": "python-cpu",
                                      "command": "sleep 300"})
    try:
        u.wait_job(job["id"], states=("running",))

        r = _ssh(hub, f"{u.name}+late-ssh", key, "true")
        assert r.returncode == 1 and "ti job ssh late-ssh --on" in r.stderr, r.stderr

        # bad input names the field; another user cannot open the owner's door
        for body, field in (({}, "enabled"), ({"enabled": "yes"}, "enabled"), ({"enabled": True, "x": 1}, None)):
            bad = u.api("POST", f"/jobs/{job['id']}/ssh", json=body)
            assert bad.status_code == 400 and (field is None or bad.json()["field"] == field), bad.text
        assert other.api("POST", f"/jobs/{job['id']}/ssh", json={"enabled": True}).status_code == 404
        assert hub.admin.api("POST", f"/jobs/{job['id']}/ssh", json={"enabled": True}).status_code == 403

        r = _cli(hub, u, tmp_path, "job", "ssh", "late-ssh", "--on")
        assert r.returncode == 0 and "SSH is on for late-ssh" in r.stdout, r.stderr
        assert "ssh" in u.ok("GET", f"/jobs/{job['id']}")["endpoints"]
        r = _ssh(hub, f"{u.name}+late-ssh", key, "echo job=$TI_JOB_ID")
        assert r.returncode == 0 and r.stdout.strip() == f"job={job['id']}", r.stderr

        off = u.ok("POST", f"/jobs/{job['id']}/ssh", json={"enabled": False})
        assert "ssh" not in off["endpoints"]
        r = _ssh(hub, f"{u.name}+late-ssh", key, "true")
        assert r.returncode == 1 and "does not enable SSH" in r.stderr, r.stderr

        history = [e["message"] for e in u.ok("GET", f"/jobs/{job['id']}")["events"]]
        assert f"SSH turned on by {u.name}" in history and f"SSH turned off by {u.name}" in history
        log = hub.admin.ok("GET", "/audit", params={"action": "job.ssh", "target": f"{u.name}/late-ssh"})["items"]
        assert [e["detail"]["enabled"] for e in log] == [False, True] and log[0]["actor"] == u.name
    finally:
        u.api("POST", f"/jobs/{job['id']}/kill")
    u.wait_job(job["id"], states=("killed",))
    r = u.api("POST", f"/jobs/{job['id']}/ssh", json={"enabled": True})  # running jobs only
    assert r.status_code == 409 and r.json()["field"] == "id" and "is killed" in r.json()["detail"], r.text
