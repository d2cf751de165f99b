"""What the failover page shows for one DAG run, as JSON-ready data.

Built from four sources that the page's endpoint gathers: the run's stored pipeline description, its
task instances (Airflow's metadata DB), its recovery journal (state and events, S3) and the partition
availability report (S3). Nothing here talks to Airflow or S3, so it is tested with plain values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone

from airflow_ft_provider.failover.classification import FailureLabels
from airflow_ft_provider.failover.clock import Clock, SystemClock
from airflow_ft_provider.failover.durations import representable
from airflow_ft_provider.failover.failure_handler import RUN_SCOPE, FailoverState
from airflow_ft_provider.failover.indexed_name import UNMAPPED
from airflow_ft_provider.failover.strategy_state import state_to_json
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.partitions.store import AvailabilityReport
from airflow_ft_provider.recovery.journal_events import (
    CHECKPOINT_EVENTS,
    CheckpointRestored,
    CheckpointsTaken,
    FailoverRecorded,
    JournalEvent,
    ManualRestart,
    RestartReconciled,
    TryEvent,
)
from airflow_ft_provider.recovery.wording import remaining_budget

SUCCESS = "success"
Mask = Callable[[str], str]
# a try that reused its outputs (stage_try/reuse.py), or committed a killed try's (adoption.py)


def region_id(region: Iterable[str]) -> str:
    """A region's stable name: its first task in sort order (as the TaskGroup ``region_<stage>``)."""
    return min(region)


def _task_rows(
    description: PipelineDescription, instances: Iterable[Mapping[str, object]]
) -> dict[str, dict[str, object]]:
    by_key = {(ti["task_id"], ti.get("map_index", UNMAPPED)): ti for ti in instances}
    rows: dict[str, dict[str, object]] = {}
    for stage in description.graph.stages.values():
        for task in stage.task_ids:
            ti = by_key.get(description.airflow_key(task), {})
            rows[task] = {
                "id": task,
                "stage": stage.name,
                "map_index": description.airflow_key(task)[1],
                "state": ti.get("state") or "no status",
                "try_number": ti.get("try_number", 0),
                "start_date": ti.get("start_date"),
                "end_date": ti.get("end_date"),
            }
    return rows


def _partition_rows(
    description: PipelineDescription,
    report: AvailabilityReport | None,
    tasks: Mapping[str, dict[str, object]],
    mask: Mask,
) -> list[dict[str, object]]:
    rows = []
    graph = description.graph
    for result in graph.results.values():
        producers = graph.stages[result.producer].task_ids  # built on each call: once per result
        for index, partition_id in enumerate(graph.partition_ids(result.name)):
            producer = producers[index]
            row: dict[str, object] = {
                "id": partition_id,
                "result": result.name,
                "type": result.result_type.value,
                "producer": producer,
                "status": "unknown",
                "reason": "",
                "size": None,
                "rows": None,
                "files": None,
                "attempt": None,
                "producer_try": None,
                "created_at": None,
            }
            if not result.result_type.is_reconsumable:
                row["status"], row["reason"] = (
                    "pipelined",
                    "ephemeral: re-produced by its region, never stored",
                )
            elif report is None:
                row["reason"] = "the partition store could not be read"
            elif partition_id in report.available:
                row["status"] = "committed"
            elif partition_id in report.pending:  # a page's time budget ran out: the page asks again
                row["status"], row["reason"] = "listed", "its manifest is listed; its details are being read"
            elif (problem := report.unavailable.get(partition_id)) is not None:
                row["reason"] = mask(problem.explanation)
                if problem.reason is Unavailable.MISSING_MANIFEST:
                    row["status"] = "missing" if tasks[producer]["state"] == SUCCESS else "pending"
                elif problem.reason is Unavailable.RELEASED:
                    row["status"] = "released"
                elif problem.reason.corrupt:
                    row["status"] = "corrupt"
                else:
                    row["status"] = "missing"
            manifest = report.manifests.get(partition_id) if report is not None else None
            if manifest is not None:
                row.update(
                    size=manifest.total_size,
                    rows=manifest.row_count,
                    files=len(manifest.files),
                    attempt=manifest.attempt_id,
                    producer_try=manifest.producer.try_number,
                    created_at=manifest.created_at,
                )
            rows.append(row)
    return rows


def _strategy(description: PipelineDescription, state: FailoverState, clock: Clock) -> dict[str, object]:
    in_force = description.restart_strategy(clock=clock)
    scopes = []
    for scope in sorted(set(state.strategies) | {RUN_SCOPE}):
        strategy = description.restart_strategy(clock=clock)
        if scope in state.strategies:
            strategy.restore_state(state.strategies[scope])
        scopes.append(
            {
                "scope": scope,
                "budget": remaining_budget(strategy),
                "state": state_to_json(state.strategies[scope]) if scope in state.strategies else {},
            }
        )
    failover = description.failover_strategy()
    return {
        "restart_strategy": repr(in_force),
        "failover_strategy": repr(failover),
        "per_region": description.per_region_restarts,
        "scopes": scopes,
    }


def _history(events: Iterable[JournalEvent], mask: Mask) -> list[dict[str, object]]:
    rows = []
    for event in events:
        row = {
            **_HISTORY_ROW,
            "time": event.time,
            "kind": event.kind_name,
            "task": event.task or None,
            "reason": event.reason,
        }
        match event:
            case FailoverRecorded():
                row |= {
                    "try_number": event.try_number,
                    "cause": event.cause,
                    "restart": event.restart,
                    "decision": "restart" if event.restart else f"fail: {event.reason}",
                    "regions": [list(r) for r in event.regions],
                    "tasks": list(event.tasks),
                    "cleared": list(event.cleared),
                    "stopped": list(event.stopped),
                    "delay": event.delay,
                    "strategy": event.strategy,
                    "strategy_state": None
                    if event.strategy_state is None
                    else state_to_json(event.strategy_state),
                    "labels": _labels(event.labels),
                    "next_try": _next_try(event) if event.restart else "",
                }
            case ManualRestart():  # its reason is the sentence to show
                row |= {
                    "cause": event.reason,
                    "restart": True,
                    "decision": "restart",
                    "regions": [list(r) for r in event.regions],
                    "tasks": list(event.tasks),
                    "cleared": list(event.cleared),
                    "delay": 0.0,
                    "user": event.user,
                }
            case TryEvent():  # a restore point or an earlier output: it decides no restart
                row |= {"try_number": event.try_number, "cause": event.reason, "decision": ""}
            case RestartReconciled():
                row |= {"cleared": list(event.cleared), "decision": f"fail: {event.reason}"}
            case _:
                row["decision"] = f"fail: {event.reason}"
        for free_text in ("cause", "reason", "strategy"):  # from S3: may quote a secret
            if isinstance(text := row[free_text], str):
                row[free_text] = mask(text)
        rows.append(row)
    return rows


# A history row's fields, as the page reads them, before the event's own.
_HISTORY_ROW: dict[str, object] = {
    "try_number": None,
    "cause": None,
    "restart": False,
    "decision": "",
    "regions": [],
    "tasks": [],
    "cleared": [],
    "stopped": [],
    "delay": None,
    "strategy": "",
    "strategy_state": None,
    "reason": "",
    "user": None,
    "labels": "",
    "next_try": "",
}


def _next_try(event: FailoverRecorded) -> str:
    """``not before 14:02:07 UTC (exponential-delay, attempt 3: 4 s + jitter 300 ms)``."""
    at = event.restart_at
    if at is None or not math.isfinite(at):
        return ""
    moment = datetime.fromtimestamp(representable(at), tz=timezone.utc)
    long_wait = event.delay >= 86_400
    text = "not before " + moment.strftime("%Y-%m-%d %H:%M:%S UTC" if long_wait else "%H:%M:%S UTC")
    return text + (f" ({event.backoff})" if event.backoff else "")


def _labels(labels: FailureLabels | None) -> str:
    """A failure's labels as the page shows them: ``user code, UNRESOLVED_COLUMN · not recoverable``."""
    if labels is None:
        return ""
    return labels.describe() + ("" if labels.recoverable else " · not recoverable")


def _checkpoint_rows(events: Iterable[JournalEvent]) -> list[dict[str, object]]:
    """Per checkpointed task (seed 003's monitoring): its newest try's statistics and every try's
    restore point."""
    rows: dict[str, dict[str, object]] = {}
    restore_points: dict[str, list[dict[str, object]]] = {}
    for event in events:
        if not isinstance(event, CHECKPOINT_EVENTS) or not event.task:
            continue
        restores = restore_points.setdefault(event.task, [])
        row = rows.setdefault(event.task, {"task": event.task, "restores": restores})
        if isinstance(event, CheckpointRestored):
            restores.append(
                {"try_number": event.try_number, "restored_from": event.restored_from,
                 "restored_via": event.restored_via, "reason": event.reason}
            )  # fmt: skip
            continue
        assert isinstance(event, CheckpointsTaken)
        stats = event.statistics
        total, processed = stats.get("total_bytes"), stats.get("processed_bytes")
        row.update(
            try_number=event.try_number,
            succeeded=event.succeeded,
            completed=stats.get("completed"),
            failed=stats.get("failed"),
            last_completed=stats.get("last_completed"),
            last_duration=stats.get("last_duration"),
            last_size=stats.get("last_size"),
            last_incremental_size=stats.get("last_incremental_size"),
            progress=processed / total
            if isinstance(total, int) and total and isinstance(processed, int)
            else None,
        )
    return [rows[task] for task in sorted(rows)]


def build_run_view(
    description: PipelineDescription,
    run_id: str,
    *,
    task_instances: Iterable[Mapping[str, object]],
    state: FailoverState,
    events: Iterable[JournalEvent],
    report: AvailabilityReport | None,
    clock: Clock | None = None,
    mask: Mask = str,
) -> dict[str, object]:
    """The page's data: regions (with task states), stage edges, partitions, history, strategy.
    ``mask`` hides secrets in the free text read from S3 (causes, reasons)."""
    clock = clock or SystemClock()
    events = list(events)
    tasks = _task_rows(description, task_instances)
    regions = []
    for region in sorted(description.regions, key=region_id):
        rid = region_id(region)
        for task in region:
            tasks[task]["region"] = rid
        regions.append(
            {
                "id": rid,
                "tasks": sorted(region),
                "stages": sorted({str(tasks[t]["stage"]) for t in region}),
                "states": sorted({str(tasks[t]["state"]) for t in region}),
                "restart_not_before": max((state.not_before.get(t, 0.0) for t in region), default=0.0)
                or None,
            }
        )
    graph = description.graph
    edges = [
        {
            "from": graph.results[c.result].producer,
            "to": c.stage,
            "result": c.result,
            "type": graph.results[c.result].result_type.value,
            "pattern": c.pattern.value,
        }
        for c in graph.consumptions
    ]
    return {
        "dag_id": description.dag_id,
        "run_id": run_id,
        "stages": [
            {"id": s.name, "parallelism": s.parallelism, "tasks": s.task_ids} for s in graph.stages.values()
        ],
        "tasks": list(tasks.values()),
        "not_expanded": sorted(description.pending),  # model/map_counts.py: no try of them yet
        "edges": edges,
        "regions": regions,
        "partitions": _partition_rows(description, report, tasks, mask),
        "partitions_pending": len(report.pending) if report is not None else 0,
        "history": _history(events, mask),
        "checkpoints": _checkpoint_rows(events),
        "strategy": _strategy(description, state, clock),
    }
