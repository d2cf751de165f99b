"""A run's outputs for people: which partitions it has, and their rows (``airflow-ft partitions`` / ``show``).

Everything goes through the store's own reader, so a partition is listed and read only as its manifest
and integrity checks allow: a corrupt or released one is reported as such and never read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from airflow_ft_provider.failover.durations import representable
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions import S3PartitionStore
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.recovery.journal_events import FailoverRecorded, JournalEvent


@dataclass(frozen=True)
class PartitionLine:
    """One partition of a run. ``state``: committed (by the try ``producer_try`` says, and not found
    lost since), reused (committed before the run's first failure and read again after it), rebuilt
    (a failover decision found it lost and a later try of its producer committed it again), released,
    missing, corrupt, or pipelined (never stored)."""

    partition: str
    result: str
    type: str
    producer: str
    state: str
    producer_try: int | None
    rows: int | None
    bytes: int | None
    files: int | None
    attempt: str | None
    committed_at: str | None
    reason: str


def iso_time(seconds: float) -> str:
    """Seconds since the epoch as ISO-8601 in UTC, as the command line prints every time."""
    return datetime.fromtimestamp(representable(seconds), tz=timezone.utc).isoformat()


def found_lost(events: Iterable[JournalEvent]) -> set[str]:
    """The partitions a failover decision of the run found lost (its events' ``unavailable``): a later
    commit of one of them rebuilt it; a first commit on a later try rebuilt nothing."""
    return {partition for e in events if isinstance(e, FailoverRecorded) for partition in e.unavailable}


def list_partitions(
    description: PipelineDescription,
    store: S3PartitionStore,
    run_id: str,
    events: Iterable[JournalEvent] = (),
) -> list[PartitionLine]:
    """Every partition the run's pipeline declares, with what the store says of it now."""
    graph = description.graph
    report = store.check_graph(graph, description.dag_id, run_id, index=True)  # an ended run: one GET
    events = list(events)  # read twice: the first failure, the partitions found lost
    failures = [e.time for e in events if isinstance(e, FailoverRecorded)]
    first_failure = min(failures, default=None)
    lost = found_lost(events)
    lines = []
    for result in graph.results.values():
        producers = graph.stages[result.producer].task_ids
        for index, partition_id in enumerate(graph.partition_ids(result.name)):
            manifest = report.manifests.get(partition_id)
            problem = report.unavailable.get(partition_id)
            reason = problem.explanation if problem else ""
            if not result.result_type.is_reconsumable:
                state, reason = "pipelined", "ephemeral: lives for one execution of its region"
            elif manifest is not None and problem is None:
                if manifest.producer.try_number > 1:  # after its own try's failure: never "reused"
                    state = "rebuilt" if partition_id in lost else "committed"
                elif first_failure is not None and manifest.created_at < first_failure:
                    state = "reused"
                else:
                    state = "committed"
            elif problem is not None and problem.reason is Unavailable.RELEASED:
                state = "released"
            elif problem is not None and problem.reason.corrupt:
                state = "corrupt"
            else:
                state = "missing"
            lines.append(
                PartitionLine(
                    partition=partition_id,
                    result=result.name,
                    type=result.result_type.value,
                    producer=producers[index],
                    state=state,
                    producer_try=manifest.producer.try_number if manifest else None,
                    rows=manifest.row_count if manifest else None,
                    bytes=manifest.total_size if manifest else None,
                    files=len(manifest.files) if manifest else None,
                    attempt=manifest.attempt_id if manifest else None,
                    committed_at=iso_time(manifest.created_at) if manifest else None,
                    reason=reason,
                )
            )
    return lines


def as_json(line: PartitionLine) -> dict[str, object]:
    return asdict(line)


def _plain(value: Any) -> Any:
    """A Parquet value as JSON: dates and times ISO-8601, decimals as strings, NaN and ±inf as null."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def partition_rows(table: Any, limit: int | None) -> Iterator[dict[str, object]]:
    """The rows of a partition's table (pyarrow), at most ``limit`` (None: all), as JSON-ready dicts."""
    rows = table if limit is None else table.slice(0, limit)
    for row in rows.to_pylist():
        yield {name: _plain(value) for name, value in row.items()}
