"""The server side of the panels: one forwarding route to the ti service.

The browser never holds a TiHub token: the panels call this server (authenticated by the hub's OAuth
cookie and JupyterLab's XSRF token), and this server calls the ti service with the workspace's own hub
token, whose scopes the hub limits (ti_hub.domain.scopes.WORKSPACE_TOKEN_SCOPES).
"""

from __future__ import annotations

import os
import re

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

# what may follow ti/api/: the API's own paths (letters, digits, -, _, ., /), never a way out of it
SAFE_PATH = re.compile(r"^[A-Za-z0-9_\-./]*$")
FORWARDED_HEADERS = ("Content-Type",)
TIMEOUT_S = 60.0


def api_url() -> str:
    """The ti service's API as workspaces reach it; the spawner sets TI_API_URL."""
    url = os.environ.get("TI_API_URL", "")
    if not url and os.environ.get("JUPYTERHUB_SERVICE_PREFIX"):
        # a hub without TiHub's spawner: guess the service's default place behind the same origin
        url = os.environ.get("JUPYTERHUB_API_URL", "").replace("/hub/api", "/services/ti/api/v1")
    return url.rstrip("/")


def is_api_path(path: str) -> bool:
    """A plain path under the API: no way up (..), no empty segment, nothing but safe characters."""
    return bool(SAFE_PATH.match(path)) and ".." not in path.split("/") and "//" not in path


class TiAPIProxyHandler(APIHandler):
    """Forwards /ti/api/<path>?<query> to <TI_API_URL>/<path>?<query> and passes the answer back."""

    async def _forward(self, path: str) -> None:
        if not is_api_path(path):
            raise web.HTTPError(400, "path: only the ti service's API paths can be reached")
        base, token = api_url(), os.environ.get("JUPYTERHUB_API_TOKEN", "")
        if not base or not token:
            self.set_status(503)
            self.finish({"error": "not_configured", "field": None,
                         "detail": "this server does not know the ti service (TI_API_URL and the hub token are "
                                   "set in TiHub workspaces); start the workspace from TiHub"})
            return
        # a bare number is a browser cache-buster (?1795326612533), not an API argument
        query = "&".join(p for p in self.request.query.split("&") if p and not p.isdigit())
        url = f"{base}/{path}" + (f"?{query}" if query else "")
        headers = {"Authorization": f"token {token}", "Accept": "application/json"}
        for h in FORWARDED_HEADERS:
            if h in self.request.headers:
                headers[h] = self.request.headers[h]
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None
        if self.request.method in ("POST", "PUT", "PATCH") and not body:
            body, headers["Content-Type"] = b"{}", "application/json"
        req = HTTPRequest(url, method=self.request.method, headers=headers, body=body,
                          request_timeout=TIMEOUT_S, follow_redirects=False, allow_nonstandard_methods=True)
        try:
            resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        except OSError as e:
            self.set_status(502)
            self.finish({"error": "unreachable", "field": None, "detail": f"the ti service is unreachable: {e}"})
            return
        if resp.code == 599:  # tornado's code for no answer (timeout, refused)
            self.set_status(502)
            self.finish({"error": "unreachable", "field": None,
                         "detail": f"the ti service did not answer: {resp.error}"})
            return
        self.set_status(resp.code)
        if resp.code == 204:
            self.finish()
            return
        self.set_header("Content-Type", resp.headers.get("Content-Type", "application/json"))
        self.finish(resp.body or b"")

    @web.authenticated
    async def get(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    async def post(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    async def patch(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    async def put(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    async def delete(self, path: str) -> None:
        await self._forward(path)


# every route this extension serves; tests check that each method of each handler is authenticated
ROUTES: list[tuple[str, type[APIHandler]]] = [
    (r"ti/api/(.*)", TiAPIProxyHandler),
]


_AUTH_WRAPPER_CODE = web.authenticated(lambda self: None).__code__


def unauthenticated_routes() -> list[str]:
    """'pattern METHOD' for each handler method not wrapped by tornado's @authenticated (should be none)."""
    out = []
    for pattern, handler in ROUTES:
        for method in handler.SUPPORTED_METHODS:
            if method == "OPTIONS":
                continue  # jupyter_server's CORS preflight: headers only, no data
            fn = getattr(handler, method.lower())
            if fn is getattr(web.RequestHandler, method.lower()):
                continue  # not served here: tornado answers 405
            # functools.wraps copies the name, so look at the code: it must be tornado's wrapper
            if not (getattr(fn, "__wrapped__", None) and fn.__code__ is _AUTH_WRAPPER_CODE):
                out.append(f"{pattern} {method}")
    return out


def setup_handlers(server_app) -> None:
    web_app = server_app.web_app
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base, pattern), handler) for pattern, handler in ROUTES])
