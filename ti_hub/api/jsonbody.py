"""Pure: a request body as one JSON object, strictly.

Python's json module is lenient where an API must not be: it takes ``NaN`` and ``Infinity``, reads ``1e999`` as
infinity, keeps the last of two equal keys (so ``{"plan": "small", "plan": "huge"}`` means what one reader of the
body sees and another does not), and a deeply nested body ends in a RecursionError (a 500). Every one of those is
refused here with a ValidationError naming what is wrong.
"""

from __future__ import annotations

import math
from typing import Any

import json

from ..domain.errors import ValidationError

MAX_BODY = 1 << 20
# the deepest the API's own documents go is 4 (a submission's volumes[i].field); 32 leaves room, and stays far
# below Python's recursion limit and orjson's (255 levels, for the answers that echo what was stored)
MAX_DEPTH = 32


class _Duplicate(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large a number")
    return value


def depth(value: Any) -> int:
    """How deep objects and arrays nest (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break  # deep enough to refuse; no need to walk the rest
        stack.extend((c, level + 1) for c in children)
    return deepest


def parse_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object; ValidationError (400) for anything else, naming the problem."""
    if len(raw) > MAX_BODY:
        raise ValidationError(f"the request body must be at most {MAX_BODY} bytes")
    try:
        data = json.loads(raw or b"{}", object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float)
    except _Duplicate as e:
        raise ValidationError(f"the request body gives {e.key!r} twice; give each field once", field=e.key) from None
    except RecursionError:
        raise ValidationError(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as e:
        # ValueError also covers integers of more than 4300 digits (Python's int limit)
        raise ValidationError(f"the request body is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(data, dict):
        raise ValidationError("the request body must be a JSON object")
    if depth(data) > MAX_DEPTH:
        raise ValidationError(f"the request body nests deeper than {MAX_DEPTH} levels")
    return data
