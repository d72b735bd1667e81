"""Runs JupyterHub's single-user server for a workspace of the embedded platform (TiLocalSpawner's default command),
without ``rfc3987_syntax``: jsonschema's optional IRI checker, pulled in through jupyter_events, builds a grammar
when imported, 1.8-2 s of CPU of every workspace's start here (`import jupyterhub.singleuser` 3.3-3.6 s, 1.5 s
without it). jsonschema treats a missing module as "no such format checker"; nothing in a workspace's server
validates IRIs. The hub and the ti service leave it out the same way (hub/main.py, api/contract.py)."""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from jupyterhub.singleuser import main  # noqa: E402

if __name__ == "__main__":
    main()
