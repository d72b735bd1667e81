"""DEV7: `ti job submit --help` and `ti volume create --help` say which kind of job and of storage suits which
work, and the JupyterLab panels hold the same words (ti_labextension/src/guide.ts)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ti_hub.cli import main as cli
from ti_hub.domain import guidance
from ti_hub.domain.states import JOB_KINDS
from ti_hub.ops.quotas import STORAGE_KINDS

GUIDE_TS = Path(__file__).resolve().parents[2] / "ti_labextension" / "src" / "guide.ts"


def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return capsys.readouterr().out


def test_submit_help_says_which_kind_of_job(capsys):
    text = help_of(capsys, "job", "submit")
    assert "which kind of job" in text
    for what, suits in guidance.JOB_KINDS:
        assert re.search(rf"^  {re.escape(what)} +{re.escape(suits)}$", text, re.M), (what, text)
    assert "none unless asked" in " ".join(text.split())  # --endpoint: TensorBoard only when asked for


def test_volume_create_help_says_which_kind_of_storage(capsys):
    text = help_of(capsys, "volume", "create")
    assert "which kind of storage" in text
    for what, suits in guidance.STORAGE_KINDS:
        assert re.search(rf"^  {re.escape(what)} +{re.escape(suits)}$", text, re.M), (what, text)
    assert "(required there)" in " ".join(text.split())  # --source for datasets


def test_the_guide_covers_every_kind_and_the_panels_say_the_same():
    jobs = {what.split(",")[0] for what, _ in guidance.JOB_KINDS}
    assert set(JOB_KINDS) <= jobs and "workspace" in jobs
    assert set(STORAGE_KINDS) <= {what for what, _ in guidance.STORAGE_KINDS}
    ts = GUIDE_TS.read_text()
    for name, rows in (("JOB_KINDS", guidance.JOB_KINDS), ("STORAGE_KINDS", guidance.STORAGE_KINDS)):
        body = re.search(rf"export const {name}: GuideRow\[\] = \[(.*?)\n\];", ts, re.S).group(1)
        # each row is a TypeScript array of two string literals, which Python's literal syntax reads too
        ts_rows = tuple(tuple(r) for r in ast.literal_eval("[" + body + "]"))
        assert ts_rows == rows, name
