"""ACC1-2: the approval rule, its store (the hub's users_info table), and how the OAuth and password
authenticators use it, on an in-memory hub database. The browser test (tests/browser/test_oidc.py) runs the
same flow against a real OpenID Connect provider."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from jupyterhub import orm
from nativeauthenticator.orm import UserInfo
from traitlets.config import Config

from ti_hub.hub.auth import APPROVE, ASK, LET_IN, WAIT, Approvals, TiAuthenticator, decide
from ti_hub.hub.oauth import (TiGitHubOAuthenticator, TiGitLabOAuthenticator, TiOIDCAuthenticator,
                          discovered_endpoints, email_of, restricting_allow_config)
from ti_hub.hub.oauth_pages import ApprovalPage, AwaitingApproval


@pytest.fixture
def db():
    session = orm.new_session_factory("sqlite://")()  # every table of the hub's Base, users_info included
    yield session
    session.close()


def oidc(db, **settings) -> TiOIDCAuthenticator:
    c = Config()
    for key, value in settings.items():
        setattr(c.TiOIDCAuthenticator, key, value)
    return TiOIDCAuthenticator(config=c, db=db)


def model(name: str, admin: bool = False, email: str | None = None) -> dict:
    """What oauthenticator's authenticate() hands to check_allowed."""
    return {"name": name, "admin": True if admin else None, "auth_state": {"oauth_user": {"email": email}}}


@pytest.mark.parametrize("approved, admin, verdict", [
    (None, False, ASK),       # first login: a request for the admins
    (False, False, WAIT),     # still waiting, or taken back
    (True, False, LET_IN),
    (None, True, APPROVE),    # admins in admin_users are approved at once
    (False, True, APPROVE),
    (True, True, LET_IN),
])
def test_decide(approved, admin, verdict):
    assert decide(approved, admin) == verdict


def test_approvals_store(db):
    a = Approvals(db)
    assert a.get("ann") is None
    a.ask("ann", "ann@example.org")
    assert a.get("ann") is False
    row = UserInfo.find(db, "ann")
    assert row.email == "ann@example.org"
    assert not row.is_valid_password("") and not row.is_valid_password("ann")  # no usable password
    assert a.set("ann", True) and a.get("ann") is True
    assert not a.discard("ann")  # an approved account is taken back, never discarded
    assert a.set("ann", False) and a.discard("ann") and a.get("ann") is None
    a.ask("bob", "not an address")  # NativeAuthenticator's e-mail check refuses it: kept without one
    assert a.get("bob") is False and UserInfo.find(db, "bob").email is None
    assert not a.set("nobody", True)
    assert [r.username for r in a.all()] == ["bob"]


async def test_first_oauth_login_asks_and_waits_until_approved(db):
    auth = oidc(db)
    with pytest.raises(AwaitingApproval) as e:
        await auth.check_allowed("ann", model("ann", email="ann@example.org"))
    assert e.value.status_code == 403 and not e.value.taken_back
    assert auth.approvals.get("ann") is False and UserInfo.find(db, "ann").email == "ann@example.org"
    with pytest.raises(AwaitingApproval):  # every login reads the approval again
        await auth.check_allowed("ann", model("ann"))
    assert len(auth.approvals.all()) == 1
    auth.approvals.set("ann", True)
    assert await auth.check_allowed("ann", model("ann")) is True
    # taken back after ann used the hub: she is told so
    auth.approvals.set("ann", False)
    db.add(orm.User(name="ann", last_activity=datetime.now(timezone.utc).replace(tzinfo=None)))
    db.commit()
    with pytest.raises(AwaitingApproval) as e:
        await auth.check_allowed("ann", model("ann"))
    assert e.value.taken_back


async def test_admins_are_approved_at_once(db):
    auth = oidc(db, admin_users={"boss"})
    assert await auth.check_allowed("boss", model("boss", admin=True)) is True
    assert auth.approvals.get("boss") is True
    auth.approvals.set("boss", False)  # an admin's approval comes back at their next login
    assert await auth.check_allowed("boss", model("boss", admin=True)) is True
    assert auth.approvals.get("boss") is True


async def test_site_allow_settings_decide_who_may_ask(db):
    auth = oidc(db, allowed_users={"ann"})
    assert restricting_allow_config(auth) == ["allowed_users"]
    assert await auth.check_allowed("eve", model("eve")) is False
    assert auth.approvals.get("eve") is None  # no request on the admins' list
    with pytest.raises(AwaitingApproval):  # allowed to ask, still waits for approval
        await auth.check_allowed("ann", model("ann"))


def test_restricting_allow_config_per_provider(db):
    assert restricting_allow_config(oidc(db)) == []
    assert restricting_allow_config(oidc(db, allow_all=True)) == []  # never a restriction, only a warning
    c = Config()
    c.GitHubOAuthenticator.allowed_organizations = {"example-org"}
    assert restricting_allow_config(TiGitHubOAuthenticator(config=c, db=db)) == ["allowed_organizations"]
    c = Config()
    c.GitLabOAuthenticator.allowed_gitlab_groups = {"ml"}
    c.GitLabOAuthenticator.allow_existing_users = True
    assert restricting_allow_config(TiGitLabOAuthenticator(config=c, db=db)) == [
        "allow_existing_users", "allowed_gitlab_groups"]


async def test_refresh_ends_sessions_whose_approval_was_taken_back(db):
    auth = oidc(db, admin_users={"boss"})

    class U:
        def __init__(self, name):
            self.name = name

    auth.approvals.ask("ann", approved=True)
    assert await auth.refresh_user(U("ann")) is True
    auth.approvals.set("ann", False)
    assert await auth.refresh_user(U("ann")) is False
    assert await auth.refresh_user(U("never-asked")) is False
    assert await auth.refresh_user(U("boss")) is True


def test_deleting_a_user_forgets_the_approval(db):
    auth = oidc(db)
    auth.approvals.ask("ann", approved=True)

    class U:
        name = "ann"

    auth.delete_user(U())
    assert auth.approvals.get("ann") is None


def test_oidc_defaults_and_handlers(db):
    auth = oidc(db, oidc_issuer="http://idp.test")
    assert auth.scope == ["openid", "profile", "email"]
    assert auth.username_claim == "preferred_username"
    assert auth.login_service == "OpenID Connect"
    assert auth.allow_all is False
    handlers = dict(auth.get_handlers(None))
    assert handlers["/authorize"] is ApprovalPage
    assert handlers["/oauth_callback"].__name__ == "WaitingForApproval"
    assert issubclass(handlers["/oauth_callback"], type(auth).callback_handler)


def test_discovered_endpoints():
    doc = {"issuer": "https://sso.test/realms/x", "authorization_endpoint": "https://sso.test/auth",
           "token_endpoint": "https://sso.test/token", "userinfo_endpoint": "https://sso.test/me"}
    assert discovered_endpoints(doc, "https://sso.test/realms/x/") == {
        "authorize_url": "https://sso.test/auth", "token_url": "https://sso.test/token",
        "userdata_url": "https://sso.test/me"}
    with pytest.raises(ValueError, match="names issuer"):
        discovered_endpoints(doc, "https://evil.test")
    with pytest.raises(ValueError, match="token_endpoint"):
        discovered_endpoints({**doc, "token_endpoint": ""}, doc["issuer"])
    no_userinfo = {k: v for k, v in doc.items() if k != "userinfo_endpoint"}
    assert "userdata_url" not in discovered_endpoints(no_userinfo, doc["issuer"])


def test_email_of():
    assert email_of(model("a", email="a@x.org"), "oauth_user") == "a@x.org"
    assert email_of({"auth_state": {"github_user": {"email": None}}}, "github_user") is None
    assert email_of({"auth_state": None}, "oauth_user") is None


def test_password_logins_need_the_approval_too(db):
    auth = TiAuthenticator(db=db)
    assert auth.allow_all is False
    assert auth.create_user("ann", "ann-password-1") is not None
    assert auth.check_allowed("ann") is False
    Approvals(db).set("ann", True)
    assert auth.check_allowed("ann") is True
    assert auth.check_allowed("ghost") is False


@pytest.mark.parametrize("cls", [TiAuthenticator, TiOIDCAuthenticator, TiGitHubOAuthenticator])
def test_no_nobody_can_login_warning(db, cls, caplog):
    auth = cls(db=db)
    with caplog.at_level("INFO"):
        auth.check_allow_config()
    assert "No allow config" not in caplog.text and "/hub/authorize" in caplog.text


def test_tihub_never_sets_allow_all(tmp_path):
    from ti_hub.hub.config import configure

    c = Config()
    configure(c, tmp_path)
    assert "allow_all" not in c.Authenticator
    assert c.JupyterHub.authenticator_class == "ti_hub.hub.auth.TiAuthenticator"


async def test_password_sessions_end_when_the_approval_is_taken_back(db):
    auth = TiAuthenticator(db=db)
    auth.create_user("ann", "ann-password-1")

    class U:
        name = "ann"

    assert await auth.refresh_user(U()) is False
    Approvals(db).set("ann", True)
    assert await auth.refresh_user(U()) is True


def test_the_ssh_gateway_reads_oauth_approvals(tmp_path):
    """ti-ssh refuses an account whose approval was taken back (ti_hub/ssh/lookup.py reads users_info): OAuth
    accounts are in that table too."""
    from ti_hub.ssh.lookup import HubAccounts

    url = f"sqlite:///{tmp_path / 'jupyterhub.sqlite'}"
    session = orm.new_session_factory(url)()
    auth = TiOIDCAuthenticator(db=session)
    auth.approvals.ask("ann", approved=True)
    session.add(orm.User(name="ann"))
    session.commit()
    accounts = HubAccounts(url)
    assert accounts._refusal_sync("ann") is None
    auth.approvals.set("ann", False)
    assert "not authorized" in accounts._refusal_sync("ann")
    session.close()
