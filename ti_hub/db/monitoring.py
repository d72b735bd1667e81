"""Tables of health monitoring and alerts (issue 19), beside models.py on the same Base."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base


class HealthLatest(Base):
    """The leader's latest health Snapshot (domain/readings.py), for the processes that do not sample (API
    followers answering a metrics scrape or the cluster page). One row, id 1, replaced at every sample."""

    __tablename__ = "ti_health_latest"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[dt.datetime]
    doc: Mapped[dict[str, Any]]


class Alert(Base):
    """One alert: a condition that holds (a hot GPU, a job past its duration, an idle workspace), from when it
    fired until it cleared. ``key`` says what it is about and is unique among open alerts (``cleared_at`` None):
    a condition that holds again later opens a new alert. Notices (email, webhook) go out when it fires and
    again every reminder interval while it stays open; in the product it shows while open."""

    __tablename__ = "ti_alerts"
    __table_args__ = (Index("ix_ti_alerts_open", "cleared_at", "key"), Index("ix_ti_alerts_fired", "fired_at"))
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    key: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(63))  # "machine", "job", "workspace", "queue"
    rule: Mapped[str] = mapped_column(String(63), default="")  # what raised it: a rule's name, "overrun", "idle"
    severity: Mapped[str] = mapped_column(String(15), default="warning")  # "info", "warning", "critical"
    subject: Mapped[str] = mapped_column(String(255))
    message: Mapped[str] = mapped_column(Text, default="")
    job_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    machine: Mapped[str] = mapped_column(String(255), default="")
    users: Mapped[list[Any]]  # whom it concerns besides the admins (a job's owner)
    figures: Mapped[dict[str, Any]]  # the numbers that made it fire (never a secret)
    fired_at: Mapped[dt.datetime]
    last_notified_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    notices: Mapped[int] = mapped_column(Integer, default=0)  # notice rounds sent (first + reminders)
    cleared_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # JOB4: an admin's answer to a support request (kind "support"), which closes it; the owner reads it there
    answer: Mapped[str] = mapped_column(Text, default="")
    answered_by: Mapped[str] = mapped_column(String(255), default="")
    answered_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
