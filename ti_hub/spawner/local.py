"""TiLocalSpawner: workspaces as local processes on this machine (the embedded default).

Each user's workspaces share one home directory under ``root_dir``; volumes appear at their mount paths
through bubblewrap (read-only mounts enforced); ``local`` volumes are fresh scratch directories removed
when the workspace stops. All workspaces run as the hub's own OS user: see docs/security.md.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from jupyterhub.spawner import SimpleLocalProcessSpawner
from traitlets import Bool, Unicode, default

from ..backends.local import procs, sandbox
from .mixin import TiSpawnerMixin


class TiLocalSpawner(TiSpawnerMixin, SimpleLocalProcessSpawner):
    root_dir = Unicode("", config=True, help="Directory holding each user's home directory and scratch space.")
    use_bubblewrap = Bool(True, config=True,
                          help="Mount volumes with bubblewrap (needed for read-only mounts and mount paths).")

    @default("home_dir_template")
    def _home_template(self):
        return os.path.join(self.root_dir or "/tmp/ti-hub-workspaces", "home", "{username}")

    @default("options_form")
    def _default_options_form(self):
        return self._ti_options_form

    def get_args(self):
        args = super().get_args()
        if os.getuid() == 0:
            args.append("--allow-root")  # the embedded hub may run as root; jupyter-server refuses otherwise
        return args

    def get_env(self):
        env = super().get_env()
        env.update(getattr(self, "_ti_env", {}))
        return env

    def _scratch_dir(self) -> Path:
        return Path(self.root_dir or "/tmp/ti-hub-workspaces") / "scratch" / self.user.name / self.ti_name

    async def launch(self, ws: dict[str, Any]):
        self._ti_env = self.ti_env(ws)
        binds = []
        scratch = self._scratch_dir()
        for mnt in ws.get("mounts", []):
            if mnt["kind"] == "local":
                d = scratch / mnt["mount_path"].strip("/").replace("/", "_")
                d.mkdir(parents=True, exist_ok=True)
                binds.append(sandbox.Bind(str(d), mnt["mount_path"], False))
            else:
                binds.append(sandbox.Bind(mnt["source"], mnt["mount_path"], mnt["read_only"]))
        Path(self.home_dir).mkdir(parents=True, exist_ok=True)
        self._ti_sandbox: list[str] = []
        bwrap = sandbox.find_bwrap() if self.use_bubblewrap else None
        if binds or bwrap:
            if not bwrap:
                raise RuntimeError("volumes need bubblewrap, which is not available on this machine")
            argv = sandbox.bwrap_argv(bwrap, "exec", binds, entries=sandbox.root_entries(), cwd=self.home_dir,
                                      keep=[self.home_dir], shm_mib=int(ws.get("shm_mib") or 0))
            # LocalProcessSpawner appends the quoted server command as the last argument
            self.shell_cmd = argv[:-1]
            self._ti_sandbox = argv[:-3]  # bwrap ... -- (the SSH gateway runs its sessions in the same sandbox)
        return await SimpleLocalProcessSpawner.start(self)

    def ti_state(self) -> dict[str, Any]:
        """What the SSH gateway needs to open sessions in this workspace (ti_hub/ssh/places.py)."""
        return {"backend": "local", "pid": self.pid, "start_time": procs.start_time(self.pid),
                "sandbox": list(getattr(self, "_ti_sandbox", [])), "cwd": self.home_dir}

    async def stop(self, now: bool = False):
        try:
            await super().stop(now=now)
        finally:
            shutil.rmtree(self._scratch_dir(), ignore_errors=True)
