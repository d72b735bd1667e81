"""ti_hub's layers are a contract (issue 32): import-linter checks the `[importlinter]` sections of setup.cfg, where
each layer may import only the layers below it, with no import excused."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_imports() -> str:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.fail("lint-imports is missing: pip install -e '.[test]' installs import-linter")
    return exe


def test_the_layers_contract_is_kept():
    r = subprocess.run([lint_imports(), "--config", str(ROOT / "setup.cfg")], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "1 kept, 0 broken" in r.stdout


def test_no_import_is_excused():
    """Every debt of issue 32 is paid: the contract lists no ignored import, and none may come back."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert "ignore_imports" not in cfg["importlinter:contract:layers"]


def test_the_layers_name_every_package():
    """A new package must be given its place in the layers (import-linter checks only the packages it names)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    layers = {line.strip() for line in cfg["importlinter:contract:layers"]["layers"].splitlines() if line.strip()}
    packages = {f"ti_hub.{p.name}" for p in (ROOT / "ti_hub").iterdir() if (p / "__init__.py").exists()}
    assert packages - layers == set(), f"add to setup.cfg's layers: {sorted(packages - layers)}"
