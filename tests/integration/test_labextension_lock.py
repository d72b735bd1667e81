"""`pip install ./ti_labextension` leaves the tracked lock file alone (issue 17, item 25).

hatch-jupyter-builder's npm_builder (and ti_labextension/build.sh) run `npm install` in the package's directory;
npm used to rewrite package-lock.json there, adding other platforms' optional packages, so a newcomer's first
install left the checkout modified. This runs that same `npm install` on a copy of the package.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "ti_labextension"


@pytest.mark.skipif(not shutil.which("npm"), reason="needs npm (scripts/test installs Node.js)")
def test_npm_install_keeps_the_tracked_lock_file(tmp_path):
    copy = tmp_path / "ti_labextension"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("node_modules", "labextension", "lib"))
    before = (copy / "package-lock.json").read_bytes()
    r = subprocess.run(["npm", "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=copy, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (copy / "node_modules" / "@rspack" / "core").is_dir()  # it did install what the lock pins
    assert (copy / "package-lock.json").read_bytes() == before, "npm install rewrote package-lock.json"
