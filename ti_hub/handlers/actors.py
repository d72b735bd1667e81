"""Who is calling: the Actor of a hub user model, with their effective TiHub permissions (ops/grants.py), for the
API, the pages and the job endpoints."""

from __future__ import annotations

from typing import Any

from ..domain import scopes as S
from ..domain.actor import Actor
from ..ops import grants
from ..ops.context import Context


def without_permissions(model: dict[str, Any]) -> Actor:
    """The caller before (or without) ``actor_of``: their token's other scopes, none of TiHub's permissions."""
    return Actor(model["name"], frozenset(x for x in model.get("scopes", ()) if x not in S.PERMISSIONS),
                 tuple(model.get("groups") or ()), kind=model.get("kind", "user"))


async def actor_of(ti: Context, model: dict[str, Any]) -> Actor:
    """The Actor of a hub user model (HubAuth's): a user's permissions are their token's scopes narrowed to what
    their TiHub roles grant (``grants.effective_actor``, the one place that decides); a service keeps its own."""
    name, scopes, groups = model["name"], tuple(model.get("scopes", ())), tuple(model.get("groups") or ())
    kind = model.get("kind", "user")
    if kind != "user":
        return Actor(name=name, scopes=frozenset(scopes), groups=groups, kind=kind)
    return await ti.db(grants.effective_actor, name, scopes, groups, "user", ti.default_role, readonly=True)
