"""The IPython magics: a thin shell over commands.py (the CLI's parsers and handlers) and the widgets.

Every expected failure (a bad option, an API refusal, an unreachable server) is raised as IPython's
UsageError, which IPython prints as one line on stderr, without a traceback, and which stops "Run all".
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ..cli.client import quote
from ..cli.common import JOB_HELP
from ..cli.config import make_client
from ..cli.submit import report_submitted
from ..cli.watch import watch_job
from . import commands
from .commands import HelpShown, MagicError, call, split_line
from .submission import magic_submission


def _fail(magic: str, e: BaseException) -> UsageError:
    return UsageError(f"{magic}: {commands.error_line(e)}")


def _widgets_or_none(what: str) -> Any:
    """The widget module, or None (with a one-line note) where ipywidgets is missing."""
    try:
        from . import widgets
    except ImportError as e:
        print(f"{what}: no widget ({e}); install ipywidgets>=8", file=sys.stderr)
        return None
    return widgets


@magics_class
class TiMagics(Magics):
    def _cli(self, magic: str, line: str) -> None:
        try:
            commands.run(magic, line)
        except MagicError as e:
            raise _fail("%" + magic, e) from None

    @line_magic
    def ti(self, line: str) -> None:
        """Any `ti` command: %ti job list --status running, %ti volume list, %ti --help."""
        self._cli("ti", line)

    @line_magic
    def ti_jobs(self, line: str) -> None:
        """My jobs (`ti job list`): %ti_jobs [--all] [--json] [--status S] [--kind K] [--limit N]."""
        self._cli("ti_jobs", line)

    @line_magic
    def ti_logs(self, line: str) -> None:
        """A job's log (`ti job logs`): %ti_logs JOB [-f] [--instance N] [--tail N]."""
        self._cli("ti_logs", line)

    @line_magic
    def ti_kill(self, line: str) -> None:
        """Kill a job (`ti job kill`): %ti_kill JOB."""
        self._cli("ti_kill", line)

    @line_magic
    def ti_queue(self, line: str) -> None:
        """Queued jobs in queue order (`ti queue`): %ti_queue [--all] [--json]."""
        self._cli("ti_queue", line)

    @line_magic
    def ti_quota(self, line: str) -> None:
        """My quota and usage (`ti quota`): %ti_quota [--json]."""
        self._cli("ti_quota", line)

    @line_magic
    def ti_vc(self, line: str) -> None:
        """My current virtual cluster and those I may use (`ti vc use`): %ti_vc [--json]; %ti_vc NAME chooses
        NAME (plans, the queue and quotas then show that VC)."""
        self._cli("ti_vc", line)

    @line_magic
    def ti_renew(self, line: str) -> None:
        """Renew this workspace's lease on its devices (`ti workspace renew`), so that the idle policy does not
        stop it: %ti_renew [NAME] [--json]."""
        self._cli("ti_renew", line)

    @line_magic
    def ti_tensorboard(self, line: str) -> None:
        """TensorBoard for a log directory of a job's volumes (`ti job tensorboard`; the job was submitted with
        `--endpoint tensorboard`); prints its URL:
        %ti_tensorboard JOB --logdir /mnt/out/tb, %ti_tensorboard JOB (the running ones), %ti_tensorboard JOB --stop."""
        self._cli("ti_tensorboard", line)

    @line_magic
    def ti_monitor(self, line: str) -> Any:
        """A live view of a job: %ti_monitor JOB [--instance N]."""
        p = commands.OneLineParser(prog="%ti_monitor", description="a live view of a job")
        p.add_argument("job", metavar="JOB", help=JOB_HELP)
        p.add_argument("--instance", type=int, metavar="N", help="whose log to show (distributed jobs)")
        try:
            args = p.parse_args(split_line(line))
            client = make_client(argparse.Namespace())
            job = call(client.get, f"/jobs/{quote(args.job)}")
        except HelpShown:
            return None
        except (MagicError, *commands.EXPECTED) as e:
            raise _fail("%ti_monitor", e) from None
        widgets = _widgets_or_none("%ti_monitor")
        return widgets.JobMonitor(client, job.get("id") or args.job, job=job, instance=args.instance) \
            if widgets else None

    @line_magic
    def ti_form(self, line: str) -> Any:
        """A job submission form (plans and images from the API): %ti_form."""
        if line.strip():
            raise UsageError("%ti_form: takes no options")
        widgets = _widgets_or_none("%ti_form")
        if widgets is None:
            return None
        try:
            return widgets.SubmitForm()
        except commands.EXPECTED as e:
            raise _fail("%ti_form", e) from None

    @cell_magic
    def ti_submit(self, line: str, cell: str) -> Any:
        """Submit the cell as a training job (options of `ti job submit`, plus --python and --no-monitor).

            %%ti_submit --name mnist --plan demo-gpu-1 --image pytorch-gpu --env EPOCHS=3
            python3 /home/me/train.py --epochs $EPOCHS

        The cell is the job's command (a shell script run by /bin/sh -c); with --python it is Python code
        run by `python3 -u -c`. Returns a live monitor unless --no-monitor, --follow/-f or --wait.
        """
        try:
            args = commands.parse_submit(line)
            body = magic_submission(args, cell)
            client = call(make_client, args)
            job = call(client.post, "/jobs", body)
        except HelpShown:
            return None
        except MagicError as e:
            raise _fail("%%ti_submit", e) from None
        ref = report_submitted(args, job, body)
        if args.follow or args.wait:
            try:
                call(watch_job, client, ref, job, args.follow, args.timeout_wait)
            except MagicError as e:
                raise _fail("%%ti_submit", e) from None
            return None
        if args.no_monitor:
            return None
        widgets = _widgets_or_none("%%ti_submit")
        return widgets.JobMonitor(client, ref, job=job) if widgets else None
