"""Tables of machine alert rules and cordoned machines (MON2, ADM3; issue 19), beside models.py on the same Base."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Boolean, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base


class AlertRule(Base):
    """MON2: a condition on machines' health readings that admins manage. Every ``step`` seconds it looks back
    ``interval`` seconds and holds on a machine when at least ``percent`` % of that machine's samples there
    match ``metric op threshold`` (ops/alertrules.py, domain/healthrules.py).

    Three rows are built in (migration 0016, ops/jobrules.py): ``job-overrun``, ``job-wait`` and
    ``workspace-idle``, about jobs and workspaces; they cannot be created again nor deleted, and their fields that
    mean nothing for them (op, percent, step, cordon) are fixed."""

    __tablename__ = "ti_alert_rules"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    metric: Mapped[str] = mapped_column(String(31))  # gpu_ecc, gpu_temperature, cpu, memory, disk_free
    op: Mapped[str] = mapped_column(String(2))  # >, >=, <, <=
    threshold: Mapped[float] = mapped_column(Float)
    step: Mapped[int] = mapped_column(Integer)  # seconds between two evaluations
    interval: Mapped[int] = mapped_column(Integer)  # seconds looked back
    percent: Mapped[float] = mapped_column(Float)  # share of the samples that must match, 0 < percent <= 100
    severity: Mapped[str] = mapped_column(String(15), default="warning")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    notify_owners: Mapped[bool] = mapped_column(Boolean, default=False)  # alert owners of jobs on the machine
    cordon: Mapped[bool] = mapped_column(Boolean, default=False)  # take the machine out of scheduling
    # the built-in workspace_idle rule's seconds from the warning to the reclaim; None for every other rule
    # (ops/jobrules.py: the built-in job and workspace rules, migration 0016)
    grace: Mapped[int | None] = mapped_column(Integer, nullable=True, default=None)
    # workspace_idle's CPU threshold, a percent of the plan's CPUs (migration 0020); None for every other rule
    cpu_threshold: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)
    created_at: Mapped[dt.datetime]
    updated_at: Mapped[dt.datetime]


class Cordon(Base):
    """A machine taken out of scheduling (ADM3): by an admin, or by a rule with ``cordon`` (actor "ti-alerts").
    The embedded platform marks the machine's capacity nodes unschedulable (ops/capacity.py); Kubernetes
    cordons the node as well. Running work keeps running; an admin's uncordon deletes the row."""

    __tablename__ = "ti_cordons"
    machine: Mapped[str] = mapped_column(String(255), primary_key=True)
    at: Mapped[dt.datetime]
    by: Mapped[str] = mapped_column(String(255))  # who: an admin's name, or "ti-alerts"
    rule: Mapped[str] = mapped_column(String(63), default="")  # the rule that cordoned it ("" by hand)
    reason: Mapped[str] = mapped_column(Text, default="")
