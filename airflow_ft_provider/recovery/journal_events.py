"""What a run's history holds, as typed values: a tagged union of frozen events on ``kind``.

    failover     a failover decision (FailoverRecorded)           recovery/decide.py
    reconciled   the clears of an earlier decision finished        recovery/reconcile.py
    manual       a region restarted by hand (page, airflow-ft)     recovery/run_recovery.py
    reused       a try published an earlier output                 stage_try/reuse.py
    adopted      a try committed a killed try's finished output    stage_try/adoption.py
    checkpoint   where a checkpointed try started from             stage_try/checkpointed.py
    checkpoints  how a checkpointed try's checkpoints went         stage_try/checkpointed.py
    expanded     a stage's map indexes, counted at run time        recovery/journal.py
    invalid      a stored event that cannot be read (with why)     journal_schema.decode_event
    other kinds  an event of a newer release, shown as it names itself (a rolling upgrade)

Every write goes through the recovery door (``RunRecovery``); ``journal_schema`` is the one encoder
and decoder (each event's ``to_json`` is its stored form, the JSON keys unchanged since version 1).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from airflow_ft_provider.failover.classification import FailureLabels
from airflow_ft_provider.failover.strategy_state import StrategyState, state_to_json

Names = tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class JournalEvent:
    """One event of a run: when, which task (``stage`` or ``stage[i]``; empty: none), and why, in words."""

    kind: ClassVar[str] = ""
    task: str = ""
    reason: str = ""
    time: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, object]:
        return {
            "time": self.time,
            "kind": self.kind_name,
            "task": self.task,
            "reason": self.reason,
            **self._details(),
        }

    @property
    def kind_name(self) -> str:
        """The kind this event is stored and shown as."""
        return self.kind

    def _details(self) -> Mapping[str, object]:
        return {}


@dataclass(frozen=True, kw_only=True)
class FailoverRecorded(JournalEvent):
    """A failover decision as the failing try's retry policy took it, and what it cleared or stopped."""

    kind: ClassVar[str] = "failover"
    failed_task: str = ""
    try_number: int | None = None
    restart: bool = False
    delay: float = 0.0
    restart_at: float | None = None
    regions: tuple[Names, ...] = ()
    tasks: Names = ()
    unavailable: Names = ()
    new_attempt: bool = False
    strategy: str = ""
    scope: str = ""
    cause: str = ""
    labels: FailureLabels | None = None
    backoff: str = ""
    cleared: Names = ()
    stopped: Names = ()
    strategy_state: StrategyState | None = None  # the budget as the decision left it

    def _details(self) -> Mapping[str, object]:
        return {
            "failed_task": self.failed_task,
            "try_number": self.try_number,
            "restart": self.restart,
            "delay": self.delay,
            "restart_at": self.restart_at,
            "regions": [list(r) for r in self.regions],
            "tasks": list(self.tasks),
            "unavailable": list(self.unavailable),
            "new_attempt": self.new_attempt,
            "strategy": self.strategy,
            "scope": self.scope,
            "cause": self.cause,
            **({"labels": self.labels.to_dict()} if self.labels else {}),
            **({"backoff": self.backoff} if self.backoff else {}),
            "cleared": list(self.cleared),
            "stopped": list(self.stopped),
            "strategy_state": None if self.strategy_state is None else state_to_json(self.strategy_state),
        }


@dataclass(frozen=True, kw_only=True)
class RestartReconciled(JournalEvent):
    """The clears of a restart decided earlier, finished by a later try (``reconcile.py``)."""

    kind: ClassVar[str] = "reconciled"
    cleared: Names = ()

    def _details(self) -> Mapping[str, object]:
        return {"cleared": list(self.cleared)}


@dataclass(frozen=True, kw_only=True)
class ManualRestart(JournalEvent):
    """Regions restarted by hand: the task named, the regions and tasks, what was cleared, by whom."""

    kind: ClassVar[str] = "manual"
    regions: tuple[Names, ...] = ()
    tasks: Names = ()
    cleared: Names = ()
    user: str | None = None

    def _details(self) -> Mapping[str, object]:
        return {
            "regions": [list(r) for r in self.regions],
            "tasks": list(self.tasks),
            "cleared": list(self.cleared),
            **({"user": self.user} if self.user else {}),
        }

    def named(self, task: str) -> bool:
        """Whether ``task`` is in a region this restart named through its task (or one of its indexes)."""
        named = self.task
        return any(
            task in region and any(t == named or t.startswith(f"{named}[") for t in region)
            for region in self.regions
        )


@dataclass(frozen=True, kw_only=True)
class TryEvent(JournalEvent):
    """An event of one try of ``task``: how it came by its outputs, or how its checkpoints went."""

    try_number: int | None = None

    def _details(self) -> Mapping[str, object]:
        return {"try_number": self.try_number, **self._try_details()}

    def _try_details(self) -> Mapping[str, object]:
        return {}


@dataclass(frozen=True, kw_only=True)
class OutputsReused(TryEvent):
    """The try published outputs computed already from the same inputs and code (``stage_try/reuse.py``)."""

    kind: ClassVar[str] = "reused"


@dataclass(frozen=True, kw_only=True)
class WorkAdopted(TryEvent):
    """The try committed what a killed earlier try computed (``stage_try/adoption.py``)."""

    kind: ClassVar[str] = "adopted"


@dataclass(frozen=True, kw_only=True)
class CheckpointRestored(TryEvent):
    """Where a checkpointed try starts: the checkpoint it resumes from (None: afresh), and from where."""

    kind: ClassVar[str] = "checkpoint"
    restored_from: int | None = None
    restored_via: str | None = None  # "local" or "store"

    def _try_details(self) -> Mapping[str, object]:
        return {"restored_from": self.restored_from, "restored_via": self.restored_via}


@dataclass(frozen=True, kw_only=True)
class CheckpointsTaken(TryEvent):
    """How a checkpointed try's checkpoints went (``checkpoints/uploader.CheckpointStats.as_dict``)."""

    kind: ClassVar[str] = "checkpoints"
    succeeded: bool | None = None
    statistics: Mapping[str, object] = field(default_factory=dict)

    def _try_details(self) -> Mapping[str, object]:
        return {"succeeded": self.succeeded, **self.statistics}


@dataclass(frozen=True, kw_only=True)
class StageExpanded(TryEvent):
    """A stage mapped over another task's output ran with ``count`` map indexes in this run (first
    recorded, or changed from ``previous`` when the output it expands over changed)."""

    kind: ClassVar[str] = "expanded"
    count: int = 0
    previous: int | None = None

    def _try_details(self) -> Mapping[str, object]:
        return {"count": self.count, "previous": self.previous}


@dataclass(frozen=True, kw_only=True)
class InvalidEvent(JournalEvent):
    """A stored event that does not parse or has a field of the wrong type: listed, with the reason and
    the fix, at its object's time, so that it neither hides the others nor breaks a reader."""

    kind: ClassVar[str] = "invalid"
    key: str = ""

    def to_json(self) -> dict[str, object]:
        return {"time": self.time, "kind": self.kind, "key": self.key, "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class OtherEvent(JournalEvent):
    """An event of a kind this release does not know (written by a newer one): its common fields."""

    named_kind: str = ""

    @property
    def kind_name(self) -> str:
        return self.named_kind


CHECKPOINT_EVENTS: tuple[type[TryEvent], ...] = (CheckpointRestored, CheckpointsTaken)
