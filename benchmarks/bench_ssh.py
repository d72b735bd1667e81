"""SSH gateway: session setup time and concurrent sessions against the real embedded platform.

    python benchmarks/bench_ssh.py [--runs 50] [--concurrent 50] [--kubernetes] [--out FILE]

Starts `ti-hub start` on a fresh data dir (``benchplatform.Platform``), signs up a user with a generated
ed25519 key, starts a workspace (plan cpu-small) through the hub and measures, against the gateway's port:

* **setup, OpenSSH**: ``ssh -p PORT user+ws@127.0.0.1 true`` run ``--runs`` times one after another, wall time
  of the whole client process (connect, key exchange, public-key auth with the ti service's key look-up and the
  hub database check, target look-up, the session's process in the workspace's bubblewrap sandbox, exit status);
* **setup, asyncssh**: the same from an in-process asyncssh client (no client process start), and connect +
  auth alone (no session), to separate the session's share;
* **concurrent**: ``--concurrent`` sessions at once (asyncssh clients in one process, each connect + auth +
  ``sleep 1`` so that they overlap), and as many OpenSSH client processes at once running ``true``: errors
  and latency.

With ``--kubernetes`` the platform's backend is the KWOK test control plane (tests/k8s/cluster.py) and the
sessions go into a job's pod (a job with the ssh endpoint) through the API server's exec and port-forward
streams; kwok runs the exec'd command on this machine, so the figures are the gateway's and the API server's
share, not a kubelet's or a container runtime's. Results: results/ssh.json, results/ssh-k8s.json.

Targets (issue 6): setup p50 ≤ 300 ms; 50 concurrent sessions without errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchplatform  # noqa: E402
from benchplatform import Platform, code_version, loadavg, machine_info  # noqa: E402
from hubproc import ADMIN, ADMIN_PASSWORD  # noqa: E402

WS = "bench-box"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1), "p95_ms": round(pct(ms, 0.95), 1),
            "max_ms": round(max(ms), 1), "mean_ms": round(statistics.fmean(ms), 1)} if ms else {"n": 0}


def ssh_argv(port: int, key: Path, login: str, *cmd: str) -> list[str]:
    return ["ssh", "-p", str(port), "-F", "/dev/null", "-i", str(key), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "LogLevel=ERROR", f"{login}@127.0.0.1", *cmd]


def openssh_sequential(port: int, key: Path, login: str, runs: int) -> tuple[list[float], int]:
    ms, errors = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(ssh_argv(port, key, login, "true"), capture_output=True, timeout=60)
        ms.append((time.perf_counter() - t0) * 1000)
        errors += r.returncode != 0
    return ms, errors


def openssh_concurrent(port: int, key: Path, login: str, n: int) -> dict:
    t0 = time.perf_counter()
    procs = [(time.perf_counter(), subprocess.Popen(ssh_argv(port, key, login, "true"), stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.PIPE)) for _ in range(n)]
    ms, errors, messages = [], 0, []
    for started, p in procs:
        err = p.communicate(timeout=120)[1]
        ms.append((time.perf_counter() - started) * 1000)
        if p.returncode != 0:
            errors += 1
            messages.append(err.decode(errors="replace").strip()[-200:])
    return {"errors": errors, "wall_s": round(time.perf_counter() - t0, 2), **summary(ms), "messages": messages[:5]}


async def asyncssh_runs(port: int, key, login: str, runs: int, command: str | None) -> tuple[list[float], int]:
    import asyncssh

    ms, errors = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            async with asyncssh.connect("127.0.0.1", port, username=login, client_keys=[key], known_hosts=None,
                                        agent_path=None) as c:
                if command is not None:
                    r = await c.run(command)
                    errors += r.exit_status != 0
        except (OSError, asyncssh.Error):
            errors += 1
        ms.append((time.perf_counter() - t0) * 1000)
    return ms, errors


async def asyncssh_concurrent(port: int, key, login: str, n: int) -> dict:
    import asyncssh

    async def one() -> tuple[float, str]:
        t0 = time.perf_counter()
        try:
            async with asyncssh.connect("127.0.0.1", port, username=login, client_keys=[key], known_hosts=None,
                                        agent_path=None) as c:
                r = await c.run("sleep 1")
                return (time.perf_counter() - t0) * 1000, "" if r.exit_status == 0 else f"exit {r.exit_status}"
        except (OSError, asyncssh.Error) as e:
            return (time.perf_counter() - t0) * 1000, f"{type(e).__name__}: {e}"

    t0 = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(n)))
    errors = [e for _ms, e in results if e]
    return {"errors": len(errors), "wall_s": round(time.perf_counter() - t0, 2),
            **summary([m for m, _e in results]), "messages": errors[:5]}


def workspace_target(hub, u) -> str:
    r = u.hub_api("POST", f"/users/{u.name}/servers/{WS}", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    deadline = time.monotonic() + 180
    while not (u.hub_api("GET", f"/users/{u.name}").json()["servers"].get(WS) or {}).get("ready"):
        if time.monotonic() > deadline:
            raise TimeoutError("the workspace did not start")
        time.sleep(0.5)
    return f"{u.name}+{WS}"


def job_pod_target(hub, u) -> str:
    """--kubernetes: a job with the ssh endpoint, whose pod kwok 'runs' (exec'd commands run on this machine)."""
    job = u.ok("POST", "/jobs", json={"name": WS, "plan": "cpu-small", "image": "python-cpu",
                                      "command": "sleep infinity", "endpoints": ["ssh"]})
    u.wait_job(job["id"], states=("running",), timeout=120)
    time.sleep(2)  # the pod's Running reaches the backend's watch
    return f"{u.name}+{WS}"


def start(args, work: Path):
    """(platform, cluster or None, what the sessions run in)."""
    data = work / "data"
    if not args.kubernetes:
        data.mkdir()
        return Platform(data), None, "workspace cpu-small, bubblewrap"
    import k8sbench
    from tests.k8s.cluster import FakeNode, LocalCluster, bin_dir

    cluster = LocalCluster(work / "k8s", bin_path=bin_dir(), exec_namespaces=(k8sbench.NAMESPACE,))
    cluster.start()
    cluster.add_nodes([FakeNode("cpu-0", cpu="16", memory="64Gi")])
    cluster.namespace(k8sbench.NAMESPACE)
    plat = k8sbench.start_platform(data, cluster, f"c.TiSSHGateway.kubeconfig = {str(cluster.kubeconfig)!r}\n")
    return plat, cluster, "job pod on KWOK: API server exec/port-forward streams to kwok's local exec"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--concurrent", type=int, default=50)
    ap.add_argument("--kubernetes", action="store_true",
                    help="sessions in a job pod on the KWOK test control plane, through the API server")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    out = args.out or str(HERE / "results" / ("ssh-k8s.json" if args.kubernetes else "ssh.json"))
    import asyncssh

    work = Path(tempfile.mkdtemp(prefix="tihub-bench-ssh-"))
    plat, cluster, where = start(args, work)
    try:
        hub = plat.hub
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        u = hub.person("sshbench")
        key = asyncssh.generate_private_key("ssh-ed25519")
        key_file = work / "id_ed25519"
        key_file.write_bytes(key.export_private_key())
        key_file.chmod(0o600)
        u.ok("POST", "/keys", json={"name": "bench", "key": key.export_public_key().decode()})
        login = (job_pod_target if cluster else workspace_target)(hub, u)
        port = hub.ssh_port
        openssh_sequential(port, key_file, login, 3)  # warm-up: token caches, page cache
        seq, seq_err = openssh_sequential(port, key_file, login, args.runs)
        ain, ain_err = asyncio.run(asyncssh_runs(port, key, login, args.runs, "true"))
        auth, auth_err = asyncio.run(asyncssh_runs(port, key, login, args.runs, None))
        conc = asyncio.run(asyncssh_concurrent(port, key, login, args.concurrent))
        conc_ssh = openssh_concurrent(port, key_file, login, args.concurrent)
        result = {
            "what": "SSH gateway: session setup and concurrent sessions (benchmarks/bench_ssh.py)",
            "code": code_version(), "machine": machine_info(), "loadavg_after": loadavg(),
            "settings": {"runs": args.runs, "concurrent": args.concurrent, "target": where,
                         "asyncssh": asyncssh.__version__,
                         "openssh": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()},
            "setup_openssh_true": {**summary(seq), "errors": seq_err},
            "setup_asyncssh_true": {**summary(ain), "errors": ain_err},
            "connect_and_auth_only_asyncssh": {**summary(auth), "errors": auth_err},
            "concurrent_asyncssh_sleep1": conc,
            "concurrent_openssh_true": conc_ssh,
        }
        result["verdict"] = {
            "setup_p50_le_300ms": result["setup_openssh_true"]["p50_ms"] <= 300,
            "concurrent_without_errors": conc["errors"] == 0 and conc_ssh["errors"] == 0,
        }
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "code")}, indent=2))
    finally:
        plat.stop()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    benchplatform.CODE_ROOT = str(HERE.parent)
    main()
