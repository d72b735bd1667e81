"""The supervisor of one local instance: ``python -m ti_hub.backends.local.runner CONFIG.json``.

Started by ``LocalBackend.launch`` in its own session, so it outlives a restart of the ti service.
It runs the user's command (already wrapped in bubblewrap when available) in a new process group,
with stdout and stderr appended to the instance's log, enforces the memory limit (cgroups v2, or
by polling /proc, see ``limits``), forwards SIGTERM to the command's process group and kills it
after ``kill_grace`` seconds, and when the command ends kills whatever it left behind, then
writes ``status/instance-<i>.json`` atomically and exits. It also becomes a child subreaper, so
processes that escape the group are re-parented to it and stay countable and killable.

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

from ti_hub.backends.local import limits, procs
from ti_hub.backends.outcome import exit_reason

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def write_json_atomic(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
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


class Supervisor:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.stop_requested = False
        self.log = open(cfg["log"], "ab", buffering=0)
        self.prctl = _prctl()
        self.cgroup: str | None = None
        self.memory_mib = int(cfg.get("memory_mib") or 0)

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
        cg = self.cfg.get("cgroup")
        if cg:
            try:
                limits.setup_cgroup(cg["path"], cg["limits"])
                self.cgroup = cg["path"]
            except OSError as e:
                self.note(f"could not create cgroup {cg['path']} ({e}); using the weaker fallback limits")
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
            limits.join_cgroup(self.cgroup)
        if self.prctl is not None:
            self.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # never outlive a killed supervisor

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

        try:
            child = subprocess.Popen(cfg["argv"], cwd=cfg["cwd"], env=cfg["env"], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT, process_group=0,
                                     preexec_fn=self._preexec, close_fds=True)
        except (OSError, subprocess.SubprocessError) as e:
            reason = f"could not start: {e}"
            self.note(reason)
            self._finish(127, reason, oom=False)
            return 0
        child_start = procs.start_time(child.pid)
        write_json_atomic(cfg["child"], {"pid": child.pid, "pgid": child.pid, "start_time": child_start,
                                         "wrapped": bool(cfg.get("wrapped"))})

        poll = max(0.05, float(cfg.get("poll_interval") or 1.0))
        grace = float(cfg["kill_grace"]) if cfg.get("kill_grace") is not None else 10.0
        mem_limit = self.memory_mib * 1024 * 1024 if self.memory_mib > 0 and not self.cgroup else 0
        oom = False
        term_sent_at: float | None = None
        killed = False
        next_check = time.monotonic()
        code = None
        while True:
            code = self._reap(child.pid)
            if code is not None:
                break
            now = time.monotonic()
            if self.stop_requested and term_sent_at is None:
                grace = self._stop_grace(grace)
                self.note(f"stop requested: sending SIGTERM, killing after {grace:g} s")
                self._signal_all(child.pid, child_start, signal.SIGTERM)
                term_sent_at = now
            if term_sent_at is not None and not killed and now - term_sent_at >= grace:
                self._signal_all(child.pid, child_start, signal.SIGKILL)
                killed = True
            if mem_limit and now >= next_check:
                snap = procs.snapshot()
                used = procs.rss_bytes(procs.job_processes(os.getpid(), None, child.pid, child_start, snap), snap)
                if used > mem_limit:
                    self.note(f"out of memory: the instance used {used >> 20} MiB, more than its limit of "
                              f"{self.memory_mib} MiB; killing it")
                    self._signal_all(child.pid, child_start, signal.SIGKILL)
                    oom, killed, mem_limit = True, True, 0
                next_check = now + poll
            timeouts = [1.0]
            if mem_limit:
                timeouts.append(next_check - now)
            if term_sent_at is not None and not killed:
                timeouts.append(term_sent_at + grace - now)
            try:
                select.select([rfd], [], [], max(0.0, min(timeouts)))
                os.read(rfd, 4096)
            except (BlockingIOError, InterruptedError):
                pass
        child.returncode = code  # reaped above; keep Popen from waiting for it again

        # like a container: when the command ends, what it left running ends too
        deadline = time.monotonic() + 2.0
        while self._signal_all(child.pid, child_start, signal.SIGKILL) and time.monotonic() < deadline:
            time.sleep(0.02)
            self._reap(child.pid)  # as their subreaper: collect them rather than leave zombies to init
        self._reap(child.pid)
        if self.cgroup:
            oom = oom or limits.cgroup_oom_killed(self.cgroup)
            limits.remove_cgroup(self.cgroup)
        reason = exit_reason(code, oom=oom, memory_limit_mib=self.memory_mib or None,
                             stopped=self.stop_requested and not oom)
        if code != 0:
            self.note(f"instance ended: {reason}")
        self._finish(code, reason, oom=oom)
        return 0

    def _finish(self, code: int, reason: str, *, oom: bool) -> None:
        write_json_atomic(self.cfg["status"], {
            "exit_code": code,
            "signal": -code if code < 0 else None,
            "reason": reason,
            "oom": oom,
            "stopped": self.stop_requested,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        })


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
