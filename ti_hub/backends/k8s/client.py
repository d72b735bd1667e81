"""One way to reach the API server, for the backend and the volume driver alike."""

from __future__ import annotations

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config


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
