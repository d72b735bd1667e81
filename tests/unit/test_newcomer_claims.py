"""What the README and scripts/test promise a newcomer (issue 17, items 22 and 25)."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def test_an_installed_cpu_only_pytorch_satisfies_the_examples_extra():
    """The README: a CPU-only build of the pinned version (2.15.0+cpu) is kept by `pip install '.[examples]'`."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extra = [Requirement(line) for line in cfg["options.extras_require"]["examples"].split("\n") if line.strip()]
    (torch,) = [r for r in extra if r.name == "torch"]
    pinned = str(torch.specifier).lstrip("=")
    assert torch.specifier.contains(f"{pinned}+cpu")
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"`torch=={pinned}`" in readme and f"`{pinned}+cpu`" in readme and "about 3 GB" in readme


def test_the_test_script_says_why_each_skipped_test_was_skipped():
    lines = [line for line in (ROOT / "scripts" / "test").read_text().splitlines()
             if re.match(r"\s*python3 -m pytest\b", line)]
    assert lines, "scripts/test runs no pytest"
    for line in lines:
        args = shlex.split(line, comments=True)
        assert any(a.startswith("-r") and "s" in a[2:] for a in args), line


def test_horovod_is_not_claimed():
    """Issue 17, item 7: all-reduce jobs get the torchrun environment, not what `horovodrun` needs (no hostfile, no
    HOROVOD_* rendezvous), so no page, form, help or doc may offer Horovod."""
    shown = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "ti_hub").rglob("*.py"),
             *(ROOT / "ti_hub").rglob("*.html"), *(ROOT / "ti_labextension" / "src").rglob("*.ts")]
    claims = [f"{p.relative_to(ROOT)}:{n}" for p in shown for n, line in enumerate(p.read_text().splitlines(), 1)
              if "horovod" in line.lower()]
    assert not claims, claims
