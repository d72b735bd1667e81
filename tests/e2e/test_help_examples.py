"""Every example of every `--help` runs as written (issue 31, item 2): `ti` (user and admin commands) and `ti-hub`.

The examples are read from the help of every command and subcommand (each parser's "examples:" section, "Example:"
lines, and any line starting with "ti "), joined where a line ends in a backslash. PLAN runs them in an order that
works, as the user or the admin they are for, in a shell (pipes, `&&`, redirections as written), against one hub
whose fixture world has the objects they name (made through the API by the steps between them). An example that
PLAN does not know fails the test, and so does a PLAN or SKIP entry no help has any more: nothing is skipped
silently. Follow examples (`ti job logs mnist -f`, `ti job wait`) run against a job that has ended, so they return.
Prompts (passwords, "are you sure") are answered on a pseudo-terminal.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-examples-long-enough"
NODE = "host1"  # the embedded machine's node name: the one the vc examples assign devices of


# -- the examples -------------------------------------------------------------------------------------------------
def _parsers(p: argparse.ArgumentParser):
    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                yield from _parsers(sp)


def examples_in(text: str, head: str) -> list[str]:
    """The example command lines of one help text (``head``: the program's name)."""
    found, pending, section, indent = [], "", False, 0
    for line in text.splitlines():
        s, depth = line.strip(), len(line) - len(line.lstrip())
        if pending:
            pending += " " + s
            if not pending.endswith("\\"):
                found.append(pending)
                pending = ""
            else:
                pending = pending[:-1].rstrip()
            continue
        if s.lower() == "examples:":
            section, indent = True, depth
            continue
        if section and s and depth > indent:
            cand = s
        elif s.startswith("Example: "):
            section, cand = False, s[len("Example: "):]
        elif s.startswith(head + " "):
            section, cand = False, s
        else:
            section = False
            continue
        if cand.endswith("\\"):
            pending = cand[:-1].rstrip()
        else:
            found.append(cand)
    return found


def all_examples() -> list[str]:
    from ti_hub.launcher import app
    from ti_hub.cli import main as cli

    out: list[str] = []
    for parser, head in ((cli.build_parser(), "ti"), (app.build_parser(), "ti-hub")):
        for p in _parsers(parser):
            out += [e for e in examples_in(p.format_help(), head) if e not in out]
    return out


# the examples that cannot run here, with why (the test checks that each one is still in a help)
SKIP = {
    "ti login --url http://127.0.0.1:8000 --token TOKEN": "placeholder token (TOKEN) for a hub on port 8000; "
        "`ti login` against the test hub runs in tests/unit/test_cli.py",
    "ti login --url http://127.0.0.1:8000 --token 0123abcd...": "placeholder token for a hub on port 8000",
    "ti login --url https://hub.example.com --token-stdin < token.txt": "placeholder host (hub.example.com)",
    "ti job submit ... --volume data:/mnt/data:ro -- python train.py": "`...` stands for the rest of a submission",
    "ti job submit --image registry.example.com/me/train:1 --credential my-registry ...":
        "`...` stands for the rest of a submission, and the image is on a placeholder registry",
    "$(ti ssh-command dev-box) nvidia-smi": "runs nvidia-smi in a workspace: no NVIDIA driver here; "
        "tests/e2e/test_ssh.py runs commands through the gateway",
    "ti vc assign team-a --node gpu-node-7   # Kubernetes: the whole node": "Kubernetes only (whole nodes); "
        "tests/k8s/ assigns nodes",
    "ti-hub start --admin admin --data-dir ~/.local/share/ti-hub": "starts a platform on port 8000 in the "
        "tester's home; every e2e test starts hubs with `ti-hub start` (tests/hubproc.py)",
    "ti-hub stop --data-dir ~/.local/share/ti-hub": "would stop a platform in the tester's home; "
        "tests/e2e/test_crash.py runs `ti-hub stop` against a hub of its own",
    "ti-hub simulate ../shared/data/alibaba-gpu-2023/openb_pod_list_default.csv --out sim-out":
        "the Alibaba trace is not in the repository and replays for minutes; tests/unit/test_sim_alibaba.py "
        "reads a slice of it",
}


# examples that only read the platform (lists, shows, logs, waits; a redirect writes a file of their own): a run
# of them between two steps that change something sees one state in any order, so they run READERS at a time
READS = re.compile(r"""^ti\ (
      (admin\ )?(user|job|volume|template|image|credential|key|vc|role|group|alert|plan|queue|alert-rule|machine)
        \ (list|show|ls|grants)\b
    | job\ (metrics|logs|wait)\b | queue\ (scores|panel)\b | queue(\ +-|\ *$)
    | cluster\b | me\b | quota\b | account\ show\b | ssh-command\b | admin\ (audit|jobs)\b
)""", re.X)
READERS = int(os.environ.get("TI_EXAMPLES_READERS", "4"))  # 1: one at a time, as before (to compare)


def reads_only(ex: "Ex") -> bool:
    return ex.tty is None and bool(READS.match(ex.text))


# -- the fixture world --------------------------------------------------------------------------------------------
@dataclass
class Ex:
    """One example: who runs it, what a prompt is answered (on a terminal), and a light check of its effect."""
    text: str
    who: str = "alice"
    tty: str | None = None
    check: Callable[[Any, subprocess.CompletedProcess], Any] | None = None


class World:
    def __init__(self, hub, tmp: Path):
        self.hub, self.tmp = hub, tmp
        self.home, self.cwd, self.bin = tmp / "home", tmp / "cwd", tmp / "bin"
        for d in (self.home / ".ssh", self.cwd, self.bin):
            d.mkdir(parents=True)
        self.sessions = {"admin": hub.admin}
        self.ids: dict[str, int] = {}
        self.ran: list[str] = []

    # people
    def login(self, name: str, password: str = PASSWORD) -> None:
        self.sessions[name] = self.hub.login(name, password)

    def api(self, who: str, method: str, path: str, **kw) -> Any:
        return self.sessions[who].ok(method, path, **kw)

    def job(self, who: str, ref: Any) -> dict:
        return self.api(who, "GET", f"/jobs/{ref}")

    def wait(self, who: str, ref: Any, *states: str, timeout: float = 60) -> dict:
        return self.sessions[who].wait_job(ref, states=states, timeout=timeout)

    def release(self, who: str, flag: str) -> None:
        """Let a gated job (``gated``) go on: its flag file in the owner's home."""
        home = Path(self.hub.data_dir) / "workspaces" / "home" / who
        home.mkdir(parents=True, exist_ok=True)
        (home / flag).write_text("go\n")

    def unrelease(self, who: str, flag: str) -> None:
        (Path(self.hub.data_dir) / "workspaces" / "home" / who / flag).unlink(missing_ok=True)

    def run(self, ex: Ex) -> subprocess.CompletedProcess:
        s = self.sessions[ex.who]
        env = {"PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(self.home),
               "TI_API_URL": self.hub.url, "TI_TOKEN": s.token, "TI_CONFIG": str(self.home / ".config/ti/config.json"),
               "PYTHONPATH": str(ROOT), "PASSWORD": PASSWORD, "LANG": "C.UTF-8", "COLUMNS": "200"}
        if "inside the workspace" in ex.text:  # what the hub sets in every server
            env.update(JUPYTERHUB_USER=s.name, JUPYTERHUB_SERVER_NAME="my-desk")
        argv = ["bash", "-c", f"set -o pipefail\n{ex.text}"]
        if ex.tty is not None:
            return on_terminal(argv, self.cwd, env, ex.tty.splitlines())
        try:
            return subprocess.run(argv, cwd=self.cwd, env=env, input="", capture_output=True, text=True,
                                  timeout=90)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(argv, 124, str(e.stdout or ""), f"{e.stderr or ''}\n(timed out)")


def on_terminal(argv: list[str], cwd: Path, env: dict, answers: list[str],
                timeout: float = 90) -> subprocess.CompletedProcess:
    """Run ``argv`` on a pseudo-terminal of its own, typing the next answer at each prompt (text ending in ": " or
    "] "): a password prompt flushes what was typed before it, so answers cannot be piped in advance."""
    import fcntl
    import select
    import termios

    master, slave = os.openpty()

    def controlling_tty():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, preexec_fn=controlling_tty)
    os.close(slave)
    said, since, answers = b"", b"", list(answers)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's last user is gone
                break
            if not chunk:
                break
            said, since = said + chunk, since + chunk
        if answers and (since.endswith(b": ") or since.endswith(b"] ")):
            os.write(master, answers.pop(0).encode() + b"\n")
            since = b""
    try:
        code = proc.wait(max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        code = 124
    os.close(master)
    return subprocess.CompletedProcess(argv, code, said.decode(errors="replace"), "")


def gated(name: str, flag: str, **kw) -> dict:
    """A job that runs until the test puts ``flag`` in its owner's home, then completes. A SIGTERM ends it at once,
    unless ``hold`` is in the home too (then the stop waits its grace: the job stays `killing`)."""
    cmd = (f"trap 'test -e $HOME/hold || exit 143' TERM; echo started; "
           f"while [ ! -e $HOME/{flag} ]; do sleep 0.2; done; echo trained")
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": cmd, **kw}


def filler_jobs_until(w: World, target: int) -> None:
    """Drafts of a filler user until the next job gets id ``target`` (the examples name jobs 40 and 42)."""
    if "filler" not in w.sessions:
        w.sessions["filler"] = w.hub.person("filler")
    while True:
        j = w.api("filler", "POST", "/jobs", json={"name": f"filler-{time.monotonic_ns()}", "plan": "cpu-small",
                                                    "image": "python-cpu", "command": "true", "draft": True})
        assert j["id"] < target, f"job ids already past {target}: move the queue examples earlier"
        if j["id"] == target - 1:
            return


def share_with_id(w: World, vol: int, target: int) -> None:
    """A share of alice's volume with id ``target`` (the example unshares share 7): shares to carol and dave in
    turn, each deleted once the next exists (an id is never reused below the newest)."""
    live: dict | None = None
    for turn in range(100):
        answer = w.api("alice", "POST", f"/volumes/{vol}/shares",
                       json={"user": ("carol", "dave")[turn % 2], "mode": "ro"})
        share = max(answer["shares"], key=lambda s: s["id"])  # the answer is the volume
        assert share["id"] <= target, f"share ids already past {target}"
        if live:
            w.api("alice", "DELETE", f"/volumes/{vol}/shares/{live['id']}")
        if share["id"] == target:
            return
        live = share
    raise AssertionError("no share id reached")


def alert_with_id(w: World, target: int) -> None:
    """Support requests about alice's job until an alert with id ``target`` exists (the example answers 12)."""
    import re

    for _ in range(2 * target):
        r = w.sessions["alice"].api("POST", f"/jobs/{w.ids['mnist']}/support", json={"message": "filler request"})
        waiting = re.search(r"\(alert (\d+)\) waits for an answer", r.text)
        if waiting:  # one open request per job: answer it, then ask again
            w.api("admin", "POST", f"/alerts/{waiting.group(1)}/answer", json={"answer": "filler answer"})
            continue
        assert r.status_code == 201, r.text
        if r.json()["id"] >= target:
            return
    raise AssertionError(f"no alert {target}")


def wait_volume(w: World, who: str, vid: int) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        v = w.api(who, "GET", f"/volumes/{vid}")
        if v.get("status") not in ("creating", "pending", "copying"):
            return v
        time.sleep(0.3)
    raise TimeoutError(f"volume {vid} still {v.get('status')}")


def volume_id(w: World, who: str, name: str) -> int:
    return next(v["id"] for v in w.api(who, "GET", "/volumes?limit=500")["items"] if v["name"] == name)


def ok_text(*words: str):
    def check(w, r):
        for word in words:
            assert word in r.stdout + r.stderr, (word, r.stdout, r.stderr)
    return check


# -- the order ----------------------------------------------------------------------------------------------------
def setup_people(w: World):
    w.api("admin", "POST", "/groups", json={"name": "team-a"})


def relogin_alice(w: World):
    w.login("alice")


def people_csv(w: World):
    (w.cwd / "people.csv").write_text(f"name,password,nickname,email,phone,groups\n"
                                      f"carol,{PASSWORD},Carol,carol@example.org,,team-a\n"
                                      f"dave,{PASSWORD},Dave,,,\n")


def delete_carol_dave(w: World):
    for n in ("carol", "dave"):
        w.api("admin", "DELETE", f"/users/{n}")


def world(w: World):
    """Objects the examples name: groups lab and interns (alice in lab), alice's volume data, jobs and templates."""
    for g, users in (("lab", ["alice"]), ("interns", ["carol"])):
        w.api("admin", "POST", "/groups", json={"name": g, "users": users})
    for n in ("bob", "carol", "dave"):
        w.login(n)
    w.api("alice", "POST", "/templates", json={"name": "my-template", "scope": "user", "spec": {
        "plan": "cpu-small", "image": "python-cpu", "command": "echo trained"}})
    w.api("alice", "POST", "/jobs", json={"name": "mnist-ddp", "kind": "distributed", "workers": 2,
                                          "plan": "cpu-small", "image": "python-cpu", "command": "true",
                                          "draft": True})
    w.api("alice", "POST", "/jobs", json={"name": "mnist-draft", "plan": "cpu-small", "image": "python-cpu",
                                          "command": "true", "draft": True})
    out = w.api("alice", "POST", "/volumes", json={"name": "outputs", "kind": "filesystem", "capacity_gib": 1})
    wait_volume(w, "alice", out["id"])
    mnist = w.api("alice", "POST", "/jobs", json=gated("mnist", "mnist-done", endpoints=["tensorboard"], draft=True,
                                                        volumes=[{"volume": "outputs", "mount_path": "/mnt/out"}]))
    w.ids["mnist"] = mnist["id"]
    notebook = w.api("alice", "POST", "/jobs", json=gated("notebook", "notebook-done"))
    w.ids["notebook"] = notebook["id"]
    (w.cwd / "spec.json").write_text('{"plan": "cpu-small", "image": "python-cpu", "command": "echo trained"}\n')
    (w.cwd / "token.txt").write_text("registry-token\n")
    key = w.home / ".ssh" / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    rsa = w.cwd / "id_rsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(rsa)], check=True)
    (w.cwd / "jobs.csv").write_text("submit_s,duration_s,user,device_type,devices\n"
                                    "0,100,heavy,a100,1\n1,100,heavy,a100,1\n3,100,light,a100,1\n")
    (w.cwd / "nodes.csv").write_text("name,pool,device_type,devices,cpu,memory_mib\nn1,default,a100,1,16,65536\n")


def queued_40_42(w: World):
    """Jobs 40 (queued) and 42 (a draft) of alice's, held in the queue: the machine is cordoned."""
    w.api("admin", "POST", f"/machines/{NODE}/cordon", json={"reason": "examples: hold the queue"})
    filler_jobs_until(w, 40)
    assert w.api("alice", "POST", "/jobs", json=gated("forty", "forty-done"))["id"] == 40
    filler_jobs_until(w, 42)
    assert w.api("alice", "POST", "/jobs", json=gated("forty-two", "42-done", draft=True))["id"] == 42


def uncordon_42_runs(w: World):
    w.api("admin", "POST", f"/machines/{NODE}/uncordon")
    w.wait("alice", 42, "running")


def requeue(ref: Any, who: str = "alice"):
    def step(w: World):
        w.api("admin", "POST", f"/jobs/{w.ids.get(ref, ref)}/requeue")
        w.wait(who, w.ids.get(ref, ref), "running")
    step.__name__ = f"requeue_{ref}"
    return step


def wait_for(ref: Any, *states: str, who: str = "alice"):
    def step(w: World):
        w.wait(who, w.ids.get(ref, ref), *states)
    step.__name__ = f"wait_{ref}_{'_'.join(states)}"
    return step


def hold_on(w: World):
    w.release("alice", "hold")


def hold_off(w: World):
    w.unrelease("alice", "hold")
    w.release("alice", "42-done")
    w.release("alice", "forty-done")


def finish_mnist(w: World):
    w.release("alice", "mnist-done")


def scratch(w: World):
    w.api("alice", "POST", "/volumes", json={"name": "scratch", "kind": "filesystem", "capacity_gib": 1})


def delete_data(w: World):
    w.api("alice", "DELETE", f"/volumes/{volume_id(w, 'alice', 'data')}")


def models_dir(w: World):
    """A folder in alice's volume data (the example lists models/), made by a job of hers."""
    j = w.api("alice", "POST", "/jobs", json={"name": "make-models", "plan": "cpu-small", "image": "python-cpu",
                                              "command": "mkdir -p /mnt/data/models",
                                              "volumes": [{"volume": "data", "mount_path": "/mnt/data"}]})
    assert w.wait("alice", j["id"], "completed", "failed", "error", timeout=90)["status"] == "completed"


def share_7(w: World):
    share_with_id(w, volume_id(w, "alice", "data"), 7)


def alert_12(w: World):
    alert_with_id(w, 12)


def delete_ci(w: World):
    cid = next(c["id"] for c in w.api("alice", "GET", "/credentials")["items"] if c["name"] == "ci-bot")
    w.api("alice", "DELETE", f"/credentials/{cid}")


def new_submitter(w: World):
    """Each `ti job submit --name mnist` example is a different user's (a name is taken for good by its job)."""
    w.sessions["submitter"] = w.hub.person("submitter")


def vc_team_a(w: World):
    w.api("admin", "POST", "/vcs", json={"name": "team-a", "caps": {"demo-gpu": 1}})


def grant_alice_team_a(w: World):
    w.api("admin", "POST", "/vcs/team-a/access", json={"user": "alice"})


def empty_team_a(w: World):
    """The devices the examples assigned go back (a VC with machines is not deleted)."""
    w.api("admin", "POST", "/vcs/team-a/machines", json={"node": NODE, "device_type": "demo-gpu", "devices": [0],
                                                         "remove": True})


def rename_back(kind: str):
    def step(w: World):
        w.api("admin", "PATCH", f"/{kind}/team-alpha", json={"name": "team-a"})
    step.__name__ = f"rename_back_{kind}"
    return step



def workspace_my_desk(w: World):
    s = w.sessions["alice"]
    r = s.hub_api("POST", "/users/alice/servers/my-desk", json={"plan": "demo-gpu-1"})
    assert r.status_code in (201, 202), r.text
    s.wait_server("my-desk")


def stop_my_desk(w: World):
    s = w.sessions["alice"]
    s.hub_api("DELETE", "/users/alice/servers/my-desk")
    s.wait_server("my-desk", ready=False)


def uncordon_gpu_node_3(w: World):
    w.api("admin", "POST", "/machines/host1/uncordon")


A, U = "admin", "alice"
PLAN: list[Ex | Callable[[World], Any]] = [
    # people first: alice is the user of most examples
    setup_people,
    Ex("ti user create alice --email alice@example.org --group team-a", A, tty=f"{PASSWORD}\n{PASSWORD}\n"),
    Ex("ti user delete alice", A),
    Ex("ti user create alice --nickname Alice --email alice@example.org --group team-a", A,
       tty=f"{PASSWORD}\n{PASSWORD}\n", check=ok_text("created user alice")),
    relogin_alice,
    Ex('echo "$PASSWORD" | ti user create bob --password-stdin', A),
    people_csv,
    Ex("ti user import people.csv", A, check=ok_text("created 2 user(s)")),
    delete_carol_dave,
    Ex("ti user import - < people.csv", A),
    world,
    Ex("ti user list", A), Ex("ti user list --json", A), Ex("ti user show alice", A),
    Ex("ti user change alice --nickname Al --phone '+1 555 0100'", A),
    # the queue: jobs 40 and 42 held by a cordon, then 42 through every state
    queued_40_42,
    Ex("ti job start 42", check=lambda w, r: w.job("alice", 42)["status"] == "queued"),
    Ex("ti job show 42 --json"),
    Ex("ti queue move 42 --top"), Ex("ti queue move 42 --before 40"),
    Ex("ti queue pin 42", A), Ex("ti queue unpin 42", A), Ex("ti queue pin 42            # admins", A),
    Ex("ti queue priority 42 500", A), Ex("ti queue priority 42 500  # admins", A),
    Ex("ti queue"), Ex("ti queue --all --json"), Ex("ti queue list --all"), Ex("ti queue scores"),
    Ex("ti queue scores --all"), Ex("ti queue scores --all --device-type A100"), Ex("ti queue panel"),
    Ex("ti queue panel --json"),
    Ex("ti queue cancel 42"), wait_for(42, "killed"),
    Ex("ti admin job requeue 42", A),
    uncordon_42_runs,
    Ex("ti job pause 42"), wait_for(42, "paused"), Ex("ti job resume 42"), wait_for(42, "running"),
    Ex("ti job kill 42"), wait_for(42, "killed"), requeue(42),
    Ex("ti job stop 42"), wait_for(42, "stopped"), requeue(42),
    hold_on, Ex("ti admin job stop 42", A), wait_for(42, "killing"), Ex("ti admin job reset 42", A), hold_off,
    Ex("ti job wait 42 --timeout 2h || echo 'not completed'"),
    # alice's mnist: a draft started, then every action on it
    Ex("ti job start mnist", check=lambda w, r: w.wait("alice", w.ids["mnist"], "running")),
    Ex("ti job ssh mnist --on"), Ex("ti job ssh mnist --off"),
    Ex("ti job show mnist"), Ex("ti job metrics mnist"), Ex("ti job logs mnist"),
    Ex("ti job logs mnist --raw > mnist.log"),
    Ex("ti job tensorboard mnist --logdir /mnt/out/tb"), Ex("ti job tensorboard mnist"),
    Ex("ti job tensorboard mnist --stop"), Ex("ti job port mnist 40002"),
    Ex("ti job pause mnist"), wait_for("mnist", "paused"), Ex("ti job resume mnist"), wait_for("mnist", "running"),
    Ex("ti job kill mnist"), wait_for("mnist", "killed"),
    Ex('ti job support mnist -m "it fails with CUDA out of memory on every node"'),
    alert_12, Ex('ti alert answer 12 -m "the node ran out of memory: use plan gpu-large"', A),
    requeue("mnist"),
    Ex("ti job stop mnist"), wait_for("mnist", "stopped"), requeue("mnist"),
    Ex("ti job clone mnist --name mnist-2"),
    finish_mnist,
    Ex("ti job wait mnist"), Ex("ti job wait mnist && echo done", check=ok_text("done")),
    Ex("ti job logs mnist -f", check=ok_text("trained")),
    Ex("ti job delete mnist-draft"),
    Ex("ti admin job kill alice/notebook", A), wait_for("notebook", "killed"), requeue("notebook"),
    Ex("ti admin job stop alice/notebook", A),
    # volumes
    Ex("ti volume create data --kind filesystem --size 100"),
    delete_data,
    Ex("ti volume create data --kind filesystem --size 100 --description 'ImageNet'"),
    Ex("ti volume create data-v1 --kind dataset --size 100 --source data"),
    Ex("ti volume create data-v2 --kind dataset --size 100 --source data --no-wait --json"),
    Ex("ti volume list"), Ex("ti volume list --json"), Ex("ti volume show data"), Ex("ti volume show alice/data"),
    Ex("ti volume expand data --size 200"),
    models_dir, Ex("ti volume ls data"), Ex("ti volume ls data models/"),
    share_7,
    Ex("ti volume share data --user bob"), Ex("ti volume share data --group lab --mode ro"),
    Ex("ti volume share data --group lab --mode rw"),
    Ex("ti volume unshare data --user bob"), Ex("ti volume unshare data --share-id 7"),
    scratch, Ex("ti volume delete scratch", tty="y\n"), scratch, Ex("ti volume delete scratch --yes"),
    # jobs submitted by the examples
    new_submitter,
    Ex("ti job submit --name mnist --plan demo-gpu-1 --image pytorch-gpu -- python train.py --epochs 3", "submitter"),
    new_submitter,
    Ex("ti job submit --name mnist --plan demo-gpu-1 --image pytorch-gpu -- python train.py", "submitter"),
    new_submitter,
    Ex("ti job submit --name mnist --plan demo-gpu-1 --image pytorch-gpu -- python train.py --lr 0.1", "submitter"),
    Ex("ti job submit --name ddp-train --kind distributed --workers 2 --plan demo-gpu-1 --image pytorch-gpu "
       "--volume data:/mnt/data:ro --env EPOCHS=3 --port 40001 --endpoint tensorboard -- torchrun train.py"),
    Ex("ti job submit --from-file spec.json --name run-7 --wait"),
    Ex("ti job submit --template my-template --name run-8 -f", check=ok_text("trained")),
    Ex("ti job submit --name long --plan cpu-small --image python-cpu --estimated-duration 2h --preemptible "
       "-- ./run.sh"),
    Ex("WANDB_API_KEY=... ti job submit --name logged --plan cpu-small --image python-cpu --secret-env "
       "WANDB_API_KEY -- python train.py"),
    Ex("ti template save ddp-base --scope user --from-job mnist-ddp"),
    Ex("ti job submit --template ddp-base --name run-9 -- python train.py"),
    Ex("ti template save lab-default --scope team --group lab --from-file spec.json"),
    Ex("ti template list"), Ex("ti template show ddp-base"), Ex("ti template delete ddp-base"),
    Ex("ti job list"), Ex("ti job list --status running"), Ex("ti job list --status queued,running --kind distributed"),
    Ex("ti job list --all --limit 200"), Ex("ti job list --json | jq '.[].name'", check=ok_text('"mnist"')),
    Ex("ti job logs ddp-train --instance 1 --tail 100"), Ex("ti job metrics ddp-train --json"),
    Ex("ti quota"), Ex("ti plan list"), Ex("ti plan list --kind distributed"), Ex("ti plan list --kind single --json"),
    # images, credentials, keys, account
    Ex("ti image list"), Ex("ti image list --json"),
    Ex("ti image add pytorch --address pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime --accelerator gpu", A),
    Ex("ti image delete pytorch", A),
    Ex("ti image add pytorch --address docker.io/pytorch/pytorch:2.3.0 --accelerator gpu", A),
    Ex("ti credential add my-registry --registry registry.example.com --username alice", tty=f"{PASSWORD}\n"),
    Ex('echo "$PASSWORD" | ti credential add ci-bot --registry ghcr.io --username bot --password-stdin'),
    delete_ci,
    Ex("ti credential add ci-bot --registry ghcr.io --username bot --password-stdin < token.txt"),
    Ex("ti credential list"), Ex("ti credential delete my-registry"),
    Ex("ti key add laptop --file ~/.ssh/id_ed25519.pub"), Ex("cat id_rsa.pub | ti key add desktop"),
    Ex("ti key list"), Ex("ti key delete laptop"),
    Ex("ti me"), Ex("ti me --json"), Ex("ti logout"),
    Ex("ti account show"), Ex("ti account show --json"), Ex("ti account set --email me@example.org"),
    Ex("ti account set --email me@example.org --nickname Ada --phone '+1 555 0100'"),
    Ex("ti account set --phone ''"),
    # workspaces and ssh
    workspace_my_desk,
    Ex("ti workspace renew my-desk"), Ex("ti workspace renew            # inside the workspace"),
    Ex("ti workspace renew my-desk --user alice   # admins (jobs:manage-all)", A),
    stop_my_desk, Ex("ti workspace reset my-desk", tty="y\n"), Ex("ti workspace reset my-desk --yes"),
    Ex("ti workspace reset my-desk --yes   # without asking"),
    Ex("ti ssh-command"), Ex("ti ssh-command dev-box"), Ex("ti ssh-command train-1 --instance 2"),
    # alerts and operators
    Ex("ti alert list"), Ex("ti alert list --all"), Ex("ti alert list --all --json", A),
    Ex("ti alert list --json | jq '.[].subject'"),
    Ex("ti admin audit", A), Ex("ti admin audit --actor alice", A), Ex("ti admin audit --action vc --json", A),
    Ex("ti admin audit --action plan.create --json", A),
    Ex("ti admin jobs", A), Ex("ti admin jobs --status running", A),
    Ex("ti admin jobs --user alice --status running", A), Ex("ti admin jobs --kind workspace --json", A),
    Ex("ti admin jobs --pool default --device-type cpu", A),
    Ex("ti admin alert-rule list", A), Ex("ti admin alert-rule list --json", A),
    Ex("ti admin alert-rule update cpu-busy --threshold 95", A),
    Ex("ti admin alert-rule update cpu-busy --threshold 95 --percent 50", A),
    Ex("ti admin alert-rule update gpu-temperature --no-enabled", A),
    Ex("ti admin alert-rule update job-wait --threshold 120", A),
    Ex("ti admin alert-rule update workspace-idle --enabled --interval 3600 --grace 1800", A),
    Ex("ti admin alert-rule update workspace-idle --cpu-threshold 5", A),
    Ex("ti admin alert-rule update job-overrun --threshold 300 --severity critical", A),
    Ex("ti admin alert-rule update gpu-ecc-errors --no-cordon", A),
    Ex("ti admin alert-rule update 3 --enabled", A),
    Ex("ti admin alert-rule create hot-gpu --metric gpu_temperature --op '>' --threshold 80 --percent 50", A),
    Ex("ti admin alert-rule create ecc-any --metric gpu_ecc --op '>' --threshold 0 --step 15 --interval 60 --percent 1 "
       "--cordon --notify-owners", A),
    Ex("ti admin alert-rule delete hot-gpu", A),
    Ex("ti admin machine list", A), Ex("ti admin machine cordon host1 --reason 'ECC errors'", A),
    Ex("ti admin machine list --json", A), Ex("ti admin machine uncordon host1", A),
    Ex("ti admin machine cordon host1 --reason 'fan failure'", A), uncordon_gpu_node_3,
    Ex("ti cluster", A), Ex("ti cluster users", A), Ex("ti cluster users --days 7", A),
    Ex("ti cluster users --days 7 --json", A), Ex("ti cluster nodes", A), Ex("ti cluster nodes --days 7 --json", A),
    Ex("ti cluster vcs", A), Ex("ti cluster vcs --json", A), Ex("ti cluster vcs --days 7 --json", A),
    # virtual clusters
    Ex("ti vc create team-a --cap demo-gpu=1", A),
    Ex("ti vc assign team-a --node host1 --device-type demo-gpu --devices 0,1", A),
    Ex("ti vc assign team-a --node host1 --device-type demo-gpu --devices 1 --remove --drain", A),
    Ex("ti vc access team-a --group lab", A),
    grant_alice_team_a, Ex("ti vc access team-a --user alice --remove --drain", A),
    Ex("ti vc list"), Ex("ti vc list --json"), Ex("ti vc show team-a", A),
    Ex("ti vc use team-a"), Ex("ti vc use"),
    Ex("ti vc change team-a --cap demo-gpu=1", A), Ex("ti vc change team-a --cap demo-gpu=1 --drain", A),
    Ex("ti vc change team-a --draining on", A), Ex("ti vc change team-a --open yes", A),
    Ex("ti vc change team-a --cohort labs   # lend idle devices within the cohort labs", A),
    Ex("ti vc change team-a --lend no", A), Ex("ti vc change team-a --cohort ''   # no cohort", A),
    Ex("ti vc rename team-a team-alpha", A), rename_back("vcs"),
    empty_team_a, Ex("ti vc delete team-a", A),
    Ex("ti vc create team-a --description 'Team A' --cap demo-gpu=2", A),
    Ex("ti vc delete team-a --with-jobs   # lists the jobs, asks", A, tty="y\n"),
    vc_team_a, Ex("ti vc delete team-a --with-jobs --yes", A),
    # roles
    Ex("ti role list", A), Ex("ti role list --json", A), Ex("ti role show user", A),
    Ex("ti role create reviewer --permissions vc:view,cluster:view", A),
    Ex("ti role delete reviewer", A),
    Ex("ti role create reviewer --permissions vc:view,cluster:view,jobs:view-all", A),
    Ex("ti role create observer --permissions none --description 'sees nothing, runs nothing'", A),
    Ex("ti role change reviewer --permissions vc:view", A), Ex("ti role change reviewer --description x", A),
    Ex("ti role grant reviewer --group interns", A), Ex("ti role grant reviewer --group interns --user bob", A),
    Ex("ti role grants", A), Ex("ti role grants --role reviewer", A),
    Ex("ti role revoke reviewer --user bob", A), Ex("ti role revoke reviewer --group interns", A),
    Ex("ti role grant ti-admin --user alice", A), Ex("ti role grants --role ti-admin", A),
    Ex("ti role grants --user alice --json", A),
    # groups
    Ex("ti group list", A), Ex("ti group list --json", A),
    Ex("ti group add team-a carol dave", A), Ex("ti group remove team-a alice bob", A),
    Ex("ti group add team-a alice bob", A),
    Ex("ti group describe team-a 'Team A: vision'", A),
    Ex("ti group rename team-a team-alpha", A), rename_back("groups"),
    Ex("ti group delete team-a", A),
    Ex("ti group create team-a --description 'Team A' --users alice bob", A),
    # last: what takes alice's or bob's rights
    Ex("ti user change bob --admin", A),
    Ex("ti user disable alice", A), Ex("ti user enable alice", A),
    # the platform's own command
    Ex("ti-hub simulate jobs.csv --nodes nodes.csv --policies fifo,fair --json", A, check=ok_text("fifo", "fair")),
]


def planned() -> list[str]:
    return [s.text for s in PLAN if isinstance(s, Ex)]


def test_every_example_is_planned_or_skipped_with_a_reason():
    """A new example the test does not know fails here; so does an entry whose example is gone from the help."""
    found, plan = all_examples(), planned()
    assert len(found) > 150
    assert len(plan) == len(set(plan)), "an example planned twice"
    unknown = [e for e in found if e not in plan and e not in SKIP]
    assert not unknown, "examples this test does not know how to run (add them to PLAN, or to SKIP with a " \
                        "reason):\n" + "\n".join(unknown)
    stale = [e for e in [*plan, *SKIP] if e not in found]
    assert not stale, "PLAN or SKIP entries no help shows any more:\n" + "\n".join(stale)
    assert not set(plan) & set(SKIP)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A hub of its own (the examples create users, groups, roles and VCs, and cordon machines), whose machine is
    named as the vc examples name it; an operator's stop leaves a job `killing` long enough to reset it. Its loop
    runs every 0.3 s (default 1 s): the plan waits for jobs to start and end some thirty times."""
    yield from own_hub(tmp_path_factory, "examples", f"c.LocalBackend.node_name = {NODE!r}\n"
                                                     "c.TiService.stop_grace_seconds = 60\n"
                                                     "c.TiService.scheduler_interval = 0.3\n")


def test_every_help_example_runs_as_written(hub, tmp_path):
    w = World(hub, tmp_path)
    for tool in ("ti", "ti-hub"):
        module = "ti_hub.cli.main" if tool == "ti" else "ti_hub.launcher.app"
        (w.bin / tool).write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {module} \"$@\"\n")
        (w.bin / tool).chmod(0o755)
    found = set(all_examples())
    failures: list[str] = []
    spent: list[tuple[float, str]] = []  # seconds per example and fixture step: the slowest are printed

    def outcome(step: Ex, r: subprocess.CompletedProcess, took: float) -> bool:
        """Record one example's result in plan order; False: stop here (TI_EXAMPLES_FAILFAST)."""
        w.ran.append(step.text)
        spent.append((took, step.text))
        if r.returncode != 0:
            failures.append(f"[{step.who}] {step.text}\n  exit {r.returncode} ({took:.1f} s)\n"
                            f"  stdout: {r.stdout[-1500:]}\n  stderr: {r.stderr[-1500:]}")
            return not os.environ.get("TI_EXAMPLES_FAILFAST")
        if step.check:
            try:
                assert step.check(w, r) is not False, "check said no"
            except AssertionError as e:
                failures.append(f"[{step.who}] {step.text}\n  exit 0 but: {e}")
        return True

    def timed(step: Ex) -> tuple[subprocess.CompletedProcess, float]:
        t0 = time.monotonic()
        r = w.run(step)
        return r, time.monotonic() - t0

    # consecutive read-only examples run together; everything else one at a time, in the plan's order
    batches: list[list] = []
    for step in PLAN:
        if isinstance(step, Ex) and reads_only(step) and batches and batches[-1][0] == "reads":
            batches[-1][1].append(step)
        else:
            batches.append(["reads" if isinstance(step, Ex) and reads_only(step) else "one", [step]])
    going = True
    with ThreadPoolExecutor(READERS) as pool:
        for _kind, steps in batches:
            if not going:
                break
            if not isinstance(steps[0], Ex):
                t0 = time.monotonic()
                try:
                    steps[0](w)
                    spent.append((time.monotonic() - t0, f"(step {steps[0].__name__})"))
                except Exception as e:  # the failed examples before it are likely why
                    raise AssertionError(f"fixture step {steps[0].__name__} failed: {e!r}; examples failed before "
                                         "it:\n\n" + "\n\n".join(failures)) from e
                continue
            for step in steps:
                assert step.text in found, step.text
            for step, (r, took) in zip(steps, pool.map(timed, steps)):
                going = outcome(step, r, took) and going
    print("\nslowest:\n" + "\n".join(f"{t:6.1f} s  {what}" for t, what in sorted(spent, reverse=True)[:15]))
    assert not failures, f"{len(failures)} of {len(w.ran)} examples failed:\n\n" + "\n\n".join(failures)
    assert len(w.ran) == len(planned())
