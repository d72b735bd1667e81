"""The embedded proxy before the hub's route exists (issue 31, newcomer 10): the first second of a start answered a
bare 404, as if the page did not exist. It now says that TiHub is starting (503, Retry-After, a page that
reloads), and once the hub's route is there every request goes to it as before."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
from proxykit import free_port, running_proxy

class Hub(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"the hub answers " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_before_the_hub_route_the_proxy_says_it_is_starting_then_forwards():
    hub = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    hub.daemon_threads = True
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    # as JupyterHub starts it: error pages come from the hub, not up yet
    try:
        with running_proxy("--error-target", f"http://127.0.0.1:{free_port()}/hub/error") as proxy:
            base, api, auth = proxy.url, proxy.api, proxy.auth
            page = requests.get(base + "/hub/home", headers={"Accept": "text/html,*/*"}, timeout=10)
            assert page.status_code == 503 and page.headers["Retry-After"] == "2", page.status_code
            assert "TiHub is starting" in page.text and 'http-equiv="refresh"' in page.text
            r = requests.get(base + "/services/ti/api/v1/me", timeout=10)
            assert r.status_code == 503 and r.json()["error"] == "starting"
            # a route of a workspace alone is not the hub's: the rest still says starting
            hub_url = f"http://127.0.0.1:{hub.server_address[1]}"
            requests.post(api + "/user/alice", data=json.dumps({"target": hub_url}), headers=auth, timeout=5)
            assert requests.get(base + "/user/alice/lab", timeout=10).text == "the hub answers /user/alice/lab"
            assert requests.get(base + "/hub/home", timeout=10).status_code == 503
            requests.post(api + "/", data=json.dumps({"target": hub_url}), headers=auth, timeout=5)
            r = requests.get(base + "/hub/home", timeout=10)
            assert r.status_code == 200 and r.text == "the hub answers /hub/home"
    finally:
        hub.shutdown()
