"""TiSpawnerMixin: every workspace start goes through TiHub's admission (validation, quota, mounts, queue).

The same mixin serves the local spawner and the Kubernetes spawner; only ``launch`` differs.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any
from urllib.parse import quote, urlencode

from jupyterhub.spawner import LocalProcessSpawner
from tornado import web
from traitlets import Integer, Unicode, default
from traitlets.config import Configurable

from ..domain import scopes as S
from ..domain.errors import ValidationError
from ..magics import AUTOLOAD_FILE
from ..domain import personal
from . import form, messages
from .client import DEFAULT_NAME, TiServiceError, call, ws_path
from .messages import refusal


class StartFailed(Exception):
    """The workspace's server ended (or never answered) during its start: ``what`` in a few words (the
    workspace's history), ``text``/``html`` with the last lines of its log (the spawn page)."""

    def __init__(self, what: str, text: str, html: str):
        super().__init__(what)
        self.what, self.text, self.html = what, text, html


# the spawner whose start() the running code is part of (tasks inherit it from the task that made them)
_STARTING: contextvars.ContextVar = contextvars.ContextVar("ti_spawner_starting", default=None)
# seconds the start itself waits for the admission: a queued workspace says so (with its place) this soon
FIRST_WAIT = 2


class TiSpawnerMixin(Configurable):
    ti_api_url = Unicode("", config=True, help="Internal URL of the ti service API (hub to service).")
    ti_public_api_url = Unicode("", config=True, help="URL of the ti service API as workspaces reach it (TI_API_URL).")
    ti_api_token = Unicode("", config=True, help="Token of the hub's 'ti-spawner' service identity.")
    admission_wait = Integer(5, min=1, max=60, config=True,
                             help="Longest seconds one admission check waits in the ti service for a queued "
                                  "workspace to be admitted (a long poll: the admission reaches the spawner at "
                                  "once). A queued workspace's position in the progress messages is refreshed "
                                  "at least this often; the first check, with the start, waits at most 2 s so that "
                                  "a queued workspace says so soon.")

    # whether ``launch`` starts an SSH-only workspace (jupyter: false) when asked; else such a start is refused
    runs_without_jupyter = False

    @default("apply_user_options")
    def _options_applied_at_admission(self):
        # the ti service validates and applies the form's options at admission (admit()); without a hook,
        # JupyterHub logs "Received unhandled user_options" at every spawn, which reads as an error
        return lambda _spawner, _options: None

    # -- naming ---------------------------------------------------------------------------------------------
    @property
    def ti_name(self) -> str:
        """The workspace's TiHub name: the server name (JupyterHub's rules), 'default' for the default server."""
        return self.name or DEFAULT_NAME

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 30):
        return call(self.ti_api_url, self.ti_api_token, method, path, body, timeout=timeout)

    def owner_scopes(self) -> list[str]:
        """The owner's TiHub permissions as the hub's RBAC grants them now: their roles and their groups' roles,
        custom ones included (read here, inside the hub; the ti service trusts them from this identity only)."""
        from jupyterhub.scopes import get_scopes_for

        return S.permissions_of(get_scopes_for(self.user))

    # -- the form -------------------------------------------------------------------------------------------
    async def _ti_options_form(self, spawner) -> str:
        query = urlencode({"groups": ",".join(g.name for g in self.user.groups),
                           "scopes": ",".join(self.owner_scopes())})
        opts = await self._call("GET", f"/workspace-options/{quote(self.user.name, safe='')}?{query}")
        return form.render_form(opts, self.ti_name, self.hub.base_url + "home", self.runs_without_jupyter)

    def options_from_form(self, formdata):
        problem = form.name_problem(self.ti_name)  # before the spawn, not from inside it
        if problem:
            raise refusal(400, problem)
        try:
            return form.options_from_form(formdata)
        except ValidationError as e:
            raise refusal(400, e.detail) from None

    # -- progress -------------------------------------------------------------------------------------------
    # Every listener gets every event of the start, from its beginning: the spawn page opens its event stream
    # after the start began, and a reload (or a second tab) opens another one. (One queue shared by all of them
    # gave each event to one listener only.)
    def _progress_init(self) -> None:
        self._ti_events: list[dict[str, Any]] = []
        self._ti_events_done = False
        self._ti_events_changed = asyncio.Event()

    def _emit(self, progress: int, message: str) -> None:
        if getattr(self, "_ti_events", None) is not None and not self._ti_events_done:
            self._ti_events.append({"progress": progress, "message": message})
            self._ti_events_changed.set()

    def _progress_end(self) -> None:
        if getattr(self, "_ti_events", None) is not None:
            self._ti_events_done = True
            self._ti_events_changed.set()

    async def progress(self):
        events = getattr(self, "_ti_events", None)
        if events is None:
            return
        sent = 0
        while True:
            changed = self._ti_events_changed
            while sent < len(events):
                sent += 1
                yield events[sent - 1]
            if self._ti_events_done:
                return
            await changed.wait()
            if changed is self._ti_events_changed:  # the first listener to wake arms it for the next event
                self._ti_events_changed = asyncio.Event()

    # -- admission ------------------------------------------------------------------------------------------

    async def admit(self) -> dict[str, Any]:
        """Ask for admission and wait in the queue (with progress messages) until placed."""
        problem = form.name_problem(self.ti_name)
        if problem:
            raise refusal(400, problem)
        groups = [g.name for g in self.user.groups]
        options = dict(self.user_options or {})
        if options.get("jupyter") is False and not self.runs_without_jupyter:
            raise refusal(400, "jupyter: this spawner cannot start a workspace without Jupyter (SSH only); "
                                 "start it with Jupyter (SSH reaches it too)")
        self._emit(5, "Asking TiHub for admission (validation, quota, mount rules)")
        try:
            ws = await self._call("POST", ws_path(self.user.name, self.ti_name),
                                  {"groups": groups, "options": options, "scopes": self.owner_scopes(),
                                   "wait": min(FIRST_WAIT, self.admission_wait)}, timeout=FIRST_WAIT + 30)
        except TiServiceError as e:
            field = f" (field: {e.field})" if e.field else ""
            raise refusal(e.status if 400 <= e.status < 500 else 500, f"{e.detail}{field}") from None
        for w in ws.get("warnings", []):
            self._emit(8, messages.warning(w))
        last, started = None, time.monotonic()
        while True:
            status = ws["status"]
            if status == "scheduling":
                self._emit(40, messages.admitted(ws["reason"]))
                return ws
            if status != "queued":
                raise web.HTTPError(500, f"workspace {self.ti_name} could not start: {status}: {ws['reason']}")
            msg = messages.queued(ws)
            if msg != last:
                waited = int(time.monotonic() - started)
                self._emit(10 + min(25, waited // 10), msg)
                last = msg
            # answered once admitted, or after admission_wait seconds with the queue as it then stands
            ws = await self._call("GET", ws_path(self.user.name, self.ti_name, f"?wait={self.admission_wait}"),
                                  timeout=self.admission_wait + 30)

    def ti_env(self, ws: dict[str, Any]) -> dict[str, str]:
        devices = [d for inst in (ws.get("placement") or {}).get("instances", []) for d in inst["devices"]]
        env = dict(ws.get("env") or {})
        if isinstance(self, LocalProcessSpawner):
            # the workspace runs this very installation: its IPython kernels load the notebook magics
            # (ti_hub/magics/autoload.py); a PYTHONSTARTUP of the user's own wins
            env.setdefault("PYTHONSTARTUP", AUTOLOAD_FILE)
        # STO8: where the owner's work and archive directories are mounted
        env.update({personal.ENV[mnt["kind"]]: mnt["mount_path"] for mnt in ws.get("mounts", [])
                    if mnt["kind"] in personal.KINDS})
        env.update({
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, devices)),
            "TI_API_URL": self.ti_public_api_url or self.ti_api_url,
            "TI_WORKSPACE": self.ti_name,
            "TI_JOB_ID": str(ws["id"]),
        })
        return env

    async def start(self):
        self._progress_init()
        starting = _STARTING.set(self)
        try:
            ws = await self.admit()
            self._emit(60, "Starting the workspace")
            try:
                url = await self.launch(ws)
            except Exception as e:
                await self._report_stop(f"could not start: {e}")
                raise
            await self._call("POST", ws_path(self.user.name, self.ti_name, "/running"),
                             {"state": self.ti_state()})
            self._emit(90, "Workspace started; waiting for Jupyter to answer" if ws.get("jupyter", True) is not False
                       else "Workspace started (SSH only); waiting for it to answer")
            try:
                # the start fails at once when the server ends, with its exit code and log (not after the hub's
                # http_timeout with a generic timeout)
                await self.until_answering(url)
            except StartFailed as e:
                await self._report_stop(f"could not start: {e.what}")
                raise refusal(500, e.text, e.html) from None
            return url
        except asyncio.CancelledError:
            await self._report_stop("start cancelled")
            raise
        except web.HTTPError:
            await self._report_stop("start refused")
            raise
        finally:
            _STARTING.reset(starting)
            self._progress_end()

    async def _report_stop(self, reason: str) -> None:
        try:
            await self._call("POST", ws_path(self.user.name, self.ti_name, "/stop"), {"reason": reason})
        except Exception:
            self.log.warning("could not tell TiHub that %s/%s stopped", self.user.name, self.ti_name, exc_info=True)

    async def stop(self, now: bool = False):
        # KubeSpawner stops a pod of the workspace's name that it finds in its way while it starts (its create
        # timed out under a loaded API server but went through) and creates it again: part of this start, not the
        # workspace stopping (TiHub would release it, and the start then fail). It calls stop() from tasks the
        # start made, which inherit the start's context; the hub's own stops come from elsewhere.
        within_start = _STARTING.get() is self
        try:
            await super().stop(now=now)
        finally:
            if not within_start:
                await self._report_stop("stopped")

    # -- what a concrete spawner provides ------------------------------------------------------------------------
    async def launch(self, ws: dict[str, Any]):
        raise NotImplementedError

    async def until_answering(self, url) -> None:
        """Return once the server at ``url`` (what ``launch`` returned) answers HTTP; raise StartFailed when it
        ends first. By default the hub's own wait (Spawner.http_timeout) is left to notice."""

    def ti_state(self) -> dict[str, Any]:
        return {}
