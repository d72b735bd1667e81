"""Virtual clusters in a replay (issue 18, lending): split a trace's machines and users into N VCs.

Machines go to ``vc0`` .. ``vc<N-1>`` in turn, largest first (by devices, then cores), so each VC gets a like
share of every machine shape; a user's jobs all go to VC ``k mod N`` for ``user<k>`` (the Alibaba loader's
names; other names by a stable hash), so the Zipf law's heavy users make some VCs busier than others, the case
lending is for. ``rules(vcs, cohort=True)`` puts them all in one cohort (lending on); ``cohort=False``: none.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import replace

from ..backends.base import NodeCapacity
from ..scheduler.core import VCRules
from .trace import TraceJob


def vc_names(n: int) -> list[str]:
    return [f"vc{i}" for i in range(n)]


def _vc_of_user(user: str, n: int) -> int:
    tail = user[4:] if user.startswith("user") else ""
    return int(tail) % n if tail.isdigit() else zlib.crc32(user.encode()) % n


def split(nodes: Sequence[NodeCapacity], jobs: Sequence[TraceJob], n: int
          ) -> tuple[list[NodeCapacity], list[TraceJob]]:
    """The same machines and jobs, in ``n`` VCs (pools). ``n`` <= 1: unchanged."""
    if n <= 1:
        return list(nodes), list(jobs)
    names = vc_names(n)
    order = sorted(range(len(nodes)), key=lambda i: (-sum(len(d) for d in nodes[i].devices.values()),
                                                     -nodes[i].cpu, nodes[i].name))
    pool_of = {i: names[k % n] for k, i in enumerate(order)}
    out_nodes = [replace(nd, pool=pool_of[i]) for i, nd in enumerate(nodes)]
    out_jobs = [replace(j, pool=names[_vc_of_user(j.user, n)]) for j in jobs]
    return out_nodes, out_jobs


def rules(n: int, cohort: bool, no_lend: Sequence[str] = ()) -> VCRules:
    """The VCs' rules in a replay: all in cohort "c" (lending between them) or none."""
    return VCRules(cohorts={v: "c" for v in vc_names(n)} if cohort else {}, no_lend=frozenset(no_lend))
