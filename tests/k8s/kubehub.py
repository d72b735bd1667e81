"""The config lines of a test hub whose workspaces and jobs run on the test cluster (TiKubeSpawner and
KubernetesBackend in one namespace); a test adds its own lines after them."""

from __future__ import annotations


def kube_hub_lines(kubeconfig, namespace: str, installation: str | None = None, http_timeout: float = 10) -> str:
    """``http_timeout``: how long the hub waits for a workspace to answer (KWOK pods never do)."""
    return ("import os\n"
            f"os.environ['KUBECONFIG'] = {str(kubeconfig)!r}\n"
            "c.JupyterHub.spawner_class = 'ti_hub.spawner.kube.TiKubeSpawner'\n"
            f"c.KubeSpawner.namespace = {namespace!r}\n"
            f"c.Spawner.http_timeout = {http_timeout!r}\n"
            "c.TiService.backend_class = 'ti_hub.backends.k8s.KubernetesBackend'\n"
            f"c.KubernetesBackend.kubeconfig = {str(kubeconfig)!r}\n"
            f"c.KubernetesBackend.namespace = {namespace!r}\n"
            + (f"c.KubernetesBackend.installation = {installation!r}\n" if installation else "")
            + "c.TiService.scheduler_interval = 0.3\n")
