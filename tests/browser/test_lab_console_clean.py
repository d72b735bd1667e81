"""Issue 31 (newcomer friction 10): opening a notebook in a TiHub workspace and running a cell leaves the browser's
console clean: no error message, no failed request, every WebSocket opened and none refused.

The browser watches the page over Playwright and, for what Playwright does not report (the WebSocket handshake's
answer and the browser's own network log), over a CDP session of the same page."""

from __future__ import annotations

import pytest

from browserkit import use_this_build

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def header(headers: dict, name: str) -> str | None:
    """A header as the browser reports it (names as each side spelled them: tornado writes Sec-Websocket-…)."""
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


class Watch:
    """Everything the page said and every request that failed, kept for the assertion's message."""

    def __init__(self, page):
        self.console: list[str] = []
        self.failed: list[str] = []
        self.sockets: dict[str, dict] = {}  # CDP request id -> url, handshake status, protocol, error
        page.on("console", lambda m: self.console.append(f"console.{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        page.on("requestfailed", lambda r: self.failed.append(f"{r.method} {r.url}: {r.failure}"))
        page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.request.method} {r.url}: {r.status}"))
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Log.enable")
        cdp.on("Log.entryAdded", lambda e: self.console.append(
            f"log.{e['entry']['level']} ({e['entry']['source']}): {e['entry']['text']}"))
        cdp.on("Network.webSocketCreated", lambda e: self.sockets.setdefault(e["requestId"], {"url": e["url"]}))
        cdp.on("Network.webSocketWillSendHandshakeRequest", lambda e: self._ws(
            e, asked=header(e["request"]["headers"], "Sec-WebSocket-Protocol")))
        cdp.on("Network.webSocketHandshakeResponseReceived", lambda e: self._ws(
            e, status=e["response"]["status"], chosen=header(e["response"]["headers"], "Sec-WebSocket-Protocol")))
        cdp.on("Network.webSocketFrameError", lambda e: self._ws(e, error=e["errorMessage"]))
        cdp.on("Network.webSocketClosed", lambda e: self._ws(e, closed=True))
        self._cdp = cdp  # kept alive with the watch

    def _ws(self, e, **facts) -> None:
        self.sockets.setdefault(e["requestId"], {}).update(facts)

    def report(self) -> str:
        lines = [*self.console, *self.failed, *(f"websocket {s}" for s in self.sockets.values())]
        return "\n".join(lines) or "(nothing)"


def test_a_notebook_opens_and_runs_with_a_clean_console(hub, page_for):
    user = hub.person("cleanlab")
    r = user.hub_api("POST", f"/users/{user.name}/servers/mylab", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    user.wait_server("mylab")
    use_this_build(hub, user)
    watch = None
    try:
        page = page_for(hub, user)
        watch = Watch(page)
        page.goto(f"{hub.url}/user/{user.name}/mylab/lab")
        page.wait_for_selector('.jp-SideBar [data-id="ti-jobs-panel"]', timeout=90_000)
        # a new notebook from the launcher, on the workspace's own kernel, once that kernel is ready
        page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
        notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        notebook.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=90_000)
        page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=90_000)
        notebook.locator(".jp-Cell .cm-content").first.click()
        page.keyboard.type("print(6 * 7)")
        notebook.locator(".jp-Cell .cm-content", has_text="print(6 * 7)").wait_for()
        page.keyboard.press("Shift+Enter")
        out = notebook.locator(".jp-OutputArea-output").first
        out.wait_for(timeout=60_000)
        assert out.inner_text().strip() == "42"
        page.wait_for_timeout(3_000)  # late reconnects and closes still come in
        sockets = list(watch.sockets.values())
        assert sockets, "JupyterLab opened no WebSocket: " + watch.report()
        bad = [s for s in sockets if s.get("status") != 101 or s.get("error")
               or (s.get("asked") and s.get("chosen") not in [p.strip() for p in s["asked"].split(",")])]
        assert not bad, watch.report()
        # JupyterLab's own word for a kernel socket it lost ("Connection lost, reconnecting") is only a warning
        errors = [line for line in watch.console
                  if ".error" in line or line.startswith("pageerror") or "Connection lost" in line]
        assert not errors and not watch.failed, watch.report()
    finally:
        if watch:  # what the browser saw, also when a step above timed out
            print(watch.report())
        user.hub_api("DELETE", f"/users/{user.name}/servers/mylab")
