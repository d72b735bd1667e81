"""Runs JupyterHub for `ti-hub start`, without an import that costs a second of every cold start.

`rfc3987_syntax` (an optional IRI checker of jsonschema, pulled in through jupyter_events) builds a
grammar at import: 1.2-1.4 s of the hub's ~2.6 s import here (docs/benchmarks.md). jsonschema treats a
missing module as "no such format checker"; nothing in the hub validates IRIs.
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from jupyterhub.app import main  # noqa: E402

if __name__ == "__main__":
    main()
