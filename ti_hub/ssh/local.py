"""Sessions in local workspaces and job instances: the same sandbox, environment and user as the target.

A session's process is built from the target's own recipe: a workspace's bubblewrap argv (recorded by the
spawner) and the environment of its running process (/proc/PID/environ: user, home, CUDA_VISIBLE_DEVICES,
TI_API_URL, ...); a job instance's argv, environment, cgroup and CPUs from its supervisor's config. It runs as
the gateway's OS user, which is the hub's and therefore the workspace's; as root, bubblewrap is told to drop
every capability, and without bubblewrap a root session is refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass

from ..backends.local import limits, procs
from .logins import TargetError
from .places import (MARKER, LocalInstance, LocalWorkspace, marker_of, parse_environ, parse_marker, pick_shell,
                     sandbox_prefix, session_argv, session_env, shell_argv)
from .proc import LocalProcess

log = logging.getLogger("ti_hub.ssh")
LOOPBACK = ("localhost", "127.0.0.1", "::1", "ip6-localhost")
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Recipe:
    prefix: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    marker: str
    cgroup: str | None = None
    cpus: list[int] | None = None


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return parse_environ(f.read())
    except OSError as e:
        raise TargetError(f"cannot read the workspace's environment ({e.strerror})") from None


def recipe_of(place: LocalWorkspace | LocalInstance) -> Recipe:
    """Blocking (reads /proc and the job directory)."""
    if isinstance(place, LocalWorkspace):
        if not procs.is_alive(place.pid, place.start_time):
            raise TargetError(f"workspace {place.name!r} is not running any more")
        env = _environ(place.pid)
        if env.get("JUPYTERHUB_USER") != place.owner or env.get("TI_WORKSPACE") != place.name:
            raise TargetError(f"workspace {place.name!r} is not running any more")  # a recycled pid
        recipe = Recipe(place.sandbox, env, place.cwd, marker_of(place.pid, place.start_time))
    else:
        child, cfg = _read_json(place.child_file), _read_json(place.config_file)
        if not child or not cfg or not procs.is_alive(child.get("pid"), child.get("start_time")):
            raise TargetError(f"instance {place.index} of job {place.name!r} is not running")
        recipe = Recipe(sandbox_prefix(list(cfg["argv"])), dict(cfg["env"]), cfg["cwd"],
                        marker_of(child["pid"], child.get("start_time")),
                        (cfg.get("cgroup") or {}).get("path"), cfg.get("cpus"))
    if not recipe.prefix and os.getuid() == 0:
        raise TargetError("this workspace runs without bubblewrap and the gateway runs as root: SSH never opens a "
                          "root shell, so it is refused here (ask the administrators to enable bubblewrap)")
    return recipe


class LocalTarget:
    """One resolved workspace or instance on this machine."""

    def __init__(self, place: LocalWorkspace | LocalInstance, recipe: Recipe):
        self.place, self.recipe = place, recipe

    @classmethod
    async def resolve(cls, place: LocalWorkspace | LocalInstance) -> LocalTarget:
        return cls(place, await asyncio.to_thread(recipe_of, place))

    def _setup(self):
        cgroup, cpus = self.recipe.cgroup, self.recipe.cpus
        if not cgroup and not cpus:
            return None

        def setup() -> None:  # in the child, before exec: count against the instance's limits
            if cgroup:
                try:
                    limits.join_cgroup(cgroup)
                except OSError:
                    pass
            if cpus:
                try:
                    os.sched_setaffinity(0, cpus)
                except OSError:
                    pass
        return setup

    async def start(self, *, command: str | None, subsystem: str | None, pty: tuple[int, int] | None,
                    term: str | None, client: tuple[str, int], server: tuple[str, int], login: str,
                    client_version: str = "") -> LocalProcess:
        env = session_env(self.recipe.env, term=term if pty else None, client=client, server=server,
                          marker=self.recipe.marker, login_name=login)
        if subsystem == "sftp":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [PKG_PARENT, env.get("PYTHONPATH")]))
            env["TI_SSH_CLIENT_VERSION"] = client_version  # OpenSSH's sftp orders symlink arguments its own way
            argv = [sys.executable, "-m", "ti_hub.ssh.sftpchild"]
        elif subsystem is not None:
            raise TargetError(f"subsystem {subsystem!r} is not offered (only sftp)")
        else:
            argv = shell_argv(pick_shell(env, os.path.exists), command, login=command is None)
        full = session_argv(self.recipe.prefix, argv, drop_caps=os.getuid() == 0)
        cwd = self.recipe.cwd if not self.recipe.prefix else "/"  # bwrap's --chdir sets it inside
        p = LocalProcess(full, env, cwd if os.path.isdir(cwd) else "/", pty, self._setup())
        await p.start()
        return p

    async def open_port(self, host: str, port: int) -> LocalPortStream:
        """A TCP connection to a port inside the workspace. Local workspaces share this machine's network, so
        'inside' is its loopback interface; other destinations are refused."""
        if host.lower().strip("[]") not in LOOPBACK:
            raise TargetError(f"only ports inside the workspace can be forwarded (localhost:PORT), not {host}")
        addr = "::1" if host.strip("[]") == "::1" else "127.0.0.1"
        try:
            reader, writer = await asyncio.open_connection(addr, port)
        except OSError as e:
            raise TargetError(f"nothing answers on port {port} inside the workspace ({e.strerror})") from None
        return LocalPortStream(reader, writer)


class LocalPortStream:
    """One forwarded TCP connection (the PortStream interface of ``forward.py``)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    async def read(self) -> bytes:
        return await self.reader.read(65536)

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def write_eof(self) -> None:
        if self.writer.can_write_eof() and not self.writer.is_closing():
            self.writer.write_eof()

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


def orphan_sessions() -> list[int]:
    """Blocking: processes started over SSH whose workspace or instance has ended."""
    out, me, uid = [], os.getpid(), os.getuid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:  # sessions run as the gateway's user; nobody else's processes
                continue
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        key = MARKER.encode() + b"="
        if key not in raw:
            continue
        value = parse_environ(raw).get(MARKER, "")
        target = parse_marker(value)
        if target and not procs.is_alive(*target):
            out.append(int(entry.name))
    return out


async def reap_forever(interval: float) -> None:
    """End what sessions left running (``nohup server &``) once their workspace or job has stopped."""
    while interval > 0:
        await asyncio.sleep(interval)
        try:
            pids = await asyncio.to_thread(orphan_sessions)
        except Exception:  # keep sweeping: a failed pass must not end the loop
            log.exception("ssh: sweeping processes of stopped workspaces failed")
            continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                log.info("ssh: ended process %s: its workspace or job has stopped", pid)
            except ProcessLookupError:
                pass
