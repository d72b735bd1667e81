"""What a request handler of the REST API or the pages may reach of the ti service: ``self.ti``.

The process shell (``service/app.py``) hands its application object to tornado's settings; handlers see it only as
this protocol (issue 32: nothing below the shell names the application class). Everything an operation may use
(``ops.context.Context``) plus the parts only handlers read: the health monitor and alert rules, the accounting
and notifier tasks, TensorBoards, caches and a few settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..ops.context import Capacity, Verification

if TYPE_CHECKING:
    from cryptography.fernet import Fernet
    from traitlets.config import Config

    from ..endpoints.kubetb import KubeTensorBoards
    from ..endpoints.origins import Origins
    from ..endpoints.tensorboard import TensorBoards
    from ..health.alerting import AlertRules
    from ..health.monitor import HealthMonitor
    from ..hubclient.names import HubNames
    from ..ops.rendercache import RenderCache
    from ..ops.statuswait import StatusWaits
    from ..registry.catalog import ImageRegistries
    from ..tasks.accounting import ClusterAccounting
    from ..tasks.notifier import Notifier


class ServiceContext(Verification, Capacity, Protocol):
    config: Config  # the loaded configuration (the SSH gateway's and roles' settings are read from it)
    fernet: Fernet  # seals secrets at rest (registry passwords, secret env entries, endpoint tickets)
    notifier: Notifier
    health: HealthMonitor
    alert_rules: AlertRules
    accounting: ClusterAccounting
    tensorboards: TensorBoards | KubeTensorBoards
    endpoint_origins: Origins | None
    hub_names: HubNames
    status_waits: StatusWaits
    render_cache: RenderCache
    image_registries: ImageRegistries
    usage_settling_time: float
    usage_history_interval: float
    usage_device_weights: dict[str, float]
    stop_grace_seconds: float
    check_responses: bool

    async def refresh_capacity(self) -> None:
        """Read the capacity again (after a change to virtual clusters' machines) for this process's plans."""
