"""`ti`: the TiHub command line (talks to the ti service's REST API, docs/api.md).

Exit codes: 0 ok; 1 the API refused; 2 usage error; 3 cannot reach the server or not logged in;
4 a waited-for job ended failed, killed or in error; 5 a wait timed out; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from . import account, admin, alerts, cluster, images, jobs, misc, people, queue, roles, storage, vc, workspaces
from .client import ApiError, TiConnectionError
from .common import Formatter, add_global_options, wrap
from .config import Aborted, NotLoggedIn, UsageError

EXIT_OK, EXIT_API, EXIT_USAGE, EXIT_CONNECT = 0, 1, 2, 3
EXIT_INTERRUPTED = 130

EPILOG = wrap("""
    examples:
      ti login --url http://127.0.0.1:8000 --token TOKEN
      ti plan list
      ti job submit --name mnist --plan demo-gpu-1 --image pytorch-gpu -- python train.py --epochs 3
      ti job logs mnist -f

    configuration (first found wins):
      --url/--token, then TI_API_URL and TI_TOKEN, then JUPYTERHUB_API_TOKEN (inside a workspace),
      then the file written by `ti login` (~/.config/ti/config.json, or $TI_CONFIG).
      The URL is the hub (http://HUB:8000) or the API base (.../services/ti/api/v1).

    exit codes:
      0 ok, 1 refused by the API, 2 usage error, 3 cannot reach TiHub or not logged in,
      4 the job ended failed/killed/error (job wait, submit --wait/-f), 5 wait timed out, 130 interrupted
    """)


def build_parser(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
                 prog: str = "ti") -> argparse.ArgumentParser:
    """The whole command tree; every subcommand's parser is a `parser_class` (the notebook magics pass one
    that reports errors in one line instead of exiting)."""
    parser = parser_class(
        prog=prog,
        description="TiHub command line: submit and manage training jobs, volumes, images and more.",
        epilog=EPILOG,
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"ti {__version__}")
    add_global_options(parser)
    parser.set_defaults(func=None)
    root = parser.add_subparsers(title="commands", metavar="COMMAND")
    jobs.register(root)
    misc.register(root)
    queue.register(root)
    storage.register(root)
    images.register(root)
    account.register(root)
    admin.register(root)
    alerts.register(root)
    people.register(root)
    roles.register(root)
    vc.register(root)
    cluster.register(root)
    workspaces.register(root)
    return parser


def _refused(e: ApiError) -> str:
    msg = f"error: {e.detail}"
    if e.field:
        msg += f" (field: {e.field})"
    quota = [f"{k} {e.extra[k]}" for k in ("resource", "requested", "used", "limit") if e.extra.get(k) is not None]
    if quota:
        msg += "\n  " + ", ".join(quota)
    return msg


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns its exit code (argparse raises SystemExit for usage errors and --help)."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = args.func(args)
        return EXIT_OK if code is None else int(code)
    except ApiError as e:
        print(_refused(e), file=sys.stderr)
        if e.status == 401:
            print("  (the token was refused: run `ti login` again)", file=sys.stderr)
            return EXIT_CONNECT
        return EXIT_API
    except (TiConnectionError, NotLoggedIn) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CONNECT
    except Aborted as e:
        print(str(e), file=sys.stderr)
        return EXIT_API
    except UsageError as e:
        print(f"ti: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        try:
            print(file=sys.stderr)
        except Exception:  # noqa: BLE001 - going away quietly
            pass
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `ti job logs x | head`
        try:
            sys.stdout = open("/dev/null", "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
