"""OAuth logins (SPEC ACC2) with the approval flow of sign-up (ACC1): GitHub, GitLab, Azure AD, any OpenID Connect.

Pick one in jupyterhub_config.py (docs/admin-guide.md, "Logins: sign-up or an OAuth provider")::

    c.JupyterHub.authenticator_class = "ti_hub.hub.oauth.TiGitLabOAuthenticator"

Each class is oauthenticator's own with ``TiApprovalMixin`` in front, so the provider settings are oauthenticator's
(``c.OAuthenticator.client_id``, ``c.GitLabOAuthenticator.gitlab_url``, ...). What the mixin adds:

- An account the provider vouched for gets in only once an admin approved it. Its first login records a request
  and shows "waiting for approval"; admins approve or refuse at /hub/authorize (``ti_hub/hub/oauth_pages.py``);
  names in ``admin_users`` are approved at once. The approval is read at every login and every
  ``auth_refresh_age``; taking it back locks the account out.
- The provider's own allow settings (``allowed_users``, ``allowed_organizations``, ``allowed_gitlab_groups``,
  ...), when a site sets any, decide who may ask at all: anyone else is refused without a request.
- Approvals are NativeAuthenticator's ``users_info`` rows (``ti_hub/hub/auth.py``, ``Approvals``).

TiHub never sets ``allow_all``: upstream, it skips ``check_allowed`` and so the approval.
"""

from __future__ import annotations

from nativeauthenticator.orm import UserInfo
from oauthenticator.azuread import AzureAdOAuthenticator
from oauthenticator.generic import GenericOAuthenticator
from oauthenticator.github import GitHubOAuthenticator
from oauthenticator.gitlab import GitLabOAuthenticator
from oauthenticator.oauth2 import OAuthLoginHandler
from tornado import web
from traitlets import Unicode, default

from .auth import APPROVE, ASK, LET_IN, Approvals, accounts_handlers, decide
from .oauth_pages import AwaitingApproval, approval_handlers, had_access, waiting_page

NOT_ALLOW_CONFIG = {"allow_all"}  # skips check_allowed altogether upstream; never TiHub's


def restricting_allow_config(authenticator) -> list[str]:
    """The allow settings of an OAuthenticator that are set (``allowed_*``, ``allow_existing_users``, anything
    tagged ``allow_config``): with any, the provider's ``check_allowed`` decides who may ask for approval."""
    found = []
    for name, trait in sorted(authenticator.traits(config=True).items()):
        if name in NOT_ALLOW_CONFIG:
            continue
        if name.startswith("allowed_") or name == "allow_existing_users" or trait.metadata.get("allow_config"):
            if getattr(authenticator, name):
                found.append(name)
    return found


def email_of(auth_model: dict, key: str) -> str | None:
    """The address the provider gave (shown to the admins), if any."""
    info = ((auth_model or {}).get("auth_state") or {}).get(key) or {}
    email = info.get("email") or info.get("mail")
    return email if isinstance(email, str) else None


class TiApprovalMixin:
    """Put before an OAuthenticator class: accounts wait for an admin's approval (module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # the same table NativeAuthenticator creates; a hub that never ran it has none yet
        UserInfo.__table__.create(self.db.bind, checkfirst=True)
        if self.allow_all:
            self.log.warning("%s: allow_all = True lets every account of the provider in with no approval",
                             type(self).__name__)

    def check_allow_config(self):
        # instead of JupyterHub 5+'s "no allow config found, nobody can login" warning: the approval is ours
        self.log.info("Accounts need an admin's approval at /hub/authorize (%s)", type(self).__name__)

    @property
    def approvals(self) -> Approvals:
        return Approvals(self.db)

    async def check_allowed(self, username, auth_model):
        if restricting_allow_config(self) and not await super().check_allowed(username, auth_model):
            return False  # the site's own allow settings leave this account out: no request either
        approvals = self.approvals
        verdict = decide(approvals.get(username), bool((auth_model or {}).get("admin")))
        if verdict == LET_IN:
            return True
        if verdict == APPROVE:
            if not approvals.set(username, True):
                approvals.ask(username, email_of(auth_model, self.user_auth_state_key), approved=True)
            self.log.info("Approved the account %s at once: it is an admin", username)
            return True
        if verdict == ASK:
            approvals.ask(username, email_of(auth_model, self.user_auth_state_key))
            self.log.info("The account %s asks for approval (/hub/authorize)", username)
            raise AwaitingApproval(username)
        self.log.info("Login of %s refused: not approved", username)
        raise AwaitingApproval(username, taken_back=username in had_access(self.db, [username]))

    async def refresh_user(self, user, handler=None, **kwargs):
        # a session of an account whose approval was taken back ends at its next refresh (auth_refresh_age),
        # whatever lock_out could not reach; admins in admin_users are approved again at their next login
        if user.name not in self.admin_users and not self.approvals.get(user.name):
            return False
        return await super().refresh_user(user, handler, **kwargs)

    def delete_user(self, user):
        # an account deleted at /hub/admin is forgotten here too: a later login asks again
        row = UserInfo.find(self.db, user.name)
        if row is not None:
            self.db.delete(row)
            self.db.commit()
        return super().delete_user(user)

    def get_handlers(self, app):
        callback = waiting_page(self.callback_handler)
        handlers = [(path, callback if h is self.callback_handler else h) for path, h in super().get_handlers(app)]
        # /hub/ti-users: admins' approvals (disable, enable) and accounts made ahead by TiHub's People
        return handlers + approval_handlers() + accounts_handlers()


class TiGitHubOAuthenticator(TiApprovalMixin, GitHubOAuthenticator):
    """GitHub (or GitHub Enterprise: ``github_url``) logins that wait for an admin's approval."""


class TiGitLabOAuthenticator(TiApprovalMixin, GitLabOAuthenticator):
    """GitLab (``gitlab_url`` for your own instance) logins that wait for an admin's approval."""


class TiAzureAdOAuthenticator(TiApprovalMixin, AzureAdOAuthenticator):
    """Microsoft Entra ID / Azure AD (``tenant_id``) logins that wait for an admin's approval."""


def discovered_endpoints(doc: dict, issuer: str) -> dict[str, str]:
    """oauthenticator's URL settings from an OpenID Provider's discovery document (OIDC Discovery 1.0 §3-4).

    The authorization and token endpoints are required; the userinfo endpoint is only recommended (without it,
    set ``userdata_from_id_token``)."""
    if str(doc.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
        # §4.3: a document for another issuer must not be used
        raise ValueError(f"the discovery document names issuer {doc.get('issuer')!r}, not {issuer!r}")
    missing = [key for key in ("authorization_endpoint", "token_endpoint") if not doc.get(key)]
    if missing:
        raise ValueError(f"the discovery document of {issuer} has no {' or '.join(missing)}")
    found = {"authorize_url": doc["authorization_endpoint"], "token_url": doc["token_endpoint"]}
    if doc.get("userinfo_endpoint"):
        found["userdata_url"] = doc["userinfo_endpoint"]
    return found


class _DiscoveringLogin(OAuthLoginHandler):
    async def get(self):
        await self.authenticator.discover()
        return super().get()


class TiOIDCAuthenticator(TiApprovalMixin, GenericOAuthenticator):
    """Any OpenID Connect provider (Keycloak, Authentik, Dex, Okta, ...) that waits for an admin's approval."""

    login_handler = _DiscoveringLogin

    oidc_issuer = Unicode(
        "",
        config=True,
        help="""The provider's issuer URL, e.g. https://sso.example.org/realms/main.

        TiHub reads <issuer>/.well-known/openid-configuration at the first login (again at each one until it
        answers) for authorize_url, token_url and userdata_url, so the hub starts even while the provider is
        down. Settings made explicitly win; leave this empty to set all three by hand.""",
    )

    @default("login_service")
    def _login_service_default(self):
        return "OpenID Connect"

    @default("scope")
    def _scope_default(self):
        return ["openid", "profile", "email"]

    @default("username_claim")
    def _username_claim_default(self):
        return "preferred_username"

    _discovered = False

    async def discover(self) -> None:
        if self._discovered or not self.oidc_issuer:
            return
        url = self.oidc_issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            doc = await self.httpfetch(url, "Fetching the OpenID configuration", method="GET",
                                       validate_cert=self.validate_server_cert)
            endpoints = discovered_endpoints(doc, self.oidc_issuer)
        except Exception as e:
            self.log.error("OpenID Connect discovery at %s failed: %s", url, e)
            raise web.HTTPError(503, "The identity provider did not answer; try again in a moment.") from None
        if self.userdata_from_id_token:
            endpoints.pop("userdata_url", None)  # the two exclude each other upstream
        for trait, value in endpoints.items():
            if not getattr(self, trait):
                setattr(self, trait, value)
        self._discovered = True

    async def authenticate(self, handler, data=None, **kwargs):
        await self.discover()  # a login that started before a restart comes back to a hub that has not read it
        return await super().authenticate(handler, data, **kwargs)
