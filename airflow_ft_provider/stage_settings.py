"""What a stage task declares, read when the DAG is parsed: the partitions it exchanges, whether (and
how) it is checkpointed, and how its failures are classified. ``FailoverPipeline`` builds the pipeline
from these."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from typing import Protocol, TypeGuard

from airflow_ft_provider._compat import (
    Task,
    given_arguments,
    is_mapped,
    map_length_at_parse,
    mapped_operator_class,
)
from airflow_ft_provider.checkpoints.config import (
    KNOWN_KEYS,
    CheckpointConfig,
    CheckpointConfigError,
    load_checkpoint_config,
    refuse_staged_path_keys,
    stage_checkpointing,
)
from airflow_ft_provider.model.data_path import DataPath
from airflow_ft_provider.model.description import PipelineWiringError, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output, normalize_inputs, normalize_outputs
from airflow_ft_provider.recovery.failure_facts import StageClassification, failure_classifier, failure_rules
from airflow_ft_provider.recovery.layered_restarts import CLUSTER_SOURCE, cluster_keys


class StageTask(Protocol):
    """What a (not mapped) pipeline stage task declares: the ``SparkStageOperator`` attributes read here."""

    task_id: str
    is_pipeline_stage: bool
    inputs: Iterable[Input]
    outputs: Iterable[Output]


def is_stage_task(task: object) -> TypeGuard[StageTask]:
    return bool(getattr(task, "is_pipeline_stage", False))


def stage_arguments(task: Task) -> Mapping[str, object]:
    """What a stage was given: a mapped one's ``partial`` arguments, a plain one's attributes."""
    return given_arguments(task) if is_mapped(task) else vars(task)


def stage_declaration(task: Task) -> StageDeclaration | None:
    """The partitions a stage task declares, or None for tasks that are not pipeline stages."""
    if is_mapped(task):
        if not getattr(mapped_operator_class(task), "is_pipeline_stage", False):
            return None
        kwargs = given_arguments(task)
        try:
            parallelism, at_run_time = map_length_at_parse(task), False
        except TypeError:  # over another task's output: counted when it runs (model/map_counts.py)
            parallelism, at_run_time = 1, True
        if (kwargs.get("application") is None) == (kwargs.get("python_callable") is None):
            raise PipelineWiringError(
                f"stage {task.task_id!r}: give .partial() either application= (a PySpark file) or "
                "python_callable= (a function of the Spark Connect session and the stage's I/O), not "
                f"{'both' if kwargs.get('application') is not None else 'neither'}"
            )
        return StageDeclaration(
            task.task_id,
            parallelism,
            normalize_inputs(kwargs.get("inputs")),
            normalize_outputs(kwargs.get("outputs")),
            mapped=True,
            expands_at_run_time=at_run_time,
        )
    if not is_stage_task(task):
        return None
    return StageDeclaration(task.task_id, 1, tuple(task.inputs), tuple(task.outputs))


def checkpoint_configs(
    stages: Iterable[str],
    tasks_by_id: Mapping[str, Task],
    *,
    pipeline_default: bool | Mapping[str, object] | None,
) -> dict[str, CheckpointConfig]:
    """Each checkpointed stage's settings: its own over the pipeline's over ``[ft_provider]``'s,
    validated now (the key, the value and the fix). airflow.cfg is read only when a stage is
    checkpointed (a parse of any other pipeline costs nothing more), and a bad cluster value is
    named as set there."""

    @functools.cache
    def cluster() -> Mapping[str, object]:
        keys = cluster_keys(KNOWN_KEYS)
        load_checkpoint_config(keys, source=CLUSTER_SOURCE)
        return keys

    configs = {}
    for stage in stages:
        task = tasks_by_id[stage]
        own = stage_arguments(task)
        try:
            config = stage_checkpointing(
                stage, own.get("checkpointing"), pipeline=pipeline_default, cluster=cluster
            )
        except CheckpointConfigError as err:
            raise PipelineWiringError(str(err)) from None
        if config is None:
            continue
        configs[stage] = config
    return configs


def cluster_data_path() -> DataPath:
    """``[ft_provider] data_path``: where the data of pipelines that name no ``data_path`` flows on this
    deployment (``"executors"`` where Spark runs on other machines than the Airflow workers)."""
    from airflow.sdk import conf

    value = conf.get("ft_provider", "data_path", fallback=None) or DataPath.EXECUTORS.value
    return DataPath.parse(value.strip(), where="[ft_provider] data_path")


def pipeline_data_path(declared: DataPath | str | None) -> DataPath:
    """A pipeline's ``data_path=``, else the deployment's (ValueError naming where it was wrong)."""
    if declared is None:
        return cluster_data_path()
    return DataPath.parse(declared, where="FailoverPipeline")


def data_paths(
    stages: Iterable[str],
    tasks_by_id: Mapping[str, Task],
    *,
    pipeline: DataPath,
    checkpointed: Collection[str],
    pipeline_checkpointing: object,
) -> dict[str, DataPath]:
    """Each stage's data path (``model/data_path.py``): its own over the pipeline's, checked now with
    the checkpoint keys the stage and the pipeline give (``pipeline_checkpointing``)."""
    paths = {}
    for stage in stages:
        task = tasks_by_id[stage]
        own = stage_arguments(task).get("data_path")
        try:
            declared = None if own is None else DataPath.parse(own, where=f"stage {stage!r}")
        except ValueError as err:
            raise PipelineWiringError(str(err)) from None
        path = DataPath.of_stage(declared, pipeline)
        if stage in checkpointed and path is DataPath.S3A:
            raise PipelineWiringError(
                f"stage {stage!r} is checkpointed and its data_path is 's3a': a checkpointed stage's "
                "micro-batches are read and written by the executors' own path; give it "
                "data_path='executors' (or 'staged', through the worker's disk)"
            )
        if stage in checkpointed and path is DataPath.EXECUTORS:
            layers = {
                f"checkpointing of stage {stage!r}": stage_arguments(task).get("checkpointing"),
                "FailoverPipeline(checkpointing=...)": pipeline_checkpointing,
            }
            try:
                refuse_staged_path_keys(stage, layers)
            except CheckpointConfigError as err:
                raise PipelineWiringError(str(err)) from None
        paths[stage] = path
    return paths


def stage_classifications(
    stages: Iterable[str],
    tasks_by_id: Mapping[str, Task],
    *,
    pipeline_rules: object,
    pipeline_classifier: object,
) -> dict[str, StageClassification]:
    """Each stage's failure classification: the defaults, extended by the pipeline's ``failure_rules``
    and ``failure_classifier``, then by the stage's own; checked now (the key, the value and the fix)."""
    try:
        base = StageClassification().extended(
            failure_rules(pipeline_rules, "FailoverPipeline"),
            failure_classifier(pipeline_classifier, "FailoverPipeline"),
        )
        classifications = {}
        for stage in stages:
            task = tasks_by_id[stage]
            own = stage_arguments(task)
            where = f"stage {stage!r}"
            classifications[stage] = base.extended(
                failure_rules(own.get("failure_rules"), where),
                failure_classifier(own.get("failure_classifier"), where),
            )
    except ValueError as err:
        raise PipelineWiringError(str(err)) from None
    return classifications
