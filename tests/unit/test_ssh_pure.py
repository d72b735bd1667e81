"""The SSH gateway's pure parts: login names, target choice, rate limits, key matching, places, Kubernetes frames."""

from __future__ import annotations

import base64
import json

import pytest

from ti_hub.ssh import authkeys, kube, places
from ti_hub.ssh.logins import Hints, Login, LoginError, TargetError, choose, parse_login, ssh_command
from ti_hub.ssh.ratelimit import Buckets, LoginLimiter, TokenBucket
from ti_hub.ssh.settings import TiSSHGateway


# -- login names ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, login", [
    ("alice", Login("alice")),
    ("alice+dev-box", Login("alice", "dev-box")),
    ("alice+train_1.3", Login("alice", "train_1", 3)),
    ("alice+train-1.0", Login("alice", "train-1", 0)),
    ("a.b@corp+dev-box", Login("a.b@corp", "dev-box")),  # the last '+' separates; dots in the account are fine
])
def test_login_names(name, login):
    assert parse_login(name) == login
    assert parse_login(name).label == name


@pytest.mark.parametrize("name", ["", "alice+", "alice+ab", "alice+dev box", "alice+dev-box.", "alice+dev-box.x",
                                  "alice+dev-box.1234567", "alice+dev.box.1", "al ice", "alice/x+dev-box",
                                  "+dev-box", "alice+dev-box.-1"])
def test_bad_login_names(name):
    with pytest.raises(LoginError):
        parse_login(name)


def test_the_command_to_copy():
    assert ssh_command("alice", "dev-box", "hub.example.com", 8022) == "ssh -p 8022 alice+dev-box@hub.example.com"
    assert ssh_command("alice", None, "hub", 22) == "ssh alice@hub"
    assert ssh_command("alice", "train-1", "hub", 2222, 3) == "ssh -p 2222 alice+train-1.3@hub"
    assert ssh_command("o'neil", None, "hub", 22) == "ssh 'o'\"'\"'neil@hub'"  # quoted for a shell


def ws(name, status="running", **kw):
    return {"owner": "alice", "name": name, "kind": "workspace", "status": status, "ssh": True, "instances": 1, **kw}


def job(name, status="running", ssh=True, instances=2):
    return {"owner": "alice", "name": name, "kind": "single", "status": status, "ssh": ssh, "instances": instances}


HINTS = Hints("http://hub:8000", "hub", 8022)


def test_the_default_workspace():
    assert choose(Login("alice"), [ws("default"), ws("other")], HINTS)["name"] == "default"
    assert choose(Login("alice"), [ws("default", "stopped"), ws("other")], HINTS)["name"] == "other"
    with pytest.raises(TargetError, match=r"2 running workspaces \(aaaa, bbbb\); choose one: "
                                          r"ssh -p 8022 alice\+aaaa@hub"):
        choose(Login("alice"), [ws("bbbb"), ws("aaaa"), ws("cccc", "stopped")], HINTS)
    with pytest.raises(TargetError, match="workspace 'default' is stopped: start it at "
                                          "http://hub:8000/hub/spawn/alice "):
        choose(Login("alice"), [ws("default", "stopped")], HINTS)
    with pytest.raises(TargetError, match="no running workspace: start one at http://hub:8000/hub/home"):
        choose(Login("alice"), [ws("dev-box", "stopped")], HINTS)


def test_a_default_workspace_without_ssh_access_is_refused():
    with pytest.raises(TargetError, match="started without SSH access"):
        choose(Login("alice"), [ws("default", ssh=False)], HINTS)


def test_named_targets_and_their_refusals():
    docs = [ws("dev-box"), ws("old-box", "stopped"), ws("new-box", "queued", reason="waiting for devices"),
            job("train-1"), job("no-ssh", ssh=False), job("done-job", "completed"), ws("quiet-box", ssh=False)]
    assert choose(Login("alice", "dev-box"), docs, HINTS)["name"] == "dev-box"
    assert choose(Login("alice", "train-1", 1), docs, HINTS)["name"] == "train-1"
    cases = {
        Login("alice", "old-box"): "workspace 'old-box' is stopped: start it at http://hub:8000/hub/spawn/alice/old-box",
        Login("alice", "new-box"): "workspace 'new-box' is queued (waiting for devices); try again when it runs",
        Login("alice", "dev-box", 1): "workspace 'dev-box' has one instance",
        Login("alice", "train-1", 2): "job 'train-1' has instances 0-1",
        Login("alice", "no-ssh"): ("job 'no-ssh' does not enable SSH: turn it on with `ti job ssh no-ssh --on` "
                                     "(or submit it with --endpoint ssh)"),
        Login("alice", "done-job"): "job 'done-job' is completed: SSH reaches running jobs only",
        Login("alice", "nothing"): "you have no workspace or job named 'nothing'",
        Login("alice", "quiet-box"): "workspace 'quiet-box' was started without SSH access",
    }
    for login, message in cases.items():
        with pytest.raises(TargetError) as e:
            choose(login, docs, HINTS)
        assert message in e.value.message


# -- rate limits ---------------------------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_token_bucket_refills_one_token_per_period_up_to_capacity():
    b = TokenBucket.full(3, 10, now=0)
    assert [b.take(0) for _ in range(4)] == [True, True, True, False]
    assert b.wait_seconds(0) == 10 and b.wait_seconds(4) == pytest.approx(6)
    assert b.take(10) and not b.take(10)
    assert b.available(1000) == 3  # never above capacity
    b.drain(1000), b.drain(1000), b.drain(1000), b.drain(1000)
    assert b.available(1000) == 0  # never below zero


def test_failed_logins_are_limited_per_source_and_per_account_from_that_source():
    clock = Clock()
    lim = LoginLimiter(per_source=4, per_user=3, refill_seconds=20, clock=clock, per_account=100)
    for _ in range(3):
        assert lim.refusal("10.0.0.1", "alice") is None
        lim.failed("10.0.0.1", "alice")
    assert lim.refusal("10.0.0.1", "alice") == "too many failed logins to alice from 10.0.0.1; try again in 20 s"
    assert lim.refusal("10.0.0.1", "bob") is None  # the address has one more failure, for another account
    assert lim.refusal("10.0.0.2", "alice") is None  # the owner elsewhere is not locked out
    lim.failed("10.0.0.1", "bob")
    assert lim.refusal("10.0.0.1", "bob") == "too many failed logins from 10.0.0.1; try again in 20 s"
    clock.now += 15
    assert "try again in 5 s" in lim.refusal("10.0.0.1", None)
    clock.now += 5
    assert lim.refusal("10.0.0.1", None) is None  # one attempt given back
    lim.failed("10.0.0.1", None)
    assert lim.refusal("10.0.0.1", None) is not None


def test_an_attacker_at_one_address_never_locks_the_owner_out_elsewhere():
    """The old policy's flaw: 10 failures from one address refused the owner's right key from every address."""
    clock = Clock()
    lim = LoginLimiter(per_source=10, per_user=10, refill_seconds=30, clock=clock, per_account=100)
    for _ in range(50):  # far past every bucket of that address
        lim.failed("203.0.113.66", "alice")
    assert lim.refusal("203.0.113.66", "alice") is not None
    assert lim.refusal("203.0.113.66", "bob") is not None  # that address is refused, whoever it names
    for owner_address in ("10.0.0.7", "192.0.2.1", "2001:db8::1"):
        assert lim.refusal(owner_address, "alice") is None


def test_guessing_spread_over_addresses_meets_the_ceiling_but_known_addresses_pass():
    clock = Clock()
    lim = LoginLimiter(per_source=10, per_user=10, refill_seconds=30, clock=clock, per_account=20,
                       known_seconds=3600)
    lim.succeeded("10.0.0.7", "alice")  # the owner's usual address
    for i in range(20):  # 20 addresses, one failure each: no address nor pair bucket is empty
        lim.failed(f"198.51.100.{i}", "alice")
    assert lim.refusal("198.51.100.99", "alice") == ("too many failed logins to alice from addresses it has not "
                                                      "logged in from; try again in 30 s")
    assert lim.refusal("198.51.100.99", "bob") is None
    assert lim.refusal("10.0.0.7", "alice") is None  # known: past the ceiling
    assert lim.known("10.0.0.7", "alice") and not lim.known("10.0.0.7", "bob")
    clock.now += 3601
    assert not lim.known("10.0.0.7", "alice")  # forgotten after known_seconds
    assert lim.refusal("10.0.0.7", "alice") is None  # and the ceiling has refilled meanwhile


def test_known_addresses_stay_bounded():
    clock = Clock()
    lim = LoginLimiter(per_source=10, per_user=10, refill_seconds=30, clock=clock, max_entries=50)
    for i in range(200):
        lim.succeeded(f"10.0.{i}.1", "alice")
    assert len(lim._known) == 50 and lim.known("10.0.199.1", "alice") and not lim.known("10.0.0.1", "alice")


def test_buckets_forget_full_ones_and_stay_bounded():
    clock = Clock()
    b = Buckets(capacity=2, refill_seconds=1, max_entries=100)
    for i in range(100):
        b.drain(f"10.0.{i}.1", clock.now)
    assert len(b) == 100
    clock.now += 5  # all full again
    b.drain("10.1.0.1", clock.now)  # over the bound: the full ones go
    assert len(b) == 1
    for i in range(300):
        b.drain(f"10.2.{i}.1", clock.now)  # none full: the least recent go
    assert len(b) == 100 and b.wait_seconds("10.2.299.1", clock.now) == 0


# -- keys ------------------------------------------------------------------------------------------------
def key_line(kind: str, payload: bytes, comment: str = "me@laptop") -> str:
    blob = len(kind).to_bytes(4, "big") + kind.encode() + len(payload).to_bytes(4, "big") + payload
    return f"{kind} {base64.b64encode(blob).decode()} {comment}".strip()


def test_keys_match_by_blob_only():
    mine = key_line("ssh-ed25519", bytes(range(32)))
    other = key_line("ssh-ed25519", bytes(32))
    keys = authkeys.registered([{"name": "laptop", "key": mine}, {"name": "junk", "key": "ssh-ed25519 !!!"},
                                {"name": "liar", "key": "ssh-rsa " + other.split()[1]}])
    assert [k.name for k in keys] == ["laptop"]  # unparsable and mislabelled entries never match
    blob = authkeys.parse_line(key_line("ssh-ed25519", bytes(range(32)), comment="renamed"))[1]
    assert authkeys.find_match(keys, blob).name == "laptop"
    assert authkeys.find_match(keys, authkeys.parse_line(other)[1]) is None
    assert authkeys.fingerprint(blob).startswith("SHA256:") and "=" not in authkeys.fingerprint(blob)


def test_keys_match_what_asyncssh_offers():
    asyncssh = pytest.importorskip("asyncssh")
    key = asyncssh.generate_private_key("ssh-ed25519")
    line = key.export_public_key().decode()
    keys = authkeys.registered([{"name": "k", "key": line}])
    assert authkeys.find_match(keys, key.convert_to_public().public_data).name == "k"


# -- where targets run -----------------------------------------------------------------------------------
def test_places_from_backend_state():
    doc = {**ws("dev-box"), "backend_state": {"backend": "local", "pid": 42, "start_time": 7,
                                              "child": "/d/workspaces/run/alice/dev-box/child.json"}}
    p = places.place_of(doc, 0)
    assert p == places.LocalSandbox("alice", "dev-box", 0, "/d/workspaces/run/alice/dev-box/child.json",
                                    "/d/workspaces/run/alice/dev-box/config.json", "workspace")
    assert p.what == "workspace 'dev-box'"
    with pytest.raises(TargetError, match="started before SSH access existed"):
        places.place_of({**doc, "backend_state": {}}, 0)
    with pytest.raises(TargetError, match="started before SSH access existed"):  # a sandbox recorded by an old TiHub
        places.place_of({**doc, "backend_state": {"backend": "local", "pid": 42, "sandbox": ["bwrap", "--"]}}, 0)
    kw = {**ws("k-box"), "backend_state": {"backend": "kubernetes", "namespace": "users", "pod": "ti-ws-x"}}
    assert places.place_of(kw, 0, "notebook") == places.KubePod("alice", "k-box", "users", "notebook", pod="ti-ws-x")
    recs = [{"index": 0, "child": "/d/c0"}, {"index": 1, "child": "/d/c1"}]
    lj = {**job("train-1"), "backend_state": {"backend": "local", "job_dir": "/d/jobs/9", "instances": recs}}
    assert places.place_of(lj, 1) == places.LocalSandbox("alice", "train-1", 1, "/d/c1",
                                                         "/d/jobs/9/run/instance-1.json")
    assert places.place_of(lj, 1).what == "instance 1 of job 'train-1'"
    kj = {**job("train-1", instances=4), "backend_state": {"backend": "kubernetes", "namespace": "users", "roles": [
        {"job": "ti-9-ps", "offset": 0, "count": 1}, {"job": "ti-9-worker", "offset": 1, "count": 3}]}}
    assert places.place_of(kj, 2) == places.KubePod("alice", "train-1", "users", "main", job="ti-9-worker", index=1)


def test_shells():
    assert places.shell_argv("/bin/bash", "ls -l", login=False) == ["/bin/bash", "-c", "ls -l"]
    assert places.shell_argv("/bin/bash", None, login=True) == ["/bin/bash", "-l"]
    assert places.pick_shell({"SHELL": "/bin/zsh"}, lambda p: p != "/bin/zsh") == "/bin/bash"


def test_a_session_is_built_from_the_supervisors_records_only(tmp_path):
    """The recipe comes from the platform's files (the owner's identity, env, cwd, the sandbox to enter); records of
    another owner, or of a sandbox that is gone, are refused."""
    import json
    import os

    from ti_hub.ssh.local import recipe_of

    me = os.getpid()
    start = open(f"/proc/{me}/stat").read().rsplit(")", 1)[1].split()[19]
    child, config = tmp_path / "child.json", tmp_path / "config.json"
    child.write_text(json.dumps({"pid": me, "start_time": int(start), "sandbox_pid": me, "sandbox_start": int(start)}))
    cfg = {"wrapped": True, "identity": {"name": "alice", "uid": 900001, "gid": 900001, "home": "/home/alice"},
           "user": {"argv": ["x"], "env": {"HOME": "/home/alice", "A": "1"}, "cwd": "/job"},
           "cgroup": {"path": "/sys/fs/cgroup/ti-hub/job-1-0"}, "cpus": [1]}
    config.write_text(json.dumps(cfg))
    place = places.LocalSandbox("alice", "train", 0, str(child), str(config))
    r = recipe_of(place)
    assert (r.uid, r.gid, r.cwd, r.env["A"]) == (900001, 900001, "/job", "1")
    assert r.enter == {"pid": me, "start_time": int(start)} and r.cgroup.paths == ("/sys/fs/cgroup/ti-hub/job-1-0",)
    with pytest.raises(TargetError, match="is not running"):  # records that name someone else
        recipe_of(places.LocalSandbox("mallory", "train", 0, str(child), str(config)))
    child.write_text(json.dumps({"pid": me, "start_time": int(start) + 1}))  # a recycled pid
    with pytest.raises(TargetError, match="is not running"):
        recipe_of(place)


def test_session_environment_and_marker():
    env = places.session_env({"HOME": "/h", "TERM": "dumb", "CUDA_VISIBLE_DEVICES": "1"}, term="xterm",
                             client=("10.0.0.5", 5555), server=("10.0.0.1", 8022), marker="42:7", login_name="a+b")
    assert env["TERM"] == "xterm" and env["CUDA_VISIBLE_DEVICES"] == "1" and env["HOME"] == "/h"
    assert env["SSH_CONNECTION"] == "10.0.0.5 5555 10.0.0.1 8022" and env["SSH_CLIENT"] == "10.0.0.5 5555 8022"
    assert env[places.MARKER] == "42:7" and env["TI_SSH_LOGIN"] == "a+b"
    assert "TERM" not in places.session_env({"TERM": "dumb"}, term=None, client=("a", 1), server=("b", 2),
                                            marker="1:", login_name="x")
    assert places.parse_marker(places.marker_of(42, 7)) == (42, 7)
    assert places.parse_marker(places.marker_of(42, None)) == (42, None)
    assert places.parse_marker("x:1") is None and places.parse_marker("42") is None
    assert places.parse_environ(b"A=1\0B=x=y\0junk\0") == {"A": "1", "B": "x=y"}


def test_settings_show_a_reachable_host():
    assert TiSSHGateway(ip="10.1.2.3", port=8022).shown_host() == "10.1.2.3"
    assert TiSSHGateway(ip="0.0.0.0", public_host="hub.example.com").shown_host() == "hub.example.com"
    assert TiSSHGateway(ip="0.0.0.0").shown_host() not in ("", "0.0.0.0")
    # listening everywhere, the name the user reached the hub with beats this machine's own name
    assert TiSSHGateway(ip="").shown_host(seen="hub.example.com") == "hub.example.com"
    assert TiSSHGateway(ip="10.1.2.3").shown_host(seen="hub.example.com") == "10.1.2.3"
    assert TiSSHGateway(ip="", public_host="ssh.example.com").shown_host(seen="hub") == "ssh.example.com"


def test_request_host_is_a_plain_name_or_nothing():
    from ti_hub.api.ssh import request_host

    assert request_host("hub.example.com:8000") == "hub.example.com"
    assert request_host("hub.example.com") == "hub.example.com"
    assert request_host("[fd00::1]:8000") == "fd00::1" and request_host("10.0.0.7:80") == "10.0.0.7"
    # it lands in a command people paste into a shell: anything else is dropped
    for bad in ("", "a b", "x;rm -rf ~", "$(id)", "[fd00::1", "user@host"):
        assert request_host(bad) == "", bad
    assert TiSSHGateway(port=8022, public_port=22).shown_port() == 22
    assert TiSSHGateway(data_dir="/d").key_path() == "/d/ssh_host_ed25519_key"


# -- Kubernetes streams ----------------------------------------------------------------------------------
def test_exec_frames_and_statuses():
    assert kube.frame(kube.STDIN, b"ls\n") == b"\x00ls\n"
    assert kube.unframe(b"\x01out") == (kube.STDOUT, b"out") and kube.unframe(b"") == (-1, b"")
    assert json.loads(kube.resize_frame(120, 40)[1:]) == {"Width": 120, "Height": 40}
    assert kube.resize_frame(0, 0)[0] == kube.RESIZE and kube.close_stdin_frame() == b"\xff\x00"
    assert kube.exit_status(b'{"metadata":{},"status":"Success"}') == (0, None)
    failure = {"status": "Failure", "reason": "NonZeroExitCode",
               "details": {"causes": [{"reason": "ExitCode", "message": "7"}]}}
    assert kube.exit_status(json.dumps(failure)) == (7, None)
    assert kube.exit_status(json.dumps({"status": "Failure", "message": "container not found"})) == \
        (None, "container not found")
    assert kube.exit_status(b"not json")[0] is None
    # kwok's (and some runtimes') untranslated error: the command ran and exited 3
    kwok = {"status": "Failure", "reason": "InternalError", "message": "Internal error occurred: error executing "
            "command in container: cmd wait: /bin/sh -c exit 3: exit status 3"}
    assert kube.exit_status(json.dumps(kwok)) == (3, None)
    assert kube.exit_status(json.dumps({**kwok, "message": "exec failed: exit status of the node is bad"}))[0] is None
    p = kube.exec_params(["/bin/sh", "-c", "id"], "main", tty=True)
    assert p == {"command": ["/bin/sh", "-c", "id"], "container": "main", "stdin": True, "stdout": True,
                 "stderr": False, "tty": True}
    assert kube.session_command("make", None) == ["/bin/sh", "-c", "make"]
    assert "sftp-server" in kube.session_command(None, "sftp")[2]
    with pytest.raises(TargetError):
        kube.session_command(None, "x11")


def pod(name, job, index, phase="Running", created="2026-01-01T00:00:00Z", owner="alice"):
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": {"ti-hub.io/owner": owner},
                         "labels": {"job-name": job, "batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"phase": phase}}


def test_job_pods_and_owners():
    pods = [pod("a0", "ti-9", 0), pod("a1-old", "ti-9", 1, created="2026-01-01T00:00:00Z"),
            pod("a1-new", "ti-9", 1, created="2026-01-02T00:00:00Z"), pod("a2", "ti-9", 2, phase="Pending"),
            pod("b1", "ti-10", 1)]
    assert kube.pick_pod(pods, "ti-9", 1)["metadata"]["name"] == "a1-new"
    assert kube.pick_pod(pods, "ti-9", 2) is None and kube.pick_pod(pods, "ti-9", 5) is None
    # a bare pod (KubernetesBackend.launch_pods): TiHub's run label, the index as an annotation
    bare = {"metadata": {"name": "ti-11-0-x7", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"ti-hub.io/run": "ti-11"},
                         "annotations": {"batch.kubernetes.io/job-completion-index": "0"}}, "status": {"phase": "Running"}}
    assert kube.pick_pod([*pods, bare], "ti-11", 0) is bare and kube.pick_pod([bare], "ti-11", 1) is None
    kube.check_owner(pods[0], "alice")
    with pytest.raises(TargetError, match="does not belong to you"):
        kube.check_owner(pods[0], "bob")
    with pytest.raises(TargetError, match="not running"):
        kube.check_owner(pod("p", "j", 0, phase="Succeeded"), "alice")


def test_port_forward_frames_drop_the_port_prefix_once():
    f = kube.PortFrames(8888)
    port = (8888).to_bytes(2, "little")
    assert f.feed(b"\x00" + port) == (b"", "")
    assert f.feed(b"\x01" + port) == (b"", "")
    assert f.feed(b"\x00" + port + b"hello") == (port + b"hello", "")  # later frames are all data
    assert f.feed(b"\x01boom") == (b"", "boom")
    assert kube.PortFrames.outgoing(b"x") == b"\x00x"


def test_the_spawn_forms_ssh_checkbox():
    from ti_hub.spawner.form import options_from_form

    # the page sends the hidden "off" always and "on" when ticked; an API start sends neither (default: on)
    assert options_from_form({"plan": ["cpu-small"], "ssh": ["off", "on"]})["ssh"] is True
    assert options_from_form({"plan": ["cpu-small"], "ssh": ["off"]})["ssh"] is False
    assert "ssh" not in options_from_form({"plan": ["cpu-small"]})


def test_the_spawn_form_offers_a_workspace_without_jupyter_where_the_spawner_can_start_one():
    from ti_hub.spawner.form import options_from_form, render_form

    opts = {"plans": [{"name": "cpu-small", "device_count": 0, "device_type": "cpu", "cpu": 1, "memory_mib": 512}]}
    assert 'name="jupyter"' in render_form(opts, without_jupyter=True) and 'name="jupyter"' not in render_form(opts)
    assert options_from_form({"plan": ["cpu-small"], "jupyter": ["off"]})["jupyter"] is False
    assert options_from_form({"plan": ["cpu-small"], "jupyter": ["off", "on"]})["jupyter"] is True
    assert "jupyter" not in options_from_form({"plan": ["cpu-small"]})


def test_the_spawn_form_offers_my_registry_credentials_none_by_default():
    from ti_hub.spawner.form import options_from_form, render_form

    plans = [{"name": "cpu-small", "device_count": 0, "device_type": "cpu", "cpu": 1, "memory_mib": 512}]
    page = render_form({"plans": plans, "credentials": [{"id": 7, "name": "my-reg", "registry": "reg.example.org"}]})
    select = page[page.index('name="credential"'):]
    select = select[:select.index("</select>")]
    # "none" first (selected, being first); the credential by name, with its registry
    assert select.index('<option value="">(none)</option>') < select.index('value="my-reg"')
    assert "my-reg (reg.example.org)" in select
    assert 'name="credential"' not in render_form({"plans": plans, "credentials": []})
    assert options_from_form({"plan": ["cpu-small"], "credential": ["my-reg"]})["credential"] == "my-reg"
    assert "credential" not in options_from_form({"plan": ["cpu-small"], "credential": [""]})
