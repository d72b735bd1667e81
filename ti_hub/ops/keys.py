"""ACC6: SSH public keys (name + key; add/remove)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, NotFound
from .common import iso, utcnow

KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
             "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")


def parse_public_key(text: Any, field: str = "key") -> tuple[str, str]:
    """Returns (normalized 'type base64 [comment]', SHA256 fingerprint); the blob must match its type."""
    text = v.text(text, field, 16384, required=True).strip()
    if "\n" in text or "\r" in text:
        raise v.ValidationError(f"{field} must be one public key on one line", field=field)
    parts = text.split(None, 2)
    if len(parts) < 2 or parts[0] not in KEY_TYPES:
        raise v.ValidationError(f"{field} must be an OpenSSH public key starting with one of: "
                                f"{', '.join(KEY_TYPES)}", field=field)
    try:
        blob = base64.b64decode(parts[1], validate=True)
        (n,) = struct.unpack(">I", blob[:4])
        inner = blob[4:4 + n].decode()
    except (binascii.Error, struct.error, UnicodeDecodeError):
        raise v.ValidationError(f"{field}: the key data is not valid base64 of an SSH key", field=field) from None
    if inner != parts[0]:
        raise v.ValidationError(f"{field}: the key data is a {inner!r} key, not {parts[0]!r}", field=field)
    fp = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return " ".join(parts), fp


def render(k: m.SSHKey) -> dict[str, Any]:
    return {"id": k.id, "name": k.name, "key": k.key, "fingerprint": k.fingerprint, "created_at": iso(k.created_at)}


def list_keys(session: Session, actor: Actor, user: str | None = None) -> dict[str, Any]:
    rows = session.scalars(select(m.SSHKey).where(m.SSHKey.owner == actor.name).order_by(m.SSHKey.id)).all()
    return {"items": [render(k) for k in rows], "total": len(rows), "limit": len(rows), "offset": 0}


def add_key(session: Session, actor: Actor, data: dict[str, Any]) -> dict[str, Any]:
    v.check_fields(data, ("name", "key"))
    name = v.name(data.get("name"))
    key, fp = parse_public_key(data.get("key"))
    mine = select(m.SSHKey).where(m.SSHKey.owner == actor.name)
    if session.scalar(mine.where(m.SSHKey.name == name)):
        raise Conflict(f"you already have a key named {name!r}", field="name")
    if session.scalar(mine.where(m.SSHKey.fingerprint == fp)):
        raise Conflict(f"this key ({fp}) is registered already", field="key")
    k = m.SSHKey(owner=actor.name, name=name, key=key, fingerprint=fp, created_at=utcnow())
    session.add(k)
    session.flush()
    return render(k)


def delete_key(session: Session, actor: Actor, ref: str) -> None:
    q = select(m.SSHKey).where(m.SSHKey.owner == actor.name)
    k = session.scalar(q.where(m.SSHKey.name == ref))
    if k is None and (kid := v.id_in(ref)) is not None:
        k = session.scalar(q.where(m.SSHKey.id == kid))
    if k is None:
        raise NotFound(f"you have no SSH key {ref!r}", field="id")
    session.delete(k)
