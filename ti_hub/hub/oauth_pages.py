"""The hub's pages for OAuth logins that wait for an admin's approval (SPEC ACC1-2, ``ti_hub/hub/oauth.py``).

- The provider's callback shows "waiting for approval" (templates/ti-approval-wait.html) instead of the hub's
  bare 403 when ``check_allowed`` raises ``AwaitingApproval``.
- /hub/authorize (templates/ti-authorize.html), for holders of ``admin:users``: accounts waiting, with Approve
  and Refuse, and approved ones, with Take back. Unlike NativeAuthenticator's page, every change is a POST
  carrying the hub's XSRF value, so another site cannot make an admin's browser approve anyone.
- Taking an approval back locks the account out at once (``lock_out``), not at its next login only.
"""

from __future__ import annotations

from jupyterhub import orm
from jupyterhub.handlers import BaseHandler
from jupyterhub.scopes import needs_scope
from jupyterhub.utils import new_token
from tornado import web


class AwaitingApproval(web.HTTPError):
    """The provider vouched for the account, but no admin has approved it (yet, or any more)."""

    def __init__(self, name: str, taken_back: bool = False):
        super().__init__(403, "%s waits for an admin's approval", name)
        self.name, self.taken_back = name, taken_back
        # what the hub's own error page says, should any other handler meet this exception
        self.jupyterhub_message = ("An administrator took back the approval of this account." if taken_back
                                   else "This account is waiting for an administrator's approval.")


def had_access(db, names) -> set[str]:
    """Which of ``names`` have used the hub (a user with activity): their approval was taken back, not pending."""
    names = list(names)
    if not names:
        return set()
    q = db.query(orm.User.name).filter(orm.User.name.in_(names), orm.User.last_activity.isnot(None))
    return {name for (name,) in q}


def waiting_page(callback: type) -> type:
    """The provider's callback handler of an OAuthenticator class, showing the waiting page when it must."""

    class WaitingForApproval(callback):
        async def get(self, *args, **kwargs):
            try:
                return await super().get(*args, **kwargs)
            except AwaitingApproval as e:
                self.set_status(403)
                self.finish(await self.render_template("ti-approval-wait.html", account=e.name,
                                                       taken_back=e.taken_back))

    return WaitingForApproval


async def lock_out(handler: BaseHandler, name: str) -> tuple[list[str], list[str], int]:
    """End what an account whose approval was taken back (or that TiHub disabled: ti_hub/hub/auth.py) still holds in
    the hub: its running workspaces stop, every token of it is deleted (personal ones, and those the hub's OAuth
    gave services and workspaces for its browser), and its login cookie stops working (a new cookie id), so that
    approving it again brings none of them back. Returns (stopped, still starting) servers and the number of
    tokens deleted; a server that is starting has lost its token and is left to the admin at /hub/admin."""
    user = handler.find_user(name)
    if user is None:
        return [], [], 0
    stopped, starting = [], []
    for server, spawner in list(user.spawners.items()):
        label = server or "default"
        if spawner.pending:
            starting.append(label)
        elif spawner.ready:
            await handler.stop_single_user(user, server)
            stopped.append(label)
    user.orm_user.cookie_id = new_token()
    tokens = list(user.orm_user.api_tokens)
    for token in tokens:
        handler.db.delete(token)
    handler.db.commit()
    return stopped, starting, len(tokens)


class ApprovalPage(BaseHandler):
    """/hub/authorize: approve, refuse or take back accounts that log in through the OAuth provider."""

    def _listing(self) -> tuple[list[dict], list[dict]]:
        rows = self.authenticator.approvals.all()
        used = had_access(self.db, [r.username for r in rows if not r.is_authorized])
        admins = self.authenticator.admin_users
        waiting = [{"name": r.username, "email": r.email or "", "taken_back": r.username in used}
                   for r in rows if not r.is_authorized]
        approved = [{"name": r.username, "email": r.email or "", "config_admin": r.username in admins}
                    for r in rows if r.is_authorized]
        return sorted(waiting, key=lambda a: a["name"]), sorted(approved, key=lambda a: a["name"])

    async def _render(self, message: str = "", status: int = 200) -> None:
        waiting, approved = self._listing()
        self.set_status(status)
        self.finish(await self.render_template("ti-authorize.html", waiting=waiting, approved=approved,
                                               message=message))

    @web.authenticated
    @needs_scope("admin:users")
    async def get(self):
        await self._render()

    @web.authenticated
    @needs_scope("admin:users")
    async def post(self):
        message, status = await self._apply(self.get_body_argument("action", ""),
                                            self.get_body_argument("name", ""))
        await self._render(message, status)

    async def _apply(self, action: str, name: str) -> tuple[str, int]:
        approvals = self.authenticator.approvals
        if approvals.get(name) is None:
            return f"No account {name!r} has asked for approval.", 404
        who = self.current_user.name
        if action == "approve":
            approvals.set(name, True)
            self.log.info("%s approved the account %s", who, name)
            return f"{name} is approved and can log in now.", 200
        if action == "refuse":
            if name in had_access(self.db, [name]) or not approvals.discard(name):
                return f"{name} has had access: take back the approval instead.", 409
            self.log.info("%s refused the account %s", who, name)
            return f"The request of {name} is refused (a later login asks again).", 200
        if action == "take-back":
            if name in self.authenticator.admin_users:
                return (f"{name} is in admin_users, approved at each login: remove them from "
                        "c.Authenticator.admin_users first.", 409)
            if name == who:
                return "You cannot take back your own approval.", 409
            approvals.set(name, False)
            stopped, starting, _tokens = await lock_out(self, name)
            self.log.info("%s took back the approval of %s (servers stopped: %s; still starting: %s)",
                          who, name, stopped, starting)
            text = f"The approval of {name} is taken back: their sessions and tokens are revoked"
            text += f", their servers stopped ({', '.join(stopped)})." if stopped else "."
            if starting:
                text += f" Servers still starting: {', '.join(starting)}; stop them at /hub/admin."
            return text, 200
        return f"Unknown action {action!r}.", 400


def approval_handlers() -> list[tuple[str, type]]:
    return [(r"/authorize", ApprovalPage)]
