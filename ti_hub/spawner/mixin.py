"""TiSpawnerMixin: every workspace start goes through TiHub's admission (validation, quota, mounts, queue).

The same mixin serves the local spawner and the Kubernetes spawner; only ``launch`` differs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import quote, urlencode

from jupyterhub.spawner import LocalProcessSpawner
from tornado import web
from traitlets import Float, Unicode, default
from traitlets.config import Configurable

from .. import scopes as S
from ..domain.errors import ValidationError
from ..magics import AUTOLOAD_FILE
from ..storage import personal
from . import form
from .client import DEFAULT_NAME, TiServiceError, call, ws_path


def refusal(status: int, text: str) -> web.HTTPError:
    """An HTTPError the hub's pages show as ``text`` alone (not "HTTP 400: Bad Request (text)")."""
    err = web.HTTPError(status, text)
    err.jupyterhub_message = text
    return err


class TiSpawnerMixin(Configurable):
    ti_api_url = Unicode("", config=True, help="Internal URL of the ti service API (hub to service).")
    ti_public_api_url = Unicode("", config=True, help="URL of the ti service API as workspaces reach it (TI_API_URL).")
    ti_api_token = Unicode("", config=True, help="Token of the hub's 'ti-spawner' service identity.")
    admission_poll_interval = Float(0.5, config=True,
                                    help="Most seconds between admission checks while queued (the first checks "
                                         "come sooner: an idle cluster admits within a scheduler cycle).")

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

    def _call(self, method: str, path: str, body: Any = None):
        return call(self.ti_api_url, self.ti_api_token, method, path, body)

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

    # -- admission ------------------------------------------------------------------------------------------
    def _progress_init(self) -> None:
        self._ti_events: asyncio.Queue = asyncio.Queue()

    def _emit(self, progress: int, message: str) -> None:
        if getattr(self, "_ti_events", None) is not None:
            self._ti_events.put_nowait({"progress": progress, "message": message})

    async def progress(self):
        if getattr(self, "_ti_events", None) is None:
            return
        while True:
            ev = await self._ti_events.get()
            if ev is None:
                return
            yield ev

    async def admit(self) -> dict[str, Any]:
        """Ask for admission and wait in the queue (with progress messages) until placed."""
        problem = form.name_problem(self.ti_name)
        if problem:
            raise refusal(400, problem)
        groups = [g.name for g in self.user.groups]
        options = dict(self.user_options or {})
        if options.get("jupyter") is False and not self.runs_without_jupyter:
            raise refusal(400, "jupyter: a workspace without Jupyter (SSH only) runs on the embedded platform "
                                 "only; here every workspace runs Jupyter (SSH reaches it too)")
        self._emit(5, "asking TiHub for admission (validation, quota, mount rules)")
        try:
            ws = await self._call("POST", ws_path(self.user.name, self.ti_name),
                                  {"groups": groups, "options": options, "scopes": self.owner_scopes()})
        except TiServiceError as e:
            field = f" (field: {e.field})" if e.field else ""
            raise refusal(e.status if 400 <= e.status < 500 else 500, f"{e.detail}{field}") from None
        for w in ws.get("warnings", []):
            self._emit(8, f"warning: {w}")
        last, started = None, time.monotonic()
        interval = min(0.05, self.admission_poll_interval)
        while True:
            ws = await self._call("GET", ws_path(self.user.name, self.ti_name))
            status = ws["status"]
            if status == "scheduling":
                self._emit(40, f"admitted: {ws['reason']}")
                return ws
            if status != "queued":
                raise web.HTTPError(500, f"workspace {self.ti_name} could not start: {status}: {ws['reason']}")
            q = ws.get("queue") or {}
            msg = f"queued (position {q.get('position', '?')} in {q.get('queue', '?')}): {ws['reason']}"
            if msg != last:
                waited = int(time.monotonic() - started)
                self._emit(10 + min(25, waited // 10), msg)
                last = msg
            await asyncio.sleep(interval)
            interval = min(interval * 2, self.admission_poll_interval)

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
        try:
            ws = await self.admit()
            self._emit(60, "starting the workspace")
            try:
                url = await self.launch(ws)
            except Exception as e:
                await self._report_stop(f"could not start: {e}")
                raise
            await self._call("POST", ws_path(self.user.name, self.ti_name, "/running"),
                             {"state": self.ti_state()})
            self._emit(90, "workspace process started; waiting for Jupyter to answer")
            return url
        except asyncio.CancelledError:
            await self._report_stop("start cancelled")
            raise
        except web.HTTPError:
            await self._report_stop("start refused")
            raise
        finally:
            self._ti_events.put_nowait(None)

    async def _report_stop(self, reason: str) -> None:
        try:
            await self._call("POST", ws_path(self.user.name, self.ti_name, "/stop"), {"reason": reason})
        except Exception:
            self.log.warning("could not tell TiHub that %s/%s stopped", self.user.name, self.ti_name, exc_info=True)

    async def stop(self, now: bool = False):
        try:
            await super().stop(now=now)
        finally:
            await self._report_stop("stopped")

    # -- what a concrete spawner provides ------------------------------------------------------------------------
    async def launch(self, ws: dict[str, Any]):
        raise NotImplementedError

    def ti_state(self) -> dict[str, Any]:
        return {}
