"""Virtual clusters' pure parts (RES2): a machine split into VC slices, and the per-user cap, draining VCs and
revoked users at admission."""

from __future__ import annotations

from ti_hub.backends.base import NodeCapacity
from ti_hub.backends.local.slices import MACHINE_LABEL, split, split_all
from ti_hub.scheduler.core import VCRules, cycle
from ti_hub.scheduler.model import Allocation, Instance, Request, Running


def machine(gpus: int = 4, cpu: float = 8.0, mem: int = 8000) -> NodeCapacity:
    return NodeCapacity("host", "default", {"demo-gpu": list(range(gpus))}, cpu, mem)


def req(job_id: int, owner: str = "u1", gpus: int = 1, pool: str = "vc-a", n: int = 1) -> Request:
    return Request(job_id, owner, "single", pool, "demo-gpu", (Instance(gpus, 0.5, 100),) * n, order=job_id)


def test_a_machine_without_assignments_is_one_node():
    assert split(machine(), []) == [machine()]
    assert split(machine(), [("other", "demo-gpu", 0, 1, "vc-a", False)]) == [machine()]


def test_devices_split_by_vc_with_a_proportional_share_of_cores_and_memory():
    rows = [("host", "demo-gpu", 1, 2, "vc-a", False), ("host", "demo-gpu", 2, 2, "vc-a", False),
            ("host", "demo-gpu", 3, 3, "vc-b", False)]
    default, a, b = split(machine(), rows)
    assert (default.name, default.pool, default.devices) == ("host", "default", {"demo-gpu": [0]})
    assert (a.name, a.pool, a.devices, a.cpu, a.memory_mib) == ("host@vc2", "vc-a", {"demo-gpu": [1, 2]}, 4.0, 4000)
    assert (b.name, b.pool, b.devices, b.cpu, b.memory_mib) == ("host@vc3", "vc-b", {"demo-gpu": [3]}, 2.0, 2000)
    assert (default.cpu, default.memory_mib) == (2.0, 2000)
    assert sum(n.cpu for n in (default, a, b)) == 8.0 and all(n.labels[MACHINE_LABEL] == "host" for n in (a, b))


def test_a_draining_device_belongs_to_no_slice_and_an_all_draining_slice_takes_nothing_new():
    rows = [("host", "demo-gpu", 0, 2, "vc-a", True)]
    default, a = split(machine(), rows)
    assert default.devices == {"demo-gpu": [1, 2, 3]} and a.devices == {} and not a.schedulable
    assert a.cpu == 2.0  # its running work keeps its share of cores


def test_every_device_given_away_leaves_default_without_devices():
    rows = [("host", "demo-gpu", d, 2, "vc-a", False) for d in range(4)]
    nodes = split_all([machine()], rows)
    assert nodes[0].devices == {} and nodes[1].devices == {"demo-gpu": [0, 1, 2, 3]}


def test_a_vcs_jobs_run_only_on_its_slice():
    nodes = split(machine(), [("host", "demo-gpu", 3, 2, "vc-a", False)])
    res = cycle(nodes, [], [req(1), req(2)])
    assert [a.job_id for a in res.admitted] == [1]
    assert res.admitted[0].placement[0].node == "host@vc2" and res.admitted[0].placement[0].devices == (3,)
    assert "in pool vc-a" in res.pending[0].reason


def test_the_per_user_cap_makes_a_job_wait_with_the_reason_without_blocking_others():
    nodes = [NodeCapacity("n1", "vc-a", {"demo-gpu": list(range(8))}, 64.0, 10**6)]
    rules = VCRules(caps={("vc-a", "demo-gpu"): 2})
    res = cycle(nodes, [], [req(1, gpus=2), req(2), req(3, owner="u2", gpus=2)], vc=rules)
    assert sorted(a.job_id for a in res.admitted) == [1, 3]
    assert res.pending[0].job_id == 2
    assert res.pending[0].reason == "cap of 2 demo-gpu in VC vc-a: you hold 2, this job needs 1"


def test_the_cap_counts_what_users_hold_already_and_only_in_its_vc():
    nodes = [NodeCapacity("n1", "vc-a", {"demo-gpu": list(range(4))}, 64.0, 10**6),
             NodeCapacity("n2", "vc-b", {"demo-gpu": list(range(4))}, 64.0, 10**6)]
    rules = VCRules(caps={("vc-a", "demo-gpu"): 1}, held={("u1", "vc-a", "demo-gpu"): 1})
    res = cycle(nodes, [Allocation("n1", "demo-gpu", (0,), 0.5, 100)], [req(1), req(2, pool="vc-b")], vc=rules)
    assert [a.job_id for a in res.admitted] == [2]
    assert res.pending[0].reason.startswith("cap of 1 demo-gpu in VC vc-a: you hold 1")


def test_a_distributed_job_over_the_cap_waits():
    nodes = [NodeCapacity("n1", "vc-a", {"demo-gpu": list(range(8))}, 64.0, 10**6)]
    res = cycle(nodes, [], [req(1, gpus=2, n=2)], vc=VCRules(caps={("vc-a", "demo-gpu"): 3}))
    assert res.admitted == [] and "this job needs 4" in res.pending[0].reason


def test_preemption_gives_back_the_victims_cap_use():
    nodes = [NodeCapacity("n1", "vc-a", {"demo-gpu": [0]}, 64.0, 10**6)]
    victim = Running(9, "u1", "single", "vc-a", "demo-gpu", 50, True, 0.0,
                     (Allocation("n1", "demo-gpu", (0,), 0.5, 100),))
    rules = VCRules(caps={("vc-a", "demo-gpu"): 1}, held={("u1", "vc-a", "demo-gpu"): 1})
    res = cycle(nodes, list(victim.placement), [req(1)], running=[victim], vc=rules)
    assert res.pending and res.pending[0].reason.startswith("cap of 1")  # the cap is checked before preempting
    res = cycle(nodes, list(victim.placement), [req(2, owner="u2")], running=[victim], vc=rules)
    assert [a.job_id for a in res.admitted] == [2] and res.preempted == [9]


def test_a_draining_vc_and_a_revoked_user_admit_nothing_new():
    nodes = [NodeCapacity("n1", "vc-a", {"demo-gpu": list(range(4))}, 64.0, 10**6),
             NodeCapacity("n2", "vc-b", {"demo-gpu": list(range(4))}, 64.0, 10**6)]
    rules = VCRules(draining=frozenset({"vc-a"}), revoked=frozenset({("u1", "vc-b")}))
    res = cycle(nodes, [], [req(1), req(2, pool="vc-b"), req(3, owner="u2", pool="vc-b")], vc=rules)
    assert [a.job_id for a in res.admitted] == [3]
    reasons = {p.job_id: p.reason for p in res.pending}
    assert reasons[1].startswith("VC vc-a is draining") and reasons[2].startswith("access to VC vc-b was revoked")


def merge_patch(target, patch):
    """RFC 7386, as the API server applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, val in patch.items():
        if val is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), val)
    return out


def test_kubernetes_labels_a_node_with_its_vc_and_capacity_reads_it():
    from ti_hub.backends.k8s.capacity import capacity
    from ti_hub.backends.k8s.objects import KubeSettings, pool_label_patch

    s = KubeSettings()
    assert pool_label_patch(s.pool_label, "vc-a") == {"metadata": {"labels": {"ti-hub.io/pool": "vc-a"}}}
    node = {"metadata": {"name": "gpu-1", "labels": {"ti-hub.io/device-type": "t4", "kubernetes.io/arch": "amd64"}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    node = merge_patch(node, pool_label_patch(s.pool_label, "vc-a"))
    assert node["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"  # the other labels stay
    assert capacity([node], [], s)[0].pool == "vc-a"
    node = merge_patch(node, pool_label_patch(s.pool_label, "default"))  # back to default: the label goes
    assert "ti-hub.io/pool" not in node["metadata"]["labels"] and capacity([node], [], s)[0].pool == "default"


def test_the_spawn_form_offers_the_vcs_and_groups_plans_by_vc():
    from ti_hub.spawner.form import options_from_form, render_form

    plan = {"kinds": ["workspace"], "device_type": "cpu", "device_count": 0, "cpu": 1, "memory_mib": 512}
    opts = {"plans": [{**plan, "name": "cpu-small", "pool": "default"}, {**plan, "name": "lab-cpu", "pool": "lab-vc"}],
            "vc": {"vc": "lab-vc", "usable": ["default", "lab-vc"]}}
    html = render_form(opts, "dev-box")
    assert '<select class="form-select" id="ti-vc" name="vc">' in html
    assert '<option value="lab-vc" selected>' in html
    assert html.index('<optgroup label="lab-vc">') < html.index('<optgroup label="default">')  # current VC first
    assert options_from_form({"plan": ["lab-cpu"], "vc": ["lab-vc"]})["vc"] == "lab-vc"
    one = render_form({**opts, "vc": {"vc": "default", "usable": ["default"]}, "plans": opts["plans"][:1]})
    assert 'name="vc"' not in one and "optgroup" not in one  # one VC: nothing to choose
