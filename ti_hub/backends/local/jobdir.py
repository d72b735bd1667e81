"""A job's directory on this machine and what launch prepares in it: paths, environment, mounts.

The platform's part, under ``<root_dir>/jobs/<job id>/`` (read and written by the platform only)::

    logs/instance-<i>.log      platform: stdout + stderr, pumped by the supervisor (kept by cleanup)
    status/instance-<i>.json   platform: written by the supervisor when the instance ends
    run/instance-<i>.json      platform: the supervisor's config; .pid: who the supervisor is; .child: its
                               command and sandbox; .stop: the grace period stop() asked for

The user's part, under ``<user_dir>/jobs/<job id>/`` (``LocalBackend.user_dir``, by default the same directory;
on a file system of its own, a job that fills it cannot stop the platform's own writes). User code sees these
only where its sandbox binds them::

    work/                      the instances' working directory (shared by all instances), kept
    tmp/instance-<i>/          the instance's /tmp (removed by cleanup)
    scratch/<path>             local-kind volumes, fresh at each launch (removed by cleanup)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence

from ...domain import personal
from . import limits, procs, sandbox, userdirs


def job_dir(root_dir: str, job_id: int) -> str:
    return os.path.join(os.path.abspath(root_dir), "jobs", str(int(job_id)))


def instance_paths(jd: str, index: int) -> dict[str, str]:
    run = os.path.join(jd, "run", f"instance-{index}")
    return {"log": os.path.join(jd, "logs", f"instance-{index}.log"),
            "status": os.path.join(jd, "status", f"instance-{index}.json"),
            "config": run + ".json", "record": run + ".pid", "child": run + ".child", "stop": run + ".stop",
            "supervisor_log": run + ".supervisor.log"}


def read_json(path: str | None) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, TypeError):
        return None


ACCOUNT_ENV = ("HOME", "USER", "LOGNAME")


def job_env(inherit: Sequence[str], extra_env: Mapping[str, str], spec_env: Mapping[str, str],
            instance_env: Mapping[str, str], devices: Sequence[int], job_id: int,
            environ: Mapping[str, str] = os.environ, *, home: str = "", user: str = "", path: str = ""
            ) -> dict[str, str]:
    """A minimal base (``path``: the platform's PATH; ``inherit`` from the service, so none of its secrets; the
    owner's home and name, not the service's), the admin's extra environment, the job's, the instance's, then
    what the platform decides and nobody overrides."""
    env = {"PATH": path} if path else {}
    env.update({k: environ[k] for k in inherit if k in environ and not (k in ACCOUNT_ENV and user)})
    if user:
        env.update(HOME=home, USER=user, LOGNAME=user)
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONUNBUFFERED"] = "1"  # logs arrive as they are printed
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA numbers GPUs as NVML does, so the indices agree
    env.update(extra_env)
    env.update(spec_env)
    env.update(instance_env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in devices)  # empty: no GPU
    env["TI_JOB_ID"] = str(job_id)
    return env


JUPYTER_TOKEN_ENV = "TI_JUPYTER_TOKEN"
# the jupyter endpoint (JOB2): $1 the user's command, $2 the fd of the server's log. The token goes by the
# environment (a command line is readable by every user of the machine); the server is started in the background
# in the command's process group, so stopping the job ends both; without jupyter the command still runs.
JUPYTER_WRAP = """\
if command -v jupyter >/dev/null 2>&1; then
  JUPYTER_TOKEN="$TI_JUPYTER_TOKEN" jupyter server --no-browser --ip=127.0.0.1 --port={port} \\
    --ServerApp.base_url={base_url} --ServerApp.root_dir={root_dir} \\
    --ServerApp.port_retries=0 --ServerApp.allow_root=True >&{fd} 2>&1 {fd}>&- </dev/null &
else
  echo "[ti] jupyter endpoint: no jupyter command in this job's environment (install jupyter_server in its \
image); the endpoint answers 502" >&2
fi
exec {fd}>&-
unset TI_JUPYTER_TOKEN
exec {shell} -c "$1"
"""


def jupyter_argv(shell: str, command: str, port: int, base_url: str, root_dir: str, fd: int) -> list[str]:
    """The argv that starts the jupyter endpoint's server and then ``exec``s the user's command. ``fd``: the
    server's log, opened by the supervisor (a single digit: POSIX sh redirects no others)."""
    if not 0 <= fd <= 9:
        raise ValueError(f"the jupyter log's fd must be 0-9, not {fd}")
    script = JUPYTER_WRAP.format(port=int(port), base_url=shlex.quote(base_url), root_dir=shlex.quote(root_dir),
                                 fd=fd, shell=shell)
    return [shell, "-c", script, "ti-jupyter", command]


def tmp_dir(ud: str, index: int) -> str:
    return os.path.join(ud, "tmp", f"instance-{index}")


def reset(jd: str, ud: str, uid: int, gid: int, instances: int) -> None:
    """Directories for a (re)launch; a relaunch must not read the previous attempt's results."""
    for d in {os.path.dirname(jd), jd, os.path.dirname(ud), ud}:
        userdirs.platform_dir(d)
    for sub in ("status", "run"):
        shutil.rmtree(os.path.join(jd, sub), ignore_errors=True)
    shutil.rmtree(os.path.join(ud, "tmp"), ignore_errors=True)
    for sub in ("logs", "status", "run"):
        userdirs.platform_dir(os.path.join(jd, sub))
    userdirs.platform_dir(os.path.join(ud, "tmp"))
    userdirs.ensure_dir(os.path.join(ud, "work"), uid, gid)
    for i in range(instances):
        userdirs.ensure_dir(tmp_dir(ud, i), uid, gid)


def prepare_mounts(ud: str, mounts, scratch_paths: Sequence[str], uid: int, gid: int, bwrap: str | None
                   ) -> tuple[list[sandbox.Bind], list[str], list[str]]:
    """Blocking: (binds, scratch dirs, symlinks made) for the job's mounts. Without bubblewrap, read-write
    mounts become symlinks in the work directory and read-only ones are refused."""
    work = os.path.join(ud, "work")
    binds = []
    for m in mounts:
        if m.kind in personal.KINDS:  # the owner's own, at a fixed path (domain/personal.py)
            userdirs.private_dir(m.source, uid, gid)
            binds.append(sandbox.Bind(m.source, m.mount_path, False))
            continue
        if sandbox.mount_root(m.mount_path) is None:
            raise sandbox.SandboxError(f"mount path {m.mount_path} is not under {', '.join(sandbox.MOUNT_ROOTS)}")
        if not os.path.isdir(m.source):
            raise sandbox.SandboxError(f"{m.kind} volume source {m.source} does not exist on this machine")
        binds.append(sandbox.Bind(m.source, m.mount_path, m.read_only))
    scratch = []
    userdirs.platform_dir(os.path.join(ud, "scratch"))
    for path in scratch_paths:
        d = os.path.join(ud, "scratch", path.strip("/").replace("/", "_") or "scratch")
        shutil.rmtree(d, ignore_errors=True)  # fresh every launch
        userdirs.ensure_dir(d, uid, gid)
        scratch.append(d)
        binds.append(sandbox.Bind(d, path, False))
    if bwrap:
        return binds, scratch, []
    links = []
    for link, target in sandbox.symlink_plan(binds, work):  # raises for read-only mounts
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
        links.append(link)
    return [], scratch, links


def remove_scratch(state: Mapping) -> None:
    """Blocking: scratch directories, every instance's /tmp and mount symlinks go; the work directory, logs and
    status files stay."""
    for link in state.get("links", []):
        if os.path.islink(link):
            os.unlink(link)  # the link only, never what it points to
    for d in [*state.get("scratch", []), *state.get("tmp", [])]:
        shutil.rmtree(d, ignore_errors=True)  # rmtree works through file descriptors: links are never followed


def remove_leftover_cgroups(state: Mapping) -> None:
    """Blocking: the cgroups of instances whose supervisor died before removing them (killed, crashed), and what
    is left in them."""
    for rec in state.get("instances", []):
        if not state.get("job_dir") or procs.is_alive(rec.get("pid"), rec.get("start_time")):
            continue
        cfg = read_json(instance_paths(state["job_dir"], rec["index"])["config"]) or {}
        cg = limits.Cgroup.from_config(cfg.get("cgroup"))
        if cg is not None:
            cg.remove()
