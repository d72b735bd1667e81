"""Building blocks of the API's schemas: ids, names, times, lists, the error document, shared parameters.

A schema with a ``title`` is one thing of the API (a Job, a Volume): the OpenAPI document lists it once under
``components`` and refers to it; the request chokepoint reads it inline. Limits come from the validators'
own constants, so a rule changes in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...domain import states as st
from ...domain import validation as v
from ..contract import BLANK, NUL, Param

Schema = dict[str, Any]


def obj(props: Mapping[str, Schema], required: Iterable[str] = (), *, title: str | None = None,
        description: str | None = None, extra: bool | Schema = False, **more: Any) -> Schema:
    """An object; unknown fields are refused (additionalProperties false) unless ``extra`` says otherwise."""
    out: Schema = {"type": "object", "properties": dict(props), "additionalProperties": extra}
    if required:
        out["required"] = list(required)
    if title:
        out["title"] = title
    if description:
        out["description"] = description
    out.update(more)
    return out


def answer(props: Mapping[str, Schema], optional: Iterable[str] = (), **kw: Any) -> Schema:
    """A response object: every field is always there except those named ``optional``."""
    opt = set(optional)
    return obj(props, [k for k in props if k not in opt], **kw)


def array(items: Schema, **more: Any) -> Schema:
    return {"type": "array", "items": items, **more}


def nullable(schema: Schema) -> Schema:
    t = schema.get("type")
    if t is None:
        out = {"anyOf": [schema, {"type": "null"}]}
        if schema.get("description"):
            out["description"] = schema["description"] + ", or null"
        return out
    out = {**schema, "type": [*(t if isinstance(t, list) else [t]), "null"]}
    if "enum" in schema and None not in schema["enum"]:  # an enum checks values: null is one of them too
        out["enum"] = [*schema["enum"], None]
    return out


def _bounded(kind: str, lo: float | None, hi: float | None, description: str | None) -> Schema:
    out: Schema = {"type": kind}
    if lo is not None:
        out["minimum"] = lo
    if hi is not None:
        out["maximum"] = hi
    if description:
        out["description"] = description
    return out


def integer(lo: int | None = None, hi: int | None = None, description: str | None = None) -> Schema:
    return _bounded("integer", lo, hi, description)


def number(lo: float | None = None, hi: float | None = None, description: str | None = None) -> Schema:
    return _bounded("number", lo, hi, description)


def string(max_len: int | None = None, min_len: int | None = None, description: str | None = None,
           **more: Any) -> Schema:
    out: Schema = {"type": "string"}
    if min_len:
        out["minLength"] = min_len
    if max_len is not None:
        out["maxLength"] = max_len
    if description:
        out["description"] = description
    out.update(more)
    return out


def enum(values: Iterable[str], description: str | None = None) -> Schema:
    out: Schema = {"type": "string", "enum": list(values)}
    if description:
        out["description"] = description
    return out


# text as domain/validation.text takes it: no NUL character; ``filled``: not only white space either. Said with
# "not" (contract.NUL, BLANK) rather than one anchored pattern, which makes generating long texts slow
NO_NUL = {"not": NUL}
FILLED = {"not": {"anyOf": [NUL, BLANK]}}


def text(max_len: int = v.MAX_TEXT, filled: bool = False, description: str | None = None) -> Schema:
    return string(max_len, 1 if filled else None, description, **(FILLED if filled else NO_NUL))


# bounds the service's configuration sets, with their defaults: a schema names one with "x-limit"; requests are
# checked against the configured value by the handlers, and the document states it as the maximum
# (service/openapi.py)
LIMITS = {"TiService.max_workers": 64, "TiService.max_ps": 16, "HealthMonitor.window": 3600,
          "ClusterAccounting.keep_days": 35}


def limited(schema: Schema, setting: str) -> Schema:
    assert setting in LIMITS, setting
    return {**schema, "x-limit": setting}


def exactly_one(*fields: str) -> list[Schema]:
    """For ``oneOf``: exactly one of ``fields`` is given, null counting as not given (the validators read it so);
    refused as "give exactly one of ..." (contract.check)."""
    return [{"required": [f], "properties": {f: {"not": {"type": "null"}}}} for f in fields]


STR = {"type": "string"}
BOOL = {"type": "boolean"}
INT = {"type": "integer"}
NUM = {"type": "number"}
COUNT = integer(0)
ID = integer(1, v.MAX_ID, f"an id: {v.ID_RULE}")
NAME = string(description=v.NAME_RULE, pattern=v.NAME_PATTERN)
TEXT = text()
TIME = string(description="a time (ISO 8601, UTC)")
MAYBE_TIME = nullable(TIME)
USERNAME = string(255, 1, "a hub user name")
ANY_OBJECT = {"type": "object"}
VC_FILTER = string(63, 1, f"a virtual cluster ({v.NAME_RULE}), or * for all", pattern=rf"^(\*|{v.NAME_PATTERN[1:-1]})$")
STATUS = enum(st.ALL)
KIND = enum(st.KINDS)


def ref(what: str, max_len: int = 255) -> Schema:
    """A reference by name or id, as request bodies give them."""
    return {"anyOf": [string(max_len, 1), ID], "description": f"a {what} name or id"}


def page_of(item: Schema, **more: Schema) -> Schema:
    """The answer of every list: one page and the total (docs/api.md)."""
    return answer({"items": array(item), "total": COUNT, "limit": COUNT, "offset": COUNT, **more})


def items_of(item: Schema) -> Schema:
    """A short list answered whole."""
    return answer({"items": array(item), "total": COUNT})


ERROR = obj({"error": string(description="a machine-readable code"),
             "detail": string(description="what is wrong, in a plain sentence"),
             "field": nullable(string(description="the field, parameter or path part at fault")),
             # quota refusals name the resource, the request, the use and the limit (RES3)
             "resource": STR, "requested": NUM, "used": NUM, "limit": NUM,
             "holders": array(STR),
             # a per-user cap over the VC's devices (RES2): the cap asked, and "limit" the devices there
             "cap": NUM,
             # a VC that is not empty (RES2): what is left in it, so that a page can name the jobs it would stop
             "jobs": array(ANY_OBJECT), "job_count": NUM, "machines": array(STR), "plans": array(STR),
             # a refused CSV import: every row's outcome (api/schemas/people.py IMPORT_ROW)
             "rows": array(ANY_OBJECT)},
            ["error", "detail", "field"], title="Error",
            description="Every refusal: 4xx for the caller's mistakes and refusals, 5xx for the server's.")

# -- parameters ------------------------------------------------------------------------------------------
LIMIT = Param(integer(1, 500), "page size (default 50)")
OFFSET = Param(integer(0, v.MAX_OFFSET), "items to skip (default 0)")
PAGE = {"limit": LIMIT, "offset": OFFSET}
FLAG_VALUES = ("1", "0", "true", "false", "yes", "no", "")


def flag(description: str) -> Param:
    return Param(enum(FLAG_VALUES), description)


def page(default: int = 50, most: int = 500) -> dict[str, Param]:
    return {"limit": Param(integer(1, most), f"page size (default {default})"), "offset": OFFSET}


REF_PATTERN = r"^([0-9]{1,19}|[A-Za-z0-9_-]{4,63})$"  # an id, or a name (NAME_PATTERN)
JOB_REF = Param(string(320, 1, f"a job id ({v.ID_RULE}), the name of one of mine, or OWNER/NAME (the slash written "
                                "%2F)", pattern=r"^([0-9]{1,19}|([^/]{1,255}/)?[A-Za-z0-9_-]{4,63})$"),
                "the job: its id, its name (mine), or OWNER/NAME")
ID_PARAM = Param(ID, "the id")
NAME_OR_ID = Param(string(63, 1, f"a name ({v.NAME_RULE}) or an id", pattern=REF_PATTERN), "a name (mine) or an id")
VOLUME_REF = Param(string(320, 1, "a volume id, my volume's name, or OWNER/NAME of one shared with me (the "
                                  "slash written %2F)"), "the volume")
USER_PARAM = Param(USERNAME, "a hub user name")
