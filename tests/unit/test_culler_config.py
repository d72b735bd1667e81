"""The activity culler's hub configuration (hub.config.configure_culler): off by default, on with its own role."""

from __future__ import annotations

import sys

from traitlets.config import Config

from ti_hub.hub.config import CULLER_SERVICE, configure, configure_culler


def names(c: Config) -> list[str]:
    return [s["name"] for s in c.JupyterHub.services]


def test_off_by_default_and_on_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("TI_HUB_CULL_IDLE_TIMEOUT", raising=False)
    c = Config()
    configure(c, tmp_path)
    assert CULLER_SERVICE not in names(c) and CULLER_SERVICE not in [r["name"] for r in c.JupyterHub.load_roles]

    monkeypatch.setenv("TI_HUB_CULL_IDLE_TIMEOUT", "3600")
    c = Config()
    configure(c, tmp_path)
    (svc,) = [s for s in c.JupyterHub.services if s["name"] == CULLER_SERVICE]
    assert svc["command"] == [sys.executable, "-m", "jupyterhub_idle_culler", "--timeout=3600", "--cull-every=1800"]
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == CULLER_SERVICE]
    # what its README asks for, and no more: it stops servers, never deletes users
    assert role["scopes"] == ["list:users", "read:users:activity", "read:servers", "delete:servers"]
    assert role["services"] == [CULLER_SERVICE]


def test_configure_culler_replaces_or_removes_it(tmp_path, monkeypatch):
    monkeypatch.delenv("TI_HUB_CULL_IDLE_TIMEOUT", raising=False)
    c = Config()
    configure(c, tmp_path)
    configure_culler(c, 600, 60, ("--max-age=86400",))
    configure_culler(c, 900, 0, ("--max-age=86400",))
    (svc,) = [s for s in c.JupyterHub.services if s["name"] == CULLER_SERVICE]
    assert svc["command"][-3:] == ["--timeout=900", "--cull-every=450", "--max-age=86400"]
    assert [r["name"] for r in c.JupyterHub.load_roles].count(CULLER_SERVICE) == 1
    configure_culler(c, 0)
    assert CULLER_SERVICE not in names(c) and "ti" in names(c)
    assert CULLER_SERVICE not in [r["name"] for r in c.JupyterHub.load_roles]
