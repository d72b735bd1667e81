"""TiHub's JupyterLab panels and the server extension they talk through."""

try:
    from ._version import __version__
except ImportError:  # a source checkout that was never built
    __version__ = "0.0.0.dev0"

from .handlers import setup_handlers


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": "ti-labextension"}]


def _jupyter_server_extension_points():
    return [{"module": "ti_labextension"}]


def _load_jupyter_server_extension(server_app):
    setup_handlers(server_app)
    server_app.log.info("ti_labextension: forwarding %s to the ti service", "ti/api/*")
