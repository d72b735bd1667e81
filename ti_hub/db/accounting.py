"""Booked and idle device time per hour (issue 19, SPEC MON1), beside models.py on the same Base."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base


class DeviceHours(Base):
    """Device time booked by jobs and workspaces in one hour, summed per (VC, user, machine, device type): the
    health sampler adds each sample's seconds to its hour's row, so 200 machines x 8 GPUs make at most a row per
    user per machine per hour, never a row per device per sample. Idle: a booked device whose utilization read
    under the idle threshold; unmeasured: no utilization reading (demo devices, no driver), neither idle nor busy.
    Kept ``ClusterAccounting.keep_days`` (older hours are deleted)."""

    __tablename__ = "ti_device_hours"
    __table_args__ = (Index("ux_ti_device_hours_key", "hour", "pool", "user", "machine", "device_type", unique=True),)
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    hour: Mapped[dt.datetime]  # the hour's start, UTC
    pool: Mapped[str] = mapped_column(String(63))  # the job's pool (virtual cluster)
    user: Mapped[str] = mapped_column(String(255))
    machine: Mapped[str] = mapped_column(String(255))
    device_type: Mapped[str] = mapped_column(String(63))
    booked_seconds: Mapped[float] = mapped_column(Float, default=0.0)  # device-seconds
    idle_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    unmeasured_seconds: Mapped[float] = mapped_column(Float, default=0.0)
