"""The SSH gateway's settings (``c.TiSSHGateway.*`` in the hub's config file, read by the gateway and the ti service).

Pure traitlets: importing this module loads no SSH library, so the ti service can build the "copy SSH command"
answer from the same settings the gateway listens with.
"""

from __future__ import annotations

import os
import socket

from traitlets import Bool, Float, Integer, Unicode, default
from traitlets.config import Configurable

WILDCARDS = ("", "0.0.0.0", "::", "[::]")


class TiSSHGateway(Configurable):
    ip = Unicode("127.0.0.1", config=True,
                 help="Address the SSH gateway listens on (0.0.0.0 or :: for every interface). "
                      "`ti-hub start --ssh-ip` sets it; it defaults to the hub's --ip.")
    port = Integer(8022, config=True,
                   help="TCP port of the SSH gateway. `ti-hub start --ssh-port` sets it (default: the hub's public "
                        "port + 22, so 8022 beside 8000); 0 turns the gateway off.")
    public_host = Unicode("", config=True,
                          help="Host name users put in `ssh -p PORT user@HOST` (the copy-the-command answer). "
                               "Default: the listen address; when it listens everywhere, the host name the user "
                               "reached the hub with (this machine's name in the gateway's own messages).")
    public_port = Integer(0, config=True,
                          help="Port users connect to when it differs from `port` (a NAT or a load balancer in "
                               "front); 0: `port`.")
    data_dir = Unicode("", config=True, help="TiHub's data directory (the host key lives there); "
                                             "default: $TI_HUB_DATA_DIR.")
    host_key_file = Unicode("", config=True,
                            help="The gateway's private host key (OpenSSH format). Generated once (ed25519, mode "
                                 "0600) when missing. Default: <data dir>/ssh_host_ed25519_key.")
    api_url = Unicode("", config=True,
                      help="Internal URL of the ti service API (.../services/ti/api/v1); default: $TI_API_URL.")
    hub_url = Unicode("", config=True,
                      help="Public URL of the hub, named in messages (e.g. how to start a stopped workspace).")
    hub_db_url = Unicode("", config=True,
                         help="SQLAlchemy URL of JupyterHub's database, read (read-only) to check that an account "
                              "still exists and is authorized (NativeAuthenticator's approval) at every login. "
                              "Empty: that check is skipped (only the ti service's key lookup applies).")
    failed_logins_per_source = Integer(10, config=True,
                                       help="Failed logins one source address may make in a burst before it is "
                                            "refused (token bucket; one attempt is given back every "
                                            "failed_login_refill_seconds).")
    failed_logins_per_user = Integer(10, config=True,
                                     help="Failed logins one account name may receive from one source address in "
                                          "a burst before logins to it from that address are refused for a while "
                                          "(token bucket). Other addresses are not affected: an attacker cannot "
                                          "lock the owner out from elsewhere.")
    failed_logins_per_account = Integer(100, config=True,
                                        help="Failed logins one account name may receive from all addresses together "
                                             "in a burst (a ceiling against guessing spread over many addresses); "
                                             "past it, logins to the account are refused except from addresses it "
                                             "logged in from successfully within known_source_days.")
    known_source_days = Float(30.0, config=True,
                              help="Days an address an account logged in from successfully passes the "
                                   "failed_logins_per_account ceiling (remembered in memory: a restart forgets).")
    failed_login_refill_seconds = Float(30.0, config=True,
                                        help="Seconds after which one failed login is forgiven (in each of the "
                                             "buckets above).")
    max_auth_tries = Integer(6, config=True,
                             help="Public keys one connection may offer before it is disconnected (OpenSSH's "
                                  "MaxAuthTries).")
    login_timeout = Float(30.0, config=True, help="Seconds a client has to authenticate.")
    max_connections = Integer(1000, config=True, help="Most connections the gateway holds at once.")
    max_connections_per_user = Integer(100, config=True,
                                       help="Most authenticated connections one user holds at once.")
    max_sessions_per_connection = Integer(10, config=True,
                                          help="Most sessions (shells, commands, sftp) open at once on one "
                                               "connection (OpenSSH's MaxSessions); port forwards are not counted.")
    keepalive_interval = Float(30.0, config=True,
                               help="Seconds between keepalive requests to an idle client; a client that misses "
                                    "3 in a row is disconnected (0: never).")
    allow_port_forwarding = Bool(True, config=True,
                                 help="Allow `ssh -L` to ports inside the workspace (loopback destinations only).")
    reap_interval = Float(10.0, config=True,
                          help="Seconds between sweeps that end processes started over SSH whose workspace or job "
                               "has stopped (local backend).")
    kubeconfig = Unicode("", config=True,
                         help="Kubernetes: kubeconfig for the pod exec API (default: in-cluster, then "
                              "~/.kube/config).")
    workspace_container = Unicode("notebook", config=True,
                                  help="Kubernetes: the container of a workspace pod that sessions run in "
                                       "(KubeSpawner's container_name).")
    job_container = Unicode("main", config=True, help="Kubernetes: the container of a job pod that sessions run in.")

    @default("data_dir")
    def _default_data_dir(self) -> str:
        return os.environ.get("TI_HUB_DATA_DIR", "")

    @default("api_url")
    def _default_api_url(self) -> str:
        return os.environ.get("TI_API_URL", "")

    def key_path(self) -> str:
        return self.host_key_file or os.path.join(self.data_dir or ".", "ssh_host_ed25519_key")

    def shown_host(self, seen: str = "") -> str:
        """``seen``: the host name a user reached the hub with, the best guess when the gateway listens on every
        address and no public_host is set (this machine's own name may not resolve for them)."""
        if self.public_host:
            return self.public_host
        if self.ip not in WILDCARDS:
            return self.ip
        return seen or socket.gethostname()

    def shown_port(self) -> int:
        return self.public_port or self.port
