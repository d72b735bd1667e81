"""A sandbox's network of its own, and the platform's only ways in and out of it: ``python -I -S portal.py CONFIG``.

Started by the platform (root) for each job (all its instances share it), it makes a new network namespace with
nothing but its loopback, pins it at ``config["netns"]`` (a file the supervisors then join with setns before
they start bubblewrap), and stays as the namespace's portal:

- **in**: for each port of the job that the platform reaches (endpoints, SSH forwards), a listener on the host's
  127.0.0.1 at a port the kernel picks, relayed to 127.0.0.1:PORT inside. The host ports are the platform's: no
  job is on the host's network any more, so none can take them or listen where the platform connects.
  ``config["state"]`` (a JSON file only the platform reads) maps each job port to its host port.
- **out**: for each (inside port, host port) in ``config["out"]``, a listener on 127.0.0.1:INSIDE inside the
  namespace relayed to the host's 127.0.0.1:HOST (the hub's API, for a workspace). Nothing else of the host's
  loopback, and no other network, is reachable from inside.
- a control socket (``config["control"]``, in a directory only the platform enters) takes ``OPEN PORT`` (relay one
  more job port: answers ``OK HOSTPORT``) and ``EXIT``.
- **outbound** (``config["outbound"]``, when the platform found slirp4netns): user-mode networking gives the
  namespace a tap device, a default route and DNS, connecting out from the host's network as the platform
  (``--disable-host-loopback``: the gateway never leads to the host's loopback). Before it starts, every address of
  the host itself and each ``deny`` range get an unreachable route inside, which user code (no capabilities in the
  host's user namespace) cannot remove. slirp4netns runs sandboxed (``--enable-sandbox --enable-seccomp``: its
  own empty root, no capabilities) and exits with the portal (``--exit-fd``).

It runs as root because each relayed connection out of the namespace needs a socket made in the host's namespace
(setns to it and back, in this single-threaded process). It never parses what it relays. Standard library only,
``-I -S`` like dropexec.py. It ends on SIGTERM, on ``EXIT``, or when its parent platform process removes it.
"""

import asyncio
import ctypes
import fcntl
import ipaddress
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys

CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
SIOCSIFFLAGS, SIOCGIFFLAGS = 0x8914, 0x8913
IFF_UP = 0x1
BUFFER = 1 << 16
SLIRP_ADDRESS, SLIRP_TAP = "10.0.2.100", "tap0"
# rtnetlink, for the unreachable routes (linux/rtnetlink.h)
NETLINK_ROUTE, RTM_NEWROUTE, NLM_F_REQUEST, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL = 0, 24, 1, 4, 0x400, 0x200
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_UNIVERSE, RTN_UNREACHABLE, RTA_DST, NLMSG_ERROR = 254, 4, 0, 7, 1, 2
_libc = ctypes.CDLL(None, use_errno=True)


def check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def listener(port=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(128)
    s.setblocking(False)
    return s


def host_addresses(fib_trie="/proc/net/fib_trie"):
    """The IPv4 addresses of this (the host's) network namespace: ``/32 host LOCAL`` entries of the FIB."""
    found, last = set(), None
    with open(fib_trie) as f:
        for line in f:
            words = line.split()
            if len(words) >= 2 and words[0] in ("|--", "+--"):
                last = words[1]
            elif words[:3] == ["/32", "host", "LOCAL"] and last:
                found.add(last)
    return sorted(a for a in found if not a.startswith("127."))


def unreachable_route(cidr):
    """Add ``unreachable CIDR`` to the main table of this process's network namespace (rtnetlink)."""
    net = ipaddress.ip_network(cidr, strict=False)
    if net.version != 4:
        return  # the namespace has no IPv6 outside (slirp4netns runs without --enable-ipv6)
    dst = net.network_address.packed
    rtmsg = struct.pack("BBBBBBBBI", socket.AF_INET, net.prefixlen, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC,
                        RT_SCOPE_UNIVERSE, RTN_UNREACHABLE, 0)
    attr = struct.pack("HH", 4 + len(dst), RTA_DST) + dst
    body = rtmsg + attr
    msg = struct.pack("IHHII", 16 + len(body), RTM_NEWROUTE,
                      NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, 1, 0) + body
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE) as s:
        s.bind((0, 0))
        s.send(msg)
        answer = s.recv(65536)
    kind = struct.unpack_from("H", answer, 4)[0]
    if kind == NLMSG_ERROR:
        err = -struct.unpack_from("i", answer, 16)[0]
        if err and err != 17:  # EEXIST: the same range twice
            raise OSError(err, f"route {cidr} unreachable: {os.strerror(err)}")


class Portal:
    def __init__(self, cfg):
        self.cfg = cfg
        self.host_ns = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self.inside_ns = None
        self.ins = {}  # job port -> host listener
        self.outs = []
        self.servers = []
        self.slirp = None  # (process, the write end of its exit pipe)

    def in_host(self, make):
        """Run ``make()`` (socket creation) in the host's namespace, then come back inside."""
        check(_libc.setns(self.host_ns, CLONE_NEWNET), "setns to the host")
        try:
            return make()
        finally:
            check(_libc.setns(self.inside_ns, CLONE_NEWNET), "setns back inside")

    def enter_new_namespace(self):
        path = self.cfg["netns"]
        check(_libc.unshare(CLONE_NEWNET), "unshare the network")
        loopback_up()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.close(fd)
        check(_libc.mount(b"/proc/self/ns/net", path.encode(), None, MS_BIND, None), f"pin the namespace at {path}")
        self.inside_ns = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)

    def write_state(self):
        doc = {"pid": os.getpid(), "in": {str(p): s.getsockname()[1] for p, s in self.ins.items()},
               "out": [list(x) for x in self.outs],
               "outbound": {"via": "slirp4netns", "address": SLIRP_ADDRESS} if self.slirp else None}
        tmp = f"{self.cfg['state']}.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.cfg["state"])

    def start_outbound(self, out, host, timeout=10.0):
        """Routes first (nothing leaves before they hold), then slirp4netns in the host's namespace, attached to
        this one by its pinned path; returns once it says the tap device is configured."""
        for cidr in [*host, *out.get("deny", [])]:
            unreachable_route(cidr if "/" in cidr else cidr + "/32")
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()
        os.set_inheritable(ready_w, True)
        os.set_inheritable(exit_r, True)
        host_ns = self.host_ns

        def to_host():  # in the child, before exec: slirp4netns connects out from the host's network
            check(_libc.setns(host_ns, CLONE_NEWNET), "setns to the host")
            # ... from a private copy of the mounts: its sandbox unmounts the old root, which would otherwise
            # propagate through shared mounts and unpin every namespace under the host's /run/netns
            check(_libc.unshare(CLONE_NEWNS), "unshare the mounts")
            check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make the mounts private")

        argv = [out["slirp"], "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox",
                "--enable-seccomp", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", "--netns-type=path",
                self.cfg["netns"], SLIRP_TAP]
        log = open(self.cfg.get("slirp_log", os.devnull), "ab")
        try:
            proc = subprocess.Popen(argv, env={}, cwd="/", stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    pass_fds=(ready_w, exit_r), preexec_fn=to_host)
        finally:
            log.close()
            os.close(ready_w)
            os.close(exit_r)
        self.slirp = (proc, exit_w)
        try:
            ready, _, _ = select.select([ready_r], [], [], timeout)
            if not ready or os.read(ready_r, 1) != b"1":
                raise OSError(0, f"slirp4netns did not configure the network (exit {proc.poll()})")
        finally:
            os.close(ready_r)

    def stop_outbound(self):
        if self.slirp:
            proc, exit_w = self.slirp
            os.close(exit_w)  # slirp4netns exits when this end closes (and when the portal dies)
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    async def open_in(self, port):
        if port not in self.ins:
            sock = self.in_host(listener)
            self.ins[port] = sock
            self.servers.append(await asyncio.start_server(
                lambda r, w, port=port: self.relay(r, w, self.connect_inside, port), sock=sock))
        return self.ins[port].getsockname()[1]

    async def connect_inside(self, port):
        return await asyncio.open_connection("127.0.0.1", port)  # this process lives inside

    async def connect_host(self, port):
        sock = self.in_host(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        except OSError:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)

    async def relay(self, reader, writer, connect, port):
        try:
            r2, w2 = await connect(port)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(pipe(reader, w2), pipe(r2, writer))
        except asyncio.CancelledError:
            pass  # the portal is stopping
        finally:
            w2.close()
            writer.close()

    async def control(self, reader, writer):
        try:
            line = (await reader.readline()).decode("ascii", "replace").split()
            if line[:1] == ["OPEN"] and len(line) == 2 and line[1].isdigit() and 0 < int(line[1]) < 65536:
                host = await self.open_in(int(line[1]))
                self.write_state()
                writer.write(f"OK {host}\n".encode())
            elif line == ["EXIT"]:
                writer.write(b"OK\n")
                asyncio.get_running_loop().call_soon(self.stop.set)
            else:
                writer.write(b"ERR unknown command\n")
            await writer.drain()
        finally:
            writer.close()

    async def run(self):
        self.stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        out = self.cfg.get("outbound")
        host = host_addresses() if out else []  # read while still in the host's namespace
        self.enter_new_namespace()
        if out:
            self.start_outbound(out, host)
        for port in self.cfg.get("in", []):
            await self.open_in(int(port))
        for inside, host in self.cfg.get("out", []):
            self.outs.append((int(inside), int(host)))
            self.servers.append(await asyncio.start_server(
                lambda r, w, host=int(host): self.relay(r, w, self.connect_host, host), sock=listener(int(inside))))
        ctl = self.cfg["control"]
        if os.path.lexists(ctl):
            os.unlink(ctl)
        # through the directory's descriptor: a socket's path may not pass 107 bytes, a data directory's may
        dfd = os.open(os.path.dirname(ctl), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.servers.append(await asyncio.start_unix_server(
            self.control, path=f"/proc/self/fd/{dfd}/{os.path.basename(ctl)}"))
        os.close(dfd)
        os.chmod(ctl, 0o600)
        self.write_state()
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        watch = asyncio.ensure_future(self.watch_members())
        await self.stop.wait()
        watch.cancel()
        for s in self.servers:
            s.close()
        self.stop_outbound()
        # nothing runs in the namespace any more: unpin it (the platform's stop does the same, idempotently)
        _libc.umount2(self.cfg["netns"].encode(), 2)

    async def watch_members(self, every=2.0, first=30.0):
        """End once the namespace has nobody but this portal: its job ended, however the platform learns it.
        The supervisors join right after the portal starts: one that never came within ``first`` seconds will
        not come."""
        me, inode = os.getpid(), os.fstat(self.inside_ns).st_ino
        seen, known, started = False, None, asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(every)
            if known is None or not in_namespace(known, inode):
                known = next((pid for pid in pids() if pid != me and in_namespace(pid, inode)), None)
            if known is not None:
                seen = True
            elif seen or asyncio.get_running_loop().time() - started > first:
                self.stop.set()
                return


def pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def in_namespace(pid, inode):
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == inode
    except OSError:
        return False


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(BUFFER)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()  # half-close: the other direction may still be talking
        except (OSError, RuntimeError):
            writer.close()


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    try:
        asyncio.run(Portal(cfg).run())
    except OSError as e:
        sys.stdout.write(f"error {e}\n")
        sys.stdout.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
