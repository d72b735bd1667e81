"""`ti cluster` against canned JSON (GET /cluster/usage, docs/api.md): the tables, --days, --json, and the
honest note about what is measured."""

from __future__ import annotations

import json

import test_cli

# the fake server and its fixtures (pytest finds fixtures by the module's names)
server, env, clean_env, run = test_cli.server, test_cli.env, test_cli.clean_env, test_cli.run

USAGE = {
    "days": 7, "since": "2030-01-01T00:00:00+00:00", "idle_threshold": 5.0, "sampled_at": "2030-01-08T00:00:00+00:00",
    "measuring": True,
    "vcs": [{"vc": "default", "device_type": "a100", "total": 8, "unschedulable": 0, "free": 5, "used": 3, "idle": 1,
             "unmeasured": 0, "booked_hours": 12.5, "idle_hours": 2.5, "unmeasured_hours": 0.0,
             "idle_percent": 20.0}],
    "users": [{"user": "alice", "used": 3, "idle": 1, "unmeasured": 0, "booked_hours": 12.5, "idle_hours": 2.5,
               "unmeasured_hours": 0.0, "idle_percent": 20.0},
              {"user": "bob", "used": 0, "idle": 0, "unmeasured": 0, "booked_hours": 0.0, "idle_hours": 0.0,
               "unmeasured_hours": 0.0, "idle_percent": None}],
    "machines": [{"machine": "gpu01", "address": "10.1.2.3", "pools": ["default"], "device_types": ["a100"],
                  "total": 8, "unschedulable": 0, "free": 5, "used": 3, "idle": 1, "unmeasured": 0,
                  "booked_hours": 12.5, "idle_hours": 2.5, "unmeasured_hours": 0.0, "idle_percent": 20.0,
                  "running": [{"id": 7, "name": "mnist", "owner": "alice", "kind": "single", "device_type": "a100",
                               "devices": [0, 1], "since": "2030-01-07T00:00:00+00:00"},
                              {"id": None, "name": None, "owner": None, "kind": "workspace",
                               "device_type": "a100", "devices": [5], "since": None}]}]}


def test_cluster_prints_the_three_tables_and_what_is_measured(env, capsys):
    env.on("GET", "/cluster/usage", USAGE)
    code, out, err = run(capsys, "cluster", "--days", "7")
    assert code == 0, err
    assert env.find("GET", "/cluster/usage")[-1]["query"] == {"days": "7"}
    assert "virtual clusters:" in out and "users:" in out and "machines:" in out
    assert "IDLE NOW" in out and "IDLE %" in out and "10.1.2.3" in out
    assert "alice/mnist[0,1]" in out and "(another user's)[5]" in out
    assert "under 5 % utilization, measured" in err and "unmeasured devices" in err and "past 7 days" in err


def test_cluster_subcommands_and_json(env, capsys):
    env.on("GET", "/cluster/usage", USAGE)
    code, out, _ = run(capsys, "cluster", "users")
    assert code == 0 and "alice" in out and "bob" in out and "machines:" not in out and "10.1.2.3" not in out
    assert env.find("GET", "/cluster/usage")[-1]["query"] == {}  # the server's default window
    code, out, _ = run(capsys, "cluster", "nodes", "--json", "--days", "3")
    assert code == 0 and json.loads(out)[0]["machine"] == "gpu01"
    assert env.find("GET", "/cluster/usage")[-1]["query"] == {"days": "3"}
    code, out, _ = run(capsys, "cluster", "--json", "vcs")  # --json before the subcommand counts too
    assert code == 0 and json.loads(out) == USAGE["vcs"]
    code, out, _ = run(capsys, "cluster", "--json")
    assert code == 0 and json.loads(out) == USAGE


def test_cluster_says_when_nothing_is_measured(env, capsys):
    env.on("GET", "/cluster/usage", {**USAGE, "measuring": False})
    code, _, err = run(capsys, "cluster", "vcs")
    assert code == 0 and "NOT measured now" in err
