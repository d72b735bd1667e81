"""The OpenAPI document against the live API: schemathesis (pinned in the test extra) generates requests from
``/openapi.json`` -- valid ones, boundary values and invalid ones -- for every operation, as a normal user and as
an admin, and checks every answer: no server error, a status the document declares, JSON, a body that matches
the declared schema, invalid input refused, valid input accepted, no answer without authentication, and a 405
with an Allow header for every method a path does not declare (TRACE, QUERY, PUT, ... through the hub's proxy).

Valid input accepted (positive_data_acceptance): a request the document calls valid may be refused only for
what no schema can say, so only these statuses count as accepted (EXPECTED_ON_VALID_INPUT), never 400 or 422 --
each of those would be a rule the document does not state:
* 2xx: done;
* 403: a permission the caller lacks (the user's run meets every admin operation), or a quota;
* 404: an object the request names does not exist (a generated id or name, in the path or the body);
* 409: what exists now refuses it -- a name taken, a job in another state, a plan that does not fit this
  cluster, a built-in alert rule's fixed field, an option this platform lacks (RDMA).
The document's two formats that no pattern can say (an SSH public key, a user import CSV) get generators of
their own (fuzz_formats.py), so valid values of them are valid indeed.

Bounded and repeatable: deterministic generation (the same cases every run), one worker, no example database
(deterministic mode keeps none). The coverage phase (every boundary the document defines, every method a path
does not declare) is shared between the two runs by who decides each outcome (fuzz_formats.py): both send the
missing credentials and wrong content types, and undeclared methods (all in the user's run, one per path in the
admin's); the admin's run every valid value; the user's run the invalid ones. The fuzzing phase then sends a few
generated requests per operation (EXAMPLES). The service of this test's hub also checks each of its own answers
against the contract (``TiService.check_responses``), so a mismatch is a 500 that names it.

Nothing is excluded: no operation can end the test's own session (tokens are the hub's, not the API's), and
what a fuzzed request may break (an admin deleting a plan or an image, changing a quota) only makes later
requests answer 4xx. Half of the path parameters are the user's real objects (a finished job, a volume with a
share, a template, a key, a credential; schemathesis "dictionaries"), so operations reach existing resources and
not only 404. Jobs that the fuzzer submits run on the cheapest plan under a small quota (at most 2 CPU cores of
work per user and kind at once) and are killed at the end.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e
pytest.importorskip("schemathesis")

CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance", "negative_data_rejection", "ignored_auth", "positive_data_acceptance",
          "unsupported_method")
EXPECTED_ON_VALID_INPUT = ("2xx", "403", "404", "409")  # why each: the module's docstring
HOOKS = Path(__file__).with_name("fuzz_formats.py")
ROOT = Path(__file__).resolve().parents[2]
# generated requests per operation in the fuzzing phase (valid and invalid drawn in turn; the coverage phase's share:
# fuzz_formats.py): the user's run gets no valid values from its coverage phase, so a few more here
EXAMPLES = {"admin": 3, "user": 5}
ED25519 = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes(range(32))
                                            ).decode() + " fuzz@test"


@pytest.fixture(scope="module")
def fuzz_hub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "fuzzhub", "c.TiService.check_responses = True\n")


@pytest.fixture(scope="module")
def world(fuzz_hub):
    """A user with one of everything, small quotas for both fuzzing identities, and the jobs killed after."""
    hub, admin = fuzz_hub, fuzz_hub.admin
    u = hub.person("fuzz")
    for who in (u.name, admin.name):
        for kind in ("single", "distributed"):
            admin.ok("PUT", "/quotas", json={"user": who, "kind": kind, "device_type": "*", "devices": 1, "cpu": 2,
                                             "memory_mib": 8192})
    job = u.ok("POST", "/jobs", json={"name": "fuzz-done", "plan": "cpu-small", "image": "python-cpu",
                                      "command": "echo hello"})
    u.wait_job(job["id"])
    vol = u.ok("POST", "/volumes", json={"name": "fuzz-data", "kind": "filesystem", "capacity_gib": 1})
    share = u.ok("POST", f"/volumes/{vol['id']}/shares", json={"user": admin.name, "mode": "ro"})["shares"][0]
    tpl = u.ok("POST", "/templates", json={"name": "fuzz-tpl", "spec": {"plan": "cpu-small", "command": "true"}})
    key = u.ok("POST", "/keys", json={"name": "fuzz-key", "key": ED25519})
    cred = u.ok("POST", "/credentials", json={"name": "fuzz-cred", "registry": "registry.example.org",
                                               "username": "me", "password": "secret-password"})
    ids = [job["id"], vol["id"], tpl["id"], key["id"], cred["id"]]
    names = ["fuzz-done", "fuzz-data", "fuzz-tpl", "fuzz-key", "fuzz-cred"]
    yield {"user": u, "refs": sorted({*map(str, ids), *names}), "share_ids": [share["id"]],
           "users": [u.name, admin.name]}
    # the fuzzer may have disabled the user, which revokes their tokens for good: clean up as a fresh admin login
    clean = hub.login(admin.name, admin.password)

    def jobs_of_both() -> list[dict]:
        return [j for j in clean.ok("GET", "/jobs", params={"limit": "500", "all": "1"})["items"]
                if j["owner"] in (u.name, admin.name)]

    for j in jobs_of_both():
        if j["status"] in ("queued", "scheduling", "running", "pausing", "paused"):
            clean.api("POST", f"/jobs/{j['id']}/kill")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if not [j for j in jobs_of_both() if j["status"] in ("scheduling", "running", "pausing", "killing")]:
            break
        time.sleep(0.5)


def toml_list(values) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def run_schemathesis(hub, token: str, world: dict, out: Path, who: str) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    config = out / "schemathesis.toml"
    # a dictionary's entries must have the parameter's type: a number for a string parameter counts as invalid
    # input (it is the same text on the wire), so the objects' ids are given as strings, and bound only where a
    # path names such an object (/plans/{id} and /images/{id} take integers: not the user's objects)
    config.write_text(
        "[checks.positive_data_acceptance]\n"
        f"expected-statuses = {toml_list(EXPECTED_ON_VALID_INPUT)}\n"
        "[dictionaries.mine]\n"
        f"values = {toml_list(world['refs'])}\n"
        "[dictionaries.shares]\n"
        f"values = {toml_list(world['share_ids'])}\n"
        "[dictionaries.people]\n"
        f"values = {toml_list(world['users'])}\n"
        # the user's run sends only invalid values in the coverage phase (fuzz_formats.py): none to generate
        + ('[phases.coverage.generation]\nmode = "negative"\n' if who == "user" else "")
        + "[parameters]\n"
        '"path.owner" = { dictionary = "people", probability = 0.5 }\n'
        '"path.user" = { dictionary = "people", probability = 0.5 }\n'
        "[[operations]]\n"
        'include-path-regex = "^/volumes/\\\\{id\\\\}/shares/\\\\{share_id\\\\}$"\n'
        'parameters = { "path.id" = { dictionary = "mine", probability = 0.5 }, '
        '"path.share_id" = { dictionary = "shares", probability = 0.5 } }\n'
        "[[operations]]\n"
        'include-path-regex = "^/(jobs|volumes|templates|keys|credentials)/\\\\{id\\\\}"\n'
        'parameters = { "path.id" = { dictionary = "mine", probability = 0.5 } }\n')
    cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color", "run",
           hub.api_url + "/openapi.json", "-H", f"Authorization: token {token}", "--checks", ",".join(CHECKS),
           "--phases", "examples,coverage,fuzzing", "--max-examples", str(EXAMPLES[who]), "--generation-deterministic", "--workers", "1",
           "--request-timeout", "60", "--report", "junit", "--report-dir", str(out)]
    # the hooks import ti_hub: this checkout's, as the hub under test runs it (tests/hubproc.py), never an install's
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS), "FUZZ_AS": who,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=out, env=env)


def check_run(hub, token: str, world: dict, out: Path, who: str) -> None:
    started = time.monotonic()
    r = run_schemathesis(hub, token, world, out, who)
    took = time.monotonic() - started
    (out / "output.txt").write_text(r.stdout + r.stderr)
    tail = "\n".join(r.stdout.splitlines()[-150:])
    assert r.returncode == 0, f"schemathesis found failures ({took:.0f} s):\n{tail}\n{r.stderr[-3000:]}"
    assert "0 failures" in r.stdout or " passed" in r.stdout, tail
    print(f"schemathesis: {took:.0f} s; {[line for line in r.stdout.splitlines() if 'generated' in line]}")


def test_the_api_matches_its_document_for_a_user(fuzz_hub, world, tmp_path):
    check_run(fuzz_hub, world["user"].token, world, tmp_path / "user", "user")


def test_the_api_matches_its_document_for_an_admin(fuzz_hub, world, tmp_path):
    check_run(fuzz_hub, fuzz_hub.admin.token, world, tmp_path / "admin", "admin")
