"""When a pipeline's DAG run ends: release its pipelined partitions, start its retention clock, sweep.

``FailoverPipeline`` appends :class:`RunEnd` to the DAG's ``on_success_callback`` and
``on_failure_callback`` (after the author's own). Airflow runs DAG callbacks in the DAG processor with
the parsed DAG file, so the pipeline is at hand and connections (the store's, each stage's Spark
connection, the REST API's) resolve as they do in a task. Nothing reads a run's pipelined partitions
after it ends (Flink frees them with the job): views are dropped from the Spark Connect server, S3
scratch data is deleted. The run is marked ended, succeeded or failed, which starts its retention. Its
manifests are copied into one index object (``partitions/manifest_index.py``), so that a read of the
whole run takes one GET, not one per partition. Then the pipeline's expired runs are swept, bounded
and rate-limited (``partitions/sweep.py``), with Airflow's view of the runs (``hooks/run_states.py``)
so that runs marked by hand, which get no callback, go too.

A run marked failed or successful by hand keeps its pipelined data until the run is cleared and ends
again, or is released; its blocking partitions go one retention after Airflow says it ended.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from airflow_ft_provider import metrics
from airflow_ft_provider.failover.durations import format_duration

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_ft_provider.model.description import PipelineDescription
    from airflow_ft_provider.partitions import RunRef, S3PartitionStore
    from airflow_ft_provider.partitions.sweep import RunStates

log = logging.getLogger(__name__)


def ended_at(context: Context) -> float:
    """When the run ended, as the scheduler recorded it (now, if the context does not say)."""
    end_date = getattr(context.get("dag_run"), "end_date", None)
    return end_date.timestamp() if end_date is not None else time.time()


class RunEnd:
    """The DAG callback (success or failure) of a ``FailoverPipeline``."""

    def __init__(self, pipeline: Any, *, succeeded: bool) -> None:
        self.pipeline = pipeline
        self.succeeded = succeeded

    def __call__(self, context: Context) -> None:
        from airflow_ft_provider.hooks.partition_store import pipeline_store, sweep_limits
        from airflow_ft_provider.partitions import RunRef
        from airflow_ft_provider.partitions.pipelined import PipelinedPartitions

        description = self.pipeline.description
        run = RunRef(description.dag_id, context["run_id"])
        end = ended_at(context)
        store = pipeline_store(description, retention=self.pipeline.retention)
        if description.run_time_stages:  # the counts this run recorded (model/map_counts.py)
            description = self._run_description(store, run, description)
        refs = [run.parse(p) for p in description.pipelined_partitions()]
        released = PipelinedPartitions(store).release_run(run, refs, ended_at=end, drop_views=self.drop_views)
        store.mark_run_ended(run.pipeline, run.run_id, succeeded=self.succeeded, at=end)
        log.info(
            "run %s %s: released %d pipelined views and %d scratch objects%s; its retention (%s) starts now",
            run,
            "succeeded" if self.succeeded else "failed",
            len(released.views),
            released.scratch_objects,
            f"; left {list(released.kept)} to an execution started after the run ended"
            if released.kept
            else "",
            format_duration(store.retention),
        )
        try:  # what `airflow-ft partitions` and the failover page read instead of every manifest
            indexed = store.write_manifest_index(run)
        except Exception as err:  # noqa: BLE001 - only a copy: readers then read the manifests
            log.warning("run %s: could not write its manifest index: %s", run, err)
        else:
            log.info(
                "run %s: its manifest index holds %d manifests (%d kept from its previous end)%s",
                run,
                indexed.indexed,
                indexed.kept,
                f"; {indexed.left_out} not read in time are left out" if indexed.left_out else "",
            )
        try:
            report = store.sweep_expired_runs(
                run.pipeline, states=lambda: self.run_states(store.retention), limits=sweep_limits()
            )
            if report is not None:
                metrics.swept(len(report.released), dag_id=run.pipeline)
        except Exception as err:  # noqa: BLE001 - the run has ended; the next run end sweeps again
            log.warning("could not sweep the expired runs of pipeline %s: %s", run.pipeline, err)

    @staticmethod
    def _run_description(
        store: S3PartitionStore, run: RunRef, parsed: PipelineDescription
    ) -> PipelineDescription:
        from airflow_ft_provider.recovery.journal import RecoveryJournal

        try:
            stored = RecoveryJournal(store, run).description()
        except ValueError as err:  # damaged: release what the parsed pipeline names
            log.warning("run %s: its stored pipeline cannot be read (%s)", run, err)
            return parsed
        return parsed if stored is None else parsed.with_map_counts_of(stored)

    def run_states(self, retention: float) -> RunStates | None:
        """Airflow's view of the pipeline's runs (hand-marked ends, runs cleared again), or None when the
        REST API cannot tell: the sweep then goes by the runs' end markers alone."""
        from airflow_ft_provider.hooks.airflow_api import AirflowApiHook
        from airflow_ft_provider.hooks.run_states import run_states

        description = self.pipeline.description
        try:
            with AirflowApiHook(description.airflow_api_conn_id) as hook:
                return run_states(hook, description.dag_id, ended_before=time.time() - retention)
        except Exception as err:  # noqa: BLE001 - markers alone still bound the bucket
            log.warning(
                "sweeping by end markers only: the Airflow REST API (connection %r) could not list the "
                "runs of %s (%s); runs marked by hand wait for `airflow-ft gc` or a later sweep",
                description.airflow_api_conn_id,
                description.dag_id,
                err,
            )
            return None

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
