"""The kubelet's usage figures as TiHub reads them (ti_hub/backends/k8s/kubeletstats.py, pure), from samples of a
real kubelet's answers: /metrics/resource (kubelet 1.29, containerd) and /metrics/cadvisor (cgroup v2, containerd;
the pause-container series of a dockershim-era node)."""

from __future__ import annotations

import pytest

from ti_hub.backends import metrics as mx
from ti_hub.backends.k8s import kubeletstats as ks
from ti_hub.health.promsource import pod_gpu_query, pod_gpus_from

RESOURCE = """\
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="coredns",namespace="kube-system",pod="coredns-5d78c9869d-8xq4l"} 61.258927 1716301852613
container_cpu_usage_seconds_total{container="notebook",namespace="ti-users",pod="ti-ws-alice-desk"} 1234.5 1716301850001
container_cpu_usage_seconds_total{container="sidecar",namespace="ti-users",pod="ti-ws-alice-desk"} 0.25 1716301850002
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="coredns",namespace="kube-system",pod="coredns-5d78c9869d-8xq4l"} 1.6015360e+07 1716301852613
container_memory_working_set_bytes{container="notebook",namespace="ti-users",pod="ti-ws-alice-desk"} 5.36870912e+08 1716301850001
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="notebook",namespace="ti-users",pod="ti-ws-alice-desk"} 1.7162989e+09 1716298900000
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 98765.4321 1716301851212
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="ti-users",pod="ti-ws-alice-desk"} 1240.1 1716301849000
# HELP scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
"""

CADVISOR = """\
# HELP cadvisor_version_info A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision.
# TYPE cadvisor_version_info gauge
cadvisor_version_info{cadvisorRevision="",cadvisorVersion="",dockerVersion="",kernelVersion="6.1.0-21-cloud-amd64",osVersion="Debian GNU/Linux 12 (bookworm)"} 1
# HELP container_fs_reads_bytes_total Cumulative count of bytes read
# TYPE container_fs_reads_bytes_total counter
container_fs_reads_bytes_total{container="",device="/dev/nvme0n1",id="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f6e.slice",image="",name="",namespace="ti-users",pod="train-7-0"} 1.4823424e+07 1716301850449
container_fs_reads_bytes_total{container="main",device="/dev/nvme0n1",id="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f6e.slice/cri-containerd-9a1b.scope",image="ghcr.io/x/train:1",name="9a1b",namespace="ti-users",pod="train-7-0"} 1.2e+07 1716301850449
container_fs_reads_bytes_total{container="main",device="/dev/nvme0n1",id="/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod77aa.slice/cri-containerd-c0de.scope",image="x",name="c0de",namespace="ti-users",pod="train-8-0"} 4096 1716301850449
container_fs_reads_bytes_total{container="loader",device="/dev/sdb",id="/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod77aa.slice/cri-containerd-d00d.scope",image="x",name="d00d",namespace="ti-users",pod="train-8-0"} 1024 1716301850449
# HELP container_fs_writes_bytes_total Cumulative count of bytes written
# TYPE container_fs_writes_bytes_total counter
container_fs_writes_bytes_total{container="",device="/dev/nvme0n1",id="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f6e.slice",image="",name="",namespace="ti-users",pod="train-7-0"} 8.388608e+06 1716301850449
container_fs_writes_bytes_total{container="main",device="/dev/nvme0n1",id="/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod77aa.slice/cri-containerd-c0de.scope",image="x",name="c0de",namespace="ti-users",pod="train-8-0"} 0 1716301850449
container_fs_writes_bytes_total{container="loader",device="/dev/sdb",id="/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod77aa.slice/cri-containerd-d00d.scope",image="x",name="d00d",namespace="ti-users",pod="train-8-0"} 2048 1716301850449
# HELP container_network_receive_bytes_total Cumulative count of bytes received
# TYPE container_network_receive_bytes_total counter
container_network_receive_bytes_total{container="",id="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f6e.slice",image="",interface="eth0",name="",namespace="ti-users",pod="train-7-0"} 2.097152e+06 1716301850449
container_network_receive_bytes_total{container="",id="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f6e.slice",image="",interface="net1",name="",namespace="ti-users",pod="train-7-0"} 1000 1716301850449
container_network_receive_bytes_total{container="",id="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f6e.slice",image="",interface="lo",name="",namespace="ti-users",pod="train-7-0"} 9.99e+09 1716301850449
container_network_receive_bytes_total{container="POD",id="/kubepods/besteffort/pod77aa/e3f1",image="registry.k8s.io/pause:3.9",interface="eth0",name="k8s_POD_train-8-0_ti-users_77aa_0",namespace="ti-users",pod="train-8-0"} 555 1716301850449
container_network_receive_bytes_total{container="",id="/",image="",interface="ens5",name="",namespace="",pod=""} 9.87654321e+10 1716301850449
# HELP container_network_transmit_bytes_total Cumulative count of bytes transmitted
# TYPE container_network_transmit_bytes_total counter
container_network_transmit_bytes_total{container="",id="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f6e.slice",image="",interface="eth0",name="",namespace="ti-users",pod="train-7-0"} 1.048576e+06 1716301850449
container_network_transmit_bytes_total{container="POD",id="/kubepods/besteffort/pod77aa/e3f1",image="registry.k8s.io/pause:3.9",interface="eth0",name="k8s_POD_train-8-0_ti-users_77aa_0",namespace="ti-users",pod="train-8-0"} 666 1716301850449
"""


def test_cpu_seconds_are_a_pods_containers_summed():
    usage = ks.resource_usage(RESOURCE)
    desk = usage[("ti-users", "ti-ws-alice-desk")]
    assert desk.cpu_seconds == pytest.approx(1234.75) and desk.memory_bytes == 512 << 20
    assert usage[("kube-system", "coredns-5d78c9869d-8xq4l")].cpu_seconds == pytest.approx(61.258927)
    # by id: the workspaces whose pods the kubelet reported; one it did not is unknown (left out), never 0
    got = ks.pod_cpu_seconds(usage, {7: ("ti-users", "ti-ws-alice-desk"), 8: ("ti-users", "ti-ws-bob-desk")})
    assert got == {7: pytest.approx(1234.75)}
    assert ks.pod_cpu_seconds({}, {7: ("ti-users", "ti-ws-alice-desk")}) == {}


def test_network_is_the_pod_level_series_without_loopback_and_disk_the_pod_cgroup_or_its_containers():
    usage = ks.cadvisor_usage(CADVISOR)
    seven = usage[("ti-users", "train-7-0")]
    # eth0 + a second interface (an RDMA/secondary network); lo left out
    assert seven.network == (2 * 1024 * 1024 + 1000, 1024 * 1024)
    # the pod cgroup's figures (container=""), not that plus its container's again
    assert seven.disk == (14823424, 8 << 20)
    assert seven.at_ms == 1716301850449
    eight = usage[("ti-users", "train-8-0")]
    assert eight.network == (555, 666)  # the pause container's (a runtime that reports it so)
    assert eight.disk == (4096 + 1024, 2048)  # no pod-level series: its containers' over their devices
    assert ("", "") not in usage  # the node's own interface is no pod's


def test_what_the_kubelet_did_not_report_is_unknown():
    only_rx = "\n".join(line for line in CADVISOR.splitlines() if "transmit" not in line and "fs_" not in line)
    u = ks.cadvisor_usage(only_rx)[("ti-users", "train-7-0")]
    assert (u.network, u.disk) == (None, None)
    assert ks.resource_usage("") == {} and ks.cadvisor_usage("scrape_error 1\n") == {}


def test_label_values_with_escapes_and_lines_without_timestamps():
    text = ('container_cpu_usage_seconds_total{container="a\\"b",namespace="n\\\\s",pod="p,q"} 2.5\n'
            'container_cpu_usage_seconds_total{namespace="n",pod="p"} 1\n'  # no container: not a container's
            'container_cpu_usage_seconds_total_other{namespace="n",pod="p",container="c"} 9\n'
            'container_cpu_usage_seconds_total{namespace="n",pod="p",container="c"} NaNx\n')
    assert list(ks.samples(text, (ks.CPU,)))[0] == (ks.CPU, {"container": 'a"b', "namespace": "n\\s", "pod": "p,q"},
                                                    2.5, None)
    assert ks.resource_usage(text) == {("n\\s", "p,q"): ks.PodUsage(cpu_seconds=2.5)}


def test_dcgm_series_with_pod_labels_become_the_pods_gpu_samples():
    def series(name, value, **labels):
        return {"metric": {"__name__": name, **labels}, "value": [1.0, str(value)]}

    pod = {"namespace": "ti-users", "pod": "train-7-0", "container": "main", "Hostname": "gpu-3"}
    result = [series("DCGM_FI_DEV_GPU_UTIL", 87, gpu="2", **pod), series("DCGM_FI_DEV_FB_USED", 10240, gpu="2", **pod),
              series("DCGM_FI_DEV_FB_FREE", 30720, gpu="2", **pod), series("DCGM_FI_DEV_GPU_UTIL", 5, gpu="3", **pod),
              series("DCGM_FI_DEV_GPU_UTIL", 50, gpu="x", **pod)]
    got = pod_gpus_from(result, "pod", "namespace", "gpu")
    assert got == {("ti-users", "train-7-0"): [mx.GpuSample(2, 87, 10240, 40960), mx.GpuSample(3, 5, None, None)]}
    q = pod_gpu_query("ti-users", ["train-7-0", "a.b"], "exported_pod", "exported_namespace")
    assert 'exported_namespace="ti-users"' in q and 'exported_pod=~"a\\\\.b|train-7-0"' in q


def test_job_usage_leaves_out_what_was_not_measured():
    from ti_hub.metrics.jobusage import job_usage_text

    text = job_usage_text([(9, "bob", "k", [mx.InstanceTotals(0, None, None, (10, 20), (30, 40))])])
    assert 'ti_job_disk_read_bytes_total{job_id="9",owner="bob",name="k",instance="0"} 10' in text
    assert 'ti_job_network_transmit_bytes_total{job_id="9",owner="bob",name="k",instance="0"} 40' in text
    assert 'ti_job_cpu_seconds_total{' not in text and 'ti_job_memory_bytes{' not in text
