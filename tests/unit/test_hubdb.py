"""The hub's SQLite database runs in WAL mode; other SQLite files this process opens are left alone."""

from __future__ import annotations

from sqlalchemy import create_engine, text

from ti_hub.hub.sqlite import use_wal


def mode(path) -> tuple[str, int]:
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return (conn.execute(text("PRAGMA journal_mode")).scalar(),
                    conn.execute(text("PRAGMA synchronous")).scalar())
    finally:
        engine.dispose()


def test_only_the_named_database_gets_wal(tmp_path):
    hub, other = tmp_path / "jupyterhub.sqlite", tmp_path / "other.sqlite"
    use_wal(hub)
    use_wal(hub)  # idempotent: one listener
    assert mode(hub) == ("wal", 1)  # synchronous NORMAL
    assert mode(other) == ("delete", 2)  # SQLite's defaults: rollback journal, FULL
