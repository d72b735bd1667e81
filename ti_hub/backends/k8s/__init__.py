"""Kubernetes: the execution backend (Jobs), manifests, names and watches."""

from .backend import KubernetesBackend

__all__ = ["KubernetesBackend"]
