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
