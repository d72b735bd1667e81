"""The API's contract, declared once: each operation's parameters, body and answers as JSON Schema.

The route table (``service/web.py``) declares an ``Op`` for every method of every route. The request chokepoint
(``api/base.py``) checks path parameters, query parameters and the body against it before a handler runs, and
the OpenAPI document (``service/openapi.py``) is printed from the same declarations, so the API cannot accept
what the document refuses, nor take a parameter the document does not name. The domain validators
(``domain/validation.py``, ``ops/``) keep the rules a schema cannot say: a plan exists, a quota holds, a port
is free. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# jsonschema's format checkers import rfc3987_syntax where it is installed (jupyter_events asks for it), and that
# builds a grammar for ~1.6 s at import: every ti service process would start that much later (and a killed
# one come back that much later). The API's schemas use no IRI formats, so it is kept out of this process.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from jsonschema import Draft202012Validator  # noqa: E402
from jsonschema.exceptions import ValidationError as SchemaError  # noqa: E402
from jsonschema.exceptions import best_match  # noqa: E402

from ..domain import validation as v  # noqa: E402
from ..domain.errors import ValidationError  # noqa: E402

# statuses every operation of the API can answer: bad input, no login, not allowed
COMMON_ERRORS = (400, 401, 403)
PARAM_RE = re.compile(r"\{(\w+)\}")
LITERAL_RE = re.compile(r"\((\w+)\)")
# parameters every operation tolerates: ?token= (HubAuth reads it only for WebSocket handshakes, and the log
# hides it); refusing it would only turn a 401 into a 400
AUTH_QUERY = ("token",)
# the keywords of schemas' rules that tie fields together (checked once each field is right: ``check``)
CONDITIONS = {"if", "then", "else"}
# strings refused by the validators of text (domain/validation.text), for schemas to refuse with "not"
NUL = {"type": "string", "pattern": r"\x00"}
BLANK = {"type": "string", "pattern": r"^[\s\x1c-\x1f\x85\ufeff]*$"}  # white space to Python and to ECMA


@dataclass(frozen=True)
class Param:
    schema: dict[str, Any]
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Op:
    """One method of one route. ``response`` None: the answer is 204 without a body."""

    summary: str
    response: dict[str, Any] | None = None
    status: int = 200
    body: dict[str, Any] | None = None
    query: Mapping[str, Param] = field(default_factory=dict)
    errors: tuple[int, ...] = ()  # what it answers besides COMMON_ERRORS (404, 409, 502, ...)
    also: tuple[int, ...] = ()  # other success statuses (POST .../tensorboard: 200 when it already ran)
    description: str = ""


class Route(NamedTuple):
    """``path``: "/jobs/{id}/logs"; a segment "(kill)" is literal, and handed to the handler as an argument."""

    path: str
    handler: type
    ops: dict[str, Op]
    params: Mapping[str, Param] = {}


def route_regex(path: str) -> str:
    """The tornado pattern of a route path."""
    return PARAM_RE.sub(r"([^/]+)", path)


def openapi_path(path: str) -> str:
    return LITERAL_RE.sub(r"\1", path)


def path_names(path: str) -> list[str | None]:
    """What each capture group of the route's pattern is: a parameter's name, or None for a literal."""
    return [m.group(1) or None for m in re.finditer(r"\{(\w+)\}|\(\w+\)", path)]


# -- checking requests -----------------------------------------------------------------------------------

_VALIDATORS: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """Compiled once per schema (the declarations are module constants)."""
    hit = _VALIDATORS.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = _VALIDATORS[id(schema)] = (schema, Draft202012Validator(schema))
    return hit[1]


def field_name(path: Any, prefix: str = "") -> str | None:
    """A JSON path as the API names fields: volumes[0].mount_path, env.NAME."""
    out = prefix
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or None


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _type_words(t: Any) -> str:
    words = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
             "object": "an object", "array": "a list", "null": "null"}
    types = t if isinstance(t, list) else [t]
    return " or ".join(words.get(x, x) for x in types)


def _range(schema: Mapping[str, Any]) -> str:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and lo == hi:
        return f"{lo:g}"
    if lo is not None and hi is not None:
        return f"between {lo:g} and {hi:g}" if isinstance(lo, float) or isinstance(hi, float) else \
            f"between {lo} and {hi}"
    return f"at least {lo}" if lo is not None else f"at most {hi}"


def explain(e: SchemaError, prefix: str = "") -> ValidationError:
    """A schema violation as the API's error: the field and the rule, never the (possibly huge) value."""
    f = field_name(e.absolute_path, prefix)
    what = f or "the request body"
    s, kw, val = e.schema if isinstance(e.schema, Mapping) else {}, e.validator, e.validator_value
    rule = s.get("description") if isinstance(s, Mapping) else None
    if kw == "additionalProperties" and isinstance(e.instance, Mapping):
        known = list((s.get("properties") or {}))
        unknown = [k for k in e.instance if k not in known]
        key = str(unknown[0])[:64] if unknown else "?"
        allowed = f"; allowed: {', '.join(sorted(known))}" if known else ""
        return ValidationError(f"unknown field {key!r}{allowed}", field=field_name([*e.absolute_path, key], prefix))
    if kw == "required":
        missing = next((k for k in val if k not in e.instance), val[0])
        return ValidationError(f"{missing} is required", field=field_name([*e.absolute_path, missing], prefix))
    if kw == "dependentRequired" and isinstance(e.instance, Mapping):
        given = next((k for k, needs in val.items() if k in e.instance and any(n not in e.instance for n in needs)),
                     next(iter(val)))
        missing = next((n for n in val.get(given, ()) if n not in e.instance), "?")
        return ValidationError(f"{missing} is required with {given}",
                               field=field_name([*e.absolute_path, missing], prefix))
    if "propertyNames" in e.schema_path:
        key = str(e.instance)[:64]
        return ValidationError(f"{what}: {key!r} is not a valid name ({rule or 'see the API document'})",
                               field=field_name([*e.absolute_path, key], prefix))
    if kw == "type":
        text = f"{what} must be {_type_words(val)}"
    elif kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        text = f"{what} must be {_range(s)}"
    elif kw in ("minLength", "maxLength"):
        lo, hi = s.get("minLength"), s.get("maxLength")
        text = (f"{what} must be at most {hi} characters" if kw == "maxLength" else
                f"{what} must not be empty" if lo == 1 else f"{what} must be at least {lo} characters")
    elif kw in ("minItems", "maxItems"):
        text = (f"{what} must not be empty" if kw == "minItems" and val == 1 else
                f"{what}: at least {_plural(val, 'item')}" if kw == "minItems" else
                f"{what}: at most {_plural(val, 'item')}")
    elif kw in ("minProperties", "maxProperties"):
        text = f"{what}: {'at least' if kw == 'minProperties' else 'at most'} {_plural(val, 'entry')}"
    elif kw == "uniqueItems":
        text = f"{what}: an item is listed twice"
    elif kw in ("enum", "const"):
        options = val if kw == "enum" else [val]
        text = f"{what} must be one of: {', '.join(o if isinstance(o, str) and o else json.dumps(o) for o in options)}"
    elif kw == "pattern":
        text = f"{what} must be {rule}" if rule else f"{what} must match {val}"
    elif kw == "not" and val in (NUL, {"anyOf": [NUL, BLANK]}):
        text = f"{what} must not contain NUL characters" + (" nor be blank" if val != NUL else "")
    else:  # anyOf, oneOf, not, ...: the schema's description says what is wanted
        text = f"{what} must be {rule}" if rule else f"{what} is not valid here ({kw})"
    if rule and rule not in text and CONDITIONS & set(e.schema_path):  # a rule tying fields: say when it holds
        text += f" ({rule})"
    return ValidationError(text, field=f)


def exactly_one_of(e: SchemaError) -> list[str]:
    """The fields of a oneOf that means "exactly one of these fields" (schemas/common.exactly_one), else []."""
    if e.validator != "oneOf" or not isinstance(e.validator_value, list):
        return []
    names = [b["required"][0] for b in e.validator_value
             if isinstance(b, Mapping) and len(b.get("required") or ()) == 1 and set(b) <= {"required", "properties"}]
    return names if len(names) == len(e.validator_value) else []


def check(schema: dict[str, Any], value: Any, prefix: str = "") -> None:
    """ValidationError (400) naming the field and the rule when ``value`` does not follow ``schema``."""
    errors = list(validator(schema).iter_errors(value))
    # a field's own rule first; the rules that tie fields together (if/then/else) once every field is right
    err = best_match([e for e in errors if not CONDITIONS & set(e.schema_path)] or errors)
    if err is None:
        return
    outer, chain = err, []
    while outer.parent is not None:
        outer = outer.parent
        chain.append(outer)
    for e in (err, *chain):
        one_of = exactly_one_of(e)
        if one_of:
            where = field_name(e.absolute_path, prefix)
            raise ValidationError(f"{where + ': ' if where else ''}give exactly one of: {', '.join(one_of)}",
                                  field=field_name([*e.absolute_path, one_of[0]], prefix))
    found = explain(err, prefix)
    # inside "a name or an id" (anyOf), one alternative's rule is only half the story: say the whole
    for e in reversed(chain):  # the outermost first
        rule = e.schema.get("description") if isinstance(e.schema, Mapping) else None
        if e.validator in ("anyOf", "oneOf") and rule:
            what = field_name(e.absolute_path, prefix) or "the request body"
            inner = found.detail[len(what) + 1:] if found.detail.startswith(what + " ") else found.detail
            hint = "" if err.validator in ("type", "anyOf", "oneOf") else f" ({inner})"
            raise ValidationError(f"{what} must be {rule}{hint}", field=field_name(e.absolute_path, prefix))
    raise found


def coerce(raw: str, schema: Mapping[str, Any], name: str) -> Any:
    """A URL parameter (always text) as the value its schema describes: integers are ASCII digits."""
    if schema.get("type") == "integer":
        lo, hi = schema.get("minimum", -v.MAX_ID), schema.get("maximum", v.MAX_ID)
        return v.parse_int(raw, name, lo, hi)
    return raw


def check_path(params: Mapping[str, Param], values: Mapping[str, str]) -> None:
    for name, raw in values.items():
        p = params.get(name)
        if p is not None:
            check(p.schema, coerce(raw, p.schema, name), name)


def check_query(query: Mapping[str, Param], args: Mapping[str, str]) -> None:
    """Unknown query parameters are refused like unknown fields: a typo never passes silently."""
    for name, raw in args.items():
        p = query.get(name)
        if p is None:
            if name in AUTH_QUERY:
                continue
            allowed = f"; allowed: {', '.join(sorted(query))}" if query else "; this operation takes none"
            raise ValidationError(f"unknown query parameter {name[:64]!r}{allowed}", field=name[:64])
        check(p.schema, coerce(raw, p.schema, name), name)
    for name, p in query.items():
        if p.required and not args.get(name):
            raise ValidationError(f"{name} is required", field=name)
