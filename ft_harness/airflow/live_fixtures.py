"""pytest's way to a live Airflow (a plugin of ``tests/conftest.py``).

``live_airflow``
    Session-scoped default instance: DAGs from ``tests/e2e/dags/`` and ``dags_examples/``, on
    PostgreSQL (``postgres_server``).
``postgres_server``
    Session-scoped PostgreSQL server (:class:`ft_harness.services.postgres.PostgresServer`).
``live_airflow_factory``
    Session-scoped factory for other DAG sets / settings; instances are cached by their arguments
    and stopped at the end of the session::

        @pytest.fixture(scope="module")
        def my_airflow(live_airflow_factory):
            return live_airflow_factory(dags=[MY_DAGS], env={"AIRFLOW__CORE__PARALLELISM": "4"})

A failing test that used one gets the components' log paths and tails in its report.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from ft_harness.airflow.live_airflow import E2E_DAGS_DIR, EXAMPLE_DAGS_DIR, LiveAirflow
from ft_harness.airflow.live_environment import pipeline_environment


class LiveAirflowFactory:
    """Starts (once per distinct argument set) and remembers instances; stops them all at the end."""

    def __init__(self, base_tmp: Path):
        self._base_tmp = base_tmp
        self._instances: dict[str, LiveAirflow] = {}

    @property
    def base_tmp(self) -> Path:
        return self._base_tmp

    def __call__(
        self,
        dags: Iterable[str | os.PathLike[str]] = (),
        *,
        env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> LiveAirflow:
        dags = [str(Path(d).resolve()) for d in dags]
        key = json.dumps([dags, sorted((env or {}).items()), sorted(kwargs.items())], default=str)
        inst = self._instances.get(key)
        if inst is not None and inst.is_alive():
            return inst
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self._base_tmp))
        inst = LiveAirflow(dags, env=env, home=home, **kwargs)
        t0 = time.monotonic()
        inst.start()
        sys.stderr.write(
            f"\n[live_airflow] started in {time.monotonic() - t0:.1f}s "
            f"({', '.join(f'{k}={v:.1f}s' for k, v in inst.timings.items())}); "
            f"home={inst.home} api={inst.base_url}\n"
        )
        self._instances[key] = inst
        return inst

    @property
    def instances(self) -> list[LiveAirflow]:
        return list(self._instances.values())

    def stop_all(self) -> None:
        for inst in self._instances.values():
            inst.stop()


_FACTORIES: list[LiveAirflowFactory] = []


LIVE_CACHE_BOUND = "20 mb"


@pytest.fixture(scope="session")
def live_airflow_factory(tmp_path_factory: pytest.TempPathFactory):
    """Factory: ``live_airflow_factory(dags=[...], env={...}) -> LiveAirflow`` (cached per session)."""
    factory = LiveAirflowFactory(tmp_path_factory.mktemp("live-airflow"))
    _FACTORIES.append(factory)
    try:
        yield factory
    finally:
        factory.stop_all()
        _FACTORIES.remove(factory)


@pytest.fixture(scope="session")
def e2e_store_url(s3_endpoint) -> str:
    """A bucket for the partition stores of the e2e pipelines (each DAG run has its own prefix)."""
    bucket = f"ft-e2e-{secrets.token_hex(4)}"
    s3_endpoint.client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/pipelines/"


@pytest.fixture(scope="session")
def s3_proxy(s3_endpoint):
    """A pausable TCP proxy in front of the S3 test endpoint (chaos: "S3 down for a few seconds");
    None for an https endpoint, which a plain TCP proxy cannot stand in for."""
    from ft_harness.services.tcp_proxy import PausableProxy

    target = urllib.parse.urlparse(s3_endpoint.url)
    if target.scheme != "http":
        yield None
        return
    proxy = PausableProxy(target.hostname, target.port or 80)
    yield proxy
    proxy.close()


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the session's live Airflow instances (one database each)."""
    from ft_harness.services.postgres import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def live_airflow(
    live_airflow_factory: LiveAirflowFactory,
    s3_endpoint,
    s3_proxy,
    e2e_store_url,
    spark_connect_launched,
    postgres_server,
    statsd_listener,
    lineage_listener,
) -> LiveAirflow:
    """The default running Airflow: DAGs of ``tests/e2e/dags/`` and ``dags_examples/``, with the
    environment of :func:`pipeline_environment` (stages on the session's Spark Connect server unless a
    DAG names ``spark_submit``), metadata on PostgreSQL, metrics to the session's StatsD listener, the
    staged data path with a bounded task-local partition cache, OpenLineage events to the session's
    HTTP listener; its components reach S3 through ``s3_proxy``."""
    sources = [p for p in (E2E_DAGS_DIR, EXAMPLE_DAGS_DIR) if p.is_dir()]
    endpoint = dataclasses.replace(s3_endpoint, url=s3_proxy.url) if s3_proxy is not None else s3_endpoint
    env = {
        **pipeline_environment(endpoint, e2e_store_url, spark_connect_launched),
        **statsd_listener.environment(),
        **lineage_listener.environment(),
        # One machine: the staged data path, as the docs advise there (faster for data-heavy stages,
        # a Python-free write under spark-submit, task-local recovery and checkpoint statistics). The
        # default path (executors) runs on tests/cluster's two-host deployment and in the unit tests.
        "AIRFLOW__FT_PROVIDER__DATA_PATH": "staged",
        # Task-local recovery on, bounded (smaller than the default, so that the suite trims it).
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_CACHE_DIR": str(
            live_airflow_factory.base_tmp / "partition-cache"
        ),
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_CACHE_MAX_SIZE": LIVE_CACHE_BOUND,
        # Every run end sweeps its pipeline's expired runs (tests/e2e/test_lifecycle.py), not once an hour
        "AIRFLOW__FT_PROVIDER__PARTITION_STORE_SWEEP_INTERVAL": "0 s",
    }
    database = postgres_server.create_database(f"airflow_{secrets.token_hex(4)}")
    # starts while the Connect server does
    airflow = live_airflow_factory(sources, env=env, database_url=database)
    spark_connect_launched.wait_until_ready()
    return airflow


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """On a failing test that used a live Airflow, attach component log paths and tails."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    fixturenames = getattr(item, "fixturenames", ())
    if not any(name.startswith("live_airflow") for name in fixturenames):
        return
    for factory in _FACTORIES:
        for inst in factory.instances:
            report.sections.append((f"live airflow {inst.base_url}", inst.describe_logs(tail=25)))
