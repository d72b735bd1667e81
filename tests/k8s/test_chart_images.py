"""The chart's images, built without Docker from Debian's tools (helm/images/ocibuild.py, issue 33), run what the
chart runs them for: each is unpacked and run by runc as its own user (no network), and pushed to a real registry
that takes it only with the right login. The first build takes minutes (cached by what goes in: later runs reuse
the dependency layer and rebuild TiHub's own in seconds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from registrykit import Registry, needed

ROOT = Path(__file__).resolve().parents[2]
OCIBUILD = ROOT / "helm" / "images" / "ocibuild.py"
TOOLS = ("mmdebstrap", "umoci", "skopeo", "runc")

pytestmark = [needed, pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS),
    reason=f"needs {', '.join(TOOLS)} from Debian (scripts/test installs them)")]


def build(name: str) -> Path:
    r = subprocess.run([sys.executable, str(OCIBUILD), name], capture_output=True, text=True, timeout=2400)
    assert r.returncode == 0, r.stderr[-4000:]
    return Path(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def hub_image() -> Path:
    return build("hub")


@pytest.fixture(scope="module")
def workspace_image() -> Path:
    return build("workspace")


def image_config(layout: Path) -> dict:
    index = json.loads((layout / "index.json").read_text())
    blob = lambda d: json.loads((layout / "blobs" / "sha256" / d.split(":", 1)[1]).read_text())  # noqa: E731
    manifest = blob(index["manifests"][0]["digest"])
    return blob(manifest["config"]["digest"])


def run_in(layout: Path, tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess:
    """``argv`` in a runc container of the image, as the image's user, in namespaces of its own (no network)."""
    bundle = tmp_path / f"bundle-{uuid.uuid4().hex[:8]}"
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:latest", str(bundle)], check=True,
                   capture_output=True)
    cfg = json.loads((bundle / "config.json").read_text())
    cfg["process"]["args"] = argv
    cfg["process"]["terminal"] = False
    (bundle / "config.json").write_text(json.dumps(cfg))
    name = f"tihub-img-{uuid.uuid4().hex[:8]}"
    try:
        return subprocess.run(["runc", "run", "--bundle", str(bundle), name], capture_output=True, text=True,
                              timeout=300)
    finally:
        subprocess.run(["runc", "delete", "--force", name], capture_output=True)
        shutil.rmtree(bundle, ignore_errors=True)


def test_the_hub_image_runs_tihub_and_what_z2jh_imports_as_uid_1000(hub_image, tmp_path):
    import jupyterhub

    cfg = image_config(hub_image)["config"]
    assert cfg["User"] == "1000" and cfg["Entrypoint"] == ["tini", "--"], cfg
    assert cfg["Cmd"][0] == "jupyterhub" and "/usr/local/etc/jupyterhub/jupyterhub_config.py" in cfg["Cmd"], cfg
    r = run_in(hub_image, tmp_path, ["python3", "-c",
                                     "import os, jupyterhub, kubespawner, pycurl, psycopg, ti_hub.service.app, "
                                     "ti_hub.backends.k8s, ti_hub.hub.config; print(os.getuid(), jupyterhub.__version__)"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1000", jupyterhub.__version__]


def test_the_workspace_image_runs_the_single_user_server_with_tihubs_panels_and_magics(workspace_image, tmp_path):
    cfg = image_config(workspace_image)["config"]
    assert cfg["User"] == "1000" and cfg["Cmd"] == ["jupyterhub-singleuser"], cfg
    script = ("set -e; id -u; jupyterhub-singleuser --version >/dev/null; ti --version; "
              "jupyter labextension list 2>&1 | grep -o ti-labextension; "
              # a Python session loads the %ti magics through PYTHONSTARTUP (every kernel does)
              "python3 -c 'import os; exec(open(os.environ[\"PYTHONSTARTUP\"]).read()); print(\"startup ok\")'; "
              "python3 -m tensorboard.main --version_tb >/dev/null && echo tensorboard")
    r = run_in(workspace_image, tmp_path, ["/bin/sh", "-c", script])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    lines = r.stdout.split()
    assert lines[0] == "1000" and "ti-labextension" in lines and "startup ok" in r.stdout and "tensorboard" in lines


def test_an_image_is_pushed_only_with_the_registrys_login(hub_image, tmp_path):
    with Registry(tmp_path / "reg", users={"bot": "s3cret-pass"}) as reg:
        target = f"{reg.host}/ti-hub/k8s-hub:test"
        push = [sys.executable, str(OCIBUILD), "hub", "--push", target, "--insecure"]
        refused = subprocess.run(push, capture_output=True, text=True, timeout=600)
        assert refused.returncode != 0 and "unauthorized" in refused.stderr.lower(), refused.stderr[-2000:]
        wrong = subprocess.run(push + ["--creds", "bot:wrong"], capture_output=True, text=True, timeout=600)
        assert wrong.returncode != 0 and "unauthorized" in wrong.stderr.lower(), wrong.stderr[-2000:]
        assert "wrong" not in wrong.stderr  # the login is never echoed
        ok = subprocess.run(push + ["--creds", "bot:s3cret-pass"], capture_output=True, text=True, timeout=600)
        assert ok.returncode == 0, ok.stderr[-2000:]
        assert "s3cret-pass" not in ok.stderr + ok.stdout
        seen = subprocess.run(["skopeo", "inspect", "--config", "--tls-verify=false", "--creds", "bot:s3cret-pass",
                               f"docker://{target}"], capture_output=True, text=True, timeout=120)
        assert seen.returncode == 0, seen.stderr
        assert json.loads(seen.stdout)["config"]["User"] == "1000"
        anonymous = subprocess.run(["skopeo", "inspect", "--tls-verify=false", f"docker://{target}"],
                                   capture_output=True, text=True, timeout=120)
        assert anonymous.returncode != 0
