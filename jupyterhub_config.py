# TiHub reference configuration.
#
#   ti-hub start --config jupyterhub_config.py
#
# `configure(c)` applies TiHub's defaults (ti_hub/hub/config.py); everything after it overrides them.
# Every option below is a traitlet: `ti-hub help-config` prints them all with their help strings.
from ti_hub.hub.config import configure

configure(c)  # noqa: F821

# --- Execution: the embedded local backend ---------------------------------------------------------
# Devices: empty = detect NVIDIA GPUs with NVML. On a machine without GPUs, `ti-hub start` sets 4 *fake*
# demo devices so that the whole flow can be tried; jobs then only see CUDA_VISIBLE_DEVICES.
# c.LocalBackend.devices = {"demo-gpu": 4}

# --- Quotas (SPEC RES3): defaults per kind; admins override per user through the API ----------------
# c.TiService.compute_quota_defaults = {
#     "workspace": {"devices": 3, "cpu": 32, "memory_mib": 131072},
#     "single": {"devices": 8, "cpu": 64, "memory_mib": 262144},
#     "distributed": {"devices": 32, "cpu": 256, "memory_mib": 1048576},
# }
# c.TiService.storage_quota_defaults = {"block": 500, "filesystem": 500, "local": 200, "bucket": 0, "dataset": 500}

# --- Device-count rules (SPEC RES4) ---------------------------------------------------------------
# c.TiService.device_count_rules = {"ascend-910": [0, 1, 2, 4, 8]}

# --- Database: SQLite (WAL) in the data directory by default; PostgreSQL for larger sites ------------
# c.TiService.db_url = "postgresql+psycopg://tihub:secret@db.example.org/tihub"

# --- Login (SPEC ACC1-2): sign-up + admin approval at /hub/authorize by default. Or an OAuth provider with ---
# the same approval (docs/admin-guide.md, "Logins"): pick ONE class; never set allow_all (no approval then).
# c.JupyterHub.authenticator_class = "ti_hub.hub.oauth.TiGitLabOAuthenticator"   # or TiGitHubOAuthenticator,
#                                             TiAzureAdOAuthenticator, TiOIDCAuthenticator (any OpenID Connect)
# c.OAuthenticator.client_id = "..."
# c.OAuthenticator.client_secret = "..."
# c.OAuthenticator.oauth_callback_url = "https://hub.example.org/hub/oauth_callback"
# c.GitLabOAuthenticator.gitlab_url = "https://gitlab.example.org"
# c.GitLabOAuthenticator.allowed_gitlab_groups = {"ml-team"}   # optional: who may ask for approval at all
# c.AzureAdOAuthenticator.tenant_id = "..."
# c.TiOIDCAuthenticator.oidc_issuer = "https://sso.example.org/realms/main"

# --- SSH gateway (ti-ssh): `ti-hub start --ssh-port/--ssh-ip` set port and address (default: --port + 22) ----
# c.TiSSHGateway.public_host = "hub.example.org"   # what `ti ssh-command` prints (behind NAT or a load balancer)
# c.TiSSHGateway.failed_logins_per_source = 10     # token buckets: one try given back every 30 s
# c.TiSSHGateway.failed_logins_per_user = 10
# c.TiSSHGateway.max_connections_per_user = 100
# c.TiSSHGateway.allow_port_forwarding = True      # `ssh -L` to the workspace's localhost only

# --- Idle reclamation (SPEC WS6; docs/admin-guide.md "Idle reclamation"), both off by default -----------------
# from ti_hub.hub.config import configure_culler
# configure_culler(c, timeout=7200)        # jupyterhub-idle-culler: stop workspaces without activity for 2 h
# The device-aware policy is the alert rule workspace-idle (Alerts page; `ti admin alert-rule update
# workspace-idle --enabled --interval 7200 --grace 1800`); who is exempt stays here:
# c.IdlePolicy.exempt_groups = {"staff"}
