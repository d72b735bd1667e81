"""A workspace of the embedded platform starts jupyterhub-singleuser through ti_hub/workspace/singleuser.py, which
keeps jsonschema's IRI checker (rfc3987_syntax, a grammar built at import: seconds of every start) out of the
server, while what the server imports through it still works."""

import subprocess
import sys

from ti_hub.spawner.local import TiLocalSpawner

PROBE = ("import sys\n"
         "import ti_hub.workspace.singleuser as s\n"
         "import jupyter_events.logger, jsonschema\n"  # what jupyter_server loads at its start
         "print(sys.modules.get('rfc3987_syntax', 'absent'), callable(s.main))")


def test_the_default_command_is_tihubs_module():
    assert TiLocalSpawner().cmd == [sys.executable, "-m", "ti_hub.workspace.singleuser"]


def test_the_server_runs_without_the_iri_grammar():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["None", "True"]


def test_the_module_starts_the_single_user_server():
    r = subprocess.run([sys.executable, "-m", "ti_hub.workspace.singleuser", "--version"], capture_output=True,
                       text=True, timeout=120)
    import jupyterhub

    assert r.returncode == 0 and jupyterhub.__version__ in r.stdout + r.stderr, (r.stdout, r.stderr[-1000:])
