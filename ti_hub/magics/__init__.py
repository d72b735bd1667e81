"""Notebook magics for TiHub (SPEC DEV2): submit and watch training jobs from a notebook.

    %load_ext ti_hub.magics      # automatic in TiHub workspaces (see autoload.py)

    %%ti_submit --name mnist --plan demo-gpu-1 --image pytorch-gpu
    python3 /home/me/train.py --epochs 3

    %ti_jobs [--all] [--json]    %ti_logs JOB [-f]    %ti_kill JOB    %ti_queue    %ti_quota
    %ti_monitor JOB              %ti_form             %ti_tensorboard JOB --logdir /mnt/out/tb
    %ti_vc [NAME]                # show (or choose) my current virtual cluster
    %ti_renew                    # renew this workspace's lease (the idle policy)

In a workspace, a line also appears when the idle policy warns that this workspace's devices sit idle
(leasewatch.py).
    %ti ANY TI COMMAND

They use the `ti` CLI's client and settings (TI_API_URL and the workspace's JUPYTERHUB_API_TOKEN).
This module stays light: IPython and ipywidgets are imported only when the extension is loaded or a
widget is made.
"""

from __future__ import annotations

import os

# the file a workspace's kernels run at start (PYTHONSTARTUP, set by the spawner): it loads this extension
AUTOLOAD_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autoload.py")


def autoload_env() -> dict[str, str]:
    """The environment entry that makes IPython kernels load the magics by themselves."""
    return {"PYTHONSTARTUP": AUTOLOAD_FILE}


_lease_watch = None  # one per kernel, however often the extension is loaded


def load_ipython_extension(ipython) -> None:
    global _lease_watch
    from .magics import TiMagics

    ipython.register_magics(TiMagics)
    if _lease_watch is None:
        from .leasewatch import start_in_workspace

        _lease_watch = start_in_workspace()  # the idle policy's warning about this workspace, as a line


def unload_ipython_extension(ipython) -> None:
    from .magics import TiMagics

    for kind, names in TiMagics.magics.items():
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)
