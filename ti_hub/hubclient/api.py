"""The ti service's calls to the hub's REST API, with its own token (role "ti-service", ti_hub/hub/config.py)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from jupyterhub.utils import url_path_join
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from ..domain.errors import HubUnavailable
from ..domain.personal import DEFAULT_WORKSPACE as DEFAULT_NAME


async def hub_fetch(hub_auth: Any, method: str, path: str, what: str) -> int:
    """The status of one call (errors included: the caller decides what a 404 means); HubUnavailable when the
    hub does not answer. ``what``: the question asked, for the error."""
    url = url_path_join(hub_auth.api_url, path)
    try:
        r = await AsyncHTTPClient().fetch(url, method=method, headers={"Authorization": f"token {hub_auth.api_token}"},
                                          request_timeout=20, raise_error=False)
    except (HTTPClientError, OSError) as e:
        raise HubUnavailable(f"the hub did not answer {what}: {e}") from None
    return r.code


async def stop_server(hub_auth: Any, owner: str, workspace: str) -> None:
    """Have the hub stop a workspace's server (its spawner ends the process); a server the hub no longer has
    is stopped already. The workspace's TiHub name is the server's, 'default' for the default server."""
    user = quote(owner, safe="")
    path = f"users/{user}/server" if workspace == DEFAULT_NAME else f"users/{user}/servers/{quote(workspace, safe='')}"
    code = await hub_fetch(hub_auth, "DELETE", path, f"stopping workspace {owner}/{workspace}")
    if code == 403:
        raise HubUnavailable("the ti service's hub token may not stop servers: give its role 'ti-service' the "
                             "scope servers")
    if code >= 400 and code != 404:
        raise HubUnavailable(f"the hub refused to stop workspace {owner}/{workspace}: HTTP {code}")


PAGE_SIZE = 200
MAX_PAGES = 50  # 10,000 users or groups: past that, the hub's admin page is the place


async def hub_list(hub_auth: Any, what: str) -> tuple[list[dict[str, Any]], bool]:
    """Every item of /users or /groups through the hub's pagination; returns (items, truncated)."""
    client = AsyncHTTPClient()
    items: list[dict[str, Any]] = []
    offset = 0
    for _ in range(MAX_PAGES):
        url = url_path_join(hub_auth.api_url, what) + "?" + urlencode({"offset": offset, "limit": PAGE_SIZE})
        try:
            resp = await client.fetch(url, headers={"Authorization": f"token {hub_auth.api_token}",
                                                    "Accept": "application/jupyterhub-pagination+json"},
                                      request_timeout=20)
        except HTTPClientError as e:
            if e.code == 403:
                raise HubUnavailable(f"the ti service's hub token may not list {what}: give its role 'ti-service' "
                                     f"the scopes list:{what} and read:{what}") from None
            raise HubUnavailable(f"the hub did not answer the list of {what}: {e}") from None
        except OSError as e:
            raise HubUnavailable(f"the hub did not answer the list of {what}: {e}") from None
        data = json.loads(resp.body)
        if isinstance(data, list):  # a hub without pagination answers the whole list
            return data, False
        items += data.get("items", [])
        nxt = (data.get("_pagination") or {}).get("next")
        if not nxt:
            return items, False
        offset = nxt["offset"]
    return items, True
