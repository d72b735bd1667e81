"""The whole platform on PostgreSQL: the ti service's own database set by config, a job run to the end."""

from __future__ import annotations

import os
import uuid

import pytest
from hubproc import ADMIN, ADMIN_PASSWORD, start_hub, stop_hub

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PG_URL = os.environ.get("TI_TEST_POSTGRES_URL", "")


@pytest.fixture
def pg_database():
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("TI_TEST_POSTGRES_URL must be set in CI (scripts/test starts PostgreSQL)")
        pytest.skip("no PostgreSQL: set TI_TEST_POSTGRES_URL (scripts/test does)")
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"tihub_e2e_{uuid.uuid4().hex[:8]}"
    admin_url = make_url(PG_URL).set(drivername="postgresql")
    with psycopg.connect(admin_url.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin_url.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_platform_runs_on_postgresql(tmp_path, pg_database):
    import psycopg
    from sqlalchemy.engine import make_url

    config = tmp_path / "jupyterhub_config.py"
    config.write_text("from ti_hub.hub.config import configure\nconfigure(c)\n"
                      f"c.TiService.db_url = {pg_database!r}\n")
    data = tmp_path / "data"
    data.mkdir()
    proc, hub, _ports = start_hub(data, config=str(config))
    try:
        admin = hub.login(ADMIN, ADMIN_PASSWORD)
        job = admin.ok("POST", "/jobs", json={"name": "on-postgres", "plan": "cpu-small", "image": "python-cpu",
                                              "command": "echo stored in postgres"})
        done = admin.wait_job(job["id"])
        assert done["status"] == "completed"
        assert not (data / "ti.sqlite").exists()  # nothing went to the default SQLite file
        plain = make_url(pg_database).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(plain) as conn:
            row = conn.execute("SELECT status, exit_code FROM ti_jobs WHERE name = 'on-postgres'").fetchone()
        assert row == ("completed", 0)
    finally:
        stop_hub(proc)
