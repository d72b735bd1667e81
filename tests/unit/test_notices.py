"""Notices of alerts (ops/notices.py, tasks/notifier.py): the message text and the recipients (pure), and
the notifier's SMTP sending against a real SMTP server (aiosmtpd) with STARTTLS or TLS and a login, the server's
self-signed certificate verified through smtp_ca_file."""

from __future__ import annotations

import datetime as dt
import email
import ipaddress
import smtplib
import socket
import ssl
import threading

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from ti_hub.domain import scopes as S
from ti_hub.ops import notices
from ti_hub.ops.grants import People, Snapshot
from ti_hub.tasks.notifier import Notifier, _safe_url

ALERT = {"id": 7, "key": "job:42:overrun", "kind": "job", "rule": "overrun", "severity": "warning",
         "subject": "Job 42 (alice/train) is running past its declared duration",
         "message": "running longer than declared: 60 s declared, running for 75 s", "job_id": 42, "machine": "",
         "users": ["alice"], "figures": {"declared_s": 60, "ran_s": 75}, "fired_at": "2026-11-27T03:00:00Z",
         "last_notified_at": None, "notices": 0, "cleared_at": None, "open": True}


def test_the_subject_says_what_and_where_and_a_reminder_says_so():
    assert notices.subject(ALERT, "[TiHub]") == "[TiHub] Job 42 (alice/train) is running past its declared duration"
    hot = {**ALERT, "job_id": None, "machine": "gpu-7", "subject": "GPU 3 at 92 C", "notices": 2}
    assert notices.subject(hot, "[ops]") == "[ops] Reminder: GPU 3 at 92 C on gpu-7"
    assert notices.subject({**hot, "subject": "gpu-7: GPU 3 at 92 C"}, "") == "Reminder: gpu-7: GPU 3 at 92 C"


def test_the_body_gives_the_figures_the_link_and_the_reminders():
    text = notices.body(ALERT, "https://hub.example.org/", 3600)
    assert "running for 75 s" in text and "  declared_s: 60\n  ran_s: 75\n" in text
    assert "See: https://hub.example.org/services/ti/jobs?job=42" in text and "ti job show 42" in text
    assert "every 1 h until the condition clears (this is notice 1)" in text
    assert "Concerns: alice (and the admins)" in text
    machine = notices.body({**ALERT, "job_id": None, "machine": "gpu-7", "notices": 1}, "", 0)
    assert "See: /services/ti/cluster" in machine and "No reminders follow" in machine
    assert notices.fmt_seconds(90) == "90 s" and notices.fmt_seconds(600) == "10 min"


def test_recipients_are_the_named_users_and_the_admins_once_each():
    emails = {"alice": "alice@example.org", "root": "Root@example.org", "bob": "bob@example.org"}
    assert notices.recipients(["alice", "nomail"], {"root", "alice"}, emails, ["oncall@example.org"]) == \
        ["alice@example.org", "oncall@example.org", "Root@example.org"]
    assert notices.recipients([], set(), emails, []) == []


def test_admins_are_the_users_whose_roles_give_users_manage():
    snap = Snapshot("s", {"user": frozenset(S.USER_SCOPES), "ti-admin": frozenset(S.ADMIN_SCOPES),
                          "quota-keeper": frozenset({S.MANAGE_USERS})},
                    user_roles={"kim": ("quota-keeper",)}, group_roles={S.ADMIN_GROUP: ("ti-admin",)})
    people = People(frozenset({"root", "kim", "alice"}), {S.ADMIN_GROUP: frozenset({"root"})})
    assert notices.role_admins(snap, people, "user") == {"root", "kim"}


def test_the_webhook_payload_and_the_logged_url():
    p = notices.webhook_payload({**ALERT, "notices": 1}, ["a@example.org"], "https://h", "[TiHub]")
    assert p["recipients"] == ["a@example.org"] and p["reminder"] is True and p["key"] == "job:42:overrun"
    assert p["link"] == "https://h/services/ti/jobs?job=42" and p["text"].startswith("[TiHub] Reminder: Job 42")
    assert _safe_url("https://hooks.example.org:8443/T0/B1/secret?token=x") == "https://hooks.example.org:8443/..."


def test_a_configuration_that_cannot_work_is_refused():
    with pytest.raises(ValueError, match="sender"):
        Notifier(smtp_host="mail").check()
    with pytest.raises(ValueError, match="in clear"):
        Notifier(smtp_host="mail", sender="t@example.org", smtp_tls="none", smtp_username="u").check()
    assert Notifier(smtp_tls="ssl").port() == 465 and Notifier().port() == 587
    assert Notifier(smtp_tls="none").port() == 25 and Notifier(smtp_port=2525).port() == 2525


# -- a real SMTP server ------------------------------------------------------------------------------------------
def self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    crt, pem = tmp_path / "smtp.crt", tmp_path / "smtp.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, pem)
    return str(crt), ctx


class Inbox:
    def __init__(self):
        self.got: list[tuple[list[str], email.message.Message]] = []
        self.logins: list[tuple[bytes, bytes]] = []

    async def handle_DATA(self, server, session, envelope):
        self.got.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 OK"

    def auth(self, server, session, envelope, mechanism, data):
        ok = isinstance(data, LoginPassword) and data.login == b"tihub" and data.password == b"s3cret-pw"
        self.logins.append((data.login, data.password) if isinstance(data, LoginPassword) else (b"?", b"?"))
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535 itself


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
@pytest.mark.parametrize("mode", ["starttls", "ssl"])
def test_mail_goes_through_a_tls_server_with_a_login(tmp_path, mode, monkeypatch):
    ca, ctx = self_signed(tmp_path)
    inbox = Inbox()
    port = free_port()
    # aiosmtpd offers AUTH on an implicit-TLS connection only when not asked for STARTTLS (it is TLS already)
    kw = dict(tls_context=ctx, require_starttls=True) if mode == "starttls" else \
        dict(ssl_context=ctx, auth_require_tls=False)
    ctl = Controller(inbox, hostname="127.0.0.1", port=port, server_hostname="localhost", authenticator=inbox.auth,
                     auth_required=True, **kw)
    ctl.start()
    try:
        pw = tmp_path / "pw"
        pw.write_text("s3cret-pw\n")
        n = Notifier(smtp_host="localhost", smtp_port=port, smtp_tls=mode, smtp_ca_file=ca, smtp_username="tihub",
                     smtp_password_file=str(pw), sender="TiHub <tihub@example.org>")
        n.check()
        assert n.send_mail(ALERT, ["alice@example.org", "oncall@example.org"], "https://hub") == \
            {"alice@example.org", "oncall@example.org"}
        assert [r for r, _ in inbox.got] == [["alice@example.org"], ["oncall@example.org"]]  # one each
        msg = inbox.got[0][1]
        assert msg["To"] == "alice@example.org" and msg["X-TiHub-Alert"] == "job:42:overrun"
        assert msg["Subject"] == "[TiHub] Job 42 (alice/train) is running past its declared duration"
        # a wrong password is refused and nothing is sent; the password is in no error text
        monkeypatch.setenv("TI_SMTP_PASSWORD", "wrong-pw")
        bad = Notifier(smtp_host="localhost", smtp_port=port, smtp_tls=mode, smtp_ca_file=ca,
                       smtp_username="tihub", sender="t@example.org")
        with pytest.raises(smtplib.SMTPAuthenticationError) as e:
            bad.send_mail(ALERT, ["alice@example.org"], "")
        assert "wrong-pw" not in str(e.value) and len(inbox.got) == 2
        # the server's certificate is verified: without its CA the connection is refused
        with pytest.raises(ssl.SSLError):
            Notifier(smtp_host="localhost", smtp_port=port, smtp_tls=mode, smtp_username="tihub",
                     smtp_password="s3cret-pw", sender="t@example.org").send_mail(ALERT, ["a@example.org"], "")
    finally:
        ctl.stop()


def test_a_failed_channel_is_retried_alone_and_the_round_completes_once_all_went_out():
    """The webhook answers 500 once: the email goes out once, the webhook is posted again at the next try, and
    only then is the notice complete (marked notified by the caller)."""
    import asyncio
    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    posts: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(500 if len(posts) == 1 else 204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    inbox = Inbox()
    ctl = Controller(inbox, hostname="127.0.0.1", port=free_port())
    ctl.start()
    try:
        n = Notifier(smtp_host="127.0.0.1", smtp_port=ctl.port, smtp_tls="none", sender="t@example.org",
                     webhook_urls=[f"http://127.0.0.1:{server.server_address[1]}/hook"], retry_interval=0)

        async def twice():
            return [await n.notify(ALERT, ["alice@example.org"], "https://hub") for _ in range(2)]

        assert asyncio.run(twice()) == [False, True]
        assert len(inbox.got) == 1 and len(posts) == 2  # the email was not sent again
        assert posts[1]["recipients"] == ["alice@example.org"] and n.sent == 2
    finally:
        ctl.stop()
        server.shutdown()
