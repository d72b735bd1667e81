"""The Alibaba GPU 2023 reader: the mapping onto TiHub's model and the seeded user assignment."""

from __future__ import annotations

from collections import Counter

import pytest

from ti_hub.sim import alibaba
from ti_hub.sim.trace import TraceError

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,96000,786432,8,G2
openb-node-0002,64000,262144,2,T4
"""
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
              "scheduled_time")
PODS = f"""{POD_HEADER}
openb-pod-0000,12000,16384,1,460,,LS,Running,100,900,110
openb-pod-0001,4000,8192,0,0,,BE,Running,50,80,60
openb-pod-0002,8000,30517,2,1000,T4,BE,Failed,200,260,
openb-pod-0003,88000,327680,8,1000,,Burstable,Succeeded,300,400,300
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "openb_node_list_all_node.csv").write_text(NODES)
    pods = tmp_path / "openb_pod_list_default.csv"
    pods.write_text(PODS)
    return tmp_path, pods


def test_nodes_one_pool_and_one_gpu_type_by_default(files):
    d, _ = files
    nodes = alibaba.read_nodes(d / "openb_node_list_all_node.csv")
    assert [(n.pool, n.devices, n.cpu, n.memory_mib) for n in nodes] == [
        ("default", {}, 32.0, 262144), ("default", {"gpu": list(range(8))}, 96.0, 786432),
        ("default", {"gpu": [0, 1]}, 64.0, 262144)]
    by_model = alibaba.read_nodes(d / "openb_node_list_all_node.csv", gpu_types="model")
    assert [sorted(n.devices) for n in by_model] == [[], ["G2"], ["T4"]]


def test_pods_map_onto_whole_devices_times_and_preemptibility(files):
    d, pods = files
    jobs = alibaba.read_pods(pods, alibaba.read_nodes(d / "openb_node_list_all_node.csv"))
    by_id = {j.job_id: j for j in jobs}
    assert [j.job_id for j in jobs] == [2, 1, 3, 4]  # by creation time
    shared = by_id[1]  # 0.46 of a GPU in the original cluster: one whole device here
    assert (shared.devices, shared.device_type, shared.instances[0].cpu, shared.submit_s, shared.duration_s,
            shared.preemptible) == (1, "gpu", 12.0, 100.0, 790.0, False)
    cpu_only = by_id[2]
    assert (cpu_only.device_type, cpu_only.devices, cpu_only.preemptible, cpu_only.duration_s) == \
        ("cpu", 0, True, 20.0)
    never_scheduled = by_id[3]  # its run time is the time it was wanted: deletion - creation
    assert (never_scheduled.duration_s, never_scheduled.devices, never_scheduled.preemptible) == (60.0, 2, True)
    assert by_id[4].devices == 8 and not by_id[4].preemptible and {j.kind for j in jobs} == {"single"}
    kept = alibaba.read_pods(pods, alibaba.read_nodes(d / "openb_node_list_all_node.csv"), skip_unscheduled=True)
    assert sorted(j.job_id for j in kept) == [1, 2, 4]


def test_gpu_models_from_the_spec_when_asked(files):
    d, pods = files
    nodes = alibaba.read_nodes(d / "openb_node_list_all_node.csv", gpu_types="model")
    jobs = {j.job_id: j for j in alibaba.read_pods(pods, nodes)}
    assert jobs[3].device_type == "T4"  # its gpu_spec
    assert jobs[1].device_type in ("G2", "T4") and jobs[2].device_type == "cpu"


def test_the_user_draw_is_seeded_and_skewed():
    a = alibaba.zipf_users(5000, 20, 1.0, seed=1)
    assert a == alibaba.zipf_users(5000, 20, 1.0, seed=1)
    assert a != alibaba.zipf_users(5000, 20, 1.0, seed=2)
    counts = Counter(a)
    assert counts["user0"] > 2 * counts["user1"] * 0.8 and counts["user0"] > 5 * counts["user9"]
    flat = Counter(alibaba.zipf_users(5000, 20, 0.0, seed=1))  # skew 0: uniform
    assert max(flat.values()) < 1.5 * min(flat.values())


def test_pods_get_the_same_users_whatever_the_gpu_mapping(files):
    d, pods = files
    any_gpu = alibaba.read_pods(pods, alibaba.read_nodes(d / "openb_node_list_all_node.csv"), seed=7)
    models = alibaba.read_pods(pods, alibaba.read_nodes(d / "openb_node_list_all_node.csv", "model"), seed=7)
    assert [j.user for j in any_gpu] == [j.user for j in models]


@pytest.mark.parametrize("text,line,words", [
    (f"{POD_HEADER}\nopenb-pod-0000,12000,16384,1,460,,LS,Running,100,90,110\n", 2,
     "deletion_time 90 is before scheduled_time 110"),
    (f"{POD_HEADER}\nopenb-pod-0000,12000,16384,one,460,,LS,Running,100,900,110\n", 2, "num_gpu 'one'"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,1,1000\n", 1,
     "missing columns creation_time, deletion_time"),
])
def test_malformed_pod_lists_name_the_line(files, text, line, words):
    d, pods = files
    pods.write_text(text)
    with pytest.raises(TraceError) as e:
        alibaba.read_pods(pods, alibaba.read_nodes(d / "openb_node_list_all_node.csv"))
    assert e.value.line == line and words in e.value.message
