"""TiHub's custom JupyterHub scopes (the seven permissions of SPEC ACC5) and preset roles."""

from __future__ import annotations

from collections.abc import Iterable

SUBMIT = "custom:ti:jobs:submit"
MANAGE_VC = "custom:ti:vc:manage"
VIEW_VC = "custom:ti:vc:view"
VIEW_ALL_JOBS = "custom:ti:jobs:view-all"
MANAGE_ALL_JOBS = "custom:ti:jobs:manage-all"
VIEW_CLUSTER = "custom:ti:cluster:view"
MANAGE_USERS = "custom:ti:users:manage"
# not a user permission: held only by the hub's spawner identity (service "ti-spawner")
ADMIT_WORKSPACES = "custom:ti:workspaces:admit"
# not a user permission: held only by the SSH gateway (service "ti-ssh"): read any user's registered public
# keys and where their workspaces and SSH-enabled jobs run
SSH_GATEWAY = "custom:ti:ssh:gateway"

PERMISSIONS: dict[str, str] = {
    SUBMIT: "Submit training jobs and start workspaces",
    MANAGE_VC: "Manage pools/virtual clusters, plans, quotas and public images",
    VIEW_VC: "View pools/virtual clusters and plans",
    VIEW_ALL_JOBS: "View all users' waiting jobs: a summary (name, owner, state, resources, queue place) of "
                   "others' queued, scheduling and paused jobs",
    MANAGE_ALL_JOBS: "View and manage all users' jobs in full (detail, logs, metrics; kill, pause, resume, clone)",
    VIEW_CLUSTER: "View cluster status",
    MANAGE_USERS: "Manage users and their quotas",
}

CUSTOM_SCOPES: dict[str, dict[str, str]] = {
    **{s: {"description": d} for s, d in PERMISSIONS.items()},
    ADMIT_WORKSPACES: {"description": "Ask TiHub to admit, start and stop workspaces (the hub's spawner)"},
    SSH_GATEWAY: {"description": "Read users' SSH public keys and where their workspaces run (the SSH gateway)"},
}

# Preset roles (SPEC ACC5). "User" submits jobs, views VCs, views cluster status and all users' jobs -- "all jobs"
# as SPEC JOB5 has it: the summaries of everyone's queued, scheduling and paused jobs (domain/actor.py job_view).
USER_SCOPES = [SUBMIT, VIEW_VC, VIEW_CLUSTER, VIEW_ALL_JOBS]
ADMIN_SCOPES = list(PERMISSIONS)
ADMIN_GROUP = "ti-admins"

# What a workspace's own token may do: the panels, magics and CLI need these and nothing more.
WORKSPACE_TOKEN_SCOPES = [
    "access:services!service=ti",
    "read:users:name!user",
    "read:users:groups!user",
    SUBMIT,
    VIEW_VC,
    VIEW_CLUSTER,
]


def has(scopes: Iterable[str], scope: str) -> bool:
    """Unfiltered custom scopes only: a filtered form (scope!x=y) never grants the whole scope."""
    return scope in set(scopes)


def permissions_of(scopes: Iterable[str]) -> list[str]:
    s = set(scopes)
    return [p for p in PERMISSIONS if p in s]
