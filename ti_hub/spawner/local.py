"""TiLocalSpawner: workspaces as sandboxed local processes on this machine (the embedded default).

A workspace runs like a job instance (``ti_hub/backends/local``): a supervisor (``runner.py``) in its own
session starts ``jupyterhub-singleuser`` in the owner's sandbox as the owner's Unix uid, with the CPU and memory
TiHub admitted, and pumps its output into a log the platform keeps. The sandbox shows the owner's home at
``/home/<name>`` (kept under ``root_dir``), their work and archive directories at ``/mnt/<name>`` and
``/archives/<name>`` (kept by the volume driver), a private ``/tmp``, and the volumes at their mount paths
(read-only ones read-only; ``local`` volumes are fresh scratch directories removed when the workspace stops).
Stopping ends the whole sandbox (its own pid namespace), kernels and terminals included; the supervisor
outlives a restart of the hub, which finds it again from the spawner's state. See docs/security.md.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Bool, Float, Unicode, default

from ..backends.local import LocalBackend, jobdir, launcher, limits, logfiles, netns, procs, sandbox, userdirs
from ..backends.outcome import exit_reason
from ..domain import personal
from ..workspace import vscode
from . import messages
from .mixin import StartFailed, TiSpawnerMixin

_BACKEND: LocalBackend | None = None
SSH_ONLY = "ti_hub.spawner.sshonly"
# seconds between two looks at whether a starting workspace's supervisor has ended
EXIT_POLL = 0.2


class TiLocalSpawner(TiSpawnerMixin, LocalProcessSpawner):
    root_dir = Unicode("", config=True, help="Directory holding each user's home directory, the workspaces' "
                                             "scratch space and /tmp, and their supervisors' records.")
    use_bubblewrap = Bool(True, config=True,
                          help="Run workspaces in bubblewrap (a private view of the machine; needed for volumes).")
    stop_grace = Float(10.0, config=True, help="Seconds a stopping workspace gets between SIGTERM and SIGKILL.")
    disk_limit_gib = Float(20.0, config=True, help="Most GiB a workspace's /tmp and scratch volumes may hold; "
                                                   "past it the workspace is stopped. 0: no limit.")
    code_server = Unicode("", config=True,
                          help="A code-server executable for VS Code in the browser: workspaces with Jupyter then "
                               "show VS Code in JupyterLab's launcher, served at /user/NAME/WORKSPACE/vscode/ to "
                               "the owner only. Its install root (the folder above its bin/) is shown read-only "
                               "in workspaces. scripts/install-code-server.sh installs one and prints this path. "
                               "Empty: no VS Code.")

    runs_without_jupyter = True

    @default("cmd")
    def _default_cmd(self):
        # by module, not by the entry point's name: PATH may lead to a wrapper (pyenv's shims) the sandbox lacks;
        # TiHub's module runs jupyterhub.singleuser seconds faster (ti_hub/workspace/singleuser.py)
        return [sys.executable, "-m", "ti_hub.workspace.singleuser"]

    @default("options_form")
    def _default_options_form(self):
        return self._ti_options_form

    def make_preexec_fn(self, name):
        return None  # never used: the supervisor starts the workspace

    def user_env(self, env):
        return env

    def get_args(self):
        args = super().get_args()
        if os.getuid() == 0 and not launcher.privileged():
            args.append("--allow-root")
        return args

    # -- where things live --------------------------------------------------------------------------------------
    @property
    def _base(self) -> Path:
        return Path(self.root_dir or "/tmp/ti-hub-workspaces")

    def _home(self) -> Path:
        return self._base / "home" / self.user.name

    def _scratch_dir(self) -> Path:
        return self._base / "scratch" / self.user.name / self.ti_name

    def _tmp_dir(self) -> Path:
        return self._base / "tmp" / self.user.name / self.ti_name

    def _run_dir(self) -> Path:
        return self._base / "run" / self.user.name / self.ti_name

    def _code_server_root(self) -> tuple[str, ...]:
        """The folder to show for code_server: its install root (bin/'s parent), unless a system folder."""
        if not self.code_server:
            return ()
        root = os.path.dirname(os.path.dirname(os.path.realpath(self.code_server)))
        return () if root in ("/", "/usr", "/bin") else (root,)

    @staticmethod
    def _backend(parent) -> LocalBackend:
        global _BACKEND
        if _BACKEND is None:
            _BACKEND = LocalBackend(parent=parent, log=parent.log)
        return _BACKEND

    # -- start ------------------------------------------------------------------------------------------------
    async def launch(self, ws: dict[str, Any]):
        if self.port == 0:
            from jupyterhub.utils import random_port

            self.port = random_port()
        backend = self._backend(self)
        bwrap = await backend.bwrap() if self.use_bubblewrap else None
        backend.require_sandbox(bwrap)
        cgroups = backend.cgroups_usable()
        env = self.get_env()
        if "PATH" not in self.environment:  # the platform's, not the hub's (an admin's or the user's own wins)
            env["PATH"] = launcher.user_path()
        env.update(self.ti_env(ws))
        if self.code_server:
            env[vscode.ENV] = self.code_server
        # hidden from the log lines a failed start shows (kept in memory only)
        self._ti_secrets = messages.secret_values(env) + [t for t in (self.api_token,) if t]
        # an SSH-only workspace (jupyter: false) runs a one-page placeholder where the hub expects Jupyter
        argv = [*self.cmd, *self.get_args()] if ws.get("jupyter", True) else [sys.executable, "-m", SSH_ONLY]
        self._ti_record = await asyncio.to_thread(self._prepare_and_spawn, ws, bwrap, cgroups, env, argv)
        self.pid = self._ti_record["pid"]
        net = self._ti_record.get("net")
        if net:  # its own network: the hub and the proxy reach Jupyter through its portal's host port
            return ("127.0.0.1", await asyncio.to_thread(netns.host_port, net, self.port))
        return (self.ip or "127.0.0.1", self.port)

    async def until_answering(self, url) -> None:
        """Wait for Jupyter to answer where the hub will look (as the hub's own wait does), while watching the
        workspace's supervisor: when it ends first, the start fails at once with the exit code and the log."""
        from jupyterhub.utils import AnyTimeoutError, wait_for_http_server

        popen, server = getattr(self, "_ti_popen", None), getattr(self, "server", None)
        if popen is None or server is None:
            return
        ip, port = url
        answered = asyncio.ensure_future(wait_for_http_server(
            f"http://{ip}:{port}{server.base_url}api", timeout=self.http_timeout))
        try:
            while not answered.done() and popen.poll() is None:
                await asyncio.wait([answered], timeout=EXIT_POLL)
            if answered.done():
                try:
                    answered.result()
                    return
                except AnyTimeoutError:
                    raise await self._start_failure(
                        f"Jupyter did not answer within {self.http_timeout:g} s", None) from None
        finally:
            answered.cancel()
        raise await self._start_failure(None, popen.returncode)

    async def _start_failure(self, what: str | None, supervisor_code: int | None) -> StartFailed:
        """Why the start failed, with the last lines of the workspace's log (or of its supervisor's, when the
        workspace never ran)."""
        rec = getattr(self, "_ti_record", None) or {}
        status = await asyncio.to_thread(jobdir.read_json, rec.get("status")) or {}
        if what is None:
            how = status.get("reason") or exit_reason(status.get("exit_code", supervisor_code))
            what = f"The workspace's server ended before Jupyter answered: {how}"
        tail, _ = await asyncio.to_thread(logfiles.read_tail, rec.get("log") or "", messages.TAIL_LINES)
        if not tail.strip():
            tail, _ = await asyncio.to_thread(logfiles.read_tail, rec.get("supervisor_log") or "",
                                              messages.TAIL_LINES)
        text, html = messages.start_failure(what, tail, getattr(self, "_ti_secrets", ()))
        self.log.warning("%s/%s did not start: %s", self.user.name, self.ti_name, text)
        return StartFailed(what, text, html)

    @staticmethod
    def _platform_ports(env: dict[str, str]) -> list[tuple[int, int]]:
        """The platform's ports a workspace talks to (the hub's API, the ti service's), relayed from the same port
        inside its network to the host's: nothing else of the host is reachable from inside."""
        out = []
        for key in ("JUPYTERHUB_API_URL", "TI_API_URL"):
            url = urlsplit(env.get(key, ""))
            if url.hostname in ("127.0.0.1", "localhost") and url.port:
                out.append((url.port, url.port))
        return sorted(set(out))

    def _prepare_and_spawn(self, ws: dict[str, Any], bwrap: str | None, cgroups: bool, env: dict[str, str],
                           argv: list[str]) -> dict:
        home = str(self._home())
        ident = launcher.identity(self.user.name, ws.get("unix_uid"), sandbox.home_path(self.user.name)
                                  if bwrap else home)
        for d in (self._base, self._base / "home", self._base / "run", self._base / "scratch", self._base / "tmp"):
            userdirs.platform_dir(str(d))
        userdirs.ensure_dir(home, ident.uid, ident.gid, adopt=True)
        run, tmp, scratch = self._run_dir(), self._tmp_dir(), self._scratch_dir()
        for d in (run.parent, run, tmp.parent, scratch.parent):
            userdirs.platform_dir(str(d))
        shutil.rmtree(tmp, ignore_errors=True)  # a fresh /tmp at every start
        userdirs.ensure_dir(str(tmp), ident.uid, ident.gid)
        binds = [sandbox.Bind(home, ident.home, False)]
        local = False
        for mnt in ws.get("mounts", []):
            if mnt["kind"] in personal.KINDS:  # the owner's work and archive directories (STO8)
                userdirs.private_dir(mnt["source"], ident.uid, ident.gid)
                if bwrap:
                    binds.append(sandbox.Bind(mnt["source"], mnt["mount_path"], False))
                else:  # no sandbox to mount them in: the code reaches them where they are
                    env[personal.ENV[mnt["kind"]]] = mnt["source"]
            elif mnt["kind"] == "local":
                if not local:
                    userdirs.platform_dir(str(scratch))
                    local = True
                d = scratch / mnt["mount_path"].strip("/").replace("/", "_")
                userdirs.ensure_dir(str(d), ident.uid, ident.gid)
                binds.append(sandbox.Bind(str(d), mnt["mount_path"], False))
            else:
                binds.append(sandbox.Bind(mnt["source"], mnt["mount_path"], mnt["read_only"]))
        if len(binds) > 1 and not bwrap:
            raise RuntimeError("volumes need bubblewrap, which is not available on this machine")
        held = [d for inst in (ws.get("placement") or {}).get("instances", []) for d in inst["devices"]]
        nodes, env["CUDA_VISIBLE_DEVICES"] = self._backend(self).gpu_binding(held)
        box = launcher.plan(binds, tmp=str(tmp), shm_mib=int(ws.get("shm_mib") or 0), cwd=ident.home,
                            extra_read_only=(*self._backend(self).sandbox_read_only, *self._code_server_root()),
                            devices=nodes) if bwrap else None
        env.update(HOME=ident.home, USER=ident.name, LOGNAME=ident.name, SHELL="/bin/bash")
        paths = {"log": str(run / "workspace.log"), "status": str(run / "status.json"),
                 "child": str(run / "child.json"), "stop": str(run / "stop.json"),
                 "supervisor_log": str(run / "supervisor.log")}
        for stale in ("status", "child", "stop"):
            Path(paths[stale]).unlink(missing_ok=True)
        inst = ((ws.get("placement") or {}).get("instances") or [{}])[0]
        memory = int(inst.get("memory_mib") or ws.get("memory_mib_per_instance") or 0)
        cpu = float(inst.get("cpu") or ws.get("cpu_per_instance") or 0)
        backend = self._backend(self)
        cfg = launcher.config(
            ident=ident, argv=argv, env=env, cwd=ident.home if bwrap else home, box=box, bwrap=bwrap,
            python=backend.python, paths=paths, memory_mib=memory, poll_interval=backend.memory_poll_interval,
            kill_grace=self.stop_grace, log_bytes=int(backend.log_limit_mib) << 20,
            disk_bytes=int(self.disk_limit_gib * (1 << 30)), disk_paths=[str(tmp), str(scratch)],
            disk_poll=backend.disk_poll_interval, workspace=f"{self.user.name}/{self.ti_name}", index=0)
        if cgroups:
            # not job-<id>-0: workspace ids and job ids are counted apart, and the two cgroups must never be one
            cfg["cgroup"] = backend.instance_cgroup(f"workspace-{int(ws['id'])}", cpu, memory)
        elif cpu:
            available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
            cfg["cpus"] = limits.pick_cores(cpu, available, int(ws["id"]))
        net = None
        if bwrap and backend.own_network():
            net = netns.start(str(run / "net"), backend.python, [self.port], self._platform_ports(env),
                              outbound=backend.outbound())
            cfg["netns"] = net["netns"]
        config = str(run / "config.json")
        launcher.write_config(config, cfg)
        record = {"index": 0, "pid": None, "start_time": None, "uid": ident.uid, "gid": ident.gid,
                  "home": ident.home, "sandbox": "bubblewrap" if bwrap else "none", **paths,
                  **({"net": net} if net else {})}
        self._ti_popen = launcher.spawn(backend.python, config, str(run / "record.json"), record, str(run))
        return record

    # -- running ----------------------------------------------------------------------------------------------
    def ti_state(self) -> dict[str, Any]:
        """What the SSH gateway and the ti service need to find this workspace's sandbox (ti_hub/ssh/places.py)."""
        rec = getattr(self, "_ti_record", None) or {}
        return {"backend": "local", "pid": rec.get("pid"), "start_time": rec.get("start_time"),
                "child": rec.get("child"), "status": rec.get("status"), "uid": rec.get("uid"),
                "gid": rec.get("gid"), "cwd": rec.get("home"), "sandbox": rec.get("sandbox")}

    def get_state(self):
        state = super().get_state()
        if getattr(self, "_ti_record", None):
            state["ti_record"] = self._ti_record
        return state

    def load_state(self, state):
        super().load_state(state)
        if state.get("ti_record"):
            self._ti_record = state["ti_record"]

    def clear_state(self):
        super().clear_state()
        self._ti_record = None

    async def poll(self):
        rec = getattr(self, "_ti_record", None)
        popen = getattr(self, "_ti_popen", None)
        if popen is not None:
            popen.poll()  # collect the supervisor once it has ended: no zombie
        if not rec:
            # still waiting for admission: not dead. JupyterHub polls a start slower than slow_spawn_timeout, and
            # a 0 here made it answer the spawn request 500 while the workspace was only queued
            return None if self._spawn_pending else 0
        if procs.is_alive(rec.get("pid"), rec.get("start_time")):
            return None
        status = await asyncio.to_thread(jobdir.read_json, rec.get("status"))
        code = (status or {}).get("exit_code")
        self.clear_state()
        return code if isinstance(code, int) and code != 0 else 0

    async def stop(self, now: bool = False):
        rec = getattr(self, "_ti_record", None)
        try:
            if rec:
                # the supervisor sends SIGTERM to the workspace, then ends its whole sandbox
                await self._backend(self).stop(0, {"instances": [rec], "net": rec.get("net")},
                                               grace_seconds=0 if now else self.stop_grace)
            popen = getattr(self, "_ti_popen", None)
            if popen is not None:
                popen.poll()
            self.clear_state()
        finally:
            await asyncio.to_thread(shutil.rmtree, self._scratch_dir(), True)
            await self._report_stop("stopped")
