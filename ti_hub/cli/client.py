"""A small client for the TiHub REST API (docs/api.md), on the standard library only.

    client = TiClient("http://127.0.0.1:8000/services/ti/api/v1", token)
    client.get("/me")
    for job in client.paginate("/jobs", {"status": "running"}): ...

Errors: ApiError for an answer the server refused (a JSON 4xx/5xx), TiConnectionError when
the server cannot be reached (or answers something that is not the TiHub API).
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

API_SUFFIX = "/api/v1"
SERVICE_PATH = "/services/ti/api/v1"
DEFAULT_TIMEOUT = 30.0
PAGE_SIZE = 500  # the API's maximum


class ApiError(Exception):
    """The server answered with an error document {"error", "detail", "field", ...}."""

    def __init__(
        self,
        status: int,
        error: str,
        detail: str,
        field: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.field = field
        self.extra = dict(extra or {})

    def __str__(self) -> str:
        return self.detail


class TiConnectionError(ConnectionError):
    """The server could not be reached, or what answered is not the TiHub API."""


def normalize_url(url: str) -> str:
    """The API base URL; a hub base URL ("http://hub:8000") gets the ti service's path appended."""
    url = (url or "").strip().rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"not an http(s) URL: {url!r} (example: http://127.0.0.1:8000)")
    if not parsed.path.endswith(API_SUFFIX):
        url += SERVICE_PATH
    return url


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow redirects: they would carry the token elsewhere, and the API never redirects."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401
        return None


class TiClient:
    def __init__(self, url: str, token: str | None, timeout: float = DEFAULT_TIMEOUT):
        self.url = normalize_url(url)
        self.token = token
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirect)

    def __repr__(self) -> str:  # never show the token
        return f"TiClient({self.url!r})"

    # -- requests ---------------------------------------------------------------------------
    def _full_url(self, path: str, params: Mapping[str, Any] | None) -> str:
        url = self.url + "/" + path.lstrip("/")
        query = []
        for key, value in (params or {}).items():
            if value is None:
                continue
            if isinstance(value, bool):
                value = "1" if value else "0"
            query.append((key, str(value)))
        if query:
            url += "?" + urllib.parse.urlencode(query)
        return url

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        url = self._full_url(path, params)
        headers = {"Accept": "application/json", "User-Agent": "ti-cli"}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            finally:
                e.close()
            raise self._error(e.code, e.reason, raw, e.headers) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            reason = getattr(e, "reason", None) or e
            if isinstance(reason, socket.timeout) or isinstance(e, TimeoutError):
                reason = f"no answer within {self.timeout:g} s"
            raise TiConnectionError(f"cannot reach TiHub at {self.url}: {reason}") from None
        if status == 204 or not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise TiConnectionError(
                f"cannot reach TiHub at {self.url}: the answer is not JSON (is this the TiHub API URL?)"
            ) from None

    def _error(self, status: int, reason: str, raw: bytes, headers: Any) -> Exception:
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        if isinstance(doc, dict) and ("detail" in doc or "error" in doc or "message" in doc):
            extra = {k: v for k, v in doc.items() if k not in ("error", "detail", "field", "message")}
            detail = doc.get("detail") or doc.get("message") or doc.get("error") or f"HTTP {status}"
            return ApiError(status, str(doc.get("error") or "error"), str(detail), doc.get("field"), extra)
        if 300 <= status < 400:
            where = headers.get("Location", "") if headers is not None else ""
            return TiConnectionError(
                f"cannot reach TiHub at {self.url}: the server redirects to {where or 'another page'}"
                " (check the URL; log in with a token, not a browser session)"
            )
        if status in (502, 503, 504):
            return TiConnectionError(f"cannot reach TiHub at {self.url}: HTTP {status} {reason}")
        # not the API's error document: something else answers at this address (another program on that port,
        # a hub without the ti service); say what answered and what was expected
        return TiConnectionError(
            f"cannot reach TiHub at {self.url}: HTTP {status} {reason} from {_who_answered(headers, raw)}, where "
            f"the TiHub API ({SERVICE_PATH}, JSON) was expected; check the URL and port (`ti-hub start` prints "
            "them; default http://127.0.0.1:8000)")

    def get(self, path: str, body: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("GET", path, body, params)

    def post(self, path: str, body: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("POST", path, body, params)

    def patch(self, path: str, body: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("PATCH", path, body, params)

    def put(self, path: str, body: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("PUT", path, body, params)

    def delete(self, path: str, body: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("DELETE", path, body, params)

    # -- lists ------------------------------------------------------------------------------
    def paginate(self, path: str, params: Mapping[str, Any] | None = None, page_size: int = PAGE_SIZE) -> Iterator[Any]:
        """Every item of a list endpoint, page after page ({"items", "total", "limit", "offset"})."""
        params = dict(params or {})
        offset = int(params.pop("offset", 0) or 0)
        limit = int(params.pop("limit", page_size) or page_size)
        while True:
            try:
                page = self.get(path, params={**params, "limit": limit, "offset": offset})
            except ApiError as e:
                if e.status != 400 or e.field not in ("limit", "offset") or offset:
                    raise
                # a list that refuses paging parameters: take it whole
                page = self.get(path, params=params)
                yield from (page if isinstance(page, list) else (page or {}).get("items") or [])
                return
            if isinstance(page, list):  # tolerate an endpoint that answers a bare list
                yield from page
                return
            items = (page or {}).get("items") or []
            yield from items
            offset += len(items)
            total = page.get("total")
            if not items or (total is not None and offset >= total):
                return


def quote(ref: Any) -> str:
    """One path segment: a job name or id, safely escaped."""
    return urllib.parse.quote(str(ref), safe="")


def _who_answered(headers: Any, raw: bytes) -> str:
    """A few words on what answered: its Server header, content type and page title when it has them."""
    server = headers.get("Server") if headers is not None else None
    kind = (headers.get("Content-Type") or "").split(";")[0] if headers is not None else ""
    title = raw[:4096].decode("utf-8", "replace").partition("<title>")[2].partition("</title>")[0].strip()
    words = [f"a server ({server})" if server else "a server", f"with {kind or 'no content type'}"]
    if title:
        words.append(f"titled {title[:80]!r}")
    return " ".join(words)
