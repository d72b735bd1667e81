"""`ti-hub simulate`: replay a job trace on a virtual clock through the scheduler's pure core.

* ``trace``    the native CSV formats (jobs, nodes) and the common job record, ``TraceJob``
* ``alibaba``  the Alibaba GPU 2023 ("openb") node and pod lists, with a seeded user assignment
* ``policies`` FIFO, no-score, fair, fair+backfill: how a trace job becomes a ``Request``
* ``engine``   the event loop: arrivals, completions, ``core.cycle`` with a kept ``Capacity``, score updates
* ``metrics``  delays, completion times, utilization, per-user shares, Jain's index
* ``report``   the summary table, JSON and the CSV files of an ``--out`` directory
* ``cli``      the ``ti-hub simulate`` arguments
"""
