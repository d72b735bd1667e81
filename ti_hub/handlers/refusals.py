"""The request handlers' common answers, for the REST API, the pages and the job endpoints alike: a 405 naming the
allowed methods, a refusal (TiError) answered with its status as the API's JSON error document, storage trouble as
a 503 with Retry-After."""

from __future__ import annotations

import errno
import json
from typing import Any

from sqlalchemy.exc import OperationalError
from tornado import web
from tornado.log import app_log

from ..domain.errors import TiError, Unavailable

RETRY_AFTER_S = 5


def storage_trouble(e: BaseException) -> str | None:
    """Plain words for a failure of the platform's storage (the database locked by another process, a full
    disk), which is temporary and never the request's fault; None for anything else."""
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
        self.finish(json.dumps(body, default=json_default))



def json_default(o: Any) -> Any:
    if isinstance(o, (set, frozenset)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")
