"""`ti-hub help-config`: every setting TiHub defines, grouped by where it acts, with its default and help.

The classes are listed here explicitly (a registry, so the order and the headings read well);
tests/unit/test_help_config.py walks every module of ti_hub and fails when a configurable class with settings is
neither listed here nor in ``INTERNAL``, and when the docs name a ``Class.setting`` this command does not print.
Classes are imported by name only when printed: nothing here talks to a cluster or reads a config.
"""

from __future__ import annotations

import importlib
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from traitlets import TraitType
from traitlets.config import Configurable

# (heading, what the heading covers, ((module:Class, one line on what the class is), ...))
SECTIONS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Service", "the ti service (at /services/ti/): API, database, scheduler, accounting, metrics, notices", (
        ("ti_hub.service.app:TiService", "The ti service: database, REST API, scheduler loop, execution backend."),
        ("ti_hub.tasks.idlepolicy:IdlePolicy", "Warns about, then reclaims, workspaces whose devices sit idle."),
        ("ti_hub.tasks.accounting:ClusterAccounting", "Idle devices now and booked/idle device-hours."),
        ("ti_hub.metrics.exporter:MetricsExporter", "The ti service's Prometheus metrics."),
        ("ti_hub.tasks.notifier:Notifier", "Sends alert notices by email and webhook."),
        ("ti_hub.registry.catalog:ImageRegistries", "Reads images' version, size and creation time from their "
                                                    "registries for the image lists."),
    )),
    ("Health and alerts", "device and host readings, and the alert rules evaluated on them", (
        ("ti_hub.health.monitor:HealthMonitor", "Samples device and host health (HealthMonitor.source_class)."),
        ("ti_hub.health.alerting:AlertRules", "Evaluates the machine alert rules admins manage."),
        ("ti_hub.health.sources:LocalHealthSource", "Readings of this machine: host through psutil, devices "
                                                    "through NVML (embedded platform)."),
        ("ti_hub.health.promsource:PrometheusHealthSource", "Readings of DCGM's and the node exporter's series "
                                                            "through Prometheus (Kubernetes)."),
        ("ti_hub.health.testsource:TestReadingsSource", "A TEST source: readings from a JSON file (CI, demos); "
                                                        "never a default."),
    )),
    ("Sign-in", "the hub's authenticators (JupyterHub.authenticator_class)", (
        ("ti_hub.hub.auth:TiAuthenticator", "Username and password (NativeAuthenticator), the default."),
        ("ti_hub.hub.oauth:TiOIDCAuthenticator", "Any OpenID Connect provider; accounts wait for an admin's approval."),
        ("ti_hub.hub.oauth:TiGitHubOAuthenticator", "GitHub logins; accounts wait for an admin's approval."),
        ("ti_hub.hub.oauth:TiGitLabOAuthenticator", "GitLab logins; accounts wait for an admin's approval."),
        ("ti_hub.hub.oauth:TiAzureAdOAuthenticator", "Microsoft Entra ID / Azure AD logins; accounts wait for an "
                                                 "admin's approval."),
    )),
    ("Workspaces", "settings both spawners share (set them on TiSpawnerMixin for both, or on one spawner)", (
        ("ti_hub.spawner.mixin:TiSpawnerMixin", "Admission of workspaces by the ti service, for either spawner."),
    )),
    ("Embedded platform", "one machine: local processes, directories, the default of `ti-hub start`", (
        ("ti_hub.backends.local.backend:LocalBackend", "Runs each instance of a job as a supervised local "
                                                       "process group."),
        ("ti_hub.storage.local:LocalVolumeDriver", "Volumes as directories or size-limited file systems."),
        ("ti_hub.spawner.local:TiLocalSpawner", "Workspaces as local processes."),
    )),
    ("Kubernetes", "a real cluster: Pods, Indexed Jobs, Services, PVCs", (
        ("ti_hub.backends.k8s.backend:KubernetesBackend", "Runs jobs as Pods on a Kubernetes cluster."),
        ("ti_hub.storage.k8s:KubernetesVolumeDriver", "Volumes as PersistentVolumeClaims and StorageClasses."),
        ("ti_hub.spawner.kube:TiKubeSpawner", "Workspaces as Pods (KubeSpawner)."),
    )),
    ("SSH", "the SSH gateway (hub-managed service ti-ssh)", (
        ("ti_hub.ssh.settings:TiSSHGateway", "Public-key logins into workspaces and SSH-enabled jobs."),
        ("ti_hub.ssh.app:TiSSHApp", "The gateway's process."),
    )),
)

# configurable classes that are not site settings: TiHub configures them itself
INTERNAL: dict[str, str] = {
    "ti_hub.hub.main:TiServiceSpawner": "JupyterHub's spawner of TiHub's managed services, set by `ti-hub start`",
    "ti_hub.hubclient.oauth:SealedStateHubOAuth": "the ti service's own OAuth client, configured by the service",
}

# what the kubernetes extra installs: without it, its classes are named but not listed
OPTIONAL = {"kubespawner", "kubernetes_asyncio"}

RULE = "=" * 78


@dataclass(frozen=True)
class Entry:
    heading: str
    path: str  # module:Class
    summary: str

    @property
    def name(self) -> str:
        return self.path.rsplit(":", 1)[1]

    def load(self) -> type[Configurable]:
        module, name = self.path.split(":")
        return getattr(importlib.import_module(module), name)


def entries() -> Iterator[Entry]:
    for heading, _about, classes in SECTIONS:
        for path, summary in classes:
            yield Entry(heading, path, summary)


def defining_class(cls: type, name: str) -> type:
    """The class in ``cls``'s MRO whose body defines the trait ``name`` (a subclass may redefine one)."""
    for klass in cls.__mro__:
        if isinstance(klass.__dict__.get(name), TraitType):
            return klass
    return cls


def is_tihubs(cls: type, name: str) -> bool:
    """A setting TiHub defines (or gives a default of its own), not one inherited from JupyterHub & co."""
    return defining_class(cls, name).__module__.split(".")[0] == "ti_hub"


def class_help(cls: type[Configurable], summary: str, everything: bool) -> str:
    bases = ", ".join(b.__name__ for b in cls.__bases__)
    title = f"{cls.__name__}({bases}) options"
    lines = [title, "-" * len(title), *textwrap.wrap(summary, 78)]
    traits = sorted(cls.class_traits(config=True).items())
    upstream = [n for n, _ in traits if not is_tihubs(cls, n)]
    for name, trait in traits:
        if everything or name not in upstream:
            lines.append(cls.class_get_trait_help(trait))
    if upstream and not everything:
        owners = sorted({defining_class(cls, n).__name__ for n in upstream})
        note = (f"Also accepts {len(upstream)} inherited option(s) of {', '.join(owners)} "
                f"(`ti-hub help-config --all {cls.__name__}` lists them).")
        lines += textwrap.wrap(note, 78, break_on_hyphens=False, break_long_words=False)
    if not traits:
        lines.append("(no options of its own)")
    return "\n".join(lines)


def render(names: Iterable[str] = (), everything: bool = False) -> str:
    """The help of the classes called ``names`` (default: all), under their section headings."""
    wanted = set(names)
    known = {e.name for e in entries()}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown class(es) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    out: list[str] = []
    for heading, about, classes in SECTIONS:
        chosen = [Entry(heading, p, s) for p, s in classes if not wanted or p.rsplit(":", 1)[1] in wanted]
        if not chosen:
            continue
        out += [RULE, heading.upper(), *textwrap.wrap(about[:1].upper() + about[1:] + ".", 78), RULE, ""]
        for e in chosen:
            try:
                cls = e.load()
            except ModuleNotFoundError as err:
                if (err.name or "").split(".")[0] not in OPTIONAL:
                    raise
                out += [f"{e.name}: {err.name} is not installed here; `pip install 'ti-hub[kubernetes]'` "
                        "lists its options", ""]
                continue
            out += [class_help(cls, e.summary, everything), ""]
    return "\n".join(out)
