"""Errors that carry an HTTP status, a machine-readable code, a plain detail and the field at fault."""

from __future__ import annotations

from typing import Any


class TiError(Exception):
    status = 400
    error = "bad_request"

    def __init__(self, detail: str, field: str | None = None, **extra: Any):
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.extra = extra

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error, "detail": self.detail, "field": self.field, **self.extra}


class ValidationError(TiError):
    status = 400
    error = "invalid"


class NotFound(TiError):
    status = 404
    error = "not_found"


class Forbidden(TiError):
    status = 403
    error = "forbidden"


class Conflict(TiError):
    status = 409
    error = "conflict"


class QuotaExceeded(TiError):
    """Names the resource, the request, the usage and the limit (RES3)."""

    status = 403
    error = "quota_exceeded"


class BadGateway(TiError):
    """A job's server behind an endpoint did not answer (not listening yet, or gone)."""

    status = 502
    error = "bad_gateway"


class HubUnavailable(TiError):
    """The hub did not answer a question the service had to ask it (or its token may not ask it)."""

    status = 502
    error = "hub_unavailable"


class Unavailable(TiError):
    """Something this TiHub lacks (an optional package)."""

    status = 503
    error = "unavailable"


class NotHere(TiError):
    """Not implemented on this backend."""

    status = 501
    error = "not_implemented"
