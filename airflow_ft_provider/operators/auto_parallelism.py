"""Parallelism decided by the data: a planner task that sizes a stage's shards from its committed inputs.

    @ft_stage(inputs=["raw"], outputs=["scored"])
    def score(spark, io, shard, shards): ...

    score.expand_kwargs(auto_parallelism({AVG_VOLUME: "256 MB", MAX_PARALLELISM: 64}))

    SparkStageOperator.partial(task_id="score", application="jobs/score.py", inputs=["raw"], ...).expand(
        application_args=auto_parallelism().map(shard_arguments)          # argv: <shard> <shards>
    )

``auto_parallelism`` adds a planner task; the ``FailoverPipeline`` binds it to the stage that expands
over its output and runs it after the producers of that stage's (blocking) inputs
(``planner_binding.py``). The planner reads
their manifests (kilobytes: no data), applies Flink's rule (``model/auto_parallelism.py``), records the
count with the run with its reason, and returns one ``{"shard": i, "shards": n}`` per shard: Airflow
maps the stage over them, as over any other task's output (``model/map_counts.py``). A planner run
again in the same run (cleared by hand) returns the count the run recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, XComArg

from airflow_ft_provider.model.auto_parallelism import AutoParallelism
from airflow_ft_provider.model.description import PipelineWiringError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_ft_provider.model.description import PipelineDescription
    from airflow_ft_provider.partitions import RunRef, S3PartitionStore

Shard = dict[str, int]


class AutoParallelismOperator(BaseOperator):
    """Decides how many shards its stage runs with, from the committed size of the stage's inputs."""

    is_shard_planner = True
    ui_color = "#e8f1fb"

    def __init__(self, *, config: Mapping[str, object] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = dict(config or {})
        try:  # checked when the DAG is parsed: the key, the value and the fix
            self.settings = AutoParallelism.parse(self.config, where=f"auto_parallelism of {self.task_id!r}")
        except ValueError as err:
            raise PipelineWiringError(str(err)) from None
        self.stage: str | None = None  # the stage that expands over this task's output (the pipeline's)

    def execute(self, context: Context) -> list[Shard]:
        from airflow_ft_provider.hooks.partition_store import pipeline_store
        from airflow_ft_provider.model.map_counts import RunTimeCount
        from airflow_ft_provider.model.parsed import parsed_description
        from airflow_ft_provider.recovery.run_recovery import RunRecovery

        parsed = parsed_description(context["dag"])
        if self.stage is None:
            raise PipelineWiringError(f"{self.task_id!r}: no stage of the pipeline expands over its output")
        store = pipeline_store(parsed)
        run = RunRecovery.for_worker(context, parsed=parsed, store=store, settle=True)
        count = run.pipeline.map_counts.get(self.stage)
        if count is not None:  # decided before in this run: a count that changed would orphan shards
            self.log.info("stage %s: %d shards, as this run decided before", self.stage, count)
        else:
            size = committed_input_bytes(store, run.pipeline, run.run, self.stage)
            plan = self.settings.decide(size)
            count = plan.count
            self.log.info("stage %s: %s", self.stage, plan.reason)
            run.record_count(RunTimeCount(self.stage, count, None, reason=f"auto parallelism: {plan.reason}"))
        return [{"shard": i, "shards": count} for i in range(count)]


def auto_parallelism(config: Mapping[str, object] | None = None, *, task_id: str | None = None) -> XComArg:
    """The shards of the stage that expands over this (Flink's ``execution.batch.adaptive.auto-
    parallelism.*`` keys in ``config``; Flink's defaults otherwise). ``task_id``: the planner's
    (default ``auto_parallelism``, numbered ``__1``, ``__2`` in the DAG's order as ``@task`` does)."""
    from airflow_ft_provider._compat import unique_task_id

    planner = AutoParallelismOperator(task_id=unique_task_id(task_id or "auto_parallelism"), config=config)
    return XComArg(planner)


def shard_arguments(shard: Shard) -> list[str]:
    """A shard as a Spark application's arguments: ``<shard> <shards>``."""
    return [str(shard["shard"]), str(shard["shards"])]


def committed_input_bytes(
    store: S3PartitionStore, description: PipelineDescription, run: RunRef, stage: str
) -> int:
    """The committed size of every partition of ``stage``'s inputs, from their manifests, read side by
    side (the store's ``max_workers`` at a time: a mapped producer has a manifest per index)."""
    from concurrent.futures import ThreadPoolExecutor

    refs = [
        run.parse(partition_id)
        for consumed in description.stages[stage].inputs
        for partition_id in description.graph.partition_ids(consumed.result)
    ]
    with ThreadPoolExecutor(max_workers=store.max_workers, thread_name_prefix="ft-size") as pool:
        return sum(manifest.total_size for manifest in pool.map(store.manifest, refs))
