"""WS3: VS Code in the browser. A real code-server (scripts/install-code-server.sh, cached) behind the workspace's
jupyter-server-proxy, through TiHub's proxy: the owner's Chromium opens the workbench and sees their home; it runs
as the owner on a socket only they can open; another user is turned away."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from hubproc import own_hub
from tihub_client import processes_with_env

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def code_server() -> str:
    r = subprocess.run(["bash", str(REPO / "scripts" / "install-code-server.sh")], capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, f"scripts/install-code-server.sh failed:\n{r.stderr[-3000:]}"
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def vhub(tmp_path_factory, code_server):
    yield from own_hub(tmp_path_factory, "vscode", config_lines=f"c.TiLocalSpawner.code_server = {code_server!r}\n")


@pytest.fixture(scope="module")
def owner(vhub):
    u = vhub.person("coder")
    r = u.hub_api("POST", f"/users/{u.name}/servers/code-box", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    u.wait_server("code-box")
    yield u
    u.hub_api("DELETE", f"/users/{u.name}/servers/code-box")
    u.wait_server("code-box", ready=False)


def code_server_processes() -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if any(b"code-server" in part for part in cmd[:2]) and b"--socket" in cmd:
            out.append(int(d.name))
    return out


def test_the_launcher_offers_vs_code(vhub, owner):
    base, auth = f"{vhub.url}/user/{owner.name}/code-box", {"Authorization": f"token {owner.token}"}
    import requests

    info = requests.get(f"{base}/server-proxy/servers-info", headers=auth, timeout=30)
    assert info.status_code == 200, info.text
    vscode = next(s for s in info.json()["server_processes"] if s["name"] == "vscode")
    assert vscode["launcher_entry"]["enabled"] is True and vscode["launcher_entry"]["title"] == "VS Code"


def test_the_owner_opens_vs_code_and_sees_their_home(vhub, owner, page_for):
    vhub.put_in_home(owner.name, __file__, "hello_vscode.py")
    page = page_for(vhub, owner)
    page.goto(f"{vhub.url}/user/{owner.name}/code-box/vscode/?folder=/home/{owner.name}", timeout=180_000)
    # the explorer lists the home's files: the workbench loaded and its WebSocket to code-server works
    page.locator(".monaco-workbench").wait_for(timeout=180_000)
    page.get_by_text("hello_vscode.py").first.wait_for(timeout=120_000)

    pids = code_server_processes()
    assert pids, "no code-server process"
    jupyter = processes_with_env(JUPYTERHUB_USER=owner.name, TI_WORKSPACE="code-box")
    uids = {os.stat(f"/proc/{p}").st_uid for p in jupyter}
    assert {os.stat(f"/proc/{p}").st_uid for p in pids} <= uids and 0 not in uids
    # it listens on a socket of mode 0600 (no port): nothing but the owner's Jupyter server can open it
    cmd = Path(f"/proc/{pids[0]}/cmdline").read_bytes().split(b"\0")
    assert b"--port" not in b" ".join(cmd) and cmd[cmd.index(b"--socket-mode") + 1] == b"0600"
    sock = cmd[cmd.index(b"--socket") + 1].decode()
    root = Path(f"/proc/{pids[0]}/root")
    mode = os.stat(f"{root}{sock}").st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600


def test_another_user_cannot_open_it(vhub, owner):
    import requests

    other = vhub.person("peeker")
    r = requests.get(f"{vhub.url}/user/{owner.name}/code-box/vscode/",
                     headers={"Authorization": f"token {other.token}"}, timeout=30, allow_redirects=False)
    assert r.status_code in (302, 403, 404) and "monaco" not in r.text, (r.status_code, r.text[:300])
    if r.status_code == 302:  # to the hub's login/authorize, never to the workbench
        assert "/vscode" not in r.headers["Location"].split("?")[0], r.headers["Location"]
