"""Why a stage try runs: the first of its task instance, or which recovery restarted it.

Read from the run's history (``journal_events.py``) after the fact, for the try's lineage (``lineage.py``):
the newest failover decision or manual restart recorded before the try started that names its task.
A restarted region is where lineage tools lose track (a cleared task reuses its name for another
try); saying which recovery made the try, and which try it replaces, lets them follow.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from airflow_ft_provider.recovery.journal_events import FailoverRecorded, JournalEvent, ManualRestart


class Cause(enum.Enum):
    FIRST = "first_try"
    REGION_RESTART = "region_restart"  # a task of its failover region failed
    BACKTRACKING = "backtracking"  # its region rebuilds a lost partition another region reads
    CONSUMER_RESTART = "consumer_restart"  # it reads from a region that restarted
    MANUAL_RESTART = "manual_restart"  # a user restarted a region (failover page, airflow-ft)
    RETRY = "retry"  # a later try no recorded decision names (a failure before the store was reached,
    # or a clear in Airflow's own UI)


@dataclass(frozen=True)
class TryCause:
    cause: Cause
    reason: str  # in words, as the run's history says it
    failed_task: str | None = None  # the task whose failure restarted the region
    lost: tuple[str, ...] = ()  # the partitions found lost (backtracking)
    user: str | None = None  # who restarted it by hand

    @property
    def restarted(self) -> bool:
        return self.cause is not Cause.FIRST


def try_cause(
    events: Iterable[JournalEvent],
    task: str,
    try_number: int,
    *,
    started_at: float,
    producer_of: Callable[[str], str | None],
) -> TryCause:
    """Why try ``try_number`` of ``task`` (``stage`` or ``stage[i]``) runs; ``producer_of`` names the
    task that makes a partition id (None: not of this pipeline)."""
    if try_number <= 1:
        return TryCause(Cause.FIRST, "the first try of the task instance")
    naming = [e for e in events if e.time <= started_at and _names(e, task)]
    if not naming:
        return TryCause(Cause.RETRY, "a retry that no recorded failover decision or restart names")
    event = max(naming, key=lambda e: e.time)
    if isinstance(event, ManualRestart):
        return TryCause(Cause.MANUAL_RESTART, event.reason or "restarted by hand", user=event.user)
    assert isinstance(event, FailoverRecorded)
    region = next((set(r) for r in event.regions if task in r), {task})
    failed = event.failed_task or None
    why = event.cause or event.reason
    if failed in region:
        return TryCause(Cause.REGION_RESTART, f"{failed} failed: {why}", failed_task=failed)
    lost = tuple(p for p in event.unavailable if producer_of(p) in region)
    if lost:
        return TryCause(
            Cause.BACKTRACKING,
            f"rebuilds lost partition(s) {', '.join(lost)} after {failed} failed",
            failed_task=failed,
            lost=lost,
        )
    return TryCause(
        Cause.CONSUMER_RESTART, f"reads from a region restarted after {failed} failed", failed_task=failed
    )


def _names(event: JournalEvent, task: str) -> bool:
    if isinstance(event, FailoverRecorded):
        return event.restart and task in event.tasks
    if isinstance(event, ManualRestart):
        return task in event.tasks
    return False
