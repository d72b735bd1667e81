"""Job endpoints on origins of their own (``TiService.endpoint_origin``; the why and the login in ``origins.py``).

Requests for ``LABEL.<endpoint domain>`` reach this handler (tornado routes by host). It is the endpoints proxy
with another front door: the label in the Host names the job, the instance and the port (or the TensorBoard), the
whole path goes to the job's server, and the login is a hub token (programs) or the endpoint's own cookie
(browsers), never the hub's or the service's cookies, which this origin never receives.
"""

from __future__ import annotations

import asyncio

from tornado import web

from ..backends.local import sockets
from ..domain.actor import Actor
from ..domain.errors import BadGateway, NotFound
from ..ops import endpoints as ops
from .origins import COOKIE, COOKIE_TTL, LOGIN_PATH, TICKET_TTL, Label, parse_label, safe_next, seal, unseal
from ..domain.endpoints import cross_site, port_url
from .proxy import EndpointHandler, effective


@web.stream_request_body
class OriginEndpointHandler(EndpointHandler):
    own_cookie = COOKIE

    async def prepare(self) -> None:
        origins = self.ti.endpoint_origins
        label = origins.label_of(self.request.host) if origins is not None else None
        lab = parse_label(label) if label else None
        if lab is None:
            raise NotFound("no such endpoint on this host")
        if self.request.path == LOGIN_PATH:
            self._trade_ticket(label)
            return
        actor, via_cookie = await self._who(label)
        if actor is None:
            if self._wants_login():  # through the hub, where the user logs in, and back with a ticket
                self.redirect(self._hub_side_url(lab))
                return
            raise web.HTTPError(401, "authentication required: send 'Authorization: token <hub API token>' or open "
                                     "the endpoint from TiHub in a browser")
        if via_cookie:
            h = self.request.headers
            why = cross_site(self.request.method, h.get("Sec-Fetch-Site"), h.get("Origin"), h.get("Host", ""))
            if why:
                raise web.HTTPError(403, f"cross-site request refused ({why})")
        await self._resolve(actor, lab, via_cookie)
        self._start_body()

    def check_xsrf_cookie(self) -> None:
        return None  # the hub's cookie never comes here; ours is checked in prepare (cross_site)

    def get_current_user(self):
        return None  # the hub's login is not used on this origin

    async def _who(self, label: str) -> tuple[Actor | None, bool]:
        """(the caller, whether by this origin's cookie): a hub token, else the endpoint's cookie."""
        if self.request.headers.get("Authorization") or self.get_query_argument("token", None):
            model = await self.hub_auth.get_user(self, sync=False)
            if model:
                self._token_authenticated = True
                return await effective(self.ti, model), False  # TiHub's roles decide (ops/grants.py)
            return None, False
        cookie = self.get_cookie(COOKIE)
        user = unseal(self.ti.fernet, cookie, "cookie", label, COOKIE_TTL) if cookie else None
        # a browser's cookie gives the owner's own rights only: never an admin's over someone else's job
        return (Actor(user), True) if user else (None, True)

    def _trade_ticket(self, label: str) -> None:
        user = unseal(self.ti.fernet, self.get_query_argument("ticket", ""), "ticket", label, TICKET_TTL)
        if user is None:
            raise web.HTTPError(403, "this login link is not valid (any more): open the endpoint from TiHub again")
        self.set_cookie(COOKIE, seal(self.ti.fernet, "cookie", user, label), path="/", httponly=True,
                        samesite="Lax", secure=self.request.protocol == "https", expires_days=None)
        self.redirect(safe_next(self.get_query_argument("next", "/")))

    def _hub_side_url(self, lab: Label) -> str:
        base = self.ti.hub_public_url.rstrip("/") + self.settings["service_prefix"].rstrip("/")
        if lab.kind == "port":
            path = port_url(base, lab.job, lab.instance, lab.port).rstrip("/")
        else:
            path = f"{base}/endpoints/{lab.job}/tensorboard/{lab.key}"
        return path + self.request.path + (f"?{self.request.query}" if self.request.query else "")

    async def _resolve(self, actor: Actor, lab: Label, via_cookie: bool) -> None:
        rest = self.request.path
        if lab.kind == "port":
            target = await self.ti.db(ops.port_target, actor, str(lab.job), lab.instance, lab.port,
                                      via_cookie=via_cookie, shared_network=self.ti.backend.shares_host_network,
                                      readonly=True)
            try:
                host, mapping = await self.ti.backend.endpoint_address(target["id"], target["backend_state"] or {},
                                                                       lab.instance, lab.port)
            except LookupError as e:
                raise BadGateway(str(e), field="instance") from None
            self._target = (host, (mapping or {}).get(lab.port, lab.port), rest, None)
            self._jupyter(target, lab.port, rest)
            return
        job = await self.ti.db(ops.tensorboard_job, actor, str(lab.job), via_cookie, readonly=True)
        rec = await self.ti.tensorboards.find(job["id"], lab.key)
        if rec is None:
            raise NotFound(f"no TensorBoard runs at this address (stopped when idle?); start it again with "
                           f"POST /jobs/{job['id']}/tensorboard", field="key")
        self.ti.tensorboards.touch(rec)
        if rec.get("uid") is not None and not rec.get("net"):
            why = await asyncio.to_thread(sockets.refusal, rec["port"], rec["uid"], None, "this TensorBoard")
            if why:
                raise BadGateway(why, field="key")
        # TensorBoard serves under its --path_prefix; its own absolute links already carry it
        path = rest if rest.startswith(rec["prefix"] + "/") else rec["prefix"] + rest
        self._target = (rec.get("host", "127.0.0.1"), rec["port"], path, None)
