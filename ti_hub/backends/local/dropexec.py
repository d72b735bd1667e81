"""Become the user, then run their command: ``python -I -S dropexec.py FD``.

With ``"enter": {"pid": P, "start_time": T}`` in the spec it first joins the mount, pid and IPC namespaces of
the sandbox whose first process is P (and its network namespace, where it has its own) (identified by its start time too, so a recycled pid is never entered):
that is how an SSH session gets into a running workspace or job instance. It then forks (a pid namespace
takes only new children), the child becomes the user and runs the command, and this process waits for it,
passes signals on, and ends the way the command ended.

The last platform code before user code, run inside the sandbox (or, without bubblewrap, directly by the
supervisor). It reads a JSON spec from the memfd ``FD`` (uid, gid, groups, argv, env, cwd, umask), switches
to that uid and gid with no supplementary groups, sets no_new_privs (no setuid binary or file capability can
give anything back), and executes the command with the user's environment. Until then it runs with an empty
environment, so nothing of the user's (``LD_PRELOAD``, ``PYTHONPATH``, ...) can act on a privileged process.

Standard library only, no ``site`` (``-S``) and isolated mode (``-I``): nothing the user can write is
imported. Exit status 126 means the switch failed, with the reason on stderr.
"""

import ctypes
import json
import os
import signal
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
LAST_CAP = 63
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
NAMESPACES = (("ipc", CLONE_NEWIPC), ("mnt", CLONE_NEWNS), ("pid", CLONE_NEWPID))
# joined too where the sandbox has one of its own (a job's: portal.py); one that shares the host's is left as is
OPTIONAL = (("net", CLONE_NEWNET),)
FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH, signal.SIGCONT)


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def fail(message):
    os.write(2, f"ti-hub: cannot start: {message}\n".encode())
    os._exit(126)


def load(fd):
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return json.loads(b"".join(chunks))


def become(uid, gid, groups):
    libc = ctypes.CDLL(None, use_errno=True)
    if os.getuid() == 0 or os.geteuid() == 0:
        # empty the bounding and inheritable sets while CAP_SETPCAP is held (bubblewrap granted it with
        # CAP_SETUID and CAP_SETGID); the uid switch below then clears the rest
        for cap in range(LAST_CAP + 1):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        hdr, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
        if libc.capget(ctypes.byref(hdr), data) == 0:
            for d in data:
                d.inheritable = 0
            libc.capset(ctypes.byref(hdr), data)
        os.setgroups(list(groups))
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    elif (os.getuid(), os.getgid()) != (uid, gid):
        fail(f"this platform runs as uid {os.getuid()} and cannot switch to uid {uid}")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail("could not set no_new_privs")
    if uid != 0 and (os.getuid() == 0 or os.geteuid() == 0 or 0 in os.getresuid()):
        fail("still root after the switch")


def start_time(pid):
    with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
        text = f.read()
    return int(text[text.rindex(")") + 2:].split()[19])


def enter(target):
    """Join the namespaces of the sandbox whose first process is ``target["pid"]``; False if it is gone."""
    pid, start = int(target["pid"]), target.get("start_time")
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        fds = [(os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), flag, name)
               for name, flag in NAMESPACES + OPTIONAL]
        if start is not None and start_time(pid) != int(start):
            return False  # the pid now belongs to another process: the fds must not be used
    except (OSError, ValueError):
        return False
    own = {name: os.stat(f"/proc/self/ns/{name}").st_ino for name, _ in NAMESPACES + OPTIONAL}  # before /proc changes
    for fd, flag, name in fds:
        if os.fstat(fd).st_ino == own[name]:
            if (name, flag) in OPTIONAL:
                os.close(fd)
                continue
            fail(f"the target shares this process's {name} namespace: refusing to run outside a sandbox")
        if libc.setns(fd, flag) != 0:
            fail(f"cannot enter the sandbox's {name} namespace (errno {ctypes.get_errno()})")
        os.close(fd)
    return True


def wait_and_mirror(child):
    """Pass signals to the child and end as it ended (its exit code, or killed by the same signal)."""
    for sig in FORWARDED:
        signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        fail("usage: dropexec.py FD")
    try:
        spec = load(int(sys.argv[1]))
        uid, gid = int(spec["uid"]), int(spec["gid"])
        argv, env = [str(a) for a in spec["argv"]], {str(k): str(v) for k, v in spec["env"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"bad spec: {e}")
    if spec.get("enter"):
        if not enter(spec["enter"]):
            fail("the workspace or job is not running any more")
        child = os.fork()
        if child:
            wait_and_mirror(child)
    become(uid, gid, [int(g) for g in spec.get("groups", [])])
    os.umask(int(spec.get("umask", 0o022)))
    try:
        os.chdir(spec.get("cwd") or "/")
    except OSError as e:
        fail(f"cannot enter {spec.get('cwd')}: {e.strerror}")
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as e:
        os.write(2, f"ti-hub: cannot run {argv[0]}: {e.strerror}\n".encode())
        os._exit(127)


if __name__ == "__main__":
    main()
