"""Spark on a host of its own, as pytest fixtures: ``spark_host`` (the mount namespace of
``spark_host.py``) and ``remote_spark`` (a standalone cluster and a Connect server started there)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ft_harness.services.spark_cluster import SparkStandalone, StandaloneCluster
from ft_harness.services.spark_connect import SparkConnectServer
from ft_harness.services.spark_host import SparkHost


@dataclass(frozen=True)
class RemoteSpark:
    """Spark on a host of its own: a standalone master and worker, and a Connect server on them."""

    host: SparkHost
    cluster: StandaloneCluster  # spark-submit --master cluster.url: the driver here, executors there
    connect: SparkConnectServer  # driver and executors there


@pytest.fixture(scope="session")
def spark_host() -> Iterator[SparkHost]:
    """A second machine for Spark (see the module's docstring)."""
    with SparkHost() as host:
        yield host


@pytest.fixture(scope="session")
def remote_spark(spark_host: SparkHost, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteSpark]:
    """A standalone cluster (one worker, 2 cores) and a Connect server on it, all on ``spark_host``."""
    folder = tmp_path_factory.mktemp("remote-spark")
    standalone = SparkStandalone(folder, cores=2, memory="2g", host=spark_host)
    try:
        cluster = standalone.start()
        connect = SparkConnectServer(
            master=cluster.url, log_dir=folder, host=spark_host, conf={"spark.cores.max": "1"}
        ).start()
        try:
            yield RemoteSpark(spark_host, cluster, connect)
        finally:
            connect.stop()
    finally:
        standalone.stop()
