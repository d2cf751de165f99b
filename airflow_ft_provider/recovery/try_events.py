"""What a stage try records in its run's history, as typed values: how it came by its outputs (reused,
adopted) and where its checkpointed work started from and how its checkpoints went.

Written through the recovery door (``RunRecovery.record_try``), read back as the journal's events (the
failover page, ``airflow-ft history``): the JSON keys are the journal's (``journal.py``'s field table).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class TryEvent:
    """One event of one try of ``task`` (``stage`` or ``stage[i]``), with its reason in words."""

    kind: ClassVar[str]
    task: str
    try_number: int
    reason: str
    time: float = field(default_factory=time.time, kw_only=True)

    def to_json(self) -> dict[str, object]:
        return {
            "time": self.time,
            "kind": self.kind,
            "task": self.task,
            "try_number": self.try_number,
            "reason": self.reason,
            **self._details(),
        }

    def _details(self) -> Mapping[str, object]:
        return {}


@dataclass(frozen=True)
class OutputsReused(TryEvent):
    """The try published outputs computed already from the same inputs and code (``stage_try/reuse.py``)."""

    kind: ClassVar[str] = "reused"


@dataclass(frozen=True)
class WorkAdopted(TryEvent):
    """The try committed what a killed earlier try computed (``stage_try/adoption.py``)."""

    kind: ClassVar[str] = "adopted"


@dataclass(frozen=True)
class CheckpointRestored(TryEvent):
    """Where a checkpointed try starts: the checkpoint it resumes from (None: afresh), and from where."""

    kind: ClassVar[str] = "checkpoint"
    restored_from: int | None
    restored_via: str | None  # "local" or "store"

    def _details(self) -> Mapping[str, object]:
        return {"restored_from": self.restored_from, "restored_via": self.restored_via}


@dataclass(frozen=True)
class CheckpointsTaken(TryEvent):
    """How a checkpointed try's checkpoints went (``checkpoints/uploader.CheckpointStats``)."""

    kind: ClassVar[str] = "checkpoints"
    succeeded: bool
    statistics: Mapping[str, object]

    def _details(self) -> Mapping[str, object]:
        return {"succeeded": self.succeeded, **self.statistics}
