"""Kubernetes names and manifests: pure, no cluster."""

from __future__ import annotations

import dataclasses
import itertools
import random
import subprocess

import pytest

from ti_hub.backends.base import InstanceSpec, LaunchSpec, Mount
from ti_hub.backends.envs import instance_envs
from ti_hub.backends.k8s import objects as ob
from ti_hub.backends.k8s.capacity import parse_quantity, pod_requests
from ti_hub.backends.k8s.names import DNS1123_LABEL, safe_name


@pytest.mark.parametrize("a,b", [
    (("alice-prod",), ("alice", "prod")),
    (("alice", "prod-x"), ("alice-prod", "x")),
    (("Bob",), ("bob",)),
    (("a.b",), ("a_b",)),
    (("x" * 80,), ("x" * 81,)),
    (("ti", 1, "u", "n"), ("ti", "1", "u-n")),
])
def test_safe_names_of_colliding_texts_differ(a, b):
    na, nb = safe_name(*a), safe_name(*b)
    assert na != nb
    for n in (na, nb):
        assert DNS1123_LABEL.match(n) and len(n) <= 63


def test_safe_names_are_stable_bounded_and_unique_over_many_inputs():
    rnd = random.Random(4)
    alphabet = "abAB01-_.@ "
    seen: dict[str, tuple] = {}
    for _ in range(20000):
        parts = tuple("".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 70))) for _ in range(rnd.randint(1, 3)))
        n = safe_name(*parts, max_len=40)
        assert DNS1123_LABEL.match(n) and len(n) <= 40
        assert seen.setdefault(n, parts) == parts
    assert safe_name("alice", "prod") == safe_name("alice", "prod")
    with pytest.raises(ValueError):
        safe_name("a\x00b")


def launch(strategy, workers, ps=0, devices=2, mounts=(), scratch=()) -> LaunchSpec:
    roles = [("ps", i) for i in range(ps)] + [("worker", i) for i in range(workers)]
    insts = tuple(InstanceSpec(i, r, ri, f"node-{i % 2}", tuple(range(devices if r == "worker" else 0)), 4.0, 8192, {})
                  for i, (r, ri) in enumerate(roles))
    return LaunchSpec(7, "Alice.Smith", "my_job", "distributed", strategy, "echo hi", "img:1", {"LR": "0.1"},
                      insts, tuple(mounts), tuple(scratch), 256, "A100", "default")


def env_in_shell(job: dict, index: int) -> dict[str, str]:
    """Run the container's own shell command with the index Kubernetes would give, and read its env back."""
    c = job["spec"]["template"]["spec"]["containers"][0]
    base = {e["name"]: e["value"] for e in c["env"]}
    script = c["command"][2].replace("echo hi", "env -0")
    out = subprocess.run(["/bin/sh", "-c", script], env={**base, "JOB_COMPLETION_INDEX": str(index), "PATH": "/usr/bin:/bin"},
                         capture_output=True, check=True).stdout.decode()
    env = dict(kv.split("=", 1) for kv in out.split("\0") if kv)
    return {k: v for k, v in env.items() if k not in ("PWD", "SHLVL", "_", "JOB_COMPLETION_INDEX", "PATH", "LR")}


@pytest.mark.parametrize("strategy,workers,ps", [("allreduce", 4, 0), ("ps", 3, 2), (None, 1, 0)])
def test_each_pod_gets_exactly_the_environment_instance_envs_defines(strategy, workers, ps):
    s = ob.KubeSettings(namespace="users")
    spec = launch(strategy, workers, ps)
    objs = ob.job_objects(s, spec)
    jobs = [o for o in objs if o["kind"] == "Job"]
    hosts = ob.instance_hosts(s, spec)
    if strategy == "ps":
        want = instance_envs("ps", workers, ps, hosts[0], None, [s.tf_port] * ps, [s.tf_port] * workers, hosts=hosts)
    else:
        want = instance_envs(strategy, workers, 0, hosts[0], s.master_port)
    got = []
    for job in jobs:
        for i in range(job["spec"]["completions"]):
            got.append(env_in_shell(job, i))
    assert got == want
    assert sum(1 for o in objs if o["kind"] == "Service") == (1 if workers + ps > 1 else 0)
    assert len(objs) <= 3


def test_pods_are_restricted_and_volumes_are_only_tihubs_own():
    s = ob.KubeSettings(namespace="users", uid=1234, gid=100)
    spec = launch("allreduce", 2, mounts=[Mount("/ignored", "/data", True, "dataset", 5, "bob/imagenet"),
                                          Mount("/ignored", "/work", False, "filesystem", 6, "alice/w")],
                  scratch=["/scratch"])
    job = next(o for o in ob.job_objects(s, spec) if o["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1234, "runAsGroup": 100, "fsGroup": 100,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False and c["securityContext"]["privileged"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False and pod["hostNetwork"] is False
    text = repr(job)
    assert "hostPath" not in text and "/ignored" not in text  # a path never becomes a volume on Kubernetes
    claims = [v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [{"claimName": ob.pvc_name(5, "bob/imagenet"), "readOnly": True},
                      {"claimName": ob.pvc_name(6, "alice/w"), "readOnly": False}]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is True and mounts["/work"]["readOnly"] is False
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}} in pod["volumes"]
    assert c["resources"]["limits"] == {"cpu": "4000m", "memory": "8192Mi", "nvidia.com/gpu": "2"}
    assert c["resources"]["requests"] == c["resources"]["limits"]
    assert pod["nodeSelector"] == {"ti-hub.io/device-type": "A100"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["node-0", "node-1"]
    # and each completion index's own node, for the pin policy
    nodes = [i.node for i in spec.instances]
    assert job["spec"]["template"]["metadata"]["annotations"][ob.ANN_PLACEMENT] == ",".join(nodes)
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


@pytest.mark.parametrize("strategy,workers,ps", [("ps", 2, 1), (None, 1, 0)])
def test_secret_entries_live_in_the_jobs_own_secret_and_pods_read_them_by_key(strategy, workers, ps):
    import dataclasses

    s = ob.KubeSettings(namespace="users")
    spec = dataclasses.replace(launch(strategy, workers, ps), secret_env={"WANDB_API_KEY": "s3cret-v", "LR": "x"})
    objs = ob.job_objects(s, spec)
    (secret,) = [o for o in objs if o["kind"] == "Secret"]
    jobs = [o for o in objs if o["kind"] == "Job"]
    assert secret["metadata"]["name"] == ob.env_secret_name(spec) and secret["metadata"]["namespace"] == "users"
    assert secret["stringData"] == {"WANDB_API_KEY": "s3cret-v", "LR": "x"} and secret["type"] == "Opaque"
    assert secret["metadata"]["labels"][ob.LABEL_JOB_ID] == "7"
    assert "s3cret-v" not in repr(jobs) + repr(spec) and "s3cret-v" not in str(spec.to_json())
    for job in jobs:
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in env if "valueFrom" in e}
        assert refs == {k: {"name": secret["metadata"]["name"], "key": k} for k in ("LR", "WANDB_API_KEY")}
        # the secret entry wins over the plain one of the same name, as on the local backend
        assert [e["name"] for e in env].count("LR") == 1
    # no secret entries, no Secret
    assert not [o for o in ob.job_objects(s, launch(strategy, workers, ps)) if o["kind"] == "Secret"]


def test_names_of_jobs_leave_room_for_pod_hostnames():
    for owner, name in itertools.product(["a" * 255, "Bob"], ["n" * 63, "x"]):
        spec = LaunchSpec(123456789, owner, name, "distributed", "ps", "true", "i", {}, ())
        for job in ob.role_job_names(spec).values():
            assert len(f"{job}-63") <= 63 and DNS1123_LABEL.match(job)


def test_quantities_and_pod_requests():
    assert parse_quantity("500m") == parse_quantity("0.5") and parse_quantity("64Gi") == 64 << 30
    assert parse_quantity("1e3") == 1000 and parse_quantity("1k") == 1000 and parse_quantity(None) == 0
    with pytest.raises(ValueError):
        parse_quantity("lots")
    pod = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                                   {"resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "2"}}}],
                    "initContainers": [{"resources": {"requests": {"cpu": "4"}}}]}}
    cpu, mem, dev = pod_requests(pod, "nvidia.com/gpu")
    assert (cpu, mem, dev) == (4, 1 << 30, 2)  # init containers run alone: their max counts if larger


@pytest.mark.parametrize("strategy,workers,ps", [("allreduce", 3, 0), ("ps", 2, 1), (None, 1, 0)])
def test_every_pod_of_an_rdma_plan_asks_for_the_rdma_device_and_no_other_does(strategy, workers, ps):
    rdma = dataclasses.replace(launch(strategy, workers, ps), rdma=True)
    for s, name in ((ob.KubeSettings(namespace="users"), "rdma/hca_shared_devices_a"),
                    (ob.KubeSettings(namespace="users", rdma_resource="rdma/roce_a"), "rdma/roce_a")):
        jobs = [o for o in ob.job_objects(s, rdma) if o["kind"] == "Job"]
        assert len(jobs) == (2 if ps else 1)
        for j in jobs:  # parameter servers too: they exchange the gradients
            res = j["spec"]["template"]["spec"]["containers"][0]["resources"]
            assert res["limits"][name] == res["requests"][name] == "1"
        plain = [o for o in ob.job_objects(s, launch(strategy, workers, ps)) if o["kind"] == "Job"]
        assert not any(name in j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] for j in plain)


def test_a_jobs_registry_credential_is_a_pull_secret_of_its_own_that_its_pods_use():
    import base64
    import json

    spec = dataclasses.replace(launch("ps", 2, 1), registry_auth=("registry.example.org:5000", "bot", "pw:1"))
    s = ob.KubeSettings(namespace="users", image_pull_secrets=("site-mirror",))
    sec = ob.pull_secret(s, spec)
    assert sec["type"] == "kubernetes.io/dockerconfigjson" and sec["metadata"]["name"] == ob.pull_secret_name(spec.job_id, spec.owner, spec.name)
    assert sec["metadata"]["labels"] == ob.labels(s, spec.job_id, spec.owner)
    auths = json.loads(sec["stringData"][".dockerconfigjson"])["auths"]
    assert auths == {"registry.example.org:5000": {"username": "bot", "password": "pw:1",
                                                   "auth": base64.b64encode(b"bot:pw:1").decode()}}
    objs = ob.job_objects(s, spec)
    for j in (o for o in objs if o["kind"] == "Job"):
        assert j["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "site-mirror"},
                                                                     {"name": ob.pull_secret_name(spec.job_id, spec.owner, spec.name)}]
    assert "pw:1" not in json.dumps(objs) and "pw:1" not in repr(spec) and "pw:1" not in json.dumps(spec.to_json())
    plain = launch("ps", 2, 1)
    assert ob.pull_secret(s, plain) is None
    assert all(j["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "site-mirror"}]
               for j in ob.job_objects(s, plain) if j["kind"] == "Job")


def test_a_workspaces_registry_credential_is_a_pull_secret_named_as_its_spawner_finds_it():
    import base64
    import json

    s = ob.KubeSettings(namespace="users")
    sec = ob.registry_secret(s, 42, "alice", "dev-box", ("reg.example.org", "bot", "pw:2"), kind="workspace")
    assert sec["type"] == "kubernetes.io/dockerconfigjson" and sec["metadata"]["namespace"] == "users"
    assert sec["metadata"]["name"] == ob.pull_secret_name(42, "alice", "dev-box")
    assert sec["metadata"]["labels"] == ob.labels(s, 42, "alice", kind="workspace")
    assert json.loads(sec["stringData"][".dockerconfigjson"])["auths"] == {
        "reg.example.org": {"username": "bot", "password": "pw:2", "auth": base64.b64encode(b"bot:pw:2").decode()}}


def selects(selector: dict, labels: dict) -> bool:
    """A LabelSelector's meaning (matchLabels only: TiHub's selectors use nothing else)."""
    assert set(selector) <= {"matchLabels"}, selector
    return selector.get("matchLabels", {}).items() <= labels.items()


def pod_labels_of(objs: list[dict]) -> list[dict]:
    return [o["spec"]["template"]["metadata"]["labels"] for o in objs if o["kind"] == "Job"]


@pytest.mark.parametrize("strategy,workers,ps", [("allreduce", 3, 0), ("ps", 2, 1)])
def test_a_gangs_network_policy_opens_its_own_pods_to_each_other_and_nothing_else(strategy, workers, ps):
    s = ob.KubeSettings(namespace="users", installation="hub-a", network_policy=True)
    objs = ob.job_objects(s, launch(strategy, workers, ps))
    (pol,) = [o for o in objs if o["kind"] == "NetworkPolicy"]
    assert len(objs) <= 4 and pol["metadata"]["namespace"] == "users"
    spec = pol["spec"]
    sel = spec["podSelector"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    # peers: the same selector, in the same namespace (no namespaceSelector), any port, no address ranges
    assert spec["ingress"] == [{"from": [{"podSelector": sel}]}]
    assert spec["egress"] == [{"to": [{"podSelector": sel}]}]
    # it selects every pod of this job (every role) ...
    mine = pod_labels_of(objs)
    assert len(mine) == (2 if strategy == "ps" else 1) and all(selects(sel, lab) for lab in mine)
    # ... and no pod of the owner's other jobs, of the same job id in another installation, of other users,
    # nor a workspace or a TensorBoard pod
    from ti_hub.endpoints import kubetb
    others = pod_labels_of(ob.job_objects(s, dataclasses.replace(launch(strategy, workers, ps), job_id=8)))
    others += pod_labels_of(ob.job_objects(dataclasses.replace(s, installation="hub-b"), launch(strategy, workers, ps)))
    others += [ob.labels(s, 7, "Alice.Smith", kind="workspace"), ob.labels(s, 8, "bob"),
               kubetb.tensorboard_pod(s, job_id=7, owner="Alice.Smith", key="k", logdir="/mnt/x", claim="c",
                                      sub_path="", prefix="/p", image="i", lifetime_s=60)["metadata"]["labels"]]
    assert others and not any(selects(sel, lab) for lab in others)
    # the same label a pod of the job carries: the chart's policy for all user pods selects them too
    assert all(lab[ob.MANAGED_BY] == "ti-hub" for lab in mine)


def test_single_instance_jobs_and_settings_without_policies_make_none():
    with_policy = ob.KubeSettings(namespace="users", network_policy=True)
    assert [o["kind"] for o in ob.job_objects(with_policy, launch(None, 1))] == ["Job"]  # no peer to reach
    assert "NetworkPolicy" not in {o["kind"] for o in ob.job_objects(ob.KubeSettings(), launch("allreduce", 2))}


def test_pods_read_no_secret_and_no_claim_but_their_mounts():
    """Users never write pod specs: whatever they send, a job pod reads no Secret (no token, no secret volume,
    no secret env), and mounts only the claims of the volumes it was given."""
    s = ob.KubeSettings(namespace="users", image_pull_secrets=("site-mirror",))
    spec = launch("ps", 2, 1, mounts=[Mount("/x", "/data", True, "dataset", 5, "bob/imagenet")], scratch=["/tmp/s"])
    spec = dataclasses.replace(spec, env={"SECRET": "valueFrom", "K": "$(kubectl get secret)"})
    for job in (o for o in ob.job_objects(s, spec) if o["kind"] == "Job"):
        pod = job["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
        kinds = [set(v) - {"name"} for v in pod["volumes"]]
        assert all(k in ({"persistentVolumeClaim"}, {"emptyDir"}) for k in kinds), kinds
        assert [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v] \
            == [ob.pvc_name(5, "bob/imagenet")]
        (c,) = pod["containers"]
        assert "envFrom" not in c and all(set(e) == {"name", "value"} for e in c["env"])
        assert pod["imagePullSecrets"] == [{"name": "site-mirror"}]  # the admin's, used by the kubelet only


def test_the_pod_security_probe_breaks_the_restricted_profile_only():
    s = ob.KubeSettings(namespace="users")
    probe = ob.pod_security_probe(s)
    (c,) = probe["spec"]["containers"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is True  # restricted refuses it, baseline does not
    assert {k: v for k, v in c["securityContext"].items() if k != "allowPrivilegeEscalation"} == {
        k: v for k, v in ob.container_security_context(s).items() if k != "allowPrivilegeEscalation"}
    assert probe["spec"]["securityContext"] == ob.pod_security_context(s)
    assert ob.LABEL_JOB_ID not in probe["metadata"]["labels"]  # never taken for a job's pod
    assert ob.POD_SECURITY_LABELS["pod-security.kubernetes.io/enforce"] == "restricted"


def test_pin_policy_matches_only_tihubs_job_pods_in_its_namespace():
    policy, binding = ob.pin_policy("ti-hub-pin-users", "users")
    assert policy["spec"]["matchConstraints"]["objectSelector"]["matchLabels"] == {
        ob.MANAGED_BY: "ti-hub", ob.LABEL_KIND: "job"}
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    assert binding["spec"] == {"policyName": "ti-hub-pin-users", "matchResources": {"namespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": "users"}}}}
    # the probe looks like a job pod of index 0 with its own node
    probe = ob.pin_probe(ob.KubeSettings(namespace="users"))
    assert probe["metadata"]["labels"][ob.COMPLETION_INDEX] == "0"
    assert probe["metadata"]["annotations"][ob.ANN_PLACEMENT] == ob.PIN_PROBE_NODE


def test_personal_directories_mount_their_claims_and_a_host_directory_never():
    """STO8: a personal directory is mounted by its claim; one a local driver describes (a host path, no claim)
    cannot reach a pod and is left out rather than turned into a hostPath."""
    from ti_hub.storage.k8s import KubernetesVolumeDriver

    work, archive = KubernetesVolumeDriver(namespace="ns").personal_mounts("alice")
    assert (work.mount_path, archive.mount_path) == ("/mnt/alice", "/archives/alice")
    assert work.claim == ob.personal_claim_name("work", "alice") != ob.personal_claim_name("work", "alicf")
    host = Mount("/srv/ti/personal/work/alice", "/mnt/alice", False, "work")
    vols, mounts = ob.volumes([work, archive, host], [], 0)
    assert [v["persistentVolumeClaim"]["claimName"] for v in vols] == [work.claim, archive.claim]
    assert [m["mountPath"] for m in mounts] == ["/mnt/alice", "/archives/alice"] and "/srv" not in repr(vols)
    claim = KubernetesVolumeDriver(namespace="ns", storage_classes={"filesystem": "cephfs"}).personal_claim(
        "archive", "alice")
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}},
                             "storageClassName": "cephfs"}
    with pytest.raises(Exception, match="personal_capacity_gib"):
        KubernetesVolumeDriver(personal_capacity_gib={"work": 0, "archive": 5})


def test_a_one_pod_job_becomes_the_pod_its_job_would_make_pinned_in_its_own_spec():
    s = ob.KubeSettings(namespace="users")
    single = dataclasses.replace(launch(None, 1), kind="single", env={"LR": "0.1"})
    [job] = [o for o in ob.job_objects(s, single) if o["kind"] == "Job"]
    before = repr(job)
    pod = ob.bare_pod(job)
    assert repr(job) == before  # the Job is left as it was
    meta, spec = pod["metadata"], pod["spec"]
    name = job["metadata"]["name"]
    assert pod["kind"] == "Pod" and "name" not in meta and meta["generateName"] == f"{name}-0-"
    assert meta["labels"] == job["spec"]["template"]["metadata"]["labels"] and meta["labels"][ob.LABEL_RUN] == name
    # the completion index as an annotation: the pin policy (which matches the label) leaves the pod alone
    assert meta["annotations"][ob.COMPLETION_INDEX] == "0" and ob.COMPLETION_INDEX not in meta["labels"]
    assert ob.ANN_PLACEMENT not in meta["annotations"] and meta["annotations"][ob.ANN_ROLE_OFFSET] == "0"
    assert spec["nodeSelector"][ob.HOSTNAME_LABEL] == "node-0" and spec["hostname"] == f"{name}-0"
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["JOB_COMPLETION_INDEX"] == "0" and env["LR"] == "0.1"
    # everything else is the Job's pod template: restricted, the same resources and command
    template = job["spec"]["template"]["spec"]
    for key in ("securityContext", "restartPolicy", "automountServiceAccountToken", "volumes", "tolerations"):
        assert spec[key] == template[key], key
    assert spec["containers"][0]["resources"] == template["containers"][0]["resources"]
    assert spec["containers"][0]["command"] == template["containers"][0]["command"]
    unpinned = dataclasses.replace(s, pin_to_placement=False)
    [job] = [o for o in ob.job_objects(unpinned, single) if o["kind"] == "Job"]
    assert ob.HOSTNAME_LABEL not in ob.bare_pod(job)["spec"].get("nodeSelector", {})
    gang = [o for o in ob.job_objects(s, launch("allreduce", 2)) if o["kind"] == "Job"][0]
    with pytest.raises(ValueError):
        ob.bare_pod(gang)


def test_the_jupyter_endpoint_runs_beside_instance_0_only_with_its_token_by_reference(tmp_path):
    """JOB2 on Kubernetes: instance 0's role gets the wrapper, the port and the token's Secret reference; the other
    role none of it; index 1 of the same pod template starts no server; the command never sees the token."""
    import dataclasses
    import os
    import subprocess
    import time

    from ti_hub.backends.k8s import jupyterep

    s = ob.KubeSettings(namespace="users")
    jup = {"port": 41234, "token": "tok-s3cret", "base_url": "/services/ti/endpoints/7/0/41234/"}
    spec = dataclasses.replace(launch("ps", 2, 1), jupyter=jup, secret_env={"WANDB_API_KEY": "w"},
                               command="echo \"it's $TI_JUPYTER_TOKEN.\" > \"$OUT\"")
    objs = ob.job_objects(s, spec)
    (secret,) = [o for o in objs if o["kind"] == "Secret"]
    assert secret["stringData"] == {"WANDB_API_KEY": "w", jupyterep.TOKEN_KEY: "tok-s3cret"}
    ps_job, worker_job = [o for o in objs if o["kind"] == "Job"]
    assert "tok-s3cret" not in repr([o for o in objs if o is not secret]) and "tok-s3cret" not in str(spec.to_json())
    main = ps_job["spec"]["template"]["spec"]["containers"][0]
    assert main["ports"] == [{"name": "jupyter", "containerPort": 41234, "protocol": "TCP"}]
    assert jupyterep.token_env(ob.env_secret_name(spec)) in main["env"]
    other = worker_job["spec"]["template"]["spec"]["containers"][0]
    assert "ports" not in other and "ti-jupyter" not in other["command"]
    assert jupyterep.TOKEN_ENV not in [e["name"] for e in other["env"]]

    # the wrapper itself, with a stand-in for `jupyter` that records how it was started
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "jupyter").write_text('#!/bin/sh\necho "$JUPYTER_TOKEN $*" > "$TMPDIR/started"\n')
    (bin_dir / "jupyter").chmod(0o755)
    for index in (0, 1):
        out, tmp = tmp_path / f"out-{index}", tmp_path / f"tmp-{index}"
        tmp.mkdir()
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp), "OUT": str(out),
               "JOB_COMPLETION_INDEX": str(index), jupyterep.TOKEN_ENV: "tok-s3cret"}
        # the prelude exports the index's own values; only the command's output matters here
        r = subprocess.run(main["command"], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert out.read_text() == "it's .\n"  # the command intact (quotes, $), the token unset before it
        started = tmp / "started"
        for _ in range(50):  # the server starts in the background
            if started.exists() or index:
                break
            time.sleep(0.1)
        if index == 0:
            line = started.read_text()
            assert line.startswith("tok-s3cret server --no-browser --ip=0.0.0.0 --port=41234 ")
            assert "--ServerApp.base_url=/services/ti/endpoints/7/0/41234/" in line
        else:
            assert not started.exists()
