"""Prometheus metrics of the ti service (SPEC MON4): ``GET /services/ti/api/v1/metrics``.

Two kinds of figures, kept apart on purpose:

* state, read from the database at scrape time (``db.py`` reads, ``families.py`` builds): queues, jobs by
  state, devices total/allocated/idle per pool and per node, per-user allocation and usage score, and the
  device and host health of the latest snapshot in DCGM's and the node exporter's series names
  (``health.py``). Any process answers these the same, so API followers need nothing from the leader;
* events counted where they happen (``process.py``): admissions, preemptions, the wait of admitted jobs,
  scheduler cycles, workspace starts and reclaims, API latency. These live in prometheus_client's multiprocess
  mode (files under ``data_dir/prometheus``): the leader counts the scheduler's, every API process its requests,
  and whichever process answers a scrape sums them all.
"""
