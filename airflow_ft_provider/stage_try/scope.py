"""What every phase of one stage try reads, built once: the stage and its pipeline, the task instance,
the try, and the door to the run's recovery.

The phases (``stage_try/__init__.py``) take this one frozen value instead of the same six arguments
each; nothing in it is Airflow's, so the phases can be driven without a running Airflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from airflow_ft_provider.checkpoints.config import CheckpointConfig
from airflow_ft_provider.execution.contracts import SparkSubmitter, StageSettings
from airflow_ft_provider.execution.task_state import TaskStateStore
from airflow_ft_provider.failover.indexed_name import IndexedName, indexed
from airflow_ft_provider.model.data_path import DataPath
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.model.exchanges import Output
from airflow_ft_provider.model.reuse_scope import ReuseScope
from airflow_ft_provider.partitions import PartitionRef, Producer, RunRef, S3PartitionStore
from airflow_ft_provider.recovery.run_recovery import RunRecovery
from airflow_ft_provider.task_log import TaskLog


class PipelineSettings(Protocol):
    """What a try reads of its ``FailoverPipeline``."""

    @property
    def data_paths(self) -> Mapping[str, DataPath]: ...
    @property
    def spark_conn_id(self) -> str: ...
    @property
    def pipelined_in_engine(self) -> bool: ...
    @property
    def checkpoint_configs(self) -> Mapping[str, CheckpointConfig]: ...
    @property
    def reuse(self) -> ReuseScope: ...


class AttemptedStage(StageSettings, Protocol):
    """What a try reads of its stage (``SparkStageOperator``) beyond what its backend reads."""

    @property
    def description(self) -> PipelineDescription: ...
    @property
    def store(self) -> S3PartitionStore: ...
    @property
    def pipeline(self) -> PipelineSettings: ...
    @property
    def outputs(self) -> tuple[Output, ...]: ...
    @property
    def reuse(self) -> ReuseScope | None: ...
    @property
    def spark_conn_id(self) -> str | None: ...
    @property
    def log(self) -> TaskLog: ...


@dataclass(frozen=True)
class StageSnapshot:
    """The stage as one try runs it (an ``AttemptedStage``): the operator's settings, read once when
    the try starts. The phases never hold the live operator, so nothing a phase does can change what
    the next phase, or the next try, reads of it."""

    task_id: str
    dag_id: str
    application: str | None
    python_callable: Callable[..., object] | None
    application_args: list[object]
    conf: dict[str, object]
    env_vars: dict[str, str]
    spark_name: str | None
    spark_submit_kwargs: dict[str, object]
    spark_conn_id: str | None
    outputs: tuple[Output, ...]
    reuse: ReuseScope | None
    description: PipelineDescription
    store: S3PartitionStore
    pipeline: PipelineSettings
    log: TaskLog
    spark_hook: Callable[..., SparkSubmitter]  # the operator's: a test (or a subclass) can wrap it


@dataclass(frozen=True)
class TryScope:
    """One try of one task instance of ``stage``."""

    stage: AttemptedStage
    run: RunRef
    map_index: int | None
    try_number: int
    task_state: TaskStateStore | None  # Airflow's task_state_store: records for the task's next try
    recovery: RunRecovery  # every journal read and write of the try goes through it

    @classmethod
    def of(
        cls,
        stage: AttemptedStage,
        run_id: str,
        map_index: int | None,
        try_number: int,
        task_state: TaskStateStore | None = None,
    ) -> TryScope:
        recovery = RunRecovery(stage.description, run_id, stage.store)
        return cls(stage, RunRef(stage.dag_id, run_id), map_index, try_number, task_state, recovery)

    # -- the stage and its pipeline -------------------------------------------------------------------
    @property
    def description(self) -> PipelineDescription:
        return self.stage.description

    @property
    def store(self) -> S3PartitionStore:
        return self.stage.store

    @property
    def log(self) -> TaskLog:
        return self.stage.log

    @property
    def stage_id(self) -> str:
        return self.stage.task_id

    @cached_property
    def task(self) -> str:
        """The failover core's id of the task instance: ``stage`` or ``stage[i]``."""
        return self.description.core_task_id(self.stage.task_id, self.map_index)

    @property
    def checkpoint_config(self) -> CheckpointConfig | None:
        return self.stage.pipeline.checkpoint_configs.get(self.stage.task_id)

    @property
    def data_path(self) -> DataPath:
        return self.stage.pipeline.data_paths.get(self.stage.task_id, DataPath.EXECUTORS)

    @property
    def spark_conn_id(self) -> str:
        return self.stage.spark_conn_id or self.stage.pipeline.spark_conn_id

    @property
    def reuse_scope(self) -> ReuseScope:
        return ReuseScope.of_stage(
            self.stage.reuse, self.stage.pipeline.reuse, checkpointed=self.checkpoint_config is not None
        )

    # -- what the try reads and writes ----------------------------------------------------------------
    def consumed(self) -> dict[str, list[str]]:
        """Result name -> the partition ids this task instance reads."""
        return self.description.consumed_partitions(self.stage.task_id, self.map_index)

    @cached_property
    def input_refs(self) -> tuple[PartitionRef, ...]:
        return tuple(self.run.parse(pid) for pids in self.consumed().values() for pid in pids)

    @cached_property
    def output_refs(self) -> tuple[PartitionRef, ...]:
        parallelism = self.description.graph.stages[self.stage.task_id].parallelism
        return tuple(
            self.run.parse(indexed(o.result, self.map_index, parallelism)) for o in self.stage.outputs
        )

    @cached_property
    def blocking_only(self) -> bool:
        """Blocking outputs (a stage without any runs for its effects: always) read from blocking inputs:
        what reuse and adoption need, a pipelined partition belonging to one execution of its region."""
        graph, outputs = self.description.graph, self.stage.outputs
        return (
            bool(outputs)
            and all(graph.results[ref.result].result_type.is_reconsumable for ref in self.input_refs)
            and all(o.result_type.is_reconsumable for o in outputs)
        )

    def producer(self) -> Producer:
        """This try as the producer of what it commits; ``try_number`` is the commit's fencing token."""
        index = IndexedName.from_airflow(self.stage.task_id, self.map_index).index
        return Producer(self.stage.task_id, index, self.try_number)
