"""DEV2: notebooks run in a real IPython kernel (nbclient) against the embedded platform use the magics.

The kernel gets what a workspace's kernel gets: TI_API_URL and the user's token as JUPYTERHUB_API_TOKEN;
the last test takes the environment of a real workspace process and checks that the magics are there
without %load_ext.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook
from tihub_client import processes_with_env

pytestmark = pytest.mark.e2e

REPO = str(Path(__file__).resolve().parents[2])
WIDGET = "application/vnd.jupyter.widget-view+json"
ERROR_CELL = {"tags": ["raises-exception"]}  # a cell expected to fail: nbclient carries on


def kernel_env(api_url: str, token: str, tmp_path: Path) -> dict[str, str]:
    """This process's environment without any TiHub settings, plus those of a workspace."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TI_", "JUPYTERHUB_")) and k != "PYTHONSTARTUP"}
    env.update(TI_API_URL=api_url, JUPYTERHUB_API_TOKEN=token, TI_CONFIG=str(tmp_path / "no-config.json"),
               IPYTHONDIR=str(tmp_path / "ipython"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH", "")) if p)
    return env


def run_notebook(cells: list, env: dict[str, str], cwd: Path, timeout: int = 180) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[c if isinstance(c, nbformat.NotebookNode) else new_code_cell(c) for c in cells])
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    client.execute(env=env)
    return nb


def widget_html(nb: nbformat.NotebookNode) -> list[str]:
    """The values of the HTML widgets as the frontend last heard them (nbclient keeps the widget state)."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return [m["state"].get("value", "") for m in state.values() if m["model_name"] == "HTMLModel"]


def stream(cell, name: str = "stdout") -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == name)


def one_line_error(cell) -> str:
    """The cell failed with exactly one line on stderr and no traceback anywhere."""
    assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    text = stream(cell, "stderr")
    assert "Traceback" not in text and "Traceback" not in stream(cell)
    lines = text.strip("\n").splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_magics_submit_follow_list_kill_in_a_notebook(hub, new_user, tmp_path):
    u = new_user("magic")
    # --endpoint tensorboard: the magic's way to ask for TensorBoard (a job without it gets none)
    submit = ("%%ti_submit --name nb-hello --plan cpu-small --image python-cpu --no-monitor --endpoint tensorboard\n"
              "echo hi; sleep 1\n"
              'echo "bye from $TI_JOB_ID"')
    python_job = ("%%ti_submit --name nb-mon --plan cpu-small --image python-cpu --python --env STEPS=3\n"
                  "import os, time\n"
                  "for i in range(int(os.environ['STEPS'])):\n"
                  "    print('step', i)\n"
                  "    time.sleep(0.5)\n")
    started = time.monotonic()
    steps = {
        "before": "print('ti_jobs' in get_ipython().magics_manager.magics['line'])",
        "load": "%load_ext ti_hub.magics",
        "submit": submit,
        "follow": "%ti_logs nb-hello -f",
        "jobs": "%ti_jobs --json",
        "quota": "%ti_quota",
        "vc": "%ti_vc",
        "vc_bad": new_code_cell("%ti_vc no-such-vc", metadata=ERROR_CELL),
        "tensorboards": "%ti_tensorboard nb-hello",
        "tb_outside": new_code_cell("%ti_tensorboard nb-hello --logdir /etc", metadata=ERROR_CELL),
        "kill": new_code_cell("%ti_kill nb-hello", metadata=ERROR_CELL),
        "bad_int": new_code_cell("%ti_jobs --limit lots", metadata=ERROR_CELL),
        "bad_plan": new_code_cell("%%ti_submit --name nb-bad --plan no-such-plan --image python-cpu\necho x",
                                  metadata=ERROR_CELL),
        "bad_opt": new_code_cell("%%ti_submit --plan cpu-small --bogus\necho x", metadata=ERROR_CELL),
        "python": python_job,
        # the monitor's thread updates it while this cell holds the kernel: no event loop needed
        "wait": "mon = _\njob = mon.wait(120)\nprint(job['status'], mon.running)\nprint(mon.log_text)",
        "monitor": "m2 = %ti_monitor nb-hello\nm2.wait(60)\nprint(m2.job['status'])\nprint(m2.log_text)\nm2",
        "queue": "%ti_queue",
        "form": "\n".join([
            "f = %ti_form",
            "print([v for _l, v in f.plan.options], [v for _l, v in f.image.options])",
            "f.name.value, f.plan.value, f.image.value = 'nb-form', 'cpu-small', 'python-cpu'",
            "f.command.value = 'echo from the form'",
            "f.submit()",
            "print(f.monitor.wait(60)['status'], f.monitor.log_text)",
            "f.ports.value = '1a'",
            "print(f.submit(), f.status.value)",
            "f",
        ]),
    }
    nb = run_notebook(list(steps.values()), kernel_env(hub.api_url, u.token, tmp_path), tmp_path)
    out = dict(zip(steps, nb.cells))

    assert stream(out["before"]) == "False\n"  # no magics before %load_ext outside a workspace
    # the embedded platform adds a note that it does not run the image picked (issue 17, item 21)
    m = re.fullmatch(r"submitted job (\d+) nb-hello \((\w+)\)\n(note: images are not run[^\n]*\n)?",
                     stream(out["submit"]), re.IGNORECASE)
    assert m, stream(out["submit"])
    job_id = int(m.group(1))
    assert stream(out["follow"]) == f"hi\nbye from {job_id}\n"
    listed = json.loads(stream(out["jobs"]))
    assert {j["name"]: j["status"] for j in listed}["nb-hello"] == "completed"
    assert {j["name"]: j["endpoints"] for j in listed}["nb-hello"] == ["tensorboard"]
    assert "cpu" in stream(out["quota"]).lower()
    assert stream(out["vc"]).startswith("current virtual cluster: "), stream(out["vc"])
    assert one_line_error(out["vc_bad"]).startswith("UsageError: %ti_vc: ")
    assert one_line_error(out["vc_bad"]).endswith("(field: vc)")
    assert stream(out["tensorboards"]) == "(no TensorBoard running; start one with --logdir PATH)\n"
    assert one_line_error(out["tb_outside"]).startswith("UsageError: %ti_tensorboard: ")
    assert one_line_error(out["tb_outside"]).endswith("(field: logdir)")

    kill = one_line_error(out["kill"])
    assert kill == f"UsageError: %ti_kill: job {job_id} has already ended (completed) (field: id)"
    assert one_line_error(out["bad_int"]) == "UsageError: %ti_jobs: argument --limit: invalid int value: 'lots'"
    assert one_line_error(out["bad_plan"]) == (
        "UsageError: %%ti_submit: plan 'no-such-plan' does not exist (field: plan)")
    assert one_line_error(out["bad_opt"]) == "UsageError: %%ti_submit: unrecognized arguments: --bogus"
    assert not u.ok("GET", "/jobs?name=nb-bad")["items"]

    # %%ti_submit returned a live monitor; it followed the Python job to its end, log included
    assert any(WIDGET in o.get("data", {}) for o in out["python"].outputs), out["python"].outputs
    assert re.match(r"submitted job \d+ nb-mon \(\w+\)\n", stream(out["python"]))
    assert stream(out["wait"]) == "completed False\nstep 0\nstep 1\nstep 2\n"
    mon_job = u.ok("GET", "/jobs/nb-mon")
    assert mon_job["status"] == "completed" and mon_job["command"].startswith("python3 -u -c ")
    assert stream(out["monitor"]) == f"completed\nhi\nbye from {job_id}\n"
    assert any(WIDGET in o.get("data", {}) for o in out["monitor"].outputs)
    assert "the queue is empty" in stream(out["queue"], "stderr")
    # what the browser was sent: the monitor's last state, written by its thread
    html = widget_html(nb)
    assert any("nb-mon</b>" in h and ">completed</span>" in h and "exit code</span> 0" in h for h in html), html
    assert any("<pre" in h and "step 0\nstep 1\nstep 2" in h for h in html), html

    choices, submitted, refused = stream(out["form"]).splitlines()
    assert choices == "['cpu-small', 'demo-gpu-1'] ['python-cpu', 'pytorch-gpu']"  # from the API
    assert submitted == "completed from the form"
    assert refused == "None <span style='color:#cf222e'>&#x27;1a&#x27; is not a port number (field: ports)</span>"
    assert u.ok("GET", "/jobs/nb-form")["command"] == "echo from the form"
    assert time.monotonic() - started < 170


def test_workspace_kernels_load_the_magics_by_themselves(hub, new_user, tmp_path):
    u = new_user("nbauto")
    r = u.hub_api("POST", f"/users/{u.name}/servers/nb-box", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    try:
        u.wait_server("nb-box")
        found = processes_with_env(JUPYTERHUB_USER=u.name, TI_WORKSPACE="nb-box")
        assert found, "the workspace process is not running"
        env = dict(next(iter(found.values())))
        assert Path(env["PYTHONSTARTUP"]).name == "autoload.py"
        env["IPYTHONDIR"] = str(tmp_path / "ipython")  # the workspace's own home stays untouched
        cells = run_notebook([
            "print(sorted(k for k in get_ipython().magics_manager.magics['line'] if k.split('_')[0] == 'ti'))",
            "%ti_jobs --json --kind workspace",
            "print(__doc__, [k for k in globals() if 'autoload' in k])",
        ], env, tmp_path).cells
        assert stream(cells[0]) == str(sorted(["ti", "ti_form", "ti_jobs", "ti_kill", "ti_logs", "ti_monitor",
                                               "ti_queue", "ti_quota", "ti_renew", "ti_tensorboard", "ti_vc"])) + "\n"
        listed = json.loads(stream(cells[1]))
        assert [(j["name"], j["status"]) for j in listed] == [("nb-box", "running")]
        assert stream(cells[2]) == "Automatically created module for IPython interactive environment []\n"
    finally:
        u.hub_api("DELETE", f"/users/{u.name}/servers/nb-box")
        u.wait_server("nb-box", ready=False)
