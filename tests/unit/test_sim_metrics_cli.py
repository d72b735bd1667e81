"""Metrics on known numbers, and `ti-hub simulate` end to end on small files."""

from __future__ import annotations

import json
import math

import pytest

from ti_hub.launcher.app import build_parser
from ti_hub.sim import cli
from ti_hub.sim.metrics import jain, percentile, stats


@pytest.mark.parametrize("xs,expected", [
    ([1, 1, 1, 1], 1.0),
    ([1, 0, 0, 0], 0.25),  # one user got everything: 1/n
    ([1, 2, 3], 36 / 42),
    ([0.5, 0.5], 1.0),
    ([0, 0], 1.0),
])
def test_jain(xs, expected):
    assert jain(xs) == pytest.approx(expected)


def test_jain_of_nobody_is_undefined():
    assert math.isnan(jain([]))


@pytest.mark.parametrize("values,p,expected", [
    (list(range(1, 101)), 50, 50), (list(range(1, 101)), 95, 95), (list(range(1, 101)), 99, 99),
    (list(range(1, 101)), 100, 100), ([7], 99, 7), ([1, 2], 50, 1), ([1, 2], 51, 2),
])
def test_nearest_rank_percentiles(values, p, expected):
    assert percentile(values, p) == expected


def test_stats():
    assert stats([4, 1, 3, 2]) == {"mean": 2.5, "p50": 2, "p95": 4, "p99": 4, "max": 4}


NODES = "name,pool,device_type,devices,cpu,memory_mib\nn1,default,a100,1,16,65536\n"
JOBS = ("submit_s,duration_s,user,device_type,devices\n"
        "0,100,heavy,a100,1\n1,100,heavy,a100,1\n2,100,heavy,a100,1\n3,100,light,a100,1\n")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "jobs.csv").write_text(JOBS)
    return tmp_path


def test_json_summary_per_policy(files, capsys):
    rc = cli.main([str(files / "jobs.csv"), "--nodes", str(files / "nodes.csv"), "--policies", "fifo,fair",
                   "--json", "--quiet"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    by = {p["policy"]: p for p in out["policies"]}
    assert by["fifo"]["delay_s"]["max"] == 297  # light's job waits for all three heavy ones
    assert by["fair"]["delay_s"]["max"] == 298  # heavy's third job waits for light's
    assert out["settings"]["jobs"] == 4 and out["settings"]["format"] == "native"


def test_out_directory_and_progress(files, capsys):
    out = files / "out"
    rc = cli.main([str(files / "jobs.csv"), "--nodes", str(files / "nodes.csv"), "--out", str(out)])
    assert rc == 0
    captured = capsys.readouterr()
    assert "fair+backfill" in captured.out and "loaded 4 jobs" in captured.err
    assert json.loads((out / "summary.json").read_text())["settings"]["policies"] == \
        ["fifo", "no-score", "fair", "fair+backfill"]
    assert (out / "summary.csv").read_text().splitlines()[0].startswith("policy,")
    for pol in ("fifo", "no-score", "fair", "fair+backfill"):
        jobs = (out / pol / "jobs.csv").read_text().splitlines()
        assert len(jobs) == 5 and jobs[0].startswith("job_id,user")
        assert (out / pol / "users.csv").read_text().count("\n") == 3
        scores = (out / pol / "scores.csv").read_text().splitlines()
        assert scores[0] == "time_s,user,device_type,score" and len(scores) > 1
    assert not list(out.rglob(".*tmp*"))


def test_a_malformed_trace_fails_with_its_line_and_writes_nothing(files, capsys):
    (files / "jobs.csv").write_text(JOBS + "4,100,light,a100,two\n")
    out = files / "out"
    rc = cli.main([str(files / "jobs.csv"), "--nodes", str(files / "nodes.csv"), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{files / 'jobs.csv'}:6: devices 'two' is not a whole number" in err
    assert not out.exists()


@pytest.mark.parametrize("args,words", [
    (["--policies", "lifo"], "unknown policy"),
    (["--node-fraction", "0"], "--node-fraction"),
    (["--settling-hours", "0"], "--settling-hours must be > 0"),
])
def test_bad_options(files, capsys, args, words):
    rc = cli.main([str(files / "jobs.csv"), "--nodes", str(files / "nodes.csv"), *args])
    assert rc == 2 and words in capsys.readouterr().err


def test_native_needs_nodes(files, capsys):
    assert cli.main([str(files / "jobs.csv")]) == 2 and "--nodes" in capsys.readouterr().err


def test_the_ti_hub_subcommand(files):
    args = build_parser().parse_args(["simulate", str(files / "jobs.csv"), "--nodes", str(files / "nodes.csv"),
                                      "--quiet", "--json"])
    assert args.func(args) == 0


def test_an_alibaba_pod_list_is_detected_and_finds_its_node_list(tmp_path, capsys):
    (tmp_path / "openb_node_list_all_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                                                           "openb-node-0000,32000,262144,2,T4\n")
    pods = tmp_path / "openb_pod_list_default.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                    "deletion_time,scheduled_time\n"
                    "openb-pod-0000,4000,8192,2,1000,,LS,Running,0,100,0\n"
                    "openb-pod-0001,4000,8192,1,500,,BE,Running,10,20,10\n")
    assert cli.main([str(pods), "--json", "--quiet", "--policies", "fifo", "--users", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["format"] == "alibaba" and out["settings"]["devices"] == 2
    (fifo,) = out["policies"]
    assert fifo["delay_s"]["max"] == 90  # the half-GPU pod gets a whole device: it waits for the first
