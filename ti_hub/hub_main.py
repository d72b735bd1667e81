"""Runs JupyterHub for `ti-hub start`, with two changes that only make start-up faster.

* `rfc3987_syntax` (an optional IRI checker of jsonschema, pulled in through jupyter_events) builds a
  grammar at import: 1.2-1.4 s of the hub's ~2.6 s import here (docs/benchmarks.md). jsonschema treats a
  missing module as "no such format checker"; nothing in the hub validates IRIs.
* The hub polls a starting server (the proxy, the ti service, workspaces) with an exponential back-off of
  0.2 s doubling to 5 s, jittered: the ti service answered ~1 s after its spawn and the hub noticed up to
  3 s later, which alone decided whether a cold start took 3 or 6 s. Here it polls at most every 0.25 s
  (a local connection attempt costs next to nothing).
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from jupyterhub import utils  # noqa: E402
from jupyterhub.app import main  # noqa: E402

_backoff = utils.exponential_backoff


async def _quick_backoff(pass_func, fail_message, start_wait=0.2, scale_factor=2, max_wait=5, timeout=10,
                         timeout_tolerance=0.1, *args, **kwargs):
    return await _backoff(pass_func, fail_message, min(start_wait, 0.05), scale_factor, min(max_wait, 0.25),
                          timeout, timeout_tolerance, *args, **kwargs)


# only utils' own wait_for_server / wait_for_http_server look the name up here at call time
utils.exponential_backoff = _quick_backoff

if __name__ == "__main__":
    main()
