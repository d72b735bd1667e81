"""Issue 31: TiHub installed under /tmp (a virtual environment and the package both there, in a ``mktemp -d``
directory, 0700 like any) runs jobs and workspaces, and user code finds this installation's ``python`` and
``ti`` first, in login shells too (JupyterLab's terminal and SSH logins are login shells, and Debian's
/etc/profile resets PATH), with nothing of the service's own PATH (here a made-up /opt/leakcheck/bin).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hubproc import own_hub
from tihub_client import wait

from ti_hub.backends.local import sandbox

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("ssh"), reason="needs OpenSSH's client (scripts/test installs it)")]

REPO = Path(__file__).resolve().parents[2]
LEAK = "/opt/leakcheck/bin"
WS = "tmp-box"
PROBE = ("bash -lc 'echo login-ti=$(command -v ti); echo login-python=$(command -v python3)'; "
         "echo plain-python=$(command -v python3); echo PATH=$PATH; "
         "python3 -c 'import sys; print(\"prefix=\" + sys.prefix)'; ti --help >/dev/null && echo ti-runs")


def fields(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def install():
    """A venv under /tmp (the system's packages through --system-site-packages), this checkout's ``ti_hub``
    copied next to it (found through a .pth file), and a ``ti`` script like pip's."""
    top = Path(tempfile.mkdtemp(prefix="ti31-", dir="/tmp"))  # 0700, root's
    venv, src = top / "venv", top / "src"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    shutil.copytree(REPO / "ti_hub", src / "ti_hub", ignore=shutil.ignore_patterns("__pycache__"))
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "ti31_source.pth").write_text(f"{src}\n")
    # Jupyter's configuration and data (server extensions enabled, JupyterLab's assets) are found under
    # sys.prefix, which pip fills when it installs into the venv; --system-site-packages leaves them in the base
    for part in ("etc/jupyter", "share/jupyter"):
        if (Path(sys.base_prefix) / part).is_dir():
            (venv / part).parent.mkdir(parents=True, exist_ok=True)
            (venv / part).symlink_to(Path(sys.base_prefix) / part)
    ti = venv / "bin" / "ti"
    ti.write_text(f"#!{python}\nimport sys\nfrom ti_hub.cli.main import main\nsys.exit(main())\n")
    ti.chmod(0o755)
    yield {"top": top, "venv": venv, "src": src, "python": str(python), "bin": str(venv / "bin")}
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def hub(tmp_path_factory, install):
    env = {"PATH": f"{LEAK}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    yield from own_hub(tmp_path_factory, "anywhere", extra_env=env, python=install["python"],
                       source=str(install["src"]))


@pytest.fixture(scope="module")
def user(hub, tmp_path_factory):
    u = hub.person("anywhere")
    key = tmp_path_factory.mktemp("anywhere-keys") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    u.key = key
    u.ok("POST", "/keys", json={"name": "laptop", "key": key.with_suffix(".pub").read_text()})
    return u


def ssh(hub, login: str, key: Path, *command: str, input: str | None = None) -> subprocess.CompletedProcess:
    argv = ["ssh", "-p", str(hub.ssh_port), "-F", "/dev/null", "-i", str(key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "IdentityAgent=none", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20",
            f"{login}@127.0.0.1", *command]
    return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=90)


def in_terminal(hub, user, server: str, line: str, until: str) -> str:
    """What a JupyterLab terminal of the workspace prints for ``line`` (typed, then Enter), up to ``until``."""
    import json
    import time

    import requests
    import websocket

    base, auth = f"{hub.url}/user/{user.name}/{server}", {"Authorization": f"token {user.token}"}
    r = requests.post(f"{base}/api/terminals", headers=auth, timeout=30)
    assert r.status_code == 200, r.text
    name = r.json()["name"]
    conn = websocket.create_connection(f"ws{base[4:]}/terminals/websocket/{name}", timeout=30,
                                       header=[f"Authorization: token {user.token}"])
    try:
        conn.send(json.dumps(["stdin", line + "\r"]))
        out, deadline = "", time.monotonic() + 30
        while until not in out and time.monotonic() < deadline:
            kind, *rest = json.loads(conn.recv())
            if kind == "stdout":
                out += rest[0]
        return out
    finally:
        conn.close()
        requests.delete(f"{base}/api/terminals/{name}", headers=auth, timeout=30)


def assert_platform_path(out: dict[str, str], install: dict) -> None:
    assert out["login-ti"] == f"{install['bin']}/ti", out
    assert out["login-python"] == f"{install['bin']}/python3", out
    assert out["plain-python"] == f"{install['bin']}/python3", out
    assert out["prefix"] == str(install["venv"]), out
    entries = out["PATH"].split(":")
    assert LEAK not in entries
    # only this installation's bin directory, then the system's: nothing else of the service's PATH
    assert entries[0] == install["bin"] and set(entries[1:]) <= set(sandbox.SYSTEM_PATH), entries


def test_a_job_runs_from_an_install_under_tmp_and_finds_its_ti(hub, user, install):
    job = user.ok("POST", "/jobs", json={"name": "from-tmp", "plan": "cpu-small", "image": "python-cpu",
                                         "command": PROBE})
    done = user.wait_job(job["id"])
    text = user.ok("GET", f"/jobs/{job['id']}/logs")["text"]
    assert done["status"] == "completed", (done["reason"], text)
    assert "ti-runs" in text.splitlines(), text
    assert_platform_path(fields(text), install)


def test_a_workspace_runs_from_an_install_under_tmp_and_shells_find_its_ti(hub, user, install):
    r = user.hub_api("POST", f"/users/{user.name}/servers/{WS}", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    user.wait_server(WS)  # JupyterLab itself runs from the venv under /tmp
    try:
        r = ssh(hub, f"{user.name}+{WS}", user.key, PROBE)  # `bash -c PROBE`: the workspace's own environment
        assert r.returncode == 0, r.stderr
        assert "ti-runs" in r.stdout.splitlines(), r.stdout
        assert_platform_path(fields(r.stdout), install)
        # no command: an SSH login shell (`bash -l`, reading the sandbox's /etc/profile) reads it from stdin
        r = ssh(hub, f"{user.name}+{WS}", user.key, input="echo login-ti=$(command -v ti); echo login-python="
                "$(command -v python3); echo login-path=$PATH; shopt -q login_shell && echo is-login\n")
        assert r.returncode == 0, r.stderr
        out = fields(r.stdout)
        assert "is-login" in r.stdout.splitlines(), r.stdout
        assert out["login-ti"] == f"{install['bin']}/ti" and out["login-python"] == f"{install['bin']}/python3", out
        assert LEAK not in out["login-path"].split(":")
        # JupyterLab's terminal: a login shell too (jupyter_server_terminals adds -l when it has no tty)
        out = in_terminal(hub, user, WS, 'echo "ti=[$(command -v ti)] py=[$(command -v python3)] '
                          'login=[$(shopt -q login_shell && echo yes)]"; echo DONE-$((40+2))', "DONE-42")
        assert f"ti=[{install['bin']}/ti] py=[{install['bin']}/python3] login=[yes]" in out, out
        # a user's files under the instance's /tmp are theirs; what the sandbox made on the way to the venv is
        # traversable, read-only below
        r = ssh(hub, f"{user.name}+{WS}", user.key,
                f"stat -c %a /tmp {install['top']}; touch /tmp/mine && echo wrote; touch {install['bin']}/x")
        assert r.stdout.split() == ["1777", "755", "wrote"] and "Read-only file system" in r.stderr, (r.stdout,
                                                                                                       r.stderr)
    finally:
        user.hub_api("DELETE", f"/users/{user.name}/servers/{WS}")
        wait(lambda: not user.hub_api("GET", f"/users/{user.name}").json()["servers"].get(WS), 60,
             "the workspace to stop")
