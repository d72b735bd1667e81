"""IMG3, the pure core: image references, OCI/Docker manifests and indexes, image configs and registry auth
challenges, as the OCI distribution API serves them. No I/O here: ti_hub/registry/reader.py fetches, this reads.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFESTS = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEXES = (OCI_INDEX, DOCKER_LIST)
ACCEPT = ", ".join(MANIFESTS + INDEXES)
DOCKER_HUB = "docker.io"
DOCKER_HUB_ALIASES = {"docker.io", "index.docker.io", "registry-1.docker.io"}
DOCKER_HUB_API = "registry-1.docker.io"


class RegistryError(Exception):
    """What an image list says instead of the image's facts: ``kind`` is the first word of its ``registry`` field
    (unreachable, denied, not found, unreadable). Messages are ours: never a registry's text, which could echo
    the credential we sent."""

    def __init__(self, kind: str, reason: str):
        super().__init__(f"{kind}: {reason}")
        self.kind, self.reason = kind, reason


@dataclass(frozen=True)
class Reference:
    registry: str  # as written (docker.io for Docker Hub): what a saved credential names
    repository: str  # library/python for "python"
    tag: str | None
    digest: str | None

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry in DOCKER_HUB_ALIASES else self.registry

    @property
    def version(self) -> str:
        """What a list shows as the version: the tag, else the digest's first 12 hex digits."""
        if self.tag:
            return self.tag
        return self.digest.split(":", 1)[-1][:12] if self.digest else "latest"

    @property
    def manifest_ref(self) -> str:
        return self.digest or self.tag or "latest"


def parse_reference(address: str) -> Reference:
    """Docker's normalisation: a first component with a dot or a port, or ``localhost``, is the registry;
    otherwise the image is Docker Hub's (``library/`` for a one-part name). No tag and no digest means latest."""
    rest, digest = (address.split("@", 1) + [None])[:2] if "@" in address else (address, None)
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest
    tag = None
    if ":" in path.rsplit("/", 1)[-1]:
        path, tag = path.rsplit(":", 1)
    if registry == DOCKER_HUB and "/" not in path:
        path = "library/" + path
    if not path or not re.fullmatch(r"[a-z0-9]+(?:[._\-/][a-z0-9]+)*", path):
        raise RegistryError("unreadable", f"{address!r} names no repository")
    if tag is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}", tag):
        raise RegistryError("unreadable", f"{address!r} has no valid tag")
    if digest is not None and not re.fullmatch(r"[a-z0-9]+(?:[+._\-][a-z0-9]+)*:[a-zA-Z0-9=_\-]{32,}", digest):
        raise RegistryError("unreadable", f"{address!r} has no valid digest")
    return Reference(registry, path, tag, digest)


def is_loopback(host: str) -> bool:
    if host.startswith("["):  # [::1]:5000
        name = host[1:].split("]", 1)[0]
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def base_url(host: str, insecure: frozenset[str] | set[str] = frozenset()) -> str:
    """HTTPS, except for loopback registries and those configured insecure (plain HTTP), as Docker does."""
    return f"{'http' if host in insecure or is_loopback(host) else 'https'}://{host}"


def same_registry(credential_server: str, ref: Reference) -> bool:
    """Whether a saved credential's registry is the image's (Docker Hub under any of its names)."""
    server = credential_server.lower()
    if server in DOCKER_HUB_ALIASES:
        return ref.registry in DOCKER_HUB_ALIASES
    return server == ref.registry.lower()


def media_type(content_type: str | None, doc: dict[str, Any]) -> str:
    """The manifest's kind: its Content-Type, else its own mediaType, else what its fields say."""
    ct = (content_type or "").split(";", 1)[0].strip().lower()
    if ct in MANIFESTS + INDEXES:
        return ct
    declared = doc.get("mediaType")
    if isinstance(declared, str) and declared in MANIFESTS + INDEXES:
        return declared
    if doc.get("schemaVersion") == 2:
        if isinstance(doc.get("manifests"), list):
            return OCI_INDEX
        if isinstance(doc.get("config"), dict):
            return OCI_MANIFEST
    raise RegistryError("unreadable", f"the registry sent no OCI or Docker v2 manifest (type {ct or 'none'})")


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RegistryError("unreadable", f"the registry's {what} is not JSON") from None
    if not isinstance(doc, dict):
        raise RegistryError("unreadable", f"the registry's {what} is not a JSON object")
    return doc


def _descriptor(d: Any, what: str) -> tuple[str, int]:
    if not isinstance(d, dict) or not isinstance(d.get("digest"), str) or not isinstance(d.get("size"), int) \
            or isinstance(d.get("size"), bool) or d["size"] < 0:
        raise RegistryError("unreadable", f"the manifest's {what} has no digest and size")
    return d["digest"], d["size"]


@dataclass(frozen=True)
class Manifest:
    config_digest: str
    size: int  # the config's and every layer's (compressed) size: what a pull downloads


@dataclass(frozen=True)
class Index:
    children: tuple[tuple[str, str], ...]  # (platform "os/arch[/variant]", manifest digest)


def parse_manifest(content_type: str | None, body: bytes) -> Manifest | Index:
    doc = _json(body, "manifest")
    kind = media_type(content_type, doc)
    if kind in INDEXES:
        entries = doc.get("manifests")
        if not isinstance(entries, list):
            raise RegistryError("unreadable", "the image index lists no manifests")
        children = []
        for entry in entries:
            digest, _ = _descriptor(entry, "index entry")
            p = entry.get("platform") if isinstance(entry.get("platform"), dict) else {}
            platform = "/".join(str(p[k]) for k in ("os", "architecture", "variant") if p.get(k))
            children.append((platform, digest))
        return Index(tuple(children))
    config_digest, config_size = _descriptor(doc.get("config"), "config")
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise RegistryError("unreadable", "the manifest lists no layers")
    return Manifest(config_digest, config_size + sum(_descriptor(layer, "layer")[1] for layer in layers))


def pick_platform(index: Index, want: str = "linux/amd64") -> str:
    """The digest of the index's manifest for ``want`` (os/arch, a variant optional); else its first real image
    (attestations are listed as unknown/unknown)."""
    for platform, digest in index.children:
        if platform == want or platform.startswith(want + "/"):
            return digest
    for platform, digest in index.children:
        if not platform.startswith("unknown"):
            return digest
    raise RegistryError("unreadable", "the image index lists no image")


_CREATED = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?")


def parse_created(body: bytes) -> str | None:
    """The config's ``created`` in UTC, to the second, as the API writes times ("...Z"); None when absent."""
    created = _json(body, "image config").get("created")
    if not isinstance(created, str) or not (m := _CREATED.fullmatch(created.strip())):
        return None
    zone = (m.group(3) or "Z").upper().replace("Z", "+00:00")
    zone = zone if ":" in zone else zone[:3] + ":" + zone[3:]
    try:
        t = dt.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{zone}")
    except ValueError:
        return None
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_PARAM = re.compile(r'([A-Za-z][A-Za-z0-9_\-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]*)')


def parse_challenge(header: str | None) -> tuple[str, dict[str, str]]:
    """``WWW-Authenticate: Bearer realm="...",service="...",scope="..."`` as ("bearer", {realm, service, scope})."""
    scheme, _, rest = (header or "").strip().partition(" ")
    params = {k.lower(): (val[1:-1].replace('\\"', '"') if val.startswith('"') else val)
              for k, val in _PARAM.findall(rest)}
    return scheme.lower(), params


def token_url(params: dict[str, str], ref: Reference, registry_url: str) -> str:
    """Where a Bearer challenge sends us for a pull token. The realm must be HTTPS unless the registry itself is
    plain HTTP (a test or loopback one): our login goes there."""
    realm = params.get("realm", "")
    parts = urlsplit(realm)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise RegistryError("unreadable", "the registry's token challenge names no realm URL")
    if parts.scheme == "http" and not registry_url.startswith("http://"):
        raise RegistryError("denied", "the registry's token realm is plain HTTP: no login is sent there")
    query = {k: params[k] for k in ("service",) if params.get(k)}
    query["scope"] = params.get("scope") or f"repository:{ref.repository}:pull"
    return realm + ("&" if parts.query else "?") + urlencode(query)


def parse_token(body: bytes) -> str:
    doc = _json(body, "token answer")
    token = doc.get("token") or doc.get("access_token")
    if not isinstance(token, str) or not token:
        raise RegistryError("unreadable", "the token service answered no token")
    return token


@dataclass(frozen=True)
class Facts:
    """What a list shows of an image, read from its registry."""
    digest: str | None
    size: int
    created: str | None


def fields(address: str, facts: Facts | RegistryError | None) -> dict[str, Any]:
    """The fields an image list adds to an image: its version (the tag), and what the registry said of it; the
    ``registry`` field says "ok", "pending: ..." (still being read) or why the facts are missing."""
    try:
        version = parse_reference(address).version
    except RegistryError:
        version = ""
    out: dict[str, Any] = {"version": version, "size_bytes": None, "size_mib": None, "image_created": None,
                           "digest": None}
    if isinstance(facts, Facts):
        out.update(size_bytes=facts.size, size_mib=round(facts.size / (1 << 20), 1), image_created=facts.created,
                   digest=facts.digest, registry="ok")
    elif isinstance(facts, RegistryError):
        out["registry"] = str(facts)
    else:
        out["registry"] = "pending: still reading the registry (list again in a moment)"
    return out
