"""Kubernetes: the execution backend (Jobs), manifests, names and watches."""

import importlib.util

# what to do when the optional dependencies are missing (a plain `pip install .` leaves them out)
INSTALL_HINT = "install TiHub's 'kubernetes' extra: pip install '.[kubernetes]' (from a checkout)"

if importlib.util.find_spec("kubernetes_asyncio") is None:
    raise ImportError(f"kubernetes_asyncio could not be imported: {INSTALL_HINT}")

from .backend import KubernetesBackend  # noqa: E402

__all__ = ["INSTALL_HINT", "KubernetesBackend"]
