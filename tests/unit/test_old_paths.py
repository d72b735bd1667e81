"""Issue 32: the modules moved into ti_hub/hub/ keep their documented old paths (users' jupyterhub_config.py and
Helm values name them), as the same objects, with a DeprecationWarning that names the new path."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

OLD = {"ti_hub.hub_config": ("ti_hub.hub.config", ["configure", "configure_culler", "preset_roles", "SERVICE"]),
       "ti_hub.auth": ("ti_hub.hub.auth", ["TiAuthenticator"]),
       "ti_hub.oauth": ("ti_hub.hub.oauth", ["TiGitHubOAuthenticator", "TiGitLabOAuthenticator",
                                             "TiAzureAdOAuthenticator", "TiOIDCAuthenticator"])}


@pytest.mark.parametrize("old", sorted(OLD))
def test_old_path_reexports_the_new_objects_and_warns(old):
    new, names = OLD[old]
    sys.modules.pop(old, None)  # a module runs its body (and warns) on its first import only
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        __import__(old)  # as an import statement does (importlib.import_module would add a frame of its own)
    shim = sys.modules[old]
    moved = [w for w in caught if issubclass(w.category, DeprecationWarning) and new in str(w.message)]
    assert moved, [str(w.message) for w in caught]
    assert moved[0].filename == __file__  # the warning points at the line that imported the old path
    target = importlib.import_module(new)
    for name in names:
        assert getattr(shim, name) is getattr(target, name)


def test_authenticator_class_strings_still_resolve():
    from traitlets.utils.importstring import import_item

    from ti_hub.hub.auth import TiAuthenticator
    from ti_hub.hub.oauth import TiOIDCAuthenticator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert import_item("ti_hub.auth.TiAuthenticator") is TiAuthenticator
        assert import_item("ti_hub.oauth.TiOIDCAuthenticator") is TiOIDCAuthenticator


def test_the_hub_still_finds_tihub_templates():
    """The hub's template path is computed from its module's place: after the move it must still name ti_hub/templates
    (JupyterHub skips a missing path silently, showing its stock pages)."""
    from ti_hub.hub.config import TEMPLATES

    assert (TEMPLATES / "page.html").is_file() and (TEMPLATES / "ti-approval-wait.html").is_file()
