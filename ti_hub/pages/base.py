"""The pages' shared layout and request handling: hub OAuth login, scope checks, the nav bar, notices, forms.

Authentication is the API's: the hub's OAuth cookie, read asynchronously in ``prepare``; scopes are
checked with ``Actor`` exactly as the REST API does. Forms are plain POSTs to the page itself (no
script): HubOAuth accepts a cookie-authenticated POST only with the ``_xsrf`` value it issued for this
service (``self.xsrf_token``, bound to the login), so every form carries it. A POST runs the same
operation as the REST API, then redirects back (303) with a notice in a signed cookie.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from tornado import web

from .. import __version__
from ..domain import scopes as S
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Forbidden, TiError
from ..handlers.actors import actor_of, without_permissions
from .html import Safe, el, fmt, join

if TYPE_CHECKING:
    from ..api.context import ServiceContext


@dataclass(frozen=True)
class Page:
    name: str  # the path under the service prefix ("" is the service's home)
    title: str
    scope: str | None  # needed to open it; None: every signed-in user
    nav: str = ""  # the nav bar's label (the title if empty)


PAGES: tuple[Page, ...] = (
    Page("", "TiHub", None, "Overview"),
    Page("queue", "Queue", None),
    Page("jobs", "All jobs", S.MANAGE_ALL_JOBS, "All jobs"),
    Page("cluster", "Cluster status", S.VIEW_CLUSTER, "Cluster"),
    Page("plans", "Plans", S.VIEW_VC),
    Page("pools", "Virtual clusters (pools)", S.VIEW_VC, "VCs"),
    Page("quotas", "Quotas", S.MANAGE_USERS),
    Page("people", "People and permissions", S.MANAGE_USERS, "People"),
    Page("roles", "Roles", S.MANAGE_USERS, "Roles"),
    Page("audit", "Audit log", S.MANAGE_USERS, "Audit"),
    Page("alerts", "Alerts", S.MANAGE_VC, "Alerts"),
    Page("account", "My account", None, "Account"),
)
PAGE = {p.name: p for p in PAGES}
FLASH = "ti-flash"
CSP_TEMPLATE = "default-src 'self'; script-src {script}; style-src 'self'; img-src 'self' data:; frame-ancestors 'self'"


def csp(nonce: str | None = None) -> str:
    """The pages' policy: no script at all, or only the inline script carrying this response's nonce. Never
    'self' or 'unsafe-inline': user servers share this origin, so either would let their files run here."""
    return CSP_TEMPLATE.format(script=f"'nonce-{nonce}'" if nonce else "'none'")


CSP = csp()


def short(scope: str) -> str:
    """custom:ti:jobs:submit -> jobs:submit (tables stay narrow; the legend says the rest)."""
    return scope.removeprefix("custom:ti:")


class PageHandler(HubOAuthenticated, web.RequestHandler):
    page: ClassVar[Page]

    @property
    def ti(self) -> ServiceContext:
        return self.settings["ti"]

    @property
    def prefix(self) -> str:
        return self.settings.get("service_prefix", "/services/ti/")

    def url(self, name: str) -> str:
        return self.prefix + name

    async def prepare(self) -> None:
        # asynchronously, as the API does: the synchronous path would block the event loop on a cache miss
        model = await self.hub_auth.get_user(self, sync=False)
        if not model:
            self._hub_auth_user_cache = None  # @web.authenticated sends the browser to the hub's login
            if self.request.method == "POST":  # HubOAuth refuses a cookie without this service's _xsrf value
                raise web.HTTPError(403, "not signed in, or the form's security token has expired: "
                                         "reload the page and try again")
            return
        try:
            self._hub_auth_user_cache = self.check_hub_user(model)
        except UserNotAllowed:
            self._hub_auth_user_cache = None
            raise web.HTTPError(403, f"{model.get('name')} may not use the TiHub service") from None
        self._actor = await actor_of(self.ti, model)
        if self.page.scope and self.needs_page_scope() and not self.actor.can(self.page.scope):
            raise Forbidden(f"this page needs the permission {self.page.scope!r}: "
                            f"{S.PERMISSIONS.get(self.page.scope, '')}", field="scope")

    def needs_page_scope(self) -> bool:
        """Whether this request needs the page's scope; a handler whose view checks its own access may say no."""
        return True

    @property
    def actor(self) -> Actor:
        """The signed-in user with their effective TiHub permissions (ops/grants.py), found in ``prepare``."""
        found = getattr(self, "_actor", None)
        if found is None:  # prepare() stopped before (an error page): no TiHub permission at all
            return without_permissions(self.current_user)
        return found

    def signed_in(self) -> dict[str, Any] | None:
        """The user if prepare() found one; never a second (blocking) look-up from an error page."""
        return getattr(self, "_hub_auth_user_cache", None)

    def visible_pages(self) -> list[Page]:
        """Pages linked in the nav: only those the user may open (admin pages stay out of sight)."""
        if not self.signed_in():
            return []
        actor = self.actor
        return [p for p in PAGES if p.scope is None or actor.can(p.scope)]

    # -- rendering -----------------------------------------------------------------------------------

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Content-Security-Policy", CSP)
        self._nonce: str | None = None  # called again on an error page, which carries no script

    def inline_script(self, source: str) -> Safe:
        """``<script>`` with our own source (never user data), allowed by a nonce fresh to this response: the CSP
        of this response alone names it; every other page keeps script-src 'none'."""
        if "</" in source:
            raise ValueError("an inline script cannot contain '</'")
        if self._nonce is None:
            self._nonce = secrets.token_urlsafe(18)
            self.set_header("Content-Security-Policy", csp(self._nonce))
        return Safe(f'<script nonce="{self._nonce}">{source}</script>')

    def compute_etag(self) -> None:
        return None

    def nav(self) -> Safe:
        current = getattr(self, "page", None)
        items = [el("li", el("a", "Hub home", href=self.hub_auth.hub_prefix + "home"))]
        for p in self.visible_pages():
            here = current is not None and p.name == current.name
            items.append(el("li", el("a", p.nav or p.title, href=self.url(p.name), id=f"nav-{p.name or 'home'}",
                                     aria_current="page" if here else None)))
        who = (self.signed_in() or {}).get("name", "")
        return el("nav", el("ul", *items), el("span", fmt("Signed in as <b>{}</b>", who), class_="who") if who else "",
                  aria_label="TiHub pages", class_="ti-nav")

    def layout(self, title: str, body: Any, notices: list[tuple[str, str]] = ()) -> Safe:
        notes = join(el("p", text, class_=f"notice {kind}", role="alert" if kind == "error" else "status")
                     for kind, text in notices)
        return fmt("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{head}</title><link rel="stylesheet" href="{css}"></head>
<body><a class="skip" href="#main">Skip to content</a>
<header>{nav}</header>
<main id="main"><h1>{title}</h1>{notes}{body}</main>
<footer>TiHub {version}</footer></body></html>""", title=title,
                   head=title if title == "TiHub" else f"{title} - TiHub", css=self.static_url("ti.css"),
                   nav=self.nav(), notes=notes, body=body, version=__version__)

    def show(self, body: Any, title: str | None = None) -> None:
        self.finish(self.layout(title or self.page.title, body, self.take_notices()))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Never a blank page: a refusal names the permission it needs, with the nav to go elsewhere."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, TiError):
            self.set_status(exc.status)
            detail = exc.detail
        elif isinstance(exc, web.HTTPError):
            detail = exc.log_message or self._reason
        else:
            detail = "internal error; the administrators can find it in the ti service's log"
        title = {403: "Permission needed", 404: "Not found"}.get(self.get_status(), "Something went wrong")
        body = el("p", detail, id="error-detail")
        if self.get_status() == 403 and self.signed_in():
            mine = S.permissions_of(self.actor.scopes)
            body += el("p", "Your TiHub permissions: ", ", ".join(short(p) for p in mine) or "none",
                       ". An administrator can grant more through a role.")
        self.set_default_headers()
        self.finish(self.layout(title, body))

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, TiError):  # an expected refusal, not a server problem: no traceback in the log
            self.send_error(e.status, exc_info=(type(e), e, e.__traceback__))
            return
        super()._handle_request_exception(e)

    # -- notices across the POST-redirect-GET ------------------------------------------------------------

    def notice(self, text: str, kind: str = "ok") -> None:
        self.set_secure_cookie(FLASH, json.dumps([kind, text[:1000]]), path=self.prefix, httponly=True,
                               expires_days=None)

    def take_notices(self) -> list[tuple[str, str]]:
        raw = self.get_secure_cookie(FLASH, max_age_days=1)
        if not raw:
            return []
        self.clear_cookie(FLASH, path=self.prefix)
        try:
            kind, text = json.loads(raw)
            return [(str(kind), str(text))]
        except (ValueError, TypeError):
            return []

    # -- forms ---------------------------------------------------------------------------------------------

    @property
    def xsrf(self) -> str:
        token = self.xsrf_token
        return token.decode() if isinstance(token, bytes) else token

    actions: ClassVar[dict[str, str]] = {}  # form action -> method name

    @web.authenticated
    async def post(self) -> None:
        action = self.get_body_argument("action", "")
        method = self.actions.get(action)
        if method is None:
            raise web.HTTPError(400, f"unknown action {action!r}")
        try:
            message = await getattr(self, method)()
        except TiError as e:
            self.notice(f"Not done: {e.detail}", "error")
        else:
            self.notice(message or "Done.")
        self.redirect(self.request.path, status=303)

    def form(self) -> dict[str, str]:
        return {k: self.get_body_argument(k) for k in self.request.body_arguments if k not in ("_xsrf", "action")}

    def form_int(self, name: str, required: bool = True) -> int | None:
        raw = self.get_body_argument(name, "").strip()
        if not raw:
            if required:
                raise v.ValidationError(f"{name} is required", field=name)
            return None
        # ASCII digits of a bounded length: int() also reads other scripts' digits and '1_000'
        return v.parse_int(raw, name, 0, v.MAX_ID)

    def form_float(self, name: str, required: bool = True) -> float | None:
        return self._form_number(name, required, float, "a number")

    def _form_number(self, name: str, required: bool, cast, rule: str):
        raw = self.get_body_argument(name, "").strip()
        if not raw:
            if required:
                raise v.ValidationError(f"{name} is required", field=name)
            return None
        try:
            return cast(raw)
        except ValueError:
            raise v.ValidationError(f"{name} must be {rule}", field=name) from None

    def form_text(self, name: str) -> str:
        return self.get_body_argument(name, "").strip()

    def poke(self) -> None:
        self.ti.poke()


def perm_list(scopes: Any) -> Safe:
    """The seven permissions a scope set holds, each with its description as a tooltip."""
    held = S.permissions_of(scopes)
    if not held:
        return el("span", "none", class_="muted")
    return join((el("abbr", short(p), title=S.PERMISSIONS[p]) for p in held), Safe(", "))


def permissions_legend() -> Safe:
    return el("dl", *[Safe(el("dt", el("code", p)) + el("dd", d)) for p, d in S.PERMISSIONS.items()],
              class_="legend", id="permissions-legend")


__all__ = ["PAGES", "PAGE", "Page", "PageHandler", "perm_list", "permissions_legend", "short"]
