"""Field validators shared by the API, the spawner form and the CLI.

Each raises ValidationError naming the field and the rule; none touches storage.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import ValidationError

# patterns end in \Z, not $: Python's $ also matches before a final newline, so "name\n" passed as a name.
# The *_PATTERN strings are the same rules for the OpenAPI document (JSON Schema regexes know no \Z).
NAME_PATTERN = r"^[A-Za-z0-9_-]{4,63}$"
NAME_RE = re.compile(NAME_PATTERN[:-1] + r"\Z")
NAME_RULE = "4-63 characters of letters, digits, '-' and '_'"
ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
ENV_RE = re.compile(ENV_PATTERN[:-1] + r"\Z")
# ids are BIGINT in both databases: a larger number overflows SQLite and PostgreSQL (a 500, not a refusal)
MAX_ID = 2**63 - 1
ID_RULE = f"a whole number from 1 to {MAX_ID}"
PORT_MIN, PORT_MAX = 40000, 49999
MAX_COMMAND = 64 * 1024
MAX_ENV = 128
MAX_ENV_VALUE = 32 * 1024
MAX_TEXT = 4096
# env names a job may not set: the platform owns them
RESERVED_ENV = frozenset(
    {"CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
     "NODE_RANK", "LOCAL_WORLD_SIZE", "TF_CONFIG", "JUPYTERHUB_API_TOKEN", "TI_JOB_ID",
     "TI_WORK_DIR", "TI_ARCHIVE_DIR"}
)


def check_fields(data: Mapping[str, Any], allowed: Iterable[str], where: str = "") -> None:
    """Unknown fields are refused rather than ignored, so typos never pass silently."""
    if not isinstance(data, Mapping):
        raise ValidationError("the request body must be a JSON object", field=where or None)
    allowed = set(allowed)
    for key in data:
        if key not in allowed:
            raise ValidationError(
                f"unknown field {key!r}; allowed: {', '.join(sorted(allowed))}",
                field=f"{where}.{key}" if where else key,
            )


def require(data: Mapping[str, Any], field: str) -> Any:
    if field not in data or data[field] is None or data[field] == "":
        raise ValidationError(f"{field} is required", field=field)
    return data[field]


def name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise ValidationError(f"{field} must be {NAME_RULE}", field=field)
    return value


def text(value: Any, field: str, max_len: int = MAX_TEXT, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string", field=field)
    if required and not value.strip():
        raise ValidationError(f"{field} is required", field=field)
    if len(value) > max_len:
        raise ValidationError(f"{field} must be at most {max_len} characters", field=field)
    if "\x00" in value:
        raise ValidationError(f"{field} must not contain NUL characters", field=field)
    return value


def command(value: Any, field: str = "command") -> str:
    value = text(value, field, MAX_COMMAND, required=True)
    return value


def whole(value: Any) -> int | None:
    """A JSON number that is a whole number (4 or 4.0: the same number to JSON Schema) as an int, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def integer(value: Any, field: str, lo: int, hi: int) -> int:
    # bool is an int in Python; refuse it so `true` never means 1 device
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        else:
            raise ValidationError(f"{field} must be an integer between {lo} and {hi}", field=field)
    if not lo <= value <= hi:
        raise ValidationError(f"{field} must be an integer between {lo} and {hi}", field=field)
    return value


def number(value: Any, field: str, lo: float, hi: float, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{field} must be a number", field=field)
    value = float(value)
    if not math.isfinite(value):
        raise ValidationError(f"{field} must be a finite number", field=field)
    if value == 0 and allow_zero:
        return value
    if not lo <= value <= hi:
        raise ValidationError(f"{field} must be between {lo:g} and {hi:g}", field=field)
    return value


def boolean(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{field} must be true or false", field=field)
    return value


def choice(value: Any, field: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    if value not in choices:
        raise ValidationError(f"{field} must be one of: {', '.join(choices)}", field=field)
    return value


def ports(value: Any, field: str = "ports") -> list[int]:
    """Interactive ports: a list or a comma list, each 40000-49999, no repeats."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        items: list[Any] = []
        for p in parts:
            if not is_digits(p) or len(p) > 5:
                raise ValidationError(f"{field}: {p!r} is not a port number ({PORT_MIN}-{PORT_MAX})", field=field)
            if int(p) not in items:  # the comma form names a set: a port written twice counts once
                items.append(int(p))
    elif isinstance(value, list):
        items = value
    else:
        raise ValidationError(f"{field} must be a list or a comma-separated string of ports", field=field)
    out: list[int] = []
    for p in items:
        p = whole(p) if whole(p) is not None else p  # 40001.0 is the number 40001 (JSON Schema says so)
        if isinstance(p, bool) or not isinstance(p, int) or not PORT_MIN <= p <= PORT_MAX:
            raise ValidationError(f"{field}: each port must be an integer in {PORT_MIN}-{PORT_MAX}", field=field)
        if p in out:
            raise ValidationError(f"{field}: port {p} is listed twice", field=field)
        out.append(p)
    if len(out) > 32:
        raise ValidationError(f"{field}: at most 32 ports", field=field)
    return out


def env(value: Any, field: str = "env") -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{field} must be an object of NAME: value", field=field)
    if len(value) > MAX_ENV:
        raise ValidationError(f"{field}: at most {MAX_ENV} variables", field=field)
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not ENV_RE.match(k):
            raise ValidationError(
                f"{field}: {k!r} is not a valid variable name (letters, digits, '_', not starting with a digit)",
                field=f"{field}.{k}",
            )
        if k in RESERVED_ENV:
            raise ValidationError(f"{field}: {k} is set by the platform", field=f"{field}.{k}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)
        out[k] = text(v, f"{field}.{k}", MAX_ENV_VALUE)
    return out


MOUNT_ROOTS = ("/mnt", "/data", "/datasets", "/models")


def mount_path(value: Any, field: str = "mount_path", roots: tuple[str, ...] = MOUNT_ROOTS) -> str:
    """An absolute path under one of the mount roots; no '..', no escape, not the root itself."""
    value = text(value, field, 255, required=True)
    if not value.startswith("/"):
        raise ValidationError(f"{field} must be an absolute path under {', '.join(roots)}", field=field)
    if any(part in ("..", ".") for part in value.split("/")):
        raise ValidationError(f"{field} must not contain '.' or '..' components", field=field)
    norm = posixpath.normpath(value)
    if not any(norm.startswith(r + "/") for r in roots):
        raise ValidationError(f"{field} must be a path under {', '.join(roots)}", field=field)
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", norm):
        raise ValidationError(f"{field} may contain only letters, digits, '_', '-', '.' and '/'", field=field)
    return norm


def device_count(value: Any, device_type: str, rules: Mapping[str, Iterable[int]], field: str, hi: int = 64) -> int:
    """RES4: a device type may accept only some counts (an NPU: 0, 1, 2, 4, 8)."""
    n = integer(value, field, 0, hi)
    allowed = rules.get(device_type)
    if allowed is not None and n not in set(allowed):
        raise ValidationError(
            f"{field}: {device_type} accepts only {', '.join(map(str, sorted(allowed)))} devices", field=field
        )
    return n


def whole_nodes(devices: int, instances: int, device_type: str, per_node: Mapping[str, int], field: str) -> None:
    """RES4: a distributed job of a type with devices per node (an NPU: 8) takes whole nodes, nodes x per_node
    devices: each of its instances (one per node) asks for exactly per_node devices."""
    n = per_node.get(device_type)
    if n and instances > 1 and devices != n:
        raise ValidationError(
            f"{field}: a distributed {device_type} job takes whole nodes, {n} devices per instance ({instances} "
            f"instances: {instances} x {n} = {instances * n} devices); its plan gives {devices} per instance: "
            f"choose a plan of {n} x {device_type}", field=field)


def join_device_rules(configured: Mapping[str, Iterable[int]], backend: Mapping[str, Iterable[int]],
                      what: str = "device counts") -> dict[str, list[int]]:
    """TiService's rules and the backend's (KubernetesBackend.device_types) as one map: a type both name must
    agree, else neither is taken on trust (ValueError naming the type)."""
    out = {k: sorted(set(v)) for k, v in configured.items()}
    for k, val in backend.items():
        mine = sorted(set(val))
        if k in out and out[k] != mine:
            raise ValueError(f"{what} of device type {k!r} differ: TiService says {out[k]}, the backend's "
                             f"device_types say {mine}; set them in one place")
        out[k] = mine
    return out


def pagination(args: Mapping[str, str], default_limit: int = 50, max_limit: int = 500) -> tuple[int, int]:
    return (query_int(args, "limit", default_limit, 1, max_limit),
            query_int(args, "offset", 0, 0, MAX_OFFSET))


MAX_OFFSET = 2**31 - 1


def is_digits(text: str) -> bool:
    """ASCII digits only. str.isdigit() is also true for '²' (which int() refuses: a 500) and for other
    scripts' digits (which int() reads): an id or a number in a URL is written 0-9."""
    return text.isascii() and text.isdigit()


def parse_int(raw: str, field: str, lo: int, hi: int) -> int:
    """A whole number written in a URL or a form: an optional '-' and ASCII digits, between lo and hi."""
    body = raw[1:] if raw.startswith("-") else raw
    # the length bound also keeps int() away from its 4300-digit limit (a ValueError of its own)
    if not is_digits(body) or len(body) > 19 or not lo <= int(raw) <= hi:
        raise ValidationError(f"{field} must be a whole number between {lo} and {hi}", field=field)
    return int(raw)


def query_int(args: Mapping[str, str], key: str, default: int, lo: int, hi: int) -> int:
    raw = args.get(key)
    if raw is None or raw == "":
        return default
    return parse_int(raw, key, lo, hi)


def db_id(value: Any, field: str = "id") -> int:
    """An id as the databases store it: a JSON integer or a string of ASCII digits, from 1 to MAX_ID."""
    if isinstance(value, str) and is_digits(value) and len(value) <= 19:
        value = int(value)
    elif isinstance(value, float) and whole(value) is not None:
        value = whole(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        raise ValidationError(f"{field} must be an id: {ID_RULE}", field=field)
    return value


def id_in(text: str) -> int | None:
    """The id a reference that may also be a name stands for, or None: only ASCII digits within the id range
    can be an id (an all-digit name that is not one is then just a name)."""
    if is_digits(text) and len(text) <= 19 and 1 <= int(text) <= MAX_ID:
        return int(text)
    return None

