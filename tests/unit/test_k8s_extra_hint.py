"""Without the 'kubernetes' extra, what needs it says how to install it (not only that an import failed)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a fresh interpreter where kubernetes_asyncio is not installed (a None entry makes its import fail)
NO_K8S = "import sys; sys.modules['kubernetes_asyncio'] = None; "
HINT = "pip install '.[kubernetes]'"


def run(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_K8S + code], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_service_configured_for_kubernetes_says_which_extra_to_install():
    out = run("from ti_hub.service.app import TiService\n"
              "try:\n    TiService(backend_class='ti_hub.backends.k8s.KubernetesBackend')\n"
              "except Exception as e:\n    print(e)")
    assert "kubernetes_asyncio could not be imported" in out.stdout and HINT in out.stdout, out


def test_the_kubernetes_benchmarks_stop_at_once_saying_which_extra_to_install():
    out = run("sys.argv = ['bench']; import k8sbench", cwd=ROOT / "benchmarks")
    assert out.returncode == 1 and HINT in out.stderr, out
