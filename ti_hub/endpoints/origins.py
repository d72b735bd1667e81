"""Pure: every job endpoint on an origin of its own (``TiService.endpoint_origin``), like JupyterHub's
``subdomain_host`` for user servers.

Why: a page a job serves runs with the rights of its origin. On the hub's origin, its scripts can read the hub's
pages (the XSRF value on /hub/home, say) and act as whoever opens it. On an origin of its own
(``http://42-0-40001.ep.example.org/``) the browser's same-origin policy keeps it from reading anything of the
hub's, and it gets no cookie of the hub's: the endpoint's own login is a host-only cookie (``COOKIE``) that opens
that one endpoint and nothing else.

How a browser gets in: the endpoint's hub-origin URL (``/services/ti/endpoints/...``), where the user is logged in,
checks who they are and answers with a redirect to the endpoint's origin carrying a **ticket** (sealed, valid
``TICKET_TTL`` seconds, for that one endpoint); the origin trades it for its cookie (sealed, ``COOKIE_TTL``).
Tickets and cookies are Fernet tokens of the service's key: only the service makes and reads them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from ..domain.validation import PORT_MAX, PORT_MIN

COOKIE = "ti-endpoint"
LOGIN_PATH = "/_ti/login"
TICKET_TTL = 60
COOKIE_TTL = 8 * 3600
LABEL_RE = re.compile(r"^(?P<job>[0-9]{1,18})-"
                      r"(?:(?P<instance>[0-9]{1,5})-(?P<port>[0-9]{5})|tb-(?P<key>[0-9a-f]{12}))$")


@dataclass(frozen=True)
class Origins:
    """Where endpoints live: ``scheme://LABEL.domain[:port]``."""

    scheme: str
    domain: str
    port: int | None

    @classmethod
    def parse(cls, url: str) -> Origins:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname or u.path not in ("", "/") or u.query:
            raise ValueError(f"endpoint_origin must be like https://ep.example.org (got {url!r})")
        return cls(u.scheme, u.hostname.lower(), u.port)

    def host(self, label: str) -> str:
        return f"{label}.{self.domain}"

    def url(self, label: str, path: str = "/") -> str:
        port = f":{self.port}" if self.port else ""
        return f"{self.scheme}://{self.host(label)}{port}{path}"

    def host_pattern(self) -> str:
        """The host regex tornado routes to the endpoints' handler."""
        return r"^[0-9a-f-]+\." + re.escape(self.domain) + "$"

    def label_of(self, host: str) -> str | None:
        """The label of a request's Host (port stripped), when it is one of ours."""
        name = host.rsplit(":", 1)[0].lower() if not host.startswith("[") else ""
        suffix = "." + self.domain
        if not name.endswith(suffix):
            return None
        label = name[: -len(suffix)]
        return label if LABEL_RE.match(label) else None


def port_label(job_id: int, instance: int, port: int) -> str:
    return f"{int(job_id)}-{int(instance)}-{int(port):05d}"


def tensorboard_label(job_id: int, key: str) -> str:
    return f"{int(job_id)}-tb-{key}"


@dataclass(frozen=True)
class Label:
    job: int
    kind: str  # "port" | "tensorboard"
    instance: int | None = None
    port: int | None = None
    key: str | None = None


def parse_label(label: str) -> Label | None:
    m = LABEL_RE.match(label)
    if not m:
        return None
    if m["key"]:
        return Label(int(m["job"]), "tensorboard", key=m["key"])
    port = int(m["port"])
    if not PORT_MIN <= port <= PORT_MAX:
        return None
    return Label(int(m["job"]), "port", int(m["instance"]), port)


def seal(fernet, kind: str, user: str, label: str) -> str:
    return fernet.encrypt(json.dumps({"k": kind, "u": user, "l": label}).encode()).decode()


def unseal(fernet, token: str, kind: str, label: str, ttl: int) -> str | None:
    """The user a ticket or cookie names, when it is of ``kind``, for ``label`` and not older than ``ttl``."""
    from cryptography.fernet import InvalidToken

    try:
        doc = json.loads(fernet.decrypt(token.encode(), ttl=ttl))
    except (InvalidToken, ValueError, TypeError, UnicodeError):
        return None
    if not isinstance(doc, dict) or doc.get("k") != kind or doc.get("l") != label:
        return None
    user = doc.get("u")
    return user if isinstance(user, str) and user else None


def safe_next(value: str | None) -> str:
    """Where the login sends the browser: a path of this origin only (never ``//other`` or a full URL)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def origin_login(fernet, origins: Origins, user: str, label: str, rest: str, query: str) -> str:
    """The hub-origin side's answer to a logged-in browser: its endpoint's origin, with a ticket to trade."""
    nxt = (rest or "/") + (f"?{query}" if query else "")
    return origins.url(label, LOGIN_PATH) + "?" + urlencode({"ticket": seal(fernet, "ticket", user, label),
                                                              "next": nxt})
