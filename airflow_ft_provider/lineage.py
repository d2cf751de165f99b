"""A stage try as OpenLineage sees it, for Airflow's ``openlineage`` provider (which calls the operator's
``get_openlineage_facets_on_complete`` and ``..._on_failure`` when it is installed and configured).

Datasets are the partitions: namespace ``s3://<bucket>``, name the partition's key prefix (a pipelined
partition: its handle's key), with the committed attempt, the producing try and the manifest's row
count. Every event carries the ``ftTry`` run facet: why this try runs (``recovery/try_cause.py``), how
it came by its outputs (computed, reused, adopted, resumed from a checkpoint) and the OpenLineage run id
of the try it replaces, so that a lineage tool follows a region restart instead of seeing two unrelated
runs of one task. Nothing here runs unless the provider asks: a pipeline without lineage pays nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from airflow_ft_provider.failover.indexed_name import IndexedName, indexed
from airflow_ft_provider.partitions import Manifest
from airflow_ft_provider.partitions.naming import StoreLayout
from airflow_ft_provider.recovery.try_cause import TryCause, try_cause
from airflow_ft_provider.stage_try.entries import Committed, PartitionEntry

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_ft_provider.lineage_facets import FtPartitionDatasetFacet, FtTryRunFacet
    from airflow_ft_provider.stage_try.attempt import StageTry
    from airflow_ft_provider.stage_try.scope import TryScope

RUN_FACET = "ftTry"
DATASET_FACET = "ftPartition"


class Outcome(enum.Enum):
    COMPUTED = "computed"
    REUSED = "reused"  # an earlier try's (or run's) committed output, published again
    ADOPTED = "adopted"  # a killed earlier try's finished output, committed
    RESUMED = "resumed_checkpoint"  # computed from the last checkpoint of an earlier try
    FAILED = "failed"  # nothing committed


@dataclass(frozen=True)
class PartitionLineage:
    partition_id: str
    kind: str  # "blocking" or "pipelined"
    key: str  # the dataset's name: where the partition lives in the bucket
    attempt: str | None  # the committed attempt (None: a pipelined partition, or not committed)
    producer_try: int | None
    rows: int | None
    size: int | None
    files: int | None


@dataclass(frozen=True)
class TryLineage:
    bucket: str
    try_number: int
    cause: TryCause
    outcome: Outcome
    inputs: tuple[PartitionLineage, ...]
    outputs: tuple[PartitionLineage, ...]
    replaces_run_id: str | None  # the OpenLineage run of the previous try of this task instance
    from_try: int | None = None  # the try whose output was reused or adopted
    from_run: str | None = None  # the run whose output was reused (across runs)
    restored_checkpoint: int | None = None


def try_lineage(
    scope: TryScope,
    *,
    cause: TryCause,
    read: Mapping[str, Manifest],
    committed: Committed | None,
    replaces_run_id: str | None,
) -> TryLineage:
    """The lineage of a try of ``scope``'s task: ``read`` are the manifests of the blocking inputs it
    read (others are looked up), ``committed`` what it committed (None: it failed)."""
    layout = scope.store.layout
    results = scope.description.graph.results
    inputs = []
    for result, partition_ids in scope.consumed().items():
        blocking = results[result].result_type.is_reconsumable
        for partition_id in partition_ids:
            ref = scope.run.parse(partition_id)
            if not blocking:
                inputs.append(_pipelined(partition_id, layout.pipelined_handle_key(ref)))
                continue
            manifest = read.get(partition_id) or _committed_manifest(scope, partition_id)
            inputs.append(_blocking(partition_id, layout.partition_prefix(ref), manifest))
    outputs = [] if committed is None else [_output(scope, layout, pid, e) for pid, e in committed.items()]
    entries = list((committed or {}).values())
    outcome, from_try, from_run, restored = _outcome(entries, failed=committed is None)
    return TryLineage(
        bucket=layout.bucket,
        try_number=scope.try_number,
        cause=cause,
        outcome=outcome,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        replaces_run_id=replaces_run_id,
        from_try=from_try,
        from_run=from_run,
        restored_checkpoint=restored,
    )


def lineage_of_try(attempt: StageTry, task_instance: object, *, started_at: float) -> OperatorLineage:
    """What the provider asks a finished (or failed) try for: its lineage, with why it ran read from the
    run's history and the run id of the try it replaces computed as the provider computes its own."""
    from airflow_ft_provider.recovery.journal import RecoveryJournal

    scope = attempt.scope
    graph = scope.description.graph

    def producer_of(partition_id: str) -> str | None:
        try:
            name = IndexedName.parse(partition_id)
            producer = graph.results[name.name].producer
        except (KeyError, ValueError):
            return None
        return indexed(producer, name.index, graph.stages[producer].parallelism)

    events = RecoveryJournal(scope.store, scope.run).events() if scope.try_number > 1 else []
    cause = try_cause(events, scope.task, scope.try_number, started_at=started_at, producer_of=producer_of)
    lineage = try_lineage(
        scope,
        cause=cause,
        read=attempt.read,
        committed=attempt.committed,
        replaces_run_id=_previous_run_id(task_instance) if scope.try_number > 1 else None,
    )
    return operator_lineage(lineage)


def _previous_run_id(task_instance: Any) -> str | None:
    """The OpenLineage run id the provider gave the previous try of this task instance."""
    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

    try:
        dag_run = task_instance.get_template_context()["dag_run"]
        date = getattr(dag_run, "logical_date", None) or dag_run.run_after
        return str(
            OpenLineageAdapter.build_task_instance_run_id(
                dag_id=task_instance.dag_id,
                task_id=task_instance.task_id,
                try_number=task_instance.try_number - 1,
                logical_date=date,
                map_index=task_instance.map_index,
            )
        )
    except Exception:  # noqa: BLE001 - lineage never fails a try: the facet goes without it
        return None


def spark_parent_job_conf(conf: Mapping[str, object], context: Mapping[str, Any]) -> dict[str, object]:
    """``conf`` with the ``spark.openlineage.parent*`` properties of this try, when the deployment asks
    for them as for the Spark provider's operators (``[openlineage] spark_inject_parent_job_info``):
    the OpenLineage Spark listener of a spark-submit application then names the try as its parent. A
    Spark Connect session cannot take them (they are the application's, read when it starts)."""
    from airflow.sdk import conf as airflow_conf

    if not airflow_conf.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False):
        return dict(conf)
    from airflow.providers.common.compat.openlineage.utils.spark import (
        inject_parent_job_information_into_spark_properties,
    )

    return dict(inject_parent_job_information_into_spark_properties(dict(conf), context))  # type: ignore[arg-type]


def operator_lineage(lineage: TryLineage) -> OperatorLineage:
    """``lineage`` in the provider's terms (imported here: only the provider calls this)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import input_statistics_input_dataset as read_stats
    from openlineage.client.facet_v2 import output_statistics_output_dataset as written_stats

    namespace = f"s3://{lineage.bucket}"
    inputs = [
        InputDataset(
            namespace,
            p.key,
            facets={DATASET_FACET: _partition_facet(p)},
            inputFacets={
                "inputStatistics": read_stats.InputStatisticsInputDatasetFacet(
                    rowCount=p.rows, size=p.size, fileCount=p.files, producer=_producer()
                )
            }
            if p.attempt is not None
            else {},
        )
        for p in lineage.inputs
    ]
    outputs = [
        OutputDataset(
            namespace,
            p.key,
            facets={DATASET_FACET: _partition_facet(p)},
            outputFacets={
                "outputStatistics": written_stats.OutputStatisticsOutputDatasetFacet(
                    rowCount=p.rows, size=p.size, fileCount=p.files, producer=_producer()
                )
            },
        )
        for p in lineage.outputs
    ]
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets={RUN_FACET: _try_facet(lineage)})


def _try_facet(lineage: TryLineage) -> FtTryRunFacet:
    from airflow_ft_provider.lineage_facets import FtTryRunFacet

    cause = lineage.cause
    return FtTryRunFacet(
        tryNumber=lineage.try_number,
        cause=cause.cause.value,
        reason=cause.reason,
        outcome=lineage.outcome.value,
        replacesRunId=lineage.replaces_run_id,
        failedTask=cause.failed_task,
        lostPartitions=list(cause.lost) or None,
        restartedBy=cause.user,
        fromTry=lineage.from_try,
        fromRun=lineage.from_run,
        restoredCheckpoint=lineage.restored_checkpoint,
        producer=_producer(),
    )


def _partition_facet(p: PartitionLineage) -> FtPartitionDatasetFacet:
    from airflow_ft_provider.lineage_facets import FtPartitionDatasetFacet

    return FtPartitionDatasetFacet(
        partitionId=p.partition_id,
        type=p.kind,
        attempt=p.attempt,
        producerTry=p.producer_try,
        producer=_producer(),
    )


@cache
def _producer() -> str:
    """This release's URL, looked up once (every facet of every dataset names it)."""
    try:
        release = version("airflow-ft-provider")
    except PackageNotFoundError:  # run from a clone that was never installed
        release = "unknown"
    return f"https://pypi.org/project/airflow-ft-provider/{release}/"


def _outcome(
    entries: list[PartitionEntry], *, failed: bool
) -> tuple[Outcome, int | None, str | None, int | None]:
    if failed:
        return Outcome.FAILED, None, None, None
    for entry in entries:
        if entry.reused_from_try is not None:
            return Outcome.REUSED, entry.reused_from_try, entry.reused_from_run, None
        if entry.adopted_from_try is not None:
            return Outcome.ADOPTED, entry.adopted_from_try, None, None
        restored = (entry.checkpoint or {}).get("restored_from")
        if isinstance(restored, int):
            return Outcome.RESUMED, None, None, restored
    return Outcome.COMPUTED, None, None, None


def _committed_manifest(scope: TryScope, partition_id: str) -> Manifest | None:
    """The committed manifest of an input the try did not read (it reused or adopted): what the
    output it published was computed from, as far as the store still says."""
    try:
        return scope.store.manifest(scope.run.parse(partition_id))
    except Exception:  # noqa: BLE001 - lineage never fails a try: the dataset is named without facts
        return None


def _blocking(partition_id: str, prefix: str, manifest: Manifest | None) -> PartitionLineage:
    key = prefix.rstrip("/")
    if manifest is None:
        return PartitionLineage(partition_id, "blocking", key, None, None, None, None, None)
    return PartitionLineage(
        partition_id,
        "blocking",
        key,
        manifest.attempt_id,
        manifest.producer.try_number,
        manifest.row_count,
        manifest.total_size,
        len(manifest.files),
    )


def _pipelined(partition_id: str, handle_key: str) -> PartitionLineage:
    return PartitionLineage(
        partition_id, "pipelined", handle_key.removesuffix(".json"), None, None, None, None, None
    )


def _output(
    scope: TryScope, layout: StoreLayout, partition_id: str, entry: PartitionEntry
) -> PartitionLineage:
    ref = scope.run.parse(partition_id)
    if entry.type == "pipelined":
        key = layout.pipelined_handle_key(ref).removesuffix(".json")
    else:
        key = layout.partition_prefix(ref).rstrip("/")
    producer = entry.reused_from_try or entry.adopted_from_try or scope.try_number
    return PartitionLineage(
        partition_id, entry.type, key, entry.attempt, producer, entry.rows, entry.bytes, entry.files
    )
