"""A user's own profile (issue 31, ACC6): nickname, email and phone they set themselves, and the email's
verification by a link mailed to it.

The link carries a token: ``payload.signature``, the payload naming the user, the email, a nonce and when it
expires, signed with HMAC-SHA256 under the service's link key (``TiService.link_key``, derived from its secret).
The signature makes it unforgeable; the expiry is inside what is signed; the nonce makes it single-use: the
profile keeps the one nonce that may verify now, and verifying clears it (so does a newer link or another
email). Opening it needs the user signed in as the user it names (ops/verifymail.py says why).

Pure token functions, and functions of a Session run inside the change's own transaction; the mail itself is
sent by ops/verifymail.py after the transaction.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from ..db import models as m
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden, ValidationError
from . import audit
from .people import PROFILE_FIELDS, _profile, profile_fields, render_profile

TOKEN_MAX = 2048  # a token longer than any this service makes is refused before it is decoded
LINK_LABEL = b"ti-hub email verification links v1"


def link_key(secret: bytes) -> bytes:
    """The key links are signed with: derived from the service's secret, so it is never the key itself."""
    return hmac.new(secret, LINK_LABEL, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Claims:
    user: str
    email: str
    nonce: str
    expires: int  # seconds since the epoch


def make_token(key: bytes, c: Claims) -> str:
    payload = _b64(json.dumps([c.user, c.email, c.nonce, c.expires], separators=(",", ":")).encode())
    return payload + "." + _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())


def read_token(key: bytes, token: Any, now: dt.datetime) -> Claims:
    """The claims of a token this service signed and that has not expired; else a 400 naming ``token``."""
    bad = ValidationError("token is not a verification link of this TiHub (copy the whole link from the email)",
                          field="token")
    if not isinstance(token, str) or not 0 < len(token) <= TOKEN_MAX or token.count(".") != 1:
        raise bad
    payload, sig = token.split(".")
    try:
        given = _unb64(sig)
        fields = json.loads(_unb64(payload))
    except (binascii.Error, ValueError):
        raise bad from None
    if not hmac.compare_digest(given, hmac.new(key, payload.encode(), hashlib.sha256).digest()):
        raise bad
    if not (isinstance(fields, list) and len(fields) == 4 and all(isinstance(f, str) for f in fields[:3])
            and isinstance(fields[3], int)):
        raise bad
    c = Claims(*fields)
    if now.timestamp() > c.expires:
        raise ValidationError("this verification link has expired: set your email again (account page, "
                              "PATCH /me or `ti account set --email`) to get a new one", field="token")
    return c


# -- the session's part ----------------------------------------------------------------------------------
def own_fields(data: dict[str, Any]) -> dict[str, str]:
    """What a user may change of their own profile, checked: unknown fields are refused by name."""
    for key in data:
        if key not in PROFILE_FIELDS:
            raise ValidationError(f"unknown field {key!r}; allowed: {', '.join(sorted(PROFILE_FIELDS))}", field=key)
    if not data:
        raise ValidationError(f"give at least one of {', '.join(PROFILE_FIELDS)}", field=None)
    return profile_fields(data)


def show(session: Session, name: str) -> dict[str, Any]:
    p = render_profile(session.get(m.UserProfile, name))
    return {k: p[k] for k in (*PROFILE_FIELDS, "email_verified")}


@dataclass(frozen=True)
class Outcome:
    """A change of one's own profile: the profile now, and the link to mail (None: none to send) or why not."""

    profile: dict[str, Any]
    link: Claims | None
    why_not: str | None  # "not_configured", "too_soon", or None


def change_own(session: Session, actor: Actor, data: dict[str, Any], now: dt.datetime, *, can_mail: bool,
               lifetime_s: float, min_interval_s: float) -> Outcome:
    """The signed-in user changes their nickname, email, phone. A new email, or the same one still unverified,
    is unverified until its link is opened; a link is made (and the older ones stop counting) unless one went
    to this user less than ``min_interval_s`` ago: TiHub is not a way to mail anyone at any rate."""
    if actor.kind != "user":
        raise Forbidden("only users have a profile (this token is a service's)")
    fields = own_fields(data)
    p = _profile(session, actor.name, lambda: now)
    changed = {k: val for k, val in fields.items() if getattr(p, k) != val}
    for k, val in changed.items():
        setattr(p, k, val)
    if "email" in changed:
        p.email_verified, p.email_nonce = False, ""
    if changed:
        p.changed_at = now
        audit.record(session, actor, "user.change", actor.name, {**changed, "by": "self"}, lambda: now)
    link, why_not = None, None
    if "email" in fields and p.email and not p.email_verified:
        last = p.email_sent_at
        if not can_mail:
            why_not = "not_configured"
        elif last is not None and (now - last).total_seconds() < min_interval_s:
            why_not = "too_soon"
        else:
            p.email_nonce, p.email_sent_at = secrets.token_urlsafe(24), now
            link = Claims(actor.name, p.email, p.email_nonce, int(now.timestamp() + lifetime_s))
    return Outcome(show(session, actor.name), link, why_not)


def mail_failed(session: Session, name: str, nonce: str) -> None:
    """The link's mail did not go: it may be asked for again at once (and this link never counts)."""
    p = session.get(m.UserProfile, name)
    if p is not None and p.email_nonce == nonce:
        p.email_nonce, p.email_sent_at = "", None


def verify(session: Session, actor: Actor, c: Claims, now: dt.datetime) -> dict[str, Any]:
    """The link's user, signed in, opened it: their email is verified if it is still the one the link went to and
    the link is the latest one, not used yet."""
    if actor.kind != "user" or actor.name != c.user:
        raise Forbidden("this link verifies another account's email: sign in as the user it was sent to",
                        field="token")
    p = session.get(m.UserProfile, actor.name)
    if p is None or p.email != c.email:
        raise Conflict("your email has changed since this link was sent: it no longer verifies anything",
                       field="token")
    if not p.email_nonce or not hmac.compare_digest(p.email_nonce, c.nonce):
        raise Conflict("this link was used already, or a newer one was sent: open the newest email's link",
                       field="token")
    p.email_verified, p.email_nonce = True, ""
    audit.record(session, actor, "user.verify-email", actor.name, {"email": p.email}, lambda: now)
    return show(session, actor.name)


def verify_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/services/ti/account/verify-email?token={token}"


def mail_text(c: Claims, url: str, lifetime_s: float) -> tuple[str, str]:
    """The verification email: (subject, body)."""
    hours = lifetime_s / 3600
    until = f"{hours:g} hour{'s' if hours != 1 else ''}" if hours >= 1 else f"{int(lifetime_s // 60)} minutes"
    return ("Verify your email address", "\n".join([
        f"Someone signed in to TiHub as {c.user} set this address ({c.email}) as the email of that account.",
        "", "To confirm it is yours, open this link while signed in to TiHub as that user:", "", url, "",
        f"The link works once, for {until}. Until then TiHub sends no alert notices to this address.",
        "If this was not you, ignore this email: nothing is sent here unless the link is opened.", ""]))
