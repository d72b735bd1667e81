"""Runs JupyterHub for `ti-hub start`, with changes that make start-up faster and crashes harmless.

Start-up:
* `rfc3987_syntax` (an optional IRI checker of jsonschema, pulled in through jupyter_events) builds a
  grammar at import: 1.2-1.4 s of the hub's ~2.6 s import here (docs/benchmarks.md). jsonschema treats a
  missing module as "no such format checker"; nothing in the hub validates IRIs.
* The hub polls a starting server (the proxy, the ti service, workspaces) with an exponential back-off of
  0.2 s doubling to 5 s, jittered: the ti service answered ~1 s after its spawn and the hub noticed up to
  3 s later, which alone decided whether a cold start took 3 or 6 s. Here it polls at most every 0.25 s
  (a local connection attempt costs next to nothing).

Crashes and shutdown (docs/architecture.md "Crashes"):
* The proxy and the managed services (the ti service, ti-ssh) get SIGTERM when the hub dies, however it
  dies (PR_SET_PDEATHSIG, ti_hub/plumbing/children.py): orphans would hold the ports and the ti service's instance
  lock, and the next hub would restart its own services in a loop. Each managed service's pid and start time
  is kept in DATA/service-NAME.pid, so that the next `ti-hub start` stops one that could not die
  (ti_hub/plumbing/lastrun.py).
* A managed service that dies is noticed at once (a pidfd on the event loop), not at JupyterHub's next poll
  of it (every 30 s, with the API answering the hub's 503 page meanwhile), and restarted at once; one that
  keeps dying right after its start is retried once at once, then after 1 s, 2 s, ... up to 30 s.
* A new server whose name cannot name a workspace is refused before the hub stores it (ti_hub/spawner/names.py).
* On shutdown the workspaces are stopped before the managed services (JupyterHub stops services first): a
  workspace's spawner reports its stop to the ti service, which must still run to record it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from jupyterhub import proxy as _proxy  # noqa: E402
from jupyterhub import utils  # noqa: E402
from jupyterhub.app import JupyterHub, main  # noqa: E402
from jupyterhub.services import service as _service  # noqa: E402

from ..plumbing import pidfile  # noqa: E402
from ..plumbing.lastrun import SERVICE_PREFIX  # noqa: E402
from ..plumbing import children  # noqa: E402
from ..spawner import client, names  # noqa: E402

_backoff = utils.exponential_backoff


async def _quick_backoff(pass_func, fail_message, start_wait=0.2, scale_factor=2, max_wait=5, timeout=10,
                         timeout_tolerance=0.1, *args, **kwargs):
    return await _backoff(pass_func, fail_message, min(start_wait, 0.05), scale_factor, min(max_wait, 0.25),
                          timeout, timeout_tolerance, *args, **kwargs)


# only utils' own wait_for_server / wait_for_http_server look the name up here at call time
utils.exponential_backoff = _quick_backoff


def _proxy_popen(*args, **kwargs) -> subprocess.Popen:
    kwargs.setdefault("preexec_fn", children.die_with_parent_preexec(signal.SIGTERM))
    return subprocess.Popen(*args, **kwargs)


# jupyterhub.proxy starts only the proxy with its module-level Popen
_proxy.Popen = _proxy_popen

# service name -> its deaths in a row soon after its start (a restarted service gets a new spawner)
_quick_deaths: dict[str, int] = {}


class TiServiceSpawner(_service._ServiceSpawner):
    """JupyterHub's spawner of managed services, whose children die with the hub and whose death is seen."""

    _ti_started = 0.0
    _ti_record: pidfile.Record | None = None
    _ti_unwatch = None
    _ti_timer: asyncio.TimerHandle | None = None

    def make_preexec_fn(self, name):
        return children.die_with_parent_preexec(signal.SIGTERM, then=super().make_preexec_fn(name))

    def _pid_path(self) -> Path | None:
        data = os.environ.get("TI_HUB_DATA_DIR")  # set by `ti-hub start`
        return Path(data) / f"{SERVICE_PREFIX}{self._service_name}.pid" if data else None

    def start(self):
        super().start()
        self._ti_started = time.monotonic()
        path = self._pid_path()
        if path is not None:
            try:
                self._ti_record = pidfile.write(path, self.pid)
            except OSError as e:
                self.log.warning("could not write %s: %s", path, e)

    def start_polling(self):
        super().start_polling()
        if self.proc is not None:
            self._ti_unwatch = children.watch_exit(self.proc.pid, self._ti_exited)

    def _ti_exited(self) -> None:
        self._ti_unwatch = None
        name = self._service_name
        delay, _quick_deaths[name] = children.restart_delay(time.monotonic() - self._ti_started,
                                                            _quick_deaths.get(name, 0))
        if delay:
            self.log.warning("Service %s exited %.1f s after its start; restarting it in %.0f s", name,
                             time.monotonic() - self._ti_started, delay)
        super().stop_polling()  # JupyterHub's own poll would restart it without the delay
        # poll_and_notify reaps the process and calls Service._proc_stopped, which starts a new one
        self._ti_timer = asyncio.get_running_loop().call_later(
            delay, lambda: asyncio.ensure_future(self.poll_and_notify()))

    def stop_polling(self):
        if self._ti_unwatch is not None:
            self._ti_unwatch()
            self._ti_unwatch = None
        if self._ti_timer is not None:
            self._ti_timer.cancel()
            self._ti_timer = None
        super().stop_polling()

    async def stop(self, now=False):
        await super().stop(now=now)
        path = self._pid_path()
        if path is not None:
            pidfile.remove_if(path, self._ti_record)


# Service.start looks the class up here each time it starts (or restarts) a managed service
_service._ServiceSpawner = TiServiceSpawner


_cleanup = JupyterHub.cleanup


async def _cleanup_workspaces_first(self: JupyterHub) -> None:
    """JupyterHub.cleanup stops the managed services, then the workspaces: stop the workspaces first."""
    if self.cleanup_servers:
        stops = {spawner._log_name: user.stop(name) for user in self.users.values()
                 for name, spawner in list(user.spawners.items()) if spawner.active}
        if stops:
            self.log.info("Stopping %i workspace(s) before the services, which record their stop", len(stops))
            results = await asyncio.gather(*stops.values(), return_exceptions=True)
            for name, result in zip(stops, results):
                if isinstance(result, BaseException):
                    self.log.error("Failed to stop %s: %s", name, result)
    await _cleanup(self)  # the services, then the proxy; no workspace is active any more
    await client.close_sessions()  # the spawners' and the alerts banner's connections to the ti service


async def _cleanup_once(self: JupyterHub) -> None:
    """Ctrl-C reaches the hub twice (from the terminal, and forwarded by `ti-hub start`): two cleanups at once
    would each stop the services, one of them while the other still waits for the workspaces."""
    task = getattr(self, "_ti_cleanup", None)
    if task is None or task.get_loop() is not asyncio.get_running_loop():
        task = self._ti_cleanup = asyncio.ensure_future(_cleanup_workspaces_first(self))
    await asyncio.shield(task)


# patched, not subclassed: the hub's log lines keep their "JupyterHub" name (the logger is the class's name)
JupyterHub.cleanup = _cleanup_once
# a new server's name is checked against the workspace name rule before the hub stores the server
names.install()

if __name__ == "__main__":
    main()
