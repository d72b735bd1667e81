"""A user's own profile and the email verification links (issue 31, ops/profile.py): the token is signed,
expires and verifies once; the rules run on a real SQLite database migrated by Alembic; alert notices reach
only verified emails; the migration keeps the emails admins had set verified."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import text

from ti_hub.db import models as m
from ti_hub.db.session import make_engine, make_sessionmaker, sqlite_url, upgrade
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, Forbidden, ValidationError
from ti_hub.ops import notices, people
from ti_hub.ops import profile as P

KEY = P.link_key(b"a service secret")
NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
ALICE, BOB = Actor("alice"), Actor("bob")


def test_a_token_is_signed_expires_and_is_refused_when_touched():
    c = P.Claims("alice", "a@example.org", "n0nce", int(NOW.timestamp()) + 60)
    token = P.make_token(KEY, c)
    assert P.read_token(KEY, token, NOW) == c
    assert P.link_key(b"a service secret") != b"a service secret"  # never the secret itself
    payload, sig = token.split(".")
    forged = P.make_token(KEY, P.Claims("bob", "a@example.org", "n0nce", c.expires)).split(".")[0] + "." + sig
    for bad in (forged, token + "x", payload, "", "a.b.c", "%%%.%%%", "x" * 3000, None, 7,
                P.make_token(P.link_key(b"another secret"), c)):
        with pytest.raises(ValidationError) as e:
            P.read_token(KEY, bad, NOW)
        assert e.value.field == "token" and "not a verification link" in e.value.detail
    with pytest.raises(ValidationError, match="expired"):
        P.read_token(KEY, token, NOW + dt.timedelta(seconds=61))


@pytest.fixture
def db(tmp_path):
    url = sqlite_url(tmp_path / "t.sqlite")
    upgrade(url)
    engine = make_engine(url)
    maker = make_sessionmaker(engine)

    def run(fn, *a, **kw):
        with maker.begin() as s:
            return fn(s, *a, **kw)

    yield run
    engine.dispose()


def change(db, actor, data, now=NOW, can_mail=True):
    return db(P.change_own, actor, data, now, can_mail=can_mail, lifetime_s=3600, min_interval_s=30)


def test_own_changes_are_checked_whole_and_unknown_fields_refused(db):
    for data, field in (({"email": "not an email"}, "email"), ({"phone": "call me"}, "phone"),
                        ({"nickname": "a\nb"}, "nickname"), ({"admin": True}, "admin"), ({"enabled": False}, "enabled"),
                        ({"nickname": "Ok", "email": "bad"}, "email")):
        with pytest.raises(ValidationError) as e:
            change(db, ALICE, data)
        assert e.value.field == field
    assert db(P.show, "alice") == {"nickname": "", "email": "", "phone": "", "email_verified": False}
    with pytest.raises(Forbidden):
        change(db, Actor("ti-spawner", kind="service"), {"nickname": "x"})
    out = change(db, ALICE, {"nickname": " Alice ", "phone": "+1 555 0100"})
    assert out.profile == {"nickname": "Alice", "email": "", "phone": "+1 555 0100", "email_verified": False}
    assert out.link is None and out.why_not is None


def test_a_link_verifies_its_users_email_once_and_a_newer_link_or_email_voids_it(db):
    out = change(db, ALICE, {"email": "alice@example.org"})
    assert out.link and out.link.user == "alice" and not out.profile["email_verified"]
    first = out.link
    assert db(notices.emails, ["alice"]) == {}  # unverified: no alert notices
    with pytest.raises(Forbidden):  # another user, signed in, cannot use it; it stays good for alice
        db(P.verify, BOB, first, NOW)
    # too soon for another link; later, a new one voids the first
    assert change(db, ALICE, {"email": "alice@example.org"}, NOW + dt.timedelta(seconds=5)).why_not == "too_soon"
    second = change(db, ALICE, {"email": "alice@example.org"}, NOW + dt.timedelta(seconds=31)).link
    with pytest.raises(Conflict, match="newer one"):
        db(P.verify, ALICE, first, NOW)
    assert db(P.verify, ALICE, second, NOW)["email_verified"] is True
    assert db(notices.emails, ["alice"]) == {"alice": "alice@example.org"}
    with pytest.raises(Conflict):  # single use
        db(P.verify, ALICE, second, NOW)
    # the same email again changes nothing and mails nothing; another one is unverified again
    again = change(db, ALICE, {"email": "alice@example.org"}, NOW + dt.timedelta(minutes=5))
    assert again.link is None and again.profile["email_verified"] is True
    third = change(db, ALICE, {"email": "new@example.org"}, NOW + dt.timedelta(minutes=5)).link
    assert db(P.show, "alice")["email_verified"] is False and db(notices.emails, ["alice"]) == {}
    change(db, ALICE, {"email": "other@example.org"}, NOW + dt.timedelta(minutes=10))
    with pytest.raises(Conflict, match="changed"):  # the link went to an address that is no longer hers
        db(P.verify, ALICE, third, NOW)


def test_without_smtp_no_link_is_made_and_a_failed_mail_may_be_retried_at_once(db):
    out = change(db, ALICE, {"email": "alice@example.org"}, can_mail=False)
    assert out.link is None and out.why_not == "not_configured"
    link = change(db, ALICE, {"email": "alice@example.org"}).link
    db(P.mail_failed, "alice", link.nonce)
    with pytest.raises(Conflict):  # the link that was never mailed never counts
        db(P.verify, ALICE, link, NOW)
    assert change(db, ALICE, {"email": "alice@example.org"}, NOW + dt.timedelta(seconds=1)).link is not None


def test_an_admins_email_counts_as_verified(db):
    change(db, ALICE, {"email": "alice@example.org"})
    admin = Actor("root")
    db(people.change_profile, admin, "alice", {"email": "alice@example.org"})
    assert db(P.show, "alice")["email_verified"] is True
    db(people.change_profile, admin, "alice", {"email": ""})
    assert db(P.show, "alice")["email_verified"] is False


def test_the_migration_keeps_the_emails_admins_had_set_verified(tmp_path):
    url = sqlite_url(tmp_path / "old.sqlite")
    upgrade(url, "0017")
    engine = make_engine(url)
    with engine.begin() as conn:
        for name, mail in (("set", "s@example.org"), ("unset", "")):
            conn.execute(text("INSERT INTO ti_user_profiles (name, nickname, email, phone, enabled, changed_at) "
                              "VALUES (:n, '', :e, '', 1, '2026-01-01 00:00:00')"), {"n": name, "e": mail})
    upgrade(url)
    with make_sessionmaker(engine).begin() as s:
        got = {p.name: (p.email_verified, p.email_nonce) for p in s.query(m.UserProfile)}
    engine.dispose()
    assert got == {"set": (True, ""), "unset": (False, "")}


def test_the_mail_names_the_user_the_link_and_how_long_it_works():
    c = P.Claims("alice", "a@example.org", "n", 0)
    subject, body = P.mail_text(c, "https://hub.example.org/services/ti/account/verify-email?token=T", 86400)
    assert subject == "Verify your email address"
    assert "as alice" in body and "https://hub.example.org/services/ti/account/verify-email?token=T" in body
    assert "for 24 hours" in body and "signed in" in body
