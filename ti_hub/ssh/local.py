"""Sessions in local workspaces and job instances: inside the target's own sandbox, as the owner's uid.

A session is built from the target's supervisor records (``places.LocalSandbox``; files only the platform can
write, found from the backend state the ti service stored): the sandbox's first process, the owner's uid and
gid, the environment and working directory the workspace or instance was started with, its cgroup and CPUs.
The gateway (root) starts ``dropexec.py`` with an empty environment; it enters the sandbox's mount, pid and
IPC namespaces, becomes the owner and runs the shell (or SFTP server) there, so the session sees exactly what
the workspace sees and runs with no privilege. Without bubblewrap it only becomes the owner.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass

from ..backends.local import limits, netns, procs, sandbox, sockets
from ..backends.local.runner import memfd
from .logins import TargetError
from .places import MARKER, LocalSandbox, marker_of, parse_environ, parse_marker, pick_shell, session_env, shell_argv
from .proc import LocalProcess

log = logging.getLogger("ti_hub.ssh")
LOOPBACK = ("localhost", "127.0.0.1", "::1", "ip6-localhost")
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Recipe:
    uid: int
    gid: int
    env: dict[str, str]
    cwd: str
    marker: str
    enter: dict | None  # {"pid", "start_time"} of the sandbox to enter; None: no sandbox
    cgroup: limits.Cgroup | None = None
    cpus: list[int] | None = None


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def recipe_of(place: LocalSandbox) -> Recipe:
    """Blocking (reads the supervisor's records)."""
    what = place.what
    child, cfg = _read_json(place.child_file), _read_json(place.config_file)
    if not child or not cfg or not procs.is_alive(child.get("pid"), child.get("start_time")):
        raise TargetError(f"{what} is not running")
    ident, user = cfg.get("identity") or {}, cfg.get("user") or {}
    if ident.get("name") != place.owner:
        raise TargetError(f"{what} is not running")  # records of someone else's: never enter them
    enter = None
    if cfg.get("wrapped"):
        if not child.get("sandbox_pid") or not procs.is_alive(child["sandbox_pid"], child.get("sandbox_start")):
            raise TargetError(f"{what} is still starting or has stopped; try again")
        enter = {"pid": child["sandbox_pid"], "start_time": child.get("sandbox_start")}
    elif os.geteuid() == 0 and int(ident.get("uid", 0)) == 0:
        raise TargetError("this target would run as root: SSH never opens a root shell")
    return Recipe(int(ident["uid"]), int(ident["gid"]), dict(user.get("env") or {}), str(user.get("cwd") or "/"),
                  marker_of(child["pid"], child.get("start_time")), enter, limits.Cgroup.from_config(cfg.get("cgroup")),
                  cfg.get("cpus"))


TIOCSPTLCK, TIOCGPTPEER = 0x40045431, 0x5441


def sandbox_pty(pid: int, uid: int) -> tuple[int, int]:
    """A pty of the sandbox's own devpts (opened through its root), so that ``tty`` and programs that reopen
    their terminal by name work inside; the terminal belongs to the session's user, like sshd does it."""
    import fcntl
    import struct

    master = os.open(f"/proc/{int(pid)}/root/dev/ptmx", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(master, TIOCSPTLCK, struct.pack("i", 0))
        slave = fcntl.ioctl(master, TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY)
        os.fchown(slave, uid, -1)
        os.fchmod(slave, 0o620)
        return master, slave
    except BaseException:
        os.close(master)
        raise


class LocalTarget:
    """One resolved workspace or instance on this machine."""

    def __init__(self, place: LocalSandbox, recipe: Recipe):
        self.place, self.recipe = place, recipe

    @classmethod
    async def resolve(cls, place: LocalSandbox) -> LocalTarget:
        return cls(place, await asyncio.to_thread(recipe_of, place))

    def _setup(self):
        cgroup, cpus = self.recipe.cgroup, self.recipe.cpus
        if not cgroup and not cpus:
            return None

        def setup() -> None:  # in the child, before exec: count against the instance's limits
            if cgroup:
                try:
                    cgroup.join()
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
        r = self.recipe
        env = session_env(r.env, term=term if pty else None, client=client, server=server, marker=r.marker,
                          login_name=login)
        if subsystem == "sftp":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [PKG_PARENT, env.get("PYTHONPATH")]))
            env["TI_SSH_CLIENT_VERSION"] = client_version  # OpenSSH's sftp orders symlink arguments its own way
            argv = [sys.executable, "-m", "ti_hub.ssh.sftpchild"]
        elif subsystem is not None:
            raise TargetError(f"subsystem {subsystem!r} is not offered (only sftp)")
        else:
            argv = shell_argv(pick_shell(env, os.path.exists), command, login=command is None)
        spec = {"uid": r.uid, "gid": r.gid, "groups": [], "argv": argv, "env": env, "cwd": r.cwd, "umask": 0o022,
                "enter": r.enter}
        fd = memfd("ti-session", json.dumps(spec).encode())
        try:
            # an empty environment: dropexec runs as root until it has become the owner
            opener = (lambda: sandbox_pty(r.enter["pid"], r.uid)) if r.enter else os.openpty
            p = LocalProcess([sys.executable, "-I", "-S", sandbox.DROPEXEC, str(fd)], {}, "/", pty, self._setup(),
                             pass_fds=(fd,), openpty=opener)
            await p.start()
        finally:
            os.close(fd)
        return p

    async def open_port(self, host: str, port: int) -> LocalPortStream:
        """A TCP connection to a port inside the workspace. Local workspaces share this machine's network, so
        'inside' is its loopback interface, and only where a process of the workspace itself listens; other
        destinations are refused."""
        if host.lower().strip("[]") not in LOOPBACK:
            raise TargetError(f"only ports inside the workspace can be forwarded (localhost:PORT), not {host}")
        r = self.recipe
        own = await asyncio.to_thread(netns.socket_of, r.enter["pid"]) if r.enter else None
        if own is not None:  # a network of its own (a job's): only its processes listen there
            own.setblocking(False)
            try:
                await asyncio.get_running_loop().sock_connect(own, ("127.0.0.1", port))
                reader, writer = await asyncio.open_connection(sock=own)
            except OSError as e:
                own.close()
                raise TargetError(f"nothing answers on port {port} inside ({e.strerror})") from None
            return LocalPortStream(reader, writer)
        pidns = sockets.namespace_of(r.enter["pid"]) if r.enter else None
        why = await asyncio.to_thread(sockets.refusal, port, r.uid, pidns, "this workspace")
        if why:
            raise TargetError(why)
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
    out, me = [], os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid == 0:  # sessions never run as root
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
