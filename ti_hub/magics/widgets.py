"""Notebook widgets: SubmitForm (a job submission form) and JobMonitor (monitor.py), both on ipywidgets.

    from ti_hub.magics.widgets import SubmitForm
    SubmitForm()          # or %ti_form

The form's plan and image lists come from the API (GET /plans?kind=..., GET /images); Submit posts the
job (POST /jobs) and shows its JobMonitor under the form. A refusal is shown in one line under the
button, in the API's words with the field it names.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import ipywidgets as w

from ..cli.client import ApiError, TiClient, TiConnectionError
from ..cli.config import make_client
from .commands import MagicError, error_line
from .monitor import JobMonitor
from .submission import form_submission

__all__ = ["JobMonitor", "SubmitForm"]

WIDE = w.Layout(width="100%")


def plan_label(p: Mapping[str, Any]) -> str:
    dev = f"{p.get('device_count')}× {p.get('device_type')}" if p.get("device_count") else "CPU only"
    cpu = p.get("cpu")
    return f"{p.get('name')} — {dev}, {cpu:g} CPU" if isinstance(cpu, (int, float)) else f"{p.get('name')} — {dev}"


def image_label(i: Mapping[str, Any]) -> str:
    return f"{i.get('name')} ({i['address']})" if i.get("address") else str(i.get("name"))


class SubmitForm(w.VBox):
    """Every common field of a submission; `.submit()` does what the Submit button does."""

    def __init__(self, client: TiClient | None = None, **kw: Any):
        c = client or make_client(argparse.Namespace())
        self.name = w.Text(description="Name", placeholder="4-63 letters, digits, - and _")
        self.kind = w.ToggleButtons(description="Kind", options=["single", "distributed"], value="single")
        self.strategy = w.Dropdown(description="Strategy", options=[("all-reduce", "allreduce"),
                                                                    ("parameter server", "ps")])
        self.workers = w.BoundedIntText(description="Workers", value=2, min=1, max=64)
        self.ps = w.BoundedIntText(description="PS", value=1, min=1, max=64)
        self.plan = w.Dropdown(description="Plan", options=[])
        self.image = w.Dropdown(description="Image", options=[])
        self.command = w.Textarea(description="Command", placeholder="python3 /abs/path/train.py --epochs 3",
                                  layout=WIDE, rows=4)
        self.python = w.Checkbox(description="the command is Python code (python3 -u -c)", value=False)
        self.env = w.Textarea(description="Env", placeholder="KEY=VALUE, one per line", rows=2)
        self.volumes = w.Textarea(description="Volumes", placeholder="NAME:/mnt/path[:ro], one per line", rows=2)
        self.ports = w.Text(description="Ports", placeholder="40001, 40002")
        self.estimated_duration = w.Text(description="Duration", placeholder="estimated: 90m, 2h")
        self.button = w.Button(description="Submit", button_style="primary", icon="play")
        self.status = w.HTML()
        self.output = w.VBox()
        self._distributed = w.HBox([self.strategy, self.workers, self.ps])
        super().__init__(children=[
            self.name, self.kind, self._distributed, self.plan, self.image, self.command, self.python,
            self.env, self.volumes, w.HBox([self.ports, self.estimated_duration]),
            w.HBox([self.button, self.status]), self.output], **kw)
        self._client = c
        self.job: dict[str, Any] | None = None
        self.monitor: JobMonitor | None = None
        self.kind.observe(lambda _c: self._kind_changed(), names="value")
        self.strategy.observe(lambda _c: self._layout(), names="value")
        self.button.on_click(lambda _b: self.submit())
        self._load_images()
        self._kind_changed()

    # -- choices from the API ---------------------------------------------------------------------
    def _say(self, text: str, error: bool = False) -> None:
        import html

        color = "#cf222e" if error else "inherit"
        self.status.value = f"<span style='color:{color}'>{html.escape(text)}</span>"

    def _load_images(self) -> None:
        try:
            images = list(self._client.paginate("/images"))
        except (ApiError, TiConnectionError) as e:
            self._say(f"cannot list images: {error_line(e)}", error=True)
            return
        self.image.options = [(image_label(i), i.get("name")) for i in images if i.get("name")]

    def _kind_changed(self) -> None:
        try:
            plans = list(self._client.paginate("/plans", {"kind": self.kind.value}))
        except (ApiError, TiConnectionError) as e:
            self._say(f"cannot list plans: {error_line(e)}", error=True)
            plans = []
        keep = self.plan.value
        self.plan.options = [(plan_label(p), p.get("name")) for p in plans if p.get("name")]
        if keep in [v for _l, v in self.plan.options]:
            self.plan.value = keep
        self._layout()

    def _layout(self) -> None:
        distributed = self.kind.value == "distributed"
        self._distributed.layout.display = None if distributed else "none"
        self.ps.layout.display = None if self.strategy.value == "ps" else "none"

    # -- submit -----------------------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        return {k: getattr(self, k).value for k in (
            "name", "kind", "strategy", "workers", "ps", "plan", "image", "command", "python", "env", "volumes",
            "ports", "estimated_duration")}

    def submit(self) -> dict[str, Any] | None:
        """Posts the form; on success shows the job's monitor under the form and returns the job."""
        try:
            body = form_submission(self.values())
            job = self._client.post("/jobs", body)
        except (MagicError, ApiError, TiConnectionError) as e:
            self._say(error_line(e), error=True)
            return None
        self.job = job
        self._say(f"submitted job {job.get('id', '?')} {job.get('name', '')} ({job.get('status', 'created')})")
        if self.monitor is not None:
            self.monitor.stop()
        self.monitor = JobMonitor(self._client, job.get("id") or job.get("name"), job=job)
        self.output.children = [self.monitor]
        return job
