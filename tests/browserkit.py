"""Helpers for the browser tests (a plain module so test files can import it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SHOTS = Path(__file__).resolve().parents[1] / "docs" / "images"
BUILD = Path(__file__).resolve().parents[1] / "ti_labextension" / "ti_labextension" / "labextension"


def screenshot(page, name: str, selector: str | None = None) -> None:
    """Kept in docs/images for the README when TI_SCREENSHOTS=1 (off in CI: tests never write the repo)."""
    if os.environ.get("TI_SCREENSHOTS") != "1":
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    if selector:
        page.locator(selector).screenshot(path=str(SHOTS / f"{name}.png"))
    else:
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def use_this_build(hub, user) -> None:
    """The workspace loads this checkout's build of the panels where there is one (scripts/test installs the
    same one): JupyterLab looks in the user's own data directory first, which the sandbox shows. Copied once the
    workspace runs (its home then exists), owned by the user (JupyterLab writes its runtime files beside it)."""
    if not (BUILD / "package.json").exists():
        return
    home = Path(hub.data_dir) / "workspaces" / "home" / user.name
    owner = home.stat()
    top = home / ".local"
    made = not top.exists()
    shutil.copytree(BUILD, top / "share" / "jupyter" / "labextensions" / "ti-labextension", dirs_exist_ok=True)
    for path in [top, *top.rglob("*")] if made else (top / "share" / "jupyter" / "labextensions").rglob("*"):
        os.chown(path, owner.st_uid, owner.st_gid)
