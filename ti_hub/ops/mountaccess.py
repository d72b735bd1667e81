"""Who may mount a volume, and with which groups a job mounts: the pure rules that volumes, submissions
(``ops/jobspec``) and revocation (``ops/revoke``) share, kept low so that none of them imports another for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..db import models as m
from ..domain.actor import Actor

# the spec's record of the owner's hub groups when the work was submitted: the shares it mounts through are
# checked again with them when access is taken back, and at admission and resume (ops/revoke.py)
GROUPS = "access_groups"


def access_mode(vol: m.Volume, actor: Actor) -> str | None:
    """'rw', 'ro' or None: owners have rw, shares give their mode, public datasets are ro to all."""
    if vol.owner == actor.name:
        return "ro" if vol.kind == "dataset" else "rw"
    best = None
    for s in vol.shares:
        if (s.grantee_kind == "user" and s.grantee == actor.name) or (
                s.grantee_kind == "group" and s.grantee in actor.groups):
            if s.mode == "rw":
                best = "rw"
            elif best is None:
                best = "ro"
    if best is None and vol.public:
        best = "ro"
    if best == "rw" and vol.kind == "dataset":
        best = "ro"
    return best


def groups_of(spec: dict[str, Any]) -> tuple[str, ...] | None:
    g = spec.get(GROUPS)
    return tuple(g) if isinstance(g, list) else None


def may_mount(vol: m.Volume, owner: str, groups: Sequence[str] | None, read_only: bool) -> bool:
    """Whether ``owner`` (with ``groups``; None: not known, every group the volume is shared with counts) may
    mount ``vol`` as asked, with the shares it has now."""
    if groups is None:
        groups = [s.grantee for s in vol.shares if s.grantee_kind == "group"]
    mode = access_mode(vol, Actor(owner, groups=tuple(groups)))
    return mode == "rw" or (mode == "ro" and read_only)
