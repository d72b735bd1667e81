"""One way to reach the API server, for the backend and the volume driver alike."""

from __future__ import annotations

from typing import Any

import orjson

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException


async def new_api_client(kubeconfig: str = "", connection_limit: int | None = None) -> k8s.ApiClient:
    """A client of its own (never the global default): ``kubeconfig`` if given, else the in-cluster service
    account, else ~/.kube/config."""
    cfg = k8s.Configuration()
    if kubeconfig:
        await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)
        except k8s_config.ConfigException:
            await k8s_config.load_kube_config(client_configuration=cfg)
    if connection_limit:
        cfg.connection_pool_maxsize = connection_limit
    return k8s.ApiClient(cfg)


async def checked(resp) -> Any:
    """``resp`` itself, or ApiException (with the server's body) for an error status: with
    ``_preload_content=False`` the client hands back any response as it came."""
    if not 200 <= resp.status <= 299:
        try:
            body = await resp.text()
        finally:
            resp.release()
        e = ApiException(status=resp.status, reason=resp.reason)
        e.body = body
        raise e
    return resp


async def json_of(resp) -> dict[str, Any]:
    """The JSON body of a successful raw response (released afterwards); ApiException for an error status."""
    await checked(resp)
    try:
        body = await resp.read()
    finally:
        resp.release()
    # orjson: pod lists and watch streams are most of what the leader parses
    return orjson.loads(body) if body else {}
