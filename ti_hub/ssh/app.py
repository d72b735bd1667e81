"""``python -m ti_hub.ssh``: the SSH gateway, a hub-managed service (the hub starts it, and restarts it if it dies).

It loads the hub's config file (``--config`` or $TI_HUB_CONFIG_FILE) for ``c.TiSSHGateway.*``, talks to the ti
service with the service token the hub gives it ($JUPYTERHUB_API_TOKEN), and listens until SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import asyncssh
from traitlets import Unicode, default
from traitlets.config import Application

from ..plumbing.secretfile import read_or_create
from .gateway import Gateway
from .local import reap_forever
from .lookup import HubAccounts, TiAPI
from .server import GatewayConnection
from .settings import TiSSHGateway

log = logging.getLogger("ti_hub.ssh")


def host_key(path: str) -> asyncssh.SSHKey:
    """The gateway's host key: made once (ed25519, 0600) so that clients see the same key across restarts.
    OpenSSH's format or PEM (PKCS#8, as the Helm chart's genPrivateKey writes it) both load."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = read_or_create(p, lambda: asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    try:
        os.chmod(p, 0o600)
    except OSError:
        pass  # a mounted Secret (the Helm chart's) is read-only; its volume sets the mode
    return asyncssh.import_private_key(data)


async def start_server(settings: TiSSHGateway, token: str) -> tuple[asyncssh.SSHAcceptor, Gateway]:
    if not settings.api_url:
        raise SystemExit("ti-ssh: no ti service URL (c.TiSSHGateway.api_url or $TI_API_URL)")
    gw = Gateway(settings, TiAPI(settings.api_url, token), HubAccounts(settings.hub_db_url))
    server = await asyncssh.create_server(
        lambda: GatewayConnection(gw), settings.ip or None, settings.port,
        server_host_keys=[host_key(settings.key_path())], server_version="TiHub",
        login_timeout=settings.login_timeout, keepalive_interval=settings.keepalive_interval or None,
        keepalive_count_max=3, encoding=None, line_editor=False, allow_pty=True, agent_forwarding=False,
        x11_forwarding=False, password_auth=False, kbdint_auth=False, reuse_address=True, backlog=256)
    return server, gw


class TiSSHApp(Application):
    name = "ti-ssh"
    description = "TiHub's SSH gateway: ssh into running workspaces and SSH-enabled jobs with registered keys."
    classes = [TiSSHGateway]
    config_file = Unicode("", config=True, help="The hub's config file (default: $TI_HUB_CONFIG_FILE).")
    aliases = {"config": "TiSSHApp.config_file", "port": "TiSSHGateway.port", "ip": "TiSSHGateway.ip"}

    @default("config_file")
    def _default_config_file(self) -> str:
        return os.environ.get("TI_HUB_CONFIG_FILE", "")

    def initialize(self, argv=None):
        super().initialize(argv)
        if self.config_file:
            self.load_config_file(self.config_file)
            self.update_config(self.cli_config)  # the command line wins over the file

    def start(self) -> None:
        logging.basicConfig(level=logging.INFO, format="[%(levelname).1s %(asctime)s ti-ssh] %(message)s")
        logging.getLogger("asyncssh").setLevel(logging.WARNING)
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        settings = TiSSHGateway(parent=self)
        try:
            server, _gw = await start_server(settings, os.environ.get("JUPYTERHUB_API_TOKEN", ""))
        except OSError as e:  # the hub starts it again later (it polls its managed services)
            log.error("cannot listen on %s:%s: %s (c.TiSSHGateway.port, ti-hub start --ssh-port)", settings.ip,
                      settings.port, e.strerror or e)
            raise SystemExit(1) from None
        log.info("listening on %s:%s (host key %s); users connect with: ssh -p %s USER@%s", settings.ip,
                 settings.port, settings.key_path(), settings.shown_port(), settings.shown_host())
        reaper = asyncio.ensure_future(reap_forever(settings.reap_interval))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        reaper.cancel()
        server.close()
        await server.wait_closed()


def main(argv: list[str] | None = None) -> None:
    TiSSHApp.launch_instance(argv)
