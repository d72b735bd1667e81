"""cgroup v1 and v2 limits of the embedded platform (ti_hub/backends/local/limits.py), pure: mount texts and
plain directories stand in for the kernel's (the real ones: tests/unit/test_local_backend.py)."""

from __future__ import annotations

import json
import os

from ti_hub.backends.local import limits


# /proc/self/mounts of a cgroup v1 machine (this repository's CI), and of a systemd one with cpu,cpuacct co-mounted
MOUNTS_V1 = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
MOUNTS_SYSTEMD_V1 = """\
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
cgroup /sys/fs/cgroup/memory\\040again cgroup rw,relatime,memory 0 0
cgroup /run/elsewhere/pids cgroup rw,relatime,pids 0 0
"""


def test_cgroup_v1_hierarchies_from_mount_texts():
    assert limits.cgroup1_mounts(MOUNTS_V1, "/sys/fs/cgroup") == {
        "cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "memory": "/sys/fs/cgroup/memory",
        "pids": "/sys/fs/cgroup/pids"}  # name=systemd is no controller, cgroup2 is not v1
    found = limits.cgroup1_mounts(MOUNTS_SYSTEMD_V1, "/sys/fs/cgroup/")
    assert found == {"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
                     "memory": "/sys/fs/cgroup/memory"}  # the first memory mount; nothing outside the root
    assert limits.cgroup1_mounts("cgroup /x/my\\040cg cgroup rw,memory 0 0\n", "/x") == {"memory": "/x/my cg"}
    assert limits.cgroup1_mounts(MOUNTS_V1, "/other") == {}
    assert not limits.is_cgroup2_mount(MOUNTS_V1, "/sys/fs/cgroup")  # the hybrid layout's cgroup2 has no controllers


def test_cgroup_v1_needs_memory_and_cpu_with_their_limit_files(tmp_path):
    mounts = {"memory": str(tmp_path / "memory"), "cpu": str(tmp_path / "cpu,cpuacct")}
    for c, f in (("memory", "memory.limit_in_bytes"), ("cpu", "cpu.cfs_quota_us")):
        os.makedirs(mounts[c])
        assert not limits.cgroup1_usable(mounts)
        (tmp_path / mounts[c] / f).write_text("")
    assert limits.cgroup1_usable(mounts)
    assert not limits.cgroup1_usable({"memory": mounts["memory"]})


def test_cgroup_v1_limit_files():
    assert limits.cgroup1_limits(0.1, 512) == {
        "memory.limit_in_bytes": str(512 << 20), "memory.memsw.limit_in_bytes": str(512 << 20),
        "memory.swappiness": "0", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "10000"}
    # the memory limit before memory+swap: the kernel refuses memsw below it
    assert list(limits.cgroup1_limits(1, 1)).index("memory.limit_in_bytes") == 0
    assert limits.cgroup1_limits(0, 0) == {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1"}
    assert limits.cgroup1_limits(0.001, 0)["cpu.cfs_quota_us"] == "1000"  # the kernel's least
    assert limits.cgroup1_limits(2.5, 0)["cpu.cfs_quota_us"] == "250000"


def test_an_instances_cgroup_in_each_v1_hierarchy(tmp_path):
    h = limits.Hierarchy(1, {"memory": str(tmp_path / "memory"), "cpu": str(tmp_path / "cpu,cpuacct")})
    assert str(h) == f"cgroup v1 (memory at {tmp_path}/memory, cpu at {tmp_path}/cpu,cpuacct)"
    cg = h.instance("job-3-1-abc", 0.5, 100)
    assert cg.paths == (f"{tmp_path}/memory/ti-hub/job-3-1-abc", f"{tmp_path}/cpu,cpuacct/ti-hub/job-3-1-abc")
    assert limits.Cgroup.from_config(json.loads(json.dumps(cg.config()))) == cg  # through the supervisor's config
    cg.setup()
    assert (tmp_path / "memory/ti-hub/job-3-1-abc/memory.limit_in_bytes").read_text() == str(100 << 20)
    assert (tmp_path / "cpu,cpuacct/ti-hub/job-3-1-abc/cpu.cfs_quota_us").read_text() == "50000"
    assert not (tmp_path / "cpu,cpuacct/ti-hub/job-3-1-abc/memory.limit_in_bytes").exists()
    v2 = limits.Hierarchy(2, {"memory": "/sys/fs/cgroup", "cpu": "/sys/fs/cgroup"}).instance("job-1-0-abc", 1, 0)
    assert v2.paths == ("/sys/fs/cgroup/ti-hub/job-1-0-abc",) and v2.limits == limits.cgroup_limits(1, 0)
    # a supervisor config written before v1 support names one v2 directory
    old = limits.Cgroup.from_config({"path": "/sys/fs/cgroup/ti-hub/job-1-0", "limits": {"memory.max": "max"}})
    assert (old.version, old.paths, old.limits) == (2, ("/sys/fs/cgroup/ti-hub/job-1-0",), {"memory.max": "max"})
    assert limits.Cgroup.from_config(None) is None


def test_oom_kills_and_peak_as_the_kernel_reports_them(tmp_path):
    v1 = limits.Cgroup(1, {"memory": str(tmp_path), "cpu": str(tmp_path)})
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (tmp_path / "memory.max_usage_in_bytes").write_text(f"{100 << 20}\n")
    assert v1.oom_kills() == 2 and v1.oom_killed() and v1.memory_peak() == 100 << 20
    # before Linux 4.13 no count: a SIGKILL after the limit was hit (failcnt) is taken for the OOM killer
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    (tmp_path / "memory.failcnt").write_text("5\n")
    assert v1.oom_kills() is None and v1.oom_killed(sigkilled=True) and not v1.oom_killed(sigkilled=False)
    v2 = limits.Cgroup(2, {"memory": str(tmp_path), "cpu": str(tmp_path)})
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 0\n")
    assert v2.oom_kills() == 0 and not v2.oom_killed(sigkilled=True) and v2.memory_peak() is None
