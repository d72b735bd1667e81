"""Browser tests: Playwright drives Debian's Chromium (never a downloaded browser) against a real hub,
ti service and JupyterLab workspace."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str:
    explicit = os.environ.get("TI_TEST_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("browser tests need Chromium: `apt-get install chromium` (scripts/test installs it), "
                "or set TI_TEST_CHROMIUM to a Chromium executable")


# module scope, not session: while Playwright's sync API is open its event loop counts as running in this
# thread (it runs in a greenlet), so every asyncio test after it would fail with "cannot be called from a
# running event loop"; closing it at the end of each browser module keeps the rest of the suite unaffected
@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install '.[test]' installs playwright")
    with playwright.sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium refuses its own sandbox
        b = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture
def page_for(browser):
    """A browser page logged in to the hub as ``who`` (a tihub_client.Session) through the real login form."""
    contexts = []

    def make(hub, who, **options):
        """``options``: more of Playwright's new_context options (permissions, java_script_enabled...)."""
        ctx = browser.new_context(viewport={"width": 1400, "height": 900}, **options)
        ctx.set_default_timeout(30_000)
        contexts.append(ctx)
        page = ctx.new_page()
        page.goto(hub.url + "/hub/login")
        page.fill("input[name=username]", who.name)
        page.fill("input[name=password]", who.password)
        page.click("input[type=submit], button[type=submit]")
        page.wait_for_url("**/hub/**")
        assert "/hub/login" not in page.url, f"login of {who.name} failed: {page.url}"
        return page

    yield make
    for ctx in contexts:
        ctx.close()
