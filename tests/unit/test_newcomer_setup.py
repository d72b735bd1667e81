"""What a newcomer's first `bash scripts/test` needs (issue 31, newcomer 9): what it takes from outside the checkout
is said first, and every module a test skips without is installed by what scripts/test installs."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
VERSION = re.search(r"^Z2JH_VERSION=(\S+)$", (ROOT / "tests/k8s/versions.env").read_text(), re.M)[1]
SUB = Path(f"z2jh-{VERSION}") / "jupyterhub"


def checkout(tmp_path: Path) -> Path:
    """A checkout of just what scripts/find-z2jh.sh reads, at tmp_path/checkout (its ../shared is tmp_path/shared)."""
    co = tmp_path / "checkout"
    (co / "scripts").mkdir(parents=True)
    (co / "tests/k8s").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/find-z2jh.sh", co / "scripts")
    shutil.copy(ROOT / "tests/k8s/versions.env", co / "tests/k8s")
    return co


def chart(vendor: Path, version: str = VERSION) -> Path:
    d = vendor / f"z2jh-{version}" / "jupyterhub"
    d.mkdir(parents=True)
    (d / "Chart.yaml").write_text(f"name: jupyterhub\nversion: {version}\n")
    return d


def find(co: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("TIHUB_Z2JH_CHART", "TI_HUB_SHARED", "TI_HUB_VENDOR_DIR", "TIHUB_HELM_CACHE")}
    clean.update(TIHUB_HELM_CACHE=str(tmp_path / "no-cache"), **env)
    return subprocess.run(["bash", str(co / "scripts/find-z2jh.sh")], capture_output=True, text=True, env=clean,
                          cwd=tmp_path, timeout=60)


def test_a_missing_vendored_chart_is_named_with_every_place_looked_at(tmp_path):
    co = checkout(tmp_path)
    out = find(co, tmp_path)
    assert out.returncode == 3 and out.stdout == ""
    assert "MISSING: the zero-to-jupyterhub chart" in out.stderr
    assert f"looked at: {tmp_path / 'shared/vendor' / SUB} (no such directory)" in out.stderr
    assert str(tmp_path / "no-cache" / SUB) in out.stderr
    assert "TI_HUB_SHARED=" in out.stderr and "TI_HUB_VENDOR_DIR=" in out.stderr
    # another version there: the message says which it holds
    chart(tmp_path / "shared/vendor", "0.9.0")
    assert "that directory holds: z2jh-0.9.0" in find(co, tmp_path).stderr
    # the default layout: ../shared/vendor beside the checkout
    there = chart(tmp_path / "shared/vendor")
    out = find(co, tmp_path)
    assert (out.returncode, out.stdout.strip()) == (0, str(there))


def test_the_environment_can_name_the_shared_or_vendor_directory(tmp_path):
    co = checkout(tmp_path)
    there = chart(tmp_path / "elsewhere/vendor")
    for env in ({"TI_HUB_SHARED": "elsewhere"}, {"TI_HUB_VENDOR_DIR": str(tmp_path / "elsewhere/vendor")},
                {"TIHUB_Z2JH_CHART": str(there)}):
        out = find(co, tmp_path, **env)  # relative paths: from the current directory
        assert (out.returncode, out.stdout.strip()) == (0, str(there)), (env, out.stderr)
    # a place named wrongly is a mistake to fix, whatever ../shared holds
    chart(tmp_path / "shared/vendor")
    out = find(co, tmp_path, TI_HUB_VENDOR_DIR=str(tmp_path / "elsewhere"))
    assert out.returncode == 2 and f"{tmp_path / 'elsewhere' / SUB} is missing" in out.stderr
    assert "holds: no z2jh-* at all" in out.stderr
    out = find(co, tmp_path, TI_HUB_SHARED="/no/such/dir")
    assert out.returncode == 2 and "TI_HUB_SHARED=/no/such/dir: /no/such/dir does not exist" in out.stderr


def test_the_test_command_stops_first_thing_when_told_a_wrong_place(tmp_path):
    """Before it builds, installs or starts anything: the first thing it prints is the problem."""
    env = {**os.environ, "TI_HUB_SHARED": str(tmp_path / "nothing-here")}
    env.pop("TIHUB_Z2JH_CHART", None)
    out = subprocess.run(["bash", str(ROOT / "scripts/test")], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == "" and out.stderr.startswith(f"TI_HUB_SHARED={tmp_path / 'nothing-here'}: ")
    assert "stopping before anything runs" in out.stderr


def installed_extras() -> set[str]:
    """The distributions scripts/test installs: TiHub with the extras it names, and ./ti_labextension."""
    line = re.search(r'pip install .*-e "\.\[([\w,]+)\]"', (ROOT / "scripts/test").read_text())
    assert line, "scripts/test no longer installs TiHub with extras"
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    reqs = cfg["options"]["install_requires"].splitlines()
    for extra in line[1].split(","):
        reqs += cfg["options.extras_require"][extra].splitlines()
    return {canonicalize_name(Requirement(r).name) for r in reqs if r.strip()} | {"ti-labextension"}


def test_every_module_a_test_skips_without_is_installed_by_the_test_command():
    """A test that skips for a missing module the test command does not install never runs anywhere (as the
    OpenAPI document's validation did, issue 31)."""
    dists = packages_distributions()
    installed = installed_extras()
    skipped = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if "node_modules" not in path.parts:
            skipped |= set(re.findall(r'importorskip\(\s*"([\w.]+)"', path.read_text()))
    assert "openapi_spec_validator" in skipped
    unknown, absent = [], []
    for module in sorted(skipped):
        top = module.split(".")[0]
        if top not in dists:  # not installed here: which distribution provides it is unknown
            absent.append(module)
        elif not {canonicalize_name(d) for d in dists[top]} & installed:
            unknown.append(f"{module} (from {dists[top]})")
    assert not unknown, f"scripts/test installs nothing that provides: {unknown}"
    if absent:
        assert not os.environ.get("CI"), f"CI lacks {absent}"
        pytest.skip(f"{absent} not installed here: pip install -e '.[test,examples,kubernetes]'")
