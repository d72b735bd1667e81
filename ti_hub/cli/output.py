"""Printing: aligned tables, key/value details, raw JSON, compact times and sizes."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# a column: (HEADER, key or function of the row)
Column = tuple[str, "str | Callable[[Mapping[str, Any]], Any]"]
MAX_CELL = 48


def out(text: str = "") -> None:
    print(text, file=sys.stdout)


def err(text: str) -> None:
    print(text, file=sys.stderr)


def print_json(obj: Any) -> None:
    out(json.dumps(obj, indent=2, sort_keys=False, default=str))


def pick(obj: Mapping[str, Any] | None, *keys: str, default: Any = None) -> Any:
    """The first present, non-null value among keys ("a.b" looks inside a nested object)."""
    for key in keys:
        if isinstance(obj, Mapping) and obj.get(key) is not None:
            return obj[key]
        cur: Any = obj
        for part in key.split("."):
            if isinstance(cur, Mapping) and part in cur:
                cur = cur[part]
            else:
                cur = None
                break
        if cur is not None:
            return cur
    return default


# -- values -------------------------------------------------------------------------------
def parse_time(value: Any) -> dt.datetime | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    if not isinstance(value, str) or len(value) < 10:
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:  # the API speaks UTC
        t = t.replace(tzinfo=dt.timezone.utc)
    return t


def fmt_time(value: Any, now: dt.datetime | None = None) -> str:
    """Local time, compact: "14:03:21" today, "05-02 14:03" this year, else "2023-11-30 14:03"."""
    t = parse_time(value)
    if t is None:
        return "" if value is None else str(value)
    local = t.astimezone()
    now = (now or dt.datetime.now(dt.timezone.utc)).astimezone()
    if local.date() == now.date():
        return local.strftime("%H:%M:%S")
    if local.year == now.year:
        return local.strftime("%m-%d %H:%M")
    return local.strftime("%Y-%m-%d %H:%M")


def fmt_duration(seconds: Any) -> str:
    if seconds is None or seconds == "":
        return ""
    try:
        s = int(float(seconds))
    except (TypeError, ValueError):
        return str(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s" if s else f"{m}m"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h{m:02d}m" if m else f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d{h}h" if h else f"{d}d"


def fmt_mib(mib: Any) -> str:
    if mib is None or mib == "":
        return ""
    try:
        v = float(mib)
    except (TypeError, ValueError):
        return str(mib)
    if v >= 1024:
        return f"{v / 1024:g}G"
    return f"{v:g}M"


def fmt_bytes(n: Any) -> str:
    if n is None or n == "":
        return ""
    try:
        v = float(n)
    except (TypeError, ValueError):
        return str(n)
    for unit in ("B", "K", "M", "G", "T"):
        if v < 1024 or unit == "T":
            return f"{v:.0f}{unit}" if unit == "B" else f"{v:.1f}{unit}"
        v /= 1024
    return str(n)


TIME_KEYS = ("at", "created", "modified", "mtime", "updated", "time", "timestamp")


def is_time_key(key: str) -> bool:
    return key.endswith("_at") or key in TIME_KEYS


def cell(value: Any, key: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key and is_time_key(key):
        return fmt_time(value)
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list)) for v in value):
            return ",".join(str(v) for v in value)
        return json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _clip(text: str, width: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


# -- tables -------------------------------------------------------------------------------
def table(rows: Iterable[Mapping[str, Any]], columns: Sequence[Column], empty: str = "(none)") -> None:
    rows = list(rows)
    if not rows:
        err(empty)
        return
    grid = [[h for h, _ in columns]]
    for row in rows:
        line = []
        for _header, get in columns:
            if callable(get):
                value = get(row)
                text = value if isinstance(value, str) else cell(value)
            else:
                text = cell(pick(row, get), get.split(".")[-1])
            line.append(_clip(text, MAX_CELL))
        grid.append(line)
    widths = [max(len(r[i]) for r in grid) for i in range(len(columns))]
    for r in grid:
        out("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def auto_columns(rows: Sequence[Mapping[str, Any]], prefer: Sequence[str] = ()) -> list[Column]:
    """Columns for rows of an unknown shape: preferred keys first, then the rest in order seen."""
    keys: list[str] = []
    for row in rows:
        for k in row:
            if k not in keys:
                keys.append(k)
    ordered = [k for k in prefer if k in keys] + [k for k in keys if k not in prefer]
    return [(k.upper(), k) for k in ordered]


def details(obj: Mapping[str, Any], order: Sequence[str] = (), labels: Mapping[str, str] | None = None,
            skip: Iterable[str] = ()) -> None:
    """Aligned "key: value" lines, preferred keys first, then every other scalar-ish key."""
    labels = labels or {}
    skip = set(skip)
    keys = [k for k in order if k in obj] + [k for k in obj if k not in order]
    keys = [k for k in keys if k not in skip and obj.get(k) not in (None, "", [], {})]
    if not keys:
        return
    width = max(len(labels.get(k, k)) for k in keys) + 1
    for k in keys:
        out(f"{(labels.get(k, k) + ':').ljust(width)} {cell(obj[k], k)}")


def flatten(row: Mapping[str, Any]) -> dict[str, Any]:
    """One level of nesting into dotted keys: {"used": {"cpu": 2}} -> {"used.cpu": 2}."""
    flat: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, Mapping) and v and all(not isinstance(x, (Mapping, list)) for x in v.values()):
            for k2, v2 in v.items():
                flat[f"{k}.{k2}"] = v2
        else:
            flat[k] = v
    return flat


def render_any(doc: Any, prefer: Sequence[str] = ()) -> None:
    """A document of an unknown shape: lists of objects as tables, the rest as key/value lines."""
    if isinstance(doc, list):
        rows = [flatten(r) for r in doc if isinstance(r, Mapping)]
        if rows:
            table(rows, auto_columns(rows, prefer))
        else:
            for item in doc:
                out(cell(item))
        return
    if not isinstance(doc, Mapping):
        out(cell(doc))
        return
    if isinstance(doc.get("items"), list):
        render_any(doc["items"], prefer)
        return
    scalars = {k: v for k, v in doc.items() if not isinstance(v, (list, dict))}
    details(scalars)
    first = not any(v not in (None, "") for v in scalars.values())
    for key, value in doc.items():
        if isinstance(value, (list, dict)) and value:
            if scalars or len(doc) > 1:
                out(f"{'' if first else chr(10)}{key}:")
                first = False
            if isinstance(value, dict) and all(isinstance(v, Mapping) for v in value.values()):
                rows = [flatten({"name": k, **v}) for k, v in value.items()]
                table(rows, auto_columns(rows, ("name", *prefer)))
            elif isinstance(value, dict):
                details(value)
            else:
                render_any(value, prefer)
