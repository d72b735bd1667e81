"""Whose uid reads a volume's files: the volume owner's, never the platform's root (``storage.userfs``).

A volume's files belong to its users, links and all; the service reads them (usage, browsing, snapshots) only
through a worker running as the owner's uid, allocated here when the owner never ran anything yet. An
unprivileged platform cannot switch uids: it answers None and the worker keeps the platform's own (its
no-follow walk is then the whole defence; docs/security.md says so).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import models as m
from . import unixids, volumes
from ..storage.userfs import As

if TYPE_CHECKING:
    from .context import Context


def _uids(session: Session, names: list[str]) -> dict[str, int | None]:
    return dict(session.execute(select(m.User.name, m.User.unix_uid).where(m.User.name.in_(names))).all())


async def readers(svc: Context, owners: set[str]) -> dict[str, As | None]:
    """Each owner's ``As`` (None everywhere on an unprivileged platform); missing uids are allocated."""
    if os.geteuid() != 0 or not owners:
        return {o: None for o in owners}
    known = await svc.db(_uids, sorted(owners), readonly=True)
    missing = [o for o in owners if known.get(o) is None]
    if missing:
        known.update(await svc.db(unixids.ensure, missing, svc.ops_settings.uids))
    return {o: As(int(known[o]), int(known[o])) for o in owners}  # each uid's group has its number


async def browse(svc: Context, actor: Any, ref: str, path: str) -> dict[str, Any]:
    """STO7 as the owner: the API's ``GET /volumes/{id}/files``."""
    vid, owner = await svc.db(volumes.browsable, actor, ref, readonly=True)
    who = (await readers(svc, {owner}))[owner]
    return await asyncio.to_thread(svc.volume_driver.browse, vid, path, who=who)


async def show(svc: Context, actor: Any, ref: str, max_files: int = 100_000) -> dict[str, Any]:
    """``GET /volumes/{id}``: the volume with its usage measured now, as its owner (a quick look: it stops
    counting after ``max_files`` files)."""
    out = await svc.db(volumes.show, actor, ref, readonly=True)
    if out["state"] == "ready":
        who = (await readers(svc, {out["owner"]}))[out["owner"]]
        used = await asyncio.to_thread(svc.volume_driver.usage_bytes, out["id"], max_files, who=who)
        if used is not None or out["used_bytes"] is None:
            out["used_bytes"] = used
    return out
