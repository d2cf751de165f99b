"""What one failure leads to: Flink's ``FailureHandlingResult``, restartable or unrecoverable.

A decision is made only through its factories, and it guards its state as Flink's does: asking an
unrecoverable decision for the tasks to restart or the restart delay is a programming error
(``IllegalDecisionState``), not an empty answer. The case Flink does not have -- a try that failover
itself stopped (cleared while it ran) -- restarts nothing of its own and waits for nothing.

The words people read about a decision are rendered outside the core (``recovery/wording.py``).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from .classification import FailureLabels


class IllegalDecisionState(RuntimeError):
    """A decision was asked for something its outcome does not have (Flink: ``checkState``)."""


@dataclass(frozen=True, order=True)
class TryKey:
    """One try of one task: what a failure, its decision and a pending restart are keyed by."""

    task: str
    try_number: int

    def __post_init__(self) -> None:
        if not self.task or isinstance(self.try_number, bool) or self.try_number < 0:
            raise ValueError(f"not a task try: {self.task!r} try {self.try_number!r}")

    def __str__(self) -> str:
        return f"{self.task}#{self.try_number}"

    @classmethod
    def parse(cls, text: str) -> TryKey:
        """``task#try`` (the journal's key) back into a key; ValueError if it is not one."""
        task, sep, number = text.rpartition("#")
        if not sep or not number.isdigit():
            raise ValueError(f"not a task try key: {text!r} (expected task#try)")
        return cls(task, int(number))


class Outcome(enum.Enum):
    RESTART = "restart"  # restartable: the regions run again at ``restart_at``
    SUPPRESSED = "suppressed"  # unrecoverable: the restart strategy allows no more restarts
    NOT_RECOVERABLE = "not-recoverable"  # unrecoverable: a restart cannot heal it (classification)
    SUPERSEDED = "superseded"  # stopped by a failover restart: not a failure, nothing to decide


@dataclass(frozen=True)
class RestartPlan:
    """Which regions restart, and when (only a restartable decision has one)."""

    regions: tuple[frozenset[str], ...]
    delay: float  # seconds from the failure until the restart
    restart_at: float
    unavailable: tuple[str, ...]  # lost partitions backtracking rebuilds
    new_attempt: bool  # False: merged into the restart already scheduled
    backoff: str = ""  # how the restart strategy made the delay, in words

    @property
    def tasks(self) -> frozenset[str]:
        return frozenset().union(*self.regions)


@dataclass(frozen=True)
class FailoverDecision:
    failed_task: str
    try_number: int
    outcome: Outcome
    cause: str
    decided_at: float
    strategy: str = ""
    scope: str = ""
    plan: RestartPlan | None = None
    already_handled: bool = False  # replayed from the journal: another try or component decided it
    labels: FailureLabels | None = None  # the failure's classification (None: decided before labels)

    # -- factories ----------------------------------------------------------------------------------
    @classmethod
    def restartable(
        cls,
        failed: TryKey,
        *,
        cause: str,
        decided_at: float,
        regions: tuple[frozenset[str], ...],
        delay: float,
        unavailable: tuple[str, ...],
        new_attempt: bool,
        strategy: str,
        scope: str,
        restart_at: float | None = None,
        labels: FailureLabels | None = None,
        backoff: str = "",
    ) -> FailoverDecision:
        """``restart_at`` defaults to ``decided_at + delay``; a decision read back keeps its stored one."""
        at = decided_at + delay if restart_at is None else restart_at
        plan = RestartPlan(regions, delay, at, unavailable, new_attempt, backoff)
        return cls(
            failed.task,
            failed.try_number,
            Outcome.RESTART,
            cause,
            decided_at,
            strategy,
            scope,
            plan,
            labels=labels,
        )

    @classmethod
    def unrecoverable(
        cls,
        failed: TryKey,
        *,
        cause: str,
        decided_at: float,
        strategy: str,
        scope: str,
        labels: FailureLabels | None = None,
    ) -> FailoverDecision:
        """The restart strategy allows no more restarts (Flink: ``FailureHandlingResult.unrecoverable``)."""
        return cls(
            failed.task,
            failed.try_number,
            Outcome.SUPPRESSED,
            cause,
            decided_at,
            strategy,
            scope,
            labels=labels,
        )

    @classmethod
    def not_recoverable(
        cls, failed: TryKey, *, cause: str, decided_at: float, labels: FailureLabels
    ) -> FailoverDecision:
        """A failure a restart cannot heal (Flink: ``SuppressRestartsException``): the restart strategy
        is not asked, and nothing counts against its budget."""
        if labels.recoverable:
            raise IllegalDecisionState(f"{failed}: labels say the failure is recoverable: {labels}")
        return cls(failed.task, failed.try_number, Outcome.NOT_RECOVERABLE, cause, decided_at, labels=labels)

    @classmethod
    def stopped_by_failover(cls, failed: TryKey, *, cause: str, decided_at: float) -> FailoverDecision:
        plan = RestartPlan((), 0.0, decided_at, (), False)  # it runs again as part of that restart
        return cls(failed.task, failed.try_number, Outcome.SUPERSEDED, cause, decided_at, plan=plan)

    def replayed(self) -> FailoverDecision:
        """The same decision, read back from the journal by a later handler of the same failure."""
        return dataclasses.replace(self, already_handled=True)

    # -- state, guarded -----------------------------------------------------------------------------
    @property
    def key(self) -> TryKey:
        return TryKey(self.failed_task, self.try_number)

    @property
    def restart(self) -> bool:
        """Whether the failed task runs again (a superseded try runs again too: as part of its restart)."""
        return self.outcome not in (Outcome.SUPPRESSED, Outcome.NOT_RECOVERABLE)

    @property
    def superseded(self) -> bool:
        return self.outcome is Outcome.SUPERSEDED

    def _plan(self, what: str) -> RestartPlan:
        if self.plan is None:
            raise IllegalDecisionState(
                f"{what} of an unrecoverable decision ({self.key}): it restarts nothing"
            )
        return self.plan

    @property
    def regions(self) -> tuple[frozenset[str], ...]:
        return self._plan("the regions to restart").regions

    @property
    def tasks(self) -> frozenset[str]:
        return self._plan("the tasks to restart").tasks

    @property
    def delay(self) -> float:
        return self._plan("the restart delay").delay

    @property
    def restart_at(self) -> float:
        return self._plan("the restart time").restart_at

    @property
    def unavailable(self) -> tuple[str, ...]:
        return self.plan.unavailable if self.plan is not None else ()

    @property
    def new_attempt(self) -> bool:
        return self.plan.new_attempt if self.plan is not None else False
