"""The ti service: a hub-managed service that owns TiHub's data, API, scheduler loop and backend.

JupyterHub starts it (see ti_hub.hub.config) with JUPYTERHUB_* variables; it loads the same config
file as the hub, so one file configures everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from cryptography.fernet import Fernet
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from traitlets import Bool, Dict, Float, Instance, Integer, List, TraitError, Type, Unicode, default, validate
from traitlets.config import Application

from .. import __version__
from ..backends.base import ExecutionBackend
from ..db.session import make_engine, make_sessionmaker, sqlite_url, upgrade
from ..db.writelock import WriteLock
from ..endpoints.origins import Origins
from ..health.alerting import AlertRules
from ..health.monitor import HealthMonitor
from ..ops import uidranges
from ..ops.rendercache import RenderCache
from ..ops.profile import link_key
from ..ops.workspaces import statuses as job_statuses
from ..ops.settings import OpsSettings
from ..registry.catalog import ImageRegistries
from ..plumbing.secretfile import read_or_create
from ..storage.base import VolumeDriver
from ..ops import capacity
from ..tasks import volumeusage
from . import accesslog, startup
from ..tasks.accounting import ClusterAccounting
from ..hubclient.names import HubNames
from ..tasks.idlepolicy import IdlePolicy
from .loop import JobRunner
from ..metrics.exporter import MetricsExporter
from ..tasks.notifier import Notifier
from ..hubclient.oauth import SealedStateHubOAuth, revocations_file
from .processes import fork_followers, hold_instance_lock, stop_followers
from .settingchecks import ImportedType, SettingChecks
from ..ops.statuswait import StatusWaits
from .web import handlers, origin_handlers

DEFAULT_COMPUTE_QUOTAS = {
    # SPEC RES3: workspaces default to 3 GPUs
    "workspace": {"devices": 3, "cpu": 32, "memory_mib": 128 * 1024},
    "single": {"devices": 8, "cpu": 64, "memory_mib": 256 * 1024},
    "distributed": {"devices": 32, "cpu": 256, "memory_mib": 1024 * 1024},
}
DEFAULT_STORAGE_QUOTAS = {"block": 500, "filesystem": 500, "local": 200, "bucket": 0, "dataset": 500}
DEFAULT_PLANS = [
    {"name": "cpu-small", "description": "1 CPU core, 4 GiB", "kinds": ["workspace", "single", "distributed"],
     "device_type": "cpu", "device_count": 0, "cpu": 1, "memory_mib": 4096},
    {"name": "demo-gpu-1", "description": "1 demo GPU (fake on machines without GPUs), 1 CPU core, 4 GiB",
     "kinds": ["workspace", "single", "distributed"], "device_type": "demo-gpu", "device_count": 1, "cpu": 1,
     "memory_mib": 4096},
]
DEFAULT_IMAGES = [
    {"name": "python-cpu", "address": "quay.io/jupyter/scipy-notebook:latest", "accelerator": "cpu",
     "description": "Python with the scientific stack (CPU)"},
    {"name": "pytorch-gpu", "address": "quay.io/jupyter/pytorch-notebook:cuda12-latest", "accelerator": "gpu",
     "description": "PyTorch with CUDA 12"},
]


class TiService(SettingChecks, Application):
    name = "ti-service"
    version = __version__
    description = "TiHub's service: REST API, scheduler loop and execution backend."

    data_dir = Unicode(config=True, help="Directory for TiHub's state (database, volumes, job logs).")

    @default("data_dir")
    def _data_dir(self):
        return os.environ.get("TI_HUB_DATA_DIR", os.path.abspath("ti-hub-data"))

    db_url = Unicode("", config=True, help="SQLAlchemy URL of TiHub's database; default: SQLite (WAL) in data_dir.")
    db_busy_timeout = Float(
        10.0, config=True,
        help="SQLite: seconds a request waits for another process's lock on the database before the API answers "
             "503 (with Retry-After) instead of waiting longer.")
    api_processes = Integer(
        config=True,
        help="Processes serving the API on the same port (Linux). One Python process uses one core; with 2 "
             "or more, the API processes each listen on their own socket (SO_REUSEPORT) and a separate leader "
             "process schedules and supervises jobs without serving HTTP. With 1, one process does all. "
             "SQLite writers of all processes queue on one lock file, handed over without sleeping. "
             "Default: 2 on a machine with 2 or more cores, else 1 (docs/benchmarks.md). An API process "
             "that dies is replaced at the next restart.")

    @default("api_processes")
    def _api_processes(self):
        return 2 if (os.cpu_count() or 1) >= 2 and hasattr(os, "fork") else 1

    db_threads = Integer(
        1, config=True,
        help="Worker threads for the API's database work (the event loop never blocks). One is fastest for "
             "SQLite on a small machine: more threads make the event loop queue for Python's GIL "
             "(docs/benchmarks.md); the scheduler has a thread of its own.")
    list_cache_size = Integer(
        20_000, config=True,
        help="Finished jobs whose rendered JSON each API process keeps for job lists (about 1 KB each; 0 "
             "turns the cache off). Finished jobs never change, so the cache is never stale.")
    stop_grace_seconds = Float(
        30.0, config=True,
        help="A graceful stop (POST /jobs/{id}/stop, `ti job stop`, the All jobs page): seconds between SIGTERM "
             "and SIGKILL for a job's processes (on Kubernetes, the wait for its pods to go). A kill gives 5.")
    scheduler_interval = Float(1.0, config=True,
                               help="Seconds between cycles that stop, watch and admit jobs (submissions wake it).")
    scheduler_min_interval = Float(
        0.2, config=True,
        help="Fewest seconds between two cycles: a burst of submissions is admitted in one cycle, not one each.")
    scheduler_max_share = Float(
        0.15, config=True,
        help="When the leader serves the API itself (api_processes 0 or 1): most of its CPU time that scheduling "
             "cycles may take. After a cycle of d CPU seconds the next starts no sooner than d / share seconds "
             "after it (long queues then wait a little longer for admission instead of slowing every API "
             "request). A leader that serves no HTTP is spaced by scheduler_min_interval only.")
    queue_status_interval = Float(
        2.0, config=True,
        help="With more than 2,000 jobs queued, seconds between refreshes of queued jobs' positions, reasons "
             "and estimated starts (rewriting thousands of rows every cycle would slow admission); admission "
             "itself still runs every cycle. Smaller queues are refreshed every cycle.")
    launch_concurrency = Integer(
        16, config=True,
        help="Admitted jobs launched at once: Kubernetes creates (or process starts) of one cycle overlap, up to "
             "this many, instead of going one by one.")
    scheduler_resync_interval = Float(
        30.0, config=True,
        help="Admission runs when something changed (a submission, a kill, a job ending, a capacity change) "
             "and at least this often in any case, in seconds.")
    admission_wait_interval = Float(
        0.05, config=True,
        help="Seconds between an API process's checks on the workspaces whose admission the hub's spawner is "
             "waiting for (GET /workspaces/{owner}/{name}?wait=S): one read of all of them, none while nobody "
             "waits. An admission reaches the spawner at most this late.")
    scheduler_backfill = Bool(
        False, config=True,
        help="Q1 backfill: a job behind a blocked queue head may start if its declared duration "
             "(estimated_duration) ends before the head's reserved start. Off by default: it trades strict "
             "order for utilization, and `ti-hub simulate` measures that trade on a trace first.")
    usage_settling_time = Float(
        6 * 3600.0, config=True,
        help="Q3 settling time T of the usage scores, in seconds: after a change in what a user holds, the "
             "score has moved 63% of the way after T, 86% after 2T, 98% after 4T. Default 6 hours: a day of "
             "heavy use fades within about a day.")
    usage_sample_interval = Float(
        15.0, config=True,
        help="Q3 sampling period (the longest dt between two score updates), in seconds. Scores are also "
             "updated at every scheduling decision, when what users hold changes, so they are exact whatever "
             "this is; it sets how fresh the saved scores that the API shows and restarts catch up from are.")
    usage_history_interval = Float(
        60.0, config=True,
        help="MON1 seconds between two usage samples for the cluster page's pictures (devices held per pool and "
             "per user, queue length, usage scores over time). Each sample is one grouped read of the active "
             "jobs and one INSERT batch, taken by the scheduling leader. (Not usage_sample_interval: that one "
             "paces the saved usage scores.)")
    usage_history_retention = Float(
        7 * 86400.0, config=True,
        help="MON1 seconds a usage sample is kept; older samples are deleted when a new one is taken. "
             "Default 7 days.")
    usage_device_weights = Dict(
        {}, config=True,
        help="Q3 weight per device type in the usage scores, e.g. {'A100': 2.0, 'T4': 0.5}: an A100-hour "
             "then counts as much as four T4-hours. Missing types weigh 1.")
    history_refresh_interval = Float(
        300.0, config=True,
        help="Q6 how often, in seconds, the owners' typical run times (medians of their completed jobs) are "
             "re-read for start estimates of jobs without a declared duration.")
    volume_usage_interval = Float(
        60.0, config=True,
        help="Seconds between two measurements of the volumes that no file system caps (the local driver's): one "
             "found over its capacity takes no new read-write mount of a job, and the work writing it gets an "
             "alert (tasks/volumeusage.py). 0: never measured; capacity is then a quota on requests only.")
    config_file = Unicode("", config=True, help="Config file (the hub's jupyterhub_config.py) to load.")
    backend_class = ImportedType(
        "ti_hub.backends.local.LocalBackend", klass=ExecutionBackend, config=True,
        help="Execution backend: local processes (embedded default) or Kubernetes.",
    )
    compute_quota_defaults = Dict(
        DEFAULT_COMPUTE_QUOTAS, config=True,
        help="Default compute quota per job kind ({kind: {devices, cpu, memory_mib}}), per device type; "
             "admins override per user and device type through the API.",
    )
    storage_quota_defaults = Dict(
        DEFAULT_STORAGE_QUOTAS, config=True, help="Default storage quota per storage kind, in GiB.")
    device_count_rules = Dict(
        {}, config=True,
        help="Allowed device counts per device type (SPEC RES4), e.g. {'ascend-910': [0, 1, 2, 4, 8]}; joined "
             "with the backend's own (KubernetesBackend.device_types' counts), which must agree on a type both name.",
    )
    devices_per_node = Dict(
        {}, config=True,
        help="RES4 devices per node of device types whose distributed jobs take whole nodes, e.g. "
             "{'ascend-910': 8}: each instance of such a job asks for exactly that many (nodes x 8 in all); "
             "joined with the backend's own (KubernetesBackend.device_types' per_node).",
    )
    max_workers = Integer(64, config=True, help="Most worker instances one distributed job may ask for.")
    max_ps = Integer(16, config=True, help="Most parameter servers one distributed job may ask for.")
    initial_plans = List(DEFAULT_PLANS, config=True,
                         help="Plans created on first start when there are none (admins change them later).")
    initial_images = List(DEFAULT_IMAGES, config=True, help="Public images created on first start when none exist.")
    secret_file = Unicode("", config=True,
                          help="File holding the key that encrypts registry passwords and jobs' secret environment "
                               "entries; default data_dir/ti_secret. Replacing it makes queued and paused jobs "
                               "with secret entries fail to start (their values cannot be opened).")

    volume_driver_class = Type(
        "ti_hub.storage.local.LocalVolumeDriver", klass=VolumeDriver, config=True,
        help="Where volumes' bytes live: directories under data_dir (embedded default, with the local backend) or "
             "'ti_hub.storage.k8s.KubernetesVolumeDriver' (one PersistentVolumeClaim per volume, with the "
             "Kubernetes backend).",
    )
    tensorboard_idle_timeout = Float(
        3600.0, config=True,
        help="JOB6 seconds a TensorBoard started for a job's log directory (POST /jobs/ID/tensorboard) keeps "
             "running without a request through its URL; it is stopped after that (an open TensorBoard tab polls, "
             "so it counts as use). TensorBoards also stop with the service. On Kubernetes a TensorBoard is a pod that "
             "runs at most this long (activeDeadlineSeconds), whether used or not; a later start replaces it.")
    tensorboard_image = Unicode(
        "ti-hub/workspace:0.1.0", config=True,
        help="JOB6 Kubernetes: the image of TensorBoard pods; it needs `python3 -m tensorboard.main` and the user "
             "namespace's pull secrets reach it (helm/images/workspace/Dockerfile builds one with TensorBoard).")
    tensorboard_max = Integer(
        8, config=True, help="JOB6 most TensorBoards the service runs at once (each is a Python process of ~150 MB).")
    unix_uid_range = List(
        Integer(), [900_000, 999_999], minlen=2, maxlen=2, config=True,
        help="Embedded platform, run as root: the Unix uids (first, last) given to TiHub users; each user's "
             "workspaces, jobs, SSH sessions and TensorBoards run as their own uid (and a group of the same "
             "number). A uid is allocated once and kept; uids this machine's accounts use, and owners of its "
             "running processes, are skipped. Two TiHub instances on one host need ranges that do not overlap: "
             "the service refuses to start otherwise (TiService.unix_uid_registry).")
    unix_uid_registry = Unicode(
        config=True,
        help="Embedded platform, run as root: the host-wide file (JSON, changed under an flock) where every TiHub "
             "instance records its unix_uid_range under its data directory. The service refuses to start when "
             "another instance whose data directory still exists registered an overlapping range (entries of "
             "removed data directories are dropped). Every instance on a host must name the same file. Default: "
             "the environment variable TI_HUB_UID_REGISTRY, else /var/lib/ti-hub/uid-ranges.json.")

    @default("unix_uid_registry")
    def _uid_registry(self):
        return os.environ.get(uidranges.ENV) or uidranges.DEFAULT_PATH

    allow_shared_unix_user = Bool(
        False, config=True,
        help="Embedded platform, run without root: TiHub cannot switch uids, so every user's code would run as "
             "the platform's own user, able to read the others' files. By default only the first user to run "
             "anything may run code; True lets every user run code anyway (one trusted team).")
    endpoint_origin = Unicode(
        "", config=True,
        help="JOB6: serve every job endpoint on an origin of its own, like JupyterHub's subdomain_host: "
             "'https://ep.example.org' puts a job's port at https://42-0-40001.ep.example.org/ (a wildcard DNS "
             "name and certificate for *.ep.example.org, routed to the ti service). A page a job serves then cannot "
             "read the hub's pages nor act as whoever opens it (docs/security.md). Empty: endpoints are paths on "
             "the hub's origin.")
    endpoint_listen = Unicode(
        "", config=True,
        help="Address (ip:port) where the ti service itself serves the endpoints' origins, e.g. when nothing in "
             "front routes *.<endpoint domain> to it (`ti-hub start --endpoint-origin` sets it). Empty: only the "
             "service's own port, where a front proxy sends them.")
    hub_public_url = Unicode(
        "", config=True, help="The hub's address as browsers reach it (where an endpoint's origin sends a browser "
                              "to log in); set by ti-hub start.")
    check_responses = Bool(
        config=True,
        help="Check every API answer against the route's declared contract (the OpenAPI document) and answer 500 "
             "'contract_broken' when it differs. For tests (it costs a schema validation per answer); default: "
             "on when the environment variable TI_HUB_CHECK_RESPONSES is 1.")

    @default("check_responses")
    def _check_responses(self):
        return os.environ.get("TI_HUB_CHECK_RESPONSES") == "1"

    default_role = Unicode(
        "user", config=True,
        help="The TiHub role (ti role list) of a user who holds none, directly or through their groups. Preset "
             "roles: 'user' (submit jobs, start workspaces, view pools, the cluster and everyone's waiting jobs) "
             "and 'ti-admin'; '' gives such users no TiHub permission until an admin grants them a role.")
    hub_lookup_ttl = Float(
        60.0, config=True,
        help="Seconds the service remembers that a hub user or group exists (volume shares name only existing "
             "ones); a name the hub does not know is asked again every time.")
    backend = Instance(ExecutionBackend)
    volume_driver = Instance(VolumeDriver)

    def initialize(self, argv=None):
        super().initialize(argv)
        if self.config_file:
            self.load_config_file(self.config_file)
        Path(self.data_dir).mkdir(parents=True, exist_ok=True)
        url = self.db_url or sqlite_url(Path(self.data_dir) / "ti.sqlite")
        upgrade(url)
        self.engine = make_engine(url, busy_timeout=self.db_busy_timeout)
        self.sessionmaker = make_sessionmaker(self.engine)
        self.read_engine = (make_engine(url, readonly=True, busy_timeout=self.db_busy_timeout)
                            if url.startswith("sqlite") else self.engine)
        self.read_sessionmaker = make_sessionmaker(self.read_engine)
        self.write_lock = self._write_lock()
        self.executor = ThreadPoolExecutor(self.db_threads, thread_name_prefix="ti-db")
        # the scheduler's reads and decisions never queue API requests behind them, nor the reverse
        self.loop_executor = ThreadPoolExecutor(1, thread_name_prefix="ti-sched")
        secret = self._secret()
        self.fernet = Fernet(secret)
        self.link_key = link_key(secret)  # signs email verification links (ops/profile.py)
        self.cookie_secret = self._cookie_secret()
        self.backend = self.backend_class(parent=self, log=self.log)
        startup.claim_uid_range(self)  # as root: no other TiHub on this host gives out our users' uids
        # the local driver keeps its directories under data_dir; other drivers take only their own config
        local = "root_dir" in self.volume_driver_class.class_trait_names()
        driver_kw = {"root_dir": self.data_dir} if local and "root_dir" not in self.config.LocalVolumeDriver else {}
        self.volume_driver = self.volume_driver_class(parent=self, log=self.log, **driver_kw)
        rules = capacity.device_rules(self.device_count_rules, self.backend)
        self.ops_settings = OpsSettings(dict(self.compute_quota_defaults), dict(self.storage_quota_defaults),
                                        rules, self.max_workers, self.max_ps, uids=startup.uid_policy(self), secret_key=self.fernet,
                                        rdma=self.backend.supports_rdma, image_note=self.backend.image_note,
                                        # checks (and logs) cgroups; the driver's says where disks are not capped
                                        limits_note=" ".join(n for n in (self.backend.limits_note,
                                                                         self.volume_driver.disk_note) if n) or None,
                                        default_role=self.default_role,
                                        devices_per_node=capacity.devices_per_node(self.devices_per_node, self.backend))
        self.render_cache = RenderCache(self.list_cache_size)
        self.hub_names = HubNames(self.hub_lookup_ttl)
        self.tensorboards = startup.tensorboards(self)
        self.runner = JobRunner(self)
        self.health = HealthMonitor(parent=self, log=self.log)
        self.accounting = ClusterAccounting(parent=self, log=self.log)
        self.idle = IdlePolicy(parent=self, log=self.log)
        self.notifier = Notifier(parent=self, log=self.log)
        self.alert_rules = AlertRules(parent=self, log=self.log)
        self.metrics = MetricsExporter(parent=self, log=self.log)
        self.image_registries = ImageRegistries(parent=self, log=self.log)  # IMG3: image lists' registry facts
        self._poke_fd: int | None = None
        self.leader_serves_http = True  # serve() says; scheduler_max_share only applies when it does
        startup.seed(self)

    def _lock_path(self, what: str) -> Path:
        """Lock files sit beside an SQLite database, else in the data dir."""
        path = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
        return Path(f"{path}.{what}") if path and path != ":memory:" else Path(self.data_dir) / f"ti.{what}"

    def _write_lock(self) -> WriteLock | contextlib.nullcontext:
        """SQLite: every process writing this database queues on one lock file (PostgreSQL locks rows)."""
        if self.engine.dialect.name == "sqlite":
            return WriteLock(self._lock_path("write-lock"))
        return contextlib.nullcontext()

    def _secret(self) -> bytes:
        return read_or_create(self.secret_file or Path(self.data_dir) / "ti_secret", Fernet.generate_key)

    def _cookie_secret(self) -> bytes:
        """Kept in the data dir: a restarted service still reads its browsers' login cookies."""
        return read_or_create(Path(self.data_dir) / "ti_cookie_secret", lambda: os.urandom(32).hex().encode())

    async def read_capacity(self, settle: bool = False) -> list:
        return await capacity.read_capacity(self, settle)

    async def refresh_capacity(self) -> None:
        """Read the capacity now (after a change to virtual clusters' machines) for this process's plans."""
        self.ops_settings.nodes = await self.read_capacity()

    async def db(self, fn, *args, readonly: bool = False, scheduler: bool = False, **kwargs) -> Any:
        """Run ``fn(session, ...)`` in a worker thread inside one transaction (committed on success).

        ``readonly`` transactions never take SQLite's write lock; they must not write.
        """
        maker = self.read_sessionmaker if readonly else self.sessionmaker

        def run():
            if readonly:
                with maker.begin() as session:
                    return fn(session, *args, **kwargs)
            with self.write_lock, maker.begin() as session:
                return fn(session, *args, **kwargs)

        executor = self.loop_executor if scheduler else self.executor
        return await asyncio.get_running_loop().run_in_executor(executor, run)

    @functools.cached_property
    def status_waits(self) -> StatusWaits:
        """This process's long polls on job status (each API process has its own: made on first use)."""
        read = functools.partial(self.db, job_statuses, readonly=True)
        return StatusWaits(read, self.admission_wait_interval, self.log)

    def hub_auth(self) -> SealedStateHubOAuth:
        """The singleton every HubOAuthenticated handler (and the OAuth callback) uses via .instance(); the loop
        calls the hub's API with it too (a leader that serves no HTTP has one all the same)."""
        return SealedStateHubOAuth.instance(parent=self, cache_max_age=300, state_key=self.fernet,
                                            revocations=revocations_file(self.data_dir))

    def make_app(self) -> web.Application:
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/ti/")
        api_prefix = prefix.rstrip("/") + "/api/v1"
        hub_auth = self.hub_auth()
        settings = {
            "ti": self, "hub_auth": hub_auth, "api_prefix": api_prefix,
            "cookie_secret": self.cookie_secret, "static_path": str(Path(__file__).parent.parent / "static"),
            # the proxy routes only the service's prefix here: the pages' stylesheet must live under it
            "static_url_prefix": prefix + "static/", "service_prefix": prefix,
            # tornado logs each request's URI whole: a ?token= would land in the log
            "log_function": accesslog.log_request,
        }
        accesslog.install()
        app = web.Application(handlers(api_prefix, prefix), **settings)
        if self.endpoint_origins is not None:
            app.add_handlers(self.endpoint_origins.host_pattern(), origin_handlers())
        return app

    @property
    def endpoint_origins(self) -> Origins | None:
        if not self.endpoint_origin:
            return None
        if getattr(self, "_origins", None) is None:
            self._origins = Origins.parse(self.endpoint_origin)
        return self._origins

    @validate("endpoint_origin")
    def _check_origin(self, proposal):
        if proposal["value"]:
            try:
                Origins.parse(proposal["value"])
            except ValueError as e:
                raise TraitError(f"TiService.{e}") from None
        return proposal["value"]

    @default("log_level")
    def _log_level(self):
        return logging.INFO

    def poke(self) -> None:
        """Something changed: the leader schedules at once (a follower tells it through the pipe)."""
        if self._poke_fd is None:
            self.runner.poke()
            return
        try:
            os.write(self._poke_fd, b"!")
        except (BlockingIOError, BrokenPipeError):
            pass  # a poke is already pending, or the leader is going away

    def _url(self):
        return urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))

    def start(self):
        self._instance_lock = hold_instance_lock(self._lock_path("service-lock"), self.log)
        startup.restore_volumes(self)  # before any process serves: volumes mounted again after a reboot
        if self.api_processes <= 1:
            asyncio.run(self.serve())
            return
        # the leader schedules and serves no HTTP: a scheduling cycle is seconds of Python on a long queue,
        # and every request of the process running it would queue behind it for the GIL. The API
        # processes each listen on a socket of their own (SO_REUSEPORT): the kernel spreads connections
        # evenly, where processes sharing one socket race to accept and one of them takes most. The
        # leader binds first only to hold the port until they listen.
        sockets = self._bind(reuse_port=True)
        reader, writer = os.pipe()
        os.set_blocking(writer, False)

        def follower(_index: int) -> None:
            os.close(reader)
            self._poke_fd = writer
            # connections opened before the fork belong to the leader
            self.engine.dispose(close=False)
            self.read_engine.dispose(close=False)
            for sock in sockets:
                sock.close()
            asyncio.run(self.serve_follower(self._bind(reuse_port=True)))

        pids = fork_followers(self.api_processes, follower)
        os.close(writer)
        for sock in sockets:
            sock.close()
        try:
            asyncio.run(self.serve(None, reader, http=False))
        finally:
            stop_followers(pids)

    def _bind(self, attempts: int = 50, reuse_port: bool = False) -> list:
        """The listening sockets; a previous instance may still be letting go of the port after a crash."""
        url = self._url()
        for i in range(attempts):
            try:
                return bind_sockets(url.port or 80, url.hostname or "127.0.0.1", reuse_port=reuse_port)
            except OSError as e:
                if e.errno != errno.EADDRINUSE or i == attempts - 1:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")

    def _http(self, sockets) -> HTTPServer:
        server = HTTPServer(self.make_app(), xheaders=True)
        server.add_sockets(sockets or self._bind())
        if self.endpoint_listen:  # the endpoints' origins, where nothing in front routes them to the API port
            host, _, port = self.endpoint_listen.rpartition(":")
            server.add_sockets(bind_sockets(int(port), host or "127.0.0.1", reuse_port=self.api_processes > 1))
        return server

    async def serve_follower(self, sockets) -> None:
        server = self._http(sockets)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        async def refresh_nodes():
            # plans are offered by capacity: a follower reads it itself instead of asking the leader
            while True:
                try:
                    await self.refresh_capacity()
                except Exception:
                    self.log.exception("reading capacity failed")
                await asyncio.sleep(self.scheduler_interval)

        refresher = asyncio.ensure_future(refresh_nodes())
        self.log.info("TiHub API follower %d serving", os.getpid())
        await stop.wait()
        refresher.cancel()
        server.stop()
        self.tensorboards.stop_all()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def serve(self, sockets=None, poke_reader: int | None = None, http: bool = True) -> None:
        """The leader: schedules and supervises; serves the API too unless API processes do."""
        server = self._http(sockets) if http else None
        self.leader_serves_http = http
        self.log.info("TiHub service %s listening on %s (data in %s, %d API process(es))", __version__,
                      self._url().geturl(), self.data_dir, max(1, self.api_processes))
        loop = asyncio.get_running_loop()
        if poke_reader is not None:
            def drain():
                try:
                    data = os.read(poke_reader, 4096)
                except BlockingIOError:
                    return
                if not data:
                    loop.remove_reader(poke_reader)  # every follower is gone
                self.runner.poke()

            os.set_blocking(poke_reader, False)
            loop.add_reader(poke_reader, drain)
        task = asyncio.ensure_future(self.runner.run_forever())
        usage = asyncio.ensure_future(volumeusage.watch(self)) if self.volume_usage_interval > 0 else None
        self.accounting.attach(self)  # before the first health sample
        self.idle.start(self)  # a health subscriber: before the first sample
        self.alert_rules.start(self)  # subscribes to the health samples: nothing to cancel
        health = asyncio.ensure_future(self.health.run_forever(self))
        notifier = asyncio.ensure_future(self.notifier.run_forever(self))
        for sig in (signal.SIGTERM, signal.SIGINT):
            # jobs run under their own supervisors: stopping the service never stops them
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            self.log.info("TiHub service stopping; running jobs keep running and are re-adopted at the next start")
        finally:
            if usage is not None:
                usage.cancel()
            health.cancel()
            notifier.cancel()
            if server is not None:
                server.stop()
            self.tensorboards.stop_all()
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.loop_executor.shutdown(wait=False, cancel_futures=True)
            self.engine.dispose()
            self.read_engine.dispose()


def main(argv: list[str] | None = None) -> None:
    TiService.launch_instance(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
