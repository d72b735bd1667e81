"""TiService.api_processes = 2: two API processes listen on the port, a leader that serves no HTTP schedules,
none outlives it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import requests
from hubproc import ADMIN, ADMIN_PASSWORD, start_hub, stop_hub

pytestmark = pytest.mark.e2e


def service_pids(data: Path) -> set[int]:
    out = set()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
            env = (p / "environ").read_bytes()
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"ti_hub.service" in cmd and str(data).encode() in env and state != "Z":
            out.add(int(p.name))
    return out


def listeners(port: int) -> dict[int, int]:
    """pid -> listening sockets on 127.0.0.1:port it holds (from /proc/net/tcp and the fds' inodes)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[1].endswith(f":{port:04X}") and f[3] == "0A":  # 0A: LISTEN
            inodes.add(f[9])
    out: dict[int, int] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (p / "fd").iterdir()]
        except OSError:
            continue
        n = sum(1 for link in links if link.startswith("socket:[") and link[8:-1] in inodes)
        if n:
            out[int(p.name)] = n
    return out


def test_two_api_processes(tmp_path):
    config = tmp_path / "jupyterhub_config.py"
    config.write_text("from ti_hub.hub.config import configure\nconfigure(c)\nc.TiService.api_processes = 2\n")
    data = tmp_path / "data"
    data.mkdir()
    proc, hub, ports = start_hub(data, config=str(config))
    try:
        pids = service_pids(data)
        assert len(pids) == 3, pids
        parent = {pid: int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in pids}
        (leader,) = [pid for pid in pids if parent[pid] not in pids]  # API processes are the leader's children
        # each API process has a listening socket of its own (SO_REUSEPORT); the leader has none
        assert listeners(ports["service"]) == {pid: 1 for pid in pids - {leader}}
        admin = hub.login(ADMIN, ADMIN_PASSWORD)
        started = time.monotonic()
        ids = [admin.ok("POST", "/jobs", json={"name": f"multi-{i}", "plan": "cpu-small", "image": "python-cpu",
                                               "command": "echo ok"})["id"] for i in range(6)]
        for job_id in ids:  # whichever process took the submission, the leader admitted it
            assert admin.wait_job(job_id, timeout=60)["status"] == "completed"
        assert time.monotonic() - started < 30
        # a grant counts at once in every API process (each keeps roles in memory under the stored stamp)
        hub.admin = admin
        user = hub.person("multi")

        def permissions() -> set[str]:  # a new connection per request: both processes answer some
            seen = set()
            for _ in range(12):
                r = requests.get(hub.api_url + "/me", headers={"Authorization": f"token {user.token}",
                                                               "Connection": "close"}, timeout=30)
                seen.add(tuple(r.json()["permissions"]))
            return seen

        assert permissions() == {tuple(user.ok("GET", "/me")["permissions"])}
        admin.ok("POST", "/roles", json={"name": "multi-viewer", "permissions": ["vc:view"]})
        admin.ok("POST", "/grants", json={"grants": [{"role": "multi-viewer", "user": user.name}]})
        assert permissions() == {("custom:ti:vc:view",)}
        # the leader dies hard: its API processes follow, the hub restarts the service, the API answers again
        os.kill(leader, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = service_pids(data)
            if len(now) == 3 and not (now & pids):
                break
            time.sleep(0.3)
        assert len(service_pids(data)) == 3 and not (service_pids(data) & pids)
        deadline = time.monotonic() + 30
        while admin.api("GET", "/me").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert admin.ok("GET", "/jobs")["total"] == 6
    finally:
        stop_hub(proc)
    time.sleep(1)
    assert not service_pids(data), "a service process outlived the platform"
