"""The pure parts of benchmarks/bench_k8s_spawns.py: the hub config it writes for each spawner (TiHub's, and
KubeSpawner alone for the floor), and the emptying of a database that --db-url (and the PostgreSQL tests)
rely on. The benchmark itself starts a cluster and takes minutes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect
from traitlets.config import Config

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

pytest.importorskip("kubespawner")
import bench_k8s_spawns as bench  # noqa: E402


@pytest.mark.parametrize("spawner", ["FakeAnswerKubeSpawner", "FakeAnswerPlainKubeSpawner"])
def test_the_config_runs_and_picks_the_spawner(spawner, monkeypatch):
    from kubespawner import KubeSpawner

    from ti_hub.spawner.kube import TiKubeSpawner

    monkeypatch.setenv("KUBECONFIG", os.environ.get("KUBECONFIG", ""))  # the config sets it; undone after
    text = bench.CONFIG.format(kubeconfig="/nonexistent/kubeconfig", namespace="ti-bench", limit=7,
                               spawner_class=spawner)
    c = Config()
    exec(compile(text, "bench_config", "exec"), {"c": c})
    cls = c.JupyterHub.spawner_class
    assert cls.__name__ == spawner and issubclass(cls, KubeSpawner)
    # the floor is KubeSpawner alone: none of TiHub's admission in its class hierarchy
    assert issubclass(cls, TiKubeSpawner) == (spawner == "FakeAnswerKubeSpawner")
    assert c.JupyterHub.concurrent_spawn_limit == 7 and c.KubeSpawner.namespace == "ti-bench"
    # the same pod size for both (TiKubeSpawner sets it from the plan, 1 core and 1 GiB in the benchmark)
    assert (c.KubeSpawner.cpu_guarantee, c.KubeSpawner.mem_guarantee) == (1.0, "1024M")


def test_drop_tables_leaves_an_empty_database(tmp_path):
    from ti_hub.db.session import drop_tables, make_engine, sqlite_url, upgrade

    url = sqlite_url(tmp_path / "ti.sqlite")
    upgrade(url)
    engine = make_engine(url)
    assert "ti_jobs" in inspect(engine).get_table_names()
    drop_tables(url)
    assert inspect(engine).get_table_names() == []
    upgrade(url)  # made again from nothing, as the service does at its start
    assert "ti_jobs" in inspect(engine).get_table_names()
    engine.dispose()
