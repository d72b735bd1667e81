"""The platform's side of a sandbox's own network namespace (``portal.py`` makes it and guards its doors).

``start`` runs the portal for one job (or workspace) and waits until its namespace is pinned; supervisors join
it with ``join`` (between fork and exec, before bubblewrap starts); ``host_port`` says where on the host's
loopback the platform reaches a port inside; ``stop`` ends the portal and unpins the namespace. Everything lives
in a directory only the platform enters, and the portal's state file is written by the portal (root) alone.
Only a platform that runs as root can make namespaces for its users' sandboxes.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import threading
import time
from typing import Any

from . import procs, userdirs

PORTAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "portal.py")
CLONE_NEWNET = 0x40000000
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


class NetnsError(RuntimeError):
    """The namespace could not be made or reached (for the admin's log; the job fails with it)."""


def paths(directory: str) -> dict[str, str]:
    return {"dir": directory, "netns": os.path.join(directory, "ns"), "state": os.path.join(directory, "portal.json"),
            "control": os.path.join(directory, "portal.sock"), "config": os.path.join(directory, "portal-config.json"),
            "log": os.path.join(directory, "portal.log")}


def start(directory: str, python: str, in_ports: list[int], out: list[tuple[int, int]] = (),
          timeout: float = 10.0, outbound: dict[str, Any] | None = None) -> dict[str, Any]:
    """Blocking: a new namespace and its portal; returns what ``state`` records for it. ``outbound``:
    ``{"slirp": PATH, "deny": [CIDR, ...]}`` for a network out (see portal.py), None for none."""
    p = paths(directory)
    stop(p)  # whatever an earlier launch left
    userdirs.platform_dir(directory)
    with open(p["config"], "w", encoding="utf-8") as f:
        json.dump({"netns": p["netns"], "state": p["state"], "control": p["control"], "in": sorted(set(in_ports)),
                   "out": [list(x) for x in out], "outbound": outbound,
                   "slirp_log": os.path.join(directory, "slirp.log")}, f)
    with open(p["log"], "ab") as log:
        proc = subprocess.Popen([python, "-I", "-S", PORTAL, p["config"]], env={}, cwd="/",
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    threading.Thread(target=proc.wait, daemon=True).start()  # reaped whenever it ends: never a zombie
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(p["state"]):
            return {**p, "pid": proc.pid, "start_time": procs.start_time(proc.pid)}
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.kill()
    with open(p["log"], "rb") as f:
        said = f.read()[-500:].decode("utf-8", "replace").strip()
    raise NetnsError(f"could not give the job a network of its own: {said or 'the portal did not start'}")


def join(path: str) -> None:
    """Enter the namespace pinned at ``path`` (in a child between fork and exec: this process only)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"cannot enter the network namespace at {path}: {os.strerror(e)}")
    finally:
        os.close(fd)


def host_port(net: dict[str, Any], port: int) -> int:
    """Blocking: the host port that reaches ``port`` inside the namespace (one more relay if none yet)."""
    try:
        with open(net["state"], encoding="utf-8") as f:
            known = json.load(f).get("in", {})
    except (OSError, ValueError):
        known = {}
    if str(port) in known:
        return int(known[str(port)])
    dfd = os.open(os.path.dirname(net["control"]), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        try:
            # through the directory's descriptor: a socket's path may not pass 107 bytes, a data directory's may
            s.connect(f"/proc/self/fd/{dfd}/{os.path.basename(net['control'])}")
            s.sendall(f"OPEN {int(port)}\n".encode())
            answer = s.makefile().readline().split()
        except OSError as e:
            raise NetnsError(f"the job's network portal does not answer ({e.strerror or e})") from None
        finally:
            os.close(dfd)
    if answer[:1] != ["OK"] or len(answer) != 2:
        raise NetnsError(f"the job's network portal refused port {port}: {' '.join(answer)}")
    return int(answer[1])


def stop(net: dict[str, Any]) -> None:
    """Blocking: end the portal (if it is still the one recorded) and unpin the namespace; idempotent."""
    pid = net.get("pid")
    if pid and procs.is_alive(pid, net.get("start_time")):
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 2
        while procs.is_alive(pid, net.get("start_time")) and time.monotonic() < deadline:
            time.sleep(0.02)
        if procs.is_alive(pid, net.get("start_time")):
            os.kill(pid, 9)
    ns = net.get("netns")
    if ns and os.path.lexists(ns):
        _libc.umount2(ns.encode(), MNT_DETACH)  # not pinned (a crash before the mount): nothing to undo
        try:
            os.unlink(ns)
        except OSError:
            pass
    for key in ("state", "control"):
        if net.get(key):
            try:
                os.unlink(net[key])
            except FileNotFoundError:
                pass


def socket_of(pid: int) -> socket.socket | None:
    """Blocking: a TCP socket made in the network namespace of process ``pid`` (None when that is this process's
    own, or the process is gone). A thread of its own enters the namespace, makes the socket and ends: the
    socket stays in that namespace, and no other thread of this process ever changes namespace."""
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    out: list[Any] = []
    try:
        if os.fstat(fd).st_ino == os.stat("/proc/self/ns/net").st_ino:
            return None

        def make() -> None:
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
                out.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            except OSError as e:
                out.append(e)

        t = threading.Thread(target=make)
        t.start()
        t.join()
    finally:
        os.close(fd)
    if isinstance(out[0], OSError):
        raise NetnsError(f"cannot reach into the sandbox's network: {out[0]}")
    return out[0]
