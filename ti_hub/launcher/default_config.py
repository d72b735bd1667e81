# The config `ti-hub start` loads when no --config is given: TiHub's defaults, nothing else.
# See jupyterhub_config.py at the top of the repository for a documented copy to start from.
from ti_hub.hub.config import configure

configure(c)  # noqa: F821 (c is provided by the config loader)
