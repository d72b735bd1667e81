"""The migrations and the models agree, and the start-up shortcut knows the real head."""

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from ti_hub.db.tables import metadata
from ti_hub.db.session import HEAD, MIGRATIONS, current_revision, make_engine, sqlite_url, upgrade


def test_head_constant_matches_alembic():
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD


def test_upgrade_creates_every_model_table(tmp_path):
    url = sqlite_url(tmp_path / "t.sqlite")
    assert current_revision(url) is None
    upgrade(url)
    assert current_revision(url) == HEAD
    engine = make_engine(url)
    tables = set(inspect(engine).get_table_names())
    assert set(metadata.tables) <= tables
    upgrade(url)  # a second start is a no-op
    engine.dispose()
