"""TensorBoard for a job's log directory, run by the ti service on this machine (embedded platform).

One TensorBoard per (job, logdir), at most ``TiService.tensorboard_max`` at once, each stopped after
``TiService.tensorboard_idle_timeout`` seconds without a request and when the service stops.

The ti service may be several processes (an API request can land in any of them), so what runs is recorded in
files, ``<data_dir>/tensorboard/<job>-<key>.json`` (pid, start time, port): any process finds a TensorBoard
another one started. Starting takes an flock on the directory (one TensorBoard per logdir, the cap counted
once). Each TensorBoard is a child of the process that started it, which reaps it and stops it when idle;
a request through the proxy, in whatever process, marks it used by touching its file. It dies with its parent
(bubblewrap's --die-with-parent), so a killed service never leaves one behind.

Like the job's own code, it runs as the job owner's uid in a sandbox (``ti_hub/backends/local/sandbox.py``) that
shows only the volume holding the logdir, read-only at its mount path, with a short environment (never the
service's tokens); the proxy forwards to its port only while a process of that uid holds it.
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..backends.local import launcher, netns, procs, sandbox
from ..backends.local.runner import memfd
from ..domain.errors import BadGateway, Conflict, NotHere, Unavailable
from ..domain.endpoints import inside, tensorboard_key

EXTRA_HINT = "pip install 'ti-hub[tensorboard]'"
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"  # util-linux: enters a namespace, then execs
INHERIT = ("LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH")


NO_DIRECTORY = ("this TiHub's volumes have no directory on the service's machine, where its TensorBoards run: run "
                "TensorBoard in a job instead (declare a port, e.g. 40006, run `tensorboard --logdir DIR --host "
                "0.0.0.0 --port 40006`, then open the port's endpoint)")


def resolve_inside(root: str, rel: str, logdir: str) -> str:
    """The host directory behind the logdir, symlinks resolved: it must stay inside the volume."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(real_root, rel)) if rel else real_root
    if not inside(real, real_root):
        raise Conflict(f"logdir {logdir} leads out of its volume (a symbolic link?)", field="logdir")
    return real


def installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def _alive(rec: dict[str, Any] | None) -> bool:
    return bool(rec) and procs.is_alive(rec.get("pid"), rec.get("start_time"))


class TensorBoards:
    def __init__(self, root: str | Path, idle_timeout: float = 3600.0, max_running: int = 8,
                 python: str = sys.executable, log: Any = None, volume_path: Any = None, own_network: bool = False):
        self.root = Path(root)
        # each TensorBoard in a network namespace of its own, reached through its portal (backends/local/portal.py)
        self.own_network = own_network
        self.volume_path = volume_path  # volume id -> its directory on this machine ("" when it has none)
        self.idle_timeout = idle_timeout
        self.max_running = max_running
        self.python = python
        self.log = log
        self._children: dict[str, subprocess.Popen] = {}  # record file name -> this process's own TensorBoards
        self._touched: dict[str, float] = {}
        self._reaper: asyncio.Task | None = None
        self._starting: set[str] = set()

    # -- records ---------------------------------------------------------------------------------------------
    def _path(self, job_id: int, key: str) -> Path:
        return self.root / f"{int(job_id)}-{key}.json"

    def get(self, job_id: int, key: str) -> dict[str, Any] | None:
        """The running TensorBoard of this job and key (any process's), or None."""
        rec = _read(self._path(job_id, key))
        return rec if _alive(rec) else None

    def of_job(self, job_id: int) -> list[dict[str, Any]]:
        out = [rec for p in sorted(self.root.glob(f"{int(job_id)}-*.json")) if _alive(rec := _read(p))]
        return sorted(out, key=lambda r: r["logdir"])

    def _running(self) -> list[dict[str, Any]]:
        return [rec for p in self.root.glob("*.json") if _alive(rec := _read(p))]

    def touch(self, rec: dict[str, Any]) -> None:
        """Used now: the idle clock restarts (at most one write per 10 s and process)."""
        name = f"{rec['job_id']}-{rec['key']}.json"
        now = time.monotonic()
        if now - self._touched.get(name, -1e9) < 10:
            return
        self._touched[name] = now
        try:
            os.utime(self.root / name)
        except OSError:
            pass

    # -- start and stop --------------------------------------------------------------------------------------
    async def start(self, job_id: int, owner: str, logdir: str, hostdir: str, prefix: str, *, uid: int | None = None,
                    mount: tuple[str, str] | None = None) -> tuple[dict[str, Any], bool]:
        """(the record, whether it was started now); waits until it answers (at most a minute)."""
        if not installed():
            raise Unavailable(f"TensorBoard is not installed on this TiHub: an administrator installs it with "
                              f"{EXTRA_HINT}")
        key = tensorboard_key(logdir)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
            rec = self.get(job_id, key)
            if rec is not None:
                self.touch(rec)
                return rec, False
            if len(self._running()) >= self.max_running:
                raise Conflict(f"{self.max_running} TensorBoards already run on this TiHub (the most at once); "
                               "stop one with DELETE /jobs/ID/tensorboard, or wait until one has been idle for "
                               f"{self.idle_timeout:g} s", field="logdir")
            port = free_port()
            path = self._path(job_id, key)
            ident = launcher.identity(owner, uid, "/tmp")
            argv, fds, inside = await asyncio.to_thread(self._command, ident, logdir, hostdir, prefix, port, mount)
            net, reach = None, port
            if self.own_network and argv[0] != self.python:  # sandboxed: give it a network of its own
                net = await asyncio.to_thread(netns.start, str(path.with_suffix(".net")), self.python, [port])
                reach = await asyncio.to_thread(netns.host_port, net, port)
                argv = [NSENTER, f"--net={net['netns']}", "--", *argv]  # nsenter execs bubblewrap: same pid
            log = open(path.with_suffix(".log"), "wb")  # noqa: SIM115 - the child keeps it
            try:
                with log:
                    # on the event loop's thread: bubblewrap's parent-death signal follows the forking thread
                    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                                            start_new_session=True, env={}, pass_fds=fds)
            finally:
                for spec_fd in fds:
                    os.close(spec_fd)
            rec = {"job_id": int(job_id), "key": key, "owner": owner, "logdir": logdir, "hostdir": inside,
                   "prefix": prefix, "port": reach, "pid": proc.pid, "start_time": procs.start_time(proc.pid),
                   "started_at": time.time(), "uid": ident.uid, **({"net": net} if net else {})}
            _write(path, rec)
            self._children[path.name] = proc
        finally:
            os.close(fd)  # releases the flock
        self._ensure_reaper()
        self._starting.add(path.name)  # its idle time counts from when it answers
        try:
            await self._wait_ready(rec, proc)
        finally:
            self._starting.discard(path.name)
            self._touched.pop(path.name, None)
            self.touch(rec)
        return rec, True

    def _command(self, ident: sandbox.Identity, logdir: str, hostdir: str, prefix: str, port: int,
                 mount: tuple[str, str] | None) -> tuple[list[str], list[int], str]:
        """(argv, fds to pass, the logdir as TensorBoard sees it): in a sandbox as the owner when bubblewrap runs
        here (the volume read-only at its mount path), else dropexec alone on the host directory."""
        tb = [self.python, "-m", "tensorboard.main", "--path_prefix", prefix, "--host", "127.0.0.1", "--port",
              str(port), "--load_fast", "false"]
        env = {k: os.environ[k] for k in INHERIT if k in os.environ}
        env["PATH"] = sandbox.user_path([os.path.dirname(self.python), *launcher.bin_dirs()])
        bwrap = sandbox.find_bwrap()
        if not (bwrap and mount) and launcher.privileged():
            raise Unavailable("this TiHub runs as root and runs no user's code, TensorBoard included, without a "
                              "sandbox (bubblewrap)")
        inside = logdir if (bwrap and mount) else hostdir
        spec = sandbox.user_spec(ident, [*tb, "--logdir", inside], {**env, "HOME": "/tmp"}, "/")
        fd = memfd("ti-tensorboard", json.dumps(spec).encode())
        if not (bwrap and mount):
            return sandbox.plain_argv(self.python, fd), [fd], inside
        box = launcher.plan([sandbox.Bind(mount[0], mount[1], True)], tmp="", shm_mib=16, cwd="/", devices=())
        return (sandbox.bwrap_argv(bwrap, box, privileged=launcher.privileged(), python=self.python, spec_fd=fd),
                [fd], inside)

    async def _wait_ready(self, rec: dict[str, Any], proc: subprocess.Popen, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._forget(f"{rec['job_id']}-{rec['key']}.json", proc.pid)
                tail = self._log_tail(rec)
                raise BadGateway(f"TensorBoard exited at start (code {proc.returncode}): {tail}", field="logdir")
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", rec["port"])
                try:
                    if not rec.get("net"):
                        return
                    # through its portal, a connection is accepted before TensorBoard listens: ask for a page
                    writer.write(f"HEAD {rec['prefix']}/ HTTP/1.0\r\n\r\n".encode())
                    if (await asyncio.wait_for(reader.read(5), 2.0)) == b"HTTP/":
                        return
                finally:
                    writer.close()
            except (OSError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(0.1)
        # still loading: the proxy answers 502 until it listens; the record stays for the idle reaper

    def _log_tail(self, rec: dict[str, Any], n: int = 5) -> str:
        try:
            lines = self._path(rec["job_id"], rec["key"]).with_suffix(".log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines.splitlines()[-n:] if line.strip())[:2000]

    def _forget(self, name: str, pid: int | None) -> None:
        path = self.root / name
        rec = _read(path)
        if rec is not None and (pid is None or rec.get("pid") == pid):
            path.unlink(missing_ok=True)
        self._children.pop(name, None)
        self._touched.pop(name, None)

    # the interface the API and the proxy use, shared with KubeTensorBoards (kubetb.py), whose lookups are API calls
    async def start_on_volume(self, job_id: int, owner: str, logdir: str, volume_id: int, volume: str, rel: str,
                              prefix: str, key: str, uid: int | None = None) -> tuple[dict[str, Any], bool]:
        """TensorBoard on the directory behind ``logdir``: ``rel`` inside the volume's directory on this machine."""
        root = str((self.volume_path(volume_id) if self.volume_path else "") or "")
        if not root:
            raise NotHere(NO_DIRECTORY)
        hostdir = resolve_inside(root, rel, logdir)
        mount_path = logdir[: len(logdir) - len(rel) - 1] if rel else logdir
        return await self.start(job_id, owner, logdir, hostdir, prefix, uid=uid, mount=(root, mount_path))

    async def find(self, job_id: int, key: str) -> dict[str, Any] | None:
        return self.get(job_id, key)

    async def list_of(self, job_id: int) -> list[dict[str, Any]]:
        return self.of_job(job_id)

    async def stop_some(self, job_id: int, key: str | None = None) -> int:
        return self.stop(job_id, key)

    def stop(self, job_id: int, key: str | None = None) -> int:
        """Stop this job's TensorBoards (one key, or all); returns how many were running."""
        n = 0
        for rec in self.of_job(job_id):
            if key is not None and rec["key"] != key:
                continue
            try:
                os.kill(rec["pid"], signal.SIGTERM)
                n += 1
            except ProcessLookupError:
                pass
            self._path(job_id, rec["key"]).unlink(missing_ok=True)
        return n

    def stop_all(self) -> None:
        """This process's TensorBoards (the service stops)."""
        for name, proc in list(self._children.items()):
            if proc.poll() is None:
                proc.terminate()
            self._forget(name, proc.pid)
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    # -- reaping -------------------------------------------------------------------------------------------
    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap_forever())

    async def _reap_forever(self) -> None:
        period = max(1.0, min(30.0, self.idle_timeout / 4))
        while self._children:
            await asyncio.sleep(period)
            try:
                self.reap()
            except Exception:  # noqa: BLE001 - the reaper must outlive one bad file
                if self.log:
                    self.log.exception("reaping TensorBoards failed")

    def reap(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        for name, proc in list(self._children.items()):
            if proc.poll() is not None:
                self._forget(name, proc.pid)
                continue
            if name in self._starting:
                continue
            try:
                idle = now - (self.root / name).stat().st_mtime
            except FileNotFoundError:
                idle = float("inf")  # stopped through another process (DELETE): the file is gone
            if idle > self.idle_timeout:
                if self.log:
                    self.log.info("stopping TensorBoard %s: idle for %.0f s", name, idle)
                proc.terminate()
                self._path_unlink(name, proc.pid)
        for path in self.root.glob("*.json"):  # records whose process is gone (a crash, a restart)
            rec = _read(path)
            if rec is not None and not _alive(rec) and path.name not in self._children:
                path.unlink(missing_ok=True)

    def _path_unlink(self, name: str, pid: int) -> None:
        rec = _read(self.root / name)
        if rec is not None and rec.get("pid") == pid:
            (self.root / name).unlink(missing_ok=True)
