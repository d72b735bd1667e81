"""ti_hub's layers are a contract (issue 32): import-linter checks the `[importlinter]` sections of setup.cfg, where
each layer may import only the layers below it and the imports still pointing up are listed as debts."""

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


def test_every_listed_debt_is_still_an_import():
    """A debt paid (its import gone) leaves the list too, so the list says what remains."""
    grimp = pytest.importorskip("grimp")
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    debts = [line.strip() for line in cfg["importlinter:contract:layers"]["ignore_imports"].splitlines()
             if line.strip()]
    graph = grimp.build_graph("ti_hub", include_external_packages=False, exclude_type_checking_imports=False)
    gone = [d for d in debts if not graph.direct_import_exists(importer=d.split(" -> ")[0],
                                                                 imported=d.split(" -> ")[1])]
    assert gone == [], f"remove these from setup.cfg's ignore_imports: {gone}"
