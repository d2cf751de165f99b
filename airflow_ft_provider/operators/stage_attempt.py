"""One try of a pipeline stage: resolve inputs, run the Spark application, commit its outputs.

Kept apart from ``SparkStageOperator``'s declaration so that parsing a DAG file imports none of it:
the DAG processor imports the operator module again for every parse (bench/bench_parse_cost.py).
How the work runs and where data goes are objects chosen once per try (``airflow_ft_provider.execution``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from airflow_ft_provider import metrics
from airflow_ft_provider.checkpoints.config import CheckpointConfig
from airflow_ft_provider.execution.backend import backend_for, connect_url
from airflow_ft_provider.execution.contracts import (
    DataPlacement,
    StageBackend,
    StageSettings,
    TaskLog,
    WrittenOutput,
)
from airflow_ft_provider.execution.engine_views import check_engine_view
from airflow_ft_provider.execution.placement import placement_for
from airflow_ft_provider.execution.submit import StageOutputMissing
from airflow_ft_provider.execution.workdir import TryWorkdir
from airflow_ft_provider.failover.graph import subtask_id
from airflow_ft_provider.failover.indexed_name import indexed
from airflow_ft_provider.faults import faults_for
from airflow_ft_provider.hooks.partition_store import executor_access
from airflow_ft_provider.model.data_path import DataPath
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.model.exchanges import Output
from airflow_ft_provider.model.reuse_scope import ReuseScope
from airflow_ft_provider.operators.adoption import FinishedWorkAdoption, wait_for_running_work
from airflow_ft_provider.operators.checkpointed import CheckpointedTry
from airflow_ft_provider.operators.output_reuse import OutputReuse, committed_entry
from airflow_ft_provider.partitions import PartitionNotFound, PartitionRef, RunRef, S3PartitionStore
from airflow_ft_provider.partitions.pipelined import (
    EngineLocation,
    PipelinedHandle,
    PipelinedPartitions,
    execution_id,
)
from airflow_ft_provider.partitions.provenance import Provenance
from airflow_ft_provider.partitions.upload import StoredCopy
from airflow_ft_provider.recovery.journal import RecoveryJournal
from airflow_ft_provider.recovery.pending import RunState
from airflow_ft_provider.spark.spec import VIEW_PREFIX, InputPartition, InputSpec, OutputSpec, StageSpec

PARTITIONS_XCOM_KEY = "ft_partitions"

__all__ = ["PARTITIONS_XCOM_KEY", "StageAttempt", "StageOutputMissing"]


@dataclass(frozen=True)
class _PlannedOutput:
    output: Output
    partition_id: str
    ref: PartitionRef
    spec: OutputSpec
    attempt: str | None  # S3 placements: the attempt prefix Spark writes into
    engine: EngineLocation | None  # a pipelined output the Spark Connect server keeps

    @property
    def pipelined(self) -> bool:
        return not self.output.result_type.is_reconsumable


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


class StageAttempt:
    """The work of one try of ``stage`` (a SparkStageOperator) for one task instance."""

    def __init__(self, stage: AttemptedStage, context: Any, map_index: int | None) -> None:
        self.stage = stage
        self.ti = context["ti"]
        self.context = context
        self.map_index = map_index
        self.run_ref = RunRef(stage.dag_id, context["run_id"])
        self.description = stage.description
        self.store = stage.store
        self.pipelined = PipelinedPartitions(self.store)
        self.log = stage.log
        self.task = self.description.core_task_id(stage.task_id, map_index)
        self.backend: StageBackend | None = None
        self.reuse = OutputReuse(
            stage,
            stage.outputs,
            description=self.description,
            store=self.store,
            run=self.run_ref,
            map_index=map_index,
            try_number=self.ti.try_number,
            scope=ReuseScope.of_stage(
                stage.reuse,
                stage.pipeline.reuse,
                checkpointed=stage.task_id in stage.pipeline.checkpoint_configs,
            ),
            log=self.log,
        )
        self.adoption = FinishedWorkAdoption(
            self.reuse,
            stage.outputs,
            checkpointed=stage.task_id in stage.pipeline.checkpoint_configs,
            state=context.get("task_state_store"),
            log=self.log,
            connect_url=partial(connect_url, stage.spark_conn_id or stage.pipeline.spark_conn_id)
            if wait_for_running_work()
            else lambda: None,
        )

    def run(self) -> dict[str, Any]:
        """Only after the application succeeds are its outputs committed; a failure commits nothing."""
        stage = self.stage
        faults = faults_for(
            self.context,
            self.task,
            graph=self.description.graph,
            store=self.store,
            run=self.run_ref,
            log=self.log,
        )
        faults.before_work()
        # An earlier try's output instead of Spark work: committed and unchanged, or finished and killed
        earlier = self.reuse.try_reuse() or self.adoption.try_adopt()
        if earlier:
            self.ti.xcom_push(key=PARTITIONS_XCOM_KEY, value=earlier)
            return earlier
        checkpointed = self._checkpointed()
        with checkpointed.workdir() if checkpointed else TryWorkdir(log=self.log) as workdir:
            placement = placement_for(
                stage.pipeline.data_paths.get(stage.task_id, DataPath.STAGED),
                self.store,
                workdir,
                processed=checkpointed.processed if checkpointed else (),
                executor_access=lambda: executor_access(self.store, self.description.aws_conn_id),
            )
            self.backend = backend_for(
                stage,
                conn_id=stage.spark_conn_id or stage.pipeline.spark_conn_id,
                workdir=workdir,
                store=self.store,
                map_index=self.map_index,
                log=self.log,
                state=self.context.get("task_state_store"),
                try_number=self.ti.try_number,
            )
            with self.backend as backend:
                inputs, engine_inputs = self._resolve_inputs(placement, backend)
                outputs = self._plan_outputs(placement, backend)
                spec = StageSpec(
                    pipeline=stage.dag_id,
                    run_id=self.run_ref.run_id,
                    stage=stage.task_id,
                    map_index=self.map_index,
                    try_number=self.ti.try_number,
                    inputs=inputs,
                    outputs={name: o.spec for name, o in outputs.items()},
                    checkpoint=checkpointed.spec(fail_in_batch=faults.fail_in_batch)
                    if checkpointed
                    else None,
                    store=placement.access,
                )
                self.log.info(
                    "stage %s (%s, %s): reading %s, writing %s",
                    self.task,
                    backend.name,
                    placement.name,
                    {n: [p.partition_id for p in i.partitions] for n, i in inputs.items()} or "nothing",
                    sorted(outputs) or "nothing",
                )
                lineage = self.reuse.lineage(placement.read)
                locations = {name: (p.spec.location, p.attempt) for name, p in outputs.items()}
                self.adoption.record_started(backend.try_session, locations, placement.read, lineage, workdir)
                try:
                    backend.run(spec, fail_in_app=faults.fails_in_app, credentials=placement.credentials)
                except BaseException:  # none of its output is ever committed: its objects go now
                    placement.discard(outputs.values(), self.ti.try_number)
                    raise
                written = {name: backend.written(planned.spec) for name, planned in outputs.items()}
                self.adoption.record(locations, written, placement.read, lineage, workdir)
                faults.after_work()
                stored = checkpointed.finish() if checkpointed else {}
                committed = self._commit_outputs(outputs, placement, written, lineage, stored)
                self.adoption.forget()
                if checkpointed:
                    for entry in committed.values():
                        entry["checkpoint"] = checkpointed.summary()
                self._release_consumed(engine_inputs, backend)
        self.ti.xcom_push(key=PARTITIONS_XCOM_KEY, value=committed)
        return committed

    def _checkpointed(self) -> CheckpointedTry | None:
        config = self.stage.pipeline.checkpoint_configs.get(self.stage.task_id)
        if config is None:
            return None
        return CheckpointedTry(
            config,
            description=self.description,
            store=self.store,
            run=self.run_ref,
            stage=self.stage.task_id,
            map_index=self.map_index,
            try_number=self.ti.try_number,
            log=self.log,
            kill=self.kill,
        )

    def kill(self) -> None:
        if self.backend is not None:
            self.backend.kill()

    # -- inputs -------------------------------------------------------------------------------------
    def _resolve_inputs(
        self,
        placement: DataPlacement,
        backend: StageBackend,
    ) -> tuple[dict[str, InputSpec], list[tuple[PartitionRef, PipelinedHandle]]]:
        """Resolve and verify every input partition before any Spark work: PartitionNotFound names it.
        A pipelined input is read from the execution its handle names, if that execution is current;
        returns the specs and the pipelined partitions read from the engine (released once consumed)."""
        inputs: dict[str, InputSpec] = {}
        engine_inputs: list[tuple[PartitionRef, PipelinedHandle]] = []
        graph = self.description.graph
        journal_state: RunState | None = None
        for result, partition_ids in self.description.consumed_partitions(
            self.stage.task_id, self.map_index
        ).items():
            producer = graph.stages[graph.results[result].producer]
            pipelined = not graph.results[result].result_type.is_reconsumable
            if pipelined and journal_state is None:
                journal_state = RecoveryJournal(self.store, self.run_ref).load()
            partitions = []
            for number, partition_id in enumerate(partition_ids):
                ref = self.run_ref.parse(partition_id)
                handle = None
                if pipelined and journal_state is not None:
                    producer_task = subtask_id(producer.name, max(ref.map_index, 0), producer.parallelism)
                    handle = self.pipelined.resolve(
                        ref, ended_through=journal_state.ended_through(producer_task)
                    )
                if handle is not None and handle.engine is not None:
                    check_engine_view(ref, handle, backend, consumer=str(self.task))
                    engine_inputs.append((ref, handle))
                    partitions.append(InputPartition(partition_id, [], view=handle.engine.view))
                else:
                    partitions.append(placement.input_partition(ref, result, number, handle))
            inputs[result] = InputSpec(result, "pipelined" if pipelined else "blocking", partitions)
        return inputs, engine_inputs

    # -- outputs ------------------------------------------------------------------------------------
    def _plan_outputs(self, placement: DataPlacement, backend: StageBackend) -> dict[str, _PlannedOutput]:
        """Where the application writes each output: a view in the server, local staging, or S3."""
        parallelism = self.description.graph.stages[self.stage.task_id].parallelism
        try_number = self.ti.try_number
        planned = {}
        for output in self.stage.outputs:
            partition_id = indexed(output.result, self.map_index, parallelism)
            ref = self.run_ref.parse(partition_id)
            pipelined = not output.result_type.is_reconsumable
            attempt, engine = None, None
            # A checkpointed stage writes every output per micro-batch to files, never to an engine's view.
            checkpointed = self.stage.task_id in self.stage.pipeline.checkpoint_configs
            if pipelined and backend.server and self.stage.pipeline.pipelined_in_engine and not checkpointed:
                engine = EngineLocation(backend.server, backend.view_name(str(ref), execution_id(try_number)))
                self._release_superseded(ref, backend)
                location = VIEW_PREFIX + engine.view
            else:
                location, attempt = placement.output_location(
                    ref, output.result, pipelined=pipelined, try_number=try_number
                )
            spec = OutputSpec(
                output.result, output.result_type.value, location, compression=output.compression
            )
            planned[output.result] = _PlannedOutput(output, partition_id, ref, spec, attempt, engine)
        return planned

    def _release_superseded(self, ref: PartitionRef, backend: StageBackend) -> None:
        """A new execution of the region starts: the view of the one it replaces is never read again."""
        try:
            previous = self.pipelined.current(ref)
        except PartitionNotFound:
            return  # an invalid handle: the publish replaces it
        if previous is not None and previous.engine is not None and previous.engine.server == backend.server:
            backend.drop(previous.engine.view)

    def _commit_outputs(
        self,
        outputs: dict[str, _PlannedOutput],
        placement: DataPlacement,
        written: Mapping[str, WrittenOutput],
        lineage: str | None,
        stored: Mapping[Path, StoredCopy],
    ) -> dict[str, Any]:
        """Commit each output, all written before the first; ``stored``: files a checkpoint has in S3."""
        rows = {name: w.rows for name, w in written.items()}
        lost = RecoveryJournal(self.store, self.run_ref).found_lost() if self.ti.try_number > 1 else set()
        committed: dict[str, Any] = {}
        producer = self.reuse.producer()
        for name, planned in outputs.items():
            entry: dict[str, Any] = {"type": planned.output.result_type.value, "rows": rows[name]}
            if planned.engine is not None:
                handle = self.pipelined.publish(planned.ref, producer, engine=planned.engine, rows=rows[name])
                entry.update(
                    files=0, bytes=0, attempt=None, execution=handle.execution, view=planned.engine.view
                )
                self.log.info(
                    "published pipelined partition %s: %d rows kept by %s as view %s",
                    planned.partition_id,
                    rows[name],
                    planned.engine.server,
                    planned.engine.view,
                )
            else:
                manifest = placement.commit(
                    planned.ref,
                    planned.spec.location,
                    planned.attempt,
                    pipelined=planned.pipelined,
                    producer=producer,
                    compression=planned.output.compression,
                    rows=rows[name],
                    copy_from=stored,
                    provenance=Provenance(written[name].content, None if planned.pipelined else lineage),
                )
                execution = execution_id(producer.try_number) if planned.pipelined else None
                entry = committed_entry(manifest, rows[name], execution=execution)
                self.log.info(
                    "committed %s partition %s: %d rows, %d files, %d bytes (attempt %s)",
                    planned.output.result_type.value,
                    planned.partition_id,
                    rows[name],
                    len(manifest.files),
                    manifest.total_size,
                    manifest.attempt_id,
                )
                metrics.committed(
                    dag_id=self.stage.dag_id,
                    task_id=self.task,
                    result=planned.output.result,
                    size=manifest.total_size,
                    rebuilt=planned.partition_id in lost,
                )
            committed[planned.partition_id] = entry
        return committed

    def _release_consumed(
        self, engine_inputs: list[tuple[PartitionRef, PipelinedHandle]], backend: StageBackend
    ) -> None:
        """Record that this task consumed its engine-held inputs; the last consumer releases them."""
        for ref, handle in engine_inputs:
            if self.pipelined.record_consumer(
                ref, handle, self.task, self.description.consumer_tasks(ref.result, ref.map_index)
            ):
                assert handle.engine is not None
                backend.drop(handle.engine.view)
                self.log.info(
                    "released pipelined partition %s (view %s): every consumer has read it",
                    ref.partition_id,
                    handle.engine.view,
                )
