"""Every TiHub table module, imported together: the one place that knows the whole schema.

Table modules import only ``base``; whoever needs the full metadata (Alembic's env, drop_all, the migration
tests) imports ``metadata`` from here, so no table module has to import the others to get them registered.
"""

from __future__ import annotations

from . import accounting, alertrules, models, monitoring  # noqa: F401  (each registers its tables on Base)
from .base import Base

metadata = Base.metadata
