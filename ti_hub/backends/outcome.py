"""From what a backend observes to a job's outcome, in plain language: pure functions, no I/O.

``job_outcome`` returns None while the job still runs, else ``(status, exit_code, reason)`` with
status ``completed`` or ``failed``. Exit codes follow Python's convention: a negative code ``-N``
means the process was killed by signal ``N``; codes ``129..192`` from a shell mean the same.
"""

from __future__ import annotations

import signal as _signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # base.py imports traitlets; keep this module importable by the tiny supervisor
    from .base import InstanceStatus, JobObservation

LOST_REASON = "the process disappeared (machine restart?)"


def signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_reason(exit_code: int | None = None, signal: int | None = None, *, oom: bool = False,
                memory_limit_mib: int | None = None, stopped: bool = False) -> str:
    """Plain-language reason for how a process ended.

    ``exit_code`` negative means killed by that signal (Python's ``returncode``); ``signal`` may be
    given instead. ``oom``: the platform (or the kernel, under a cgroup) killed it for exceeding its
    memory limit. ``stopped``: it was asked to stop (a cancel, a preemption), not a crash.
    """
    if oom:
        return f"out of memory (limit {memory_limit_mib} MiB)" if memory_limit_mib else "out of memory"
    if signal is None and exit_code is not None and exit_code < 0:
        signal = -exit_code
    if signal is not None:
        text = f"killed by signal {signal} ({signal_name(signal)})"
        return f"stopped on request, {text}" if stopped else text
    if exit_code is None:
        return "ended for an unknown reason"
    if exit_code == 0:
        return "stopped on request, exited normally" if stopped else "exited normally"
    text = f"exited with code {exit_code}"
    if 128 < exit_code <= 128 + 64:  # a shell reports a child killed by signal N as 128+N
        text += f" (killed by signal {exit_code - 128}, {signal_name(exit_code - 128)})"
    if stopped:
        text = f"stopped on request, {text}"
    return text


def instance_name(roles: list[str], index: int) -> str:
    """``worker 1`` / ``ps 0``: the role and the index within that role."""
    if index >= len(roles):
        return f"instance {index}"
    role = roles[index]
    return f"{role} {sum(1 for r in roles[:index] if r == role)}"


def describe_failure(name: str, st: InstanceStatus) -> str:
    if st.state == "lost":
        return f"{name} was lost: {st.reason or LOST_REASON}"
    reason = st.reason or exit_reason(st.exit_code)
    if reason.startswith("out of memory"):
        return f"{name} was killed: {reason}"
    if reason.startswith(("exited", "killed", "stopped", "was ")):
        return f"{name} {reason}"
    return f"{name} failed: {reason}"


def _failed(st: InstanceStatus) -> bool:
    return st.state == "lost" or (st.state == "exited" and st.exit_code != 0)


def _cause_rank(st: InstanceStatus) -> int:
    """Which failure to blame first: a crash or an OOM kill is the likely cause; a process killed by a
    signal or stopped is more often a consequence (torn down after the first failure); lost is last."""
    if st.state == "lost":
        return 3
    if st.reason.startswith("out of memory"):
        return 0
    if (st.exit_code is not None and st.exit_code < 0) or st.reason.startswith("stopped"):
        return 2
    return 1


def job_outcome(strategy: str | None, roles: list[str],
                observation: JobObservation) -> tuple[str, int | None, str] | None:
    """None while running; else (``completed``|``failed``, exit code, reason).

    single/allreduce: completed when every instance exited 0, failed as soon as one exits non-zero
    or is lost. ps: completed when every worker exited 0 (parameter servers never exit by themselves;
    the caller stops them), failed as soon as a worker or a parameter server fails.
    """
    instances = list(observation.instances)
    if not instances:
        return None
    role_of = {st.index: (roles[st.index] if st.index < len(roles) else "worker") for st in instances}
    finishers = instances
    if strategy == "ps" and any(role_of[st.index] == "worker" for st in instances):
        finishers = [st for st in instances if role_of[st.index] == "worker"]

    if all(st.state == "exited" and st.exit_code == 0 for st in finishers):
        n = len(finishers)
        what = "worker" if finishers is not instances else "instance"
        return "completed", 0, (f"all {n} {what}s exited normally" if n > 1 else f"the {what} exited normally")

    failures = [st for st in instances if _failed(st)]
    if failures:
        first = min(failures, key=lambda st: (_cause_rank(st), st.index))
        return "failed", first.exit_code, describe_failure(instance_name(roles, first.index), first)
    return None


def starting_reason(roles: list[str], observation: JobObservation) -> str | None:
    """None once every instance runs; else why the job has not started yet, for its status reason: the first
    waiting instance's reason (named, in a gang), e.g. ``starting: worker 1: image 'x' cannot be pulled ...``."""
    waiting = [st for st in observation.instances if st.state == "starting"]
    if not waiting:
        return None
    first = waiting[0]
    n = len(observation.instances)
    if n == 1:
        return f"starting: {first.reason}"
    return f"starting ({n - len(waiting)} of {n} running): {instance_name(roles, first.index)}: {first.reason}"
