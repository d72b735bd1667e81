"""`ti-hub` (app.py: start, stop, simulate, upgrade-db, help-config) and the embedded platform's process plumbing:
one run per data dir (with ti_hub/plumbing/lastrun.py), its ports (portguard.py), the default config (default_config.py), and
the proxy (proxy_main.py, proxy_websockets.py). On Kubernetes none of this runs: the chart starts the hub itself."""
