"""JOB6: the endpoints proxy, ``<service>/endpoints/{job}/{instance}/{port}/...`` and ``.../{job}/tensorboard/{key}/``.

HTTP (every method; bodies streamed both ways, with back-pressure) and WebSocket (a relay of messages) to a
job's declared interactive ports, where the backend says the instance lives (``endpoint_address``), and to
TensorBoards the service runs for a job. Authentication is the API's: a hub token, or the service's OAuth
cookie for browsers (sent to log in when they have none). Who may use which job and port is decided in
``ops/endpoints.py``; what crosses to the job's server (never the hub token nor the hub's or the service's
cookies) in ``pure.py``. Errors are the API's JSON.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from tornado import httputil, web, websocket
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.iostream import StreamClosedError
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from ..handlers.actors import actor_of
from ..handlers.refusals import Refusals
from ..backends.local import sockets
from ..domain.actor import Actor
from ..domain.errors import BadGateway, Forbidden, NotFound
from ..ops import endpoints as ops
from ..ops import secretenv
from .context import EndpointContext
from .origins import origin_login, port_label, tensorboard_label
from ..domain.endpoints import (cross_site, parse_endpoint_path, port_url, request_headers, response_headers,
                   strip_token_query)

MAX_UPLOAD = 1 << 30  # a request body streamed to a job's server (the hub's own proxy may hold less)
MAX_DOWNLOAD = 1 << 40  # streamed through, never held: only a bound for the client's parser
REQUEST_TIMEOUT = 24 * 3600.0  # event streams and long downloads; connecting stays quick
CONNECT_TIMEOUT = 10.0
_client: SimpleAsyncHTTPClient | None = None
_ABORT = object()


def upstream_client() -> SimpleAsyncHTTPClient:
    """One client per process, its own: tornado's shared one queues everything past 10 requests in flight."""
    global _client
    if _client is None:
        _client = SimpleAsyncHTTPClient(force_instance=True, max_clients=1000, max_body_size=MAX_DOWNLOAD)
    return _client


@web.stream_request_body
class EndpointHandler(Refusals, HubOAuthenticated, websocket.WebSocketHandler):
    def initialize(self) -> None:
        self.ws_client: websocket.WebSocketClientConnection | None = None
        self._pending: list[Any] | None = []  # upstream messages that arrive before our side is open
        self._target: tuple[str, int, str, str | None] | None = None  # host, port, path, base for redirects
        self._body_q: asyncio.Queue | None = None
        self._fetch: asyncio.Future | None = None
        self._body_done = False
        self._status: httputil.ResponseStartLine | None = None
        self._resp: httputil.HTTPHeaders | None = None
        self._headers_set = False
        self._upstream_token: str | None = None  # the jupyter endpoint's server token (_jupyter)

    @property
    def ti(self) -> EndpointContext:
        return self.settings["ti"]

    @property
    def own_cookie(self) -> str:
        """The login cookie this side uses: never sent to a job's server, never replaced by one."""
        return self.hub_auth.cookie_name

    def compute_etag(self) -> None:
        return None  # the body streams through: tornado would hash only the last piece

    # -- who is asking ---------------------------------------------------------------------------------------
    def _wants_login(self) -> bool:
        """A browser page load without a login goes to the hub's login; programs get 401."""
        h = self.request.headers
        return (self.request.method == "GET" and "Authorization" not in h and h.get("Upgrade", "").lower()
                != "websocket" and "text/html" in h.get("Accept", ""))

    def check_xsrf_cookie(self) -> None:
        """HubOAuth calls this before it accepts the cookie for anything but a plain page load. A job's pages
        make their own requests (scripts, forms) without the service's XSRF value, so same-origin requests
        pass and cross-site ones lose the cookie (token-authenticated requests are not checked)."""
        if getattr(self, "_token_authenticated", False):
            return
        h = self.request.headers
        # the Host the browser sent, as tornado's own cross-origin check: a browser never lets a page choose it
        why = cross_site(self.request.method, h.get("Sec-Fetch-Site"), h.get("Origin"), h.get("Host", ""))
        if why:
            raise web.HTTPError(403, f"cross-site request refused ({why})")

    async def prepare(self) -> None:
        ep = parse_endpoint_path(self.request.path, self.settings["service_prefix"])
        if ep is None:
            raise NotFound("no such endpoint: the shape is endpoints/JOB/INSTANCE/PORT/ or "
                           "endpoints/JOB/tensorboard/KEY/")
        model = await self.hub_auth.get_user(self, sync=False)
        if not model:
            self._hub_auth_user_cache = None
            if self._wants_login():
                self.redirect(self.get_login_url())
                return
            raise web.HTTPError(401, "authentication required: send 'Authorization: token <hub API token>' "
                                     "or log in with a browser")
        try:
            self._hub_auth_user_cache = self.check_hub_user(model)
        except UserNotAllowed:
            self._hub_auth_user_cache = None
            raise web.HTTPError(403, f"{model.get('name')} may not use the TiHub service") from None
        # the effective permissions (TiHub's roles narrow the token's scopes, ops/grants.py): every user's hub
        # scopes carry all seven as a ceiling, so the raw token would make everyone a manager of every job
        actor = await effective(self.ti, self.current_user)
        via_cookie = not getattr(self, "_token_authenticated", False)
        if ep.kind == "port":
            target = await self.ti.db(ops.port_target, actor, ep.job, ep.instance, ep.port, via_cookie=via_cookie,
                                      shared_network=self.ti.backend.shares_host_network, readonly=True)
            try:
                host, mapping = await self.ti.backend.endpoint_address(target["id"], target["backend_state"] or {},
                                                                       ep.instance, ep.port)
            except LookupError as e:
                raise BadGateway(str(e), field="instance") from None
            if not ep.rest and self.request.method in ("GET", "HEAD") and not self._is_websocket():
                # relative links of the job's pages resolve below the endpoint's root only with its slash
                self.redirect(ep.base + "/" + (f"?{self.request.query}" if self.request.query else ""))
                return
            self._target = (host, (mapping or {}).get(ep.port, ep.port), ep.rest or "/", ep.base)
            self._job_id = target["id"]
            self._jupyter(target, ep.port, ep.rest)
        else:
            job = await self.ti.db(ops.tensorboard_job, actor, ep.job, via_cookie, readonly=True)
            rec = await self.ti.tensorboards.find(job["id"], ep.key)
            if rec is None:
                raise NotFound(f"no TensorBoard runs at this address (stopped when idle?); start it again with "
                               f"POST /jobs/{job['id']}/tensorboard", field="key")
            self.ti.tensorboards.touch(rec)
            self._job_id = job["id"]
            # a local TensorBoard on the host's network: its port must still be its owner's (in a network of its
            # own, only it listens there)
            if rec.get("uid") is not None and not rec.get("net"):
                why = await asyncio.to_thread(sockets.refusal, rec["port"], rec["uid"], None, "this TensorBoard")
                if why:
                    raise BadGateway(why, field="key")
            # TensorBoard serves under its --path_prefix (the job's id): the path keeps it, whatever the caller wrote
            self._target = (rec.get("host", "127.0.0.1"), rec["port"], rec["prefix"] + ep.rest, None)
        if via_cookie and self.ti.endpoint_origins is not None and not self._finished:
            # endpoints live on origins of their own: a browser gets a ticket to its endpoint's origin, never the
            # job's page on the hub's origin (ti_hub/endpoints/origins.py)
            label = (port_label(self._job_id, ep.instance, ep.port) if ep.kind == "port"
                     else tensorboard_label(self._job_id, ep.key))
            self.redirect(origin_login(self.ti.fernet, self.ti.endpoint_origins, actor.name, label, ep.rest,
                                       self.request.query))
            return
        self._start_body()

    def _jupyter(self, target: dict[str, Any], port: int, rest: str) -> None:
        """The jupyter endpoint's server serves under its endpoint's path (its pages link by absolute paths): the
        path keeps that prefix (by the job's id, however the caller named it), and the request carries the
        server's token, which the user never sees."""
        if not target.get("jupyter_token"):
            return
        key = self.ti.ops_settings.secret_key
        try:
            self._upstream_token = secretenv.unseal(key, {"t": target["jupyter_token"]})["t"]
        except secretenv.UnsealError as e:
            raise BadGateway(f"the jupyter endpoint's token cannot be opened: {e}", field="port") from None
        host, hport, _path, base = self._target
        root = port_url(self.settings["service_prefix"], target["id"], 0, port).rstrip("/")
        path = rest if rest.startswith(root + "/") else root + (rest or "/")
        self._target = (host, hport, path, base)

    def _upstream_headers(self, websocket: bool = False) -> httputil.HTTPHeaders:
        headers = httputil.HTTPHeaders()
        for k, v in request_headers(self.request.headers.get_all(), self.own_cookie, websocket=websocket):
            headers.add(k, v)
        if self._upstream_token:
            headers["Authorization"] = f"token {self._upstream_token}"
        return headers

    def _start_body(self) -> None:
        if self._has_body():
            self.request.connection.set_max_body_size(MAX_UPLOAD)
            self._body_q = asyncio.Queue(maxsize=4)
            # started now, fed as the body arrives (data_received), so uploads stream instead of piling up here
            self._fetch = asyncio.ensure_future(self._forward(body_producer=self._produce))
            # a client gone before its body ended never reaches _proxy: its failure is nobody's to report
            self._fetch.add_done_callback(lambda f: f.cancelled() or f.exception())

    def _is_websocket(self) -> bool:
        return self.request.headers.get("Upgrade", "").lower() == "websocket"

    def _has_body(self) -> bool:
        h = self.request.headers
        return "chunked" in h.get("Transfer-Encoding", "").lower() or h.get("Content-Length", "0") not in ("", "0")

    # -- HTTP ------------------------------------------------------------------------------------------------
    async def data_received(self, chunk: bytes) -> None:
        if self._body_q is None or self._fetch is None or self._fetch.done():
            return  # the job's server stopped reading: the answer it gave is what the client gets
        put = asyncio.ensure_future(self._body_q.put(chunk))
        await asyncio.wait({put, self._fetch}, return_when=asyncio.FIRST_COMPLETED)
        if not put.done():
            put.cancel()

    async def _produce(self, write) -> None:
        while (chunk := await self._body_q.get()) is not None:
            if chunk is _ABORT:
                raise StreamClosedError()  # our client left mid-upload: so does the request to the job
            await write(chunk)

    async def _proxy(self) -> None:
        if self._fetch is not None:
            end = asyncio.ensure_future(self._body_q.put(None))
            await asyncio.wait({end, self._fetch}, return_when=asyncio.FIRST_COMPLETED)
            end.cancel()  # no-op when it went in; else the job's server already answered
            self._body_done = True
            if self._headers_set:
                await self._flush_quietly()
            await self._fetch
        else:
            self._body_done = True
            body = b"" if self.request.method in ("POST", "PUT", "PATCH") else None
            await self._forward(body=body)
        if not self._finished:
            self.finish()

    async def _forward(self, body: bytes | None = None, body_producer=None) -> None:
        host, port, path, base = self._target
        headers = self._upstream_headers()
        if base:
            headers["X-Forwarded-Prefix"] = base
        req = HTTPRequest(self._url("http", host, port, path), method=self.request.method, headers=headers,
                          body=body, body_producer=body_producer, follow_redirects=False,
                          allow_nonstandard_methods=True, decompress_response=False, header_callback=self._on_header,
                          streaming_callback=self._on_chunk, connect_timeout=CONNECT_TIMEOUT,
                          request_timeout=REQUEST_TIMEOUT)
        try:
            await upstream_client().fetch(req, raise_error=False)
        except StreamClosedError:
            return  # our client went away while the answer streamed
        except Exception as e:  # noqa: BLE001 - whatever stops the job's server from answering
            if self._headers_set:
                self.request.connection.close()  # half an answer was sent: only closing says it is broken
                return
            raise BadGateway(f"the job's server on port {port} did not answer ({_why(e)}); is it listening on "
                             "0.0.0.0 or 127.0.0.1 (a pod: 0.0.0.0)?", field="port") from None

    def _url(self, scheme: str, host: str, port: int, path: str) -> str:
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        token = self.hub_auth.get_token(self, in_cookie=False) if getattr(self, "_token_authenticated", False) \
            else None
        query = strip_token_query(self.request.query, token)
        return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")

    def _on_header(self, line: str) -> None:
        if line.startswith("HTTP/"):
            self._status = httputil.parse_response_start_line(line.strip())
            self._resp = httputil.HTTPHeaders()
        elif line.strip():
            self._resp.parse_line(line)
        elif self._status is not None and self._status.code >= 200:
            host, port, _path, base = self._target
            self.clear()
            for name in ("Content-Type", "Server", "Date"):  # the job's server says these
                self.clear_header(name)
            self.set_status(self._status.code, self._status.reason or "Unknown")
            for k, v in response_headers(self._resp.get_all(), self.own_cookie, base, f"{host}:{port}",
                                         self.request.headers.get("Host", "")):
                self.add_header(k, v)
            self._headers_set = True

    async def _on_chunk(self, chunk: bytes) -> None:
        self.write(chunk)
        if self._body_done:
            await self.flush()  # back-pressure: the job's server is read as fast as our client takes it

    async def _flush_quietly(self) -> None:
        try:
            await self.flush()
        except StreamClosedError:
            pass

    async def get(self, *args: Any) -> None:
        if self._is_websocket():
            await self._open_websocket()
        else:
            await self._proxy()

    async def post(self, *args: Any) -> None:
        await self._proxy()

    put = patch = delete = head = options = post

    # -- WebSocket -------------------------------------------------------------------------------------------
    async def _open_websocket(self) -> None:
        # tornado checks the Origin only after the upgrade, once the job's server was already asked: check first
        h = self.request.headers
        why = cross_site("GET", h.get("Sec-Fetch-Site"), h.get("Origin"), h.get("Host", ""))
        if why:
            raise web.HTTPError(403, f"cross-origin WebSocket refused ({why})")
        host, port, path, _base = self._target
        headers = self._upstream_headers(websocket=True)
        protocols = [p.strip() for p in self.request.headers.get("Sec-WebSocket-Protocol", "").split(",")
                     if p.strip()]
        req = HTTPRequest(self._url("ws", host, port, path), headers=headers, connect_timeout=CONNECT_TIMEOUT,
                          request_timeout=30.0)
        try:
            self.ws_client = await websocket.websocket_connect(req, on_message_callback=self._from_job,
                                                               subprotocols=protocols or None)
        except HTTPClientError as e:
            raise BadGateway(f"the job's server refused the WebSocket ({e.code})", field="port") from None
        except Exception as e:  # noqa: BLE001
            raise BadGateway(f"the job's server on port {port} did not answer ({_why(e)})", field="port") from None
        try:
            await websocket.WebSocketHandler.get(self)
        finally:
            if self.get_status() != 101 and self.ws_client is not None:
                self.ws_client.close()  # our side refused the upgrade (origin, version)
                self.ws_client = None

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        chosen = self.ws_client.selected_subprotocol if self.ws_client else None
        return chosen if chosen in subprotocols else None

    def open(self, *args: Any) -> None:
        pending, self._pending = self._pending or [], None
        for msg in pending:
            self._from_job(msg)

    def _from_job(self, msg: Any) -> None:
        if self._pending is not None:
            self._pending.append(msg)
            return
        if msg is None:  # the job's server closed
            client, self.ws_client = self.ws_client, None
            self.close(*_close_args(client))
            return
        try:
            self.write_message(msg, binary=isinstance(msg, bytes))
        except websocket.WebSocketClosedError:
            self.on_close()

    async def on_message(self, message: str | bytes) -> None:
        if self.ws_client is not None:
            try:
                await self.ws_client.write_message(message, binary=isinstance(message, bytes))
            except websocket.WebSocketClosedError:
                self.close()

    def on_close(self) -> None:
        """The client's connection closed (tornado calls this for plain HTTP requests too)."""
        if self._body_q is not None and not self._body_done:
            while not self._body_q.empty():
                self._body_q.get_nowait()
            self._body_q.put_nowait(_ABORT)
        client, self.ws_client = self.ws_client, None
        if client is not None:
            client.close(*_close_args(self))


def _why(e: BaseException) -> str:
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def _close_args(side: Any) -> tuple[int | None, str | None]:
    """The close code and reason to pass on: codes that only describe a connection (1005 none given, 1006 lost,
    1015 TLS) may not be sent."""
    code = getattr(side, "close_code", None)
    if code is None or not (1000 <= code <= 4999) or code in (1004, 1005, 1006, 1015):
        return None, None
    return code, getattr(side, "close_reason", None)


async def effective(ti: EndpointContext, model: dict[str, Any]) -> Actor:
    """The caller as the API sees them (``handlers.actors.actor_of``: the one place TiHub's roles are applied); a
    disabled user is refused here as there."""
    try:
        return await actor_of(ti, model)
    except Forbidden as e:
        raise web.HTTPError(403, e.detail) from None
