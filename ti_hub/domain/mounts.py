"""STO1/STO3 mount rules, as pure functions over what is requested and what is held."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import Conflict

# kinds that are only ever mounted read-only by workloads
READ_ONLY_KINDS = frozenset({"dataset"})
# bucket is read-only unless the admin made that bucket writable (not offered yet)
READ_ONLY_BY_DEFAULT = frozenset({"bucket", "dataset"})


@dataclass(frozen=True)
class MountRequest:
    volume_id: int
    volume_label: str  # owner/name, for messages
    kind: str
    read_only: bool


@dataclass(frozen=True)
class HeldMount:
    volume_id: int
    read_only: bool
    holder: str  # "job 12 (alice/train-a)" or "workspace alice/dev"


def check_request(req: MountRequest, access_mode: str, instances: int, field: str) -> None:
    """At submission: may this user mount this volume this way? What the volume is and how it is shared decide,
    not the request alone: a refusal is a 409."""
    if not req.read_only:
        if req.kind in READ_ONLY_BY_DEFAULT:
            raise Conflict(f"{req.kind} volume {req.volume_label} can only be mounted read-only", field=field)
        if access_mode != "rw":
            raise Conflict(f"volume {req.volume_label} is shared with you read-only; mount it read-only", field=field)
        if req.kind == "block" and instances > 1:
            raise Conflict(
                f"block volume {req.volume_label} can be mounted read-write by one instance only; "
                "mount it read-only or use a filesystem volume", field=field)


def check_conflicts(requests: Iterable[MountRequest], held: Iterable[HeldMount]) -> None:
    """At start: a block volume has many read-only mounts or one read-write mount, never both."""
    held = list(held)
    for req in requests:
        if req.kind != "block":
            continue
        for h in held:
            if h.volume_id != req.volume_id:
                continue
            if not req.read_only or not h.read_only:
                mode = "read-only" if h.read_only else "read-write"
                raise Conflict(
                    f"block volume {req.volume_label} is mounted {mode} by {h.holder}; a block volume has many "
                    "read-only mounts or one read-write mount", field="volumes", holder=h.holder)


GIB = 1 << 30


def over_capacity_reason(volume_label: str, used_bytes: int, capacity_gib: int) -> str:
    return (f"volume {volume_label} holds {used_bytes / GIB:.2f} GiB, over its capacity of {capacity_gib} GiB: "
            "jobs cannot mount it read-write until it shrinks (delete files from a workspace, which still may) or "
            "grows (ti volume expand)")


def check_capacity(requests: Iterable[MountRequest], over: Mapping[int, str], field: str = "volumes") -> None:
    """Local volumes' capacity (no file system caps them): a volume measured over its capacity takes no new
    read-write mount of a job; ``over`` maps such volumes to their reason. Reading it is always fine."""
    for req in requests:
        if not req.read_only and req.volume_id in over:
            raise Conflict(over[req.volume_id], field=field)
