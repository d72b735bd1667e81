"""The notebook's line about an idle workspace (SPEC WS6): while the idle policy's warning about THIS workspace
stands, a line in the notebook says since when its devices sit idle, when it will be stopped, and how to renew.

A daemon thread of the kernel asks GET /alerts every ``interval`` seconds (one small request; none at all outside
a TiHub workspace) and prints each new warning once; IPython shows a thread's output under the cell that ran
last, so an owner who comes back to the notebook sees it there. The choice of line is pure (``notices``).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

INTERVAL = 60.0  # seconds between two looks; the idle policy's grace is minutes, so a minute late is fine


def notices(alerts: Iterable[Mapping[str, Any]], owner: str, workspace: str, seen: set[int]) -> list[str]:
    """Lines for the open idle warnings about ``owner``'s ``workspace`` not shown yet (their ids join ``seen``)."""
    out = []
    for a in alerts:
        f = a.get("figures") or {}
        if (a.get("kind"), a.get("rule")) != ("workspace", "idle") or not a.get("open", True):
            continue
        if f.get("owner") != owner or f.get("workspace") != workspace or a.get("id") in seen:
            continue
        seen.add(a.get("id"))
        mean = f.get("mean_utilization")
        out.append(f"TiHub: this workspace's devices have been idle since {f.get('idle_since', '?')} (mean "
                   f"utilization {mean if mean is not None else '?'} %); it will be stopped at "
                   f"{f.get('reclaim_at', '?')} to give them back unless you renew its lease: %ti_renew")
    return out


class LeaseWatch:
    """The thread: ``fetch()`` returns the alerts page (GET /alerts), ``say`` prints a line."""

    def __init__(self, fetch: Callable[[], Mapping[str, Any]], owner: str, workspace: str,
                 say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
                 interval: float = INTERVAL):
        self.fetch, self.owner, self.workspace, self.say = fetch, owner, workspace, say
        self.interval = interval
        self.seen: set[int] = set()
        self.stopped = threading.Event()

    def check(self) -> list[str]:
        try:
            page = self.fetch() or {}
        except Exception:  # noqa: BLE001 - the hub restarting, an older ti service: say nothing, look again later
            return []
        lines = notices(page.get("items") or [], self.owner, self.workspace, self.seen)
        for line in lines:
            self.say(line)
        return lines

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.check()

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.run, name="ti-lease-watch", daemon=True)
        t.start()
        return t


def start_in_workspace(env: Mapping[str, str] = os.environ) -> LeaseWatch | None:
    """Start watching when this kernel runs in a TiHub workspace with the API at hand; None elsewhere."""
    owner, url = env.get("JUPYTERHUB_USER"), env.get("TI_API_URL")
    if not owner or not url or env.get("TI_LEASE_WATCH", "1") == "0":
        return None
    from ..cli.config import make_client
    from ..cli.workspaces import DEFAULT_NAME

    try:
        client = make_client(None)
    except Exception:  # noqa: BLE001 - no token: no watch
        return None
    workspace = env.get("JUPYTERHUB_SERVER_NAME") or DEFAULT_NAME
    watch = LeaseWatch(lambda: client.get("/alerts", params={"limit": 100}), owner, workspace,
                       interval=float(env.get("TI_LEASE_WATCH_INTERVAL", INTERVAL)))
    watch.start()
    return watch
