"""What the provider counts and times, sent through Airflow's own stats (``airflow.sdk.observability``),
so it reaches StatsD or OpenTelemetry as ``[metrics]`` of airflow.cfg says, with Airflow's allow and
block lists. Names start with ``ft.``; tags (``dag_id``, ``task_id``, ``outcome``, ``kind``,
``error_class``) go where the backend takes them (OpenTelemetry, Datadog, StatsD with
``statsd_influxdb_enabled``); plain StatsD drops them, so the outcome and the kind are in names too.

A metric never fails what it measures: every emission is guarded.

=====================================  =======  =============================================================
name                                   type     what
=====================================  =======  =============================================================
ft.failover_decisions[.<outcome>]      counter  decisions on failures: restart, suppressed, not_recoverable,
                                                superseded
ft.restarts                            counter  Flink's numRestarts: decisions that restart regions
ft.regions_restarted                   counter  regions those restarts run again
ft.backtracking                        counter  restarts that rebuild lost partitions
ft.partitions.lost                     counter  partitions found lost by a failure's decision
ft.failures[.<kind>]                   counter  failures by label: user_code, infrastructure, lost_data,
                                                timeout, killed, injected_fault
ft.failures.not_recoverable            counter  failures that failed their task at once
ft.restarting_time                     timer    Flink's restartingTime: failure to the restarted try's start
ft.stage.phase.<phase>                 timer    a stage try's time in each phase: gate, reuse, session,
                                                inputs, spark, commit, release (stage_try/phases.py)
ft.partitions.committed                counter  partitions committed
ft.partitions.committed_bytes          counter  their bytes
ft.partitions.rebuilt                  counter  committed partitions a decision had found lost
ft.partitions.reused                   counter  outputs a try published again instead of running Spark
ft.partitions.adopted[.<kind>]         counter  outputs a try committed from a killed earlier try's work:
                                                finished, or running (waited for in Spark Connect)
                                                (inputs and code unchanged)
ft.checkpoints.completed / .failed     counter  checkpoints of checkpointed stages, per try
ft.checkpoints.duration                timer    the last completed checkpoint's upload
ft.checkpoints.size / .incremental     gauge    its size, and what it uploaded
ft.checkpoints.restored[.<via>]        counter  tries resumed from a checkpoint (local or store)
ft.runs.swept / ft.runs.released       counter  life-cycle sweeps of a pipeline, and the runs they released
ft.regions_stopped_tasks               counter  tasks failed at once with a failure a restart cannot heal
=====================================  =======  =============================================================
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from datetime import timedelta

from airflow_ft_provider.failover.decision import FailoverDecision, Outcome

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/]")  # what Airflow's stat-name check lets through


def _tag(value: object) -> str:
    return _UNSAFE.sub("_", str(value))[:100]


def _send(emit: Callable[[], None]) -> None:
    try:
        emit()
    except Exception as err:  # noqa: BLE001 - a metric never fails what it measures
        log.debug("metric not sent: %s", err)


def _clean(tags: Mapping[str, object] | None) -> dict[str, str]:
    return {k: _tag(v) for k, v in (tags or {}).items() if v is not None}


def _incr(name: str, count: int = 1, tags: Mapping[str, object] | None = None) -> None:
    from airflow.sdk.observability import stats

    _send(lambda: stats.incr(name, count, tags=_clean(tags)))


def _timing(name: str, seconds: float, tags: Mapping[str, object]) -> None:
    from airflow.sdk.observability import stats

    _send(lambda: stats.timing(name, timedelta(seconds=max(seconds, 0.0)), tags=_clean(tags)))


def _gauge(name: str, value: float, tags: Mapping[str, object]) -> None:
    from airflow.sdk.observability import stats

    _send(lambda: stats.gauge(name, value, tags=_clean(tags)))


def decided(decision: FailoverDecision, *, dag_id: str) -> None:
    """A failure's decision, once (not when it is replayed)."""
    outcome = decision.outcome.value.replace("-", "_")
    labels = decision.labels
    kind = labels.kind.value.replace(" ", "_") if labels else None
    tags = {
        "dag_id": dag_id,
        "task_id": decision.failed_task,
        "outcome": outcome,
        "kind": kind,
        "error_class": labels.error_class if labels else None,
    }
    _incr("ft.failover_decisions", tags=tags)
    _incr(f"ft.failover_decisions.{outcome}", tags=tags)
    if decision.superseded:
        return
    _incr("ft.failures", tags=tags)
    if kind:
        _incr(f"ft.failures.{kind}", tags=tags)
    if decision.outcome is Outcome.NOT_RECOVERABLE:
        _incr("ft.failures.not_recoverable", tags=tags)
    if decision.outcome is Outcome.RESTART:
        _incr("ft.restarts", tags=tags)
        _incr("ft.regions_restarted", len(decision.regions), tags=tags)
        if decision.unavailable:
            _incr("ft.backtracking", tags=tags)
            _incr("ft.partitions.lost", len(decision.unavailable), tags=tags)


def restarting(seconds: float, *, dag_id: str, task_id: str) -> None:
    """The time from a failure to its task's restarted try starting work (Flink: restartingTime)."""
    _timing("ft.restarting_time", seconds, {"dag_id": dag_id, "task_id": task_id})


def try_phases(seconds: Mapping[str, float], *, dag_id: str, task_id: str) -> None:
    """Where a stage try's time went, phase by phase (the phase in the name too, for plain StatsD)."""
    for phase, spent in seconds.items():
        _timing(f"ft.stage.phase.{phase}", spent, {"dag_id": dag_id, "task_id": task_id, "phase": phase})


def committed(*, dag_id: str, task_id: str, result: str, size: int, rebuilt: bool) -> None:
    tags = {"dag_id": dag_id, "task_id": task_id, "result": result}
    _incr("ft.partitions.committed", tags=tags)
    _incr("ft.partitions.committed_bytes", size, tags=tags)
    if rebuilt:
        _incr("ft.partitions.rebuilt", tags=tags)


def reused(count: int, *, dag_id: str, task_id: str) -> None:
    if count:
        _incr("ft.partitions.reused", count, tags={"dag_id": dag_id, "task_id": task_id})


def adopted(count: int, *, dag_id: str, task_id: str, kind: str) -> None:
    if count:
        tags = {"dag_id": dag_id, "task_id": task_id, "kind": kind}
        _incr("ft.partitions.adopted", count, tags=tags)
        _incr(f"ft.partitions.adopted.{kind}", count, tags=tags)


def checkpoints(statistics: Mapping[str, object], *, dag_id: str, task_id: str) -> None:
    """One try's checkpoint statistics (``CheckpointStats.as_dict``)."""
    tags = {"dag_id": dag_id, "task_id": task_id}
    completed, failed = statistics.get("completed"), statistics.get("failed")
    if isinstance(completed, int) and completed:
        _incr("ft.checkpoints.completed", completed, tags=tags)
    if isinstance(failed, int) and failed:
        _incr("ft.checkpoints.failed", failed, tags=tags)
    duration, size, incremental = (
        statistics.get("last_duration"),
        statistics.get("last_size"),
        statistics.get("last_incremental_size"),
    )
    if isinstance(duration, (int, float)):
        _timing("ft.checkpoints.duration", float(duration), tags)
    if isinstance(size, int):
        _gauge("ft.checkpoints.size", size, tags)
    if isinstance(incremental, int):
        _gauge("ft.checkpoints.incremental", incremental, tags)


def restored(via: str, *, dag_id: str, task_id: str) -> None:
    tags = {"dag_id": dag_id, "task_id": task_id, "via": via}
    _incr("ft.checkpoints.restored", tags=tags)
    _incr(f"ft.checkpoints.restored.{_tag(via)}", tags=tags)


def swept(released: int, *, dag_id: str) -> None:
    _incr("ft.runs.swept", tags={"dag_id": dag_id})
    if released:
        _incr("ft.runs.released", released, tags={"dag_id": dag_id})


def stopped(count: int, *, dag_id: str, task_id: str) -> None:
    if count:
        _incr("ft.regions_stopped_tasks", count, tags={"dag_id": dag_id, "task_id": task_id})
