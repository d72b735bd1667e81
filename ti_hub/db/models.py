"""TiHub's tables (typed SQLAlchemy 2).

The ti service is the only owner of these tables; every other process reaches
them through the REST API. JupyterHub's own database stays JupyterHub's.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .base import Base, UTCDateTime


class User(Base):
    """A hub user as TiHub knows it; created on first contact, never the source of truth for login."""

    __tablename__ = "ti_users"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    created_at: Mapped[dt.datetime]
    # bumped under a row lock by every quota-checked write: serializes one user's submissions
    quota_version: Mapped[int] = mapped_column(Integer, default=0)
    # the Unix uid (and gid) the embedded platform runs this user's code as; allocated once, never reused
    unix_uid: Mapped[int | None] = mapped_column(Integer, unique=True, nullable=True)
    # RES2: the virtual cluster this user works in now (plans, quota and queue listings default to it)
    current_vc: Mapped[str | None] = mapped_column(String(63), nullable=True)


class Plan(Base):
    """RES1: an admin-defined resource bundle for some job kinds."""

    __tablename__ = "ti_plans"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    kinds: Mapped[list[Any]]  # subset of workspace / single / distributed
    device_type: Mapped[str] = mapped_column(String(63))  # "cpu" for CPU-only
    device_count: Mapped[int] = mapped_column(Integer, default=0)
    cpu: Mapped[float] = mapped_column(Float)
    memory_mib: Mapped[int] = mapped_column(Integer)
    shm_mib: Mapped[int] = mapped_column(Integer, default=64)
    rdma: Mapped[bool] = mapped_column(Boolean, default=False)
    pool: Mapped[str] = mapped_column(String(63), default="default")
    created_at: Mapped[dt.datetime]


class Quota(Base):
    """RES3: a compute limit per user x kind x device type (user '*' is the default)."""

    __tablename__ = "ti_quotas"
    __table_args__ = (UniqueConstraint("user", "kind", "device_type"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    user: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))
    device_type: Mapped[str] = mapped_column(String(63))
    devices: Mapped[int] = mapped_column(Integer)
    cpu: Mapped[float] = mapped_column(Float)
    memory_mib: Mapped[int] = mapped_column(BigInteger)


class StorageQuota(Base):
    """RES3: capacity per user x storage kind, in GiB (user '*' is the default)."""

    __tablename__ = "ti_storage_quotas"
    __table_args__ = (UniqueConstraint("user", "kind"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    user: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))
    capacity_gib: Mapped[int] = mapped_column(Integer)


class Volume(Base):
    """STO1-STO2: a named volume of one storage kind."""

    __tablename__ = "ti_volumes"
    __table_args__ = (UniqueConstraint("owner", "name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(16))
    capacity_gib: Mapped[int] = mapped_column(Integer)
    # SPEC Q9: the pool whose machines this storage serves; jobs mounting it run there ("": anywhere)
    cluster: Mapped[str] = mapped_column(String(63), default="")
    description: Mapped[str] = mapped_column(Text, default="")
    source_volume_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # datasets
    public: Mapped[bool] = mapped_column(Boolean, default=False)  # public datasets
    created_at: Mapped[dt.datetime]
    # the volume driver's last measurement (tasks/volumeusage.py); None where it cannot tell (Kubernetes)
    used_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # set while used_bytes is above capacity_gib: new read-write mounts of jobs wait (domain/mounts.py)
    over_capacity_since: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # ready | copying (a dataset being filled by the leader, tasks/snapshots.py) | failed (state_reason says why)
    state: Mapped[str] = mapped_column(String(16), default="ready", server_default="ready", index=True)
    state_reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    copy_total_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    copy_done_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    shares: Mapped[list[VolumeShare]] = relationship(
        back_populates="volume", cascade="all, delete-orphan", lazy="selectin"
    )


class VolumeShare(Base):
    """STO4: read-only or read-write access for a user or a group."""

    __tablename__ = "ti_volume_shares"
    __table_args__ = (UniqueConstraint("volume_id", "grantee_kind", "grantee"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    volume_id: Mapped[int] = mapped_column(ForeignKey("ti_volumes.id", ondelete="CASCADE"))
    grantee_kind: Mapped[str] = mapped_column(String(8))  # user | group
    grantee: Mapped[str] = mapped_column(String(255))
    mode: Mapped[str] = mapped_column(String(2))  # ro | rw
    volume: Mapped[Volume] = relationship(back_populates="shares")


class Image(Base):
    """IMG1: a public image curated by admins."""

    __tablename__ = "ti_images"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    address: Mapped[str] = mapped_column(String(512))
    version: Mapped[str] = mapped_column(String(128), default="")
    accelerator: Mapped[str] = mapped_column(String(16), default="cpu")  # cpu | gpu
    size_mib: Mapped[int | None] = mapped_column(Integer, nullable=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime]


class RegistryCredential(Base):
    """IMG2: a private registry login; the password is encrypted and never returned."""

    __tablename__ = "ti_registry_credentials"
    __table_args__ = (UniqueConstraint("owner", "name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(63))
    server: Mapped[str] = mapped_column(String(255))  # the registry host
    username: Mapped[str] = mapped_column(String(255))
    password_encrypted: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[dt.datetime]


class SSHKey(Base):
    """ACC6: a public key a user registered for SSH."""

    __tablename__ = "ti_ssh_keys"
    __table_args__ = (UniqueConstraint("owner", "name"), UniqueConstraint("owner", "fingerprint"))
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(63))
    key: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[dt.datetime]


class Template(Base):
    """JOB7: a saved job configuration, for its owner (user) or a group (team)."""

    __tablename__ = "ti_templates"
    __table_args__ = (UniqueConstraint("owner", "name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(63))
    scope: Mapped[str] = mapped_column(String(8))  # user | team
    group: Mapped[str | None] = mapped_column(String(255), nullable=True)
    spec: Mapped[dict[str, Any]]
    created_at: Mapped[dt.datetime]


class Job(Base):
    """A training job or a workspace (kind 'workspace'): one row through its whole life."""

    __tablename__ = "ti_jobs"
    __table_args__ = (
        UniqueConstraint("owner", "name"),
        Index("ix_ti_jobs_owner_id", "owner", "id"),
        Index("ix_ti_jobs_status_id", "status", "id"),
        # queue positions: COUNT of queued jobs ahead in one queue, at every submission and detail view
        Index("ix_ti_jobs_queue", "status", "pool", "device_type", "kind", "priority", "id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(63))
    display_name: Mapped[str] = mapped_column(String(255), default="")
    description: Mapped[str] = mapped_column(Text, default="")
    kind: Mapped[str] = mapped_column(String(16))  # workspace | single | distributed
    strategy: Mapped[str | None] = mapped_column(String(16), nullable=True)  # allreduce | ps
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    plan_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pool: Mapped[str] = mapped_column(String(63), default="default")
    device_type: Mapped[str] = mapped_column(String(63))
    devices_per_instance: Mapped[int] = mapped_column(Integer)
    cpu_per_instance: Mapped[float] = mapped_column(Float)
    memory_mib_per_instance: Mapped[int] = mapped_column(Integer)
    shm_mib: Mapped[int] = mapped_column(Integer, default=64)
    workers: Mapped[int] = mapped_column(Integer, default=1)
    ps: Mapped[int] = mapped_column(Integer, default=0)
    image: Mapped[str] = mapped_column(String(512), default="")
    command: Mapped[str] = mapped_column(Text, default="")
    spec: Mapped[dict[str, Any]]  # the validated submission (env, volumes, ports, endpoints, ...)
    preemptible: Mapped[bool] = mapped_column(Boolean, default=False)
    priority: Mapped[int] = mapped_column(Integer, default=100)
    # Q2: an admin pin (a later pin goes first); the owner's own order (None: creation order, the id)
    pinned_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    queue_order: Mapped[int | None] = mapped_column(Integer, nullable=True)
    estimated_duration: Mapped[int | None] = mapped_column(Integer, nullable=True)  # declared, seconds
    # Q6, written by the scheduler when they change: where a queued job stands and when it may start
    queue_position: Mapped[int | None] = mapped_column(Integer, nullable=True)
    estimated_start: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    wait_alerted: Mapped[bool] = mapped_column(Boolean, default=False)
    # JOB8: the job that preempts this one (set while it is being stopped, then it goes back to its queue)
    preempted_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    placement: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    backend_state: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime]
    queued_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)

    @property
    def instances(self) -> int:
        return self.workers + self.ps


class UsageScore(Base):
    """Q3: a user's decayed usage of one device type, as of ``updated_at`` (saved by the scheduler)."""

    __tablename__ = "ti_usage_scores"
    user: Mapped[str] = mapped_column(String(255), primary_key=True)
    device_type: Mapped[str] = mapped_column(String(63), primary_key=True)
    score: Mapped[float] = mapped_column(Float)
    held: Mapped[float] = mapped_column(Float, default=0.0)  # g when saved: weighted devices held
    updated_at: Mapped[dt.datetime]


class UsageSample(Base):
    """MON1 pictures: devices held and jobs queued, sampled by the leader every usage_history_interval.

    ``user`` "" is everyone in ``pool`` (written for every pool and device type the cluster has, zeros
    included, so timelines have no holes); ``pool`` "" is one user across all pools, with their usage
    score. Pruned after usage_history_retention.
    """

    __tablename__ = "ti_usage_samples"
    __table_args__ = (Index("ix_ti_usage_samples_at", "at"),)
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[dt.datetime]
    pool: Mapped[str] = mapped_column(String(63))
    user: Mapped[str] = mapped_column(String(255))
    device_type: Mapped[str] = mapped_column(String(63))
    devices_held: Mapped[int] = mapped_column(Integer, default=0)
    queued_jobs: Mapped[int] = mapped_column(Integer, default=0)
    usage_score: Mapped[float | None] = mapped_column(Float, nullable=True)


class JobEvent(Base):
    """A status change with its plain-language reason, for the job's history."""

    __tablename__ = "ti_job_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("ti_jobs.id", ondelete="CASCADE"), index=True)
    at: Mapped[dt.datetime]
    status: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")


class AuditEntry(Base):
    """ADM1: one change an operator made (who, what, when), for the audit log admins read.

    ``action`` is ``<object>.<verb>`` (``plan.create``, ``vc.change``, ``role.grant``); ``target`` names the
    object; ``detail`` holds what changed, never a secret (no password, no token, no credential)."""

    __tablename__ = "ti_audit"
    __table_args__ = (Index("ix_ti_audit_at", "at"),)
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[dt.datetime]
    actor: Mapped[str] = mapped_column(String(255), index=True)
    action: Mapped[str] = mapped_column(String(63), index=True)
    target: Mapped[str] = mapped_column(String(255), default="")
    detail: Mapped[dict[str, Any]]


class UserProfile(Base):
    """ACC3: what TiHub keeps about a person besides the hub's account: how to reach them, and whether they
    may use TiHub (``enabled``; a disabled user's approval at the hub is withdrawn too, ops/people.py)."""

    __tablename__ = "ti_user_profiles"
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    nickname: Mapped[str] = mapped_column(String(63), default="")
    email: Mapped[str] = mapped_column(String(254), default="")
    phone: Mapped[str] = mapped_column(String(32), default="")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    changed_at: Mapped[dt.datetime]
    # issue 31: alert notices go only to a verified email (one an admin set, or whose link its owner opened);
    # email_nonce is the one link that may verify it now ("" none), email_sent_at when that link was mailed
    email_verified: Mapped[bool] = mapped_column(Boolean, default=False)
    email_nonce: Mapped[str] = mapped_column(String(64), default="")
    email_sent_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)


class Role(Base):
    """ACC5: a TiHub role -- a named set of the seven permissions (ti_hub/domain/scopes.py PERMISSIONS).

    JupyterHub's REST API cannot create roles or change role assignments while it runs, so TiHub keeps its
    own roles and grants (ops/grants.py); ``preset`` roles ("user", "ti-admin") are never changed or deleted."""

    __tablename__ = "ti_roles"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    description: Mapped[str] = mapped_column(Text, default="")
    permissions: Mapped[list[Any]]
    preset: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime]


class Grant(Base):
    """A role held by a hub user or by every member of a hub group (``kind`` user | group)."""

    __tablename__ = "ti_grants"
    __table_args__ = (UniqueConstraint("role", "kind", "principal"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    role: Mapped[str] = mapped_column(String(63), ForeignKey("ti_roles.name", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(8))
    principal: Mapped[str] = mapped_column(String(255), index=True)
    created_at: Mapped[dt.datetime]


class GrantStamp(Base):
    """One row: a stamp that every change of roles or grants replaces. Each process keeps the roles and grants in
    memory under the stamp it read them with; one small SELECT per request tells it whether they are current."""

    __tablename__ = "ti_grant_stamp"
    id: Mapped[int] = mapped_column(primary_key=True)
    stamp: Mapped[str] = mapped_column(String(32))


class VirtualCluster(Base):
    """RES2: a virtual cluster (a pool as an object). ``name`` is the pool string plans and jobs carry; the VC
    "default" always exists, owns every machine no other VC owns and is open to all.

    ``caps``: device type -> MaxAvailable, the most devices of that type one user may hold here at once (a type
    not named: no cap). ``draining``: running work finishes, nothing new is admitted. ``drained_users``: users
    whose access was revoked with drain: their running work here finishes, none of theirs is admitted.
    ``cohort``: VCs of one cohort lend each other idle devices (a borrowed job is reclaimed when the lender's own
    jobs need them); none: no lending. ``lend``: False keeps this VC's idle devices to itself (it may still
    borrow)."""

    __tablename__ = "ti_vcs"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    caps: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    # False: open to all (a new VC, and "default" always); the first grant restricts it to its grantees, and it
    # stays restricted when the last grant goes (closed), until an admin opens it again
    restricted: Mapped[bool] = mapped_column(Boolean, default=False)
    drained_users: Mapped[list[Any]] = mapped_column(JSON, default=list)
    cohort: Mapped[str | None] = mapped_column(String(63), nullable=True)
    lend: Mapped[bool] = mapped_column(Boolean, default=True, server_default="1")
    created_at: Mapped[dt.datetime]
    access: Mapped[list[VCAccess]] = relationship(back_populates="vc", cascade="all, delete-orphan",
                                                  lazy="selectin", order_by="VCAccess.id")
    machines: Mapped[list[VCMachine]] = relationship(back_populates="vc", cascade="all, delete-orphan",
                                                     lazy="selectin", order_by="VCMachine.id")


class VCAccess(Base):
    """RES2: a user or a group who may use a restricted VC (VirtualCluster.restricted)."""

    __tablename__ = "ti_vc_access"
    __table_args__ = (UniqueConstraint("vc_id", "grantee_kind", "grantee"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    vc_id: Mapped[int] = mapped_column(ForeignKey("ti_vcs.id", ondelete="CASCADE"), index=True)
    grantee_kind: Mapped[str] = mapped_column(String(8))  # user | group
    grantee: Mapped[str] = mapped_column(String(255))
    vc: Mapped[VirtualCluster] = relationship(back_populates="access")


class VCMachine(Base):
    """RES2: a machine a VC owns. Embedded platform: one device of the local machine (``device_type``,
    ``device``); Kubernetes: a whole node (``device_type`` "", ``device`` -1), labelled ti-hub.io/pool=VC.

    ``draining``: taken away with drain while work still runs on it: no new placement there; when nothing
    holds it any more it moves to ``next_vc`` (None: back to "default")."""

    __tablename__ = "ti_vc_machines"
    __table_args__ = (UniqueConstraint("node", "device_type", "device"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    vc_id: Mapped[int] = mapped_column(ForeignKey("ti_vcs.id", ondelete="CASCADE"), index=True)
    node: Mapped[str] = mapped_column(String(255))
    device_type: Mapped[str] = mapped_column(String(63), default="")
    device: Mapped[int] = mapped_column(Integer, default=-1)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    next_vc: Mapped[str | None] = mapped_column(String(63), nullable=True)
    vc: Mapped[VirtualCluster] = relationship(back_populates="machines")

