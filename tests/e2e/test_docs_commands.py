"""Every shell command in README.md and docs/*.md runs as written (issue 17, item 18).

The commands are read from the ```bash / ```sh blocks of the documents, in document order, and run against the
embedded platform: the walkthrough's `ti` commands in a real workspace ("dev-box", reached through the SSH
gateway, where `ti` is ready as the README says), from a checkout of this repository in the user's home
(`~/tihub`); `curl` from outside with `$HUB` and `$TOKEN` set (an admin's token in the admin guide). A command
that fails is retried for a while (a job it names may still be starting); one that never succeeds fails the
test with its output. What cannot run here is listed once, in EXEMPT, with the reason.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hubproc import own_hub

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("ssh"), reason="needs OpenSSH's client (scripts/test installs it)")]

try:
    importlib.import_module("torch")  # the walkthrough trains the DDP example
except Exception as e:  # noqa: BLE001 - a broken install is as good as none here
    pytest.skip(f"PyTorch is not importable ({type(e).__name__}: {e}); the README's walkthrough trains the DDP "
                "example (`pip install -e .[examples]`)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WS = "dev-box"

# the first words of a command -> why it is not run here (every other command is)
EXEMPT = {
    "python3 -m pip install": "installs TiHub; the tests run this checkout",
    "bash scripts/test": "runs this test suite",
    "ssh": "the reader's own terminal and host (HOST, port 8022); tests/e2e/test_ssh.py runs these logins, "
           "commands, port forwarding and job instances against the gateway",
    "scp": "the reader's own files and host; tests/e2e/test_ssh.py copies both ways",
    "kubectl": "needs a Kubernetes cluster (tests/k8s/ runs TiHub on a real control plane)",
    "helm": "needs a Kubernetes cluster (tests/k8s/test_helm_chart.py installs the chart)",
    "docker": "no Docker here: helm/images/ocibuild.py builds the same images (tests/k8s/test_chart_images.py)",
    "python3 helm/images/ocibuild.py": "builds the chart's images (minutes when cold); tests/k8s/test_chart_images.py "
                                       "builds, runs and pushes them",
    "tests/k8s/build-helm.sh": "builds helm from Go modules (minutes); tests/k8s/ uses it",
    "helm/fetch-deps.sh": "fetches the zero-to-jupyterhub chart; the chart tests use it",
    "python benchmarks/": "benchmarks take minutes each; docs/benchmarks.md records their runs",
    "ti-hub simulate": "reads trace files that are not in the repository (the Alibaba trace, the reader's jobs.csv); "
                       "tests/unit/test_sim_*.py run the simulator on small traces",
}
# documents whose commands an administrator runs (outside a workspace, with an admin's token)
ADMIN_DOCS = {"admin-guide.md", "kubernetes.md"}
RETRY_FOR = 120  # seconds a failing command is retried (a job it names may still be queued or starting)
RETRY_EVERY = 1.0  # seconds between tries: a try itself takes about a second (an SSH session and `ti`'s start)


@dataclass
class Command:
    doc: str
    line: int
    text: str

    @property
    def words(self) -> list[str]:
        return shlex.split(self.text, comments=True)

    def exempt(self) -> str | None:
        joined = " ".join(self.words)
        return next((why for head, why in EXEMPT.items() if joined == head or joined.startswith(
            head if head.endswith("/") else head + " ")), None)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


def commands(path: Path) -> list[Command]:
    """The commands of the shell blocks of one document, continuation lines joined."""
    out: list[Command] = []
    lang = None
    pending, start = "", 0
    for no, line in enumerate(path.read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            lang = None if lang is not None else fence.group(2) or ""
            continue
        if lang not in ("bash", "sh", "shell"):
            continue
        stripped = line.strip()
        if not pending:
            start = no
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = (pending + stripped).strip()
        if not closed(text):  # a quoted argument goes on on the next line
            pending = text + "\n"
            continue
        pending = ""
        if text and not text.startswith("#"):
            out.append(Command(path.relative_to(ROOT).as_posix(), start, text))
    return out


def closed(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def test_the_documents_have_commands_and_every_exemption_is_used():
    found = [c for doc in DOCS for c in commands(doc)]
    assert any(c.text.startswith("ti volume create") for c in found)  # the parser reads the README's blocks
    used = {head for c in found for head in EXEMPT if c.exempt() == EXEMPT[head]}
    assert used == set(EXEMPT), f"exemptions no document needs any more: {set(EXEMPT) - used}"


def run(argv: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command's outcome; one that outlives ``timeout`` is killed and counts as exit 124, with what it printed."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        said = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr)]
        return subprocess.CompletedProcess(argv, 124, said[0], said[1] + f"\n(killed after {timeout:g} s)")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A hub of its own: the documents' commands add images, users and quotas that other tests must not see.
    Its loop runs every 0.3 s (default 1 s): the commands wait for jobs that start and end."""
    yield from own_hub(tmp_path_factory, "docs", "c.TiService.scheduler_interval = 0.3\n")


@pytest.fixture(scope="module")
def reader(hub, tmp_path_factory):
    """A newcomer with a running workspace dev-box, a checkout in their home and an SSH key, as the docs assume."""
    tmp = tmp_path_factory.mktemp("docs")
    u = hub.person("reader")
    home = Path(hub.data_dir) / "workspaces" / "home" / u.name
    shutil.copytree(ROOT / "examples", home / "tihub" / "examples")
    (home / ".ssh").mkdir(parents=True)
    for key in (home / ".ssh" / "id_ed25519", tmp / "transport"):
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], 30).check_returncode()
    shutil.chown(home / ".ssh" / "id_ed25519.pub", user=home.stat().st_uid, group=home.stat().st_gid)
    u.transport = tmp / "transport"
    u.ok("POST", "/keys", json={"name": "test-transport", "key": (tmp / "transport.pub").read_text()})
    u.ok("POST", "/volumes", json={"name": "training-data", "kind": "filesystem", "capacity_gib": 1})
    r = u.hub_api("POST", f"/users/{u.name}/servers/{WS}", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    u.wait_server(WS)
    if hub.admin.hub_api("GET", "/users/alice").status_code == 404:  # the admin guide sets alice's quotas
        hub.signup("alice", "pw-alice-long-enough")
        hub.admin.authorize("alice")
    yield u
    # what the documents leave running (the endpoint example's server, the workspace) would hold CPUs
    for j in u.ok("GET", "/jobs?status=queued,scheduling,running&limit=500")["items"]:
        if j["kind"] != "workspace":
            u.api("POST", f"/jobs/{j['id']}/kill")
    u.hub_api("DELETE", f"/users/{u.name}/servers/{WS}")


def in_workspace(hub, u, text: str, timeout: float) -> subprocess.CompletedProcess:
    opts = ["-F", "/dev/null", "-i", str(u.transport), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "IdentityAgent=none", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20"]
    return run(["ssh", "-p", str(hub.ssh_port), *opts, f"{u.name}+{WS}@127.0.0.1",
                f"cd ~/tihub && set -o pipefail && {text}"], timeout)


def outside(hub, token: str, text: str, timeout: float) -> subprocess.CompletedProcess:
    """curl (and an admin's `ti`) from the reader's machine: $HUB and $TOKEN set; HUB in a URL is the hub."""
    env = {**os.environ, "HUB": hub.url, "TOKEN": token, "TI_API_URL": hub.api_url, "TI_TOKEN": token,
           "PYTHONPATH": str(ROOT)}
    env.pop("JUPYTERHUB_API_TOKEN", None)
    text = text.replace("http://HUB/", hub.url + "/")
    if text.startswith("curl "):
        text = "curl --fail-with-body -sS " + text[5:]  # an HTTP error is a failed command, as a reader sees it
    bindir = Path(env.get("TMPDIR", "/tmp")) / f"ti-docs-bin-{os.getpid()}"
    bindir.mkdir(exist_ok=True)
    (bindir / "ti").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ti_hub.cli.main \"$@\"\n")
    (bindir / "ti").chmod(0o755)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    return run(["bash", "-c", f"set -o pipefail && {text}"], timeout, env=env)


def test_every_documented_command_runs_as_written(hub, reader):
    ran, failures, spent = [], [], []
    for doc in DOCS:
        admin = doc.name in ADMIN_DOCS
        for c in commands(doc):
            if c.exempt():
                continue
            first = c.words[0]
            t0 = time.monotonic()
            deadline = t0 + RETRY_FOR
            tries, first_failure = 0, ""
            while True:
                tries += 1
                if first == "curl" or admin:
                    r = outside(hub, hub.admin.token if admin else reader.token, c.text, 120)
                else:
                    r = in_workspace(hub, reader, c.text, 420)
                if r.returncode == 0 or time.monotonic() > deadline:
                    break
                first_failure = first_failure or (r.stderr or r.stdout).strip()[-300:]
                time.sleep(RETRY_EVERY)
            ran.append(c)
            spent.append((time.monotonic() - t0, tries,
                          f"{c}" + (f"\n      first try: {first_failure}" if tries > 1 else "")))
            if r.returncode != 0:
                failures.append(f"{c}\n  exit {r.returncode}\n  stdout: {r.stdout[-3000:]}\n  stderr: {r.stderr[-3000:]}")
    print("\nslowest:\n" + "\n".join(f"{t:6.1f} s  {n} tries  {c}" for t, n, c in
                                      sorted(spent, key=lambda x: x[0], reverse=True)[:12]))
    assert not failures, "\n\n".join(failures)
    assert any(c.text.startswith("ti job submit --name ddp-demo") for c in ran)
    done = reader.ok("GET", "/jobs/ddp-demo")
    assert done["status"] == "completed", done


def test_the_hub_log_has_no_false_errors(hub, reader):
    """Issue 17, item 25: starting the platform and spawning a workspace log no errors that are none: no 404s of
    the API while the proxy does not route it yet, no "unhandled user_options" at each spawn."""
    log = (hub.data_dir.parent / f"{hub.data_dir.name}.log").read_text(errors="replace")
    assert "TiHub is ready at" in log and f"{reader.name}" in log
    noise = [line for line in log.splitlines()
             if re.search(r"404 GET /services/ti/api/v1/(openapi\.json|health)", line)
             or "unhandled user_options" in line]
    assert not noise, "\n".join(noise[:20])
