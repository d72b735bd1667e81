"""The platform under benchmark: start it on a data dir, name its processes, read their CPU, stop it."""

from __future__ import annotations

import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

import hubproc  # noqa: E402
from hubproc import start_hub  # noqa: E402

API = "/services/ti/api/v1"
CODE_ROOT = str(ROOT)  # the ti_hub the platform runs (--code-root); PYTHONPATH points hub and service at it
# experiment settings read by hub_config_bench.py (--db-threads); the tests' check of every answer against the
# API document (tests/hubproc.py turns it on) is off: the benchmarks measure the service as it is deployed
SERVICE_ENV: dict[str, str] = {"TI_HUB_CHECK_RESPONSES": "0"}
EXTRA_PYTHONPATH: list[str] = []  # experiment: --hub-without-rfc3987


def machine_info() -> dict:
    import aiohttp
    import jupyterhub
    import sqlalchemy
    import tornado

    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem_kib = int(line.split()[1])
    return {"nproc": os.cpu_count(), "memory_gib": round(mem_kib / 1024 / 1024, 1), "cpu_model": cpu,
            "kernel": platform.release(), "python": platform.python_version(),
            "packages": {"jupyterhub": jupyterhub.__version__, "tornado": tornado.version,
                         "sqlalchemy": sqlalchemy.__version__, "aiohttp": aiohttp.__version__,
                         "sqlite": sqlite3.sqlite_version}}


def code_version(code_root: str | None = None) -> dict:
    """The code measured: the commit and whether ti_hub/ had uncommitted changes, and where the platform's
    processes import ti_hub from."""
    code_root = code_root or CODE_ROOT

    def git(*args):
        r = subprocess.run(["git", *args], cwd=code_root, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    imported = subprocess.run([sys.executable, "-c", "import ti_hub; print(ti_hub.__file__)"], capture_output=True,
                              text=True, cwd=tempfile.gettempdir(), env=dict(os.environ, PYTHONPATH=code_root))
    return {"code_root": code_root, "commit": git("rev-parse", "--short", "HEAD"),
            "subject": git("log", "-1", "--format=%s"),
            "ti_hub_dirty": bool(git("status", "--porcelain", "--", "ti_hub")) if git("rev-parse", "HEAD") else None,
            "ti_hub_imported_from": imported.stdout.strip()}


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                out += kids
                todo += kids
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        return ""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_tree(proc: subprocess.Popen) -> None:
    """Like hubproc.stop_hub, but ends only the processes this benchmark started, by their ids."""
    pids = descendants(proc.pid)
    hubproc.terminate_group(proc)  # ti-hub forwards it; the hub stops its proxy and services
    deadline = time.monotonic() + 10
    for pid in pids:
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # its volumes' and work directories' file systems (ti_hub/storage/loopfs.py), before anyone removes the data
    hubproc.unmount_under(proc.args[proc.args.index("--data-dir") + 1])


class _ServiceWatch:
    """Learns the ports start_hub picks (it calls hubproc.free_port for port, hub, proxy, service in that
    order) and polls the ti service's own port, so a cold start shows when the service itself answered."""

    def __init__(self, t0: float):
        self.t0, self.ports, self.service_up_s = t0, [], None
        self._orig = hubproc.free_port
        self._stop = False
        hubproc.free_port = self._free_port
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _free_port(self) -> int:
        port = self._orig()
        self.ports.append(port)
        return port

    def _poll(self) -> None:
        while not self._stop and len(self.ports) < 4:
            time.sleep(0.005)
        s = requests.Session()
        while not self._stop:
            try:
                if s.get(f"http://127.0.0.1:{self.ports[3]}{API}/openapi.json", timeout=1).status_code == 200:
                    self.service_up_s = time.monotonic() - self.t0
                    return
            except requests.RequestException:
                pass
            time.sleep(0.02)

    def close(self) -> None:
        self._stop = True
        hubproc.free_port = self._orig
        self._thread.join(2)


HUB_EVENTS = [("hub_first_log_s", "Running JupyterHub version"), ("proxy_started_s", "Proxy API at"),
              ("service_spawned_s", "Starting managed service ti"),
              ("hub_saw_service_s", "Adding service ti to proxy"), ("hub_running_s", "JupyterHub is now running")]


class Platform:
    """One running ti-hub on a data dir, with its processes named."""

    def __init__(self, data: Path, extra_env: dict | None = None):
        t0 = time.monotonic()
        self.t0_wall = time.time()
        watch = _ServiceWatch(t0)
        try:
            pythonpath = os.pathsep.join([CODE_ROOT, *EXTRA_PYTHONPATH])
            env = {"PYTHONPATH": pythonpath, "TI_HUB_BENCH_CODE_ROOT": CODE_ROOT, **SERVICE_ENV, **(extra_env or {})}
            self.proc, self.hub, self.ports = start_hub(data, env, str(HERE / "hub_config_bench.py"))
            self.ready_s = time.monotonic() - t0
            deadline = time.monotonic() + 2
            while watch.service_up_s is None and time.monotonic() < deadline:
                time.sleep(0.01)
            self.service_up_s = watch.service_up_s
        finally:
            watch.close()
        self.data = data
        self.pids = {}
        services = []
        for pid in descendants(self.proc.pid):
            cl = cmdline(pid)
            if "ti_hub.service" in cl:
                services.append(pid)
            elif "configurable-http-proxy" in cl or "ti_hub.launcher.proxy_main" in cl:
                self.pids["proxy"] = pid
            elif "ti_hub.hub.main" in cl or "jupyterhub" in cl:
                self.pids["hub"] = pid
        # the leader ("service") is the one whose parent is no service process; the others serve the API
        parents = {pid: int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in services}
        (self.pids["service"],) = [pid for pid in services if parents[pid] not in services]
        for i, pid in enumerate(sorted(p for p in services if p != self.pids["service"]), start=1):
            self.pids[f"api-{i}"] = pid
        svc_env = Path(f"/proc/{self.pids['service']}/environ").read_bytes().split(b"\0")
        if f"PYTHONPATH={CODE_ROOT}".encode() not in svc_env or any(
                f"{k}={v}".encode() not in svc_env for k, v in SERVICE_ENV.items()):
            self.stop()
            raise RuntimeError(f"the ti service does not run the code in {CODE_ROOT} with {SERVICE_ENV}")

    def self_reported_ready_s(self) -> float | None:
        """`ti-hub start` prints 'started in X s' (measured from just before it launches JupyterHub)."""
        import re

        text = Path(f"{self.data.parent}/{self.data.name}.log").read_text(errors="replace")
        m = re.search(r"started in ([0-9.]+) s", text)
        return float(m.group(1)) if m else None

    def timeline(self) -> dict:
        """Seconds from launching `ti-hub start` to each step (hub log timestamps are wall clock, ms)."""
        import datetime as dt
        import re

        out = {}
        text = Path(f"{self.data.parent}/{self.data.name}.log").read_text(errors="replace")
        for key, needle in HUB_EVENTS:
            for line in text.splitlines():
                if needle in line:
                    m = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[.,](\d{3})", line)
                    if m:
                        t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000
                        out[key] = round(t - self.t0_wall, 2)
                    break
        out["service_answered_s"] = round(self.service_up_s, 2) if self.service_up_s else None
        out["ready_via_proxy_s"] = round(self.ready_s, 2)
        return out

    def cpu(self) -> dict[str, float]:
        out = {}
        for name, pid in self.pids.items():
            try:
                out[name] = cpu_seconds(pid)
            except FileNotFoundError:
                pass
        return out

    def stop(self) -> None:
        stop_tree(self.proc)
