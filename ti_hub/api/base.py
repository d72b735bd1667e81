"""One request chokepoint for the REST API: authentication, JSON in/out, errors, scopes."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import orjson
from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from tornado import web
from tornado.log import app_log

from ..domain import scopes as S
from ..domain.actor import Actor
from ..domain.errors import TiError
from ..ops.jobs import queue_of
from .contract import Op, Route, check, check_path, check_query, path_names
from .jsonbody import MAX_BODY, parse_object

if TYPE_CHECKING:
    from ..service.app import TiService

__all__ = ["MAX_BODY", "APIHandler", "MethodsAllowed", "Refusals", "actor_of"]
log = logging.getLogger("ti_hub.api")


class ContractBroken(TiError):
    """An answer that is not what the route's contract declares (checked only with TiService.check_responses)."""

    status = 500
    error = "contract_broken"


RETRY_AFTER_S = 5


def storage_trouble(e: BaseException) -> str | None:
    """Plain words for a failure of the platform's storage (the database locked by another process, a full
    disk), which is temporary and never the request's fault; None for anything else."""
    import errno

    from sqlalchemy.exc import OperationalError

    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "TiHub is out of disk space; nothing was changed. Try again shortly (the administrators are told)"
    if isinstance(e, OperationalError):
        text = str(e.orig if e.orig is not None else e).lower()
        if "locked" in text or "lock timeout" in text or "busy" in text:
            return "TiHub's database is busy; nothing was changed. Try again in a few seconds"
        if "full" in text or "no space" in text or "disk i/o" in text or "quota" in text:
            return "TiHub is out of disk space; nothing was changed. Try again shortly (the administrators are told)"
    return None


class MethodsAllowed:
    """A 405 says which methods the path answers (RFC 9110 15.5.6: its Allow header is required), for the methods
    a handler lacks and for those tornado itself refuses before the handler runs (TRACE, CONNECT, QUERY, ...)."""

    def allowed_methods(self) -> list[str]:
        route = getattr(self, "route", None)
        if route is not None:  # an API route: exactly the methods its contract (and so the document) declares
            return [m.upper() for m in route.ops]
        cls = type(self)
        return [m for m in cls.SUPPORTED_METHODS
                if getattr(cls, m.lower(), None) is not getattr(web.RequestHandler, m.lower(), None)]

    def allow_header(self, status_code: int) -> None:
        if status_code == 405:
            self.set_header("Allow", ", ".join(self.allowed_methods()))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.allow_header(status_code)  # after send_error's clear(), which drops headers set before it
        super().write_error(status_code, **kwargs)


class Refusals(MethodsAllowed):
    """For request handlers: a TiError is a refusal answered with its status, never logged as a server error;
    every error is answered as the API's JSON error document. Storage trouble (``storage_trouble``) is a 503
    with Retry-After, logged in one line: the transaction was rolled back, so nothing is half-stored."""

    def log_exception(self, typ, value, tb) -> None:
        if isinstance(value, TiError):
            return  # an expected refusal, not a server problem
        super().log_exception(typ, value, tb)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, TiError):
            self.send_error(e.status, exc_info=(type(e), e, e.__traceback__))
            return
        trouble = storage_trouble(e)
        if trouble is not None and not self._finished:
            from ..domain.errors import Unavailable

            app_log.warning("%s %s: 503 (%s: %s)", self.request.method, self.request.path, type(e).__name__, e)
            err = Unavailable(trouble)
            err.retry_after = RETRY_AFTER_S
            self.send_error(503, exc_info=(type(err), err, e.__traceback__))
            return
        super()._handle_request_exception(e)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, TiError):
            self.set_status(exc.status)
            body = exc.to_json()
            if getattr(exc, "retry_after", None):
                self.set_header("Retry-After", str(exc.retry_after))
        elif isinstance(exc, web.HTTPError):
            body = {"error": {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}
                    .get(status_code, "http_error"), "detail": exc.log_message or self._reason, "field": None}
        else:
            body = {"error": "internal", "detail": "internal error; the administrators can find it in the log",
                    "field": None}
        self.allow_header(status_code)
        # the proxy may fail after relaying a job's headers: answer plain JSON whatever was set before
        self.clear_header("Content-Encoding")
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body, default=_default))


class APIHandler(Refusals, HubOAuthenticated, web.RequestHandler):
    """Every API route derives from this: an unauthenticated request never reaches a handler body, and a request
    that breaks its route's contract (parameters, query, body: api/contract.py) never reaches one either."""

    route: Route | None = None

    def initialize(self, route: Route | None = None) -> None:
        self.route = route

    @property
    def contract(self) -> Op | None:
        return self.route.ops.get(self.request.method.lower()) if self.route is not None else None

    @property
    def ti(self) -> TiService:
        return self.settings["ti"]

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")

    def compute_etag(self) -> None:
        return None  # API answers change with every job state; hashing each body costs and helps no cache

    async def prepare(self) -> None:
        # asynchronously: HubAuth's synchronous path hops through a thread per request and blocks the
        # event loop for the hub round trip on a cache miss
        model = await self.hub_auth.get_user(self, sync=False)
        if not model:
            self._hub_auth_user_cache = None
            raise web.HTTPError(401, "authentication required: send 'Authorization: token <hub API token>'")
        try:
            self._hub_auth_user_cache = self.check_hub_user(model)
        except UserNotAllowed:
            self._hub_auth_user_cache = None
            raise web.HTTPError(403, f"{model.get('name')} may not use the TiHub service") from None
        if self.route is not None:
            op = self.contract
            if op is None:
                raise web.HTTPError(405)
            names = path_names(self.route.path)
            check_path(self.route.params, {n: a for n, a in zip(names, self.path_args) if n})
            check_query(op.query, self.args())
        self._actor = await actor_of(self.ti, model)

    @property
    def actor(self) -> Actor:
        """The caller with their effective TiHub permissions (ops/grants.py), found once in ``prepare``."""
        found = getattr(self, "_actor", None)
        if found is None:  # prepare() stopped before (an error page): no TiHub permission at all
            return without_permissions(self.current_user)
        return found

    def body(self) -> dict[str, Any]:
        """The JSON body, strictly parsed (api/jsonbody.py) and checked against the operation's body schema."""
        op = self.contract
        if op is None or op.body is None:
            # a programming error: the document would not say this operation takes a body
            raise AssertionError(f"{self.request.method} {self.request.path} reads a body its contract lacks")
        data = parse_object(self.request.body)
        check(op.body, data)
        return data

    def args(self) -> dict[str, str]:
        """The query parameters as sent (the last of repeated ones; never form fields of the body: the API reads
        JSON). Not get_argument(): it strips spaces and turns control characters into spaces, so the value
        checked against the contract would not be the value sent."""
        return {k: self.decode_argument(v[-1], name=k) for k, v in self.request.query_arguments.items()}

    def send_page(self, data: dict[str, Any], extra_args: tuple[str, ...] = ()) -> None:
        """Pagination for lists built in memory: the same ?limit=&offset= contract as every list."""
        from ..domain import validation as v
        from ..ops.common import page_list

        args = self.args()
        v.check_fields(args, ("limit", "offset", *extra_args))
        limit, offset = v.pagination(args)
        self.send(page_list(data["items"], limit, offset))

    def send(self, data: Any, status: int = 200) -> None:
        raw = orjson.dumps(data, default=_default)
        if self.ti.check_responses:
            self._check_answer(raw, status)
        self.set_status(status)
        self.finish(raw)

    def _check_answer(self, raw: bytes, status: int) -> None:
        """Tests: the answer must be what the contract declares (the document cannot drift from the code)."""
        op = self.contract
        if op is None:
            return
        problem = None
        if status not in (op.status, *op.also):
            problem = f"status {status} is not declared (declared: {op.status}, {op.also})"
        elif op.response is not None:
            try:
                check(op.response, orjson.loads(raw), "answer")
            except TiError as e:
                problem = e.detail
        if problem:
            log.error("%s %s: the answer breaks the API document: %s", self.request.method, self.route.path,
                      problem)
            raise ContractBroken(f"the answer breaks the API document: {problem}")

    async def with_queue_place(self, out: dict[str, Any]) -> dict[str, Any]:
        """A just-written job's place in its queue, counted after the commit (a COUNT over the queue that need not
        hold TiHub's write lock); none once the scheduler took it out of the queue."""
        queue = await self.ti.db(queue_of, out["id"], readonly=True)
        if queue is not None:
            out["queue"] = queue
        return out

    async def op(self, fn, *args, **kwargs) -> Any:
        """Run an operation in a worker thread inside one transaction (commit on success).

        GET requests never write, so they run as read-only transactions (no SQLite write lock)."""
        return await self.ti.db(fn, *args, readonly=self.request.method == "GET", **kwargs)



def without_permissions(model: dict[str, Any]) -> Actor:
    """The caller before (or without) ``actor_of``: their token's other scopes, none of TiHub's permissions."""
    return Actor(model["name"], frozenset(x for x in model.get("scopes", ()) if x not in S.PERMISSIONS),
                 tuple(model.get("groups") or ()), kind=model.get("kind", "user"))


async def actor_of(ti: TiService, model: dict[str, Any]) -> Actor:
    """The Actor of a hub user model (HubAuth's): a user's permissions are their token's scopes narrowed to what
    their TiHub roles grant (``grants.effective_actor``, the one place that decides); a service keeps its own."""
    from ..ops import grants

    name, scopes, groups = model["name"], tuple(model.get("scopes", ())), tuple(model.get("groups") or ())
    kind = model.get("kind", "user")
    if kind != "user":
        return Actor(name=name, scopes=frozenset(scopes), groups=groups, kind=kind)
    return await ti.db(grants.effective_actor, name, scopes, groups, "user", ti.default_role, readonly=True)


def _default(o: Any) -> Any:
    if isinstance(o, (set, frozenset)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")
