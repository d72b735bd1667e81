"""TiHub on Kubernetes: the configuration the ti-hub Helm chart gives the hub and the ti service.

The chart puts this file and ``settings.json`` (rendered from its values) in the ConfigMap
``ti-hub-config``, mounted with the Secret ``ti-hub-secret`` at /usr/local/etc/ti-hub in the hub's
pod. It runs in two processes:

- the hub: z2jh's jupyterhub_config.py runs the chart's ``jupyterhub.hub.extraConfig`` entry, which
  runs this file with ``TI_HUB_PROCESS = "hub"``;
- the ti service: started by the hub with ``--TiService.config_file=<this file>``.

It mirrors ``ti_hub.hub.config.configure`` (the embedded platform) where z2jh has not already
configured JupyterHub: the same services, roles, scopes and spawner settings, with the Kubernetes
backend and spawner. Keep the two in step. Everything here can be overridden by a later
``jupyterhub.hub.extraConfig`` key (hub) or ``tiService.extraConfig`` (both).
"""

# `c` (and, in the hub, TI_HUB_PROCESS) come from the caller.
# ruff: noqa: F821
import json
import os
import sys
from pathlib import Path

# not resolved: a ConfigMap's files are links into a directory that a change replaces
HERE = Path(__file__).parent
SETTINGS = json.loads((HERE / "settings.json").read_text())
SECRETS = HERE / "secret"
IN_HUB = globals().get("TI_HUB_PROCESS") == "hub"

SERVICE = "ti"  # ti_hub.hub.config.SERVICE
SPAWNER_SERVICE = "ti-spawner"  # ti_hub.hub.config.SPAWNER_SERVICE
SSH_SERVICE = "ti-ssh"  # ti_hub.hub.config.SSH_SERVICE
SSH_HUB_DB_ENV = "TI_SSH_HUB_DB_URL"  # the hub's database URL, given to the SSH gateway only
BACKEND_CLASS = "ti_hub.backends.k8s.KubernetesBackend"
SPAWNER_CLASS = "ti_hub.spawner.kube.TiKubeSpawner"
USER_POD_LABELS = {"app.kubernetes.io/managed-by": "ti-hub"}


def _secret(name):
    path = SECRETS / name
    return path.read_text().strip() if path.exists() else ""


def _user_namespace():
    return SETTINGS["userNamespace"] or os.environ.get("POD_NAMESPACE", "default")


def _base_url():
    base = SETTINGS.get("baseUrl") or "/"
    return base if base.endswith("/") else base + "/"


def _service_prefix():
    return f"{_base_url()}services/{SERVICE}/"


def _device_types(types):
    """devices.types in the traits' shape (ti_hub/backends/k8s/devicetypes.py): the chart's keys are camelCase."""
    keys = {"nodeSelector": "node_selector", "perNode": "per_node"}
    return {name: {keys.get(k, k): v for k, v in cfg.items()} for name, cfg in types.items()}


def _pod_host():
    pod_ip = os.environ.get("TI_HUB_POD_IP", "")
    return f"[{pod_ip}]" if ":" in pod_ip else pod_ip  # an IPv6 pod address


# --- both processes: the ti service's own settings, and the backend's --------------------------
c.TiService.backend_class = BACKEND_CLASS
c.TiService.volume_driver_class = "ti_hub.storage.k8s.KubernetesVolumeDriver"
c.TiService.data_dir = SETTINGS["dataDir"]
c.TiService.secret_file = str(SECRETS / "ti-secret")
c.TiService.tensorboard_image = SETTINGS["tensorBoardImage"]  # TensorBoard pods (ti_hub/endpoints/kubetb.py)
_db_url = os.environ.get("TI_HUB_DB_URL") or _secret("db-url")
if _db_url:
    c.TiService.db_url = _db_url

# The Kubernetes settings go to the backend (jobs) and the spawner (workspaces) alike; trait names
# are KubernetesBackend's (ti_hub/backends/k8s/backend.py).
_kube = {
    "namespace": _user_namespace(),
    # labelled on everything TiHub creates: hubs sharing a user namespace keep apart
    "installation": f"{SETTINGS['releaseNamespace']}.{SETTINGS['releaseName']}",
    "device_resource": SETTINGS["devices"]["resourceName"],
    "device_type_label": SETTINGS["devices"]["typeLabel"],
    "pool_label": SETTINGS["devices"]["poolLabel"],
    "device_types": _device_types(SETTINGS["devices"].get("types") or {}),
    "image_pull_secrets": list(SETTINGS["imagePullSecrets"]),
}
for _trait, _value in _kube.items():
    setattr(c.KubernetesBackend, _trait, _value)
# the chart's policy closes user pods; each distributed job's own policy lets its pods (its ranks) talk
c.KubernetesBackend.network_policy_per_job = bool(SETTINGS["networkPolicyPerJob"])
c.KubernetesBackend.kubelet_stats = bool(SETTINGS["kubeletStats"])
# StorageClass per volume kind with a claim (ti_hub/storage/k8s.py); empty: the cluster's default
c.KubernetesVolumeDriver.storage_classes = {kind: sc for kind, sc in SETTINGS["storageClasses"].items() if sc}


# The SSH gateway's settings: the gateway (a service the hub starts with this file) listens with
# them, and the ti service names them in the "copy SSH command" text (ti_hub/ssh/settings.py).
_ssh = SETTINGS.get("sshGateway") or {}
c.TiSSHGateway.port = int(_ssh.get("port") or 0) if _ssh.get("enabled") else 0
c.TiSSHGateway.ip = ""  # every address of the hub's pod; the Service ti-hub-ssh leads there
c.TiSSHGateway.public_host = _ssh.get("publicHost", "")
c.TiSSHGateway.public_port = int(_ssh.get("publicPort") or 0)
c.TiSSHGateway.data_dir = SETTINGS["dataDir"]
c.TiSSHGateway.host_key_file = str(SECRETS / "ssh-host-key")  # the chart's Secret: the same key after a reinstall
if _pod_host():
    c.TiSSHGateway.api_url = f"http://{_pod_host()}:{int(SETTINGS['servicePort'])}{_service_prefix()}api/v1"
if os.environ.get(SSH_HUB_DB_ENV):
    c.TiSSHGateway.hub_db_url = os.environ[SSH_HUB_DB_ENV]


# --- the hub only ------------------------------------------------------------------------------
def _merge_roles(existing, ours):
    """Our preset roles, merged into roles of the same name that z2jh's hub.loadRoles defined."""
    by_name = {r["name"]: r for r in existing}
    for role in ours:
        if role["name"] in by_name:
            old = by_name[role["name"]]
            for key in ("scopes", "users", "groups", "services"):
                if role.get(key):
                    old[key] = sorted({*old.get(key, []), *role[key]})
        else:
            existing.append(role)
    return existing


def configure_hub(c):
    from ti_hub.domain import scopes as S
    from ti_hub.hub.config import TEMPLATE_VARS, TEMPLATES, preset_roles, ssh_role
    from ti_hub.spawner import names

    names.install()  # workspace names are checked before the hub stores a server

    pod_ip = os.environ.get("TI_HUB_POD_IP", "")
    if not pod_ip:
        raise RuntimeError("TI_HUB_POD_IP is not set: keep the chart's jupyterhub.hub.extraEnv entry")
    host = _pod_host()
    port = int(SETTINGS["servicePort"])
    prefix = _service_prefix()
    spawner_token = _secret("spawner-token")
    if not spawner_token:
        raise RuntimeError(f"{SECRETS / 'spawner-token'} is missing: is the Secret ti-hub-secret mounted?")

    hub_service = SETTINGS["hubService"]  # z2jh's name for it (jupyterhub.hub.fullname)

    admins = sorted(c.Authenticator.admin_users) if "admin_users" in c.Authenticator else []
    groups = dict(c.JupyterHub.load_groups) if "load_groups" in c.JupyterHub else {}
    members = set(groups.get(S.ADMIN_GROUP, {}).get("users", [])) | set(admins)
    groups[S.ADMIN_GROUP] = {**groups.get(S.ADMIN_GROUP, {}), "users": sorted(members)}
    c.JupyterHub.load_groups = groups

    custom = dict(c.JupyterHub.custom_scopes) if "custom_scopes" in c.JupyterHub else {}
    c.JupyterHub.custom_scopes = {**custom, **S.CUSTOM_SCOPES}
    roles = list(c.JupyterHub.load_roles) if "load_roles" in c.JupyterHub else []
    c.JupyterHub.load_roles = _merge_roles(roles, preset_roles())
    # the hub's nav gets a TiHub menu linking the ti service's pages (ti_hub/templates/page.html)
    paths = list(c.JupyterHub.template_paths) if "template_paths" in c.JupyterHub else []
    c.JupyterHub.template_paths = [str(TEMPLATES), *(p for p in paths if p != str(TEMPLATES))]
    given = dict(c.JupyterHub.template_vars) if "template_vars" in c.JupyterHub else {}
    c.JupyterHub.template_vars = {**given, **TEMPLATE_VARS}

    # A managed service gets only the environment given here (and PATH, LANG, ...): the in-cluster
    # Kubernetes client needs KUBERNETES_SERVICE_*, the backend the namespace.
    env = {"PYTHONUNBUFFERED": "1", "TI_HUB_DATA_DIR": SETTINGS["dataDir"], "TI_HUB_POD_IP": pod_ip}
    for key in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE", "TI_HUB_DB_URL",
                "HOME", "PYTHONPATH", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    services = [s for s in (c.JupyterHub.services if "services" in c.JupyterHub else [])
                if s.get("name") not in (SERVICE, SPAWNER_SERVICE, SSH_SERVICE)]
    if SETTINGS.get("sshGateway", {}).get("enabled"):
        services.append(_ssh_service(c, env))
        c.JupyterHub.load_roles = _merge_roles(list(c.JupyterHub.load_roles), [ssh_role()])
    c.JupyterHub.services = [
        *services,
        {"name": SERVICE, "url": f"http://{host}:{port}",
         "command": [sys.executable, "-m", "ti_hub.service", f"--TiService.config_file={__file__}"],
         "environment": env, "display": True, "oauth_no_confirm": True,
         "oauth_client_allowed_scopes": [*S.PERMISSIONS, "read:users:name!user", "read:users:groups!user"]},
        {"name": SPAWNER_SERVICE, "api_token": spawner_token, "display": False},
    ]

    c.JupyterHub.spawner_class = SPAWNER_CLASS
    c.JupyterHub.allow_named_servers = True
    c.JupyterHub.named_server_limit_per_user = 10
    c.JupyterHub.default_url = f"{_base_url()}hub/home"
    c.Spawner.server_token_scopes = S.WORKSPACE_TOKEN_SCOPES
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = 300  # includes time spent queued, with progress messages
    c.Spawner.http_timeout = 120
    c.TiSpawnerMixin.ti_api_url = f"http://{host}:{port}{prefix}api/v1"
    # workspaces reach the ti service through the hub's Service (jupyterhub.hub.service.extraPorts)
    c.TiSpawnerMixin.ti_public_api_url = (
        f"http://{hub_service}.{SETTINGS['releaseNamespace']}.svc:{port}{prefix}api/v1")
    c.TiSpawnerMixin.ti_api_token = spawner_token
    # the home page's banner of the user's open alerts, asked by the hub of the ti service (ti_hub/hub/alerts.py)
    from ti_hub.hub.alerts import HubAlerts

    c.JupyterHub.template_vars = {**c.JupyterHub.template_vars,
                                  "ti_alerts": HubAlerts(c.TiSpawnerMixin.ti_api_url, spawner_token)}

    # kubespawner's own traits, for the pods TiKubeSpawner makes
    c.KubeSpawner.namespace = _kube["namespace"]
    labels = dict(c.KubeSpawner.extra_labels) if "extra_labels" in c.KubeSpawner else {}
    c.KubeSpawner.extra_labels = {**labels, **USER_POD_LABELS}
    if _kube["image_pull_secrets"]:
        pulls = list(c.KubeSpawner.image_pull_secrets) if "image_pull_secrets" in c.KubeSpawner else []
        c.KubeSpawner.image_pull_secrets = [*pulls, *(n for n in _kube["image_pull_secrets"] if n not in pulls)]
    for _trait in ("installation", "device_resource", "device_type_label", "pool_label", "device_types"):
        setattr(c.TiKubeSpawner, _trait, _kube[_trait])


def _hub_db_url(c):
    """The hub's database URL as the gateway can open it: z2jh's SQLite path is relative to the hub's directory."""
    url = c.JupyterHub.db_url if "db_url" in c.JupyterHub else "sqlite:///jupyterhub.sqlite"
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url[len(prefix):].startswith("/") and url[len(prefix):] != ":memory:":
        url = prefix + os.path.join(os.getcwd(), url[len(prefix):])
    return url


def _ssh_service(c, env):
    """The SSH gateway, started by the hub with this file: it needs the Kubernetes API (pod exec), the ti
    service's URL (the pod's address) and the hub's database (read-only: is the account still authorized),
    not TiHub's own database."""
    ssh_env = {k: v for k, v in env.items() if k != "TI_HUB_DB_URL"}
    ssh_env[SSH_HUB_DB_ENV] = _hub_db_url(c)
    for key in ("PGPASSWORD", "MYSQL_PWD"):  # z2jh gives the hub's database password this way
        if os.environ.get(key):
            ssh_env[key] = os.environ[key]
    return {"name": SSH_SERVICE, "command": [sys.executable, "-m", "ti_hub.ssh", f"--config={__file__}"],
            "environment": ssh_env, "cwd": os.getcwd(), "display": False}


if IN_HUB:
    configure_hub(c)

# --- the site's additions (tiService.extraConfig), in both processes --------------------------
if SETTINGS.get("extraConfig", "").strip():
    # the site's own configuration, as z2jh runs hub.extraConfig
    exec(compile(SETTINGS["extraConfig"], "tiService.extraConfig", "exec"), {"c": c, "IN_HUB": IN_HUB})  # noqa: S102
