"""Sign-up with admin approval (SPEC ACC1) on NativeAuthenticator, plus a first admin without a browser.

Approvals live in NativeAuthenticator's ``users_info`` table of the hub's database, for password accounts and
for accounts that log in through an OAuth provider alike (``ti_hub/hub/oauth.py``): one list for admins at
/hub/authorize, kept when a site switches between the two, and the one the SSH gateway already reads at every
login (``ti_hub/ssh/lookup.py``). ``Approvals`` reads and writes it; ``decide`` is the pure rule.
"""

from __future__ import annotations

import secrets

import bcrypt
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.orm import UserInfo
from traitlets import Unicode

# what a login leads to (``decide``)
LET_IN, APPROVE, ASK, WAIT = "let in", "approve", "ask", "wait"


def decide(approved: bool | None, admin: bool) -> str:
    """What a login that the provider vouched for leads to.

    ``approved``: the account's approval (None: it never asked); ``admin``: named in ``admin_users`` (or one of
    ``admin_groups``), whose approval is recorded at once. ASK records a request for the admins and WAIT shows
    the waiting page; neither lets the account in.
    """
    if admin:
        return LET_IN if approved else APPROVE
    if approved is None:
        return ASK
    return LET_IN if approved else WAIT


class Approvals:
    """Admins' approvals of accounts: the ``users_info`` rows (``is_authorized``) in the hub's database."""

    def __init__(self, db):
        self.db = db

    def get(self, name: str) -> bool | None:
        row = UserInfo.find(self.db, name)
        return None if row is None else bool(row.is_authorized)

    def ask(self, name: str, email: str | None = None, approved: bool = False) -> None:
        """Record an account that logged in through a provider. It has no password here: the column may not be
        empty, so it holds the hash of a random secret nobody keeps (should the site go back to password
        logins, an admin sets one at /hub/change-password/NAME). Cost 4: no one can guess 256 random bits."""
        unusable = bcrypt.hashpw(secrets.token_hex(32).encode(), bcrypt.gensalt(rounds=4))
        row = UserInfo(username=name, password=unusable, is_authorized=approved)
        try:
            row.email = email  # shown to the admins; NativeAuthenticator's check refuses odd addresses
        except AssertionError:
            pass
        self.db.add(row)
        self.db.commit()

    def set(self, name: str, approved: bool) -> bool:
        row = UserInfo.find(self.db, name)
        if row is None:
            return False
        row.is_authorized = approved
        self.db.commit()
        return True

    def discard(self, name: str) -> bool:
        """Forget a request that was never approved (a later login asks again, as a new sign-up would)."""
        row = UserInfo.find(self.db, name)
        if row is None or row.is_authorized:
            return False
        self.db.delete(row)
        self.db.commit()
        return True

    def all(self) -> list:
        return UserInfo.all_users(self.db)


class TiAuthenticator(NativeAuthenticator):
    """NativeAuthenticator whose first admin can be created at start-up.

    New accounts sign up at /hub/signup and cannot log in until an admin authorizes them at
    /hub/authorize (``open_signup`` stays False).
    """

    initial_admin_password = Unicode(
        "",
        config=True,
        help="""Password for the first admin, created at start-up if that account does not exist yet.

        Leave empty to have the admin sign up at /hub/signup (admins are authorized at once).
        ti-hub sets it from the TI_HUB_ADMIN_PASSWORD environment variable; it is never logged.""",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.initial_admin_password:
            for admin in sorted(self.admin_users):
                if not self.user_exists(admin):
                    if self.create_user(admin, self.initial_admin_password) is None:
                        self.log.error("Could not create the first admin %r: password too weak or name invalid", admin)
                    else:
                        self.log.info("Created the first admin account %r", admin)

    def check_allow_config(self):
        # instead of JupyterHub 5+'s "no allow config found, nobody can login" warning: the approval is ours
        self.log.info("Accounts need an admin's approval at /hub/authorize (%s)", type(self).__name__)

    def check_allowed(self, username, authentication=None):
        """Only approved accounts. JupyterHub 5+ lets nobody in unless this says so (TiHub never sets
        ``allow_all``); NativeAuthenticator's ``authenticate`` already refused the rest, and the approval is
        read again here so that it is the gate whatever ``authenticate`` does."""
        if self.allowed_users and username not in self.allowed_users:
            return False
        return bool(Approvals(self.db).get(username))

    async def refresh_user(self, user, handler=None):
        """An approval taken back at /hub/authorize also ends browser sessions, at their next refresh
        (``auth_refresh_age``, 300 s), not only the next login."""
        return bool(Approvals(self.db).get(user.name))


class _NoStats:
    """JupyterHub 6 dropped statsd; NativeAuthenticator 1.3's login handler still times itself with it."""

    def timer(self, *_a, **_k):
        return self

    def start(self):
        return self

    def stop(self, *_a, **_k):
        return None

    def incr(self, *_a, **_k):
        return None


def _compat_login_handler():
    from nativeauthenticator.handlers import LoginHandler as NativeLogin

    class LoginHandler(NativeLogin):
        statsd = _NoStats()

        def _render(self, login_error=None, username=None, **_kwargs):
            # JupyterHub 6 passes extra keywords (sync=...) when it renders errors through this handler
            return super()._render(login_error=login_error, username=username)

    return LoginHandler


def _accounts_handler():
    """/hub/ti-users: the ti service's way to NativeAuthenticator's password accounts and approvals (people
    created by an admin, users disabled and enabled: ti_hub/ops/hubpeople.py), since it never writes the
    hub's database itself. It needs admin:users (the ti service's role has it, as do hub admins): whoever may
    create and delete the hub's users may create their passwords.

    POST /hub/ti-users {"name", "password"}: a password account, approved (the hub's user is created through
    the REST API); PATCH /hub/ti-users/NAME {"approved": bool}: false also locks the user out
    (``oauth_pages.lock_out``: servers stopped, every token deleted, login cookies void) and answers what it
    revoked (``tokens_revoked``, ``servers_stopped``, ``servers_starting``); DELETE /hub/ti-users/NAME."""
    import json

    from jupyterhub.apihandlers.base import APIHandler
    from jupyterhub.scopes import needs_scope
    from tornado import web

    class TiAccountsHandler(APIHandler):
        def _refuse(self, status: int, message: str, field: str | None = None) -> None:
            self.set_status(status)
            self.finish(json.dumps({"status": status, "message": message, "field": field}))

        @needs_scope("admin:users")
        def post(self, name: str = ""):
            if name:
                raise web.HTTPError(405)
            data = self.get_json_body() or {}
            name, password = data.get("name"), data.get("password")
            auth = self.authenticator
            if not isinstance(name, str) or not name or auth.normalize_username(name) != name or \
                    not auth.validate_username(name):
                return self._refuse(400, f"name {name!r} is not a valid user name here", "name")
            # an OAuth site (ti_hub/hub/oauth.py) has no password rules: the account is an approval made ahead
            strong = getattr(auth, "is_password_strong", lambda p: len(p) >= 8)
            if not isinstance(password, str) or not strong(password):
                return self._refuse(400, f"password is too weak: at least {getattr(auth, 'minimum_password_length', 8)}"
                                         " characters" + (", and not a common password"
                                                          if getattr(auth, "check_common_password", False) else ""),
                                    "password")
            if UserInfo.find(self.db, name) is not None:
                return self._refuse(409, f"{name!r} has a sign-up waiting at /hub/authorize: approve or "
                                         "discard it there", "name")
            hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
            self.db.add(UserInfo(username=name, password=hashed, is_authorized=True))
            self.db.commit()
            self.log.info("TiHub: %s created the password account %r", self.current_user.name, name)
            self.set_status(201)
            self.finish(json.dumps({"name": name, "approved": True}))

        @needs_scope("admin:users")
        async def patch(self, name: str = ""):
            data = self.get_json_body() or {}
            approved = data.get("approved")
            if not isinstance(approved, bool):
                return self._refuse(400, "approved must be true or false", "approved")
            if not Approvals(self.db).set(name, approved):
                return self._refuse(404, f"no password account {name!r}", "name")
            answer: dict = {"name": name, "approved": approved}
            if not approved:
                # issue 30: disabling revokes, so that enabling again brings no old token or session back
                from .oauth_pages import lock_out

                user = self.users.get(name)
                if user is not None:
                    user._auth_refreshed = None  # its next request asks refresh_user (now False): signed out
                stopped, starting, tokens = await lock_out(self, name)
                answer.update(tokens_revoked=tokens, servers_stopped=stopped, servers_starting=starting)
            self.log.info("TiHub: %s %s %r%s", self.current_user.name, "approved" if approved else "disabled", name,
                          "" if approved else f" ({answer['tokens_revoked']} token(s) revoked, servers stopped: "
                                              f"{answer['servers_stopped']}, still starting: "
                                              f"{answer['servers_starting']})")
            self.finish(json.dumps(answer))

        @needs_scope("admin:users")
        def delete(self, name: str = ""):
            row = UserInfo.find(self.db, name)
            if row is None:
                return self._refuse(404, f"no password account {name!r}", "name")
            self.db.delete(row)
            self.db.commit()
            self.set_status(204)
            self.finish()

    return TiAccountsHandler


def accounts_handlers() -> list[tuple]:
    """/hub/ti-users for the authenticators that keep approvals in users_info (this one and ti_hub/hub/oauth.py)."""
    accounts = _accounts_handler()
    return [(r"/ti-users", accounts), (r"/ti-users/([^/]+)", accounts)]


def _patched_handlers(self, app):
    handlers = NativeAuthenticator.get_handlers(self, app)
    login = _compat_login_handler()
    return [*((path, login if path == r"/login" else h) for path, h in handlers), *accounts_handlers()]


TiAuthenticator.get_handlers = _patched_handlers
