"""JobMonitor: an ipywidgets view of one job, kept up to date by a background thread.

The thread polls GET /jobs/{id} (while it runs, its metrics; once it has started, its log from the last offset)
every POLL_INTERVAL seconds with its own TiClient, and stops when the job has ended and its log is read, when
`stop()` or `close()` is called, or when the API says the job is gone or not ours. It never touches the
kernel's event loop (widget updates from a thread go out through ipykernel's thread-safe IOPub), so the
notebook stays usable, and it keeps updating while another cell runs.

Imports ipywidgets: import this module only where a widget is wanted (the `ti` CLI never does).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping
from typing import Any

import ipywidgets as w

from ..cli.client import ApiError, TiClient, TiConnectionError, quote
from . import core
from .commands import error_line

POLL_INTERVAL = 2.0
TAIL_LINES = 200  # lines read when the monitor first opens a log


class JobMonitor(w.VBox):
    """`JobMonitor(client, job_id_or_name)`; `.job` is the latest job document, `.log_text` the log tail."""

    def __init__(self, client: TiClient, ref: Any, job: Mapping[str, Any] | None = None,
                 instance: int | None = None, interval: float | None = None, start: bool = True, **kw: Any):
        info, log = w.HTML(), w.HTML()
        kill = w.Button(description="Kill", icon="stop", button_style="danger", tooltip="kill this job")
        stop = w.Button(description="Stop watching", icon="pause", tooltip="stop updating this view")
        super().__init__(children=[info, log, w.HBox([kill, stop])], **kw)
        self._info, self._log, self._kill_button, self._stop_button = info, log, kill, stop
        # TiClient keeps no connection between requests: the thread and the Kill button may share it
        self._client = client
        self._ref = ref
        self._instance = instance
        self._interval = POLL_INTERVAL if interval is None else interval
        self.job: dict[str, Any] = dict(job or {"name": str(ref), "status": "unknown"})
        self._tail = core.LogTail()
        self._offset: int | None = None
        self._note = ""
        self.usage: dict[str, Any] | None = None  # the last GET /jobs/{id}/metrics while the job runs
        self.alerts: list[dict[str, Any]] = []  # the open alerts naming the caller (GET /alerts)
        self._stopped = False
        self._gone = False
        self._wake = threading.Event()
        self._lock = threading.RLock()  # the poller and the kernel's thread both update the view
        kill.on_click(lambda _b: self.kill())
        stop.on_click(lambda _b: self.stop())
        self._show()
        self._thread = threading.Thread(target=self._run, name=f"ti-monitor-{ref}", daemon=True)
        if start:
            self._thread.start()

    # -- what users call -----------------------------------------------------------------------
    @property
    def log_text(self) -> str:
        return self._tail.text

    @property
    def view(self) -> core.MonitorView:
        return core.view_of(self.job, self._tail.text, note=self._note, instance=self._instance, usage=self.usage,
                            alerts=self.alerts)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Blocks until the monitor stops (the job ended, or stop()); the last job document."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return self.job

    def stop(self) -> None:
        """Stop polling; the view keeps its last state."""
        if not self._stopped:
            self._stopped = True
            if not self.view.final:
                self._note = "stopped watching (%ti_monitor JOB to watch again)"
            self._wake.set()
            self._show()

    def close(self) -> None:
        self._stopped = True
        self._wake.set()
        with self._lock:
            for child in (self._info, self._log, self._kill_button, self._stop_button, *self.children):
                child.close()
            super().close()

    def kill(self) -> None:
        try:
            job = self._client.post(f"/jobs/{quote(self.job.get('id') or self._ref)}/kill")
            with self._lock:
                self.job = dict(job or self.job)
                self._note = ""
        except (ApiError, TiConnectionError) as e:
            self._note = f"kill refused: {error_line(e)}"
            self._refresh_job()  # most often it ended meanwhile: show that, and Kill goes away
        self._show()
        self._wake.set()  # the poller looks again now, not in 2 s

    def _refresh_job(self) -> None:
        """One read of the job, whatever the poller does (it may have stopped); a failure changes nothing."""
        try:
            job = self._client.get(f"/jobs/{quote(self.job.get('id') or self._ref)}")
        except (ApiError, TiConnectionError):
            return
        with self._lock:
            self.job = dict(job)

    # -- the poller ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopped:
            more = self._poll()
            self._show()
            if self._gone or (self.view.final and not more):
                break
            if more:  # a final job whose log is still coming: read on without waiting
                continue
            self._wake.wait(self._interval)
            self._wake.clear()
        self._show()

    def _poll(self) -> bool:
        """One round: the job, then new log text; True when log text came after the job had ended."""
        try:
            job = self._client.get(f"/jobs/{quote(self.job.get('id') or self._ref)}")
            with self._lock:
                self.job = dict(job)
                self._note = ""
            self._read_usage()
            self._read_alerts()
            if core.waiting_for_logs(self.job):
                return False
            return self._read_log() and self.view.final
        except ApiError as e:
            self._note = error_line(e)
            if e.status in (401, 403, 404):
                self._gone = True
        except TiConnectionError as e:
            self._note = f"{e}; retrying"
        except Exception as e:  # noqa: BLE001 - shown in the widget, never a silent dead thread
            self._note = f"monitor error: {type(e).__name__}: {e}"
        return False

    def _read_usage(self) -> None:
        if self.job.get("status") != "running":
            self.usage = None
            return
        try:
            usage = self._client.get(f"/jobs/{quote(self.job.get('id') or self._ref)}/metrics") or {}
        except ApiError:
            usage = None  # the status line still updates; an older ti service has no metrics
        with self._lock:
            self.usage = usage

    def _read_alerts(self) -> None:
        try:
            page = self._client.get("/alerts", params={"limit": 500}) or {}
        except ApiError:
            page = {}  # an older ti service has no alerts: the view shows none
        with self._lock:
            self.alerts = [a for a in page.get("items") or [] if a.get("job_id") == self.job.get("id")]

    def _read_log(self) -> bool:
        params: dict[str, Any] = {}
        if self._instance is not None:
            params["instance"] = self._instance
        if self._offset is None:
            params["tail"] = TAIL_LINES
        else:
            params["offset"] = self._offset
        page = self._client.get(f"/jobs/{quote(self.job.get('id') or self._ref)}/logs", params=params) or {}
        text = page.get("text") or ""
        with self._lock:
            self._tail.feed(text)
        if page.get("offset") is not None:
            self._offset = int(page["offset"])
        return bool(text)

    def _show(self) -> None:
        with self._lock:
            view = core.view_of(self.job, self._tail.text, now=dt.datetime.now(dt.timezone.utc),
                                note=self._note, instance=self._instance, usage=self.usage, alerts=self.alerts)
            info, log = core.render_info(view), core.render_log(view)
            # only what changed goes to the browser
            if self._info.value != info:
                self._info.value = info
            if self._log.value != log:
                self._log.value = log
            # a kill under way or a job that ended: Kill would only be refused
            self._kill_button.disabled = view.final or self._gone or self.job.get("status") == "killing"
            self._stop_button.disabled = self._stopped or view.final or self._gone
