"""Helpers for the browser tests (a plain module so test files can import it)."""

from __future__ import annotations

import os
from pathlib import Path

SHOTS = Path(__file__).resolve().parents[1] / "docs" / "images"


def screenshot(page, name: str, selector: str | None = None) -> None:
    """Kept in docs/images for the README when TI_SCREENSHOTS=1 (off in CI: tests never write the repo)."""
    if os.environ.get("TI_SCREENSHOTS") != "1":
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    if selector:
        page.locator(selector).screenshot(path=str(SHOTS / f"{name}.png"))
    else:
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
