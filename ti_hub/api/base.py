"""One request chokepoint for the REST API: authentication, JSON in/out, errors, scopes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson
from jupyterhub.services.auth import HubOAuthenticated, UserNotAllowed
from tornado import web

from ..domain.actor import Actor
from ..domain import validation as v
from ..domain.errors import TiError
from ..handlers.actors import actor_of, without_permissions
from ..handlers.refusals import MethodsAllowed, Refusals, json_default
from ..ops.common import page_list
from ..ops.jobs import queue_of
from .contract import Op, Route, check, check_path, check_query, path_names
from .jsonbody import MAX_BODY, parse_object

if TYPE_CHECKING:
    from .context import ServiceContext

__all__ = ["MAX_BODY", "APIHandler", "MethodsAllowed", "Refusals", "actor_of"]
log = logging.getLogger("ti_hub.api")


class ContractBroken(TiError):
    """An answer that is not what the route's contract declares (checked only with TiService.check_responses)."""

    status = 500
    error = "contract_broken"



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
    def ti(self) -> ServiceContext:
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

        args = self.args()
        v.check_fields(args, ("limit", "offset", *extra_args))
        limit, offset = v.pagination(args)
        self.send(page_list(data["items"], limit, offset))

    def send(self, data: Any, status: int = 200) -> None:
        raw = orjson.dumps(data, default=json_default)
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



