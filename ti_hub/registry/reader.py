"""IMG3, the I/O shell: reads one image's manifest and config from its registry over the OCI distribution API
(tornado's AsyncHTTPClient: the event loop never waits on a registry), with a saved login when one applies: Basic,
or the Bearer token flow its WWW-Authenticate challenge names. ti_hub/registry/oci.py parses what comes back.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import ssl
from urllib.parse import urljoin

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse

from . import oci
from .oci import Facts, Reference, RegistryError

MAX_BODY = 16 << 20  # a manifest or a config is kilobytes; a registry sending more is not read on
MAX_REDIRECTS = 3


def reason_of(exc: BaseException) -> str:
    """Why a registry could not be reached, in words that carry no header we sent."""
    if isinstance(exc, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return f"TLS failed ({getattr(exc, 'reason', None) or type(exc).__name__})"
    if isinstance(exc, HTTPClientError) and exc.code == 599:
        return (exc.message or "the connection failed").lower()
    if isinstance(exc, OSError):
        return (exc.strerror or type(exc).__name__).lower()
    return type(exc).__name__


def wants_login(ref: Reference) -> RegistryError:
    return RegistryError("denied", f"the registry wants a login: save a credential for {ref.registry} "
                                   "(ti credential add)")


class Reader:
    """One registry read at a time per call of ``facts``; ``timeout`` bounds each request (the caller bounds the
    whole read)."""

    def __init__(self, client: AsyncHTTPClient, timeout: float, insecure: frozenset[str], platform: str):
        self.client, self.timeout, self.insecure, self.platform = client, timeout, insecure, platform

    async def _get(self, url: str, accept: str | None = None, authorization: str | None = None) -> HTTPResponse:
        """GET, following redirects by hand: a blob's storage elsewhere (S3, a CDN) never gets our Authorization."""
        origin = url
        for _ in range(MAX_REDIRECTS + 1):
            headers = {"Accept": accept} if accept else {}
            if authorization and url.split("/", 3)[:3] == origin.split("/", 3)[:3]:
                headers["Authorization"] = authorization
            req = HTTPRequest(url, headers=headers, connect_timeout=self.timeout, request_timeout=self.timeout,
                              follow_redirects=False)
            try:
                resp = await self.client.fetch(req, raise_error=False)
            except (OSError, HTTPClientError) as e:
                raise RegistryError("unreachable", reason_of(e)) from None
            if resp.code == 599:
                raise RegistryError("unreachable", reason_of(resp.error or OSError("the connection failed")))
            if resp.code in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                url = urljoin(url, resp.headers["Location"])
                continue
            return resp
        raise RegistryError("unreadable", "the registry redirects too many times")

    async def _authorize(self, challenge: HTTPResponse, ref: Reference, base: str,
                         login: tuple[str, str] | None) -> str:
        """The Authorization header the registry's 401 challenge asks for."""
        scheme, params = oci.parse_challenge(challenge.headers.get("WWW-Authenticate"))
        basic = ("Basic " + base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode()) if login else None
        if scheme == "basic":
            if basic is None:
                raise wants_login(ref)
            return basic
        if scheme != "bearer":
            raise RegistryError("unreadable", f"the registry asks for an unknown login scheme {scheme[:20]!r}")
        resp = await self._get(oci.token_url(params, ref, base), authorization=basic)
        if resp.code in (401, 403):
            raise (RegistryError("denied", "the registry's token service refused the saved credential") if login
                   else wants_login(ref))
        if resp.code != 200:
            raise RegistryError("unreadable", f"the registry's token service answered HTTP {resp.code}")
        return "Bearer " + oci.parse_token(resp.body)

    def _check(self, resp: HTTPResponse, ref: Reference, login: tuple[str, str] | None, what: str) -> None:
        if resp.code == 200:
            return
        if resp.code == 401:
            raise RegistryError("denied", "the registry refused the saved credential") if login else wants_login(ref)
        if resp.code == 403:
            raise RegistryError("denied", f"the registry does not let this login pull {ref.repository}")
        if resp.code == 404:
            raise RegistryError("not found", f"the registry has no {what}")
        raise RegistryError("unreachable" if resp.code >= 500 else "unreadable",
                            f"the registry answered HTTP {resp.code} for the {what}")

    async def facts(self, ref: Reference, login: tuple[str, str] | None) -> Facts:
        base = oci.base_url(ref.api_host, self.insecure)
        url = f"{base}/v2/{ref.repository}/manifests/{ref.manifest_ref}"
        authorization = None
        resp = await self._get(url, oci.ACCEPT)
        if resp.code == 401:
            authorization = await self._authorize(resp, ref, base, login)
            resp = await self._get(url, oci.ACCEPT, authorization)
        self._check(resp, ref, login, f"{ref.repository}:{ref.manifest_ref}")
        digest = resp.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(resp.body).hexdigest()
        found = oci.parse_manifest(resp.headers.get("Content-Type"), resp.body)
        if isinstance(found, oci.Index):  # a multi-platform image: this platform's manifest
            child = oci.pick_platform(found, self.platform)
            resp = await self._get(f"{base}/v2/{ref.repository}/manifests/{child}", oci.ACCEPT, authorization)
            self._check(resp, ref, login, f"manifest {child[:19]} the index lists")
            found = oci.parse_manifest(resp.headers.get("Content-Type"), resp.body)
            if not isinstance(found, oci.Manifest):
                raise RegistryError("unreadable", "the image index lists another index")
        resp = await self._get(f"{base}/v2/{ref.repository}/blobs/{found.config_digest}", None, authorization)
        self._check(resp, ref, login, f"config blob {found.config_digest[:19]}")
        return Facts(digest, found.size, oci.parse_created(resp.body))
