"""Whether a try resumes from the last completed checkpoint or starts fresh, and why.

A checkpoint is fenced by the inputs it was taken against: the committed attempt of every input
partition (its manifest's attempt id). A new try resumes only when each input is still that attempt:
when failover rebuilt an input (backtracking) or re-ran a producer region, the input changed and the
stage starts fresh. A stage with a pipelined input never resumes: a pipelined region restarts as a
whole (Flink), its input is produced again by the new execution.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CompletedCheckpoint:
    """What the store's copy of a completed checkpoint says about itself (its ``_metadata``)."""

    checkpoint_id: int  # the last micro-batch it covers (Spark's batch id)
    inputs: Mapping[str, str]  # input partition id -> the manifest attempt id it was taken against
    processed_bytes: int  # input read by the micro-batches it covers
    total_bytes: int  # all input of the stage
    taken_by_try: int


class Why(enum.Enum):
    RESUME = "resume"
    NO_CHECKPOINT = "no-checkpoint"
    INPUT_CHANGED = "input-changed"
    PIPELINED_INPUT = "pipelined-input"
    UNRESTORABLE = "unrestorable"  # its objects are missing or damaged in the store


@dataclass(frozen=True)
class RestoreDecision:
    why: Why
    checkpoint: CompletedCheckpoint | None = None
    changed: tuple[str, ...] = ()  # the inputs whose committed attempt differs
    damage: str = ""  # why an UNRESTORABLE checkpoint could not be restored

    @property
    def resume(self) -> bool:
        return self.why is Why.RESUME

    def explain(self, task: str, try_number: int) -> str:
        """The sentence the task log, the failover page and ``airflow-ft history`` show."""
        if self.why is Why.RESUME:
            assert self.checkpoint is not None
            chk = self.checkpoint
            share = 100 * chk.processed_bytes / chk.total_bytes if chk.total_bytes else 100.0
            return (
                f"{task} try {try_number} resumed at checkpoint {chk.checkpoint_id}: {share:.0f} % of the "
                f"input is not read again (taken by try {chk.taken_by_try})"
            )
        if self.why is Why.NO_CHECKPOINT:
            return f"{task} try {try_number} starts fresh: no completed checkpoint"
        if self.why is Why.PIPELINED_INPUT:
            return (
                f"{task} try {try_number} starts fresh: it reads a pipelined input, produced again by its "
                "region's new execution (a pipelined region restarts as a whole)"
            )
        assert self.checkpoint is not None
        if self.why is Why.UNRESTORABLE:
            return (
                f"{task} try {try_number} starts fresh: checkpoint {self.checkpoint.checkpoint_id} cannot be "
                f"restored ({self.damage})"
            )
        return (
            f"{task} try {try_number} starts fresh: checkpoint {self.checkpoint.checkpoint_id} was taken "
            f"against other committed attempts of {', '.join(self.changed)} (rebuilt since by failover)"
        )


def restore_decision(
    latest: CompletedCheckpoint | None,
    inputs: Mapping[str, str],
    *,
    pipelined_input: bool,
    damage: str | None = None,
) -> RestoreDecision:
    """Resume from ``latest`` only if every input is the committed attempt it was taken against (and,
    with ``damage``, the reason its copy could not be restored: then start fresh)."""
    if pipelined_input:
        return RestoreDecision(Why.PIPELINED_INPUT, latest)
    if latest is None:
        return RestoreDecision(Why.NO_CHECKPOINT)
    changed = tuple(
        sorted(p for p in set(inputs) | set(latest.inputs) if inputs.get(p) != latest.inputs.get(p))
    )
    if changed:
        return RestoreDecision(Why.INPUT_CHANGED, latest, changed)
    if damage is not None:
        return RestoreDecision(Why.UNRESTORABLE, latest, damage=damage)
    return RestoreDecision(Why.RESUME, latest)
