"""Starting and stopping a real embedded TiHub (JupyterHub + proxy + ti service) in tests.

A plain module, not a conftest: test packages with conftests of their own import it by this name. Every hub it
starts stops on every path: when it never gets ready, when own_hub fails after starting it, and when a fixture
fails (or skips) after starting one (``pytest_fixture_setup`` below, which tests/conftest.py registers).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tihub_client import Hub

ADMIN, ADMIN_PASSWORD = "admin", "admin-pass-1234"
# `ti-hub start` of every test hub of this process not stopped yet (stop_hub takes it out)
_LIVE: set[subprocess.Popen] = set()
# the threads of stop_in_background
_STOPPING: list[threading.Thread] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hub_command(data_dir: Path, ports: dict[str, int], extra_env: dict[str, str] | None = None,
                config: str | None = None, python: str | None = None, source: str | None = None
                ) -> tuple[list[str], dict[str, str]]:
    """The `ti-hub start` command line and environment for a test hub on ``ports``. ``python``: the interpreter
    to start it with (default: this one); ``source``: the directory holding the ``ti_hub`` it imports (default:
    this checkout)."""
    # every answer of the ti service is checked against the API document (TiService.check_responses): an
    # answer that drifted from it is a 500 naming the difference, in whichever test meets it
    # every test hub runs as root with the default uid range: each gets a registry of uid ranges of its own
    # (TiService.unix_uid_registry), else the second hub on this machine would refuse to start (ops/uidranges.py)
    registry = str(Path(data_dir).parent / f"{Path(data_dir).name}.uid-ranges.json")
    env = {**os.environ, "TI_HUB_ADMIN_PASSWORD": ADMIN_PASSWORD, "TI_HUB_CHECK_RESPONSES": "1",
           "TI_HUB_UID_REGISTRY": registry,
           # image lists read registries (IMG3): only the tests' own, on this machine, never one off it
           "TI_HUB_REGISTRY_REACH": "loopback", **(extra_env or {})}
    # the hub, the ti service and the job supervisors import this checkout, whatever pip installed
    repo = source or str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    cmd = [python or sys.executable, "-m", "ti_hub.launcher.app", "start", "--admin", ADMIN,
           "--data-dir", str(data_dir), "--port", str(ports["port"]), "--hub-port", str(ports["hub"]),
           "--proxy-api-port", str(ports["proxy"]),
           "--service-port", str(ports["service"]), "--ssh-port", str(ports["ssh"]), "--start-timeout", "90"]
    if config:
        cmd += ["--config", config]
    return cmd, env


def start_hub(data_dir: Path, extra_env: dict[str, str] | None = None, config: str | None = None,
              ports: dict[str, int] | None = None, port: int | None = None, python: str | None = None,
              source: str | None = None, ready_timeout: float = 90) -> tuple:
    """Start `ti-hub start` on fresh ports (or on ``ports``, e.g. those of a hub that crashed). ``port``: the
    public one, when the config must name it in advance (an OAuth callback URL). A hub that exits or is not
    ready within ``ready_timeout`` seconds is stopped (with what it started) before the error is raised."""
    ports = ports or {k: free_port() for k in ("port", "hub", "proxy", "service", "ssh")}
    if port:
        ports["port"] = port
    cmd, env = hub_command(data_dir, ports, extra_env, config, python, source)
    log = open(data_dir.parent / f"{data_dir.name}.log", "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _LIVE.add(proc)
    url = f"http://127.0.0.1:{ports['port']}"
    hub = Hub(url)
    hub.ssh_port = ports["ssh"]
    deadline = time.monotonic() + ready_timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:  # what it started may live on: stopped below all the same
                raise RuntimeError(f"ti-hub (pid {proc.pid}) exited with {proc.returncode}; see {log.name}")
            # what `ti-hub start` says once its ti service answers through the proxy (probing the proxy before it
            # routes the service would fill the log with 404 errors, as it did before issue 17)
            if b"TiHub is ready at" in Path(log.name).read_bytes() and hub.ready():
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"ti-hub (pid {proc.pid}) did not become ready in {ready_timeout:g} s; "
                               f"stopped; see {log.name}")
    except BaseException:
        stop_hub(proc)
        raise
    return proc, hub, ports


def terminate_group(proc: subprocess.Popen, grace: float = 20) -> None:
    """SIGTERM to `ti-hub start`'s process group (it forwards to the hub), SIGKILL after the grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def unmount_under(data: str | Path) -> list[str]:
    """Unmount (lazily) every mount under ``data``: a hub's volume and work-directory file systems outlive its
    stop (storage/loopfs.py), and its jobs' pinned network namespaces may too. Their loop devices detach
    themselves once the last user is gone (autoclear). Returns the mount points."""
    from ti_hub.storage.loopfs import MNT_DETACH, mount_sources, umount

    prefix = os.path.realpath(data).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        points = sorted((p for p in mount_sources(f.read()) if p.startswith(prefix)), key=len, reverse=True)
    for point in points:
        try:
            umount(point, MNT_DETACH)
        except OSError:
            pass
    return points


def stop_hub(proc: subprocess.Popen, unmount: bool = True) -> None:
    """Stop a test hub and what it started; ``unmount``: its mounts too (a real stop leaves them for the next
    start, and so does ``unmount=False``)."""
    terminate_group(proc)
    # workspaces and job supervisors run in sessions of their own: end whatever works inside this data dir
    data = proc.args[proc.args.index("--data-dir") + 1]
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            inside = os.readlink(pid_dir / "cwd").startswith(data)
        except OSError:
            continue
        if inside:
            try:
                os.kill(int(pid_dir.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
    if unmount:
        unmount_under(data)
    _LIVE.discard(proc)


def hub_processes(data: str | Path) -> list[int]:
    """Pids of what a hub on ``data`` runs: `ti-hub start` (named in its command line), the processes it starts
    (TI_HUB_DATA_DIR in their environment) and whatever works inside the directory."""
    data = os.path.realpath(data)
    mark = f"TI_HUB_DATA_DIR={data}".encode()
    found = []
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            args = (pid_dir / "cmdline").read_bytes().split(b"\0")
            env = (pid_dir / "environ").read_bytes().split(b"\0")
            cwd = os.readlink(pid_dir / "cwd")
        except OSError:
            continue
        if data.encode() in args or mark in env or cwd == data or cwd.startswith(data + "/"):
            found.append(int(pid_dir.name))
    return found


def live_hubs() -> set[subprocess.Popen]:
    return set(_LIVE)


def stop_hubs_since(before: set[subprocess.Popen]) -> list[subprocess.Popen]:
    """Stop the hubs started since ``before`` (a live_hubs()) that are not stopped yet."""
    started = [p for p in list(_LIVE) if p not in before]
    for proc in started:
        stop_hub(proc)
    return started


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A fixture that fails or skips after starting a hub stops it at once. own_hub's generator, which would
    stop it when closed, lives on in the failure pytest keeps for the fixture's whole scope (a module, the session):
    the hub would outlive the tests it was for. Registered by tests/conftest.py."""
    before = live_hubs()
    try:
        return (yield)
    except BaseException:
        stop_hubs_since(before)
        raise


def readings_config(path: Path, devices: int = 2) -> str:
    """Config lines for a hub whose health readings come from the TEST SOURCE at ``path`` (a JSON file the test
    writes; ti_hub/health/testsource.py), sampled every second, with ``devices`` demo GPUs."""
    return ("c.HealthMonitor.source_class = 'ti_hub.health.testsource.TestReadingsSource'\n"
            f"c.TestReadingsSource.path = {str(path)!r}\nc.HealthMonitor.interval = 1\n"
            f"c.LocalBackend.devices = {{'demo-gpu': {devices}}}\n")


def own_hub(tmp_path_factory, name: str, config_lines: str = "", extra_env: dict[str, str] | None = None,
            python: str | None = None, source: str | None = None):
    """A hub of its own (a generator for fixtures), with lines added to the packaged config if given; ``python``
    and ``source``: see hub_command."""
    data = tmp_path_factory.mktemp(name) / "data"
    data.mkdir()
    config = None
    if config_lines:
        config = data.parent / "jupyterhub_config.py"
        config.write_text("from ti_hub.hub.config import configure\nconfigure(c)\n" + config_lines)
    proc, hub, _ports = start_hub(data, extra_env, config=str(config) if config else None, python=python,
                                  source=source)
    served = False
    try:
        hub.data_dir = data
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        hub.admin.password = ADMIN_PASSWORD
        served = True
        yield hub
    finally:  # also when the login fails, and when the generator is closed without being resumed
        if proc not in _LIVE:  # stopped already (pytest_fixture_setup)
            shutil.rmtree(data, ignore_errors=True)
        elif served:  # its tests are over: what comes next need not wait for its stop
            stop_in_background(proc, data)
        else:  # own_hub itself failed: stopped before the error goes on (tests/e2e/test_hub_cleanup.py)
            stop_hub(proc)
            shutil.rmtree(data, ignore_errors=True)


def stop_in_background(proc: subprocess.Popen, remove: Path | None = None) -> threading.Thread:
    """stop_hub, then the removal of ``remove`` (its data directory) if given, in a thread of its own: a graceful
    stop takes seconds (~4 s, most of it JupyterHub waiting for its services to exit, ~2 CPU-s), and the next
    module's hub starts or its tests run meanwhile. For a hub whose stop nothing checks. Not a daemon thread: the
    interpreter waits for it at exit, so no hub outlives pytest."""
    _LIVE.discard(proc)  # the thread's now: a fixture failing meanwhile does not stop it a second time

    def stop() -> None:
        stop_hub(proc)
        if remove is not None:
            shutil.rmtree(remove, ignore_errors=True)

    thread = threading.Thread(target=stop, name=f"stop-hub-{proc.pid}")
    thread.start()
    _STOPPING.append(thread)
    return thread


def join_stopping() -> None:
    """Wait for every stop_in_background so far."""
    while _STOPPING:
        _STOPPING.pop().join()


def readings_hub(tmp_path_factory, name: str, config_lines: str = "", devices: int = 2):
    """own_hub with readings_config: the hub's ``readings`` is the test source's file, "{}" (nothing measured)
    until the test writes readings into it."""
    readings = tmp_path_factory.mktemp(name + "-readings") / "readings.json"
    readings.write_text("{}")
    hubs = own_hub(tmp_path_factory, name, readings_config(readings, devices) + config_lines)
    try:
        hub = next(hubs)
        hub.readings = readings
        yield hub
    finally:
        hubs.close()
