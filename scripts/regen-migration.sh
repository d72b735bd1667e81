#!/usr/bin/env bash
# Regenerates the initial migration from the models (only while no release has shipped it).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -f ti_hub/db/migrations/versions/0001_initial_tables.py /tmp/ti-gen.sqlite
python - <<'PY'
from alembic import command
from alembic.config import Config
cfg = Config()
cfg.set_main_option("script_location", "ti_hub/db/migrations")
cfg.set_main_option("sqlalchemy.url", "sqlite:////tmp/ti-gen.sqlite")
command.revision(cfg, message="initial tables", autogenerate=True, rev_id="0001")
PY
