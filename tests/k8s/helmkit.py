"""Helm for the tests: the chart, helm itself (built from its Go module by tests/k8s/build-helm.sh), renders,
and the fixtures conftest.py offers to every test module (``helm``, ``own_chart``, ``full_chart``, ``namespaces``).

The chart's dependency, the zero-to-jupyterhub chart, comes from helm/fetch-deps.sh. Where no source for it can be
reached, ``full_chart`` skips, saying so, unless TIHUB_REQUIRE_Z2JH=1; ``own_chart`` is a copy of the chart without
the dependency (its templates fall back to z2jh's default names), so TiHub's own objects are tested everywhere.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "ti-hub"
RELEASE, NS = "tihub", "tihub"
# everything the chart renders must be a built-in kind (no CRDs in the test cluster, nor required anywhere)
BUILTIN = {
    ("v1", k) for k in ("ConfigMap", "Secret", "Service", "ServiceAccount", "Pod", "PersistentVolumeClaim",
                        "Namespace")
} | {("apps/v1", k) for k in ("Deployment", "StatefulSet", "DaemonSet")} | {
    ("rbac.authorization.k8s.io/v1", k) for k in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
} | {("networking.k8s.io/v1", k) for k in ("NetworkPolicy", "Ingress")} | {
    ("policy/v1", "PodDisruptionBudget"), ("scheduling.k8s.io/v1", "PriorityClass"), ("batch/v1", "Job"),
} | {("admissionregistration.k8s.io/v1", k) for k in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")}
# what `helm install` finds on a 1.36 cluster (helm's offline default set lacks it)
WITH_MAP = ("--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")


def run(*argv, check=True, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False, **kw)
    if check and out.returncode:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary; built when missing. A failed build fails the tests (nothing is skipped)."""
    script = ROOT / "tests" / "k8s" / "build-helm.sh"
    run("bash", script, timeout=3600)
    return Path(run("bash", script, "--print-bin").stdout.strip())


@pytest.fixture(scope="session")
def own_chart(tmp_path_factory) -> Path:
    """The chart without its dependency: TiHub's own objects, rendered alone."""
    d = tmp_path_factory.mktemp("own") / "ti-hub"
    shutil.copytree(CHART, d, ignore=shutil.ignore_patterns("charts"))
    meta = yaml.safe_load((d / "Chart.yaml").read_text())
    meta.pop("dependencies")
    (d / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return d


@pytest.fixture(scope="session")
def full_chart(helm) -> Path:
    """The chart with the zero-to-jupyterhub chart vendored into charts/ by helm/fetch-deps.sh."""
    out = run("bash", ROOT / "helm" / "fetch-deps.sh", check=False, timeout=600)
    if out.returncode == 3 and os.environ.get("TIHUB_REQUIRE_Z2JH") != "1":
        pytest.skip("the zero-to-jupyterhub chart cannot be fetched here (" + out.stderr.strip().splitlines()[-1]
                    + "); TiHub's own objects are tested without it")
    assert out.returncode == 0, out.stderr
    return CHART


def render(helm, chart, *args, namespace=NS, check=True) -> list[dict] | subprocess.CompletedProcess:
    out = run(helm, "template", RELEASE, chart, "--namespace", namespace, *args, check=check)
    if not check:
        return out
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(docs, kind) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs, kind, name=None) -> dict:
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def values_file(tmp_path, data) -> Path:
    p = tmp_path / f"values-{secrets.token_hex(3)}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.fixture
def namespaces(k8s_cluster):
    made: list[str] = []

    def make(prefix, restricted=True):
        made.append(k8s_cluster.namespace(f"{prefix}-{secrets.token_hex(3)}", restricted=restricted))
        return made[-1]

    yield make
    for ns in made:
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
