"""Engines and sessions; SQLite runs in WAL mode, PostgreSQL is supported the same way."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).parent / "migrations"
# the newest migration; tests check it against Alembic's own view (a start-up skips Alembic when current)
HEAD = "0020"


def make_engine(url: str, readonly: bool = False, busy_timeout: float = 10.0, **kwargs) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and enforced foreign keys.

    ``readonly``: for SQLite, transactions start deferred, so readers never queue behind the write lock
    (WAL lets them read while one writer writes). Writers must use the default engine. ``busy_timeout``: how
    long SQLite waits for another process's lock before it gives up (the API then answers 503).
    """
    # JSON columns (job specs, placements) are decoded on every list: orjson is several times faster
    kwargs.setdefault("json_serializer", lambda o: orjson.dumps(o).decode())
    kwargs.setdefault("json_deserializer", orjson.loads)
    if url.startswith("sqlite"):
        kwargs.setdefault("connect_args", {"check_same_thread": False, "timeout": busy_timeout})
        engine = create_engine(url, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            # the driver's implicit BEGIN is turned off so that we can say BEGIN IMMEDIATE
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):
            # writers take the write lock up front: two writers never both read the old quota usage
            conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def current_revision(url: str) -> str | None:
    from sqlalchemy import inspect, text

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if "ti_alembic_version" not in inspect(conn).get_table_names():
                return None
            return conn.execute(text("SELECT version_num FROM ti_alembic_version")).scalar()
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` with Alembic (skipped when already at HEAD)."""
    if revision == "head" and current_revision(url) == HEAD:
        return  # loading Alembic's scripts costs a noticeable part of a cold start
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    command.upgrade(cfg, revision)


def drop_tables(url: str) -> None:
    """Drop TiHub's tables and Alembic's version table: tests and benchmarks on a shared PostgreSQL start from an
    empty database (``upgrade`` makes them again)."""
    from sqlalchemy import text

    from .tables import metadata

    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            metadata.drop_all(conn)
            conn.execute(text("DROP TABLE IF EXISTS ti_alembic_version"))
    finally:
        engine.dispose()


def sqlite_url(path: str | os.PathLike) -> str:
    return f"sqlite:///{Path(path).resolve()}"
