"""A user's own profile (issue 31): the I/O around ops/profile.py -- the transaction, then the verification
mail through the Notifier's SMTP settings (in a worker thread: smtplib blocks).

The link is opened on a page that needs the user signed in as the user it names, not by anyone holding it:
a mail scanner or a person the email was forwarded to cannot verify it (their GET meets the hub's login, and
another user's session is refused, the link staying good for its owner), and "verified" then means the owner
of the account also reads that mailbox, which is what alert notices need.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..domain.actor import Actor
from . import profile as P
from .common import utcnow

if TYPE_CHECKING:
    from .context import Verification

log = logging.getLogger("ti_hub.profile")

NOT_CONFIGURED = ("this TiHub sends no email (no SMTP server is configured: Notifier.smtp_host), so the address "
                  "cannot be verified here and alert notices do not reach it; an administrator can set it for you "
                  "(an admin's email counts as verified)")


async def show_me(ti: Verification, actor: Actor) -> dict[str, Any]:
    if actor.kind != "user":  # a service has no profile (nor that of a user who shares its name)
        return {"nickname": "", "email": "", "phone": "", "email_verified": False}
    return await ti.db(P.show, actor.name, readonly=True)


async def change_me(ti: Verification, actor: Actor, data: dict[str, Any], fallback_base: str) -> dict[str, Any]:
    """PATCH /me: the profile now, with ``verification``: what became of the link for a new or unverified
    email (None when none was asked for)."""
    n = ti.notifier
    out = await ti.db(P.change_own, actor, data, utcnow(), can_mail=n.email_enabled(),
                      lifetime_s=n.email_link_lifetime, min_interval_s=n.email_link_interval)
    verification: dict[str, str] | None = None
    if out.why_not == "not_configured":
        verification = {"status": "not_configured", "detail": NOT_CONFIGURED}
    elif out.why_not == "too_soon":
        verification = {"status": "too_soon", "detail": f"a link was mailed to you less than "
                                                        f"{n.email_link_interval:g} s ago; set the email again "
                                                        "later for a new one"}
    elif out.link is not None:
        verification = await _send(ti, out.link, n.base_url or ti.hub_public_url or fallback_base)
    return {**out.profile, "verification": verification}


async def _send(ti: Verification, c: P.Claims, base: str) -> dict[str, str]:
    n = ti.notifier
    url = P.verify_url(base, P.make_token(ti.link_key, c))
    subject, text = P.mail_text(c, url, n.email_link_lifetime)
    try:
        await asyncio.to_thread(n.send_text, c.email, subject, text, {"X-TiHub-Verify": c.user})
    except Exception as e:  # the server down or refusing: the user may ask again at once
        log.warning("email verification for %s: not sent (%s)", c.user, type(e).__name__)
        await ti.db(P.mail_failed, c.user, c.nonce)
        return {"status": "failed", "detail": "the verification email could not be sent (the mail server did not "
                                              "take it); set the email again to retry, or ask an administrator"}
    return {"status": "sent", "detail": f"a link was mailed to {c.email}: open it while signed in to TiHub "
                                        "to verify the address"}


async def verify(ti: Verification, actor: Actor, token: str) -> dict[str, Any]:
    now = utcnow()
    claims = P.read_token(ti.link_key, token, now)
    return await ti.db(P.verify, actor, claims, now)
