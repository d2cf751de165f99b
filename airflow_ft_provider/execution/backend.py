"""The choice of a stage try's backend, made once when the try starts, from its Spark connection."""

from __future__ import annotations

from pathlib import Path

from airflow_ft_provider.execution.contracts import StageBackend, StageSettings
from airflow_ft_provider.execution.task_state import TaskStateStore
from airflow_ft_provider.partitions import S3PartitionStore
from airflow_ft_provider.task_log import TaskLog

CONNECT_CONN_TYPE = "spark_connect"  # the Spark provider's SparkConnectHook.conn_type


def connection_type(conn_id: str) -> str | None:
    """The type of an Airflow connection, or None when it is not defined."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id).conn_type
    except AirflowNotFoundException:
        return None


def connect_url(conn_id: str) -> str | None:
    """The Spark Connect URL of ``conn_id``, credentials included (None: not a Connect connection)."""
    if connection_type(conn_id) != CONNECT_CONN_TYPE:
        return None
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return str(SparkConnectHook(conn_id).get_connection_url())


def backend_for(
    stage: StageSettings,
    *,
    conn_id: str,
    workdir: Path,
    store: S3PartitionStore,
    map_index: int | None,
    log: TaskLog,
    state: TaskStateStore | None = None,
    try_number: int = 1,
) -> StageBackend:
    """Spark Connect for a ``spark_connect`` connection, else ``spark-submit`` (whose hook refuses an
    undefined connection with SparkConnectionMissing)."""
    if connection_type(conn_id) == CONNECT_CONN_TYPE:
        from airflow_ft_provider.execution.connect import ConnectBackend

        return ConnectBackend(stage, conn_id=conn_id, log=log, state=state, try_number=try_number)
    from airflow_ft_provider.execution.submit import SubmitBackend

    return SubmitBackend(stage, conn_id=conn_id, workdir=workdir, store=store, map_index=map_index)
