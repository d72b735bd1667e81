"""The supervisor of one local instance or workspace: ``python -m ti_hub.backends.local.runner CONFIG.json``.

Started by ``LocalBackend.launch`` (or the local spawner) in its own session, so it outlives a restart of the
ti service. It runs the user's command in its sandbox (``sandbox.py``: bubblewrap with an empty environment,
then ``dropexec.py`` becomes the owner's uid) in a new process group, pumps its stdout and stderr into the
instance's log up to ``log_bytes``, enforces the memory limit (cgroups v2 or v1, or by polling /proc, see
``limits``) and the size of the instance's own directories (``disk_bytes``, measured every ``disk_poll``
seconds), forwards SIGTERM to the command's process group and kills it after ``kill_grace`` seconds, and when
the command ends kills whatever it left behind, then writes ``status/instance-<i>.json`` atomically and exits.
It also becomes a child subreaper, so processes that escape the group are re-parented to it and stay
countable and killable. Its config and records live in a directory only the platform can read or write.

Deliberately small and dependency-free: it imports no traitlets, tornado or database code.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

from ti_hub.backends.local import jobdir, limits, netns, procs, sandbox
from ti_hub.backends.outcome import exit_reason

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
READ_SIZE = 1 << 16


def write_json_atomic(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())  # the status must survive a machine crash right after the job ends
    os.replace(tmp, path)


def _prctl():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


def memfd(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding ``data``, inheritable, positioned at its start."""
    fd = os.memfd_create(name, 0)  # no MFD_CLOEXEC: the sandbox's command reads it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def disk_usage(paths: list[str], stop_above: int = 0) -> int:
    """Bytes allocated under ``paths`` (never following symbolic links, never leaving the file system);
    stops counting once past ``stop_above`` when that is set."""
    total = 0
    for top in paths:
        try:
            dev = os.lstat(top).st_dev
        except OSError:
            continue
        stack = [top]
        while stack:
            try:
                it = os.scandir(stack.pop())
            except OSError:
                continue
            with it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if e.is_dir(follow_symlinks=False) and st.st_dev == dev:
                        stack.append(e.path)
            if stop_above and total > stop_above:
                return total
    return total


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"


class Supervisor:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.stop_requested = False
        self.limit_reason = ""  # set when the platform stops the instance for passing a limit
        self.log = open(cfg["log"], "ab", buffering=0)
        # the jupyter endpoint's server log (jobdir.jupyter_argv): opened first, so its fd is a single digit
        self.jupyter_fd = os.open(cfg["jupyter"]["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640) \
            if cfg.get("jupyter") else None
        self.prctl = _prctl()
        self.cgroup: limits.Cgroup | None = None
        self.memory_peak: int | None = None  # bytes, from the cgroup when the kernel tells
        self.memory_mib = int(cfg.get("memory_mib") or 0)
        lim = cfg.get("limits") or {}
        self.log_limit = int(lim.get("log_bytes") or 0)
        self.disk_limit = int(lim.get("disk_bytes") or 0)
        self.disk_paths = list(lim.get("disk_paths") or [])
        self.disk_poll = max(0.1, float(lim.get("disk_poll") or 5.0))
        self.logged = self._log_size()
        self.log_full = False

    def _log_size(self) -> int:
        try:
            return os.fstat(self.log.fileno()).st_size
        except OSError:
            return 0

    def note(self, message: str) -> None:
        """A line from the platform in the instance's log, marked so it is not taken for the job's output."""
        stamp = datetime.now(timezone.utc).strftime("%H:%M:%S")
        try:
            self.log.write(f"[ti {stamp}] {message}\n".encode())
        except OSError:
            pass

    def _on_stop(self, signum, frame) -> None:
        self.stop_requested = True

    def _setup_limits(self) -> None:
        cg = limits.Cgroup.from_config(self.cfg.get("cgroup"))
        if cg:
            try:
                cg.setup()
                self.cgroup = cg
            except OSError as e:
                self.note(f"could not create cgroup {', '.join(cg.paths)} ({e}); using the weaker fallback limits")
                cg.remove()  # v1: the directories already made in the other hierarchies
        if self.cgroup is None and self.cfg.get("cpus"):
            try:
                os.sched_setaffinity(0, self.cfg["cpus"])  # inherited by the command
            except (OSError, AttributeError) as e:
                self.note(f"could not pin to cores {self.cfg['cpus']}: {e}")
        if self.prctl is not None:
            self.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def _preexec(self) -> None:
        # runs in the forked child before exec; the supervisor is single-threaded, so this is safe
        if self.cgroup:
            self.cgroup.join()
        if self.prctl is not None:
            self.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # never outlive a killed supervisor
        if self.cfg.get("netns"):  # the job's own network (portal.py): the supervisor stays on the host's
            netns.join(self.cfg["netns"])

    def _stop_grace(self, default: float) -> float:
        """The grace period ``stop()`` asked for (it writes it next to the config before SIGTERM)."""
        try:
            with open(self.cfg["stop"], encoding="utf-8") as f:
                return max(0.0, float(json.load(f)["grace"]))
        except (OSError, ValueError, KeyError, TypeError):
            return max(0.0, default)

    def _reap(self, child_pid: int) -> int | None:
        """Collect every exited child (re-parented ones too); the command's exit code once it ended."""
        code = None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return code
            if pid == 0:
                return code
            if pid == child_pid:
                code = os.waitstatus_to_exitcode(status)

    def _signal_all(self, child_pid: int, child_start: int | None, sig: int) -> set[int]:
        # bubblewrap dies of SIGTERM and then SIGKILLs the sandbox: only the job gets a graceful SIGTERM
        spare = frozenset({child_pid}) if self.cfg.get("wrapped") and sig != signal.SIGKILL else frozenset()
        return procs.signal_instance(os.getpid(), None, child_pid, child_start, sig, include_supervisor=False,
                                     spare=spare)

    def command(self) -> tuple[list[str], list[int]]:
        """The argv to start (bubblewrap with dropexec, or dropexec alone) and the fds it must inherit."""
        cfg, box = self.cfg, self.cfg["sandbox"]
        ident = sandbox.Identity(**cfg["identity"])
        user = cfg["user"]
        argv, extra_fds = list(user["argv"]), []
        jup = cfg.get("jupyter")
        if jup and self.jupyter_fd is not None:
            os.set_inheritable(self.jupyter_fd, True)
            root = sandbox.JOB_DIR if box.get("bwrap") else user["cwd"]
            argv = jobdir.jupyter_argv(argv[0], argv[-1], jup["port"], jup["base_url"], root, self.jupyter_fd)
            extra_fds.append(self.jupyter_fd)
            self.note(f"jupyter endpoint: starting a Jupyter server on port {jup['port']} (its output: "
                      f"logs/{os.path.basename(jup['log'])} in the job's directory)")
        spec = sandbox.user_spec(ident, argv, user["env"], user["cwd"])
        spec_fd = memfd("ti-spec", json.dumps(spec).encode())
        python = box["python"]
        if not box.get("bwrap"):
            return sandbox.plain_argv(python, spec_fd), [spec_fd, *extra_fds]
        plan = box["plan"]
        plan = sandbox.Plan(binds=tuple(sandbox.Bind(**b) for b in plan["binds"]),
                            read_only=tuple(plan["read_only"]), entries=tuple(tuple(e) for e in plan["entries"]),
                            devices=tuple((d, d) if isinstance(d, str) else tuple(d)  # str: a config before pairs
                                          for d in plan["devices"]), tmp=plan["tmp"], shm_mib=plan["shm_mib"],
                            cwd=plan["cwd"], extra=tuple(plan.get("extra", ())),
                            bin_dirs=tuple(plan.get("bin_dirs", ())))  # none in a config from before
        fds = [spec_fd, *extra_fds]
        passwd_fd = group_fd = profile_fd = None
        if box.get("privileged"):
            passwd_fd = memfd("ti-passwd", sandbox.passwd_text(_read("/etc/passwd"), ident).encode())
            group_fd = memfd("ti-group", sandbox.group_text(_read("/etc/group"), ident).encode())
            fds += [passwd_fd, group_fd]
        if plan.bin_dirs and os.path.isfile(sandbox.PROFILE):  # none: nothing resets PATH in login shells
            profile_fd = memfd("ti-profile", sandbox.profile_text(_read(sandbox.PROFILE), plan.bin_dirs).encode())
            fds.append(profile_fd)
        self.info_r, info_w = os.pipe()
        os.set_inheritable(info_w, True)
        fds.append(info_w)
        self.info_w = info_w
        argv = sandbox.bwrap_argv(box["bwrap"], plan, privileged=bool(box.get("privileged")), python=python,
                                  spec_fd=spec_fd, passwd_fd=passwd_fd, group_fd=group_fd, info_fd=info_w,
                                  profile_fd=profile_fd)
        return argv, fds

    def run(self) -> int:
        cfg = self.cfg
        if os.getsid(0) != os.getpid():
            try:
                os.setsid()
            except OSError:
                pass
        if os.getsid(0) != os.getpid():  # the session is how the job's processes are found: never share one
            self._finish(127, "could not start: the supervisor must lead its own session", oom=False)
            return 1
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        signal.set_wakeup_fd(wfd)  # signals (SIGCHLD included) wake the select below at once
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_stop)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self._setup_limits()

        self.info_r = self.info_w = None
        out_r, out_w = os.pipe()
        try:
            argv, fds = self.command()
            # an empty environment: bubblewrap and dropexec run privileged; the user's reaches only the command
            child = subprocess.Popen(argv, cwd="/", env={}, stdin=subprocess.DEVNULL, stdout=out_w,
                                     stderr=out_w, process_group=0, preexec_fn=self._preexec, close_fds=True,
                                     pass_fds=fds)
        except (OSError, subprocess.SubprocessError, KeyError, TypeError, ValueError) as e:
            reason = f"could not start: {e}"
            self.note(reason)
            self._finish(127, reason, oom=False)
            return 0
        finally:
            os.close(out_w)
        for fd in fds:
            os.close(fd)
        os.set_blocking(out_r, False)
        child_start = procs.start_time(child.pid)
        self.child_record = {"pid": child.pid, "pgid": child.pid, "start_time": child_start,
                             "wrapped": bool(cfg.get("wrapped")), "sandbox_pid": None, "sandbox_start": None}
        write_json_atomic(cfg["child"], self.child_record)

        poll = max(0.05, float(cfg.get("poll_interval") or 1.0))
        grace = float(cfg["kill_grace"]) if cfg.get("kill_grace") is not None else 10.0
        mem_limit = self.memory_mib * 1024 * 1024 if self.memory_mib > 0 and not self.cgroup else 0
        # v1 OOM-kills one process (v2 the whole cgroup, memory.oom.group): end the rest like v2 would
        watch_oom = bool(self.cgroup and self.memory_mib > 0)
        oom = False
        term_sent_at: float | None = None
        killed = False
        next_check = time.monotonic()
        next_disk = time.monotonic() + (self.disk_poll if self.disk_limit and self.disk_paths else 1e18)
        code = None
        readers = [rfd, out_r] + ([self.info_r] if self.info_r is not None else [])
        info = b""
        while True:
            code = self._reap(child.pid)
            if code is not None:
                break
            now = time.monotonic()
            if self.stop_requested and term_sent_at is None:
                grace = self._stop_grace(grace) if not self.limit_reason else min(grace, 5.0)
                self.note(f"stop requested: sending SIGTERM, killing after {grace:g} s")
                self._signal_all(child.pid, child_start, signal.SIGTERM)
                term_sent_at = now
            if term_sent_at is not None and not killed and now - term_sent_at >= grace:
                self._signal_all(child.pid, child_start, signal.SIGKILL)
                killed = True
            if watch_oom and now >= next_check and self.cgroup.oom_kills():
                self.note(f"out of memory: the kernel killed a process of the instance at its limit of "
                          f"{self.memory_mib} MiB; killing the rest")
                self._signal_all(child.pid, child_start, signal.SIGKILL)
                oom, killed, watch_oom = True, True, False
            if mem_limit and now >= next_check:
                snap = procs.snapshot()
                used = procs.rss_bytes(procs.job_processes(os.getpid(), None, child.pid, child_start, snap), snap)
                if used > mem_limit:
                    self.note(f"out of memory: the instance used {used >> 20} MiB, more than its limit of "
                              f"{self.memory_mib} MiB; killing it")
                    self._signal_all(child.pid, child_start, signal.SIGKILL)
                    oom, killed, mem_limit = True, True, 0
            if now >= next_check:
                next_check = now + poll
            if now >= next_disk:
                used = disk_usage(self.disk_paths, self.disk_limit)
                if used > self.disk_limit and not self.limit_reason:
                    self._over_limit(f"its work directory and /tmp grew past their limit of "
                                     f"{_size(self.disk_limit)} ({_size(used)} used)")
                next_disk = time.monotonic() + self.disk_poll
            timeouts = [1.0]
            if mem_limit or watch_oom:
                timeouts.append(next_check - now)
            if next_disk < 1e17:
                timeouts.append(next_disk - now)
            if term_sent_at is not None and not killed:
                timeouts.append(term_sent_at + grace - now)
            try:
                ready, _, _ = select.select(readers, [], [], max(0.0, min(timeouts)))
            except InterruptedError:
                ready = []
            if rfd in ready:
                try:
                    os.read(rfd, 4096)
                except (BlockingIOError, InterruptedError):
                    pass
            if out_r in ready and not self._pump(out_r):
                readers.remove(out_r)
            if self.info_r is not None and self.info_r in ready:
                chunk = os.read(self.info_r, 4096)
                info += chunk
                if not chunk:
                    readers.remove(self.info_r)
                    os.close(self.info_r)
                    self.info_r = None
                    self._record_sandbox(info)
        child.returncode = code  # reaped above; keep Popen from waiting for it again

        # like a container: when the command ends, what it left running ends too
        deadline = time.monotonic() + 2.0
        while self._signal_all(child.pid, child_start, signal.SIGKILL) and time.monotonic() < deadline:
            time.sleep(0.02)
            self._reap(child.pid)  # as their subreaper: collect them rather than leave zombies to init
        self._reap(child.pid)
        os.set_blocking(out_r, False)
        while self._pump(out_r):  # what the command wrote just before it ended
            pass
        os.close(out_r)
        if self.cgroup:
            oom = oom or self.cgroup.oom_killed(sigkilled=code in (-signal.SIGKILL, 128 + signal.SIGKILL))
            self.memory_peak = self.cgroup.memory_peak()
            self.cgroup.remove()
        if self.limit_reason and not oom:
            reason = f"stopped by the platform: {self.limit_reason}"
        else:
            reason = exit_reason(code, oom=oom, memory_limit_mib=self.memory_mib or None,
                                 stopped=self.stop_requested and not oom)
        if code != 0:
            self.note(f"instance ended: {reason}")
        self._finish(code if code != 0 or not self.limit_reason else 1, reason, oom=oom)
        return 0

    def _over_limit(self, why: str) -> None:
        self.limit_reason = why
        self.note(f"{why}: stopping it")
        self.stop_requested = True

    def _pump(self, fd: int) -> bool:
        """Move what the command wrote into its log, up to the log limit; False at the end of its output."""
        try:
            data = os.read(fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not data:
            return False
        if self.log_full:
            return True  # keep draining so that the command never blocks on a full pipe while it stops
        if self.log_limit and self.logged + len(data) > self.log_limit:
            data = data[:max(0, self.log_limit - self.logged)]
            self.log_full = True
        try:
            self.log.write(data)
        except OSError:
            pass
        self.logged += len(data)
        if self.log_full and not self.limit_reason:
            self._over_limit(f"it wrote more than its log limit of {_size(self.log_limit)}")
        return True

    def _record_sandbox(self, info: bytes) -> None:
        """bubblewrap's info: the sandbox's pid, whose namespaces an SSH session enters."""
        try:
            pid = int(json.loads(info.decode() or "{}").get("child-pid") or 0)
        except (ValueError, AttributeError):
            return
        if pid > 0:
            self.child_record.update(sandbox_pid=pid, sandbox_start=procs.start_time(pid))
            write_json_atomic(self.cfg["child"], self.child_record)

    def _finish(self, code: int, reason: str, *, oom: bool) -> None:
        write_json_atomic(self.cfg["status"], {
            "exit_code": code,
            "signal": -code if code < 0 else None,
            "reason": reason,
            "oom": oom,
            "stopped": self.stop_requested and not self.limit_reason,
            "limit": self.limit_reason or None,
            "memory_peak": self.memory_peak,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        })


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ti_hub.backends.local.runner CONFIG.json", file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as f:
        cfg = json.load(f)
    return Supervisor(cfg).run()


if __name__ == "__main__":
    sys.exit(main())
