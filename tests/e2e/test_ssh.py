"""DEV4/WS3: the SSH gateway against a real embedded hub, driven by Debian's OpenSSH client (ssh, scp, sftp).

One workspace (``dev-box``, a volume at /mnt/sshdata) is started through the hub for the module; the last
test stops it. Logins use generated ed25519 keys registered with POST /keys.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import requests
from sshkit import pty_session
from tihub_client import wait

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("ssh"), reason="needs OpenSSH's client (scripts/test installs it)")]

WS = "dev-box"


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path


def ssh_opts(hub, key: Path, source: str | None = None, log_level: str = "ERROR") -> list[str]:
    opts = ["-F", "/dev/null", "-i", str(key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
            "-o", f"LogLevel={log_level}", "-o", "ConnectTimeout=20"]
    return opts + (["-b", source] if source else [])


def ssh(hub, login: str, key: Path, *command: str, source: str | None = None, input: str | None = None,
        extra: tuple[str, ...] = (), timeout: float = 60) -> subprocess.CompletedProcess:
    argv = ["ssh", "-p", str(hub.ssh_port), *ssh_opts(hub, key, source), *extra, f"{login}@127.0.0.1", *command]
    return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)


def scp(hub, key: Path, *args: str) -> subprocess.CompletedProcess:
    argv = ["scp", "-P", str(hub.ssh_port), *ssh_opts(hub, key), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def person_with_key(hub, prefix: str, tmp: Path):
    u = hub.person(prefix)
    u.key = keygen(tmp / f"{u.name}_ed25519")
    u.ok("POST", "/keys", json={"name": "laptop", "key": (tmp / f"{u.name}_ed25519.pub").read_text()})
    return u


def hub_log(hub) -> str:
    return (hub.data_dir.parent / f"{hub.data_dir.name}.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sshkeys")


@pytest.fixture(scope="module")
def alice(hub, keys_dir):
    """A user with a registered key and a running workspace with a volume."""
    u = person_with_key(hub, "sshalice", keys_dir)
    u.ok("POST", "/volumes", json={"name": "ssh-data", "kind": "filesystem", "capacity_gib": 1})
    r = u.hub_api("POST", f"/users/{u.name}/servers/{WS}",
                  json={"plan": "cpu-small", "volumes": [{"volume": "ssh-data", "mount_path": "/mnt/sshdata"}]})
    assert r.status_code in (201, 202), r.text
    u.wait_server(WS)
    u.ws = u.ok("GET", f"/jobs/{WS}")
    u.volume_dir = hub.data_dir / "volumes" / str(u.ws["volumes"][0]["volume_id"])
    (u.volume_dir / "from-host.txt").write_text("volume content\n")
    u.home = hub.data_dir / "workspaces" / "home" / u.name
    return u


def test_a_command_runs_in_the_workspace_and_its_exit_status_comes_back(hub, alice):
    r = ssh(hub, f"{alice.name}+{WS}", alice.key,
            "echo ws=$TI_WORKSPACE user=$JUPYTERHUB_USER cuda=[$CUDA_VISIBLE_DEVICES]; pwd; "
            "cat /mnt/sshdata/from-host.txt; grep CapEff /proc/self/status; exit 7")
    assert r.returncode == 7, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"ws={WS} user={alice.name} cuda=[]"
    assert lines[1] == f"/home/{alice.name}"  # the home, where the sandbox shows it
    assert lines[2] == "volume content"  # the workspace's volume, at its mount path inside the sandbox
    assert lines[3].split() == ["CapEff:", "0000000000000000"]  # never a privileged shell
    assert not Path("/mnt/sshdata").exists()  # the mount exists only inside the workspace's sandbox
    # no name: the user's only running workspace; stdin reaches the command
    r = ssh(hub, alice.name, alice.key, "cat; echo ws=$TI_WORKSPACE", input="piped\n")
    assert (r.returncode, r.stdout) == (0, f"piped\nws={WS}\n"), r.stderr


def test_interactive_shell_on_a_pty_follows_window_changes(hub, alice):
    pytest.importorskip("asyncssh")
    import asyncio

    out = asyncio.run(pty_session(hub.ssh_port, f"{alice.name}+{WS}", alice.key, "echo TERM=$TERM; stty size; tty\n",
                                  "40 120", (100, 33), "stty size; exit 5\n"))
    assert "TERM=xterm-256color" in out and "40 120" in out and "33 100" in out and "/dev/pts/" in out
    assert out.endswith("status=5")
    r = ssh(hub, f"{alice.name}+{WS}", alice.key, "tty", extra=("-tt",))
    assert r.returncode == 0 and "/dev/pts/" in r.stdout


def test_scp_and_sftp_both_ways_see_what_the_workspace_sees(hub, alice, keys_dir):
    src = keys_dir / "upload.bin"
    src.write_bytes(os.urandom(300_000))
    dest = f"{alice.name}+{WS}@127.0.0.1"
    r = scp(hub, alice.key, str(src), f"{dest}:uploaded.bin")  # OpenSSH 9 scp speaks SFTP
    assert r.returncode == 0, r.stderr
    assert (alice.home / "uploaded.bin").read_bytes() == src.read_bytes()
    back = keys_dir / "downloaded.txt"
    r = scp(hub, alice.key, f"{dest}:/mnt/sshdata/from-host.txt", str(back))
    assert r.returncode == 0, r.stderr
    assert back.read_text() == "volume content\n"
    r = scp(hub, alice.key, "-O", str(src), f"{dest}:/mnt/sshdata/legacy.bin")  # the old protocol: scp -t
    assert r.returncode == 0, r.stderr
    assert (alice.volume_dir / "legacy.bin").read_bytes() == src.read_bytes()
    batch = "ls /mnt/sshdata\nmkdir made-by-sftp\nsymlink /mnt/sshdata/from-host.txt sym.txt\n"
    r = subprocess.run(["sftp", "-P", str(hub.ssh_port), *ssh_opts(hub, alice.key), "-b", "-", dest], input=batch,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "from-host.txt" in r.stdout and "legacy.bin" in r.stdout
    assert (alice.home / "made-by-sftp").is_dir()
    assert os.readlink(alice.home / "sym.txt") == "/mnt/sshdata/from-host.txt"  # OpenSSH's argument order


def test_port_forwarding_reaches_a_server_inside_the_workspace(hub, alice):
    inner = free_port()
    (alice.home / "marker.txt").write_text("served from the workspace")
    r = ssh(hub, f"{alice.name}+{WS}", alice.key,
            f"nohup python3 -m http.server {inner} --bind 127.0.0.1 >/dev/null 2>&1 & echo $! > http.pid")
    assert r.returncode == 0, r.stderr
    local = free_port()
    fwd = subprocess.Popen(["ssh", "-p", str(hub.ssh_port), *ssh_opts(hub, alice.key), "-N", "-L",
                            f"{local}:localhost:{inner}", f"{alice.name}+{WS}@127.0.0.1"],
                           stderr=subprocess.PIPE, text=True)
    try:
        def fetch():
            try:
                return requests.get(f"http://127.0.0.1:{local}/marker.txt", timeout=5)
            except requests.RequestException:
                return None
        resp = wait(fetch, 60, "the forwarded port")
        assert resp.status_code == 200 and resp.text == "served from the workspace"
    finally:
        fwd.terminate()
        fwd.wait(10)
    # a destination outside the workspace is refused with the reason
    local = free_port()
    fwd = subprocess.Popen(["ssh", "-p", str(hub.ssh_port), *ssh_opts(hub, alice.key, log_level="INFO"), "-N",
                            "-L", f"{local}:192.0.2.1:80", f"{alice.name}+{WS}@127.0.0.1"],
                           stderr=subprocess.PIPE, text=True)
    try:
        def refused():
            try:
                with socket.create_connection(("127.0.0.1", local), timeout=5) as s:
                    return s.recv(100) == b""  # accepted by ssh, then closed: the gateway said no
            except OSError:
                return False
        wait(refused, 60, "the refused forward")
    finally:
        fwd.terminate()
        try:
            err = fwd.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:  # ssh may linger on SIGTERM on a loaded machine; what it said is kept
            fwd.kill()
            err = fwd.communicate(timeout=10)[1]
    assert "open failed: connect failed: only ports inside the workspace can be forwarded" in err


NET_PROBE = """
import json, os, socket, urllib.error, urllib.request
out = {}
for name, port in (("public", %d), ("ssh", %d)):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close(); out[name] = "connected"
    except OSError as e:
        out[name] = type(e).__name__
for key in ("JUPYTERHUB_API_URL", "TI_API_URL"):
    out[key + "_port"] = urllib.request.urlparse(os.environ[key]).port
    try:
        out[key] = urllib.request.urlopen(os.environ[key].rstrip("/") + "/", timeout=10).status
    except urllib.error.HTTPError as e:
        out[key] = e.code
    except OSError as e:
        out[key] = type(e).__name__
print(json.dumps(out))
"""


def test_a_workspace_reaches_the_hub_and_the_service_and_nothing_else_of_the_host(hub, alice):
    """Issue 30, finding 3: a workspace has a network of its own; only the ports of the hub's and the ti service's
    APIs (which Jupyter and `ti` need, and which ask for a token) are relayed in. The SSH gateway, on the host's
    loopback, is not there."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (as in CI)")
    public = int(hub.url.rsplit(":", 1)[1])
    r = ssh(hub, f"{alice.name}+{WS}", alice.key, f"python3 -c '{NET_PROBE % (public, hub.ssh_port)}'")
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    relayed = {seen["JUPYTERHUB_API_URL_port"], seen["TI_API_URL_port"]}
    assert seen["ssh"] == "ConnectionRefusedError", seen  # on the host's loopback, not relayed
    # the public port (the proxy) is there only when the workspace's API URL goes through it
    assert seen["public"] == ("connected" if public in relayed else "ConnectionRefusedError"), seen
    assert isinstance(seen["JUPYTERHUB_API_URL"], int) and isinstance(seen["TI_API_URL"], int), seen


def test_the_ssh_command_is_offered_by_the_api_and_the_cli(hub, alice):
    doc = alice.ok("GET", f"/ssh/command?name={WS}")
    assert doc["command"] == f"ssh -p {hub.ssh_port} {alice.name}+{WS}@127.0.0.1"
    out = subprocess.run(["python3", "-m", "ti_hub.cli.main", "ssh-command", WS, "--url", hub.url, "--token",
                          alice.token], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.returncode == 0 and out.stdout.strip() == doc["command"], out.stderr
    # the gateway's routes are the gateway's only
    assert alice.api("GET", f"/ssh/keys/{alice.name}").status_code == 403
    assert alice.api("GET", f"/ssh/targets/{alice.name}").status_code == 403


def test_wrong_key_and_other_users_workspace_are_refused(hub, alice, keys_dir):
    stranger = keygen(keys_dir / "stranger_ed25519")
    r = ssh(hub, f"{alice.name}+{WS}", stranger, "true")
    assert r.returncode == 255 and "Permission denied (publickey)" in r.stderr
    bob = person_with_key(hub, "sshbob", keys_dir)
    r = ssh(hub, f"{alice.name}+{WS}", bob.key, "true")  # bob's own valid key opens nothing of alice's
    assert r.returncode == 255 and "Permission denied (publickey)" in r.stderr
    r = ssh(hub, f"{bob.name}+{WS}", bob.key, "true")  # and bob has no workspace of that name
    assert r.returncode == 1 and f"you have no workspace or job named '{WS}'" in r.stderr
    log = hub_log(hub)
    assert f"ssh login failed: user={alice.name} source=127.0.0.1 reason=key SHA256:" in log


def test_an_account_whose_approval_was_taken_back_cannot_log_in(hub, keys_dir):
    erin = person_with_key(hub, "ssherin", keys_dir)
    r = ssh(hub, erin.name, erin.key, "true")
    assert r.returncode == 1 and "no running workspace" in r.stderr  # logged in; nothing to reach
    hub.admin.authorize(erin.name)  # NativeAuthenticator's toggle: unauthorized now
    r = ssh(hub, erin.name, erin.key, "true")
    assert r.returncode == 255 and "Permission denied" in r.stderr
    # the gateway logs the refusal as the client hears it: give its log line a moment to reach the file
    wait(lambda: f"user={erin.name} source=127.0.0.1 reason=the account is not authorized" in hub_log(hub), 10,
         "the refused login in the gateway's log")


def test_jobs_with_an_ssh_endpoint_are_reachable_by_instance(hub, alice):
    job = alice.ok("POST", "/jobs", json={"name": "ssh-job", "plan": "cpu-small", "image": "python-cpu",
                                          "command": "sleep 300", "endpoints": ["ssh"]})
    plain = alice.ok("POST", "/jobs", json={"name": "no-ssh-job", "plan": "cpu-small", "image": "python-cpu",
                                            "command": "sleep 300"})
    try:
        wait(lambda: alice.ok("GET", f"/jobs/{job['id']}")["status"] == "running", 60, "the job to run")
        r = ssh(hub, f"{alice.name}+ssh-job", alice.key, "echo job=$TI_JOB_ID; pwd")
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [f"job={job['id']}", "/job"]  # its work directory, in its sandbox
        r = ssh(hub, f"{alice.name}+ssh-job.0", alice.key, "true")
        assert r.returncode == 0, r.stderr
        r = ssh(hub, f"{alice.name}+ssh-job.1", alice.key, "true")
        assert r.returncode == 1 and "has instances 0-0" in r.stderr
        r = ssh(hub, f"{alice.name}+no-ssh-job", alice.key, "true")
        assert r.returncode == 1 and "does not enable SSH" in r.stderr
    finally:
        for j in (job, plain):
            alice.api("POST", f"/jobs/{j['id']}/kill")


def test_failed_logins_lock_out_the_address_not_the_owner(hub, keys_dir):
    carol, dave = person_with_key(hub, "sshcarol", keys_dir), person_with_key(hub, "sshdave", keys_dir)
    stranger = keys_dir / "stranger_ed25519"
    if not stranger.exists():
        keygen(stranger)
    for _ in range(10):  # the default burst: 10 failed logins
        r = ssh(hub, carol.name, stranger, "true", source="127.0.0.9")
        assert r.returncode == 255 and "Permission denied" in r.stderr
    r = ssh(hub, dave.name, dave.key, "true", source="127.0.0.9")  # the right key, from a refused address
    assert r.returncode == 255 and "too many failed logins from 127.0.0.9" in r.stderr
    r = ssh(hub, carol.name, carol.key, "true", source="127.0.0.9")  # the owner, from the attacker's address
    assert r.returncode == 255 and "too many failed logins" in r.stderr
    # the owner from anywhere else logs in: an attacker at one address cannot lock them out (it logs in, and
    # finds no workspace running)
    r = ssh(hub, carol.name, carol.key, "true", source="127.0.0.10")
    assert r.returncode == 1 and "no running workspace" in r.stderr, r.stderr
    r = ssh(hub, dave.name, dave.key, "true", source="127.0.0.10")  # others are not affected
    assert r.returncode == 1 and "no running workspace" in r.stderr


def test_a_workspace_without_jupyter_is_reached_by_ssh_only(hub, keys_dir):
    """WS3 `jupyter: false`: no Jupyter server runs; the workspace's URL says how to reach it; SSH works."""
    from tihub_client import processes_with_env

    u = person_with_key(hub, "sshonly", keys_dir)
    r = u.hub_api("POST", f"/users/{u.name}/servers/dark-box", json={"plan": "cpu-small", "jupyter": False,
                                                                      "ssh": False})
    assert r.status_code == 400 and "jupyter" in r.json()["message"], r.text  # reachable by nothing: refused
    r = u.hub_api("POST", f"/users/{u.name}/servers/shell-box", json={"plan": "cpu-small", "jupyter": False})
    assert r.status_code in (201, 202), r.text
    try:
        u.wait_server("shell-box")
        assert u.ok("GET", "/jobs/shell-box")["status"] == "running"
        cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    for pid in processes_with_env(JUPYTERHUB_USER=u.name, TI_WORKSPACE="shell-box")]
        assert cmdlines and not any("singleuser" in c for c in cmdlines), cmdlines
        page = u.browser.get(f"{hub.url}/user/{u.name}/shell-box/lab")
        assert page.status_code == 200 and "without Jupyter" in page.text and f"{u.name}+shell-box" in page.text
        r = ssh(hub, f"{u.name}+shell-box", u.key, "echo ws=$TI_WORKSPACE; pwd")
        assert r.returncode == 0 and r.stdout.splitlines() == ["ws=shell-box", f"/home/{u.name}"], r.stderr
    finally:
        u.hub_api("DELETE", f"/users/{u.name}/servers/shell-box")
        u.wait_server("shell-box", ready=False)
    assert u.ok("GET", "/jobs/shell-box")["status"] == "stopped"


def test_a_workspace_started_without_ssh_access_is_refused(hub, keys_dir):
    u = person_with_key(hub, "sshoff", keys_dir)
    r = u.hub_api("POST", f"/users/{u.name}/servers/quiet", json={"plan": "cpu-small", "ssh": False})
    assert r.status_code in (201, 202), r.text
    u.wait_server("quiet")
    try:
        r = ssh(hub, f"{u.name}+quiet", u.key, "true")
        assert r.returncode == 1 and "was started without SSH access" in r.stderr, r.stderr
    finally:
        u.hub_api("DELETE", f"/users/{u.name}/servers/quiet")
        u.wait_server("quiet", ready=False)


def test_a_stopped_workspace_is_refused_with_how_to_start_it(hub, alice):
    """Last: stops the module's workspace. What sessions left running there ends with it."""
    r = alice.hub_api("DELETE", f"/users/{alice.name}/servers/{WS}")
    assert r.status_code in (202, 204)
    alice.wait_server(WS, ready=False)
    r = ssh(hub, f"{alice.name}+{WS}", alice.key, "true")
    assert r.returncode == 1
    assert f"workspace '{WS}' is stopped: start it at {hub.url}/hub/spawn/{alice.name}/{WS}" in r.stderr
    r = ssh(hub, alice.name, alice.key, "true")
    assert r.returncode == 1 and "you have no running workspace" in r.stderr
    # the server started over SSH in the forwarding test ran as alice's uid, in the workspace's sandbox
    uid = alice.home.stat().st_uid
    assert uid != 0

    def none_left():
        for p in Path("/proc").iterdir():
            try:
                if p.name.isdigit() and p.stat().st_uid == uid and "Z" not in (p / "stat").read_text().split()[2]:
                    return False
            except OSError:
                continue
        return True
    wait(none_left, 40, "the workspace's leftover SSH processes to end")
