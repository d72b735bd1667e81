"""KubernetesBackend against a real API server, controller-manager and scheduler with KWOK nodes."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

from ti_hub.backends.base import InstanceSpec, LaunchSpec
from ti_hub.backends.k8s import KubernetesBackend
from ti_hub.backends.k8s import objects as ob
from ti_hub.backends.outcome import job_outcome

NS = "ti-backend"


@pytest.fixture(scope="module")
async def backend(k8s_cluster):
    k8s_cluster.namespace(NS)  # Pod Security admission enforces "restricted" here
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="backend-test",
                          finished_job_ttl=600, install_pin_policy=True)
    yield b
    await b.close()


def spec(job_id: int, nodes: list[str], *, strategy=None, workers=1, ps=0, devices=1, device_type="A100",
         name="train", env=None) -> LaunchSpec:
    roles = [("ps", i) for i in range(ps)] + [("worker", i) for i in range(workers)]
    insts = tuple(InstanceSpec(i, r, ri, nodes[i % len(nodes)], tuple(range(devices if r == "worker" else 0)),
                               2.0, 4096, {}) for i, (r, ri) in enumerate(roles))
    return LaunchSpec(job_id, "alice", name, "distributed" if len(roles) > 1 else "single", strategy,
                      "python train.py", "busybox:1.36", dict(env or {}), insts, device_type=device_type)


async def wait_for(pred, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def pods_of(cluster, job_id: int | None, ns: str = NS) -> list[dict]:
    sel = f"{ob.LABEL_JOB_ID}={job_id}" if job_id is not None else ob.LABEL_JOB_ID
    out = cluster.kubectl("get", "pods", "-n", ns, "-l", sel, "-o", "json")
    return json.loads(out.stdout)["items"]


def signal(cluster, pod: dict, code: int) -> None:
    cluster.kubectl("annotate", "pod", "-n", NS, pod["metadata"]["name"], f"kwok.ti-hub.io/exit-code={code}")


async def until(fn, pred, what, timeout=30.0):
    """Call the coroutine function ``fn`` until ``pred`` holds for its result."""
    deadline = time.monotonic() + timeout
    while True:
        got = await fn()
        if pred(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {got!r}")
        await asyncio.sleep(0.2)


async def outcome(backend, job_id, state, strategy, roles):
    obs = await backend.observe_job(job_id, state)
    return job_outcome(strategy, roles, obs)


async def test_capacity_reads_nodes_and_subtracts_other_workloads(backend, k8s_cluster):
    nodes = {n.name: n for n in await backend.capacity()}
    assert len(nodes["a100-0"].devices["A100"]) == 8 and nodes["a100-0"].pool == "default"
    assert len(nodes["t4-1"].devices["T4"]) == 4 and nodes["t4-1"].cpu == 16.0
    assert nodes["cpu-0"].devices == {} and nodes["cpu-0"].memory_mib == 64 * 1024
    # someone else's pod on t4-1, asking for 2 devices and 3 cores
    other = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-tihub", "namespace": "default"},
             "spec": {"nodeName": "t4-1", "containers": [{"name": "c", "image": "x", "resources": {
                 "limits": {"nvidia.com/gpu": "2"}, "requests": {"cpu": "3", "memory": "1Gi"}}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
    k8s_cluster.apply([other])
    try:
        async def t4_1():
            return {n.name: n for n in await backend.capacity()}["t4-1"]
        t4 = await until(t4_1, lambda n: len(n.devices.get("T4", [])) == 2, "capacity to drop")
        assert len(t4.devices["T4"]) == 2 and t4.cpu == 13.0 and t4.memory_mib == 63 * 1024
    finally:
        k8s_cluster.kubectl("delete", "pod", "not-tihub", "-n", "default", "--grace-period=0", "--force",
                            check=False)
    # steady state: one LIST per watch, no polling
    assert backend.nodes.lists == 1 and backend.pods.lists == 1


async def test_a_node_given_to_a_vc_is_labelled_and_capacity_follows(backend, k8s_cluster):
    """RES2: TiHub labels the node with its VC (a merge patch: the node's other labels stay); back to default,
    the label goes."""
    async def t4_0():
        return {n.name: n for n in await backend.capacity()}["t4-0"]

    before = json.loads(k8s_cluster.kubectl("get", "node", "t4-0", "-o", "json").stdout)["metadata"]["labels"]
    try:
        await backend.assign_machine("t4-0", "vc-lab")
        assert (await until(t4_0, lambda n: n.pool == "vc-lab", "the VC label")).pool == "vc-lab"
        labels = json.loads(k8s_cluster.kubectl("get", "node", "t4-0", "-o", "json").stdout)["metadata"]["labels"]
        assert labels == {**before, backend.pool_label: "vc-lab"}
    finally:
        await backend.assign_machine("t4-0", "default")
    assert (await until(t4_0, lambda n: n.pool == "default", "the label removed")).pool == "default"
    labels = json.loads(k8s_cluster.kubectl("get", "node", "t4-0", "-o", "json").stdout)["metadata"]["labels"]
    assert backend.pool_label not in labels


async def test_allreduce_gang_is_one_indexed_job_and_a_headless_service(backend, k8s_cluster):
    nodes = ["a100-0", "a100-1"]
    sp = spec(101, nodes, strategy="allreduce", workers=4, devices=2)
    before = backend.writes
    state = await backend.launch(sp)
    assert backend.writes - before == 2  # the Job and the Service
    assert state["roles"] == [{"job": ob.base_name(101, "alice", "train"), "offset": 0, "count": 4}]
    jobs = json.loads(k8s_cluster.kubectl("get", "jobs", "-n", NS, "-l", f"{ob.LABEL_JOB_ID}=101",
                                          "-o", "json").stdout)["items"]
    assert len(jobs) == 1 and jobs[0]["spec"]["completionMode"] == "Indexed" and jobs[0]["spec"]["completions"] == 4
    svc = json.loads(k8s_cluster.kubectl("get", "service", state["service"], "-n", NS, "-o", "json").stdout)
    assert svc["spec"]["clusterIP"] == "None" and svc["metadata"]["ownerReferences"][0]["kind"] == "Job"

    pods = await wait_for(lambda: (p := pods_of(k8s_cluster, 101)) and len(p) == 4 and
                          all(x["status"].get("phase") == "Running" for x in p) and p, what="4 running pods")
    for p in pods:
        # each pod on the node TiHub placed its index on (the pin policy), not just somewhere in the gang's set
        index = int(p["metadata"]["labels"][ob.COMPLETION_INDEX])
        assert p["spec"]["nodeSelector"]["kubernetes.io/hostname"] == nodes[index % 2] == p["spec"]["nodeName"]
        assert p["spec"]["nodeSelector"]["ti-hub.io/device-type"] == "A100"
    assert backend.unpinned_pods == 0
    for p in pods:
        c = p["spec"]["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "2"
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert p["spec"]["securityContext"]["runAsNonRoot"] is True
        assert p["spec"]["automountServiceAccountToken"] is False
        assert p["spec"]["subdomain"] == state["service"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["MASTER_ADDR"] == f"{state['roles'][0]['job']}-0.{state['service']}" and env["WORLD_SIZE"] == "4"
    roles = ["worker"] * 4
    assert await outcome(backend, 101, state, "allreduce", roles) is None

    for p in pods:
        signal(k8s_cluster, p, 0)
    res = await until(lambda: outcome(backend, 101, state, "allreduce", roles), lambda r: r is not None, "the end")
    assert res == ("completed", 0, "all 4 instances exited normally")
    text, end = await backend.logs(101, state, 2)
    assert "kwok fake container: working" in text and end == len(text.encode())
    # finished: its objects stay (logs readable) until their TTL; stop deletes nothing
    writes = backend.writes
    await backend.stop(101, state)
    assert backend.writes == writes


async def test_a_failed_or_oom_killed_instance_fails_the_gang_and_stop_deletes_it(backend, k8s_cluster):
    sp = spec(102, ["a100-2"], strategy="allreduce", workers=2, devices=1)
    state = await backend.launch(sp)
    pods = await wait_for(lambda: (p := pods_of(k8s_cluster, 102)) and len(p) == 2 and
                          all(x["status"].get("phase") == "Running" for x in p) and p, what="2 running pods")
    victim = next(p for p in pods if p["metadata"]["labels"][ob.COMPLETION_INDEX] == "1")
    signal(k8s_cluster, victim, 137)
    res = await until(lambda: outcome(backend, 102, state, "allreduce", ["worker", "worker"]),
                      lambda r: r is not None, "the failure")
    assert res[0] == "failed" and res[1] == 137 and "worker 1 was killed: out of memory (limit 4096 MiB)" == res[2]
    await backend.stop(102, state, grace_seconds=2)
    await wait_for(lambda: not pods_of(k8s_cluster, 102), what="pods deleted")
    assert not json.loads(k8s_cluster.kubectl("get", "jobs,services", "-n", NS, "-l", f"{ob.LABEL_JOB_ID}=102",
                                              "-o", "json").stdout)["items"]


async def test_secret_entries_go_in_a_secret_of_the_jobs_own_and_go_with_it(backend, k8s_cluster):
    import dataclasses

    sp = dataclasses.replace(spec(130, ["t4-0"], strategy="ps", workers=1, ps=1, devices=1, device_type="T4",
                                  env={"PLAIN": "1"}), secret_env={"WANDB_API_KEY": "s3cret-value"})
    before = backend.writes
    state = await backend.launch(sp)
    assert backend.writes - before == 5  # two Jobs, the Service, the Secret (made first) and its owner
    name = ob.env_secret_name(sp)
    secret = json.loads(k8s_cluster.kubectl("get", "secret", name, "-n", NS, "-o", "json").stdout)
    assert secret["data"] == {"WANDB_API_KEY": base64.b64encode(b"s3cret-value").decode()}
    owner = secret["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Job" and owner["name"] == state["roles"][0]["job"]
    # nothing anyone listing jobs or pods reads holds the value: the pods take it by reference
    jobs = k8s_cluster.kubectl("get", "jobs", "-n", NS, "-l", f"{ob.LABEL_JOB_ID}=130", "-o", "json").stdout
    pods = await wait_for(lambda: (p := pods_of(k8s_cluster, 130)) and len(p) == 2 and p, what="2 pods")
    assert "s3cret-value" not in jobs + json.dumps(pods)
    for p in pods:
        env = {e["name"]: e for e in p["spec"]["containers"][0]["env"]}
        assert env["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": name, "key": "WANDB_API_KEY"}
        assert env["PLAIN"]["value"] == "1"
    # stopping deletes the Jobs; the garbage collector takes the Secret with them
    await backend.stop(130, state, grace_seconds=1)
    await wait_for(lambda: k8s_cluster.kubectl("get", "secret", name, "-n", NS, check=False).returncode != 0,
                   timeout=60, what="the job's Secret to go with its Jobs")
    # launched again (a resume): a Secret of its own again
    state = await backend.launch(sp)
    assert json.loads(k8s_cluster.kubectl("get", "secret", name, "-n", NS, "-o", "json").stdout)["metadata"][
        "ownerReferences"][0]["name"] == state["roles"][0]["job"]
    await backend.stop(130, state, grace_seconds=1)


async def test_parameter_server_job_is_one_indexed_job_per_role(backend, k8s_cluster):
    sp = spec(103, ["a100-3"], strategy="ps", workers=2, ps=1, devices=1)
    before = backend.writes
    state = await backend.launch(sp)
    assert backend.writes - before == 3
    assert [(r["offset"], r["count"]) for r in state["roles"]] == [(0, 1), (1, 2)]
    pods = await wait_for(lambda: (p := pods_of(k8s_cluster, 103)) and len(p) == 3 and p, what="3 pods")
    ps_pod = next(p for p in pods if p["metadata"]["labels"][ob.LABEL_ROLE] == "ps")
    assert "nvidia.com/gpu" not in ps_pod["spec"]["containers"][0]["resources"]["limits"]
    ps_env = {e["name"]: e.get("value") for e in ps_pod["spec"]["containers"][0]["env"]}
    tf = json.loads(ps_env["TF_CONFIG"])  # one ps: its TF_CONFIG is a plain variable
    assert tf["task"] == {"type": "ps", "index": 0} and len(tf["cluster"]["worker"]) == 2
    assert tf["cluster"]["ps"] == [f"{state['roles'][0]['job']}-0.{state['service']}:2222"]
    worker = next(p for p in pods if p["metadata"]["labels"][ob.LABEL_ROLE] == "worker")
    assert "TF_CONFIG=" in worker["spec"]["containers"][0]["command"][2]  # per index, from the prelude
    await backend.stop(103, state, grace_seconds=1)
    await wait_for(lambda: not pods_of(k8s_cluster, 103), what="pods deleted")


async def test_reconcile_readopts_known_jobs_and_deletes_orphans(backend, k8s_cluster):
    known_state = await backend.launch(spec(104, ["a100-0"], name="kept"))
    assert (await backend.launch(spec(105, ["a100-1"], name="orphan")))["roles"][0]["pod"]
    await wait_for(lambda: len(pods_of(k8s_cluster, 104)) == 1 and len(pods_of(k8s_cluster, 105)) == 1,
                   what="pods")
    # a new backend, as after a ti service restart
    fresh = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="backend-test")
    try:
        alive = await fresh.reconcile({104: known_state})
        assert alive == {104: True}
        await wait_for(lambda: not pods_of(k8s_cluster, 105), what="orphan deleted")
        assert len(pods_of(k8s_cluster, 104)) == 1
        # relaunching a job whose pod survived a crash replaces it instead of doubling it
        [old] = pods_of(k8s_cluster, 104)
        again = await fresh.launch(spec(104, ["a100-0"], name="kept"))
        assert again["roles"] == known_state["roles"] and again["roles"][0]["pod"] is True

        def live():
            return [p for p in pods_of(k8s_cluster, 104) if not p["metadata"].get("deletionTimestamp")]
        [new] = await wait_for(lambda: (lambda ps: ps if len(ps) == 1 and ps[0]["metadata"]["uid"] !=
                                        old["metadata"]["uid"] else None)(live()), what="the old pod replaced")
        assert new["metadata"]["labels"][ob.LABEL_RUN] == known_state["roles"][0]["job"]
        await fresh.stop(104, again, grace_seconds=1)
        assert not live()
    finally:
        await fresh.close()
    # one-pod jobs make no Kubernetes Job at all
    assert not json.loads(k8s_cluster.kubectl("get", "jobs", "-n", NS, "-l", f"{ob.LABEL_JOB_ID} in (104,105)",
                                              "-o", "json").stdout)["items"]


def network_policies(cluster, ns: str) -> dict[str, dict]:
    out = cluster.kubectl("get", "networkpolicies", "-n", ns, "-o", "json")
    return {p["metadata"]["name"]: p for p in json.loads(out.stdout)["items"]}


def job_uid(cluster, ns: str, name: str) -> str:
    return json.loads(cluster.kubectl("get", "job", name, "-n", ns, "-o", "json").stdout)["metadata"]["uid"]


async def test_without_the_pin_policy_the_backend_says_so_and_each_gang_gets_its_own_network_policy(k8s_cluster):
    ns = k8s_cluster.namespace("ti-nopin")  # the pin policy's binding does not reach this namespace
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=ns, installation="nopin",
                          network_policy_per_job=True)
    try:
        from kubernetes_asyncio import client as k8s
        assert await b._check_pin_policy(k8s.CoreV1Api(await b.api()), wait=0) is False
        before = b.writes
        state = await b.launch(spec(106, ["a100-3", "a100-2"], strategy="allreduce", workers=2, devices=1))
        assert b.writes - before == 3  # the Job, its NetworkPolicy, its Service
        assert b.pod_security_enforced is True  # the namespace enforces "restricted"; the first launch checked
        await wait_for(lambda: b.unpinned_pods == 2, what="two unpinned pods seen")
        before = b.writes
        state2 = await b.launch(spec(107, ["a100-3", "a100-2"], strategy="allreduce", workers=2, devices=1))
        single = await b.launch(spec(108, ["a100-3"]))
        assert b.writes - before == 3 + 1  # a single pod has no peer: no policy, no Service
        pols = network_policies(k8s_cluster, ns)
        assert set(pols) == {ob.base_name(106, "alice", "train"), ob.base_name(107, "alice", "train")}
        pol = pols[ob.base_name(106, "alice", "train")]
        first = state["roles"][0]["job"]
        # owned by the job's first Job: the garbage collector deletes it with the job
        assert [(o["kind"], o["name"], o["uid"]) for o in pol["metadata"]["ownerReferences"]] == [
            ("Job", first, job_uid(k8s_cluster, ns, first))]
        sel = pol["spec"]["podSelector"]["matchLabels"]
        assert pol["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": sel}}]}]
        assert pol["spec"]["egress"] == [{"to": [{"podSelector": {"matchLabels": sel}}]}]
        # as the API server stored the pods: it selects job 106's, not the same owner's other jobs'
        for job_id, n, selected in ((106, 2, True), (107, 2, False), (108, 1, False)):
            pods = await wait_for(lambda: (p := pods_of(k8s_cluster, job_id, ns)) and len(p) == n and p,
                                  what=f"pods of job {job_id}")
            assert all((sel.items() <= p["metadata"]["labels"].items()) is selected for p in pods), job_id
        await b.stop(106, state, grace_seconds=1)
        await wait_for(lambda: ob.base_name(106, "alice", "train") not in network_policies(k8s_cluster, ns),
                       what="job 106's policy to go with its Job")
        assert ob.base_name(107, "alice", "train") in network_policies(k8s_cluster, ns)
        await b.stop(107, state2, grace_seconds=1)
        await b.stop(108, single, grace_seconds=1)
    finally:
        await b.close()


async def test_a_gang_relaunched_after_a_crash_gets_its_service_and_policy_owned_by_the_new_job(k8s_cluster):
    ns = k8s_cluster.namespace("ti-relaunch")
    settings = dict(kubeconfig=str(k8s_cluster.kubeconfig), namespace=ns, installation="relaunch",
                    network_policy_per_job=True, pin_to_placement=False)
    b, fresh = KubernetesBackend(**settings), KubernetesBackend(**settings)
    sp = spec(109, ["a100-1", "a100-0"], strategy="allreduce", workers=2, devices=1)
    try:
        await b.launch(sp)
        name = ob.base_name(109, "alice", "train")
        old_uid = job_uid(k8s_cluster, ns, name)
        # as after a ti service restart: the same job again, its Job, Service and policy still there
        state = await fresh.launch(sp)
        new_uid = job_uid(k8s_cluster, ns, name)
        assert new_uid != old_uid


        def assert_owned_by(uid: str) -> None:
            svc = json.loads(k8s_cluster.kubectl("get", "service", name, "-n", ns, "-o", "json").stdout)
            for obj in (svc, network_policies(k8s_cluster, ns)[name]):
                assert [o["uid"] for o in obj["metadata"]["ownerReferences"]] == [uid], obj["kind"]
        assert_owned_by(new_uid)  # however fast the garbage collector took the old ones
        # the Job gone but its Service and policy left (orphaned): both are replaced, not kept nor refused
        k8s_cluster.kubectl("delete", "job", name, "-n", ns, "--cascade=orphan", "--wait=true")
        before = fresh.writes
        state = await fresh.launch(sp)
        assert fresh.writes - before == 1 + 3 + 3  # the Job; for each: a 409, the delete, the create
        assert_owned_by(job_uid(k8s_cluster, ns, name))
        k8s_cluster.kubectl("delete", "pods", "-n", ns, "-l", f"{ob.LABEL_JOB_ID}=109,controller-uid={new_uid}")
        await fresh.stop(109, state, grace_seconds=1)
        await wait_for(lambda: not network_policies(k8s_cluster, ns), what="the policy to go with the job")
    finally:
        await b.close()
        await fresh.close()


async def test_the_first_launch_checks_that_the_namespace_enforces_pod_security(backend, k8s_cluster):
    from kubernetes_asyncio import client as k8s

    assert await backend._check_pod_security(k8s.CoreV1Api(await backend.api())) is True
    open_ns = k8s_cluster.namespace("ti-open", restricted=False)
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=open_ns, installation="open")
    try:
        assert await b._check_pod_security(k8s.CoreV1Api(await b.api())) is False  # a warning says so
        out = k8s_cluster.kubectl("get", "pods", "-n", open_ns, "-o", "name")
        assert out.stdout.strip() == ""  # a dry run: the probe is never stored
    finally:
        await b.close()


async def test_the_first_launches_at_once_all_wait_for_the_pin_policy(k8s_cluster):
    ns = k8s_cluster.namespace("ti-pin-race")
    b = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=ns, installation="pin-race",
                          install_pin_policy=True, pin_policy_name="ti-hub-pin-race")
    try:
        # a cycle's admissions launch concurrently; none may create its Job before the policy is in force
        states = await asyncio.gather(*(b.launch(spec(110 + k, ["a100-3", "a100-2"], strategy="allreduce",
                                                      workers=2, devices=1, name=f"race{k}")) for k in range(4)))
        pods = await wait_for(lambda: (p := pods_of(k8s_cluster, None, ns)) and len(p) == 8 and p, what="8 pods")
        for p in pods:
            assert "kubernetes.io/hostname" in p["spec"]["nodeSelector"], p["metadata"]["name"]
        assert b.unpinned_pods == 0
        for k, state in enumerate(states):
            await b.stop(110 + k, state, grace_seconds=1)
    finally:
        await b.close()
        for kind in ("mutatingadmissionpolicybinding", "mutatingadmissionpolicy"):
            k8s_cluster.kubectl("delete", kind, "ti-hub-pin-race", check=False)


async def test_a_jobs_registry_credential_becomes_its_pods_pull_secret_and_goes_with_it(backend, k8s_cluster):
    import dataclasses

    sp = dataclasses.replace(spec(140, ["a100-3"]), registry_auth=("registry.example.org", "bot", "pull-pw-140"))
    before = backend.writes
    state = await backend.launch(sp)
    assert backend.writes - before == 3  # the Secret, the pod, the Secret's owner
    name = ob.pull_secret_name(sp.job_id, sp.owner, sp.name)
    secret = json.loads(k8s_cluster.kubectl("get", "secret", name, "-n", NS, "-o", "json").stdout)
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    assert config["auths"]["registry.example.org"]["password"] == "pull-pw-140"
    pod = await wait_for(lambda: (p := pods_of(k8s_cluster, 140)) and p[0], what="its pod")
    owner = secret["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", pod["metadata"]["name"], pod["metadata"]["uid"])
    assert pod["spec"]["imagePullSecrets"] == [{"name": name}] and "pull-pw-140" not in json.dumps(pod)
    await backend.stop(140, state, grace_seconds=1)
    await wait_for(lambda: k8s_cluster.kubectl("get", "secret", name, "-n", NS, check=False).returncode != 0,
                   timeout=60, what="the pull Secret to go with its pod")


async def test_a_one_pod_job_is_a_pod_of_tihubs_own_kept_for_its_ttl_then_swept(backend, k8s_cluster):
    import dataclasses

    sp = dataclasses.replace(spec(150, ["a100-1"], devices=2, env={"PLAIN": "1"}), secret_env={"TOKEN": "tk-150"})
    before = backend.writes
    state = await backend.launch(sp)
    assert backend.writes - before == 3  # the Secret, the pod, the Secret's owner: no Job
    run = ob.base_name(150, "alice", "train")
    assert state["roles"] == [{"job": run, "offset": 0, "count": 1, "pod": True}]
    assert not json.loads(k8s_cluster.kubectl("get", "jobs", "-n", NS, "-l", f"{ob.LABEL_JOB_ID}=150",
                                              "-o", "json").stdout)["items"]
    [pod] = await wait_for(lambda: (p := pods_of(k8s_cluster, 150)) and p[0]["status"].get("phase") == "Running"
                           and p, what="its pod running")
    # pinned in its own spec (no pin policy involved), restricted, the environment a Job's pod would have
    assert pod["spec"]["nodeSelector"][ob.HOSTNAME_LABEL] == "a100-1" == pod["spec"]["nodeName"]
    assert pod["spec"]["hostname"] == f"{run}-0" and pod["metadata"]["labels"][ob.LABEL_RUN] == run
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True and not pod["metadata"].get("ownerReferences")
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["JOB_COMPLETION_INDEX"]["value"] == "0" and env["PLAIN"]["value"] == "1"
    assert env["TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == ob.env_secret_name(sp)
    assert "tk-150" not in json.dumps(pod)
    assert await outcome(backend, 150, state, None, ["worker"]) is None
    signal(k8s_cluster, pod, 3)
    res = await until(lambda: outcome(backend, 150, state, None, ["worker"]), lambda r: r is not None, "the end")
    assert res[0] == "failed" and res[1] == 3
    text, _ = await backend.logs(150, state, 0)
    assert "kwok fake container" in text
    # ended: stop deletes nothing (its logs stay readable), and the sweep leaves it until its TTL is over
    writes = backend.writes
    await backend.stop(150, state)
    assert backend.writes == writes and await backend.sweep_finished_pods() == []
    assert await backend.sweep_finished_pods(now=time.time() + backend.finished_job_ttl + 5) == [
        pod["metadata"]["name"]]
    await wait_for(lambda: not pods_of(k8s_cluster, 150), what="the pod swept")
    await wait_for(lambda: k8s_cluster.kubectl("get", "secret", ob.env_secret_name(sp), "-n", NS,
                                               check=False).returncode != 0,
                   timeout=60, what="the job's Secret to go with its pod")
    lost = await until(lambda: backend.observe_job(150, state), lambda o: o.instances[0].state == "lost", "lost")
    assert lost.instances[0].reason == "its pod was deleted"
    # only the process that launches sweeps: one that only watches (an API process reading logs) does not
    assert backend._sweeper is not None
    reader = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="backend-test")
    try:
        await reader.logs(150, state, 0)
        assert reader._sweeper is None
    finally:
        await reader.close()


async def test_stop_deletes_a_running_one_pod_job_and_jobs_stay_jobs_when_asked(backend, k8s_cluster):
    state = await backend.launch(spec(151, ["a100-2"]))
    await wait_for(lambda: (p := pods_of(k8s_cluster, 151)) and p[0]["status"].get("phase") == "Running",
                   what="its pod running")
    await backend.stop(151, state, grace_seconds=1)
    await wait_for(lambda: not pods_of(k8s_cluster, 151), what="the pod deleted")
    jobs = KubernetesBackend(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="backend-test",
                             launch_pods=False)
    try:
        state = await jobs.launch(spec(152, ["a100-2"]))
        assert "pod" not in state["roles"][0]
        [job] = json.loads(k8s_cluster.kubectl("get", "jobs", "-n", NS, "-l", f"{ob.LABEL_JOB_ID}=152",
                                               "-o", "json").stdout)["items"]
        [pod] = await wait_for(lambda: (p := pods_of(k8s_cluster, 152)) and p, what="the Job's pod")
        assert pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        assert pod["metadata"]["labels"][ob.LABEL_RUN] == state["roles"][0]["job"]
        await jobs.stop(152, state, grace_seconds=1)
        await wait_for(lambda: not pods_of(k8s_cluster, 152), what="the Job's pod deleted")
    finally:
        await jobs.close()
