"""TiHub: a deep-learning training platform shipped as a JupyterHub distribution."""

__version__ = "0.1.0"
