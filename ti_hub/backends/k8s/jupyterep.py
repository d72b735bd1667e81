"""JOB2 on Kubernetes: the jupyter endpoint's server beside instance 0's command. Pure, like ``objects.py``.

The pod of instance 0 starts ``jupyter server`` in the background on the platform's port, listening on the pod's
address (the endpoint proxy reaches it at the pod's IP, as any declared port: ``endpoint_address``) under the
endpoint's path, then ``exec``s the user's command: the command's end ends the container and the server with it;
an image without ``jupyter`` still runs the command (its log says so; the URL answers 502). The server's token
comes from the job's env Secret by reference (``secretKeyRef``), never written in the pod spec, and is unset
before the user's command starts. Other instances of the same role share the pod template: they get the
reference too and start no server (``JOB_COMPLETION_INDEX``). ``allow_root`` changes nothing in TiHub's pods
(never root); it lets the same command run anywhere, as the tests run it. The embedded platform's equivalent is
``backends/local/jobdir.jupyter_argv``.
"""

from __future__ import annotations

import shlex
from typing import Any

TOKEN_ENV = "TI_JUPYTER_TOKEN"
# its key in the job's env Secret: no env name (letters, digits, _) has a '-', so no secret entry of the user's is it
TOKEN_KEY = "ti-jupyter-token"
PORT_NAME = "jupyter"
# the server's output: a file of instance 0's own (``ti job ssh`` reads it), not the job's log
LOG = "${TMPDIR:-/tmp}/ti-jupyter.log"

WRAP = """\
if [ "${{JOB_COMPLETION_INDEX:-0}}" = 0 ]; then
  if command -v jupyter >/dev/null 2>&1; then
    JUPYTER_TOKEN="$TI_JUPYTER_TOKEN" jupyter server --no-browser --ip=0.0.0.0 --port={port} \\
      --ServerApp.base_url={base_url} --ServerApp.port_retries=0 --ServerApp.allow_root=True \
      >"{log}" 2>&1 </dev/null &
    echo "[ti] jupyter endpoint: a Jupyter server on port {port} (its output: {log})" >&2
  else
    echo "[ti] jupyter endpoint: no jupyter command in this job's image (install jupyter_server in it); \\
the endpoint answers 502" >&2
  fi
fi
unset TI_JUPYTER_TOKEN
exec /bin/sh -c "$1"
"""


def wrapped_command(command: str, port: int, base_url: str) -> list[str]:
    """The container command that starts the server (instance 0 only) and then ``exec``s ``command``, which stays
    one argument of its own (``$1``), never spliced into the script."""
    script = WRAP.format(port=int(port), base_url=shlex.quote(base_url), log=LOG)
    return ["/bin/sh", "-c", script, "ti-jupyter", command]


def token_env(secret: str) -> dict[str, Any]:
    return {"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": secret, "key": TOKEN_KEY}}}


def add_to_container(container: dict[str, Any], jupyter: dict[str, Any], secret: str) -> None:
    """Turn the main container of instance 0's role into one that runs the server beside its command. The token
    the platform sets wins over an entry of the user's of the same name, as on the embedded platform."""
    command = container["command"][-1]  # ["/bin/sh", "-c", COMMAND] as objects.job_objects makes it
    container["command"] = wrapped_command(command, jupyter["port"], jupyter["base_url"])
    container["env"] = [e for e in container.get("env", []) if e["name"] != TOKEN_ENV] + [token_env(secret)]
    container["ports"] = [*container.get("ports", []),
                          {"name": PORT_NAME, "containerPort": int(jupyter["port"]), "protocol": "TCP"}]
