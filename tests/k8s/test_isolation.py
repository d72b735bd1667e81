"""One user's code against another's, on Kubernetes: the promises of docs/security.md, checked by the cluster.

The threat is a user running arbitrary code in their jobs and workspaces. Users never write pod specs: TiHub
renders every pod. What keeps them apart, and how each is checked here:

- **Pod Security admission**: the chart's user namespace enforces the restricted profile, and the real API server
  refuses a pod there that is privileged, mounts a host path, runs as root, ... while TiHub's own pods pass;
- **Secrets and claims**: a job or workspace naming another user's volume is refused before any object exists;
  the pods TiHub makes for a user mount only the claims of volumes that user may use, no Secret and no
  service-account token; the service account they run as may read nothing (``kubectl auth can-i``);
- **NetworkPolicies**: the chart's and the per-job ones, evaluated as objects (the test cluster has no network
  plugin): a job's pods reach each other, the hub and the proxy reach user pods on their ports; nothing else.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import secrets

import pytest
from hubproc import own_hub
from tihub_client import wait

from ti_hub.backends.base import InstanceSpec, LaunchSpec
from ti_hub.backends.k8s import objects as ob
from ti_hub.endpoints import kubetb

from .helmkit import NS, RELEASE, by_kind, one, render, values_file
from .test_storage import CLASSES, storage_class

RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


# -- Pod Security admission -----------------------------------------------------------------------------------
def restricted_pod(ns: str, name: str) -> dict:
    s = ob.KubeSettings(namespace=ns)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"automountServiceAccountToken": False, "securityContext": ob.pod_security_context(s),
                     "containers": [{"name": "main", "image": "busybox", "command": ["sh"],
                                     "securityContext": ob.container_security_context(s)}]}}


def _privileged(spec, c):
    c["securityContext"].update(privileged=True, allowPrivilegeEscalation=True)


def _host_path(spec, c):
    spec["volumes"] = [{"name": "host", "hostPath": {"path": "/var/lib/kubelet"}}]
    c["volumeMounts"] = [{"name": "host", "mountPath": "/host"}]


def _root(spec, c):
    for sc in (spec["securityContext"], c["securityContext"]):
        sc.update(runAsUser=0, runAsNonRoot=False)


def _no_contexts(spec, c):  # the baseline profile allows this pod
    del spec["securityContext"], c["securityContext"]


NOT_RESTRICTED = {
    "privileged": _privileged, "hostPath": _host_path, "root": _root, "no security contexts": _no_contexts,
    "hostNetwork": lambda spec, c: spec.update(hostNetwork=True),
    "hostPID": lambda spec, c: spec.update(hostPID=True),
    "a capability": lambda spec, c: c["securityContext"]["capabilities"].update(add=["NET_RAW"]),
    "no seccomp": lambda spec, c: [sc.pop("seccompProfile") for sc in (spec["securityContext"], c["securityContext"])],
    "privilege escalation": lambda spec, c: c["securityContext"].update(allowPrivilegeEscalation=True),
}


def create_dry_run(cluster, pod: dict):
    return cluster.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", check=False, input=json.dumps(pod))


def test_the_charts_user_namespace_makes_the_api_server_refuse_every_pod_that_is_not_restricted(
        helm, own_chart, k8s_cluster, tmp_path):
    user_ns = f"iso-psa-{secrets.token_hex(3)}"
    docs = render(helm, own_chart, "-f", values_file(tmp_path, {"userNamespace": user_ns}))
    namespace = one(docs, "Namespace")
    labels = namespace["metadata"]["labels"]
    assert namespace["metadata"]["name"] == user_ns
    assert {k: v for k, v in labels.items() if k.startswith("pod-security.")} == ob.POD_SECURITY_LABELS
    assert namespace["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"  # users' claims live there
    # the release namespace is not the chart's to make; nor one the admin keeps for themselves
    for data in ({}, {"userNamespace": NS}, {"userNamespace": user_ns, "createUserNamespace": False}):
        assert not by_kind(render(helm, own_chart, "-f", values_file(tmp_path, data)), "Namespace"), data
    # the test cluster's namespaces carry the same labels (LocalCluster.namespace)
    made = k8s_cluster.namespace(f"iso-psa-t-{secrets.token_hex(3)}")
    got = json.loads(k8s_cluster.kubectl("get", "namespace", made, "-o", "json").stdout)["metadata"]["labels"]
    assert ob.POD_SECURITY_LABELS.items() <= got.items()
    k8s_cluster.kubectl("delete", "namespace", made, "--wait=false")

    k8s_cluster.apply([namespace])  # the chart's object, as helm would create it
    try:
        wait(lambda: k8s_cluster.kubectl("get", "serviceaccount", "default", "-n", user_ns, check=False
                                         ).returncode == 0, what="the namespace's default service account")
        for why, breaks in NOT_RESTRICTED.items():
            pod = restricted_pod(user_ns, "bad")
            breaks(pod["spec"], pod["spec"]["containers"][0])
            out = create_dry_run(k8s_cluster, pod)
            assert out.returncode != 0 and 'violates PodSecurity "restricted:latest"' in out.stderr, (why, out.stderr)
        # ... and lets through what TiHub renders: job pods of each kind of gang, TensorBoard, the probes
        s = ob.KubeSettings(namespace=user_ns, network_policy=True)
        ours = [restricted_pod(user_ns, "control")]
        for strategy, workers, ps in ((None, 1, 0), ("allreduce", 2, 0), ("ps", 2, 1)):
            for job in by_kind(ob.job_objects(s, launch(7, "alice", strategy, workers, ps)), "Job"):
                template = job["spec"]["template"]
                ours.append({"apiVersion": "v1", "kind": "Pod", "spec": template["spec"], "metadata": {
                    **template["metadata"], "name": job["metadata"]["name"] + "-0", "namespace": user_ns}})
        ours.append(kubetb.tensorboard_pod(s, job_id=7, owner="alice", key="k", logdir="/mnt/runs", claim="c",
                                           sub_path="runs", prefix="/p", image="tb", lifetime_s=60))
        ours.append(ob.pin_probe(s))
        for pod in ours:
            out = create_dry_run(k8s_cluster, pod)
            assert out.returncode == 0, (pod["metadata"]["name"], out.stderr)
        assert create_dry_run(k8s_cluster, ob.pod_security_probe(s)).returncode != 0  # what the backend asks
    finally:
        k8s_cluster.kubectl("delete", "namespace", user_ns, "--wait=false", check=False)


# -- the rights of user pods' service account -------------------------------------------------------------------
SENSITIVE = ("secrets", "persistentvolumeclaims", "pods", "pods/exec", "configmaps", "serviceaccounts",
             "serviceaccounts/token", "networkpolicies.networking.k8s.io", "jobs.batch", "services", "events")


def assert_may_read_nothing(cluster, sa_ns: str) -> None:
    """``system:serviceaccount:<sa_ns>:default``, which TiHub's pods run as (without its token), has no right beyond
    what every authenticated identity has (discovery, reviews of its own rights)."""
    sa = f"system:serviceaccount:{sa_ns}:default"

    def can(*args) -> bool:
        return cluster.kubectl("auth", "can-i", f"--as={sa}", *args, check=False).stdout.strip() == "yes"

    for args in (("get", "secrets"), ("list", "secrets"), ("watch", "secrets"), ("get", "persistentvolumeclaims"),
                 ("list", "persistentvolumeclaims"), ("get", "pods"), ("create", "pods"),
                 ("create", "pods", "--subresource=exec"), ("create", "serviceaccounts", "--subresource=token")):
        assert not can(*args, "-n", sa_ns), (sa, args)
    assert not can("list", "secrets", "--all-namespaces") and not can("list", "nodes")
    rules = cluster.kubectl("auth", "can-i", "--list", f"--as={sa}", "-n", sa_ns).stdout.splitlines()[1:]
    resources = {line.split()[0] for line in rules if line.strip() and not line.split()[0].startswith("[")}
    assert not {r for r in resources if r.split(".")[0] in {s.split(".")[0] for s in SENSITIVE}}, rules
    assert resources <= {"selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
                         "selfsubjectrulesreviews.authorization.k8s.io"}, rules


def apply_rbac(cluster, docs, release_ns) -> list[str]:
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    for d in rbac:  # z2jh's objects name no namespace: the release's
        if not d["kind"].startswith("Cluster"):
            d["metadata"].setdefault("namespace", release_ns)
    cluster.apply(rbac)
    return [f"{d['kind'].lower()}/{d['metadata']['name']}" for d in rbac if d["kind"].startswith("Cluster")]


def test_user_pods_service_account_may_read_no_secret_nor_claim(helm, own_chart, k8s_cluster, namespaces, tmp_path):
    release_ns, user_ns = namespaces("iso-hub"), namespaces("iso-users")
    docs = render(helm, own_chart, "-f", values_file(tmp_path, {"userNamespace": user_ns}), namespace=release_ns)
    cluster_scoped = apply_rbac(k8s_cluster, docs, release_ns)
    try:
        for ns in (user_ns, release_ns):
            assert_may_read_nothing(k8s_cluster, ns)
        # the check can say yes: the hub's own account may read pods there
        out = k8s_cluster.kubectl("auth", "can-i", f"--as=system:serviceaccount:{release_ns}:ti-hub", "get", "pods",
                                  "-n", user_ns, check=False)
        assert out.stdout.strip() == "yes"
    finally:
        k8s_cluster.kubectl("delete", *cluster_scoped, "--wait=false", check=False)


def test_with_z2jh_user_pods_sharing_the_hubs_namespace_may_read_nothing(helm, full_chart, k8s_cluster, namespaces):
    release_ns = namespaces("iso-full")
    cluster_scoped = apply_rbac(k8s_cluster, render(helm, full_chart, namespace=release_ns), release_ns)
    try:
        assert_may_read_nothing(k8s_cluster, release_ns)  # z2jh's Role is the hub's, not theirs
    finally:
        if cluster_scoped:
            k8s_cluster.kubectl("delete", *cluster_scoped, "--wait=false", check=False)


# -- NetworkPolicies, as objects --------------------------------------------------------------------------------
@dataclasses.dataclass
class Peer:
    """A pod (``ns`` set) or an address outside the cluster (``ns`` None), as NetworkPolicies see it."""

    name: str
    ns: str | None
    ip: str
    labels: dict = dataclasses.field(default_factory=dict)
    ports: dict = dataclasses.field(default_factory=dict)  # named container ports


def selects(selector: dict, labels: dict) -> bool:
    ok = all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())
    for e in selector.get("matchExpressions") or []:
        has, val = e["key"] in labels, labels.get(e["key"])
        ok &= {"In": has and val in e.get("values", []), "NotIn": not has or val not in e.get("values", []),
               "Exists": has, "DoesNotExist": not has}[e["operator"]]
    return ok


def peer_matches(peer: dict, policy_ns: str, other: Peer) -> bool:
    if "ipBlock" in peer:  # as Calico applies them: to pod addresses too
        ip = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(x) for x in block.get("except") or [])
    if other.ns is None:
        return False
    if "namespaceSelector" in peer:
        in_ns = selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.ns})
    else:
        in_ns = other.ns == policy_ns
    return in_ns and selects(peer.get("podSelector") or {}, other.labels)


def port_matches(ports: list | None, port: int, dst: Peer) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        if "port" not in p:
            return True
        want = dst.ports.get(p["port"]) if isinstance(p["port"], str) else p["port"]  # a named port: the pod's
        if want is not None and (want == port or want <= port <= p.get("endPort", want)):
            return True
    return False


def allowed(policies: list[dict], src: Peer, dst: Peer, port: int) -> bool:
    """Whether TCP from ``src`` to ``dst:port`` passes every NetworkPolicy (both ends; networking.k8s.io/v1)."""
    def side(pod: Peer, other: Peer, kind: str) -> bool:
        key, peers_key = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
        mine = [p for p in policies if pod.ns and p["metadata"]["namespace"] == pod.ns
                and selects(p["spec"]["podSelector"], pod.labels)
                and kind in p["spec"].get("policyTypes", ["Ingress"] + (["Egress"] if "egress" in p["spec"] else []))]
        if not mine:
            return True  # not isolated
        return any((not rule.get(peers_key) or any(peer_matches(x, p["metadata"]["namespace"], other)
                                                   for x in rule[peers_key]))
                   and port_matches(rule.get("ports"), port, dst)
                   for p in mine for rule in p["spec"].get(key) or [])
    return side(src, dst, "Egress") and side(dst, src, "Ingress")


def launch(job_id: int, owner: str, strategy, workers: int, ps: int = 0) -> LaunchSpec:
    roles = ["ps"] * ps + ["worker"] * workers
    insts = tuple(InstanceSpec(i, r, i, f"node-{i}", (), 1.0, 1024, {}) for i, r in enumerate(roles))
    return LaunchSpec(job_id, owner, "train", "distributed" if len(roles) > 1 else "single", strategy, "true", "img",
                      {}, insts)


@pytest.mark.parametrize("layout", ["own namespace", "with z2jh, shared namespace"])
def test_a_jobs_pods_reach_each_other_the_hub_and_proxy_reach_user_pods_and_nothing_else(layout, helm, own_chart,
                                                                                            tmp_path, request):
    shared = layout.startswith("with z2jh")
    user_ns = NS if shared else "tihub-users"
    chart = request.getfixturevalue("full_chart") if shared else own_chart
    docs = render(helm, chart, "-f", values_file(tmp_path, {"userNamespace": user_ns}))
    settings = json.loads(one(docs, "ConfigMap", "ti-hub-config")["data"]["settings.json"])
    s = ob.KubeSettings(namespace=user_ns, installation=f"{settings['releaseNamespace']}.{settings['releaseName']}",
                        network_policy=settings["networkPolicyPerJob"])
    policies = [{**d, "metadata": {"namespace": NS, **d["metadata"]}} for d in by_kind(docs, "NetworkPolicy")]
    ips = (f"10.244.1.{i}" for i in range(1, 250))

    def pod_of(kind: str) -> dict:  # z2jh's hub and proxy pods where rendered, else the labels the chart selects
        found = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == kind]
        return found[0]["spec"]["template"]["metadata"]["labels"] if found else {"component": kind, "release": RELEASE}
    hub, proxy = Peer("hub", NS, "10.244.0.10", pod_of("hub")), Peer("proxy", NS, "10.244.0.11", pod_of("proxy"))
    jobs: dict[str, list[Peer]] = {}
    for key, job_id, owner in (("a7", 7, "alice"), ("a8", 8, "alice"), ("b9", 9, "bob")):
        objs = ob.job_objects(s, launch(job_id, owner, "ps", 2, 1))
        policies += by_kind(objs, "NetworkPolicy")
        jobs[key] = [Peer(f"{key}-{j['metadata']['name']}", user_ns, next(ips), j["spec"]["template"]["metadata"]
                          ["labels"]) for j in by_kind(objs, "Job")]
    a7, a8, b9 = jobs["a7"], jobs["a8"], jobs["b9"]
    kubespawner = {"app": "jupyterhub", "release": RELEASE, "component": "singleuser-server"}
    ws = {o: Peer(f"ws-{o}", user_ns, next(ips), {**kubespawner, **ob.labels(s, n, o, kind="workspace")},
                  {"notebook-port": 8888}) for n, o in ((20, "alice"), (21, "bob"))}
    tb = Peer("tb", user_ns, next(ips), kubetb.tensorboard_pod(s, job_id=7, owner="alice", key="k", logdir="/l",
                                                                 claim="c", sub_path="", prefix="/p", image="i",
                                                                 lifetime_s=60)["metadata"]["labels"])
    stranger = Peer("not-tihubs", user_ns, next(ips), {"app": "someone-elses"})
    elsewhere = Peer("other-ns", "other", "10.244.9.9", dict(a7[0].labels))
    dns = Peer("coredns", "kube-system", "10.244.0.2", {"k8s-app": "kube-dns"})
    internet, metadata = Peer("internet", None, "93.184.216.34"), Peer("metadata", None, "169.254.169.254")
    private = Peer("private service", None, "10.1.2.3")

    def ok(src, dst, port):
        return allowed(policies, src, dst, port)

    # a job's pods reach each other on any port, across roles (ps and workers), both ways: through its own
    # policy, since the chart's closes them
    for port in (29500, 2222, 12345):
        assert ok(a7[0], a7[1], port) and ok(a7[1], a7[0], port), port
    charts_only = [p for p in policies if ob.LABEL_JOB_ID not in p["metadata"].get("labels", {})]
    assert not allowed(charts_only, a7[0], a7[1], 29500)
    # and nothing else reaches them, nor do they reach anything else
    for port in (29500, 2222, 8888, 40001):
        for src, dst in ((a7[0], a8[0]), (a8[1], a7[1]), (a7[0], b9[0]), (b9[1], a7[1]), (ws["alice"], a7[0]),
                         (a7[0], ws["alice"]), (ws["alice"], ws["bob"]), (ws["bob"], a7[1]), (stranger, a7[0]),
                         (elsewhere, a7[0]), (a7[0], tb), (b9[0], tb), (ws["bob"], tb)):
            assert not ok(src, dst, port), (src.name, dst.name, port)
    # the hub (ti service, endpoints proxy) and the proxy reach user pods on their declared ports, only those
    for dst, port in ((a7[0], 40001), (b9[1], 49999), (ws["bob"], 8888), (tb, kubetb.TB_PORT)):
        assert ok(hub, dst, port) and ok(proxy, dst, port), (dst.name, port)
    for port in (22, 29500, 2222, 50000):
        assert not ok(hub, a7[0], port) and not ok(proxy, a7[0], port), port
    # user pods reach the hub's API and the ti service, DNS and the internet; not the SSH gateway's port (SSH goes
    # through the API server), nor the metadata server, nor private addresses
    for src in (a7[0], ws["alice"], tb):
        assert ok(src, hub, 8081) and ok(src, hub, 10101) and ok(src, dns, 53) and ok(src, internet, 443), src.name
        assert not ok(src, hub, 8022) and not ok(src, metadata, 80) and not ok(src, private, 443), src.name


# -- the platform: volumes, Secrets and tokens in the pods TiHub makes -----------------------------------------------
ISO_NS = "ti-isolation"


@pytest.fixture(scope="module")
def ihub(k8s_cluster, fake_provisioner, tmp_path_factory):
    k8s_cluster.namespace(ISO_NS)
    k8s_cluster.apply([storage_class("ti-test-block", False), storage_class("ti-test-filesystem", True),
                       storage_class("ti-test-dataset", True)])
    yield from own_hub(tmp_path_factory, "ihub", (
        "c.TiService.backend_class = 'ti_hub.backends.k8s.KubernetesBackend'\n"
        "c.TiService.volume_driver_class = 'ti_hub.storage.k8s.KubernetesVolumeDriver'\n"
        f"c.KubernetesBackend.kubeconfig = {str(k8s_cluster.kubeconfig)!r}\n"
        f"c.KubernetesBackend.namespace = {ISO_NS!r}\n"
        "c.KubernetesBackend.installation = 'iso-hub'\n"
        "c.KubernetesBackend.network_policy_per_job = True\n"
        "c.KubernetesBackend.pin_to_placement = False\n"
        f"c.KubernetesVolumeDriver.storage_classes = {CLASSES!r}\n"
        "import os\n"
        f"os.environ['KUBECONFIG'] = {str(k8s_cluster.kubeconfig)!r}\n"
        "c.JupyterHub.spawner_class = 'ti_hub.spawner.kube.TiKubeSpawner'\n"
        f"c.KubeSpawner.namespace = {ISO_NS!r}\n"
        "c.TiKubeSpawner.installation = 'iso-hub'\n"
        "c.Spawner.http_timeout = 10\n"
        "c.TiService.scheduler_interval = 0.3\n"))


def objects(cluster, kinds: str = "jobs,pods,services,networkpolicies") -> list[dict]:
    return json.loads(cluster.kubectl("get", kinds, "-n", ISO_NS, "-o", "json").stdout)["items"]


def assert_reads_only(pod: dict, claims: dict[str, bool]) -> None:
    """The pod mounts exactly ``claims`` (name -> read-only), reads no Secret and holds no service-account token."""
    spec = pod["spec"]
    assert spec.get("automountServiceAccountToken") is False
    got = {}
    for vol in spec.get("volumes") or []:
        kind = (set(vol) - {"name"}).pop()
        assert kind in ("persistentVolumeClaim", "emptyDir"), vol  # no secret, projected token, configMap, hostPath
        if kind == "persistentVolumeClaim":
            got[vol[kind]["claimName"]] = bool(vol[kind].get("readOnly"))
    assert got == claims
    for c in spec.get("initContainers", []) + spec["containers"]:
        assert not c.get("envFrom"), c["name"]
        assert all("valueFrom" not in e or "secretKeyRef" not in e["valueFrom"] for e in c.get("env") or [])
    assert not spec.get("imagePullSecrets")  # none configured here: never one of a user's making


def test_no_pod_tihub_makes_for_a_user_reads_another_users_volume_or_any_secret(ihub, k8s_cluster):
    admin = ihub.admin
    admin.ok("POST", "/plans", json={"name": "iso-cpu", "kinds": ["single", "distributed", "workspace"],
                                     "device_type": "cpu", "device_count": 0, "cpu": 1, "memory_mib": 1024})
    alice, bob = ihub.person("alice"), ihub.person("bob")
    private = alice.ok("POST", "/volumes", json={"name": "private", "kind": "filesystem", "capacity_gib": 1})
    lent = alice.ok("POST", "/volumes", json={"name": "lent", "kind": "filesystem", "capacity_gib": 1})
    alice.ok("POST", f"/volumes/{lent['id']}/shares", json={"user": bob.name, "mode": "ro"})
    own = bob.ok("POST", "/volumes", json={"name": "mine", "kind": "filesystem", "capacity_gib": 1})
    claim = {v["id"]: ob.pvc_name(v["id"], f"{v['owner']}/{v['name']}") for v in (private, lent, own)}
    before = {o["metadata"]["uid"] for o in objects(k8s_cluster)}

    # alice's volume, not shared with bob: refused by name and by id, as a job and as a workspace; nothing made
    job = {"name": "peek", "plan": "iso-cpu", "image": "python-cpu", "command": "cat /mnt/x/*"}
    for ref in (f"{alice.name}/private", private["id"]):
        r = bob.api("POST", "/jobs", json={**job, "volumes": [{"volume": ref, "mount_path": "/mnt/x"}]})
        assert r.status_code == 404 and r.json()["field"] == "volumes[0].volume", r.text
    r = bob.api("POST", "/jobs", json={**job, "volumes": [{"volume": f"{alice.name}/lent", "mount_path": "/mnt/x",
                                                           "read_only": False}]})
    assert r.status_code == 409 and "read-only" in r.json()["detail"], r.text  # lent read-only: read-only
    r = bob.hub_api("POST", f"/users/{bob.name}/servers/peek", json={
        "plan": "iso-cpu", "volumes": [{"volume": f"{alice.name}/private", "mount_path": "/mnt/x"}]})
    assert r.status_code == 404 and "not shared with you" in r.text, r.text
    assert not [j for j in bob.ok("GET", "/jobs")["items"] if j["name"] == "peek"]
    assert not [w for w in bob.ok("GET", "/jobs?kind=workspace")["items"]
                if w["name"] == "peek" and w["status"] in ("queued", "scheduling", "running")]
    assert {o["metadata"]["uid"] for o in objects(k8s_cluster)} == before

    # what bob may use: his own volume and alice's lent one (read-only); his pods mount those claims only
    mounts = [{"volume": "mine", "mount_path": "/mnt/mine"},
              {"volume": f"{alice.name}/lent", "mount_path": "/mnt/lent"}]
    gang = bob.ok("POST", "/jobs", json={**job, "name": "gang", "kind": "distributed", "strategy": "allreduce",
                                         "workers": 2, "command": "sleep 1000", "volumes": mounts})
    r = bob.hub_api("POST", f"/users/{bob.name}/servers/desk", json={"plan": "iso-cpu", "volumes": mounts})
    assert r.status_code in (201, 202), r.text
    # and his own work and archive directories (STO8), never alice's
    wanted = {claim[own["id"]]: False, claim[lent["id"]]: True,
              ob.personal_claim_name("work", bob.name): False, ob.personal_claim_name("archive", bob.name): False}

    def bobs_pods():
        pods = [p for p in objects(k8s_cluster, "pods") if p["metadata"]["uid"] not in before]
        return len(pods) == 3 and pods
    pods = wait(bobs_pods, timeout=90, what="bob's two job pods and his workspace pod")
    for pod in pods:
        assert pod["metadata"]["annotations"][ob.ANN_OWNER] == bob.name
        assert_reads_only(pod, wanted)
    # the gang's own NetworkPolicy selects its two pods, not bob's workspace
    policies = [o for o in objects(k8s_cluster, "networkpolicies") if o["metadata"]["uid"] not in before]
    assert len(policies) == 1 and policies[0]["metadata"]["ownerReferences"][0]["kind"] == "Job"
    sel = policies[0]["spec"]["podSelector"]["matchLabels"]
    assert sorted(p["metadata"]["labels"].get(ob.LABEL_KIND) for p in pods if selects({"matchLabels": sel},
                                                                                    p["metadata"]["labels"])) == \
        ["job", "job"]

    bob.ok("POST", f"/jobs/{gang['id']}/kill")
    bob.hub_api("DELETE", f"/users/{bob.name}/servers/desk")
    wait(lambda: not [o for o in objects(k8s_cluster) if o["metadata"]["uid"] not in before], timeout=90,
         what="the job's Job, pods, Service and NetworkPolicy and the workspace's pod to go")
