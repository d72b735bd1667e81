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

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{4,63}$")
NAME_RULE = "4-63 characters of letters, digits, '-' and '_'"
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
PORT_MIN, PORT_MAX = 40000, 49999
MAX_COMMAND = 64 * 1024
MAX_ENV = 128
MAX_ENV_VALUE = 32 * 1024
MAX_TEXT = 4096
# env names a job may not set: the platform owns them
RESERVED_ENV = frozenset(
    {"CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
     "NODE_RANK", "LOCAL_WORLD_SIZE", "TF_CONFIG", "JUPYTERHUB_API_TOKEN", "TI_JOB_ID"}
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
            if not p.isdigit():
                raise ValidationError(f"{field}: {p!r} is not a port number ({PORT_MIN}-{PORT_MAX})", field=field)
            items.append(int(p))
    elif isinstance(value, list):
        items = value
    else:
        raise ValidationError(f"{field} must be a list or a comma-separated string of ports", field=field)
    out: list[int] = []
    for p in items:
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
    if not re.match(r"^[A-Za-z0-9_./-]+$", norm):
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


def pagination(args: Mapping[str, str], default_limit: int = 50, max_limit: int = 500) -> tuple[int, int]:
    def _int(key: str, default: int, lo: int, hi: int) -> int:
        raw = args.get(key)
        if raw is None or raw == "":
            return default
        try:
            val = int(raw)
        except ValueError:
            raise ValidationError(f"{key} must be an integer", field=key) from None
        if not lo <= val <= hi:
            raise ValidationError(f"{key} must be between {lo} and {hi}", field=key)
        return val

    return _int("limit", default_limit, 1, max_limit), _int("offset", 0, 0, 2**31 - 1)
