"""The OpenAPI 3.1 document, printed from the route table's contracts (service/web.py, api/contract.py).

Nothing here is written by hand per operation: parameters, bodies, answers and refusals all come from the
declarations the request chokepoint enforces. Schemas with a ``title`` are listed once under ``components``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .. import __version__
from ..api.contract import COMMON_ERRORS, Op, Param, Route, openapi_path, validator
from ..api.schemas.common import ERROR, LIMITS

REFUSALS = {
    400: "Bad input: the error names the field or parameter and the rule; nothing was stored",
    401: "No valid login: send 'Authorization: token <hub API token>'",
    403: "Not allowed: a permission is missing (the detail names it), or a quota is exceeded",
    404: "No such thing, or not one the caller may see",
    409: "Refused in the current state (the detail says why)",
    501: "Not implemented on this backend",
    502: "A server behind this one (the hub, a job's server) did not answer",
    503: "An optional part of TiHub is missing here",
}
SUCCESS = {200: "OK", 201: "Created", 204: "Done; no content"}


class _Components:
    """Hoists titled schemas into components/schemas and refers to them; states each configured bound
    (schemas/common.limited) as the maximum it has here."""

    def __init__(self, limits: Mapping[str, float] | None = None) -> None:
        self.schemas: dict[str, Any] = {}
        self.limits = {**LIMITS, **(limits or {})}

    def use(self, schema: Any) -> Any:
        if isinstance(schema, list):
            return [self.use(s) for s in schema]
        if not isinstance(schema, dict):
            return schema
        out = {k: (self.use(v) if k not in ("enum", "const", "required") else v) for k, v in schema.items()}
        if "x-limit" in out:
            out["maximum"] = self.limits[out["x-limit"]]
        title = schema.get("title")
        if title is None:
            return out
        known = self.schemas.setdefault(title, out)
        assert known == out, f"two different schemas are both titled {title!r}"
        return {"$ref": f"#/components/schemas/{title}"}


def _content(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _parameters(where: str, params: dict[str, Param], comps: _Components, required: bool) -> list[dict[str, Any]]:
    return [{"name": name, "in": where, "required": required or p.required, "description": p.description,
             "schema": comps.use(p.schema)} for name, p in params.items()]


def _operation(method: str, route: Route, op: Op, comps: _Components) -> dict[str, Any]:
    path = openapi_path(route.path)
    out: dict[str, Any] = {
        "operationId": f"{method}_" + "_".join(w for w in re.split(r"[^A-Za-z0-9]+", path) if w),
        "summary": op.summary,
        "tags": [path.strip("/").split("/")[0] or "api"],
        "parameters": [*_parameters("path", dict(route.params), comps, True),
                       *_parameters("query", dict(op.query), comps, False)],
    }
    if op.description:
        out["description"] = op.description
    if op.body is not None:
        # an empty body is read as {}: required exactly where the schema refuses {}
        out["requestBody"] = {"required": not validator(op.body).is_valid({}),
                              "content": _content(comps.use(op.body))}
    responses: dict[str, Any] = {}
    for status in (op.status, *op.also):
        responses[str(status)] = ({"description": SUCCESS.get(status, "OK")} if op.response is None else
                                  {"description": SUCCESS.get(status, "OK"), "content": _content(comps.use(op.response))})
    for status in sorted({*COMMON_ERRORS, *op.errors}):
        responses[str(status)] = {"description": REFUSALS[status], "content": _content(comps.use(ERROR))}
    out["responses"] = responses
    return out


def document(prefix: str, routes: Iterable[Route], limits: Mapping[str, float] | None = None) -> dict[str, Any]:
    """``limits``: the configured values of the bounds schemas name (schemas/common.LIMITS: their defaults)."""
    comps = _Components(limits)
    paths: dict[str, Any] = {}
    for route in routes:
        ops = paths.setdefault(openapi_path(route.path), {})
        for method, op in route.ops.items():
            ops[method] = _operation(method, route, op, comps)
    return {
        "openapi": "3.1.0",
        "info": {"title": "TiHub API", "version": __version__,
                 "description": "TiHub's REST API (docs/api.md). Errors are {error, detail, field}; lists are "
                                "pages {items, total, limit, offset}; unknown fields and query parameters are "
                                "refused."},
        "servers": [{"url": prefix}],
        "paths": paths,
        "components": {"schemas": dict(sorted(comps.schemas.items())), "securitySchemes": {
            "token": {"type": "apiKey", "in": "header", "name": "Authorization",
                      "description": "a JupyterHub API token: 'token <TOKEN>', with access:services!service=ti (a "
                                     "browser uses the service's OAuth cookie instead). A ?token= in the URL is "
                                     "ignored, as JupyterHub ignores it, and never written to the log"}}},
        "security": [{"token": []}],
    }

