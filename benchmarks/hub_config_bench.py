# The jupyterhub_config.py that benchmarks/bench_api.py starts the platform with: TiHub's packaged defaults,
# plus PYTHONPATH for the ti service, so that the service runs the code being benchmarked. (The hub gives a
# managed service only the environment its config names; without this, the service would import whatever
# `pip install -e` points at, which need not be this checkout.)
import os

from ti_hub.hub.config import configure

configure(c)  # noqa: F821 (c is provided by the config loader)
# the local node offers one CPU per core, which the seeded running jobs fill (benchmarks/seed_jobs.py): nothing
# seeded or submitted is started. `ti-hub start`'s demo devices come with 2 CPUs per core, which left room, so
# the queue started seeded jobs (real processes) during the benchmarks, a third of the machine in the submit runs
c.LocalBackend.cpu = float(os.cpu_count() or 1)  # noqa: F821

_root = os.environ.get("TI_HUB_BENCH_CODE_ROOT")
for _svc in c.JupyterHub.services:  # noqa: F821
    if _svc["name"] in ("ti", "ti-ssh"):  # the SSH gateway loads this file too (bench_ssh.py --kubernetes)
        _env = _svc.setdefault("environment", {})
        if _root:
            _env["PYTHONPATH"] = _root
        # the service loads this file too: it must see the experiment settings below
        _env.update({k: v for k, v in os.environ.items() if k.startswith("TI_HUB_BENCH_")})

# optional service settings for experiments (bench_api.py --db-threads N)
if os.environ.get("TI_HUB_BENCH_DB_THREADS"):
    c.TiService.db_threads = int(os.environ["TI_HUB_BENCH_DB_THREADS"])  # noqa: F821
# (bench_api.py --api-processes N; or TI_HUB_BENCH_API_PROCESSES in the environment)
if os.environ.get("TI_HUB_BENCH_API_PROCESSES"):
    c.TiService.api_processes = int(os.environ["TI_HUB_BENCH_API_PROCESSES"])  # noqa: F821
# (the Kubernetes benchmarks: more config lines in a file, e.g. the backend and its cluster)
if os.environ.get("TI_HUB_BENCH_EXTRA_CONFIG"):
    with open(os.environ["TI_HUB_BENCH_EXTRA_CONFIG"]) as _f:
        exec(compile(_f.read(), os.environ["TI_HUB_BENCH_EXTRA_CONFIG"], "exec"))
