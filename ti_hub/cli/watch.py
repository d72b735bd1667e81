"""Waiting for a job to finish and following its logs, by polling the API."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from .client import ApiError, TiClient, quote
from .output import err, fmt_time
from .termsafe import ControlStripper

# seconds between polls; tests make them short
POLL_INTERVAL = 1.0  # logs
WAIT_INTERVAL = 2.0  # job status

FINAL = frozenset({"completed", "failed", "killed", "error", "stopped"})
NOT_STARTED = frozenset({"created", "queued", "scheduling"})
STARTED = frozenset({"running", "pausing", "paused", "killing"}) | FINAL

EXIT_OK = 0
EXIT_JOB_FAILED = 4
EXIT_WAIT_TIMEOUT = 5


class WaitTimeout(Exception):
    def __init__(self, job: Mapping[str, Any]):
        super().__init__(job.get("status"))
        self.job = job


def job_label(job: Mapping[str, Any], ref: Any = None) -> str:
    return str(job.get("name") or ref or job.get("id"))


def queue_position(job: Mapping[str, Any], with_queue: bool = False) -> str:
    q = job.get("queue")
    if q is None:
        q = job.get("position")
    if isinstance(q, bool) or q is None:
        return ""
    if isinstance(q, (int, float)):
        return f"position {int(q)}"
    if isinstance(q, Mapping):
        pos = q.get("position")
        name = q.get("queue") or q.get("name") or q.get("pool")
        parts = []
        if pos is not None:
            parts.append(f"position {pos}")
        if name and with_queue:
            parts.append(f"in {name}")
        if q.get("estimated_start"):
            parts.append(f"(estimated start {fmt_time(q['estimated_start'])})")
        return " ".join(parts)
    return str(q)


def progress(job: Mapping[str, Any]) -> str:
    """One line for a state: "queued (position 2)", "failed: out of memory (exit code 137)"."""
    status = str(job.get("status") or "unknown")
    reason = job.get("reason") or ""
    if reason.strip().lower() == status:  # "running: running" says it twice
        reason = ""
    if status == "queued":
        pos = queue_position(job)
        msg = f"queued ({pos})" if pos else "queued"
        return f"{msg}: {reason}" if reason else msg
    msg = status
    if reason:
        msg += f": {reason}"
    if status in FINAL and job.get("exit_code") not in (None, 0):
        msg += f" (exit code {job.get('exit_code')})"
    return msg


def exit_code_for(job: Mapping[str, Any]) -> int:
    return EXIT_OK if job.get("status") == "completed" else EXIT_JOB_FAILED


def wait_for_job(
    client: TiClient,
    ref: Any,
    timeout: float | None = None,
    until: frozenset[str] = FINAL,
    quiet: bool = False,
    job: Mapping[str, Any] | None = None,
) -> Mapping[str, Any]:
    """Polls the job until its status is in `until`, printing each change to stderr.

    Raises WaitTimeout after `timeout` seconds.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    last = None
    while True:
        if job is None:
            job = client.get(f"/jobs/{quote(ref)}")
        msg = progress(job)
        if msg != last and not quiet:
            err(f"{job_label(job, ref)}: {msg}")
        last = msg
        if job.get("status") in until:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(job)
        pause = WAIT_INTERVAL
        if deadline is not None:
            pause = max(0.0, min(pause, deadline - time.monotonic()))
        time.sleep(pause)
        job = None


def follow_logs(
    client: TiClient,
    ref: Any,
    instance: int | None = None,
    tail: int | None = None,
    follow: bool = False,
    raw: bool = False,
) -> Mapping[str, Any]:
    """Writes the log to stdout; with follow, polls `offset` until `finished` and nothing more.

    The answer's `offset` is where the next read starts. Returns the last page. The log is the job owner's
    text: unless `raw`, its escape sequences and control characters go (termsafe.py says why).
    """
    stripper = None if raw else ControlStripper()  # one for the whole stream: a sequence may span pages
    path = f"/jobs/{quote(ref)}/logs"
    base: dict[str, Any] = {}
    if instance is not None:
        base["instance"] = instance
    offset: Any = None
    hinted = False
    page: Mapping[str, Any] = {}
    while True:
        params = dict(base)
        if offset is None:
            if tail is not None:
                params["tail"] = tail
            else:
                params["offset"] = 0
        else:
            params["offset"] = offset
        page = client.get(path, params=params) or {}
        text = page.get("text") or ""
        shown = text if stripper is None else stripper.feed(text)
        if shown:
            sys.stdout.write(shown)
            sys.stdout.flush()
        new_offset = page.get("offset")
        if text and new_offset is not None and new_offset == params.get("offset"):
            # a server that echoes the offset it was asked for: move past what it sent
            new_offset = int(new_offset) + len(text.encode())
        advanced = new_offset is not None and new_offset != offset
        if not hinted and instance is None and (page.get("instances") or 1) > 1:
            hinted = True
            err(f"(instance 0 of {page['instances']}; others with --instance N)")
        offset = new_offset if new_offset is not None else offset
        if not text or not advanced:
            if not follow or page.get("finished"):
                return page
            time.sleep(POLL_INTERVAL)


def watch_job(client: TiClient, ref: Any, job: Any = None, follow: bool = False,
              timeout: float | None = None) -> int:
    """Progress to stderr until the job ends (with follow: its log on stdout); the exit code."""
    try:
        if follow:
            # the queue position while it waits, then the log as it is written, then the end state
            started = wait_for_job(client, ref, until=STARTED, job=job)
            try:
                follow_logs(client, ref, follow=True)
            except ApiError:
                if started.get("status") not in FINAL:  # ended before it ever ran: no log to show
                    raise
            final = wait_for_job(client, ref, quiet=True)
            err(f"{job_label(final, ref)}: {progress(final)}")
        else:
            final = wait_for_job(client, ref, timeout=timeout, job=job)
    except WaitTimeout as e:
        err(f"{job_label(e.job, ref)}: still {e.job.get('status')} after {timeout:g} s")
        return EXIT_WAIT_TIMEOUT
    return exit_code_for(final)
