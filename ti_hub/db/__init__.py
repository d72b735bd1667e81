"""TiHub's database: typed models, sessions and Alembic migrations."""
