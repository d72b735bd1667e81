"""MON2-3: the leader's notifier -- alerts reach people by email (SMTP) and webhook.

Every ``interval`` it takes the alerts that need a notice (``alerts.due``: just opened, or last notified
``reminder_interval`` ago while still open), sends each to its recipients (ops/notices.py) by every configured
channel and marks the round sent. A failed send is logged and retried at a later round; what already went out
in a round (an address, a webhook) is not sent again, and one failing channel never holds back the others.
SMTP runs in a worker thread (smtplib blocks); webhooks use tornado's AsyncHTTPClient.

The SMTP password is read from ``smtp_password``, else ``smtp_password_file``, else $TI_SMTP_PASSWORD; it is
never logged, audited or shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import smtplib
import ssl
import time
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from traitlets import Bool, CaselessStrEnum, Float, Int, List, Unicode
from traitlets.config import LoggingConfigurable

from ..ops import alerts, grants, notices
from ..hubclient.api import hub_list
from ..ops.common import utcnow

if TYPE_CHECKING:
    from ..ops.context import Context

    class NotifierContext(Context, Protocol):
        hub_public_url: str  # links in the mails point there unless Notifier.base_url says otherwise


class Notifier(LoggingConfigurable):
    """Sends alert notices by email and webhook, on the leader."""

    interval = Float(5.0, config=True, help="Seconds between two looks for alerts that need a notice.")
    reminder_interval = Float(
        3600.0, config=True,
        help="Seconds between two notices of an alert that stays open (reminders repeat until its condition "
             "clears). 0: only the first notice.")
    retry_interval = Float(
        60.0, config=True,
        help="Seconds before a notice that failed (SMTP server or webhook down, refused) is tried again.")
    base_url = Unicode(
        "", config=True,
        help="The hub's address as people reach it (https://hub.example.org), for the links in notices. "
             "Empty: TiService.hub_public_url.")
    subject_prefix = Unicode("[TiHub]", config=True, help="Put before every email's subject.")
    admin_emails = List(
        Unicode(), config=True,
        help="Addresses that receive every alert (the operators' list, an on-call mailbox).")
    notify_role_admins = Bool(
        True, config=True,
        help="Also send every alert to the profile email of each user whose TiHub roles give users:manage "
             "(read from the hub's users and groups every admin_refresh_interval).")
    admin_refresh_interval = Float(300.0, config=True, help="Seconds between two reads of who the admins are.")
    smtp_host = Unicode("", config=True, help="SMTP server to send alert emails through. Empty: no emails.")
    smtp_port = Int(0, config=True, help="SMTP port. 0: 465 with smtp_tls 'ssl', else 587 with 'starttls', "
                                         "else 25.")
    smtp_tls = CaselessStrEnum(
        ["none", "starttls", "ssl"], default_value="starttls", config=True,
        help="How the SMTP connection is encrypted: 'starttls' (upgrade a plain connection, port 587), 'ssl' "
             "(TLS from the start, port 465) or 'none' (a local relay only: credentials are then refused).")
    smtp_ca_file = Unicode(
        "", config=True,
        help="CA certificates (PEM) to verify the SMTP server with. Empty: the system's. The server's "
             "certificate is always verified.")
    smtp_username = Unicode("", config=True, help="SMTP login name. Empty: no login.")
    smtp_password = Unicode(
        "", config=True,
        help="SMTP password (prefer smtp_password_file or $TI_SMTP_PASSWORD: a config file is often readable). "
             "Never logged or shown.")
    smtp_password_file = Unicode("", config=True, help="File holding the SMTP password (trailing newline ignored).")
    smtp_timeout = Float(20.0, config=True, help="Seconds an SMTP exchange may take.")
    sender = Unicode("", config=True, help="From: address of alert emails, e.g. 'TiHub <tihub@example.org>'. "
                                           "Required for email.")
    webhook_urls = List(
        Unicode(), config=True,
        help="URLs that receive a JSON POST per notice: the alert's fields (id, key, kind, rule, severity, "
             "subject, message, job_id, machine, users, figures, fired_at, notices, ...) plus recipients, "
             "reminder, text and link.")
    webhook_timeout = Float(10.0, config=True, help="Seconds a webhook may take to answer.")
    email_link_lifetime = Float(
        86400.0, config=True,
        help="Seconds the link that verifies a user's email stays valid (issue 31: alert notices go only to "
             "verified emails). Sent through the SMTP settings above; without smtp_host no email can be verified "
             "(an admin's email counts as verified).")
    email_link_interval = Float(
        30.0, config=True,
        help="Seconds a user waits between two verification links mailed to them (TiHub is no way to mail "
             "anyone at any rate).")

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs: Any):
        super().__init__(**kwargs)
        self.clock = clock
        self.done: dict[tuple[int, int], set[str]] = {}  # (alert, notice round) -> targets already sent
        self.failed_at: dict[tuple[int, int, str], float] = {}
        self.admins: set[str] = set()
        self.admins_at = float("-inf")
        self.sent = 0  # notices sent (emails + webhook posts), for tests and metrics

    # -- configuration -------------------------------------------------------------------------------------
    def email_enabled(self) -> bool:
        return bool(self.smtp_host)

    def enabled(self) -> bool:
        return self.email_enabled() or bool(self.webhook_urls)

    def port(self) -> int:
        return self.smtp_port or {"ssl": 465, "starttls": 587}.get(self.smtp_tls, 25)

    def password(self) -> str:
        if self.smtp_password:
            return self.smtp_password
        if self.smtp_password_file:
            return Path(self.smtp_password_file).read_text().rstrip("\r\n")
        return os.environ.get("TI_SMTP_PASSWORD", "")

    def check(self) -> None:
        """Refuse a configuration that cannot work, at start-up, saying which setting."""
        if self.email_enabled() and not self.sender:
            raise ValueError("Notifier.sender is required when Notifier.smtp_host is set (the From: of alerts)")
        if self.smtp_username and self.smtp_tls == "none":
            raise ValueError("Notifier.smtp_username is set with smtp_tls 'none': the password would cross the "
                             "network in clear; use 'starttls' or 'ssl'")

    # -- the loop ------------------------------------------------------------------------------------------
    async def run_forever(self, svc: NotifierContext) -> None:
        if not self.enabled():
            self.log.info("alert notices: no Notifier.smtp_host nor webhook_urls, alerts show in TiHub only")
            return
        self.check()
        self.log.info("alert notices by %s, reminders every %s s", " and ".join(
            (["email via %s:%d (%s)" % (self.smtp_host, self.port(), self.smtp_tls)] if self.email_enabled()
             else []) + ([f"{len(self.webhook_urls)} webhook(s)"] if self.webhook_urls else [])),
            self.reminder_interval)
        while True:
            try:
                await self.round(svc)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("alert notices: a round failed")
            await asyncio.sleep(self.interval)

    async def round(self, svc: NotifierContext) -> int:
        """One look: send what is due; returns how many alerts had their notice completed."""
        if self.notify_role_admins and self.clock() - self.admins_at >= self.admin_refresh_interval:
            await self.refresh_admins(svc)
        due = await svc.db(self._due, readonly=True)
        if not due:
            return 0
        base = self.base_url or svc.hub_public_url
        completed = []
        for a, to in due:
            if await self.notify(a, to, base):
                completed.append(a["id"])
        if completed:
            await svc.db(alerts.mark_notified, completed, utcnow())
        live = {(a["id"], a["notices"]) for a, _ in due}
        self.done = {k: v for k, v in self.done.items() if k in live}
        self.failed_at = {k: v for k, v in self.failed_at.items() if k[:2] in live}
        return len(completed)

    def _due(self, session: Any) -> list[tuple[dict[str, Any], list[str]]]:
        rows = alerts.due(session, utcnow(), self.reminder_interval)
        if not rows:
            return []
        emails = notices.emails(session, {u for a in rows for u in a.users} | self.admins)
        return [(alerts.render(a), notices.recipients(alerts.notice_users(a), self.admins, emails, self.admin_emails))
                for a in rows]

    async def refresh_admins(self, svc: NotifierContext) -> None:
        self.admins_at = self.clock()
        try:
            users, _ = await hub_list(svc.hub_auth(), "users")
            groups, _ = await hub_list(svc.hub_auth(), "groups")
        except Exception as e:  # keep the last known admins
            self.log.warning("alert notices: cannot read the admins from the hub (%s); keeping %d known", e,
                             len(self.admins))
            return
        snap = await svc.db(grants.snapshot, readonly=True)
        self.admins = notices.role_admins(snap, grants.People.from_hub(users, groups), svc.default_role)

    async def notify(self, a: dict[str, Any], to: list[str], base: str) -> bool:
        """Send one alert's notice by every channel; True once every target has it (this round or before)."""
        key = (a["id"], a["notices"])
        done = self.done.setdefault(key, set())
        now = self.clock()
        targets = ([f"mailto:{t}" for t in to] if self.email_enabled() else []) + list(self.webhook_urls)

        def ready(t: str) -> bool:
            return t not in done and now - self.failed_at.get((*key, t), float("-inf")) >= self.retry_interval

        mail = [t[len("mailto:"):] for t in targets if t.startswith("mailto:") and ready(t)]
        hooks = [t for t in targets if not t.startswith("mailto:") and ready(t)]
        results: list[Any] = await asyncio.gather(
            *([asyncio.to_thread(self.send_mail, a, mail, base)] if mail else []),
            *(self.post(url, a, to, base) for url in hooks), return_exceptions=True)
        if mail:
            sent_to = results.pop(0)
            if isinstance(sent_to, BaseException):
                self.log.warning("alert %s (%s): email not sent (%s), retried in %s s", a["id"], a["key"],
                                 _why(sent_to), self.retry_interval)
                sent_to = set()
            for t in mail:
                self._outcome(key, f"mailto:{t}", t in sent_to, done, now)
        for url, r in zip(hooks, results):
            if isinstance(r, BaseException):
                self.log.warning("alert %s (%s): webhook %s failed (%s), retried in %s s", a["id"], a["key"],
                                 _safe_url(url), _why(r), self.retry_interval)
            self._outcome(key, url, not isinstance(r, BaseException), done, now)
        return all(t in done for t in targets)

    def _outcome(self, key: tuple[int, int], target: str, ok: bool, done: set[str], now: float) -> None:
        if ok:
            done.add(target)
            self.sent += 1
        else:
            self.failed_at[(*key, target)] = now

    # -- channels ------------------------------------------------------------------------------------------
    def message(self, a: dict[str, Any], to: str, base: str) -> EmailMessage:
        msg = EmailMessage()
        msg["Subject"] = notices.subject(a, self.subject_prefix)
        msg["From"] = self.sender
        msg["To"] = to  # one message per address: recipients do not see each other's
        msg["Date"] = formatdate(localtime=False)
        msg["Message-ID"] = make_msgid(domain="tihub")
        msg["X-TiHub-Alert"] = a["key"]
        msg.set_content(notices.body(a, base, self.reminder_interval))
        return msg

    def send_mail(self, a: dict[str, Any], to: list[str], base: str) -> set[str]:
        """In a worker thread: one SMTP session, one message per address; returns the addresses accepted (an
        address the server refuses is logged, the others still go)."""
        accepted: set[str] = set()
        with self.smtp() as smtp:
            for addr in to:
                try:
                    smtp.send_message(self.message(a, addr, base), to_addrs=[addr])
                    accepted.add(addr)
                except (smtplib.SMTPRecipientsRefused, smtplib.SMTPDataError, smtplib.SMTPSenderRefused) as e:
                    self.log.warning("alert %s: the SMTP server refused %s (%s)", a["id"], addr, _why(e))
        return accepted

    @contextlib.contextmanager
    def smtp(self) -> Iterator[smtplib.SMTP]:
        """A logged-in SMTP session with the configured server (blocking: worker threads only)."""
        ctx = ssl.create_default_context(cafile=self.smtp_ca_file or None)
        cls = smtplib.SMTP_SSL if self.smtp_tls == "ssl" else smtplib.SMTP
        kw: dict[str, Any] = {"context": ctx} if self.smtp_tls == "ssl" else {}
        with cls(self.smtp_host, self.port(), timeout=self.smtp_timeout, **kw) as smtp:
            if self.smtp_tls == "starttls":
                smtp.starttls(context=ctx)
            if self.smtp_username:
                smtp.login(self.smtp_username, self.password())
            yield smtp

    def send_text(self, to: str, subject: str, text: str, headers: dict[str, str] | None = None) -> None:
        """In a worker thread: one plain-text email to one address (a verification link); raises if not sent."""
        self.check()
        msg = EmailMessage()
        msg["Subject"] = f"{self.subject_prefix.strip()} {subject}".strip()
        msg["From"] = self.sender
        msg["To"] = to
        msg["Date"] = formatdate(localtime=False)
        msg["Message-ID"] = make_msgid(domain="tihub")
        for k, val in (headers or {}).items():
            msg[k] = val
        msg.set_content(text)
        with self.smtp() as smtp:
            smtp.send_message(msg, to_addrs=[to])

    async def post(self, url: str, a: dict[str, Any], to: list[str], base: str) -> None:
        body = json.dumps(notices.webhook_payload(a, to, base, self.subject_prefix))
        await AsyncHTTPClient().fetch(HTTPRequest(url, method="POST", body=body, request_timeout=self.webhook_timeout,
                                                  headers={"Content-Type": "application/json"}))


def _why(e: BaseException) -> str:
    # an SMTP error may echo what it was sent; only its class and code go to the log
    if isinstance(e, smtplib.SMTPResponseException):
        return f"{type(e).__name__} {e.smtp_code}"
    if isinstance(e, smtplib.SMTPRecipientsRefused):
        return f"{type(e).__name__}: {', '.join(f'{k} {v[0]}' for k, v in e.recipients.items())}"
    return f"{type(e).__name__}: {e}" if not isinstance(e, smtplib.SMTPException) else type(e).__name__


def _safe_url(url: str) -> str:
    # a webhook URL may carry a token in its path or query (Slack, Teams): only its origin goes to the log
    from urllib.parse import urlsplit

    p = urlsplit(url)
    return f"{p.scheme}://{p.hostname}{':%d' % p.port if p.port else ''}/..."
