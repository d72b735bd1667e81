"""IMG1-IMG3: public images, custom addresses, registry credentials (encrypted, never returned)."""

from __future__ import annotations

import re
from typing import Any

from cryptography.fernet import Fernet
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..domain import scopes as S
from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, NotFound
from . import audit
from .common import get_or_404, iso, page, utcnow

# registry/path:tag@digest, loosely: what an OCI reference can contain, and nothing a shell would love
IMAGE_PATTERN = r"^[a-z0-9][a-z0-9._\-/:@]{0,510}$"
IMAGE_RE = re.compile(IMAGE_PATTERN[:-1] + r"\Z")  # \Z: $ would let a final newline through
HOST_PATTERN = r"^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$"
HOST_RE = re.compile(HOST_PATTERN[:-1] + r"\Z")


def image_address(value: Any, field: str = "image") -> str:
    value = v.text(value, field, 512, required=True)
    if not IMAGE_RE.match(value):
        raise v.ValidationError(f"{field} must be an image address like registry/name:tag (lowercase)", field=field)
    return value


def render(img: m.Image) -> dict[str, Any]:
    # IMG3: version, size and creation time are the registry's, added by the API (registry/catalog.py); the
    # version and size_mib columns, once typed in by hand, are no longer read
    return {"id": img.id, "name": img.name, "address": img.address, "accelerator": img.accelerator,
            "description": img.description, "created_at": iso(img.created_at), "public": True}


def list_images(session: Session, actor: Actor, limit: int, offset: int) -> dict[str, Any]:
    return page(session, select(m.Image).order_by(m.Image.name), limit, offset, render)


def resolve(session: Session, ref: Any) -> tuple[str, str | None]:
    """(address, warning): a public image name, or any address (no credential guarantee: warn)."""
    if isinstance(ref, str):
        img = session.scalar(select(m.Image).where(m.Image.name == ref))
        if img:
            return img.address, None
        if v.NAME_RE.match(ref) and not IMAGE_RE.match(ref):  # a name, of no public image
            raise NotFound(f"there is no public image named {ref!r} (an image address is lowercase, like "
                           "registry/name:tag)", field="image")
    addr = image_address(ref)
    return addr, f"{addr} is not a public image: make sure it exists and that you have a credential to pull it"


def add_image(session: Session, actor: Actor, data: dict[str, Any]) -> dict[str, Any]:
    actor.need(S.MANAGE_VC, "adding public images")
    v.check_fields(data, ("name", "address", "accelerator", "description"))  # IMG3: the registry says the rest
    name = v.name(data.get("name"))
    if session.scalar(select(m.Image.id).where(m.Image.name == name)):
        raise Conflict(f"an image named {name!r} exists already", field="name")
    img = m.Image(name=name, address=image_address(data.get("address"), "address"),
                  accelerator=v.choice(data.get("accelerator", "cpu"), "accelerator", ("cpu", "gpu")),
                  description=v.text(data.get("description", ""), "description"), created_at=utcnow())
    session.add(img)
    session.flush()
    audit.record(session, actor, "image.add", img.name, {"address": img.address})
    return render(img)


def delete_image(session: Session, actor: Actor, image_id: int) -> None:
    actor.need(S.MANAGE_VC, "deleting public images")
    img = get_or_404(session, m.Image, image_id, "image")
    audit.record(session, actor, "image.delete", img.name, {"address": img.address})
    session.delete(img)


def render_credential(c: m.RegistryCredential) -> dict[str, Any]:
    # the password never leaves the service, not even masked
    return {"id": c.id, "name": c.name, "registry": c.server, "username": c.username,
            "created_at": iso(c.created_at)}


def list_credentials(session: Session, actor: Actor) -> dict[str, Any]:
    rows = session.scalars(select(m.RegistryCredential).where(m.RegistryCredential.owner == actor.name)
                           .order_by(m.RegistryCredential.name)).all()
    return {"items": [render_credential(c) for c in rows], "total": len(rows), "limit": len(rows), "offset": 0}


def add_credential(session: Session, actor: Actor, data: dict[str, Any], fernet: Fernet) -> dict[str, Any]:
    actor.need(S.SUBMIT, "saving registry credentials")
    v.check_fields(data, ("name", "registry", "username", "password"))
    name = v.name(data.get("name"))
    registry = v.text(data.get("registry"), "registry", 255, required=True)
    if not HOST_RE.match(registry):
        raise v.ValidationError("registry must be a host name with an optional :port", field="registry")
    username = v.text(data.get("username"), "username", 255, required=True)
    password = v.text(data.get("password"), "password", 4096, required=True)
    if session.scalar(select(m.RegistryCredential.id).where(m.RegistryCredential.owner == actor.name,
                                                            m.RegistryCredential.name == name)):
        raise Conflict(f"you already have a credential named {name!r}", field="name")
    c = m.RegistryCredential(owner=actor.name, name=name, server=registry, username=username,
                             password_encrypted=fernet.encrypt(password.encode()), created_at=utcnow())
    session.add(c)
    session.flush()
    return render_credential(c)


def find_credential(session: Session, actor: Actor, ref: Any, field: str = "credential") -> m.RegistryCredential:
    q = select(m.RegistryCredential).where(m.RegistryCredential.owner == actor.name)
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):  # an id: 7, or 7.0 (db_id)
        c = session.scalar(q.where(m.RegistryCredential.id == v.db_id(ref, field)))
    elif isinstance(ref, str) and ref:
        c = session.scalar(q.where(m.RegistryCredential.name == ref))
        if c is None and (cid := v.id_in(ref)) is not None:
            c = session.scalar(q.where(m.RegistryCredential.id == cid))
    else:
        raise v.ValidationError(f"{field} must be a credential name or id", field=field)
    if c is None:
        raise NotFound(f"you have no registry credential {ref!r}", field=field)
    return c


def delete_credential(session: Session, actor: Actor, ref: Any) -> None:
    session.delete(find_credential(session, actor, ref, "id"))


def registry_credentials(s: Session, ids: set[int]) -> dict[int, tuple[str, str, bytes]]:
    """The registry credentials ``ids`` (server, username, encrypted password)."""
    rows = s.execute(select(m.RegistryCredential.id, m.RegistryCredential.server, m.RegistryCredential.username,
                            m.RegistryCredential.password_encrypted).where(m.RegistryCredential.id.in_(ids)))
    return {r.id: (r.server, r.username, r.password_encrypted) for r in rows}


def my_logins(s: Session, actor: Actor) -> list[tuple[int, str, str, bytes]]:
    """The actor's own registry credentials (id, server, username, encrypted password), oldest first: what an
    image list reads private registries with (IMG3)."""
    rows = s.execute(select(m.RegistryCredential.id, m.RegistryCredential.server, m.RegistryCredential.username,
                            m.RegistryCredential.password_encrypted)
                     .where(m.RegistryCredential.owner == actor.name).order_by(m.RegistryCredential.id))
    return [(r.id, r.server, r.username, r.password_encrypted) for r in rows]


def opened_login(fernet: Fernet, cred: tuple[str, str, bytes]) -> tuple[str, str, str]:
    """A credential as ``registry_credentials`` loads it, its password decrypted: for a backend only, never kept."""
    return cred[0], cred[1], fernet.decrypt(cred[2]).decode()
