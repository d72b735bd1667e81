"""The CI check on ti_labextension's server routes: every handler method authenticated, only API paths forwarded."""

from __future__ import annotations

import pytest

handlers = pytest.importorskip("ti_labextension.handlers", reason="scripts/test installs ./ti_labextension")


def test_every_route_method_is_authenticated():
    assert handlers.ROUTES
    assert handlers.unauthenticated_routes() == []


def test_the_check_catches_an_unauthenticated_method(monkeypatch):
    class Leaky(handlers.APIHandler):
        async def get(self):  # no @authenticated
            self.finish("data")

    monkeypatch.setattr(handlers, "ROUTES", [*handlers.ROUTES, ("ti/leak", Leaky)])
    assert handlers.unauthenticated_routes() == ["ti/leak GET"]


@pytest.mark.parametrize("path", ["jobs", "jobs/12/logs", "volumes/3/files", "queue/scores", "me"])
def test_api_paths_are_forwarded(path):
    assert handlers.is_api_path(path)


@pytest.mark.parametrize("path", ["../hub/api/users", "jobs/../../x", "jobs//x", "jobs?x=1", "a b", "..",
                                  "jobs/%2e%2e", "jobs\\..\\x"])
def test_paths_leaving_the_api_are_refused(path):
    assert not handlers.is_api_path(path)
