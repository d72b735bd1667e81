"""TiHub's defaults for JupyterHub, applied to a config object by ``configure(c)``.

Every setting here can be overridden after the call in your jupyterhub_config.py.
Environment (set by ``ti-hub start``): TI_HUB_DATA_DIR, TI_HUB_ADMIN, TI_HUB_ADMIN_PASSWORD, TI_HUB_IP,
TI_HUB_PORT, TI_HUB_HUB_PORT, TI_HUB_PROXY_API_PORT, TI_HUB_SERVICE_PORT, TI_HUB_SSH_PORT, TI_HUB_SSH_IP,
TI_HUB_CONFIG_FILE, TI_HUB_RUN_ID (this run's id, which the ti service's /health echoes: ti_hub/launcher/app.py),
TI_HUB_CULL_IDLE_TIMEOUT and TI_HUB_CULL_EVERY (the activity culler: configure_culler).
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from pathlib import Path

from ..domain import scopes as S
from ..domain.hubroles import SERVICE, SPAWNER_SERVICE, preset_roles
from ..plumbing.secretfile import read_or_create
from ..spawner import names
from .alerts import HubAlerts
from .sqlite import use_wal

SSH_SERVICE = "ti-ssh"
CULLER_SERVICE = "ti-idle-culler"
# the services load this same config: they get what it was computed from, and compute the same
PASSED_ENV = ("TI_HUB_DATA_DIR", "TI_HUB_USER_DATA_DIR", "TI_HUB_ENDPOINT_ORIGIN", "TI_HUB_CONFIG_FILE", "TI_HUB_DEMO_GPUS", "TI_HUB_IP", "TI_HUB_PORT",
              "TI_HUB_HUB_PORT", "TI_HUB_PROXY_API_PORT", "TI_HUB_SERVICE_PORT", "TI_HUB_SSH_PORT", "TI_HUB_SSH_IP",
              "TI_HUB_CHECK_RESPONSES", "PATH", "PYTHONPATH", "TI_HUB_RUN_ID",
              "TI_HUB_UID_REGISTRY",  # TiService.unix_uid_registry (tests give each hub its own)
              "TI_HUB_REGISTRY_REACH")  # ImageRegistries.reach (test hubs read only registries on the machine)
TEMPLATES = Path(__file__).parents[1] / "templates"  # ti_hub/templates, beside the service's pages
# what the templates read besides the hub's own variables (home.html checks server names as they are typed)
TEMPLATE_VARS = {"ti_name_rule": names.RULE, "ti_name_pattern": names.PATTERN}


class SSHShown:
    """WS3: what the home page's "copy SSH command" buttons show, read from the config when a page renders (a
    config file may set ``c.TiSSHGateway.public_host`` or ``public_port`` after ``configure(c)``)."""

    def __init__(self, c):
        self._c = c

    def _gw(self, name: str, fallback=None):
        gw = self._c.TiSSHGateway
        return gw[name] if name in gw else fallback

    def port(self) -> int:
        return int(self._gw("public_port", 0) or self._gw("port", 0) or 0)

    def host(self) -> str:
        """'' when the gateway listens on every address and no public_host is set: the page then uses the host
        name the browser reached the hub with (as `ti ssh-command` does)."""
        public = self._gw("public_host", "")
        if public:
            return public
        ip = self._gw("ip", "")
        return "" if ip in ("", "0.0.0.0", "::") else ip


def _secret_file(path: Path, nbytes: int = 32) -> str:
    """A token kept in a 0600 file so that the hub and the ti service agree across restarts."""
    return read_or_create(path, lambda: secrets.token_hex(nbytes).encode()).decode()


def data_dir() -> Path:
    d = Path(os.environ.get("TI_HUB_DATA_DIR", "ti-hub-data")).resolve()
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    return d


def ssh_role() -> dict:
    """The SSH gateway's identity: read keys and targets of any user through the ti service, nothing else."""
    return {"name": SSH_SERVICE, "description": "TiHub's SSH gateway",
            "scopes": [S.SSH_GATEWAY, f"access:services!service={SERVICE}"], "services": [SSH_SERVICE]}


def configure_ssh(c, d: Path, env, ip: str, port: int, service_port: int, service_env: dict, config_file: str) -> None:
    """The SSH gateway (``ti_hub/ssh``) as a hub-managed service; TI_HUB_SSH_PORT=0 leaves it out."""
    ssh_port = int(env.get("TI_HUB_SSH_PORT", "") or port + 22)
    c.TiSSHGateway.port = ssh_port
    c.TiSSHGateway.ip = env.get("TI_HUB_SSH_IP", "") or ip
    c.TiSSHGateway.data_dir = str(d)
    c.TiSSHGateway.api_url = f"http://127.0.0.1:{service_port}/services/{SERVICE}/api/v1"
    c.TiSSHGateway.hub_db_url = c.JupyterHub.db_url
    public = ip if ip not in ("", "0.0.0.0", "::") else socket.gethostname()
    c.TiSSHGateway.hub_url = f"http://{public}:{port}"
    if not ssh_port:
        return
    c.JupyterHub.template_vars = {**c.JupyterHub.template_vars, "ti_ssh": SSHShown(c)}
    cmd = [sys.executable, "-m", "ti_hub.ssh"] + ([f"--config={config_file}"] if config_file else [])
    c.JupyterHub.services.append({"name": SSH_SERVICE, "command": cmd, "environment": dict(service_env),
                                  "display": False})
    c.JupyterHub.load_roles.append(ssh_role())


def culler_role() -> dict:
    """What jupyterhub-idle-culler needs to stop idle servers (its README), and nothing more: it never culls users."""
    return {"name": CULLER_SERVICE, "description": "TiHub's activity culler (jupyterhub-idle-culler)",
            "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
            "services": [CULLER_SERVICE]}


def configure_culler(c, timeout: int, every: int = 0, extra_args: tuple[str, ...] = ()) -> None:
    """WS6: jupyterhub-idle-culler as a hub-managed service: workspaces without activity (no browser, kernel or
    terminal activity reported to the hub) for ``timeout`` seconds are stopped, checked every ``every`` seconds
    (0: timeout / 2). ``timeout`` 0 removes it. Call it after ``configure(c)``; ``ti-hub start
    --cull-idle-timeout`` does it. Device utilization is TiHub's own idle policy (the alert rule workspace-idle), not this."""
    c.JupyterHub.services = [svc for svc in c.JupyterHub.services if svc.get("name") != CULLER_SERVICE]
    c.JupyterHub.load_roles = [r for r in c.JupyterHub.load_roles if r.get("name") != CULLER_SERVICE]
    if timeout <= 0:
        return
    every = every if every > 0 else max(1, timeout // 2)
    cmd = [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={int(timeout)}", f"--cull-every={int(every)}",
           *extra_args]
    c.JupyterHub.services.append({"name": CULLER_SERVICE, "command": cmd, "display": False})
    c.JupyterHub.load_roles.append(culler_role())


def configure(c, data: str | os.PathLike | None = None) -> None:
    d = Path(data).resolve() if data else data_dir()
    env = os.environ
    ip = env.get("TI_HUB_IP", "127.0.0.1")
    port = int(env.get("TI_HUB_PORT", "8000"))
    hub_port = int(env.get("TI_HUB_HUB_PORT", "8081"))
    proxy_api_port = int(env.get("TI_HUB_PROXY_API_PORT", "8001"))
    service_port = int(env.get("TI_HUB_SERVICE_PORT", "10101"))
    admin = env.get("TI_HUB_ADMIN", "")

    c.JupyterHub.bind_url = f"http://{ip}:{port}"
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = hub_port
    c.JupyterHub.db_url = f"sqlite:///{d / 'jupyterhub.sqlite'}"
    use_wal(d / "jupyterhub.sqlite")  # spawns commit often on the hub's one loop (ti_hub/hub/sqlite.py)
    c.JupyterHub.cookie_secret_file = str(d / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(d / "jupyterhub.pid")
    # the Python port of configurable-http-proxy (`pip install` brings it, no Node.js needed), with room for
    # more than tornado's default of 10 requests in flight (ti_hub/launcher/proxy_main.py)
    c.ConfigurableHTTPProxy.command = [sys.executable, "-m", "ti_hub.launcher.proxy_main"]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{proxy_api_port}"
    c.ConfigurableHTTPProxy.pid_file = str(d / "proxy.pid")
    c.ConfigurableHTTPProxy.auth_token = _secret_file(d / "proxy_token")

    # ACC1: sign-up, then an admin authorizes the account at /hub/authorize. No allow_all: the authenticators
    # let in approved accounts only (check_allowed in ti_hub/hub/auth.py, ti_hub/hub/oauth.py for OAuth, ACC2)
    c.JupyterHub.authenticator_class = "ti_hub.hub.auth.TiAuthenticator"
    c.NativeAuthenticator.open_signup = False
    c.NativeAuthenticator.minimum_password_length = 8
    if admin:
        c.Authenticator.admin_users = {admin}
    c.TiAuthenticator.initial_admin_password = env.get("TI_HUB_ADMIN_PASSWORD", "")

    # the hub's nav gets a TiHub menu linking the ti service's pages (templates/page.html)
    c.JupyterHub.template_paths = [str(TEMPLATES)]
    c.JupyterHub.template_vars = dict(TEMPLATE_VARS)
    c.JupyterHub.custom_scopes = S.CUSTOM_SCOPES
    c.JupyterHub.load_groups = {S.ADMIN_GROUP: {"users": [admin] if admin else []}}
    c.JupyterHub.load_roles = preset_roles()
    config_file = env.get("TI_HUB_CONFIG_FILE", "")
    service_env = {"TI_HUB_DATA_DIR": str(d), "PYTHONUNBUFFERED": "1"}
    for key in PASSED_ENV:
        if env.get(key):
            service_env[key] = env[key] if key != "TI_HUB_DATA_DIR" else str(d)
    spawner_token = _secret_file(d / "spawner_token")
    cmd = [sys.executable, "-m", "ti_hub.service"]
    if config_file:
        cmd.append(f"--TiService.config_file={config_file}")
    c.JupyterHub.services = [
        # the SMTP password of alert emails (tasks/notifier.py) reaches the ti service only, not the SSH gateway
        {"name": SERVICE, "url": f"http://127.0.0.1:{service_port}", "command": cmd,
         "environment": {**service_env, **{k: env[k] for k in ("TI_SMTP_PASSWORD",) if env.get(k)}},
         "display": True, "oauth_no_confirm": True,
         "oauth_client_allowed_scopes": [*S.PERMISSIONS, "read:users:name!user", "read:users:groups!user"]},
        {"name": SPAWNER_SERVICE, "api_token": spawner_token, "display": False},
    ]
    configure_ssh(c, d, env, ip, port, service_port, service_env, config_file)
    configure_culler(c, int(env.get("TI_HUB_CULL_IDLE_TIMEOUT", "") or 0), int(env.get("TI_HUB_CULL_EVERY", "") or 0))

    c.JupyterHub.spawner_class = "ti_hub.spawner.local.TiLocalSpawner"
    c.JupyterHub.allow_named_servers = True
    c.JupyterHub.named_server_limit_per_user = 10
    c.JupyterHub.default_url = "/hub/home"
    c.Spawner.server_token_scopes = S.WORKSPACE_TOKEN_SCOPES
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = 300  # includes time spent queued, with progress messages
    c.Spawner.http_timeout = 120
    c.TiSpawnerMixin.ti_api_url = f"http://127.0.0.1:{service_port}/services/{SERVICE}/api/v1"
    c.TiSpawnerMixin.ti_public_api_url = f"http://{ip}:{port}/services/{SERVICE}/api/v1"
    c.TiSpawnerMixin.ti_api_token = spawner_token
    # the home page's banner of the user's open alerts, asked by the hub of the ti service (ti_hub/hub/alerts.py)
    c.JupyterHub.template_vars = {**c.JupyterHub.template_vars,
                                  "ti_alerts": HubAlerts(c.TiSpawnerMixin.ti_api_url, spawner_token)}
    # what users' code writes (homes, job work dirs, volumes) may live on a file system of its own
    ud = Path(env["TI_HUB_USER_DATA_DIR"]).resolve() if env.get("TI_HUB_USER_DATA_DIR") else d
    c.TiLocalSpawner.root_dir = str(ud / "workspaces")
    c.LocalBackend.user_dir = str(ud)
    c.LocalVolumeDriver.root_dir = str(ud)
    c.TiService.data_dir = str(d)
    c.TiService.hub_public_url = f"http://{ip}:{port}"
    if env.get("TI_HUB_ENDPOINT_ORIGIN"):  # JOB6 endpoints on origins of their own, served by the ti service
        from urllib.parse import urlsplit

        c.TiService.endpoint_origin = env["TI_HUB_ENDPOINT_ORIGIN"]
        c.TiService.endpoint_listen = f"{ip}:{urlsplit(env['TI_HUB_ENDPOINT_ORIGIN']).port or 80}"
    demo = int(env.get("TI_HUB_DEMO_GPUS", "0") or 0)
    if demo > 0:
        # fake devices for a machine without GPUs: the flow works, the "GPU" is only CUDA_VISIBLE_DEVICES
        c.LocalBackend.devices = {"demo-gpu": demo}
        # ... and 2 CPUs per core: the initial plans take 1 CPU each, and a newcomer's workspace plus a
        # 2-instance job would otherwise not run together on a 2-core laptop (demo work is light)
        c.LocalBackend.cpu_overcommit = 2.0
    c.LocalBackend.root_dir = str(d)
