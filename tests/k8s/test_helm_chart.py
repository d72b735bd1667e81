"""The Helm chart helm/ti-hub: lint, render, schema, least-privilege RBAC, NetworkPolicies, restricted pods,
the hub's Python configuration, and a server-side dry run against the test control plane.

helm is built from its Go module by tests/k8s/build-helm.sh (cached; minutes the first time). The chart's
dependency, the zero-to-jupyterhub chart, comes from helm/fetch-deps.sh. Where no source for it can be
reached, the tests of the whole chart skip, saying so, unless TIHUB_REQUIRE_Z2JH=1 (``TIHUB_Z2JH_CHART`` can name
a copy, e.g. a vendored one); TiHub's own objects are still tested everywhere: the ``own`` renders use a copy of
the chart without the dependency (its templates fall back to z2jh's default names). Fixtures and helpers:
helmkit.py. What keeps users apart (Pod Security, NetworkPolicies, user pods' rights): test_isolation.py.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import sys

import pytest
import yaml

from ti_hub.spawner.names import RULE as WORKSPACE_NAME_RULE

from .helmkit import BUILTIN, CHART, NS, RELEASE, ROOT, WITH_MAP, by_kind, one, render, run, values_file

pytestmark = pytest.mark.k8s


# --- schema ----------------------------------------------------------------------------------------------------------
def _render_schema_module():
    spec = importlib.util.spec_from_file_location("render_schema", ROOT / "helm" / "tools" / "render-schema.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_schema_json_matches_yaml_source():
    out = run(sys.executable, ROOT / "helm" / "tools" / "render-schema.py", "--check", check=False)
    assert out.returncode == 0, out.stderr
    source = yaml.safe_load((CHART / "values.schema.yaml").read_text())
    assert json.loads((CHART / "values.schema.json").read_text()) == source


def test_schema_rules_closed_objects_and_descriptions():
    mod = _render_schema_module()
    schema = yaml.safe_load((CHART / "values.schema.yaml").read_text())
    assert mod.problems(schema) == []
    # the rules are really checked: an open object and a property without a description are both reported
    bad = {"type": "object", "additionalProperties": False,
           "properties": {"a": {"type": "object", "description": "x", "properties": {}}, "b": {"type": "string"}}}
    assert mod.problems(bad) == ["a: objects need additionalProperties: false", "b: no description"]
    # every key of values.yaml is in the schema (additionalProperties false would reject it otherwise)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"])


def test_unknown_keys_are_rejected_by_name(helm, own_chart, tmp_path):
    for data, key in (({"userNamespaces": "x"}, "userNamespaces"),
                      ({"devices": {"resourceNme": "x"}}, "resourceNme"),
                      ({"devices": {"types": {"npu": {"resource": "a.b/c", "perNod": 8}}}}, "perNod"),
                      ({"networkPolicy": {"userPodPorts": [{"port": 1, "proto": "TCP"}]}}, "proto")):
        f = values_file(tmp_path, data)
        lint = run(helm, "lint", "--strict", own_chart, "-f", f, check=False)
        assert lint.returncode != 0 and key in lint.stdout + lint.stderr, lint.stdout + lint.stderr
        tpl = render(helm, own_chart, "-f", f, check=False)
        assert tpl.returncode != 0 and key in tpl.stderr, tpl.stderr


# --- lint and render -------------------------------------------------------------------------------------------------
def test_lint_strict_own_objects(helm, own_chart):
    out = run(helm, "lint", "--strict", own_chart, "--namespace", NS)
    assert "0 chart(s) failed" in out.stdout


def test_lint_strict_whole_chart(helm, full_chart):
    out = run(helm, "lint", "--strict", full_chart, "--namespace", NS)
    assert "0 chart(s) failed" in out.stdout


def test_whole_chart_renders_builtin_kinds_and_wires_the_hub(helm, full_chart):
    docs = render(helm, full_chart)
    assert {(d["apiVersion"], d["kind"]) for d in docs} <= BUILTIN
    hub = one(docs, "Deployment", "hub")
    pod = hub["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "ti-hub"
    (container,) = [c for c in pod["containers"] if c["name"] == "hub"]
    assert {"name": "ti-hub", "mountPath": "/usr/local/etc/ti-hub", "readOnly": True} in container["volumeMounts"]
    assert any(e["name"] == "TI_HUB_POD_IP" for e in container["env"])
    assert_restricted_container(container, pod)
    # the pods the chart's NetworkPolicies let reach user pods are z2jh's hub and proxy, by these labels
    for name, component in (("hub", "hub"), ("proxy", "proxy")):
        labels = one(docs, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert {"component": component, "release": RELEASE}.items() <= labels.items(), name
    hub_service = one(docs, "Service", "hub")
    assert {"name": "ti", "port": 10101, "targetPort": 10101} in [
        {k: p.get(k) for k in ("name", "port", "targetPort")} for p in hub_service["spec"]["ports"]]


def test_own_objects_render_builtin_kinds(helm, own_chart):
    docs = render(helm, own_chart)
    assert {(d["apiVersion"], d["kind"]) for d in docs} <= BUILTIN
    assert {d["kind"] for d in docs} == {"ConfigMap", "Secret", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                                          "ClusterRoleBinding", "NetworkPolicy", "Pod", "Service"}
    settings = json.loads(one(docs, "ConfigMap", "ti-hub-config")["data"]["settings.json"])
    assert settings["userNamespace"] == NS and settings["devices"]["resourceName"] == "nvidia.com/gpu"
    assert settings["devices"]["typeLabel"] == "ti-hub.io/device-type"
    assert settings["devices"]["poolLabel"] == "ti-hub.io/pool"
    assert set(settings["storageClasses"]) == {"block", "filesystem", "bucket", "dataset"}


def assert_restricted_container(container, pod_spec):
    pod_sc, sc = pod_spec.get("securityContext") or {}, container.get("securityContext") or {}
    name = container["name"]
    assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, name
    assert sc.get("allowPrivilegeEscalation") is False, name
    assert "ALL" in (sc.get("capabilities") or {}).get("drop", []), name
    assert (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type") == "RuntimeDefault", name
    assert not sc.get("privileged"), name


def test_own_pods_run_restricted(helm, own_chart):
    docs = render(helm, own_chart)
    pods = [(d["spec"], d) for d in by_kind(docs, "Pod")]
    pods += [(d["spec"]["template"]["spec"], d) for d in docs if d["kind"] in ("Deployment", "StatefulSet",
                                                                                 "DaemonSet", "Job")]
    assert pods, "the chart renders a pod of its own (helm test)"
    for spec, _ in pods:
        for c in spec.get("initContainers", []) + spec["containers"]:
            assert_restricted_container(c, spec)
        assert spec.get("automountServiceAccountToken") is False


def test_user_namespace_and_values_reach_the_objects(helm, own_chart, tmp_path):
    f = values_file(tmp_path, {
        "userNamespace": "tihub-users", "devices": {"resourceName": "huawei.com/Ascend910"},
        "storageClasses": {"filesystem": "cephfs"}, "imagePullSecrets": ["registry-mirror"],
        "database": {"url": "postgresql+psycopg://u:p@db/tihub"}})
    docs = render(helm, own_chart, "-f", f)
    for kind in ("Role", "RoleBinding"):
        assert one(docs, kind)["metadata"]["namespace"] == "tihub-users"
    assert one(docs, "Namespace")["metadata"]["name"] == "tihub-users"  # made by the chart (test_isolation.py)
    netpols = {d["metadata"]["name"]: d for d in by_kind(docs, "NetworkPolicy")}
    assert netpols["ti-hub-tihub-user-pods"]["metadata"]["namespace"] == "tihub-users"
    assert netpols["ti-hub-hub"]["metadata"]["namespace"] == NS
    for binding in (one(docs, "RoleBinding"), one(docs, "ClusterRoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ti-hub", "namespace": NS}]
    settings = json.loads(one(docs, "ConfigMap")["data"]["settings.json"])
    assert settings["userNamespace"] == "tihub-users"
    assert settings["devices"]["resourceName"] == "huawei.com/Ascend910"
    assert settings["storageClasses"]["filesystem"] == "cephfs" and settings["imagePullSecrets"] == ["registry-mirror"]
    secret = one(docs, "Secret", "ti-hub-secret")
    assert base64.b64decode(secret["data"]["db-url"]).decode() == "postgresql+psycopg://u:p@db/tihub"
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_broken_wiring_to_the_subchart_fails_with_a_reason(helm, own_chart, tmp_path):
    cases = [
        ({"jupyterhub": {"hub": {"extraVolumes": [{"name": "mine", "emptyDir": {}}]}}}, "lost the volume `ti-hub`"),
        ({"jupyterhub": {"hub": {"extraVolumeMounts": []}}}, "lost the mount"),
        ({"jupyterhub": {"hub": {"serviceAccount": {"create": True}}}}, "both true"),
        ({"tiService": {"port": 10102}}, "extraPorts"),
        ({"jupyterhub": {"hub": {"extraConfig": {"00-ti-hub": "pass"}}}}, "ti_hub_config.py"),
    ]
    for data, reason in cases:
        out = render(helm, own_chart, "-f", values_file(tmp_path, data), check=False)
        assert out.returncode != 0 and reason in out.stderr, (data, out.stderr)


# --- RBAC and NetworkPolicies ----------------------------------------------------------------------------------------
ROLE_RULES = {
    ("", "pods"): {"create", "get", "list", "watch", "delete"},
    ("", "pods/log"): {"get"},
    ("", "pods/exec"): {"create"},
    ("", "pods/portforward"): {"create"},
    ("", "services"): {"create", "get", "list", "watch", "delete"},
    ("", "persistentvolumeclaims"): {"create", "get", "list", "watch", "delete", "patch"},
    ("", "events"): {"list", "watch"},
    ("batch", "jobs"): {"create", "get", "list", "watch", "delete"},
    ("networking.k8s.io", "networkpolicies"): {"create", "delete"},
    ("metrics.k8s.io", "pods"): {"list"},
    # a job's own Secrets (secret environment entries, registry login), read back by name: never list or watch;
    # patched once, to be owned by the job's Job
    ("", "secrets"): {"create", "get", "delete", "patch"},
}
CLUSTER_RULES = {("", "nodes"): {"list", "watch", "patch"}, ("", "pods"): {"list", "watch"},
                 ("storage.k8s.io", "storageclasses"): {"get", "list"}}


def rules_of(role) -> dict:
    out: dict = {}
    for r in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in r[field], f"wildcard in {role['metadata']['name']}: {r}"
        assert not r.get("resourceNames") and not r.get("nonResourceURLs")
        for g in r["apiGroups"]:
            for res in r["resources"]:
                out.setdefault((g, res), set()).update(r["verbs"])
    return out


def test_rbac_is_least_privilege(helm, own_chart, tmp_path):
    docs = render(helm, own_chart)
    assert rules_of(one(docs, "Role")) == ROLE_RULES
    assert rules_of(one(docs, "ClusterRole")) == CLUSTER_RULES
    # without per-job policies the ti service gets no right on NetworkPolicies
    f = values_file(tmp_path, {"networkPolicy": {"perJob": False}})
    assert ("networking.k8s.io", "networkpolicies") not in rules_of(one(render(helm, own_chart, "-f", f), "Role"))
    # without the SSH gateway, no exec or port-forward into user pods
    f = values_file(tmp_path, {"sshGateway": {"enabled": False}})
    rules = rules_of(one(render(helm, own_chart, "-f", f), "Role"))
    assert ("", "pods/exec") not in rules and ("", "pods/portforward") not in rules
    # the kubelets' figures are opt-in: get on nodes/proxy reaches a kubelet's whole API
    f = values_file(tmp_path, {"tiService": {"kubeletStats": True}})
    assert rules_of(one(render(helm, own_chart, "-f", f), "ClusterRole")) == {**CLUSTER_RULES,
                                                                             ("", "nodes/proxy"): {"get"}}
    f = values_file(tmp_path, {"rbac": {"create": False}})
    assert not [d for d in render(helm, own_chart, "-f", f) if "Role" in d["kind"]]


def test_network_policies(helm, own_chart, tmp_path):
    docs = render(helm, own_chart)
    pols = {d["metadata"]["name"]: d["spec"] for d in by_kind(docs, "NetworkPolicy")}
    user = pols["ti-hub-tihub-user-pods"]
    assert user["podSelector"] == {"matchLabels": {"app.kubernetes.io/managed-by": "ti-hub"}}
    assert set(user["policyTypes"]) == {"Ingress", "Egress"}
    # ingress: only the proxy and the hub pods of this release
    (ingress,) = user["ingress"]
    assert [p["podSelector"]["matchLabels"]["component"] for p in ingress["from"]] == ["proxy", "hub"]
    assert all(p["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": NS} for p in ingress["from"])
    # egress: the hub, DNS, the internet without the metadata server; no private ranges by default
    blocks = [t["ipBlock"] for rule in user["egress"] for t in rule["to"] if "ipBlock" in t]
    internet = [b for b in blocks if b["cidr"] == "0.0.0.0/0"]
    assert internet and all("169.254.169.254/32" in b["except"] for b in internet)
    dns = [r for r in user["egress"] if {"protocol": "UDP", "port": 53} in r.get("ports", [])]
    assert len(dns) == 1 and all(p["port"] == 53 for p in dns[0]["ports"])
    open_private = [r for r in user["egress"] if "ports" not in r
                    and any(t.get("ipBlock", {}).get("cidr") == "10.0.0.0/8" for t in r["to"])]
    assert not open_private
    hub_rule = [r for r in user["egress"] if any("podSelector" in t for t in r["to"])]
    assert [p["port"] for p in hub_rule[0]["ports"]] == [8081, 10101]
    # the hub reaches the Kubernetes API; the proxy reaches user pods and the ti service
    assert any(p["port"] in (443, 6443) for r in pols["ti-hub-hub"]["egress"] for p in r["ports"])
    # JOB6: the ti service (in the hub's pod) reaches job pods' interactive ports for the endpoints proxy
    ports_range = {"protocol": "TCP", "port": 40000, "endPort": 49999}
    assert ports_range in ingress["ports"]
    assert any(ports_range in r.get("ports", []) for r in pols["ti-hub-hub"]["egress"])
    assert pols["ti-hub-proxy"]["policyTypes"] == ["Egress"]
    # SSH clients reach the gateway's port of the hub's pod from anywhere, and only that port
    ssh_rules = [r for r in pols["ti-hub-hub"]["ingress"] if "from" not in r]
    assert ssh_rules == [{"ports": [{"protocol": "TCP", "port": 8022}]}]
    f = values_file(tmp_path, {"sshGateway": {"enabled": False}})
    hub_pol = one(render(helm, own_chart, "-f", f), "NetworkPolicy", "ti-hub-hub")["spec"]
    assert all("from" in r for r in hub_pol["ingress"])
    # no policies at all when disabled; no additions to z2jh's hub policy when z2jh has none
    f = values_file(tmp_path, {"networkPolicy": {"enabled": False}})
    assert not by_kind(render(helm, own_chart, "-f", f), "NetworkPolicy")
    f = values_file(tmp_path, {"jupyterhub": {"hub": {"networkPolicy": {"enabled": False}}}})
    assert "ti-hub-hub" not in {d["metadata"]["name"] for d in by_kind(render(helm, own_chart, "-f", f), "NetworkPolicy")}


# --- the SSH gateway ----------------------------------------------------------------------------------------------
def test_ssh_gateway_service_and_host_key(helm, own_chart, tmp_path):
    import asyncssh

    docs = render(helm, own_chart)
    svc = one(docs, "Service", "ti-hub-ssh")["spec"]
    assert svc["type"] == "LoadBalancer" and svc["selector"] == {"component": "hub", "release": RELEASE}
    assert svc["ports"] == [{"name": "ssh", "protocol": "TCP", "port": 22, "targetPort": 8022}]
    # the host key: made by the chart, kept in its Secret, and a key the gateway loads
    pem = base64.b64decode(one(docs, "Secret", "ti-hub-secret")["data"]["ssh-host-key"])
    assert asyncssh.import_private_key(pem).algorithm == b"ssh-ed25519"
    f = values_file(tmp_path, {"sshGateway": {"port": 2222, "service": {
        "type": "NodePort", "nodePort": 30022, "annotations": {"example.com/lb": "internal"}}}})
    svc = one(render(helm, own_chart, "-f", f), "Service", "ti-hub-ssh")
    assert svc["metadata"]["annotations"] == {"example.com/lb": "internal"}
    assert svc["spec"]["ports"][0] | {} == {"name": "ssh", "protocol": "TCP", "port": 22, "targetPort": 2222,
                                          "nodePort": 30022}
    f = values_file(tmp_path, {"sshGateway": {"service": {"loadBalancerSourceRanges": ["203.0.113.0/24"]}}})
    assert one(render(helm, own_chart, "-f", f), "Service")["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    # off: no Service (the Secret keeps its key: turning it back on keeps the clients' known_hosts right)
    f = values_file(tmp_path, {"sshGateway": {"enabled": False}})
    assert not by_kind(render(helm, own_chart, "-f", f), "Service")
    # the port shares the hub's pod with the hub and the ti service; a privileged port is refused by the schema
    for data, reason in (({"sshGateway": {"port": 10101}}, "sshGateway.port must differ"),
                         ({"sshGateway": {"port": 22}}, "/sshGateway/port"),
                         ({"sshGateway": {"service": {"type": "ExternalName"}}}, "/sshGateway/service/type"),
                         ({"sshGateway": {"publicHost": "a b"}}, "/sshGateway/publicHost")):
        out = render(helm, own_chart, "-f", values_file(tmp_path, data), check=False)
        assert out.returncode != 0 and reason in out.stderr, (data, out.stderr)


# --- the hub's Python configuration ----------------------------------------------------------------------------------
def load_hub_config(tmp_path, docs, process: str | None, env: dict) -> object:
    from traitlets.config import Config

    cm = one(docs, "ConfigMap", "ti-hub-config")["data"]
    d = tmp_path / process_dir(process)
    (d / "secret").mkdir(parents=True)
    for name, text in cm.items():
        (d / name).write_text(text)
    (d / "secret" / "ti-secret").write_text("k" * 44)
    (d / "secret" / "spawner-token").write_text("spawner-token-value\n")
    (d / "secret" / "db-url").write_text("")
    c = Config()
    c.Authenticator.admin_users = ["root-admin"]
    path = str(d / "ti_hub_config.py")
    glb = {"c": c, "__file__": path}
    if process:
        glb["TI_HUB_PROCESS"] = process
    old = dict(os.environ)
    os.environ.update(env)
    try:
        exec(compile((d / "ti_hub_config.py").read_text(), path, "exec"), glb)  # noqa: S102
    finally:
        os.environ.clear()
        os.environ.update(old)
    return c


def assert_known_traits(c):
    """Every setting names a trait of the class that reads it: a misspelt one would be ignored silently."""
    from jupyterhub.app import JupyterHub
    from jupyterhub.spawner import Spawner

    from ti_hub.backends.k8s import KubernetesBackend
    from ti_hub.service.app import TiService
    from ti_hub.spawner.kube import TiKubeSpawner
    from ti_hub.spawner.mixin import TiSpawnerMixin
    from ti_hub.ssh.settings import TiSSHGateway
    from ti_hub.storage.k8s import KubernetesVolumeDriver

    classes = {"TiSSHGateway": TiSSHGateway,"JupyterHub": JupyterHub, "Spawner": Spawner, "KubeSpawner": TiKubeSpawner,
               "TiKubeSpawner": TiKubeSpawner, "TiSpawnerMixin": TiSpawnerMixin, "TiService": TiService,
               "KubernetesBackend": KubernetesBackend, "KubernetesVolumeDriver": KubernetesVolumeDriver}
    for section, settings in c.items():
        if section == "Authenticator":  # set by the test itself
            continue
        cls = classes[section]
        unknown = set(settings) - set(cls.class_trait_names(config=True))
        assert not unknown, f"{section} has no trait {sorted(unknown)}"


def process_dir(process):
    return f"etc-{process or 'service'}"


def test_hub_config_wires_services_spawner_and_backend(helm, own_chart, tmp_path, monkeypatch):
    npu = {"resource": "huawei.com/Ascend910", "nodeSelector": {"kubernetes.io/arch": "arm64"},
           "tolerations": [{"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}],
           "counts": [0, 1, 2, 4, 8], "perNode": 8}
    f = values_file(tmp_path, {"userNamespace": "users", "storageClasses": {"filesystem": "cephfs"},
                               "devices": {"types": {"ascend910": npu}},
                               "tiService": {"extraConfig": "c.TiService.max_workers = 7"}})
    docs = render(helm, own_chart, "-f", f)
    hub_dir = tmp_path / "srv-jupyterhub"  # z2jh's hub runs in /srv/jupyterhub, its SQLite path relative to it
    hub_dir.mkdir()
    monkeypatch.chdir(hub_dir)
    env = {"TI_HUB_POD_IP": "10.1.2.3", "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
           "POD_NAMESPACE": NS}
    c = load_hub_config(tmp_path, docs, "hub", env)
    assert c.JupyterHub.spawner_class == "ti_hub.spawner.kube.TiKubeSpawner"
    assert c.TiService.backend_class == "ti_hub.backends.k8s.KubernetesBackend"
    services = {s["name"]: s for s in c.JupyterHub.services}
    ti = services["ti"]
    assert ti["url"] == "http://10.1.2.3:10101"
    assert ti["command"][1:3] == ["-m", "ti_hub.service"] and ti["command"][3].endswith("/ti_hub_config.py")
    assert ti["environment"]["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert services["ti-spawner"]["api_token"] == "spawner-token-value"
    # home.html checks server names as typed, by the workspace-name rule (JupyterHub's and TiHub's together)
    assert c.JupyterHub.template_vars["ti_name_rule"] == WORKSPACE_NAME_RULE
    assert c.TiSpawnerMixin.ti_api_url == "http://10.1.2.3:10101/services/ti/api/v1"
    assert c.TiSpawnerMixin.ti_public_api_url == "http://hub.tihub.svc:10101/services/ti/api/v1"
    assert c.KubeSpawner.namespace == "users" and c.KubernetesBackend.namespace == "users"
    assert c.KubeSpawner.extra_labels["app.kubernetes.io/managed-by"] == "ti-hub"
    assert c.KubernetesBackend.device_resource == "nvidia.com/gpu"
    assert c.KubernetesBackend.network_policy_per_job is True  # the chart's policies close user pods
    # the classes that read these settings accept them (validation included)
    from ti_hub.backends.k8s import KubernetesBackend
    from ti_hub.storage.k8s import KubernetesVolumeDriver
    assert KubernetesVolumeDriver(config=c).storage_classes == {"filesystem": "cephfs"}
    assert KubernetesBackend(config=c).namespace == "users"
    # device types reach the backend and the spawner alike, in the traits' shape
    assert c.KubernetesBackend.device_types == c.TiKubeSpawner.device_types == {"ascend910": {
        "resource": "huawei.com/Ascend910", "node_selector": {"kubernetes.io/arch": "arm64"},
        "tolerations": npu["tolerations"], "counts": [0, 1, 2, 4, 8], "per_node": 8}}
    assert KubernetesBackend(config=c).device_count_rules == {"ascend910": [0, 1, 2, 4, 8]}
    assert {r["name"] for r in c.JupyterHub.load_roles} == {"user", "ti-admin", "ti-service", "ti-spawner", "ti-ssh"}
    # the SSH gateway: a service the hub starts with this file, reading the hub's database but not TiHub's
    gw = services["ti-ssh"]
    assert gw["command"][1:] == ["-m", "ti_hub.ssh", f"--config={ti['command'][3].split('=', 1)[1]}"]
    assert gw["environment"]["TI_SSH_HUB_DB_URL"] == f"sqlite:///{hub_dir}/jupyterhub.sqlite"
    assert "TI_HUB_DB_URL" not in gw["environment"] and gw["environment"]["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert gw["cwd"] == str(hub_dir)
    (ssh_role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "ti-ssh"]
    assert ssh_role["services"] == ["ti-ssh"] and "custom:ti:ssh:gateway" in ssh_role["scopes"]
    assert (c.TiSSHGateway.port, c.TiSSHGateway.ip, c.TiSSHGateway.public_port) == (8022, "", 22)
    assert c.TiSSHGateway.host_key_file.endswith("/secret/ssh-host-key")
    assert c.JupyterHub.load_groups["ti-admins"]["users"] == ["root-admin"]
    assert c.TiService.max_workers == 7
    assert c.TiService.tensorboard_image == "ti-hub/workspace:0.1.0"
    assert c.TiKubeSpawner.installation == c.KubernetesBackend.installation == "tihub.tihub"
    assert_known_traits(c)
    # the ti service's process: its own settings, none of the hub's
    c = load_hub_config(tmp_path, docs, None, {})
    assert c.TiSSHGateway.port == 8022 and "api_url" not in c.TiSSHGateway  # no pod address given
    # the gateway's process: the hub gave it the pod's address and its database's URL
    gw_c = load_hub_config(tmp_path / "gateway", docs, None, gw["environment"])
    assert gw_c.TiSSHGateway.api_url == "http://10.1.2.3:10101/services/ti/api/v1"
    assert gw_c.TiSSHGateway.hub_db_url == f"sqlite:///{hub_dir}/jupyterhub.sqlite"
    assert c.TiService.backend_class == "ti_hub.backends.k8s.KubernetesBackend"
    assert c.TiService.secret_file.endswith("/secret/ti-secret") and "db_url" not in c.TiService
    assert "services" not in c.JupyterHub and c.TiService.max_workers == 7


# --- against the API server ------------------------------------------------------------------------------------------
def server_dry_run(cluster, docs, release_ns):
    """kubectl apply --dry-run=server, namespace by namespace (z2jh's objects name none)."""
    groups: dict[str, list] = {}
    for d in docs:
        groups.setdefault(d["metadata"].get("namespace", release_ns), []).append(d)
    for ns, items in groups.items():
        out = cluster.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", check=False,
                              input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("(server dry run)") == len(items), out.stdout


def test_pin_policy_is_the_backends_and_only_where_the_cluster_serves_it(helm, own_chart, tmp_path):
    from ti_hub.backends.k8s import objects as ob

    f = values_file(tmp_path, {"userNamespace": "users"})
    docs = render(helm, own_chart, "-f", f, *WITH_MAP)
    policy, binding = one(docs, "MutatingAdmissionPolicy"), one(docs, "MutatingAdmissionPolicyBinding")
    want_policy, want_binding = ob.pin_policy(policy["metadata"]["name"], "users")
    assert policy["spec"] == want_policy["spec"] and binding["spec"] == want_binding["spec"]
    assert policy["metadata"]["name"] == f"ti-hub-{NS}-pin"
    beta = render(helm, own_chart, "--api-versions", "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy")
    assert one(beta, "MutatingAdmissionPolicy")["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
    assert not by_kind(render(helm, own_chart), "MutatingAdmissionPolicy")  # a cluster without the API
    off = render(helm, own_chart, "-f", values_file(tmp_path, {"pinPolicy": {"enabled": False}}), *WITH_MAP)
    assert not by_kind(off, "MutatingAdmissionPolicy") and not by_kind(off, "MutatingAdmissionPolicyBinding")


def test_server_dry_run_own_objects(helm, own_chart, k8s_cluster, namespaces, tmp_path):
    release_ns, user_ns = namespaces("helm-hub"), namespaces("helm-users")
    f = values_file(tmp_path, {"userNamespace": user_ns})
    docs = render(helm, own_chart, "-f", f, *WITH_MAP, namespace=release_ns)
    assert by_kind(docs, "MutatingAdmissionPolicy")  # the API server's CEL compiler checks its expressions
    # Pod Security admission (restricted) judges the helm-test pod in the dry run too
    server_dry_run(k8s_cluster, docs, release_ns)


def test_server_dry_run_whole_chart(helm, full_chart, k8s_cluster, namespaces):
    # restricted: z2jh's hub and proxy, as the chart configures them, may share the namespace with user pods
    release_ns = namespaces("helm-full")
    server_dry_run(k8s_cluster, render(helm, full_chart, namespace=release_ns), release_ns)


def test_rbac_grants_on_the_api_server(helm, own_chart, k8s_cluster, namespaces, tmp_path):
    """Applied for real: the ServiceAccount may do what TiHub needs and nothing next to it."""
    release_ns, user_ns = namespaces("helm-rbac"), namespaces("helm-rbac-users")
    docs = render(helm, own_chart, "-f", values_file(tmp_path, {"userNamespace": user_ns}), namespace=release_ns)
    rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                                             "ClusterRoleBinding")]
    k8s_cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}))
    cluster_scoped = [f"{d['kind'].lower()}/{d['metadata']['name']}" for d in rbac if d["kind"].startswith("Cluster")]
    sa = f"system:serviceaccount:{release_ns}:ti-hub"

    def can(*args) -> bool:
        out = k8s_cluster.kubectl("auth", "can-i", f"--as={sa}", *args, check=False)
        return out.stdout.strip() == "yes"

    try:
        for args in (("create", "jobs.batch", "-n", user_ns), ("delete", "pods", "-n", user_ns),
                     ("get", "pods", "--subresource=log", "-n", user_ns),
                     ("delete", "networkpolicies.networking.k8s.io", "-n", user_ns),
                     ("patch", "persistentvolumeclaims", "-n", user_ns), ("watch", "events", "-n", user_ns),
                     ("create", "networkpolicies.networking.k8s.io", "-n", user_ns), ("list", "nodes"),
                     ("patch", "nodes"),  # RES2: a node given to a virtual cluster gets its pool label
                     ("watch", "pods", "--all-namespaces"), ("get", "storageclasses.storage.k8s.io"),
                     ("create", "pods", "--subresource=exec", "-n", user_ns),
                     ("create", "pods", "--subresource=portforward", "-n", user_ns),
                     ("create", "secrets", "-n", user_ns), ("get", "secrets", "-n", user_ns),
                     ("patch", "secrets", "-n", user_ns)):
            assert can(*args), args
        # Secrets: only the jobs' own, by name (never listed); nothing elsewhere
        for args in (("update", "pods", "-n", user_ns), ("list", "secrets", "-n", user_ns),
                     ("watch", "secrets", "-n", user_ns), ("update", "secrets", "-n", user_ns),
                     ("update", "networkpolicies.networking.k8s.io", "-n", user_ns),
                     ("get", "secrets", "-n", "kube-system"), ("create", "pods", "-n", "kube-system"),
                     ("delete", "nodes"), ("update", "nodes"), ("get", "configmaps", "-n", user_ns),
                     ("create", "pods", "--subresource=exec", "-n", "kube-system"), ("create", "roles", "-n", user_ns),
                     ("create", "pods", "--subresource=attach", "-n", user_ns),
                     ("get", "pods", "--subresource=log", "-n", "kube-system")):
            assert not can(*args), args
    finally:
        k8s_cluster.kubectl("delete", *cluster_scoped, "--wait=false", check=False)


def test_grafana_dashboards_and_service_monitor_only_when_enabled(helm, own_chart, tmp_path):
    docs = render(helm, own_chart)
    assert not [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("ti-hub-dashboard-")]
    assert not by_kind(docs, "ServiceMonitor")
    f = values_file(tmp_path, {"grafana": {"dashboards": {"enabled": True, "namespace": "monitoring"}},
                               "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}}}})
    docs = render(helm, own_chart, "-f", f)
    boards = {d["metadata"]["name"]: d for d in by_kind(docs, "ConfigMap")
              if d["metadata"]["name"].startswith("ti-hub-dashboard-")}
    assert set(boards) == {f"ti-hub-dashboard-{n}" for n in ("cluster", "node", "queue", "user", "vc")}
    for name, cm in boards.items():
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["namespace"] == "monitoring"
        assert cm["metadata"]["annotations"]["grafana_folder"] == "TiHub"
        (doc,) = cm["data"].values()
        board = json.loads(doc)
        assert board["uid"] == "ti-hub-" + name.removeprefix("ti-hub-dashboard-") and board["panels"]
    sm = one(docs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kps"
    (ep,) = sm["spec"]["endpoints"]
    assert ep["path"] == "/services/ti/api/v1/metrics" and ep["authorization"]["credentials"] == {
        "name": "ti-hub-metrics-token", "key": "token"}
