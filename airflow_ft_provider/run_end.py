"""When a pipeline's DAG run ends: release its pipelined partitions, start its retention clock.

``FailoverPipeline`` appends :class:`RunEnd` to the DAG's ``on_success_callback`` and
``on_failure_callback`` (after the author's own). Airflow runs DAG callbacks in the DAG processor with
the parsed DAG file, so the pipeline is at hand and connections (the store's, each stage's Spark
connection) resolve as they do in a task. Nothing reads a run's pipelined partitions after it ends
(Flink frees them with the job): views are dropped from the Spark Connect server, S3 scratch data is
deleted. A succeeded run is marked, which starts its ``partition_store_retention``.

A run that is marked failed or successful by hand gets no DAG callback from Airflow; its pipelined
data stays until the run is cleared and ends again, or the run is released.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

log = logging.getLogger(__name__)


def ended_at(context: Any) -> float:
    """When the run ended, as the scheduler recorded it (now, if the context does not say)."""
    end_date = getattr(context.get("dag_run"), "end_date", None)
    return end_date.timestamp() if end_date is not None else time.time()


class RunEnd:
    """The DAG callback (success or failure) of a ``FailoverPipeline``."""

    def __init__(self, pipeline: Any, *, succeeded: bool) -> None:
        self.pipeline = pipeline
        self.succeeded = succeeded

    def __call__(self, context: Any) -> None:
        from airflow_ft_provider.hooks.partition_store import pipeline_store
        from airflow_ft_provider.partitions import RunRef
        from airflow_ft_provider.partitions.pipelined import PipelinedPartitions

        description = self.pipeline.description
        run = RunRef(description.dag_id, context["run_id"])
        end = ended_at(context)
        store = pipeline_store(description)
        refs = [run.parse(p) for p in description.pipelined_partitions()]
        released = PipelinedPartitions(store).release_run(run, refs, ended_at=end, drop_views=self.drop_views)
        if self.succeeded:
            store.mark_run_succeeded(run.pipeline, run.run_id, at=end)
        log.info(
            "run %s %s: released %d pipelined views and %d scratch objects%s%s",
            run,
            "succeeded" if self.succeeded else "failed",
            len(released.views),
            released.scratch_objects,
            f"; left {list(released.kept)} to an execution started after the run ended"
            if released.kept
            else "",
            "; retention starts now" if self.succeeded else "",
        )

    def drop_views(self, handles: list[Any]) -> None:
        """Drop views through each producer's Spark connection (a view lives in its producer's server)."""
        from airflow_ft_provider.execution.connect import drop_views

        by_connection: dict[str, list[Any]] = defaultdict(list)
        for handle in handles:
            by_connection[self.pipeline.stage_connections[handle.producer.task_id]].append(handle.engine)
        for conn_id, views in sorted(by_connection.items()):
            try:
                dropped = drop_views(conn_id, views, log)
            except Exception as err:  # noqa: BLE001 - one server must not keep the others' views
                log.warning("could not release pipelined views on connection %s: %s", conn_id, err)
            else:
                log.info("dropped pipelined views %s on connection %s", dropped, conn_id)
