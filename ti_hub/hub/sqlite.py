"""The hub's own SQLite database in WAL mode, synced at checkpoints (``synchronous=NORMAL``).

JupyterHub opens SQLite in its default rollback-journal mode, where every commit waits for several fsyncs, and
a spawn commits many times (tokens, OAuth client, spawner state, activity) on the hub's one event loop: with a
hundred spawns at once, the commits queue. In WAL mode a commit appends to the log; with ``NORMAL`` a power
loss may lose the last commits but never corrupts the database (SQLite's documented guarantee). Only the file
named here is touched; TiHub's own database keeps its settings (``ti_hub/db/session.py``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

_targets: set[str] = set()


def _on_connect(dbapi_con, _record) -> None:
    if not isinstance(dbapi_con, sqlite3.Connection):
        return
    files = {row[2] for row in dbapi_con.execute("PRAGMA database_list").fetchall()}
    if files & _targets:
        dbapi_con.execute("PRAGMA journal_mode=WAL")
        dbapi_con.execute("PRAGMA synchronous=NORMAL")


def use_wal(db_file: Path) -> None:
    """Every SQLite connection this process opens to ``db_file`` from now on runs in WAL mode."""
    _targets.add(str(Path(db_file).resolve()))
    if not event.contains(Engine, "connect", _on_connect):
        event.listen(Engine, "connect", _on_connect)
