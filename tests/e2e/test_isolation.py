"""Issue 16's findings, tried as a hostile user would, through the product's public surfaces only: a normal user's
token and a normal job. Each test failed on the platform before per-user uids and sandboxes (see the issue).

A job of "mallory" runs tests/e2e/attack.py: it tries to read the platform's secrets and databases, another user's
volume and home, the checkout; to write the system, the Python environment and TiHub's package; to see, read and
signal other users' processes. Separately: an SSH session of a job is built only from the platform's records; a
job cannot serve another user's endpoint; limits stop a job with a plain reason; a locked database answers 503;
users' writes on their own file system leave the platform working; a workspace that dies is not shown running.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hubproc import own_hub
from tihub_client import free_job_port, processes_with_env, wait

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ATTACK = Path(__file__).with_name("attack.py")
PLATFORM_FILES = ("ti_secret", "ti_cookie_secret", "ti.sqlite", "jupyterhub.sqlite", "jupyterhub_cookie_secret",
                  "proxy_token", "spawner_token", "ssh_host_ed25519_key")
LIMITS = """
c.TiService.scheduler_interval = 0.3  # jobs seen to start and end sooner (default 1 s)
c.LocalBackend.log_limit_mib = 1
c.LocalBackend.disk_limit_gib = 0.02
c.LocalBackend.disk_poll_interval = 0.5
c.TiService.db_busy_timeout = 1.0
"""


@pytest.fixture(scope="module")
def ihub(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("users get uids of their own only when TiHub runs as root (as in CI)")
    for hub in own_hub(tmp_path_factory, "isohub", LIMITS):
        # several jobs of several users at once on a 2-core machine
        hub.admin.ok("POST", "/plans", json={"name": "iso-tiny", "kinds": ["single", "workspace"], "device_type": "cpu",
                                             "device_count": 0, "cpu": 0.1, "memory_mib": 512})
        # a workspace gets a whole core: with iso-tiny's tenth (a CPU quota) JupyterLab and its kernel took a
        # minute to start, and what is tried with it is how its processes end, not how it shares the machine
        hub.admin.ok("POST", "/plans", json={"name": "iso-ws", "kinds": ["workspace"], "device_type": "cpu",
                                             "device_count": 0, "cpu": 1, "memory_mib": 1024})
        yield hub


def person(hub, prefix: str):
    name = f"{prefix}{random.randint(1000, 9999)}"
    hub.signup(name, "pass-word-1234")
    hub.admin.authorize(name)
    return hub.login(name, "pass-word-1234")


def job(session, name: str, command: str, **kw) -> dict:
    return session.ok("POST", "/jobs", json={"name": name, "plan": "iso-tiny", "image": "python-cpu",
                                             "command": command, **kw})


def log_of(session, job_id: int, instance: int = 0) -> str:
    return session.ok("GET", f"/jobs/{job_id}/logs", params={"instance": instance})["text"]



def uid_of(hub, name: str) -> int:
    """A user's uid, as the platform gave it: the owner of their home."""
    return (Path(hub.data_dir) / "workspaces" / "home" / name).stat().st_uid


@pytest.fixture(scope="module")
def victim(ihub):
    """A user with a secret in an unshared volume, a note in their home and a running job holding a secret env."""
    v = person(ihub, "victim")
    vol = v.ok("POST", "/volumes", json={"name": "vault", "kind": "filesystem", "capacity_gib": 1})
    ihub.put_in_home(v.name, ATTACK, "note.txt")
    j = job(v, "holder", "echo s3cret-in-volume > /mnt/vault/secret.txt; echo up; sleep 600",
            volumes=[{"volume": "vault", "mount_path": "/mnt/vault"}], env={"VICTIM_SECRET": "s3cret-in-env"})
    v.wait_job(j["id"], states=("running",), timeout=90)
    wait(lambda: "up" in log_of(v, j["id"]), 30, "the victim's job")
    v.job, v.vol = j, vol
    yield v
    v.api("POST", f"/jobs/{j['id']}/kill")


def test_a_job_reaches_nothing_of_the_platform_nor_of_other_users(ihub, victim):
    """Findings 2 and 3: secrets, databases, other users' files and processes, the checkout, system writes."""
    data = Path(ihub.data_dir)
    assert (data.stat().st_uid, data.stat().st_mode & 0o777) == (os.geteuid(), 0o700)  # the platform's alone
    vol_dir = data / "volumes" / str(victim.vol["id"])
    assert (vol_dir / "secret.txt").read_text() == "s3cret-in-volume\n"  # it is there: the job below must not see it
    victim_pids = list(processes_with_env(VICTIM_SECRET="s3cret-in-env"))
    assert victim_pids, "the victim's job holds its secret in its environment"
    m = person(ihub, "mallory")
    script = ihub.put_in_home(m.name, ATTACK)
    targets = {
        "read": [str(data / f) for f in PLATFORM_FILES] + [
            str(vol_dir / "secret.txt"), str(data / "workspaces" / "home" / victim.name / "note.txt"),
            f"/home/{victim.name}/note.txt", str(REPO / "README.md"), str(REPO / ".git" / "config"),
            str(data / "jobs" / str(victim.job["id"]) / "run" / "instance-0.json")],
        "write": ["/etc/ti-pwned", "/usr/ti-pwned", f"{sys.prefix}/ti-pwned", str(REPO / "ti_hub" / "ti-pwned"),
                  str(data / "ti-pwned"), str(vol_dir / "ti-pwned"), "/root/ti-pwned"],
        # reversed: its own environment (TARGETS) must not contain what it looks for in others'
        "signal": victim_pids, "secret": "s3cret-in-env"[::-1], "victim": victim.name[::-1],
    }
    j = job(m, "attack", f"python3 {script}", env={"TARGETS": json.dumps(targets)})
    done = m.wait_job(j["id"], timeout=120)
    text = log_of(m, j["id"])
    assert done["status"] == "completed", text
    seen = json.loads(text.strip().splitlines()[-1])
    for path, outcome in seen["read"].items():
        assert outcome != "read", f"the job read {path}"
    for path, outcome in seen["write"].items():
        assert outcome != "written", f"the job wrote {path}"
        assert not os.path.exists(path) or path.startswith("/root"), path
    assert seen["signal"] == {str(p): "no such process" for p in victim_pids}  # not even visible
    assert not seen["environ_with_secret"] and not seen["victim_processes"]
    assert seen["uid"] == uid_of(ihub, m.name) and seen["uid"] not in (0, uid_of(ihub, victim.name))
    assert seen["cap_eff"] == 0 and seen["no_new_privs"] == 1
    assert seen["processes"] <= 4  # its own pid namespace: the sandbox's init, the shell, python (and ps)


def test_the_ssh_gateway_builds_sessions_from_the_platforms_records_only(ihub, keys_dir):
    """Finding 1: a job cannot rewrite what the gateway reads; a session in it runs as its owner, without
    capabilities, inside its sandbox."""
    m = person(ihub, "sshmal")
    key = keys_dir / m.name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    m.ok("POST", "/keys", json={"name": "laptop", "key": (keys_dir / f"{m.name}.pub").read_text()})
    data = Path(ihub.data_dir)
    j = job(m, "ssh-attack", "echo up; sleep 600", endpoints=["ssh"])
    m.wait_job(j["id"], states=("running",), timeout=90)
    run = data / "jobs" / str(j["id"]) / "run" / "instance-0.json"
    before = run.read_bytes()
    opts = ["-p", str(ihub.ssh_port), "-i", str(key), "-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]
    attempt = (f"echo '{{\"argv\": [\"/bin/sh\"]}}' > {run} && echo REWROTE; id -u; "
               "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; readlink /proc/self/ns/mnt")
    r = subprocess.run(["ssh", *opts, f"{m.name}+ssh-attack@127.0.0.1", attempt], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "REWROTE" not in lines and run.read_bytes() == before  # the record is beyond the sandbox
    assert lines[0] == str(uid_of(ihub, m.name))
    assert lines[1].split() == ["CapEff:", "0000000000000000"] and lines[2].split() == ["NoNewPrivs:", "1"]
    assert lines[3] != os.readlink("/proc/self/ns/mnt")  # not the host's mount namespace
    # a second session still works: nothing a session did changed how sessions are made
    r = subprocess.run(["ssh", *opts, f"{m.name}+ssh-attack@127.0.0.1", "id -u"], capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.strip() == str(uid_of(ihub, m.name))
    m.api("POST", f"/jobs/{j['id']}/kill")


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("isokeys")



def test_a_job_cannot_serve_another_users_endpoint(ihub):
    """Finding 4: mallory's job listens on the port bob declared; bob's endpoint never serves mallory's page."""
    bob, m = person(ihub, "epbob"), person(ihub, "epmal")
    port = free_job_port()
    b = job(bob, "quiet", "echo up; sleep 600", ports=[port])
    bob.wait_job(b["id"], states=("running",), timeout=90)
    page = ihub.put_in_home(m.name, ATTACK, "index.html")
    squat = job(m, "squat", f"cd {os.path.dirname(page)} && python3 -m http.server {port} --bind 127.0.0.1")
    m.wait_job(squat["id"], states=("running",), timeout=90)
    wait(lambda: "Serving HTTP" in log_of(m, squat["id"]), 30, "mallory's server")
    r = bob.http.get(f"{ihub.url}/services/ti/endpoints/{b['id']}/0/{port}/index.html", timeout=30)
    assert r.status_code == 502, r.text
    # mallory's server listens in mallory's job's own network: bob's endpoint reaches bob's, where nothing listens
    assert "ATTACK" not in r.text and r.json()["field"] == "port"
    for s, j in ((bob, b), (m, squat)):
        s.api("POST", f"/jobs/{j['id']}/kill")


def test_limits_stop_a_job_with_a_plain_reason(ihub):
    """Finding 9: a job's log and its own directories have a size limit (1 MiB and 20 MiB here)."""
    u = person(ihub, "limits")
    chatty = job(u, "chatty", "yes 0123456789abcdef | head -c 3000000; sleep 30")
    filler = job(u, "filler", "dd if=/dev/zero of=/job/big bs=1M count=60 status=none; sleep 30")
    for j, why in ((chatty, "it wrote more than its log limit of 1 MiB"),
                   (filler, "its work directory and /tmp grew past their limit of 20 MiB")):
        done = u.wait_job(j["id"], timeout=90)
        assert done["status"] == "failed" and why in done["reason"], done
    assert len(log_of(u, chatty["id"]).encode()) <= (1 << 20) + 4096  # the limit, and the platform's own line


def test_a_locked_database_answers_503_and_stores_nothing(ihub):
    """Finding 9: another process holding the database's write lock past the busy timeout gets callers a 503 with
    Retry-After and a plain message, never a 500, and nothing half-stored. (Jobs cannot reach the file at all:
    test_a_job_reaches_nothing_of_the_platform_nor_of_other_users.)"""
    u = person(ihub, "locked")
    u.ok("GET", "/me")
    held, release = threading.Event(), threading.Event()

    def hold():
        conn = sqlite3.connect(Path(ihub.data_dir) / "ti.sqlite", timeout=30, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        release.wait(30)
        conn.execute("ROLLBACK")
        conn.close()

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(30)
        r = u.api("POST", "/jobs", json={"name": "while-locked", "plan": "cpu-small", "image": "python-cpu",
                                         "command": "true"})
        assert r.status_code == 503, r.text
        assert r.headers.get("Retry-After") == "5" and "busy" in r.json()["detail"]
        assert u.api("GET", "/me").status_code == 200  # reads go on (WAL)
    finally:
        release.set()
        t.join()
    assert u.ok("GET", "/jobs", params={"name": "while-locked"})["total"] == 0
    assert u.api("POST", "/jobs", json={"name": "while-locked", "plan": "cpu-small", "image": "python-cpu",
                                        "command": "true"}).status_code == 201


def test_a_workspace_that_dies_is_not_shown_running_and_its_kernels_end_with_it(ihub):
    """Finding 8: a workspace whose process is gone is recorded stopped (the hub polls only every 30 s); a
    stopped workspace leaves none of its processes (kernels included) behind."""
    u = person(ihub, "wsdie")
    r = u.hub_api("POST", f"/users/{u.name}/servers/labby", json={"plan": "iso-ws"})
    assert r.status_code in (201, 202), r.text
    u.wait_server("labby", timeout=90)
    base = f"{ihub.url}/user/{u.name}/labby"
    k = u.http.post(f"{base}/api/kernels", json={"name": "python3"}, timeout=60,
                    headers={"Authorization": f"token {u.token}"})
    assert k.status_code == 201, k.text
    uid = uid_of(ihub, u.name)

    def processes_of(uid: int) -> list[int]:
        out = []
        for p in Path("/proc").iterdir():
            try:
                if p.name.isdigit() and p.stat().st_uid == uid and "Z" not in (p / "stat").read_text().split()[2]:
                    out.append(int(p.name))
            except OSError:
                continue
        return out

    assert len(processes_of(uid)) >= 2  # the server and its kernel, both as the user's own uid
    ws = next(j for j in u.ok("GET", "/jobs", params={"kind": "workspace"})["items"] if j["name"] == "labby")
    assert ws["status"] == "running"
    for pid in processes_of(uid):  # as a crash would: the workspace's processes vanish
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    wait(lambda: u.ok("GET", f"/jobs/{ws['id']}")["status"] == "stopped", 15, "the dead workspace to be stopped")
    assert not wait(lambda: not processes_of(uid) and [1], 15, "every process of the workspace to end") == []
    u.hub_api("DELETE", f"/users/{u.name}/servers/labby")


def test_users_filling_their_own_file_system_leave_the_platform_working(tmp_path_factory):
    """Finding 9: with --user-data-dir on a file system of its own, a job that fills it gets ENOSPC while the
    platform (database, logs, submissions) goes on."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system for users' data needs root")
    from hubproc import ADMIN_PASSWORD, ADMIN, start_hub, stop_hub

    base = tmp_path_factory.mktemp("udhub")
    data, users = base / "data", base / "users"
    data.mkdir()
    users.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(users)], check=True)
    # volumes as plain directories: what fills here is the users' file system itself, not a volume's own
    # (tests/e2e/test_disk_limits.py); a 1 GiB image on 48 MiB would fail its writes with I/O errors instead
    config = base / "jupyterhub_config.py"
    config.write_text("from ti_hub.hub.config import configure\nconfigure(c)\n"
                      "c.LocalVolumeDriver.disk_limits = 'off'\n")
    proc = None
    try:
        proc, hub, _ = start_hub(data, extra_env={"TI_HUB_USER_DATA_DIR": str(users)}, config=str(config))
        hub.data_dir = data
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        u = person(hub, "fill")
        u.ok("POST", "/volumes", json={"name": "bigvol", "kind": "filesystem", "capacity_gib": 1})
        hub.admin.ok("POST", "/plans", json={"name": "iso-tiny", "kinds": ["single"], "device_type": "cpu",
                                             "device_count": 0, "cpu": 0.1, "memory_mib": 512})
        j = job(u, "fill-it", "dd if=/dev/zero of=/mnt/big/zero bs=1M count=200 status=none; echo dd-exit=$?; "
                "sleep 2", volumes=[{"volume": "bigvol", "mount_path": "/mnt/big"}])
        done = u.wait_job(j["id"], timeout=120)
        text = log_of(u, j["id"])
        assert "No space left on device" in text and "dd-exit=1" in text, text
        assert done["status"] == "completed", done  # its log is whole: it lives with the platform's files
        assert os.statvfs(users).f_bavail == 0  # full indeed
        r = u.api("POST", "/jobs", json={"name": "after", "plan": "cpu-small", "image": "python-cpu",
                                         "command": "true"})
        assert r.status_code == 201, r.text  # the platform's own writes go on
        assert (data / "ti.sqlite").exists() and not (users / "ti.sqlite").exists()
    finally:
        if proc is not None:
            stop_hub(proc)
        subprocess.run(["umount", "-l", str(users)], check=False)
