"""DEV7: which kind of job and which kind of storage suits which work, said where the choice is made.

The CLI's help prints these rows; the JupyterLab panels hold the same words (ti_labextension/src/guide.ts, checked
against these by tests/browser/test_lab_panels.py), so keep both in step.
"""

from __future__ import annotations

# (what you pick, what it suits)
JOB_KINDS: tuple[tuple[str, str], ...] = (
    ("single", "training that fits on one machine's devices, or runs on CPU: most jobs"),
    ("distributed, allreduce", "data-parallel training over 2 or more workers with PyTorch DDP (torchrun)"),
    ("distributed, ps", "TensorFlow parameter-server training (TF_CONFIG): parameter servers plus workers"),
    ("workspace", "interactive work (notebooks, trying code, debugging): start a workspace, not a job"),
)

STORAGE_KINDS: tuple[tuple[str, str], ...] = (
    ("work directory", "your code and results: /mnt/USER is in every workspace and job of yours, nothing to create"),
    ("filesystem", "data, checkpoints and logs that several jobs or people read and write at once"),
    ("block", "one job's data: one read-write mount at a time, or many read-only ones"),
    ("local", "scratch (caches, unpacked files): fresh for each job or workspace, gone when it ends"),
    ("dataset", "fixed training data: a read-only snapshot of a volume, so every run reads the same files"),
    ("bucket", "shared data that admins create and fill: read-only to users"),
)


def table(title: str, rows: tuple[tuple[str, str], ...]) -> str:
    """Rows as an aligned plain-text table for --help."""
    width = max(len(what) for what, _ in rows)
    return title + "\n" + "\n".join(f"  {what.ljust(width)}  {suits}" for what, suits in rows)
