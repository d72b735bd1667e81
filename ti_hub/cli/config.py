"""Where the CLI finds its URL and token.

Order: --url/--token flags > TI_API_URL / TI_TOKEN > JUPYTERHUB_API_TOKEN (inside a workspace) >
the config file written by `ti login` (~/.config/ti/config.json, or $TI_CONFIG).

The file's token is sent only to the URL it was saved for, so `ti --url OTHER ...` never leaks it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..plumbing.secretfile import replace
from .client import DEFAULT_TIMEOUT, TiClient, normalize_url


class NotLoggedIn(Exception):
    """No URL or no token: exit code 3."""


class UsageError(Exception):
    """A command line that cannot be acted on: exit code 2."""


class Aborted(Exception):
    """The user said no: exit code 1."""


LOGIN_HINT = "run `ti login --url URL --token TOKEN`, or set TI_API_URL and TI_TOKEN"


def config_path() -> Path:
    env = os.environ.get("TI_CONFIG")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "ti" / "config.json"


def read_config() -> dict[str, Any]:
    path = config_path()
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise NotLoggedIn(f"cannot read {path}: {e}; {LOGIN_HINT}") from None
    return data if isinstance(data, dict) else {}


def write_config(url: str, token: str) -> Path:
    """Atomically writes {"url", "token"} readable by the owner only (0600, its folder 0700)."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    replace(path, (json.dumps({"url": url, "token": token}, indent=2) + "\n").encode())
    return path


def remove_config() -> bool:
    try:
        config_path().unlink()
        return True
    except FileNotFoundError:
        return False


@dataclass
class Settings:
    url: str | None
    token: str | None
    timeout: float


def _timeout(value: Any) -> float:
    if value in (None, ""):
        value = os.environ.get("TI_TIMEOUT") or DEFAULT_TIMEOUT
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"timeout must be a number of seconds, not {value!r}") from None
    if t <= 0:
        raise UsageError("timeout must be more than 0 seconds")
    return t


def _normalize(url: str, where: str) -> str:
    try:
        return normalize_url(url)
    except ValueError as e:
        raise UsageError(f"{where}: {e}") from None


def resolve(url: str | None = None, token: str | None = None, timeout: Any = None) -> Settings:
    """The settings in force, from flags, the environment and the config file (in that order)."""
    env = os.environ
    if url:
        url = _normalize(url, "--url")
    elif env.get("TI_API_URL"):
        url = _normalize(env["TI_API_URL"], "TI_API_URL")
    token = token or env.get("TI_TOKEN") or env.get("JUPYTERHUB_API_TOKEN") or None
    if not url or not token:
        cfg = read_config()
        cfg_url = cfg.get("url")
        if cfg_url:
            cfg_url = _normalize(str(cfg_url), str(config_path()))
        if not url:
            url = cfg_url
        if not token and cfg.get("token") and cfg_url == url:
            token = str(cfg["token"])
    return Settings(url=url, token=token, timeout=_timeout(timeout))


def make_client(args: Any) -> TiClient:
    """A client for a command; NotLoggedIn when the URL or the token is missing."""
    s = resolve(getattr(args, "url", None), getattr(args, "token", None), getattr(args, "timeout", None))
    if not s.url:
        raise NotLoggedIn(f"not logged in (no TiHub URL): {LOGIN_HINT}")
    if not s.token:
        raise NotLoggedIn(f"not logged in (no token for {s.url}): {LOGIN_HINT}")
    return TiClient(s.url, s.token, s.timeout)
