"""KubernetesVolumeDriver against a real API server and PV controller; a fake CSI provisioner (provisioner.py)
makes and grows the volumes, since the fake nodes cannot run a real CSI driver."""

from __future__ import annotations

import json

import pytest
from hubproc import own_hub
from tihub_client import wait
from traitlets.config import Configurable

from ti_hub.backends.k8s import KubernetesBackend
from ti_hub.backends.k8s import objects as ob
from ti_hub.domain.errors import Conflict
from ti_hub.storage.k8s import LABEL_VOLUME_ID, KubernetesVolumeDriver

from .provisioner import FAKE_DRIVER

NS = "ti-storage"
CLASSES = {"block": "ti-test-block", "filesystem": "ti-test-filesystem", "bucket": "ti-test-filesystem",
           "dataset": "ti-test-dataset"}


def storage_class(name: str, expandable: bool) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": FAKE_DRIVER, "allowVolumeExpansion": expandable, "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate"}


@pytest.fixture(scope="module")
def classes(k8s_cluster, fake_provisioner):
    """The test classes (fake provisioner; block cannot grow) and the namespace of the driver's claims."""
    k8s_cluster.namespace(NS)
    k8s_cluster.apply([storage_class("ti-test-block", False), storage_class("ti-test-filesystem", True),
                       storage_class("ti-test-dataset", True)])
    return fake_provisioner


@pytest.fixture(scope="module")
def driver(k8s_cluster, classes):
    d = KubernetesVolumeDriver(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="storage-test",
                               storage_classes=CLASSES)
    yield d
    d.close()


def claim(cluster, name: str, ns: str = NS) -> dict | None:
    out = cluster.kubectl("get", "pvc", name, "-n", ns, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def bound(cluster, name: str, ns: str = NS) -> dict:
    return wait(lambda: (c := claim(cluster, name, ns)) and c.get("status", {}).get("phase") == "Bound" and c,
                timeout=30, what=f"claim {name} to be bound")


def volume_of(cluster, pvc: dict) -> dict:
    out = cluster.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json")
    return json.loads(out.stdout)


def test_create_makes_one_bound_claim_of_the_kinds_class_mode_and_size(driver, k8s_cluster):
    driver.create(101, "filesystem", volume="alice/data", capacity_gib=5)
    driver.create(102, "block", volume="alice/disk", capacity_gib=2)
    fs = bound(k8s_cluster, ob.pvc_name(101, "alice/data"))
    assert fs["spec"]["storageClassName"] == "ti-test-filesystem"
    assert fs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert fs["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert fs["status"]["capacity"]["storage"] == "5Gi"
    labels = fs["metadata"]["labels"]
    assert labels[ob.MANAGED_BY] == "ti-hub" and labels[LABEL_VOLUME_ID] == "101"
    assert labels[ob.LABEL_INSTALLATION] == ob.label_value("storage-test")
    assert fs["metadata"]["annotations"]["ti-hub.io/volume"] == "alice/data"
    pv = volume_of(k8s_cluster, fs)
    assert pv["spec"]["csi"]["driver"] == FAKE_DRIVER and pv["spec"]["claimRef"]["uid"] == fs["metadata"]["uid"]
    block = bound(k8s_cluster, ob.pvc_name(102, "alice/disk"))
    assert block["spec"]["storageClassName"] == "ti-test-block"
    assert block["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_a_filesystem_volume_grows_online(driver, k8s_cluster):
    name = ob.pvc_name(110, "alice/grow")
    driver.create(110, "filesystem", volume="alice/grow", capacity_gib=2)
    bound(k8s_cluster, name)
    driver.expand(110, "alice/grow", 4, kind="filesystem")
    assert claim(k8s_cluster, name)["spec"]["resources"]["requests"]["storage"] == "4Gi"
    grown = wait(lambda: (c := claim(k8s_cluster, name))["status"]["capacity"]["storage"] == "4Gi" and c,
                 timeout=30, what="the fake resizer to grow the claim")
    assert volume_of(k8s_cluster, grown)["spec"]["capacity"]["storage"] == "4Gi"
    driver.expand(110, "alice/grow", 4, kind="filesystem")  # the same size again: nothing to do


def test_a_class_without_expansion_refuses_growth_by_name(driver, k8s_cluster):
    name = ob.pvc_name(111, "alice/fixed")
    driver.create(111, "block", volume="alice/fixed", capacity_gib=2)
    bound(k8s_cluster, name)
    with pytest.raises(Conflict) as e:  # the class decides, not the request: 409
        driver.expand(111, "alice/fixed", 3, kind="block")
    assert e.value.field == "capacity_gib"
    assert "ti-test-block" in e.value.detail and "allowVolumeExpansion" in e.value.detail
    assert claim(k8s_cluster, name)["spec"]["resources"]["requests"]["storage"] == "2Gi"


def test_delete_removes_the_claim_and_its_volume(driver, k8s_cluster, classes):
    name = ob.pvc_name(120, "alice/gone")
    driver.create(120, "filesystem", volume="alice/gone", capacity_gib=1)
    pv_name = bound(k8s_cluster, name)["spec"]["volumeName"]
    driver.delete(120, volume="alice/gone", kind="filesystem")
    wait(lambda: claim(k8s_cluster, name) is None, timeout=30, what="the claim to go")
    wait(lambda: k8s_cluster.kubectl("get", "pv", pv_name, check=False).returncode != 0, timeout=30,
         what="the fake provisioner to delete the volume")
    driver.delete(120, volume="alice/gone", kind="filesystem")  # already gone: fine


def test_delete_without_the_name_finds_the_claim_by_its_labels(driver, k8s_cluster):
    name = ob.pvc_name(121, "alice/lost-name")
    driver.create(121, "filesystem", volume="alice/lost-name", capacity_gib=1)
    assert claim(k8s_cluster, name)
    driver.delete(121)
    wait(lambda: claim(k8s_cluster, name) is None, timeout=30, what="the claim to go")


def test_owner_and_name_never_collide_however_they_split(driver, k8s_cluster):
    # even under one id: the name's hash is of the exact parts
    driver.create(130, "filesystem", volume="alice-prod/x", capacity_gib=1)
    driver.create(130, "filesystem", volume="alice/prod-x", capacity_gib=1)
    a, b = ob.pvc_name(130, "alice-prod/x"), ob.pvc_name(130, "alice/prod-x")
    assert a != b
    assert claim(k8s_cluster, a)["metadata"]["annotations"]["ti-hub.io/volume"] == "alice-prod/x"
    assert claim(k8s_cluster, b)["metadata"]["annotations"]["ti-hub.io/volume"] == "alice/prod-x"


def test_a_dataset_is_a_clone_of_its_source_claim(driver, k8s_cluster):
    driver.create(140, "filesystem", volume="alice/src", capacity_gib=3)
    src = bound(k8s_cluster, ob.pvc_name(140, "alice/src"))
    with pytest.raises(Conflict) as e:  # the source's size decides: 409
        driver.create(141, "dataset", 140, volume="alice/small", capacity_gib=2, source="alice/src")
    assert e.value.field == "capacity_gib" and "at least 3" in e.value.detail
    assert claim(k8s_cluster, ob.pvc_name(141, "alice/small")) is None
    driver.create(142, "dataset", 140, volume="alice/ds", capacity_gib=3, source="alice/src")
    ds = bound(k8s_cluster, ob.pvc_name(142, "alice/ds"))
    source = ds["spec"]["dataSource"]
    assert (source["kind"], source["name"], source.get("apiGroup")) == ("PersistentVolumeClaim",
                                                                       src["metadata"]["name"], None)
    assert ds["spec"]["storageClassName"] == "ti-test-dataset"
    assert volume_of(k8s_cluster, ds)["spec"]["csi"]["volumeAttributes"]["clonedFrom"] == \
        f"{NS}/{src['metadata']['name']}"
    with pytest.raises(Conflict) as e:
        driver.create(143, "dataset", 999, volume="alice/orphan", capacity_gib=3, source="bob/none")
    assert e.value.field == "source"


def test_a_missing_class_is_refused_before_a_claim_waits_forever(k8s_cluster, classes):
    d = KubernetesVolumeDriver(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="storage-test",
                               storage_classes={"filesystem": "no-such-class"})
    try:
        with pytest.raises(Conflict) as e:
            d.create(150, "filesystem", volume="alice/nowhere", capacity_gib=1)
        assert e.value.field == "kind" and "no-such-class" in e.value.detail
        assert claim(k8s_cluster, ob.pvc_name(150, "alice/nowhere")) is None
    finally:
        d.close()


def test_the_driver_can_create_its_classes_and_leaves_existing_ones_alone(k8s_cluster, classes):
    d = KubernetesVolumeDriver(kubeconfig=str(k8s_cluster.kubeconfig), namespace=NS, installation="storage-test",
                               storage_classes={"filesystem": "ti-made-fs", "block": "ti-test-block"},
                               create_storage_classes=True, storage_class_provisioner=FAKE_DRIVER,
                               storage_class_parameters={"filesystem": {"tier": "fast"}})
    try:
        d.create(160, "filesystem", volume="alice/made", capacity_gib=1)
        made = json.loads(k8s_cluster.kubectl("get", "storageclass", "ti-made-fs", "-o", "json").stdout)
        assert made["provisioner"] == FAKE_DRIVER and made["allowVolumeExpansion"] is True
        assert made["parameters"] == {"tier": "fast"}
        assert made["metadata"]["labels"][ob.MANAGED_BY] == "ti-hub"
        kept = json.loads(k8s_cluster.kubectl("get", "storageclass", "ti-test-block", "-o", "json").stdout)
        assert kept.get("allowVolumeExpansion") is False  # the admin's class, untouched
        bound(k8s_cluster, ob.pvc_name(160, "alice/made"))
    finally:
        d.close()


def test_local_volumes_have_no_claim_and_what_needs_a_pod_says_so(driver, k8s_cluster):
    driver.create(170, "local", volume="alice/scratch", capacity_gib=10)
    assert claim(k8s_cluster, ob.pvc_name(170, "alice/scratch")) is None
    driver.expand(170, "alice/scratch", 20, kind="local")
    driver.delete(170, volume="alice/scratch", kind="local")
    assert driver.usage_bytes(170) is None
    assert driver.path(170) == ""
    with pytest.raises(Conflict) as e:
        driver.browse(170, "")
    assert e.value.field == "path" and "workspace" in e.value.detail


async def test_calls_on_an_event_loop_are_refused_not_blocking(driver):
    with pytest.raises(RuntimeError, match="worker thread"):
        driver.create(180, "filesystem", volume="alice/loop", capacity_gib=1)


def test_namespace_and_installation_follow_the_kubernetes_backend():
    class Service(Configurable):
        pass

    svc = Service()
    svc.backend = KubernetesBackend(parent=svc, namespace="users", installation="prod", kubeconfig="/k")
    d = KubernetesVolumeDriver(parent=svc)
    assert (d.namespace, d.installation, d.kubeconfig) == ("users", "prod", "/k")
    assert KubernetesVolumeDriver(parent=svc, namespace="other").namespace == "other"
    assert KubernetesVolumeDriver().namespace == "default"
    with pytest.raises(Exception, match="unknown volume kind"):
        KubernetesVolumeDriver(storage_classes={"local": "x"})
    with pytest.raises(Exception, match="access_modes"):
        KubernetesVolumeDriver(access_modes={"block": "ReadWriteSometimes"})


# -- the platform: a hub whose volumes are claims ----------------------------------------------------------------
HUB_NS = "ti-storage-hub"


@pytest.fixture(scope="module")
def shub(k8s_cluster, classes, tmp_path_factory):
    k8s_cluster.namespace(HUB_NS)
    yield from own_hub(tmp_path_factory, "shub", (
        "c.TiService.backend_class = 'ti_hub.backends.k8s.KubernetesBackend'\n"
        "c.TiService.volume_driver_class = 'ti_hub.storage.k8s.KubernetesVolumeDriver'\n"
        f"c.KubernetesBackend.kubeconfig = {str(k8s_cluster.kubeconfig)!r}\n"
        f"c.KubernetesBackend.namespace = {HUB_NS!r}\n"
        "c.KubernetesBackend.installation = 'storage-hub'\n"
        f"c.KubernetesVolumeDriver.storage_classes = {CLASSES!r}\n"
        # workspaces as pods, mounting the claims
        "import os\n"
        f"os.environ['KUBECONFIG'] = {str(k8s_cluster.kubeconfig)!r}\n"
        "c.JupyterHub.spawner_class = 'ti_hub.spawner.kube.TiKubeSpawner'\n"
        f"c.KubeSpawner.namespace = {HUB_NS!r}\n"
        "c.TiKubeSpawner.installation = 'storage-hub'\n"
        "c.Spawner.http_timeout = 10\n"))


def hub_claims(cluster) -> list[dict]:
    out = cluster.kubectl("get", "pvc", "-n", HUB_NS, "-o", "json")
    return json.loads(out.stdout)["items"]


def test_the_platform_makes_grows_and_deletes_claims_through_its_api(shub, k8s_cluster):
    admin = shub.admin
    vol = admin.ok("POST", "/volumes", json={"name": "train-data", "kind": "filesystem", "capacity_gib": 10})
    name = ob.pvc_name(vol["id"], f"{admin.name}/train-data")
    pvc = bound(k8s_cluster, name, HUB_NS)
    assert pvc["spec"]["resources"]["requests"]["storage"] == "10Gi"
    # namespace and installation come from the backend's settings
    assert pvc["metadata"]["labels"][ob.LABEL_INSTALLATION] == ob.label_value("storage-hub")
    shown = admin.ok("GET", f"/volumes/{vol['id']}")
    assert shown["used_bytes"] is None  # unknown on Kubernetes, not an error
    r = admin.api("GET", f"/volumes/{vol['id']}/files")
    assert r.status_code == 409 and r.json()["field"] == "path", r.text
    grown = admin.ok("PATCH", f"/volumes/{vol['id']}", json={"capacity_gib": 12})
    assert grown["capacity_gib"] == 12
    assert claim(k8s_cluster, name, HUB_NS)["spec"]["resources"]["requests"]["storage"] == "12Gi"

    disk = admin.ok("POST", "/volumes", json={"name": "disk", "kind": "block", "capacity_gib": 2})
    bound(k8s_cluster, ob.pvc_name(disk["id"], f"{admin.name}/disk"), HUB_NS)
    r = admin.api("PATCH", f"/volumes/{disk['id']}", json={"capacity_gib": 3})
    assert r.status_code == 409 and r.json()["field"] == "capacity_gib", r.text  # its StorageClass decides
    assert admin.ok("GET", f"/volumes/{disk['id']}")["capacity_gib"] == 2  # rolled back with the refusal

    admin.ok("DELETE", f"/volumes/{vol['id']}")
    wait(lambda: claim(k8s_cluster, name, HUB_NS) is None, timeout=30, what="the claim to go")


def test_a_refused_volume_makes_no_claim(shub, k8s_cluster):
    admin = shub.admin
    before = {c["metadata"]["name"] for c in hub_claims(k8s_cluster)}
    r = admin.api("POST", "/volumes", json={"name": "huge", "kind": "filesystem", "capacity_gib": 100_000})
    assert r.status_code == 403 and r.json()["error"] == "quota_exceeded", r.text
    r = admin.api("POST", "/volumes", json={"name": "bad name!", "kind": "filesystem", "capacity_gib": 1})
    assert r.status_code == 400, r.text
    assert {c["metadata"]["name"] for c in hub_claims(k8s_cluster)} == before


def test_a_workspace_pod_mounts_its_volumes_claims(shub, k8s_cluster):
    admin = shub.admin
    admin.ok("POST", "/plans", json={"name": "ws-small", "kinds": ["workspace"], "device_type": "cpu",
                                     "device_count": 0, "cpu": 1, "memory_mib": 1024})
    vol = admin.ok("POST", "/volumes", json={"name": "notes", "kind": "filesystem", "capacity_gib": 1})
    claim_name = ob.pvc_name(vol["id"], f"{admin.name}/notes")
    bound(k8s_cluster, claim_name, HUB_NS)
    r = admin.hub_api("POST", f"/users/{admin.name}/servers/with-notes", json={
        "plan": "ws-small", "volumes": [{"volume": f"{admin.name}/notes", "mount_path": "/mnt/notes"}]})
    assert r.status_code in (201, 202), r.text
    pod_name = ob.safe_name("ti-ws", admin.name, "with-notes")

    def pod():
        out = k8s_cluster.kubectl("get", "pod", pod_name, "-n", HUB_NS, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None
    p = wait(lambda: (x := pod()) and x["status"].get("phase") == "Running" and x, timeout=60, what="the pod")
    vols = {v["name"]: v for v in p["spec"]["volumes"]}
    claims = [v["persistentVolumeClaim"] for v in vols.values() if "persistentVolumeClaim" in v]
    work, archive = (ob.personal_claim_name(k, admin.name) for k in ("work", "archive"))
    assert sorted(c["claimName"] for c in claims) == sorted([claim_name, work, archive])
    assert not any(c.get("readOnly") for c in claims)
    (c,) = [c for c in p["spec"]["containers"] if c["name"] == "notebook"]
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/mnt/notes")
    assert "persistentVolumeClaim" in vols[mount["name"]] and not mount.get("readOnly")
    # STO8: the owner's work and archive directories, made by TiHub at the start, and where the code reads them
    assert mounted_claims(p, c) == {f"/mnt/{admin.name}": work, f"/archives/{admin.name}": archive,
                                    "/mnt/notes": claim_name}
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert (env["TI_WORK_DIR"], env["TI_ARCHIVE_DIR"]) == (f"/mnt/{admin.name}", f"/archives/{admin.name}")
    bound(k8s_cluster, work, HUB_NS), bound(k8s_cluster, archive, HUB_NS)
    # Jupyter and its terminals open in the work directory: the image's home does not outlive the pod
    assert c["workingDir"] == env["JUPYTERHUB_ROOT_DIR"] == f"/mnt/{admin.name}"
    # the volume says who holds it
    assert any(f"{admin.name}/with-notes" in h for h in admin.ok("GET", f"/volumes/{vol['id']}")["mounted_by"])
    admin.hub_api("DELETE", f"/users/{admin.name}/servers/with-notes")
    wait(lambda: pod() is None, timeout=60, what="the pod to go")


def mounted_claims(pod: dict, container: dict) -> dict[str, str]:
    """mount path -> claim name, for the container's claim mounts."""
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    return {m["mountPath"]: vols[m["name"]]["persistentVolumeClaim"]["claimName"] for m in container["volumeMounts"]
            if "persistentVolumeClaim" in vols[m["name"]]}


def test_each_user_gets_a_work_and_an_archive_claim_mounted_into_their_jobs(shub, k8s_cluster):
    """STO8: made by TiHub when the user first starts something, bound, kept between jobs, the owner's only."""
    u, other = shub.person("pdir"), shub.person("pdirother")
    work, archive = (ob.personal_claim_name(k, u.name) for k in ("work", "archive"))
    assert claim(k8s_cluster, work, HUB_NS) is None and claim(k8s_cluster, archive, HUB_NS) is None
    assert u.ok("GET", "/quota")["personal"] == {"work": f"/mnt/{u.name}", "archive": f"/archives/{u.name}"}
    first: dict[str, str] = {}
    for i in range(2):
        job = u.ok("POST", "/jobs", json={"name": f"pdir-{i}", "plan": "cpu-small", "image": "python-cpu",
                                          "command": "ls $TI_WORK_DIR"})
        pod = wait(lambda: (ps := json.loads(k8s_cluster.kubectl(
            "get", "pods", "-n", HUB_NS, "-l", f"{ob.LABEL_JOB_ID}={job['id']}", "-o", "json").stdout)["items"])
            and ps[0], timeout=60, what="the job's pod")
        (c,) = pod["spec"]["containers"]
        assert mounted_claims(pod, c) == {f"/mnt/{u.name}": work, f"/archives/{u.name}": archive}
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert (env["TI_WORK_DIR"], env["TI_ARCHIVE_DIR"]) == (f"/mnt/{u.name}", f"/archives/{u.name}")
        for name, gib in ((work, 10), (archive, 50)):
            pvc = bound(k8s_cluster, name, HUB_NS)
            assert first.setdefault(name, pvc["metadata"]["uid"]) == pvc["metadata"]["uid"]  # the same claim, not a new one: the files persist
            assert pvc["spec"]["storageClassName"] == CLASSES["filesystem"]
            assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
            assert pvc["spec"]["resources"]["requests"]["storage"] == f"{gib}Gi"
            assert pvc["metadata"]["labels"][ob.LABEL_OWNER] == ob.label_value(u.name)
        u.api("POST", f"/jobs/{job['id']}/kill")
    # another user's job mounts their own claims, never these
    job = other.ok("POST", "/jobs", json={"name": "pdir-x", "plan": "cpu-small", "image": "python-cpu",
                                          "command": "true"})
    pod = wait(lambda: (ps := json.loads(k8s_cluster.kubectl(
        "get", "pods", "-n", HUB_NS, "-l", f"{ob.LABEL_JOB_ID}={job['id']}", "-o", "json").stdout)["items"])
        and ps[0], timeout=60, what="the other job's pod")
    assert set(mounted_claims(pod, pod["spec"]["containers"][0]).values()) == {
        ob.personal_claim_name("work", other.name), ob.personal_claim_name("archive", other.name)}
    other.api("POST", f"/jobs/{job['id']}/kill")


def test_tensorboard_for_a_jobs_logdir_is_a_pod_reading_its_claim(shub, k8s_cluster):
    """JOB6 on Kubernetes: a pod per (job, logdir) mounts the volume's claim read-only at the logdir's sub-path."""
    from ti_hub.endpoints import kubetb

    admin, other = shub.admin, shub.person("tbother")
    vol = admin.ok("POST", "/volumes", json={"name": "runs", "kind": "filesystem", "capacity_gib": 1})
    claim_name = ob.pvc_name(vol["id"], f"{admin.name}/runs")
    bound(k8s_cluster, claim_name, HUB_NS)
    job = admin.ok("POST", "/jobs", json={"name": "tb-train", "plan": "cpu-small", "image": "python-cpu",
                                          "command": "python train.py",
                                          "volumes": [{"volume": "runs", "mount_path": "/mnt/runs"}],
                                          "endpoints": ["tensorboard"]})
    r = admin.api("POST", f"/jobs/{job['id']}/tensorboard", json={"logdir": "/mnt/runs/exp1"})
    assert r.status_code == 201, r.text
    tb = r.json()
    assert tb["logdir"] == "/mnt/runs/exp1" and tb["url"].endswith(f"/endpoints/{job['id']}/tensorboard/{tb['key']}/")
    pods = json.loads(k8s_cluster.kubectl("get", "pods", "-n", HUB_NS, "-l", f"{kubetb.LABEL_TB_JOB}={job['id']}",
                                          "-o", "json").stdout)["items"]
    assert len(pods) == 1
    spec, meta = pods[0]["spec"], pods[0]["metadata"]
    (c,) = spec["containers"]
    (logs,) = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert logs["persistentVolumeClaim"] == {"claimName": claim_name, "readOnly": True}
    mount = next(m for m in c["volumeMounts"] if m["name"] == logs["name"])
    assert mount == {"name": logs["name"], "mountPath": "/logs", "readOnly": True, "subPath": "exp1"}
    assert c["args"][:4] == ["--logdir", "/logs", "--path_prefix", tb["url"].rstrip("/")]
    assert c["securityContext"]["runAsNonRoot"] and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["automountServiceAccountToken"] is False and spec["activeDeadlineSeconds"] == 3600
    # not TiHub's accounting: capacity counts it like any other pod's; never taken for a job's pod
    assert ob.LABEL_INSTALLATION not in meta["labels"] and ob.LABEL_JOB_ID not in meta["labels"]
    # a second start finds it; the list, the job's detail; nobody else sees or stops it
    again = admin.api("POST", f"/jobs/{job['id']}/tensorboard", json={"logdir": "/mnt/runs/exp1/"})
    assert again.status_code == 200 and again.json()["key"] == tb["key"], again.text
    assert [t["logdir"] for t in admin.ok("GET", f"/jobs/{job['id']}/tensorboard")["items"]] == ["/mnt/runs/exp1"]
    assert [t["url"] for t in admin.ok("GET", f"/jobs/{job['id']}")["tensorboards"]] == [tb["url"]]
    # (another user does not even see a job that runs: SPEC JOB5)
    assert other.api("GET", f"/jobs/{job['id']}/tensorboard").status_code == 404
    assert other.api("DELETE", f"/jobs/{job['id']}/tensorboard").status_code == 404
    # a logdir outside the job's volumes is refused by name, with no pod made
    r = admin.api("POST", f"/jobs/{job['id']}/tensorboard", json={"logdir": "/etc"})
    assert r.status_code == 409 and r.json()["field"] == "logdir", r.text  # the job's mounts decide
    assert admin.ok("DELETE", f"/jobs/{job['id']}/tensorboard") == {"stopped": 1}
    wait(lambda: not json.loads(k8s_cluster.kubectl("get", "pods", "-n", HUB_NS, "-l",
                                                    f"{kubetb.LABEL_TB_JOB}={job['id']}", "-o", "json").stdout
                                ).get("items"), timeout=30, what="TensorBoard's pod to go")
    assert admin.ok("GET", f"/jobs/{job['id']}/tensorboard")["items"] == []
    admin.api("POST", f"/jobs/{job['id']}/kill")
