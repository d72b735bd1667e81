"""`ti-hub help-config` prints every setting TiHub defines (issue 31, "said 1"): every configurable class of ti_hub is
listed (found by walking the package, not by trusting the registry), and every `Class.setting` the docs name is
printed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets.config import Configurable

import ti_hub
from ti_hub.launcher import confighelp

ROOT = Path(__file__).resolve().parents[2]
# modules that are not importable on their own, and why: they hold no classes
NOT_MODULES = {
    "ti_hub.launcher.default_config": "a config file, executed by JupyterHub with `c` defined",
    "ti_hub.db.migrations": "alembic's scripts, run by alembic",
    # old paths kept for configs (issue 32): importing them warns, and their classes are ti_hub.hub's
    "ti_hub.hub_config": "a deprecated shim of ti_hub.hub.config",
    "ti_hub.auth": "a deprecated shim of ti_hub.hub.auth",
    "ti_hub.oauth": "a deprecated shim of ti_hub.hub.oauth",
}


def tihub_modules() -> list[str]:
    names = []
    for m in pkgutil.walk_packages(ti_hub.__path__, "ti_hub."):
        if m.name.rsplit(".", 1)[-1] == "__main__" or any(m.name == n or m.name.startswith(n + ".")
                                                          for n in NOT_MODULES):
            continue
        names.append(m.name)
    return names


def configurables() -> dict[str, type[Configurable]]:
    """module:Class -> class, for every class ti_hub defines with at least one setting."""
    found = {}
    for name in tihub_modules():
        module = importlib.import_module(name)  # an import error fails the test: it would hide classes
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (cls.__module__ == name and issubclass(cls, Configurable) and cls.class_traits(config=True)):
                found[f"{name}:{cls.__name__}"] = cls
    return found


@pytest.fixture(scope="module")
def printed() -> str:
    """What the command prints, run as users run it."""
    out = subprocess.run([sys.executable, "-m", "ti_hub.launcher.app", "help-config"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def printed_all() -> str:
    return confighelp.render(everything=True)


def shown(text: str, cls: str, trait: str) -> bool:
    return re.search(rf"^--{cls}\.{trait}[= ]", text, re.M) is not None


def test_every_configurable_class_of_ti_hub_is_printed(printed):
    found = configurables()
    assert len(found) > 20
    listed = {e.path for e in confighelp.entries()}
    missing = sorted(set(found) - listed - set(confighelp.INTERNAL))
    assert not missing, f"add these to ti_hub/launcher/confighelp.py (SECTIONS, or INTERNAL with a reason): {missing}"
    stale = sorted((listed | set(confighelp.INTERNAL)) - set(found))
    assert not stale, f"listed in ti_hub/launcher/confighelp.py but no configurable class with settings: {stale}"
    for e in confighelp.entries():
        assert re.search(rf"^{e.name}\(.*\) options$", printed, re.M), e.name
    # the internal ones are TiHub's own wiring, never printed as settings
    for path in confighelp.INTERNAL:
        assert f"\n{path.rsplit(':', 1)[1]}(" not in printed


def test_every_setting_tihub_defines_is_printed_with_its_help_and_default(printed, printed_all):
    for e in confighelp.entries():
        cls = e.load()
        for name, trait in cls.class_traits(config=True).items():
            assert shown(printed_all, e.name, name), f"--all lacks {e.name}.{name}"
            if confighelp.is_tihubs(cls, name):
                assert shown(printed, e.name, name), f"help-config lacks {e.name}.{name}"
                assert trait.help, f"{e.name}.{name} has no help string"
    # one in full: its help and default follow its name
    block = printed.split("--TiService.db_url=<Unicode>\n", 1)[1].split("\n--", 1)[0]
    assert "SQLAlchemy URL" in block and "Default: ''" in block
    # and inherited options are announced, listed with --all
    assert "inherited option(s) of KubeSpawner" in printed and shown(printed_all, "TiKubeSpawner", "image_pull_policy")


def test_sections_group_the_classes(printed):
    headings = [h for h, _, _ in confighelp.SECTIONS]
    assert {"Service", "Embedded platform", "Kubernetes", "SSH"} <= set(headings)
    at = [printed.index("\n" + h.upper() + "\n") for h in headings]
    assert at == sorted(at)
    kube = printed[printed.index("\nKUBERNETES\n"):printed.index("\nSSH\n")]
    assert all(f"\n{c}(" in kube for c in ("KubernetesBackend", "KubernetesVolumeDriver", "TiKubeSpawner"))


def test_classes_can_be_chosen_and_unknown_ones_are_named():
    out = confighelp.render(["Notifier"])
    assert "--Notifier.smtp_host=" in out and "--TiService." not in out and "\nSERVICE\n" in out
    with pytest.raises(ValueError, match="unknown class.*NoSuch"):
        confighelp.render(["NoSuch"])
    cli = subprocess.run([sys.executable, "-m", "ti_hub.launcher.app", "help-config", "NoSuch"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert cli.returncode == 2 and "unknown class(es) NoSuch" in cli.stderr


DOCS = [ROOT / "README.md", ROOT / "jupyterhub_config.py", *sorted((ROOT / "docs").glob("*.md"))]
# settings that are gone, which the docs still name to say what replaced them
RETIRED = {("TiService", "wait_alert_grace"): "the alert rule job-wait"}


def doc_mentions() -> list[tuple[str, str, str]]:
    """(where, Class, name) for every `Class.name` (or `c.Class.name`) the docs write, for TiHub's classes."""
    known = {e.name for e in confighelp.entries()}
    out = []
    for path in DOCS:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"\b([A-Z][A-Za-z0-9]+)\.([a-z_][a-z0-9_]*)\b", line):
                if m[1] in known:
                    out.append((f"{path.relative_to(ROOT)}:{n}", m[1], m[2]))
    return out


def test_every_setting_the_docs_name_is_printed(printed, printed_all):
    classes = {e.name: e.load() for e in confighelp.entries()}
    mentions = doc_mentions()
    assert len(mentions) > 100
    wrong = []
    for where, cls_name, name in mentions:
        cls = classes[cls_name]
        if name in cls.class_traits(config=True):
            text = printed if confighelp.is_tihubs(cls, name) else printed_all
            if not shown(text, cls_name, name):
                wrong.append(f"{where}: {cls_name}.{name} is not printed")
        # a method or attribute is code, not a setting; nothing at all is a typo (or a setting that is gone)
        elif not hasattr(cls, name) and (cls_name, name) not in RETIRED:
            wrong.append(f"{where}: {cls_name}.{name} is no setting (nor anything else) of {cls_name}")
    assert not wrong, "\n".join(wrong)
