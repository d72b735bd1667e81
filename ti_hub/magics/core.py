"""The job monitor's pure part: what it shows for a job document and a log (no widgets, no I/O).

`view_of(job, log, now)` gives a MonitorView; `render_info` and `render_log` turn it into the HTML the
widget shows. The API's job document (docs/api.md) carries status, reason, queue (position, ahead,
estimated start, queue name, pinned), times, exit code, resources per instance and the placement
(node and devices of each instance): that is every metric the monitor shows.
"""

from __future__ import annotations

import datetime as dt
import html
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cli.output import fmt_duration, fmt_mib, fmt_time, parse_time
from ..cli.termsafe import strip_controls
from ..cli.watch import FINAL, NOT_STARTED

COLORS = {
    "created": "#57606a", "queued": "#9a6700", "scheduling": "#0969da", "running": "#0969da",
    "pausing": "#57606a", "paused": "#57606a", "killing": "#cf222e", "killed": "#cf222e",
    "completed": "#1a7f37", "failed": "#cf222e", "error": "#cf222e", "stopped": "#57606a",
}
LOG_LINES = 40


@dataclass(frozen=True)
class MonitorView:
    title: str                      # "job 12 nb-hello"
    status: str                     # "queued", "failed", ...
    color: str
    reason: str                     # why it waits, or how it ended ("" when there is nothing to add)
    queue: str                      # "position 2 in default/demo-gpu/single · 1 job ahead · estimated start ..."
    metrics: tuple[tuple[str, str], ...] = ()
    log: str = ""
    log_label: str = "log"
    final: bool = False
    note: str = ""                  # the last poll's problem, or "stopped watching"
    usage: tuple[str, ...] = ()     # resource use now, a line per instance (GET /jobs/{id}/metrics)
    alerts: tuple[str, ...] = ()    # the job's open alerts (GET /alerts), a line each

    @property
    def status_text(self) -> str:
        """One line: "queued: waiting for 1 free demo-gpu", "failed (exit code 3): exited with code 3"."""
        text = self.status
        code = dict(self.metrics).get("exit code")
        if self.final and code not in (None, "0"):
            text += f" (exit code {code})"
        return f"{text}: {self.reason}" if self.reason else text


def _when(value: Any, now: dt.datetime) -> str:
    t = parse_time(value)
    if t is None:
        return ""
    delta = (t - now).total_seconds()
    local = fmt_time(value, now)
    if delta >= 1:
        return f"{local} (in {fmt_duration(delta)})"
    if delta <= -1:
        return f"{local} ({fmt_duration(-delta)} ago)"
    return f"{local} (now)"


def queue_line(job: Mapping[str, Any], now: dt.datetime) -> str:
    """Where a queued job stands; "" for a job that is not queued."""
    q = job.get("queue")
    if job.get("status") != "queued" or not isinstance(q, Mapping):
        return ""
    parts = []
    if q.get("position") is not None:
        where = f" in {q['queue']}" if q.get("queue") else ""
        parts.append(f"position {q['position']}{where}")
    ahead = q.get("ahead")
    if ahead is not None:
        parts.append("first in line" if not ahead else f"{ahead} job{'s' if ahead != 1 else ''} ahead")
    if q.get("estimated_start"):
        parts.append(f"estimated start {_when(q['estimated_start'], now)}")
    elif q.get("position") is not None:
        parts.append("no start estimate yet")
    if q.get("pinned"):
        parts.append("pinned by an admin")
    if q.get("provisional"):
        parts.append("position not yet confirmed by the scheduler")
    return " · ".join(parts)


def _span(start: Any, end: Any, now: dt.datetime) -> str:
    t0 = parse_time(start)
    if t0 is None:
        return ""
    t1 = parse_time(end) or now
    return fmt_duration(max(0.0, (t1 - t0).total_seconds()))


def _devices(job: Mapping[str, Any]) -> str:
    per = job.get("devices_per_instance") or 0
    n = job.get("instances") or 1
    if per and job.get("device_type") not in (None, "", "cpu"):
        text = f"{per}× {job['device_type']}"
        return text + (f" per instance × {n}" if n > 1 else "")
    return "none (CPU only)"


def _placement(job: Mapping[str, Any]) -> str:
    placement = job.get("placement")
    if not isinstance(placement, Mapping):
        return ""
    parts = []
    for i, inst in enumerate(placement.get("instances") or []):
        if not isinstance(inst, Mapping):
            continue
        devs = ",".join(str(d) for d in inst.get("devices") or [])
        parts.append(f"{i}: {inst.get('node', '?')}" + (f" [{devs}]" if devs else ""))
    return "; ".join(parts)


def metrics_of(job: Mapping[str, Any], now: dt.datetime) -> tuple[tuple[str, str], ...]:
    """(label, value) pairs of what the API tells about a job's run, in a fixed order, empty ones left out."""
    status = job.get("status")
    rows: list[tuple[str, str]] = []
    waited_until = job.get("started_at") or (job.get("finished_at") if status in FINAL else None)
    if job.get("queued_at"):
        rows.append(("waited", _span(job["queued_at"], waited_until, now)))
    if job.get("started_at"):
        rows.append(("run time", _span(job["started_at"], job.get("finished_at"), now)))
    if job.get("exit_code") is not None:
        rows.append(("exit code", str(job["exit_code"])))
    n = job.get("instances") or 1
    rows.append(("instances", str(n) + (f" ({job.get('strategy')})" if job.get("kind") == "distributed" else "")))
    rows.append(("devices", _devices(job)))
    cpu, mem = job.get("cpu_per_instance"), job.get("memory_mib_per_instance")
    if cpu or mem:
        rows.append(("per instance", ", ".join(p for p in (f"{cpu:g} CPU" if cpu else "",
                                                           fmt_mib(mem) + " memory" if mem else "") if p)))
    rows.append(("placement", _placement(job)))
    rows.append(("image", str(job.get("image") or "")))
    if job.get("estimated_duration"):
        rows.append(("estimated duration", fmt_duration(job["estimated_duration"])))
    return tuple((k, v) for k, v in rows if v)


def usage_lines(doc: Mapping[str, Any] | None, instance: int | None = None, most: int = 8) -> tuple[str, ...]:
    """GET /jobs/{id}/metrics as lines: "now: CPU 0.98 cores · memory 52 MiB", one per instance when several."""
    from ..backends.metrics import summary

    items = list((doc or {}).get("instances") or [])
    if instance is not None:
        items = [m for m in items if m.get("instance") == instance]
    if len(items) == 1:
        return (f"now: {summary(items[0])}",)
    lines = tuple(f"instance {m.get('instance')}: {summary(m)}" for m in items[:most])
    return lines + ((f"... and {len(items) - most} more instances",) if len(items) > most else ())


def alert_lines(items: Any, job_id: Any) -> tuple[str, ...]:
    """The open alerts of GET /alerts about this job, as lines: "running past its declared duration (since ...)"."""
    return tuple(f"{a.get('subject', '')} (since {a.get('fired_at', '?')})" for a in items or ()
                 if a.get("job_id") == job_id and a.get("open", True))


def view_of(job: Mapping[str, Any], log: str = "", now: dt.datetime | None = None, note: str = "",
            instance: int | None = None, usage: Mapping[str, Any] | None = None,
            alerts: Any = None) -> MonitorView:
    now = now or dt.datetime.now(dt.timezone.utc)
    status = str(job.get("status") or "unknown")
    reason = str(job.get("reason") or "")
    if reason.strip().lower() == status:
        reason = ""
    n = job.get("instances") or 1
    label = "log" if n <= 1 else f"log of instance {instance or 0} of {n}"
    title = " ".join(str(p) for p in (f"job {job.get('id', '?')}", job.get("name") or "") if p)
    return MonitorView(title=title, status=status, color=COLORS.get(status, "#57606a"), reason=reason,
                       queue=queue_line(job, now), metrics=metrics_of(job, now), log=log, log_label=label,
                       final=status in FINAL, note=note,
                       usage=usage_lines(usage, instance) if status == "running" else (),
                       alerts=alert_lines(alerts, job.get("id")))


# -- the log tail -------------------------------------------------------------------------------
@dataclass
class LogTail:
    """The last `max_lines` lines of a growing log; a carriage return (progress bars) keeps its last part.

    Escape sequences and other control characters are removed from each line (cli/termsafe.py): the page
    would show them as noise, not colours. A line is stripped once it is whole (the unfinished last one anew
    each time it is shown), so a sequence split across two reads is still removed.
    """

    max_lines: int = LOG_LINES
    _lines: deque = field(default_factory=deque)
    _partial: str = ""

    def feed(self, text: str) -> None:
        if not text:
            return
        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()
        for line in parts:
            self._lines.append(strip_controls(line.rstrip("\r").rsplit("\r", 1)[-1]))
            while len(self._lines) > self.max_lines:
                self._lines.popleft()

    @property
    def text(self) -> str:
        lines = list(self._lines)
        partial = strip_controls(self._partial.rsplit("\r", 1)[-1])
        if partial:
            lines.append(partial)
        return "\n".join(lines[-self.max_lines:])


def waiting_for_logs(job: Mapping[str, Any]) -> bool:
    """No log to read yet: the job has not started (or ended before it ever ran)."""
    return job.get("status") in NOT_STARTED or (job.get("status") in FINAL and not job.get("started_at"))


# -- HTML ---------------------------------------------------------------------------------------
def render_info(view: MonitorView) -> str:
    e = html.escape
    head = (f"<div><b>{e(view.title)}</b> &nbsp;<span style='color:{view.color};font-weight:600'>"
            f"{e(view.status)}</span>")
    if view.reason:
        head += f" — {e(view.reason)}"
    head += "</div>"
    parts = [head]
    if view.queue:
        parts.append(f"<div>{e(view.queue)}</div>")
    if view.metrics:
        cells = " &nbsp;·&nbsp; ".join(f"<span style='opacity:.7'>{e(k)}</span> {e(v)}" for k, v in view.metrics)
        parts.append(f"<div style='font-size:90%'>{cells}</div>")
    for line in view.usage:
        parts.append(f"<div style='font-size:90%'><span style='opacity:.7'>usage</span> {e(line)}</div>")
    for line in view.alerts:
        parts.append(f"<div style='color:#cf222e'>&#9888; alert: {e(line)}</div>")
    if view.note:
        parts.append(f"<div style='color:#9a6700'>{e(view.note)}</div>")
    return "".join(parts)


def render_log(view: MonitorView) -> str:
    if not view.log:
        empty = "(no output yet)" if not view.final else "(no output)"
        return f"<div style='opacity:.7;font-size:90%'>{html.escape(view.log_label)}: {empty}</div>"
    return (f"<div style='opacity:.7;font-size:90%'>{html.escape(view.log_label)} (last lines)</div>"
            "<pre style='max-height:16em;overflow:auto;margin:0;padding:4px;background:rgba(127,127,127,.08)'>"
            f"{html.escape(view.log)}</pre>")
