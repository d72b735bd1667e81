"""The simulator's native trace and node formats: defaults, and every malformed line named by number."""

from __future__ import annotations

import pytest

from ti_hub.sim.trace import TraceError, read_jobs, read_nodes

HEADER = "submit_s,duration_s,user,device_type,devices"


def write(tmp_path, text: str, name: str = "jobs.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults_and_submission_order(tmp_path):
    jobs = read_jobs(write(tmp_path, f"{HEADER}\n30,5,ann,a100,2\n10,7,bob,,0\n"))
    assert [j.job_id for j in jobs] == [2, 1]  # sorted by submission; ids default to the row number
    cpu, gpu = jobs
    assert (cpu.device_type, cpu.devices, cpu.kind, cpu.pool, cpu.priority, cpu.preemptible) == \
        ("cpu", 0, "single", "default", 100, False)
    assert (gpu.user, gpu.submit_s, gpu.duration_s, gpu.devices, gpu.instances[0].cpu) == ("ann", 30.0, 5.0, 2, 1.0)


def test_every_optional_column(tmp_path):
    text = ("submit_s,duration_s,user,device_type,devices,instances,cpu,memory_mib,kind,pool,priority,"
            "preemptible,job_id\n0,60,ann,v100,4,3,8,4096,distributed,p2,500,yes,77\n")
    (j,) = read_jobs(write(tmp_path, text))
    assert (j.job_id, j.kind, j.pool, j.priority, j.preemptible, len(j.instances), j.devices) == \
        (77, "distributed", "p2", 500, True, 3, 12)
    assert j.instances[0].memory_mib == 4096 and j.instances[0].cpu == 8.0


MALFORMED = [
    # (name, file text, line, words in the message)
    ("empty file", "", 1, "empty"),
    ("missing column", "submit_s,duration_s,user\n1,2,ann\n", 1, "missing column devices"),
    ("unknown column", f"{HEADER},colour\n1,2,ann,a100,1,red\n", 1, "unknown column 'colour'"),
    ("not a number", f"{HEADER}\n1,2,ann,a100,1\nsoon,2,ann,a100,1\n", 3, "submit_s 'soon' is not a number"),
    ("negative duration", f"{HEADER}\n1,-2,ann,a100,1\n", 2, "duration_s '-2' must be a number >= 0"),
    ("fractional devices", f"{HEADER}\n1,2,ann,a100,0.5\n", 2, "devices '0.5' is not a whole number"),
    ("devices without a type", f"{HEADER}\n1,2,ann,,1\n", 2, "device_type is empty"),
    ("empty user", f"{HEADER}\n1,2,,a100,1\n", 2, "user is empty"),
    ("field count", f"{HEADER}\n1,2,ann,a100\n", 2, "4 fields, the header has 5"),
    ("comments count as lines", f"# a trace\n{HEADER}\n# more\n1,2,ann,a100,x\n", 4, "devices 'x'"),
    ("distributed with one instance", f"{HEADER},kind\n1,2,ann,a100,1,distributed\n", 2, "at least 2 instances"),
    ("single with two instances", f"{HEADER},instances,kind\n1,2,ann,a100,1,2,single\n", 2, "1 instance, not 2"),
    ("bad kind", f"{HEADER},kind\n1,2,ann,a100,1,batch\n", 2, "kind 'batch'"),
    ("priority out of range", f"{HEADER},priority\n1,2,ann,a100,1,0\n", 2, "1 to 1000"),
    ("bad boolean", f"{HEADER},preemptible\n1,2,ann,a100,1,maybe\n", 2, "true or false"),
    ("repeated id", f"{HEADER},job_id\n1,2,ann,a100,1,5\n1,2,ann,a100,1,5\n", 3, "job_id 5 repeats line 2"),
]


@pytest.mark.parametrize("name,text,line,words", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_trace_names_its_line(tmp_path, name, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as e:
        read_jobs(path)
    assert e.value.line == line and words in e.value.message
    assert str(e.value).startswith(f"{path}:{line}: ")


def test_nodes(tmp_path):
    nodes = read_nodes(write(tmp_path, "name,pool,device_type,devices,cpu,memory_mib\n"
                                       "g1,p1,a100,8,64,524288\nc1,,,0,32,131072\n", "nodes.csv"))
    assert [(n.name, n.pool, n.devices, n.cpu) for n in nodes] == \
        [("g1", "p1", {"a100": list(range(8))}, 64.0), ("c1", "default", {}, 32.0)]


@pytest.mark.parametrize("text,line,words", [
    ("name,devices,cpu,memory_mib\n", 1, "no nodes"),
    ("name,devices,cpu,memory_mib\nn1,0,4,1024\nn1,0,4,1024\n", 3, "repeated"),
    ("name,devices,cpu,memory_mib\nn1,2,4,1024\n", 2, "device_type is empty"),
    ("name,devices,cpu,memory_mib\nn1,0,0,1024\n", 2, "cpu '0' must be a number > 0"),
])
def test_malformed_nodes(tmp_path, text, line, words):
    with pytest.raises(TraceError) as e:
        read_nodes(write(tmp_path, text, "nodes.csv"))
    assert e.value.line == line and words in e.value.message
