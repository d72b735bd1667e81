"""The notebook magics' pure parts: the monitor's view of API job documents, the log tail, what a cell or
the form becomes, one-line errors; and the monitor's poller against a scripted client."""

from __future__ import annotations

import datetime as dt
import shlex
import threading
import time

import pytest

from ti_hub.cli.client import ApiError, TiConnectionError
from ti_hub.magics import AUTOLOAD_FILE, autoload_env, commands, core
from ti_hub.magics.submission import cell_command, form_submission, magic_submission

NOW = dt.datetime(2025, 3, 4, 12, 0, 0, tzinfo=dt.timezone.utc)


def iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def job(**kw) -> dict:
    base = {"id": 7, "name": "mnist", "kind": "single", "status": "running", "reason": "", "instances": 1,
            "device_type": "cpu", "devices_per_instance": 0, "cpu_per_instance": 1.0,
            "memory_mib_per_instance": 4096, "image": "python-cpu", "exit_code": None, "placement": None,
            "created_at": iso(NOW - dt.timedelta(minutes=3)), "queued_at": iso(NOW - dt.timedelta(minutes=3)),
            "started_at": None, "finished_at": None}
    base.update(kw)
    return base


# -- the monitor's view --------------------------------------------------------------------------
def test_a_queued_job_shows_its_place_estimate_and_reason():
    queued = job(status="queued", reason="waiting for 1 free demo-gpu (0 of 4 free)", queue={
        "queue": "default/demo-gpu/single", "position": 2, "ahead": 1,
        "estimated_start": iso(NOW + dt.timedelta(minutes=5)), "pinned": False})
    v = core.view_of(queued, now=NOW)
    assert v.status == "queued" and not v.final and v.color == core.COLORS["queued"]
    assert v.status_text == "queued: waiting for 1 free demo-gpu (0 of 4 free)"
    assert v.queue.startswith("position 2 in default/demo-gpu/single · 1 job ahead · estimated start ")
    assert v.queue.endswith(" (in 5m)")
    assert dict(v.metrics)["waited"] == "3m" and "run time" not in dict(v.metrics)
    assert v.title == "job 7 mnist"


def test_queue_line_first_in_line_pinned_provisional_and_no_estimate():
    q = {"queue": "p/cpu/single", "position": 1, "ahead": 0, "estimated_start": None, "pinned": True}
    assert core.queue_line(job(status="queued", queue=q), NOW) == (
        "position 1 in p/cpu/single · first in line · no start estimate yet · pinned by an admin")
    q = {"queue": "p/cpu/single", "position": 3, "ahead": 2, "provisional": True}
    assert core.queue_line(job(status="queued", queue=q), NOW) == (
        "position 3 in p/cpu/single · 2 jobs ahead · no start estimate yet · "
        "position not yet confirmed by the scheduler")
    assert core.queue_line(job(status="running", queue=q), NOW) == ""  # only a queued job has a place
    late = {"position": 1, "ahead": 0, "estimated_start": iso(NOW - dt.timedelta(seconds=90))}
    assert core.queue_line(job(status="queued", queue=late), NOW).endswith(" (1m30s ago)")


def test_a_running_distributed_job_shows_run_time_devices_and_placement():
    running = job(kind="distributed", strategy="allreduce", instances=2, device_type="demo-gpu",
                  devices_per_instance=2, started_at=iso(NOW - dt.timedelta(seconds=75)),
                  placement={"instances": [{"node": "n1", "devices": [0, 1]}, {"node": "n2", "devices": [2, 3]}]})
    v = core.view_of(running, now=NOW, instance=1)
    m = dict(v.metrics)
    assert m["run time"] == "1m15s" and m["waited"] == "1m45s"
    assert m["devices"] == "2× demo-gpu per instance × 2" and m["instances"] == "2 (allreduce)"
    assert m["placement"] == "0: n1 [0,1]; 1: n2 [2,3]"
    assert m["per instance"] == "1 CPU, 4G memory"
    assert "exit code" not in m and v.queue == "" and v.status_text == "running"
    assert v.log_label == "log of instance 1 of 2"


def test_an_ended_job_says_how_with_its_exit_code():
    failed = job(status="failed", reason="worker 0 exited with code 3", exit_code=3,
                 started_at=iso(NOW - dt.timedelta(seconds=10)), finished_at=iso(NOW - dt.timedelta(seconds=4)))
    v = core.view_of(failed, now=NOW)
    assert v.final and v.color == core.COLORS["failed"]
    assert v.status_text == "failed (exit code 3): worker 0 exited with code 3"
    assert dict(v.metrics)["run time"] == "6s" and dict(v.metrics)["exit code"] == "3"
    done = core.view_of(job(status="completed", reason="completed", exit_code=0), now=NOW)
    assert done.status_text == "completed" and done.reason == ""  # the reason only repeated the status
    killed = core.view_of(job(status="killed", reason="killed before it started"), now=NOW)
    assert killed.status_text == "killed: killed before it started" and "run time" not in dict(killed.metrics)
    assert dict(killed.metrics)["waited"] == "3m"  # up to now: it never started, it has no finished_at


def test_no_log_before_the_job_runs():
    assert core.waiting_for_logs(job(status="queued"))
    assert not core.waiting_for_logs(job(status="running", started_at=iso(NOW)))
    assert core.waiting_for_logs(job(status="killed"))  # ended in the queue
    assert not core.waiting_for_logs(job(status="completed", started_at=iso(NOW)))


def test_log_tail_keeps_the_last_lines_and_the_last_carriage_return_part():
    tail = core.LogTail(max_lines=3)
    tail.feed("one\ntwo\nthr")
    assert tail.text == "one\ntwo\nthr"
    tail.feed("ee\nepoch 1: 10%\repoch 1: 50%\repoch 1: 100%\nfi")
    assert tail.text == "three\nepoch 1: 100%\nfi"
    tail.feed("ve\r\n")
    assert tail.text == "three\nepoch 1: 100%\nfive"


def test_html_is_escaped():
    v = core.view_of(job(name="<b>x</b>", reason="<script>"), log="<img src=x>", now=NOW, note="a & b")
    info, log = core.render_info(v), core.render_log(v)
    assert "<b>x</b>" not in info and "&lt;b&gt;x&lt;/b&gt;" in info and "&lt;script&gt;" in info
    assert "a &amp; b" in info and "&lt;img src=x&gt;" in log and "<pre" in log
    assert "(no output yet)" in core.render_log(core.view_of(job(), now=NOW))
    assert "(no output)" in core.render_log(core.view_of(job(status="completed"), now=NOW))


# -- what a cell becomes ---------------------------------------------------------------------------
def test_a_shell_cell_is_the_command_as_written():
    assert cell_command("\n  echo hi\n  sleep 1   \n\n") == "echo hi\nsleep 1"
    assert cell_command("   \n") is None


def test_a_python_cell_runs_unbuffered_and_survives_quoting():
    code = "import sys\nprint('it''s', \"ok\", sys.argv)\n"
    cmd = cell_command(code, python=True)
    assert cmd.startswith("python3 -u -c ")
    assert shlex.split(cmd) == ["python3", "-u", "-c", code]


def test_magic_options_are_the_clis():
    args = commands.parse_submit("--name run-1 --plan cpu-small --image python-cpu --env A=1 --env B=x=y "
                                 "--volume data:/mnt/data:ro --port 40001,40002 --estimated-duration 1h30m "
                                 "--kind distributed --workers 3 --no-monitor")
    body = magic_submission(args, "python3 /abs/train.py\n")
    assert body == {"name": "run-1", "kind": "distributed", "workers": 3, "image": "python-cpu",
                    "estimated_duration": 5400, "plan": "cpu-small", "command": "python3 /abs/train.py",
                    "env": {"A": "1", "B": "x=y"}, "ports": [40001, 40002],
                    "volumes": [{"volume": "data", "mount_path": "/mnt/data", "read_only": True}]}
    assert args.no_monitor and not args.python and not args.follow


def test_magic_submission_names_itself_and_refuses_what_cannot_run():
    body = magic_submission(commands.parse_submit("--plan p"), "echo", now=dt.datetime(2025, 3, 4, 5, 6, 7))
    assert body["name"] == "nb-0304-050607"
    with pytest.raises(commands.MagicError, match="cell is empty"):
        magic_submission(commands.parse_submit("--plan p"), "  \n")
    with pytest.raises(commands.MagicError, match="not after `--`"):
        magic_submission(commands.parse_submit("--plan p -- echo hi"), "echo")
    assert magic_submission(commands.parse_submit("--template t"), "")["template"] == "t"


@pytest.mark.parametrize("line, message", [
    ("--bogus", "unrecognized arguments: --bogus"),
    ("--workers many", "argument --workers: invalid int value: 'many'"),
    ("--volume data", "argument --volume: 'data' is not VOLUME:/mount/path[:ro]"),
    ("--name 'unclosed", "cannot read the options: No closing quotation"),
])
def test_bad_options_are_one_line(line, message):
    with pytest.raises(commands.MagicError) as e:
        commands.parse_submit(line)
    assert str(e.value) == message


def test_line_magics_parse_with_the_cli_tree():
    args = commands.parse("ti_logs", "mnist -f --tail 5")
    assert (args.job, args.follow, args.tail) == ("mnist", True, 5)
    assert commands.parse("ti_jobs", "--all --json").all
    with pytest.raises(commands.MagicError, match="the following arguments are required: JOB"):
        commands.parse("ti_kill", "")
    with pytest.raises(commands.HelpShown):
        commands.parse("ti_quota", "--help")


def test_the_vc_magic_shows_or_chooses_the_current_vc():
    """%ti_vc is `ti vc use`: no name shows the current VC and the usable ones, a name chooses it."""
    shown = commands.parse("ti_vc", "")
    assert shown.vc is None and not shown.json and shown.func.__name__ == "cmd_use"
    chosen = commands.parse("ti_vc", "team-a --json")
    assert (chosen.vc, chosen.json) == ("team-a", True)
    with pytest.raises(commands.MagicError, match="unrecognized arguments: extra"):
        commands.parse("ti_vc", "team-a extra")


def test_the_renew_magic_renews_this_workspace_or_a_named_one(monkeypatch):
    """%ti_renew is `ti workspace renew`: without a name, the workspace the kernel runs in."""
    from ti_hub.cli import workspaces

    args = commands.parse("ti_renew", "")
    assert args.workspace is None and args.func.__name__ == "cmd_renew"
    assert commands.parse("ti_renew", "my-desk --json").workspace == "my-desk"
    monkeypatch.setenv("JUPYTERHUB_USER", "ann")
    monkeypatch.setenv("JUPYTERHUB_SERVER_NAME", "desk")
    assert workspaces.this_workspace() == "desk"
    monkeypatch.setenv("JUPYTERHUB_SERVER_NAME", "")
    assert workspaces.this_workspace() == "default"
    monkeypatch.delenv("JUPYTERHUB_USER")
    assert workspaces.this_workspace() is None


def test_error_line_names_the_field_and_the_quota():
    e = ApiError(403, "over_quota", "over quota for devices", "plan",
                 {"resource": "devices", "requested": 4, "used": 0, "limit": 3})
    assert commands.error_line(e) == (
        "over quota for devices (field: plan); resource devices, requested 4, used 0, limit 3")
    assert "token was refused" in commands.error_line(ApiError(401, "auth", "not logged in"))
    assert commands.error_line(TiConnectionError("cannot reach TiHub")) == "cannot reach TiHub"


def test_form_values_become_a_submission():
    body = form_submission({"name": " f-1 ", "kind": "distributed", "strategy": "ps", "workers": 2, "ps": 1,
                            "plan": "cpu-small", "image": "python-cpu", "command": "print(1)", "python": True,
                            "env": "A=1\n# a comment\n\nB=2", "volumes": "out:/mnt/out\n", "ports": "40001, 40002",
                            "estimated_duration": "90m"})
    assert body == {"name": "f-1", "plan": "cpu-small", "image": "python-cpu", "kind": "distributed",
                    "strategy": "ps", "workers": 2, "ps": 1, "command": "python3 -u -c 'print(1)\n'",
                    "env": {"A": "1", "B": "2"}, "ports": [40001, 40002], "estimated_duration": 5400,
                    "volumes": [{"volume": "out", "mount_path": "/mnt/out", "read_only": False}]}
    assert form_submission({"kind": "single", "strategy": "ps", "workers": 4}) == {"kind": "single"}
    with pytest.raises(commands.MagicError, match=r"'X' is not KEY=VALUE \(field: env\)"):
        form_submission({"env": "X"})
    with pytest.raises(commands.MagicError, match=r"\(field: estimated_duration\)"):
        form_submission({"estimated_duration": "soon"})


def test_the_autoload_file_is_packaged():
    assert autoload_env() == {"PYTHONSTARTUP": AUTOLOAD_FILE}
    with open(AUTOLOAD_FILE, encoding="utf-8") as f:
        source = f.read()
    namespace: dict = {}
    exec(compile(source, AUTOLOAD_FILE, "exec"), namespace)  # a plain Python prompt: does nothing
    assert set(namespace) == {"__builtins__"}


# -- the monitor's poller --------------------------------------------------------------------------
class ScriptedClient:
    """Answers GET /jobs/7 from a script of job documents, and the log from a growing text."""

    def __init__(self, jobs: list, log: str = "", alerts: list | None = None):
        self.jobs, self.log, self.calls = list(jobs), log, []
        self.alerts = list(alerts or [])
        self.lock = threading.Lock()

    def get(self, path, body=None, params=None):
        with self.lock:
            self.calls.append((path, dict(params or {})))
            if path == "/alerts":
                return {"items": self.alerts, "total": len(self.alerts), "limit": 500, "offset": 0}
            if path.endswith("/logs"):
                start = 0 if "tail" in (params or {}) else params["offset"]
                written = self.log[:self.written]
                return {"text": written[start:], "offset": len(written), "finished": False}
            if path.endswith("/metrics"):
                return {"instances": [{"instance": 0, "cpu_cores": 0.97, "memory_bytes": 300 << 20, "gpus": None,
                                       "note": ""}]}
            doc = self.jobs.pop(0) if len(self.jobs) > 1 else self.jobs[0]
            if isinstance(doc, Exception):
                raise doc
            self.written = doc.get("_written", len(self.log))
            return doc

    def post(self, path, body=None, params=None):
        with self.lock:
            self.calls.append(("POST " + path, {}))
            self.jobs = [job(status="killing", started_at=iso(NOW), _written=0)]
            return self.jobs[0]


def test_the_monitor_follows_a_job_to_its_end_in_a_thread():
    pytest.importorskip("ipywidgets")
    from ti_hub.magics.monitor import JobMonitor

    started = iso(NOW - dt.timedelta(seconds=5))
    client = ScriptedClient([
        job(status="queued", queue={"position": 1, "ahead": 0}),
        TiConnectionError("cannot reach TiHub at X"),
        job(status="running", started_at=started, _written=6),
        job(status="completed", exit_code=0, started_at=started, finished_at=iso(NOW), _written=12),
    ], log="step1\nstep2\n")
    mon = JobMonitor(client, 7, job=job(status="queued"), interval=0.01)
    final = mon.wait(10)
    assert not mon.running and final["status"] == "completed"
    assert mon.log_text == "step1\nstep2"
    logs = [params for path, params in client.calls if path.endswith("/logs")]
    assert logs[0] == {"tail": 200} and logs[1] == {"offset": 6} and logs[-1] == {"offset": 12}
    # the round after the end read the log's rest (nothing more came): then it stopped; metrics only while running
    assert [p for p, _ in client.calls if not p.endswith("/logs") and p != "/alerts"] == [
        "/jobs/7", "/jobs/7", "/jobs/7", "/jobs/7/metrics", "/jobs/7", "/jobs/7"] and len(logs) == 3
    assert mon.usage is None  # not shown once the job has ended
    assert ">completed</span>" in mon._info.value and "step2" in mon._log.value
    assert mon._kill_button.disabled and mon._stop_button.disabled
    mon.close()


def test_the_monitor_names_the_open_alerts_of_its_job():
    pytest.importorskip("ipywidgets")
    from ti_hub.magics.monitor import JobMonitor

    started = iso(NOW - dt.timedelta(seconds=5))
    mine = {"id": 3, "job_id": 7, "open": True, "subject": "Job 7 (me/x) is running past its declared duration",
            "fired_at": "2026-11-27T03:00:00Z"}
    other = {**mine, "id": 4, "job_id": 8, "subject": "Job 8 (me/y) is waiting longer than estimated"}
    client = ScriptedClient([job(status="running", started_at=started)], alerts=[mine, other])
    mon = JobMonitor(client, 7, interval=0.01)
    deadline = time.monotonic() + 10
    while "alert:" not in mon._info.value and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "&#9888; alert: Job 7 (me/x) is running past its declared duration (since 2026-11-27T03:00:00Z)" \
        in mon._info.value
    assert "Job 8" not in mon._info.value
    client.alerts = []  # cleared: the line goes
    deadline = time.monotonic() + 10
    while "alert:" in mon._info.value and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "alert:" not in mon._info.value
    mon.close()


def test_the_monitor_stops_when_asked_or_when_the_job_is_gone():
    pytest.importorskip("ipywidgets")
    from ti_hub.magics.monitor import JobMonitor

    mon = JobMonitor(ScriptedClient([job(status="queued")]), 7, interval=0.01)
    mon.stop()
    mon.wait(5)
    assert not mon.running
    assert "stopped watching" in mon._info.value
    mon.close()

    gone = JobMonitor(ScriptedClient([ApiError(404, "not_found", "no job 7", "id")]), 7, interval=0.01)
    gone.wait(5)
    assert not gone.running and "no job 7 (field: id)" in gone._info.value and gone._kill_button.disabled
    gone.close()

    client = ScriptedClient([job(status="running", started_at=iso(NOW), _written=0)])
    killer = JobMonitor(client, 7, interval=5)
    killer.kill()
    assert ("POST /jobs/7/kill", {}) in client.calls and "killing" in killer._info.value
    killer.close()
    assert killer.wait(5) and not killer.running  # close() stops the thread


def test_the_monitor_offers_kill_only_while_a_kill_can_do_something():
    """Issue 17 item 23: Kill stayed active on a job that had ended (a monitor no longer polling: stopped
    watching, or between polls) and while the job was already being killed."""
    pytest.importorskip("ipywidgets")
    from ti_hub.magics.monitor import JobMonitor

    class EndedClient(ScriptedClient):
        def post(self, path, body=None, params=None):
            with self.lock:
                self.calls.append(("POST " + path, {}))
            raise ApiError(409, "conflict", "job 7 has already ended (completed)", "id")

    started = iso(NOW - dt.timedelta(seconds=5))
    client = EndedClient([job(status="running", started_at=started, _written=0)])
    mon = JobMonitor(client, 7, job=job(status="running", started_at=started), interval=0.01)
    mon.stop()
    mon.wait(5)
    assert not mon._kill_button.disabled  # a running job, as far as the monitor knows
    client.jobs = [job(status="completed", exit_code=0, started_at=started, finished_at=iso(NOW))]
    mon.kill()  # the job ended meanwhile: the monitor learns it, says it, and Kill is no longer offered
    assert mon.job["status"] == "completed" and ">completed</span>" in mon._info.value
    assert "has already ended" in mon._info.value and mon._kill_button.disabled
    mon.close()

    killing = JobMonitor(ScriptedClient([job(status="running", started_at=started, _written=0)]), 7, interval=5)
    killing.kill()  # answered "killing": pressing Kill again would do nothing
    assert killing.job["status"] == "killing" and killing._kill_button.disabled
    killing.close()
