"""The local execution backend: jobs as supervised processes on this one machine.

``LocalBackend`` is imported lazily so that the supervisor (``python -m
ti_hub.backends.local.runner``) starts without loading traitlets.
"""

from __future__ import annotations

__all__ = ["LocalBackend"]


def __getattr__(name: str):
    if name == "LocalBackend":
        from .backend import LocalBackend
        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
