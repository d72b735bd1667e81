"""The Prometheus text exposition format (0.0.4), written directly: a scrape of 200 machines is ~16,000 samples,
and prometheus_client's Metric objects and generate_latest cost ~10x more than these lines (benchmarks/
bench_metrics.py). Only the event counters of process.py go through prometheus_client (multiprocess files)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def _esc_label(v: str) -> str:
    if "\\" not in v and '"' not in v and "\n" not in v:  # nearly always: no copy
        return v
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _esc_help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def number(v: float) -> str:
    if type(v) is int:
        return str(v)
    if v != v:
        return "NaN"
    if v in (math.inf, -math.inf):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


class Family:
    """One metric family: its samples share the name and the label names."""

    __slots__ = ("name", "help", "type", "labels", "lines")

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (), type_: str = "gauge"):
        self.name, self.help, self.type, self.labels = name, help_text, type_, tuple(labels)
        self.lines: list[str] = []

    def add(self, values: Sequence[str], value: float) -> None:
        if self.labels:
            inner = ",".join([f'{k}="{_esc_label(v if type(v) is str else str(v))}"'
                              for k, v in zip(self.labels, values)])
            self.lines.append(f"{self.name}{{{inner}}} {number(value)}")
        else:
            self.lines.append(f"{self.name} {number(value)}")

    def __len__(self) -> int:
        return len(self.lines)

    def text(self) -> str:
        head = f"# HELP {self.name} {_esc_help(self.help)}\n# TYPE {self.name} {self.type}\n"
        return head + "\n".join(self.lines) + ("\n" if self.lines else "")


def render(families: Iterable[Family]) -> str:
    return "".join(f.text() for f in families)
