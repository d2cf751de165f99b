"""The commit and release phases: once the application succeeded, each output is committed (a
manifest fenced by the try's number, or a pipelined handle naming the view the Spark Connect server
keeps); then the engine-held inputs this task consumed are released by their last consumer."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from airflow_ft_provider import metrics
from airflow_ft_provider.execution.contracts import StageBackend, WrittenOutput
from airflow_ft_provider.partitions import Producer
from airflow_ft_provider.partitions.pipelined import PipelinedPartitions
from airflow_ft_provider.partitions.pipelined_handle import execution_id
from airflow_ft_provider.partitions.provenance import Provenance
from airflow_ft_provider.partitions.upload import StoredCopy
from airflow_ft_provider.stage_try.entries import Committed, PartitionEntry
from airflow_ft_provider.stage_try.plan import PlannedOutput, TryPlan
from airflow_ft_provider.stage_try.run_mode import RunFinished
from airflow_ft_provider.stage_try.scope import TryScope


def commit_outputs(
    scope: TryScope, plan: TryPlan, written: Mapping[str, WrittenOutput], finished: RunFinished
) -> Committed:
    """Commit each output, all written before the first; a checkpointed try's output files in S3
    already are copied there, and its summary goes with each entry."""
    lost = scope.recovery.found_lost() if scope.try_number > 1 else frozenset()
    producer = scope.producer()
    committed: Committed = {}
    for name, planned in plan.outputs.items():
        rows = written[name].rows
        if planned.engine is not None:
            handle = PipelinedPartitions(scope.store).publish(
                planned.ref, producer, engine=planned.engine, rows=rows
            )
            entry = PartitionEntry(
                planned.output.result_type.value, rows, 0, 0, None, handle.execution, view=planned.engine.view
            )
            scope.log.info(
                "published pipelined partition %s: %d rows kept by %s as view %s",
                planned.partition_id,
                rows,
                planned.engine.server,
                planned.engine.view,
            )
        else:
            entry = _commit_to_store(scope, plan, planned, producer, written[name], finished.stored)
            metrics.committed(
                dag_id=scope.stage.dag_id,
                task_id=scope.task,
                result=planned.output.result,
                size=entry.bytes,
                rebuilt=planned.partition_id in lost,
            )
        committed[planned.partition_id] = (
            entry if finished.summary is None else entry.with_checkpoint(finished.summary)
        )
    return committed


def _commit_to_store(
    scope: TryScope,
    plan: TryPlan,
    planned: PlannedOutput,
    producer: Producer,
    written: WrittenOutput,
    stored: Mapping[Path, StoredCopy],
) -> PartitionEntry:
    manifest = plan.placement.commit(
        planned.ref,
        planned.spec.location,
        planned.attempt,
        pipelined=planned.pipelined,
        producer=producer,
        compression=planned.output.compression,
        rows=written.rows,
        copy_from=stored,
        provenance=Provenance(written.content, None if planned.pipelined else plan.lineage),
    )
    scope.log.info(
        "committed %s partition %s: %d rows, %d files, %d bytes (attempt %s)",
        planned.output.result_type.value,
        planned.partition_id,
        written.rows,
        len(manifest.files),
        manifest.total_size,
        manifest.attempt_id,
    )
    execution = execution_id(producer.try_number) if planned.pipelined else None
    return PartitionEntry.committed(manifest, written.rows, execution=execution)


def release_consumed(scope: TryScope, plan: TryPlan, backend: StageBackend) -> None:
    """Record that this task consumed its engine-held inputs; the last consumer releases them."""
    pipelined = PipelinedPartitions(scope.store)
    for consumed in plan.engine_inputs:
        ref, handle = consumed.ref, consumed.handle
        if pipelined.record_consumer(
            ref, handle, scope.task, scope.description.consumer_tasks(ref.result, ref.map_index)
        ):
            assert handle.engine is not None
            backend.drop(handle.engine.view)
            scope.log.info(
                "released pipelined partition %s (view %s): every consumer has read it",
                ref.partition_id,
                handle.engine.view,
            )
