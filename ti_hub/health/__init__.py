"""Device and machine health (MON1-4, WS6): readings of GPUs and hosts, where they come from, and the leader's
sampler that hands each snapshot to the alert rules, the idle policy, the cluster status and the metrics.

- ``readings``: what one sample is (pure dataclasses, JSON in and out).
- ``sources``: where readings come from: this machine through NVML and psutil (embedded platform).
- ``testsource``: a source the tests control (a JSON file they write): named as such, never a default.
- ``monitor``: the leader's sampling loop, the recent window and the latest readings kept in the database.
"""
