"""LocalBackend with real processes (no mocks): launch, observe, logs, mounts, limits, stop, re-adoption."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from ti_hub.backends.base import InstanceSpec, LaunchSpec, Mount
from ti_hub.backends.envs import instance_envs, instance_roles
from ti_hub.backends.local import LocalBackend
from ti_hub.backends.local import jobdir, limits, logfiles, procs, sandbox, userdirs
from ti_hub.backends.local.devices import group_devices, normalize_gpu_name
from ti_hub.backends.outcome import job_outcome

PY = shlex.quote(sys.executable)
HAVE_BWRAP = sandbox.find_bwrap() is not None
# the owner's uid: as root, the backend runs every user's code as a uid of their own
UID = 900321 if os.geteuid() == 0 else None


def make_spec(job_id, command, *, workers=1, devices_per=0, memory_mib=0, mounts=(), scratch=(),
              strategy="allreduce", env=None, cpu=1.0):
    envs = instance_envs(strategy, workers, 0, "127.0.0.1", 29500 + job_id)
    instances = tuple(
        InstanceSpec(index=i, role=role, role_index=ri, node="local",
                     devices=tuple(range(i * devices_per, (i + 1) * devices_per)), cpu=cpu,
                     memory_mib=memory_mib, env=envs[i])
        for i, (role, ri) in enumerate(instance_roles(strategy, workers)))
    return LaunchSpec(job_id=job_id, owner="alice", name=f"job-{job_id}",
                      kind="distributed" if workers > 1 else "single", strategy=strategy, command=command,
                      image="ignored", env=env or {"USER_VAR": "hello"}, instances=instances,
                      mounts=tuple(mounts), scratch_paths=tuple(scratch), shm_mib=64, uid=UID)


def gone(pid: int) -> bool:
    st = procs.read_stat(pid)
    return st is None or not st.alive


# as root, TiHub runs no user code outside a sandbox (test_root_needs_a_sandbox): "plain" only unprivileged
@pytest.fixture(params=(["bubblewrap"] if HAVE_BWRAP else []) + (["plain"] if os.geteuid() != 0 else []))
async def backend(request, tmp_path):
    """Every behaviour with and without bubblewrap (which sits between the supervisor and the job)."""
    b = LocalBackend(root_dir=str(tmp_path / "root"), devices={"demo-gpu": 4}, memory_poll_interval=0.1,
                     orphan_grace_seconds=1.0, use_bubblewrap=request.param == "bubblewrap")
    yield b
    await b.reconcile({})  # whatever a failing test left running: nothing known, so all of it stops


async def wait_outcome(b, spec, state, timeout=20.0):
    roles = [i.role for i in spec.instances]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obs = await b.observe_job(spec.job_id, state)
        outcome = job_outcome(spec.strategy, roles, obs)
        if outcome is not None:
            return outcome, obs
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {spec.job_id} did not finish: {obs}")


async def wait_log(b, job_id, state, needle, instance=0, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text, _ = await b.logs(job_id, state, instance)
        if needle in text:
            return text
        await asyncio.sleep(0.05)
    raise AssertionError(f"{needle!r} never appeared in the log: {text!r}")


async def test_capacity_with_demo_devices(backend):
    [node] = await backend.capacity()
    assert node.devices == {"demo-gpu": [0, 1, 2, 3]}
    assert node.pool == "default"
    assert node.cpu == float(os.cpu_count())
    assert node.memory_mib > 0


async def test_capacity_detects_gpus_or_none(tmp_path):
    b = LocalBackend(root_dir=str(tmp_path), node_name="n1", pool="p", cpu=3, memory_mib=1000)
    [node] = await b.capacity()
    assert (node.name, node.pool, node.cpu, node.memory_mib) == ("n1", "p", 3.0, 1000)
    assert isinstance(node.devices, dict) and "cpu" not in node.devices  # {} without NVIDIA GPUs


async def test_allreduce_job_completes_with_its_environment(backend):
    spec = make_spec(1, 'echo "rank=$RANK world=$WORLD_SIZE cuda=[$CUDA_VISIBLE_DEVICES] job=$TI_JOB_ID '
                        'user=$USER_VAR secret=[$SECRET_OF_SERVICE]"', workers=2, devices_per=2)
    os.environ["SECRET_OF_SERVICE"] = "leak"
    try:
        state = await backend.launch(spec)
    finally:
        del os.environ["SECRET_OF_SERVICE"]
    outcome, obs = await wait_outcome(backend, spec, state)
    assert outcome == ("completed", 0, "all 2 instances exited normally")
    assert [s.state for s in obs.instances] == ["exited", "exited"]
    log0, _ = await backend.logs(1, state, 0)
    log1, _ = await backend.logs(1, state, 1)
    assert "rank=0 world=2 cuda=[0,1] job=1 user=hello secret=[]" in log0
    assert "rank=1 world=2 cuda=[2,3] job=1 user=hello secret=[]" in log1


async def test_failing_instance_fails_the_job_with_a_reason(backend):
    spec = make_spec(2, 'if [ "$RANK" = 1 ]; then echo boom >&2; exit 3; fi; sleep 30', workers=2)
    state = await backend.launch(spec)
    outcome, _ = await wait_outcome(backend, spec, state)
    assert outcome == ("failed", 3, "worker 1 exited with code 3")
    assert "boom" in (await backend.logs(2, state, 1))[0]
    await backend.stop(2, state, grace_seconds=2)
    obs = await backend.observe_job(2, state)
    assert obs.instances[0].state == "exited" and obs.instances[0].reason.startswith("stopped on request")


async def test_logs_offsets_and_tail(backend):
    spec = make_spec(3, "for i in $(seq 1 50); do echo line-$i; done; printf 'caf\\303\\251\\n'")
    state = await backend.launch(spec)
    await wait_outcome(backend, spec, state)
    text, end = await backend.logs(3, state, 0)
    assert text.startswith("line-1\n") and text.endswith("café\n")
    first, offset = await backend.logs(3, state, 0, 0, 14)
    assert first == "line-1\nline-2\n" and offset == 14
    rest, end2 = await backend.logs(3, state, 0, offset)
    assert first + rest == text and end2 == end
    assert (await backend.logs(3, state, 0, end))[0] == ""
    tail, tail_end = await backend.tail_lines(3, state, 0, n=2)
    assert tail == "line-50\ncafé\n" and tail_end == end
    # a multi-byte character cut by the limit is not mangled: it comes with the next read
    cut = text.encode().index("é".encode()) + 1
    a, off = await backend.logs(3, state, 0, 0, cut)
    b, _ = await backend.logs(3, state, 0, off)
    assert "\ufffd" not in a + b and a + b == text


async def test_read_only_mount_refuses_writes_read_write_accepts(backend, tmp_path):
    if not backend.use_bubblewrap:
        pytest.skip("read-only mounts need bubblewrap; without it they are refused (tested below)")
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    userdirs.shared_dir(str(rw))  # as the local volume driver makes a volume: writable by whoever mounts it
    (ro / "data.txt").write_text("original")
    cmd = ("cat /datasets/ro/data.txt; echo; "
           "if echo changed > /datasets/ro/data.txt; then echo RO-WRITE-OK; else echo RO-WRITE-FAILED; fi; "
           "if touch /datasets/ro/new; then echo RO-CREATE-OK; else echo RO-CREATE-FAILED; fi; "
           "echo written > /mnt/out/result.txt && echo RW-WRITE-OK; "
           "echo tmp > /data/scratch/x && echo SCRATCH-OK")
    spec = make_spec(4, cmd, mounts=[Mount(str(ro), "/datasets/ro", True), Mount(str(rw), "/mnt/out", False)],
                     scratch=["/data/scratch"])
    state = await backend.launch(spec)
    assert state["sandbox"] == "bubblewrap"
    outcome, _ = await wait_outcome(backend, spec, state)
    log, _ = await backend.logs(4, state, 0)
    assert outcome[0] == "completed", log
    assert "original" in log
    assert "RO-WRITE-FAILED" in log and "RO-CREATE-FAILED" in log and "Read-only file system" in log
    assert "RW-WRITE-OK" in log and "SCRATCH-OK" in log
    assert (ro / "data.txt").read_text() == "original" and sorted(os.listdir(ro)) == ["data.txt"]
    assert (rw / "result.txt").read_text() == "written\n"
    [scratch_dir] = state["scratch"]
    assert os.path.isfile(os.path.join(scratch_dir, "x"))
    assert not os.path.exists("/data/scratch")  # inside the sandbox only, never created on the host
    await backend.cleanup(4, state)
    assert not os.path.exists(scratch_dir)
    assert os.path.exists(state["instances"][0]["log"])  # logs are kept


async def test_root_needs_a_sandbox(tmp_path):
    """Run as root, TiHub runs nobody's code outside bubblewrap: the refusal says why."""
    if os.geteuid() != 0:
        pytest.skip("an unprivileged platform runs jobs without bubblewrap (next test)")
    b = LocalBackend(root_dir=str(tmp_path / "root"), use_bubblewrap=False)
    with pytest.raises(RuntimeError, match="runs as root and bubblewrap cannot run here"):
        await b.launch(make_spec(5, "true"))
    assert not os.path.exists(os.path.join(b.root_dir, "jobs", "5", "run"))  # nothing was prepared


async def test_without_bubblewrap_read_write_mounts_are_symlinks_and_read_only_is_refused(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("as root, no user code runs without bubblewrap (test_root_needs_a_sandbox)")
    b = LocalBackend(root_dir=str(tmp_path / "root"), use_bubblewrap=False)
    rw = tmp_path / "rw"
    rw.mkdir()
    with pytest.raises(sandbox.SandboxError, match="read-only"):
        await b.launch(make_spec(5, "true", mounts=[Mount(str(rw), "/data/ro", True)]))
    spec = make_spec(6, "echo hi > data/rw/f && echo OK", mounts=[Mount(str(rw), "/data/rw", False)])
    state = await b.launch(spec)
    assert state["sandbox"] == "none"
    outcome, _ = await wait_outcome(b, spec, state)
    assert outcome[0] == "completed", (await b.logs(6, state))[0]
    assert (rw / "f").read_text() == "hi\n"
    await b.cleanup(6, state)
    assert not os.path.lexists(state["links"][0]) and (rw / "f").exists()


async def test_stop_kills_the_whole_process_group(backend):
    spec = make_spec(7, 'sleep 1000 & echo "bg=$!"; setsid sleep 1000 & echo "bg=$!"; echo "sh=$$"; wait')
    state = await backend.launch(spec)
    await wait_log(backend, 7, state, "sh=")
    supervisor = state["instances"][0]["pid"]
    # as the machine sees them (in a sandbox the job's own pids are those of its pid namespace)
    await asyncio.sleep(0.2)
    pids = procs.descendants(supervisor, procs.snapshot())
    assert len(pids) >= 3 and not any(gone(p) for p in pids)
    t0 = time.monotonic()
    await backend.stop(7, state, grace_seconds=5)
    assert time.monotonic() - t0 < 4  # sleep dies of SIGTERM: no need to wait for the grace period
    assert all(gone(p) for p in pids | {supervisor})
    obs = await backend.observe_job(7, state)
    assert obs.instances[0].state == "exited"
    assert obs.instances[0].reason.startswith("stopped on request")
    await backend.stop(7, state)  # idempotent, safe when already gone


async def test_stop_kills_after_grace_when_sigterm_is_ignored(backend):
    spec = make_spec(8, "trap '' TERM; echo ready; while true; do sleep 0.1; done")
    state = await backend.launch(spec)
    await wait_log(backend, 8, state, "ready")
    t0 = time.monotonic()
    await backend.stop(8, state, grace_seconds=0.5)
    assert 0.4 < time.monotonic() - t0 < 5
    obs = await backend.observe_job(8, state)
    assert obs.instances[0].state == "exited" and obs.instances[0].exit_code != 0


async def test_memory_limit_fallback_kills_with_out_of_memory(backend):
    backend.use_cgroups = False  # the fallback, even where the kernel could enforce the limit (tests below)
    cmd = f"{PY} -c \"import time; x = b'a' * (300 << 20); print('allocated', flush=True); time.sleep(60)\""
    spec = make_spec(9, cmd, memory_mib=100)
    state = await backend.launch(spec)
    outcome, obs = await wait_outcome(backend, spec, state, timeout=30)
    assert outcome[0] == "failed"
    assert "out of memory (limit 100 MiB)" in outcome[2]
    assert outcome[2].startswith("worker 0 was killed: out of memory")
    assert "out of memory" in (await backend.logs(9, state))[0]


def writable_cgroups(root: str) -> bool:
    """A writable cgroup2 mount at ``root``, or a v1 memory hierarchy under it (read here, not by limits.py)."""
    with open("/proc/self/mounts") as f:
        for line in f:
            _, where, kind, opts = line.split()[:4]
            opts = opts.split(",")
            if (kind == "cgroup2" and where == root or kind == "cgroup" and "memory" in opts
                    and where.startswith(root + "/")) and "rw" in opts and os.access(where, os.W_OK):
                return True
    return False


def need_kernel_limits(b: LocalBackend) -> None:
    if os.geteuid() != 0:
        pytest.skip("kernel-enforced limits need root (the cgroups are root's); the fallback is tested above")
    if not writable_cgroups(b.cgroup_root):
        pytest.skip(f"no writable cgroup hierarchy under {b.cgroup_root}; the fallback is tested above")
    assert b.cgroups_usable(), "cgroups are writable here, yet the backend does not use them"


def instance_cgroup(state: dict, index: int = 0) -> limits.Cgroup:
    """The cgroup the backend gave an instance, from its supervisor's config."""
    cg = limits.Cgroup.from_config(jobdir.read_json(jobdir.instance_paths(state["job_dir"], index)["config"])["cgroup"])
    assert cg is not None
    return cg


def read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


GREEDY = """
import time
chunks = []
for i in range(1, 31):
    chunks.append(b"a" * (10 << 20))  # written, so every page is really held
    print("held", i * 10, flush=True)
print("done", flush=True)
time.sleep(60)
"""


async def test_the_kernel_kills_a_job_at_its_memory_limit(backend):
    """Issue 30, finding 7: with cgroups (v2, or v1 as on CI) no poll lets an allocation run past the limit."""
    need_kernel_limits(backend)
    backend.memory_poll_interval = 3600  # the supervisor looks once, at the start: only the kernel can stop it
    spec = make_spec(15, f"{PY} -c {shlex.quote(GREEDY)}", memory_mib=100)
    state = await backend.launch(spec)
    cg = instance_cgroup(state)
    outcome, _ = await wait_outcome(backend, spec, state, timeout=30)
    assert outcome[0] == "failed" and outcome[2] == "worker 0 was killed: out of memory (limit 100 MiB)"
    log = (await backend.logs(15, state))[0]
    held = [int(line.split()[1]) for line in log.splitlines() if line.startswith("held ")]
    assert "done" not in log and max(held, default=0) < 100, log
    assert "more than its limit" not in log  # the fallback's note: it never ran
    status = jobdir.read_json(state["instances"][0]["status"])
    assert status["oom"] is True
    if status["memory_peak"] is not None:  # v1, and v2 from Linux 5.19
        assert status["memory_peak"] <= 100 << 20
    assert not any(os.path.exists(p) for p in cg.paths)


async def test_an_oom_kill_ends_the_whole_instance(backend):
    """v1's OOM killer ends one process (v2's, with memory.oom.group, the cgroup): the rest must not run on."""
    need_kernel_limits(backend)
    spec = make_spec(18, f"{PY} -c {shlex.quote(GREEDY)} & sleep 1000; wait", memory_mib=100)
    state = await backend.launch(spec)
    outcome, _ = await wait_outcome(backend, spec, state, timeout=30)  # not after sleep's 1000 s
    assert outcome[2] == "worker 0 was killed: out of memory (limit 100 MiB)"
    if instance_cgroup(state).version == 1:  # the supervisor ended the rest
        assert "the kernel killed a process of the instance" in (await backend.logs(18, state))[0]


SPIN = """
import time
t0, c0 = time.monotonic(), time.process_time()
print("spinning", flush=True)
while time.monotonic() - t0 < 3:
    pass
print("share %.3f" % ((time.process_time() - c0) / (time.monotonic() - t0)), flush=True)
"""


async def test_the_kernel_holds_a_job_to_its_fraction_of_a_cpu(backend):
    """A 0.1-CPU plan used 0.9 of a core when CPUs were only pinned; a CFS quota holds it to its share."""
    need_kernel_limits(backend)
    spec = make_spec(16, f"{PY} -c {shlex.quote(SPIN)}", cpu=0.1)
    state = await backend.launch(spec)
    await wait_log(backend, 16, state, "spinning", timeout=30)  # even starting Python is slow at 0.1 CPU
    cg = instance_cgroup(state)
    quota = read(os.path.join(cg.dirs["cpu"], "cpu.max" if cg.version == 2 else "cpu.cfs_quota_us"))
    assert quota == ("10000 100000" if cg.version == 2 else "10000")
    child = jobdir.read_json(state["instances"][0]["child"])["pid"]
    assert all(str(child) in read(os.path.join(p, "cgroup.procs")).split() for p in cg.paths)
    outcome, _ = await wait_outcome(backend, spec, state, timeout=30)
    assert outcome[0] == "completed", outcome
    share = float((await wait_log(backend, 16, state, "share ")).split("share ")[1].split()[0])
    assert share <= 0.2, f"a 0.1-CPU job used {share:.2f} of a core"
    assert not any(os.path.exists(p) for p in cg.paths)


async def test_an_instances_cgroups_are_removed_with_what_it_left(backend):
    need_kernel_limits(backend)
    spec = make_spec(17, "sleep 1000 & echo up; wait", memory_mib=200)
    state = await backend.launch(spec)
    await wait_log(backend, 17, state, "up")
    cg = instance_cgroup(state)
    limit = read(os.path.join(cg.dirs["memory"], "memory.max" if cg.version == 2 else "memory.limit_in_bytes"))
    assert limit == str(200 << 20)
    members = {int(pid) for p in cg.paths for pid in read(os.path.join(p, "cgroup.procs")).split()}
    assert len(members) >= 2  # the shell and its sleep (and bubblewrap's processes)
    await backend.stop(17, state, grace_seconds=2)
    assert not any(os.path.exists(p) for p in cg.paths)
    assert all(gone(p) for p in members)


async def test_reconcile_readopts_known_jobs_and_kills_orphans(backend):
    known_spec, orphan_spec = make_spec(10, "echo up; sleep 1000"), make_spec(11, "echo up; sleep 1000")
    known_state = await backend.launch(known_spec)
    orphan_state = await backend.launch(orphan_spec)
    await wait_log(backend, 10, known_state, "up")
    await wait_log(backend, 11, orphan_state, "up")
    orphan = orphan_state["instances"][0]
    orphan_child = procs.job_processes(orphan["pid"], orphan["start_time"], None, None)
    assert orphan_child
    result = await backend.reconcile({10: known_state})
    assert result == {10: True}
    assert all(gone(p) for p in orphan_child | {orphan_state["instances"][0]["pid"]})
    assert (await backend.observe_job(10, known_state)).instances[0].state == "running"
    await backend.stop(10, known_state, grace_seconds=2)


async def test_a_restarted_service_sees_and_stops_the_running_job(backend):
    spec = make_spec(12, "echo up; sleep 1000", workers=2)
    state = await backend.launch(spec)
    await wait_log(backend, 12, state, "up", instance=1)
    restarted = LocalBackend(root_dir=backend.root_dir, use_bubblewrap=backend.use_bubblewrap)  # same disk
    assert await restarted.reconcile({12: state}) == {12: True}
    obs = await restarted.observe_job(12, state)
    assert [s.state for s in obs.instances] == ["running", "running"]
    with pytest.raises(RuntimeError, match="already has running processes"):
        await restarted.launch(spec)  # never a duplicate
    await restarted.stop(12, state, grace_seconds=2)
    outcome, _ = await wait_outcome(restarted, spec, state)
    assert outcome[0] == "failed"  # stopped; the caller records it as cancelled


SERVICE = """
import asyncio, json, sys
from ti_hub.backends.base import InstanceSpec, LaunchSpec
from ti_hub.backends.local import LocalBackend

async def main():
    b = LocalBackend(root_dir=sys.argv[1], use_bubblewrap=sys.argv[2] == "True")
    spec = LaunchSpec(14, "alice", "j", "single", None, "echo up; sleep 1000", "", {},
                      (InstanceSpec(0, "worker", 0, "local", (), 1.0, 0, {}),), uid=int(sys.argv[3]) or None)
    print(json.dumps(await b.launch(spec)))

asyncio.run(main())
"""


async def test_jobs_outlive_the_service_process_that_launched_them(backend):
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", SERVICE, backend.root_dir,
                                                str(backend.use_bubblewrap), str(UID or 0),
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    state = json.loads(out)  # the service that launched it has exited now
    await wait_log(backend, 14, state, "up")
    assert await backend.reconcile({14: state}) == {14: True}
    assert (await backend.observe_job(14, state)).instances[0].state == "running"
    await backend.stop(14, state, grace_seconds=2)
    assert (await backend.observe_job(14, state)).instances[0].reason.startswith("stopped on request")


async def test_killed_supervisor_reports_lost(backend):
    spec = make_spec(13, "echo up; sleep 1000")
    state = await backend.launch(spec)
    await wait_log(backend, 13, state, "up")
    os.kill(state["instances"][0]["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while (await backend.observe_job(13, state)).instances[0].state != "lost":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    outcome, _ = await wait_outcome(backend, spec, state)
    assert outcome == ("failed", None, "worker 0 was lost: the process disappeared (machine restart?)")
    await backend.stop(13, state, grace_seconds=1)
    sup = state["instances"][0]
    assert not procs.job_processes(sup["pid"], sup["start_time"], None, None)  # nothing left behind
    if backend.cgroups_usable():  # the supervisor could not remove its cgroup: the job's cleanup does
        cg = instance_cgroup(state)
        assert all(os.path.isdir(p) for p in cg.paths)
        await backend.cleanup(13, state)
        assert not any(os.path.exists(p) for p in cg.paths)


# ---- pure helpers of the local backend -----------------------------------------------------------

def test_bwrap_argv_shape():
    binds = (sandbox.Bind("/srv/a", "/data/a/b", False), sandbox.Bind("/srv/ds", "/data", True),
             sandbox.Bind("/srv/m", "/models/m", True), sandbox.Bind("/srv/home/ann", "/home/ann", False))
    plan = sandbox.Plan(binds=binds, read_only=("/root/.pyenv/versions/3.11", "/work/co/ti_hub"),
                        entries=(("bin", "usr/bin"), ("usr", None), ("etc", None)), devices=(("/dev/nvidia0", "/dev/nvidia0"),),
                        tmp="/srv/tmp/0", shm_mib=16, cwd="/job")
    argv = sandbox.bwrap_argv("bwrap", plan, privileged=True, python="/py/bin/python3", spec_fd=5, passwd_fd=6,
                              group_fd=7, info_fd=8)
    joined = " ".join(argv)
    assert argv[0] == "bwrap" and argv[-5:] == ["/py/bin/python3", "-I", "-S", sandbox.DROPEXEC, "5"]
    assert "--unshare-pid" in argv and "--die-with-parent" in argv and "--unshare-ipc" in argv
    assert "--symlink usr/bin /bin" in joined and "--ro-bind /usr /usr" in joined and "--ro-bind /etc /etc" in joined
    assert "--bind / " not in joined and "--dev-bind /dev /dev" not in joined  # no host root, no host /dev
    assert "--dev /dev --proc /proc" in joined and "--dev-bind /dev/nvidia0 /dev/nvidia0" in joined
    assert "--ro-bind /root/.pyenv/versions/3.11 /root/.pyenv/versions/3.11" in joined
    for made in ("/root", "/root/.pyenv", "/work", "/home"):  # traversable on the way (the host's /root is not)
        assert f"--perms 0755 --dir {made} " in joined
    assert "--dir /data/a " not in joined  # inside another mount: bubblewrap makes it there
    assert "--bind /srv/tmp/0 /tmp --bind /srv/tmp/0 /var/tmp" in joined
    assert joined.index("--ro-bind /srv/ds /data") < joined.index("--bind /srv/a /data/a/b")  # parents first
    assert "--size 16777216 --perms 1777 --tmpfs /dev/shm" in joined
    assert "--perms 0644 --ro-bind-data 6 /etc/passwd" in joined and "--info-fd 8" in joined
    # as root, bubblewrap keeps only what dropexec needs to become the user
    assert "--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID --cap-add CAP_SETPCAP" in joined
    unprivileged = " ".join(sandbox.bwrap_argv("bwrap", plan, privileged=False, python="/py", spec_fd=5))
    assert "--cap-drop" not in unprivileged and "--cap-add" not in unprivileged


def test_runtime_paths_show_the_package_never_its_checkout():
    entries = (("usr", None), ("opt", None))
    got = sandbox.runtime_paths(["/usr", "/opt/conda", "/root/.pyenv/versions/3.11", "/root/.pyenv/versions/3.11"],
                                ["/work/checkout/ti_hub"], entries)
    assert got == ("/root/.pyenv/versions/3.11", "/work/checkout/ti_hub")
    assert sandbox.parents_to_make(["/root/.pyenv/x", "/home/ann", "/tmp/y", "/usr/local/z"], ["/usr"]) == \
        ["/home", "/root", "/root/.pyenv"]


def test_passwd_names_the_user_without_clashing():
    ident = sandbox.Identity("ann", 900001, 900001, "/home/ann")
    host = "root:x:0:0:root:/root:/bin/bash\nold:x:900001:900001::/x:/bin/sh\n"
    assert sandbox.passwd_text(host, ident).splitlines() == [
        "root:x:0:0:root:/root:/bin/bash", "ann:x:900001:900001:TiHub user:/home/ann:/bin/bash"]
    root = sandbox.Identity("root", 900002, 900002, "/home/root")  # a TiHub user named like a system account
    assert sandbox.passwd_text(host, root).splitlines()[-1].startswith("ti-root:x:900002:")


def run_in_sandbox(command: str, uid: int | None = UID, binds=()) -> subprocess.CompletedProcess:
    from ti_hub.backends.local import launcher
    from ti_hub.backends.local.runner import memfd

    ident = launcher.identity("probe", uid, "/tmp")
    spec = memfd("spec", json.dumps(sandbox.user_spec(ident, ["/bin/sh", "-c", command],
                                                      {"PATH": "/usr/bin:/bin"}, "/")).encode())
    argv = sandbox.bwrap_argv(sandbox.find_bwrap(), launcher.plan(list(binds), tmp="", shm_mib=1, cwd="/"),
                              privileged=launcher.privileged(), python=sys.executable, spec_fd=spec)
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, env={}, pass_fds=[spec])
    finally:
        os.close(spec)


def test_sandboxed_code_holds_no_capability_and_runs_as_its_uid(tmp_path):
    """Even when the service runs as root: no capability, no root, its own uid (the platform's when unprivileged)."""
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap cannot run here")
    out = run_in_sandbox("id -u; id -g; id -G; grep -E '^(Cap(Eff|Prm|Bnd|Inh|Amb)|NoNewPrivs):' /proc/self/status")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    expect = str(UID if UID is not None else os.getuid())
    assert lines[:3] == [expect, expect, expect]  # no supplementary group (root's would give its files away)
    caps = dict(line.split(":\t") for line in lines[3:])
    assert all(int(caps[c], 16) == 0 for c in ("CapEff", "CapPrm", "CapInh", "CapAmb")), caps
    if os.geteuid() == 0:
        assert int(caps["CapBnd"], 16) == 0, caps  # not even a setuid-root program could get one back
    assert caps["NoNewPrivs"].strip() == "1"


def test_cgroup_limits_and_cores():
    assert limits.cgroup_limits(1.5, 100) == {"memory.max": str(100 << 20), "memory.swap.max": "0",
                                              "memory.oom.group": "1", "cpu.max": "150000 100000"}
    assert limits.cgroup_limits(0, 0) == {"memory.max": "max", "cpu.max": "max 100000"}
    assert limits.pick_cores(1.5, [0, 1, 2, 3], seed=1) == [2, 3]
    assert limits.pick_cores(8, [0, 1, 2, 3], seed=0) is None
    mounts = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"
    assert limits.is_cgroup2_mount(mounts, "/sys/fs/cgroup")
    assert not limits.is_cgroup2_mount("cgroup /sys/fs/cgroup/memory cgroup rw 0 0\n", "/sys/fs/cgroup")


async def test_without_kernel_limits_the_backend_says_so(tmp_path):
    b = LocalBackend(root_dir=str(tmp_path), use_cgroups=False)
    assert not b.cgroups_usable() and b.instance_cgroup("job-1-0", 1, 100) is None
    assert "best effort" in b.limits_note and "every 1 s" in b.limits_note
    off = LocalBackend(root_dir=str(tmp_path), outbound_network="off")
    if off.own_network():  # root: a network of its own, and without a way out the plans page says so
        assert "no outbound network" in off.limits_note
    on = LocalBackend(root_dir=str(tmp_path), outbound_network="auto")
    if on.cgroups_usable() and on.outbound():
        assert on.limits_note is None
        name = os.path.basename(limits.Cgroup.from_config(on.instance_cgroup("job-1-0", 1, 0)).paths[0])
        other = LocalBackend(root_dir=str(tmp_path / "other")).instance_cgroup("job-1-0", 1, 0)
        assert name.startswith("job-1-0-") and name not in json.dumps(other)  # two TiHubs never share one


def test_gpu_names_and_proc_parsing():
    assert normalize_gpu_name("NVIDIA A100-SXM4-80GB") == "A100-SXM4-80GB"
    assert normalize_gpu_name(b"NVIDIA H100 80GB HBM3") == "H100-80GB-HBM3"
    assert normalize_gpu_name("Tesla V100-SXM2-16GB") == "V100-SXM2-16GB"
    assert group_devices(["NVIDIA A10", "NVIDIA T4", "NVIDIA A10"]) == {"A10": [0, 2], "T4": [1]}
    st = procs.parse_stat("42 (a) b (c)) S 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12345 1000 25 0")
    assert (st.pid, st.state, st.ppid, st.pgid, st.start_time) == (42, "S", 1, 42, 12345)
    assert procs.is_alive(os.getpid(), procs.start_time(os.getpid()))
    assert not procs.is_alive(os.getpid(), procs.start_time(os.getpid()) - 1)  # a recycled pid


def test_read_tail_of_missing_and_short_files(tmp_path):
    assert logfiles.read_tail(str(tmp_path / "none")) == ("", 0)
    p = tmp_path / "f.log"
    p.write_text("a\nb\nc")
    assert logfiles.read_tail(str(p), n=2) == ("b\nc", 5)
    assert logfiles.read_tail(str(p), n=10) == ("a\nb\nc", 5)


def test_a_volume_over_its_capacity_refuses_writers_only():
    from ti_hub.domain.errors import Conflict
    from ti_hub.domain.mounts import MountRequest, check_capacity, over_capacity_reason

    reason = over_capacity_reason("al/data", 3 << 29, 1)
    assert reason.startswith("volume al/data holds 1.50 GiB, over its capacity of 1 GiB")
    over = {7: reason}
    check_capacity([MountRequest(7, "al/data", "filesystem", True), MountRequest(8, "al/x", "filesystem", False)],
                   over)  # reading it, or writing another volume: fine
    with pytest.raises(Conflict) as e:
        check_capacity([MountRequest(7, "al/data", "filesystem", False)], over, "volumes[0].volume")
    assert e.value.field == "volumes[0].volume" and e.value.detail == reason


def test_the_jupyter_wrapper_runs_the_command_without_jupyter_and_leaks_neither_fd_nor_token(tmp_path):
    argv = jobdir.jupyter_argv("/bin/sh", "echo token=$TI_JUPYTER_TOKEN; ls /proc/self/fd", 45555,
                               "/services/ti/endpoints/1/0/45555/", str(tmp_path), 9)
    # fd 9: the server's log, as the supervisor passes it; no jupyter on PATH: the job's log says so, the
    # command runs all the same
    r = subprocess.run(["/bin/sh", "-c", 'exec "$@" 9>>"$0"', str(tmp_path / "jupyter.log"), *argv],
                       env={"PATH": "/nonexistent:/bin:/usr/bin", "TI_JUPYTER_TOKEN": "s3cret"},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "no jupyter command" in r.stderr, r.stderr
    assert "token=\n" in r.stdout and "9" not in r.stdout.split()  # both are the server's only
    with pytest.raises(ValueError):
        jobdir.jupyter_argv("/bin/sh", "true", 45555, "/", "/job", 12)  # sh redirects single digits only


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
