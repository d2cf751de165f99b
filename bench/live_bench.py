"""What the live benchmarks share: a moto S3 server with one bucket, a local Spark Connect server and
a live Airflow loading the benchmark's DAGs (its metadata on a PostgreSQL server of its own where
Debian's ``postgresql`` is installed, else SQLite, which can fail a try with "database is locked" under
load), wired as pipelines expect them, and stopped afterwards whatever happens (a benchmark
interrupted half-way leaves no process behind)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ft_harness.airflow.live_airflow import LiveAirflow  # noqa: E402
from ft_harness.airflow.live_environment import pipeline_environment  # noqa: E402
from ft_harness.services.postgres import PostgresServer, PostgresUnavailable  # noqa: E402
from ft_harness.services.s3_server import S3Endpoint, start_moto_server, stop_moto_server  # noqa: E402
from ft_harness.services.spark_connect import SparkConnectServer  # noqa: E402


@dataclass
class LiveBench:
    s3: S3Endpoint
    server: SparkConnectServer
    airflow: LiveAirflow
    store_url: str


@contextmanager
def live_bench(
    bucket: str,
    dags: list[Path],
    *,
    env: dict[str, str] | None = None,
    server_conf: dict[str, Any] | None = None,
) -> Iterator[LiveBench]:
    """Start everything (``env`` is added to the pipelines' environment), yield it, stop it."""
    s3, server, airflow, postgres, database = start_moto_server(), None, None, None, None
    try:
        try:
            postgres = PostgresServer().start()
            database = postgres.create_database("airflow")
        except PostgresUnavailable as err:
            print(f"({err}: the benchmark's Airflow uses SQLite)", flush=True)
        server = SparkConnectServer(conf=server_conf or {}).start()
        s3.client().create_bucket(Bucket=bucket)
        store_url = f"s3://{bucket}/pipelines/"
        airflow = LiveAirflow(
            dags, env={**pipeline_environment(s3, store_url, server), **(env or {})}, database_url=database
        ).start()
        yield LiveBench(s3, server, airflow, store_url)
    finally:
        if airflow is not None:
            airflow.stop()
        if server is not None:
            server.stop()
        if postgres is not None:
            postgres.stop()
        stop_moto_server(s3)
