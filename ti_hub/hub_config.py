"""Old path of ti_hub.hub.config (moved in issue 32), kept so existing jupyterhub_config.py files that do
``from ti_hub.hub_config import configure`` still work. Import from ti_hub.hub.config instead."""

import warnings

from .hub.config import *  # noqa: F401,F403
from .hub.config import configure, configure_culler  # noqa: F401

# stacklevel 2: warnings skips importlib's frames, so this names the line that imported the old path
warnings.warn("ti_hub.hub_config moved to ti_hub.hub.config; import from there", DeprecationWarning, stacklevel=2)
