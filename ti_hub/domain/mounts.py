"""STO1/STO3 mount rules, as pure functions over what is requested and what is held."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .errors import Conflict, ValidationError

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
    """At submission: may this user mount this volume this way?"""
    if not req.read_only:
        if req.kind in READ_ONLY_BY_DEFAULT:
            raise ValidationError(f"{req.kind} volume {req.volume_label} can only be mounted read-only", field=field)
        if access_mode != "rw":
            raise ValidationError(f"volume {req.volume_label} is shared with you read-only; mount it read-only",
                                  field=field)
        if req.kind == "block" and instances > 1:
            raise ValidationError(
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
