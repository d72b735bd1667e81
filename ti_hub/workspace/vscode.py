"""VS Code in the browser inside a workspace: code-server behind jupyter-server-proxy (WS3).

Registered as jupyter-server-proxy's ``vscode`` server (setup.cfg's ``jupyter_serverproxy_servers`` entry point),
so a workspace's Jupyter serves it at ``/user/OWNER/WORKSPACE/vscode/`` and JupyterLab's launcher shows it. Only
where the workspace names a code-server in ``TI_CODE_SERVER`` (the embedded platform sets it from
``TiLocalSpawner.code_server``; the chart's workspace image sets it in its environment): elsewhere there is no
launcher card and the address says how to get one.

code-server runs without its own password (``--auth none``) because nothing but the owner's Jupyter server can
reach it: it listens on a Unix socket of mode 0600 that jupyter-server-proxy makes, owned by the workspace's user,
in the workspace's own /tmp, and Jupyter admits only the owner (the hub's OAuth) before proxying.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "TI_CODE_SERVER"
HERE = os.path.dirname(os.path.abspath(__file__))
NOT_INSTALLED = ("VS Code (code-server) is not available in this workspace: an admin installs code-server "
                 "(scripts/install-code-server.sh) and names it in TiLocalSpawner.code_server, or uses a workspace "
                 "image that has it (the chart's workspace image does)")


def executable() -> str:
    """The code-server this workspace was given, or "" when none is there to run."""
    exe = os.environ.get(ENV, "")
    return exe if exe and os.access(exe, os.X_OK) else ""


def command(unix_socket: str) -> list[str]:
    """code-server's argv (jupyter-server-proxy calls it with the socket it made; the names are its API)."""
    exe = executable()
    if not exe:
        raise FileNotFoundError(NOT_INSTALLED)
    folder = os.environ.get("CODE_WORKINGDIR") or os.path.expanduser("~")
    return [exe, "--auth", "none", "--disable-telemetry", "--disable-update-check",
            "--socket", unix_socket, "--socket-mode", "0600", folder]


def setup() -> dict[str, Any]:
    return {
        "command": command,
        "unix_socket": True,
        # code-server's first start unpacks its extensions: give it time before the proxy gives up
        "timeout": 120,
        "new_browser_tab": True,
        "launcher_entry": {"enabled": bool(executable()), "title": "VS Code",
                           "icon_path": os.path.join(HERE, "vscode.svg")},
    }
