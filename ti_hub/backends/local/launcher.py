"""Starting a supervised, sandboxed process on this machine: shared by job instances (``LocalBackend``),
workspaces (``TiLocalSpawner``) and TensorBoards. Blocking helpers; callers run them in a thread.

The supervisor (``runner.py``) gets one JSON config, written into a directory only the platform can read:
what to run, as whom (``Identity``), in which sandbox (``sandbox.Plan``), with which limits. Nothing in it
comes from a file user code can write.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Sequence
from functools import lru_cache

import ti_hub

from . import procs, sandbox
from .runner import write_json_atomic

PKG_DIR = os.path.dirname(os.path.abspath(ti_hub.__file__))
PKG_PARENT = os.path.dirname(PKG_DIR)


def privileged() -> bool:
    """Can this process run user code as other uids (it is root)?"""
    return os.geteuid() == 0


def identity(name: str, uid: int | None, home: str) -> sandbox.Identity:
    """Whom a user's code runs as: their own uid (and a group of the same number) when the platform is root;
    the platform's own uid otherwise (it cannot switch)."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        # the name becomes a directory (their home): JupyterHub refuses such names too, this is a second lock
        raise RuntimeError(f"the user name {name!r} cannot name a directory")
    if privileged():
        if uid is None or uid <= 0:
            raise RuntimeError(f"no Unix uid was allocated for {name}: refusing to run their code as root")
        return sandbox.Identity(name, int(uid), int(uid), home)
    return sandbox.Identity(name, os.getuid(), os.getgid(), home)


@lru_cache(maxsize=8)
def read_only_paths(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Host paths shown read-only besides the system directories: the Python environment and TiHub's package
    (never the checkout around it), and what the admin added."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    sites = {p for p in sys.path if p and os.path.isdir(p) and os.path.basename(p) in ("site-packages",
                                                                                     "dist-packages")}
    found = sandbox.runtime_paths([*prefixes, *sites, *extra], [PKG_DIR], sandbox.root_entries())
    return tuple(p for p in found if os.path.exists(p))


@lru_cache(maxsize=1)
def bin_dirs() -> tuple[str, ...]:
    """Where this installation's ``python`` and ``ti`` are: the interpreter's directory as it was started (a
    virtual environment's ``bin``, not where its symlink leads) and its scheme's scripts directory."""
    import sysconfig

    out: list[str] = []
    for d in (os.path.dirname(os.path.abspath(sys.executable)), sysconfig.get_path("scripts")):
        if d and os.path.isdir(d) and d not in out:
            out.append(d)
    return tuple(out)


def user_path() -> str:
    """The PATH user code starts with (jobs, workspaces, TensorBoards): this installation's bin directories,
    then the system's. Never the service's own PATH: its entries (the platform account's tools, pyenv's shims)
    either do not exist in the sandbox or lead outside what the user was meant to run."""
    return sandbox.user_path(bin_dirs())


def plan(binds: Sequence[sandbox.Bind], *, tmp: str, shm_mib: int, cwd: str, extra_read_only: Sequence[str] = (),
         devices: Sequence[tuple[str, str]] = ()) -> sandbox.Plan:
    """``devices``: (host path, path inside) of the device nodes of the GPUs the work holds
    (``devices.binding``); no other device node of the machine is in the sandbox."""
    return sandbox.Plan(binds=tuple(binds), read_only=read_only_paths(tuple(extra_read_only)),
                        entries=sandbox.root_entries(), devices=tuple((str(a), str(b)) for a, b in devices),
                        tmp=tmp, shm_mib=int(shm_mib or 0), cwd=cwd, bin_dirs=bin_dirs())


def config(*, ident: sandbox.Identity, argv: Sequence[str], env: dict[str, str], cwd: str, box: sandbox.Plan | None,
           bwrap: str | None, python: str, paths: dict[str, str], memory_mib: int = 0, cgroup: dict | None = None,
           cpus: list[int] | None = None, poll_interval: float = 1.0, kill_grace: float = 10.0,
           log_bytes: int = 0, disk_bytes: int = 0, disk_paths: Sequence[str] = (), disk_poll: float = 5.0,
           **extra) -> dict:
    """The supervisor's config (``runner.py`` reads it)."""
    return {
        **extra,
        "log": paths["log"], "status": paths["status"], "child": paths["child"], "stop": paths["stop"],
        "memory_mib": int(memory_mib or 0), "poll_interval": poll_interval, "kill_grace": kill_grace,
        "cgroup": cgroup, "cpus": cpus, "wrapped": bool(bwrap and box is not None),
        "sandbox": {"bwrap": bwrap if box is not None else None, "privileged": privileged(), "python": python,
                    "plan": dataclasses.asdict(box) if box is not None else None},
        "identity": dataclasses.asdict(ident),
        "user": {"argv": list(argv), "env": dict(env), "cwd": cwd},
        "limits": {"log_bytes": int(log_bytes), "disk_bytes": int(disk_bytes), "disk_paths": list(disk_paths),
                   "disk_poll": disk_poll},
    }


def spawn(python: str, config_path: str, record_path: str, record: dict, cwd: str) -> subprocess.Popen:
    """Start one supervisor in its own session and record who it is (pid and start time)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "PYTHONPATH": os.pathsep.join(filter(None, [PKG_PARENT, os.environ.get("PYTHONPATH")]))}
    with open(record["supervisor_log"], "ab") as err:
        p = subprocess.Popen([python, "-m", "ti_hub.backends.local.runner", config_path],
                             stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=cwd, env=env,
                             start_new_session=True, close_fds=True)
    record["pid"], record["start_time"] = p.pid, procs.start_time(p.pid)
    write_json_atomic(record_path, record)
    return p


def write_config(path: str, cfg: dict) -> None:
    write_json_atomic(path, cfg)


NOBODY = 65534


def probe(bwrap: str, python: str, timeout: float = 30.0) -> str:
    """Run ``true`` the way user code runs (bubblewrap, then dropexec as nobody when root): '' when it works,
    else why not."""
    import json

    from .runner import memfd

    ident = identity("ti-probe", NOBODY, "/") if privileged() else identity("ti-probe", None, "/")
    box = plan([], tmp="", shm_mib=1, cwd="/", devices=())
    spec = memfd("ti-spec", json.dumps(sandbox.user_spec(ident, ["true"], {"PATH": "/usr/bin:/bin"}, "/")).encode())
    try:
        argv = sandbox.bwrap_argv(bwrap, box, privileged=privileged(), python=python, spec_fd=spec)
        r = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, env={},
                           pass_fds=[spec])
    except (OSError, subprocess.SubprocessError, sandbox.SandboxError) as e:
        return str(e)  # SandboxError: TiHub is installed where no sandbox can show it
    finally:
        os.close(spec)
    return "" if r.returncode == 0 else (r.stderr.decode(errors="replace").strip() or f"exit {r.returncode}")
