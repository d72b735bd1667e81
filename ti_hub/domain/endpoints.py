"""Pure parts of the endpoints proxy (JOB6): URL shapes, which headers and cookies cross, where a logdir lives.

Nothing here does I/O, so every rule the proxy enforces on what reaches a job's server is unit-tested
(tests/unit/test_endpoints_pure.py).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit

from .errors import Conflict, ValidationError
from .validation import PORT_MAX, PORT_MIN, is_digits

# RFC 9110 7.6.1 plus the old names still seen: they describe one hop, never the next
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade"})
# websocket_connect makes its own handshake with the job's server
WS_HANDSHAKE = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                          "sec-websocket-accept", "sec-websocket-protocol"})
# never to a job: the caller's hub token. (Host passes, as from any reverse proxy: servers that check that a
# WebSocket's Origin matches their Host, tornado and Jupyter among them, see the hub's address in both.)
DROPPED_REQUEST = frozenset({"authorization"})
REF_RE = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
KEY_RE = re.compile(r"^[0-9a-f]{12}$")
MAX_LOGDIR = 1024


@dataclass(frozen=True)
class EndpointPath:
    """``{prefix}endpoints/{job}/{instance}/{port}{rest}`` or ``{prefix}endpoints/{job}/tensorboard/{key}{rest}``."""

    job: str  # the job's id or name, as the caller wrote it
    kind: str  # "port" | "tensorboard"
    instance: int | None
    port: int | None
    key: str | None  # a TensorBoard's key (tensorboard_key of its logdir)
    base: str  # the path up to the endpoint's root, without its trailing slash
    rest: str  # what follows base: "" (the root without its slash) or "/..."


def parse_endpoint_path(path: str, service_prefix: str) -> EndpointPath | None:
    """The endpoint a raw (still percent-encoded) request path names, or None when it names none.

    Only plain characters are accepted in the job reference, so the raw and the decoded forms agree and the
    rest of the path is forwarded exactly as the browser sent it."""
    head = service_prefix.rstrip("/") + "/endpoints/"
    if not path.startswith(head):
        return None
    parts = path[len(head):].split("/", 3)
    if len(parts) < 3 or not REF_RE.match(parts[0]):
        return None
    job, second, third = parts[0], parts[1], parts[2]
    rest = "/" + parts[3] if len(parts) == 4 else ""
    base = f"{head}{job}/{second}/{third}"
    if second == "tensorboard":
        return EndpointPath(job, "tensorboard", None, None, third, base, rest) if KEY_RE.match(third) else None
    if not (is_digits(second) and len(second) <= 5 and is_digits(third) and len(third) == 5):
        return None
    port = int(third)
    if not PORT_MIN <= port <= PORT_MAX:
        return None
    return EndpointPath(job, "port", int(second), port, None, base, rest)


def port_url(service_prefix: str, job_id: int, instance: int, port: int) -> str:
    return f"{service_prefix.rstrip('/')}/endpoints/{job_id}/{instance}/{port}/"


def tensorboard_prefix(service_prefix: str, job_id: int, key: str) -> str:
    """TensorBoard's --path_prefix: it serves under exactly this path (no trailing slash)."""
    return f"{service_prefix.rstrip('/')}/endpoints/{job_id}/tensorboard/{key}"


def tensorboard_key(logdir: str) -> str:
    return hashlib.sha256(logdir.encode()).hexdigest()[:12]


# -- headers and cookies ---------------------------------------------------------------------------------------
def protected_cookie(name: str, service_cookie: str) -> bool:
    """Cookies of the hub and of the ti service: the OAuth cookie holds the user's hub token."""
    bare = name.removeprefix("__Host-")
    own = service_cookie.removeprefix("__Host-")
    return bool(own) and (bare == own or bare.startswith(own + "-")) or bare.startswith("jupyterhub-") \
        or bare == "ti-flash"


def filter_cookie_header(value: str, service_cookie: str) -> str:
    """The Cookie header without the hub's and the service's cookies (the job's own cookies pass)."""
    kept = []
    for item in value.split(";"):
        item = item.strip()
        if not item:
            continue
        name = item.split("=", 1)[0].strip()
        if not protected_cookie(name, service_cookie):
            kept.append(item)
    return "; ".join(kept)


def request_headers(headers: Iterable[tuple[str, str]], service_cookie: str, websocket: bool = False
                    ) -> list[tuple[str, str]]:
    """What crosses to the job's server: no hop-by-hop headers (nor those Connection names), no hub token,
    no hub or service cookies; for websockets no handshake headers (the relay makes its own handshake)."""
    headers = list(headers)
    named = {t.strip().lower() for k, v in headers if k.lower() == "connection" for t in v.split(",")}
    out = []
    for k, v in headers:
        low = k.lower()
        if low in HOP_BY_HOP or low in named or low in DROPPED_REQUEST or (websocket and low in WS_HANDSHAKE):
            continue
        if low == "cookie":
            v = filter_cookie_header(v, service_cookie)
            if not v:
                continue
        out.append((k, v))
    return out


def set_cookie_name(value: str) -> str:
    return value.split(";", 1)[0].split("=", 1)[0].strip()


def response_headers(headers: Iterable[tuple[str, str]], service_cookie: str, location_base: str | None,
                     upstream: str, hub_host: str = "") -> list[tuple[str, str]]:
    """What comes back from the job's server: no hop-by-hop headers, no Set-Cookie that would replace the hub's
    or the service's cookies, and redirects to the server's own root turned into the endpoint's paths."""
    headers = list(headers)
    named = {t.strip().lower() for k, v in headers if k.lower() == "connection" for t in v.split(",")}
    out = []
    for k, v in headers:
        low = k.lower()
        if low in HOP_BY_HOP or low in named:
            continue
        if low == "set-cookie" and protected_cookie(set_cookie_name(v), service_cookie):
            continue
        if low == "location" and location_base is not None:
            v = rewrite_location(v, location_base, upstream, hub_host)
        out.append((k, v))
    return out


def rewrite_location(location: str, base: str, upstream: str, hub_host: str = "") -> str:
    """A server that believes it lives at "/" redirects to "/x": that is ``base`` + "/x" here. Absolute URLs of the
    server itself (``upstream``, its "host:port") or of the hub (it got the hub's Host header) become paths too.
    A path already under ``base`` (a server that honours X-Forwarded-Prefix) stays; other sites stay."""
    parts = urlsplit(location)
    if parts.scheme in ("http", "https") and parts.netloc in (upstream, hub_host) and parts.netloc:
        path = parts.path or "/"
        tail = (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    elif not parts.scheme and not parts.netloc and location.startswith("/"):
        path, tail = location, ""
    else:
        return location
    return path + tail if path == base or path.startswith(base + "/") else base + path + tail


def strip_token_query(query: str, token: str | None) -> str:
    """The query without ``token=<the hub token that authenticated this request>`` (a job's own ?token= stays)."""
    if not token or "token=" not in query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, v) for k, v in pairs if not (k == "token" and v == token)])


# -- TensorBoard log directories -------------------------------------------------------------------------------
def check_logdir(value: Any) -> str:
    """An absolute, normalized path inside the job's container (no '.', '..', '//'); a trailing '/' is dropped."""
    if not isinstance(value, str) or not value:
        raise ValidationError("logdir is required: a directory inside one of the job's volume mounts, "
                              "e.g. /mnt/out/tb", field="logdir")
    if len(value) > MAX_LOGDIR or "\x00" in value or "\n" in value:
        raise ValidationError(f"logdir must be a path of at most {MAX_LOGDIR} characters", field="logdir")
    path = value.rstrip("/") or "/"
    if not path.startswith("/") or posixpath.normpath(path) != path or "//" in path:  # normpath keeps a leading //
        raise ValidationError(f"logdir must be an absolute path without '.', '..' or '//': {value!r}",
                              field="logdir")
    return path


def map_logdir(logdir: str, volumes: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """(the job's volume entry whose mount holds ``logdir``, the path relative to the volume's root).

    Only the job's own mounts count: a logdir is never an arbitrary host path."""
    logdir = check_logdir(logdir)
    best = None
    for vol in volumes:
        mount = vol["mount_path"].rstrip("/")
        if logdir == mount or logdir.startswith(mount + "/"):
            if best is None or len(mount) > len(best["mount_path"].rstrip("/")):
                best = vol
    if best is None:
        mounts = ", ".join(v["mount_path"] for v in volumes) or "none"
        raise Conflict(f"logdir {logdir} is not inside one of the job's volume mounts ({mounts})", field="logdir")
    if best.get("kind") == "local":
        raise Conflict(f"logdir {logdir} is on a scratch volume (kind local), which exists only inside "
                              "the running job; write TensorBoard logs to a filesystem volume", field="logdir")
    rel = logdir[len(best["mount_path"].rstrip("/")):].lstrip("/")
    return best, rel


def inside(path: str, root: str) -> bool:
    """Is ``path`` ``root`` or below it (both already resolved)?"""
    return path == root or path.startswith(root.rstrip("/") + "/")


def cross_site(method: str, fetch_site: str | None, origin: str | None, host: str) -> str | None:
    """Why a cookie-authenticated request looks cross-site (None: it does not). The browser's Fetch Metadata
    first; else the Origin header against the Host; else only reads (browsers send Origin with every write)."""
    if fetch_site is not None:
        return None if fetch_site in ("same-origin", "none") else f"Sec-Fetch-Site: {fetch_site}"
    if origin is not None:
        return None if urlsplit(origin).netloc.lower() == host.lower() else f"Origin {origin!r} is another site"
    if method.upper() in ("GET", "HEAD", "OPTIONS"):
        return None
    return "a write without an Origin header"
