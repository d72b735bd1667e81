"""`ti-hub`: start the whole embedded platform, upgrade the database, print the config reference."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .. import __version__
from ..plumbing import children, lastrun, secretfile
from . import portguard

DEFAULT_CONFIG = Path(__file__).with_name("default_config.py")


def _has_nvidia_gpu() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


# unauthenticated: answers which run of `ti-hub start` the ti service belongs to (ti_hub/service/health.py)
HEALTH_PATH = "/services/ti/api/v1/health"


def _answering_run(url: str) -> str | None:
    """The run id the ti service at ``url`` echoes; None if nothing (or not a ti service) answers."""
    try:
        with urllib.request.urlopen(url + HEALTH_PATH, timeout=1) as r:
            return str(json.loads(r.read()).get("run")) if r.status == 200 else None
    except (OSError, ValueError, AttributeError):
        return None


def _proxy_routes_ti(proxy_api: str, token_file: Path) -> bool | None:
    """Whether the hub's proxy routes the ti service yet; None when its REST API does not tell us."""
    try:
        req = urllib.request.Request(proxy_api + "/api/routes",
                                     headers={"Authorization": f"token {token_file.read_text().strip()}"})
        with urllib.request.urlopen(req, timeout=1) as r:
            return any(path.rstrip("/") == "/services/ti" for path in json.loads(r.read()))
    except (OSError, ValueError, AttributeError):
        return None


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float, run_id: str, proxy_api: str,
                token_file: Path) -> bool:
    """Ready once this run's own ti service answers through the proxy: an orphan of an earlier run, or
    another platform on the same port, echoes another run id.

    Until the proxy routes the ti service, each probe through it is answered by the hub's 404 page, and both
    log it as an error that a newcomer reads as a failure: probe once the route is there (or, when the proxy's
    API does not answer, e.g. a config that moved it, after a few seconds)."""
    deadline = time.monotonic() + timeout
    blind_after = time.monotonic() + 15
    told = False
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        routed = _proxy_routes_ti(proxy_api, token_file)
        if routed is False or (routed is None and time.monotonic() < blind_after):
            time.sleep(0.1)
            continue
        run = _answering_run(url)
        if run == run_id:
            return True
        if run is not None and not told:
            print(f"TiHub: another TiHub answers at {url} (not this run); waiting for this run's own.", flush=True)
            told = True
        time.sleep(0.1)
    return False


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_start(args: argparse.Namespace) -> int:
    data = Path(args.data_dir).expanduser().resolve()
    data.mkdir(parents=True, exist_ok=True)
    if args.user_data_dir:
        Path(args.user_data_dir).expanduser().resolve().mkdir(parents=True, exist_ok=True)
    try:
        owner = lastrun.claim(data)  # held (an flock) until this process exits, however it exits
    except lastrun.DataDirBusy as e:
        print(f"TiHub: {e}", file=sys.stderr, flush=True)
        return 1
    lastrun.sweep(data, _say)
    held, problems = portguard.claim(_platform_ports(args))
    if problems:
        for line in problems:
            print(f"TiHub: {line}", file=sys.stderr, flush=True)
        print("TiHub: not started; nothing was changed.", file=sys.stderr, flush=True)
        os.close(owner)
        return 1
    try:
        _rotate_proxy_token(data)
        return _run_hub(args, data)
    finally:
        for s in held:  # the IPv6 counterparts of the platform's ports: held as long as it runs
            s.close()
        os.close(owner)


def _platform_ports(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(what, address, port) of every port the platform listens on, as ti_hub/hub/config.py will read them."""
    env = os.environ

    def port(flag: int, key: str, default: int) -> int:
        return int(flag or env.get(key) or default)

    ssh_port = args.port + 22 if args.ssh_port is None else args.ssh_port
    return [("the public port", args.ip, args.port),
            ("the hub's API", "127.0.0.1", port(args.hub_port, "TI_HUB_HUB_PORT", 8081)),
            ("the proxy's API", "127.0.0.1", port(args.proxy_api_port, "TI_HUB_PROXY_API_PORT", 8001)),
            ("the ti service", "127.0.0.1", port(args.service_port, "TI_HUB_SERVICE_PORT", 10101)),
            ("the SSH gateway", args.ssh_ip or args.ip, ssh_port)]


def _rotate_proxy_token(data: Path) -> None:
    """A new proxy auth token at every start: one sent to whoever held the proxy API's port earlier is useless
    (hub/config.py reads this file; the proxy starts with the hub, so nothing else holds the old one)."""
    secretfile.replace(data / "proxy_token", secrets.token_hex(32).encode())


def _run_hub(args: argparse.Namespace, data: Path) -> int:
    config = Path(args.config).resolve() if args.config else DEFAULT_CONFIG
    run_id = secrets.token_hex(16)
    env = dict(os.environ)
    env.update({"TI_HUB_DATA_DIR": str(data), "TI_HUB_IP": args.ip, "TI_HUB_PORT": str(args.port),
                "TI_HUB_CONFIG_FILE": str(config), "TI_HUB_RUN_ID": run_id})
    if args.user_data_dir:
        env["TI_HUB_USER_DATA_DIR"] = str(Path(args.user_data_dir).expanduser().resolve())
    if args.endpoint_origin:
        env["TI_HUB_ENDPOINT_ORIGIN"] = args.endpoint_origin
    for key, val in (("TI_HUB_HUB_PORT", args.hub_port), ("TI_HUB_PROXY_API_PORT", args.proxy_api_port),
                     ("TI_HUB_SERVICE_PORT", args.service_port)):
        if val:
            env[key] = str(val)
    ssh_port = args.port + 22 if args.ssh_port is None else args.ssh_port
    env["TI_HUB_SSH_PORT"] = str(ssh_port)
    env["TI_HUB_SSH_IP"] = args.ssh_ip or args.ip
    if args.admin:
        env["TI_HUB_ADMIN"] = args.admin
    env["TI_HUB_CULL_IDLE_TIMEOUT"], env["TI_HUB_CULL_EVERY"] = str(args.cull_idle_timeout), str(args.cull_every)
    if not _has_nvidia_gpu() and args.demo_gpus:
        # no GPU here: fake demo devices so that the whole flow can be tried (jobs see CUDA_VISIBLE_DEVICES only)
        env.setdefault("TI_HUB_DEMO_GPUS", str(args.demo_gpus))
    url = f"http://{args.ip}:{args.port}"
    print(f"TiHub {__version__}: starting JupyterHub, the proxy and the ti service (data in {data}) ...",
          flush=True)
    t0 = time.monotonic()
    # the hub gets SIGTERM if this process dies, however it dies, and then stops everything it started
    proc = subprocess.Popen([sys.executable, "-m", "ti_hub.hub.main", "-f", str(config)], env=env, cwd=str(data),
                            preexec_fn=children.die_with_parent_preexec(signal.SIGTERM))

    def forward(signum, _frame):
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    proxy_api = f"http://127.0.0.1:{env.get('TI_HUB_PROXY_API_PORT', '8001')}"  # as hub/config.py reads it
    if _wait_ready(url, proc, args.start_timeout, run_id, proxy_api, data / "proxy_token"):
        admin = args.admin or "<admin>"
        how = ("log in with the password from TI_HUB_ADMIN_PASSWORD" if env.get("TI_HUB_ADMIN_PASSWORD")
               else f"sign up as '{admin}' at {url}/hub/signup (admins are authorized at once)")
        ssh = (f"SSH: ssh -p {ssh_port} USER[+WORKSPACE]@{env['TI_HUB_SSH_IP']} (after `ti key add`)\n"
               if ssh_port else "")
        print(f"\nTiHub is ready at {url} (started in {time.monotonic() - t0:.1f} s)\n"
              f"Next: {how}, then authorize new users at {url}/hub/authorize.\n"
              f"API: {url}/services/ti/api/v1 (OpenAPI: {url}/services/ti/api/v1/openapi.json)\n"
              f"{ssh}Press Ctrl-C to stop.", flush=True)
    elif proc.poll() is None:
        print(f"TiHub did not answer at {url} within {args.start_timeout:.0f} s; see the log above.", flush=True)
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:
            continue
    # a hub that crashed could not stop its children: what did not die with it is stopped here
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    lastrun.sweep(data, _say, why=f"the hub ({how})")
    return code


def cmd_stop(args: argparse.Namespace) -> int:
    """What Ctrl-C does where `ti-hub start` runs, from another terminal: the hub stops its workspaces, the
    ti service and the proxy; training jobs keep running and the next start finds them."""
    data = Path(args.data_dir).expanduser().resolve()
    record = lastrun.owner(data)
    if record is None:
        print(f"TiHub is not running on {data}.", file=sys.stderr, flush=True)
        return 1
    print(f"Stopping TiHub on {data} (pid {record.pid}): workspaces, the ti service, the hub and the proxy; "
          f"training jobs keep running ...", flush=True)
    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    except PermissionError:
        print(f"TiHub: pid {record.pid} belongs to another user; stop it as that user.", file=sys.stderr)
        return 1
    deadline, said = time.monotonic() + args.timeout, time.monotonic()
    while lastrun.owner(data) is not None:
        if time.monotonic() > deadline:
            print(f"TiHub: still stopping after {args.timeout:.0f} s (pid {record.pid}); "
                  f"see its terminal or log.", file=sys.stderr, flush=True)
            return 1
        if time.monotonic() - said > 5:
            print("  ... still stopping (workspaces stop first)", flush=True)
            said = time.monotonic()
        time.sleep(0.2)
    print("TiHub stopped.", flush=True)
    return 0


def cmd_upgrade_db(args: argparse.Namespace) -> int:
    from ..db.session import sqlite_url, upgrade

    url = args.db_url or sqlite_url(Path(args.data_dir).expanduser().resolve() / "ti.sqlite")
    upgrade(url)
    print("TiHub's database is up to date.")
    return 0


def cmd_help_config(args: argparse.Namespace) -> int:
    from .confighelp import render

    try:
        print(render(args.classes, everything=args.all))
    except ValueError as e:
        print(f"ti-hub help-config: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..sim import cli

    return cli.run(args)


def build_parser(full: bool = True) -> argparse.ArgumentParser:
    """``full=False`` leaves out the simulator's options (and its imports) when another command runs."""
    p = argparse.ArgumentParser(prog="ti-hub", description="TiHub: a deep-learning training platform on JupyterHub.",
                                epilog="Example: ti-hub start --admin admin --data-dir ~/.local/share/ti-hub")
    p.add_argument("--version", action="version", version=__version__)
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("start", help="start the embedded platform (hub, proxy, ti service, local backend)")
    s.add_argument("--data-dir", default=os.environ.get("TI_HUB_DATA_DIR", "~/.local/share/ti-hub"),
                   help="all state lives here (default: %(default)s)")
    s.add_argument("--user-data-dir", default=os.environ.get("TI_HUB_USER_DATA_DIR", ""),
                   help="where users' homes, volumes and jobs' work directories live (default: the data dir); "
                        "on a file system of its own, users' code cannot fill the platform's disk")
    s.add_argument("--endpoint-origin", default=os.environ.get("TI_HUB_ENDPOINT_ORIGIN", ""),
                   help="serve each job endpoint on an origin of its own, e.g. http://ep.localhost:8040 "
                        "(JOB_ID-INSTANCE-PORT.ep.localhost; *.localhost reaches this machine in browsers); "
                        "the ti service listens on that port (default: endpoints are paths on the hub)")
    s.add_argument("--admin", default=os.environ.get("TI_HUB_ADMIN", ""),
                   help="name of the first admin (env TI_HUB_ADMIN); password from TI_HUB_ADMIN_PASSWORD or sign-up")
    s.add_argument("--ip", default=os.environ.get("TI_HUB_IP", "127.0.0.1"), help="address to listen on")
    s.add_argument("--port", type=int, default=int(os.environ.get("TI_HUB_PORT", "8000")), help="public port")
    s.add_argument("--hub-port", type=int, default=0, help="internal hub port (default 8081)")
    s.add_argument("--proxy-api-port", type=int, default=0, help="proxy API port (default 8001)")
    s.add_argument("--service-port", type=int, default=0, help="ti service port (default 10101)")
    env_ssh = os.environ.get("TI_HUB_SSH_PORT", "")
    s.add_argument("--ssh-port", type=int, default=int(env_ssh) if env_ssh.isdigit() else None,
                   help="SSH gateway port (default: --port + 22, e.g. 8022; 0: no SSH gateway)")
    s.add_argument("--ssh-ip", default=os.environ.get("TI_HUB_SSH_IP", ""),
                   help="address the SSH gateway listens on (default: --ip)")
    s.add_argument("--config", default="", help="a jupyterhub_config.py (default: TiHub's packaged defaults)")
    s.add_argument("--cull-idle-timeout", type=int, default=int(os.environ.get("TI_HUB_CULL_IDLE_TIMEOUT", "0") or 0),
                   help="stop workspaces without activity for this many seconds (jupyterhub-idle-culler as a hub "
                        "service; 0: off, the default)")
    s.add_argument("--cull-every", type=int, default=int(os.environ.get("TI_HUB_CULL_EVERY", "0") or 0),
                   help="seconds between two checks of the activity culler (default: half its timeout)")
    s.add_argument("--demo-gpus", type=int, default=4,
                   help="fake demo devices when this machine has no NVIDIA GPU (0: none; default %(default)s)")
    s.add_argument("--start-timeout", type=float, default=60, help="seconds to wait for the hub to answer")
    s.set_defaults(func=cmd_start)
    st = sub.add_parser("stop", help="stop the platform started on a data dir (as Ctrl-C does); jobs keep running",
                        description="Stop the embedded platform that `ti-hub start` runs on a data dir, as Ctrl-C "
                                    "in its terminal does: the hub stops the workspaces, the ti service and the "
                                    "proxy. Training jobs keep running on their own and the next `ti-hub start` "
                                    "takes them back; kill those you want gone first (`ti job kill ID`).",
                        epilog="Example: ti-hub stop --data-dir ~/.local/share/ti-hub")
    st.add_argument("--data-dir", default=os.environ.get("TI_HUB_DATA_DIR", "~/.local/share/ti-hub"),
                    help="the data dir the platform runs on (default: %(default)s)")
    st.add_argument("--timeout", type=float, default=90, help="seconds to wait for it to stop (default %(default)s)")
    st.set_defaults(func=cmd_stop)
    u = sub.add_parser("upgrade-db", help="bring TiHub's database to the current schema")
    u.add_argument("--data-dir", default=os.environ.get("TI_HUB_DATA_DIR", "~/.local/share/ti-hub"))
    u.add_argument("--db-url", default="", help="SQLAlchemy URL (default: SQLite in the data directory)")
    u.set_defaults(func=cmd_upgrade_db)
    h = sub.add_parser("help-config", help="print every configuration option with its default and help",
                       description="Every setting TiHub defines (c.Class.option in jupyterhub_config.py), grouped "
                                   "by where it acts, with its default and help.")
    h.add_argument("classes", nargs="*", metavar="CLASS", help="only these classes, e.g. TiService LocalBackend")
    h.add_argument("--all", action="store_true",
                   help="also the options the classes inherit from JupyterHub, KubeSpawner and other packages")
    h.set_defaults(func=cmd_help_config)
    help_sim = "replay a job trace through the scheduler under several policies"
    if not full:
        sub.add_parser("simulate", help=help_sim)
        return p
    from ..sim.cli import DESCRIPTION, EPILOG, add_arguments

    m = sub.add_parser("simulate", help=help_sim, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(m)
    m.set_defaults(func=cmd_simulate)
    return p


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0].startswith("--") and argv[0] not in ("--help", "-h", "--version"):
        argv = ["start", *argv]  # `ti-hub` alone starts the platform
    args = build_parser(full=bool(argv) and argv[0] == "simulate").parse_args(argv)
    sys.exit(args.func(args))


if __name__ == "__main__":
    main()
