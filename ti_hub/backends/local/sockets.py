"""Who serves a local TCP port: the check behind every connection TiHub makes into a job or workspace.

Embedded jobs share the machine's network, so a port number alone does not say whose server answers: another
user's job could listen on the port a job declared and serve its pages under that job's endpoint URL (on the
hub's origin). Before TiHub connects to a port for a job, a workspace (SSH ``-L``) or a TensorBoard, it checks
that every listening socket that could take the connection belongs to the expected uid and, when the sandbox is
known, to a process inside that sandbox (its pid namespace). A listener that closes and is replaced between
the check and the connection is not caught; the expected server gives up its port for that to happen.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

LISTEN = "0A"
# the addresses a connection to 127.0.0.1 can reach: the loopback and the wildcard (IPv4, and IPv6 dual stack)
REACHABLE = {"0100007F", "00000000", "00000000000000000000000000000000", "00000000000000000000000001000000",
             "0000000000000000FFFF00000100007F"}


@dataclass(frozen=True)
class Listener:
    address: str  # hex, as /proc/net/tcp writes it
    port: int
    uid: int
    inode: int


def parse(text: str) -> list[Listener]:
    """Listening sockets of one /proc/net/tcp or tcp6 table."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != LISTEN:
            continue
        addr, _, port = f[1].rpartition(":")
        try:
            out.append(Listener(addr.upper(), int(port, 16), int(f[7]), int(f[9])))
        except ValueError:
            continue
    return out


def all_listeners(port: int) -> list[Listener]:
    """Every listening TCP socket on ``port`` in this network namespace, on any address, both families."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                found += [x for x in parse(f.read()) if x.port == port]
        except OSError:
            continue
    return found


def listeners(port: int) -> list[Listener]:
    """Those of ``all_listeners`` that a connection to 127.0.0.1 can reach."""
    return [x for x in all_listeners(port) if x.address in REACHABLE]


def socket_inodes(pid: int | str) -> set[int]:
    """The inodes of the sockets process ``pid`` holds open (empty when it is gone or hidden)."""
    out: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def sockets_in_namespace(uid: int, pidns: int) -> set[int]:
    """Socket inodes held by processes of ``uid`` inside the pid namespace ``pidns`` (an inode number)."""
    out: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid or os.stat(f"/proc/{entry.name}/ns/pid").st_ino != pidns:
                continue
        except OSError:
            continue
        out |= socket_inodes(entry.name)
    return out


def namespace_of(pid: int | None) -> int | None:
    if not pid:
        return None
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def refusal(port: int, uid: int, pidns: int | None, what: str) -> str | None:
    """Blocking. None when ``port`` is served by ``uid`` (inside the sandbox ``pidns`` when given); else why not."""
    found = listeners(port)
    if not found:
        return f"nothing listens on port {port} in {what}"
    if any(x.uid != uid for x in found):
        return f"port {port} is held by a process that is not {what}'s; it is not forwarded"
    if pidns is not None:
        held = sockets_in_namespace(uid, pidns)
        if any(x.inode not in held for x in found):
            return f"port {port} is held by a process outside {what}; it is not forwarded"
    return None
