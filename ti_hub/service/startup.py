"""Things the ti service makes once at start: the Unix uid policy, the TensorBoard supervisor for the backend, the
volumes' mounts (``restore_volumes``), and the rows a new database starts with (plans, images, the preset roles)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import func, select

from ..db import models as m
from ..endpoints.tensorboard import TensorBoards
from ..ops import grants, uidranges
from ..ops.common import utcnow
from ..ops.unixids import UidPolicy

if TYPE_CHECKING:
    from sqlalchemy.orm import sessionmaker as SessionMaker

    from ..ops.context import Context

    class StartupContext(Context, Protocol):
        """The settings and database handles the service's start reads (TiService's traits of the same names)."""

        unix_uid_range: list[int]
        unix_uid_registry: str
        allow_shared_unix_user: bool
        tensorboard_idle_timeout: float
        tensorboard_image: str
        tensorboard_max: int
        initial_plans: list[dict]
        initial_images: list[dict]
        sessionmaker: SessionMaker
        read_sessionmaker: SessionMaker


def uid_policy(svc: StartupContext) -> UidPolicy:
    first, last = (int(x) for x in svc.unix_uid_range)
    # only the embedded backend runs user code as local processes; as root it gives each user a uid
    separate = os.geteuid() == 0 or not svc.backend.shares_host_network
    if not separate and not svc.allow_shared_unix_user:
        svc.log.warning("TiHub runs without root: every user's code would run as this process's own user "
                        "and could read the others' files, so only the first user to run anything may run "
                        "code (c.TiService.allow_shared_unix_user = True lets everyone; see docs/security.md)")
    return UidPolicy(first, last, separate, svc.allow_shared_unix_user)


def claim_uid_range(svc: StartupContext) -> None:
    """As root on the embedded platform, where users' code runs as host uids: register this instance's
    ``unix_uid_range`` in the host's registry (``ops/uidranges.py``), or refuse to start when another instance
    on this host gives out overlapping uids."""
    if os.geteuid() != 0 or not svc.backend.shares_host_network:
        return
    first, last = (int(x) for x in svc.unix_uid_range)
    try:
        dropped = uidranges.register(svc.unix_uid_registry, svc.data_dir, first, last,
                                     setting="c.TiService.unix_uid_range")
    except uidranges.RangeTaken as e:
        raise SystemExit(f"TiHub: not started: {e}") from None
    except OSError as e:
        raise SystemExit(f"TiHub: not started: cannot register this instance's uid range in "
                         f"{svc.unix_uid_registry} ({e}); set c.TiService.unix_uid_registry to a file root may "
                         "write, the same for every TiHub on this host") from None
    for e in dropped:
        svc.log.info("uid registry %s: dropped uids %d-%d of %s (that data directory is gone)",
                     svc.unix_uid_registry, e.first, e.last, e.data_dir)
    svc.log.info("Unix uids %d-%d are this instance's on this host (registered in %s)", first, last,
                 svc.unix_uid_registry)


def restore_volumes(svc: StartupContext) -> None:
    """Blocking, before the event loop and the API processes start (no create can race it): the driver makes
    every stored volume reachable again and removes what a create cut short by a crash left
    (``VolumeDriver.restore``)."""
    with svc.read_sessionmaker.begin() as session:
        ids = set(session.scalars(select(m.Volume.id).where(m.Volume.kind != "local")))
    svc.volume_driver.restore(ids)


def tensorboards(svc: StartupContext) -> Any:
    """Processes beside the service where jobs run on this machine (the local backend), else pods beside the
    jobs (the Kubernetes backend: ti_hub/endpoints/kubetb.py)."""
    if svc.backend.shares_host_network:
        return TensorBoards(Path(svc.data_dir) / "tensorboard", svc.tensorboard_idle_timeout,
                            svc.tensorboard_max, log=svc.log, volume_path=svc.volume_driver.path,
                            own_network=bool(getattr(svc.backend, "own_network", lambda: False)()))
    from ..endpoints.kubetb import KubeTensorBoards

    return KubeTensorBoards(svc.backend, svc.tensorboard_image, svc.tensorboard_idle_timeout,
                            svc.tensorboard_max, log=svc.log)


def seed(svc: StartupContext) -> None:
    with svc.sessionmaker.begin() as s:
        if not s.scalar(select(func.count()).select_from(m.Plan)):
            for p in svc.initial_plans:
                s.add(m.Plan(created_at=utcnow(), **{"description": "", "shm_mib": 64, "rdma": False,
                                                     "pool": "default", **p}))
        if not s.scalar(select(func.count()).select_from(m.Image)):
            for img in svc.initial_images:
                s.add(m.Image(created_at=utcnow(), **{"version": "", "description": "", **img}))
        grants.ensure_presets(s)
        if svc.default_role and s.get(m.Role, svc.default_role) is None:
            svc.log.warning("TiService.default_role %r is no TiHub role: users who hold no role get no TiHub "
                            "permission (ti role list shows the roles)", svc.default_role)
