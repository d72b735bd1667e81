"""A small test client that behaves like a person and like a program: hub login, tokens, the ti API."""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import requests


_people = itertools.count(1)


def pauses(longest: float = 0.3):
    """Seconds to sleep between the polls of a wait: short at first (most states change within a second: a
    fixed 0.3 s cost each wait 0.15 s on average), then every ``longest`` (a long wait does not load the hub)."""
    pause = 0.05
    while True:
        yield pause
        pause = min(longest, pause * 2)


class Hub:
    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.api_url = self.url + "/services/ti/api/v1"

    def put_in_home(self, user: str, src, name: str | None = None) -> str:
        """Copy a file into a user's home, where the platform keeps it; returns its path inside their jobs and
        workspaces (``/home/USER/NAME``): user code sees only its sandbox, never this checkout."""
        import shutil
        from pathlib import Path

        home = Path(self.data_dir) / "workspaces" / "home" / user
        home.mkdir(parents=True, exist_ok=True)
        name = name or Path(src).name
        shutil.copy(src, home / name)
        return f"/home/{user}/{name}"

    def ready(self) -> bool:
        try:
            return requests.get(self.api_url + "/openapi.json", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def signup(self, name: str, password: str) -> None:
        s = requests.Session()
        s.get(self.url + "/hub/signup")
        r = s.post(self.url + "/hub/signup", data={"username": name, "signup_password": password,
                                                   "signup_password_confirmation": password,
                                                   "_xsrf": s.cookies.get("_xsrf")})
        assert r.status_code == 200, r.text[:500]

    def person(self, prefix: str = "user") -> Session:
        """A new account, signed up, authorized by the admin (``self.admin``) and logged in; ``.password`` kept."""
        name = f"{prefix}{next(_people):03d}"
        password = f"pw-{name}-long-enough"
        self.signup(name, password)
        self.admin.authorize(name)
        s = self.login(name, password)
        s.password = password
        return s

    def login(self, name: str, password: str) -> Session:
        s = requests.Session()
        s.get(self.url + "/hub/login")
        r = s.post(self.url + "/hub/login", data={"username": name, "password": password,
                                                  "_xsrf": s.cookies.get("_xsrf")}, allow_redirects=False)
        if r.status_code != 302:
            raise PermissionError(f"login of {name} refused ({r.status_code})")
        r = s.post(f"{self.url}/hub/api/users/{name}/tokens", json={"note": "tests"},
                   headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/")})
        r.raise_for_status()
        return Session(self, name, r.json()["token"], s)


class Session:
    """One logged-in person: `browser` carries the hub cookie, `token` is their API token."""

    def __init__(self, hub: Hub, name: str, token: str, browser: requests.Session):
        self.hub, self.name, self.token, self.browser = hub, name, token, browser
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"token {token}"

    def api(self, method: str, path: str, **kw) -> requests.Response:
        return self.http.request(method, self.hub.api_url + path, timeout=30, **kw)

    def ok(self, method: str, path: str, **kw) -> Any:
        r = self.api(method, path, **kw)
        assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
        return r.json() if r.content else None

    def ti(self, *args: str, timeout: float = 60):
        """This checkout's `ti` CLI, logged in as this person through the environment (no config file)."""
        import os
        import subprocess
        import sys

        repo = str(Path(__file__).resolve().parents[1])
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "TI_API_URL": self.hub.url,
               "TI_TOKEN": self.token, "TI_CONFIG": "/nonexistent/ti.json", "PYTHONPATH": repo}
        return subprocess.run([sys.executable, "-m", "ti_hub.cli.main", *args], env=env, capture_output=True,
                              text=True, timeout=timeout)

    def hub_api(self, method: str, path: str, **kw) -> requests.Response:
        return self.http.request(method, self.hub.url + "/hub/api" + path, timeout=30, **kw)

    def authorize(self, name: str) -> None:
        """What an admin does on /hub/authorize: flip the account to authorized."""
        r = self.browser.get(f"{self.hub.url}/hub/authorize/{name}")
        assert r.status_code == 200, r.text[:300]

    def spawn(self, server: str, options: dict | None = None, timeout: float = 60):
        """Ask the hub for a named server and wait until it is no longer pending (started or refused); returns
        the hub's answer to the request (a refusal's status and message are there)."""
        r = self.hub_api("POST", f"/users/{self.name}/servers/{server}", json=options or {"plan": "cpu-small"})
        deadline, pause = time.monotonic() + timeout, pauses()
        while time.monotonic() < deadline:
            s = self.hub_api("GET", f"/users/{self.name}").json()["servers"].get(server)
            if not s or not s.get("pending") or s.get("ready"):
                break
            time.sleep(next(pause))
        return r

    def wait_server(self, server: str, ready: bool = True, timeout: float = 120) -> dict:
        """Wait until this person's named server is ready (its model), or gone (``ready=False``: {})."""
        deadline, pause = time.monotonic() + timeout, pauses()
        while time.monotonic() < deadline:
            r = self.hub_api("GET", f"/users/{self.name}")
            r.raise_for_status()
            s = r.json()["servers"].get(server)
            if ready and s and s["ready"]:
                return s
            if not ready and not s:
                return {}
            time.sleep(next(pause))
        raise TimeoutError(f"server {server} not {'ready' if ready else 'gone'} after {timeout} s")

    def wait_job(self, ref: Any, states=("completed", "failed", "killed", "error"), timeout: float = 120) -> dict:
        deadline, pause = time.monotonic() + timeout, pauses()
        while time.monotonic() < deadline:
            job = self.ok("GET", f"/jobs/{ref}")
            if job["status"] in states:
                return job
            time.sleep(next(pause))
        raise TimeoutError(f"job {ref} still {job['status']} after {timeout} s: {job['reason']}")


def processes_with_env(**wanted: str) -> dict[int, dict[str, str]]:
    """Local processes whose environment matches ``wanted`` (pid -> environment)."""
    from pathlib import Path

    out = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            raw = (p / "environ").read_bytes()
        except OSError:
            continue
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        if all(env.get(k) == v for k, v in wanted.items()):
            out[int(p.name)] = env
    return out


def service_pid(hub) -> int:
    """The ti service's leader process (API followers, if any, are its children)."""
    marker = str(hub.data_dir).encode()
    found: dict[int, int] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
            env = (p / "environ").read_bytes()
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"ti_hub.service" in cmd and marker in env and fields[0] != "Z":
            found[int(p.name)] = int(fields[1])
    leaders = [pid for pid, parent in found.items() if parent not in found]
    if len(leaders) != 1:
        raise LookupError(f"ti service leader not found among {found}")
    return leaders[0]


def process_uptime(pid: int) -> float:
    """Seconds since process ``pid`` started (/proc's start time is in clock ticks since boot)."""
    started = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    return float(Path("/proc/uptime").read_text().split()[0]) - started / os.sysconf("SC_CLK_TCK")


def kill_service_and_time(hub, admin, min_age: float, limit: float) -> float:
    """kill -9 the ti service once it is ``min_age`` seconds old (the hub restarts a service that dies younger
    only after a back-off); the seconds until the API answers again from a new process (RuntimeError past
    ``limit``)."""
    pid = service_pid(hub)
    while (age := process_uptime(pid)) < min_age:
        time.sleep(min_age - age)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while True:
        try:
            if admin.http.get(hub.api_url + "/me", timeout=5).status_code == 200 and service_pid(hub) != pid:
                return time.monotonic() - t0
        except (requests.RequestException, LookupError):
            pass
        if time.monotonic() - t0 > limit:
            raise RuntimeError(f"the API did not come back within {limit} s")
        time.sleep(0.05)


def wait(pred, timeout: float = 60, what: str = "condition"):
    deadline, pause = time.monotonic() + timeout, pauses(0.2)
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(next(pause))
    raise TimeoutError(f"timed out waiting for {what}")


def free_job_port() -> int:
    """A port in 40000-49999 (where jobs may declare ports) that nothing on this machine listens on now."""
    import random
    import socket

    for _ in range(200):
        port = random.randint(40000, 49990)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port in 40000-49999")
