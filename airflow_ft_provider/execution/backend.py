"""The choice of a stage try's backend, made once when the try starts, from its Spark connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from airflow_ft_provider.spark.spec import OutputSpec, StageSpec

CONNECT_CONN_TYPE = "spark_connect"  # the Spark provider's SparkConnectHook.conn_type


class StageBackend(Protocol):
    """What a stage try needs from the way its Spark work runs (a context manager around the work)."""

    name: str
    keeps_pipelined: bool  # pipelined outputs stay in the engine (views) instead of S3 scratch

    def __enter__(self) -> StageBackend: ...

    def __exit__(self, *exc: object) -> None: ...

    def run(self, spec: StageSpec, *, fail_in_app: bool = False) -> None:
        """Run the application to the end; raise if it failed."""

    def rows_written(self, output: OutputSpec) -> int:
        """Rows the application wrote to ``output``; StageOutputMissing if it wrote nothing there."""

    def kill(self) -> None:
        """Stop the running work (the operator's on_kill)."""


def connection_type(conn_id: str) -> str | None:
    """The type of an Airflow connection, or None when it is not defined."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id).conn_type
    except AirflowNotFoundException:
        return None


def backend_for(
    stage: Any, *, conn_id: str, workdir: Path, store: Any, map_index: int | None, log: Any
) -> StageBackend:
    """Spark Connect for a ``spark_connect`` connection, else ``spark-submit`` (whose hook refuses an
    undefined connection with SparkConnectionMissing)."""
    if connection_type(conn_id) == CONNECT_CONN_TYPE:
        from airflow_ft_provider.execution.connect import ConnectBackend

        return ConnectBackend(stage, conn_id=conn_id, log=log)
    from airflow_ft_provider.execution.submit import SubmitBackend

    return SubmitBackend(stage, conn_id=conn_id, workdir=workdir, store=store, map_index=map_index)
