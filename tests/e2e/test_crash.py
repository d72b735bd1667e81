"""Crashes never leave the platform broken: a hub or `ti-hub start` killed hard leaves no orphans, the next start
stops what an earlier run left, a killed ti service answers again within seconds, shutdown stops workspaces
while the ti service still records it (docs/architecture.md "Crashes")."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import requests
from hubproc import ADMIN, ADMIN_PASSWORD, hub_command, start_hub, stop_hub
from tihub_client import kill_service_and_time, wait

pytestmark = pytest.mark.e2e

MODULES = {"ti_hub.launcher.app": "ti-hub start", "ti_hub.hub.main": "hub",
           "ti_hub.launcher.proxy_main": "proxy", "ti_hub.service": "ti service", "ti_hub.ssh": "ti-ssh"}
# the API answers again after a kill -9 of the ti service: a bound that catches only a hang (JupyterHub's own 30 s
# poll, or no restart at all); how fast it comes back is benchmarks/bench_service_restart.py's (docs/benchmarks.md)
RESTART_HANG_S = 30.0


def platform_processes(data: Path) -> dict[int, str]:
    """pid -> role of the live `ti-hub start`, hub, proxy, ti service (and API processes) and ti-ssh of ``data``."""
    out = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().decode(errors="replace").split("\0")
            env = (p / "environ").read_bytes().decode(errors="replace").split("\0")
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
        if module not in MODULES or state == "Z":
            continue
        ours = str(data) in argv if module == "ti_hub.launcher.app" else f"TI_HUB_DATA_DIR={data}" in env
        if ours:
            out[int(p.name)] = MODULES[module]
    return out


def wait_gone(data: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while platform_processes(data) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not platform_processes(data), f"left running: {platform_processes(data)}"


def log_of(data: Path) -> Path:
    return data.parent / f"{data.name}.log"


def set_log_aside(data: Path, n: int) -> None:
    """Keep a run's log (its processes may still write to it) apart from the next run's."""
    log_of(data).rename(data.parent / f"{data.name}.{n}.log")


def wait_ready_line(data: Path, timeout: float = 90) -> str:
    return wait(lambda: "TiHub is ready at" in log_of(data).read_text(errors="replace")
                and log_of(data).read_text(errors="replace"), timeout, "the ready line")


def run_of(hub) -> str:
    """The run id the ti service echoes ("" if it does not)."""
    r = requests.get(hub.api_url + "/health", timeout=5)
    return r.json().get("run", "") if r.status_code == 200 else ""


def serves(hub) -> None:
    admin = hub.login(ADMIN, ADMIN_PASSWORD)
    assert admin.ok("GET", "/me")["name"] == ADMIN


def restart_on_same_ports(data: Path, ports: dict, old_run: str, n: int):
    set_log_aside(data, n)
    proc, hub, _ = start_hub(data, ports=ports)
    log = wait_ready_line(data)
    assert "another ti service is running" not in log
    assert run_of(hub) not in ("", old_run), "an orphan of the earlier run answered"
    serves(hub)
    return proc, hub, log


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    yield d
    # whatever a failed test left: every process of this data dir
    for pid in platform_processes(d):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_kill_9_of_the_hub_leaves_no_orphans_and_the_next_start_serves(data):
    proc, hub, ports = start_hub(data)
    procs = [proc]
    try:
        old_run = run_of(hub)
        hub_pid = int((data / "jupyterhub.pid").read_text())
        assert set(platform_processes(data).values()) == set(MODULES.values())
        os.kill(hub_pid, signal.SIGKILL)
        wait_gone(data, 20)  # the proxy, ti service and ti-ssh died with the hub; `ti-hub start` exited
        assert proc.wait(5) != 0
        proc2, hub2, log = restart_on_same_ports(data, ports, old_run, 1)
        procs.append(proc2)
    finally:
        for p in procs:
            stop_hub(p)


def test_kill_9_of_ti_hub_start_stops_the_platform_and_the_next_start_serves(data):
    proc, hub, ports = start_hub(data)
    procs = [proc]
    try:
        old_run = run_of(hub)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_gone(data, 30)  # the hub got SIGTERM and stopped its services and proxy
        proc2, hub2, log = restart_on_same_ports(data, ports, old_run, 1)
        procs.append(proc2)
    finally:
        for p in procs:
            stop_hub(p)


def test_the_next_start_stops_a_hub_an_earlier_run_left_behind(data):
    """A hub that could not die with its `ti-hub start` (here: stopped) is found by its pid file and stopped."""
    proc, hub, ports = start_hub(data)
    procs = [proc]
    hub_pid = int((data / "jupyterhub.pid").read_text())
    try:
        old_run = run_of(hub)
        os.kill(hub_pid, signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.5)
        assert hub_pid in platform_processes(data)  # the hub, stopped, keeps its proxy and services running
        proc2, hub2, log = restart_on_same_ports(data, ports, old_run, 1)
        procs.append(proc2)
        assert f"an earlier run left the hub (pid {hub_pid})" in log
        assert hub_pid not in platform_processes(data)
    finally:
        try:
            os.kill(hub_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in procs:
            stop_hub(p)


def test_a_second_start_on_the_same_data_dir_is_refused(data):
    proc, hub, ports = start_hub(data)
    try:
        cmd, env = hub_command(data, ports)
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"another `ti-hub start` (pid {proc.pid}" in second.stderr, second.stderr[-2000:]
        serves(hub)  # the first one is untouched
        assert proc.poll() is None
    finally:
        stop_hub(proc)


def test_a_killed_ti_service_answers_again_within_seconds(data):
    """Killed hard twice, the ti service is restarted each time and the API answers again (a crash each time:
    the kill comes once the service has lived past QUICK_DEATH_S, so no back-off applies)."""
    from ti_hub.plumbing.children import QUICK_DEATH_S

    proc, hub, _ports = start_hub(data)
    hub.data_dir = data
    try:
        admin = hub.login(ADMIN, ADMIN_PASSWORD)
        figures = [kill_service_and_time(hub, admin, QUICK_DEATH_S + 0.5, RESTART_HANG_S) for _ in range(2)]
        print(f"\nAPI back after kill -9 of the ti service: {', '.join(f'{f:.2f}' for f in figures)} s")
    finally:
        stop_hub(proc)


def test_shutdown_stops_workspaces_while_the_ti_service_records_it(data):
    proc, hub, _ports = start_hub(data)
    try:
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        u = hub.person("crashws")
        r = u.hub_api("POST", f"/users/{u.name}/servers/term-box", json={"plan": "cpu-small"})
        assert r.status_code in (201, 202), r.text
        u.wait_server("term-box")
        assert u.ok("GET", "/jobs/term-box")["status"] == "running"
        os.kill(proc.pid, signal.SIGTERM)  # what Ctrl-C or a service manager does
        proc.wait(120)
        with sqlite3.connect(data / "ti.sqlite") as db:
            (status,) = db.execute("SELECT status FROM ti_jobs WHERE owner = ? AND name = ?",
                                   (u.name, "term-box")).fetchone()
        assert status == "stopped", "the workspace's stop was never recorded: the ti service stopped first"
        assert "Stopping 1 workspace(s) before the services" in log_of(data).read_text(errors="replace")
    finally:
        stop_hub(proc)


def _procs_with(argv_part: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and argv_part in (p / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(p.name))
        except OSError:
            continue
    return found


def test_ti_hub_stop_stops_the_platform_and_leaves_jobs_running(data):
    """Issue 31, newcomer 8: `ti-hub stop` from another terminal does what Ctrl-C does, and says that jobs go on."""
    proc, hub, _ports = start_hub(data)
    marker = f"{time.time_ns() % 10**6 + 7000}"
    try:
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        u = hub.person("stopper")
        j = u.ok("POST", "/jobs", json={"name": "keeps-going", "plan": "cpu-small", "image": "python-cpu",
                                        "command": f"exec sleep {marker}"})
        u.wait_job(j["id"], states=("running",))
        wait(lambda: any(Path(f"/proc/{p}/cmdline").read_bytes() == f"sleep\0{marker}\0".encode()
                         for p in _procs_with(f"sleep\0{marker}")), 30, "the job's process")
        cmd = [proc.args[0], "-m", "ti_hub.launcher.app", "stop", "--data-dir", str(data)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
        assert r.returncode == 0, r.stderr
        assert "training jobs keep running" in r.stdout and "TiHub stopped." in r.stdout, r.stdout
        assert proc.wait(10) is not None
        wait_gone(data)
        assert _procs_with(f"sleep\0{marker}"), "the job was stopped with the platform"
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and f"TiHub is not running on {data}" in again.stderr, again.stderr
    finally:
        stop_hub(proc)
        for pid in _procs_with(f"sleep\0{marker}") + _procs_with(str(data)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
