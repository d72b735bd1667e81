"""What the health subscribers reach of the ti service: the operations' context and the health monitor they
subscribe to (a protocol the process shell's application object satisfies; issue 32)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..ops.context import Context

if TYPE_CHECKING:
    from .monitor import HealthMonitor


class HealthContext(Context, Protocol):
    health: HealthMonitor
