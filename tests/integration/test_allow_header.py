"""A method a documented path does not declare is answered 405 with an Allow header naming exactly the methods the
API document gives that path (RFC 9110 15.5.6: a 405 must carry it): the ti service's own refusals (PUT on a
path that only reads, ...), and those tornado makes before any handler runs (TRACE, QUERY), as clients meet them,
through the hub's proxy. A method no one knows is the proxy's 501, not a 405 without Allow.

The fast check of what tests/e2e/test_openapi_fuzz.py's unsupported_method check finds with schemathesis.
"""

from __future__ import annotations

import re

import pytest
import requests

pytestmark = pytest.mark.e2e

METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "QUERY")


def concrete(path: str) -> str:
    """A URL of a templated path: a 405 comes before the parameters are read, so any value does."""
    return re.sub(r"\{\w+\}", "1", path)


def test_every_405_says_which_methods_the_path_allows(hub, new_user):
    user = new_user("allow")
    doc = requests.get(hub.api_url + "/openapi.json", timeout=30).json()
    assert len(doc["paths"]) > 50
    http = requests.Session()
    http.headers["Authorization"] = f"token {user.token}"
    refused = 0
    for path, item in doc["paths"].items():
        declared = sorted(m.upper() for m in item)
        for method in METHODS:
            if method in declared:
                continue
            r = http.request(method, hub.api_url + concrete(path), timeout=30)
            assert r.status_code == 405, (method, path, r.status_code, r.text[:200])
            allow = sorted(m.strip() for m in r.headers.get("Allow", "").split(","))
            assert allow == declared, (method, path, r.headers.get("Allow"))
            if method != "HEAD":
                assert r.json()["error"] == "method_not_allowed", (method, path)
            refused += 1
    assert refused > 400
    # without a login too: a method tornado refuses is refused before authentication, with the same header
    r = requests.request("TRACE", hub.api_url + "/jobs", timeout=30)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, POST"
    r = http.request("FOO", hub.api_url + "/jobs", timeout=30)
    assert r.status_code == 501 and "Allow" not in r.headers
