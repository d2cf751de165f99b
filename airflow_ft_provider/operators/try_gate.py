"""A stage try's door: settle the run's pipeline, record a run-time map count, then proceed or wait.

A restarted task waits for its region's restart time deferred, without holding a worker slot; shorter
waits are slept in the worker. What passes the door is the run's pipeline: the one the try parsed,
with the map counts the run recorded (``model/map_counts.py``), which is what its inputs and outputs
are named from.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NoReturn, Protocol

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

    from airflow_ft_provider.model.description import PipelineDescription
    from airflow_ft_provider.partitions import S3PartitionStore

# Shorter restart waits are slept in the worker: a deferral costs seconds by itself, and when the
# triggerer resumes a task within a few seconds, Airflow 3.3's scheduler may process the deferring
# process's exit event after the resume and fail the running try ("finished with state success, but
# the task instance's state attribute is running"), seen on a loaded 2-core machine.
MIN_DEFERRAL_SECONDS = 5.0


class _Log(Protocol):
    def info(self, msg: str, /, *args: object) -> object: ...


class GatedStage(Protocol):
    """What the door needs of the stage operator."""

    @property
    def task_id(self) -> str: ...

    @property
    def description(self) -> PipelineDescription: ...

    @property
    def store(self) -> S3PartitionStore: ...

    @property
    def log(self) -> _Log: ...

    def defer(self, *, trigger: BaseTrigger, method_name: str) -> NoReturn: ...


def enter_try(
    stage: GatedStage, context: Context, map_index: int | None, *, resumed: bool
) -> PipelineDescription:
    """Proceed (returning the run's pipeline as this try runs it), or defer until the restart time."""
    from airflow_ft_provider._compat import map_indexes_in_run
    from airflow_ft_provider.model.map_counts import RunTimeCount
    from airflow_ft_provider.recovery.journal import STORE_XCOM_KEY
    from airflow_ft_provider.recovery.run_recovery import RunRecovery
    from airflow_ft_provider.recovery.try_start import Proceed, Superseded, WaitUntil

    ti = context["ti"]
    parsed = stage.description
    expanded = None
    if stage.task_id in parsed.run_time_stages:  # mapped over another task's output: count it now
        count = map_indexes_in_run(ti, context["run_id"])
        expanded = RunTimeCount(stage.task_id, count, ti.try_number)
    # The pipeline the run's recovery follows: stored by the run's first try (the UI plugin and
    # airflow-ft read it there), and found through the XCom.
    recovery = RunRecovery.for_worker(
        context, parsed=parsed, store=stage.store, settle=True, expanded=expanded
    )
    if not resumed:  # once per try: a resumed deferral is the same try, its XCom stands
        ti.xcom_push(key=STORE_XCOM_KEY, value=recovery.store_pointer())
    start = recovery.before_try(stage.task_id, map_index, ti.try_number)
    match start:
        case Proceed():
            return parsed.with_map_counts_of(recovery.pipeline)
        case WaitUntil(at=restart_at, reason=why):
            pass
        case Superseded(reason=why):  # wait to be rescheduled once the producers re-ran
            restart_at = time.time() + 3600
        case _:
            raise TypeError(f"unexpected try start {start!r}")
    from datetime import datetime, timezone

    from airflow.providers.standard.triggers.temporal import DateTimeTrigger

    from airflow_ft_provider.failover.durations import representable

    restart_at = representable(restart_at)  # a delay of a million days waits, it does not overflow
    moment = datetime.fromtimestamp(restart_at, tz=timezone.utc)
    wait = restart_at - time.time()
    stage.log.info(
        "region failover: waiting %.1f s, until %s (%s), %s",
        wait,
        moment.isoformat(),
        why,
        "deferred" if wait >= MIN_DEFERRAL_SECONDS else "in the worker",
    )
    if wait < MIN_DEFERRAL_SECONDS:
        time.sleep(max(0.0, wait))
        return parsed.with_map_counts_of(recovery.pipeline)
    stage.defer(trigger=DateTimeTrigger(moment=moment), method_name="execute")


def check_map_counts(description: PipelineDescription, stage: str) -> None:
    """Fail the try, not to be retried, when a pointwise pipelined input's producer ran with another
    count than this stage (either counted at run time): every retry would find the same."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_ft_provider.model.map_counts import count_mismatches

    if not description.run_time_stages or stage in description.pending:
        return
    mismatches = count_mismatches(description.graph, stage, description.run_time_stages)
    if mismatches:
        raise AirflowFailException(mismatches[0].message())
