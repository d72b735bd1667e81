"""The chart images' cache keys (helm/images/ocibuild.py): a change to TiHub's sources makes a new image on the same
dependency layer (seconds); a change to its declared dependencies or the image's spec makes a new dependency layer
(minutes); nothing else does."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ocibuild(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("ocibuild", ROOT / "helm" / "images" / "ocibuild.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "ocibuild", mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    tree = tmp_path / "repo"
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tree / name)
    (tree / "ti_hub").mkdir()
    (tree / "ti_hub" / "__init__.py").write_text("__version__ = '0.1.0'\n")
    (tree / "ti_labextension" / "src").mkdir(parents=True)
    (tree / "ti_labextension" / "src" / "index.ts").write_text("export {};\n")
    monkeypatch.setattr(mod, "ROOT", tree)
    mod.tree = tree
    return mod


def keys(m, name="workspace"):
    return m.base_key(name, m.SPECS[name]), m.key_of(name, m.SPECS[name])


def test_tihubs_sources_change_only_the_top_layer(ocibuild):
    before = keys(ocibuild)
    (ocibuild.tree / "ti_hub" / "new.py").write_text("x = 1\n")
    after = keys(ocibuild)
    assert after[0] == before[0] and after[1] != before[1]


def test_dependencies_and_the_panels_change_the_dependency_layer(ocibuild):
    before = keys(ocibuild)
    cfg = ocibuild.tree / "setup.cfg"
    cfg.write_text(cfg.read_text() + "\n# another dependency\n")
    assert keys(ocibuild)[0] != before[0]
    again = keys(ocibuild)
    (ocibuild.tree / "ti_labextension" / "src" / "index.ts").write_text("export const x = 1;\n")
    assert keys(ocibuild)[0] != again[0]  # the workspace's panels live in its dependency layer
    assert keys(ocibuild, "hub")[0] == keys(ocibuild, "hub")[0]


def test_the_hub_does_not_rebuild_for_the_panels_and_bytecode_is_ignored(ocibuild):
    before = keys(ocibuild, "hub")
    (ocibuild.tree / "ti_labextension" / "src" / "index.ts").write_text("export const y = 2;\n")
    (ocibuild.tree / "ti_hub" / "__pycache__").mkdir()
    (ocibuild.tree / "ti_hub" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert keys(ocibuild, "hub") == before
