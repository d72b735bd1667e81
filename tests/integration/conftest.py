"""Database fixtures: every test here runs on SQLite (WAL) and on a real PostgreSQL."""

from __future__ import annotations

import os

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import event

from ti_hub.backends.base import NodeCapacity
from ti_hub.db.session import drop_tables, make_engine, make_sessionmaker, sqlite_url, upgrade
from ti_hub.ops.settings import OpsSettings
from ti_hub.service.app import DEFAULT_COMPUTE_QUOTAS, DEFAULT_STORAGE_QUOTAS

PG_URL = os.environ.get("TI_TEST_POSTGRES_URL", "")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "sqlite":
        url = sqlite_url(tmp_path / "ti.sqlite")
    else:
        if not PG_URL:
            if os.environ.get("CI"):
                pytest.fail("TI_TEST_POSTGRES_URL must be set in CI (scripts/test starts PostgreSQL)")
            pytest.skip("no PostgreSQL: set TI_TEST_POSTGRES_URL (scripts/test does)")
        url = PG_URL
        drop_tables(url)
    upgrade(url)
    engine = make_engine(url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def settings():
    node = NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2, 3]}, 16.0, 65536)
    return OpsSettings({k: dict(v) for k, v in DEFAULT_COMPUTE_QUOTAS.items()}, dict(DEFAULT_STORAGE_QUOTAS),
                       {"npu": [0, 1, 2, 4, 8]}, 64, 16, [node], secret_key=Fernet(Fernet.generate_key()))


@pytest.fixture
def seeded(db, settings):
    """The default plans and one public image."""
    from ti_hub.domain import scopes as S
    from ti_hub.db import models as m
    from ti_hub.domain.actor import Actor
    from ti_hub.ops import plans
    from ti_hub.ops.common import utcnow
    from ti_hub.service.app import DEFAULT_PLANS

    admin = Actor("root1", frozenset(S.ADMIN_SCOPES))
    with db.begin() as s:
        for p in DEFAULT_PLANS:
            plans.create(s, admin, p, settings.device_rules)
        s.add(m.Image(name="python-cpu", address="quay.io/jupyter/scipy-notebook:latest", version="",
                      accelerator="cpu", description="", created_at=utcnow()))
    return db


@pytest.fixture
def statements_during():
    """``statements_during(db, fn)``: the first word of each SQL statement ``fn`` sends through the session
    factory's engine (SELECT, INSERT, SAVEPOINT...): what proves a step only reads."""

    def record(db, fn) -> list[str]:
        seen: list[str] = []

        def note(_conn, _cursor, statement, *_):
            seen.append(statement.lstrip().split(None, 1)[0].upper())

        engine = db.kw["bind"]
        event.listen(engine, "before_cursor_execute", note)
        try:
            fn()
        finally:
            event.remove(engine, "before_cursor_execute", note)
        return seen

    return record
