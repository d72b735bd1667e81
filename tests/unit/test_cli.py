"""The `ti` CLI against a real local HTTP server that answers canned JSON (docs/api.md)."""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ti_hub.cli import main as cli
from ti_hub.cli import watch
from ti_hub.cli.client import ApiError, TiClient, TiConnectionError, normalize_url
from ti_hub.cli.submit import duration

API = "/services/ti/api/v1"
TOKEN = "tok-0123456789abcdef"


class FakeTi:
    """Records every request; answers from routes[(METHOD, path)]: (status, body) or a function of the request."""

    def __init__(self) -> None:
        self.routes: dict = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def on(self, method: str, path: str, answer=None, status: int = 200) -> None:
        self.routes[(method, path)] = answer if callable(answer) else (status, answer)

    def find(self, method: str, path: str) -> list[dict]:
        return [r for r in self.requests if r["method"] == method and r["path"] == path]


class Handler(BaseHTTPRequestHandler):
    def _handle(self) -> None:
        fake: FakeTi = self.server.fake  # type: ignore[attr-defined]
        parts = urllib.parse.urlsplit(self.path)
        parts = parts._replace(path=urllib.parse.unquote(parts.path))
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = parts.path[len(API):] if parts.path.startswith(API) else parts.path
        req = {
            "method": self.command,
            "path": path,
            "query": dict(urllib.parse.parse_qsl(parts.query)),
            "headers": dict(self.headers),
            "body": json.loads(raw) if raw else None,
        }
        with fake.lock:
            fake.requests.append(req)
        route = fake.routes.get((self.command, path)) if parts.path.startswith(API) else None
        if route is None:
            status, body = 404, {"error": "not_found", "detail": f"no route {self.command} {path}", "field": None}
        elif callable(route):
            status, body = route(req)
        else:
            status, body = route
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status if body is not None or status != 200 else 204)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

    def log_message(self, *args) -> None:  # keep test output clean
        pass


@pytest.fixture
def server():
    fake = FakeTi()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.fake = fake  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake.hub = f"http://127.0.0.1:{httpd.server_address[1]}"
    fake.url = fake.hub + API
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in ("TI_API_URL", "TI_TOKEN", "JUPYTERHUB_API_TOKEN", "TI_TIMEOUT", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TI_CONFIG", str(tmp_path / "ti" / "config.json"))
    monkeypatch.setattr(watch, "POLL_INTERVAL", 0.01)
    monkeypatch.setattr(watch, "WAIT_INTERVAL", 0.01)


@pytest.fixture
def env(server, monkeypatch):
    """Logged in through the environment, with the hub base URL (the CLI appends the API path)."""
    monkeypatch.setenv("TI_API_URL", server.hub)
    monkeypatch.setenv("TI_TOKEN", TOKEN)
    return server


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def job_doc(status="created", **kw):
    return {"id": 7, "name": "mnist", "owner": "alice", "kind": "single", "status": status,
            "plan": "demo-gpu-1", "workers": 1, "ps": 0, "created_at": "2024-05-01T10:00:00Z", **kw}


# -- submit -------------------------------------------------------------------------------
def test_submit_builds_the_document_from_flags(env, capsys):
    env.on("POST", "/jobs", job_doc(status="queued"), status=201)
    code, out, err = run(
        capsys, "job", "submit", "--name", "mnist-ddp", "--kind", "distributed", "--strategy", "allreduce",
        "--workers", "2", "--plan", "demo-gpu-1", "--image", "pytorch",
        "--env", "EPOCHS=3", "--env", "LR=a=b",
        "--volume", "data:/mnt/data:ro", "--volume", "bob/ckpt:/mnt/ckpt", "--volume", "12:/data/x:rw",
        "--port", "40001", "--port", "40002,40003", "--endpoint", "tensorboard,ssh",
        "--credential", "my-registry", "--preemptible", "--estimated-duration", "2h",
        "--template", "base", "--description", "a test",
        "--", "python", "train.py", "--lr", "0.1", "--msg", "hello world",
    )
    assert code == 0, err
    [req] = env.find("POST", "/jobs")
    assert req["headers"]["Authorization"] == f"token {TOKEN}"
    assert req["headers"]["Content-Type"] == "application/json"
    assert req["body"] == {
        "name": "mnist-ddp", "kind": "distributed", "strategy": "allreduce", "workers": 2,
        "plan": "demo-gpu-1", "image": "pytorch", "credential": "my-registry", "template": "base",
        "description": "a test", "preemptible": True, "estimated_duration": 7200,
        "command": "python train.py --lr 0.1 --msg 'hello world'",
        "env": {"EPOCHS": "3", "LR": "a=b"},
        "volumes": [
            {"volume": "data", "mount_path": "/mnt/data", "read_only": True},
            {"volume": "bob/ckpt", "mount_path": "/mnt/ckpt", "read_only": False},
            {"volume": 12, "mount_path": "/data/x", "read_only": False},
        ],
        "ports": [40001, 40002, 40003],
        "endpoints": ["tensorboard", "ssh"],
    }
    assert "submitted job 7" in out


def test_submit_single_command_arg_is_kept_verbatim_and_unset_flags_are_left_out(env, capsys):
    env.on("POST", "/jobs", job_doc(), status=201)
    code, _, err = run(capsys, "job", "submit", "--name", "mnist", "--plan", "3", "cd src && python train.py")
    assert code == 0, err
    assert env.find("POST", "/jobs")[0]["body"] == {"name": "mnist", "plan": 3, "command": "cd src && python train.py"}


def test_submit_from_file_then_flags_win(env, capsys, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "old", "plan": "p1", "command": "python a.py", "env": {"A": "1"},
                                "volumes": [{"volume": "data", "mount_path": "/mnt/data", "read_only": False}]}))
    env.on("POST", "/jobs", job_doc(), status=201)
    code, _, err = run(capsys, "job", "submit", "--from-file", str(spec), "--name", "new", "--env", "B=2",
                       "--volume", "data:/mnt/data:ro", "--estimated-duration", "90")
    assert code == 0, err
    assert env.find("POST", "/jobs")[0]["body"] == {
        "name": "new", "plan": "p1", "command": "python a.py", "env": {"A": "1", "B": "2"},
        "volumes": [{"volume": "data", "mount_path": "/mnt/data", "read_only": True}], "estimated_duration": 90,
    }


def test_submit_secret_env_from_a_flag_or_from_this_shell(env, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "from-the-shell")
    env.on("POST", "/jobs", job_doc(status="queued", secret_env_names=["HF_TOKEN", "WANDB_API_KEY"]), status=201)
    code, out, err = run(capsys, "job", "submit", "--name", "mnist", "--plan", "p", "--env", "A=1",
                         "--secret-env", "WANDB_API_KEY", "--secret-env", "HF_TOKEN=a=b", "--", "python", "x.py")
    assert code == 0, err
    body = env.find("POST", "/jobs")[0]["body"]
    assert body["secret_env"] == {"WANDB_API_KEY": "from-the-shell", "HF_TOKEN": "a=b"} and body["env"] == {"A": "1"}
    assert "from-the-shell" not in out + err  # the CLI never prints a secret value back
    monkeypatch.delenv("WANDB_API_KEY")
    code, _, err = run(capsys, "job", "submit", "--name", "mnist", "--secret-env", "WANDB_API_KEY", "--", "x")
    assert code == 2 and "WANDB_API_KEY is not set" in err and len(env.find("POST", "/jobs")) == 1


@pytest.mark.parametrize("argv", [
    ["--env", "NOEQUALS"], ["--volume", "data"], ["--volume", "data:relative"], ["--port", "http"],
    ["--endpoint", "vnc"], ["--estimated-duration", "soon"], ["--kind", "huge"],
])
def test_submit_bad_flags_are_usage_errors(env, capsys, argv):
    code, _, err = run(capsys, "job", "submit", "--name", "mnist", *argv, "--", "python", "x.py")
    assert code == 2
    assert "error" in err
    assert env.requests == []


def test_submit_without_command_is_a_usage_error(env, capsys):
    code, _, err = run(capsys, "job", "submit", "--name", "mnist", "--plan", "p")
    assert code == 2 and "command" in err
    assert env.requests == []


def test_duration_forms():
    assert duration("3600") == 3600
    assert duration("30m") == 1800
    assert duration("2h") == 7200
    assert duration("1h30m") == 5400
    assert duration("1d") == 86400


def _sequence(*docs):
    """Answers each GET with the next document (the last one repeats)."""
    left = list(docs)

    def answer(req):
        return 200, (left.pop(0) if len(left) > 1 else left[0])

    return answer


def test_submit_wait_prints_state_changes_and_exits_0_when_completed(env, capsys):
    env.on("POST", "/jobs", job_doc(status="queued", queue={"position": 2}), status=201)
    env.on("GET", "/jobs/7", _sequence(
        job_doc(status="queued", queue={"position": 2}),
        job_doc(status="queued", queue={"position": 1}),
        job_doc(status="running"),
        job_doc(status="completed", exit_code=0),
    ))
    code, out, err = run(capsys, "job", "submit", "--name", "mnist", "--plan", "p", "--wait", "--", "true")
    assert code == 0
    assert "submitted job 7" in out
    lines = [line.split(": ", 1)[1] for line in err.splitlines()]
    assert lines == ["queued (position 2)", "queued (position 1)", "running", "completed"]


@pytest.mark.parametrize("final,code", [("failed", 4), ("killed", 4), ("error", 4), ("completed", 0)])
def test_job_wait_exit_codes(env, capsys, final, code):
    env.on("GET", "/jobs/mnist", _sequence(job_doc(status="running"), job_doc(status=final, exit_code=1)))
    got, _, err = run(capsys, "job", "wait", "mnist")
    assert got == code
    assert final in err


def test_job_wait_timeout(env, capsys):
    env.on("GET", "/jobs/mnist", job_doc(status="running"))
    code, _, err = run(capsys, "job", "wait", "mnist", "--timeout", "0")
    assert code == 5 and "still running" in err


def test_submit_follow_waits_streams_logs_and_reports_the_end(env, capsys):
    env.on("POST", "/jobs", job_doc(status="queued", queue=3), status=201)
    env.on("GET", "/jobs/7", _sequence(job_doc(status="running"), job_doc(status="failed", exit_code=2)))
    env.on("GET", "/jobs/7/logs", _logs_pages(["epoch 1\n", "", "boom\n"]))
    code, out, err = run(capsys, "job", "submit", "--name", "mnist", "-f", "--", "python", "x.py")
    assert code == 4
    assert out.endswith("epoch 1\nboom\n")
    assert "queued (position 3)" in err and "failed (exit code 2)" in err


# -- logs ---------------------------------------------------------------------------------
def _logs_pages(chunks):
    """A log growing by one chunk per request; finished once every chunk was served."""
    log = "".join(chunks)
    served = {"n": 0}

    def answer(req):
        offset = int(req["query"].get("offset", 0))
        served["n"] = min(served["n"] + 1, len(chunks))
        available = len("".join(chunks[: served["n"]]))
        text = log[offset:available]
        return 200, {"text": text, "offset": offset + len(text), "instance": int(req["query"].get("instance", 0)),
                     "instances": 1, "finished": served["n"] == len(chunks)}

    return answer


def test_logs_follow_concatenates_pages_until_finished(env, capsys):
    env.on("GET", "/jobs/mnist/logs", _logs_pages(["hello\n", "", "", "world\n", "bye\n"]))
    code, out, err = run(capsys, "job", "logs", "mnist", "-f")
    assert code == 0, err
    assert out == "hello\nworld\nbye\n"
    offsets = [r["query"]["offset"] for r in env.find("GET", "/jobs/mnist/logs")]
    assert offsets[0] == "0" and offsets[-1] == str(len(out))


def test_logs_tail_and_instance_are_passed(env, capsys):
    env.on("GET", "/jobs/ddp/logs", lambda req: (200, {"text": "" if "offset" in req["query"] else "last\n",
                                                        "offset": 5, "instance": 1, "instances": 3, "finished": True}))
    code, out, _ = run(capsys, "job", "logs", "ddp", "--instance", "1", "--tail", "100")
    assert code == 0 and out == "last\n"
    first = env.find("GET", "/jobs/ddp/logs")[0]["query"]
    assert first == {"instance": "1", "tail": "100"}


# a job's log that retitles the terminal (an OSC split across two pages), clears it, overwrites a line and
# colours with an 8-bit CSI
HOSTILE_LOG = ["ok \x1b]0;root@prod", "\x07\x1b[2J\x1b[Hreal\r\x9b31mfake\x9b0m\n", "中文 🎉\tdone\r\n"]


def test_logs_strip_escape_sequences_unless_raw(env, capsys):
    env.on("GET", "/jobs/evil/logs", _logs_pages(HOSTILE_LOG))
    code, out, err = run(capsys, "job", "logs", "evil", "-f")
    assert code == 0, err
    assert out == "ok realfake\n中文 🎉\tdone\n"
    offsets = [r["query"]["offset"] for r in env.find("GET", "/jobs/evil/logs")]
    assert offsets[-1] == str(len("".join(HOSTILE_LOG)))  # read on from what the server sent, not what was shown

    env.on("GET", "/jobs/evil/logs", _logs_pages(HOSTILE_LOG))
    code, out, err = run(capsys, "job", "logs", "evil", "-f", "--raw")
    assert code == 0, err
    assert out == "".join(HOSTILE_LOG)


def test_submit_follow_strips_the_log_too(env, capsys):
    env.on("POST", "/jobs", job_doc(status="queued"), status=201)
    env.on("GET", "/jobs/7", _sequence(job_doc(status="running"), job_doc(status="completed", exit_code=0)))
    env.on("GET", "/jobs/7/logs", _logs_pages(HOSTILE_LOG))
    code, out, err = run(capsys, "job", "submit", "--name", "mnist", "-f", "--", "python", "x.py")
    assert code == 0, err
    assert out.endswith("ok realfake\n中文 🎉\tdone\n") and "\x1b" not in out and "\x9b" not in out


# -- lists, show, json --------------------------------------------------------------------
def test_job_list_table_and_json(env, capsys):
    page = {"items": [job_doc(status="running", started_at="2024-05-01T10:01:00Z"),
                      job_doc(id=8, name="ddp-run", status="queued", queue={"position": 1})],
            "total": 2, "limit": 50, "offset": 0}
    env.on("GET", "/jobs", page)
    code, out, _ = run(capsys, "job", "list", "--status", "running", "--all", "--limit", "10")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["ID", "NAME", "OWNER", "KIND"]
    assert "mnist" in rows[0] and "ddp-run" in rows[1] and "queued (#1)" in rows[1]
    jobs_query = next(r["query"] for r in env.requests if r["path"] == "/jobs")
    assert jobs_query == {"status": "running", "all": "1", "limit": "10"}
    # the API gives a job's plan id; the table names the plan (unknown ids, or no /plans, stay ids)
    env.on("GET", "/jobs", {"items": [job_doc(plan=None, plan_id=3), job_doc(id=9, plan=None, plan_id=4)],
                            "total": 2})
    env.on("GET", "/plans", {"items": [{"id": 3, "name": "cpu-small"}], "total": 1})
    code, out, _ = run(capsys, "job", "list")
    header, first, second = out.splitlines()
    at = header.index("PLAN")
    assert first[at:].split()[0] == "cpu-small" and second[at:].split()[0] == "4", out
    env.on("GET", "/jobs", page)
    code, out, _ = run(capsys, "job", "list", "--json")
    assert code == 0
    assert json.loads(out) == page["items"]


def test_job_show_by_name_quotes_and_prints_details(env, capsys):
    env.on("GET", "/jobs/my job", job_doc(name="my job", status="queued", queue={"position": 4},
                                         spec={"env": {"A": "1"}, "volumes": [
                                             {"volume": "data", "mount_path": "/mnt/d", "read_only": True}]}))
    code, out, _ = run(capsys, "job", "show", "my job")
    assert code == 0
    assert "position 4" in out and "A=1" in out and "data:/mnt/d:ro" in out
    code, out, _ = run(capsys, "job", "show", "my job", "--json")
    assert json.loads(out)["queue"] == {"position": 4}


def test_job_actions_and_clone(env, capsys):
    env.on("POST", "/jobs/mnist/kill", job_doc(status="killing"))
    env.on("POST", "/jobs/mnist/clone", job_doc(id=9, name="mnist-2"), status=201)
    assert run(capsys, "job", "kill", "mnist")[1].strip() == "mnist: killing"
    code, out, _ = run(capsys, "job", "clone", "mnist", "--name", "mnist-2")
    assert code == 0 and "job 9 mnist-2" in out
    assert env.find("POST", "/jobs/mnist/clone")[0]["body"] == {"name": "mnist-2"}


def test_lists_follow_pagination(env, capsys):
    plans = [{"id": i, "name": f"plan-{i}", "kinds": ["single"], "device_type": "gpu", "device_count": 1,
              "cpu": 4, "memory_mib": 16384} for i in range(3)]

    def answer(req):
        offset, limit = int(req["query"]["offset"]), 2
        return 200, {"items": plans[offset:offset + limit], "total": 3, "limit": limit, "offset": offset}

    env.on("GET", "/plans", answer)
    code, out, _ = run(capsys, "plan", "list", "--kind", "single", "--json")
    assert code == 0 and [p["name"] for p in json.loads(out)] == ["plan-0", "plan-1", "plan-2"]
    assert all(r["query"]["kind"] == "single" for r in env.find("GET", "/plans"))
    code, out, _ = run(capsys, "plan", "list")
    assert "1x gpu" in out and "16G" in out


def test_a_list_that_refuses_paging_parameters_is_taken_whole(env, capsys):
    def answer(req):
        if "limit" in req["query"]:
            return 400, {"error": "invalid", "detail": "unknown field 'limit'", "field": "limit"}
        return 200, {"items": [{"id": 1, "name": "cpu-small"}], "total": 1, "limit": 1, "offset": 0}

    env.on("GET", "/plans", answer)
    code, out, _ = run(capsys, "plan", "list", "--kind", "single", "--json")
    assert code == 0 and json.loads(out) == [{"id": 1, "name": "cpu-small"}]
    assert env.requests[-1]["query"] == {"kind": "single"}


def test_queue_and_quota_render(env, capsys):
    queued = {**job_doc(status="queued", position=1, queue="default"), "plan_id": 3}
    del queued["plan"]  # the API gives the plan's id: the CLI shows its name (issue 17, item 13)
    env.on("GET", "/queue", {"items": [queued], "total": 1, "limit": 50, "offset": 0})
    env.on("GET", "/plans", {"items": [{"id": 3, "name": "gpu-small"}], "total": 1, "limit": 500, "offset": 0})
    env.on("GET", "/quota", {"compute": [{"kind": "single", "device_type": "gpu", "devices": 4,
                                          "used": {"devices": 1}}],
                             "storage": [{"kind": "nfs", "capacity_gib": 100, "used_gib": 10}]})
    code, out, _ = run(capsys, "queue")
    assert code == 0 and "default" in out and "mnist" in out and "gpu-small" in out
    code, out, _ = run(capsys, "quota")
    assert code == 0 and "compute:" in out and "USED.DEVICES" in out and "storage:" in out
    code, out, _ = run(capsys, "quota", "--json")
    assert json.loads(out)["storage"][0]["kind"] == "nfs"


# -- volumes, images, templates -----------------------------------------------------------
VOLUMES = {"items": [{"id": 3, "name": "data", "owner": "alice", "kind": "nfs", "capacity_gib": 100,
                      "shares": [{"id": 11, "grantee_kind": "user", "grantee": "bob", "mode": "ro"}]},
                     {"id": 4, "name": "data", "owner": "bob", "kind": "nfs", "capacity_gib": 5}],
           "total": 2, "limit": 500, "offset": 0}


def test_volume_commands_resolve_names_to_ids(env, capsys):
    env.on("GET", "/volumes", VOLUMES)
    env.on("GET", "/me", {"name": "alice", "admin": False, "groups": [], "permissions": []})
    env.on("POST", "/volumes", {"id": 5, "name": "scratch", "kind": "nfs", "capacity_gib": 10}, status=201)
    env.on("PATCH", "/volumes/3", {"id": 3, "name": "data", "capacity_gib": 200})
    env.on("POST", "/volumes/4/shares", {"id": 12, "group": "lab", "mode": "rw"}, status=201)
    env.on("GET", "/volumes/3", VOLUMES["items"][0])
    env.on("DELETE", "/volumes/3/shares/11", None, status=204)
    env.on("GET", "/volumes/3/files", {"path": "models", "items": [
        {"name": "ckpt", "type": "dir"}, {"name": "a.pt", "type": "file", "size": 2048}]})
    env.on("DELETE", "/volumes/3", None, status=204)

    assert run(capsys, "volume", "create", "scratch", "--kind", "nfs", "--size", "10", "--source", "data")[0] == 0
    assert env.find("POST", "/volumes")[0]["body"] == {"name": "scratch", "kind": "nfs", "capacity_gib": 10,
                                                       "source": "data"}
    assert run(capsys, "volume", "expand", "data", "--size", "200")[0] == 0  # mine wins over bob's
    assert env.find("PATCH", "/volumes/3")[0]["body"] == {"capacity_gib": 200}
    assert run(capsys, "volume", "share", "bob/data", "--group", "lab", "--mode", "rw")[0] == 0
    assert env.find("POST", "/volumes/4/shares")[0]["body"] == {"group": "lab", "mode": "rw"}
    assert run(capsys, "volume", "unshare", "3", "--user", "bob")[0] == 0
    assert env.find("DELETE", "/volumes/3/shares/11")
    code, out, _ = run(capsys, "volume", "ls", "3", "models")
    assert code == 0 and "ckpt/" in out and "2.0K" in out
    assert env.find("GET", "/volumes/3/files")[0]["query"] == {"path": "models"}
    code, _, err = run(capsys, "volume", "delete", "3")  # not a terminal: needs --yes
    assert code == 2 and "--yes" in err and not env.find("DELETE", "/volumes/3")
    assert run(capsys, "volume", "delete", "3", "--yes")[0] == 0
    code, _, err = run(capsys, "volume", "show", "nope")
    assert code == 1 and "no volume named 'nope'" in err


def test_share_needs_a_user_or_a_group(env, capsys):
    assert run(capsys, "volume", "share", "data")[0] == 2


def test_image_add_and_template_save_from_job(env, capsys):
    env.on("POST", "/images", {"id": 1, "name": "pytorch", "address": "pytorch/pytorch:2.3"}, status=201)
    env.on("GET", "/jobs/mnist", job_doc(image="pytorch", command="python train.py", description="",
                                         strategy=None, endpoints=[],
                                         volumes=[{"volume_id": 3, "mount_path": "/mnt/d", "read_only": True}],
                                         spec={"env": {"A": "1"}, "ports": [40001]}))
    env.on("POST", "/templates", {"id": 2, "name": "base", "scope": "team", "group": "lab"}, status=201)
    assert run(capsys, "image", "add", "pytorch", "--address", "pytorch/pytorch:2.3", "--accelerator", "gpu")[0] == 0
    assert env.find("POST", "/images")[0]["body"] == {"name": "pytorch", "address": "pytorch/pytorch:2.3",
                                                      "accelerator": "gpu"}
    code, _, err = run(capsys, "template", "save", "base", "--scope", "team", "--group", "lab", "--from-job", "mnist")
    assert code == 0, err
    assert env.find("POST", "/templates")[0]["body"] == {
        "name": "base", "scope": "team", "group": "lab",
        "spec": {"kind": "single", "plan": "demo-gpu-1", "image": "pytorch", "command": "python train.py",
                 "env": {"A": "1"}, "volumes": [{"volume": 3, "mount_path": "/mnt/d", "read_only": True}],
                 "ports": [40001]},
    }


# -- errors and exit codes ----------------------------------------------------------------
def test_api_error_prints_detail_and_field_and_exits_1(env, capsys):
    env.on("POST", "/jobs", {"error": "invalid", "detail": "name must be 4-63 characters", "field": "name"},
           status=400)
    code, out, err = run(capsys, "job", "submit", "--name", "x", "--", "true")
    assert code == 1
    assert "error: name must be 4-63 characters (field: name)" in err
    assert "Traceback" not in err and out == ""


def test_quota_error_shows_the_numbers(env, capsys):
    env.on("POST", "/jobs", {"error": "quota_exceeded", "detail": "over your GPU quota", "field": None,
                             "resource": "gpu", "requested": 4, "used": 2, "limit": 4}, status=403)
    code, _, err = run(capsys, "job", "submit", "--name", "mnist", "--", "true")
    assert code == 1
    assert "error: over your GPU quota" in err and "(field" not in err
    assert "resource gpu, requested 4, used 2, limit 4" in err


def test_unknown_job_exits_1(env, capsys):
    code, _, err = run(capsys, "job", "show", "42")
    assert code == 1 and err.startswith("error: no route")


def test_unreachable_server_exits_3(capsys, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = run(capsys, "--url", f"http://127.0.0.1:{port}", "--token", TOKEN, "job", "list")
    assert code == 3
    assert f"cannot reach TiHub at http://127.0.0.1:{port}{API}" in err
    assert "Traceback" not in err and TOKEN not in err


def test_not_logged_in_exits_3(capsys):
    code, _, err = run(capsys, "job", "list")
    assert code == 3 and "ti login" in err


def test_rejected_token_exits_3(env, capsys):
    env.on("GET", "/me", {"error": "unauthorized", "detail": "invalid token", "field": None}, status=401)
    code, _, err = run(capsys, "me")
    assert code == 3 and "invalid token" in err and "ti login" in err


def test_non_json_answer_is_not_the_api(env, capsys, monkeypatch):
    monkeypatch.setattr(Handler, "do_GET", _html)
    code, _, err = run(capsys, "me")
    assert code == 3 and "not JSON" in err


def _html(self):
    self.rfile.read(int(self.headers.get("Content-Length") or 0))
    data = b"<html>hub</html>"
    self.send_response(200)
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)


def test_ctrl_c_exits_130_quietly(env, capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(TiClient, "request", interrupted)
    code, out, err = run(capsys, "job", "list")
    assert code == 130 and "Traceback" not in err and out == ""


@pytest.mark.parametrize("argv", [[], ["job"], ["volume"]])
def test_missing_command_is_a_usage_error(capsys, argv):
    assert run(capsys, *argv)[0] == 2


@pytest.mark.parametrize("argv", [
    ["--help"], ["job", "--help"], ["job", "submit", "--help"], ["job", "logs", "--help"], ["volume", "--help"],
    ["volume", "share", "--help"], ["credential", "add", "--help"], ["template", "save", "--help"],
    ["key", "add", "--help"], ["login", "--help"], ["queue", "--help"], ["plan", "list", "--help"],
    ["account", "--help"], ["account", "set", "--help"], ["account", "show", "--help"],
])
def test_help_everywhere_with_examples(capsys, argv):
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "examples:" in out


# -- login and configuration --------------------------------------------------------------
def test_login_writes_a_private_config_and_never_prints_the_token(server, capsys):
    server.on("GET", "/me", {"name": "alice", "admin": False, "groups": ["lab"], "permissions": []})
    code, out, err = run(capsys, "login", "--url", server.hub + "/", "--token", TOKEN)
    assert code == 0, err
    assert out.strip() == f"Logged in to {server.url} as alice"
    assert TOKEN not in out + err
    path = os.environ["TI_CONFIG"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.load(open(path)) == {"url": server.url, "token": TOKEN}
    # later commands use the saved URL and token
    code, out, _ = run(capsys, "me")
    assert code == 0 and "alice" in out and TOKEN not in out
    assert server.requests[-1]["headers"]["Authorization"] == f"token {TOKEN}"


def test_login_with_a_bad_token_saves_nothing(server, capsys):
    server.on("GET", "/me", {"error": "unauthorized", "detail": "invalid token", "field": None}, status=401)
    code, out, err = run(capsys, "login", "--url", server.url, "--token", "wrong-token")
    assert code == 3 and "wrong-token" not in out + err
    assert not os.path.exists(os.environ["TI_CONFIG"])


def test_login_reads_the_token_from_stdin(server, capsys, monkeypatch):
    server.on("GET", "/me", {"name": "alice"})
    monkeypatch.setattr(sys, "stdin", io.StringIO(TOKEN + "\n"))
    code, out, err = run(capsys, "login", "--url", server.url, "--token-stdin")
    assert code == 0 and TOKEN not in out + err
    assert server.requests[-1]["headers"]["Authorization"] == f"token {TOKEN}"


def test_resolution_order(server, capsys, monkeypatch, tmp_path):
    server.on("GET", "/me", {"name": "alice"})
    cfg = tmp_path / "ti" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({"url": server.url, "token": "from-file"}))

    def sent():
        run(capsys, "me")
        return server.requests[-1]["headers"]["Authorization"]

    assert sent() == "token from-file"
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "from-workspace")
    assert sent() == "token from-workspace"
    monkeypatch.setenv("TI_TOKEN", "from-env")
    assert sent() == "token from-env"
    run(capsys, "--token", "from-flag", "me")
    assert server.requests[-1]["headers"]["Authorization"] == "token from-flag"
    # the file's token is never sent to another URL
    monkeypatch.delenv("TI_TOKEN")
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN")
    before = len(server.requests)
    code, _, err = run(capsys, "--url", server.hub + "/elsewhere", "me")
    assert code == 3 and "no token" in err and len(server.requests) == before


def test_flags_after_the_command(server, capsys):
    server.on("GET", "/me", {"name": "alice"})
    code, _, _ = run(capsys, "me", "--url", server.url, "--token", TOKEN)
    assert code == 0


def test_normalize_url():
    assert normalize_url("http://hub:8000/") == "http://hub:8000/services/ti/api/v1"
    assert normalize_url("https://x/services/ti/api/v1/") == "https://x/services/ti/api/v1"
    with pytest.raises(ValueError):
        normalize_url("hub:8000")


# -- secrets on stdin ---------------------------------------------------------------------
def test_credential_add_reads_the_password_from_stdin_and_never_echoes_it(env, capsys, monkeypatch):
    env.on("POST", "/credentials", {"id": 4, "name": "my-registry", "registry": "reg.example.com",
                                    "username": "alice"}, status=201)
    monkeypatch.setattr(sys, "stdin", io.StringIO("s3cret pass\n"))
    code, out, err = run(capsys, "credential", "add", "my-registry", "--registry", "reg.example.com",
                         "--username", "alice", "--password-stdin")
    assert code == 0, err
    assert env.find("POST", "/credentials")[0]["body"] == {
        "name": "my-registry", "registry": "reg.example.com", "username": "alice", "password": "s3cret pass"}
    assert "s3cret" not in out + err


def test_credential_add_has_no_password_flag_and_needs_a_terminal(env, capsys, monkeypatch):
    assert run(capsys, "credential", "add", "r", "--registry", "h", "--username", "u", "--password", "x")[0] == 2
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = run(capsys, "credential", "add", "r", "--registry", "h", "--username", "u")
    assert code == 2 and "--password-stdin" in err
    assert not env.find("POST", "/credentials")


def test_key_add_from_file_and_stdin(env, capsys, monkeypatch, tmp_path):
    env.on("POST", "/keys", {"id": 1, "name": "laptop", "fingerprint": "SHA256:abc"}, status=201)
    pub = tmp_path / "id.pub"
    pub.write_text("ssh-ed25519 AAAA alice@laptop\n")
    assert run(capsys, "key", "add", "laptop", "--file", str(pub))[0] == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO("ssh-rsa BBBB alice@desk\n"))
    assert run(capsys, "key", "add", "desk")[0] == 0
    assert [r["body"] for r in env.find("POST", "/keys")] == [
        {"name": "laptop", "key": "ssh-ed25519 AAAA alice@laptop"}, {"name": "desk", "key": "ssh-rsa BBBB alice@desk"}]
    monkeypatch.setattr(sys, "stdin", io.StringIO("-----BEGIN OPENSSH PRIVATE KEY-----\n"))
    assert run(capsys, "key", "add", "oops")[0] == 2


# -- the client on its own ----------------------------------------------------------------
def test_client_errors_and_paginate(server):
    server.on("GET", "/keys", lambda req: (200, {"items": [{"id": int(req["query"]["offset"])}] if int(
        req["query"]["offset"]) < 3 else [], "total": 3, "limit": 1, "offset": int(req["query"]["offset"])}))
    client = TiClient(server.hub, TOKEN, timeout=5)
    assert [k["id"] for k in client.paginate("/keys", page_size=1)] == [0, 1, 2]
    server.on("DELETE", "/keys/1", {"error": "conflict", "detail": "in use", "field": "id", "hint": "x"}, status=409)
    with pytest.raises(ApiError) as e:
        client.delete("/keys/1")
    assert (e.value.status, e.value.error, e.value.detail, e.value.field, e.value.extra) == (
        409, "conflict", "in use", "id", {"hint": "x"})
    with pytest.raises(TiConnectionError):
        TiClient("http://127.0.0.1:9", TOKEN, timeout=2).get("/me")


def test_submit_follow_of_a_job_that_never_ran(env, capsys):
    env.on("POST", "/jobs", job_doc(status="created"), status=201)
    env.on("GET", "/jobs/7", job_doc(status="error", reason="the image does not exist"))
    code, out, err = run(capsys, "job", "submit", "--name", "mnist", "-f", "--", "true")
    assert code == 4
    assert "error: the image does not exist" in err and "Traceback" not in err


def _redirect(self):
    self.send_response(302)
    self.send_header("Location", "/hub/login")
    self.send_header("Content-Length", "0")
    self.end_headers()


def _proxy_down(self):
    data = b"<html>503</html>"
    self.send_response(503)
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)


@pytest.mark.parametrize("answer,says", [(_redirect, "redirects to /hub/login"), (_proxy_down, "HTTP 503")])
def test_redirects_and_a_missing_service_are_not_followed(env, capsys, monkeypatch, answer, says):
    monkeypatch.setattr(Handler, "do_GET", answer)
    code, _, err = run(capsys, "me")
    assert code == 3 and says in err


def test_volume_size_says_when_a_volume_is_over_its_capacity():
    from ti_hub.cli.storage import size_of

    assert size_of({"capacity_gib": 1, "used_bytes": 3 << 29, "over_capacity": True}).endswith("/1G OVER")
    assert not size_of({"capacity_gib": 1, "over_capacity": False}).endswith("OVER")


def _other_program(self):
    data = b"<html><head><title>Directory listing for /</title></head></html>"
    self.send_response(404)  # Server: BaseHTTP/... (Python's http.server, as on a wrong port)
    self.send_header("Content-Type", "text/html; charset=utf-8")
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)


def test_another_program_on_the_port_is_named_with_what_was_expected(env, capsys, monkeypatch):
    """Issue 17, item 25: not a bare "HTTP 404 Not Found", but what answered and what was expected."""
    monkeypatch.setattr(Handler, "do_GET", _other_program)
    code, _, err = run(capsys, "job", "list")
    assert code == 3, err
    assert "HTTP 404" in err and "(BaseHTTP/" in err and "Directory listing for /" in err, err
    assert "the TiHub API (/services/ti/api/v1, JSON) was expected" in err, err


def _all_help(parser) -> str:
    """The help of every command and subcommand of the CLI."""
    import argparse

    texts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            texts += [_all_help(p) for p in action.choices.values()]
    return "\n".join(texts)


def test_help_examples_name_plans_images_and_kinds_that_exist():
    """Issue 17, item 21: every example of the help names a plan, image and volume kind a new TiHub has."""
    import re

    from ti_hub.domain.states import KINDS
    from ti_hub.ops.quotas import STORAGE_KINDS
    from ti_hub.service.app import DEFAULT_IMAGES, DEFAULT_PLANS

    text = _all_help(cli.build_parser())
    examples = [line.strip() for line in text.splitlines() if line.strip().startswith("ti ")]
    assert len(examples) > 30
    seen = {"plan": set(), "image": set(), "kind": set()}
    for line in examples:
        for flag, value in re.findall(r"--(plan|image|kind) ([^\s\\]+)", line):
            seen[flag].add(value)
            allowed = {"plan": {p["name"] for p in DEFAULT_PLANS}, "image": {i["name"] for i in DEFAULT_IMAGES},
                       "kind": set(STORAGE_KINDS if line.startswith("ti volume") else KINDS)}[flag]
            assert value in allowed or (flag == "image" and "/" in value), f"{value!r} does not exist: {line}"
    assert all(seen.values()), seen


def test_image_help_says_the_embedded_platform_does_not_run_images():
    text = " ".join(_all_help(cli.build_parser()).split())
    assert "records it but does not run images" in text
