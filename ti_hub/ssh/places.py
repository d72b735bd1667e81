"""Pure: where a running workspace or job instance lives, from the backend state TiHub stored for it.

- a local workspace or job instance: its supervisor's config and records (``TiLocalSpawner.ti_state()``,
  ``LocalBackend.launch``), which the gateway reads to enter the sandbox's namespaces as the owner's uid;
- a Kubernetes workspace or job instance: a namespace, a pod (or the Kubernetes Job and completion index that
  find it) and a container.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Union

from .logins import TargetError

RESTART = "it was started before SSH access existed: stop it and start it again"


@dataclass(frozen=True)
class LocalSandbox:
    """A local workspace or job instance: its supervisor's records, in a directory only the platform can write
    (the sandbox's pid, the identity and environment it runs with, its cgroup), found from the backend state
    the ti service stored — never from anything user code can write."""

    owner: str
    name: str
    index: int
    child_file: str  # {"pid", "start_time", "sandbox_pid", "sandbox_start"}, written by the supervisor
    config_file: str  # the supervisor's config: identity, the user's argv/env/cwd, cgroup, cpus
    kind: str = "job"  # or "workspace"

    @property
    def what(self) -> str:
        return f"workspace {self.name!r}" if self.kind == "workspace" else f"instance {self.index} of job {self.name!r}"


@dataclass(frozen=True)
class KubePod:
    owner: str
    name: str
    namespace: str
    container: str
    pod: str = ""  # known (workspaces) ...
    job: str = ""  # ... or found by the role's name (its Kubernetes Job or bare pod) and index (job instances)
    index: int = 0


Place = Union[LocalSandbox, KubePod]


def place_of(doc: dict[str, Any], instance: int, workspace_container: str = "notebook",
             job_container: str = "main") -> Place:
    state = doc.get("backend_state") or {}
    owner, name = doc["owner"], doc["name"]
    backend = state.get("backend")
    if doc["kind"] == "workspace":
        if backend == "local" and state.get("pid") and state.get("child"):
            child = str(state["child"])
            return LocalSandbox(owner, name, 0, child, os.path.join(os.path.dirname(child), "config.json"),
                                "workspace")
        if backend == "kubernetes" and state.get("pod"):
            return KubePod(owner, name, state["namespace"], workspace_container, pod=state["pod"])
        raise TargetError(f"workspace {name!r} cannot be reached over SSH: {RESTART}")
    if backend == "local":
        rec = next((r for r in state.get("instances", []) if r.get("index") == instance), None)
        if rec is None or not state.get("job_dir"):
            raise TargetError(f"job {name!r} has no instance {instance} running")
        config = os.path.join(state["job_dir"], "run", f"instance-{int(instance)}.json")
        return LocalSandbox(owner, name, instance, rec["child"], config)
    if backend == "kubernetes":
        for role in state.get("roles", []):
            first, count = int(role["offset"]), int(role["count"])
            if first <= instance < first + count:
                return KubePod(owner, name, state["namespace"], job_container, job=role["job"],
                               index=instance - first)
        raise TargetError(f"job {name!r} has no instance {instance}")
    raise TargetError(f"job {name!r} cannot be reached over SSH yet (backend {backend or 'unknown'})")


def shell_argv(shell: str, command: str | None, login: bool) -> list[str]:
    """OpenSSH's convention: ``shell -c COMMAND`` for a command, ``-shell`` (here ``shell -l``) for a login."""
    if command is not None:
        return [shell, "-c", command]
    return [shell, "-l"] if login else [shell]


def pick_shell(env: dict[str, str], exists) -> str:
    for candidate in (env.get("SHELL", ""), "/bin/bash", "/bin/sh"):
        if candidate.startswith("/") and exists(candidate):
            return candidate
    return "/bin/sh"


def session_env(base: dict[str, str], *, term: str | None, client: tuple[str, int], server: tuple[str, int],
                marker: str, login_name: str) -> dict[str, str]:
    """The workspace's (or instance's) own environment plus what an SSH session adds."""
    env = dict(base)
    env.pop("TERM", None)
    if term:
        env["TERM"] = term
    env["SSH_CONNECTION"] = f"{client[0]} {client[1]} {server[0]} {server[1]}"
    env["SSH_CLIENT"] = f"{client[0]} {client[1]} {server[1]}"
    env["TI_SSH_LOGIN"] = login_name
    env[MARKER] = marker
    return env


MARKER = "TI_SSH_OF"  # pid:start_time of the workspace or instance a session runs in (for the reaper)


def marker_of(pid: int, start_time: int | None) -> str:
    return f"{int(pid)}:{start_time if start_time is not None else ''}"


def parse_marker(value: str) -> tuple[int, int | None] | None:
    pid, sep, start = value.partition(":")
    # the value comes from a user's process environment: '²'.isdigit() is true and int('²') raises
    ok = pid.isascii() and pid.isdigit() and len(pid) <= 10 and (not start or (start.isascii() and start.isdigit()
                                                                            and len(start) <= 20))
    if not sep or not ok:
        return None
    return int(pid), int(start) if start else None


def parse_environ(raw: bytes) -> dict[str, str]:
    """/proc/PID/environ."""
    out = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, _, v = item.partition(b"=")
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out
